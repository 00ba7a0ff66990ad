#!/usr/bin/env bash
# test_server_json_schema.sh - JSON Schema constrained output through the daemon, with a
# random-weight model (synth-llama-tiny, the 32,000-token Llama vocabulary; RLX_SCHEMA_MODEL=
# synth-qwen2-tiny-f32.gguf takes the 151,936-token Qwen2 one, about 3x slower) so that nothing
# but the constraint makes the output valid: json_schema_check.mjs samples RLX_SCHEMA_SAMPLES
# (100) outputs at temperature 1.0 for each of 39 schemas and validates them with Ajv (JSON
# Schema 2020-12 + ajv-formats); then the native and stdio `json_schema` field and the 400s
# naming the keyword.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v node >/dev/null || { echo "skip: node missing"; exit 77; }
[ -d tests/integration/node_modules/ajv-formats ] || { echo "skip: npm ci in tests/integration first (ajv)"; exit 77; }
MODEL="$SHARED/models/${RLX_SCHEMA_MODEL:-synth-llama-tiny-f32.gguf}"
[ -f "$MODEL" ] || { echo "skip: $MODEL absent"; exit 77; }

start_server json_schema --max-seqs 64
node tests/integration/json_schema_check.mjs "$URL" "${RLX_SCHEMA_SAMPLES:-100}" || fail "sampled outputs do not validate"
ok "sampled outputs validate against their schemas"

# native route: json_schema field, streamed; its text is the value
out=$(curl -s --max-time 30 "$URL/v1/generate" -d '{"prompt":"x","max_tokens":40,"stream":true,"temperature":1,"json_schema":{"type":"integer","minimum":10,"maximum":20}}')
last=$(echo "$out" | tail -1)
txt=$(echo "$last" | jget '.text')
[ "$(echo "$last" | jget '.finish_reason')" = stop ] || fail "generate + json_schema finish: $last"
[ "$txt" -ge 10 ] && [ "$txt" -le 20 ] || fail "generate + json_schema text '$txt'"
ok "generate takes json_schema"

# stdio takes it too
line=$(printf '{"id":1,"prompt":"x","max_tokens":40,"json_schema":{"enum":["yes","no"]}}\n' |
       "$BIN" serve -m "$MODEL:tiny" --stdio 2>/dev/null)
t=$(echo "$line" | jget '.text')
[ "$t" = '"yes"' ] || [ "$t" = '"no"' ] || fail "stdio + json_schema: $line"
ok "stdio takes json_schema"

# errors: the keyword is named, the parameter is the field
chat='"messages":[{"role":"user","content":"x"}]'
r=$(post /v1/chat/completions "{$chat,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"multipleOf\":3}}}}}}")
[ "$(status)" = 400 ] || fail "unsupported keyword status $(status): $r"
[ "$(echo "$r" | jget '.error.param')" = response_format.json_schema ] || fail "param: $r"
echo "$r" | jget '.error.message' | grep -q "multipleOf" || fail "message names the keyword: $r"
r=$(post /v1/chat/completions "{$chat,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":{\"\$ref\":\"http://x/s.json\"}}}}")
[ "$(status)" = 400 ] && echo "$r" | jget '.error.message' | grep -q "not local" || fail "remote ref: $r"
r=$(post /v1/chat/completions "{$chat,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":{\"type\":\"string\",\"pattern\":\"^(?=a)\"}}}}")
[ "$(status)" = 400 ] && echo "$r" | jget '.error.message' | grep -q "lookaround" || fail "regex construct: $r"
r=$(post /v1/chat/completions "{$chat,\"grammar\":\"root ::= \\\"a\\\"\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":{}}}}")
[ "$(status)" = 400 ] || fail "grammar + json_schema must conflict: $r"
r=$(post /v1/generate '{"prompt":"x","grammar":"root ::= \"a\"","json_schema":{}}')
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = json_schema ] || fail "native grammar + json_schema: $r"
r=$(post /v1/generate '{"prompt":"x","json_schema":{"type":"number","maximum":3.5}}')
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = json_schema ] || fail "native bad schema: $r"
r=$(post /v1/chat/completions "{$chat,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":7}}")
[ "$(status)" = 400 ] || fail "json_schema not an object: $r"
r=$(post /v1/chat/completions "{$chat,\"response_format\":{\"type\":\"json_object\",\"schema\":{\"not\":{}}}}")
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = response_format.schema ] || fail "json_object + bad schema: $r"
r=$(post /v1/generate '{"prompt":"x","json_schema":{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}}')
[ "$(status)" = 400 ] && echo "$r" | grep -q "cycle of references" || fail "a \$ref cycle is named: $r"
ok "errors name the keyword and the field"

