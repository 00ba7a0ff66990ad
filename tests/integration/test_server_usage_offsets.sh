#!/usr/bin/env bash
# test_server_usage_offsets.sh - usage and logprob offsets of the OpenAI routes: with n = 2 (and
# two prompts) usage.prompt_tokens counts each prompt once, as OpenAI and vLLM do, while
# completion_tokens counts every choice; with echo and logprobs every text_offset indexes the
# returned text in characters, as OpenAI counts them (the BOS piece "<s>" and SentencePiece's
# leading space are not in it), for text and token-id prompts, accented and CJK text, streamed
# or not.
. "$(dirname "$0")/server_lib.sh"
command -v node >/dev/null || { echo "skip: node missing"; exit 77; }
start_server s1

p1=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":4,"temperature":0}' | jget '.usage.prompt_tokens')
p2=$(post /v1/completions '{"prompt":"The little dog ran","max_tokens":4,"temperature":0}' | jget '.usage.prompt_tokens')
r=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":4,"n":2,"temperature":0}')
[ "$(status)" = 200 ] || fail "n=2: $(status) $r"
[ "$(echo "$r" | jget '.usage.prompt_tokens')" = "$p1" ] || fail "n=2 prompt_tokens should be $p1: $r"
[ "$(echo "$r" | jget '.usage.completion_tokens')" = 8 ] || fail "n=2 completion_tokens: $r"
[ "$(echo "$r" | jget '.usage.total_tokens')" = $((p1 + 8)) ] || fail "n=2 total_tokens: $r"
r=$(post /v1/completions '{"prompt":["Once upon a time","The little dog ran"],"max_tokens":4,"n":2,"temperature":0}')
[ "$(echo "$r" | jget '.usage.prompt_tokens')" = $((p1 + p2)) ] || fail "2 prompts x n=2: prompt_tokens should be $((p1 + p2)): $r"
[ "$(echo "$r" | jget '.usage.completion_tokens')" = 16 ] || fail "2 prompts x n=2 completion_tokens: $r"
c1=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"temperature":0}' | jget '.usage.prompt_tokens')
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"n":3,"temperature":0}')
[ "$(echo "$r" | jget '.usage.prompt_tokens')" = "$c1" ] || fail "chat n=3 prompt_tokens should be $c1: $r"
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"n":2,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}')
u=$(echo "$r" | grep '"usage":{' | sed 's/^data: //')
[ "$(echo "$u" | jget '.usage.prompt_tokens')" = "$c1" ] || fail "streamed chat n=2 prompt_tokens should be $c1: $u"
ok "prompt_tokens counted once per prompt (completions $p1, $p1+$p2; chat $c1)"

# echo + logprobs: offsets index the returned text
check_offsets() { # RESPONSE-JSON (a completion with one choice)
    node -e '
const r = JSON.parse(process.argv[1]), c = r.choices[0], lp = c.logprobs, t = c.text;
const die = m => { console.error(m + "\n" + JSON.stringify(c)); process.exit(1); };
if (lp.tokens.length !== lp.text_offset.length) die("lengths");
let first = true;
lp.tokens.forEach((tok, i) => {
  const off = lp.text_offset[i];
  if (off < 0 || off > t.length) die("offset " + off + " of token " + i + " outside the text");
  if (i && off < lp.text_offset[i - 1]) die("offsets go back at " + i);
  if (tok === "<s>") return;                                  /* a special piece: not in the text */
  if (tok.includes("\ufffd")) { first = false; return; }     /* part of a character (byte pieces) */
  const want = first && !t.startsWith(tok) ? tok.replace(/^ /, "") : tok;
  first = false;
  if (t.substr(off, want.length) !== want) die("token " + i + " " + JSON.stringify(tok) + " is not at " + off);
});
if (lp.text_offset[0] !== 0) die("the first offset is not 0");
' "$1"
}
for body in '{"prompt":"Once upon a time","max_tokens":4,"echo":true,"logprobs":1,"temperature":0}' \
            '{"prompt":[1,403,407,261],"max_tokens":4,"echo":true,"logprobs":2,"temperature":0}' \
            '{"prompt":" Lily and Ben","max_tokens":3,"echo":true,"logprobs":0,"temperature":0}' \
            '{"prompt":"Once h\u00e9llo w\u00f6rld \u65e5\u672c","max_tokens":3,"echo":true,"logprobs":1,"temperature":0}'; do
    r=$(post /v1/completions "$body")
    [ "$(status)" = 200 ] || fail "echo: $(status) $r"
    check_offsets "$r" || fail "echo offsets for $body"
