#!/usr/bin/env bash
# test_loadgen.sh - rlxd-loadgen against a fake OpenAI streaming endpoint (python3 http.server on
# 127.0.0.1, random port): concurrency is honoured, the request count and the request body are
# right, TTFT / inter-token latency / tokens match the fake's pacing, usage is read, server
# errors, in-stream errors and the --timeout bound are reported. Bounded to well under a minute.
set -uo pipefail
bin="${RLX_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/build}/rlxd-loadgen"
if [ ! -x "$bin" ]; then
  echo "test_loadgen: $bin not built (needs libcurl4-openssl-dev: run tools/install-deps.sh); skipped"
  exit 77
fi
py=$(command -v python3 || true)
if [ -z "$py" ]; then echo "test_loadgen: python3 not found; skipped"; exit 77; fi

tmp=$(mktemp -d)
srv_pid=""
d_pid=""
cleanup() {
  [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
  [ -n "$d_pid" ] && kill "$d_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
bad() { echo "test_loadgen: FAIL: $*" >&2; fail=1; }

cat > "$tmp/fake.py" <<'EOF'
# Fake OpenAI streaming server: TTFT 50 ms, then one chunk every 10 ms, then usage and [DONE].
import json, sys, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
lock = threading.Lock()
st = {"total": 0, "inflight": 0, "max_inflight": 0, "bodies_ok": 0, "bad": [], "prompt_words": [], "heads": []}

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send_chunk(self, data):
        b = data.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
        self.wfile.flush()
    def do_GET(self):
        body = json.dumps(st).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        chat = self.path == "/v1/chat/completions"
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            with lock: st["bad"].append("path " + self.path)
            self.send_error(404); return
        model = req.get("model")
        if model == "fail":
            body = b'{"error":{"message":"model exploded","type":"server_error"}}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers(); self.wfile.write(body); return
        if model == "hold":
            # the first request waits until 40 have come in (or 2 s): the other slot must go on
            # without it, each next request sent as soon as the last one finished
            with lock:
                st["hold_total"] = st.get("hold_total", 0) + 1
                first = st["hold_total"] == 1
            if first:
                t0 = time.time()
                while st["hold_total"] < 40 and time.time() - t0 < 2: time.sleep(0.005)
                st["released_by"] = "count" if st["hold_total"] >= 40 else "timeout"
        with lock:
            st["total"] += 1; st["inflight"] += 1
            st["max_inflight"] = max(st["max_inflight"], st["inflight"])
            ok = (req.get("stream") is True and req.get("ignore_eos") is True
                  and req.get("stream_options", {}).get("include_usage") is True
                  and isinstance(req.get("max_tokens"), int))
            st["bodies_ok"] += ok
            text = req["messages"][0]["content"] if chat else req.get("prompt", "")
            st["prompt_words"].append(len(text.split()))
            st["heads"].append(text.split(":")[0])
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            time.sleep(30 if model == "slow" else 0 if model == "hold" else 0.05)
            n = req["max_tokens"]
            for i in range(n):
                if model == "midstream" and i == 2:
                    self.send_chunk('data: {"error":{"message":"worker died"}}\n\n'); break
                if model == "cut":
                    self.send_chunk(""); return  # a clean end of body, but no text, usage or [DONE]
                c = {"choices": [{"index": 0, "delta": {"content": " t%d" % i}}]} if chat \
                    else {"choices": [{"index": 0, "text": " t%d" % i}]}
                self.send_chunk("data: %s\n\n" % json.dumps(c))
                # an empty held-back chunk must not count as a token
                if i == 0: self.send_chunk('data: {"choices":[{"index":0,"text":""}]}\n\n')
                time.sleep(0 if model == "hold" else 0.01)
            self.send_chunk('data: {"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}\n\n'
                            % (st["prompt_words"][-1], n))
            self.send_chunk("data: [DONE]\n\n")
            self.send_chunk("")
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with lock: st["inflight"] -= 1

srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
open(sys.argv[1], "w").write(str(srv.server_address[1]))
srv.serve_forever()
EOF

"$py" "$tmp/fake.py" "$tmp/port" &
srv_pid=$!
for _ in $(seq 300); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || { echo "test_loadgen: fake server did not start" >&2; exit 1; }
port=$(cat "$tmp/port")
url="http://127.0.0.1:$port/v1"

# jq-free JSON field checks
check() { # check FILE PYTHON-EXPR MESSAGE
  "$py" -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1" \
    || bad "$3: $(cat "$1")"
}

# 1. the main run: 4 streams, 12 requests of 8 tokens
timeout 60 "$bin" --url "$url" --model m --concurrency 4 --requests 12 --prompt-tokens 32 \
  --max-tokens 8 --json --timeout 30 > "$tmp/r1.json" || bad "main run exited $?"
check "$tmp/r1.json" "j['requests']==12 and j['ok']==12 and j['errors']==0" "request counts"
check "$tmp/r1.json" "j['output_tokens']==96 and j['prompt_tokens']>0" "token counts"
check "$tmp/r1.json" "45<=j['ttft_p50_ms']<=3000 and j['ttft_p50_ms']<=j['ttft_p99_ms']" "TTFT near 50 ms"
check "$tmp/r1.json" "5<=j['itl_p50_ms']<=1000 and j['itl_p50_ms']<=j['itl_p99_ms']" "ITL near 10 ms"
check "$tmp/r1.json" "j['output_tps']>0 and j['latency_p50_ms']>=j['ttft_p50_ms']" "throughput"
curl -s --noproxy '*' "http://127.0.0.1:$port/stats" > "$tmp/s1.json" || bad "stats"
check "$tmp/s1.json" "j['total']==12 and j['max_inflight']==4 and j['bodies_ok']==12 and not j['bad']" \
  "server saw 12 well-formed requests, 4 at a time"
check "$tmp/s1.json" "all(26<=w<=40 for w in j['prompt_words'])" "prompt of about 32 tokens"
check "$tmp/s1.json" "sorted(j['heads'])==sorted('Request %d' % i for i in range(12))" "one prompt per index, no seed"

# 1b. --prompt-seed: the same indexes, prompts no earlier run sent (no prefix-cache hits)
timeout 60 "$bin" --url "$url" --model m --concurrency 4 --requests 12 --prompt-tokens 32 \
  --max-tokens 2 --prompt-seed 7 --json --timeout 30 > "$tmp/r1b.json" || bad "seeded run exited $?"
check "$tmp/r1b.json" "j['ok']==12" "seeded run completes"
curl -s --noproxy '*' "http://127.0.0.1:$port/stats" > "$tmp/s1b.json" || bad "stats"
check "$tmp/s1b.json" "sorted(j['heads'][12:24])==sorted('Request 7-%d' % i for i in range(12))" \
  "seeded prompts: Request 7-N, none shared with the unseeded run"
"$bin" --url "$url" --model m --prompt-seed -1 >/dev/null 2>&1; [ $? -eq 2 ] || bad "a negative --prompt-seed is not a usage error"

# 2. chat endpoint and the table output
timeout 30 "$bin" --url "$url/" --model m --chat --concurrency 2 --requests 2 --max-tokens 3 \
  --prompt-tokens 8 > "$tmp/t2.txt" || bad "chat run exited $?"
grep -q "2 ok, 0 errors" "$tmp/t2.txt" || bad "chat table: $(cat "$tmp/t2.txt")"
grep -q "^TTFT (ms)" "$tmp/t2.txt" || bad "table lacks the TTFT row"
grep -q "output tokens  6 " "$tmp/t2.txt" || bad "chat tokens: $(cat "$tmp/t2.txt")"

# 3. HTTP errors are counted and named; none succeeded -> exit 1
timeout 30 "$bin" --url "$url" --model fail --requests 3 --json > "$tmp/r3.json"
[ $? = 1 ] || bad "all-failed run should exit 1"
check "$tmp/r3.json" "j['errors']==3 and j['ok']==0 and 'HTTP 500' in j['first_error'] and 'exploded' in j['first_error']" \
  "server errors"

# 4. an error event inside the stream fails the request
timeout 30 "$bin" --url "$url" --model midstream --requests 2 --max-tokens 5 --json > "$tmp/r4.json"
check "$tmp/r4.json" "j['errors']==2 and 'worker died' in j['first_error']" "in-stream error"

# 4b. a stream that ends before any content, usage or [DONE] is an error
timeout 30 "$bin" --url "$url" --model cut --requests 2 --max-tokens 5 --json > "$tmp/r4b.json"
check "$tmp/r4b.json" "j['errors']==2 and 'without content' in j['first_error']" "truncated stream"

# 5. --timeout bounds the run even when the server stalls
t0=$(date +%s.%N)
timeout 30 "$bin" --url "$url" --model slow --concurrency 2 --requests 4 --timeout 1 --json > "$tmp/r5.json"
t1=$(date +%s.%N)
"$py" -c "import sys; sys.exit(0 if float(sys.argv[2])-float(sys.argv[1]) < 5 else 1)" "$t0" "$t1" \
  || bad "--timeout 1 took $t0 -> $t1"
check "$tmp/r5.json" "j['ok']==0 and j['errors']+j['not_started']==4 and 'imeout' in j['first_error']" "timeout"

# 5b. a slot whose request finished starts the next one at once, not when another transfer moves
# (the fake holds the first request until 40 have arrived: 39 through the other slot)
timeout 60 "$bin" --url "$url" --model hold --concurrency 2 --requests 40 --max-tokens 2 --json --timeout 30 \
  > "$tmp/r5b.json" || bad "hold run exited $?"
check "$tmp/r5b.json" "j['ok']==40 and j['errors']==0" "hold run: 40 requests"
curl -s --noproxy '*' "http://127.0.0.1:$port/stats" > "$tmp/s5b.json" || bad "stats"
check "$tmp/s5b.json" "j.get('released_by')=='count'" \
  "the free slot waited for the held transfer before sending its next request"

# 6. bad usage
"$bin" --url ftp://x/v1 --model m >/dev/null 2>&1; [ $? = 2 ] || bad "non-http URL should exit 2"
"$bin" --url "$url" >/dev/null 2>&1; [ $? = 2 ] || bad "missing --model should exit 2"
"$bin" --url "$url" --model m --concurrency 0 >/dev/null 2>&1; [ $? = 2 ] || bad "--concurrency 0 should exit 2"

# 7. the real daemon on a tiny synthetic model, once this build has `rlxd serve` and rlxd-synth
dir=$(dirname "$bin")
if [ -x "$dir/rlxd" ] && [ -x "$dir/rlxd-synth" ] && "$dir/rlxd" serve --help >/dev/null 2>&1 \
   && "$dir/rlxd-synth" --arch llama --preset tiny --type q8_0 --seed 1 -o "$tmp/tiny.gguf" >/dev/null 2>&1; then
  env -i PATH="$PATH" "$dir/rlxd" serve -m "$tmp/tiny.gguf:tiny" --host 127.0.0.1 --port 0 \
    2> "$tmp/daemon.log" &
  d_pid=$!
  for _ in $(seq 150); do
    grep -q "listening on http://" "$tmp/daemon.log" && break
    kill -0 "$d_pid" 2>/dev/null || break
    sleep 0.2
  done
  dport=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$tmp/daemon.log" | head -1 | grep -o '[0-9]*$')
  if [ -z "$dport" ]; then
    bad "rlxd serve did not start: $(tail -5 "$tmp/daemon.log")"
  else
    timeout 120 "$bin" --url "http://127.0.0.1:$dport/v1" --model tiny --concurrency 2 --requests 4 \
      --prompt-tokens 16 --max-tokens 4 --json --timeout 90 > "$tmp/r7.json" || bad "run against rlxd exited $?"
    check "$tmp/r7.json" "j['ok']==4 and j['errors']==0 and 0<j['output_tokens']<=16" \
      "against rlxd serve"
  fi
  kill "$d_pid" 2>/dev/null
  wait "$d_pid" 2>/dev/null
  d_pid=""
else
  echo "test_loadgen: rlxd serve or rlxd-synth not available in this build: real-daemon run skipped"
fi

[ $fail = 0 ] && echo "test_loadgen: ok"
exit $fail
