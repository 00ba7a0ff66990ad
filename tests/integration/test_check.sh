#!/usr/bin/env bash
# test_check.sh - `rlxd check FILE|DIR [--json]` on every model of ../shared/models and on
# hand-broken files: truncated, not GGUF, missing keys (llama.cpp's and rlxd's), unknown
# architecture, unknown and uncomputable tensor types, split models (whole and missing a part).
set -u
SHARED="${RLX_SHARED:-../shared}"
BIN="${RLX_BIN:-build}"
RLXD="$BIN/rlxd"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# expect FILE STATUS DETAIL-REGEX: one file's status and --json fields
expect() {
    local f="$1" status="$2" want="$3" rc
    "$RLXD" check --json "$f" >"$TMP/out.json" 2>"$TMP/err"
    rc=$?
    if [ "$status" = SUPPORTED ]; then [ $rc -eq 0 ] || fail "$f: exit $rc, expected 0: $(cat "$TMP/out.json" "$TMP/err")"
    else [ $rc -eq 1 ] || fail "$f: exit $rc, expected 1: $(cat "$TMP/out.json" "$TMP/err")"; fi
    python3 - "$TMP/out.json" "$status" "$want" <<'PY' || fail "$f: $(cat "$TMP/out.json")"
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
d = json.loads(lines[0])
assert d["status"] == sys.argv[2], d
want = sys.argv[3]
if d["status"] == "SUPPORTED": assert d["reason"] is None
else: assert re.search(want, d["reason"]), (want, d["reason"])
if d["status"] == "MissingMetadata": assert d["key"] and d["key"] in d["reason"], d
PY
    echo "ok   $(basename "$f"): $status"
}

# patch FILE OUT OLD NEW: OUT = FILE with the first OLD replaced by NEW (same length)
patch() {
    python3 - "$@" <<'PY'
import sys
src, out, old, new = sys.argv[1], sys.argv[2], sys.argv[3].encode(), sys.argv[4].encode()
b = open(src, "rb").read()
assert len(old) == len(new) and old in b, (old, new)
open(out, "wb").write(b.replace(old, new, 1))
PY
}
# settype FILE OUT TENSOR TYPEID: OUT = FILE with TENSOR's type id replaced
settype() {
    python3 - "$@" <<'PY'
import struct, sys
src, out, name, tid = sys.argv[1], sys.argv[2], sys.argv[3].encode(), int(sys.argv[4])
b = bytearray(open(src, "rb").read())
i = b.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
nd = struct.unpack_from("<I", b, i)[0]
struct.pack_into("<I", b, i + 4 + 8 * nd, tid)
open(out, "wb").write(b)
PY
}

"$BIN/rlxd-synth" --arch llama --preset tiny --type q8_0 --seed 5 -o "$TMP/good.gguf" || fail "synth"
expect "$TMP/good.gguf" SUPPORTED ""
head -c 3000 "$TMP/good.gguf" >"$TMP/cut.gguf"
expect "$TMP/cut.gguf" Unknown "truncated|runs past the end|cannot fit in the .* bytes left"
echo "hello" >"$TMP/text.gguf"
expect "$TMP/text.gguf" Unknown "not a GGUF file"
patch "$TMP/good.gguf" "$TMP/noctx.gguf" llama.context_length llama.context_lengtX
expect "$TMP/noctx.gguf" MissingMetadata "'llama.context_length'"
patch "$TMP/good.gguf" "$TMP/noblk.gguf" llama.block_count llama.block_counX
expect "$TMP/noblk.gguf" MissingMetadata "'llama.block_count'"
patch "$TMP/good.gguf" "$TMP/noffn.gguf" llama.feed_forward_length llama.feed_forward_lengtX
expect "$TMP/noffn.gguf" MissingMetadata "'llama.feed_forward_length'"
patch "$TMP/good.gguf" "$TMP/notok.gguf" tokenizer.ggml.tokens tokenizer.ggml.tokenX
expect "$TMP/notok.gguf" MissingMetadata "'tokenizer.ggml.tokens'"
patch "$TMP/good.gguf" "$TMP/noarch.gguf" general.architecture general.architecturX
expect "$TMP/noarch.gguf" MissingMetadata "'general.architecture'"
# "llama" as the value of general.architecture (5 bytes after its length) -> "zzzzz": no zzzzz.* keys
python3 - "$TMP/good.gguf" "$TMP/unkarch.gguf" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
k = b"general.architecture"
i = b.index(struct.pack("<Q", len(k)) + k) + 8 + len(k) + 4 + 8
assert b[i:i + 5] == b"llama"
b[i:i + 5] = b"zzzzz"
open(sys.argv[2], "wb").write(b)
PY
expect "$TMP/unkarch.gguf" Unknown "unknown architecture 'zzzzz'"
settype "$TMP/good.gguf" "$TMP/iq2.gguf" output_norm.weight 16   # IQ2_XXS: not in rlxd's type table
expect "$TMP/iq2.gguf" KnownUnimplemented "unknown tensor type id 16"
settype "$TMP/good.gguf" "$TMP/q41.gguf" output_norm.weight 3    # Q4_1: known, not computable
expect "$TMP/q41.gguf" KnownUnimplemented "type q4_1"

