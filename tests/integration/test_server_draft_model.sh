#!/usr/bin/env bash
# test_server_draft_model.sh - `rlxd serve --draft-model`: stories260K drafted by its own Q8_0
# file gives, on /v1/completions, greedy and seeded-sampling texts identical to the same request
# with "speculative": false, /metrics counts the drafts it made and kept, --draft-p-min 0 keeps
# the text too, and --draft-model --draft-max 0 serves without it. A draft model with another vocabulary, or a path that is not
# a model, stops the start with a message naming it; a --models-dir model (another vocabulary)
# is served without it. The profile key draft-model sets it per model.
. "$(dirname "$0")/server_lib.sh"
DRAFT="$SHARED/models/stories260K-q8_0.gguf"
[ -f "$DRAFT" ] || { echo "skip: $DRAFT absent"; exit 77; }
SYNTH="${RLX_BIN:-build}/rlxd-synth"
[ -x "$SYNTH" ] || { echo "skip: $SYNTH not built"; exit 77; }

metric() { curl -s "$URL/metrics" | sed -n "s/^$1{model_name=\"tiny\"} \\([0-9.e+]*\\)/\\1/p"; }

greedy_drafts() { # WHAT: a greedy request to "tiny" is answered, and the model has drafted
    post /v1/completions '{"model":"tiny","prompt":"Once upon a time","max_tokens":60,"temperature":0}' >/dev/null
    [ "$(status)" = 200 ] || fail "$1: status $(status)"
    local n
    n=$(metric rlxd_spec_decode_draft_tokens_total)
    [ "${n%.*}" -gt 0 ] || fail "$1: no drafts ($n)"
}

compare() { # BODY: the text with drafts and with "speculative": false must be equal
    local a b
    a=$(post /v1/completions "$1" | jget '.choices[0].text')
    [ "$(status)" = 200 ] || fail "status $(status): $a"
    b=$(post /v1/completions "${1%\}},\"speculative\":false}" | jget '.choices[0].text')
    [ "$(status)" = 200 ] || fail "status $(status): $b"
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "drafted and plain texts differ for $1:
$a
---
$b"
}

start_server draft --draft-model "$DRAFT"
compare '{"model":"tiny","prompt":"Once upon a time","max_tokens":120,"temperature":0}'
compare '{"model":"tiny","prompt":"Lily and Ben","max_tokens":120,"temperature":0.9,"seed":7}'
drafted=$(metric rlxd_spec_decode_draft_tokens_total)
kept=$(metric rlxd_spec_decode_accepted_tokens_total)
[ -n "$drafted" ] && [ "${drafted%.*}" -gt 0 ] && [ "${kept%.*}" -gt 0 ] ||
    fail "metrics: drafted '$drafted', kept '$kept'"
ok "--draft-model: greedy and seeded texts identical to speculative:false ($drafted drafted, $kept kept)"
# per request: "speculative.p_min": 0 drafts however unsure (more drafts, the same text); out of
# range is a 400 naming it
compare '{"model":"tiny","prompt":"Once upon a time","max_tokens":120,"temperature":0,"speculative.p_min":0}'
more=$(metric rlxd_spec_decode_draft_tokens_total)
[ "$(( ${more%.*} - ${drafted%.*} ))" -gt 20 ] || fail "speculative.p_min 0 drafted $(( ${more%.*} - ${drafted%.*} ))"
out=$(post /v1/completions '{"model":"tiny","prompt":"x","speculative.p_min":2}')
[ "$(status)" = 400 ] && echo "$out" | grep -q 'speculative.p_min' || fail "speculative.p_min 2: $(status) $out"
ok "speculative.p_min per request: 0 drafts $(( ${more%.*} - ${drafted%.*} )) tokens on one request, the same text; 2 is a 400"
# a second request that begins as the first takes over its parked draft KV: the draft model
# computes far fewer positions for it
LONG="Once upon a time there was a little girl named Lily. She liked to play in the park with her friend Ben. One day they found a big red ball under a tree and they played with it all day long until the sun went down."
p0=$(metric rlxd_spec_decode_draft_model_positions_total)
post /v1/completions "{\"model\":\"tiny\",\"prompt\":\"$LONG\",\"max_tokens\":20,\"temperature\":0}" >/dev/null
p1=$(metric rlxd_spec_decode_draft_model_positions_total)
post /v1/completions "{\"model\":\"tiny\",\"prompt\":\"$LONG Then\",\"max_tokens\":20,\"temperature\":0}" >/dev/null
p2=$(metric rlxd_spec_decode_draft_model_positions_total)
first=$(( ${p1%.*} - ${p0%.*} )) second=$(( ${p2%.*} - ${p1%.*} ))
[ "$first" -gt 40 ] && [ "$(( second + 30 ))" -lt "$first" ] || fail "draft positions: first request $first, second $second"
ok "a request that begins as the last takes over its draft KV: the draft computed $first, then $second positions"
stop_server

