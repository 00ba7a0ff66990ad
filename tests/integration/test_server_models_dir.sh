#!/usr/bin/env bash
# test_server_models_dir.sh - `rlxd serve --models-dir`: a folder with three models made by
# rlxd-synth (one split in a subfolder) and a corrupt .gguf. Every model is listed with its
# state; requests load them on demand; concurrent first requests to an unloaded model load it
# once; --max-loaded 2 evicts the least recently used idle model; the corrupt one is listed as
# failed with its reason and the others go on serving; keep_alive 0 unloads after the request;
# POST /models/load and /models/unload; with every loaded model busy a request for another waits
# while the busy one drains (also for the model it drains for, while that one loads); an unload
# waits for the request in flight.
. "$(dirname "$0")/server_lib.sh"
SYNTH="${RLX_BIN:-build}/rlxd-synth"
[ -x "$SYNTH" ] || { echo "skip: $SYNTH not built"; exit 77; }

D="$TMP/models"
mkdir -p "$D/qw"
"$SYNTH" --arch llama --preset tiny --seed 1 -o "$D/alpha.gguf" >/dev/null || fail "synth alpha"
"$SYNTH" --arch qwen3 --preset tiny --seed 2 -o "$D/beta.gguf" >/dev/null || fail "synth beta"
"$SYNTH" --arch qwen2 --preset tiny --seed 3 --split 2 -o "$D/qw/gamma.gguf" >/dev/null || fail "synth gamma"
head -c 3000 "$D/alpha.gguf" >"$D/broken.gguf"   # cut inside its metadata
echo "not a model" >"$D/notes.txt"               # ignored: not .gguf

# start_dir NAME ARGS...: rlxd serve with no -m (sets PID, PORT, URL, LOG); /health is 200 at once
start_dir() {
    start_rlxd "$@"
    for _ in $(seq 1 100); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] && return 0
        sleep 0.1
    done
    fail "/health not 200 with nothing to load at start"
}
# state MODEL: its meta.status in /v1/models (sed, not node: this is polled; no '}' comes
# between an entry's id and its status)
state() { curl -s "$URL/v1/models" | sed -n "s|.*\"id\":\"$1\"[^}]*\"status\":\"\([a-z]*\)\".*|\1|p"; }
# wait_state MODEL STATE: polls until the model reaches it (a load or unload in the background)
wait_state() {
    for _ in $(seq 1 200); do [ "$(state "$1")" = "$2" ] && return 0; sleep 0.05; done
    fail "$1 never became $2 (it is $(state "$1"))"
}
complete() { post /v1/completions "{\"model\":\"$1\",\"prompt\":\"Once upon a time\",\"max_tokens\":4${2:+,$2}}"; }
loads() { curl -s "$URL/metrics" | sed -n "s/^rlxd_model_loads_total{model_name=\"$1\"} //p"; }

start_dir dir --models-dir "$D" --max-loaded 2

# the listing: three models unloaded, the corrupt one failed with its reason
m=$(curl -s "$URL/v1/models")
[ "$(echo "$m" | jget '.data.map(x=>x.id).join(",")')" = "alpha,beta,broken,qw/gamma" ] || fail "listing: $m"
for x in alpha beta qw/gamma; do [ "$(state $x)" = unloaded ] || fail "$x not unloaded at start: $m"; done
[ "$(state broken)" = failed ] || fail "broken not failed: $m"
err=$(echo "$m" | jget '.data.find(x=>x.id==="broken").meta.error')
case "$err" in *broken.gguf*"cannot fit"*) ;; *) fail "broken's reason: $err" ;; esac
grep -q "model 'broken' cannot be served: .*broken.gguf" "$LOG" || fail "no log line for the corrupt model"
ok "listed: 3 unloaded, the corrupt one failed with its reason"

# concurrent first requests to an unloaded model: all answered, one load
for i in 1 2 3 4 5 6; do
    curl -s -o "$TMP/c$i" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary '{"model":"alpha","prompt":"Once upon a time","max_tokens":4,"ignore_eos":true}' "$URL/v1/completions" >"$TMP/s$i" &
