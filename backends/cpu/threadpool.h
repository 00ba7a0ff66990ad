/* threadpool.h - persistent worker threads for the CPU backend.
 *
 * rlx_threadpool_run() makes every thread (the caller is thread 0) execute fn(ctx, ith, nth)
 * once and returns when all are done. Inside fn, threads synchronise in one of two ways:
 *  - rlx_threadpool_barrier(): every thread waits for every other (each must call it the same
 *    number of times). A thread the OS has descheduled holds everyone.
 *  - work counters: the work of a phase is split into units claimed from a shared counter; a
 *    thread that completes units adds them with rlx_threadpool_done(), and one that needs the
 *    phase finished waits with rlx_threadpool_wait() for the count to reach the phase's total.
 *    A descheduled thread holds the others only while it holds a claimed unit, so on a
 *    machine with more runnable threads than cores the others go on without it (the CPU
 *    backend's steps work this way, backends/cpu/cpu_backend.c).
 * Waits (barrier, counter, end of run) spin a bounded, adaptive number of pauses, then sleep on
 * a futex, so a waiter frees its core for the thread it waits for. Idle workers spin briefly,
 * then sleep, so an idle server costs no CPU. One run at a time per pool; the functions that
 * take a pool are called from inside its run (thread 0 is the caller of run). */
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
/* Adds n completed units to *word; wakes the threads waiting on it when the count reaches
 * target (the phase's total). */
void rlx_threadpool_done(rlx_threadpool *tp, _Atomic unsigned *word, unsigned n, unsigned target);
/* Returns once *word >= target (acquire: the completed units' writes are visible). */
void rlx_threadpool_wait(rlx_threadpool *tp, _Atomic unsigned *word, unsigned target);

/* cpu_count.c: reads the first line of a small file (/proc, /sys) into buf; false when absent
 * or unreadable. */
bool rlx__read_line(const char *path, char *buf, size_t cap);
/* cpu_count.c: CPUs this process may use (at least 1): the online CPUs, the affinity mask's
 * count and the cgroup CPU quota (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, on the
 * process's cgroup and its ancestors; rounded up), whichever is least. */
int rlx_cpu_count(void);
/* The same with the cgroup file system's root and /proc/self/cgroup given (tests). */
int rlx__cpu_count_from(const char *cgroup_root, const char *proc_self_cgroup);
/* CPUs granted by the contents of a cgroup v2 cpu.max file ("max 100000", "150000 100000"),
 * rounded up; 0 for no limit and for contents that are not two numbers (or "max" and one). */
int rlx__cpu_max_cpus(const char *text);
/* The cgroup quota alone in CPUs (rounded up); 0 when there is none. */
int rlx__cgroup_cpu_limit(const char *cgroup_root, const char *proc_self_cgroup);

#endif
