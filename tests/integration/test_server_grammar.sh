#!/usr/bin/env bash
# test_server_grammar.sh - constrained generation through the daemon: a GBNF "grammar" on every
# route, response_format json_object on chat, streamed and not, and the 400s for a bad grammar
# and for a JSON Schema keyword that is not supported (test_server_json_schema.sh has the rest).
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v node >/dev/null || { echo "skip: node missing (used to read JSON)"; exit 77; }

start_server grammar

yn='root ::= \" \" (\"yes\" | \"no\") \".\"\n'
for i in 1 2 3 4; do
    r=$(post /v1/completions "{\"prompt\":\"Once upon a time\",\"max_tokens\":16,\"temperature\":1,\"seed\":$i,\"grammar\":\"$yn\"}")
    [ "$(status)" = 200 ] || fail "completions + grammar: $(status) $r"
    t=$(echo "$r" | jget '.choices[0].text')
    [ "$t" = " yes." ] || [ "$t" = " no." ] || fail "text '$t' does not follow the grammar: $r"
    [ "$(echo "$r" | jget '.choices[0].finish_reason')" = stop ] || fail "finish_reason: $r"
done
ok "completions follow a grammar and stop when it is complete"

# native route, streamed: the tokens' texts put together follow the grammar
digits='root ::= [0-9]{3} \"-\" [0-9]{2}\n'
out=$(curl -s --max-time 30 "$URL/v1/generate" -d "{\"prompt\":\"Once\",\"max_tokens\":20,\"stream\":true,\"grammar\":\"$digits\"}")
last=$(echo "$out" | tail -1)
txt=$(echo "$last" | jget '.text')
echo "$txt" | grep -Eq '^[0-9]{3}-[0-9]{2}$' || fail "generate stream text '$txt': $out"
[ "$(echo "$last" | jget '.finish_reason')" = stop ] || fail "generate finish: $last"
ok "generate (stream) follows a grammar"

# a NUL byte in the output (the byte-0 token): the text after it was lost, now kept as \u0000
nul='root ::= \"a\\x00b\"\n'
r=$(post /v1/completions "{\"prompt\":\"Once\",\"max_tokens\":8,\"logprobs\":1,\"grammar\":\"$nul\"}")
[ "$(status)" = 200 ] || fail "grammar with a NUL byte: $(status) $r"
echo "$r" | grep -qF '"text":"a\u0000b"' || fail "text around a NUL byte: $r"
echo "$r" | grep -qF '"text_offset":[0,1,2]' || fail "text_offset past a NUL byte: $r"
r=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":8,\"logprobs\":true,\"grammar\":\"$nul\"}")
echo "$r" | grep -qF '"content":"a\u0000b"' || fail "chat content around a NUL byte: $r"
echo "$r" | grep -qF '"token":"\u0000","logprob"' && echo "$r" | grep -qF '"bytes":[0]' || fail "NUL token's logprob entry: $r"
ok "a NUL byte in the output is kept (\\u0000)"

# chat JSON mode: an object (complete when it stopped, else a valid start of one)
for i in 1 2 3; do
    r=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Give me JSON\"}],\"max_tokens\":120,\"seed\":$i,\"response_format\":{\"type\":\"json_object\"}}")
    [ "$(status)" = 200 ] || fail "json_object: $(status) $r"
    c=$(echo "$r" | jget '.choices[0].message.content')
    f=$(echo "$r" | jget '.choices[0].finish_reason')
    case "$c" in "{"*) ;; *) fail "json_object content does not open an object: $r";; esac
    if [ "$f" = stop ]; then
        echo "$c" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const v=JSON.parse(s);if(typeof v!=="object"||Array.isArray(v)||v===null)process.exit(1)})' ||
            fail "json_object content is not a JSON object: $c"
    else
        [ "$f" = length ] || fail "json_object finish_reason $f"
    fi
done
ok "chat response_format json_object"

# token references (stories260K: <s> is token 1, a control token with no text): matched by id, and
# the worker's 400 for a text that is not one token of the vocabulary
tr='root ::= <s> !<[1]>{2} \" the end.\"\n'
for stream in false true; do
    r=$(post /v1/completions "{\"prompt\":\"Once\",\"max_tokens\":16,\"temperature\":1,\"seed\":5,\"logprobs\":1,\"stream\":$stream,\"grammar\":\"$tr\"}")
    [ "$(status)" = 200 ] || fail "token references (stream $stream): $(status) $r"
    if [ $stream = false ]; then
        [ "$(echo "$r" | jget '.choices[0].finish_reason')" = stop ] || fail "token references finish: $r"
        echo "$r" | jget '.choices[0].text' | grep -q ' the end\.$' || fail "token references text: $r"
    else
        echo "$r" | grep -q '"finish_reason":"stop"' || fail "token references stream finish: $r"
    fi
done
# the vocabulary's refusals are a 400 streamed or not (a stream got 200 and an error event)
for stream in false true; do
    for ref in '<nope>' '<[99999]>' '<[2]>'; do
        r=$(post /v1/completions "{\"prompt\":\"x\",\"stream\":$stream,\"grammar\":\"root ::= \\\"a\\\" $ref\\n\"}")
        [ "$(status)" = 400 ] || fail "token reference $ref (stream $stream): $(status) $r"
        [ "$(echo "$r" | jget '.error.param')" = grammar ] || fail "token reference $ref param: $r"
    done
