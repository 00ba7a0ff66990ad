/* test_vulkan_ops.c - every step kind of the Vulkan backend against the CPU backend on small
 * random graphs (built with the rlx_g_* builder, compiled, run on both, compared).
 *
 * Results must be bit-identical: the shaders compute the CPU backend's arithmetic (llama.cpp's)
 * operation for operation: the same activation roundings, lanes, fused multiply-adds,
 * reduction trees, double sums, exp polynomial and libm functions, and per row the one-row or
 * batched variant the CPU picks. Skips (77) without a Vulkan device. */
#define VT_Q8_TOL 1e-5
#define VT_ENC_TOL 0.0 /* the encoder ops run the CPU backend's arithmetic (test_parity_embed: bit for bit) */
#include "tests/unit/test_gpu_common.h"

static const int all_types[] = {RLX_F32, RLX_F16, RLX_BF16, RLX_Q8_0, RLX_Q4_0, RLX_Q4_K, RLX_Q5_K, RLX_Q6_K};


TEST(get_rows_every_type)
{
    VK_OPEN_OR_SKIP();
    for (size_t ti = 0; ti < RLX_ARRAY_LEN(all_types); ti++) {
        vt_case c;
        vt_init(&c, 1);
        int E = vt_weight(&c, all_types[ti], 256, 40, 1.0f);
        int x = rlx_g_get_rows(&c.g, E, ti % 2 ? 0.5f : 0.0f);
        c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 256, x, -1, -1);
        vt_batch_linear(&c, 9, 40);
        double d = vt_compare(&c, vk, 1e-6);
        ASSERT_MSG(d <= 1e-6, "type %s: get_rows differs by %g", rlx_dtype_get(all_types[ti])->name, d);
        vt_free(&c);
    }
    VK_CLOSE();
}

TEST(matmul_every_type_and_batch)
{
    VK_OPEN_OR_SKIP();
    const int Ts[] = {1, 5, 19};
    for (size_t ti = 0; ti < RLX_ARRAY_LEN(all_types); ti++)
        for (size_t bi = 0; bi < RLX_ARRAY_LEN(Ts); bi++) {
            vt_case c;
            vt_init(&c, 1);
            int64_t K = bi == 1 ? 512 : 256, N = bi == 2 ? 33 : 48;
            int E = vt_weight(&c, RLX_F32, K, 50, 1.0f);
            int W = vt_weight(&c, all_types[ti], K, N, 0.2f);
            int y = rlx_g_matmul(&c.g, rlx_g_get_rows(&c.g, E, 0.0f), W);
            c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, N, y, -1, -1);
            vt_batch_linear(&c, Ts[bi], 50);
            double d = vt_compare(&c, vk, 0);
            ASSERT_MSG(d <= 0, "type %s T=%d: matmul differs by %g of max",
                       rlx_dtype_get(all_types[ti])->name, Ts[bi], d);
            vt_free(&c);
        }
    VK_CLOSE();
}

/* Rows past the last multiple of 64 (F32: the unfused eight-at-a-time part, then FMAs; F16/BF16:
 * the double tail), tinyBLAS declining K % 16, and SiLU's libm columns past the last multiple
 * of 16 (fused into the product and as its own step) */
TEST(float_tails_and_silu_tail)
{
    VK_OPEN_OR_SKIP();
    const int types[] = {RLX_F32, RLX_F16, RLX_BF16};
    for (size_t ti = 0; ti < RLX_ARRAY_LEN(types); ti++)
        for (int T = 1; T <= 9; T += 8) {
            vt_case c;
            vt_init(&c, 5);
            int E = vt_weight(&c, RLX_F32, 203, 30, 1.0f), W = vt_weight(&c, types[ti], 203, 100, 0.3f);
            int y = rlx_g_unary(&c.g, RLX_OP_SILU, rlx_g_matmul(&c.g, rlx_g_get_rows(&c.g, E, 0.0f), W), 0.0f);
            int W2 = vt_weight(&c, types[ti], 100, 36, 0.3f);
            y = rlx_g_unary(&c.g, RLX_OP_SILU, rlx_g_matmul(&c.g, y, W2), 0.0f);
            c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 36, y, -1, -1);
            vt_batch_linear(&c, T, 30);
            double d = vt_compare(&c, vk, 0);
            ASSERT_MSG(d <= 0, "type %s T=%d: differs by %g", rlx_dtype_get(types[ti])->name, T, d);
            vt_free(&c);
        }
    VK_CLOSE();
}

