#!/usr/bin/env bash
# test_server_hybrid.sh - the daemon serving a hybrid recurrent model (synth-qwen35-tiny-f32:
# gated DeltaNet layers with per-sequence state slots beside paged-KV attention layers):
# 12 greedy completions sent at once over HTTP (more than --max-seqs 8, so state slots are
# freed and taken again while others run) equal the same requests made one at a time by a
# daemon without state checkpoints (--state-cache-mb 0: no cached tokens, nothing shared); with
# checkpoints (the default) prompts repeated start at their checkpoint (cached tokens, counted
# in /metrics) and give the same texts; chat and streaming work; a session's next turn starts
# at the previous prompt's checkpoint, also after a restart with --db (the snapshot carries the
# state), and gives the tokens of the whole text computed from position 0; a damaged snapshot is
# ignored (recomputed, same tokens).
# Preemption under a tiny pool is tests/unit/test_worker_hybrid.c's (the daemon's smallest
# --kv-mem holds hundreds of this model's blocks).
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v node >/dev/null || { echo "skip: node missing"; exit 77; }
MODEL="$SHARED/models/synth-qwen35-tiny-f32.gguf"
[ -f "$MODEL" ] || { echo "skip: $MODEL absent"; exit 77; }

run_set() { # URL OUT MODE(solo|together)
    node -e '
const [url, out, mode] = process.argv.slice(1);
const words = ["alpha", "river", "stone", "bright", "quiet", "number", "garden", "window"];
const reqs = [];
for (let i = 0; i < 12; i++) {
  let p = "";
  for (let k = 0; k < 3 + (i * 5) % 17; k++) p += words[(i * 3 + k * 7) % words.length] + " ";
  reqs.push({prompt: "shared beginning of every prompt here: " + p, max_tokens: 6 + i % 7, temperature: 0, ignore_eos: true});
}
const one = async r => {
  const res = await fetch(url + "/v1/completions", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(r)});
  if (res.status !== 200) throw new Error("status " + res.status + ": " + await res.text());
  const j = await res.json();
  return {text: j.choices[0].text, tokens: j.usage.completion_tokens, cached: (j.usage.prompt_tokens_details || {}).cached_tokens || 0};
};
(async () => {
  let r = [];
  if (mode === "solo") for (const q of reqs) r.push(await one(q));
  else r = await Promise.all(reqs.map(one));
  require("fs").writeFileSync(out, JSON.stringify(r));
})().catch(e => { console.error(e.message); process.exit(1); });
' "$1" "$2" "$3"
}

start_server nocache --max-seqs 8 --threads 2 --state-cache-mb 0
run_set "$URL" "$TMP/solo.json" solo || fail "solo requests"
curl -s "$URL/metrics" >"$TMP/metrics0"
grep -q '^rlxd_state_checkpoints{model_name="tiny"} 0$' "$TMP/metrics0" || fail "metrics: $(grep checkpoint "$TMP/metrics0")"
stop_server
start_server hybrid --max-seqs 8 --threads 2
run_set "$URL" "$TMP/together.json" together || fail "concurrent requests"
run_set "$URL" "$TMP/again.json" solo || fail "repeated requests"
node -e '
const [a, b, c] = process.argv.slice(1).map(f => JSON.parse(require("fs").readFileSync(f)));
let cached = 0;
for (let i = 0; i < a.length; i++) {
  if (a[i].text !== b[i].text) throw new Error("request " + i + ": " + JSON.stringify(b[i].text) + " alone " + JSON.stringify(a[i].text));
  if (a[i].text !== c[i].text) throw new Error("request " + i + " again: " + JSON.stringify(c[i].text) + " first " + JSON.stringify(a[i].text));
  if (a[i].tokens !== 6 + i % 7) throw new Error("request " + i + ": " + a[i].tokens + " tokens");
  if (a[i].cached) throw new Error("request " + i + ": cached tokens reported without state checkpoints");
  cached += c[i].cached;
}
if (!cached) throw new Error("repeated prompts reported no cached tokens");
' "$TMP/solo.json" "$TMP/together.json" "$TMP/again.json" || fail "texts with checkpoints differ from those without"
ok "12 concurrent completions and 12 repeated ones (from checkpoints) equal the texts computed without checkpoints"

body=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hello"}],"max_tokens":5,"temperature":0}')
[ "$(status)" = 200 ] || fail "chat: $(status) $body"
[ "$(echo "$body" | jget '.usage.completion_tokens')" = 5 ] || fail "chat usage: $body"
curl -sN "$URL/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":"stream me","max_tokens":4,"temperature":0,"ignore_eos":true,"stream":true}' >"$TMP/sse"
[ "$(grep -c '^data: {' "$TMP/sse")" -ge 4 ] && grep -q '^data: \[DONE\]' "$TMP/sse" || fail "stream: $(cat "$TMP/sse")"
ok "chat and streaming"
curl -s "$URL/metrics" >"$TMP/metrics"
grep -q '^rlxd_state_slots_total{model_name="tiny"} 8$' "$TMP/metrics" || fail "metrics: $(grep state_slots "$TMP/metrics")"
grep -q '^rlxd_state_slots_used{model_name="tiny"} [0-8]$' "$TMP/metrics" || fail "metrics: $(grep state_slots "$TMP/metrics")"
grep -q '^rlxd_state_checkpoints{model_name="tiny"} [1-9][0-9]*$' "$TMP/metrics" || fail "metrics: $(grep checkpoint "$TMP/metrics")"
grep -q '^rlxd_state_checkpoint_bytes{model_name="tiny"} [1-9][0-9]*$' "$TMP/metrics" || fail "metrics: $(grep checkpoint "$TMP/metrics")"
grep -q '^rlxd_state_checkpoint_hits_total{model_name="tiny"} [1-9][0-9]*$' "$TMP/metrics" || fail "metrics: $(grep checkpoint "$TMP/metrics")"
ok "state slots and checkpoints in /metrics"
stop_server

