#!/usr/bin/env bash
# test_split.sh - split GGUF end to end: rlxd-synth --split N writes llama.cpp's gguf-split
# layout; `rlxd logits` on any part gives logits bit-identical to the single-file model (llama
# q8_0, llama f32, qwen3 f16); a missing part is an error listing it, a corrupt part an error.
set -u
BIN="${RLX_BIN:-build}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
TOK=1,5,9,200,3,77,12

same_logits() { # ARCH TYPE PARTS
    local a="$1" t="$2" n="$3" base="$TMP/$1-$2"
    "$BIN/rlxd-synth" --arch "$a" --preset tiny --type "$t" --seed 7 -o "$base.gguf" || fail "synth $a $t"
    "$BIN/rlxd-synth" --arch "$a" --preset tiny --type "$t" --seed 7 --split "$n" -o "$base-split.gguf" || fail "synth --split $n"
    local parts
    parts=$(ls "$base"-split-*-of-*.gguf | wc -l)
    [ "$parts" -eq "$n" ] || fail "$a $t: $parts parts written, expected $n"
    "$BIN/rlxd" logits -m "$base.gguf" --tokens "$TOK" -t 1 >"$base.json" || fail "logits single $a $t"
    for p in 1 "$n"; do
        local f
        f=$(printf '%s-split-%05d-of-%05d.gguf' "$base" "$p" "$n")
        "$BIN/rlxd" logits -m "$f" --tokens "$TOK" -t 1 >"$base.$p.json" 2>"$TMP/err" || fail "logits on part $p of $a $t: $(cat "$TMP/err")"
        cmp -s "$base.json" "$base.$p.json" || fail "$a $t: logits through part $p differ from the single file"
    done
    echo "ok   $a $t in $n parts: identical logits"
}
same_logits llama q8_0 3
same_logits llama f32 2
same_logits qwen3 f16 4

base="$TMP/llama-q8_0-split"
# a missing part: exit 1, the message names it
mv "$base-00002-of-00003.gguf" "$TMP/away.gguf"
"$BIN/rlxd" logits -m "$base-00001-of-00003.gguf" --tokens "$TOK" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] || fail "missing part: exit $rc, expected 1"
[ ! -s "$TMP/out" ] || fail "missing part: output on stdout"
grep -qF "1 of its 3 parts is missing: $base-00002-of-00003.gguf" "$TMP/err" || fail "missing part: message: $(cat "$TMP/err")"
echo "ok   missing part named"
# a corrupt (truncated) part: exit 1, the message names it
head -c 2000 "$TMP/away.gguf" >"$base-00002-of-00003.gguf"
"$BIN/rlxd" logits -m "$base-00003-of-00003.gguf" --tokens "$TOK" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] || fail "corrupt part: exit $rc, expected 1"
grep -qF "$base-00002-of-00003.gguf" "$TMP/err" || fail "corrupt part: message: $(cat "$TMP/err")"
grep -q "runs past the end of the file" "$TMP/err" || fail "corrupt part: message: $(cat "$TMP/err")"
echo "ok   corrupt part reported"
# --split that cannot be honoured is a usage error of rlxd-synth, and writes nothing
"$BIN/rlxd-synth" --arch llama --preset tiny --split 100000 -o "$TMP/x.gguf" 2>/dev/null && fail "--split 100000 accepted"
"$BIN/rlxd-synth" --arch llama --preset tiny --split 5000 -o "$TMP/y.gguf" 2>"$TMP/err" && fail "--split 5000 accepted"
grep -q "each part needs a tensor" "$TMP/err" || fail "--split 5000: message: $(cat "$TMP/err")"
ls "$TMP"/y* >/dev/null 2>&1 && fail "--split 5000 left files"
echo "ok"
