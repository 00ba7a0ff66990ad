/* test_threadpool.c - every thread runs the task once per run, barriers order phases, run_n
 * limits the participants, and work counters: every unit is claimed once, a wait returns only
 * once all units are complete (their writes visible), and a thread that claims nothing (as one
 * the OS has descheduled) does not hold the others. */
#include "tests/rlx_test.h"
#include "backends/cpu/threadpool.h"

#include <stdatomic.h>
#include <string.h>

typedef struct ctx { rlx_threadpool *tp; atomic_int calls; atomic_int phase1; int bad; int seen_nth; } ctx;

static void task(void *p, int ith, int nth)
{
    ctx *c = p;
    (void)ith;
    c->seen_nth = nth;
    atomic_fetch_add(&c->calls, 1);
    atomic_fetch_add(&c->phase1, 1);
    rlx_threadpool_barrier(c->tp);
    if (atomic_load(&c->phase1) != nth) c->bad = 1; /* everyone finished phase 1 */
    rlx_threadpool_barrier(c->tp);
}

TEST(runs_and_barriers)
{
    rlx_threadpool *tp;
    rlx_error err = {0};
    ASSERT_EQ(rlx_threadpool_create(&tp, 3, &err), 0);
    ASSERT_EQ(rlx_threadpool_size(tp), 3);
    for (int round = 0; round < 200; round++) {
        ctx c = {.tp = tp};
        rlx_threadpool_run(tp, task, &c);
        ASSERT_EQ(atomic_load(&c.calls), 3);
        ASSERT_EQ(c.bad, 0);
        ctx d = {.tp = tp};
        rlx_threadpool_run_n(tp, 1 + round % 3, task, &d);
        ASSERT_EQ(atomic_load(&d.calls), 1 + round % 3);
        ASSERT_EQ(d.seen_nth, 1 + round % 3);
        ASSERT_EQ(d.bad, 0);
    }
    rlx_threadpool_free(tp);
}

#define UNITS 96

typedef struct wctx {
    rlx_threadpool *tp;
    _Atomic int64_t next[2];
    _Atomic unsigned done[2];
    int value[UNITS];          /* phase 0 writes, phase 1 reads (plain memory) */
    int sum[UNITS];
    atomic_int claims[UNITS];
    atomic_int absent_ran;
    int bad;
} wctx;

static void spin_a_little(int n)
{
    volatile int x = 0;
    for (int i = 0; i < n; i++) x += i;
}

/* value[u] = u + 1, so sum[u] is this when every value was visible */
static int want_sum(int u) { return (u + 1) + (u + 1) % UNITS + 1 + (u + UNITS - 1) % UNITS + 1; }

static void work_task(void *p, int ith, int nth)
{
    wctx *c = p;
    if (nth > 2 && ith == nth - 1) {
        /* the absent thread: only looks once the others have completed both phases */
        rlx_threadpool_wait(c->tp, &c->done[1], UNITS);
        if (atomic_fetch_add(&c->next[0], 1) < UNITS || atomic_fetch_add(&c->next[1], 1) < UNITS) c->bad = 1;
        for (int u = 0; u < UNITS; u++)
            if (c->sum[u] != want_sum(u)) c->bad = 2;
        atomic_store(&c->absent_ran, 1);
        return;
    }
    for (int64_t u; (u = atomic_fetch_add_explicit(&c->next[0], 1, memory_order_relaxed)) < UNITS;) {
        spin_a_little((int)(u % 7) * 300);
        c->value[u] = (int)u + 1;
        atomic_fetch_add(&c->claims[u], 1);
        rlx_threadpool_done(c->tp, &c->done[0], 1, UNITS);
    }
    rlx_threadpool_wait(c->tp, &c->done[0], UNITS);
    /* phase 1 reads phase 0's values written by other threads */
    for (int64_t u; (u = atomic_fetch_add_explicit(&c->next[1], 1, memory_order_relaxed)) < UNITS;) {
        c->sum[u] = c->value[u] + c->value[(u + 1) % UNITS] + c->value[(u + UNITS - 1) % UNITS];
        rlx_threadpool_done(c->tp, &c->done[1], 1, UNITS);
    }
}

TEST(work_counters)
{
    for (int n = 2; n <= 4; n++) {
        rlx_threadpool *tp;
        rlx_error err = {0};
        ASSERT_EQ(rlx_threadpool_create(&tp, n, &err), 0);
        for (int round = 0; round < 300; round++) {
            static wctx c;
            memset(&c, 0, sizeof c);
            c.tp = tp;
            rlx_threadpool_run(tp, work_task, &c);
            ASSERT_EQ(c.bad, 0);
            for (int u = 0; u < UNITS; u++) {
                ASSERT_EQ(atomic_load(&c.claims[u]), 1);
                ASSERT_EQ(c.sum[u], want_sum(u));
            }
            ASSERT_EQ(atomic_load(&c.done[0]), UNITS);
            ASSERT_EQ(atomic_load(&c.absent_ran), n > 2);
        }
        rlx_threadpool_free(tp);
    }
}

TEST_MAIN(TEST_ENTRY(runs_and_barriers), TEST_ENTRY(work_counters))
