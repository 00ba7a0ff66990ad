#!/usr/bin/env bash
# The KV settings of `rlxd serve` reach the engine: --kv-type f32 really gives an F32 cache (F32
# is the type id 0, once mistaken for "unset"), q8_0 serves, and --kv-block / RLXD_KV_BLOCK set
# the block size, which shows as the granularity of prefix reuse (cached_tokens is a multiple
# of the block: every full block of the prompt but the one holding its last token).
. "$(dirname "$0")/server_lib.sh"

prompt="Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends and her dog"
body="{\"prompt\":\"$prompt\",\"max_tokens\":4,\"temperature\":0}"

# check_blocks TYPE BLOCK: the startup line names both; a repeated prompt reuses whole blocks
check_blocks() {
    local type=$1 block=$2
    grep -q "KV [0-9.]* MiB $type: [0-9]* blocks of $block tokens" "$LOG" || fail "log does not show KV $type in blocks of $block: $(grep ready "$LOG")"
    local r1 r2 n cached want
    r1=$(post /v1/generate "$body")
    [ "$(status)" = 200 ] || fail "first request: $(status) $r1"
    r2=$(post /v1/generate "$body")
    [ "$(status)" = 200 ] || fail "second request: $(status) $r2"
    [ "$(echo "$r1" | jget '.text')" = "$(echo "$r2" | jget '.text')" ] || fail "cached prefix changed the output"
    n=$(echo "$r2" | jget '.usage.prompt_tokens')
    cached=$(echo "$r2" | jget '.usage.prompt_tokens_details.cached_tokens')
    want=$(( (n - 1) / block * block ))
    [ "$cached" = "$want" ] || fail "kv-block $block: $cached of $n prompt tokens cached, want $want"
    ok "kv-type $type, kv-block $block: $cached of $n prompt tokens reused"
}

start_server f32 --kv-type f32 --kv-block 8
check_blocks f32 8
stop_server

RLXD_KV_BLOCK=32 start_server q8 --kv-type q8_0
check_blocks q8_0 32
stop_server

# the default stays F16 in blocks of 16
start_server default
check_blocks f16 16
stop_server

"$BIN" serve -m "$MODEL" --kv-block 0 2>"$TMP/bad.log" && fail "--kv-block 0 accepted"
grep -q "kv-block" "$TMP/bad.log" || fail "bad --kv-block error does not name it: $(cat "$TMP/bad.log")"
ok "bad --kv-block is a clear error"
echo "4 passed, 0 failed"
