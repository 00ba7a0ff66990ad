/* test_kv.c - the KV block manager: refcounts, free list, content-hash registry, LRU eviction
 * of cached blocks, and the hash chain. */
#include "tests/rlx_test.h"
#include "engine/kv.h"

TEST(alloc_release_evict)
{
    rlx_kv_manager kv;
    rlx_error err = {0};
    ASSERT_EQ(rlx_kv_init(&kv, 4, 16, &err), 0);
    int32_t b[4];
    for (int i = 0; i < 4; i++) { b[i] = rlx_kv_alloc(&kv); ASSERT_EQ(b[i], i); }
    ASSERT_EQ(rlx_kv_alloc(&kv), -1);
    ASSERT_EQ(rlx_kv_used(&kv), 4);
    int32_t toks[16] = {1, 2, 3};
    uint64_t h0 = rlx_kv_hash(0, toks, 16), h1 = rlx_kv_hash(h0, toks, 16);
    ASSERT_NE(h0, h1);
    rlx_kv_register(&kv, b[0], h0);
    rlx_kv_register(&kv, b[1], h1);
    rlx_kv_release(&kv, b[1]); /* cached: LRU oldest */
    rlx_kv_release(&kv, b[0]); /* cached: newer */
    rlx_kv_release(&kv, b[2]); /* free */
    ASSERT_EQ(rlx_kv_available(&kv), 3);
    /* a lookup revives a cached block with a reference */
    ASSERT_EQ(rlx_kv_lookup(&kv, h0), b[0]);
    ASSERT_EQ(rlx_kv_lookup(&kv, 12345), -1);
    /* free blocks go first, then the least recently cached is evicted */
    ASSERT_EQ(rlx_kv_alloc(&kv), b[2]);
    ASSERT_EQ(rlx_kv_alloc(&kv), b[1]);
    ASSERT_EQ(rlx_kv_lookup(&kv, h1), -1); /* evicted with its hash */
    ASSERT_EQ(kv.evictions, 1);
    /* shared block: two references, released twice before it is reusable */
    rlx_kv_retain(&kv, b[0]);
    rlx_kv_release(&kv, b[0]);
    ASSERT_EQ(rlx_kv_available(&kv), 0);
    rlx_kv_release(&kv, b[0]);
    ASSERT_EQ(rlx_kv_available(&kv), 1);
    rlx_kv_release(&kv, -5); /* ignored */
    rlx_kv_free(&kv);
}

TEST(hash_table_churn)
{
    /* many register / evict cycles keep lookups exact (backward-shift deletion) */
    rlx_kv_manager kv;
    rlx_error err = {0};
    ASSERT_EQ(rlx_kv_init(&kv, 64, 4, &err), 0);
    uint64_t hashes[64] = {0};
    for (int round = 0; round < 2000; round++) {
        int32_t b = rlx_kv_alloc(&kv);
        ASSERT(b >= 0);
        int32_t t[4] = {round, round * 3, round * 7, 1};
        uint64_t h = rlx_kv_hash((uint64_t)round, t, 4);
        rlx_kv_register(&kv, b, h);
        hashes[b] = h;
        rlx_kv_release(&kv, b);
        for (int32_t i = 0; i < 64; i++)
            if (kv.hash[i]) {
                int32_t got = rlx_kv_lookup(&kv, kv.hash[i]);
                ASSERT_EQ(got, i);
                rlx_kv_release(&kv, got);
            }
    }
    (void)hashes;
    rlx_kv_free(&kv);
}

TEST(bad_init)
{
    rlx_kv_manager kv;
    rlx_error err = {0};
    ASSERT_EQ(rlx_kv_init(&kv, 0, 16, &err), RLX_EINVAL);
}

TEST_MAIN(TEST_ENTRY(alloc_release_evict), TEST_ENTRY(hash_table_churn), TEST_ENTRY(bad_init))
