# Registers the ctest test install_and_consume (included from tests/CMakeLists.txt):
# installs this build into a fresh prefix, builds tests/consumer against it with
# find_package(vktower CONFIG), runs it, and checks the pkg-config file.

find_program(VKT_PKG_CONFIG NAMES pkg-config pkgconf)
get_target_property(_vkt_consumer_lib_type vktower TYPE)

add_test(NAME install_and_consume
  COMMAND "${CMAKE_COMMAND}"
    "-DVKT_BUILD_DIR=${PROJECT_BINARY_DIR}"
    "-DVKT_CONFIG=$<CONFIG>"
    "-DVKT_WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/install_and_consume"
    "-DVKT_CONSUMER_SOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}"
    "-DVKT_GENERATOR=${CMAKE_GENERATOR}"
    "-DVKT_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}"
    "-DVKT_CXX_COMPILER=${CMAKE_CXX_COMPILER}"
    "-DVKT_CXX_FLAGS=${CMAKE_CXX_FLAGS}"
    "-DVKT_LIBDIR=${CMAKE_INSTALL_LIBDIR}"
    "-DVKT_INCLUDEDIR=${CMAKE_INSTALL_INCLUDEDIR}"
    "-DVKT_LIBRARY_TYPE=${_vkt_consumer_lib_type}"
    "-DVKT_PKG_CONFIG=${VKT_PKG_CONFIG}"
    -P "${CMAKE_CURRENT_LIST_DIR}/run_consumer_test.cmake")
set_tests_properties(install_and_consume PROPERTIES
  LABELS "install"
  COST 90  # seconds on 2 cores: started first (see tests/CMakeLists.txt)
  TIMEOUT 900
  ENVIRONMENT "${VKT_VALIDATION_ENV}")

unset(_vkt_consumer_lib_type)
