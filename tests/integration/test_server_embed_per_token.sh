#!/usr/bin/env bash
# test_server_embed_per_token.sh - an embedding model that pools none answers one vector per
# token (llama-server's /embedding shape); such an answer grows with tokens x dimension, so a
# request whose answer would pass RLX_EMBED_MAX_TOKEN_VALUES is a 400 saying so (a 3 MB request
# of 2,048 inputs used to make a 675 MB answer and a 2 GB peak), and the model serves on.
. "$(dirname "$0")/server_lib.sh"
SYNTH="${RLX_BIN:-build}/rlxd-synth"
[ -x "$SYNTH" ] || { echo "skip: $SYNTH not built"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
"$SYNTH" --arch bert --preset tiny --pooling none --seed 3 -o "$TMP/none.gguf" >/dev/null || fail "synth"
MODEL="$TMP/none.gguf" start_server none
r=$(post /embedding '{"content":["hello world","a b c"]}')
[ "$(status)" = 200 ] || fail "per-token /embedding: $(status) $r"
rows=$(echo "$r" | jget '[1].embedding.length')
[ "$rows" -ge 3 ] || fail "one vector per token expected: $rows rows"
ok "a model that pools none answers a vector per token"
python3 -c "import json; print(json.dumps({'content': ['hello ' * 50] * 2048}))" >"$TMP/big.json"
curl -s -m 120 -o "$TMP/big.out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$TMP/big.json" \
    "$URL/embedding" >"$TMP/status"
[ "$(cat "$TMP/status")" = 400 ] || fail "an answer of too many values: $(cat "$TMP/status") $(head -c 300 "$TMP/big.out")"
grep -q 'values; a request may ask for at most' "$TMP/big.out" || fail "cap message: $(cat "$TMP/big.out")"
[ "$(jget '.error.param' <"$TMP/big.out")" = content ] || fail "cap param: $(cat "$TMP/big.out")"
r=$(post /embedding '{"content":"hello again"}')
[ "$(status)" = 200 ] || fail "after the refused request: $(status) $r"
stop_server
ok "an answer past the per-token cap is a 400 and the model serves on"
echo "2 passed, 0 failed"
