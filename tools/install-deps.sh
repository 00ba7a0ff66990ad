#!/usr/bin/env bash
# Installs the Debian packages rlxd builds and tests with, skipping what is already present.
set -euo pipefail
pkgs=(build-essential cmake pkg-config curl python3 nodejs npm
      libmicrohttpd-dev libuv1-dev libopenblas-dev libsqlite3-dev libcjson-dev libpcre2-dev
      libutf8proc-dev libinih-dev libcurl4-openssl-dev libvulkan-dev glslc mesa-vulkan-drivers vulkan-tools
      docker-compose python3-yaml python3-jinja2 valgrind clang ccache)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm may come from outside Debian (e.g. a preinstalled Node): accept any working node.
if command -v node >/dev/null && command -v npm >/dev/null; then
  tmp=(); for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || tmp+=("$p"); done
  missing=("${tmp[@]+"${tmp[@]}"}")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
