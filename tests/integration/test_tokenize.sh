#!/usr/bin/env bash
# test_tokenize.sh - `rlxd tokenize` on the llama-spm reference vocabulary: default add_special,
# --no-add-special, --parse-special, -f FILE, and clear failures on bad input.
set -u
SHARED=${RLX_SHARED:-../shared}
BIN=${RLX_BIN:-build}/rlxd
VOCAB=$SHARED/vocab/ggml-vocab-llama-spm.gguf
if [ ! -f "$VOCAB" ]; then echo "skipped: $VOCAB absent"; exit 77; fi
if [ ! -x "$BIN" ]; then echo "FAIL: $BIN not built"; exit 1; fi

fails=0
expect() { # name expected actual
    if [ "$2" == "$3" ]; then echo "ok   $1"; else echo "FAIL $1: expected '$2', got '$3'"; fails=$((fails + 1)); fi
}

expect "default adds BOS" "[1, 15043, 3186]" "$("$BIN" tokenize -m "$VOCAB" -p "Hello world")"
expect "--no-add-special" "[15043, 3186]" "$("$BIN" tokenize -m "$VOCAB" -p "Hello world" --no-add-special)"
# Reference vector " Hello, world!" -> 29871 15043 29892 3186 29991
expect "leading space" "[29871, 15043, 29892, 3186, 29991]" \
    "$("$BIN" tokenize -m "$VOCAB" -p " Hello, world!" --no-add-special)"
expect "--parse-special" "[1, 15043]" "$("$BIN" tokenize -m "$VOCAB" -p "<s>Hello" --parse-special --no-add-special)"
plain=$("$BIN" tokenize -m "$VOCAB" -p "<s>Hello" --no-add-special)
case "$plain" in "[1,"*) expect "no parse-special keeps <s> as text" "not [1, ...]" "$plain" ;;
    *) echo "ok   no parse-special keeps <s> as text ($plain)" ;; esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'ied 4 \xc2\xbd months' > "$tmp/in.txt"
expect "-f FILE" "[474, 287, 29871, 29946, 29871, 30226, 7378]" \
    "$("$BIN" tokenize -m "$VOCAB" -f "$tmp/in.txt" --no-add-special)"

if "$BIN" tokenize -m "$tmp/missing.gguf" -p "x" >/dev/null 2>"$tmp/err"; then
    echo "FAIL missing model accepted"; fails=$((fails + 1))
else echo "ok   missing model: $(head -c 200 "$tmp/err")"; fi
if "$BIN" tokenize -m "$VOCAB" >/dev/null 2>&1; then
    echo "FAIL no text accepted"; fails=$((fails + 1))
else echo "ok   no text rejected"; fi

[ $fails -eq 0 ] || exit 1
echo "all tokenize CLI checks passed"
