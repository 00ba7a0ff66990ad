#!/usr/bin/env bash
# test_server_http.sh - every HTTP endpoint of `rlxd serve` against the real daemon, plus the
# error paths: 400 naming the parameter, 404 route/model, 405, 413 body limit, 401 auth.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v node >/dev/null || { echo "skip: node missing (used to read JSON)"; exit 77; }

start_server http

# /health and /v1/models
[ "$(curl -s "$URL/health")" = '{"status":"ok"}' ] || fail "/health body"
ok health
m=$(curl -s "$URL/v1/models")
[ "$(echo "$m" | jget '.data[0].id')" = tiny ] || fail "/v1/models: $m"
[ "$(echo "$m" | jget '.object')" = list ] || fail "/v1/models object"
[ "$(curl -s "$URL/v1/models/tiny" | jget '.id')" = tiny ] || fail "/v1/models/tiny"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/models/other")" = 404 ] || fail "/v1/models/other must be 404"
ok models

# completions: greedy is deterministic; n x prompts choices with their index
r=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":8,"temperature":0}')
[ "$(status)" = 200 ] || fail "completions status $(status): $r"
[ "$(echo "$r" | jget '.object')" = text_completion ] || fail "completions object: $r"
case "$(echo "$r" | jget '.system_fingerprint')" in fp_rlxd_*) ;; *) fail "system_fingerprint: $r";; esac
t1=$(echo "$r" | jget '.choices[0].text')
[ -n "$t1" ] || fail "empty completion"
[ "$(echo "$r" | jget '.usage.completion_tokens')" -le 8 ] || fail "usage: $r"
fr=$(echo "$r" | jget '.choices[0].finish_reason')
[ "$fr" = length ] || [ "$fr" = stop ] || fail "finish_reason $fr"
r2=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":8,"temperature":0}')
[ "$(echo "$r2" | jget '.choices[0].text')" = "$t1" ] || fail "greedy not deterministic"
r=$(post /v1/completions '{"prompt":["Once","The dog"],"n":2,"max_tokens":3,"temperature":0.8,"seed":5}')
[ "$(echo "$r" | jget '.choices.length')" = 4 ] || fail "n x prompts: $r"
[ "$(echo "$r" | jget '.choices.map(c=>c.index).join()')" = "0,1,2,3" ] || fail "indexes: $r"
r=$(post /v1/completions '{"prompt":"Once upon","max_tokens":3,"temperature":0,"echo":true,"logprobs":2}')
case "$(echo "$r" | jget '.choices[0].text')" in "Once upon"*) ;; *) fail "echo: $r";; esac
# echo with logprobs: the prompt's tokens come first (the first without logprob), as OpenAI
np=$(echo "$r" | jget '.usage.prompt_tokens')
[ "$(echo "$r" | jget '.choices[0].logprobs.tokens.length')" = $((np + $(echo "$r" | jget '.usage.completion_tokens'))) ] ||
    fail "logprobs tokens (prompt + completion): $r"
[ "$(echo "$r" | jget '.choices[0].logprobs.token_logprobs[0]')" = null ] || fail "first prompt token logprob: $r"
[ "$(echo "$r" | jget '.choices[0].logprobs.top_logprobs[0]')" = null ] || fail "first prompt token top: $r"
[ "$(echo "$r" | jget '.choices[0].logprobs.token_logprobs.slice(1).every(x => typeof x === "number" && x <= 0)')" = true ] ||
    fail "prompt token logprobs: $r"
[ "$(echo "$r" | jget ".choices[0].logprobs.tokens.slice(1, $np).join('')")" = " Once upon" ] || fail "prompt tokens: $r"
[ "$(echo "$r" | jget ".choices[0].logprobs.text_offset[$np]")" = 9 ] || fail "text_offset after echo: $r"
# the last prompt token's logprob is what the model gave it as a continuation
r2=$(post /v1/completions '{"prompt":"Once","max_tokens":1,"temperature":0,"logprobs":1,"logit_bias":{"'"$(post /tokenize '{"content":" upon","add_special":false}' | jget '.tokens[0]')"'":0}}')
[ "$(node -e 'const [a,b]=process.argv.slice(1).map(JSON.parse); const x=a.choices[0].logprobs.token_logprobs[2], y=b.choices[0].logprobs.token_logprobs[0]; console.log(b.choices[0].logprobs.tokens[0] !== " upon" || Math.abs(x - y) < 1e-3)' "$r" "$r2")" = true ] ||
    fail "prompt logprob of ' upon' differs from its generation logprob: $r $r2"
