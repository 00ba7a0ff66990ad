#!/usr/bin/env bash
# test_image_build.sh - the container image's build stage on this machine (there is no
# container engine here): checks that the packages its apt-get line installs are what this
# machine has; that the root .dockerignore (read by every builder) keeps build trees, node
# modules, .git and model files out of the build context and the sources in; builds that
# context (the repository filtered by .dockerignore, as a builder receives it, made by
# docker_context.py) with deploy/build-image.sh - the script the Dockerfile's RUN step calls -
# into a temporary root, then checks the installed programs run (with the commit passed as
# the Dockerfile passes RLX_COMMIT) and the derived runtime package list names the shared
# libraries' packages and no -dev package. The context is kept under the test build directory
# (later runs copy only changed files); the image's build tree, build/ inside it as in the
# Dockerfile, is made afresh each run, from ccache where the release build used it. Skips in
# the sanitizer build (the release build's run suffices).
set -euo pipefail
BIN=${RLX_BIN:?RLX_BIN must name the build directory}
SRC=${RLX_SRC:?RLX_SRC must name the source directory}
if grep -q '^RLX_SANITIZE:BOOL=ON' "$BIN/CMakeCache.txt" 2>/dev/null; then
  echo "skip: the image build check runs in the release build only"; exit 77
fi
cd "$SRC"
fail() { echo "FAIL: $*" >&2; exit 1; }
grep -q 'RUN .*bash deploy/build-image.sh /out' Dockerfile || fail "the Dockerfile does not build with deploy/build-image.sh"
# the build stage's packages (the apt-get install line(s) before the first runtime stage)
pkgs=$(sed -n '/AS build$/,/^# ---- runtime/p' Dockerfile | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' \
       | grep 'apt-get install' | sed 's/.*--no-install-recommends//; s/&&.*//')
[ -n "$pkgs" ] || fail "no apt-get install line in the build stage"
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    fail "the build stage installs $p, which this machine lacks (tools/install-deps.sh)"
done
command -v python3 >/dev/null || { echo "skip: python3 (the build context filter) not installed"; exit 77; }
[ -f .dockerignore ] || fail "no root .dockerignore"
[ ! -f Dockerfile.dockerignore ] || fail "Dockerfile.dockerignore would replace the root .dockerignore for BuildKit"
# what the context must leave out, and keep
ctx_check=$(python3 tests/integration/docker_context.py --check . build/CMakeCache.txt build-asan/rlxd \
    build-fuzz/x tests/integration/node_modules/openai/package.json node_modules/x .git/HEAD \
    deploy/models/model.gguf models/m.gguf sub/m.gguf.part \
    CMakeLists.txt Dockerfile server/main.c deploy/build-image.sh tools/synth.c tests/integration/server_lib.sh)
while read -r verdict path; do
  case "$path" in
    build*|*node_modules*|.git/*|*.gguf|*.part) [ "$verdict" = excluded ] || fail ".dockerignore keeps $path in the context" ;;
    *) [ "$verdict" = included ] || fail ".dockerignore leaves $path out of the context" ;;
  esac
done <<<"$ctx_check"
ctx="$BIN/image-context"
python3 tests/integration/docker_context.py "$SRC" "$ctx" >/dev/null || fail "docker_context.py"
for d in build .git tests/integration/node_modules; do [ ! -e "$ctx/$d" ] || fail "the build context holds $d"; done
[ -z "$(find "$ctx" -name '*.gguf' | head -1)" ] || fail "the build context holds .gguf files"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# as the Dockerfile's RUN step, from the context (no .git there: the commit comes as RLX_COMMIT),
# into build/ inside it as the Dockerfile does. Where this build compiled through ccache (the
# Makefile's, paths hashed relative to CCACHE_BASEDIR), so does the image build: its sources'
# paths relative to its build tree are the release build's, so the objects come from the cache.
launcher=()
if grep -q '^CMAKE_C_COMPILER_LAUNCHER:.*ccache' "$BIN/CMakeCache.txt" 2>/dev/null && command -v ccache >/dev/null; then
  launcher=(CMAKE_C_COMPILER_LAUNCHER=ccache "CCACHE_BASEDIR=${CCACHE_BASEDIR:-$SRC}" CCACHE_NOHASHDIR=1)
fi
(cd "$ctx" && env "${launcher[@]+"${launcher[@]}"}" BACKEND=cpu RLX_COMMIT=ctxtest bash deploy/build-image.sh "$tmp/out") >"$tmp/log" 2>&1 ||
  { tail -40 "$tmp/log"; fail "deploy/build-image.sh in the build context"; }
for t in rlxd rlxd-synth; do [ -x "$tmp/out/usr/local/bin/$t" ] || fail "$t not installed"; done
# whole outputs first, then grep: `rlxd ... | grep -q` under pipefail fails at random once the
# help outgrows one stdio buffer (grep -q leaves at the first match, rlxd's next write gets SIGPIPE)
help=$("$tmp/out/usr/local/bin/rlxd" serve --help) || fail "the built rlxd does not run: serve --help exited $?"
grep -q -- '--grace-seconds' <<<"$help" || fail "the built rlxd's serve --help lacks --grace-seconds"
version=$("$tmp/out/usr/local/bin/rlxd" --version) || fail "the built rlxd --version exited $?"
grep -q 'commit ctxtest' <<<"$version" || fail "RLX_COMMIT did not reach the build: $version"
list="$tmp/out/usr/local/share/rlxd/runtime-packages.txt"
for p in libuv1 libmicrohttpd12 libsqlite3-0 libcjson1; do
  grep -qx "$p" "$list" || fail "runtime-packages.txt lacks $p: $(tr '\n' ' ' <"$list")"
done
grep -q -- '-dev$' "$list" && fail "runtime-packages.txt names -dev packages: $(tr '\n' ' ' <"$list")"
echo "ok   image build stage from the .dockerignore context ($(python3 tests/integration/docker_context.py "$SRC" "$ctx")): $(tr '\n' ' ' <"$list")"
