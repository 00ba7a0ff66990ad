#!/usr/bin/env bash
# test_server_stream.sh - streamed responses byte by byte: SSE framing ("data: ...\n\n", no
# "event:" lines, [DONE] last), stable id/created, the chat role chunk, finish_reason,
# include_usage, stop strings never leaking (not even in part), native ndjson.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v node >/dev/null || { echo "skip: node missing"; exit 77; }
start_server stream

# Checks an SSE body (file $1) for framing; prints the concatenated text of choice 0.
sse_check() {
    node -e '
const s = require("fs").readFileSync(process.argv[1], "utf8");
const kind = process.argv[2];
const die = m => { console.error(m); process.exit(1); };
if (!s.endsWith("data: [DONE]\n\n")) die("stream does not end with [DONE]: " + JSON.stringify(s.slice(-80)));
const events = s.split("\n\n"); events.pop();
let text = "", ids = new Set(), created = new Set(), finish = null, usage = null, first = true, after = false;
for (const e of events) {
    if (!e.startsWith("data: ")) die("event without data: prefix: " + JSON.stringify(e));
    if (e.includes("\n")) die("multi-line event: " + JSON.stringify(e));
    const p = e.slice(6);
    if (p === "[DONE]") { if (e !== events[events.length - 1]) die("[DONE] not last"); continue; }
    const o = JSON.parse(p);
    if (o.error) die("error event: " + p);
    ids.add(o.id); created.add(o.created);
    if (typeof o.system_fingerprint !== "string" || !o.system_fingerprint) die("chunk without system_fingerprint: " + p);
    if (o.choices.length === 0) { usage = o.usage; continue; }
    if (process.argv[3] === "usage" && !("usage" in o && o.usage === null)) die("with include_usage every chunk but the last has usage null: " + p);
    if (usage) die("chunk after the usage chunk");
    const c = o.choices[0];
    if (kind === "chat") {
        if (o.object !== "chat.completion.chunk") die("object " + o.object);
        if (first && c.delta.role !== "assistant") die("first chunk lacks the role");
        if (!first && c.delta.role) die("role repeated");
        text += c.delta.content || "";
    } else {
        if (o.object !== "text_completion") die("object " + o.object);
        text += c.text;
    }
    if (after) die("chunk after finish_reason");
    if (c.finish_reason) { finish = c.finish_reason; after = true; }
    first = false;
}
if (ids.size !== 1 || created.size !== 1) die("id/created not stable");
if (!finish) die("no finish_reason");
if (process.argv[3] === "usage" && (!usage || usage.total_tokens !== usage.prompt_tokens + usage.completion_tokens)) die("usage chunk missing");
if (process.argv[3] !== "usage" && usage) die("usage without include_usage");
process.stdout.write(JSON.stringify({text, finish}));
' "$@"
}

curl -sN "$URL/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Tell a story"}],"max_tokens":12,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' >"$TMP/chat.sse"
grep -q '^event:' "$TMP/chat.sse" && fail "event: lines present"
sse_check "$TMP/chat.sse" chat usage >/dev/null || fail "chat stream format"
ok chat stream framing + usage

curl -sN "$URL/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' >"$TMP/cu.sse"
sse_check "$TMP/cu.sse" completions usage >/dev/null || fail "completions stream with include_usage"
curl -sN "$URL/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stream":true}' >"$TMP/c.sse"
streamed=$(sse_check "$TMP/c.sse" completions) || fail "completions stream format"
full=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":24,"temperature":0}' | jget '.choices[0].text')
[ "$(echo "$streamed" | jget '.text')" = "$full" ] || fail "streamed text differs from non-streamed"
ok completions stream equals non-stream

curl -sN "$URL/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stream":true,"echo":true}' >"$TMP/echo.sse"
echoed=$(sse_check "$TMP/echo.sse" completions) || fail "echo stream format"
[ "$(echo "$echoed" | jget '.text')" = "Once upon a time$full" ] || fail "streamed echo: $echoed"
curl -sN "$URL/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":4,"temperature":0,"stream":true,"echo":true,"logprobs":1}' >"$TMP/echolp.sse"
node -e '
const ev = require("fs").readFileSync(process.argv[1], "utf8").split("\n\n").filter(e => e.startsWith("data: {")).map(e => JSON.parse(e.slice(6)));
const first = ev[0].choices[0];
if (first.text !== "Once upon a time" || !first.logprobs || first.logprobs.token_logprobs[0] !== null
    || first.logprobs.tokens.length < 5) { console.error("echo chunk: " + JSON.stringify(ev[0])); process.exit(1); }
