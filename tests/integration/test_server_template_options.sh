#!/usr/bin/env bash
# The chat template options vLLM takes in a request - add_generation_prompt, continue_final_message
# and chat_template_kwargs (Qwen3's enable_thinking) - on /apply-template and /v1/chat/completions,
# with Qwen3's real template (from ../shared/templates) in a synthetic qwen3 model. Also: tool
# schemas reach the template with their numbers' types (0.0 stays 0.0). Expected renderings are
# Python Jinja2's.
. "$(dirname "$0")/server_lib.sh"
SYNTH="${RLX_BIN:-build}/rlxd-synth"
TPL_JSON="$SHARED/templates/Qwen-Qwen3-0.6B.json"
[ -x "$SYNTH" ] || { echo "skip: $SYNTH not built"; exit 77; }
[ -f "$TPL_JSON" ] || { echo "skip: $TPL_JSON absent"; exit 77; }
node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1])).template)' "$TPL_JSON" >"$TMP/qwen3.jinja" \
    || fail "cannot extract the Qwen3 template"
MODEL="$TMP/qwen3.gguf"
"$SYNTH" --arch qwen3 --preset tiny --chat-template "$TMP/qwen3.jinja" -o "$MODEL" || fail "rlxd-synth failed"
start_server qwen3t

# prompt BODY: the rendered prompt of /apply-template, with its newlines as \n
prompt() {
    local p
    p=$(post /apply-template "$1")
    [ "$(status)" = 200 ] || fail "apply-template $1: $(status) $p"
    echo "$p" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.stringify(JSON.parse(s).prompt)))'
}
hi='[{"role":"user","content":"Hi"}]'

got=$(prompt "{\"messages\":$hi}")
[ "$got" = '"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"' ] || fail "default: $got"
ok "add_generation_prompt defaults to true"

got=$(prompt "{\"messages\":$hi,\"chat_template_kwargs\":{\"enable_thinking\":false}}")
[ "$got" = '"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"' ] || fail "enable_thinking false: $got"
ok "chat_template_kwargs reach the template (enable_thinking: false)"

got=$(prompt "{\"messages\":$hi,\"add_generation_prompt\":false}")
[ "$got" = '"<|im_start|>user\nHi<|im_end|>\n"' ] || fail "add_generation_prompt false: $got"
ok "add_generation_prompt: false"

cont='[{"role":"user","content":"Hi"},{"role":"assistant","content":"The answer is"}]'
got=$(prompt "{\"messages\":$cont,\"add_generation_prompt\":false,\"continue_final_message\":true}")
[ "$got" = '"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nThe answer is"' ] || fail "continue: $got"
ok "continue_final_message leaves the last message open"

tools='[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"number","minimum":0.0}}}}}]'
got=$(prompt "{\"messages\":$hi,\"tools\":$tools}")
case "$got" in *'{\"type\": \"number\", \"minimum\": 0.0}'*) ;; *) fail "tool schema numbers: $got" ;; esac
ok "tool schemas keep 0.0 a float"

for bad in "{\"messages\":$cont,\"continue_final_message\":true}" \
           "{\"messages\":$hi,\"chat_template_kwargs\":[1]}" \
           "{\"messages\":$hi,\"chat_template_kwargs\":{\"messages\":[]}}" \
           "{\"messages\":$hi,\"add_generation_prompt\":\"yes\"}"; do
    r=$(post /apply-template "$bad")
    [ "$(status)" = 400 ] || fail "expected 400 for $bad, got $(status) $r"
    echo "$r" | grep -q '"param"' || fail "no error object: $r"
done
r=$(post /apply-template "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"continue_final_message\":true,\"add_generation_prompt\":false,\"chat_template_kwargs\":{\"add_generation_prompt\":true}}")
[ "$(status)" = 200 ] || fail "kwargs override: $(status) $r"
ok "bad options get a 400 naming the parameter"

# the options act on chat completions too: enable_thinking false adds the empty think block
n_default=$(post /v1/chat/completions "{\"messages\":$hi,\"max_tokens\":1,\"temperature\":0}" | jget '.usage.prompt_tokens')
[ "$(status)" = 200 ] || fail "chat: $(status)"
n_nothink=$(post /v1/chat/completions "{\"messages\":$hi,\"max_tokens\":1,\"temperature\":0,\"chat_template_kwargs\":{\"enable_thinking\":false}}" | jget '.usage.prompt_tokens')
[ "$(status)" = 200 ] || fail "chat with kwargs: $(status)"
[ "$n_nothink" -gt "$n_default" ] || fail "enable_thinking false gave $n_nothink prompt tokens, default $n_default"
ok "chat completions apply the options ($n_default vs $n_nothink prompt tokens)"
stop_server
echo "7 passed, 0 failed"