r=$(post /v1/completions '{"prompt":[1,400,500],"max_tokens":2}')
[ "$(status)" = 200 ] || fail "token-array prompt: $r"
ok completions

# chat completions, with logprobs in the chat format
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":6,"temperature":0,"logprobs":true,"top_logprobs":2}')
[ "$(status)" = 200 ] || fail "chat status $(status): $r"
[ "$(echo "$r" | jget '.object')" = chat.completion ] || fail "chat object: $r"
case "$(echo "$r" | jget '.system_fingerprint')" in fp_rlxd_*) ;; *) fail "chat system_fingerprint: $r";; esac
[ "$(echo "$r" | jget '.choices[0].message.role')" = assistant ] || fail "chat role: $r"
[ "$(echo "$r" | jget '.choices[0].logprobs.content[0].top_logprobs.length')" = 2 ] || fail "chat top_logprobs: $r"
ok chat

# native generate
r=$(post /v1/generate '{"prompt":"Once upon a time","max_tokens":5,"temperature":0}')
[ "$(echo "$r" | jget '.token_ids.length')" = "$(echo "$r" | jget '.usage.completion_tokens')" ] || fail "generate: $r"
echo "$r" | jget '.timings.total_s' >/dev/null || fail "timings: $r"
# streamed, its last line is that response, logprobs included (they were left out)
r=$(post /v1/generate '{"prompt":"Once upon a time","max_tokens":5,"temperature":0,"logprobs":true,"top_logprobs":2}')
s=$(post /v1/generate '{"prompt":"Once upon a time","max_tokens":5,"temperature":0,"logprobs":true,"top_logprobs":2,"stream":true}' | tail -1)
[ "$(echo "$r" | jget '.logprobs.content.length')" = 5 ] || fail "generate logprobs: $r"
[ "$(echo "$s" | jget '.logprobs')" = "$(echo "$r" | jget '.logprobs')" ] || fail "streamed generate logprobs: $s"
ok generate

# tokenize / detokenize round trip; apply-template
r=$(post /tokenize '{"content":"Once upon a time","add_special":false}')
ids=$(echo "$r" | jget '.tokens')
[ "$(echo "$r" | jget '.tokens.length')" -ge 2 ] || fail "tokenize: $r"
r=$(post /detokenize "{\"tokens\":$ids}")
# the pieces joined as they are, as llama-server: SentencePiece's prefix space stays, so that
# token-by-token detokenizing concatenates to the whole (it was dropped: "Onceuponatime")
[ "$(echo "$r" | jget '.content')" = " Once upon a time" ] || fail "detokenize: $r"
one=""
for id in $(echo "$ids" | tr -d '[]' | tr ',' ' '); do one="$one$(post /detokenize "{\"tokens\":[$id]}" | jget '.content')"; done
[ "$one" = " Once upon a time" ] || fail "detokenize token by token: '$one'"
# llama-server's forms: pieces beside the ids, special tokens written out
r=$(post /tokenize '{"content":"Once upon","add_special":true,"with_pieces":true}')
[ "$(echo "$r" | jget '.tokens.map(t=>t.piece).join("")')" = "<s> Once upon" ] || fail "tokenize with_pieces: $r"
[ "$(echo "$r" | jget '.tokens[0].id')" = 1 ] || fail "tokenize with_pieces ids: $r"
r=$(post /detokenize '{"tokens":[1,403]}')
case "$(echo "$r" | jget '.content')" in "<s>"*) ;; *) fail "detokenize of a special token: $r";; esac
r=$(post /apply-template '{"messages":[{"role":"user","content":"Hi there"}]}')
case "$(echo "$r" | jget '.prompt')" in *"Hi there"*) ;; *) fail "apply-template: $r";; esac
ok tokenize detokenize apply-template

