#!/usr/bin/env bash
# bench/embed.sh - embeddings throughput (issue 20), run by bench/run.sh or alone. Not a test.
#
# A model with all-MiniLM-L6-v2's shape made by rlxd-synth (hidden 384, 6 layers, 12 heads, FFN
# 1536, 512 positions, ../shared's bge WordPiece vocabulary, mean pooling): `rlxd-synth --arch
# bert --preset minilm`, or where this rlxd-synth has no bert a llama of that shape declared an
# embedding model (--pooling 1 --non-causal: SwiGLU FFN and RoPE instead of bert's GELU FFN and
# learned positions, about 1.3x bert's work per token; the table says which). Served by `rlxd serve --threads THREADS
# --max-seqs 16 --ctx 512`, driven by `rlxd-loadgen --embeddings` with the three workloads of
# ../shared/baselines.md (llama-server's figures on its host B are printed beside ours):
#   256 requests of one ~16-token text, 16 concurrent clients
#   64 requests of one ~200-token text, 16 concurrent clients
#   one request carrying 256 ~16-token texts
# Environment: BUILD (build), THREADS (2), TYPES (f32 f16), RLX_SHARED (../shared).
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
TYPES=${TYPES:-"f32 f16"}
SHARED=${RLX_SHARED:-../shared}
OUT="$BUILD/bench"
mkdir -p "$BUILD/models" "$OUT"
VOCAB="$SHARED/models/synth-bert-tiny-f32.gguf"
[ -f "$VOCAB" ] || { echo "bench/embed: $VOCAB (the bge WordPiece vocabulary) is missing" >&2; exit 1; }
json_get() { node -e 'const d=JSON.parse(require("fs").readFileSync(0,"utf8"));console.log(d[process.argv[1]])' "$1"; }

{
echo
echo "## Embeddings (MiniLM shape, \`rlxd serve --threads $THREADS --max-seqs 16 --ctx 512\`, rlxd-loadgen --embeddings)"
echo
echo "- machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
echo
echo "| model | workload | inputs/s | tokens/s | llama-server inputs/s (host B) | errors |"
echo "|---|---|---|---|---|---|"
} | tee -a "$OUT/results.md"

for t in $TYPES; do
    M="$BUILD/models/minilm-$t.gguf"
    if [ ! -f "$M" ]; then
        "$BUILD/rlxd-synth" --arch bert --preset minilm --pooling mean --type "$t" --vocab-from "$VOCAB" -o "$M" >/dev/null 2>&1 ||
        "$BUILD/rlxd-synth" --arch llama --hidden 384 --layers 6 --heads 12 --kv-heads 12 --head-dim 32 \
            --ffn 1536 --ctx 512 --pooling 1 --non-causal --type "$t" --vocab-from "$VOCAB" -o "$M" >/dev/null
    fi
    ARCH=$("$BUILD/rlxd" inspect "$M" 2>/dev/null | sed -n 's/.*general\.architecture.*= "\(.*\)".*/\1/p' | head -1)
    PORT=$((20000 + RANDOM % 30000))
    "$BUILD/rlxd" serve -m "$M:emb" --host 127.0.0.1 --port "$PORT" --threads "$THREADS" --max-seqs 16 --ctx 512 \
        >"$OUT/serve-embed.log" 2>&1 &
    SERVER=$!
    trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT
    for _ in $(seq 1 600); do
        curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
        kill -0 "$SERVER" 2>/dev/null || { echo "bench/embed: rlxd serve exited; see $OUT/serve-embed.log" >&2; exit 1; }
        sleep 0.1
    done
    # workload: name, concurrency, requests, inputs per request, --prompt-tokens (loadgen's text
    # is "Request N:" and words: prompt-tokens + 2 WordPiece tokens with [CLS] and [SEP])
    for w in "256x16-token:16:256:1:14:216:266" "64x200-token:16:64:1:198:11.4:13.4" "1x256-texts:1:1:256:14:237:282"; do
        IFS=: read -r name c n k p ref32 ref16 <<<"$w"
        j=$("$BUILD/rlxd-loadgen" --url "http://127.0.0.1:$PORT/v1" --model emb --embeddings --concurrency "$c" \
            --requests "$n" --inputs "$k" --prompt-tokens "$p" --json)
        ref=$ref32; [ "$t" = f16 ] && ref=$ref16
        node -e '
          const [m, w, ref, j] = process.argv.slice(1); const d = JSON.parse(j);
          console.log(`| ${m} | ${w} | ${d.inputs_per_s.toFixed(1)} | ${d.prompt_tps.toFixed(0)} | ${ref} | ${d.errors} |`);
        ' "$(basename "$M") ($ARCH)" "$name" "$ref" "$j" | tee -a "$OUT/results.md"
    done
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
    trap - EXIT
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/results.md"