done
r=$(post /v1/completions '{"prompt":"x","grammar":"root ::= \"a\" <nope>\n"}')
echo "$r" | jget '.error.message' | grep -q "<nope> is not one token" || fail "unknown token reference message: $r"
r=$(post /v1/completions '{"prompt":"x","json_schema":{"type":"string"},"grammar":""}')
[ "$(status)" = 200 ] || fail "an empty grammar beside a schema: $(status) $r"
r=$(post /v1/completions '{"prompt":"x","grammar":"root ::= \"a\" <[12x]>\n"}')
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = grammar ] || fail "bad token id syntax: $(status) $r"
ok "token references: <s> and !<[1]> by id, streamed and not; 400 for a text that is no token"
# a start too ambiguous to expand: a 400 streamed or not, naming the field (a stream got 200, a
# role delta on chat, then an error event)
amb='root ::= ((\"a\"?){0,99}){0,99}'
for stream in false true; do
    r=$(post /v1/completions "{\"prompt\":\"x\",\"max_tokens\":8,\"stream\":$stream,\"grammar\":\"$amb\"}")
    [ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = grammar ] || fail "ambiguous start (stream $stream): $(status) $r"
    echo "$r" | jget '.error.message' | grep -q "too ambiguous" || fail "ambiguous start message (stream $stream): $r"
    r=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":8,\"stream\":$stream,\"grammar\":\"$amb\"}")
    [ "$(status)" = 400 ] || fail "ambiguous start, chat (stream $stream): $(status) $r"
    # ... and one that fails at the first step (its start expands; the first token's mask does
    # not): a constrained stream begins with its output, so this is a 400 too
    sch='{"type":"string","pattern":"^((a{0,100}){0,100}){0,100}$"}'
    r=$(post /v1/completions "{\"prompt\":\"x\",\"max_tokens\":8,\"stream\":$stream,\"json_schema\":$sch}")
    [ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = json_schema ] || fail "ambiguous first step (stream $stream): $(status) $r"
    r=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":8,\"stream\":$stream,
        \"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":$sch}}}")
    [ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = response_format.json_schema ] ||
        fail "ambiguous first step, chat (stream $stream): $(status) $r"
done
ok "a grammar whose start is too ambiguous: 400 streamed or not"

# errors name the field; nothing is generated
r=$(post /v1/completions '{"prompt":"x","grammar":"root ::= \"a\" | undefined\n"}')
[ "$(status)" = 400 ] || fail "bad grammar status $(status): $r"
[ "$(echo "$r" | jget '.error.param')" = grammar ] || fail "bad grammar param: $r"
echo "$r" | jget '.error.message' | grep -q "undefined" || fail "bad grammar message: $r"
r=$(post /v1/completions '{"prompt":"x","grammar":"root ::= (\"a\"\n"}')
[ "$(status)" = 400 ] && echo "$r" | jget '.error.message' | grep -q "line 1" || fail "syntax error position: $r"
r=$(post /v1/completions '{"prompt":"x","grammar":"root ::= root \"a\"\n"}')
[ "$(status)" = 400 ] && echo "$r" | jget '.error.message' | grep -q "left-recursive" || fail "left recursion: $r"
r=$(post /v1/completions '{"prompt":"x","grammar":7}')
[ "$(status)" = 400 ] || fail "grammar of the wrong type: $r"
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","not":{}}}}}')
[ "$(status)" = 400 ] || fail "json_schema with an unsupported keyword must be refused: $r"
[ "$(echo "$r" | jget '.error.param')" = response_format.json_schema ] || fail "json_schema param: $r"
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}}')
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = response_format.type ] || fail "unknown type: $r"
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},"grammar":"root ::= \"a\"\n"}')
[ "$(status)" = 400 ] || fail "grammar + json_object must conflict: $r"
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"max_tokens":4,"response_format":{"type":"text"}}')
[ "$(status)" = 200 ] || fail "response_format text: $(status) $r"
ok "errors: bad grammar (with position), left recursion, unsupported json_schema, unknown type, conflict"

# the daemon is still healthy
[ "$(curl -s --max-time 5 "$URL/health")" = '{"status":"ok"}' ] || fail "/health after the grammar requests"
stop_server
ok "clean shutdown"

# the helper beside the forward pass (engine/gaside.h): on and off, the same seeded outputs; on,
# /metrics counts its seconds, off they stay 0
json_req='{"messages":[{"role":"user","content":"Give me JSON"}],"max_tokens":48,"temperature":1,"seed":11,"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"name":{"type":"string","maxLength":12},"n":{"type":"integer"}},"required":["name","n"]}}}}'
declare -A aside_out aside_s
for mode in off on; do
    start_server "aside-$mode" --threads 1 --grammar-aside $mode
    r=$(post /v1/chat/completions "$json_req")
    [ "$(status)" = 200 ] || fail "aside $mode: $(status) $r"
    aside_out[$mode]=$(echo "$r" | jget '.choices[0].message.content')
    aside_s[$mode]=$(curl -s "$URL/metrics" | sed -n 's/^rlxd_grammar_aside_seconds_total{model_name="tiny"} \(.*\)/\1/p')
    stop_server
done
[ -n "${aside_out[on]}" ] && [ "${aside_out[on]}" = "${aside_out[off]}" ] ||
    fail "the helper changed the output: '${aside_out[on]}' vs '${aside_out[off]}'"
[ "${aside_s[off]}" = 0 ] || fail "helper off, yet its seconds are '${aside_s[off]}'"
node -e 'process.exit(+process.argv[1] > 0 ? 0 : 1)' "${aside_s[on]}" || fail "helper on, seconds '${aside_s[on]}'"
ok "the helper beside the forward pass: same output on and off, its seconds in /metrics (${aside_s[on]} s)"
