# Fails when a Catch2 test name holds a character that catch_discover_tests
# cannot carry into a ctest name: ';' splits CMake lists, and an unbalanced
# '[' or ']' stops the splitting, either way merging tests silently into one
# entry that runs nothing.
execute_process(COMMAND "${TESTS}" --list-test-names-only OUTPUT_VARIABLE names)
# Catch2 exits with the number of tests listed, so the output is the check.
string(STRIP "${names}" names)
if(names STREQUAL "")
  message(FATAL_ERROR "listing the tests printed nothing")
endif()
string(REGEX MATCHALL "[^\n]*[][;][^\n]*" bad "${names}")
if(bad)
  message(FATAL_ERROR "test names must not contain ';', '[' or ']' (ctest cannot hold them): ${bad}")
endif()
message(STATUS "every test name is ctest-safe")
