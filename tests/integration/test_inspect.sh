#!/usr/bin/env bash
# test_inspect.sh - `rlxd inspect` on stories260K (text and --json), on the shared encoders, on
# rlxd-synth decoders declared embedding models (--pooling) and on
# broken files.
set -u
SHARED="${RLX_SHARED:-../shared}"
MODEL="$SHARED/models/stories260K.gguf"
RLXD="${RLX_BIN:-build}/rlxd"
if [ ! -f "$MODEL" ]; then
    echo "skipped: $MODEL is absent (set RLX_SHARED)"
    exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$RLXD" inspect "$MODEL" >"$TMP/out.txt" 2>"$TMP/err.txt" || fail "text mode exited $?: $(cat "$TMP/err.txt")"
for want in "GGUF v3, alignment 32" "general.architecture" '"llama"' "llama.block_count" \
            "[string x 512: \"<unk>\", \"<s>\"" "token_embd.weight" "[64, 512]" "parameters: 292800" \
            "weight bytes: 1171200" "320.00 KiB F16 KV cache"; do
    grep -qF -- "$want" "$TMP/out.txt" || fail "text output lacks '$want'"
done

"$RLXD" inspect "$MODEL" --json >"$TMP/out.json" 2>"$TMP/err.txt" || fail "--json exited $?: $(cat "$TMP/err.txt")"
python3 - "$TMP/out.json" <<'PY' || fail "--json output is wrong"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 3 and d["alignment"] == 32, d["version"]
md = d["metadata"]
assert md["general.architecture"] == "llama"
assert md["llama.block_count"] == 5 and d["metadata_types"]["llama.block_count"] == "uint32"
tok = md["tokenizer.ggml.tokens"]
assert tok["type"] == "string" and tok["count"] == 512 and tok["head"][:2] == ["<unk>", "<s>"], tok
t = {x["name"]: x for x in d["tensors"]}
assert len(t) == 48
assert t["token_embd.weight"]["shape"] == [64, 512] and t["token_embd.weight"]["type"] == "f32"
assert t["token_embd.weight"]["bytes"] == 64 * 512 * 4
assert d["parameters"] == 292800 and d["weight_bytes"] == 1171200
m = d["memory"]
assert m["kv_cache"] == 2 * 5 * 512 * 4 * 8 * 2 and m["total"] == m["weights"] + m["kv_cache"], m
PY

# broken files: exit 1, nothing on stdout, a message naming the file and the problem
head -c 5000 "$MODEL" >"$TMP/cut.gguf"
"$RLXD" inspect "$TMP/cut.gguf" >"$TMP/out.txt" 2>"$TMP/err.txt"
rc=$?
[ $rc -eq 1 ] || fail "truncated file: exit $rc, expected 1"
[ ! -s "$TMP/out.txt" ] || fail "truncated file: output on stdout"
grep -q "cut.gguf: metadata key #0 'tokenizer.ggml.tokens': element \[370\]: file truncated: .*runs past the end" "$TMP/err.txt" || fail "truncated file: message: $(cat "$TMP/err.txt")"

printf 'GGML\003\000\000\000' >"$TMP/magic.gguf"
"$RLXD" inspect --json "$TMP/magic.gguf" >/dev/null 2>"$TMP/err.txt"
rc=$?
[ $rc -eq 1 ] || fail "bad magic: exit $rc, expected 1"
grep -q "magic.gguf: not a GGUF file" "$TMP/err.txt" || fail "bad magic: message: $(cat "$TMP/err.txt")"

# encoders: described as rlxd serves them (pooling, bidirectional, no KV cache); a file with an
# unknown pooling type says why rlxd cannot load it
for pair in "synth-bert-tiny-f32:bert:mean" "synth-bert-cls-tiny-f32:bert:cls" "synth-nomic-bert-tiny-f32:nomic-bert:mean"; do
    IFS=: read -r stem arch pool <<<"$pair"
    f="$SHARED/models/$stem.gguf"
    [ -f "$f" ] || continue
    "$RLXD" inspect "$f" >"$TMP/enc.txt" 2>&1 || fail "$stem: exit $?: $(cat "$TMP/enc.txt")"
    grep -qF "model: encoder ($arch), bidirectional attention, no KV cache, pooling $pool, 2 token types" "$TMP/enc.txt" ||
        fail "$stem: no encoder line in: $(tail -3 "$TMP/enc.txt")"
    grep -qF "(an encoder keeps no KV cache)" "$TMP/enc.txt" || fail "$stem: memory line: $(tail -1 "$TMP/enc.txt")"
    "$RLXD" inspect --json "$f" >"$TMP/enc.json" || fail "$stem --json"
    python3 - "$TMP/enc.json" "$pool" <<'PY' || fail "$stem --json: $(cat "$TMP/enc.json" | tail -20)"
