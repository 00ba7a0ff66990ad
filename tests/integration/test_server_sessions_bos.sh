#!/usr/bin/env bash
# A turn appended to a session continues the sequence: its text is tokenized without a BOS when
# the session already holds tokens (the first turn keeps it), so the session's token history has
# BOS only at position 0, for text prompts; input_ids are taken as sent.
# The second turn's output equals a one-shot request for history + the turn's tokens.
. "$(dirname "$0")/server_lib.sh"
command -v node >/dev/null || { echo "skip: node missing"; exit 77; }
start_server s1

bos=$(post /tokenize '{"content":"x","add_special":true}' | jget '.tokens[0]')
[ "$(status)" = 200 ] || fail "/tokenize: $(status)"
r=$(post /v1/generate '{"prompt":"Once upon a time","max_tokens":6,"temperature":0,"session_id":"bos-1"}')
[ "$(status)" = 200 ] || fail "turn 1: $(status) $r"
for turn in " One day" " She was happy" ; do
    r=$(post /v1/generate "{\"prompt\":\"$turn\",\"max_tokens\":6,\"temperature\":0,\"session_id\":\"bos-1\"}")
    [ "$(status)" = 200 ] || fail "turn '$turn': $(status) $r"
done
h=$(curl -s --max-time 10 "$URL/v1/sessions/bos-1" | jget '.tokens')
n_bos=$(echo "$h" | node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{const t=JSON.parse(s);console.log(t.filter(x=>x===$bos).length+' '+t.indexOf($bos))})")
[ "$n_bos" = "1 0" ] || fail "BOS ($bos) should appear once, first, in the session's history: $h"
ok "appended text turns carry no BOS mid-sequence (history $(echo "$h" | jget '.length') tokens)"

# the continuation equals one request over the whole sequence (greedy)
hist=$(curl -s --max-time 10 "$URL/v1/sessions/bos-1" | jget '.tokens')
turn_ids=$(post /tokenize '{"content":" The end","add_special":false}' | jget '.tokens')
r=$(post /v1/generate '{"prompt":" The end","max_tokens":8,"temperature":0,"session_id":"bos-1"}')
cont=$(echo "$r" | jget '.token_ids')
ids=$(node -e "console.log(JSON.stringify([...$hist, ...$turn_ids]))")
r=$(post /v1/generate "{\"input_ids\":$ids,\"max_tokens\":8,\"temperature\":0}")
[ "$(status)" = 200 ] || fail "one-shot: $(status) $r"
[ "$(echo "$r" | jget '.token_ids')" = "$cont" ] || fail "continuation $cont differs from one-shot $(echo "$r" | jget '.token_ids')"
ok "a session turn generates what the whole sequence does"

# input_ids are the client's own: a BOS sent explicitly is kept
post /v1/generate "{\"input_ids\":[$bos, 400],\"max_tokens\":2,\"temperature\":0,\"session_id\":\"bos-1\"}" >/dev/null
[ "$(status)" = 200 ] || fail "input_ids turn: $(status)"
h=$(curl -s --max-time 10 "$URL/v1/sessions/bos-1" | jget '.tokens')
n_bos=$(echo "$h" | node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{const t=JSON.parse(s);console.log(t.filter(x=>x===$bos).length)})")
[ "$n_bos" = 2 ] || fail "an explicit BOS in input_ids should be kept: $h"
ok "explicit input_ids are appended as sent"
stop_server
echo "3 passed, 0 failed"
