/* gaside.c - the constrained-sampling helper beside the forward pass (see gaside.h). */
#include "engine/gaside.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct rlx__gaside {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu: the hand-over */
    bool work;             /* begin handed work over, not yet finished */
    bool quit;
    /* the work, written by begin before `work` is set, read by the helper */
    rlx_grammar_cache *cache;
    const rlx_grammar_vocab *vocab;
    rlx_sampler *const *samplers;
    size_t n;
    atomic_bool stop;
    rlx__gaside_stats stats; /* written by the helper while working, read by the worker after end */
};

bool rlx__gaside_wanted(int force, const char *backend, int n_threads, int n_cpus)
{
    if (force) return force > 0;
    if (backend && backend[0] && strcmp(backend, "cpu")) return true;
    return n_threads > 0 && n_cpus > n_threads;
}

static void run(rlx__gaside *a)
{
    double t0 = rlx_now();
    for (size_t i = 0; i < a->n && !atomic_load_explicit(&a->stop, memory_order_relaxed); i++) {
        (void)rlx_sampler_prefetch(a->samplers[i]); /* best effort: a failure is the mask's to report */
        a->stats.prefetches++;
    }
    if (a->cache && a->vocab && !atomic_load_explicit(&a->stop, memory_order_relaxed)) {
        int64_t n = rlx_grammar_cache_prepare_until(a->cache, a->vocab, &a->stop);
        if (n > 0) a->stats.tables += n; /* a failed walk ends (grammar.h); masks build what it lacks */
    }
    a->stats.busy_s += rlx_now() - t0;
    a->stats.runs++;
}

static void *helper_main(void *arg)
{
    rlx__gaside *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->work && !a->quit) pthread_cond_wait(&a->cv, &a->mu);
        if (a->quit) break;
        pthread_mutex_unlock(&a->mu);
        run(a);
        pthread_mutex_lock(&a->mu);
        a->work = false;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

rlx__gaside *rlx__gaside_new(void)
{
    rlx__gaside *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    atomic_init(&a->stop, false);
    if (pthread_mutex_init(&a->mu, NULL)) {
        free(a);
        return NULL;
    }
    if (pthread_cond_init(&a->cv, NULL)) {
        pthread_mutex_destroy(&a->mu);
        free(a);
        return NULL;
    }
    if (pthread_create(&a->thread, NULL, helper_main, a)) {
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
        free(a);
        return NULL;
    }
    return a;
}

void rlx__gaside_free(rlx__gaside *a)
{
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    a->quit = true;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

void rlx__gaside_begin(rlx__gaside *a, rlx_grammar_cache *c, const rlx_grammar_vocab *v, rlx_sampler *const *samplers,
                       size_t n)
{
    pthread_mutex_lock(&a->mu);
    a->cache = c;
    a->vocab = v;
    a->samplers = samplers;
    a->n = n;
    atomic_store(&a->stop, false);
    a->work = true;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

void rlx__gaside_end(rlx__gaside *a)
{
    atomic_store(&a->stop, true);
    pthread_mutex_lock(&a->mu);
    while (a->work) pthread_cond_wait(&a->cv, &a->mu);
    a->samplers = NULL;
    a->n = 0;
    pthread_mutex_unlock(&a->mu);
}

void rlx__gaside_get_stats(const rlx__gaside *a, rlx__gaside_stats *out) { *out = a->stats; }
