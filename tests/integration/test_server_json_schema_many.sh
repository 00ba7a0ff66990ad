#!/usr/bin/env bash
# test_server_json_schema_many.sh - 64 concurrent chat requests with 64 different JSON schemas
# through the daemon (issue 15): each sequence keeps its own constraint. A random-weight model
# (synth-llama-tiny) so that nothing but the constraint makes an output valid; every output must
# validate against its own schema and not against the schema of another request (Ajv, as in
# test_server_json_schema.sh). --max-seqs 64 puts all of them in one batch.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
command -v node >/dev/null || { echo "skip: node missing"; exit 77; }
[ -d tests/integration/node_modules/ajv ] || { echo "skip: npm ci in tests/integration first (ajv)"; exit 77; }
MODEL="$SHARED/models/${RLX_SCHEMA_MODEL:-synth-llama-tiny-f32.gguf}"
[ -f "$MODEL" ] || { echo "skip: $MODEL absent"; exit 77; }

start_server json_schema_many --max-seqs 64 --ctx 256
node tests/integration/json_schema_many.mjs "$URL" "${RLX_SCHEMA_ROUNDS:-2}" || fail "outputs do not validate against their own schemas"
ok "64 concurrent requests with 64 schemas each validate against their own"
[ "$(curl -s --max-time 5 "$URL/health")" = '{"status":"ok"}' ] || fail "/health after the requests"
stop_server
ok "clean shutdown"