# --draft-p-min 0: the draft goes on however unsure (more drafts), the text stays the same

start_server always --draft-model "$DRAFT" --draft-p-min 0
compare '{"model":"tiny","prompt":"Once upon a time","max_tokens":120,"temperature":0}'
always=$(metric rlxd_spec_decode_draft_tokens_total)
[ "${always%.*}" -gt 0 ] || fail "--draft-p-min 0 drafted nothing"
ok "--draft-p-min 0: the same text ($always drafted)"
stop_server

start_server off --draft-model "$DRAFT" --draft-max 0
post /v1/completions '{"model":"tiny","prompt":"Once upon a time","max_tokens":40,"temperature":0}' >/dev/null
[ "$(status)" = 200 ] || fail "status $(status) with --draft-max 0"
[ "$(metric rlxd_spec_decode_draft_tokens_total)" = 0 ] || fail "--draft-max 0 drafted"
ok "--draft-max 0: no drafts"
stop_server

# refusals at start: another vocabulary, not a model
"$SYNTH" --arch llama --preset tiny --seed 4 -o "$TMP/other.gguf" >/dev/null || fail "rlxd-synth failed"
for bad in "$TMP/other.gguf" "$TMP"; do
    "$BIN" serve --host 127.0.0.1 --port 0 -m "$MODEL:tiny" --draft-model "$bad" 2>"$TMP/bad.log" &
    p=$!
    PIDS+=("$p")
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && fail "rlxd started with --draft-model $bad"
    wait "$p" && fail "rlxd exited 0 with --draft-model $bad"
    grep -q "$bad" "$TMP/bad.log" || fail "the error does not name $bad: $(cat "$TMP/bad.log")"
done
ok "a draft model with another vocabulary, or a folder, stops the start naming it"

# --draft-model is for the -m models: a --models-dir model of another vocabulary loads and serves
mkdir -p "$TMP/dir"
cp "$TMP/other.gguf" "$TMP/dir/other.gguf"
start_server dir --draft-model "$DRAFT" --models-dir "$TMP/dir"
post /v1/completions '{"model":"other","prompt":"hi","max_tokens":8}' >/dev/null
[ "$(status)" = 200 ] || fail "the --models-dir model: status $(status): $(cat "$TMP/body")"
greedy_drafts "the -m model beside a --models-dir model"
ok "--draft-model drafts for the -m model; a --models-dir model of another vocabulary serves without it"
stop_server

# per model: draft-model in the model's profile
cp "$MODEL" "$TMP/story.gguf"
printf 'draft-model = %s\n' "$DRAFT" >"$TMP/story.rlx.ini"
MODEL="$TMP/story.gguf"
start_server profile
greedy_drafts "the profile's draft-model"
ok "draft-model in <model>.rlx.ini drafts for that model"
stop_server
echo "8 passed, 0 failed"
