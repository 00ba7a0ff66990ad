#!/usr/bin/env bash
# test_server_log_escape.sh - what a client sends cannot forge or corrupt access-log lines: a
# path, model name or session id holding a newline, ESC, quotes or spaces is written with those
# bytes escaped (\n, \x1b, \", \x20) on its one text line, and the JSON log stays one valid JSON
# object per line that carries the original text.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v node >/dev/null || { echo "skip: node missing"; exit 77; }

# model: a forged second line plus an ANSI colour sequence; path: newline and ESC percent-encoded
model='evil\n2030-01-01T00:00:00Z GET /forged 200 model=x\u001b[31m\"q\" \\'
requests() {
    curl -s -m 10 -o /dev/null "$URL/v1/sessions/sid%0aforged%1b%5b31m%22q%22%20x" || fail "session request"
    curl -s -m 10 -o /dev/null -H 'Content-Type: application/json' \
        -d '{"model":"'"$model"'","prompt":"Once","max_tokens":1}' "$URL/v1/completions" || fail "model request"
    curl -s -m 10 -o /dev/null -H 'Content-Type: application/json' \
        -d '{"prompt":"Once","max_tokens":1,"model":"tiny\u001b"}' "$URL/v1/completions" || fail "header request"
}

start_server text
requests
sleep 0.3
stop_server
grep -q 'forged' "$LOG" || fail "the requests were not logged"
if grep -q $'\x1b' "$LOG"; then fail "a raw ESC byte reached the log: $(grep -a $'\x1b' "$LOG" | od -c | head)"; fi
grep -q '^2030-01-01T00:00:00Z GET /forged' "$LOG" && fail "a forged line: $(grep -n forged "$LOG")"
[ "$(grep -c 'forged' "$LOG")" = 2 ] || fail "expected 2 lines naming 'forged': $(grep -n forged "$LOG")"
grep -qF 'GET /v1/sessions/sid\nforged\x1b[31m\"q\"\x20x 4' "$LOG" ||
    fail "session path not escaped: $(grep -a sessions "$LOG")"
grep -qF 'POST /v1/completions 404 model=evil\n2030-01-01T00:00:00Z\x20GET\x20/forged\x20200\x20model=x\x1b[31m\"q\"\x20\\ ' "$LOG" ||
    fail "model not escaped: $(grep -a 'model=evil' "$LOG")"
grep -qF 'model=tiny\x1b ' "$LOG" || fail "ESC in a model name: $(grep -a 'model=tiny' "$LOG")"
ok text log escaped

start_server json --log-format json
requests
sleep 0.3
stop_server
node -e '
let lines = 0;
const seen = {path: false, model: false};
for (const l of require("fs").readFileSync(process.argv[1], "utf8").split("\n")) {
  if (!l.startsWith("{")) { if (l.includes("forged")) throw new Error("forged text outside a JSON line: " + l); continue; }
  const o = JSON.parse(l);
  lines++;
  if (o.path === "/v1/sessions/sid\nforged\u001b[31m\"q\" x") seen.path = true;
  if (o.model === "evil\n2030-01-01T00:00:00Z GET /forged 200 model=x\u001b[31m\"q\" \\") seen.model = true;
}
if (!seen.path || !seen.model) throw new Error("original text not in the JSON log: " + JSON.stringify(seen));
if (lines < 3) throw new Error("expected 3 JSON lines");
' "$LOG" || fail "JSON log: $(cat "$LOG")"
ok json log valid

# a --models-dir file whose name holds a newline, braces and quotes: /metrics stays valid
# Prometheus text with no series the name made up, and the daemon's log lines stay whole
D="$TMP/mdir"; mkdir -p "$D"
ln -s "$MODEL" "$D/we\"ird sp.gguf"
ln -s "$MODEL" "$D/nl
x} 1
fake_metric{a=\"b.gguf"
start_rlxd mdir --models-dir "$D" --cache-dir none
for _ in $(seq 1 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] && break; sleep 0.1; done
post /v1/completions '{"model":"we\"ird sp","prompt":"Once","max_tokens":2}' >/dev/null
[ "$(cat "$TMP/status")" = 200 ] || fail "model with a quote: $(cat "$TMP/status") $(cat "$TMP/body")"
post /v1/completions '{"model":"nl\nx} 1\nfake_metric{a=\"b","prompt":"Once","max_tokens":2}' >/dev/null
[ "$(cat "$TMP/status")" = 200 ] || fail "model with a newline: $(cat "$TMP/status") $(cat "$TMP/body")"
curl -s -m 10 "$URL/metrics" >"$TMP/metrics" || fail "metrics"
stop_server
python3 - "$TMP/metrics" <<'PY' || fail "metrics exposition: $(grep -a -n -E 'ird|fake|^x' "$TMP/metrics" | head)"
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
line = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{' + label + r'(?:,' + label + r')*\})? \S+$')
bad = [l for l in text.split("\n") if l and not l.startswith("#") and not line.match(l)]
assert not bad, bad[:5]
assert not re.search(r'^(fake_metric|x\})', text, re.M), "a series made up by a model name"
assert 'model_name="nl\\nx} 1\\nfake_metric{a=\\"b"' in text, "the escaped name is missing"
assert 'model_name="we\\"ird sp"' in text
PY
grep -qa '^x} 1' "$LOG" && fail "a model name broke a log line: $(grep -a -n -B1 '^x}' "$LOG")"
grep -qaF "model 'nl\nx}\x201\nfake_metric{a=\\\"b' ready (" "$LOG" || fail "escaped name not in the log: $(grep -a ready "$LOG")"
ok model names escaped in /metrics and the log