# llama-server's {"type": "json_object", "schema": ...} follows the schema (it was a 400)
for seed in 1 2 3; do
    r=$(post /v1/chat/completions "{$chat,\"max_tokens\":60,\"seed\":$seed,\"temperature\":1,\"response_format\":{\"type\":\"json_object\",
        \"schema\":{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},\"required\":[\"ok\"],\"additionalProperties\":false}}}")
    [ "$(status)" = 200 ] || fail "json_object with a schema: $r"
    c=$(echo "$r" | jget '.choices[0].message.content')
    [ "$(echo "$r" | jget '.choices[0].finish_reason')" != stop ] ||
        echo "$c" | python3 -c 'import json,sys; v=json.load(sys.stdin); sys.exit(0 if list(v) == ["ok"] and isinstance(v["ok"], bool) else 1)' ||
        fail "json_object with a schema, seed $seed: $c"
done
ok "llama-server's json_object + schema follows the schema"

[ "$(curl -s --max-time 5 "$URL/health")" = '{"status":"ok"}' ] || fail "/health after the schema requests"
stop_server

ok "clean shutdown"

# an object of additionalProperties never repeats a key, however hard the model pushes for one:
# a bias on the tokens of '","' and digits made synth-qwen3 write {",":2,"":2,",":-2,...}
MODEL="$SHARED/models/synth-qwen3-tiny-f32.gguf" start_server dupkeys
for seed in 1 2 3; do
    r=$(post /v1/generate "{\"prompt\":\"x\",\"max_tokens\":40,\"seed\":$seed,\"temperature\":1,
        \"logit_bias\":{\"4913\":20,\"64\":30,\"788\":30,\"1335\":30,\"16\":10,\"17\":10,\"92\":8},
        \"json_schema\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}}")
    echo "$r" | jget '.text' | python3 -c '
import json, re, sys
t = sys.stdin.read()
keys = [json.loads(m.group(1)) for m in re.finditer(r"(\"(?:[^\"\\]|\\.)*\")\s*:", t)]
sys.exit(1 if len(keys) != len(set(keys)) or not keys else 0)' || fail "repeated (or no) keys, seed $seed: $r"
done
# a pattern's keys: a token that spells a used key the pattern must close next ("n_7" again) is
# refused before its closing quote (the stage met only repeats one token later and yielded:
# 4 of these 40 seeds repeated a key before)
for seed in $(seq 1 40); do
    r=$(post /v1/generate "{\"prompt\":\"x\",\"max_tokens\":60,\"seed\":$seed,\"temperature\":1,
        \"json_schema\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9}},
        \"required\":[\"id\"],\"patternProperties\":{\"^n_\\\\d$\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}},
        \"additionalProperties\":false}}")
    echo "$r" | jget '.text' | python3 -c '
import json, re, sys
t = sys.stdin.read()
keys = [json.loads(m.group(1)) for m in re.finditer(r"(\"(?:[^\"\\]|\\.)*\")\s*:", t)]
sys.exit(1 if len(keys) != len(set(keys)) or "id" not in keys else 0)' || fail "patternProperties: repeated (or no) keys, seed $seed: $r"
done
# a pattern of three keys, pushed to write them ('{"' and ',' favoured): once all are written the
# ',' that would open a fourth is refused and the object closes, and a key begun ("d") whose only
# completion is written is refused too (the stage yielded once only repeats were left: all 30
# seeds repeated keys, none closed)
closed=0
for seed in $(seq 1 30); do
    r=$(post /v1/generate "{\"prompt\":\"x\",\"max_tokens\":80,\"seed\":$seed,\"temperature\":1,\"logit_bias\":{\"4913\":20,\"11\":15,\"1335\":15},
        \"json_schema\":{\"type\":\"object\",\"patternProperties\":{\"^(en|fr|de)$\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9}},
        \"additionalProperties\":false}}")
    echo "$r" | python3 -c '
import json, re, sys
r = json.load(sys.stdin)
t = r["text"]
keys = [json.loads(m.group(1)) for m in re.finditer(r"(\"(?:[^\"\\]|\\.)*\")\s*:", t)]
if len(keys) != len(set(keys)) or not set(keys) <= {"en", "fr", "de"}: sys.exit(1)
if r["finish_reason"] == "stop" and set(json.loads(t)) != set(keys): sys.exit(1)
sys.exit(0 if r["finish_reason"] == "stop" else 3)'
    case $? in 0) closed=$((closed + 1)) ;; 3) ;; *) fail "three pattern keys: a repeated key, seed $seed: $r" ;; esac
done
[ "$closed" -ge 20 ] || fail "three pattern keys: only $closed of 30 objects closed within 80 tokens"
stop_server
ok "an object of additionalProperties or patternProperties never repeats a key where another is free, and closes once none is"
