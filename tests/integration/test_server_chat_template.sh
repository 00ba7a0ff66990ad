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
echo "2 passed, 0 failed"
