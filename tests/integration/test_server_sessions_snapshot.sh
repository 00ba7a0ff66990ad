#!/usr/bin/env bash
# test_server_sessions_snapshot.sh - KV snapshot files carry a checksum: a byte damaged on disk
# between turns (daemon stopped, file edited, daemon restarted) is caught when the snapshot is
# read; the log names the mismatch, the turn recomputes the history from the session's tokens,
# and its greedy output equals that of the same turn restored from an intact snapshot. A file
# of the previous format version is treated as absent.
. "$(dirname "$0")/server_lib.sh"
prompt="Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends and her dog"
turn2='{"prompt":" One day","max_tokens":24,"temperature":0,"session_id":"snap"}'
first_turn() { # DB: turn 1, then the daemon stops (the snapshot is on disk)
    start_server "first-$(basename "$1")" --db "$1"
    r=$(post /v1/generate "{\"prompt\":\"$prompt\",\"max_tokens\":24,\"temperature\":0,\"session_id\":\"snap\"}")
    [ "$(status)" = 200 ] || fail "turn 1: $(status) $r"
    stop_server
    [ -s "$1.kv/tiny/snap.kv" ] || fail "no snapshot in $1.kv/tiny"
}

# the reference: the same two turns, the second restored from an intact snapshot
first_turn "$TMP/b.db"
start_server intact --db "$TMP/b.db"
r=$(post /v1/generate "$turn2")
[ "$(status)" = 200 ] || fail "turn 2 (intact): $(status) $r"
want=$(echo "$r" | jget '.token_ids')
cached=$(echo "$r" | jget '.usage.prompt_tokens_details.cached_tokens')
[ "$cached" -ge 16 ] || fail "the intact snapshot was not used ($cached cached tokens)"
grep -q checksum "$LOG" && fail "intact snapshot reported damaged"
stop_server

first_turn "$TMP/a.db"
snap="$TMP/a.db.kv/tiny/snap.kv"
# damage two bytes in the middle of the K/V data (f16 0xffff is a NaN)
size=$(stat -c %s "$snap")
off=$(( size / 2 / 2 * 2 ))
printf '\377\377' | dd of="$snap" bs=1 seek="$off" conv=notrunc status=none || fail "dd"
start_server damaged --db "$TMP/a.db"
r=$(post /v1/generate "$turn2")
[ "$(status)" = 200 ] || fail "turn 2 (damaged): $(status) $r"
got=$(echo "$r" | jget '.token_ids')
grep -q "snap.kv fails its checksum" "$LOG" || fail "the log does not name the mismatch: $r $(tail -5 "$LOG")"
[ "$got" = "$want" ] || fail "turn 2 after damage: $got, intact: $want"
[ "$(echo "$r" | jget '.usage.prompt_tokens_details.cached_tokens')" = 0 ] || fail "damaged KV was used: $r"
ok "a damaged snapshot is detected, logged and recomputed (same output as intact, $cached tokens cached there)"

# the turn stored a fresh snapshot: the next restart restores it again
stop_server
start_server again --db "$TMP/a.db"
r=$(post /v1/generate '{"prompt":" The end","max_tokens":4,"temperature":0,"session_id":"snap"}')
[ "$(echo "$r" | jget '.usage.prompt_tokens_details.cached_tokens')" -ge 16 ] || fail "the rewritten snapshot was not used: $r"
grep -q checksum "$LOG" && fail "the rewritten snapshot reported damaged"
ok "the recomputed turn wrote a valid snapshot"
stop_server

# a file of the previous format (magic RLXKV2, no checksum) is stale: recomputed, not read
printf '2' | dd of="$snap" bs=1 seek=5 conv=notrunc status=none || fail "dd"
start_server old --db "$TMP/a.db"
r=$(post /v1/generate '{"prompt":" Then","max_tokens":4,"temperature":0,"session_id":"snap"}')
[ "$(status)" = 200 ] || fail "turn over an old-format snapshot: $(status) $r"
[ "$(echo "$r" | jget '.usage.prompt_tokens_details.cached_tokens')" = 0 ] || fail "an old-format snapshot was read: $r"
ok "an old-format snapshot is treated as absent"
stop_server

# a snapshot cut short (in its header, then in its data) or of other bytes: logged as damaged (it
# was ignored without a word), recomputed
for cut in 20 4000 garbage; do
    if [ $cut = garbage ]; then head -c 5000 /dev/urandom >"$snap"; else truncate -s $cut "$snap"; fi
    start_server "cut$cut" --db "$TMP/a.db"
    r=$(post /v1/generate '{"prompt":" Again","max_tokens":4,"temperature":0,"session_id":"snap"}')
    [ "$(status)" = 200 ] && [ "$(echo "$r" | jget '.usage.prompt_tokens_details.cached_tokens')" = 0 ] || fail "snapshot $cut: $(status) $r"
    grep -Eq "snap.kv is (cut short|no snapshot) \(damaged\)" "$LOG" || fail "snapshot $cut not logged: $(grep -i snapshot "$LOG")"
    stop_server
done
ok "a snapshot cut short or of other bytes is logged and recomputed"
echo "4 passed, 0 failed"