/* Q8_0 activations round half away from zero as quant.c does: x * (1/d) = 0.5 - 2^-25 gives 0
 * (floor(|x| + 0.5) rounded the sum up to 1 and moved the product by a whole weight) */
TEST(q8_0_activation_rounding_edge)
{
    VK_OPEN_OR_SKIP();
    vt_case c;
    vt_init(&c, 4);
    int E = vt_weight(&c, RLX_F32, 64, 4, 1.0f), W = vt_weight(&c, RLX_Q8_0, 64, 16, 1.0f);
    float *e = (float *)c.g.tensors[E].data;
    for (int r = 0; r < 4; r++) { /* amax 127: scale 1; the rest at and around the edge */
        for (int i = 0; i < 64; i++) e[r * 64 + i] = (i % 2 ? -1.0f : 1.0f) * (0.5f - 0x1p-25f);
        e[r * 64 + 0] = e[r * 64 + 32] = 127.0f;
        e[r * 64 + 5] = 1.5f;
        e[r * 64 + 6] = -2.5f;
    }
    int y = rlx_g_matmul(&c.g, rlx_g_get_rows(&c.g, E, 0.0f), W);
    c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 16, y, -1, -1);
    vt_batch_linear(&c, 4, 4);
    double d = vt_compare(&c, vk, 1e-6);
    ASSERT_MSG(d <= 1e-6, "differs by %g", d);
    vt_free(&c);
    VK_CLOSE();
}

/* rms_norm * w, matmul + bias + residual, silu(gate) * up, gelu, scale, softcap: fused and not */
TEST(norms_and_fused_chains)
{
    VK_OPEN_OR_SKIP();
    for (int fuse = 0; fuse < 2; fuse++) {
        vt_case c;
        vt_init(&c, 1);
        c.no_fusion = !fuse;
        int E = vt_weight(&c, RLX_F32, 128, 30, 1.0f);
        int nw = vt_weight(&c, RLX_F32, 128, 1, 1.0f), bias = vt_weight(&c, RLX_F32, 96, 1, 1.0f);
        int Wg = vt_weight(&c, RLX_Q8_0, 128, 96, 0.3f), Wu = vt_weight(&c, RLX_F16, 128, 96, 0.3f);
        int Wd = vt_weight(&c, RLX_F32, 96, 128, 0.3f);
        int x = rlx_g_get_rows(&c.g, E, 0.0f);
        int h = rlx_g_mul(&c.g, rlx_g_rms_norm(&c.g, x, 1e-5f), nw);
        int gate = rlx_g_unary(&c.g, RLX_OP_SILU, rlx_g_add(&c.g, rlx_g_matmul(&c.g, h, Wg), bias), 0.0f);
        int up = rlx_g_unary(&c.g, RLX_OP_GELU, rlx_g_matmul(&c.g, h, Wu), 0.0f);
        int ff = rlx_g_add(&c.g, rlx_g_matmul(&c.g, rlx_g_mul(&c.g, gate, up), Wd), x);
        ff = rlx_g_unary(&c.g, RLX_OP_SOFTCAP, rlx_g_unary(&c.g, RLX_OP_SCALE, ff, 3.0f), 2.5f);
        c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 128, ff, -1, -1);
        vt_batch_linear(&c, 7, 30);
        double d = vt_compare(&c, vk, 0);
        ASSERT_MSG(d <= 0, "fusion=%d: differs by %g", fuse, d);
        if (fuse) ASSERT(c.plan.n_fused > 0);
        vt_free(&c);
    }
    VK_CLOSE();
}

