#!/usr/bin/env bash
# Measures one machine's GPU with everything vktower has, in one command, and
# writes OUT_DIR/report.md, OUT_DIR/report.json (every `name=value` figure)
# and OUT_DIR/logs.tar.gz (each step's whole output).
#   gpu-report.sh [--short] OUT_DIR
# Run from an unpacked scripts/gpu-bundle.sh tarball (vktower-gpu/gpu-report.sh),
# or from a checkout after scripts/build.sh (the programs under build/, or
# $VKT_BUILD_DIR). Within 8 minutes on a GPU: vkt-info, the whole suite (each
# test case in its own process, under the validation layer where it loads),
# every bench at GPU sizes, towers 1, 2 and 4 on the one GPU, the samples, and
# PyTorch CUDA references of the same models where python3 imports torch.
# --short: small sizes and a few tests (about a minute on lavapipe; CI runs it).
# VKT_REPORT_SKIP="startup runtime ..." skips those steps (a rerun on less
# device time); VKT_REPORT_JOBS test cases run at a time (default 6);
# VKT_REPORT_BUDGET_S (default 460) is when the suite stops starting cases.
set -uo pipefail

short=0
if [[ "${1:-}" == --short ]]; then
  short=1
  shift
fi
if [[ $# -ne 1 ]]; then
  echo "usage: gpu-report.sh [--short] OUT_DIR" >&2
  exit 2
fi
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
began=$SECONDS

# Where the programs and the checkout's files are.
if [[ -d "$here/bin" ]]; then
  bins=("$here/bin")
  source_dir=$here
else
  source_dir=$(cd "$here/.." && pwd)
  build=${VKT_BUILD_DIR:-$source_dir/build}
  [[ "$build" == /* ]] || build=$source_dir/$build
  bins=("$build/tests" "$build/bench" "$build/samples")
fi
prog() {
  local d
  for d in "${bins[@]}"; do
    if [[ -x "$d/$1" ]]; then
      echo "$d/$1"
      return 0
    fi
  done
  return 1
}

# A bundle brings its own loader and libraries; the NVIDIA ICD needs libglvnd
# in the system paths, and the loader needs to be told where the ICD is.
if [[ -d "$here/sysroot" ]]; then
  sys=$here/sysroot
  export LD_LIBRARY_PATH="$sys/usr/lib/x86_64-linux-gnu:$sys/usr/lib/x86_64-linux-gnu/openblas-pthread:$sys/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export VK_ADD_LAYER_PATH="$sys/usr/share/vulkan/explicit_layer.d"
  if ! ldconfig -p 2>/dev/null | grep -q 'libGLX.so.0' && [[ $(id -u) == 0 ]]; then
    for f in "$here"/glvnd/*.deb; do dpkg -x "$f" / 2>/dev/null; done
    ldconfig 2>/dev/null
  fi
  if [[ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ]]; then
    for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
      /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
      if [[ -f "$f" ]]; then
        export VK_DRIVER_FILES=$f
        break
      fi
    done
  fi
fi
export VKT_SOURCE_DIR=$source_dir VKT_DATA_DIR=$source_dir/samples/data
export VKT_CACHE_DIR=$logs/cache PYTHONUNBUFFERED=1
unset VKT_VALIDATION

md=$logs/report.md
figures=$logs/figures.txt
: >"$figures"
say() { echo "$*" | tee -a "$md"; }

# step NAME SECONDS PROGRAM ARGS...: runs one program under a time limit, its
# output in logs/NAME.log, its name=value lines (from column 0) into the figures.
step() {
  local name=$1 limit=$2
  shift 2
  if [[ " ${VKT_REPORT_SKIP:-} " == *" $name "* ]]; then
    say "- \`$name\`: skipped (VKT_REPORT_SKIP)"
    return 0
  fi
  local t0=$SECONDS rc=0
  timeout -k 5 "$limit" "$@" >"$logs/$name.log" 2>&1 || rc=$?
  # FIGURE_SUFFIX (set for one call) keeps a second run of a bench apart.
  grep -E '^[a-z][a-z0-9_]*=[^ ]+$' "$logs/$name.log" | sed "s/=/${FIGURE_SUFFIX:-}=/" >>"$figures"
  local what="exit $rc"
  [[ $rc == 124 || $rc == 137 ]] && what="stopped at its ${limit} s limit"
  say "- \`$name\`: $what, $((SECONDS - t0)) s"
  return 0
}
bench() {
  local name=$1 limit=$2 program=$3
  shift 3
  local path
  if path=$(prog "$program"); then
    step "$name" "$limit" "$path" "$@"
  else
    say "- \`$name\`: $program is not built here, skipped"
  fi
}
figure() { echo "$1=$2" >>"$figures"; }

: >"$md"
say "# vktower GPU report"
say ""
say "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); version: $(cat "$here/VERSION" 2>/dev/null || git -C "$source_dir" describe --always --dirty 2>/dev/null)"
say "- mode: $([[ $short == 1 ]] && echo short || echo full); host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
if command -v nvidia-smi >/dev/null; then
  say "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
fi
say "- VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}"
torch_cuda=0
if torch_gpu=$(timeout 60 python3 -c 'import torch; assert torch.cuda.is_available(); print(torch.__version__, torch.cuda.get_device_name(0))' 2>/dev/null); then
  torch_cuda=1
  say "- PyTorch CUDA references: torch $torch_gpu"
else
  say "- PyTorch CUDA references: none (python3 does not import a torch that sees a GPU)"
fi
say ""
say "## Device"
step vkt-info 60 "$(prog vkt-info)"
sed -n '1,40p' "$logs/vkt-info.log" | sed 's/^/    /' >>"$md"
gpu_vulkan=$(grep -m1 -iE 'nvidia|amd|radeon|intel' "$logs/vkt-info.log" | sed 's/^ *//')

# --- Benches at GPU sizes (the short mode's sizes only check that each runs).
say ""
say "## Benches"
if [[ $short == 1 ]]; then
  bench peak 60 vkt-bench-peak --min-ms 1 --reps 1 --local-sizes 64 --chains 8 --copy-mib 4
  bench matmul 120 vkt-bench-matmul --sizes 64 --reps 1 --slow-max 0 --f16-sizes 64
  bench towers 120 vkt-bench-towers --towers 1,2 --batch 16 --hidden 32 --steps 2 --paths staged
  bench train 120 vkt-bench-train --steps 1 --reps 1 --no-torch
  bench cnn 120 vkt-bench-cnn --towers 1,2 --batch 8 --steps 1 --no-torch --no-kernels
  bench gpt 120 vkt-bench-gpt --towers 1 --batch 4 --context 16 --layers 1 --steps 1 --reps 1 --rounds 1 --no-torch
  bench step-overhead 60 vkt-bench-step-overhead --steps 5
  bench frozen 60 vkt-bench-frozen --width 64 --layers 1 --batch 8 --steps 1
  bench finetune 120 vkt-bench-finetune --vocab 64 --hidden 32 --layers 1 --heads 2 --kv-heads 1 --intermediate 48 --context 16 --batch 4 --steps 1 --rounds 1 --generate-tokens 8 --no-torch
else
  bench peak 60 vkt-bench-peak
  bench matmul 90 vkt-bench-matmul --sizes 1024,2048,4096 --reps 5 --slow-max 0 --sweep-tiles --sweep-sizes 4096 --f16-sizes 1024,4096
  bench train 60 vkt-bench-train --torch-device cuda --steps 50 --torch-steps 100
  bench cnn 60 vkt-bench-cnn --towers 1,2,4 --steps 50 --torch-steps 100 --torch-device cuda
  bench gpt 60 vkt-bench-gpt --towers 1,2,4 --batch 64 --context 128 --steps 20 --torch-steps 20 --rounds 2 --torch-device cuda
  FIGURE_SUFFIX=_bf16 bench gpt-bf16 60 vkt-bench-gpt --towers 1 --batch 64 --context 128 --steps 20 --torch-steps 20 --rounds 2 --torch-device cuda --precision bf16 --no-profile
  FIGURE_SUFFIX=_fp16 bench gpt-fp16 60 vkt-bench-gpt --towers 1 --batch 64 --context 128 --steps 20 --torch-steps 20 --rounds 2 --torch-device cuda --precision fp16 --no-profile
  FIGURE_SUFFIX=_batch256 bench cnn-256 60 vkt-bench-cnn --towers 1,2,4 --batch 256 --steps 30 --torch-steps 50 --torch-device cuda --no-kernels
  bench towers 90 vkt-bench-towers --towers 1,2,4 --steps 30 --paths staged --tower-devices both
  # Two unequal devices (the GPU beside lavapipe, where the machine has Mesa's)
  # on measured shards, against the sum of each alone.
  if grep -qE '^\[1\] ' "$logs/vkt-info.log"; then
    FIGURE_SUFFIX=_measured bench towers-measured 90 vkt-bench-towers --shard-weights measured --pair 0,1 --steps 30
  else
    say "- \`towers-measured\`: one Vulkan device here, no pair to shard between"
  fi
  bench step-overhead 40 vkt-bench-step-overhead
  bench optimizers 40 vkt-bench-optimizers --mib 256
  bench runtime 40 vkt-bench-runtime --mib 256
  bench conv 40 vkt-bench-conv
  bench fusion 40 vkt-bench-fusion
  FIGURE_SUFFIX=_fp16 bench fusion-fp16 60 vkt-bench-fusion --precision fp16
  bench estimator 60 vkt-bench-estimator --steps 200 --reps 2
  bench frozen 60 vkt-bench-frozen --precision bf16 --width 4096 --layers 4 --batch 256 --steps 20
  bench finetune 90 vkt-bench-finetune --towers 1,2 --batch 32 --context 256 --steps 10 --torch-steps 10 --rounds 2 --generate-tokens 256 --torch-device cuda
  FIGURE_SUFFIX=_bf16 bench finetune-bf16 90 vkt-bench-finetune --towers 1 --batch 32 --context 256 --steps 10 --torch-steps 10 --rounds 2 --no-generate --precision bf16 --torch-device cuda
  if digits=$(prog vkt-digits); then
    bench startup 60 vkt-bench-startup --program "$digits" --data "$VKT_DATA_DIR/digits.csv.gz"
  fi
  say ""
  say "## Samples and references"
  if digits=$(prog vkt-digits); then step vkt-digits 60 "$digits" --devices 0; fi
  if mnist=$(prog vkt-mnist); then
    step vkt-mnist 45 "$mnist" --devices 0
    step vkt-mnist-2-towers 45 "$mnist" --devices 0,0
  fi
  if [[ $torch_cuda == 1 ]]; then
    step pytorch-mlp-adam 60 python3 "$source_dir/bench/pytorch_mlp.py" --device cuda --optimizer adam --steps 100
  fi
fi

# --- The suite: each test case in its own process (a crash or a hang costs one
# case), several at a time, under the validation layer where it loads.
say ""
say "## The suite"
tests=$(prog vkt-tests)
validation=0
if probe=$(prog vkt-validation-probe) &&
  VKT_VALIDATION=1 VKT_LOG_LEVEL=off timeout 60 "$probe" 2>&1 | grep -qE 'validation errors reported: [1-9]'; then
  validation=1
  say "- the validation layer loads and reports misuse: every case runs with VKT_VALIDATION=1"
else
  say "- the validation layer did not load or saw nothing (vkt-validation-probe): the cases run without it"
fi
"$tests" --list-test-names-only 2>/dev/null | grep -v '^$' >"$logs/test-names.txt"
if [[ $short == 1 ]]; then
  grep -E '^(a replayed step|gradients accumulate|binary ops with broadcasting)' \
    "$logs/test-names.txt" | head -6 >"$logs/test-run.txt"
  jobs=2 per_test=120 suite_limit=240
else
  cp "$logs/test-names.txt" "$logs/test-run.txt"
  # What is left of the report's budget (8 minutes less a margin) after the benches.
  jobs=${VKT_REPORT_JOBS:-6} per_test=150
  suite_limit=$((${VKT_REPORT_BUDGET_S:-460} - (SECONDS - began)))
  ((suite_limit < 60)) && suite_limit=60
fi
mkdir -p "$logs/tests"
run_case() {
  # Catch's test spec: ',' separates names and '\' escapes.
  local spec=${1//\\/\\\\}
  spec=${spec//,/\\,}
  local file
  file="$logs/tests/$(echo "$1" | md5sum | cut -c1-12).log"
  local rc=0
  VKT_VALIDATION=$validation timeout -k 5 "$per_test" "$tests" "$spec" >"$file" 2>&1 || rc=$?
  if [[ $rc == 0 ]] && ! grep -qE 'All tests passed|test cases?: *[0-9]+ *\| *[0-9]+ passed' "$file"; then
    rc=99 # matched nothing or skipped
  fi
  printf '%s\t%s\t%s\n' "$rc" "$1" "$file" >>"$logs/test-results.tsv"
}
export -f run_case
export logs tests validation per_test
: >"$logs/test-results.tsv"
t0=$SECONDS
tr '\n' '\0' <"$logs/test-run.txt" |
  timeout -k 5 "$suite_limit" xargs -0 -P "$jobs" -I{} bash -c 'run_case "$1"' _ {}
total=$(wc -l <"$logs/test-run.txt")
passed=$(awk -F'\t' '$1 == 0' "$logs/test-results.tsv" | wc -l)
finished=$(wc -l <"$logs/test-results.tsv")
figure suite_total "$total"
figure suite_passed "$passed"
figure suite_not_finished "$((total - finished))"
say "- $passed of $total test cases passed, $((finished - passed)) failed, $((total - finished)) not finished in ${suite_limit} s ($jobs at a time, $((SECONDS - t0)) s)"
awk -F'\t' '$1 != 0 {print "  - FAILED (exit " $1 "): " $2}' "$logs/test-results.tsv" | tee -a "$md"
# Each failure's output, in the log for the report's reader.
awk -F'\t' '$1 != 0 {print $3}' "$logs/test-results.tsv" | while read -r f; do
  {
    echo "=== $f"
    tail -n 40 "$f"
  } >>"$logs/failures.log"
done

# --- The goal figures (docs/PERFORMANCE.md, "Performance goals"), under the
# names the goals use.
value() { awk -F= -v k="$1" '$1 == k {v = $2} END {if (v != "") print v}' "$figures"; }
alias_figure() {
  local v
  v=$(value "$2")
  [[ -n "$v" ]] && figure "$1" "$v"
}
if [[ $torch_cuda == 1 && $short == 0 ]]; then
  alias_figure mlp_vs_pytorch_cuda_ratio train_vs_pytorch_ratio_sgd
  alias_figure mlp_adam_vs_pytorch_cuda_ratio train_vs_pytorch_ratio_adam
fi
# The towers' figures on one shared VkDevice (a GPU's default) where measured.
for f in host_waits_per_step exposed_exchange_share towers_2_vs_1_ratio; do
  g=${f/_per_step/_per_step_2_towers}
  g=${g/_share/_share_2_towers}
  if [[ -n "$(value "${g}_staged_shared")" ]]; then
    alias_figure "$f" "${g}_staged_shared"
  else
    alias_figure "$f" "${g}_staged"
  fi
done
figure report_seconds "$((SECONDS - began))"

say ""
say "## Figures"
say ""
say '```'
awk -F= '{last[$1] = $2; if (!($1 in seen)) {seen[$1] = 1; order[n++] = $1}}
  END {for (i = 0; i < n; i++) print order[i] "=" last[order[i]]}' "$figures" | tee -a "$md"
say '```'

# report.json: the figures (numbers where they parse as numbers), the suite's
# failures and the environment.
{
  echo "{"
  printf '  "mode": "%s",\n' "$([[ $short == 1 ]] && echo short || echo full)"
  printf '  "validation": %s,\n' "$([[ $validation == 1 ]] && echo true || echo false)"
  printf '  "vulkan_device": "%s",\n' "$(echo "${gpu_vulkan:-}" | tr -d '"\\')"
  echo '  "figures": {'
  awk -F= '{last[$1] = $2; if (!($1 in seen)) {seen[$1] = 1; order[n++] = $1}}
    END {
      for (i = 0; i < n; i++) {
        v = last[order[i]]
        if (v !~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/) { gsub(/["\\]/, "", v); v = "\"" v "\"" }
        printf "    \"%s\": %s%s\n", order[i], v, (i + 1 < n ? "," : "")
      }
    }' "$figures"
  echo '  },'
  echo '  "failed_tests": ['
  awk -F'\t' '$1 != 0 {gsub(/["\\]/, "", $2); lines[n++] = "    \"" $2 "\""}
    END {for (i = 0; i < n; i++) print lines[i] (i + 1 < n ? "," : "")}' "$logs/test-results.tsv"
  echo '  ]'
  echo "}"
} >"$out/report.json"
cp "$md" "$out/report.md"
tar -C "$logs" -czf "$out/logs.tar.gz" --exclude=cache . 2>/dev/null
echo "gpu-report: $out/report.md, $out/report.json, $out/logs.tar.gz ($((SECONDS - began)) s)"