done
wait_curls() { for p in $(jobs -p); do [ "$p" = "$PID" ] || wait "$p"; done; }
wait_curls
for i in 1 2 3 4 5 6; do
    [ "$(cat "$TMP/s$i")" = 200 ] || fail "concurrent request $i: $(cat "$TMP/s$i") $(cat "$TMP/c$i")"
    [ "$(jget '.choices[0].finish_reason' <"$TMP/c$i")" = length ] || fail "concurrent request $i: $(cat "$TMP/c$i")"
done
[ "$(grep -c "loading model 'alpha'" "$LOG")" = 1 ] || fail "alpha loaded $(grep -c "loading model 'alpha'" "$LOG") times"
[ "$(loads alpha)" = 1 ] || fail "rlxd_model_loads_total for alpha: $(loads alpha)"
[ "$(state alpha)" = loaded ] || fail "alpha not loaded"
grep -q "model 'alpha' ready (.*backend cpu, [0-9]* threads\?, loaded in [0-9.]* s, .*weights [0-9.]* MiB, KV [0-9.]* MiB" "$LOG" ||
    fail "ready line: $(grep "model 'alpha' ready" "$LOG")"
ok "6 concurrent first requests: all 200, one load"

# LRU: alpha and beta loaded, alpha used last; gamma evicts beta
r=$(complete beta); [ "$(status)" = 200 ] || fail "beta: $(status) $r"
r=$(complete alpha); [ "$(status)" = 200 ] || fail "alpha again: $(status) $r"
[ "$(state beta)" = loaded ] || fail "beta not loaded"
r=$(complete qw/gamma); [ "$(status)" = 200 ] || fail "gamma (split, in a subfolder): $(status) $r"
[ "$(echo "$r" | jget .model)" = qw/gamma ] || fail "gamma answered as $(echo "$r" | jget .model)"
wait_state beta unloaded
[ "$(state alpha)" = loaded ] || fail "alpha (used more recently than beta) was evicted"
[ "$(state qw/gamma)" = loaded ] || fail "gamma not loaded"
grep -q "unloading model 'beta' (least recently used, making room for 'qw/gamma')" "$LOG" || fail "no eviction line for beta"
grep -q "unloading model 'alpha'" "$LOG" && fail "alpha was unloaded"
ok "--max-loaded 2: the least recently used (beta) evicted, alpha kept"

# the corrupt model: a clear error, and the others go on
r=$(complete broken)
[ "$(status)" = 500 ] || fail "broken: $(status) $r"
[ "$(echo "$r" | jget .error.code)" = model_load_failed ] || fail "broken error: $r"
case "$(echo "$r" | jget .error.message)" in *"'broken' failed to load"*broken.gguf*) ;; *) fail "broken message: $r" ;; esac
r=$(complete alpha); [ "$(status)" = 200 ] || fail "alpha after broken: $(status) $r"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] || fail "/health after broken"
ok "the corrupt model fails alone"

# one model's entry, also for an id holding '/'
[ "$(curl -s "$URL/v1/models/qw/gamma" | jget .meta.status)" = loaded ] || fail "GET /v1/models/qw/gamma"
[ "$(curl -s "$URL/v1/models/broken" | jget .meta.status)" = failed ] || fail "GET /v1/models/broken"
# unknown model: 404
r=$(complete nope); [ "$(status)" = 404 ] || fail "unknown model: $(status) $r"
[ "$(echo "$r" | jget .error.code)" = model_not_found ] || fail "unknown model: $r"

# keep_alive 0: unloaded once its request ends; a bad keep_alive is a 400 naming it
r=$(complete qw/gamma '"keep_alive":"soon"'); [ "$(status)" = 400 ] || fail "keep_alive soon: $(status) $r"
[ "$(echo "$r" | jget .error.param)" = keep_alive ] || fail "keep_alive error: $r"
r=$(complete qw/gamma '"keep_alive":0'); [ "$(status)" = 200 ] || fail "gamma keep_alive 0: $(status) $r"
wait_state qw/gamma unloaded
grep -q "unloading model 'qw/gamma' (keep_alive 0)" "$LOG" || fail "no keep_alive 0 unload line"
[ "$(state alpha)" = loaded ] || fail "alpha unloaded by gamma's keep_alive"
ok "keep_alive 0 unloads after the request"

