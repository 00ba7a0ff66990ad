#!/usr/bin/env bash
# test_template_differential.sh - the chat-template engine against Python Jinja2 on contexts the
# shared template cases do not hold (template_diff.py: 15 contexts x every template of
# ../shared/templates, byte-identical or refused by both). Python's jinja2 (python3-jinja2) is
# the reference; RLX_TEMPLATE_DIFF_MAX limits the number of templates (the sanitizer build).
set -u
SHARED="${RLX_SHARED:-../shared}"
RLXD="${RLX_BIN:-build}/rlxd"
[ -d "$SHARED/templates" ] || { echo "skipped: $SHARED/templates is absent (set RLX_SHARED)"; exit 77; }
python3 -c 'import jinja2' 2>/dev/null || { echo "skipped: python3's jinja2 is missing (apt install python3-jinja2)"; exit 77; }
RLXD=$(realpath "$RLXD"); SHARED=$(realpath "$SHARED")
cd "$(dirname "$0")" || exit 1
python3 template_diff.py "$RLXD" "$SHARED/templates" ${RLX_TEMPLATE_DIFF_MAX:-} || { echo "FAIL: renderings differ from Jinja2"; exit 1; }
echo "ok: every template renders the held-out contexts as Jinja2 does"
