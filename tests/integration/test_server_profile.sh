#!/usr/bin/env bash
# test_server_profile.sh - per-model compile profiles (server/profile.h) against the daemon:
# <model>.rlx.ini or .rlx.toml beside the weights sets the context and the sampling defaults (seen in
# /v1/models and in generation), the INI's [model.NAME] wins over that file, a request's own
# fields win over both, and a bad profile names its file and line (a -m model's stops the start,
# a --models-dir model's is listed as failed while the others serve).
. "$(dirname "$0")/server_lib.sh"
SYNTH="${RLX_BIN:-build}/rlxd-synth"
[ -x "$SYNTH" ] || { echo "skip: $SYNTH not built"; exit 77; }

D="$TMP/m"
mkdir -p "$D/dir"
"$SYNTH" --arch llama --preset tiny --seed 5 --vocab-from "$MODEL" -o "$D/p.gguf" >/dev/null || fail "synth"
cp "$D/p.gguf" "$D/dir/good.gguf"
cp "$D/p.gguf" "$D/dir/bad.gguf"
MODEL="$D/p.gguf"
LONG=$(printf 'once upon a time %.0s' $(seq 1 25))

complete() { post /v1/completions "{\"prompt\":\"Once upon a time\",\"ignore_eos\":true${1:+,$1}}"; }

# 1. no profile: the server-wide defaults (completions: 16 tokens, the model's 256 context)
start_server plain
r=$(complete)
[ "$(status)" = 200 ] || fail "plain: $r"
[ "$(echo "$r" | jget .usage.completion_tokens)" = 16 ] || fail "plain: default max_tokens not 16: $r"
m=$(curl -s "$URL/v1/models")
[ "$(echo "$m" | jget '.data[0].meta.profile')" = undefined ] || fail "plain: a profile listed: $m"
[ "$(echo "$m" | jget '.data[0].meta.n_ctx')" = 256 ] || fail "plain: n_ctx (the model's 256): $m"
post /v1/completions "{\"prompt\":\"$LONG\",\"max_tokens\":2}" >/dev/null
[ "$(status)" = 200 ] || fail "plain: a 100-token prompt refused"
greedy=$(complete '"temperature":0,"max_tokens":5' | jget '.choices[0].text')
stop_server
ok "no profile: server-wide defaults"

# 2. the file beside the weights: context 64, greedy, 5 tokens by default
printf '# p.gguf profile\nctx = 64\n\n[profile]\ntemperature = 0\nmax-tokens = 5\ntop_k = 40\n' >"$D/p.rlx.ini"
start_server file
grep -q "model 'tiny': profile from $D/p.rlx.ini" "$LOG" || fail "no profile log line"
m=$(curl -s "$URL/v1/models")
[ "$(echo "$m" | jget '.data[0].meta.profile.ctx')" = 64 ] || fail "profile ctx not listed: $m"
[ "$(echo "$m" | jget '.data[0].meta.profile.temperature')" = 0 ] || fail "profile temperature not listed: $m"
[ "$(echo "$m" | jget '.data[0].meta.profile.sources')" = "$D/p.rlx.ini" ] || fail "sources: $m"
[ "$(echo "$m" | jget '.data[0].meta.n_ctx')" = 64 ] || fail "the model's context is not the profile's: $m"
r=$(complete)
[ "$(echo "$r" | jget .usage.completion_tokens)" = 5 ] || fail "profile max-tokens not the default: $r"
[ "$(echo "$r" | jget '.choices[0].text')" = "$greedy" ] || fail "profile temperature 0 is not greedy: $r vs '$greedy'"
r=$(complete '"max_tokens":2')
[ "$(echo "$r" | jget .usage.completion_tokens)" = 2 ] || fail "the request's max_tokens does not win: $r"
# the request's temperature wins: seeded sampling at 1.5 (top_k 40 from the profile) differs from greedy somewhere
differ=0
for seed in 1 2 3 4 5 6; do
    t=$(complete "\"temperature\":1.5,\"seed\":$seed" | jget '.choices[0].text')
    [ "$t" != "$greedy" ] && differ=1 && break
