#!/usr/bin/env bash
# test_fault_server.sh - allocation failure injected at every allocation of a request in turn
# (tests/fault/server_walk.mjs) in the real daemon, librlx_fault.so preloaded. The daemon must
# answer correctly or with a visible error, never crash, hang or leak. Release builds only (the
# sanitizers own malloc, so the ASan build has no librlx_fault.so: skip).
# Cases ($FAULT_CASES, default all): chat_stream (a streamed chat), completions (n, logprobs,
# echo, not streamed) and generate_session (a streamed generate with a session stored in
# sqlite3, whose caches may keep a few blocks more after an error: a bounded slack).
# FAULT_FROM / FAULT_MAX_N look at a range of N.
# RLX_FAULT_BACKTRACE=1 KEEP_LOG=FILE keeps the server log with a backtrace of each failure.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
FAULT_LIB="${RLX_BIN:-build}/librlx_fault.so"
[ -f "$FAULT_LIB" ] || { echo "skip: $FAULT_LIB not built (sanitizer build)"; exit 77; }
command -v node >/dev/null || { echo "skip: node missing"; exit 77; }
export RLX_FAULT_CTL="$TMP/fault.ctl" RLX_FAULT_OUT="$TMP/fault.out"
RLX_FAULT_BACKTRACE=${RLX_FAULT_BACKTRACE:-0} LD_PRELOAD="$(readlink -f "$FAULT_LIB")" start_server fault --db "$TMP/sessions.db" --threads 1
for c in ${FAULT_CASES:-chat_stream completions generate_session}; do
    node tests/fault/server_walk.mjs "$URL" "$PID" "$RLX_FAULT_CTL" "$RLX_FAULT_OUT" "$c" || fail "walk $c"
done
kill -0 "$PID" || fail "daemon gone"
stop_server
ok "every allocation of the requests failed in turn: no crash, hang, leak or silent loss"
