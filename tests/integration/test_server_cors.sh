#!/usr/bin/env bash
# test_server_cors.sh - CORS for browser clients (--cors-origins): a preflight (OPTIONS with Origin
# and Access-Control-Request-Method) is answered 204 with the path's methods, the headers asked
# for and a max age, without the API key; an allowed Origin gets Access-Control-Allow-Origin on
# plain and streamed answers and on errors; an Origin not listed gets no allow header (403 on a
# preflight) and Vary: Origin; "*" allows any; without the option OPTIONS stays a 405 and no
# CORS header is sent; a malformed list is refused at start.
. "$(dirname "$0")/server_lib.sh"

hdr() { # hdr FILE NAME: the value of header NAME (case-insensitive) in a curl -D dump
    tr -d '\r' <"$1" | awk -v n="$(echo "$2" | tr 'A-Z' 'a-z')" -F': ' 'tolower($1) == n { print substr($0, length($1) + 3) }'
}
code() { head -1 "$1" | awk '{print $2}'; }
preflight() { # preflight ORIGIN PATH: headers in $TMP/h
    curl -s -o "$TMP/b" -D "$TMP/h" -X OPTIONS -H "Origin: $1" -H 'Access-Control-Request-Method: POST' \
        -H 'Access-Control-Request-Headers: authorization, content-type' "$URL$2"
}

start_server cors --cors-origins 'http://localhost:3000, https://app.example' --api-key k1
preflight http://localhost:3000 /v1/chat/completions
[ "$(code "$TMP/h")" = 204 ] || fail "preflight: $(head -1 "$TMP/h")"
[ "$(hdr "$TMP/h" Access-Control-Allow-Origin)" = "http://localhost:3000" ] || fail "preflight allow-origin: $(cat "$TMP/h")"
hdr "$TMP/h" Access-Control-Allow-Methods | grep -q 'POST' || fail "preflight methods: $(cat "$TMP/h")"
hdr "$TMP/h" Access-Control-Allow-Methods | grep -q 'OPTIONS' || fail "preflight methods lack OPTIONS"
[ "$(hdr "$TMP/h" Access-Control-Allow-Headers)" = "authorization, content-type" ] || fail "preflight headers: $(cat "$TMP/h")"
[ -n "$(hdr "$TMP/h" Access-Control-Max-Age)" ] || fail "no max age"
[ "$(hdr "$TMP/h" Vary)" = Origin ] || fail "no Vary: Origin"
ok "preflight from an allowed origin: 204 without the API key"
preflight https://app.example /v1/sessions/abc
hdr "$TMP/h" Access-Control-Allow-Methods | grep -q 'DELETE' || fail "sessions preflight methods: $(cat "$TMP/h")"
preflight http://evil.example /v1/chat/completions
[ "$(code "$TMP/h")" = 403 ] || fail "preflight from another origin: $(head -1 "$TMP/h")"
[ -z "$(hdr "$TMP/h" Access-Control-Allow-Origin)" ] || fail "another origin was allowed"
grep -q 'evil.example' "$TMP/b" || fail "403 body: $(cat "$TMP/b")"
preflight http://localhost:3000 /nowhere
[ "$(code "$TMP/h")" = 404 ] || fail "preflight on an unknown path: $(head -1 "$TMP/h")"
ok "other origins refused, unknown paths 404"

# the answers themselves: plain, streamed, an error
curl -s -o "$TMP/b" -D "$TMP/h" -H 'Origin: https://app.example' -H 'Authorization: Bearer k1' \
    -H 'Content-Type: application/json' -d '{"prompt":"Once","max_tokens":3}' "$URL/v1/completions"
[ "$(code "$TMP/h")" = 200 ] || fail "completion: $(head -1 "$TMP/h")"
[ "$(hdr "$TMP/h" Access-Control-Allow-Origin)" = "https://app.example" ] || fail "completion allow-origin: $(cat "$TMP/h")"
curl -s -N -o "$TMP/b" -D "$TMP/h" -H 'Origin: https://app.example' -H 'Authorization: Bearer k1' \
    -H 'Content-Type: application/json' -d '{"prompt":"Once","max_tokens":3,"stream":true}' "$URL/v1/completions"
