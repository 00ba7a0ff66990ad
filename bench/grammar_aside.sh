#!/usr/bin/env bash
# bench/grammar_aside.sh - constrained sampling's helper beside the forward pass (issue 15,
# engine/gaside.h), run alone. Not a test.
#
# Serves MODEL (the Qwen3-0.6B-shape file with the 151,936-token vocabulary, as RESULTS' grammar
# sections) with `rlxd serve --threads THREADS` twice, --grammar-aside off then on (and again,
# ROUNDS times, interleaved), and sends N chat requests one after the other, each with a schema
# never seen before (bench/grammar/person.json with its first property renamed per request), so
# each request's grammar starts a new walk ahead; then N requests repeating one schema (its
# tables built). Prints per mode: mean wall time of a request and of a generated token, fresh and
# repeated schemas, and the helper's seconds from /metrics.
# Environment: BUILD (build), MODEL (required), THREADS (1), N (8), TOKENS (48), ROUNDS (2).
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
THREADS=${THREADS:-1}
N=${N:-8}
TOKENS=${TOKENS:-48}
ROUNDS=${ROUNDS:-2}
MODEL=${MODEL:?MODEL: a GGUF file (see the header)}
PORT=${PORT:-18431}
schema=$(tr -d '\n' <bench/grammar/person.json)

one() { # name property seed -> "seconds tokens"
    local body
    body=$(printf '{"model":"b","messages":[{"role":"user","content":"A person, as JSON."}],"max_tokens":%s,"temperature":1,"seed":%s,"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":%s}}}' \
        "$TOKENS" "$2" "${schema/\"name\"/\"$1\"}")
    curl -s -o /tmp/grammar_aside.out -w '%{time_total}' -H 'Content-Type: application/json' \
        "http://127.0.0.1:$PORT/v1/chat/completions" -d "$body"
    echo " $(node -e 'const r=JSON.parse(require("fs").readFileSync("/tmp/grammar_aside.out","utf8"));console.log(r.usage.completion_tokens)')"
}

for round in $(seq 1 "$ROUNDS"); do
    for mode in off on; do
        "$BUILD/rlxd" serve -m "$MODEL:b" --threads "$THREADS" --grammar-aside $mode --ctx 512 --max-seqs 4 \
            --host 127.0.0.1 --port "$PORT" 2>/tmp/grammar_aside.log &
        pid=$!
        until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do sleep 0.2; done
        one warmup 1 >/dev/null
        for kind in fresh repeated; do
            tot=0 toks=0
            for i in $(seq 1 "$N"); do
                prop=$([ $kind = fresh ] && echo "name_${round}_$i" || echo "name_rep")
                read -r s t < <(one "$prop" $((i + 100)))
                tot=$(awk -v a="$tot" -v b="$s" 'BEGIN{print a + b}')
                toks=$((toks + t))
            done
            awk -v r="$round" -v m="$mode" -v k="$kind" -v t="$tot" -v n="$N" -v c="$toks" 'BEGIN{
                printf "round %s  helper %-3s  %-8s schemas: %6.1f ms per request, %5.2f ms per token (%d tokens)\n",
                       r, m, k, t * 1000 / n, t * 1000 / c, c}'
        done
        secs=$(curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^rlxd_grammar_aside_seconds_total{model_name="b"} //p')
        echo "round $round  helper $mode  its seconds in /metrics: $secs"
        kill -TERM $pid
        wait $pid || true
    done
done
