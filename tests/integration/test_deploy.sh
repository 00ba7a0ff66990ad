#!/usr/bin/env bash
# test_deploy.sh - offline validation of the deployment files: docker-compose config, systemd
# unit verification, and structural checks of the Dockerfile, nginx.conf, prometheus.yml and
# the Kubernetes manifests. Each check runs when its tool is present; exit 77 (skip) when none
# could run. Nothing is built, pulled or started.
set -uo pipefail
src="${RLX_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$src" || exit 1
ran=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
note() { echo "test_deploy: $*"; }
bad() { echo "test_deploy: FAIL: $*" >&2; fail=1; }

# ---- docker-compose --------------------------------------------------------------------------
if command -v docker-compose >/dev/null 2>&1; then
  ran=1
  if ! out=$(docker-compose -f deploy/docker-compose.yml config 2>&1); then
    bad "docker-compose config: $out"
  fi
  svcs=$(docker-compose -f deploy/docker-compose.yml --profile replicas --profile monitoring \
         config --services 2>/dev/null | sort | tr '\n' ' ')
  [ "$svcs" = "nginx prometheus rlxd rlxd-2 rlxd-3 " ] || bad "all profiles: got services: $svcs"
  note "docker-compose config ok"
else
  note "docker-compose not installed (apt-get install docker-compose): compose check skipped"
fi

# ---- systemd unit ----------------------------------------------------------------------------
if command -v systemd-analyze >/dev/null 2>&1; then
  ran=1
  exe="${RLX_BIN:-}/rlxd"
  [ -x "$exe" ] || exe=/bin/true
  # verify needs an executable ExecStart; everything else is checked as written
  sed "s#/usr/local/bin/rlxd#$exe#" deploy/rlxd.service > "$tmp/rlxd.service"
  out=$(systemd-analyze verify "$tmp/rlxd.service" 2>&1)
  # verify exits 0 on unknown keys and bad values, reporting them as "ignoring" lines
  if grep -qF "$tmp/rlxd.service" <<<"$out"; then   # (not a pipe: under pipefail a SIGPIPE hid it)
    bad "systemd-analyze verify: $out"
  else
    note "systemd unit ok"
  fi
else
  note "systemd-analyze not installed: unit check skipped"
fi

# ---- INI files (config/*.ini, the ConfigMap's rlxd.ini) -----------------------------------
awk '/rlxd.ini: \|/ {f = 1; next} f { if ($0 ~ /^    / || $0 ~ /^$/) { sub(/^    /, ""); print } else exit }' \
  deploy/k8s/configmap.yaml > "$tmp/k8s.ini"
