#!/usr/bin/env bash
# test_server_slowloris.sh - clients that trickle their request (one header line a second, the
# slowloris attack) neither lock other clients out nor stay connected: with --max-connections 20
# and 100 such sockets, /health and a short generate still answer 200 at once, and every slow
# socket is closed within --request-timeout (a total bound from accept, however many bytes
# trickle in), the first ones with a JSON 408 (logged) or, when they were pushed out to make room
# for new clients, a JSON 503. A slow request body counts the same as slow headers.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }

TIMEOUT=3
start_server slow --max-connections 20 --request-timeout $TIMEOUT

python3 - "$PORT" "$TIMEOUT" <<'EOF' || fail "slow clients (see above)"
import json, select, socket, sys, time

port, bound = int(sys.argv[1]), float(sys.argv[2])
N = 100

def request(method, path, body=None, timeout=5):
    """One short request on a fresh connection: (status, body) or raises (timeout included)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    data = body.encode() if body else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(data)}\r\n\r\n"
    s.sendall(head.encode() + data)
    resp = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        resp += b
    s.close()
    status = int(resp.split(b" ", 2)[1])
    return status, resp.split(b"\r\n\r\n", 1)[1]

slow = []
t0 = time.monotonic()
for i in range(N):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if i % 4 == 3:  # a complete head, then a body that trickles
        s.sendall(b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
    else:           # a head that never ends
        s.sendall(b"POST /v1/generate HTTP/1.1\r\nHost: x\r\n")
    s.setblocking(False)
    slow.append({"sock": s, "t": time.monotonic(), "closed": None, "data": b"", "body": i % 4 == 3})
time.sleep(0.3)

# other clients are still served, and quickly
t = time.monotonic()
try:
    st, body = request("GET", "/health")
except Exception as e:
    sys.exit(f"FAIL: /health with {N} slow sockets open: {e!r}")
if st != 200:
    sys.exit(f"FAIL: /health answered {st} with {N} slow sockets open: {body!r}")
try:
    st, body = request("POST", "/v1/generate", '{"prompt":"Once upon","max_tokens":2}')
except Exception as e:
    sys.exit(f"FAIL: generate with {N} slow sockets open: {e!r}")
if st != 200:
    sys.exit(f"FAIL: generate answered {st} with {N} slow sockets open: {body!r}")
print(f"ok   /health and generate answered 200 in {time.monotonic() - t:.2f} s with {N} slow sockets open")

# trickle one line a second on every slow socket until the server closes it (capped)
deadline = time.monotonic() + bound + 6
while time.monotonic() < deadline and any(c["closed"] is None for c in slow):
    for c in slow:
        if c["closed"] is not None:
            continue
        while True:
            try:
                b = c["sock"].recv(65536)
            except BlockingIOError:
                break
            except OSError:
                b = b""
            if not b:
                c["closed"] = time.monotonic()
                break
            c["data"] += b
        if c["closed"] is None:
            try:
                c["sock"].send(b"x" if c["body"] else b"X-Trickle: 1\r\n")
            except OSError:
                c["closed"] = time.monotonic()
    time.sleep(1.0 if time.monotonic() - t0 > bound - 1 else 0.5)

open_left = sum(c["closed"] is None for c in slow)
if open_left:
    sys.exit(f"FAIL: {open_left} of {N} slow sockets still open {deadline - t0:.0f} s after accept "
             f"(--request-timeout {bound:g})")
late = max(c["closed"] - c["t"] for c in slow)
if late > bound + 2.5:
    sys.exit(f"FAIL: a slow socket was closed {late:.1f} s after accept (--request-timeout {bound:g})")
codes = {}
for c in slow:
    code = c["data"].split(b" ", 2)[1].decode() if c["data"].startswith(b"HTTP/1.1 ") else "-"
    codes[code] = codes.get(code, 0) + 1
    if code != "-":
        err = json.loads(c["data"].split(b"\r\n\r\n", 1)[1])["error"]
        if not err["message"] or "type" not in err:
            sys.exit(f"FAIL: error body {c['data']!r}")
if not codes.get("408"):
    sys.exit(f"FAIL: no slow socket got a 408: {codes}")
if set(codes) - {"408", "503", "-"}:
    sys.exit(f"FAIL: unexpected answers to slow sockets: {codes}")
print(f"ok   all {N} slow sockets closed within {late:.1f} s of accept; answers {codes}")
EOF

grep -q 'POST /v1/generate 408 ' "$LOG" || fail "no 408 line in the access log"
# each slow socket is logged once, with what it was answered: the server closed them, so none is
# a 499 (client closed) and none is logged twice
! grep ' /v1/generate 499 ' "$LOG" | head -3 | grep . || fail "slow sockets logged as closed by the client"
n=$(grep -cE ' /v1/generate (408|503) ' "$LOG")
[ "$n" = 100 ] || fail "$n access-log lines for 100 slow sockets"
m=$(curl -s -m 5 "$URL/metrics")
echo "$m" | grep -q '^rlxd_request_timeouts_total [1-9]' || fail "timeouts not metered: $(echo "$m" | grep timeouts)"
ok timeouts logged and metered
[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] || fail "/health after the slow clients"
stop_server
ok slowloris
