#!/usr/bin/env bash
# test_server_shutdown.sh - SIGTERM with a short grace period while work is in flight: the daemon
# exits within grace + 3 s (a bound, not a benchmark) although threadpool work is queued and a
# client has sent only half a body; streams cut at the end of the grace period end with an error
# event and [DONE] (SSE) or an error line (NDJSON) and are logged 503, not 499 (client gone); a
# request still waiting for its answer and one whose body is incomplete get the 503 "shutting
# down" JSON; over --stdio every line refused or cut carries its request's id.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v node >/dev/null || { echo "skip: node missing"; exit 77; }
command -v timeout >/dev/null || { echo "skip: timeout missing"; exit 77; }
[ "${RLXD_BACKEND:-cpu}" = cpu ] || { echo "skip: CPU timing assumptions"; exit 77; }
use_slow_model
GRACE=1

# elapsed seconds since $1 (date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }
# wait_exit PID: waits (at most 20 s) for the process to end; prints nothing
wait_exit() { for _ in $(seq 1 200); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done; return 1; }

start_server grace --grace-seconds "$GRACE"
long='{"prompt":"Once upon a time","max_tokens":4000,"ignore_eos":true'
curl -sN -m 60 "$URL/v1/completions" -d "$long,\"stream\":true}" >"$TMP/sse" &
c1=$!
curl -sN -m 60 "$URL/v1/generate" -d "$long,\"stream\":true}" >"$TMP/ndjson" &
c2=$!
curl -s -m 60 -o "$TMP/whole" -w '%{http_code}' "$URL/v1/completions" -d "$long}" >"$TMP/whole.code" &
c3=$!
for _ in $(seq 1 300); do [ -s "$TMP/sse" ] && [ -s "$TMP/ndjson" ] && break; sleep 0.05; done
[ -s "$TMP/sse" ] && [ -s "$TMP/ndjson" ] || fail "the streams did not start"
# half a body: the headers promise 200 bytes, 16 come
exec 4<>/dev/tcp/127.0.0.1/"$PORT" || fail "cannot open a raw connection"
printf 'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"prompt":"Once' >&4
timeout 20 cat <&4 >"$TMP/half" &
c4=$!
# threadpool work: /tokenize of 256 KB texts, more than the pool runs at once
text=$(yes 'Once upon a time there was a little girl. ' | head -c 256000 | tr -d '\n')
printf '{"content":"%s"}' "$text" >"$TMP/tok.json"
unset text
toks=()
for i in $(seq 1 24); do
    { curl -s -m 60 -o "$TMP/tok$i" -w '%{http_code}' --data-binary @"$TMP/tok.json" "$URL/tokenize"; echo " $?"; } \
        >"$TMP/tok$i.code" &
    toks+=($!)
done
# and prompts of 2 MB, which took seconds each to tokenize (and to refuse) before
text=$(yes 'Once upon a time there was a little girl. ' | head -c 2000000 | tr -d '\n')
printf '{"prompt":"%s","max_tokens":4}' "$text" >"$TMP/big.json"
unset text
for i in $(seq 1 8); do
    { curl -s -m 60 -o "$TMP/big$i" -w '%{http_code}' --data-binary @"$TMP/big.json" "$URL/v1/completions"; echo " $?"; } \
        >"$TMP/big$i.code" &
    toks+=($!)
done
sleep 1
t0=$(date +%s.%N)
kill -TERM "$PID"
wait_exit "$PID" || fail "rlxd still running 20 s after SIGTERM (grace $GRACE s)"
elapsed=$(since "$t0")
wait "$PID"; rc=$?
[ "$rc" = 0 ] || fail "exit status $rc after SIGTERM"
awk -v e="$elapsed" -v g="$GRACE" 'BEGIN { exit !(e < g + 3) }' || fail "exit took $elapsed s with --grace-seconds $GRACE"
ok "exit in $elapsed s with --grace-seconds $GRACE"
wait "$c1" "$c2" "$c3" "$c4" "${toks[@]}" 2>/dev/null

grep -q '^data: {"error":{.*shutting down' "$TMP/sse" || fail "the SSE stream has no error event: $(tail -c 300 "$TMP/sse")"
[ "$(grep '^data: ' "$TMP/sse" | tail -1)" = 'data: [DONE]' ] || fail "the SSE stream does not end with [DONE]: $(tail -c 300 "$TMP/sse")"
[ "$(grep '^data: ' "$TMP/sse" | tail -2 | head -1 | cut -c1-16)" = 'data: {"error":{' ] || fail "the error event is not last before [DONE]"
ok SSE stream ends with an error event and [DONE]
tail -1 "$TMP/ndjson" | jget '.error.message' | grep -q 'shutting down' || fail "the NDJSON stream has no final error line: $(tail -c 300 "$TMP/ndjson")"
ok NDJSON stream ends with an error line
[ "$(cat "$TMP/whole.code")" = 503 ] || fail "the waiting request got $(cat "$TMP/whole.code"): $(cat "$TMP/whole")"
[ "$(jget '.error.message' <"$TMP/whole")" = "The server is shutting down." ] || fail "waiting request body: $(cat "$TMP/whole")"
ok waiting request gets 503 shutting down
head -1 "$TMP/half" | grep -q '^HTTP/1.1 503' || fail "the half-sent request got: $(head -c 300 "$TMP/half")"
grep -q '"message":"The server is shutting down."' "$TMP/half" || fail "the half-sent request's body: $(cat "$TMP/half")"
exec 4>&-
ok half-sent request gets 503 shutting down
for i in $(seq 1 24); do
    # answered, refused, or (curl exit 7) not connected yet when the daemon stopped listening
    read -r code crc <"$TMP/tok$i.code"
    [ "$code" = 200 ] || [ "$code" = 503 ] || [ "$crc" = 7 ] ||
        fail "/tokenize $i got '$code' (curl exit $crc): $(head -c 200 "$TMP/tok$i")"