inis=("$tmp/k8s.ini")
for f in config/*.ini; do [ "$f" = config/rlxd.ini ] || [ ! -f "$f" ] || inis+=("$f"); done
# with the daemon's own parser, once `rlxd serve` exists: --help after --config parses the file
exe="${RLX_BIN:-}/rlxd"
if [ -x "$exe" ] && env -i PATH="$PATH" "$exe" serve --help >/dev/null 2>&1; then
  printf '[server]\nno-such-key = 1\n' > "$tmp/bad.ini"
  if env -i PATH="$PATH" "$exe" serve --config "$tmp/bad.ini" --help >/dev/null 2>&1; then
    note "rlxd serve --help does not validate --config: daemon INI check skipped"
  else
    ran=1
    for f in "${inis[@]}"; do
      out=$(env -i PATH="$PATH" "$exe" serve --config "$f" --help 2>&1 >/dev/null) \
        || bad "rlxd rejects $f: $out"
    done
    note "INI files accepted by rlxd serve"
  fi
else
  note "rlxd serve not available in this build: daemon INI check skipped"
fi
# shape: only [server] and [model.NAME] sections, every model with a path
for f in "${inis[@]}"; do
  ran=1
  awk -v F="$f" '
    /^[ \t]*[;#]/ || /^[ \t]*$/ { next }
    /^\[/ { sec = $0; gsub(/[][ \t]/, "", sec)
            if (sec != "server" && sec !~ /^model\.[A-Za-z0-9._:-]+$/) { print F ": unknown section [" sec "]"; bad = 1 }
            if (sec ~ /^model\./) { models[sec] = 0 }
            next }
    { split($0, kv, "="); k = kv[1]; gsub(/[ \t]/, "", k)
      if (sec == "") { print F ": key " k " outside a section"; bad = 1 }
      if (sec ~ /^model\./) { if (k == "path") models[sec] = 1; else if (k != "ctx") { print F ": [" sec "] unknown key " k; bad = 1 } } }
    END { n = 0; for (m in models) { n++; if (!models[m]) { print F ": [" m "] has no path"; bad = 1 } }
          if (!n) { print F ": no [model.NAME] section"; bad = 1 }
          exit bad }' "$f" || bad "INI shape of $f"
done

# ---- structural checks (python3 + PyYAML) ----------------------------------------------------
py=""
for c in /usr/bin/python3 python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import yaml' 2>/dev/null; then py=$c; break; fi
done
if [ -n "$py" ]; then
  ran=1
  if ! "$py" - "$src" <<'EOF'
import re, sys, yaml, glob, os
src = sys.argv[1]
errors = []
def check(cond, msg):
    if not cond: errors.append(msg)

# Dockerfile: stages, backend switch, non-root user, healthcheck, entrypoint
df = open(os.path.join(src, "Dockerfile")).read()
lines = [l.strip() for l in re.sub(r"\\\n", " ", df).splitlines() if l.strip() and not l.strip().startswith("#")]
froms = [l.split() for l in lines if l.upper().startswith("FROM ")]
stages = {f[-1] for f in froms if len(f) >= 4 and f[-2].upper() == "AS"}
check(len(froms) >= 4, "Dockerfile: expected build and runtime stages per backend")
check(any("debian:12" in f[1] for f in froms), "Dockerfile: no debian:12 stage")
check(any(f[1].startswith("nvidia/cuda:") for f in froms), "Dockerfile: no nvidia/cuda stage")
check(any(l.startswith("ARG BACKEND=cpu") for l in lines), "Dockerfile: ARG BACKEND=cpu missing")
for f in froms:
    base = f[1]
    m = re.match(r"([a-z-]+)-\$\{BACKEND\}$", base)
    if m:
        for b in ("cpu", "cuda"):
            check(f"{m.group(1)}-{b}" in stages, f"Dockerfile: stage {m.group(1)}-{b} missing")
for l in lines:
    m = re.search(r"--from=(\S+)", l)
    if m: check(m.group(1) in stages, f"Dockerfile: COPY --from={m.group(1)} names no stage")
last_from = max(i for i, l in enumerate(lines) if l.upper().startswith("FROM "))
final_lines = lines[last_from:]
final = "\n".join(final_lines)
users = [l.split()[1] for l in final_lines if l.startswith("USER ")]
check(users and not re.match(r"(root|0)(:|$)", users[-1]), "Dockerfile: final stage must run as non-root")
check(any(l.startswith("HEALTHCHECK ") and "/health" in l for l in final_lines), "Dockerfile: HEALTHCHECK on /health missing")
check('ENTRYPOINT ["rlxd", "serve"]' in final_lines, "Dockerfile: entrypoint must be rlxd serve")
check("/models" in final, "Dockerfile: /models not prepared")
check(not re.search(r"\blib\S+-dev\b", final), "Dockerfile: runtime stage installs -dev packages")

# nginx.conf: balanced braces, upstream of replicas, SSE-friendly proxying
ng = re.sub(r"#.*", "", open(os.path.join(src, "deploy/nginx.conf")).read())
check(ng.count("{") == ng.count("}"), "nginx.conf: unbalanced braces")
up = re.search(r"upstream\s+(\w+)\s*\{([^}]*)\}", ng)
check(up is not None and len(re.findall(r"\bserver\s+\S+", up.group(2))) >= 2, "nginx.conf: upstream needs >= 2 servers")
if up: check(f"proxy_pass http://{up.group(1)};" in ng, "nginx.conf: proxy_pass does not use the upstream")
for d in ("proxy_buffering off;", "proxy_http_version 1.1;", "proxy_read_timeout"):
    check(d in ng, f"nginx.conf: '{d}' missing")
for l in ng.splitlines():
    l = l.strip()
    check(not l or l.endswith(("{", "}", ";")), f"nginx.conf: line without ';': {l}")

# compose <-> nginx <-> prometheus agree on the replica names
comp = yaml.safe_load(open(os.path.join(src, "deploy/docker-compose.yml")))
names = {n for n, s in comp["services"].items() if n.startswith("rlxd")}
# a plain `up` starts one server; replicas, nginx and prometheus are opt-in profiles
check([n for n, s in comp["services"].items() if not s.get("profiles")] == ["rlxd"],
      "docker-compose.yml: only rlxd should run without a profile")
if up:
    hosts = {s.split(":")[0] for s in re.findall(r"\bserver\s+(\S+)", up.group(2))}
    check(hosts <= names, f"nginx.conf upstream hosts {hosts} not all compose services {names}")
prom = yaml.safe_load(open(os.path.join(src, "deploy/prometheus.yml")))
jobs = {j["job_name"]: j for j in prom.get("scrape_configs", [])}
check("rlxd" in jobs, "prometheus.yml: no rlxd job")
if "rlxd" in jobs:
    tg = {t.split(":")[0] for sc in jobs["rlxd"]["static_configs"] for t in sc["targets"]}
    check(tg == names, f"prometheus.yml targets {tg} != compose replicas {names}")
    check(jobs["rlxd"].get("metrics_path", "/metrics") == "/metrics", "prometheus.yml: metrics_path")

# the supervisors wait longer than the daemon's grace period (30 s unless configured)
def grace_of(ini_text):
    m = re.search(r"^\s*grace[-_]seconds\s*=\s*(\d+)", ini_text, re.M)
    return int(m.group(1)) if m else 30
env = comp["x-rlxd"].get("environment", {})
g = int(env.get("RLXD_GRACE_SECONDS", 30))
sgp = re.match(r"(\d+)s$", str(comp["x-rlxd"].get("stop_grace_period", "10s")))
check(sgp and int(sgp.group(1)) > g, f"docker-compose.yml: stop_grace_period must exceed RLXD_GRACE_SECONDS ({g})")
unit = open(os.path.join(src, "deploy/rlxd.service")).read()
tss = re.search(r"^TimeoutStopSec=(\d+)", unit, re.M)
check(tss and int(tss.group(1)) > grace_of(open(os.path.join(src, "config/rlxd.ini")).read()),
      "rlxd.service: TimeoutStopSec must exceed grace-seconds of config/rlxd.ini")

# Kubernetes manifests
docs = []
for p in sorted(glob.glob(os.path.join(src, "deploy/k8s/*.yaml"))):
    for d in yaml.safe_load_all(open(p)):
        if d: docs.append((os.path.basename(p), d))
kinds = {d["kind"]: d for _, d in docs}
for f, d in docs:
    check("apiVersion" in d and "kind" in d and d.get("metadata", {}).get("name"), f"{f}: apiVersion/kind/metadata.name")
for k in ("Deployment", "Service", "ConfigMap"):
    check(k in kinds, f"k8s: no {k}")
if {"Deployment", "Service", "ConfigMap"} <= kinds.keys():
    dep, svc, cm = kinds["Deployment"], kinds["Service"], kinds["ConfigMap"]
    sel = dep["spec"]["selector"]["matchLabels"]
    tl = dep["spec"]["template"]["metadata"]["labels"]
    check(all(tl.get(k) == v for k, v in sel.items()), "Deployment selector does not match its pod labels")
    check(all(tl.get(k) == v for k, v in svc["spec"]["selector"].items()), "Service selector matches no pod")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    for probe in ("readinessProbe", "livenessProbe"):
        pr = c.get(probe, {}).get("httpGet", {})
        check(pr.get("path") == "/health", f"Deployment: {probe} must GET /health")
        check(pr.get("port") in ports or pr.get("port") in ports.values(), f"Deployment: {probe} port unknown")
    for sp in svc["spec"]["ports"]:
        tp = sp.get("targetPort")
        check(tp in ports or tp in ports.values(), f"Service targetPort {tp} is not a container port")
    vols = {v["name"]: v for v in dep["spec"]["template"]["spec"].get("volumes", [])}
    for m in c.get("volumeMounts", []):
        check(m["name"] in vols, f"Deployment: volumeMount {m['name']} has no volume")
    cms = [v["configMap"]["name"] for v in vols.values() if "configMap" in v]
    check(cm["metadata"]["name"] in cms, "Deployment does not mount the ConfigMap")
    check(dep["spec"]["template"]["spec"].get("securityContext", {}).get("runAsNonRoot") is True, "Deployment: runAsNonRoot")
    check(dep["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30) > grace_of(cm["data"]["rlxd.ini"]),
          "Deployment: terminationGracePeriodSeconds must exceed the ConfigMap's grace-seconds")

if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
print("test_deploy: Dockerfile, nginx.conf, prometheus.yml and k8s manifests ok")
EOF
  then
    bad "structural checks failed"
  fi
else
  note "python3 with PyYAML not available: structural checks skipped"
fi

if [ "$ran" = 0 ]; then
  echo "test_deploy: no validator available (docker-compose, systemd-analyze, python3-yaml); skipped"
  exit 77
fi
exit $fail
