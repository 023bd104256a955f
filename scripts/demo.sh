#!/usr/bin/env bash
# The demo: installs what is missing, builds Release, and runs the main program
# (vkt-info: every Vulkan device, with a self-test dispatch on each).
# Arguments are passed to the program.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/deps.sh
bash scripts/build.sh Release
build_dir="${VKT_BUILD_DIR:-build}"

program="$build_dir/samples/vkt-info"
if [[ ! -x "$program" ]]; then
  echo "demo: $program was not built" >&2
  exit 1
fi
echo "demo: running $program $*"
exec "$program" "$@"
