#!/usr/bin/env bash
# bench/cuda.sh - the CUDA backend's checks and speed on a machine with an NVIDIA GPU, in one
# run (a lent GPU's time is short). Not a test: CI has no GPU; test_cuda_build.sh is CI's compile
# check. Run from the source root:
#   BIN=DIR RLX_SHARED=DIR OUTDIR=DIR bash bench/cuda.sh
# BIN: a -DRLX_CUDA=ON build (rlxd, rlxd-synth, rlxd-loadgen, unit_test_cuda_ops,
# parity_test_parity_cuda, parity_test_parity_embed); RLX_SHARED: a ../shared holding the models
# and golden files to check (absent ones are skipped by the parity tests); OUTDIR: logs and the
# models it makes. Prints one block per step (exit status, seconds, the log's tail) and the
# speed tables last. Steps:
#   1. the device, rlxd --version and rlxd devices
#   2. unit_test_cuda_ops (kernels against the CPU backend, the encoder ops included)
#   3. parity_test_parity_cuda (every golden decoder present, F16 and F32 KV, lenient rules)
#   4. parity_test_parity_embed on CUDA (the encoders' pooled vectors against llama.cpp's, and
#      the CPU backend's)
#   5. a hybrid (rlxd-synth qwen35-tiny) must be refused at load, naming the op
#   6. bench/cuda_features.py: the daemon's backend-dependent paths (sessions restored after a
#      restart, n choices, preemption, JSON Schema with the masks beside the pass, embeddings
#      under concurrency) on CUDA
#   7. rlxd bench --backend cuda on Qwen3-0.6B-shaped Q8_0 / Q4_K_M / F16 and stories260K
#   8. rlxd serve --backend cuda under rlxd-loadgen: 16 concurrent and one at a time (Q8_0)
#   9. embeddings through rlxd serve --backend cuda: MiniLM shape, bench/embed.sh's workloads
#  10. (profile) where a decode step's time goes: Nsight Compute's per-kernel durations over
#      decode steps of the Q8_0 model (prefill skipped), summed by kernel
set -u
# STEPS: the steps to run, a comma-separated subset of tests,hybrid,features,bench,serve,embed,
# profile (default all but profile)
STEPS=${STEPS:-tests,hybrid,features,bench,serve,embed}
want() { case ",$STEPS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
BIN=${BIN:-build}
OUTDIR=${OUTDIR:-/tmp/rlx-cuda}
SHARED=${RLX_SHARED:-../shared}
export RLX_SHARED=$SHARED
M=$OUTDIR/models
mkdir -p "$OUTDIR" "$M"
SUMMARY=$OUTDIR/summary.md
: >"$SUMMARY"

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# step NAME LIMIT_S CMD...: runs CMD with its output in OUTDIR/NAME.log, prints rc, time, tail
step() {
    local name=$1 lim=$2 s rc
    shift 2
    s=$(now)
    timeout "$lim" "$@" >"$OUTDIR/$name.log" 2>&1
    rc=$?
    echo "== $name: rc $rc, $(secs "$s") s"
    tail -n "${TAIL:-12}" "$OUTDIR/$name.log"
    return $rc
}

echo "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1
echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
"$BIN/rlxd" --version
"$BIN/rlxd" devices

if want tests; then
    step cuda_ops 180 "$BIN/unit_test_cuda_ops"
    TAIL=40 step parity_cuda 300 "$BIN/parity_test_parity_cuda"
    TAIL=20 RLXD_BACKEND=cuda step parity_embed 180 "$BIN/parity_test_parity_embed"
fi

if want hybrid; then
    "$BIN/rlxd-synth" --arch qwen35 --preset qwen35-tiny -o "$M/qwen35-tiny.gguf" >/dev/null
    step hybrid_refused 60 "$BIN/rlxd" generate -m "$M/qwen35-tiny.gguf" -p "Hello" -n 4 --backend cuda
    grep -q "does not support op" "$OUTDIR/hybrid_refused.log" && echo "   (refused naming the op, as it must be)" \
        || echo "   FAIL: the hybrid was not refused naming the op"
fi

want features && TAIL=30 step features 300 python3 bench/cuda_features.py --bin "$BIN" --shared "$SHARED" --backend cuda \
    --out "$OUTDIR/features"

# speed: the models are made here (same arguments, same bytes as on any machine)
# BENCH_MODELS: the models rlxd bench measures (default all four)
BENCH_MODELS=${BENCH_MODELS:-q06-q8_0 q06-q4_k_m q06-f16 stories260K}
want bench || want serve && for t in q8_0 q4_k_m f16; do
    [ -f "$M/q06-$t.gguf" ] || "$BIN/rlxd-synth" --arch qwen3 --preset qwen3-0.6b --type "$t" -o "$M/q06-$t.gguf" >/dev/null &
done
wait
{
    echo "| model | pp128 tok/s | tg32 tok/s | x1 seqs | x4 seqs | x16 seqs |"
    echo "|---|---|---|---|---|---|"
} >>"$SUMMARY"
for f in "$M/q06-q8_0.gguf" "$M/q06-q4_k_m.gguf" "$M/q06-f16.gguf" "$SHARED/models/stories260K.gguf"; do
    n=$(basename "$f" .gguf)
    want bench && [ -f "$f" ] && [[ " $BENCH_MODELS " == *" $n "* ]] || continue
    TAIL=6 step "bench-$n" 180 "$BIN/rlxd" bench --backend cuda -m "$f" -p 128 -n 32 --seqs 1,4,16 -r 3 --json
    python3 - "$OUTDIR/bench-$n.log" "$n" >>"$SUMMARY" 2>/dev/null <<'EOF' || echo "| $n | (see bench-$n.log) |" >>"$SUMMARY"
import json, sys
txt = open(sys.argv[1]).read()
d = json.loads(txt[txt.index("{"):txt.rindex("}") + 1])
def g(*ks):
    for k in ks:
        if k in d: return d[k]
    return "-"
seqs = d.get("tg_tps_by_seqs", {})
def f(v): return "%.1f" % v if isinstance(v, (int, float)) else str(v)
print("| %s | %s | %s | %s | %s | %s |" % (sys.argv[2], f(g("pp_tps", "pp")), f(g("tg_tps", "tg")),
      f(seqs.get("1", "-")), f(seqs.get("4", "-")), f(seqs.get("16", "-"))))
EOF
done

# serve a model on CUDA under rlxd-loadgen; $1 model spec, $2 name, then loadgen runs "c:n:extra"
serve_load() {
    local spec=$1 name=$2 port=$((20000 + RANDOM % 30000)) pid
    shift 2
    "$BIN/rlxd" serve -m "$spec" --host 127.0.0.1 --port "$port" --backend cuda --max-seqs 16 --ctx 2048 \
        >"$OUTDIR/serve-$name.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do
        # (no curl on every GPU image: bash's /dev/tcp)
        (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && head -n 1 <&3 | grep -q ' 200') \
            2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    for w in "$@"; do
        IFS=: read -r c n extra <<<"$w"
        # shellcheck disable=SC2086
        TAIL=8 step "load-$name-c$c-n$n" 120 "$BIN/rlxd-loadgen" --url "http://127.0.0.1:$port/v1" --model "${spec##*:}" \
            --concurrency "$c" --requests "$n" $extra
    done
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    tail -n 3 "$OUTDIR/serve-$name.log"
}
want serve && serve_load "$M/q06-q8_0.gguf:q06" q06 "16:32:--prompt-tokens 64 --max-tokens 32" "1:8:--prompt-tokens 64 --max-tokens 32"

VOCAB=$SHARED/models/synth-bert-tiny-f32.gguf
if want embed && [ -f "$VOCAB" ]; then
    for t in f32 f16; do
        "$BIN/rlxd-synth" --arch bert --preset minilm --pooling mean --type "$t" --vocab-from "$VOCAB" -o "$M/minilm-$t.gguf" >/dev/null
        serve_load "$M/minilm-$t.gguf:emb" "minilm-$t" "16:256:--embeddings --prompt-tokens 14" \
            "16:64:--embeddings --prompt-tokens 198" "1:1:--embeddings --inputs 256 --prompt-tokens 14"
    done
fi

if want profile; then
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
    [ -f "$M/q06-q8_0.gguf" ] || "$BIN/rlxd-synth" --arch qwen3 --preset qwen3-0.6b --type q8_0 -o "$M/q06-q8_0.gguf" >/dev/null
    # bench -p 16 -n 40 --seqs 1 -r 1: the first launches are the load, warm-up and prefill
    TAIL=3 step profile 300 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 1500 \
        --launch-count 1200 "$BIN/rlxd" bench --backend cuda -m "$M/q06-q8_0.gguf" -p 16 -n 40 --seqs 1 -r 1
    python3 - "$OUTDIR/profile.log" <<'EOF'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
tot, cnt = collections.Counter(), collections.Counter()
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    v = float(r["Metric Value"].replace(",", ""))
    unit = r.get("Metric Unit", "ns")
    v *= {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(unit, 1e-3)
    name = r["Kernel Name"].split("(")[0]
    tot[name] += v
    cnt[name] += 1
all_us = sum(tot.values())
print(f"kernels profiled: {sum(cnt.values())}, {all_us:.0f} us of GPU time")
for name, us in tot.most_common(12):
    print(f"  {name:40s} {cnt[name]:6d} launches {us:10.0f} us {100 * us / all_us:5.1f}%  {us / cnt[name]:8.1f} us each")
EOF
fi

echo "== speed (rlxd bench --backend cuda -p 128 -n 32 --seqs 1,4,16 -r 3, medians)"
cat "$SUMMARY"