/* a chain with more distinct operands than the shader's four operand bindings */
TEST(long_chain_splits)
{
    VK_OPEN_OR_SKIP();
    vt_case c;
    vt_init(&c, 1);
    int E = vt_weight(&c, RLX_F32, 64, 20, 1.0f), W = vt_weight(&c, RLX_F32, 64, 64, 0.3f);
    int x = rlx_g_get_rows(&c.g, E, 0.0f);
    int y = rlx_g_matmul(&c.g, x, W);
    for (int k = 0; k < 6; k++) y = rlx_g_add(&c.g, y, k % 2 ? vt_weight(&c, RLX_F32, 64, 1, 1.0f) : x);
    for (int k = 0; k < 5; k++) y = k % 2 ? rlx_g_mul(&c.g, y, vt_weight(&c, RLX_F32, 64, 1, 1.0f)) : rlx_g_add(&c.g, y, vt_weight(&c, RLX_F32, 64, 1, 1.0f));
    c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 64, y, -1, -1);
    vt_batch_linear(&c, 4, 20);
    double d = vt_compare(&c, vk, 0);
    ASSERT_MSG(d <= 0, "differs by %g", d);
    vt_free(&c);
    VK_CLOSE();
}

TEST(head_norm_and_rope)
{
    VK_OPEN_OR_SKIP();
    const int modes[] = {RLX_ROPE_NORM, RLX_ROPE_NEOX};
    for (int mi = 0; mi < 2; mi++)
        for (int partial = 0; partial < 2; partial++) {
            vt_case c;
            vt_init(&c, 1);
            int hd = 32, nh = 4, n_rot = partial ? 16 : 32;
            int E = vt_weight(&c, RLX_F32, hd * nh, 64, 1.0f), qn = vt_weight(&c, RLX_F32, hd, 1, 1.0f);
            int ff = partial ? vt_weight_pos(&c, n_rot / 2, 1.0f, 4.0f) : -1;
            int q = rlx_g_head_norm(&c.g, rlx_g_get_rows(&c.g, E, 0.0f), qn, hd, 1e-6f);
            const rlx_rope_params rp = {.n_heads = nh, .head_dim = hd, .n_rot = n_rot, .mode = (rlx_rope_mode)modes[mi],
                                        .freq_base = partial ? 1e6f : 10000.0f, .freq_scale = partial ? 0.25f : 0.0f};
            q = rlx_g_rope(&c.g, q, ff, &rp);
            c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, hd * nh, q, -1, -1);
            vt_batch_linear(&c, 6, 64);
            for (int i = 0; i < 6; i++) c.pos[i] = 1000 + 37 * i; /* large angles */
            c.blocks_needed = 1200;
            double d = vt_compare(&c, vk, 0);
            ASSERT_MSG(d <= 0, "mode %d partial %d: differs by %g", modes[mi], partial, d);
            vt_free(&c);
        }
    VK_CLOSE();
}

/* prefill of two sequences in one batch, then decode steps, over non-contiguous blocks:
 * GQA, f16 and f32 pools, sliding window, softcap */
TEST(attention_paged)
{
    VK_OPEN_OR_SKIP();
    for (int variant = 0; variant < 4; variant++) {
        int kv_type = variant % 2 ? RLX_F32 : RLX_F16;
        vt_case c;
        vt_init(&c, 2);
        vt_attention_graph(&c, 4, 2, 32, variant >= 2 ? 5 : 0, variant == 3 ? 30.0f : 0.0f);
        c.kv_type = kv_type;
        double d = vt_compare_attention(&c, vk);
        ASSERT_MSG(d <= 0, "variant %d: attention differs by %g", variant, d);
        vt_free(&c);
    }
    VK_CLOSE();
}

