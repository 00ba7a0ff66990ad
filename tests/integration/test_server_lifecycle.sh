#!/usr/bin/env bash
# test_server_lifecycle.sh - the daemon's life around requests: a client that disconnects
# cancels its generation (seen in /metrics and the access log), the limit on requests being
# answered (--max-connections) answers 503 + Retry-After, and SIGTERM lets a request in flight finish before exiting 0.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v node >/dev/null || { echo "skip: node missing"; exit 77; }

# Streams that must still be running when the test looks: on the CPU, stories260K streams its
# whole 512-token context in a fraction of a second, so the slow synth model serves them; on
# Vulkan (lavapipe, slower by orders of magnitude) stories260K is slow enough, and the slow
# model would outlast the drain's grace period.
if [ "${RLXD_BACKEND:-cpu}" = cpu ]; then
    use_slow_model
    N_LONG=4000 N_QUEUE=6000 N_DRAIN=300
else
    N_LONG=480 N_QUEUE=400 N_DRAIN=200
fi
start_server life --max-connections 1
# ignore_eos: seconds of streaming, so the hang-up comes midway
long='{"prompt":"Once upon a time","max_tokens":'$N_LONG',"ignore_eos":true,"stream":true}'

# client disconnect: read the first bytes of a stream, then hang up
curl -sN -m 30 "$URL/v1/completions" -d "$long" | head -c 200 >/dev/null
cancelled=""
for _ in $(seq 1 50); do
    m=$(curl -s "$URL/metrics")
    if echo "$m" | grep -q '^rlxd_requests_cancelled_total [1-9]'; then cancelled=1; break; fi
    sleep 0.1
done
[ -n "$cancelled" ] || fail "disconnect did not cancel: $(echo "$m" | grep cancelled)"
# a client that half-closes after its request (nc -N, some HTTP/1.0 clients) counts as gone, as
# for llama-server; it gets the connection closed, not the empty 500 it used to read
python3 - "$PORT" "$N_LONG" >"$TMP/half" <<'PY' || fail "half-close client"
import socket, sys
body = ('{"prompt":"Once upon a time","max_tokens":%s,"ignore_eos":true}' % sys.argv[2]).encode()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=60)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
s.shutdown(socket.SHUT_WR)
d = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    d += b
print(d.decode(errors="replace"))
PY
grep -q ' 500 ' "$TMP/half" && fail "half-closed client got: $(head -3 "$TMP/half")"
for _ in $(seq 1 50); do [ "$(grep -c 'POST /v1/completions 499' "$LOG")" -ge 2 ] && break; sleep 0.1; done
[ "$(grep -c 'POST /v1/completions 499' "$LOG")" -ge 2 ] || fail "half-close not logged 499: $(grep 'POST /v1/completions' "$LOG")"
grep -q 'POST /v1/completions 499 .*finish=cancelled' "$LOG" || fail "access log lacks the 499 line"
grep -q 'POST /v1/completions 499 .*prompt_tokens=[1-9][0-9]* completion_tokens=[1-9]' "$LOG" ||
    fail "the 499 line lacks the tokens used so far: $(grep ' 499 ' "$LOG")"
for _ in $(seq 1 50); do
    echo "$(curl -s "$URL/metrics")" | grep -q '^rlxd_num_requests_running{model_name="tiny"} 0' && break
    sleep 0.1
done
echo "$(curl -s "$URL/metrics")" | grep -q '^rlxd_num_requests_running{model_name="tiny"} 0' ||
    fail "the cancelled sequence is still running"
ok disconnect cancels

# connection limit: with one request being answered (a long stream), another one gets 503 +
# Retry-After; a socket that has not sent a request does not count (test_server_slowloris.sh)
exec 3<>/dev/tcp/127.0.0.1/"$PORT" || fail "cannot open a raw connection"
sleep 0.2
[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$URL/v1/models")" = 200 ] ||
    fail "an idle connection took the only request slot"
exec 3>&-
# a stream long enough to outlast the check on a loaded machine (cancelled by the hang-up after)
# (its first bytes tell when it runs)
curl -sN -m 60 "$URL/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":'$N_QUEUE',"ignore_eos":true,"stream":true}' >"$TMP/hold" &
hold=$!
for _ in $(seq 1 100); do
    [ -s "$TMP/hold" ] && break
    sleep 0.1
