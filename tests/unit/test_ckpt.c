/* test_ckpt.c - the recurrent-state checkpoint cache (engine/ckpt.h): keyed by (hash,
 * position), least recently used evicted first under a tiny budget, found entries refreshed,
 * hits and evictions counted, a budget below one entry disables it, drop forgets. */
#include "tests/rlx_test.h"
#include "engine/ckpt.h"

static void fill(uint8_t *p, size_t n, uint8_t v) { memset(p, v, n); }

TEST(lru_under_a_tiny_budget)
{
    rlx_ckpt_cache c;
    rlx_error err = {0};
    ASSERT_EQ(rlx_ckpt_init(&c, 100, 350, &err), 0); /* three entries of 100 bytes */
    ASSERT(rlx_ckpt_enabled(&c));
    ASSERT_EQ(c.max_entries, 3);
    for (uint64_t h = 1; h <= 3; h++) {
        uint8_t *p = rlx_ckpt_put(&c, h, 16 * (int32_t)h);
        ASSERT(p != NULL);
        fill(p, 100, (uint8_t)h);
    }
    ASSERT_EQ(c.n_entries, 3);
    ASSERT_EQ(rlx_ckpt_bytes(&c), 300);
    /* key is (hash, position): the same hash at another position is another checkpoint */
    ASSERT(rlx_ckpt_find(&c, 1, 32, true) == NULL);
    ASSERT_EQ(c.hits, 0);
    /* finding 1 makes 2 the least recently used */
    const uint8_t *b = rlx_ckpt_find(&c, 1, 16, true);
    ASSERT(b && b[0] == 1 && b[99] == 1);
    ASSERT_EQ(c.hits, 1);
    uint8_t *p = rlx_ckpt_put(&c, 4, 64);
    ASSERT(p != NULL);
    fill(p, 100, 4);
    ASSERT_EQ(c.n_entries, 3);
    ASSERT_EQ(c.evictions, 1);
    ASSERT(!rlx_ckpt_contains(&c, 2, 32));
    ASSERT(rlx_ckpt_contains(&c, 1, 16) && rlx_ckpt_contains(&c, 3, 48) && rlx_ckpt_contains(&c, 4, 64));
    /* contains does not refresh: 3 is now the oldest, then 1 */
    p = rlx_ckpt_put(&c, 5, 80);
    ASSERT(p != NULL);
    fill(p, 100, 5);
    ASSERT(!rlx_ckpt_contains(&c, 3, 48));
    ASSERT_EQ(c.evictions, 2);
    /* putting a held key returns its buffer without evicting anything */
    p = rlx_ckpt_put(&c, 4, 64);
    ASSERT(p && p[0] == 4);
    ASSERT_EQ(c.evictions, 2);
    ASSERT_EQ(c.n_entries, 3);
    rlx_ckpt_drop(&c, 4, 64);
    rlx_ckpt_drop(&c, 4, 64); /* absent: no-op */
    ASSERT_EQ(c.n_entries, 2);
    ASSERT(!rlx_ckpt_contains(&c, 4, 64));
    b = rlx_ckpt_find(&c, 5, 80, false);
    ASSERT(b && b[50] == 5);
    ASSERT_EQ(c.hits, 1); /* not counted */
    rlx_ckpt_free(&c);
    ASSERT_EQ(c.n_entries, 0);
}

TEST(disabled_below_one_entry)
{
    rlx_ckpt_cache c;
    rlx_error err = {0};
    ASSERT_EQ(rlx_ckpt_init(&c, 100, 99, &err), 0);
    ASSERT(!rlx_ckpt_enabled(&c));
    ASSERT(rlx_ckpt_put(&c, 1, 16) == NULL);
    ASSERT(rlx_ckpt_find(&c, 1, 16, true) == NULL);
    ASSERT(!rlx_ckpt_contains(&c, 1, 16));
    rlx_ckpt_drop(&c, 1, 16);
    rlx_ckpt_free(&c);
    ASSERT_EQ(rlx_ckpt_init(&c, 100, 0, &err), 0);
    ASSERT(!rlx_ckpt_enabled(&c));
    rlx_ckpt_free(&c);
}

/* Many entries in few buckets: colliding keys stay apart. */
TEST(many_entries)
{
    rlx_ckpt_cache c;
    rlx_error err = {0};
    ASSERT_EQ(rlx_ckpt_init(&c, 8, 8 * 1000, &err), 0);
    for (uint64_t i = 0; i < 1500; i++) {
        uint8_t *p = rlx_ckpt_put(&c, i << 32 | i, (int32_t)i);
        ASSERT(p != NULL);
        memcpy(p, &i, 8);
    }
    ASSERT_EQ(c.n_entries, 1000);
    ASSERT_EQ(c.evictions, 500);
    for (uint64_t i = 0; i < 1500; i++) {
        const uint8_t *p = rlx_ckpt_find(&c, i << 32 | i, (int32_t)i, true);
        if (i < 500) { ASSERT(p == NULL); continue; }
        uint64_t v;
        ASSERT(p != NULL);
        memcpy(&v, p, 8);
        ASSERT_EQ(v, i);
    }
    ASSERT_EQ(c.hits, 1000);
    rlx_ckpt_free(&c);
}

TEST_MAIN(TEST_ENTRY(lru_under_a_tiny_budget), TEST_ENTRY(disabled_below_one_entry), TEST_ENTRY(many_entries))
