#!/usr/bin/env bash
# kill -9 of the daemon in the middle of a burst of session writes from concurrent clients,
# then a restart on the same --db: the database opens and passes integrity_check, and every
# session whose turn got a response holds that turn (its history is at least as long and ends
# with the turn's tokens, or with one more turn that was stored but not answered before the
# kill). Sessions rotate every few turns so none outgrows the context. Run twice with kills at
# random moments.
. "$(dirname "$0")/server_lib.sh"
command -v python3 >/dev/null || { echo "skip: python3 (sqlite3 module) not installed"; exit 77; }
CLIENTS=6

client() { # client N: turns until a request fails (the daemon died)
    local i=$1 k=0 code
    while :; do
        local sid="c$i-$((k / 8))"
        code=$(curl -s -o "$TMP/r$i.json" -w '%{http_code}' "$URL/v1/generate" \
            -d "{\"prompt\":\" go $k\",\"max_tokens\":3,\"ignore_eos\":true,\"temperature\":0,\"session_id\":\"$sid\"}")
        [ "$code" = 200 ] || break
        { printf '%s\t' "$sid"; cat "$TMP/r$i.json"; echo; } >>"$TMP/acked$i.tsv"
        k=$((k + 1))
    done
}

for round in 1 2; do
    DB="$TMP/crash$round.db"
    rm -f "$TMP"/acked*.tsv
    start_server crash$round --db "$DB"
    cpids=()
    for i in $(seq 1 $CLIENTS); do client "$i" & cpids+=($!); done
    sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.8 + r / 32767 * 1.2 }')"
    kill -9 "$PID"
    wait "${cpids[@]}" 2>/dev/null
    acked=$(cat "$TMP"/acked*.tsv 2>/dev/null | wc -l)
    [ "$acked" -gt 0 ] || fail "round $round: no turn was answered before the kill"
    ic=$(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA integrity_check").fetchone()[0])' "$DB")
    [ "$ic" = ok ] || fail "round $round: integrity_check says $ic"
    start_server again$round --db "$DB"
    # the last answered turn of every session, and what the restarted daemon holds for it
    cat "$TMP"/acked*.tsv | node -e '
        let s = ""; process.stdin.on("data", d => s += d).on("end", () => {
            const last = {};
            for (const line of s.split("\n").filter(Boolean)) {
                const tab = line.indexOf("\t"), r = JSON.parse(line.slice(tab + 1));
                last[line.slice(0, tab)] = {n: r.usage.prompt_tokens + r.usage.completion_tokens, ids: r.token_ids};
            }
            console.log(JSON.stringify(last));
        });' >"$TMP/last.json"
    for sid in $(node -e 'console.log(Object.keys(require(process.argv[1])).join(" "))' "$TMP/last.json"); do
        curl -s "$URL/v1/sessions/$sid" >"$TMP/got.json"
        node -e '
            const last = require(process.argv[1])[process.argv[2]], got = JSON.parse(require("fs").readFileSync(process.argv[3], "utf8"));
            if (!got.tokens) throw new Error(process.argv[2] + " lost: " + JSON.stringify(got));
            const t = got.tokens, n = last.n, ids = last.ids;
            const ends = (k) => ids.every((x, j) => t[k - ids.length + j] === x);
            // the answered turn, or one more turn (3 tokens generated, a short prompt) stored after it
            if (t.length === n ? !ends(n) : !(t.length > n && t.length <= n + 12 && ends(n)))
                throw new Error(process.argv[2] + ": history of " + t.length + " tokens does not hold the answered turn (" + n + ")");
        ' "$TMP/last.json" "$sid" "$TMP/got.json" || fail "round $round: session $sid"
    done
    r=$(post /v1/generate '{"prompt":" again","max_tokens":2,"temperature":0,"session_id":"c1-0"}')
    [ "$(status)" = 200 ] || fail "round $round: a turn after the restart: $(status) $r"
    ok "round $round: kill -9 after $acked answered turns; the db is intact and every answered session holds its turn"
    stop_server
done
echo "2 passed, 0 failed"
