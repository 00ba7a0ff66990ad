#!/usr/bin/env bash
# test_safetensors.sh - Hugging Face folders end to end. rlxd-hf-export writes a folder
# (config.json, model.safetensors or shards + index, tokenizer.json, tokenizer_config.json) from
# a synthetic GGUF; through -m FOLDER, `rlxd logits` must print the GGUF's logits byte for byte
# (llama, qwen3, qwen2 and gemma2 f32 from ../shared, gemma3 as Gemma3ForCausalLM and as a
# multimodal Gemma3ForConditionalGeneration checkpoint, qwen3 f16 in 3 shards, llama bf16), `rlxd tokenize` the
# same ids; `rlxd check` says SUPPORTED, `rlxd inspect` describes it; `rlxd serve -m FOLDER` and
# --models-dir (the folder listed by name, loaded on demand) answer with the GGUF's greedy text;
# an unsupported architecture is a clear error.
. "$(dirname "$0")/server_lib.sh"
B="${RLX_BIN:-build}"
EXPORT="$B/rlxd-hf-export"
SYNTH="$B/rlxd-synth"
[ -x "$EXPORT" ] && [ -x "$SYNTH" ] || { echo "skip: rlxd-hf-export or rlxd-synth not built"; exit 77; }
LLAMA="$SHARED/models/synth-llama-tiny-f32.gguf"
QWEN3="$SHARED/models/synth-qwen3-tiny-f32.gguf"
[ -f "$LLAMA" ] && [ -f "$QWEN3" ] || { echo "skip: synthetic models absent from $SHARED/models"; exit 77; }
TOK=1,5,9,200,3,77,12

same_logits() { # NAME GGUF [SHARDS]
    local name=$1 gguf=$2 shards=${3:-1} dir="$TMP/hf/$1"
    mkdir -p "$TMP/hf"
    "$EXPORT" "$gguf" "$dir" --shards "$shards" ${EXPORT_FLAGS:-} || fail "export $name"
    if [ "$shards" -gt 1 ]; then
        [ -f "$dir/model.safetensors.index.json" ] || fail "$name: no index for $shards shards"
        [ "$(ls "$dir"/model-*-of-*.safetensors | wc -l)" -eq "$shards" ] || fail "$name: shard count"
    fi
    "$BIN" logits -m "$gguf" --tokens "$TOK" --top 50 -t 1 >"$TMP/$name.gguf.json" || fail "logits $name gguf"
    "$BIN" logits -m "$dir" --tokens "$TOK" --top 50 -t 1 >"$TMP/$name.hf.json" 2>"$TMP/err" || fail "logits $name folder: $(cat "$TMP/err")"
    cmp -s "$TMP/$name.gguf.json" "$TMP/$name.hf.json" || fail "$name: the folder's logits differ from the GGUF's"
    ok "$name: logits of the folder identical to the GGUF's"
}
same_logits llama-f32 "$LLAMA"
same_logits qwen3-f32 "$QWEN3"
[ -f "$SHARED/models/synth-qwen2-tiny-f32.gguf" ] && same_logits qwen2-f32 "$SHARED/models/synth-qwen2-tiny-f32.gguf"
[ -f "$SHARED/models/synth-gemma2-tiny-f32.gguf" ] && same_logits gemma2-f32 "$SHARED/models/synth-gemma2-tiny-f32.gguf"
GEMMA2="$SHARED/models/synth-gemma2-tiny-f32.gguf"
if [ -f "$GEMMA2" ]; then # Gemma 3 on the gemma2 model's SentencePiece vocabulary; 13 tokens pass the window of 8
    "$SYNTH" --arch gemma3 --preset tiny --type f32 --seed 9 --vocab-from "$GEMMA2" --sliding-window 8 --swa-pattern 1,0 \
        -o "$TMP/gemma3.gguf" >/dev/null || fail "synth gemma3"
    TOK=1,5,9,200,3,77,12,40,41,42,43,44,45
    same_logits gemma3-f32 "$TMP/gemma3.gguf"
    EXPORT_FLAGS=--multimodal same_logits gemma3-multimodal "$TMP/gemma3.gguf" 2
    grep -q Gemma3ForConditionalGeneration "$TMP/hf/gemma3-multimodal/config.json" || fail "multimodal export"
    TOK=1,5,9,200,3,77,12
fi
"$SYNTH" --arch qwen3 --preset tiny --type f16 --seed 7 -o "$TMP/qwen3-f16.gguf" >/dev/null || fail "synth qwen3 f16"
same_logits qwen3-f16 "$TMP/qwen3-f16.gguf" 3
"$SYNTH" --arch llama --preset tiny --type bf16 --seed 8 --vocab-from "$LLAMA" -o "$TMP/llama-bf16.gguf" >/dev/null || fail "synth llama bf16"
same_logits llama-bf16 "$TMP/llama-bf16.gguf" 2