done
for i in $(seq 1 8); do
    read -r code crc <"$TMP/big$i.code"
    [ "$code" = 400 ] || [ "$code" = 503 ] || [ "$crc" = 7 ] ||
        fail "big prompt $i got '$code' (curl exit $crc): $(head -c 200 "$TMP/big$i")"
done
ok /tokenize and big prompts answered or refused
grep -q 'POST /v1/completions 503 .*completion_tokens=[1-9]' "$LOG" || fail "no 503 access-log line for the cut stream: $(grep POST "$LOG" | head)"
grep -q 'POST /v1/generate 503 ' "$LOG" || fail "no 503 access-log line for the cut NDJSON stream"
grep -q ' 499 ' "$LOG" && fail "a request cut by the shutdown is logged as a client disconnect: $(grep ' 499 ' "$LOG")"
ok access log says 503

# --stdio: 40 lines at once, 32 start and 8 wait; SIGTERM refuses those 8, the grace period's end
# cuts the rest: every line gets one error line carrying its id
mkfifo "$TMP/fifo"
"$BIN" serve -m "$MODEL:tiny" --stdio --grace-seconds "$GRACE" --max-seqs 2 <"$TMP/fifo" >"$TMP/out" 2>"$TMP/err" &
pid=$!
PIDS+=("$pid")
exec 7>"$TMP/fifo"
for _ in $(seq 1 300); do grep -q 'all models ready' "$TMP/err" && break; sleep 0.1; done
grep -q 'all models ready' "$TMP/err" || fail "stdio: the model did not load"
for i in $(seq 1 40); do echo "{\"id\":\"r$i\",\"prompt\":\"Once upon a time\",\"max_tokens\":4000,\"ignore_eos\":true}"; done >&7
sleep 0.5
t0=$(date +%s.%N)
kill -TERM "$pid"
wait_exit "$pid" || fail "stdio: still running 20 s after SIGTERM"
elapsed=$(since "$t0")
wait "$pid" || fail "stdio: exit status after SIGTERM"
exec 7>&-
awk -v e="$elapsed" -v g="$GRACE" 'BEGIN { exit !(e < g + 3) }' || fail "stdio: exit took $elapsed s with --grace-seconds $GRACE"
[ "$(wc -l <"$TMP/out")" = 40 ] || fail "stdio: $(wc -l <"$TMP/out") result lines for 40 requests: $(head -c 600 "$TMP/out")"
grep -q '"id":null' "$TMP/out" && fail "stdio: a refusal without the request's id: $(grep '"id":null' "$TMP/out" | head -2)"
for i in $(seq 1 40); do
    line=$(grep "^{\"id\":\"r$i\"," "$TMP/out")
    [ -n "$line" ] || fail "stdio: no line for r$i"
    echo "$line" | jget '.error.message' | grep -q 'shutting down' || fail "stdio: r$i: $line"
done
ok "stdio: 40 requests refused or cut with their ids, exit in $elapsed s"

# a second SIGTERM during a long grace period ends it at once: the streams get their error
# event and [DONE] (they were cut with nothing and logged 499), the exit status is 0; and SIGHUP
# (a closed terminal) stops as SIGTERM does (it killed the daemon outright)
for sig in TERM HUP; do
    start_server second$sig --grace-seconds 600
    for i in 1 2; do curl -sN -m 60 "$URL/v1/completions" -d "$long,\"stream\":true}" >"$TMP/s2$i" & done
    for _ in $(seq 1 300); do [ -s "$TMP/s21" ] && [ -s "$TMP/s22" ] && break; sleep 0.05; done
    [ -s "$TMP/s21" ] && [ -s "$TMP/s22" ] || fail "SIG$sig: the streams did not start"
    t0=$(date +%s.%N)
    kill -$sig "$PID"
    for _ in $(seq 1 100); do grep -q 'no new connections' "$LOG" && break; sleep 0.05; done
    kill -$sig "$PID"
    wait_exit "$PID" || fail "SIG$sig: still running 20 s after the second signal (grace 600 s)"
    wait "$PID"; rc=$?
    [ "$rc" = 0 ] || fail "SIG$sig: exit status $rc after a second signal"
    grep -q "second signal .*, ending the grace period now" "$LOG" || fail "SIG$sig: no second-signal line: $(tail -5 "$LOG")"
    wait
    for i in 1 2; do
        grep -q '^data: {"error":{.*shutting down' "$TMP/s2$i" || fail "SIG$sig stream $i: no error event: $(tail -c 300 "$TMP/s2$i")"
        [ "$(grep '^data: ' "$TMP/s2$i" | tail -1)" = 'data: [DONE]' ] || fail "SIG$sig stream $i: no [DONE]"
    done
    grep -q ' 499 ' "$LOG" && fail "SIG$sig: a stream cut by the shutdown is logged 499: $(grep ' 499 ' "$LOG")"
    ok "SIG$sig twice: the grace period ends at once, streams end with an error event and [DONE], exit 0 in $(since "$t0") s"
done
echo "all passed"
