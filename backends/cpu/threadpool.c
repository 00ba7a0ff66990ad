/* threadpool.c - spin-then-sleep worker pool with a sense-reversing barrier and work counters.
 *
 * Every wait (barrier, work counter, end of run) spins briefly, then sleeps on a futex. On a busy machine (more runnable threads
 * than cores) the thread everyone waits for has usually been preempted; a waiter that keeps
 * its core by spinning or sched_yield() delays it, one that sleeps frees the core for it. */
#include "backends/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ITERS 20000
/* Barrier waits spin up to spin_lim pauses, then sleep. The best limit depends on the load:
 * decode of the Qwen3-0.6B Q8_0 file (tg48/tg64, interleaved rounds) at load ~7 on 2 cores:
 * 2000 spins 10.7-18.6 tok/s and 10.3-10.8 CPU s, 200 spins 17.8-22.3 tok/s and 6.8-7.9 CPU s;
 * at load ~1.7: 200 spins 32-36 tok/s, 2000 36-44, 20000 41-49. So the limit adapts: a sleep
 * that ended quickly means spinning longer would have been cheaper (double it); a long one
 * means the awaited thread was preempted and spinning only steals its core (halve it). */
#define SPIN_MIN 100
#define SPIN_MAX 20000
#define SLEEP_SHORT_NS 50000     /* woke within 50 us: should have spun */
#define SLEEP_LONG_NS 1000000    /* slept over 1 ms: the other thread was off its core */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void bar_sleep(atomic_uint *word, unsigned seen)
{
#if defined(__linux__)
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
#else
    (void)word; (void)seen;
    sched_yield();
#endif
}

static void bar_wake(atomic_uint *word)
{
#if defined(__linux__)
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
#endif
}

struct rlx_threadpool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint generation;     /* bumped for every run */
    atomic_uint finished;       /* workers done with the current task (target n - 1) */
    atomic_int sleepers;        /* threads asleep on a work counter or on `finished` */
    atomic_bool stop;
    rlx_task_fn fn;
    void *ctx;
    int active;                 /* threads taking part in the current task */
    /* barrier */
    atomic_int bar_count;
    atomic_uint bar_sense;
    atomic_int bar_sleepers;    /* waiters asleep on bar_sense */
    atomic_int spin_lim;        /* adaptive spin budget of barrier waits */
};

typedef struct worker_arg { rlx_threadpool *tp; int ith; } worker_arg;

static void *worker_main(void *p)
{
    worker_arg a = *(worker_arg *)p;
    free(p);
    rlx_threadpool *tp = a.tp;
    unsigned seen = 0;
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&tp->generation, memory_order_acquire)) == seen &&
               !atomic_load(&tp->stop)) {
            if (++spins < SPIN_ITERS) { cpu_relax(); continue; }
            pthread_mutex_lock(&tp->mu);
            while (atomic_load(&tp->generation) == seen && !atomic_load(&tp->stop))
                pthread_cond_wait(&tp->cv, &tp->mu);
            pthread_mutex_unlock(&tp->mu);
        }
        if (atomic_load(&tp->stop)) return NULL;
        seen = gen;
        if (a.ith < tp->active) tp->fn(tp->ctx, a.ith, tp->active);
        rlx_threadpool_done(tp, &tp->finished, 1, (unsigned)tp->n - 1);
    }
}

int rlx_threadpool_create(rlx_threadpool **out, int n_threads, rlx_error *err)
{
    if (n_threads <= 0) n_threads = rlx_cpu_count();
    if (n_threads > 256) n_threads = 256;
    rlx_threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) return rlx_errorf(err, RLX_ENOMEM, "out of memory creating the thread pool");
    tp->n = n_threads;
    atomic_init(&tp->spin_lim, 2000);
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv, NULL);
    tp->threads = calloc((size_t)n_threads, sizeof *tp->threads);
    if (!tp->threads) { free(tp); return rlx_errorf(err, RLX_ENOMEM, "out of memory creating the thread pool"); }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a || pthread_create(&tp->threads[i], NULL, worker_main, a ? (a->tp = tp, a->ith = i, a) : NULL)) {
            free(a);
            tp->n = i;
            rlx_threadpool_free(tp);
            return rlx_errorf(err, RLX_ENOMEM, "cannot start CPU worker thread %d", i);
        }
    }
    *out = tp;
    return 0;
}

