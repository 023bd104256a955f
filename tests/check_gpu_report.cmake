# Runs scripts/gpu-report.sh --short on this build and fails unless its
# report.json parses and holds the figures the GPU goals (docs/PERFORMANCE.md) are read from,
# with every selected test case passed.
#   cmake -DSCRIPT=... -DBUILD_DIR=... -DOUT=... -P check_gpu_report.cmake
file(REMOVE_RECURSE "${OUT}")
set(ENV{VKT_BUILD_DIR} "${BUILD_DIR}")
execute_process(COMMAND bash "${SCRIPT}" --short "${OUT}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gpu-report.sh --short exited with ${rc}")
endif()
file(READ "${OUT}/report.json" json)
foreach(key suite_total suite_passed peak_gflops matmul_64_fraction_of_peak towers_2_vs_1_ratio
            host_waits_per_step exposed_exchange_share train_fraction_of_peak step_overhead_ratio)
  string(JSON value ERROR_VARIABLE error GET "${json}" figures ${key})
  if(error)
    message(FATAL_ERROR "report.json has no figures.${key}: ${error}")
  endif()
  message(STATUS "${key}=${value}")
endforeach()
string(JSON total GET "${json}" figures suite_total)
string(JSON passed GET "${json}" figures suite_passed)
if(total LESS 1 OR NOT passed EQUAL total)
  message(FATAL_ERROR "the short suite passed ${passed} of ${total} test cases")
endif()
foreach(file report.md logs.tar.gz)
  if(NOT EXISTS "${OUT}/${file}")
    message(FATAL_ERROR "gpu-report.sh wrote no ${file}")
  endif()
endforeach()
