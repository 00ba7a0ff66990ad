#!/usr/bin/env bash
# test_server_models_rescan.sh - `rlxd serve --models-dir` follows the folder after start
# (server/models_scan.c): a model copied in appears in /v1/models (and a request may name it at
# once); one deleted while unloaded disappears; one deleted while loaded keeps serving, listed
# with meta.file_removed, until it is unloaded, then disappears; a file put back is served
# again; a corrupt file added later is listed as failed and the others serve on; a changed
# profile of an unloaded model is read again. The folder is read again at most every 2 s
# (RLX_MODELS_RESCAN_S): the test polls.
. "$(dirname "$0")/server_lib.sh"
SYNTH="${RLX_BIN:-build}/rlxd-synth"
[ -x "$SYNTH" ] || { echo "skip: $SYNTH not built"; exit 77; }

D="$TMP/models"
S="$TMP/spare"
mkdir -p "$D" "$S/sub"
"$SYNTH" --arch llama --preset tiny --seed 1 -o "$D/alpha.gguf" >/dev/null || fail "synth alpha"
"$SYNTH" --arch qwen3 --preset tiny --seed 2 -o "$S/beta.gguf" >/dev/null || fail "synth beta"
"$SYNTH" --arch llama --preset tiny --seed 3 -o "$S/sub/gamma.gguf" >/dev/null || fail "synth gamma"

ids() { curl -s "$URL/v1/models" | jget '.data.map(x=>x.id).join(",")'; }
# until_ids WANT: polls /v1/models (each GET may rescan) until the listed ids are WANT
until_ids() {
    local got
    for _ in $(seq 1 100); do got=$(ids); [ "$got" = "$1" ] && return 0; sleep 0.1; done
    fail "/v1/models lists '$got', not '$1'"
}
meta() { curl -s "$URL/v1/models" | jget ".data.find(x=>x.id==\"$1\")?.meta$2"; }
complete() { post /v1/completions "{\"model\":\"$1\",\"prompt\":\"Once upon a time\",\"max_tokens\":3${2:+,$2}}"; }

start_rlxd rescan --models-dir "$D"
[ "$(ids)" = alpha ] || fail "at start: $(ids)"

# added: listed once the folder is read again; a subfolder's model too
cp "$S/beta.gguf" "$D/beta.gguf"
mkdir -p "$D/sub" && cp "$S/sub/gamma.gguf" "$D/sub/gamma.gguf"
until_ids "alpha,beta,sub/gamma"
[ "$(meta beta .status)" = unloaded ] || fail "beta not unloaded: $(meta beta '')"
grep -q "model 'beta' found in $D" "$LOG" || fail "no log line for beta"
r=$(complete beta); [ "$(status)" = 200 ] || fail "beta: $(status) $r"
ok "models copied in appear and load"

# a request may name a model copied in since the last scan (the lookup reads the folder again)
cp "$S/beta.gguf" "$D/delta.gguf"
for _ in $(seq 1 50); do
    r=$(complete delta); [ "$(status)" = 200 ] && break; sleep 0.1
done
[ "$(status)" = 200 ] || fail "delta by name: $(status) $r"
ok "a request names a model copied in"

# removed while unloaded: gone from the list, a request is a 404
rm "$D/sub/gamma.gguf"
until_ids "alpha,beta,delta"
r=$(complete sub/gamma); [ "$(status)" = 404 ] || fail "removed gamma: $(status) $r"
ok "a model removed while unloaded disappears"

# removed while loaded: it serves on, listed as removed, until unloaded
[ "$(meta beta .status)" = loaded ] || fail "beta not loaded: $(meta beta '')"
rm "$D/beta.gguf"
for _ in $(seq 1 100); do [ "$(meta beta .file_removed)" = true ] && break; sleep 0.1; done
[ "$(meta beta .file_removed)" = true ] || fail "beta not marked removed: $(meta beta '')"
# greedy: sampled at the default temperature, this random model's first token is end-of-generation
# about 0.2% of the time (3 of 1500 requests), and then no token comes back
r=$(complete beta '"temperature":0'); [ "$(status)" = 200 ] || fail "removed but loaded beta does not serve: $(status) $r"
[ "$(echo "$r" | jget .usage.completion_tokens)" -ge 1 ] || fail "beta: $r"
post /models/unload '{"model":"beta"}' >/dev/null; [ "$(status)" = 200 ] || fail "unload beta: $(status)"
until_ids "alpha,delta"
grep -q "model 'beta' unloaded after its file went away" "$LOG" || fail "no log line for beta's end"
ok "a model removed while loaded serves until unloaded, then disappears"

# put back: served again
cp "$S/beta.gguf" "$D/beta.gguf"
until_ids "alpha,beta,delta"
r=$(complete beta); [ "$(status)" = 200 ] || fail "beta back: $(status) $r"
ok "a model put back is served again"

