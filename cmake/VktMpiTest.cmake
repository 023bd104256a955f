# vkt_add_mpi_test: a ctest test that runs a program under mpirun.
#
#   vkt_add_mpi_test(NAME <name> NP <ranks> COMMAND <target-or-program> [<arg>...]
#                    [MPIRUN_FLAGS <flag>...]           # before the program, e.g. --tag-output
#                    [ENVIRONMENT <VAR=value>...]       # added to the ranks' environment
#                    [LABELS <label>...]                # `mpi` is always added
#                    [TIMEOUT <seconds>]                # ctest's limit (default 300)
#                    [PASS_REGULAR_EXPRESSION <regex>]  # passes when the output matches
#                    [EXPECT_FAILURE <regex> [WITHIN <seconds>]])
#
# EXPECT_FAILURE: the test passes only when the job exits non-zero within WITHIN
# seconds (default: half of TIMEOUT) and its output matches <regex> (CMake regex;
# `.` matches newlines too; no `;`). For "a rank died or hung: the job ends in
# bounded time with this message" (cmake/VktMpiExpectFailure.cmake runs it).
#
# Every test gets --oversubscribe (more ranks than cores; Open MPI refuses
# otherwise) and OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1 (containers run as root; the
# variables are ignored otherwise). Without VKT_WITH_MPI it registers nothing.
include_guard(GLOBAL)

function(vkt_add_mpi_test)
  if(NOT VKT_WITH_MPI)
    return()
  endif()
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME;NP;TIMEOUT;PASS_REGULAR_EXPRESSION;EXPECT_FAILURE;WITHIN"
                        "COMMAND;MPIRUN_FLAGS;ENVIRONMENT;LABELS")
  if(NOT arg_NAME OR NOT arg_NP OR NOT arg_COMMAND)
    message(FATAL_ERROR "vkt_add_mpi_test: NAME, NP and COMMAND are required")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "vkt_add_mpi_test(${arg_NAME}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  list(POP_FRONT arg_COMMAND program)
  if(TARGET ${program})
    set(program "$<TARGET_FILE:${program}>")
  endif()
  set(mpirun "${MPIEXEC_EXECUTABLE}" ${MPIEXEC_NUMPROC_FLAG} ${arg_NP} --oversubscribe
      ${MPIEXEC_PREFLAGS} ${arg_MPIRUN_FLAGS} "${program}" ${MPIEXEC_POSTFLAGS} ${arg_COMMAND})
  set(environment OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ${arg_ENVIRONMENT})

  if(DEFINED arg_EXPECT_FAILURE)
    if(NOT arg_WITHIN)
      math(EXPR arg_WITHIN "${arg_TIMEOUT} / 2")
    endif()
    # The command travels to the script as one `|`-separated string.
    list(JOIN mpirun "|" joined)
    add_test(NAME ${arg_NAME}
      COMMAND "${CMAKE_COMMAND}" "-DVKT_COMMAND=${joined}" "-DVKT_REGEX=${arg_EXPECT_FAILURE}"
              "-DVKT_WITHIN=${arg_WITHIN}"
              # Beside this file: a variable set where it was first included
              # would be empty in the other directories (include_guard).
              -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/VktMpiExpectFailure.cmake")
  else()
    add_test(NAME ${arg_NAME} COMMAND ${mpirun})
  endif()
  set_tests_properties(${arg_NAME} PROPERTIES
    ENVIRONMENT "${environment}"
    LABELS "mpi;${arg_LABELS}"
    TIMEOUT ${arg_TIMEOUT}
    PROCESSORS ${arg_NP})
  if(DEFINED arg_PASS_REGULAR_EXPRESSION)
    set_tests_properties(${arg_NAME} PROPERTIES PASS_REGULAR_EXPRESSION "${arg_PASS_REGULAR_EXPRESSION}")
  endif()
endfunction()
