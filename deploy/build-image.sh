#!/usr/bin/env bash
# build-image.sh - the build commands of the container image's build stage, kept in one script
# so the Dockerfile and a test on a machine without a container engine run the same steps
# (tests/integration/test_image_build.sh).
#
#   deploy/build-image.sh OUT [BUILD_DIR]
#
# Configures and builds the shipped programs (rlxd, rlxd-synth, rlxd-loadgen when libcurl is
# there) in BUILD_DIR (default: build), installs them under OUT/usr/local/bin, and writes
# OUT/usr/local/share/rlxd/runtime-packages.txt: the Debian packages that own the shared
# libraries the programs link (what the runtime stage installs). BACKEND=cpu|cuda, CUDA_ARCHS
# (for cuda) and RLX_COMMIT (optional) come from the environment. Run from the repository root
# (or the image's build context: the repository filtered by .dockerignore).
set -euo pipefail
out=${1:?usage: deploy/build-image.sh OUT [BUILD_DIR]}
build=${2:-build}
backend=${BACKEND:-cpu}
extra=()
case "$backend" in
  cpu) ;;
  cuda) extra=(-DRLX_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-80;86;89;90}") ;;
  *) echo "build-image.sh: BACKEND must be cpu or cuda, got '$backend'" >&2; exit 2 ;;
esac
# RLX_COMMIT names the commit where the sources carry no .git (an image build's context)
if [ -n "${RLX_COMMIT:-}" ]; then extra+=("-DRLX_COMMIT=$RLX_COMMIT"); fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${extra[@]+"${extra[@]}"}"
# Only the shipped programs are built (not the test executables).
targets=(rlxd rlxd-synth)
if grep -q '^CURL_FOUND:INTERNAL=1' "$build/CMakeCache.txt" 2>/dev/null; then targets+=(rlxd-loadgen); fi
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
mkdir -p "$out/usr/local/bin" "$out/usr/local/share/rlxd"
for t in "${targets[@]}"; do install -m 0755 "$build/$t" "$out/usr/local/bin/$t"; done
# The runtime packages are derived from what the binaries actually link, so the list stays
# right on either base (Debian 12 and Ubuntu 24.04 name some of them differently).
for f in "$out"/usr/local/bin/*; do ldd "$f"; done \
  | awk '/=> \// {print $3}' | sort -u \
  | while read -r lib; do dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true; done \
  | cut -d: -f1 | sort -u \
  | { grep -v -E '^(libc6|libgcc-s1|libstdc\+\+6)$' || true; } > "$out/usr/local/share/rlxd/runtime-packages.txt"
cat "$out/usr/local/share/rlxd/runtime-packages.txt"