/* snapshot block access gives the same bytes as on the CPU, and writes read back */
TEST(kv_block_io)
{
    VK_OPEN_OR_SKIP();
    vt_case c;
    vt_init(&c, 2);
    vt_attention_graph(&c, 4, 2, 32, 0, 0.0f);
    c.kv_type = RLX_F32;
    ASSERT(vt_compare_attention(&c, vk) <= 0);
    size_t bb = (size_t)c.geo.block_size * (size_t)c.geo.kv_cols * 4;
    float *k1 = malloc(bb), *v1 = malloc(bb), *k2 = malloc(bb), *v2 = malloc(bb);
    rlx_error err = {0};
    ASSERT_EQ(vk->ops->kv_read_block(vk, 1, 3, k1, v1, &err), 0);
    ASSERT_EQ(c.cpu->ops->kv_read_block(c.cpu, 1, 3, k2, v2, &err), 0);
    double worst = 0;
    for (size_t i = 0; i < bb / 4; i++) worst = fmax(worst, fmax(fabs(k1[i] - k2[i]), fabs(v1[i] - v2[i])));
    ASSERT_MSG(worst <= 0, "block contents differ by %g", worst);
    ASSERT_EQ(vk->ops->kv_write_block(vk, 1, 9, k1, v1, &err), 0);
    ASSERT_EQ(vk->ops->kv_read_block(vk, 1, 9, k2, v2, &err), 0);
    ASSERT(memcmp(k1, k2, bb) == 0 && memcmp(v1, v2, bb) == 0);
    for (size_t i = 0; i < bb / 4; i++) k1[i] = (float)i;
    ASSERT_EQ(vk->ops->kv_write_block(vk, 0, 2, k1, v1, &err), 0);
    ASSERT_EQ(vk->ops->kv_read_block(vk, 0, 2, k2, v2, &err), 0);
    ASSERT(memcmp(k1, k2, bb) == 0);
    ASSERT_EQ(vk->ops->kv_read_block(vk, 5, 0, k2, v2, &err), RLX_ERANGE);
    free(k1); free(v1); free(k2); free(v2);
    vt_free(&c);
    VK_CLOSE();
}

/* weights bigger than the storage-buffer range are bound in row ranges (the range is lowered
 * with RLX_VK_MAX_RANGE so small tensors exercise it) */
/* Layers of different KV widths (the per-layer memory description): each layer's pool rows are
 * its own width, attention and block reads agree with the CPU; a recurrent-state layer is
 * refused with the backend's name. */
TEST(kv_width_per_layer)
{
    VK_OPEN_OR_SKIP();
    vt_case c;
    vt_init(&c, 5);
    const int nkv[2] = {4, 2};
    vt_attention_graph_kv(&c, 4, nkv, 32, 0, 0.0f);
    ASSERT(c.g.mem != NULL);
    c.kv_type = RLX_F32;
    ASSERT(vt_compare_attention(&c, vk) <= 0);
    rlx_error err = {0};
    for (int l = 0; l < 2; l++) {
        size_t bb = (size_t)c.geo.block_size * (size_t)(nkv[l] * 32) * 4;
        float *k1 = malloc(bb), *v1 = malloc(bb), *k2 = malloc(bb), *v2 = malloc(bb);
        ASSERT_EQ(vk->ops->kv_read_block(vk, l, 1, k1, v1, &err), 0);
        ASSERT_EQ(c.cpu->ops->kv_read_block(c.cpu, l, 1, k2, v2, &err), 0);
        ASSERT_MSG(memcmp(k1, k2, bb) == 0 && memcmp(v1, v2, bb) == 0, "layer %d's block differs from the CPU's", l);
        free(k1); free(v1); free(k2); free(v2);
    }
    const rlx_mem_layer hybrid[2] = {{RLX_MEM_STATE, 0, 64}, {RLX_MEM_KV, 64, 0}};
    rlx_mem_desc d = {2, 64, 4, 4, RLX_F32, hybrid, 2};
    ASSERT_EQ(vk->ops->mem_init(vk, &d, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "Vulkan") && strstr(err.msg, "recurrent state"), "%s", err.msg);
    vt_free(&c);
    VK_CLOSE();
}

TEST(split_bindings)
{
    setenv("RLX_VK_MAX_RANGE", "8192", 1);
    VK_OPEN_OR_SKIP();
    const int types[] = {RLX_F32, RLX_Q8_0, RLX_Q6_K};
    for (size_t ti = 0; ti < RLX_ARRAY_LEN(types); ti++) {
        vt_case c;
        vt_init(&c, 1);
        int E = vt_weight(&c, types[ti], 256, 64, 1.0f), W = vt_weight(&c, types[ti], 256, 40, 0.2f);
        int y = rlx_g_matmul(&c.g, rlx_g_get_rows(&c.g, E, 0.0f), W);
        c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 40, y, -1, -1);
        c.max_tokens = 4;
        vt_batch_linear(&c, 4, 64);
        double d = vt_compare(&c, vk, 0);
        ASSERT_MSG(d <= 0, "type %s: differs by %g", rlx_dtype_get(types[ti])->name, d);
        vt_free(&c);
    }
    VK_CLOSE();
    unsetenv("RLX_VK_MAX_RANGE");
}