# sessions over token ids (so the whole text can be sent again as ids): turn 1 (30 ids) and
# turn 2 (20 ids) on one daemon, turn 3 after a restart with --db, then the whole text on a
# daemon without checkpoints. Turn 2 starts at turn 1's checkpoint (16), turn 3 at turn 2's (48:
# its prompt of 30 + 8 + 20 ids, rounded down to a block of 16), read back from the snapshot.
ids() { node -e 'const [n, s] = process.argv.slice(1).map(Number); console.log(JSON.stringify(Array.from({length: n}, (_, k) => 1000 + (s * 7919 + k * 104729) % 100000)))' "$1" "$2"; }
P1=$(ids 30 1); P2=$(ids 20 2); P3=$(ids 10 3)
gen() { # IDS MAX [SESSION]: the response of /v1/generate
    local sess=""
    [ -n "${3:-}" ] && sess=",\"session_id\":\"$3\""
    post /v1/generate "{\"input_ids\":$1,\"max_tokens\":$2,\"temperature\":0,\"ignore_eos\":true$sess}"
}
DB="$TMP/sessions.db"
start_server s1 --db "$DB" --threads 2
r1=$(gen "$P1" 8 h1); [ "$(status)" = 200 ] || fail "turn 1: $(status) $r1"
r2=$(gen "$P2" 6 h1); [ "$(status)" = 200 ] || fail "turn 2: $(status) $r2"
[ "$(echo "$r2" | jget '.usage.prompt_tokens')" = 58 ] || fail "turn 2 prompt: $r2"
[ "$(echo "$r2" | jget '.usage.prompt_tokens_details.cached_tokens')" = 16 ] || fail "turn 2 should start at turn 1's checkpoint (16): $r2"
stop_server
ls "$DB.kv/tiny/h1.kv" >/dev/null || fail "no snapshot for session h1"
start_server s2 --db "$DB" --threads 2
r3=$(gen "$P3" 6 h1); [ "$(status)" = 200 ] || fail "turn after restart: $(status) $r3"
[ "$(echo "$r3" | jget '.usage.prompt_tokens')" = 74 ] || fail "turn 3 prompt: $r3"
[ "$(echo "$r3" | jget '.usage.prompt_tokens_details.cached_tokens')" = 48 ] || fail "turn 3 should start at the restored checkpoint (48): $r3"
stop_server
# the whole text, computed from position 0
ALL=$(node -e 'const a = process.argv.slice(1).map(s => JSON.parse(s)); console.log(JSON.stringify([].concat(a[0], a[1].token_ids, a[2], a[3].token_ids, a[4])))' \
      "$P1" "$r1" "$P2" "$r2" "$P3")
start_server fresh --threads 2 --state-cache-mb 0
rf=$(gen "$ALL" 6); [ "$(status)" = 200 ] || fail "fresh: $(status) $rf"
[ "$(echo "$rf" | jget '.usage.prompt_tokens_details.cached_tokens')" = 0 ] || fail "fresh run cached tokens: $rf"
[ "$(echo "$r3" | jget '.token_ids')" = "$(echo "$rf" | jget '.token_ids')" ] || fail "turn 3 $(echo "$r3" | jget '.token_ids') != fresh $(echo "$rf" | jget '.token_ids')"
stop_server
ok "session turns start at state checkpoints (16, then 48 after a restart with --db) and equal the text computed from 0"

# a damaged snapshot (a byte of the state flipped) is ignored: the next turn recomputes the
# history from 0 and gives the tokens that the intact snapshot gives (checked on a copy)
mkdir "$TMP/keep" && cp -r "$DB"* "$TMP/keep/" || fail "copy of the database"
node -e 'const fs = require("fs"), f = process.argv[1], b = fs.readFileSync(f); b[b.length - 5] ^= 0x40; fs.writeFileSync(f, b)' "$DB.kv/tiny/h1.kv"
P4=$(ids 5 4)
start_server s3 --db "$DB" --threads 2
r4=$(gen "$P4" 4 h1); [ "$(status)" = 200 ] || fail "turn after damage: $(status) $r4"
[ "$(echo "$r4" | jget '.usage.prompt_tokens_details.cached_tokens')" = 0 ] || fail "a damaged snapshot was used: $r4"
grep -q "fails its checksum" "$LOG" || fail "no checksum complaint in the log"
stop_server
rm -rf "$DB"* && cp -r "$TMP/keep/"* "$TMP/" || fail "restore of the database copy"
start_server s4 --db "$DB" --threads 2
r5=$(gen "$P4" 4 h1); [ "$(status)" = 200 ] || fail "turn from the intact snapshot: $(status) $r5"
[ "$(echo "$r5" | jget '.usage.prompt_tokens_details.cached_tokens')" = 64 ] || fail "intact snapshot: $r5"
[ "$(echo "$r4" | jget '.token_ids')" = "$(echo "$r5" | jget '.token_ids')" ] || fail "recomputed $(echo "$r4" | jget '.token_ids') != from the snapshot $(echo "$r5" | jget '.token_ids')"
stop_server
ok "a damaged state snapshot is refused (checksum) and the history recomputed, with the intact snapshot's tokens"