void rlx_threadpool_free(rlx_threadpool *tp)
{
    if (!tp) return;
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->stop, true);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 1; i < tp->n; i++) pthread_join(tp->threads[i], NULL);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv);
    free(tp->threads);
    free(tp);
}

int rlx_threadpool_size(const rlx_threadpool *tp) { return tp->n; }

void rlx_threadpool_run(rlx_threadpool *tp, rlx_task_fn fn, void *ctx)
{
    rlx_threadpool_run_n(tp, tp->n, fn, ctx);
}

void rlx_threadpool_run_n(rlx_threadpool *tp, int n, rlx_task_fn fn, void *ctx)
{
    if (n > tp->n) n = tp->n;
    if (n <= 1) { tp->active = 1; fn(ctx, 0, 1); return; }
    tp->fn = fn;
    tp->ctx = ctx;
    tp->active = n;
    atomic_store(&tp->bar_count, 0);
    atomic_store(&tp->finished, 0);
    pthread_mutex_lock(&tp->mu);
    atomic_fetch_add_explicit(&tp->generation, 1, memory_order_release);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    fn(ctx, 0, n);
    /* a worker the OS descheduled is waited for once here, not at every step */
    rlx_threadpool_wait(tp, &tp->finished, (unsigned)tp->n - 1);
}

/* The spin budget after a sleep of `slept` ns (see SPIN_MIN). */
static void adapt_spin(rlx_threadpool *tp, int lim, int64_t slept)
{
    /* racy read-modify-write between waiters is fine: it is only a hint */
    if (slept < SLEEP_SHORT_NS && lim < SPIN_MAX)
        atomic_store_explicit(&tp->spin_lim, lim * 2 > SPIN_MAX ? SPIN_MAX : lim * 2, memory_order_relaxed);
    else if (slept > SLEEP_LONG_NS && lim > SPIN_MIN)
        atomic_store_explicit(&tp->spin_lim, lim / 2 < SPIN_MIN ? SPIN_MIN : lim / 2, memory_order_relaxed);
}

void rlx_threadpool_done(rlx_threadpool *tp, _Atomic unsigned *word, unsigned n, unsigned target)
{
    /* seq_cst pair with the sleeper's increment-then-check: one of the two sees the other */
    const unsigned old = atomic_fetch_add(word, n);
    if (old < target && old + n >= target && atomic_load(&tp->sleepers)) bar_wake(word);
}

void rlx_threadpool_wait(rlx_threadpool *tp, _Atomic unsigned *word, unsigned target)
{
    if (atomic_load_explicit(word, memory_order_acquire) >= target) return;
    const int lim = atomic_load_explicit(&tp->spin_lim, memory_order_relaxed);
    for (int spins = 0; spins < lim; spins++) {
        if (atomic_load_explicit(word, memory_order_acquire) >= target) return;
        cpu_relax();
    }
    const int64_t t0 = now_ns();
    atomic_fetch_add(&tp->sleepers, 1);
    for (unsigned v; (v = atomic_load(word)) < target;) bar_sleep(word, v);
    atomic_fetch_sub(&tp->sleepers, 1);
    adapt_spin(tp, lim, now_ns() - t0);
}

void rlx_threadpool_barrier(rlx_threadpool *tp)
{
    if (tp->active <= 1) return;
    unsigned sense = atomic_load_explicit(&tp->bar_sense, memory_order_acquire);
    if (atomic_fetch_add_explicit(&tp->bar_count, 1, memory_order_acq_rel) == tp->active - 1) {
        atomic_store_explicit(&tp->bar_count, 0, memory_order_relaxed);
        /* seq_cst pair with the sleeper's increment-then-check: one of the two sees the other */
        atomic_fetch_add(&tp->bar_sense, 1);
        if (atomic_load(&tp->bar_sleepers)) bar_wake(&tp->bar_sense);
        return;
    }
    const int lim = atomic_load_explicit(&tp->spin_lim, memory_order_relaxed);
    for (int spins = 0; spins < lim; spins++) {
        if (atomic_load_explicit(&tp->bar_sense, memory_order_acquire) != sense) return;
        cpu_relax();
    }
    const int64_t t0 = now_ns();
    atomic_fetch_add(&tp->bar_sleepers, 1);
    while (atomic_load(&tp->bar_sense) == sense) bar_sleep(&tp->bar_sense, sense);
    atomic_fetch_sub(&tp->bar_sleepers, 1);
    adapt_spin(tp, lim, now_ns() - t0);
}
