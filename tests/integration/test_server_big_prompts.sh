#!/usr/bin/env bash
# test_server_big_prompts.sh - huge prompts do not starve small requests: prompts that cannot fit
# the context are refused (400 context_length_exceeded) without tokenizing them in full, and big
# prompts never take every thread of the pool, so a tiny request sent behind two dozen of them
# still completes within a few seconds (a bound, not a benchmark: before, each 3 MB prompt took
# about a second of tokenizing and the tiny request waited behind all of them).
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v node >/dev/null || { echo "skip: node missing"; exit 77; }

start_server big
N_BIG=24
text=$(yes 'Once upon a time there was a little girl who liked to play. ' | head -c 3000000 | tr -d '\n')
printf '{"prompt":"%s","max_tokens":4}' "$text" >"$TMP/big.json"
printf '{"messages":[{"role":"user","content":"%s"}],"max_tokens":4}' "$text" >"$TMP/bigchat.json"
unset text
# just past the context in tokens, but not in the bytes-per-token bound: refused while tokenizing
mid=$(yes 'Once upon a time ' | head -c 12000 | tr -d '\n')
printf '{"prompt":"%s","max_tokens":4}' "$mid" >"$TMP/mid.json"
pids=()
for i in $(seq 1 "$N_BIG"); do
    body="$TMP/big.json" path=/v1/completions
    if [ $((i % 8)) = 0 ]; then body="$TMP/bigchat.json" path=/v1/chat/completions; fi
    curl -s -m 120 -o "$TMP/big$i.out" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary @"$body" "$URL$path" >"$TMP/big$i.code" &
    pids+=($!)
done
# tiny requests once the big ones are in (their bodies take a moment to arrive and parse)
for k in 1 2 3; do
    sleep 1
    rm -f "$TMP/tiny.out"
    tiny=$(curl -s -m 8 -o "$TMP/tiny.out" -w '%{http_code}' -H 'Content-Type: application/json' \
        -d '{"prompt":"Once upon a time","max_tokens":2}' "$URL/v1/completions")
    [ "$tiny" = 200 ] || fail "tiny request $k behind $N_BIG big prompts did not complete within 8 s: '$tiny' $(cat "$TMP/tiny.out" 2>/dev/null)"
done
ok tiny requests answered behind $N_BIG big prompts
for p in "${pids[@]}"; do wait "$p"; done
for i in $(seq 1 "$N_BIG"); do
    [ "$(cat "$TMP/big$i.code")" = 400 ] || fail "big prompt $i: HTTP $(cat "$TMP/big$i.code") $(head -c 300 "$TMP/big$i.out")"
    [ "$(jget '.error.code' <"$TMP/big$i.out")" = context_length_exceeded ] || fail "big prompt $i: $(head -c 300 "$TMP/big$i.out")"
done
[ "$(jget '.error.param' <"$TMP/big8.out")" = messages ] || fail "big chat prompt names $(jget '.error.param' <"$TMP/big8.out")"
ok "$N_BIG big prompts refused with context_length_exceeded"
r=$(post /v1/completions "$(cat "$TMP/mid.json")")
[ "$(status)" = 400 ] || fail "a prompt just past the context: $(status) $r"
[ "$(echo "$r" | jget '.error.code')" = context_length_exceeded ] || fail "mid prompt: $r"
ok prompt past the context refused
# a prompt that fits still works, and gets the same tokens through /tokenize and the engine
r=$(post /v1/completions '{"prompt":"Once upon a time there was a little girl","max_tokens":2}')
[ "$(status)" = 200 ] || fail "small prompt after the big ones: $(status) $r"
[ "$(echo "$r" | jget '.usage.prompt_tokens')" = "$(curl -s -m 5 "$URL/tokenize" -d '{"content":"Once upon a time there was a little girl","add_special":true}' | jget '.tokens.length')" ] ||
    fail "prompt tokens differ from /tokenize: $r"
ok small prompt unchanged
stop_server
echo "all passed"