done
[ -s "$TMP/hold" ] || fail "the long stream did not start"
hdr=$(curl -s -m 5 -D - -o "$TMP/busy" "$URL/v1/models")
# the probes answer at the limit too (a saturated server is alive; its metrics are wanted then):
# before, /health's 503 would have had a liveness probe restart a busy server
h=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$URL/health")
mt=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$URL/metrics")
kill "$hold" 2>/dev/null
wait "$hold" 2>/dev/null
echo "$hdr" | head -1 | grep -q ' 503' || fail "no 503 at the connection limit: $(echo "$hdr" | head -1)"
echo "$hdr" | grep -qi '^retry-after:' || fail "503 without Retry-After"
grep -q '"error"' "$TMP/busy" || fail "503 body not an error object"
[ "$h" = 200 ] && [ "$mt" = 200 ] || fail "/health $h, /metrics $mt at the connection limit"
ok connection limit 503, the probes still answered
sleep 0.3
stop_server

# a full waiting queue: one sequence runs, one waits (--max-queue 1), the next gets 503 +
# Retry-After. Chat streams send their role chunk once submitted, which tells us where each is.
start_server queue --max-seqs 1 --max-queue 1
chat_long='{"messages":[{"role":"user","content":"Tell a story"}],"max_tokens":'$N_QUEUE',"ignore_eos":true,"stream":true}'
curl -sN -m 60 "$URL/v1/chat/completions" -d "$chat_long" >"$TMP/q1.sse" &
q1=$!
for _ in $(seq 1 600); do grep -q '"content":"[^"]' "$TMP/q1.sse" && break; sleep 0.05; done
grep -q '"content":"[^"]' "$TMP/q1.sse" || fail "the first stream did not start generating"
curl -sN -m 60 "$URL/v1/chat/completions" -d "$chat_long" >"$TMP/q2.sse" &
q2=$!
for _ in $(seq 1 600); do [ -s "$TMP/q2.sse" ] && break; sleep 0.05; done
[ -s "$TMP/q2.sse" ] || fail "the second stream was not accepted"
grep -q '"content":"[^"]' "$TMP/q2.sse" && fail "the second stream runs although --max-seqs is 1"
hdr=$(curl -s -D - -o "$TMP/full" "$URL/v1/completions" -d '{"prompt":"Once","max_tokens":2}')
echo "$hdr" | head -1 | grep -q ' 503' || fail "no 503 with a full queue: $(echo "$hdr" | head -1) $(cat "$TMP/full")"
echo "$hdr" | grep -qi '^retry-after:' || fail "queue 503 without Retry-After"
[ "$(jget '.error.code' <"$TMP/full")" = server_busy ] || fail "queue 503 body: $(cat "$TMP/full")"
kill "$q1" "$q2" 2>/dev/null
wait "$q1" "$q2" 2>/dev/null
ok full queue 503 + Retry-After
stop_server

# SIGTERM drain: a stream in flight completes, new connections are refused, exit 0
# (still running at SIGTERM, well within the grace even in a sanitizer build on a busy machine:
# 1000 tokens once took over 30 s there under ctest -j 2)
start_server drain --grace-seconds 120
curl -sN -m 150 "$URL/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":'$N_DRAIN',"ignore_eos":true,"stream":true}' >"$TMP/drain.sse" &
client=$!
for _ in $(seq 1 1500); do [ -s "$TMP/drain.sse" ] && break; sleep 0.02; done
[ -s "$TMP/drain.sse" ] || fail "the stream did not start"
kill -TERM "$PID"
sleep 0.1
curl -s -m 2 -o /dev/null "$URL/health" && fail "still accepting connections after SIGTERM"
wait "$client" || fail "in-flight request failed during drain"
grep -q 'signal 15: no new connections, finishing 1 request' "$LOG" || fail "the request was not in flight at SIGTERM"
tail -c 14 "$TMP/drain.sse" | grep -q 'data: \[DONE\]' || fail "drained stream did not end with [DONE]"
grep -q '"finish_reason":"length"' "$TMP/drain.sse" || fail "drained stream incomplete"
for _ in $(seq 1 150); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$PID" 2>/dev/null && fail "rlxd did not exit after draining"
wait "$PID"; rc=$?
[ "$rc" = 0 ] || fail "exit status $rc after SIGTERM"
ok sigterm drain exit 0

# a model that cannot load: the daemon says why and exits non-zero
"$BIN" serve -m /nonexistent/model.gguf --port 0 2>"$TMP/bad.log" &
bad=$!
PIDS+=("$bad")
for _ in $(seq 1 100); do kill -0 "$bad" 2>/dev/null || break; sleep 0.1; done
wait "$bad"; rc=$?
[ "$rc" != 0 ] || fail "bad model exited 0"
grep -q "cannot load model" "$TMP/bad.log" || fail "no load error message: $(cat "$TMP/bad.log")"
ok bad model
# while a model loads, /health and the model's routes answer 503 (+ Retry-After): a FIFO as
# the model file keeps the loader blocked in open() until we open its other end
mkfifo "$TMP/slow.gguf" || fail "mkfifo"
"$BIN" serve -m "$TMP/slow.gguf:slow" --port 0 2>"$TMP/slow.log" &
slow=$!
PIDS+=("$slow")
LOG="$TMP/slow.log"
PORT=""
for _ in $(seq 1 100); do
    PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$LOG" | head -1)
    [ -n "$PORT" ] && break
    sleep 0.1
