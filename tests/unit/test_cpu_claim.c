/* test_cpu_claim.c - rlx_cpu_claim_part (backends/cpu/cpu_ops.h): units handed out by parts,
 * one part per thread. Every unit goes to exactly one claim whatever the threads' pace, a
 * thread takes its own part first and in order, and parts with no units (fewer units than
 * threads) are skipped. */
#include "tests/rlx_test.h"
#include "backends/cpu/cpu_ops.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>

static void reset(_Atomic int32_t *part)
{
    for (int q = 0; q < RLX_CPU_PARTS; q++) atomic_store(&part[q], 0);
}

TEST(one_thread_claims_in_order)
{
    _Atomic int32_t part[RLX_CPU_PARTS];
    for (int64_t n = 0; n < 40; n += 7) {
        reset(part);
        int k = 0;
        for (int64_t u = 0; u < n; u++) ASSERT_EQ(rlx_cpu_claim_part(part, n, 0, 1, &k), u);
        ASSERT_EQ(rlx_cpu_claim_part(part, n, 0, 1, &k), -1);
        ASSERT_EQ(rlx_cpu_claim_part(part, n, 0, 1, &k), -1); /* stays exhausted */
    }
}

TEST(own_part_first_then_the_next_ones)
{
    _Atomic int32_t part[RLX_CPU_PARTS];
    /* a thread alone takes its part in order, then the following parts wrapping round */
    const int64_t n = 10;
    for (int ith = 0; ith < 3; ith++) {
        reset(part);
        int k = 0;
        int64_t got[10];
        for (int i = 0; i < 10; i++) got[i] = rlx_cpu_claim_part(part, n, ith, 3, &k);
        ASSERT_EQ(rlx_cpu_claim_part(part, n, ith, 3, &k), -1);
        /* parts of 10 units in 3: [0, 3) [3, 6) [6, 10) */
        const int64_t lo[3] = {0, 3, 6}, hi[3] = {3, 6, 10};
        int i = 0;
        for (int s = 0; s < 3; s++) {
            const int q = (ith + s) % 3;
            for (int64_t u = lo[q]; u < hi[q]; u++, i++) ASSERT_EQ(got[i], u);
        }
    }
    /* two threads in turns: each keeps to its own part until it runs out */
    reset(part);
    int k0 = 0, k1 = 0;
    ASSERT_EQ(rlx_cpu_claim_part(part, 8, 0, 2, &k0), 0);
    ASSERT_EQ(rlx_cpu_claim_part(part, 8, 1, 2, &k1), 4);
    ASSERT_EQ(rlx_cpu_claim_part(part, 8, 1, 2, &k1), 5);
    ASSERT_EQ(rlx_cpu_claim_part(part, 8, 1, 2, &k1), 6);
    ASSERT_EQ(rlx_cpu_claim_part(part, 8, 1, 2, &k1), 7);
    ASSERT_EQ(rlx_cpu_claim_part(part, 8, 1, 2, &k1), 1); /* helps with part 0 */
    ASSERT_EQ(rlx_cpu_claim_part(part, 8, 0, 2, &k0), 2);
    ASSERT_EQ(rlx_cpu_claim_part(part, 8, 0, 2, &k0), 3);
    ASSERT_EQ(rlx_cpu_claim_part(part, 8, 0, 2, &k0), -1);
    ASSERT_EQ(rlx_cpu_claim_part(part, 8, 1, 2, &k1), -1);
}

TEST(fewer_units_than_parts)
{
    _Atomic int32_t part[RLX_CPU_PARTS];
    for (int nth = 2; nth <= 12; nth += 5)
        for (int64_t n = 0; n < RLX_CPU_PARTS; n++)
            for (int ith = 0; ith < nth; ith++) {
                reset(part);
                int k = 0, seen[RLX_CPU_PARTS] = {0};
                for (int64_t u; (u = rlx_cpu_claim_part(part, n, ith, nth, &k)) >= 0;) {
                    ASSERT(u < n);
                    seen[u]++;
                }
                for (int64_t u = 0; u < n; u++) ASSERT_EQ(seen[u], 1);
            }
}

/* threads claiming at once, some slower than others */
enum { MAXN = 5000 };
typedef struct {
    _Atomic int32_t *part;
    _Atomic int *seen;
    int64_t n;
    int ith, nth;
    int64_t first;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *a = p;
    int k = 0;
    a->first = -2;
    for (int64_t u; (u = rlx_cpu_claim_part(a->part, a->n, a->ith, a->nth, &k)) >= 0;) {
        if (a->first == -2) a->first = u;
        if (u < 0 || u >= a->n) { a->first = -3; break; }
        atomic_fetch_add(&a->seen[u], 1);
        if (a->ith % 3 == 1) sched_yield(); /* a slow thread: the others take its part's rest */
    }
    return NULL;
}

TEST(concurrent_threads_claim_each_unit_once)
{
    static _Atomic int seen[MAXN];
    _Atomic int32_t part[RLX_CPU_PARTS];
    const int nths[] = {2, 3, 8, 12};
    const int64_t ns[] = {1, 7, 64, 1000, MAXN};
    for (size_t a = 0; a < sizeof nths / sizeof *nths; a++)
        for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
            for (int round = 0; round < 4; round++) {
                const int nth = nths[a];
                const int64_t n = ns[b];
                reset(part);
                for (int64_t u = 0; u < n; u++) atomic_store(&seen[u], 0);
                pthread_t th[12];
                worker_arg args[12];
                for (int i = 0; i < nth; i++) {
                    args[i] = (worker_arg){.part = part, .seen = seen, .n = n, .ith = i, .nth = nth};
                    ASSERT_EQ(pthread_create(&th[i], NULL, worker, &args[i]), 0);
                }
                for (int i = 0; i < nth; i++) pthread_join(th[i], NULL);
                for (int64_t u = 0; u < n; u++) ASSERT_MSG(atomic_load(&seen[u]) == 1, "nth %d n %lld: unit %lld claimed %d times", nth, (long long)n, (long long)u, atomic_load(&seen[u]));
                for (int i = 0; i < nth; i++) ASSERT(args[i].first != -3);
            }
}

TEST_MAIN(TEST_ENTRY(one_thread_claims_in_order), TEST_ENTRY(own_part_first_then_the_next_ones),
          TEST_ENTRY(fewer_units_than_parts), TEST_ENTRY(concurrent_threads_claim_each_unit_once))