import json, sys
d = json.load(open(sys.argv[1]))
m = d["model"]
assert m["kind"] == "encoder" and m["attention"] == "bidirectional" and m["kv_cache"] is False, m
assert m["pooling"] == sys.argv[2] and m["token_types"] == 2 and m["rank_head"] is False, m
assert d["memory"]["kv_cache"] is None and d["memory"]["total"] == d["weight_bytes"], d["memory"]
PY
done
if [ -f "$SHARED/models/synth-bert-tiny-f32.gguf" ]; then
    python3 - "$SHARED/models/synth-bert-tiny-f32.gguf" "$TMP/pool9.gguf" <<'PY' || fail "patching pooling_type"
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
k = b.index(b"bert.pooling_type") + len(b"bert.pooling_type")
assert struct.unpack_from("<I", b, k)[0] == 4  # GGUF uint32
struct.pack_into("<I", b, k + 4, 9)
open(sys.argv[2], "wb").write(b)
PY
    "$RLXD" inspect "$TMP/pool9.gguf" >"$TMP/enc.txt" 2>&1 || fail "pool9: exit $?"
    grep -q "model: rlxd cannot load it: .*bert.pooling_type 9 is unknown (0 none, 1 mean, 2 cls, 3 last, 4 rank)" "$TMP/enc.txt" ||
        fail "pool9: $(grep model: "$TMP/enc.txt")"
    "$RLXD" check "$TMP/pool9.gguf" >"$TMP/chk.txt" 2>&1
    grep -q "pooling_type 9 is unknown" "$TMP/chk.txt" || fail "pool9 check: $(cat "$TMP/chk.txt")"
fi

# a decoder family declaring a pooling type is an embedding model
SYNTH="${RLX_BIN:-build}/rlxd-synth"
if [ -x "$SYNTH" ]; then
    "$SYNTH" --arch qwen3 --preset tiny --pooling 3 -o "$TMP/emb.gguf" >/dev/null 2>&1 || fail "rlxd-synth --pooling"
    "$RLXD" inspect "$TMP/emb.gguf" >"$TMP/emb.txt" 2>&1 || fail "emb: exit $?"
    grep -q "model: embedding model (a qwen3 decoder declaring a pooling type), causal attention, pooling last" "$TMP/emb.txt" ||
        fail "emb: $(grep model: "$TMP/emb.txt")"
    "$SYNTH" --arch llama --preset tiny --pooling 1 --non-causal -o "$TMP/emb2.gguf" >/dev/null 2>&1 || fail "rlxd-synth --non-causal"
    "$RLXD" inspect --json "$TMP/emb2.gguf" >"$TMP/emb2.json" 2>&1 || fail "emb2: exit $?"
    python3 - "$TMP/emb2.json" <<'PY' || fail "emb2 --json: $(tail -8 "$TMP/emb2.json")"
import json, sys
m = json.load(open(sys.argv[1]))["model"]
assert m == {"kind": "embedding", "attention": "bidirectional", "pooling": "mean"}, m
PY
fi

"$RLXD" inspect "$TMP/absent.gguf" >/dev/null 2>"$TMP/err.txt"
rc=$?
[ $rc -eq 1 ] || fail "missing file: exit $rc, expected 1"
grep -q "absent.gguf: cannot open" "$TMP/err.txt" || fail "missing file: message: $(cat "$TMP/err.txt")"
# --json on a file that cannot be read: the reason on stdout as JSON too (it printed nothing there)
head -c 100 "$MODEL" >"$TMP/cut.gguf"
"$RLXD" inspect "$TMP/cut.gguf" --json >"$TMP/cut.json" 2>/dev/null
[ $? -eq 1 ] || fail "cut file --json: exit status"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert "cannot fit" in d["error"], d' "$TMP/cut.json" ||
    fail "cut file --json: $(cat "$TMP/cut.json")"
echo "ok"