# a duration: kept while it lasts (chat, Ollama's string form)
r=$(post /v1/chat/completions '{"model":"beta","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"keep_alive":"10m"}')
[ "$(status)" = 200 ] || fail "beta chat: $(status) $r"
[ "$(curl -s "$URL/v1/models" | jget '.data.find(m=>m.id==="beta").meta.keep_alive')" = 600 ] || fail "keep_alive 10m not 600 s"

# operators: unload and load
r=$(post /models/unload '{"model":"alpha"}'); [ "$(status)" = 200 ] || fail "unload alpha: $(status) $r"
wait_state alpha unloaded
r=$(post /models/load '{"model":"qw/gamma"}'); [ "$(status)" = 200 ] || fail "load gamma: $(status) $r"
[ "$(echo "$r" | jget .meta.status)" = loaded ] || fail "load answered before loaded: $r"
[ "$(echo "$r" | jget .meta.keep_alive)" = -1 ] || fail "load: keep_alive not --keep-alive's: $r"
r=$(post /models/load '{"model":"qw/gamma","keep_alive":"90s"}'); [ "$(status)" = 200 ] || fail "load gamma 90s: $(status) $r"
[ "$(echo "$r" | jget .meta.keep_alive)" = 90 ] || fail "load: keep_alive 90s: $r"
r=$(post /models/load '{"model":"qw/gamma","keep_alive":"x"}'); [ "$(status)" = 400 ] || fail "load keep_alive x: $(status) $r"
r=$(post /models/load '{"model":"nope"}'); [ "$(status)" = 404 ] || fail "load unknown: $(status) $r"
# a NUL cut the name short: "qw/gamma\u0000junk" unloaded qw/gamma; now a 400 as on the other routes
for op in load unload; do
    r=$(post /models/$op '{"model":"qw/gamma\u0000junk"}'); [ "$(status)" = 400 ] || fail "$op NUL: $(status) $r"
    echo "$r" | grep -q 'NUL' || fail "$op NUL message: $r"
done
# a body past the loop thread's parse limit says so (it said the body was not {"model": NAME})
long=$(head -c 20000 /dev/zero | tr '\0' a)
r=$(post /models/load "{\"model\":\"$long\"}"); [ "$(status)" = 400 ] || fail "load long name: $(status)"
echo "$r" | grep -q "takes at most" || fail "load long name: $r"
r=$(post /models/unload '{"name":"alpha"}'); [ "$(status)" = 400 ] || fail "unload without model: $(status) $r"
r=$(post /models/load 'not json'); [ "$(status)" = 400 ] || fail "load bad body: $(status) $r"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X GET "$URL/models/load")" = 405 ] || fail "GET /models/load"
curl -s "$URL/metrics" | grep -q '^rlxd_model_loaded{model_name="qw/gamma"} 1$' || fail "rlxd_model_loaded metric"
curl -s "$URL/metrics" | grep -q '^rlxd_model_evictions_total{model_name="beta"} 1$' || fail "eviction metric"
# a failed model whose file has not changed is not loaded again by POST /models/load: it answers
# the failure (the retry evicted a loaded model first, to fail the same way: one per call)
before="$(state beta) $(state qw/gamma)"
[ "$before" = "loaded loaded" ] || fail "setup: beta and gamma not both loaded: $before"
for _ in 1 2; do
    r=$(post /models/load '{"model":"broken"}'); [ "$(status)" = 500 ] || fail "load broken: $(status) $r"
    [ "$(echo "$r" | jget .error.code)" = model_load_failed ] || fail "load broken: $r"
done
[ "$(state broken)" = failed ] || fail "broken after a retry: $(state broken)"
[ "$(state beta) $(state qw/gamma)" = "$before" ] || fail "loading the failed model evicted: $(state beta) $(state qw/gamma)"
grep -q "making room for 'broken'" "$LOG" && fail "a model was unloaded to make room for the failed one"
ok "POST /models/load and /models/unload"
stop_server