done
r=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":4,"echo":true,"logprobs":1,"temperature":0,"stream":true}')
first=$(echo "$r" | grep '^data: {' | head -1 | sed 's/^data: //')
node -e '
const c = JSON.parse(process.argv[1]).choices[0], lp = c.logprobs;
const i = lp.tokens.indexOf(" upon");
if (i < 0 || c.text.substr(lp.text_offset[i], 5) !== " upon") { console.error(JSON.stringify(c)); process.exit(1); }
' "$first" || fail "streamed echo offsets: $first"
ok "echo + logprobs: text_offset indexes the returned text"

# max_tokens 0 (completions, as OpenAI's legacy API): the prompt scored, nothing generated - echo
# + logprobs + max_tokens 0 is how evaluation harnesses read a text's log-likelihood (it was a
# 400); the prompt's logprobs equal those a generating request gets, streamed or not
ref=$(post /v1/completions '{"prompt":"Once upon a time there was","max_tokens":1,"echo":true,"logprobs":1,"temperature":0}')
for st in false true; do
    r=$(post /v1/completions "{\"prompt\":\"Once upon a time there was\",\"max_tokens\":0,\"echo\":true,\"logprobs\":1,\"stream\":$st,\"stream_options\":{\"include_usage\":$st}}")
    [ "$(status)" = 200 ] || fail "max_tokens 0: $(status) $r"
    node -e '
const [ref, body, st] = [JSON.parse(process.argv[1]), process.argv[2], process.argv[3] === "true"];
let text = "", toks = [], lps = [], fin = null, usage = null;
const take = (c) => { text += c.text; if (c.logprobs) { toks.push(...c.logprobs.tokens); lps.push(...c.logprobs.token_logprobs); }
                      if (c.finish_reason) fin = c.finish_reason; };
if (st) body.split("\n").filter(l => l.startsWith("data: {")).map(l => JSON.parse(l.slice(6)))
           .forEach(o => { if (o.choices.length) take(o.choices[0]); if (o.usage) usage = o.usage; });
else { const o = JSON.parse(body); take(o.choices[0]); usage = o.usage; }
const rc = ref.choices[0], n = ref.usage.prompt_tokens;
const die = (m) => { console.error(m + ": " + body); process.exit(1); };
if (text !== "Once upon a time there was") die("text");
if (fin !== "length" || usage.completion_tokens !== 0 || usage.prompt_tokens !== n) die("finish or usage");
if (toks.length !== n || JSON.stringify(toks) !== JSON.stringify(rc.logprobs.tokens.slice(0, n))) die("tokens");
if (JSON.stringify(lps) !== JSON.stringify(rc.logprobs.token_logprobs.slice(0, n))) die("logprobs differ");
' "$ref" "$r" "$st" || fail "max_tokens 0 scoring (stream $st)"
done
# a prompt with no text ("", control-token ids): its entries are streamed too (they were empty)
for p in '""' '[1,2,3,4]'; do
    a=$(post /v1/completions "{\"prompt\":$p,\"max_tokens\":0,\"echo\":true,\"logprobs\":1}" | jget '.choices[0].logprobs.tokens')
    b=$(post /v1/completions "{\"prompt\":$p,\"max_tokens\":0,\"echo\":true,\"logprobs\":1,\"stream\":true}" |
        node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const t=[];s.split("\n").filter(l=>l.startsWith("data: {")).forEach(l=>{const c=JSON.parse(l.slice(6)).choices[0];if(c&&c.logprobs)t.push(...c.logprobs.tokens)});console.log(JSON.stringify(t))})')
    [ "$a" = "$b" ] && [ "$a" != "[]" ] || fail "echo logprobs of $p: streamed $b, not $a"
