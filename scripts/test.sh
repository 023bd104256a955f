#!/usr/bin/env bash
# The test suite: installs what is missing (python3-torch included), builds (Release; VKT_BUILD_TYPE
# overrides), and runs every test through ctest with the Khronos validation
# layer on (VKT_VALIDATION=1): the tower and estimator tests and each sample's
# smoke test twice, the second time with VKT_FORCE_STAGING=1 (label staging: the staged transfers a
# discrete GPU makes; `ctest -L staging` runs only those, `-LE staging` skips
# them). Then, when clang is installed, every fuzz target
# for VKT_FUZZ_SECONDS (default 10) each (scripts/fuzz.sh; VKT_FUZZ_SECONDS=0 skips).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# python3-torch is a test dependency, as catch2 is: the float64 parity tests,
# vkt-gpt's replica parity and every [torch] test compare against it, and
# skip without it. VKT_DEPS_TORCH=0 leaves it out (about 635 MB).
VKT_DEPS_TORCH="${VKT_DEPS_TORCH:-1}" bash scripts/deps.sh
bash scripts/build.sh "${VKT_BUILD_TYPE:-Release}"
build_dir="${VKT_BUILD_DIR:-build}"

export VKT_VALIDATION=1
status=0
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j2 || status=$?
if [[ $status -eq 0 ]]; then
  echo "test: every test passed (VKT_VALIDATION=1)"
else
  echo "test: FAILED (ctest exit status $status); see the output above" >&2
fi

fuzz_seconds="${VKT_FUZZ_SECONDS:-10}"
if [[ "$fuzz_seconds" != 0 ]]; then
  if command -v clang++ >/dev/null 2>&1; then
    fuzz_status=0
    bash scripts/fuzz.sh "$fuzz_seconds" || fuzz_status=$?
    if [[ $fuzz_status -ne 0 ]]; then
      echo "test: a fuzz target FAILED; see the output above" >&2
      status=$fuzz_status
    fi
  else
    echo "test: clang++ is missing, the fuzz targets did not run (scripts/deps.sh installs it)"
  fi
fi
exit "$status"
