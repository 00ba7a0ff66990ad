#!/usr/bin/env bash
# test_render_template.sh - `rlxd render-template` on a shared template case (byte-exact against
# Python Jinja2's rendering), an error case, and -m with a GGUF that carries a chat template
# and a vocabulary (bos_token/eos_token come from it).
set -u
SHARED="${RLX_SHARED:-../shared}"
CASE_FILE="$SHARED/templates/Qwen-Qwen2.5-7B-Instruct.json"
ERR_FILE="$SHARED/templates/google-gemma-2-2b-it.json"
RLXD="${RLX_BIN:-build}/rlxd"
if [ ! -f "$CASE_FILE" ] || [ ! -f "$ERR_FILE" ]; then
    echo "skipped: $SHARED/templates is absent (set RLX_SHARED)"
    exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. the tools case of Qwen2.5: template, context, expected output and time from the JSON
python3 - "$CASE_FILE" "$TMP" <<'PY' || fail "cannot extract the case"
import json, sys
d = json.load(open(sys.argv[1])); out = sys.argv[2]
case = next(c for c in d["cases"] if c["case"] == "tools")
open(out + "/t.jinja", "w", encoding="utf-8").write(d["template"])
json.dump(case["context"], open(out + "/ctx.json", "w", encoding="utf-8"), ensure_ascii=False)
open(out + "/want.txt", "wb").write(case["expected"].encode("utf-8"))
open(out + "/now.txt", "w").write(d["now"])
PY
"$RLXD" render-template --template "$TMP/t.jinja" --context "$TMP/ctx.json" --now "$(cat "$TMP/now.txt")" \
    >"$TMP/got.txt" 2>"$TMP/err.txt" || fail "render exited $?: $(cat "$TMP/err.txt")"
cmp -s "$TMP/got.txt" "$TMP/want.txt" || { diff "$TMP/got.txt" "$TMP/want.txt" | head -20; fail "rendering differs from Jinja2"; }

# context from stdin gives the same bytes
"$RLXD" render-template -t "$TMP/t.jinja" -c - <"$TMP/ctx.json" >"$TMP/got2.txt" 2>"$TMP/err.txt" || fail "stdin context: $(cat "$TMP/err.txt")"
cmp -s "$TMP/got2.txt" "$TMP/want.txt" || fail "stdin context renders differently"

# 2. a case Jinja2 rejects (raise_exception): exit 1 with the template's message
python3 - "$ERR_FILE" "$TMP" <<'PY' || fail "cannot extract the error case"
import json, sys
d = json.load(open(sys.argv[1])); out = sys.argv[2]
case = next(c for c in d["cases"] if c.get("error"))
open(out + "/e.jinja", "w", encoding="utf-8").write(d["template"])
json.dump(case["context"], open(out + "/ectx.json", "w"), ensure_ascii=False)
open(out + "/ewant.txt", "w").write(case["error"].split(": ", 1)[1])
PY
"$RLXD" render-template --template "$TMP/e.jinja" --context "$TMP/ectx.json" >"$TMP/eout.txt" 2>"$TMP/eerr.txt"
rc=$?
[ "$rc" -eq 1 ] || fail "error case exited $rc, want 1"
[ ! -s "$TMP/eout.txt" ] || fail "error case printed output"
grep -qF "$(cat "$TMP/ewant.txt")" "$TMP/eerr.txt" || fail "error message '$(cat "$TMP/eerr.txt")' lacks '$(cat "$TMP/ewant.txt")'"

# 3. -m: a minimal GGUF v3 with a chat template, a vocabulary and bos/eos ids
python3 - "$TMP/m.gguf" <<'PY' || fail "cannot write the test GGUF"
import struct, sys
def s(x): b = x.encode(); return struct.pack("<Q", len(b)) + b
kv = [("general.architecture", 8, s("llama")),
      ("tokenizer.chat_template", 8, s("{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}")),
      ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + s("<unk>") + s("<B>") + s("<E>")),
      ("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 1)),
      ("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 2))]
out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
for k, t, v in kv: out += s(k) + struct.pack("<I", t) + v
out += b"\0" * (-len(out) % 32)
open(sys.argv[1], "wb").write(out)
PY
echo '{"messages": [{"role": "user", "content": "Hi"}]}' >"$TMP/mctx.json"
"$RLXD" render-template -m "$TMP/m.gguf" --context "$TMP/mctx.json" >"$TMP/mout.txt" 2>"$TMP/merr.txt" || fail "-m exited $?: $(cat "$TMP/merr.txt")"
[ "$(cat "$TMP/mout.txt")" = "<B>[user] Hi<E>" ] || fail "-m rendered '$(cat "$TMP/mout.txt")'"
# the context's own tokens win over the vocabulary's
echo '{"messages": [], "bos_token": "BOS"}' >"$TMP/mctx2.json"
"$RLXD" render-template -m "$TMP/m.gguf" --context "$TMP/mctx2.json" >"$TMP/mout2.txt" 2>"$TMP/merr.txt" || fail "-m with bos in context: $(cat "$TMP/merr.txt")"
[ "$(cat "$TMP/mout2.txt")" = "BOS" ] || fail "-m with bos in context rendered '$(cat "$TMP/mout2.txt")'"

# 3b. searches from the right are linear: rfind / rpartition of a 2M-character needle in a 4M
# string compared at every position (n x m: minutes, past the 10 s render deadline, which one
# call never reaches); Python answers in a fraction of a second
printf '{%% set s = "a" * 4000000 %%}{%% set p = "a" * 2000000 ~ "b" %%}{{ s.rfind(p) }} {{ s.rpartition(p)|length }}' >"$TMP/rfind.jinja"
out=$(timeout 30 "$RLXD" render-template --template "$TMP/rfind.jinja" --context "$TMP/ctx.json") || fail "rfind of a long needle: exit $?"
[ "$out" = "-1 3" ] || fail "rfind of a long needle: '$out'"

# 4. usage errors
"$RLXD" render-template --context "$TMP/ctx.json" >/dev/null 2>&1 && fail "missing --template/-m accepted"
"$RLXD" render-template --template "$TMP/missing.jinja" --context "$TMP/ctx.json" >/dev/null 2>&1 && fail "missing template file accepted"
echo "ok"
