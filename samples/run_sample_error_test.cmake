# A sample's test for a bad input: runs the program once in a fresh work
# directory and fails unless it exits as expected (EXIT 0, or nonzero for an
# error) and its stdout and stderr together match EXPECT. An error must be one
# line: exactly one line of stderr starts with the program's name, and no
# exception escapes main (no "terminate called", no abort).
#
# EXIT error: a failed run (any nonzero code); usage: a command line refused
# (exit code 2, the line naming the flag; a pointer to --help may follow).
#
#   cmake -DPROGRAM=path -DWORK_DIR=dir -DEXIT=0|error|usage -DEXPECT=regex
#         [-DFORBID=regex] [-DDATA_DIR=path] [-DCSV_COLUMNS=n -DCSV_LABELS=a;b;c [-DCSV_HEADER=ON]]
#         [-DFIRST_ARGS=a;b] -P run_sample_error_test.cmake -- args...
#
# DATA_DIR: VKT_DATA_DIR for the run; "LOOP" makes it one of two symbolic
#   links to each other, a directory nobody can search, even root (ELOOP).
# CSV_*: writes WORK_DIR/data.csv, rows of CSV_COLUMNS - 1 zeros and a label
#   each (a header line first with CSV_HEADER), for --data.
# CSV_LABELS and FIRST_ARGS separate their items with "|".
# FIRST_ARGS: a first run that must succeed (e.g. training a model to resume).
# FORBID: a regex the output must not match.
# In the arguments, %WORK_DIR% stands for the work directory; in EXPECT and
# FORBID, %SEMICOLON% for ";" (which would split a CMake argument).
set(args)
set(after_separator OFF)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    string(REPLACE "%WORK_DIR%" "${WORK_DIR}" arg "${CMAKE_ARGV${i}}")
    list(APPEND args "${arg}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_separator ON)
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
if(DEFINED DATA_DIR)
  if(DATA_DIR STREQUAL "LOOP")
    set(DATA_DIR "${WORK_DIR}/loop")
    file(CREATE_LINK "${DATA_DIR}" "${DATA_DIR}2" SYMBOLIC)
    file(CREATE_LINK "${DATA_DIR}2" "${DATA_DIR}" SYMBOLIC)
  endif()
  set(ENV{VKT_DATA_DIR} "${DATA_DIR}")
endif()
if(DEFINED CSV_COLUMNS)
  set(csv "")
  if(CSV_HEADER)
    set(csv "header\n")
  endif()
  math(EXPR features "${CSV_COLUMNS} - 1")
  string(REPEAT "0," ${features} zeros)
  string(REPLACE "|" ";" CSV_LABELS "${CSV_LABELS}")
  foreach(label IN LISTS CSV_LABELS)
    string(APPEND csv "${zeros}${label}\n")
  endforeach()
  file(WRITE "${WORK_DIR}/data.csv" "${csv}")
endif()

get_filename_component(name "${PROGRAM}" NAME_WE)
if(DEFINED FIRST_ARGS)
  string(REPLACE "|" ";" first_args "${FIRST_ARGS}")
  string(REPLACE "%WORK_DIR%" "${WORK_DIR}" first_args "${first_args}")
  execute_process(COMMAND "${PROGRAM}" ${first_args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  message("---- first run: ${PROGRAM} ${first_args}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the first run exited with ${rc}")
  endif()
endif()

execute_process(COMMAND "${PROGRAM}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("---- ${PROGRAM} ${args} (exit ${rc})\n${out}${err}")
if("${out}${err}" MATCHES "terminate called|filesystem error|Aborted")
  message(FATAL_ERROR "an exception escaped main")
endif()
if(EXIT STREQUAL "0" AND NOT rc STREQUAL "0")
  message(FATAL_ERROR "exited with ${rc}, not 0")
endif()
if(NOT EXIT STREQUAL "0" AND (rc STREQUAL "0" OR NOT rc MATCHES "^[0-9]+$"))
  message(FATAL_ERROR "exited with '${rc}', not with an error code")
endif()
if(EXIT STREQUAL "usage" AND NOT rc STREQUAL "2")
  message(FATAL_ERROR "exited with ${rc}, not 2 (a usage error)")
endif()
if(EXIT STREQUAL "error" OR EXIT STREQUAL "usage")
  string(REGEX MATCHALL "(^|\n)${name}: " error_lines "${err}")
  list(LENGTH error_lines count)
  if(NOT count EQUAL 1)
    message(FATAL_ERROR "${count} lines of stderr start with '${name}: ', not one")
  endif()
endif()
string(REPLACE "%SEMICOLON%" ";" EXPECT "${EXPECT}")
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}'")
endif()
if(DEFINED FORBID)
  string(REPLACE "%SEMICOLON%" ";" FORBID "${FORBID}")
  if("${out}${err}" MATCHES "${FORBID}")
    message(FATAL_ERROR "the output matches '${FORBID}': '${CMAKE_MATCH_0}'")
  endif()
endif()
