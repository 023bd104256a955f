#!/usr/bin/env bash
# Packs a Release build for a GPU machine that has only a driver: the test,
# sample and bench programs (shaders are embedded in them), the Debian
# libraries they load (Vulkan loader, spdlog, fmt, OpenBLAS, Open MPI, zlib),
# the validation layer, libglvnd (the NVIDIA ICD loads it from the system
# paths), the samples' data, the PyTorch reference scripts and
# scripts/gpu-report.sh, into one tarball of at most 60 MiB.
#   scripts/gpu-bundle.sh [TARBALL]     (default .gpu/vktower-gpu.tar.xz)
# There:  tar xJf vktower-gpu.tar.xz && vktower-gpu/gpu-report.sh OUT_DIR
# Builds with scripts/build.sh Release (VKT_BUILD_DIR as there). Downloads the
# .debs with apt-get download (network), cached in .gpu/deb between runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
tarball="${1:-.gpu/vktower-gpu.tar.xz}"
build_dir="${VKT_BUILD_DIR:-build}"
limit_mib=60

bash scripts/build.sh Release >/dev/null
stage="$root/.gpu/stage/vktower-gpu"
rm -rf "$root/.gpu/stage"
mkdir -p "$stage/bin" "$stage/sysroot" "$stage/glvnd" "$stage/bench" "$stage/tests" \
  "$stage/samples" "$root/.gpu/deb"

# The MPI benches are left out: mpirun is not there.
programs=("$build_dir"/tests/vkt-tests "$build_dir"/tests/vkt-resume-child
  "$build_dir"/tests/vkt-validation-probe)
for b in "$build_dir"/bench/vkt-bench-*; do
  [[ "$b" == */vkt-bench-allreduce || "$b" == */vkt-bench-processes ]] || programs+=("$b")
done
for sample in "$build_dir"/samples/vkt-*; do
  [[ -x "$sample" && -f "$sample" ]] && programs+=("$sample")
done
cp "${programs[@]}" "$stage/bin/"
strip "$stage"/bin/*

# The libraries: what the programs load from Debian 12 beyond glibc and libstdc++.
packages=(libvulkan1 libspdlog1.10 libfmt9 libopenblas0-pthread libgfortran5 libquadmath0
  zlib1g libopenmpi3 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libpmix2
  libfabric1 libucx0 libnuma1 libpsm-infinipath1 libpsm2-2 libibverbs1 librdmacm1 libnl-3-200
  libnl-route-3-200 libxnvctrl0 libudev1 libmunge2 vulkan-validationlayers
  # the tokenizers (models/): SentencePiece, and ICU's character classes (its
  # data library is most of the ~10 MiB these add to the tarball)
  libsentencepiece0 libicu72)
glvnd=(libglvnd0 libglx0 libgl1 libegl1 libgles2 libopengl0 libgldispatch0)
apt_opts=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/vkt-apt-lists
  -oDir::Cache::Archives=/tmp/vkt-apt-archives -oDebug::NoLocking=1)
mkdir -p /tmp/vkt-apt-lists/partial /tmp/vkt-apt-archives/partial
missing=()
for p in "${packages[@]}" "${glvnd[@]}"; do
  compgen -G "$root/.gpu/deb/${p}_*.deb" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get "${apt_opts[@]}" update >/dev/null
  # A package that this release does not have (libgldispatch0 is inside libglvnd0
  # on Debian 12) is skipped, not fatal.
  for p in "${missing[@]}"; do
    (cd "$root/.gpu/deb" && apt-get "${apt_opts[@]}" download "$p" >/dev/null 2>&1) ||
      echo "gpu-bundle: $p is not in this release's archive, skipped"
  done
fi
for p in "${packages[@]}"; do
  for f in "$root"/.gpu/deb/"${p}"_*.deb; do
    [[ -f "$f" ]] && dpkg -x "$f" "$stage/sysroot"
  done
done
rm -rf "$stage/sysroot/usr/share/doc" "$stage/sysroot/usr/share/man" \
  "$stage/sysroot/usr/share/lintian" "$stage/sysroot/usr/bin" \
  "$stage"/sysroot/usr/lib/x86_64-linux-gnu/openblas-pthread/liblapack*
for p in "${glvnd[@]}"; do
  for f in "$root"/.gpu/deb/"${p}"_*.deb; do [[ -f "$f" ]] && cp "$f" "$stage/glvnd/"; done
done

# What the programs read from the checkout: VKT_SOURCE_DIR points here.
cp -r samples/data "$stage/samples/"
cp bench/*.py "$stage/bench/"
mkdir -p "$stage/samples/vkt_gpt"
cp samples/vkt_gpt/torch_replica.py "$stage/samples/vkt_gpt/"  # bench/pytorch_gpt.py imports it
cp tests/torch_cnn_reference.py "$stage/tests/"
mkdir -p "$stage/tests/models"
cp tests/models/sentencepiece_reference.py "$stage/tests/models/"  # where python3-sentencepiece is
cp scripts/gpu-report.sh "$stage/"
git -C "$root" describe --always --dirty >"$stage/VERSION" 2>/dev/null || echo unknown >"$stage/VERSION"

# Every library a program needs must come from the bundle, glibc or the C++
# runtime: a library ldd finds only in this machine's system paths is missing.
libs="$stage/sysroot/usr/lib/x86_64-linux-gnu:$stage/sysroot/usr/lib/x86_64-linux-gnu/openblas-pthread:$stage/sysroot/lib/x86_64-linux-gnu"
outside=$(LD_LIBRARY_PATH="$libs" ldd "$stage"/bin/* 2>/dev/null |
  awk '$2 == "=>" {print $1, $3}' | grep -v " $stage/" |
  grep -Ev '^(linux-vdso|libc|libm|libstdc\+\+|libgcc_s|ld-linux-x86-64|libpthread|libdl|librt|libmvec)\.so' |
  sort -u || true)
if [[ -n "$outside" ]]; then
  echo "gpu-bundle: the programs load libraries the bundle lacks (add their packages above):" >&2
  echo "$outside" >&2
  exit 1
fi

mkdir -p "$(dirname "$tarball")"
# xz with a window larger than the whole: the programs share most of their code (the library
# is linked into each), which a window that spans several of them stores once.
tar -C "$root/.gpu/stage" -cf - vktower-gpu | xz -9e --lzma2=dict=192MiB -T1 >"$tarball"
size=$(stat -c %s "$tarball")
echo "gpu-bundle: $tarball, $((size / 1024 / 1024)) MiB ($(ls "$stage/bin" | wc -l) programs)"
if ((size > limit_mib * 1024 * 1024)); then
  echo "gpu-bundle: the tarball is over ${limit_mib} MiB; a GPU machine takes at most 64 MiB with the checkout" >&2
  exit 1
fi
