#!/usr/bin/env bash
# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer: builds
# everything into build-sanitize/ with -fsanitize=address,undefined (gcc, or
# clang with CXX=clang++) and runs ctest there with the validation layer on.
#   scripts/sanitize.sh [ctest arguments...]     e.g. scripts/sanitize.sh -R checkpoint
# Any report fails its test: UB aborts (no recovery), ASan aborts on the first
# error, LeakSanitizer fails a leak at exit. The whole suite takes about 30
# minutes on 2 cores. VKT_SANITIZE_BUILD_DIR overrides the build directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/deps.sh
build_dir="${VKT_SANITIZE_BUILD_DIR:-build-sanitize}"
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
VKT_BUILD_DIR="$build_dir" bash scripts/build.sh RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" -DVKT_BUILD_BENCH=OFF

export VKT_VALIDATION=1
export ASAN_OPTIONS="abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Leaks inside the Vulkan loader, lavapipe and the validation layer (which are
# not ours and not built with the sanitizers) are suppressed by library name
# there; a leak of vktower's own is still reported.
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
status=0
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j2 "$@" || status=$?
if [[ $status -eq 0 ]]; then
  echo "sanitize: every test passed under ASan and UBSan (VKT_VALIDATION=1)"
else
  echo "sanitize: FAILED (ctest exit status $status); see the output above" >&2
fi
exit "$status"
