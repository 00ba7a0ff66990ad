#!/usr/bin/env bash
# soak.sh - `make soak`: rlxd serving stories260K under bench/soak.mjs for $SOAK_SECONDS (600)
# with $SOAK_CONC (256) concurrent clients (the queue holds 1024 waiting engine requests, so
# 256 clients asking up to n=2 choices each are never refused). Not part of CI.
set -eu
cd "$(dirname "$0")/.."
BIN=${BUILD:-build}
MODEL=${SOAK_MODEL:-../shared/models/stories260K.gguf}
LOG=$(mktemp /tmp/rlxd-soak.XXXXXX)
"$BIN/rlxd" serve -m "$MODEL:tiny" --host 127.0.0.1 --port 0 --max-connections 512 --max-queue 1024 2>"$LOG" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -f "$LOG"' EXIT
PORT=""
for _ in $(seq 1 300); do
    PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$LOG" | head -1)
    [ -n "$PORT" ] && curl -s --max-time 2 -o /dev/null "http://127.0.0.1:$PORT/health" && break
    sleep 0.1
done
[ -n "$PORT" ] || { cat "$LOG"; exit 1; }
echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; commit $(git rev-parse --short HEAD)"
node bench/soak.mjs "http://127.0.0.1:$PORT" "$PID" "${SOAK_SECONDS:-600}" "${SOAK_CONC:-256}"