# a load after an unload asked while the model was in use: the load's 200 holds (the unload
# stayed asked and took the model once the request ended). A model big enough to stay busy.
D2="$TMP/models2"
mkdir -p "$D2"
ln -s "$(cd "$SHARED/models" && pwd)/synth-qwen3-tiny-f32.gguf" "$D2/big.gguf"
start_dir dir2 --models-dir "$D2" --threads 1 --ctx 2048
r=$(post /models/load '{"model":"big"}'); [ "$(status)" = 200 ] || fail "load big: $(status) $r"
# (streamed, so that closing it ends the request once the checks are done: generating all of it
# took minutes under the sanitizers)
curl -s -N -o "$TMP/hold.json" -H 'Content-Type: application/json' "$URL/v1/completions" \
    --data-binary '{"model":"big","prompt":"hi","max_tokens":1500,"ignore_eos":true,"n":8,"stream":true}' &
hold=$!
for _ in $(seq 1 200); do
    curl -s "$URL/metrics" | grep -q '^rlxd_num_requests_running{model_name="big"} [1-9]' && break; sleep 0.05
done
r=$(post /models/unload '{"model":"big"}'); [ "$(echo "$r" | jget .meta.status)" = loaded ] || fail "unload of a busy model: $r"
# a request now waits for the unload; the load below keeps the model and runs it (from the loop:
# answered inside the load's handler, libmicrohttpd was re-entered and freed that connection twice)
curl -s -o "$TMP/w.json" -H 'Content-Type: application/json' --data-binary '{"model":"big","prompt":"hi","max_tokens":2}' \
    "$URL/v1/completions" &
PW=$!
sleep 0.3
r=$(post /models/load '{"model":"big"}'); [ "$(status)" = 200 ] || fail "load after unload: $(status) $r"
for _ in $(seq 1 100); do kill -0 "$PW" 2>/dev/null || break; sleep 0.1; done
kill -0 "$PW" 2>/dev/null && fail "the request that waited for the cancelled unload still waits"
wait "$PW"
grep -q '"finish_reason"' "$TMP/w.json" || fail "the request that waited: $(cat "$TMP/w.json")"
kill -0 "$hold" 2>/dev/null || fail "the held request ended before the checks: $(tail -c 300 "$TMP/hold.json")"
grep -q '"text"' "$TMP/hold.json" || fail "the held request streamed nothing: $(head -c 300 "$TMP/hold.json")"
kill "$hold"; wait "$hold" 2>/dev/null
# the client gone, the request ends; the unload asked before the load must not follow it
for _ in $(seq 1 200); do
    curl -s "$URL/metrics" | grep -q '^rlxd_num_requests_running{model_name="big"} 0' && break; sleep 0.05
done
curl -s "$URL/metrics" | grep -q '^rlxd_num_requests_running{model_name="big"} 0' || fail "the closed request still runs"
sleep 0.3
[ "$(state big)" = loaded ] || fail "big unloaded after POST /models/load answered 200: $(state big)"
stop_server
ok "a load after an unload asked while busy keeps the model"

# --stdio: lines naming unloaded models wait for their loads (one load per model); the
# default model is the folder's first
printf '%s\n' '{"id":1,"model":"beta","prompt":"x","max_tokens":2}' '{"id":2,"model":"qw/gamma","prompt":"x","max_tokens":2}' \
    '{"id":3,"prompt":"x","max_tokens":2}' '{"id":4,"model":"beta","prompt":"y","max_tokens":2}' \
    '{"id":5,"model":"broken","prompt":"x","max_tokens":2}' |
    "$BIN" serve --models-dir "$D" --stdio >"$TMP/stdio.out" 2>"$TMP/stdio.err" || fail "stdio: exit $?"
for i in 1 2 3 4; do
    grep -q "^{\"id\":$i,\"ok\":true" "$TMP/stdio.out" || fail "stdio line $i: $(cat "$TMP/stdio.out")"
done
grep -q '^{"id":5,"ok":false,.*"code":"model_load_failed"' "$TMP/stdio.out" || fail "stdio broken: $(cat "$TMP/stdio.out")"
[ "$(grep -c "loading model 'beta'" "$TMP/stdio.err")" = 1 ] || fail "stdio: beta loaded more than once"
grep -q "loading model 'alpha'" "$TMP/stdio.err" || fail "stdio: the default model (alpha) was not loaded"
ok "--stdio lines wait for their models"