# tokenizer.json gives the GGUF tokenizer's ids, specials parsed or not
TEXT=$'Hello world! <|im_start|>user\n 12345 \xc3\xbcn\xc3\xafc\xc3\xb6d\xc3\xa9 <s> tabs\tand  spaces'
MODELS="llama-f32:$LLAMA qwen3-f32:$QWEN3"
[ -f "$TMP/gemma3.gguf" ] && MODELS="$MODELS gemma3-f32:$TMP/gemma3.gguf gemma3-multimodal:$TMP/gemma3.gguf"
for m in $MODELS; do
    n=${m%%:*} g=${m#*:}
    for flags in "" "--parse-special" "--no-add-special"; do
        a=$("$BIN" tokenize -m "$g" -p "$TEXT" $flags) || fail "tokenize $n gguf"
        b=$("$BIN" tokenize -m "$TMP/hf/$n" -p "$TEXT" $flags) || fail "tokenize $n folder"
        [ "$a" = "$b" ] || fail "$n tokenize $flags: folder $b, GGUF $a"
    done
done
ok "tokenize through tokenizer.json equals the GGUF's (llama SentencePiece, qwen3 BPE, Gemma's form)"

# check and inspect
out=$("$BIN" check "$TMP/hf/qwen3-f16") || fail "check: exit $? ($out)"
echo "$out" | grep -q "^SUPPORTED .*qwen3-f16 (qwen3)" || fail "check: $out"
"$BIN" inspect "$TMP/hf/llama-f32" >"$TMP/insp" || fail "inspect folder"
grep -q "Hugging Face folder" "$TMP/insp" && grep -q "blk.1.attn_q.weight" "$TMP/insp" && grep -q 'llama.block_count .* = 2' "$TMP/insp" ||
    fail "inspect folder: $(head -20 "$TMP/insp")"
"$BIN" inspect "$TMP/hf" >"$TMP/insp" || fail "inspect models dir"
grep -q "^qwen3: pick " "$TMP/insp" && grep -q "F32 .* SUPPORTED .*qwen3-f32 (qwen3)" "$TMP/insp" &&
    grep -q "F16 .* SUPPORTED .*qwen3-f16 (qwen3)" "$TMP/insp" || fail "inspect dir: $(cat "$TMP/insp")"
ok "check SUPPORTED, inspect describes the folder and lists folders in a models dir"

# an architecture rlxd does not map: named by logits and check
cp -r "$TMP/hf/llama-f32" "$TMP/gemma"
sed -i 's/LlamaForCausalLM/GemmaForCausalLM/' "$TMP/gemma/config.json"
"$BIN" logits -m "$TMP/gemma" --tokens 1 >/dev/null 2>"$TMP/err" && fail "unsupported architecture loaded"
grep -q "architecture 'GemmaForCausalLM' (config.json) is not supported" "$TMP/err" || fail "message: $(cat "$TMP/err")"
out=$("$BIN" check "$TMP/gemma")
echo "$out" | grep -q "^KnownUnimplemented .*GemmaForCausalLM" || fail "check gemma: $out"
ok "unsupported architecture named"

# serve -m FOLDER: the GGUF's greedy text; --models-dir lists the folder by name and loads it on demand
REQ='{"prompt":"Hello world","max_tokens":8,"temperature":0}'
MODEL="$QWEN3"
start_server gguf
want=$(post /v1/completions "$REQ" | jget '.choices[0].text')
[ "$(status)" = 200 ] && [ -n "$want" ] || fail "gguf completion: $(status) '$want'"
stop_server
MODEL="$TMP/hf/qwen3-f32"
start_server folder
got=$(post /v1/completions "$REQ" | jget '.choices[0].text')
[ "$(status)" = 200 ] || fail "folder completion: $(status) $(cat "$TMP/body")"
[ "$got" = "$want" ] || fail "serve -m folder: '$got', GGUF '$want'"
stop_server
ok "serve -m FOLDER answers with the GGUF's text"
MODEL="$LLAMA"
start_server dir --models-dir "$TMP/hf"
curl -s "$URL/v1/models" >"$TMP/models"
[ "$(jget '.data.find(m=>m.id==="qwen3-f32").meta.status' <"$TMP/models")" = unloaded ] || fail "models dir: $(cat "$TMP/models")"
got=$(post /v1/completions "${REQ%\}},\"model\":\"qwen3-f32\"}" | jget '.choices[0].text')
[ "$(status)" = 200 ] || fail "models dir completion: $(status) $(cat "$TMP/body")"
[ "$got" = "$want" ] || fail "models dir folder: '$got', GGUF '$want'"
[ "$(curl -s "$URL/v1/models" | jget '.data.find(m=>m.id==="qwen3-f32").meta.status')" = loaded ] || fail "not loaded"
stop_server
ok "--models-dir lists the folder and loads it on demand"
echo "ok"
