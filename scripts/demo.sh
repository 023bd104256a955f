#!/usr/bin/env bash
# The demo: installs what is missing, builds Release, and runs the main program
# (vkt-digits: an MLP trained on the UCI digits on every GPU (lavapipe without one), then
# evaluated; `--devices 0,0` runs two towers on device 0, `--help` lists the flags).
# Arguments are passed to the program. The model directory is build/vkt-digits-model
# unless --model-dir is given: run the demo again and it resumes from there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/deps.sh
# Only what the demo runs (the library and vkt-digits: about 5.5 of the whole
# build's 13 minutes on 2 cores); scripts/test.sh builds the rest later.
VKT_BUILD_TARGETS="${VKT_BUILD_TARGETS:-vkt-digits}" bash scripts/build.sh Release
build_dir="${VKT_BUILD_DIR:-build}"

program="$build_dir/samples/vkt-digits"
if [[ ! -x "$program" ]]; then
  echo "demo: $program was not built" >&2
  exit 1
fi
args=("$@")
if [[ " $* " != *" --model-dir"* ]]; then
  args+=(--model-dir "$build_dir/vkt-digits-model")
fi
echo "demo: running $program ${args[*]}"
exec "$program" "${args[@]}"
