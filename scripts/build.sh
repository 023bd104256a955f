#!/usr/bin/env bash
# Configures and builds vktower with Ninja.
#   scripts/build.sh [BUILD_TYPE] [extra cmake arguments...]
# BUILD_TYPE: Release (default), RelWithDebInfo, Debug, ...
# The build directory is build/ (VKT_BUILD_DIR overrides it); VKT_BUILD_TARGETS
# (space-separated) builds only those targets and what they depend on.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_type="${1:-Release}"
shift || true
build_dir="${VKT_BUILD_DIR:-build}"

generator=(-G Ninja)
if [[ -f "$build_dir/CMakeCache.txt" ]]; then
  generator=()  # an existing build directory keeps the generator it was made with
fi
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE="$build_type" "$@"
targets=()
for target in ${VKT_BUILD_TARGETS:-}; do
  targets+=(--target "$target")
done
cmake --build "$build_dir" --parallel "$(nproc)" "${targets[@]}"