' "$TMP/echolp.sse" || fail "streamed echo with logprobs: the first chunk carries the prompt and its logprobs"
ok completions stream with echo

# A stop string that spans a token boundary, chosen from the greedy output's own tokens (their
# texts from logprobs): the last 2 bytes of token k and the first 2 of token k+1, where that is
# the string's first occurrence. The streamed text must be exactly what precedes it: no part
# of the stop string may ever be sent.
r=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"logprobs":0}')
body=$(node -e '
const r = JSON.parse(process.argv[1]);
const full = r.choices[0].text, toks = r.choices[0].logprobs.tokens;
if (toks.join("") !== full) { console.error("token texts do not make up the text"); process.exit(1); }
let off = 0;
for (let k = 0; k + 1 < toks.length; k++) {
  off += toks[k].length;
  if (k < 2 || toks[k].length < 2 || toks[k + 1].length < 2) continue;
  const stop = full.slice(off - 2, off + 2);
  if (full.indexOf(stop) !== off - 2) continue;
  console.log(JSON.stringify({stop, want: full.slice(0, off - 2), boundary: off}));
  process.exit(0);
}
console.error("no token boundary with two 2-byte tokens around it: " + JSON.stringify(toks));
process.exit(1);' "$r") || fail "choosing a stop string across a token boundary"
stop=$(echo "$body" | jget '.stop')
want=$(echo "$body" | jget '.want')
[ "$full" = "$(echo "$r" | jget '.choices[0].text')" ] || fail "greedy text changed with logprobs"
req=$(node -e 'console.log(JSON.stringify({prompt:"Once upon a time",max_tokens:24,temperature:0,stream:true,stop:[process.argv[1]]}))' "$stop")
curl -sN "$URL/v1/completions" -d "$req" >"$TMP/stop.sse"
got=$(sse_check "$TMP/stop.sse" completions) || fail "stop stream format"
[ "$(echo "$got" | jget '.text')" = "$want" ] || fail "stop: streamed $(echo "$got" | jget '.text') want $want (stop '$stop')"
[ "$(echo "$got" | jget '.finish')" = stop ] || fail "stop finish_reason: $got"
req=$(node -e 'console.log(JSON.stringify({prompt:"Once upon a time",max_tokens:24,temperature:0,stop:process.argv[1]}))' "$stop")
r=$(post /v1/completions "$req")
[ "$(echo "$r" | jget '.choices[0].text')" = "$want" ] || fail "stop non-stream: $r"
# the engine ends the sequence at the token completing the match: usage counts exactly the
# tokens the native route lists (once a cancel decided it, so the count varied run to run)
req=$(node -e 'console.log(JSON.stringify({prompt:"Once upon a time",max_tokens:24,temperature:0,stop:[process.argv[1]]}))' "$stop")
g=$(post /v1/generate "$req")
[ "$(echo "$g" | jget '.finish_reason')" = stop ] || fail "generate stop: $g"
[ "$(echo "$g" | jget '.text')" = "$want" ] || fail "generate stop text: $g"
nt=$(echo "$g" | jget '.token_ids.length')
[ "$(echo "$g" | jget '.usage.completion_tokens')" = "$nt" ] || fail "completion_tokens vs token_ids: $g"
[ "$nt" -lt 24 ] || fail "stop did not end the generation: $g"
[ "$(echo "$r" | jget '.usage.completion_tokens')" = "$nt" ] || fail "completions usage $(echo "$r" | jget '.usage') vs $nt tokens"
ok "stop string held back across tokens; usage counts the $nt tokens up to the match"

# native ndjson stream: token lines, then the final object
curl -sN "$URL/v1/generate" -d '{"prompt":"Once upon a time","max_tokens":6,"temperature":0,"stream":true}' >"$TMP/g.ndjson"
node -e '
const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n");
if (lines.pop() !== "") throw new Error("no final newline");
const objs = lines.map(l => JSON.parse(l));
const fin = objs.pop();
if (!fin.finish_reason || !Array.isArray(fin.token_ids) || !fin.usage || !fin.timings) throw new Error("final: " + JSON.stringify(fin));
if (objs.length !== fin.token_ids.length) throw new Error("token lines " + objs.length + " vs " + fin.token_ids.length);
objs.forEach((o, i) => { if (o.token !== fin.token_ids[i] || typeof o.text !== "string") throw new Error("line " + i); });
if (!fin.text.startsWith(objs.map(o => o.text).join(""))) throw new Error("texts do not add up");
' "$TMP/g.ndjson" || fail "ndjson stream"
grep -qi '^content-type: application/x-ndjson' <(curl -sN -D - -o /dev/null "$URL/v1/generate" -d '{"prompt":"a","max_tokens":1,"stream":true}') ||
    fail "ndjson content type"
ok generate ndjson

# 64 streaming clients at once (suspend/resume under load): every stream well-formed and
# complete, and its text equal to the greedy text of the same request made alone, non-streamed
prompts=("Once upon a time" "The little dog" "Lily wanted to" "One day, a girl" "The sun was" "Tom and Sue" "A big red" "In the park")
for k in $(seq 0 7); do
    p=${prompts[$k]}
    post /v1/completions "{\"prompt\":\"$p\",\"max_tokens\":16,\"temperature\":0}" | jget '.choices[0].text' >"$TMP/ref_c$k"
    post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$p\"}],\"max_tokens\":16,\"temperature\":0}" |
        jget '.choices[0].message.content' >"$TMP/ref_h$k"
done
pids=()
for i in $(seq 1 64); do
    k=$((i % 8)); p=${prompts[$k]}
    if [ $((i % 2)) = 0 ]; then
        curl -sN -m 120 "$URL/v1/chat/completions" -d "{\"messages\":[{\"role\":\"user\",\"content\":\"$p\"}],\"max_tokens\":16,\"temperature\":0,\"stream\":true}" >"$TMP/par$i.sse" &
    else
        curl -sN -m 120 "$URL/v1/completions" -d "{\"prompt\":\"$p\",\"max_tokens\":16,\"temperature\":0,\"stream\":true}" >"$TMP/par$i.sse" &
    fi
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent stream's curl failed"; done
for i in $(seq 1 64); do
    k=$((i % 8)); kind=completions; ref="$TMP/ref_c$k"
    [ $((i % 2)) = 0 ] && kind=chat && ref="$TMP/ref_h$k"
    got=$(sse_check "$TMP/par$i.sse" $kind) || fail "concurrent stream $i"
    [ "$(echo "$got" | jget '.text')" = "$(cat "$ref")" ] || fail "stream $i ($kind, '${prompts[$k]}'): $(echo "$got" | jget '.text') != $(cat "$ref")"
done
ok 64 concurrent streams equal their greedy texts

# an error before the first byte is a plain HTTP error, even for stream requests
r=$(post /v1/chat/completions '{"messages":[],"stream":true}')
[ "$(status)" = 400 ] || fail "stream 400: $r"
# a text prompt longer than the context is known before the stream starts: a 400 naming it
long=$(node -e 'console.log("Once upon a time ".repeat(200))')
overflow() { # PATH PARAM BODY
    r=$(post "$1" "$3")
    [ "$(status)" = 400 ] || fail "$1: a streamed request over the context must be a 400, got $(status): $(echo "$r" | head -c 300)"
    [ "$(echo "$r" | jget '.error.param')" = "$2" ] || fail "$1: param: $r"
    [ "$(echo "$r" | jget '.error.code')" = context_length_exceeded ] || fail "$1: code: $r"
}
overflow /v1/completions prompt "{\"prompt\":\"$long\",\"stream\":true}"
overflow /v1/chat/completions messages "{\"messages\":[{\"role\":\"user\",\"content\":\"$long\"}],\"stream\":true}"
overflow /v1/generate prompt "{\"prompt\":\"$long\",\"stream\":true}"
overflow /v1/completions max_tokens '{"prompt":"Once upon a time","max_tokens":509,"stream":true}'
ok context overflow of a streamed request is a 400 before the stream
stop_server
echo "all passed"
