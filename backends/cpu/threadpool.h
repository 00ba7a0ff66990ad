/* threadpool.h - persistent worker threads for the CPU backend.
 *
 * rlx_threadpool_run() makes every thread (the caller is thread 0) execute fn(ctx, ith, nth)
 * once and returns when all are done. Inside fn, rlx_threadpool_barrier() synchronises all
 * threads (every thread must call it the same number of times). Idle workers spin briefly,
 * then sleep, so an idle server costs no CPU. One run at a time per pool. */
#ifndef RLX_THREADPOOL_H
#define RLX_THREADPOOL_H

#include "backends/rlx.h"

typedef struct rlx_threadpool rlx_threadpool;
typedef void (*rlx_task_fn)(void *ctx, int ith, int nth);

int rlx_threadpool_create(rlx_threadpool **out, int n_threads, rlx_error *err); /* <= 0: rlx_cpu_count() */
void rlx_threadpool_free(rlx_threadpool *tp);
int rlx_threadpool_size(const rlx_threadpool *tp);
void rlx_threadpool_run(rlx_threadpool *tp, rlx_task_fn fn, void *ctx);
/* Like rlx_threadpool_run with only the first n threads taking part (1 <= n <= size): small
 * work is faster on one core than split across a barrier. */
void rlx_threadpool_run_n(rlx_threadpool *tp, int n, rlx_task_fn fn, void *ctx);
void rlx_threadpool_barrier(rlx_threadpool *tp);

/* cpu_count.c: CPUs this process may use (at least 1): the online CPUs, the affinity mask's
 * count and the cgroup CPU quota (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, on the
 * process's cgroup and its ancestors; rounded up), whichever is least. */
int rlx_cpu_count(void);
/* The same with the cgroup file system's root and /proc/self/cgroup given (tests). */
int rlx__cpu_count_from(const char *cgroup_root, const char *proc_self_cgroup);
/* The cgroup quota alone in CPUs (rounded up); 0 when there is none. */
int rlx__cgroup_cpu_limit(const char *cgroup_root, const char *proc_self_cgroup);

#endif
