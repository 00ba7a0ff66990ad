#!/usr/bin/env bash
# /v1/chat/completions on a qwen3 model renders the model's own chat template (ChatML in the
# GGUF) and tokenizes its special tokens: the prompt token count equals that of the rendered
# text tokenized with special-token parsing, and /apply-template shows the exact text.
. "$(dirname "$0")/server_lib.sh"
MODEL="$SHARED/models/synth-qwen3-tiny-f32.gguf"
[ -f "$MODEL" ] || { echo "skip: $MODEL absent"; exit 77; }
start_server qwen3
msgs='[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi there"}]'
p=$(post /apply-template "{\"messages\":$msgs}")
[ "$(status)" = 200 ] || fail "apply-template: $(status) $p"
text=$(echo "$p" | jget '.prompt')
want=$'<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n'
[ "$text" = "${want%$'\n'}" ] || fail "rendered prompt differs: $(printf %q "$text")"
ok "apply-template renders the model's template"
# rebuilt from the JSON so the final newline survives the shell
body=$(echo "$p" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify({content: JSON.parse(s).prompt, add_special: false, parse_special: true})))')
t=$(post /tokenize "$body")
n_tok=$(echo "$t" | jget '.tokens.length')
im_start=$(echo "$t" | jget '.tokens[0]')
[ "$n_tok" -gt 10 ] || fail "tokenize: $t"
r=$(post /v1/chat/completions "{\"messages\":$msgs,\"max_tokens\":4,\"temperature\":0}")
[ "$(status)" = 200 ] || fail "chat: $(status) $r"
pt=$(echo "$r" | jget '.usage.prompt_tokens')
[ "$pt" = "$n_tok" ] || fail "chat prompt has $pt tokens, the rendered template $n_tok"
[ "$(echo "$r" | jget '.choices[0].message.role')" = assistant ] || fail "no assistant message: $r"
ok "chat completion uses the template ($pt prompt tokens, <|im_start|> = $im_start)"
stop_server

# --chat-template FILE replaces the GGUF's template (here Hermes 2 Pro's, which renders tools)
TPL="$SHARED/templates/NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.json"
[ -f "$TPL" ] || { echo "skip: $TPL absent"; exit 77; }
node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1])).template)' "$TPL" > "$TMP/hermes.jinja"
start_server hermes --ctx 2048 --chat-template "$TMP/hermes.jinja"
tools='[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]'
p=$(post /apply-template "{\"messages\":$msgs,\"tools\":$tools}")
[ "$(status)" = 200 ] || fail "apply-template with --chat-template: $(status) $p"
text=$(echo "$p" | jget '.prompt')
case "$text" in *"<tools>"*get_weather*"<tool_call>"*) ;; *) fail "--chat-template not used: $(printf %q "$text")" ;; esac
ok "--chat-template renders the given template"
stop_server

# OpenAI's "developer" role is system instructions: Qwen3's template drops roles it does not know
# (a developer message vanished from the prompt), so it reaches such templates as "system"
TPL="$SHARED/templates/Qwen-Qwen3-0.6B.json"
node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1])).template)' "$TPL" > "$TMP/qwen3.jinja"
start_server qwen3real --ctx 2048 --chat-template "$TMP/qwen3.jinja"
p=$(post /apply-template '{"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":"Hi"}]}')
[ "$(status)" = 200 ] || fail "developer role: $(status) $p"
case "$(echo "$p" | jget .prompt)" in $'<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>'*) ;;
    *) fail "developer message not rendered as system: $(printf %q "$(echo "$p" | jget .prompt)")" ;; esac
ok "a developer message reaches a template that does not name the role as system"
stop_server
# a file that cannot be read or parsed: the daemon refuses to start, naming it
printf '{%% if %%}' > "$TMP/bad.jinja"
for f in "$TMP/absent.jinja" "$TMP/bad.jinja"; do
    if "$BIN" serve -m "$MODEL:tiny" --host 127.0.0.1 --port 0 --chat-template "$f" 2>"$TMP/bad.log"; then
        fail "rlxd started with --chat-template $f"
    fi
    grep -q "$f" "$TMP/bad.log" || fail "the error does not name $f: $(cat "$TMP/bad.log")"
done
ok "an unreadable or invalid --chat-template stops the daemon, naming the file"

# a model whose own template cannot be parsed still serves, as llama-server does: completions as
# ever, chats in ChatML, and the start names the template's error (before: the model failed to load)
SYNTH="${RLX_BIN:-build}/rlxd-synth"
[ -x "$SYNTH" ] || { echo "skip: $SYNTH not built"; exit 77; }
printf '{%% for m in messages %%}{{ m.content ' > "$TMP/broken.jinja"
"$SYNTH" --arch qwen3 --preset tiny --seed 4 --chat-template "$TMP/broken.jinja" -o "$TMP/broken.gguf" >/dev/null ||
    fail "synth with a broken template"
MODEL="$TMP/broken.gguf" start_server broken
grep -q "its chat template cannot be used" "$LOG" || fail "no line about the template: $(cat "$LOG")"
r=$(post /v1/completions '{"prompt":"Hello","max_tokens":2,"temperature":0}')
[ "$(status)" = 200 ] || fail "completions beside a broken template: $(status) $r"
p=$(post /apply-template '{"messages":[{"role":"user","content":"Hi"}]}')
[ "$(echo "$p" | jget .prompt)" = $'<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant' ] ||
    fail "not ChatML: $(printf %q "$(echo "$p" | jget .prompt)")"
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}')
[ "$(status)" = 200 ] || fail "chat beside a broken template: $(status) $r"
p=$(post /apply-template '{"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":"Hi"}]}')
[ "$(echo "$p" | jget .prompt)" = $'<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant' ] ||
    fail "developer not system in ChatML: $(printf %q "$(echo "$p" | jget .prompt)")"
stop_server
ok "a model whose own template is broken serves, its chats in ChatML"

# a template that writes a NUL: the prompt is a C string from there, so it was cut short without
# a word; now the request says so
printf "{%% for m in messages %%}{{ m.content }}{%% endfor %%}{{ '\\\\x00' }}tail" > "$TMP/nul.jinja"
start_server nul --chat-template "$TMP/nul.jinja"
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}')
[ "$(status)" = 400 ] || fail "a prompt with a NUL: $(status) $r"
echo "$r" | grep -q 'NUL' || fail "NUL message: $r"
stop_server
ok "a rendered prompt holding a NUL is a 400"
echo "7 passed, 0 failed"