# an empty folder: healthy, lists nothing, a request is a 404 saying so
mkdir -p "$TMP/empty"
start_dir empty --models-dir "$TMP/empty"
[ "$(curl -s "$URL/v1/models" | jget '.data.length')" = 0 ] || fail "empty: models listed"
r=$(post /v1/completions '{"prompt":"x"}'); [ "$(status)" = 404 ] || fail "empty: $(status) $r"
case "$r" in *"holds no GGUF model"*) ;; *) fail "empty: $r" ;; esac
stop_server
ok "an empty folder: healthy, nothing listed"

# a file named in another encoding (Latin-1 "café"): the listing stays valid JSON, its bytes as
# U+FFFD (the raw byte made every client's parse of /v1/models fail)
mkdir -p "$TMP/enc"
cp "$D/alpha.gguf" "$TMP/enc/$(printf 'caf\351').gguf"
start_dir enc --models-dir "$TMP/enc"
curl -s "$URL/v1/models" >"$TMP/enc.json"
LC_ALL=C grep -q "$(printf 'caf\351')" "$TMP/enc.json" && fail "/v1/models holds the name's raw Latin-1 byte (not UTF-8)"
m=$(cat "$TMP/enc.json")
[ "$(echo "$m" | jget '.data.map(x=>x.id+"|"+x.meta.path.endsWith("caf\ufffd.gguf")).join()')" = "caf$(printf '\357\277\275')|true" ] ||
    fail "a Latin-1 file name in /v1/models: $(echo "$m" | od -c | head -5)"
stop_server
ok "a file name that is not UTF-8 is listed as valid JSON"

# a memory budget: alpha loaded holds 1.5 MiB (weights and KV), so beta (0.5 MiB of weights
# before its first load) does not fit 1 MiB beside it: alpha goes
start_dir mem --models-dir "$D" --max-loaded-mem 1
r=$(complete alpha); [ "$(status)" = 200 ] || fail "mem: alpha: $(status) $r"
[ "$(curl -s "$URL/v1/models" | jget '.data.find(m=>m.id==="alpha").meta.memory_bytes > 1048576')" = true ] ||
    fail "mem: alpha's memory_bytes"
r=$(complete beta); [ "$(status)" = 200 ] || fail "mem: beta: $(status) $r"
wait_state alpha unloaded
grep -q "unloading model 'alpha' (least recently used, making room for 'beta')" "$LOG" || fail "mem: no eviction line"
ok "--max-loaded-mem evicts the LRU model"
# alpha alone (1.5 MiB, known since it loaded) can never fit 1 MiB: a clear error, not a 503
# "retry shortly" for ever with nothing in use
hdr=$(curl -s -D - -o "$TMP/big.json" -H 'Content-Type: application/json' \
    --data-binary '{"model":"alpha","prompt":"x","max_tokens":2}' "$URL/v1/completions")
echo "$hdr" | head -1 | grep -q ' 500' || fail "mem: alpha too big: $(echo "$hdr" | head -1) $(cat "$TMP/big.json")"
echo "$hdr" | grep -qi '^retry-after:' && fail "mem: Retry-After on a model that can never fit"
grep -q "cannot be loaded: it needs 1\.[0-9] MiB (what it held when last loaded), more than --max-loaded-mem 1 MiB" "$TMP/big.json" ||
    fail "mem: too-big message: $(cat "$TMP/big.json")"
r=$(post /models/load '{"model":"alpha"}'); [ "$(status)" = 500 ] || fail "mem: POST /models/load of a too-big model: $(status) $r"
ok "a model bigger than --max-loaded-mem alone is an error, not a retry"
stop_server

# a second folder: a slow model (a stream runs for seconds) and alpha, --max-loaded 1
D2="$TMP/models2"
mkdir -p "$D2"
cp "$D/alpha.gguf" "$D2/alpha.gguf"
"$SYNTH" --arch llama --preset tiny --hidden 768 --layers 6 --heads 12 --kv-heads 4 --ffn 2048 --ctx 8192 \
    --type q8_0 --vocab-from "$SHARED/models/stories260K.gguf" -o "$D2/slow.gguf" >/dev/null || fail "synth slow"
