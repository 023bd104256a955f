#!/usr/bin/env bash
# Installs the Debian 12 packages vktower needs, and only those that are missing.
# Idempotent: when everything is installed it neither calls apt nor needs root.
set -euo pipefail

packages=(
  # build tools
  cmake ninja-build g++ pkg-config
  # Vulkan: loader and headers, lavapipe (CPU device), validation layer, vulkaninfo
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
  # shader compiler and SPIR-V validator
  glslang-tools spirv-tools
  # libraries
  libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev zlib1g-dev libopenblas-dev
  # tokenizers (models/): SentencePiece models, and ICU's Unicode classes for BPE
  libsentencepiece-dev libicu-dev
  # tests and benchmarks
  catch2 libbenchmark-dev
  # the SentencePiece test compares vktower's ids with Debian's Python binding
  python3-sentencepiece
  # scripts/make_tiny_model.py: the small Hugging Face checkpoints the model tests and
  # vkt-finetune's smoke test train on
  python3-numpy
  # fuzzing (scripts/fuzz.sh): clang with libFuzzer and the sanitizer runtimes
  clang libclang-rt-14-dev
  # Open MPI: training across processes and hosts (CMake option VKT_WITH_MPI)
  libopenmpi-dev openmpi-bin
  # the Estimator draws model_dir/loss.png with gnuplot (optional at run time)
  gnuplot-nox
  # vkt-gpt's corpus: the fortune files, BSD licensed (/usr/share/games/fortunes)
  fortunes
)

# python3-torch, with VKT_DEPS_TORCH=1 (scripts/test.sh sets it: a test
# dependency): PyTorch for the [torch] reference tests, vkt-gpt's replica parity
# and the benches' PyTorch lines, all skipped without it. Not for the demo: 170
# packages, ~150 MB to download and ~635 MB installed; 2.5 minutes on a 2-core
# machine that already had two thirds of them in its apt cache. A failure only warns.
optional_torch() {
  [[ "${VKT_DEPS_TORCH:-0}" == 1 ]] || return 0
  [[ "$(dpkg-query -W -f='${db:Status-Status}' python3-torch 2>/dev/null || true)" == installed ]] &&
    return 0
  local sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  echo "deps: installing python3-torch (a test dependency)"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update >/dev/null ||
    echo "deps: apt-get update failed; trying the install with the lists there are" >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    python3-torch || echo "deps: python3-torch was not installed; the [torch] tests will skip" >&2
}

missing=()
for pkg in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)"
  if [[ "$status" != "installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "deps: all ${#packages[@]} Debian packages are installed"
  optional_torch
  exit 0
fi

echo "deps: installing ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "deps: these packages are missing and this script is not root and has no sudo:" >&2
  echo "  apt-get install ${missing[*]}" >&2
  exit 1
fi
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
optional_torch
