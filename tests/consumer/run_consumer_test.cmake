# cmake -P script behind the ctest test install_and_consume (see register.cmake).
# Every step must succeed; the first that fails stops the test with its output.
#
# Inputs (-D): VKT_BUILD_DIR VKT_CONFIG VKT_WORK_DIR VKT_CONSUMER_SOURCE_DIR
#   VKT_GENERATOR VKT_MAKE_PROGRAM VKT_CXX_COMPILER VKT_CXX_FLAGS VKT_LIBDIR
#   VKT_INCLUDEDIR VKT_LIBRARY_TYPE VKT_PKG_CONFIG
cmake_minimum_required(VERSION 3.24)

foreach(var VKT_BUILD_DIR VKT_WORK_DIR VKT_CONSUMER_SOURCE_DIR VKT_GENERATOR
            VKT_CXX_COMPILER VKT_LIBDIR VKT_INCLUDEDIR VKT_LIBRARY_TYPE)
  if("${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer_test.cmake: ${var} is not set")
  endif()
endforeach()

# Runs a command, echoing it; fails the test if it fails.
function(vkt_step what)
  message(STATUS "install_and_consume: ${what}")
  execute_process(COMMAND ${ARGN} COMMAND_ECHO STDOUT RESULT_VARIABLE rc)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "install_and_consume: FAILED to ${what} (exit ${rc})")
  endif()
endfunction()

set(prefix "${VKT_WORK_DIR}/prefix")
set(consumer_build "${VKT_WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${VKT_WORK_DIR}")
file(MAKE_DIRECTORY "${VKT_WORK_DIR}")

set(config_args)
set(build_type_arg)
if(NOT VKT_CONFIG STREQUAL "")
  set(config_args --config "${VKT_CONFIG}")
  set(build_type_arg "-DCMAKE_BUILD_TYPE=${VKT_CONFIG}")
endif()

# 1. Install the current build into a fresh prefix.
vkt_step("install ${VKT_BUILD_DIR} into ${prefix}"
  "${CMAKE_COMMAND}" --install "${VKT_BUILD_DIR}" --prefix "${prefix}" ${config_args})
foreach(f "${VKT_INCLUDEDIR}/vktower/vktower.h"
          "${VKT_INCLUDEDIR}/vktower/runtime/vulkan/instance.h"
          "${VKT_LIBDIR}/cmake/vktower/vktowerConfig.cmake"
          "${VKT_LIBDIR}/cmake/vktower/vktowerConfigVersion.cmake"
          "${VKT_LIBDIR}/pkgconfig/vktower.pc")
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "install_and_consume: ${f} was not installed under ${prefix}")
  endif()
endforeach()
if(EXISTS "${prefix}/${VKT_INCLUDEDIR}/vktower/runtime/vulkan/detail/log.h")
  message(FATAL_ERROR "install_and_consume: the private header detail/log.h was installed")
endif()

# 2. Configure and build tests/consumer against it, as a user would.
set(make_program_arg)
if(VKT_MAKE_PROGRAM)
  set(make_program_arg "-DCMAKE_MAKE_PROGRAM=${VKT_MAKE_PROGRAM}")
endif()
vkt_step("configure the consumer against ${prefix}"
  "${CMAKE_COMMAND}" -S "${VKT_CONSUMER_SOURCE_DIR}" -B "${consumer_build}"
    -G "${VKT_GENERATOR}" ${make_program_arg} ${build_type_arg}
    "-DCMAKE_CXX_COMPILER=${VKT_CXX_COMPILER}"
    "-DCMAKE_CXX_FLAGS=${VKT_CXX_FLAGS}"
    "-DCMAKE_PREFIX_PATH=${prefix}"
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    -DCONSUMER_CHECK_HEADERS=ON)
# It must have found the package just installed, not some other vktower.
file(STRINGS "${consumer_build}/CMakeCache.txt" found_dir REGEX "^vktower_DIR:")
string(REGEX REPLACE "^vktower_DIR:[A-Z]+=" "" found_dir "${found_dir}")
file(REAL_PATH "${found_dir}" found_dir)
file(REAL_PATH "${prefix}" real_prefix)
string(FIND "${found_dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "install_and_consume: the consumer found vktower in ${found_dir}, not in ${prefix}")
endif()
vkt_step("build the consumer"
  "${CMAKE_COMMAND}" --build "${consumer_build}" ${config_args})

# 3. Run it.
set(exe "${consumer_build}/consumer")
if(NOT EXISTS "${exe}" AND NOT VKT_CONFIG STREQUAL "")
  set(exe "${consumer_build}/${VKT_CONFIG}/consumer")
endif()
vkt_step("run the consumer" "${exe}")

# 4. pkg-config: flags point into the prefix, and they compile, link and run the consumer.
if(NOT VKT_PKG_CONFIG)
  message(FATAL_ERROR "install_and_consume: pkg-config was not found (apt-get install pkg-config)")
endif()
set(ENV{PKG_CONFIG_PATH} "${prefix}/${VKT_LIBDIR}/pkgconfig")
# Runs pkg-config with `args`; its output goes to `out_var`.
function(vkt_pkg_config out_var)
  list(JOIN ARGN " " shown)
  message(STATUS "install_and_consume: pkg-config ${shown}")
  execute_process(COMMAND "${VKT_PKG_CONFIG}" ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "install_and_consume: pkg-config ${shown} failed "
                        "(PKG_CONFIG_PATH=$ENV{PKG_CONFIG_PATH}):\n${err}")
  endif()
  message(STATUS "install_and_consume: pkg-config gave: ${out}")
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()
vkt_pkg_config(pc_flags --cflags --libs vktower)
separate_arguments(pc_args UNIX_COMMAND "${pc_flags}")
set(include_ok FALSE)
foreach(arg IN LISTS pc_args)
  if(arg MATCHES "^-I(.+)$")
    file(REAL_PATH "${CMAKE_MATCH_1}" dir)
    if(dir STREQUAL "${real_prefix}/${VKT_INCLUDEDIR}" AND EXISTS "${dir}/vktower/vktower.h")
      set(include_ok TRUE)
    endif()
  endif()
endforeach()
if(NOT include_ok OR NOT pc_flags MATCHES "(^| )-lvktower( |$)")
  message(FATAL_ERROR "install_and_consume: pkg-config flags lack -I${prefix}/${VKT_INCLUDEDIR} "
                      "or -lvktower: ${pc_flags}")
endif()
if(VKT_LIBRARY_TYPE STREQUAL "STATIC_LIBRARY")
  # A static libvktower needs its private dependencies (spdlog, fmt) at link time.
  vkt_pkg_config(pc_flags --static --cflags --libs vktower)
  separate_arguments(pc_args UNIX_COMMAND "${pc_flags}")
endif()
separate_arguments(cxx_flags UNIX_COMMAND "${VKT_CXX_FLAGS}")
vkt_step("compile and link the consumer with pkg-config's flags"
  "${VKT_CXX_COMPILER}" ${cxx_flags} -std=c++20 "${VKT_CONSUMER_SOURCE_DIR}/main.cpp"
    ${pc_args} -o "${VKT_WORK_DIR}/consumer-pkgconfig")
set(ENV{LD_LIBRARY_PATH} "${prefix}/${VKT_LIBDIR}:$ENV{LD_LIBRARY_PATH}")
vkt_step("run the pkg-config consumer" "${VKT_WORK_DIR}/consumer-pkgconfig")

message(STATUS "install_and_consume: passed")