start_dir busy --models-dir "$D2" --max-loaded 1
# a stream of seconds (1000 tokens: ~5-10 s; under the sanitizers, ~10x slower, 250 are 20 s)
slow_tokens=1000
ldd "$BIN" 2>/dev/null | grep -q libasan && slow_tokens=250
stream_slow() { # FILE [TOKENS]: a long stream from slow in the background (sets SPID)
    curl -s -N -H 'Content-Type: application/json' --data-binary \
        "{\"model\":\"slow\",\"prompt\":\"Once upon a time\",\"max_tokens\":${2:-$slow_tokens},\"ignore_eos\":true,\"stream\":true}" \
        "$URL/v1/completions" >"$1" &
    SPID=$!
    for _ in $(seq 1 300); do grep -q '"text"' "$1" 2>/dev/null && return 0; sleep 0.05; done
    fail "the slow stream did not start"
}
stream_slow "$TMP/s1"
# the slow model's 33 MB were read with a log line per 10% (small models log none)
[ "$(grep -c "loading model 'slow': [0-9]*% ([0-9.]* of [0-9.]* MiB, [0-9]* MiB/s)" "$LOG")" = 10 ] ||
    fail "progress lines: $(grep "loading model 'slow':" "$LOG")"
grep -q "loading model 'slow': 100% " "$LOG" || fail "no 100% line"
grep -q "loading model 'alpha': [0-9]*%" "$TMP/dir.log" && fail "progress lines for a small model"
ok "load progress logged per 10%"
# unload while a request runs: answered at once, the stream finishes whole, then the unload
r=$(post /models/unload '{"model":"slow"}'); [ "$(status)" = 200 ] || fail "unload slow: $(status) $r"
[ "$(echo "$r" | jget .meta.status)" = loaded ] || fail "slow unloaded under its stream: $r"
# a request meanwhile waits for the unload and the load after it: the model drains (new requests
# kept a busy model in use, so an unload under steady traffic never happened)
curl -s -o "$TMP/s2.json" -H 'Content-Type: application/json' \
    --data-binary '{"model":"slow","prompt":"x","max_tokens":2}' "$URL/v1/completions" &
P2=$!
sleep 0.5
kill -0 "$P2" 2>/dev/null || fail "a request for a model draining for its unload ran at once: $(cat "$TMP/s2.json")"
wait "$SPID"
grep -q '^data: \[DONE\]' "$TMP/s1" || fail "the stream was cut: $(tail -2 "$TMP/s1")"
grep -q '"finish_reason":"length"' "$TMP/s1" || fail "the stream did not finish normally"
wait "$P2"
grep -q '"finish_reason"' "$TMP/s2.json" || fail "the request that waited: $(cat "$TMP/s2.json")"
grep -q "model 'slow' unloaded" "$LOG" || fail "slow was not unloaded before the request that waited"
[ "$(loads slow)" = 2 ] || fail "slow loads: $(loads slow) (the waiting request should load it again)"
r=$(complete alpha); [ "$(status)" = 200 ] || fail "alpha once slow is idle: $(status) $r"
ok "an unload waits for the request in flight; new requests wait for it and the load after"
# at --max-loaded with the loaded model busy, a request for another one waits: the busy model
# drains (its stream ends whole, new requests for it wait) and unloads, then the other loads (it
# was a 503 for ever under steady traffic to the busy model)
stream_slow "$TMP/s3"
curl -s -o "$TMP/busy.json" -H 'Content-Type: application/json' \
    --data-binary '{"model":"alpha","prompt":"x","max_tokens":2}' "$URL/v1/completions" &