done
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"max_tokens":0}')
[ "$(status)" = 400 ] || fail "chat max_tokens 0: $(status) $r"
# nothing is generated, so a prompt may fill the context (it was refused at exactly n_ctx tokens)
nctx=$(curl -s "$URL/v1/models" | jget '.data[0].meta.n_ctx')
full=$(node -e 'console.log(JSON.stringify(Array.from({length: +process.argv[1]}, (_, i) => 10 + i % 300)))' "$nctx")
r=$(post /v1/completions "{\"prompt\":$full,\"max_tokens\":0,\"echo\":true,\"logprobs\":1}")
[ "$(status)" = 200 ] && [ "$(echo "$r" | jget '.usage.prompt_tokens')" = "$nctx" ] || fail "max_tokens 0, $nctx-token prompt: $(status) $r"
r=$(post /v1/completions "{\"prompt\":${full%]},7],\"max_tokens\":0,\"echo\":true,\"logprobs\":1}")
[ "$(status)" = 400 ] || fail "max_tokens 0, $((nctx + 1))-token prompt: $(status) $r"
ok "completions max_tokens 0: the prompt scored, nothing generated"

# a stop string cuts the text: logprobs describe the returned text (tokens that begin past its
# end, the stop string's, are left out, as llama-server does), streamed or not; before, " g"
# and "ir" of "little gi" came with text_offset past the text
stop_lps() {
    node -e '
const [body, streamed] = [process.argv[1], process.argv[2] === "1"];
let text = "", toks = [], offs = [], content = [];
const take = c => { text += c.text ?? c.delta?.content ?? c.message?.content ?? "";
  if (c.logprobs?.tokens) { toks.push(...c.logprobs.tokens); offs.push(...c.logprobs.text_offset); }
  if (c.logprobs?.content) content.push(...c.logprobs.content.map(x => x.token)); };
if (streamed) body.split("\n").filter(l => l.startsWith("data: {")).forEach(l => take(JSON.parse(l.slice(6)).choices[0]));
else take(JSON.parse(body).choices[0]);
const all = toks.length ? toks : content;
if (!all.length) { console.error("no logprobs: " + body); process.exit(1); }
if (offs.some(o => o >= text.length)) { console.error("offset past the text: " + JSON.stringify([text, toks, offs])); process.exit(1); }
let pos = 0;
/* each token whole within the text, in order: the token in which the stop string begins is
   left out too (as llama-server; it was kept: " to" with " She loved " returned) */
for (const t of all) { if (text.slice(pos, pos + t.length) !== t) { console.error("token not within the text: " + JSON.stringify([text, all])); process.exit(1); } pos += t.length; }
' "$1" "$2"
}
for st in false true; do
    r=$(post /v1/completions "{\"prompt\":\"Once upon a time\",\"max_tokens\":30,\"temperature\":0,\"stop\":\"little gi\",\"logprobs\":1,\"stream\":$st}")
    stop_lps "$r" "$([ $st = true ] && echo 1)" || fail "completions stop + logprobs (stream $st)"
    r=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":30,\"temperature\":0,\"stop\":\"e\",\"logprobs\":true,\"stream\":$st}")
    stop_lps "$r" "$([ $st = true ] && echo 1)" || fail "chat stop + logprobs (stream $st)"
    r=$(post /v1/completions "{\"prompt\":\"Sara had a big red ball.\",\"max_tokens\":18,\"temperature\":0,\"stop\":[\"r\",\"t\"],\"logprobs\":1,\"stream\":$st}")
    stop_lps "$r" "$([ $st = true ] && echo 1)" || fail "completions stop inside a token + logprobs (stream $st)"
