#!/usr/bin/env bash
# test_server_numbers.sh - JSON numbers that become token ids are range-checked before the
# cast: /detokenize with 1e10 (or 1e999, -1, 2.5) and input_ids of 4294967297 get a 400 naming
# the parameter (they used to answer 200, and report -2147483648); /tokenize refuses \u0000 as
# the generation routes do (it used to cut the text there).
. "$(dirname "$0")/server_lib.sh"
start_server s1

for v in 1e10 4294967297 1e999 -1 2.5; do
    r=$(post /detokenize "{\"tokens\":[1,$v]}")
    [ "$(status)" = 400 ] || fail "/detokenize [1,$v]: $(status) $r"
    [ "$(echo "$r" | jget '.error.param')" = tokens ] || fail "/detokenize [1,$v] names: $r"
    r=$(post /v1/generate "{\"input_ids\":[1,$v],\"max_tokens\":2}")
    [ "$(status)" = 400 ] || fail "input_ids [1,$v]: $(status) $r"
    [ "$(echo "$r" | jget '.error.param')" = input_ids ] || fail "input_ids [1,$v] names: $r"
    case "$r" in *-2147483648*) fail "input_ids [1,$v] reported as -2147483648: $r" ;; esac
    r=$(post /v1/completions "{\"prompt\":[1,$v],\"max_tokens\":2}")
    [ "$(status)" = 400 ] || fail "prompt ids [1,$v]: $(status) $r"
    [ "$(echo "$r" | jget '.error.param')" = prompt ] || fail "prompt ids [1,$v] names: $r"
done
r=$(post /detokenize '{"tokens":[1,403]}')
[ "$(status)" = 200 ] || fail "/detokenize in range: $(status) $r"
ok "token ids outside int32 or not integers are 400s naming the parameter"

r=$(post /tokenize '{"content":"Once\u0000upon"}')
[ "$(status)" = 400 ] || fail "/tokenize with \\u0000: $(status) $r"
case "$(echo "$r" | jget '.error.message')" in *NUL*) ;; *) fail "/tokenize NUL message: $r" ;; esac
r=$(post /v1/generate '{"prompt":"Once\u0000upon","max_tokens":2}')
[ "$(status)" = 400 ] || fail "generate with \\u0000: $(status) $r"
ok "/tokenize refuses \\u0000 like the generation routes"
stop_server
echo "2 passed, 0 failed"