# errors
r=$(post /v1/completions '{"prompt":"x","temperature":"hot"}')
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = temperature ] || fail "400 temperature: $r"
[ "$(echo "$r" | jget '.error.type')" = invalid_request_error ] || fail "error type: $r"
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"top_p":2}')
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = top_p ] || fail "400 top_p: $r"
r=$(post /v1/completions '{"prompt":"x","stop":["a","b","c","d","e"]}')
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = stop ] || fail "400 stop: $r"
r=$(post /v1/completions '{"prompt":[1,99999999]}')
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = prompt ] || fail "400 vocab: $r"
r=$(post /v1/completions '{"prompt":"x","max_tokens":100000}')
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = max_tokens ] || fail "400 max_tokens over the context: $r"
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":100000}')
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = max_completion_tokens ] || fail "400 max_completion_tokens: $r"
long=$(node -e 'console.log(JSON.stringify({prompt: Array(600).fill(5), max_tokens: 4}))')
r=$(post /v1/completions "$long")
[ "$(status)" = 400 ] || fail "a prompt longer than the context must be a 400: $(status) $r"
for ids in '"abc"' '[1,"a"]' '[1.5]' '[[1,2]]' '{"a":1}' '[]'; do
    r=$(post /v1/generate "{\"input_ids\":$ids,\"max_tokens\":2}")
    [ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = input_ids ] || fail "400 input_ids $ids: $r"
done
r=$(post /detokenize '{"tokens":[-1]}')
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = tokens ] || fail "400 detokenize -1: $r"
case "$(echo "$r" | jget '.error.message')" in *"and -1"*) fail "detokenize message: $r";; esac
r=$(post /detokenize '{"tokens":[99999999]}')
case "$(echo "$r" | jget '.error.message')" in *"between 0 and 511"*) ;; *) fail "detokenize range: $r";; esac
r=$(post /v1/completions '{"prompt": "x"')
[ "$(status)" = 400 ] || fail "bad JSON: $(status)"
r=$(post /v1/completions '{"prompt":"x","model":"nope"}')
[ "$(status)" = 404 ] && [ "$(echo "$r" | jget '.error.code')" = model_not_found ] || fail "404 model: $r"
r=$(curl -s -w '%{http_code}' "$URL/v1/nothing")
case "$r" in *404) ;; *) fail "404 route: $r";; esac
r=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/completions")
[ "$r" = 405 ] || fail "405: $r"
# a real 10 MB body against the default 4 MiB limit: announced by Content-Length, and sent
# chunked (no length known up front)
node -e 'process.stdout.write(JSON.stringify({prompt: "a".repeat(10 << 20)}))' >"$TMP/big.json"
[ "$(stat -c %s "$TMP/big.json")" -gt 10000000 ] || fail "the big body is not 10 MB"
# (a chunked body is refused before it is read: 411, see test_server_framing.sh)
for hc in "Content-Type: application/json=413" "Transfer-Encoding: chunked=411"; do
    hdr=${hc%=*}
    code=$(curl -s -o "$TMP/body" -w '%{http_code}' -H "$hdr" --data-binary @"$TMP/big.json" "$URL/v1/completions")
    [ "$code" = "${hc##*=}" ] || fail "10 MB body ($hdr): $code $(head -c 200 "$TMP/body")"
    jget '.error.message' <"$TMP/body" >/dev/null || fail "$code body: $(head -c 200 "$TMP/body")"
done
# bodies over the inline-parse size are parsed on the threadpool: same answers
pad=$(node -e 'console.log("p".repeat(100000))')
r=$(post /v1/completions "{\"prompt\":\"Once upon a time\",\"max_tokens\":8,\"temperature\":0,\"pad\":\"$pad\"}")
[ "$(echo "$r" | jget '.choices[0].text')" = "$t1" ] || fail "large body completion: $(echo "$r" | head -c 300)"
r=$(post /tokenize "{\"content\":\"$pad\",\"add_special\":false}")
[ "$(echo "$r" | jget '.tokens.length')" -gt 1000 ] || fail "large /tokenize: $(echo "$r" | head -c 200)"
r=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":3,\"pad\":\"$pad\"}")
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = top_p ] || fail "large body 400: $(echo "$r" | head -c 300)"
r=$(post /v1/completions "{\"prompt\":\"$pad\"")
[ "$(status)" = 400 ] || fail "large bad JSON: $(status)"
ok errors 400 404 405 413