done
[ -n "$PORT" ] || fail "no port while loading"
URL="http://127.0.0.1:$PORT"
hdr=$(curl -s -D - -o "$TMP/h.json" "$URL/health")
echo "$hdr" | head -1 | grep -q ' 503' || fail "/health while loading: $(echo "$hdr" | head -1)"
echo "$hdr" | grep -qi '^retry-after:' || fail "/health 503 without Retry-After"
[ "$(jget '.error.type' <"$TMP/h.json")" = unavailable_error ] || fail "health error shape: $(cat "$TMP/h.json")"
r=$(post /v1/completions '{"prompt":"x"}')
[ "$(status)" = 503 ] || fail "completions while loading: $(status) $r"
[ "$(curl -s "$URL/v1/models" | jget '.data[0].meta.status')" = loading ] || fail "models while loading"
exec 5>"$TMP/slow.gguf"; exec 5>&-   # the loader now fails: the daemon says so and exits non-zero
for _ in $(seq 1 100); do kill -0 "$slow" 2>/dev/null || break; sleep 0.1; done
wait "$slow"; rc=$?
[ "$rc" != 0 ] || fail "a model that failed to load exited 0"
grep -q "cannot load model 'slow'" "$LOG" || fail "no load error message"
ok 503 while loading

# SIGTERM while a load never returns (a FIFO nobody writes, as a hung network mount would hold
# open()): the daemon waits --stop-timeout, says what it waited for and exits 1 (it used to
# never exit); a second signal while it waits ends it at once.
stuck_stop() { # $1: --stop-timeout, $2: a second signal once it waits; prints the exit status
    rm -f "$TMP/stuck.gguf"; mkfifo "$TMP/stuck.gguf" || fail "mkfifo"
    "$BIN" serve -m "$TMP/stuck.gguf:stuck" --port 0 --grace-seconds 1 --stop-timeout "$1" 2>"$TMP/stuck.log" &
    local p=$! t
    PIDS+=("$p")
    for _ in $(seq 1 100); do grep -q "loading model 'stuck'" "$TMP/stuck.log" && break; sleep 0.1; done
    kill -TERM "$p"
    for _ in $(seq 1 100); do grep -q "rlxd: waiting for model 'stuck' (loading) to stop" "$TMP/stuck.log" && break; sleep 0.1; done
    grep -q "rlxd: waiting for model 'stuck' (loading) to stop" "$TMP/stuck.log" || fail "no waiting line: $(cat "$TMP/stuck.log")"
    [ -n "$2" ] && kill -TERM "$p"
    for t in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && fail "rlxd did not exit with a load stuck (after ${t}00 ms): $(cat "$TMP/stuck.log")"
    wait "$p"; echo $?
}
rc=$(stuck_stop 2 "")
[ "$rc" = 1 ] || fail "exit status $rc with a stuck load"
grep -q "the stop took over --stop-timeout 2 s; exiting without waiting for model 'stuck' (loading)" "$TMP/stuck.log" ||
    fail "stuck stop message: $(cat "$TMP/stuck.log")"
rc=$(stuck_stop 600 second)
[ "$rc" = 1 ] || fail "exit status $rc after a second signal"
grep -q "signal 15 while stopping; exiting without waiting for model 'stuck' (loading)" "$TMP/stuck.log" ||
    fail "second signal message: $(cat "$TMP/stuck.log")"
ok stop bounded with a stuck load
# clients that close after part of their body: their sockets end at once, logged 499 (they were
# held until --request-timeout, 30 s, and counted as request timeouts, 408)
start_server midbody
n499=$(grep -c ' 499 ' "$LOG")
python3 - "$PORT" <<'PY' || fail "mid-body close clients"
import socket, sys
body = b'{"prompt":"Once upon a time","max_tokens":4}'
for _ in range(3):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:10])
    s.close()
PY
for _ in $(seq 1 50); do [ "$(grep -c ' 499 ' "$LOG")" -ge $((n499 + 3)) ] && break; sleep 0.1; done
[ "$(grep -c ' 499 ' "$LOG")" -ge $((n499 + 3)) ] || fail "clients gone mid-body not ended at once: $(tail -3 "$LOG")"
grep -q ' 408 ' "$LOG" && fail "a client gone mid-body was counted as a timeout"
stop_server
ok "a client gone mid-body ends at once (499, not a 408 after --request-timeout)"
echo "all passed"
