#!/usr/bin/env bash
# test_server_threads.sh - the default compute thread count heeds the CPU affinity mask: under
# `taskset -c 0` the ready line reports 1 thread and the daemon runs as many threads as with
# --threads 1 (it used to start one per host core); an explicit --threads wins.
. "$(dirname "$0")/server_lib.sh"
command -v taskset >/dev/null || { echo "skip: taskset missing"; exit 77; }
[ "$(nproc --all)" -ge 2 ] || { echo "skip: one CPU: nothing to limit"; exit 77; }

n_tasks() { ls "/proc/$PID/task" | wc -l; }

start_server one --threads 1
grep -q 'ready (.*, 1 thread,' "$LOG" || fail "ready line: $(grep ready "$LOG")"
want=$(n_tasks)
stop_server

BIN_REAL=$BIN
BIN="$TMP/taskset-rlxd"
printf '#!/bin/sh\nexec taskset -c 0 "%s" "$@"\n' "$BIN_REAL" >"$BIN"
chmod +x "$BIN"
start_server pinned
grep -q 'ready (.*, 1 thread,' "$LOG" || fail "taskset -c 0: ready line should report 1 thread: $(grep ready "$LOG")"
got=$(n_tasks)
[ "$got" = "$want" ] || fail "taskset -c 0 runs $got threads, --threads 1 runs $want"
ok "taskset -c 0: 1 compute thread ($got threads in all, as with --threads 1)"
stop_server

start_server explicit --threads 3
grep -q 'ready (.*, 3 threads,' "$LOG" || fail "--threads 3: $(grep ready "$LOG")"
ok "--threads 3 is taken as given"
# /metrics counts the model's CPU passes by thread count: stories260K's are small work, one
# thread each
post /v1/completions '{"model":"tiny","prompt":"Once","max_tokens":5}' >/dev/null
[ "$(status)" = 200 ] || fail "completion: $(status)"
m=$(curl -s "$URL/metrics")
one=$(echo "$m" | sed -n 's/^rlxd_cpu_passes_one_thread_total{model_name="tiny"} \([0-9]*\)/\1/p')
more=$(echo "$m" | sed -n 's/^rlxd_cpu_passes_more_threads_total{model_name="tiny"} \([0-9]*\)/\1/p')
[ -n "$one" ] && [ "$one" -ge 5 ] && [ "$more" = 0 ] || fail "metrics: one thread '$one', more '$more'"
ok "/metrics: $one passes on one thread, $more on more"
stop_server
echo "3 passed, 0 failed"