# the shared models, as one folder: each one's verdict (every family there is served now; one rlxd
# lacked would be KnownUnimplemented)
if [ -d "$SHARED/models" ]; then
    "$RLXD" check --json "$SHARED/models" >"$TMP/shared.json" 2>"$TMP/err"
    [ $? -eq 0 ] || fail "shared folder: expected exit 0 (every shared model is served): $(cat "$TMP/err")"
    python3 - "$TMP/shared.json" "$SHARED/models" <<'PY' || fail "shared folder: $(cat "$TMP/shared.json")"
import glob, json, os, sys
d = {os.path.basename(x["path"]): x for x in map(json.loads, open(sys.argv[1]))}
files = sorted(os.path.basename(f) for f in glob.glob(sys.argv[2] + "/*.gguf"))
assert sorted(d) == files, (sorted(d), files)
for f, x in d.items():
    arch = next((a for a in () if f.startswith("synth-" + a + "-")), None)  # every shared family is served now
    if arch:
        assert x["status"] == "KnownUnimplemented" and x["unimplemented"] == arch, x
        assert "architecture '%s' is not implemented" % arch in x["reason"], x
    else:
        assert x["status"] == "SUPPORTED" and x["reason"] is None and x["parts"] == 1, x
    print("ok  ", f, x["status"])
PY
else
    echo "note: $SHARED/models absent, shared files not checked"
fi

# a folder: one level of subfolders, split parts as one model, exit 0 only when all are SUPPORTED
mkdir -p "$TMP/dir/sub/deeper" "$TMP/dir/.hidden"
cp "$TMP/good.gguf" "$TMP/dir/a.gguf"
"$BIN/rlxd-synth" --arch qwen3 --preset tiny --type f32 --seed 2 --split 3 -o "$TMP/dir/sub/q3.gguf" || fail "synth split"
cp "$TMP/good.gguf" "$TMP/dir/sub/deeper/ignored.gguf"
cp "$TMP/cut.gguf" "$TMP/dir/.hidden/ignored.gguf"
echo notes >"$TMP/dir/README.md"
"$RLXD" check "$TMP/dir" >"$TMP/out" 2>"$TMP/err" || fail "good folder: exit $?: $(cat "$TMP/out" "$TMP/err")"
[ "$(wc -l <"$TMP/out")" -eq 2 ] || fail "good folder: $(cat "$TMP/out")"
grep -q "^SUPPORTED .*sub/q3-00001-of-00003.gguf (qwen3, 3 parts)" "$TMP/out" || fail "split model: $(cat "$TMP/out")"
"$RLXD" check --json "$TMP/dir" >"$TMP/out.json" || fail "good folder --json"
python3 - "$TMP/out.json" <<'PY' || fail "folder --json: $(cat "$TMP/out.json")"
import json, sys
d = [json.loads(l) for l in open(sys.argv[1])]
assert [x["name"] for x in d] == ["a", "sub/q3"], d
assert d[1]["parts"] == 3 and d[1]["architecture"] == "qwen3" and all(x["status"] == "SUPPORTED" for x in d)
PY
rm "$TMP/dir/sub/q3-00002-of-00003.gguf"
cp "$TMP/noctx.gguf" "$TMP/dir/b.gguf"
"$RLXD" check "$TMP/dir" >"$TMP/out" 2>"$TMP/err"
[ $? -eq 1 ] || fail "broken folder: expected exit 1"
grep -q "^SUPPORTED .*a.gguf" "$TMP/out" || fail "broken folder: a.gguf: $(cat "$TMP/out")"
grep -q "^MissingMetadata .*b.gguf: required metadata key 'llama.context_length' is missing" "$TMP/out" || fail "broken folder: b: $(cat "$TMP/out")"
grep -q "^Unknown .*q3-00001-of-00003.gguf: .*1 of its 3 parts is missing: .*q3-00002-of-00003.gguf" "$TMP/out" || fail "missing part: $(cat "$TMP/out")"

