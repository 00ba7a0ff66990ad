#!/usr/bin/env bash
# test_server_stdio_id.sh - `rlxd serve --stdio` refuses an id longer than 256 bytes of JSON
# (it would be repeated on every token line: a 3 MB id made hundreds of MB of output) with an
# error line whose id is null and whose message says why; an id at the limit still works.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }

python3 - >"$TMP/in.jsonl" <<'PY'
import json
print(json.dumps({"id": "a" * 254, "prompt": "Once", "max_tokens": 3, "stream": True}))   # 256 bytes of JSON
print(json.dumps({"id": "b" * 255, "prompt": "Once", "max_tokens": 3, "stream": True}))   # 257
print(json.dumps({"id": "c" * 3000000, "prompt": "Once", "max_tokens": 50, "stream": True, "ignore_eos": True}))
print(json.dumps({"id": ["x" * 300], "prompt": "Once", "max_tokens": 3}))
PY
timeout 120 "$BIN" serve -m "$MODEL:tiny" --stdio <"$TMP/in.jsonl" >"$TMP/out" 2>"$TMP/err" || fail "rlxd --stdio exited $?: $(tail -3 "$TMP/err")"
size=$(stat -c %s "$TMP/out")
[ "$size" -lt 20000 ] || fail "output is $size bytes: a long id was repeated"
python3 - "$TMP/out" <<'PY' || fail "stdio output: $(head -c 2000 "$TMP/out")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ok = [l for l in lines if l.get("id") == "a" * 254]
assert ok and ok[-1].get("ok") is True, "the 256-byte id did not get its result"
assert len(ok) >= 2, "the 256-byte id got no token lines"
errs = [l for l in lines if l.get("ok") is False]
assert len(errs) == 3, f"expected 3 error lines, got {len(errs)}"
for e in errs:
    assert e["id"] is None, e
    assert e["error"]["param"] == "id" and "256" in e["error"]["message"], e
assert len(lines) == len(ok) + 3, "unexpected lines"
PY
ok stdio id limit

# numbers come back as sent (64-bit ids were printed as doubles: 18446744073709551615 came back
# 1.8446744073709552e+19, 9007199254740993 as 9.00719925474099e+15); NaN and Infinity, which
# JSON does not have, are refused (they ran, answered with id null, and two collided)
printf '%s\n' '{"id":18446744073709551615,"prompt":"x","max_tokens":1}' '{"id":[9007199254740993,{"a":1.50}],"prompt":"x","max_tokens":1}' \
    '{"id":-0.0,"prompt":"x","max_tokens":1}' '{"id":NaN,"prompt":"x","max_tokens":1}' '{"id":-Infinity,"prompt":"x","max_tokens":1}' |
    timeout 120 "$BIN" serve -m "$MODEL:tiny" --stdio >"$TMP/out2" 2>"$TMP/err2" || fail "rlxd --stdio exited $?: $(tail -3 "$TMP/err2")"
for id in 18446744073709551615 '\[9007199254740993,{"a":1.50}\]' -0.0; do
    grep -q "^{\"id\":$id,\"ok\":true" "$TMP/out2" || fail "id $id not echoed as sent: $(cat "$TMP/out2")"
done
[ "$(grep -c '^{"id":null,"ok":false,.*NaN or Infinity' "$TMP/out2")" = 2 ] || fail "NaN/Infinity ids: $(cat "$TMP/out2")"
ok "stdio ids echoed as sent; NaN and Infinity refused"
