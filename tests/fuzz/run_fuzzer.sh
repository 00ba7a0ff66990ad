#!/usr/bin/env bash
# run_fuzzer.sh NAME TARGET [MODEL] - one libFuzzer target under ctest (build-fuzz): first the
# regression inputs of tests/fuzz/regress/NAME (each must pass), then fuzzing for $FUZZ_SECONDS
# (default 15) from a corpus in the build directory seeded with tests/fuzz/corpus/TARGET and
# with inputs fuzz_seeds makes from ../shared. A crash leaves its input in
# $RLX_BIN/fuzz-artifacts/NAME/; exec counts are appended to $RLX_BIN/fuzz-stats.txt.
set -u
name=$1 target=$2 model=${3:-}
BIN="${RLX_BIN:-build-fuzz}" SRC="${RLX_SRC:-.}" SHARED="${RLX_SHARED:-../shared}"
secs=${FUZZ_SECONDS:-15}
exe="$BIN/$target"
[ -x "$exe" ] || { echo "skip: $exe not built (make fuzz / build-fuzz)"; exit 77; }
if [ -n "$model" ]; then
    [ -f "$SHARED/$model" ] || { echo "skip: $SHARED/$model absent"; exit 77; }
    export RLX_FUZZ_MODEL="$SHARED/$model"
fi
kind=${target#fuzz_}
corpus="$BIN/fuzz-corpus/$name" art="$BIN/fuzz-artifacts/$name"
mkdir -p "$corpus" "$art"
[ -d "$SRC/tests/fuzz/corpus/$kind" ] && cp -n "$SRC/tests/fuzz/corpus/$kind"/* "$corpus"/ 2>/dev/null
"$BIN/fuzz_seeds" "$kind" "$corpus" "$SHARED" >/dev/null 2>&1
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
reg="$SRC/tests/fuzz/regress/$name"
if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
    "$exe" -rss_limit_mb=4096 "$reg"/* >"$art/regress.log" 2>&1 || { cat "$art/regress.log"; echo "FAIL: a regression input of $name"; exit 1; }
    echo "regression inputs: $(ls "$reg" | wc -l) ok"
fi
log="$art/fuzz.log"
"$exe" "$corpus" -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$art/" >"$log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
echo "$name: ${execs:-?} runs in ${secs}s, ${cov:-cov: ?}, corpus $(ls "$corpus" | wc -l) files, exit $rc" | tee -a "$BIN/fuzz-stats.txt"
if [ "$rc" != 0 ]; then
    grep -A40 -m1 'ERROR\|runtime error\|==ERROR\|deadly signal\|timeout' "$log" | head -60
    echo "FAIL: $name found a crash; input in $art/"
    exit 1
fi
