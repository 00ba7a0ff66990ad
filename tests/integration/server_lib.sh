# server_lib.sh - shared helpers for the daemon's integration tests (sourced, not a test).
# Starts `rlxd serve` on 127.0.0.1 with a free port (--port 0; the port is read back from the
# "listening on" log line), waits for /health, and kills it on exit. Exits 77 (skip) when the
# model or the binary is missing.
set -u
BIN="${RLX_BIN:-build}/rlxd"
SHARED="${RLX_SHARED:-../shared}"
MODEL="$SHARED/models/stories260K.gguf"
[ -x "$BIN" ] || { echo "skip: $BIN not built"; exit 77; }
[ -f "$MODEL" ] || { echo "skip: $MODEL absent (reference data in ../shared)"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl not installed"; exit 77; }
TMP=$(mktemp -d /tmp/rlxd-it.XXXXXX)
# the daemon's tokenizer cache goes with the test's folder, not into ~/.cache/rlxd (tests make
# models under fresh paths: their cache files would pile up there)
export RLXD_CACHE_DIR="$TMP/tokenizer-cache"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; [ -n "${KEEP_LOG:-}" ] && cp "$LOG" "$KEEP_LOG"; [ -n "${LOG:-}" ] && [ -f "$LOG" ] && { echo "--- server log:" >&2; tail -20 "$LOG" >&2; }; exit 1; }
ok() { echo "ok   $*"; }

# use_slow_model: later start_server calls serve a model that decodes a few hundred tokens/s with
# an 8192-token context (made by rlxd-synth with the stories vocabulary), for tests that need a
# stream still running seconds later whatever the machine (stories260K streams its whole
# 512-token context in a fraction of a second).
use_slow_model() {
    local synth="${RLX_BIN:-build}/rlxd-synth" slow="$TMP/slow-decoder.gguf"
    [ -x "$synth" ] || fail "$synth not built"
    "$synth" --arch llama --preset tiny --hidden 768 --layers 6 --heads 12 --kv-heads 4 --ffn 2048 --ctx 8192 \
        --type q8_0 --vocab-from "$SHARED/models/stories260K.gguf" -o "$slow" >/dev/null || fail "rlxd-synth failed"
    MODEL=$slow
}

# run_rlxd NAME COMMAND...: runs COMMAND (an `rlxd serve` command line, perhaps behind `env`)
# with stderr in $TMP/NAME.log; returns once it reports its port. Sets PID, PORT, URL, LOG.
run_rlxd() {
    local name=$1; shift
    LOG="$TMP/$name.log"
    : >"$LOG" # there before the port is looked for in it (the job below creates it only once it runs)
    "$@" 2>"$LOG" &
    PID=$!
    PIDS+=("$PID")
    PORT=""
    for _ in $(seq 1 300); do
        PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$LOG" | head -1)
        [ -n "$PORT" ] && break
        kill -0 "$PID" 2>/dev/null || fail "rlxd exited at start"
        sleep 0.1
    done
    [ -n "$PORT" ] || fail "rlxd did not report its port within 30 s"
    URL="http://127.0.0.1:$PORT"
}

# start_rlxd NAME [ARGS...]: `rlxd serve ARGS` (no model of its own) on 127.0.0.1, a free port;
# returns once it reports its port. Sets PID, PORT, URL, LOG.
start_rlxd() {
    local name=$1; shift
    run_rlxd "$name" "$BIN" serve --host 127.0.0.1 --port 0 "$@"
}

# start_server NAME [ARGS...]: serves $MODEL as "tiny", returns once /health is 200; sets PID,
# PORT, URL, LOG
start_server() {
    local name=$1; shift
    start_rlxd "$name" -m "$MODEL:tiny" "$@"
    for _ in $(seq 1 300); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] && return 0
        kill -0 "$PID" 2>/dev/null || fail "rlxd exited while loading"
        sleep 0.1
    done
    fail "rlxd not healthy after 30 s"
}

# stop_server: SIGTERM and expect exit 0 within 15 s
stop_server() {
    kill -TERM "$PID"
    for _ in $(seq 1 150); do
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$PID" 2>/dev/null && fail "rlxd still running 15 s after SIGTERM"
    wait "$PID"
    local rc=$?
    [ "$rc" = 0 ] || fail "rlxd exited $rc after SIGTERM"
}

# post PATH BODY [CURL ARGS...]: prints the body; HTTP status in $TMP/status
post() {
    local path=$1 body=$2; shift 2
    curl -s -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' "$@" --data-binary "$body" \
        "$URL$path" >"$TMP/status"
    cat "$TMP/body"
}
status() { cat "$TMP/status"; }

# jq-free JSON checks through node (present with the toolchain)
jget() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const v=eval("JSON.parse(s)"+process.argv[1]);console.log(typeof v==="string"?v:JSON.stringify(v))})' "$1"; }
