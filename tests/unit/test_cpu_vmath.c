/* test_cpu_vmath.c - exp and SwiGLU as llama.cpp's x86 CPU backend computes them (ggml_v_expf,
 * ggml_v_silu; libm for the tail of a row past its last multiple of 16). The expected bits were
 * produced by llama.cpp's own CPU library (ggml_vec_soft_max_f32 with max 0, and
 * ggml_vec_swiglu_f32 over a 20-value row); several differ from libm's expf in the last bit,
 * which is what this pins down. Every kernel path must give them. */
#include "tests/rlx_test.h"
#include "backends/backend.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"

static const struct { float x; uint32_t want; } exp_ref[] = {
    {0x0p+0f, 0x3f800000}, {-0x1p-1f, 0x3f1b4597}, {0x1p+0f, 0x402df855}, {-0x1p+0f, 0x3ebc5ab3},
    {0x1.62e43p-1f, 0x40000000}, {-0x1.921fb6p+1f, 0x3d310113}, {0x1.5p+3f, 0x470ddb80}, {-0x1.44p+4f, 0x30dc9eef},
    {0x1.62p+6f, 0x7f4cdcc3}, {-0x1.5cp+6f, 0x00b33686}, {-0x1.9p+6f, 0x0000001b}, {-0x1.ap+6f, 0x00000000},
    {0x1.f9adbcp-4f, 0x3f90d1be}, {-0x1.4f8b58p-17f, 0x3f7fff58}, {0x1.6p+2f, 0x4374b123}, {-0x1.bp+2f, 0x3a997833},
};

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void exp16_512(const float *x, float *y)
{
    _mm512_storeu_ps(y, rlx__vexp512(_mm512_loadu_ps(x)));
}

__attribute__((target("avx2,fma"))) static void exp8_256(const float *x, float *y)
{
    _mm256_storeu_ps(y, rlx__vexp256(_mm256_loadu_ps(x)));
}
#endif

TEST(exp_matches_llama_cpp)
{
    int differs_from_libm = 0;
    float x[16], y[16];
    for (size_t i = 0; i < RLX_ARRAY_LEN(exp_ref); i++) {
        x[i] = exp_ref[i].x;
        ASSERT_MSG(bits(rlx__vexp(x[i])) == exp_ref[i].want, "exp(%a): 0x%08x, llama.cpp 0x%08x", x[i], bits(rlx__vexp(x[i])),
                   exp_ref[i].want);
        differs_from_libm += bits(expf(x[i])) != exp_ref[i].want;
    }
    ASSERT(differs_from_libm >= 5); /* the test would not notice libm otherwise */
#if defined(__x86_64__)
    if (rlx_cpu_has_path("avx512")) {
        exp16_512(x, y);
        for (int i = 0; i < 16; i++) ASSERT_MSG(bits(y[i]) == exp_ref[i].want, "avx512 exp(%a)", x[i]);
    }
    if (rlx_cpu_has_path("avx2"))
        for (int h = 0; h < 2; h++) {
            exp8_256(x + 8 * h, y);
            for (int i = 0; i < 8; i++) ASSERT_MSG(bits(y[i]) == exp_ref[8 * h + i].want, "avx2 exp(%a)", x[8 * h + i]);
        }
#endif
}

/* y = silu(x) * g over one row of 20: columns 0..15 take ggml_v_silu, 16..19 libm */
static const uint32_t swiglu_ref[20] = {
    0xbd1357d1, 0xbd36b51c, 0xbd5af188, 0xbd7ab1e4, 0xbd86d4ad, 0xbd84a67a, 0xbd6413c1, 0xbd1c6038, 0xbc838085, 0x3aa7ef22,
    0x00000000, 0xbd0c4cd7, 0xbde6008c, 0xbe758ce7, 0xbed60f06, 0xbf256cbc, 0xbf6c2277, 0xbf9f60aa, 0xbfce7f6e, 0xc001ab75,
};

TEST(swiglu_row_matches_llama_cpp)
{
    static float ex[20], eg[20], out[20];
    for (int i = 0; i < 20; i++) { ex[i] = -4.0f + 0.45f * (float)i; eg[i] = 0.5f - 0.05f * (float)i; }
    rlx_graph g;
    rlx_graph_init(&g);
    int x = rlx_g_get_rows(&g, rlx_g_weight(&g, "x", RLX_F32, 20, 1, ex), 1.0f);
    int gt = rlx_g_get_rows(&g, rlx_g_weight(&g, "g", RLX_F32, 20, 1, eg), 1.0f);
    int y = rlx_g_mul(&g, rlx_g_unary(&g, RLX_OP_SILU, x, 0), gt);
    g.output = rlx_g_node(&g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 20, y, -1, -1);
    g.n_layers = 1;
    g.kv_cols = 8;
    const char *orig = rlx_cpu_path();
    const char *paths[] = {"scalar", "avx2", "avx512"};
    for (int fused = 0; fused < 2; fused++) {
        rlx_plan p;
        rlx_error err = {0};
        rlx_compile_opts o = {.max_tokens = 1, .max_outputs = 1, .no_fusion = !fused};
        ASSERT_EQ(rlx_compile(&g, &o, &p, &err), 0);
        for (size_t pi = 0; pi < RLX_ARRAY_LEN(paths); pi++) {
            if (!rlx_cpu_has_path(paths[pi])) continue;
            ASSERT_EQ(rlx_cpu_force_path(paths[pi]), 0);
            rlx_backend *be = NULL;
            ASSERT_EQ(rlx_backend_cpu_create(&be, 1, &err), 0);
            ASSERT_EQ(be->ops->prepare(be, &p, &err), 0);
            rlx_mem_desc geo = {1, 8, 1, 16, RLX_F32, NULL, 0};
            ASSERT_EQ(be->ops->mem_init(be, &geo, &err), 0);
            int32_t tok = 0, pos = 0, seq = 0, blocks[1] = {0};
            uint8_t om = 1;
            rlx_batch_seq bs = {blocks, 1, -1};
            rlx_batch b = {1, &tok, &pos, &seq, &om, 1, 1, &bs, NULL};
            ASSERT_EQ(be->ops->run(be, &p, &b, out, &err), 0);
            for (int i = 0; i < 20; i++)
                ASSERT_MSG(bits(out[i]) == swiglu_ref[i], "path %s fused %d column %d: 0x%08x, llama.cpp 0x%08x", paths[pi],
                           fused, i, bits(out[i]), swiglu_ref[i]);
            rlx_backend_destroy(be);
        }
        rlx_plan_free(&p);
    }
    rlx_graph_free(&g);
    ASSERT_EQ(rlx_cpu_force_path(orig), 0);
}

TEST_MAIN(TEST_ENTRY(exp_matches_llama_cpp), TEST_ENTRY(swiglu_row_matches_llama_cpp))