done
[ $differ = 1 ] || fail "the request's temperature never changed the output"
r=$(post /v1/completions "{\"prompt\":\"$LONG\",\"max_tokens\":2}")
[ "$(status)" = 400 ] || fail "a prompt over the profile's 64-token context: $(status) $r"
echo "$r" | grep -q context_length_exceeded || fail "not context_length_exceeded: $r"
stop_server
# --stdio takes the same defaults: a line without temperature gives the greedy line's text, 5 tokens
printf '%s\n' '{"id":1,"prompt":"Once upon a time","ignore_eos":true}' \
    '{"id":2,"prompt":"Once upon a time","temperature":0,"max_tokens":5,"ignore_eos":true}' |
    "$BIN" serve -m "$MODEL:tiny" --stdio >"$TMP/stdio.out" 2>"$TMP/stdio.err" || fail "stdio: $(cat "$TMP/stdio.err")"
t1=$(grep '^{"id":1,' "$TMP/stdio.out" | jget .text); t2=$(grep '^{"id":2,' "$TMP/stdio.out" | jget .text)
[ -n "$t2" ] && [ "$t1" = "$t2" ] || fail "stdio: profile defaults not applied: $(cat "$TMP/stdio.out")"
[ "$(grep '^{"id":1,' "$TMP/stdio.out" | jget .usage.completion_tokens)" = 5 ] || fail "stdio: max-tokens: $(cat "$TMP/stdio.out")"
ok "<model>.rlx.ini: context 64, greedy and 5 tokens by default (HTTP and --stdio); the request's fields win"

# 3. the INI section over the file; the server-wide --ctx under both
printf '[model.tiny]\nmax-tokens = 3\nctx = 128\n' >"$D/c.ini"
start_server ini --config "$D/c.ini" --ctx 256
m=$(curl -s "$URL/v1/models")
[ "$(echo "$m" | jget '.data[0].meta.n_ctx')" = 128 ] || fail "INI ctx not over the file and --ctx: $m"
[ "$(echo "$m" | jget '.data[0].meta.profile.sources')" = "$D/p.rlx.ini; config $D/c.ini" ] || fail "sources: $m"
r=$(complete)
[ "$(echo "$r" | jget .usage.completion_tokens)" = 3 ] || fail "INI max-tokens not over the file's: $r"
stop_server
printf '[model.tinny]\ntemperature = 0\n' >"$D/typo.ini"
start_server typo --config "$D/typo.ini"
grep -q "config section \[model.tinny\] names no served model" "$LOG" || fail "no warning for a section naming no model"
stop_server
ok "[model.NAME] over <model>.rlx.ini over --ctx; a section naming no model is logged"

# 4. errors name the file and line
printf 'ctx = 64\ntemperature = hot\n' >"$D/p.rlx.ini"
"$BIN" serve -m "$MODEL:tiny" --port 0 2>"$TMP/bad.log" && fail "a bad profile did not stop the start"
grep -q "$D/p.rlx.ini:2: 'temperature' must be a number" "$TMP/bad.log" || fail "bad profile: $(cat "$TMP/bad.log")"
rm "$D/p.rlx.ini"
printf '[model.tiny]\n\nspeed = 3\n' >"$D/c.ini"
"$BIN" serve -m "$MODEL:tiny" --config "$D/c.ini" --port 0 2>"$TMP/bad.log"; rc=$?
[ $rc = 2 ] || fail "a bad INI section: exit $rc"
grep -q "config $D/c.ini:3: unknown key 'speed'" "$TMP/bad.log" || fail "bad INI: $(cat "$TMP/bad.log")"
ok "bad profiles name file:line"

# 5. --models-dir: a model's bad profile fails that model only
printf 'max-seqs = 0\n' >"$D/dir/bad.rlx.ini"
printf 'temperature = 0\n' >"$D/dir/good.rlx.ini"
start_server dir --models-dir "$D/dir"
m=$(curl -s "$URL/v1/models")
[ "$(echo "$m" | jget '.data.find(x=>x.id=="bad").meta.status')" = failed ] || fail "bad not failed: $m"
echo "$m" | jget '.data.find(x=>x.id=="bad").meta.error' | grep -q "bad.rlx.ini:1: 'max-seqs'" || fail "bad's error: $m"
r=$(post /v1/completions '{"model":"good","prompt":"Once upon a time","max_tokens":5,"ignore_eos":true}')
[ "$(status)" = 200 ] || fail "good: $r"
[ "$(echo "$r" | jget '.choices[0].text')" = "$greedy" ] || fail "good's profile (temperature 0) not applied: $r"
stop_server
ok "--models-dir: a bad profile fails its model only"

