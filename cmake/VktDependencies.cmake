# Finds what vktower needs and, when something is missing, stops configuration
# with the Debian package that provides it (scripts/deps.sh installs them all).

macro(vkt_require_package name debian_package)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR
      "vktower needs ${name}, which was not found.\n"
      "Install it with: sudo apt-get install ${debian_package}\n"
      "(or run scripts/deps.sh, which installs everything vktower needs)")
  endif()
endmacro()

vkt_require_package(Vulkan libvulkan-dev)
vkt_require_package(fmt libfmt-dev)
vkt_require_package(spdlog libspdlog-dev)
vkt_require_package(nlohmann_json nlohmann-json3-dev)
vkt_require_package(ZLIB zlib1g-dev)
# ICU's character classes: the letters, numbers and white space of GPT-2's
# pre-tokenizer (models/byte_level.cpp).
vkt_require_package(ICU libicu-dev COMPONENTS uc)

# SentencePiece (models/sentencepiece_tokenizer.cpp; the tests also train with
# it), found through its pkg-config module: Debian ships no CMake package for it.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(VKT_SENTENCEPIECE QUIET IMPORTED_TARGET sentencepiece)
endif()
if(NOT VKT_SENTENCEPIECE_FOUND)
  message(FATAL_ERROR
    "vktower needs sentencepiece (found through pkg-config), which was not found.\n"
    "Install it with: sudo apt-get install libsentencepiece-dev pkg-config\n"
    "(or run scripts/deps.sh, which installs everything vktower needs)")
endif()

find_program(VKT_GLSLANG glslangValidator)
if(NOT VKT_GLSLANG)
  message(FATAL_ERROR "vktower compiles its shaders with glslangValidator, which was not found.\n"
                      "Install it with: sudo apt-get install glslang-tools")
endif()
find_program(VKT_SPIRV_VAL spirv-val)
if(NOT VKT_SPIRV_VAL)
  message(FATAL_ERROR "vktower validates its SPIR-V with spirv-val, which was not found.\n"
                      "Install it with: sudo apt-get install spirv-tools")
endif()

if(VKT_BUILD_TESTS)
  vkt_require_package(Catch2 catch2)
endif()
if(VKT_BUILD_SAMPLES OR VKT_BUILD_BENCH)
  vkt_require_package(CLI11 libcli11-dev)
endif()

# Open MPI (optional): the cross-process process group in runtime/mpi/. Its C API
# is found through FindMPI's CXX component with the C++ bindings skipped: the C
# component needs the C language enabled, which neither vktower nor a C++
# consumer of the installed package enables.
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI COMPONENTS CXX QUIET)
set(_vkt_mpi_default OFF)
if(MPI_CXX_FOUND)
  set(_vkt_mpi_default ON)
endif()
option(VKT_WITH_MPI "Build the MPI process group (runtime/mpi/, Open MPI)" ${_vkt_mpi_default})
if(VKT_WITH_MPI AND NOT MPI_CXX_FOUND)
  message(FATAL_ERROR "VKT_WITH_MPI is ON but MPI was not found.\n"
                      "Install it with: sudo apt-get install libopenmpi-dev openmpi-bin\n"
                      "(or configure with -DVKT_WITH_MPI=OFF to build without it)")
elseif(NOT VKT_WITH_MPI)
  message(STATUS "vktower builds without MPI (one process only). To train across processes: "
                 "apt-get install libopenmpi-dev openmpi-bin, then configure with -DVKT_WITH_MPI=ON")
endif()
unset(_vkt_mpi_default)
