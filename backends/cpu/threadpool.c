/* threadpool.c - spin-then-sleep worker pool with a sense-reversing barrier. */
#include "backends/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ITERS 20000

struct rlx_threadpool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint generation;     /* bumped for every run */
    atomic_int pending;         /* workers still running the current task */
    atomic_bool stop;
    rlx_task_fn fn;
    void *ctx;
    int active;                 /* threads taking part in the current task */
    /* barrier */
    atomic_int bar_count;
    atomic_uint bar_sense;
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
        atomic_fetch_sub_explicit(&tp->pending, 1, memory_order_acq_rel);
    }
}

int rlx_threadpool_create(rlx_threadpool **out, int n_threads, rlx_error *err)
{
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    if (n_threads > 256) n_threads = 256;
    rlx_threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) return rlx_errorf(err, RLX_ENOMEM, "out of memory creating the thread pool");
    tp->n = n_threads;
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
    atomic_store(&tp->pending, tp->n - 1);
    pthread_mutex_lock(&tp->mu);
    atomic_fetch_add_explicit(&tp->generation, 1, memory_order_release);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    fn(ctx, 0, n);
    while (atomic_load_explicit(&tp->pending, memory_order_acquire) > 0) cpu_relax();
}

void rlx_threadpool_barrier(rlx_threadpool *tp)
{
    if (tp->active <= 1) return;
    unsigned sense = atomic_load_explicit(&tp->bar_sense, memory_order_acquire);
    if (atomic_fetch_add_explicit(&tp->bar_count, 1, memory_order_acq_rel) == tp->active - 1) {
        atomic_store_explicit(&tp->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&tp->bar_sense, 1, memory_order_release);
        return;
    }
    int spins = 0;
    while (atomic_load_explicit(&tp->bar_sense, memory_order_acquire) == sense)
        if (++spins > 2000) sched_yield(); else cpu_relax();
}
