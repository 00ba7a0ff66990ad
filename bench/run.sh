#!/usr/bin/env bash
# bench/run.sh - engine and server benchmarks (`make bench`). Not a test: it asserts nothing.
#
# Makes Qwen3-0.6B-shaped models with rlxd-synth (F16, Q8_0, Q4_K_M; stories260K from ../shared
# when present), measures memory read bandwidth and the OpenBLAS sgemm peak with the two small
# programs next to this script, runs `rlxd bench` (pp128, pp512, tg32 at batch 1, aggregate
# generation at 4 and 16 sequences) and, when this build has `rlxd serve`, server figures through
# rlxd-loadgen at 1, 4 and 16 concurrent streams. Prints a markdown table (also written to
# $BUILD/bench/results.md) with each figure as a fraction of the physical limit:
#   decode:  tok/s x weight bytes per token / memory bandwidth
#   prefill: tok/s x 2 x parameters / sgemm peak
# Environment: BUILD (build), THREADS (2), REPS (3), GEN (32), MODELS (f16 q8_0 q4_k_m),
#              SERVER_MODEL (default: the Q8_0 file with ../shared's Qwen2 vocabulary),
#              SERVER_REQUESTS (2 x concurrency),
#              SERVER_ONLY=1 (skip the engine figures), EMBED=0 (skip bench/embed.sh, the
#              embeddings figures).
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
GEN=${GEN:-32}
MODELS=${MODELS:-"f16 q8_0 q4_k_m"}
OUT="$BUILD/bench"
SHARED=${RLX_SHARED:-../shared}
mkdir -p "$BUILD/models" "$OUT"

for b in rlxd rlxd-synth rlxd-loadgen; do
    [ -x "$BUILD/$b" ] || { echo "bench: $BUILD/$b is missing; run 'make build' first" >&2; exit 1; }
done
command -v node >/dev/null || { echo "bench: node is needed to read the JSON figures" >&2; exit 1; }

# --- physical limits -------------------------------------------------------------------------
cc -O3 -march=native -o "$OUT/membw" bench/membw.c -lpthread
cc -O2 -o "$OUT/sgemm_peak" bench/sgemm_peak.c $(pkg-config --cflags --libs openblas)
BW=$("$OUT/membw" "$THREADS" 1024 2>/dev/null)
PEAK=$("$OUT/sgemm_peak" "$THREADS" 2>/dev/null)

# --- models ----------------------------------------------------------------------------------
declare -a FILES=()
for t in $MODELS; do
    f="$BUILD/models/q06-$t.gguf"
    [ -f "$f" ] || "$BUILD/rlxd-synth" --arch qwen3 --preset qwen3-0.6b --type "$t" -o "$f" >/dev/null
    FILES+=("$f")
done
[ -f "$SHARED/models/stories260K.gguf" ] && FILES+=("$SHARED/models/stories260K.gguf")
F16="$BUILD/models/q06-f16.gguf"

json_get() { node -e 'const d=JSON.parse(require("fs").readFileSync(0,"utf8"));let v=d;for(const k of process.argv[1].split("."))v=v[k];console.log(v)' "$1"; }

{
echo "# rlxd bench - $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "- machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; threads $THREADS"
echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- memory read bandwidth: $BW GB/s ($THREADS threads); OpenBLAS sgemm peak: $PEAK GFLOP/s (1024^3, $THREADS threads)"
echo
echo "## Engine (\`rlxd bench -t $THREADS -r $REPS\`, medians)"
echo
echo "| model | GB/token | pp128 | pp512 | tg$GEN | tg x4 | tg x16 | tg / limit | pp128 / limit |"
echo "|---|---|---|---|---|---|---|---|---|"
} | tee "$OUT/results.md"

PARAMS=""
[ -n "${SERVER_ONLY:-}" ] && FILES_ENGINE=() || FILES_ENGINE=("${FILES[@]}")
for f in "${FILES_ENGINE[@]}"; do
    j=$("$BUILD/rlxd" bench -m "$f" -p 128 -n "$GEN" --seqs 1,4,16 -t "$THREADS" -r "$REPS" --json)
    j5=$("$BUILD/rlxd" bench -m "$f" -p 512 -n 1 --seqs 1 -t "$THREADS" -r "$REPS" --json)
    wb=$(echo "$j" | json_get weight_bytes)
    # parameters: the F16 file's weight bytes / 2 (every q06 file has the same shape; 596 M
    # until the F16 one has run); stories260K is F32
    [ "$f" = "$F16" ] && PARAMS=$((wb / 2))
    params=${PARAMS:-596049920}
    case "$f" in *stories260K*) params=$((wb / 4)) ;; esac
    node -e '
      const [name, wb, bw, peak, params, j, j5] = process.argv.slice(1);
      const a = JSON.parse(j), b = JSON.parse(j5);
      const tgl = (a.tg_tps * wb / (bw * 1e9) * 100).toFixed(0);
      const ppl = (a.pp_tps * 2 * params / (peak * 1e9) * 100).toFixed(0);
      const s = a.tg_tps_by_seqs;
      console.log(`| ${name} | ${(wb / 1e9).toFixed(3)} | ${a.pp_tps.toFixed(1)} | ${b.pp_tps.toFixed(1)} | ${a.tg_tps.toFixed(1)} | ${(s["4"] ?? 0).toFixed(1)} | ${(s["16"] ?? 0).toFixed(1)} | ${tgl}% | ${ppl}% |`);
    ' "$(basename "$f")" "$wb" "$BW" "$PEAK" "$params" "$j" "$j5" | tee -a "$OUT/results.md"