[ "$(hdr "$TMP/h" Access-Control-Allow-Origin)" = "https://app.example" ] || fail "stream allow-origin: $(cat "$TMP/h")"
grep -q 'data: \[DONE\]' "$TMP/b" || fail "stream body: $(cat "$TMP/b")"
curl -s -o "$TMP/b" -D "$TMP/h" -H 'Origin: http://localhost:3000' "$URL/v1/models"
[ "$(code "$TMP/h")" = 401 ] || fail "no key: $(head -1 "$TMP/h")"
[ "$(hdr "$TMP/h" Access-Control-Allow-Origin)" = "http://localhost:3000" ] || fail "401 allow-origin (a browser must read the error)"
curl -s -o "$TMP/b" -D "$TMP/h" -H 'Origin: http://evil.example' -H 'Authorization: Bearer k1' "$URL/v1/models"
[ "$(code "$TMP/h")" = 200 ] && [ -z "$(hdr "$TMP/h" Access-Control-Allow-Origin)" ] || fail "another origin's GET: $(cat "$TMP/h")"
curl -s -o "$TMP/b" -D "$TMP/h" -H 'Authorization: Bearer k1' "$URL/v1/models"
[ -z "$(hdr "$TMP/h" Access-Control-Allow-Origin)" ] || fail "allow-origin without an Origin"
ok "allowed origin on plain, streamed and error answers; none for others"
stop_server

# answers given before routing (a body over --max-body announced by Content-Length: 413) carry
# the headers too, so a browser sees their status (before: an opaque CORS failure)
start_server early --cors-origins http://localhost:3000 --max-body 1024
curl -s -o /dev/null -D "$TMP/h" -H 'Origin: http://localhost:3000' -H 'Content-Type: application/json' \
    --data-binary "{\"prompt\":\"$(head -c 3000 /dev/zero | tr '\0' a)\"}" "$URL/v1/completions"
[ "$(code "$TMP/h")" = 413 ] || fail "early 413: $(head -1 "$TMP/h")"
[ "$(hdr "$TMP/h" Access-Control-Allow-Origin)" = http://localhost:3000 ] || fail "413 without the CORS header: $(cat "$TMP/h")"
ok "an early 413 carries the CORS headers"
stop_server

start_server star --cors-origins '*'
preflight http://anything.example:8443 /v1/embeddings
[ "$(code "$TMP/h")" = 204 ] && [ "$(hdr "$TMP/h" Access-Control-Allow-Origin)" = '*' ] || fail "'*' preflight: $(cat "$TMP/h")"
[ -z "$(hdr "$TMP/h" Vary)" ] || fail "'*' needs no Vary"
ok "'*' allows any origin"
stop_server

start_server off
preflight http://localhost:3000 /v1/chat/completions
[ "$(code "$TMP/h")" = 405 ] || fail "without --cors-origins OPTIONS should be 405: $(head -1 "$TMP/h")"
[ -z "$(hdr "$TMP/h" Access-Control-Allow-Origin)" ] || fail "CORS header without --cors-origins"
curl -s -o /dev/null -D "$TMP/h" -H 'Origin: http://localhost:3000' "$URL/v1/models"
[ -z "$(hdr "$TMP/h" Access-Control-Allow-Origin)" ] || fail "CORS header without --cors-origins"
ok "off by default"
stop_server

for bad in 'localhost:3000' 'http://a.example/path' ' , ' 'http://*.example'; do
    out=$("$BIN" serve -m "$MODEL" --cors-origins "$bad" 2>&1) && fail "--cors-origins '$bad' accepted"
    echo "$out" | grep -q "cors-origins" || fail "--cors-origins '$bad': $out"
done
out=$(RLXD_CORS_ORIGINS='nope' "$BIN" serve -m "$MODEL" 2>&1) && fail "RLXD_CORS_ORIGINS=nope accepted"
echo "$out" | grep -q "RLXD_CORS_ORIGINS" || fail "RLXD_CORS_ORIGINS=nope: $out"
ok "malformed lists refused at start"
echo "test_server_cors: ok"
