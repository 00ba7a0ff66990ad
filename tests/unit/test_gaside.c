/* test_gaside.c - the helper beside the forward pass (engine/gaside.h): where it is wanted, and
 * its hand-over (begin / end) many times over, with no work and with samplers to prefetch for.
 * What it builds in a worker is test_worker_grammar's `helper_beside_the_forward_pass_...`. */
#include "tests/rlx_test.h"
#include "engine/gaside.h"
#include "engine/sample.h"

#include <time.h>

TEST(wanted_where_the_backend_leaves_a_core)
{
    ASSERT(rlx__gaside_wanted(1, "cpu", 2, 2));    /* on */
    ASSERT(!rlx__gaside_wanted(-1, "cuda", 1, 16)); /* off */
    ASSERT(rlx__gaside_wanted(0, "cuda", 16, 16));  /* a GPU backend */
    ASSERT(rlx__gaside_wanted(0, "vulkan", 2, 2));
    ASSERT(!rlx__gaside_wanted(0, "cpu", 2, 2));    /* every core computes */
    ASSERT(!rlx__gaside_wanted(0, NULL, 2, 2));
    ASSERT(!rlx__gaside_wanted(0, "", 4, 4));
    ASSERT(rlx__gaside_wanted(0, "cpu", 1, 2));     /* --threads 1 on two cores */
    ASSERT(rlx__gaside_wanted(0, NULL, 3, 4));
    ASSERT(!rlx__gaside_wanted(0, "cpu", 8, 4));    /* more threads than cores */
}

TEST(hand_over_many_times)
{
    rlx__gaside *a = rlx__gaside_new();
    ASSERT(a);
    rlx_sampling_params p = {.temperature = 1.0f, .top_k = 40, .top_p = 1.0f, .repetition_penalty = 1.0f,
                             .penalty_last_n = 64, .has_seed = true, .seed = 1};
    rlx_sampler *s[3];
    for (int i = 0; i < 3; i++) ASSERT((s[i] = rlx_sampler_new(&p, 64)) != NULL);
    for (int i = 0; i < 2000; i++) {
        rlx__gaside_begin(a, NULL, NULL, s, (size_t)(i % 4)); /* chains without constraints: nothing to build */
        if (i % 2) rlx__gaside_end(a);                         /* at once, or after it is done */
        else {
            struct timespec nap = {0, 1000};
            nanosleep(&nap, NULL);
            rlx__gaside_end(a);
        }
    }
    rlx__gaside_stats st;
    rlx__gaside_get_stats(a, &st);
    ASSERT_EQ(st.runs, 2000);
    ASSERT(st.prefetches <= 3000); /* 0+1+2+3 per four runs at most; end may call a run off early */
    ASSERT_EQ(st.tables, 0);
    rlx__gaside_free(a);
    rlx__gaside_free(NULL);
    for (int i = 0; i < 3; i++) rlx_sampler_free(s[i]);
}

TEST_MAIN(TEST_ENTRY(wanted_where_the_backend_leaves_a_core), TEST_ENTRY(hand_over_many_times))
