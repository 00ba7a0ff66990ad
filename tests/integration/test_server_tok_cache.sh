#!/usr/bin/env bash
# test_server_tok_cache.sh - the tokenizer cache against the daemon (--cache-dir): the first
# load builds the tokenizer and writes its cache file, the next load reads it (same ids, same
# greedy text); a corrupt file and a stale one (the model file changed) are detected, logged
# with the reason and rebuilt; --cache-dir none turns it off. The ready log's "load phases"
# line says what the cache did.
. "$(dirname "$0")/server_lib.sh"
SYNTH="${RLX_BIN:-build}/rlxd-synth"
[ -x "$SYNTH" ] || { echo "skip: $SYNTH not built"; exit 77; }

C="$TMP/cache"
MODEL="$TMP/q.gguf"
"$SYNTH" --arch qwen3 --preset tiny --seed 7 -o "$MODEL" >/dev/null || fail "synth"

# run NAME ARGS...: a daemon up, the phases line's cache note in $NOTE, the greedy text in $TEXT
# and /tokenize's ids in $IDS, then stopped
run() {
    local name=$1; shift
    start_server "$name" "$@"
    NOTE=$(sed -n "s/.*load phases:.*tokenizer [0-9.]* s (cache: \(.*\)), chat template.*/\1/p" "$LOG")
    TEXT=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":8,"temperature":0}' | jget '.choices[0].text')
    [ "$(status)" = 200 ] || fail "$name: completion $(status)"
    IDS=$(post /tokenize '{"content":"Hello world, <|im_start|> 12345 ünïcode"}' | jget .tokens)
    [ "$(status)" = 200 ] && [ "${IDS#\[}" != "$IDS" ] || fail "$name: tokenize $(status) $IDS"
    stop_server
}

run first --cache-dir "$C"
[ "$NOTE" = "miss, written" ] || fail "first load: cache '$NOTE'"
F=$(ls "$C"/tokenizer-*.bin) || fail "no cache file in $C"
text0=$TEXT ids0=$IDS
ok "first load builds and writes the cache ($(basename "$F"))"

run second --cache-dir "$C"
[ "$NOTE" = hit ] || fail "second load: cache '$NOTE'"
[ "$TEXT" = "$text0" ] || fail "the cached tokenizer changed the text: '$TEXT' vs '$text0'"
[ "$IDS" = "$ids0" ] || fail "the cached tokenizer changed the ids: $IDS vs $ids0"
ok "second load reads it: same ids, same text"

# corrupt: one byte in the middle of the tables
size=$(stat -c %s "$F")
printf '\xAA' | dd of="$F" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
run corrupt --cache-dir "$C"
case "$NOTE" in "corrupt ("*"checksum mismatch), rebuilt, written") ;; *) fail "corrupt: cache '$NOTE'" ;; esac
[ "$TEXT" = "$text0" ] && [ "$IDS" = "$ids0" ] || fail "corrupt: other output"
run after-corrupt --cache-dir "$C"
[ "$NOTE" = hit ] || fail "after the rebuild: cache '$NOTE'"
ok "a corrupt cache file is detected, logged and rebuilt"

# stale: the model file changed (its mtime here)
touch -d '2001-01-01' "$MODEL"
run stale --cache-dir "$C"
case "$NOTE" in "stale ("*"built from another version of"*"), rebuilt, written") ;; *) fail "stale: cache '$NOTE'" ;; esac
[ "$TEXT" = "$text0" ] && [ "$IDS" = "$ids0" ] || fail "stale: other output"
run after-stale --cache-dir "$C"
[ "$NOTE" = hit ] || fail "after the stale rebuild: cache '$NOTE'"
[ "$(ls "$C" | wc -l)" = 1 ] || fail "stale files left: $(ls "$C")"
ok "a stale cache file is detected, logged and rebuilt in place"

run off --cache-dir none
[ "$NOTE" = off ] || fail "--cache-dir none: cache '$NOTE'"
ok "--cache-dir none: no cache"

# the default folder, $XDG_CACHE_HOME/rlxd, where $XDG_CACHE_HOME does not exist yet (the image's
# fresh volume: XDG_CACHE_HOME=/var/lib/rlxd/cache): made, levels above it included (only the
# last level was: "cannot create the cache folder ...: No such file or directory" every load)
unset RLXD_CACHE_DIR # (server_lib.sh's, which would come first)
XDG_CACHE_HOME="$TMP/xdg/not/yet" run xdg
export RLXD_CACHE_DIR="$TMP/tokenizer-cache"
[ "$NOTE" = "miss, written" ] || fail "XDG_CACHE_HOME not there yet: cache '$NOTE'"
ls "$TMP"/xdg/not/yet/rlxd/tokenizer-*.bin >/dev/null || fail "no cache file under \$XDG_CACHE_HOME/rlxd"
ok "a missing \$XDG_CACHE_HOME is made for the cache"

# The Vulkan backend's pipeline cache in the same folder (when this build and host have Vulkan:
# lavapipe in CI): written at the first load, read at the next (the same data: not rewritten), a
# damaged file ignored and replaced; the load logs what it did.
if "$BIN" serve -m "$MODEL:tiny" --stdio --backend vulkan --cache-dir none </dev/null >/dev/null 2>&1; then
    V="$TMP/vk/not/yet"  # folders above it missing too: made
    vk_note() { "$BIN" serve -m "$MODEL:tiny" --stdio --backend vulkan --cache-dir "$V" </dev/null 2>&1 >/dev/null |
                sed -n "s/.*Vulkan pipeline cache: //p"; }
    n1=$(vk_note)
    case "$n1" in "new, 0 bytes read, "*" written") ;; *) fail "vulkan first load: '$n1'" ;; esac
    PF=$(ls "$V"/vulkan-pipelines-*.bin) || fail "no pipeline cache file in $V"
    n2=$(vk_note)
    case "$n2" in "loaded, "*" bytes read, 0 written") ;; *) fail "vulkan second load: '$n2'" ;; esac
    printf 'garbage' | dd of="$PF" bs=1 seek=30 conv=notrunc 2>/dev/null
    n3=$(vk_note)
    case "$n3" in "corrupt (ignored, replaced), 0 bytes read, "*" written") ;; *) fail "vulkan damaged file: '$n3'" ;; esac
    n4=$(vk_note)
    case "$n4" in "loaded, "*) ;; *) fail "vulkan after the damage: '$n4'" ;; esac
    ok "the Vulkan pipeline cache: written, read back, a damaged file replaced ($n1 / $n2 / $n3)"
else
    echo "# no Vulkan backend or device here: the pipeline cache part is not run"
fi