# a UTF-8 byte order mark before the JSON (Windows tools write one) is read past (RFC 8259 8.1)
printf '\xef\xbb\xbf{"prompt":"Once upon a time","max_tokens":8,"temperature":0}' >"$TMP/bom.json"
r=$(curl -s -H 'Content-Type: application/json' --data-binary @"$TMP/bom.json" "$URL/v1/completions")
[ "$(echo "$r" | jget '.choices[0].text')" = "$t1" ] || fail "body after a byte order mark: $(echo "$r" | head -c 300)"
printf '\xef\xbb\xbf' >"$TMP/bom-only.json"
r=$(curl -s -w ' %{http_code}' -H 'Content-Type: application/json' --data-binary @"$TMP/bom-only.json" "$URL/v1/completions")
case "$r" in *" 400") ;; *) fail "a body of only a byte order mark: $r";; esac
ok "a UTF-8 byte order mark before the body"

# /metrics: Prometheus names
mt=$(curl -s "$URL/metrics")
for name in 'rlxd_requests_total{endpoint="completions",status="200"}' rlxd_prompt_tokens_total \
    rlxd_generation_tokens_total rlxd_num_requests_running rlxd_num_requests_waiting rlxd_kv_cache_usage_ratio \
    rlxd_prefix_cache_queries_total rlxd_prefix_cache_hits_total rlxd_time_to_first_token_seconds_bucket \
    rlxd_inter_token_latency_seconds_sum rlxd_e2e_request_latency_seconds_count \
    'rlxd_requests_total{endpoint="completions",status="400"}'; do
    echo "$mt" | grep -qF "$name" || fail "metrics lack $name"
done
ok metrics

# access log: one line per request with status and tokens
grep -q 'POST /v1/completions 200 model=tiny prompt_tokens=[1-9]' "$LOG" || fail "access log line"
stop_server
ok sigterm-idle

# auth: every route but /health needs the key; two models, routed by "model"
Q8="$SHARED/models/stories260K-q8_0.gguf"
[ -f "$Q8" ] || Q8="$MODEL"
start_server auth --api-key s3cret --log-format json -m "$Q8:second"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] || fail "/health needs no key"
r=$(curl -s -w '%{http_code}' "$URL/v1/models")
case "$r" in *401) ;; *) fail "401 without key: $r";; esac
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' "$URL/v1/models")" = 401 ] || fail "wrong key"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cretX' "$URL/metrics")" = 401 ] || fail "longer key"
# a field value's trailing whitespace is not part of it (RFC 9110 5.5): the key still matches
st=$(python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret \t\r\nConnection: close\r\n\r\n")
print(s.recv(64).split(b" ")[1].decode())' "$PORT")
[ "$st" = 200 ] || fail "key with trailing whitespace: $st"
# without the key, a body is never invited: 401 at once, not 100 Continue (then 401 after 4 MB)
st=$(python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(5)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: 4000000\r\nExpect: 100-continue\r\n\r\n")
print(s.recv(64).split(b" ")[1].decode())' "$PORT")
[ "$st" = 401 ] || fail "unauthenticated upload invited: $st"
r=$(post /v1/completions '{"prompt":"x","max_tokens":2}')
[ "$(status)" = 401 ] || fail "401 completions"
r=$(post /v1/completions '{"prompt":"x","max_tokens":2}' -H 'Authorization: Bearer s3cret')
[ "$(status)" = 200 ] || fail "key accepted: $(status) $r"
grep -q '"path":"/v1/completions","status":200' "$LOG" || fail "json access log"
[ "$(echo "$r" | jget '.model')" = tiny ] || fail "default model is the first: $r"
r=$(post /v1/completions '{"prompt":"x","max_tokens":2,"model":"second"}' -H 'Authorization: Bearer s3cret')
[ "$(echo "$r" | jget '.model')" = second ] || fail "routing by model: $r"
r=$(curl -s -H 'Authorization: Bearer s3cret' "$URL/v1/models")
[ "$(echo "$r" | jget '.data.map(m=>m.id).join()')" = "tiny,second" ] || fail "two models listed: $r"
stop_server
ok auth multi-model
# several keys, as llama-server takes them: a file with one per line (a second line made every
# request a 401), --api-key with commas
printf '\xef\xbb\xbf  k1 \r\n\nk2\n' >"$TMP/keys"
for form in "--api-key-file=$TMP/keys" "--api-key=k1,k2"; do
    start_server keys "$form"
    for k in k1 k2; do
        [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $k" "$URL/v1/models")" = 200 ] || fail "$form: key $k refused"
    done
    for k in k3 "k1,k2" k; do
        [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $k" "$URL/v1/models")" = 401 ] || fail "$form: key '$k' accepted"
    done
    stop_server
done
ok "several API keys (a file's lines, --api-key's commas)"
echo "all passed"
