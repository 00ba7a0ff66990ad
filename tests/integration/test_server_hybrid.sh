#!/usr/bin/env bash
# test_server_hybrid.sh - the daemon serving a hybrid recurrent model (synth-qwen35-tiny-f32:
# gated DeltaNet layers with per-sequence state slots beside paged-KV attention layers):
# 12 greedy completions sent at once over HTTP (more than --max-seqs 8, so state slots are
# freed and taken again while others run) equal the same requests made one at a time; chat and
# streaming work; prompts sharing a prefix report no cached tokens (a recurrent state is never
# shared); session turns recompute their history (also after a restart with --db).
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

start_server hybrid --max-seqs 8 --threads 2
run_set "$URL" "$TMP/solo.json" solo || fail "solo requests"
run_set "$URL" "$TMP/together.json" together || fail "concurrent requests"
node -e '
const [a, b] = process.argv.slice(1).map(f => JSON.parse(require("fs").readFileSync(f)));
for (let i = 0; i < a.length; i++) {
  if (a[i].text !== b[i].text) throw new Error("request " + i + ": " + JSON.stringify(b[i].text) + " alone " + JSON.stringify(a[i].text));
  if (a[i].tokens !== 6 + i % 7) throw new Error("request " + i + ": " + a[i].tokens + " tokens");
  if (a[i].cached || b[i].cached) throw new Error("request " + i + ": cached tokens reported for a recurrent model");
}
' "$TMP/solo.json" "$TMP/together.json" || fail "concurrent texts differ from solo ones"
ok "12 concurrent completions equal their solo texts, no cached tokens"

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
ok "state slots in /metrics"
stop_server

# sessions: a recurrent state keeps no pins or snapshots, so each turn recomputes its history
# (cached_tokens 0), also after a restart with --db (the history comes back from the database)
DB="$TMP/sessions.db"
start_server s1 --db "$DB" --threads 2
r=$(post /v1/generate '{"prompt":"a story about a garden","max_tokens":6,"temperature":0,"ignore_eos":true,"session_id":"h1"}')
[ "$(status)" = 200 ] || fail "turn 1: $(status) $r"
p1=$(echo "$r" | jget '.usage.prompt_tokens'); c1=$(echo "$r" | jget '.usage.completion_tokens')
r=$(post /v1/generate '{"prompt":" and then","max_tokens":4,"temperature":0,"ignore_eos":true,"session_id":"h1"}')
[ "$(status)" = 200 ] || fail "turn 2: $(status) $r"
p2=$(echo "$r" | jget '.usage.prompt_tokens'); cached=$(echo "$r" | jget '.usage.prompt_tokens_details.cached_tokens')
[ "$p2" -gt $((p1 + c1)) ] || fail "turn 2 prompt ($p2) should hold the history ($p1 + $c1) and the new text"
[ "$cached" = 0 ] || fail "turn 2 reports $cached cached tokens for a recurrent model"
stop_server
start_server s2 --db "$DB" --threads 2
r=$(post /v1/generate '{"prompt":" at last","max_tokens":4,"temperature":0,"ignore_eos":true,"session_id":"h1"}')
[ "$(status)" = 200 ] || fail "turn after restart: $(status) $r"
p3=$(echo "$r" | jget '.usage.prompt_tokens')
[ "$p3" -gt $((p2 + 4)) ] || fail "turn 3 prompt ($p3) should hold the restored history ($p2 + 4)"
ok "session turns recompute the history, also after a restart with --db"
stop_server