# usage errors: exit 2
mkdir "$TMP/empty"
"$RLXD" check "$TMP/empty" >/dev/null 2>"$TMP/err"; [ $? -eq 1 ] || fail "empty folder: expected exit 1"
grep -q "holds no .gguf files" "$TMP/err" || fail "empty folder: $(cat "$TMP/err")"
"$RLXD" check >/dev/null 2>&1; [ $? -eq 2 ] || fail "no argument: expected exit 2"
"$RLXD" check --bogus "$TMP/good.gguf" >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option: expected exit 2"
"$RLXD" check "$TMP/good.gguf" "$TMP/cut.gguf" >/dev/null 2>&1; [ $? -eq 2 ] || fail "two paths: expected exit 2"
"$RLXD" check "$TMP/absent.gguf" >"$TMP/out" 2>&1; [ $? -eq 1 ] || fail "absent file: expected exit 1"
grep -q "^Unknown .*absent.gguf: .*cannot open" "$TMP/out" || fail "absent file: $(cat "$TMP/out")"

# a FIFO (or device) given as the model is refused unopened by every subcommand that takes one
# (open() waited for a writer for ever); each runs under a timeout so the old code fails, not hangs
mkfifo "$TMP/pipe.gguf" || fail "mkfifo"
echo '{"messages": []}' >"$TMP/ctx.json"
timeout 20 "$RLXD" check "$TMP/pipe.gguf" >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 1 ] || fail "check FIFO: exit $rc, expected 1: $(cat "$TMP/out")"
grep -q "^Unknown .*pipe.gguf: not a regular file (a FIFO)" "$TMP/out" || fail "check FIFO: $(cat "$TMP/out")"
timeout 20 "$RLXD" check /dev/null >"$TMP/out" 2>&1; [ $? -eq 1 ] || fail "check /dev/null: $(cat "$TMP/out")"
grep -q "not a regular file (a device)" "$TMP/out" || fail "check /dev/null: $(cat "$TMP/out")"
for cmd in "inspect" "tokenize -p x -m" "generate -p x -m" "logits --tokens 1 -m" "bench -m" "render-template --context $TMP/ctx.json -m"; do
    # shellcheck disable=SC2086
    timeout 20 "$RLXD" $cmd "$TMP/pipe.gguf" >"$TMP/out" 2>&1; rc=$?
    [ $rc -eq 1 ] || fail "$cmd FIFO: exit $rc, expected 1: $(cat "$TMP/out")"
    grep -q "pipe.gguf is a FIFO, not a model file" "$TMP/out" || fail "$cmd FIFO: $(cat "$TMP/out")"
done
good="$SHARED/models/stories260K.gguf"
timeout 20 "$RLXD" bench --spec -m "$good" --draft-model "$TMP/pipe.gguf" -n 4 >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "is a FIFO, not a model file" "$TMP/out" || fail "bench --spec --draft-model FIFO: $rc $(cat "$TMP/out")"
# serve: --draft-model and --chat-template FIFOs or devices are refused at start (each load
# waited in open() for ever; /dev/zero as the template filled the memory)
for a in "--draft-model $TMP/pipe.gguf" "--chat-template $TMP/pipe.gguf" "--chat-template /dev/zero"; do
    # shellcheck disable=SC2086
    timeout 20 "$RLXD" serve -m "$good" $a --port 0 >"$TMP/out" 2>&1; rc=$?
    [ $rc -eq 2 ] && grep -q "is a FIFO, socket or device, not a file" "$TMP/out" || fail "serve $a: exit $rc: $(tail -3 "$TMP/out")"