# 6. <model>.rlx.toml: TOML's syntax and types, the same keys; a model with both files fails
rm -f "$D"/dir/*.rlx.ini
cp "$D/p.gguf" "$D/dir/both.gguf"
printf '# good.gguf\n[profile]\ntemperature = 0      # greedy\n"max_tokens" = 5\nkv_type = "f32"\n' >"$D/dir/good.rlx.toml"
printf '\nctx = "64"\n' >"$D/dir/bad.rlx.toml"
printf 'ctx = 64\n' >"$D/dir/both.rlx.toml"
printf 'ctx = 64\n' >"$D/dir/both.rlx.ini"
start_server toml --models-dir "$D/dir"
m=$(curl -s "$URL/v1/models")
[ "$(echo "$m" | jget '.data.find(x=>x.id=="good").meta.profile.sources')" = "$D/dir/good.rlx.toml" ] || fail "toml sources: $m"
[ "$(echo "$m" | jget '.data.find(x=>x.id=="good").meta.profile["kv-type"]')" = f32 ] || fail "toml kv-type: $m"
echo "$m" | jget '.data.find(x=>x.id=="bad").meta.error' | grep -q "bad.rlx.toml:2: 'ctx' takes an integer, not a string" ||
    fail "bad toml's error: $m"
echo "$m" | jget '.data.find(x=>x.id=="both").meta.error' | grep -q "one profile file" || fail "both files: $m"
r=$(post /v1/completions '{"model":"good","prompt":"Once upon a time","ignore_eos":true}')
[ "$(status)" = 200 ] || fail "good (toml): $r"
[ "$(echo "$r" | jget .usage.completion_tokens)" = 5 ] || fail "toml max_tokens not the default: $r"
[ "$(echo "$r" | jget '.choices[0].text')" = "$greedy" ] || fail "toml temperature 0 not applied: $r"
stop_server
ok "<model>.rlx.toml: typed keys applied; a wrong type names file:line; .toml beside .ini is refused"

# a profile that is a FIFO or /dev/zero, or a Hugging Face folder whose weights are a FIFO: read
# on the loop thread at a scan, they held the whole daemon (open() waiting, an endless read);
# now each of those models fails with the reason and the others serve
mkdir -p "$D/hostile/hf"
ln -s "$MODEL" "$D/hostile/fine.gguf"
ln -s "$MODEL" "$D/hostile/fifo.gguf"; mkfifo "$D/hostile/fifo.rlx.toml"
ln -s "$MODEL" "$D/hostile/zero.gguf"; ln -s /dev/zero "$D/hostile/zero.rlx.ini"
printf '{"architectures":["LlamaForCausalLM"],"num_hidden_layers":1,"hidden_size":8}' >"$D/hostile/hf/config.json"
mkfifo "$D/hostile/hf/model.safetensors"
start_server hostile --models-dir "$D/hostile"
m=$(curl -s -m 10 "$URL/v1/models")
for id in fifo zero; do
    echo "$m" | jget ".data.find(x=>x.id==\"$id\").meta.error" | grep -q 'not a regular file' || fail "$id profile: $m"
done
r=$(post /v1/completions '{"model":"fine","prompt":"Once","max_tokens":2}')
[ "$(status)" = 200 ] || fail "the fine model beside hostile files: $(status) $r"
r=$(post /v1/completions '{"model":"hf","prompt":"Once","max_tokens":2}')
[ "$(status)" != 200 ] || fail "a folder whose weights are a FIFO served: $r"
curl -s -m 5 "$URL/health" | grep -q ok || fail "health after the FIFO weights"
stop_server
ok "a FIFO or device named like a profile or weights fails its model, not the daemon"
