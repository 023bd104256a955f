#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (address and undefined
# behaviour sanitizers) into build-fuzz/ and runs each for SECONDS (default 60).
#   scripts/fuzz.sh [SECONDS]
# Each target starts from its seed corpus fuzz/corpus/<name>/ and keeps what it
# finds in build-fuzz/corpus/<name>/. Exits non-zero when a target crashes; the
# crashing input is saved as build-fuzz/crashes/<name>-crash-<hash> (reproduce
# with build-fuzz/fuzz/fuzz_<name> <that file>). VKT_FUZZ_BUILD_DIR overrides
# the build directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${1:-60}"
build_dir="${VKT_FUZZ_BUILD_DIR:-build-fuzz}"
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: clang++ is missing (scripts/deps.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
generator=(-G Ninja)
if [[ -f "$build_dir/CMakeCache.txt" ]]; then
  generator=()
fi
# Only the fuzz targets are built: the library, tests and samples are configured, not compiled.
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" \
  -DVKT_BUILD_FUZZ=ON -DVKT_BUILD_TESTS=OFF -DVKT_BUILD_SAMPLES=OFF -DVKT_BUILD_BENCH=OFF >/dev/null
cmake --build "$build_dir" --target vkt-fuzzers --parallel "$(nproc)"

mkdir -p "$build_dir/crashes"
status=0
for source in fuzz/fuzz_*.cpp; do
  name="$(basename "$source" .cpp)"
  name="${name#fuzz_}"
  corpus="$build_dir/corpus/$name"
  mkdir -p "$corpus"
  log="$build_dir/fuzz_$name.log"
  echo "fuzz: $name for ${seconds}s"
  # New inputs go to the first corpus directory, so the seeds in the repository stay as committed.
  if "$build_dir/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$build_dir/crashes/$name-" "$corpus" "fuzz/corpus/$name" >"$log" 2>&1; then
    runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)"
    echo "fuzz: $name clean, ${runs:-?} executions"
  else
    status=1
    echo "fuzz: $name FAILED; its log:" >&2
    tail -n 40 "$log" >&2
    ls "$build_dir/crashes/$name-"* >&2 2>/dev/null || true
  fi
done
exit "$status"
