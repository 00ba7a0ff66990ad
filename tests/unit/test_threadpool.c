/* test_threadpool.c - every thread runs the task once per run, barriers order phases, and
 * run_n limits the participants. */
#include "tests/rlx_test.h"
#include "backends/cpu/threadpool.h"

#include <stdatomic.h>

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

TEST_MAIN(TEST_ENTRY(runs_and_barriers))
