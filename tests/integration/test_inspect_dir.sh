#!/usr/bin/env bash
# test_inspect_dir.sh - `rlxd inspect DIR [--prefer QUANT] [--json]`: files grouped into models by
# name without their quantization tag, split parts as one file, quantization and check verdict
# per file, the pick (--prefer, else the default order Q4_K_M > Q5_K_M > Q8_0 > ...), usage errors.
set -u
BIN="${RLX_BIN:-build}"
RLXD="$BIN/rlxd"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
D="$TMP/models"
mkdir -p "$D/sub"
for t in q8_0 f16 q4_k_m q6_k; do
    T=$(echo "$t" | tr a-z A-Z)
    "$BIN/rlxd-synth" --arch llama --preset tiny --type "$t" --seed 1 -o "$D/Tiny-Llama-$T.gguf" || fail "synth $t"
done
"$BIN/rlxd-synth" --arch qwen3 --preset tiny --type q8_0 --seed 2 --split 2 -o "$D/sub/qwen.q8_0.gguf" || fail "synth split"
"$BIN/rlxd-synth" --arch qwen3 --preset tiny --type f32 --seed 2 -o "$D/sub/qwen.F32.gguf" || fail "synth qwen f32"
head -c 4000 "$D/Tiny-Llama-F16.gguf" >"$D/broken-Q4_K_M.gguf"

"$RLXD" inspect "$D" >"$TMP/out" 2>"$TMP/err" || fail "exit $?: $(cat "$TMP/err")"
cat "$TMP/out"
grep -q "^Tiny-Llama: pick Q4_K_M (default order): $D/Tiny-Llama-Q4_K_M.gguf" "$TMP/out" || fail "default pick"
grep -q "^sub/qwen: pick Q8_0 (default order): $D/sub/qwen.q8_0-00001-of-00002.gguf" "$TMP/out" || fail "split pick"
grep -q "^  \* Q8_0 .* SUPPORTED  *sub/qwen.q8_0 (qwen3, 2 parts)" "$TMP/out" || fail "split line"
grep -q "^broken: nothing to pick (no supported file)" "$TMP/out" || fail "broken file"
grep -q "^    ?  .* Unknown  *broken-Q4_K_M (?): " "$TMP/out" || fail "broken line"

"$RLXD" inspect "$D" --prefer q8_0 >"$TMP/out" || fail "--prefer q8_0"
grep -q "^Tiny-Llama: pick Q8_0 (preferred): $D/Tiny-Llama-Q8_0.gguf" "$TMP/out" || fail "--prefer q8_0: $(cat "$TMP/out")"
grep -q "^sub/qwen: pick Q8_0 (preferred)" "$TMP/out" || fail "--prefer q8_0 split: $(cat "$TMP/out")"
"$RLXD" inspect "$D" --prefer F32 >"$TMP/out" || fail "--prefer F32"
grep -q "^Tiny-Llama: pick Q4_K_M (default order (the preferred quantization is absent or unsupported))" "$TMP/out" || fail "--prefer absent: $(cat "$TMP/out")"
grep -q "^sub/qwen: pick F32 (preferred): $D/sub/qwen.F32.gguf" "$TMP/out" || fail "--prefer F32 qwen: $(cat "$TMP/out")"

"$RLXD" inspect "$D" --prefer Q6_K --json >"$TMP/out.json" || fail "--json"
python3 - "$TMP/out.json" "$D" <<'PY' || fail "--json: $(cat "$TMP/out.json")"
import json, sys
d = json.load(open(sys.argv[1])); D = sys.argv[2]
assert d["prefer"] == "Q6_K" and d["folder"] == D
m = {x["name"]: x for x in d["models"]}
assert sorted(m) == ["Tiny-Llama", "broken", "sub/qwen"], sorted(m)
t = m["Tiny-Llama"]
assert t["pick"] == D + "/Tiny-Llama-Q6_K.gguf" and t["pick_quant"] == "Q6_K" and t["pick_reason"] == "preferred", t
assert sorted(f["quant"] for f in t["files"]) == ["F16", "Q4_K_M", "Q6_K", "Q8_0"]
assert [f["picked"] for f in t["files"]].count(True) == 1
assert all(f["status"] == "SUPPORTED" and f["reason"] is None and f["architecture"] == "llama" for f in t["files"])
q = m["sub/qwen"]
split = [f for f in q["files"] if f["parts"] == 2][0]
assert split["quant"] == "Q8_0" and split["bytes"] > 0 and split["architecture"] == "qwen3", split
b = m["broken"]
assert b["pick"] is None and b["files"][0]["status"] == "Unknown" and b["files"][0]["reason"], b
PY

# usage errors and FILE mode unchanged
"$RLXD" inspect "$D" --prefer Q9_Z >/dev/null 2>"$TMP/err"; [ $? -eq 2 ] || fail "--prefer Q9_Z: expected exit 2"
grep -q "not a llama.cpp quantization name" "$TMP/err" || fail "--prefer Q9_Z message: $(cat "$TMP/err")"
"$RLXD" inspect "$D" --prefer >/dev/null 2>&1; [ $? -eq 2 ] || fail "--prefer without value: expected exit 2"
"$RLXD" inspect "$D/Tiny-Llama-Q8_0.gguf" --prefer Q8_0 >/dev/null 2>&1; [ $? -eq 2 ] || fail "--prefer with a file: expected exit 2"
"$RLXD" inspect "$D/Tiny-Llama-Q8_0.gguf" >"$TMP/out" || fail "inspect FILE"
grep -q "GGUF v3, alignment 32" "$TMP/out" || fail "inspect FILE output"
mkdir "$TMP/empty"
"$RLXD" inspect "$TMP/empty" >/dev/null 2>"$TMP/err"; [ $? -eq 1 ] || fail "empty folder: expected exit 1"
grep -q "holds no .gguf files" "$TMP/err" || fail "empty folder message"
echo "ok"