P3=$!
sleep 0.5
kill -0 "$P3" 2>/dev/null || fail "alpha answered while slow streamed at --max-loaded 1: $(cat "$TMP/busy.json")"
grep -q "draining model 'slow' to make room for 'alpha'" "$LOG" || fail "no drain line: $(grep -i slow "$LOG" | tail -3)"
wait "$SPID"
grep -q '^data: \[DONE\]' "$TMP/s3" && grep -q '"finish_reason":"length"' "$TMP/s3" || fail "the draining stream was cut"
wait "$P3"
grep -q '"finish_reason"' "$TMP/busy.json" || fail "the request that waited for room: $(cat "$TMP/busy.json")"
[ "$(state alpha)" = loaded ] && [ "$(state slow)" = unloaded ] || fail "after the drain: alpha $(state alpha), slow $(state slow)"
ok "busy at --max-loaded: a request for another model waits while the busy one drains"
# ping-pong at --max-loaded 1: slow streams, alpha is asked for (slow drains, alpha's load
# waits), then slow again while it drains: it waits for its unload; then alpha is loading and no
# loaded model can make room for slow - alpha is marked to drain once loaded (its waiting request
# runs first), then slow loads again (that request got 503 "all in use")
la=$(loads alpha); ls_=$(loads slow)
stream_slow "$TMP/s4" $((slow_tokens / 2))
curl -s -o "$TMP/pp_alpha.json" -H 'Content-Type: application/json' \
    --data-binary '{"model":"alpha","prompt":"x","max_tokens":2}' "$URL/v1/completions" &
P4=$!
for _ in $(seq 1 100); do [ "$(grep -c "draining model 'slow' to make room for 'alpha'" "$LOG")" = 2 ] && break; sleep 0.05; done
curl -s -o "$TMP/pp_slow.json" -H 'Content-Type: application/json' \
    --data-binary '{"model":"slow","prompt":"x","max_tokens":2}' "$URL/v1/completions" &
P5=$!
wait "$SPID" "$P4" "$P5"
grep -q '"finish_reason":"length"' "$TMP/s4" || fail "the draining slow stream was cut"
grep -q '"finish_reason"' "$TMP/pp_alpha.json" || fail "alpha, asked while slow streamed: $(cat "$TMP/pp_alpha.json")"
grep -q '"finish_reason"' "$TMP/pp_slow.json" || fail "slow, asked while it drained for alpha: $(cat "$TMP/pp_slow.json")"
grep -q "draining model 'alpha' once loaded, to make room for 'slow'" "$LOG" || fail "no drain-after-load line"
[ "$(loads slow)" = $((ls_ + 2)) ] && [ "$(loads alpha)" = $((la + 1)) ] ||
    fail "loads: slow $ls_ -> $(loads slow), alpha $la -> $(loads alpha)"
ok "ping-pong at --max-loaded 1: a request for the model draining for a loading one waits, not 503"
# the same, and the model marked to drain once loaded fails to load (its file was cut meanwhile):
# the request that waited for its room still gets its model (it waited for ever)
ls_=$(loads slow)
stream_slow "$TMP/s5" $((slow_tokens / 2))
curl -s -o "$TMP/pf_alpha.json" -H 'Content-Type: application/json' \
    --data-binary '{"model":"alpha","prompt":"x","max_tokens":2}' "$URL/v1/completions" &
P6=$!
for _ in $(seq 1 100); do [ "$(grep -c "draining model 'slow' to make room for 'alpha'" "$LOG")" = 3 ] && break; sleep 0.05; done
curl -s -m 60 -o "$TMP/pf_slow.json" -H 'Content-Type: application/json' \
    --data-binary '{"model":"slow","prompt":"x","max_tokens":2}' "$URL/v1/completions" &
P7=$!
head -c 3000 "$D/alpha.gguf" >"$D2/alpha.gguf" # cut inside its metadata: its next load fails
wait "$SPID" "$P6" "$P7"
grep -q '"finish_reason":"length"' "$TMP/s5" || fail "the slow stream was cut"
grep -q '"code":"model_load_failed"' "$TMP/pf_alpha.json" || fail "alpha, cut before its load: $(cat "$TMP/pf_alpha.json")"
grep -q '"finish_reason"' "$TMP/pf_slow.json" || fail "slow, waiting for the room of a load that failed: $(cat "$TMP/pf_slow.json")"
[ "$(grep -c "draining model 'alpha' once loaded, to make room for 'slow'" "$LOG")" = 2 ] || fail "no second drain-after-load line"
[ "$(loads slow)" = $((ls_ + 1)) ] || fail "slow loads: $ls_ -> $(loads slow) (loaded before, then again once alpha failed)"
ok "a model marked to drain once loaded that fails to load: the request waiting for its room runs"
stop_server
echo "all passed"
