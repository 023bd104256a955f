#!/usr/bin/env bash
# The test suite: installs what is missing, builds (Release; VKT_BUILD_TYPE
# overrides), and runs every test through ctest with the Khronos validation
# layer on (VKT_VALIDATION=1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/deps.sh
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
exit "$status"