done
echo "load average at end of engine runs: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/results.md"

# --- server ----------------------------------------------------------------------------------
if ! "$BUILD/rlxd" serve --help >/dev/null 2>&1; then
    echo -e "\nserver figures skipped: this build has no \`rlxd serve\`" | tee -a "$OUT/results.md"
    exit 0
fi
# The server model: the Qwen3-0.6B shape in Q8_0 with a real byte-level BPE vocabulary (the
# Qwen2 one of ../shared's synth-qwen3-tiny, 151936 tokens as Qwen3's), so loadgen's prompts
# tokenize as text does and the random weights' tokens stream as visible text (the built-in
# byte-level vocabulary emits bytes that mostly do not form UTF-8: no chunks, no TTFT/ITL).
VOCAB_FROM="$SHARED/models/synth-qwen3-tiny-f32.gguf"
if [ -z "${SERVER_MODEL:-}" ]; then
    if [ -f "$VOCAB_FROM" ]; then
        MODEL="$BUILD/models/q06v-q8_0.gguf"
        [ -f "$MODEL" ] || "$BUILD/rlxd-synth" --arch qwen3 --preset qwen3-0.6b --type q8_0 --vocab-from "$VOCAB_FROM" -o "$MODEL" >/dev/null
    else
        MODEL="$BUILD/models/q06-q8_0.gguf"
        echo "bench: $VOCAB_FROM is missing; the server model keeps the built-in vocabulary (TTFT/ITL may be empty)" >&2
    fi
else
    MODEL=$SERVER_MODEL
fi
[ -f "$MODEL" ] || MODEL="${FILES[0]}"
PORT=$((20000 + RANDOM % 30000))
"$BUILD/rlxd" serve -m "$MODEL:bench" --host 127.0.0.1 --port "$PORT" --threads "$THREADS" --max-seqs 16 --ctx 512 \
    >"$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    kill -0 "$SERVER" 2>/dev/null || { echo "bench: rlxd serve exited; see $OUT/serve.log" >&2; exit 1; }
    sleep 0.1
done

# One table per workload: C concurrent streams (rlxd-loadgen keeps C requests in flight, 2 x C
# requests in all), then the aggregate output tok/s at 16 streams over 1 stream. Each run has
# its own --prompt-seed: request N of every run would otherwise send the same prompt, and a
# later run would find the earlier runs' prompts in the prefix cache (no prefill to measure).
server_table() {
    local prompt=$1 gen=$2 what=$3 one=""
    {
    echo
    echo "## Server: $what (\`rlxd serve\`, $(basename "$MODEL"), rlxd-loadgen --prompt-tokens $prompt --max-tokens $gen)"
    echo
    echo "| streams | output tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | errors |"
    echo "|---|---|---|---|---|---|---|"
    } | tee -a "$OUT/results.md"
    for c in 1 4 16; do
        n=${SERVER_REQUESTS:-$((2 * c))}
        j=$("$BUILD/rlxd-loadgen" --url "http://127.0.0.1:$PORT/v1" --model bench --concurrency "$c" --requests "$n" \
            --prompt-tokens "$prompt" --max-tokens "$gen" --prompt-seed "$c$prompt" --json)
        node -e '
          const [c, j] = process.argv.slice(1); const d = JSON.parse(j);
          const f = (x, n) => (typeof x === "number" ? x.toFixed(n) : "-"); /* null when nothing was measured */
          console.log(`| ${c} | ${f(d.output_tps, 1)} | ${f(d.ttft_p50_ms, 0)} | ${f(d.ttft_p99_ms, 0)} | ${f(d.itl_p50_ms, 1)} | ${f(d.itl_p99_ms, 1)} | ${d.errors} |`);
        ' "$c" "$j" | tee -a "$OUT/results.md"
        tps=$(echo "$j" | json_get output_tps)
        [ "$c" = 1 ] && one=$tps
        [ "$c" = 16 ] && node -e 'const [a, b] = process.argv.slice(1).map(Number);
            console.log(`\n16 streams / 1 stream: ${(b / a).toFixed(2)}x`)' "$one" "$tps" | tee -a "$OUT/results.md"
    done
}
server_table 32 128 "generation-heavy"
server_table 128 64 "prompt-heavy"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/results.md"
kill "$SERVER" 2>/dev/null || true
wait "$SERVER" 2>/dev/null || true
trap - EXIT
# embeddings (issue 20): bench/embed.sh appends its table; EMBED=0 skips it
[ "${EMBED:-1}" = 0 ] || BUILD="$BUILD" THREADS="$THREADS" bash bench/embed.sh