TEST(bad_input_is_rejected)
{
    VK_OPEN_OR_SKIP();
    vt_case c;
    vt_init(&c, 1);
    int E = vt_weight(&c, RLX_F32, 64, 10, 1.0f);
    c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 64, rlx_g_get_rows(&c.g, E, 0.0f), -1, -1);
    vt_batch_linear(&c, 3, 10);
    c.tokens[1] = 10; /* one past the table */
    rlx_error err = {0};
    ASSERT_EQ(vt_run_one(&c, vk, NULL, &err), RLX_ERANGE);
    ASSERT(strstr(err.msg, "token id") != NULL);
    vt_free(&c);
    rlx_backend *bad = NULL;
    rlx_backend_config cfg = {.name = "vulkan", .device = 99};
    ASSERT_EQ(rlx_backend_create(&bad, &cfg, &err), RLX_EUNSUPPORTED);
    ASSERT(strstr(err.msg, "99") != NULL);
    VK_CLOSE();
}

TEST(env_selects_backend)
{
    VK_OPEN_OR_SKIP();
    VK_CLOSE();
    setenv("RLXD_BACKEND", "vulkan", 1);
    rlx_backend *be = NULL;
    rlx_backend_config cfg = {0};
    rlx_error err = {0};
    ASSERT_EQ(rlx_backend_create(&be, &cfg, &err), 0);
    ASSERT_STR_EQ(be->ops->name, "vulkan");
    rlx_backend_destroy(be);
    setenv("RLXD_BACKEND", "nonesuch", 1);
    ASSERT_EQ(rlx_backend_create(&be, &cfg, &err), RLX_EUNSUPPORTED);
    ASSERT(strstr(err.msg, "nonesuch") != NULL);
    cfg.name = "cpu"; /* an explicit name wins over the environment */
    ASSERT_EQ(rlx_backend_create(&be, &cfg, &err), 0);
    ASSERT_STR_EQ(be->ops->name, "cpu");
    rlx_backend_destroy(be);
    unsetenv("RLXD_BACKEND");
}

/* `rlxd devices` lists the CPU with its kernel path and this Vulkan device with its flags */
TEST(devices_command_lists_vulkan)
{
    VK_OPEN_OR_SKIP();
    VK_CLOSE();
    const char *bin = getenv("RLX_BIN");
    if (!bin) SKIP("RLX_BIN is not set (run through ctest)");
    char cmd[1200], out[4096] = "";
    snprintf(cmd, sizeof cmd, "%s/rlxd devices 2>&1", bin);
    FILE *f = popen(cmd, "r");
    ASSERT(f != NULL);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    ASSERT_EQ(pclose(f), 0);
    ASSERT_MSG(strstr(out, "cpu: ") && strstr(out, rlx_cpu_path()), "no CPU line with its kernel path in:\n%s", out);
    ASSERT_MSG(strstr(out, "vulkan 0: ") && strstr(out, "--backend vulkan --device 0"), "no Vulkan device line in:\n%s", out);
}

TEST_MAIN(TEST_ENTRY(get_rows_every_type), TEST_ENTRY(matmul_every_type_and_batch), TEST_ENTRY(float_tails_and_silu_tail), TEST_ENTRY(q8_0_activation_rounding_edge),
          TEST_ENTRY(norms_and_fused_chains),
          TEST_ENTRY(gelu_matches_cpu_f16_rounding),
          TEST_ENTRY(long_chain_splits), TEST_ENTRY(head_norm_and_rope), TEST_ENTRY(attention_paged),
          TEST_ENTRY(attention_q8_0_kv_against_reference), TEST_ENTRY(encoder_ops_against_cpu),
          TEST_ENTRY(kv_block_io), TEST_ENTRY(kv_width_per_layer), TEST_ENTRY(split_bindings), TEST_ENTRY(bad_input_is_rejected),
          TEST_ENTRY(env_selects_backend), TEST_ENTRY(devices_command_lists_vulkan))
