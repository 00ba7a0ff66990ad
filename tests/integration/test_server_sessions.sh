#!/usr/bin/env bash
# Sessions over HTTP: a second turn prefills only its new tokens; the session survives a
# daemon restart through --db (the second turn after restart reports cached tokens from the
# KV snapshot); X-Session-Id; GET/DELETE /v1/sessions; the prefix cache shows in /metrics.
. "$(dirname "$0")/server_lib.sh"
DB="$TMP/sessions.db"
start_server s1 --db "$DB"

prompt="Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends"
r=$(post /v1/generate "{\"prompt\":\"$prompt\",\"max_tokens\":16,\"temperature\":0,\"session_id\":\"story-1\"}")
[ "$(status)" = 200 ] || fail "turn 1: $(status) $r"
p1=$(echo "$r" | jget '.usage.prompt_tokens'); c1=$(echo "$r" | jget '.usage.completion_tokens')
r=$(post /v1/generate '{"prompt":" One day","max_tokens":8,"temperature":0,"session_id":"story-1"}')
[ "$(status)" = 200 ] || fail "turn 2: $(status) $r"
p2=$(echo "$r" | jget '.usage.prompt_tokens'); cached=$(echo "$r" | jget '.usage.prompt_tokens_details.cached_tokens')
[ "$p2" -gt $((p1 + c1)) ] || fail "turn 2 prompt ($p2) should hold the history ($p1 + $c1) and the new text"
[ "$cached" -ge 16 ] || fail "turn 2 cached only $cached tokens"
ok "second turn reuses the history ($cached of $p2 prompt tokens cached)"

# header form, and the list / get / delete routes
post /v1/generate '{"prompt":"The dog","max_tokens":4,"temperature":0}' -H 'X-Session-Id: dog-2' >/dev/null
[ "$(status)" = 200 ] || fail "X-Session-Id turn: $(status)"
l=$(curl -s "$URL/v1/sessions")
[ "$(echo "$l" | jget '.total')" = 2 ] || fail "GET /v1/sessions: $l"
g=$(curl -s "$URL/v1/sessions/dog-2")
[ "$(echo "$g" | jget '.id')" = dog-2 ] || fail "GET /v1/sessions/dog-2: $g"
ok "list and get sessions"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$URL/v1/sessions/dog-2")" = 200 ] || fail "DELETE"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/sessions/dog-2")" = 404 ] || fail "deleted session still there"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/sessions/bad%20id")" = 400 ] || fail "bad id accepted"
post /v1/completions '{"prompt":["a","b"],"max_tokens":2,"session_id":"x"}' >/dev/null
[ "$(status)" = 400 ] || fail "session with two prompts should be a 400"
# the header under the body field's rules: n = 2 or two prompts a 400 (the choices raced for the
# session: a random 503 "busy"), a bad id named as session_id, and a header naming another
# session than the body's a 400 (the body won silently)
for body in '{"prompt":["a","b"],"max_tokens":2}' '{"prompt":"a","n":2,"max_tokens":2}'; do
    r=$(post /v1/completions "$body" -H 'X-Session-Id: hx')
    [ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = session_id ] || fail "X-Session-Id with $body: $(status) $r"
done
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"n":2,"max_tokens":2}' -H 'X-Session-Id: hx')
[ "$(status)" = 400 ] || fail "X-Session-Id with chat n=2: $(status) $r"
r=$(post /v1/generate '{"prompt":"a","max_tokens":2}' -H 'X-Session-Id: bad id')
[ "$(status)" = 400 ] && [ "$(echo "$r" | jget '.error.param')" = session_id ] || fail "a bad X-Session-Id: $(status) $r"
r=$(post /v1/generate '{"prompt":"a","max_tokens":2,"session_id":"one"}' -H 'X-Session-Id: two')
[ "$(status)" = 400 ] || fail "header and body naming two sessions: $(status) $r"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/sessions/hx")" = 404 ] || fail "a refused request left session hx"
ok "delete, bad ids and misuse are clear errors"
curl -s "$URL/metrics" | grep -q '^rlxd_prefix_cache_hits_total' || fail "prefix cache metrics missing"
stop_server

# restart: the session and its KV snapshot come back
start_server s2 --db "$DB"
r=$(post /v1/generate '{"prompt":" The sun","max_tokens":4,"temperature":0,"session_id":"story-1"}')
[ "$(status)" = 200 ] || fail "turn after restart: $(status) $r"
cached=$(echo "$r" | jget '.usage.prompt_tokens_details.cached_tokens')
[ "$cached" -ge 16 ] || fail "after restart only $cached tokens were cached"
ok "session survives a restart ($cached tokens from the snapshot)"
# a second daemon on the same database is refused at start (two forked every session: each
# continued from its own memory and overwrote the other's turns)
out=$(timeout 30 "$BIN" serve -m "$MODEL" --host 127.0.0.1 --port 0 --db "$DB" 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "is in use by another rlxd" || fail "a second daemon on one --db: rc $rc: $out"
stop_server
ok "one daemon per --db"
echo "6 passed, 0 failed"
