# Installation: the library, its public headers under include/vktower/ (same
# layout as the source tree, so <vktower/vktower.h> and its relative includes
# work), an exported CMake package and a pkg-config file.
#
#   cmake --install build --prefix /opt/vktower
#   find_package(vktower CONFIG REQUIRED)       # CMAKE_PREFIX_PATH=/opt/vktower
#   target_link_libraries(app PRIVATE vktower::vktower)
#
#   PKG_CONFIG_PATH=/opt/vktower/lib/pkgconfig pkg-config --cflags --libs vktower

include(CMakePackageConfigHelpers)

set(VKT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/vktower"
    CACHE STRING "Where vktowerConfig.cmake is installed (relative to the prefix)")
mark_as_advanced(VKT_INSTALL_CMAKEDIR)

get_target_property(_vkt_type vktower TYPE)
if(_vkt_type STREQUAL "STATIC_LIBRARY")
  set(VKT_STATIC_LIBRARY ON)
else()
  set(VKT_STATIC_LIBRARY OFF)
endif()

set_target_properties(vktower PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR})

install(TARGETS vktower EXPORT vktowerTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# ---- headers ---------------------------------------------------------------
# Every *.h of runtime/, tower/, optimizers/ and models/ (globbed again at build time, so
# a new header is installed without re-running cmake by hand), except
# runtime/vulkan/detail/log.h, which includes spdlog, a private dependency, and
# runtime/mpi/detail/, which includes <mpi.h> (MPI is private too), and
# models/detail/, which includes nlohmann_json (private).
install(FILES "${PROJECT_SOURCE_DIR}/vktower.h"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/vktower")
file(GLOB_RECURSE _vkt_headers CONFIGURE_DEPENDS RELATIVE "${PROJECT_SOURCE_DIR}"
     "${PROJECT_SOURCE_DIR}/runtime/*.h"
     "${PROJECT_SOURCE_DIR}/tower/*.h"
     "${PROJECT_SOURCE_DIR}/optimizers/*.h"
     "${PROJECT_SOURCE_DIR}/models/*.h")
list(SORT _vkt_headers)
foreach(_vkt_header IN LISTS _vkt_headers)
  if(_vkt_header STREQUAL "runtime/vulkan/detail/log.h" OR _vkt_header MATCHES "^runtime/mpi/detail/"
     OR _vkt_header MATCHES "^models/detail/")
    continue()
  endif()
  get_filename_component(_vkt_header_dir "${_vkt_header}" DIRECTORY)
  install(FILES "${PROJECT_SOURCE_DIR}/${_vkt_header}"
          DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/vktower/${_vkt_header_dir}")
endforeach()

# ---- CMake package -----------------------------------------------------------
install(EXPORT vktowerTargets
  NAMESPACE vktower::
  FILE vktowerTargets.cmake
  DESTINATION "${VKT_INSTALL_CMAKEDIR}")

# A static libvktower built with MPI needs MPI at the consumer's link.
set(VKT_MPI_DEPENDENCY OFF)
if(VKT_WITH_MPI AND VKT_STATIC_LIBRARY)
  set(VKT_MPI_DEPENDENCY ON)
endif()
configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/vktowerConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/vktowerConfig.cmake"
  INSTALL_DESTINATION "${VKT_INSTALL_CMAKEDIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/vktowerConfigVersion.cmake"
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/vktowerConfig.cmake"
  "${PROJECT_BINARY_DIR}/vktowerConfigVersion.cmake"
  DESTINATION "${VKT_INSTALL_CMAKEDIR}")

# ---- pkg-config --------------------------------------------------------------
# Relocatable: prefix is found from the .pc file's own place, so the package
# works wherever `cmake --install --prefix` put it.
set(VKT_PC_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${VKT_PC_INSTALL_DIR}")
  set(VKT_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _vkt_pc_up "/vkt_prefix/${VKT_PC_INSTALL_DIR}" "/vkt_prefix")
  string(REGEX REPLACE "/$" "" _vkt_pc_up "${_vkt_pc_up}")
  set(VKT_PC_PREFIX "\${pcfiledir}/${_vkt_pc_up}")
endif()
foreach(_vkt_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_vkt_dir}}")
    set(VKT_PC_${_vkt_dir} "${CMAKE_INSTALL_${_vkt_dir}}")
  else()
    set(VKT_PC_${_vkt_dir} "\${prefix}/${CMAKE_INSTALL_${_vkt_dir}}")
  endif()
endforeach()
set(VKT_PC_REQUIRES_PRIVATE "spdlog fmt zlib icu-uc sentencepiece")
set(VKT_PC_LIBS_PRIVATE "")
if(VKT_WITH_MPI)
  # Open MPI's own pkg-config module where there is one, else its libraries.
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(VKT_OMPI_PC QUIET ompi-c)
  endif()
  if(VKT_OMPI_PC_FOUND)
    string(APPEND VKT_PC_REQUIRES_PRIVATE " ompi-c")
  else()
    list(JOIN MPI_CXX_LIBRARIES " " VKT_PC_LIBS_PRIVATE)
  endif()
endif()
configure_file("${CMAKE_CURRENT_LIST_DIR}/vktower.pc.in" "${PROJECT_BINARY_DIR}/vktower.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/vktower.pc" DESTINATION "${VKT_PC_INSTALL_DIR}")

unset(_vkt_type)
unset(_vkt_headers)
unset(_vkt_header)
unset(_vkt_header_dir)
unset(_vkt_pc_up)
unset(_vkt_dir)
