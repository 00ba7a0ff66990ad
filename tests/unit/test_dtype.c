/* test_dtype.c - element type table and half/bfloat16 conversions. */
#include "tests/rlx_test.h"
#include "backends/dtype.h"

TEST(table_sizes)
{
    ASSERT_EQ(rlx_row_bytes(RLX_Q8_0, 64), 68);
    ASSERT_EQ(rlx_row_bytes(RLX_Q4_K, 512), 288);
    ASSERT_EQ(rlx_row_bytes(RLX_Q6_K, 256), 210);
    ASSERT_EQ(rlx_row_bytes(RLX_Q8_0, 33), 0);
    ASSERT_EQ(rlx_row_bytes(RLX_F16, 3), 6);
    ASSERT(rlx_dtype_get(4) == NULL);
    ASSERT(rlx_dtype_get(-1) == NULL);
    ASSERT(rlx_dtype_get(1000) == NULL);
    ASSERT_EQ(rlx_dtype_from_name("Q4_K"), RLX_Q4_K);
    ASSERT_EQ(rlx_dtype_from_name("nope"), -1);
}

TEST(half_roundtrip)
{
    ASSERT_EQ(rlx_f32_to_f16(1.0f), 0x3c00);
    ASSERT_EQ(rlx_f32_to_f16(-2.0f), 0xc000);
    ASSERT_EQ(rlx_f32_to_f16(65504.0f), 0x7bff);
    ASSERT_NEAR(rlx_f16_to_f32(0x3555), 0.333251953125, 0);
    ASSERT_NEAR(rlx_f16_to_f32(0x0001), 5.9604644775390625e-08, 0); /* subnormal */
    for (uint32_t h = 0; h < 0x7c00; h++) ASSERT_EQ(rlx_f32_to_f16(rlx_f16_to_f32((uint16_t)h)), h);
    /* against the compiler's own conversion for every half value and for rounding ties */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN payloads */
        _Float16 v;
        uint16_t hh = (uint16_t)h;
        memcpy(&v, &hh, 2);
        ASSERT_EQ(rlx__f32_as_u32(rlx_f16_to_f32(hh)), rlx__f32_as_u32((float)v));
    }
    uint32_t x = 12345;
    for (int i = 0; i < 200000; i++) {
        x = x * 1664525u + 1013904223u;
        float f = rlx__u32_as_f32(x);
        if (f != f) continue;
        _Float16 v = (_Float16)f;
        uint16_t want;
        memcpy(&want, &v, 2);
        ASSERT_EQ(rlx_f32_to_f16(f), want);
    }
    ASSERT_EQ(rlx_f32_to_f16(65520.0f), 0x7c00); /* rounds to infinity */
    ASSERT_EQ(rlx_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00); /* tie to even */
}

TEST(bfloat16)
{
    ASSERT_EQ(rlx_f32_to_bf16(1.0f), 0x3f80);
    ASSERT_NEAR(rlx_bf16_to_f32(0x4049), 3.140625, 0);
    /* round to nearest even: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 */
    ASSERT_EQ(rlx_f32_to_bf16(1.00390625f), 0x3f80);
    ASSERT_EQ(rlx_f32_to_bf16(1.01171875f), 0x3f82);
}

TEST_MAIN(TEST_ENTRY(table_sizes), TEST_ENTRY(half_roundtrip), TEST_ENTRY(bfloat16))
