/* test_model_policy.c - the limits on loaded models and the least-recently-used eviction
 * (server/model_policy.c). */
#include "tests/rlx_test.h"
#include "server/model_policy.h"

#define R RLX_MODEL_READY
#define U RLX_MODEL_UNLOADED

static bool plan(const rlx_model_view *v, size_t n, size_t target, int max, uint64_t bytes, size_t *victims, size_t *nv)
{
    rlx_model_limits lim = {.max_loaded = max, .max_bytes = bytes};
    return rlx_model_plan_load(v, n, target, &lim, victims, nv);
}

TEST(no_limits_evict_nothing)
{
    rlx_model_view v[4] = {{R, false, 1, 100}, {R, false, 2, 100}, {R, false, 3, 100}, {U, false, 0, 100}};
    size_t vic[4], nv = 99;
    ASSERT(plan(v, 4, 3, 0, 0, vic, &nv));
    ASSERT_EQ(nv, 0);
    ASSERT(plan(v, 4, 3, 4, 0, vic, &nv)); /* room for a fourth */
    ASSERT_EQ(nv, 0);
}

TEST(least_recently_used_idle_goes)
{
    /* three loaded, the limit is 3: the one used longest ago goes, whatever its place */
    rlx_model_view v[4] = {{R, false, 20, 1}, {R, false, 5, 1}, {R, false, 30, 1}, {U, false, 0, 1}};
    size_t vic[4], nv = 0;
    ASSERT(plan(v, 4, 3, 3, 0, vic, &nv));
    ASSERT_EQ(nv, 1);
    ASSERT_EQ(vic[0], 1);
    /* limit 1: every other loaded one goes, oldest first */
    ASSERT(plan(v, 4, 3, 1, 0, vic, &nv));
    ASSERT_EQ(nv, 3);
    ASSERT_EQ(vic[0], 1);
    ASSERT_EQ(vic[1], 0);
    ASSERT_EQ(vic[2], 2);
}

TEST(busy_models_stay)
{
    /* the oldest is busy (a request runs or waits on it): the next oldest idle one goes */
    rlx_model_view v[4] = {{R, false, 20, 1}, {R, true, 5, 1}, {R, false, 30, 1}, {U, false, 0, 1}};
    size_t vic[4], nv = 0;
    ASSERT(plan(v, 4, 3, 3, 0, vic, &nv));
    ASSERT_EQ(nv, 1);
    ASSERT_EQ(vic[0], 0);
    /* all busy: no room, the load cannot start */
    for (int i = 0; i < 3; i++) v[i].busy = true;
    nv = 42;
    ASSERT(!plan(v, 4, 3, 3, 0, vic, &nv));
    ASSERT_EQ(nv, 0);
}

TEST(loading_models_count_and_stay)
{
    /* a model loading (or queued) counts against the limit and is never evicted */
    rlx_model_view v[3] = {{RLX_MODEL_LOADING, false, 0, 1}, {RLX_MODEL_QUEUED, false, 0, 1}, {U, false, 0, 1}};
    size_t vic[3], nv = 0;
    ASSERT(!plan(v, 3, 2, 2, 0, vic, &nv));
    ASSERT(plan(v, 3, 2, 3, 0, vic, &nv));
    ASSERT_EQ(nv, 0);
    /* an unloading or failed model does not count */
    rlx_model_view w[3] = {{RLX_MODEL_UNLOADING, false, 0, 1}, {RLX_MODEL_FAILED, false, 0, 1}, {U, false, 0, 1}};
    ASSERT(plan(w, 3, 2, 1, 0, vic, &nv));
    ASSERT_EQ(nv, 0);
}

TEST(memory_budget)
{
    /* 1000 bytes allowed: 400 + 300 loaded, 500 wanted: the LRU (300, used at 1) goes */
    rlx_model_view v[3] = {{R, false, 9, 400}, {R, false, 1, 300}, {U, false, 0, 500}};
    size_t vic[3], nv = 0;
    ASSERT(plan(v, 3, 2, 0, 1000, vic, &nv));
    ASSERT_EQ(nv, 1);
    ASSERT_EQ(vic[0], 1);
    /* 700 wanted: both must go, oldest first */
    v[2].bytes = 700;
    ASSERT(plan(v, 3, 2, 0, 1000, vic, &nv));
    ASSERT_EQ(nv, 2);
    ASSERT_EQ(vic[0], 1);
    ASSERT_EQ(vic[1], 0);
    /* bigger than the budget on its own: never */
    v[2].bytes = 1001;
    ASSERT(!plan(v, 3, 2, 0, 1000, vic, &nv));
    /* both limits: the count needs one gone, the bytes two */
    v[2].bytes = 700;
    ASSERT(plan(v, 3, 2, 2, 1000, vic, &nv));
    ASSERT_EQ(nv, 2);
}

TEST(can_start_waits_for_unloads)
{
    /* the evicted model still unloading holds its memory: the queued load waits for it */
    rlx_model_view v[3] = {{R, false, 1, 1}, {RLX_MODEL_UNLOADING, false, 0, 1}, {RLX_MODEL_QUEUED, false, 0, 1}};
    rlx_model_limits lim = {.max_loaded = 2};
    ASSERT(!rlx_model_can_start(v, 3, 2, &lim));
    v[1].state = U;
    ASSERT(rlx_model_can_start(v, 3, 2, &lim));
    lim = (rlx_model_limits){.max_bytes = 2};
    v[1] = (rlx_model_view){RLX_MODEL_LOADING, false, 0, 1};
    ASSERT(!rlx_model_can_start(v, 3, 2, &lim));
    lim.max_bytes = 3;
    ASSERT(rlx_model_can_start(v, 3, 2, &lim));
}

TEST(state_names)
{
    ASSERT_STR_EQ(rlx_model_state_name(RLX_MODEL_UNLOADED), "unloaded");
    ASSERT_STR_EQ(rlx_model_state_name(RLX_MODEL_QUEUED), "loading");
    ASSERT_STR_EQ(rlx_model_state_name(RLX_MODEL_LOADING), "loading");
    ASSERT_STR_EQ(rlx_model_state_name(RLX_MODEL_READY), "loaded");
    ASSERT_STR_EQ(rlx_model_state_name(RLX_MODEL_UNLOADING), "unloading");
    ASSERT_STR_EQ(rlx_model_state_name(RLX_MODEL_FAILED), "failed");
}

TEST_MAIN(TEST_ENTRY(no_limits_evict_nothing), TEST_ENTRY(least_recently_used_idle_goes), TEST_ENTRY(busy_models_stay),
          TEST_ENTRY(loading_models_count_and_stay), TEST_ENTRY(memory_budget), TEST_ENTRY(can_start_waits_for_unloads),
          TEST_ENTRY(state_names))
