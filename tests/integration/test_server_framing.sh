#!/usr/bin/env bash
# test_server_framing.sh - HTTP framing errors over raw sockets. Headers over the server's
# 32 KiB limit get a JSON 431 like every other API error. The errors libmicrohttpd 0.9.75
# detects itself (a negative Content-Length, headers beyond its 64 KiB pool)
# it answers with its own HTML page, which no option of that version replaces (README, "HTTP
# errors libmicrohttpd answers itself"): those keep the documented status, close the
# connection, and are now written to the access log and counted like other requests.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }

start_server framing
python3 - "$PORT" <<'PY' || fail "framing (see above)"
import json, socket, sys
port = int(sys.argv[1])

def raw(data):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(data)
    except OSError:
        pass
    resp = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            resp += b
    except OSError:
        pass
    s.close()
    head, _, body = resp.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head.decode("latin1").lower(), body

body = b'{"prompt":"Once","max_tokens":1}'
# headers over 32 KiB: the server's own JSON 431
st, head, b = raw(b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 +
                  b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
assert st == 431, (st, b)
assert "application/json" in head, head
e = json.loads(b)["error"]
assert "headers" in e["message"] and e["type"] == "invalid_request_error", e
print("ok   431 JSON for headers over 32 KiB")
# many small headers within 32 KiB are served (2,000 of them filled libmicrohttpd's 64 KiB pool
# with its records and got its HTML 431 at about 9 KB of text)
st, head, b = raw(b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(2000)) + b"Connection: close\r\n\r\n")
assert st == 200, (st, b)
print("ok   2,000 small headers served")

# libmicrohttpd's own answers: status as documented, connection closed
cases = [
    (b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400, "negative Content-Length"),
    (b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 300000 + b"\r\n\r\n", 431, "headers beyond MHD's pool"),
]
for data, want, what in cases:
    st, head, b = raw(data)
    assert st == want, (what, st, b)
    assert "connection: close" in head, (what, head)
    print(f"ok   {what}: {st} from libmicrohttpd")

# framing two readers could take differently (request smuggling, RFC 9112 6.3): a JSON 400 and
# the connection closed, the bytes after the headers never read as a request of their own
smuggle = [
    (b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 35\r\n\r\n"
     b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 400, "two Content-Lengths"),
    (b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 39\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
     b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400, "Content-Length and Transfer-Encoding"),
    (b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\nContent-Length: 5\r\n\r\nhello", 400,
     "a space before the colon"),
    (b"GET /health HTTP/1.1\r\n\r\n", 400, "HTTP/1.1 without Host"),
    (b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "two Hosts"),
    # libmicrohttpd 0.9 spun forever on a chunk-size line past its buffer, holding the whole
    # loop: chunked request bodies are refused before they are read (411)
    (b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;" + b"a" * 70000 +
     b"\r\nx\r\n0\r\n\r\n", 411, "a 70 KB chunk line"),
    (b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 411, "chunked"),
    # a compressed body read as JSON that does not parse; 415 says why
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\n\x1f\x8b\x08", 415,
     "Content-Encoding gzip"),
]
for data, want, what in smuggle:
    st, head, b = raw(data)
    assert st == want, (what, st, b)
    assert "connection: close" in head, (what, head)
    assert b"\r\n\r\n" not in b, (what, "a second response", b)
    json.loads(b)["error"]
    print(f"ok   {what}: JSON {st}, closed")
st, head, b = raw(b"POST /v1/sessions/abc HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
assert st == 405 and "allow: get, delete" in head, (st, head)
print("ok   405 lists every method of the path")
PY
sleep 0.3
for want in 'POST /v1/generate 431 ' '/v1/generate 400 .*' ; do
    grep -q "$want" "$LOG" || fail "not logged: $want"
done
[ "$(grep -c ' /v1/generate 400 ' "$LOG")" = 3 ] || fail "the three 400s are not all logged: $(grep generate "$LOG")"
[ "$(grep -c ' /v1/generate 431 ' "$LOG")" = 2 ] || fail "the two 431s are not both logged: $(grep generate "$LOG")"
m=$(curl -s -m 5 "$URL/metrics")
echo "$m" | grep -q 'rlxd_requests_total{endpoint="generate",status="400"} 3' || fail "400s not counted: $(echo "$m" | grep requests_total)"
ok framing errors logged and counted
stop_server