done
# text files the subcommands read: a device is refused (/dev/zero grew to gigabytes), a FIFO
# (process substitution) is read
timeout 20 "$RLXD" tokenize -m "$good" -f /dev/zero >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "cannot read /dev/zero: No such device" "$TMP/out" || fail "tokenize -f /dev/zero: $rc $(head -c 300 "$TMP/out")"
timeout 20 "$RLXD" tokenize -m "$good" -f <(printf 'Once upon a time') >"$TMP/out" 2>&1 || fail "tokenize -f FIFO: $(cat "$TMP/out")"
[ "$(cat "$TMP/out")" = "$("$RLXD" tokenize -m "$good" -p 'Once upon a time')" ] || fail "tokenize -f FIFO: $(cat "$TMP/out")"
timeout 20 "$RLXD" render-template -m "$good" --context /dev/zero >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "No such device" "$TMP/out" || fail "render-template --context /dev/zero: $rc $(head -c 300 "$TMP/out")"
# arguments refused where they were taken and went wrong: a shape past GGUF's 32 bits (wrote
# context_length 0), an empty or unknown backend (ran as '' / failed after listening), an
# endless loadgen timeout (overflowed to 1 ms), an empty pull endpoint (fell back to
# huggingface.co), a date that does not exist (moved on to 2027)
"$BIN/rlxd-synth" --arch llama --ctx 4294967296 -o "$TMP/wrap.gguf" >"$TMP/out" 2>&1; [ $? -eq 2 ] || fail "synth --ctx 2^32: $(cat "$TMP/out")"
[ -e "$TMP/wrap.gguf" ] && fail "synth --ctx 2^32 wrote a file"
"$BIN/rlxd-synth" --arch llama --seed -1 -o "$TMP/wrap.gguf" >"$TMP/out" 2>&1; [ $? -eq 2 ] || fail "synth --seed -1: $(cat "$TMP/out")"
for b in "" foo; do
    timeout 20 "$RLXD" serve -m "$good" --backend "$b" --port 0 >"$TMP/out" 2>&1; rc=$?
    [ $rc -eq 2 ] && grep -q "backend must be cpu, vulkan or cuda, not '$b'" "$TMP/out" || fail "serve --backend '$b': $rc $(tail -2 "$TMP/out")"
done
"$BIN/rlxd-loadgen" --url http://127.0.0.1:1/v1 --model m --timeout inf >"$TMP/out" 2>&1; [ $? -eq 2 ] || fail "loadgen --timeout inf: $(head -2 "$TMP/out")"
"$RLXD" pull hf:a/b --endpoint "" >"$TMP/out" 2>&1; [ $? -eq 2 ] && grep -q "endpoint must not be empty" "$TMP/out" || fail "pull --endpoint '': $(cat "$TMP/out")"
printf '{{ strftime_now("%%Y-%%m-%%d") }}' >"$TMP/now.jinja"
"$RLXD" render-template --template "$TMP/now.jinja" --context "$TMP/ctx.json" --now 2026-13-45T99:99:99 >"$TMP/out" 2>&1
[ $? -eq 1 ] && grep -q "no date and time of the calendar" "$TMP/out" || fail "--now 2026-13-45: $(cat "$TMP/out")"
[ "$("$RLXD" render-template --template "$TMP/now.jinja" --context "$TMP/ctx.json" --now 2024-02-29)" = 2024-02-29 ] || fail "--now 2024-02-29"
# bench --json names the model as a JSON string (a quote in the file name broke it) and the threads used
cp "$good" "$TMP/we\"ird.gguf"
"$RLXD" bench -m "$TMP/we\"ird.gguf" -p 8 -n 4 -r 1 --seqs 1 -t 2 --json >"$TMP/out.json" 2>/dev/null || fail "bench --json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["model"] == "we\"ird.gguf" and d["threads"] == 2, d' "$TMP/out.json" ||
    fail "bench --json: $(cat "$TMP/out.json")"
# bench with a prompt shorter than the batched rows' 16 tokens (the context was -p + -n: too small)
for pn in "4 12" "1 1"; do
    # shellcheck disable=SC2086
    set -- $pn
    timeout 60 "$RLXD" bench -m "$good" -p "$1" -n "$2" -r 1 --seqs 1,4 >"$TMP/out" 2>&1 || fail "bench -p $1 -n $2: $(cat "$TMP/out")"
done
echo "ok"
