#!/usr/bin/env bash
# test_compose.sh - deploy/docker-compose.yml as an operator meets it: `docker-compose config`
# (or `docker compose config`) accepts it alone and with the CUDA override
# (deploy/docker-compose.cuda.yml: --backend cuda, the CUDA image, GPUs reserved through
# deploy.resources.reservations.devices); no obsolete `version:` key; and the rlxd service's
# command and environment, as compose resolves them, start the daemon cleanly on an EMPTY
# models volume: healthy, no model listed, a log line saying how to add one, build info in
# /metrics. That run uses this build's rlxd with the service's settings (/models and
# /var/lib/rlxd mapped to temporary folders, host and port local), as no container engine runs
# here. Skips (77) when neither docker-compose nor the compose plugin is installed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/server_lib.sh
if command -v docker-compose >/dev/null 2>&1; then DC=(docker-compose)
elif docker compose version >/dev/null 2>&1; then DC=(docker compose)
else echo "skip: neither docker-compose nor the docker compose plugin is installed"; exit 77; fi
py=""
for c in /usr/bin/python3 python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import yaml' 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || { echo "skip: python3 with PyYAML (to read the resolved compose file) not installed"; exit 77; }

# ---- config ------------------------------------------------------------------------------------
"${DC[@]}" -f deploy/docker-compose.yml config >"$TMP/base.yml" 2>"$TMP/err" || fail "${DC[*]} config: $(cat "$TMP/err")"
"${DC[@]}" -f deploy/docker-compose.yml -f deploy/docker-compose.cuda.yml --profile replicas config >"$TMP/cuda.yml" 2>"$TMP/err" ||
  fail "${DC[*]} config with the CUDA override: $(cat "$TMP/err")"
grep -q '^version:' deploy/docker-compose.yml deploy/docker-compose.cuda.yml && fail "obsolete 'version:' key in a compose file"
"$py" - "$TMP/base.yml" "$TMP/cuda.yml" <<'PYEOF' || fail "resolved compose files"
import sys, yaml
base = yaml.safe_load(open(sys.argv[1]))["services"]["rlxd"]
assert base["command"][:2] == ["--models-dir", "/models"], base["command"]
assert any(str(v).split(":")[1:2] == ["/models"] or (isinstance(v, dict) and v.get("target") == "/models")
           for v in base.get("volumes", [])), base.get("volumes")
cuda = yaml.safe_load(open(sys.argv[2]))["services"]
for name in ("rlxd", "rlxd-2", "rlxd-3"):
    s = cuda[name]
    assert s["environment"].get("RLXD_BACKEND") == "cuda", (name, s["environment"])
    assert s["build"]["args"]["BACKEND"] == "cuda", (name, s["build"])
    assert s["image"] == "rlxd:cuda", (name, s["image"])
    dev = s["deploy"]["resources"]["reservations"]["devices"][0]
    assert dev["driver"] == "nvidia" and "gpu" in dev["capabilities"], (name, dev)
PYEOF
ok "${DC[*]} config: base and CUDA override"

# ---- an empty models volume --------------------------------------------------------------------
mkdir -p "$TMP/models" "$TMP/data"
# the service's command (container paths mapped here) and environment as NAME=VALUE lines
"$py" - "$TMP/base.yml" "$TMP/models" "$TMP/data" >"$TMP/run" <<'PYEOF' || fail "reading the rlxd service"
import sys, yaml
svc = yaml.safe_load(open(sys.argv[1]))["services"]["rlxd"]
env = dict(svc.get("environment") or {})
env.update(RLXD_HOST="127.0.0.1", RLXD_PORT="0", XDG_CACHE_HOME=sys.argv[3] + "/cache")
for k, v in env.items():
    v = "" if v is None else str(v).replace("/var/lib/rlxd", sys.argv[3])
    print("env\t%s=%s" % (k, v))
for a in svc["command"]:
    print("arg\t" + (sys.argv[2] if a == "/models" else a))
PYEOF
envs=(); args=()
while IFS=$'\t' read -r kind val; do
  if [ "$kind" = env ]; then envs+=("$val"); else args+=("$val"); fi
done <"$TMP/run"
run_rlxd compose env -i PATH="$PATH" HOME="$TMP/data" "${envs[@]}" "$BIN" serve "${args[@]}"
code=$(curl -s -o "$TMP/h" -w '%{http_code}' "$URL/health")
[ "$code" = 200 ] || fail "/health with no model: $code $(cat "$TMP/h")"
curl -s "$URL/v1/models" >"$TMP/m"
"$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["data"] == [], d' "$TMP/m" || fail "/v1/models: $(cat "$TMP/m")"
grep -q "nothing to serve yet: put GGUF files in $TMP/models" "$LOG" || fail "no message on how to add a model"
grep -q 'hf:OWNER/REPO' "$LOG" || fail "the message does not name hf: downloads"
curl -s "$URL/metrics" >"$TMP/metrics" # (not piped into grep -q: under pipefail curl's SIGPIPE would fail it)
grep -q '^rlxd_build_info{version="[^"]*",commit="[^"]*",backend="cpu"} 1$' "$TMP/metrics" || fail "no rlxd_build_info: $(head -5 "$TMP/metrics")"
kill -TERM "$PID"
wait "$PID"
rc=$?
PID=""
[ "$rc" = 0 ] || fail "rlxd exited $rc on SIGTERM"
ok "an empty models volume: healthy, no model, says how to add one"

if docker info >/dev/null 2>&1; then
  echo "note: a container engine runs here, but this test does not build or start images"
else
  echo "note: no container engine: the compose stack itself was not started"
fi
echo "test_compose: ok"