# a corrupt file added later fails alone
head -c 3000 "$D/alpha.gguf" >"$D/broken.gguf"
until_ids "alpha,beta,broken,delta"
[ "$(meta broken .status)" = failed ] || fail "broken: $(meta broken '')"
r=$(complete alpha); [ "$(status)" = 200 ] || fail "alpha beside broken: $(status) $r"
ok "a corrupt model added later is listed failed, the others serve"

# a profile added to an unloaded model is read again
[ "$(meta delta .profile)" = undefined ] || fail "delta has a profile already"
post /models/unload '{"model":"delta"}' >/dev/null
for _ in $(seq 1 100); do [ "$(meta delta .status)" = unloaded ] && break; sleep 0.1; done
printf 'ctx = 64\n' >"$D/delta.rlx.ini"
for _ in $(seq 1 100); do [ "$(meta delta "?.profile?.ctx")" = 64 ] && break; sleep 0.1; done
[ "$(meta delta "?.profile?.ctx")" = 64 ] || fail "delta's new profile not read: $(meta delta '')"
r=$(complete delta); [ "$(status)" = 200 ] || fail "delta: $(status) $r"
[ "$(meta delta .n_ctx)" = 64 ] || fail "delta's context: $(meta delta '')"
# the .ini replaced by a .rlx.toml: read again too
post /models/unload '{"model":"delta"}' >/dev/null
for _ in $(seq 1 100); do [ "$(meta delta .status)" = unloaded ] && break; sleep 0.1; done
rm "$D/delta.rlx.ini"
printf 'ctx = 96\n' >"$D/delta.rlx.toml"
for _ in $(seq 1 100); do [ "$(meta delta "?.profile?.ctx")" = 96 ] && break; sleep 0.1; done
[ "$(meta delta "?.profile?.ctx")" = 96 ] || fail "delta's .rlx.toml not read: $(meta delta '')"
ok "a changed profile (.rlx.ini, then .rlx.toml) of an unloaded model is read again"

# a loaded model's file cut short or rewritten in place (as cp does: it truncates, then writes):
# a read of its pages past the new end was SIGBUS, the whole daemon gone. Cut short: that model
# fails to load again, naming why, and the others serve on; rewritten: the next request loads
# the new file
r=$(complete alpha '"temperature":0'); [ "$(status)" = 200 ] || fail "alpha: $(status) $r"
[ "$(meta alpha .status)" = loaded ] || fail "alpha not loaded: $(meta alpha '')"
cp "$D/alpha.gguf" "$S/alpha.gguf"
truncate -s 3000 "$D/alpha.gguf"
r=$(complete alpha); [ "$(status)" = 500 ] || fail "alpha cut short: $(status) $r"
kill -0 "$PID" 2>/dev/null || fail "the daemon is gone"
grep -q "model 'alpha': $D/alpha.gguf: " "$LOG" || fail "no log line for alpha's change"
r=$(complete beta); [ "$(status)" = 200 ] || fail "beta beside a cut alpha: $(status) $r"
cp "$S/alpha.gguf" "$D/alpha.gguf"
# listed failed until the folder is read again (at most every 2 s) and finds the file changed
for _ in $(seq 1 100); do r=$(complete alpha '"temperature":0'); [ "$(status)" = 200 ] && break; sleep 0.1; done
[ "$(status)" = 200 ] || fail "alpha back: $(status) $r"
loads=$(meta alpha .loads)
cp "$S/beta.gguf" "$D/alpha.gguf"
r=$(complete alpha '"temperature":0'); [ "$(status)" = 200 ] || fail "alpha rewritten: $(status) $r"
[ "$(meta alpha .loads)" = $((loads + 1)) ] || fail "alpha not loaded again: $(meta alpha '')"
ok "a loaded model's file rewritten in place loads again; cut short, it fails alone"

# a split set with a part missing is listed failed; once the part arrives (a pull into the folder
# being served) a rescan reads it again (only part 1's size and time were compared: it stayed
# failed until a restart or /models/load)
"$SYNTH" --arch llama --preset tiny --seed 4 --split 2 -o "$S/zeta.gguf" >/dev/null || fail "synth zeta"
cp "$S"/zeta-00001-of-00002.gguf "$D/"
for _ in $(seq 1 100); do [ "$(meta zeta .status)" = failed ] && break; sleep 0.1; done
[ "$(meta zeta .status)" = failed ] || fail "zeta with a part missing: $(curl -s "$URL/v1/models")"
cp "$S"/zeta-00002-of-00002.gguf "$D/"
for _ in $(seq 1 100); do r=$(complete zeta); [ "$(status)" = 200 ] && break; sleep 0.1; done
[ "$(status)" = 200 ] || fail "zeta after its missing part came: $(status) $r"
ok "a split set completed after its scan is read again"

stop_server
