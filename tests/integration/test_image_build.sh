#!/usr/bin/env bash
# test_image_build.sh - the container image's build stage on this machine (there is no
# container engine here): checks that the packages its apt-get line installs are what this
# machine has, runs deploy/build-image.sh - the script the Dockerfile's RUN step calls - into a
# temporary root, then checks the installed programs run and the derived runtime package list
# names the shared libraries' packages and no -dev package. The build tree is kept under the
# test build directory so later runs are incremental. Skips in the sanitizer build (the
# release build's run suffices).
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
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
BACKEND=cpu bash deploy/build-image.sh "$tmp/out" "$BIN/image-check" >"$tmp/log" 2>&1 || { tail -40 "$tmp/log"; fail "deploy/build-image.sh"; }
for t in rlxd rlxd-synth; do [ -x "$tmp/out/usr/local/bin/$t" ] || fail "$t not installed"; done
"$tmp/out/usr/local/bin/rlxd" serve --help | grep -q -- '--grace-seconds' || fail "the built rlxd does not run"
list="$tmp/out/usr/local/share/rlxd/runtime-packages.txt"
for p in libuv1 libmicrohttpd12 libsqlite3-0 libcjson1; do
  grep -qx "$p" "$list" || fail "runtime-packages.txt lacks $p: $(tr '\n' ' ' <"$list")"
done
grep -q -- '-dev$' "$list" && fail "runtime-packages.txt names -dev packages: $(tr '\n' ' ' <"$list")"
echo "ok   image build stage: $(tr '\n' ' ' <"$list")"
