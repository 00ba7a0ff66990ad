/* test_cuda_ops.c - the CUDA backend against the CPU backend on small random graphs: every
 * weight type through get_rows and matmul (both the kernel path and, at 40 tokens, the cuBLAS
 * path), fused chains, head norm + rope, paged attention with f16/f32 KV, window and softcap,
 * and KV block access. Skips (77) without a CUDA build or device; CI compiles it everywhere.
 * Tolerances are looser than Vulkan's: the CUDA kernels sum in their own order (warp
 * reductions, cuBLAS), so only rounding differences are expected (relative 1e-3, 5e-3 for
 * quantized weights whose 8-bit activations can round differently). */
#define GPU_BACKEND "cuda"
#include "tests/unit/test_vulkan_util.h"

static const int all_types[] = {RLX_F32, RLX_F16, RLX_BF16, RLX_Q8_0, RLX_Q4_0, RLX_Q4_K, RLX_Q5_K, RLX_Q6_K};

TEST(get_rows_and_matmul_every_type)
{
    VK_OPEN_OR_SKIP();
    const int Ts[] = {1, 7, 40};
    for (size_t ti = 0; ti < RLX_ARRAY_LEN(all_types); ti++)
        for (size_t bi = 0; bi < RLX_ARRAY_LEN(Ts); bi++) {
            vt_case c;
            vt_init(&c, 3);
            c.max_tokens = 48;
            int E = vt_weight(&c, all_types[ti], 256, 60, 1.0f), W = vt_weight(&c, all_types[ti], 256, 70, 0.2f);
            int bias = vt_weight(&c, RLX_F32, 70, 1, 1.0f);
            int y = rlx_g_add(&c.g, rlx_g_matmul(&c.g, rlx_g_get_rows(&c.g, E, 0.0f), W), bias);
            c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 70, y, -1, -1);
            vt_batch_linear(&c, Ts[bi], 60);
            double tol = all_types[ti] == RLX_F32 || all_types[ti] == RLX_F16 || all_types[ti] == RLX_BF16 ? 1e-3 : 5e-3;
            double d = vt_compare(&c, vk, tol);
            ASSERT_MSG(d <= tol, "type %s T=%d: differs by %g", rlx_dtype_get(all_types[ti])->name, Ts[bi], d);
            vt_free(&c);
        }
    VK_CLOSE();
}

TEST(norms_chains_rope)
{
    VK_OPEN_OR_SKIP();
    vt_case c;
    vt_init(&c, 4);
    int hd = 32, nh = 4;
    int E = vt_weight(&c, RLX_F32, hd * nh, 30, 1.0f), nw = vt_weight(&c, RLX_F32, hd * nh, 1, 1.0f);
    int qn = vt_weight(&c, RLX_F32, hd, 1, 1.0f), ff = vt_weight_pos(&c, hd / 4, 1.0f, 4.0f);
    int x = rlx_g_get_rows(&c.g, E, 0.0f);
    int h = rlx_g_unary(&c.g, RLX_OP_GELU, rlx_g_mul(&c.g, rlx_g_rms_norm(&c.g, x, 1e-5f), nw), 0.0f);
    int q = rlx_g_node(&c.g, RLX_OP_HEAD_NORM, RLX_ROWS_TOKENS, hd * nh, h, qn, -1);
    rlx_g_last(&c.g)->ip[0] = hd;
    rlx_g_last(&c.g)->fp[0] = 1e-6f;
    q = rlx_g_node(&c.g, RLX_OP_ROPE, RLX_ROWS_TOKENS, hd * nh, q, ff, -1);
    rlx_node *n = rlx_g_last(&c.g);
    n->ip[0] = nh; n->ip[1] = hd; n->ip[2] = hd / 2; n->ip[3] = RLX_ROPE_NEOX;
    n->fp[0] = 10000.0f;
    q = rlx_g_unary(&c.g, RLX_OP_SOFTCAP, rlx_g_add(&c.g, q, x), 3.0f);
    c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, hd * nh, q, -1, -1);
    vt_batch_linear(&c, 9, 30);
    double d = vt_compare(&c, vk, 1e-4);
    ASSERT_MSG(d <= 1e-4, "differs by %g", d);
    vt_free(&c);
    VK_CLOSE();
}

TEST(attention_paged)
{
    VK_OPEN_OR_SKIP();
    for (int variant = 0; variant < 4; variant++) {
        vt_case c;
        vt_init(&c, 2);
        vt_attention_graph(&c, 4, 2, 32, variant >= 2 ? 5 : 0, variant == 3 ? 30.0f : 0.0f);
        c.kv_type = variant % 2 ? RLX_F32 : RLX_F16;
        double d = vt_compare_attention(&c, vk);
        ASSERT_MSG(d <= 1e-3, "variant %d: attention differs by %g", variant, d);
        vt_free(&c);
    }
    VK_CLOSE();
}

TEST(no_device_is_a_clean_error)
{
    rlx_backend *be = NULL;
    rlx_error err = {0};
    rlx_backend_config cfg = {.name = "cuda"};
    int rc = rlx_backend_create(&be, &cfg, &err);
    if (rc == 0) { rlx_backend_destroy(be); SKIP("a CUDA device is present"); }
    ASSERT_EQ(rc, RLX_EUNSUPPORTED);
    ASSERT(strlen(err.msg) > 10);
    ASSERT(strstr(err.msg, "cuda") || strstr(err.msg, "CUDA"));
}

TEST_MAIN(TEST_ENTRY(get_rows_and_matmul_every_type), TEST_ENTRY(norms_chains_rope), TEST_ENTRY(attention_paged),
          TEST_ENTRY(no_device_is_a_clean_error))
