#!/usr/bin/env bash
# rlxd generate on stories260K must print exactly llama.cpp's greedy text (../shared/models/README.md).
set -u
bin="${RLX_BIN:-build}/rlxd"
model="${RLX_SHARED:-../shared}/models/stories260K.gguf"
[ -f "$model" ] || { echo "skip: $model absent"; exit 77; }
fail=0
check() {
  local prompt="$1" want="$2" got
  shift 2
  got=$("$bin" generate -m "$model" -p "$prompt" -n 64 --temp 0 "$@" 2>/dev/null; printf x)
  got="${got%x}"
  if [ "$got" != "$want" ]; then
    echo "FAIL: '$prompt' $*"; printf '  got:  %q\n  want: %q\n' "$got" "$want"; fail=1
  else
    echo "ok   '$prompt' $*"
  fi
}
check "Once upon a time" $', there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily\'s mom said'
check "Lily and Tom went to the park" $'. They saw a big box with a big box. They wanted to play with it. They wanted to play with the box. They wanted to play with the box.\n"Look, Mom!" Lily said. "Let\'s g'
check "The little dog was sad because" $' he loved to play with his toys. One day, he saw a big box in the ground. The box was very scared and didn\'t know what to do.\nThe boy said, "Don'
# a Q8_0 KV cache keeps this story (its logits stay within tests/unit/test_kv_q8.c's tolerance)
check "Once upon a time" $', there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily\'s mom said' --kv-type q8_0
if "$bin" generate -m "$model" -p x --kv-type q4_0 2>/dev/null; then echo "FAIL: --kv-type q4_0 accepted"; fail=1; else echo "ok   unknown --kv-type rejected"; fi
# same seed, same output; bad input is a clear error
a=$("$bin" generate -m "$model" -p "Once" -n 20 --temp 0.9 --seed 7 2>/dev/null)
b=$("$bin" generate -m "$model" -p "Once" -n 20 --temp 0.9 --seed 7 2>/dev/null)
[ "$a" = "$b" ] && echo "ok   seeded sampling is reproducible" || { echo "FAIL: seeded runs differ"; fail=1; }
if "$bin" generate -m /nonexistent.gguf -p x 2>/tmp/rlxd_gen_err.$$; then echo "FAIL: missing model accepted"; fail=1;
else grep -q nonexistent /tmp/rlxd_gen_err.$$ && echo "ok   missing model is a clear error" || { echo "FAIL: unclear error"; fail=1; }; fi
rm -f /tmp/rlxd_gen_err.$$
if "$bin" generate -m "$model" -p x --temp abc 2>/dev/null; then echo "FAIL: bad --temp accepted"; fail=1; else echo "ok   bad flag rejected"; fi
# a full context ends the text with a notice on stderr (not silently); -n within it gives none
err=$("$bin" generate -m "$model" -p "Once upon a time" -n 100 --temp 0 --ctx 20 2>&1 >/dev/null)
if [ $? = 0 ] && printf '%s' "$err" | grep -q "context of 20 tokens is full (finish reason: length)"; then echo "ok   full context is reported";
else echo "FAIL: no full-context notice: $err"; fail=1; fi
err=$("$bin" generate -m "$model" -p "Once upon a time" -n 5 --temp 0 --ctx 20 2>&1 >/dev/null)
if printf '%s' "$err" | grep -q "is full"; then echo "FAIL: notice without a full context"; fail=1; else echo "ok   no notice when -n ends the text"; fi
# rlxd logits --ubatch N runs the positions in batches of N (for a device that cannot hold every
# position's logits at once): the same numbers, byte for byte, on a transformer and the hybrid
toks=$(seq -s, 10 49)
hybrid="${RLX_SHARED:-../shared}/models/synth-qwen35-tiny-f32.gguf"
[ "${RLXD_BACKEND:-cpu}" = cpu ] || hybrid="" # the hybrid runs on the CPU only (Vulkan and CUDA refuse it)
for m in "$model" $hybrid; do
  a=$("$bin" logits -m "$m" --tokens "$toks" -t 1 | md5sum); b=$("$bin" logits -m "$m" --tokens "$toks" --ubatch 16 -t 1 | md5sum)
  if [ "$a" = "$b" ] && "$bin" logits -m "$m" --tokens "$toks" --ubatch 16 -t 1 | grep -q '"positions":\[{"top"'; then echo "ok   logits --ubatch 16 = one batch ($(basename "$m"))"
  else echo "FAIL: logits --ubatch 16 differs from one batch ($(basename "$m"))"; fail=1; fi
done
if "$bin" logits -m "$model" --tokens 1,2 --ubatch 0 2>/dev/null; then echo "FAIL: --ubatch 0 accepted"; fail=1; else echo "ok   --ubatch 0 refused"; fi
[ $fail = 0 ] && echo "10 passed, 0 failed" || echo "some checks failed"
exit $fail
