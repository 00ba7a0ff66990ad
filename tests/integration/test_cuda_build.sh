#!/usr/bin/env bash
# test_cuda_build.sh - compile check of the CUDA backend where there is no GPU: configures a
# separate build with -DRLX_CUDA=ON for sm_90 (the kernels have no per-architecture code, so
# one target checks them; nvcc's time is CI's), warnings failing it, builds rlxd and the CUDA tests
# (unit_test_cuda_ops, parity_test_parity_cuda, parity_test_parity_embed), then checks that `rlxd --version` lists cuda,
# that `rlxd devices` reports the missing CUDA device cleanly (exit 0, a clear line), and that
# the CUDA tests run: skipping with a clear message here, passing where a GPU is.
# Skips (77) without nvcc, and in the sanitizer build (the release build's run suffices).
set -euo pipefail
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "skip: nvcc not found (install the CUDA toolkit in /usr/local/cuda)"; exit 77; }
BIN=${RLX_BIN:?RLX_BIN must name the build directory}
SRC=${RLX_SRC:?RLX_SRC must name the source directory}
if grep -q '^RLX_SANITIZE:BOOL=ON' "$BIN/CMakeCache.txt" 2>/dev/null; then
  echo "skip: the CUDA compile check runs in the release build only"; exit 77
fi
# Beside the build directory (so its sources' paths relative to it are this build's) and, where
# this build compiled through ccache (the Makefile's, paths hashed relative to CCACHE_BASEDIR),
# through the same cache: the C files the CUDA options do not change come from it. Warnings
# fail the check as -Werror would (ccache replays a cached compile's warnings).
DIR="$(dirname "$BIN")/$(basename "$BIN")-cuda-check"
launcher=()
if grep -q '^CMAKE_C_COMPILER_LAUNCHER:.*ccache' "$BIN/CMakeCache.txt" 2>/dev/null && command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$SRC}" CCACHE_NOHASHDIR=1
fi
# the logs go inside that build's folder, so a build folder inside the source tree (/build*/,
# ignored) leaves nothing beside it in the tree
mkdir -p "$DIR"
cmake -S "$SRC" -B "$DIR" -DCMAKE_BUILD_TYPE=Release -DRLX_CUDA=ON -DRLX_VULKAN=OFF "${launcher[@]+"${launcher[@]}"}" \
      -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES=90 > "$DIR/check-configure.log" 2>&1 \
  || { cat "$DIR/check-configure.log"; echo "FAIL: configuring the CUDA build"; exit 1; }
cmake --build "$DIR" --target rlxd unit_test_cuda_ops parity_test_parity_cuda parity_test_parity_embed -j 2 > "$DIR/check-build.log" 2>&1 \
  || { tail -50 "$DIR/check-build.log"; echo "FAIL: building rlxd and the CUDA tests with CUDA"; exit 1; }
if grep -E -i '(^|[ :])warning[ :]' "$DIR/check-build.log"; then echo "FAIL: the CUDA build has warnings"; exit 1; fi
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
# the CUDA tests: every one passes or skips with its reason (77 = all skipped)
gpu=0
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && gpu=1
# (the encoders' embedding goldens through the CUDA backend: parity_test_parity_embed with
# RLXD_BACKEND=cuda)
for t in unit_test_cuda_ops parity_test_parity_cuda parity_test_parity_embed; do
  set +e
  be=; [ "$t" = parity_test_parity_embed ] && be=cuda
  out=$(RLXD_BACKEND=$be "$DIR/$t" 2>&1); rc=$?
  set -e
  echo "$out" | tail -4
  case "$rc" in
    0) ;;
    77) [ "$gpu" = 0 ] || { echo "FAIL: $t skipped although a GPU is present"; exit 1; } ;;
    *) echo "$out"; echo "FAIL: $t exited with $rc"; exit 1 ;;
  esac
  if [ "$gpu" = 0 ]; then
    grep -q 'skipped: .*no [Cc][Uu][Dd][Aa] device' <<<"$out" || { echo "FAIL: $t does not say that there is no CUDA device"; exit 1; }
  fi
done
echo "ok: CUDA build (sm_90) compiles, links, degrades cleanly; its tests build and run"
