#!/usr/bin/env bash
# test_cuda_build.sh - compile check of the CUDA backend where there is no GPU: configures a
# separate build with -DRLX_CUDA=ON for sm_80 and sm_90, builds only what rlxd needs (the
# backend library with its kernels, and rlxd), then checks that `rlxd --version` lists cuda and
# that `rlxd devices` reports the missing CUDA device cleanly (exit 0, a clear line).
# Skips (77) without nvcc, and in the sanitizer build (the release build's run suffices).
set -euo pipefail
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "skip: nvcc not found (install the CUDA toolkit in /usr/local/cuda)"; exit 77; }
BIN=${RLX_BIN:?RLX_BIN must name the build directory}
SRC=${RLX_SRC:?RLX_SRC must name the source directory}
if grep -q '^RLX_SANITIZE:BOOL=ON' "$BIN/CMakeCache.txt" 2>/dev/null; then
  echo "skip: the CUDA compile check runs in the release build only"; exit 77
fi
DIR="$BIN/cuda-check"
cmake -S "$SRC" -B "$DIR" -DCMAKE_BUILD_TYPE=Release -DRLX_CUDA=ON -DRLX_VULKAN=OFF -DRLX_WERROR=ON \
      -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="80;90" > "$DIR.configure.log" 2>&1 \
  || { cat "$DIR.configure.log"; echo "FAIL: configuring the CUDA build"; exit 1; }
cmake --build "$DIR" --target rlxd -j 2 > "$DIR.build.log" 2>&1 \
  || { tail -50 "$DIR.build.log"; echo "FAIL: building rlxd with CUDA"; exit 1; }
ver=$("$DIR/rlxd" --version)
echo "$ver"
grep -q 'backends:.*cuda' <<<"$ver" || { echo "FAIL: rlxd --version does not list cuda"; exit 1; }
set +e
dev=$("$DIR/rlxd" devices 2>&1); rc=$?
set -e
echo "$dev"
[ "$rc" = 0 ] || { echo "FAIL: rlxd devices exited with $rc"; exit 1; }
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  grep -q '^cuda 0:' <<<"$dev" || { echo "FAIL: a GPU is present but rlxd devices lists no CUDA device"; exit 1; }
else
  grep -q '^cuda: no CUDA device' <<<"$dev" || { echo "FAIL: rlxd devices does not say that there is no CUDA device"; exit 1; }
fi
echo "ok: CUDA build (sm_80, sm_90) compiles, links and degrades cleanly"
