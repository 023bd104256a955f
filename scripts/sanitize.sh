#!/usr/bin/env bash
# The test suite under AddressSanitizer, UndefinedBehaviorSanitizer and
# LeakSanitizer, whole or in parts: builds into build-sanitize/ with
# -fsanitize=address,undefined (gcc, or clang with CXX=clang++) and runs ctest
# there.
#   scripts/sanitize.sh [PART] [ctest arguments...]
#     e.g. scripts/sanitize.sh io          scripts/sanitize.sh all -R checkpoint
# PART selects tests by ctest label and builds only the programs they run:
#   ci          the tower, io and MPI tests (the tower tests once, unstaged):
#               what CI runs after the suite (.ci/run)
#   runtime, graph, optimizers, tower, io, mpi, samples, staging
#               one label (the tower and sample tests' second, staged runs
#               are `staging`; the samples' MPI jobs are `samples`)
#   all         every test (the default; the whole build)
# The parts together are the whole suite; docs/RELIABILITY.md has the last
# runs and their times. The validation layer is off here (the suite runs every
# test under it; under ASan it doubles the time): VKT_SANITIZE_VALIDATION=1
# turns it on. Any report fails its test: UB aborts (no recovery), ASan aborts
# on the first error, LeakSanitizer fails a leak at exit.
# VKT_SANITIZE_BUILD_DIR overrides the build directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

part=all
case "${1:-}" in
  ci | all | runtime | graph | optimizers | tower | io | mpi | samples | staging)
    part="$1"
    shift
    ;;
esac

# The programs each part's tests run (ninja targets; empty: everything) and
# the ctest label selections it runs, one ctest run each ("mpi:" marks an
# MPI run, which runs without the leak check; see below).
mpi_programs="vkt-mpi-tests vkt-mpi-fault vkt-mpi-tower-tests vkt-mpi-train-fault"
case "$part" in
  ci)
    targets="vkt-tests $mpi_programs"
    runs=("-L ^(tower|io)$ -LE ^staging$" "mpi:-L ^mpi$ -LE ^samples$")
    ;;
  mpi) targets="$mpi_programs" runs=("mpi:-L ^mpi$ -LE ^samples$") ;;
  samples) targets="" runs=("-L ^samples$ -LE ^mpi$" "mpi:-L ^samples$ -L ^mpi$") ;;
  staging) targets="" runs=("-L ^staging$") ;;
  all) targets="" runs=("-LE ^mpi$" "mpi:-L ^mpi$") ;;
  *) targets="vkt-tests vkt-validation-probe" runs=("-L ^$part$") ;;
esac

bash scripts/deps.sh
build_dir="${VKT_SANITIZE_BUILD_DIR:-build-sanitize}"
validation=OFF
[[ "${VKT_SANITIZE_VALIDATION:-0}" == 1 ]] && validation=ON
# -Wno-maybe-uninitialized: gcc 12's instrumentation makes that warning fire
# inside libstdc++'s <regex> and <functional> (false positives in its headers).
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
flags+=" -Wno-maybe-uninitialized"
# -O1 -g1: ASan's recommended optimization, with line tables for the reports.
VKT_BUILD_DIR="$build_dir" VKT_BUILD_TARGETS="$targets" bash scripts/build.sh RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" -DVKT_BUILD_BENCH=OFF \
  -DVKT_TEST_VALIDATION="$validation"

asan="abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Leaks inside the Vulkan loader, lavapipe, the validation layer and Open MPI
# (not ours, not built with the sanitizers) are suppressed by library there; a
# leak of vktower's own is still reported.
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
# MPI jobs run without the leak check: Open MPI (built without frame
# pointers) leaves allocations at exit whose stacks end in its first frame,
# often in a component it has unloaded, which no suppression can name, and
# with the slow unwinder one job took over 15 minutes. The code they run
# (towers, the Estimator, checkpoints) is leak-checked by the tower tests.
# The Vulkan loader unloads lavapipe when a process's last VkInstance goes;
# Mesa 22.3.6-1+deb12u2's lavapipe leaves 128 bytes behind then, which LSan
# reports from an unknown module (it is unmapped by exit) that no suppression
# can name. Preloaded, lavapipe stays mapped to the end and leak:libvulkan_lvp.so
# names it (verify_asan_link_order=0: ASan's runtime then comes second).
lavapipe=$(sed -n 's/.*"library_path": *"\([^"]*libvulkan_lvp[^"]*\)".*/\1/p' \
  /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1 || true)
status=0
for run in "${runs[@]}"; do
  options="$asan"
  preload=""
  if [[ "$run" == mpi:* ]]; then
    run=${run#mpi:}
    options="$asan:detect_leaks=0"
  elif [[ -n "$lavapipe" && -f "$lavapipe" ]]; then
    options="$asan:verify_asan_link_order=0"
    preload="$lavapipe"
  fi
  echo "sanitize: ctest $run $*${preload:+ (lavapipe preloaded)}"
  # shellcheck disable=SC2086 # $run is a list of ctest arguments
  LD_PRELOAD="$preload" ASAN_OPTIONS=$options ctest --test-dir "$build_dir" --output-on-failure \
    --no-tests=error -j2 $run "$@" || status=$?
done
if [[ $status -eq 0 ]]; then
  echo "sanitize: every test of part '$part' passed under ASan, UBSan and LSan (MPI jobs: no LSan)"
else
  echo "sanitize: part '$part' FAILED (ctest exit status $status); see the output above" >&2
fi
exit "$status"