done
ok "logprobs end with the text a stop string cut"
stop_server

# a control token the output leaves out (Qwen's <|image_pad|>, forced by a grammar): its entry is
# listed, its text not counted; before, every later entry counted its 13 bytes and the last
# tokens' logprobs were lost (12 entries for 17 tokens)
MODEL="$SHARED/models/synth-qwen3-tiny-f32.gguf" start_server s2
for st in false true; do
    r=$(post /v1/completions "{\"prompt\":\"hi\",\"max_tokens\":20,\"temperature\":0,\"logprobs\":1,\"stream\":$st,
        \"grammar\":\"root ::= <[151655]> \\\" hello world, this is fine\\\"\"}")
    node -e '
const [body, stream] = [process.argv[1], process.argv[2] === "true"];
let text = "", toks = [], offs = [], used = 0;
const chunks = stream ? body.split("\n").filter(l => l.startsWith("data: {")).map(l => JSON.parse(l.slice(6))) : [JSON.parse(body)];
for (const o of chunks) {
  const c = o.choices && o.choices[0];
  if (o.usage) used = o.usage.completion_tokens;
  if (!c) continue;
  text += c.text;
  if (c.logprobs) { toks.push(...c.logprobs.tokens); offs.push(...c.logprobs.text_offset); }
}
if (text !== " hello world, this is fine") { console.error("text: " + JSON.stringify(text)); process.exit(1); }
if (toks[0] !== "<|image_pad|>" || toks.join("") !== "<|image_pad|>" + text) { console.error("tokens: " + JSON.stringify(toks)); process.exit(1); }
if (!stream && toks.length !== used) { console.error(toks.length + " entries for " + used + " tokens"); process.exit(1); }
let pos = 0;
for (let i = 1; i < toks.length; i++) { if (offs[i] !== pos) { console.error("offset " + i + ": " + JSON.stringify(offs)); process.exit(1); } pos += toks[i].length; }
' "$r" "$st" || fail "logprobs beside a control token (stream $st): $r"
done
ok "a control token the output leaves out keeps every logprob entry and offset"
# such tokens at the very end keep their entries too (they were dropped as if a stop string had
# cut them: 3 entries for 5 tokens, so the entries no longer matched completion_tokens)
for st in false true; do
    r=$(post /v1/completions "{\"prompt\":\"hi\",\"max_tokens\":10,\"temperature\":0,\"logprobs\":1,\"stream\":$st,
        \"stream_options\":{\"include_usage\":true},\"grammar\":\"root ::= \\\" ok\\\" <[151655]> <[151655]>\"}")
    node -e '
const [body, stream] = [process.argv[1], process.argv[2] === "true"];
let text = "", toks = [], used = 0;
const chunks = stream ? body.split("\n").filter(l => l.startsWith("data: {")).map(l => JSON.parse(l.slice(6))) : [JSON.parse(body)];
for (const o of chunks) {
  const c = o.choices && o.choices[0];
  if (o.usage) used = o.usage.completion_tokens;
  if (!c) continue;
  text += c.text;
  if (c.logprobs) toks.push(...c.logprobs.tokens);
}
const pad = toks.slice(-2), lead = toks.slice(0, -2);
if (text !== " ok" || toks.length !== used || lead.join("") !== " ok" || pad.join() !== "<|image_pad|>,<|image_pad|>") {
  console.error(toks.length + " entries for " + used + " tokens: " + JSON.stringify(toks)); process.exit(1); }
' "$r" "$st" || fail "logprobs of trailing control tokens (stream $st): $r"
done
ok "control tokens at the end keep their logprob entries"
stop_server
echo "5 passed, 0 failed"
