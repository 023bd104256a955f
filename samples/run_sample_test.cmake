# A sample's test: runs the program RUNS times (1 or 2) on one model directory,
# made fresh first, and fails unless every run exits 0, the second says it
# resumed, the last run's output matches EXPECT, and no run reports a
# validation message.
#
#   cmake -DPROGRAM=path -DMODEL_DIR=dir -DRUNS=2 -DEXPECT=regex -P run_sample_test.cmake -- args...
set(args)
set(after_separator OFF)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    list(APPEND args "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_separator ON)
  endif()
endforeach()

list(JOIN args " " shown)
file(REMOVE_RECURSE "${MODEL_DIR}")
foreach(run RANGE 1 ${RUNS})
  execute_process(COMMAND "${PROGRAM}" ${args} --model-dir "${MODEL_DIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("---- run ${run}: ${PROGRAM} ${shown} --model-dir ${MODEL_DIR}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "run ${run} exited with ${rc}")
  endif()
  if("${out}${err}" MATCHES "validation messages: [1-9]")
    message(FATAL_ERROR "run ${run} produced validation messages")
  endif()
  # The Estimator's log line (stderr): it restored the model directory's checkpoint.
  if(run GREATER 1 AND NOT "${out}${err}" MATCHES "resuming from [^\n]+ at global step [1-9]")
    message(FATAL_ERROR "run ${run} did not say that it resumed from the model directory")
  endif()
endforeach()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}'")
endif()
