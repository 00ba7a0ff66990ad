#!/usr/bin/env bash
# test_server_stdio.sh - `rlxd serve --stdio`: JSON lines in, one result line per request out,
# in input order with the ids echoed, errors as {"id":..,"error":{...}}, exit 0 at EOF after
# finishing the work in flight. Also with stdin/stdout as regular files.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v node >/dev/null || { echo "skip: node missing"; exit 77; }

cat >"$TMP/in.jsonl" <<'JSONL'
{"id":1,"prompt":"Once upon a time","max_tokens":5,"temperature":0}
{"id":"b","endpoint":"chat","messages":[{"role":"user","content":"Hi"}],"max_tokens":3}

not json
{"id":4,"endpoint":"completions","prompt":"The cat","max_tokens":2,"n":2}
{"id":5,"prompt":"x","top_p":7}
{"id":6,"endpoint":"nope","prompt":"x"}
{"id":7,"input_ids":[1,400,500],"max_tokens":2}
JSONL
check() {
    node -e '
const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n");
if (lines.pop() !== "") throw new Error("output does not end with a newline");
const o = lines.map(l => JSON.parse(l));
const die = m => { console.error(m + "\n" + lines.join("\n")); process.exit(1); };
if (o.length !== 7) die("expected 7 result lines, got " + o.length);
const ids = o.map(x => x.id);
if (JSON.stringify(ids) !== JSON.stringify([1, "b", null, 4, 5, 6, 7])) die("ids/order " + JSON.stringify(ids));
if (!Array.isArray(o[0].token_ids) || o[0].usage.completion_tokens < 1) die("generate result");
if (o[1].object !== "chat.completion") die("chat result");
if (!o[2].error) die("bad JSON line must give an error");
if (o[3].object !== "text_completion" || o[3].choices.length !== 2) die("completions result");
if (!o[4].error || o[4].error.param !== "top_p") die("top_p error");
if (!o[5].error || o[5].error.param !== "endpoint") die("endpoint error");
if (!Array.isArray(o[6].token_ids)) die("input_ids result");
' "$1"
}

"$BIN" serve -m "$MODEL:tiny" --stdio <"$TMP/in.jsonl" 2>"$TMP/err1" | cat >"$TMP/out1.jsonl"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || fail "exit $rc: $(tail -3 "$TMP/err1")"
check "$TMP/out1.jsonl" || fail "pipe output"
[ "$(grep -c ' LINE stdio:' "$TMP/err1")" = 7 ] || fail "one access-log line per request: $(cat "$TMP/err1")"
ok stdio through pipes

cat "$TMP/in.jsonl" | "$BIN" serve -m "$MODEL:tiny" --stdio >"$TMP/out2.jsonl" 2>"$TMP/err2"
rc=$?
[ "$rc" = 0 ] || fail "exit $rc with stdout to a file"
check "$TMP/out2.jsonl" || fail "file output"
"$BIN" serve -m "$MODEL:tiny" --stdio <"$TMP/in.jsonl" >"$TMP/out3.jsonl" 2>"$TMP/err3" || fail "files both ways"
check "$TMP/out3.jsonl" || fail "file input"
ok stdio through files

# empty input: exits 0 once the model is loaded, prints nothing
"$BIN" serve -m "$MODEL:tiny" --stdio </dev/null >"$TMP/out4" 2>/dev/null || fail "empty stdin exit"
[ ! -s "$TMP/out4" ] || fail "output for empty stdin"
ok stdio empty input
echo "all passed"
