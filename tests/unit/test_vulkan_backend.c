/* test_vulkan_backend.c - the Vulkan backend's behaviour around the kernels: commands recorded
 * once per batch shape, the KV pool split across bindings, activations beyond the binding
 * range refused at prepare(), device memory without a host mapping (staging, a full BAR
 * window), the KV pool sized by device memory, and whole quantized Gemma models against the
 * CPU backend. Skips (77) without a Vulkan device. */
#include "tests/unit/test_vulkan_util.h"
#include "tests/unit/test_synth_util.h"
#include "engine/runner.h"
#include "engine/sample.h"

#ifdef RLX_HAVE_VULKAN
#include "backends/vulkan/vulkan.h"

static rlx_vk_stats stats(rlx_backend *vk)
{
    rlx_vk_stats s = {0};
    if (rlx_vk_get_stats(vk, &s)) fprintf(stderr, "  not a Vulkan backend\n");
    return s;
}

/* A decode step of a shape seen before records nothing; its results are those of a fresh
 * recording (the CPU's) and the same batch twice gives the same bytes. */
TEST(commands_recorded_once_per_shape)
{
    VK_OPEN_OR_SKIP();
    vt_case c;
    vt_init(&c, 2);
    vt_attention_graph(&c, 4, 2, 32, 0, 0.0f);
    c.kv_type = RLX_F16;
    ASSERT(vt_compare_attention(&c, vk) <= 0); /* three shapes: (12,12) (2,2) (7,7) */
    uint64_t after_prefill = stats(vk).recordings;
    ASSERT_EQ(after_prefill, 3);
    static const int32_t t0[] = {5, 1, 8, 3}, t1[] = {0, 7, 2, 9};
    rlx_batch_seq seqs[2] = {{t0, 4, -1}, {t1, 4, -1}};
    int64_t cols = c.g.tensors[c.g.output].cols;
    float *a = malloc(2 * (size_t)cols * 4), *b = malloc(2 * (size_t)cols * 4), *ref = malloc(2 * (size_t)cols * 4);
    rlx_error err = {0};
    for (int step = 0; step < 2; step++) { /* decodes of both sequences: shape (2, 2) again */
        int32_t ids[2] = {(3 * step + 1) % 40, (5 * step + 2) % 40}, pos[2] = {14 + step, 7 + step}, seq[2] = {0, 1};
        uint8_t out[2] = {1, 1};
        rlx_batch bt = {2, ids, pos, seq, out, 2, 2, seqs, NULL};
        ASSERT_MSG(vk->ops->run(vk, &c.plan, &bt, a, &err) == 0, "%s", err.msg);
        ASSERT_MSG(vk->ops->run(vk, &c.plan, &bt, b, &err) == 0, "%s", err.msg);
        ASSERT_MSG(c.cpu->ops->run(c.cpu, &c.plan, &bt, ref, &err) == 0, "%s", err.msg);
        ASSERT(memcmp(a, b, 2 * (size_t)cols * 4) == 0);
        double d = vt_diff(a, ref, 2 * (size_t)cols);
        ASSERT_MSG(d <= 0, "step %d: differs from the CPU by %g", step, d);
    }
    ASSERT_EQ(stats(vk).recordings, after_prefill);
    /* a new shape records once more; the KV pool re-created drops every recording */
    int32_t id1 = 3, p1 = 9, s1 = 1;
    uint8_t o1 = 1;
    rlx_batch one = {1, &id1, &p1, &s1, &o1, 1, 2, seqs, NULL};
    ASSERT_EQ(vk->ops->run(vk, &c.plan, &one, a, &err), 0);
    ASSERT_EQ(vk->ops->run(vk, &c.plan, &one, a, &err), 0);
    ASSERT_EQ(stats(vk).recordings, after_prefill + 1);
    ASSERT_EQ(vk->ops->mem_init(vk, &c.geo, &err), 0);
    ASSERT_EQ(vk->ops->run(vk, &c.plan, &one, a, &err), 0);
    ASSERT_EQ(stats(vk).recordings, after_prefill + 2);
    free(a);
    free(b);
    free(ref);
    vt_free(&c);
    VK_CLOSE();
}

/* A KV layer larger than the storage-buffer range is split into chunks of whole blocks: with
 * an 8 KiB range a 12 KiB f32 layer used to be refused. Block snapshots and copies cross
 * chunks. */
TEST(kv_pool_split_across_bindings)
{
    setenv("RLX_VK_MAX_RANGE", "8192", 1);
    VK_OPEN_OR_SKIP();
    static const struct { int type; const char *chunk; } cases[] = {{RLX_F32, NULL}, {RLX_F16, "2048"}, {RLX_F32, "4096"}};
    for (int i = 0; i < 3; i++) {
        if (cases[i].chunk) setenv("RLX_VK_KV_CHUNK", cases[i].chunk, 1);
        vt_case c;
        vt_init(&c, 7);
        c.max_tokens = 16;
        vt_attention_graph(&c, 2, 2, 32, 0, 0.0f);
        c.kv_type = cases[i].type;
        double d = vt_compare_attention(&c, vk);
        ASSERT_MSG(d <= 0, "case %d: attention differs by %g", i, d);
        ASSERT_MSG(stats(vk).kv_chunks >= 2, "case %d: the pool is in %d chunk(s)", i, stats(vk).kv_chunks);
        size_t esz = cases[i].type == RLX_F32 ? 4 : 2, n = (size_t)c.geo.block_size * (size_t)c.geo.kv_cols, bb = n * esz;
        uint8_t *k1 = malloc(bb), *v1 = malloc(bb), *k2 = malloc(bb), *v2 = malloc(bb);
        rlx_error err = {0};
        ASSERT_EQ(vk->ops->kv_read_block(vk, 1, 9, k1, v1, &err), 0); /* in the last chunk */
        ASSERT_EQ(c.cpu->ops->kv_read_block(c.cpu, 1, 9, k2, v2, &err), 0);
        double worst = 0;
        for (size_t j = 0; j < n; j++) {
            double a = esz == 4 ? ((float *)k1)[j] : rlx_f16_to_f32(((uint16_t *)k1)[j]);
            double b = esz == 4 ? ((float *)k2)[j] : rlx_f16_to_f32(((uint16_t *)k2)[j]);
            worst = fmax(worst, fabs(a - b));
        }
        ASSERT_MSG(worst <= 0, "case %d: block 9 differs from the CPU's by %g", i, worst);
        ASSERT_EQ(vk->ops->kv_write_block(vk, 1, 1, k1, v1, &err), 0); /* into the first chunk */
        ASSERT_EQ(vk->ops->kv_read_block(vk, 1, 1, k2, v2, &err), 0);
        ASSERT(memcmp(k1, k2, bb) == 0 && memcmp(v1, v2, bb) == 0);
        free(k1); free(v1); free(k2); free(v2);
        vt_free(&c);
        unsetenv("RLX_VK_KV_CHUNK");
    }
    /* more than VK_KV_CHUNKS chunks is refused with what to change */
    setenv("RLX_VK_KV_CHUNK", "1024", 1);
    rlx_mem_desc geo = {1, 64, 12, 4, RLX_F32, NULL, 0};
    rlx_error err = {0};
    ASSERT_EQ(vk->ops->mem_init(vk, &geo, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "fewer KV blocks") != NULL, "%s", err.msg);
    unsetenv("RLX_VK_KV_CHUNK");
    VK_CLOSE();
    unsetenv("RLX_VK_MAX_RANGE");
}

/* An activation that cannot be bound at the plan's largest batch fails prepare(), naming the
 * limit, instead of every run failing after the model was reported ready. */
TEST(oversized_activation_fails_prepare)
{
    setenv("RLX_VK_MAX_RANGE", "8192", 1);
    VK_OPEN_OR_SKIP();
    vt_case c;
    vt_init(&c, 1);
    /* 16 tokens of 64 values fit; 16 logit rows of 256 (16 KiB) do not */
    int E = vt_weight(&c, RLX_F32, 64, 20, 1.0f), W = vt_weight(&c, RLX_F32, 64, 256, 1.0f);
    int o = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 64, rlx_g_get_rows(&c.g, E, 0.0f), -1, -1);
    c.g.output = rlx_g_matmul(&c.g, o, W);
    rlx_compile_opts co = {.max_tokens = 16, .max_outputs = 16};
    rlx_error err = {0};
    ASSERT_EQ(rlx_compile(&c.g, &co, &c.plan, &err), 0);
    c.compiled = true;
    ASSERT_EQ(vk->ops->prepare(vk, &c.plan, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "storage-buffer range") && strstr(err.msg, "8 rows fit") && strstr(err.msg, "--max-seqs"),
               "%s", err.msg);
    /* a tool with settings of its own names them (`rlxd logits` said --max-seqs, which it has not) */
    rlx_plan_free(&c.plan);
    co.outputs_hint = "--ubatch";
    ASSERT_EQ(rlx_compile(&c.g, &co, &c.plan, &err), 0);
    ASSERT_EQ(vk->ops->prepare(vk, &c.plan, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "8 rows fit: lower --ubatch") && !strstr(err.msg, "--max-seqs"), "%s", err.msg);
    vt_free(&c);
    VK_CLOSE();
    unsetenv("RLX_VK_MAX_RANGE");
}

static void matmuls_match_cpu(rlx_backend *vk)
{
    const int types[] = {RLX_F32, RLX_Q8_0, RLX_Q4_K};
    for (int i = 0; i < 3; i++) {
        vt_case c;
        vt_init(&c, 3);
        int E = vt_weight(&c, RLX_F32, 256, 50, 1.0f), W = vt_weight(&c, types[i], 256, 300, 0.2f);
        int y = rlx_g_matmul(&c.g, rlx_g_get_rows(&c.g, E, 0.0f), W);
        c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 300, y, -1, -1);
        vt_batch_linear(&c, 9, 50);
        double d = vt_compare(&c, vk, 0);
        ASSERT_MSG(d <= 0, "type %s: differs by %g", rlx_dtype_get(types[i])->name, d);
        vt_free(&c);
    }
}

/* RLX_VK_FORCE_STAGING keeps device memory unmapped (a discrete GPU): uploads, logits and KV
 * snapshots all go through staging copies. */
TEST(staging_without_mapped_device_memory)
{
    setenv("RLX_VK_FORCE_STAGING", "1", 1);
    VK_OPEN_OR_SKIP();
    matmuls_match_cpu(vk);
    vt_case c;
    vt_init(&c, 2);
    vt_attention_graph(&c, 4, 2, 32, 0, 0.0f);
    ASSERT(vt_compare_attention(&c, vk) <= 0);
    rlx_vk_stats s = stats(vk);
    ASSERT(s.device_bytes > 0);
    ASSERT_EQ(s.mapped_device_bytes, 0);
    vt_free(&c);
    VK_CLOSE();
    unsetenv("RLX_VK_FORCE_STAGING");
}

/* A BAR window smaller than the model (RLX_VK_BAR_BYTES simulates one): buffers that do not
 * fit it fall back to unmapped device memory instead of failing. */
TEST(full_bar_window_falls_back)
{
    setenv("RLX_VK_BAR_BYTES", "200000", 1);
    VK_OPEN_OR_SKIP();
    matmuls_match_cpu(vk);
    rlx_vk_stats s = stats(vk);
    ASSERT(s.mapped_device_bytes <= 200000);
    ASSERT(s.device_bytes > s.mapped_device_bytes);
    VK_CLOSE();
    unsetenv("RLX_VK_BAR_BYTES");
}

/* The default KV pool fits the device: with a 32 MiB device (RLX_VK_HEAP_BYTES) a model with an
 * 8M-token context and 64 sequences gets a pool of at most 3/4 of what is left after weights. */
TEST(default_kv_pool_fits_device_memory)
{
    char path[512];
    if (!synth("--arch llama --preset tiny --ctx 8388608", "llama-8m.gguf", path, sizeof path))
        SKIP("rlxd-synth is not built (RLX_BIN)");
    setenv("RLX_VK_HEAP_BYTES", "33554432", 1);
    VK_OPEN_OR_SKIP();
    VK_CLOSE();
    rlx_runner_config cfg = {.model_path = path, .max_seqs = 64, .max_batch_tokens = 64, .backend = {.name = "vulkan"}};
    rlx_runner *r = NULL;
    rlx_error err = {0};
    ASSERT_MSG(rlx_runner_open(&r, &cfg, &err) == 0, "open: %s", err.msg);
    rlx_vk_stats s = stats(r->backend);
    size_t pool = (size_t)r->kv.n_blocks * (size_t)r->kv.block_size * 256; /* f16 K+V of 2 layers x 32 */
    ASSERT_MSG(pool <= (size_t)24 << 20, "a KV pool of %zu MiB on a 32 MiB device", pool >> 20);
    ASSERT(pool >= (size_t)8 << 20);
    ASSERT(s.device_bytes <= (uint64_t)32 << 20);
    rlx_runner_close(r);
    unsetenv("RLX_VK_HEAP_BYTES");
}

/* Prompt logits (40 x *n_vocab, allocated here) and a greedy continuation of a runner on
 * `backend` (KV type kv). */
static int run_model(const char *path, const char *backend, int kv, float **logits, int32_t *n_vocab, int32_t *greedy,
                     int n_greedy, rlx_error *err)
{
    rlx_runner_config cfg = {.model_path = path, .kv_type = kv, .kv_type_set = true, .n_ctx = 128,
                             .max_batch_tokens = 64, .max_outputs = 64, .backend = {.name = backend, .n_threads = 2}};
    rlx_runner *r = NULL;
    int rc = rlx_runner_open(&r, &cfg, err);
    if (rc) return rc;
    int32_t ids[40], pos[40], seq[40], *table = NULL, nb = 0, cap = 0;
    uint8_t out[40];
    for (int i = 0; i < 40; i++) { ids[i] = (i * 37 + 11) % r->n_vocab; pos[i] = i; seq[i] = 0; out[i] = 1; }
    if ((rc = rlx_runner_reserve(r, &table, &nb, &cap, 40 + n_greedy))) goto done;
    rlx_batch_seq bs = {table, nb, -1};
    rlx_batch b = {40, ids, pos, seq, out, 40, 1, &bs, NULL};
    if ((rc = rlx_runner_forward(r, &b, err))) goto done;
    *n_vocab = r->n_vocab;
    if (!(*logits = malloc(40 * (size_t)r->n_vocab * 4))) { rc = RLX_ENOMEM; goto done; }
    memcpy(*logits, r->logits, 40 * (size_t)r->n_vocab * 4);
    int32_t cur = rlx_argmax(r->logits + 39 * (size_t)r->n_vocab, r->n_vocab);
    for (int k = 0; k < n_greedy && !rc; k++) {
        greedy[k] = cur;
        int32_t p = 40 + k, s = 0;
        uint8_t o = 1;
        rlx_batch d = {1, &cur, &p, &s, &o, 1, 1, &bs, NULL};
        if (!(rc = rlx_runner_forward(r, &d, err))) cur = rlx_argmax(r->logits, r->n_vocab);
    }
done:
    free(table);
    rlx_runner_close(r);
    return rc;
}

/* Gemma 2 (GELU, attention and final softcaps) and Gemma 3 on Vulkan against the CPU, float and
 * quantized weights, F16 and F32 KV: identical logits and greedy continuations (the shaders
 * compute the CPU's arithmetic, tanhf and the f16-rounded GELU included). */
TEST(gemma_matches_cpu)
{
    VK_OPEN_OR_SKIP();
    VK_CLOSE();
    const struct { const char *args, *file; } models[] = {
        {"--arch gemma2 --preset tiny --type f32 --seed 3", "g2-f32.gguf"},
        {"--arch gemma3 --preset tiny --type f32 --seed 4", "g3-f32.gguf"},
        {"--arch gemma2 --preset tiny --type q8_0 --seed 3", "g2-q8_0.gguf"},
        {"--arch gemma2 --preset tiny --type q4_k --seed 5", "g2-q4_k.gguf"},
        {"--arch gemma3 --preset tiny --type q8_0 --seed 4", "g3-q8_0.gguf"}};
#if defined(__SANITIZE_ADDRESS__)
    /* the sanitizer build (slow host side, the same shaders): F32 KV for the F32 models only */
    const bool all_kv = false;
#else
    const bool all_kv = true;
#endif
    for (size_t m = 0; m < RLX_ARRAY_LEN(models); m++)
        for (int kvi = 0; kvi < 2; kvi++) {
            if (kvi == 1 && !all_kv && m >= 2) continue;
            char path[512];
            if (!synth(models[m].args, models[m].file, path, sizeof path)) SKIP("rlxd-synth is not built (RLX_BIN)");
            int kv = kvi ? RLX_F32 : RLX_F16;
            enum { G = 24 };
            float *lc = NULL, *lv = NULL;
            int32_t gc[G], gv[G], V = 0, V2 = 0;
            rlx_error err = {0};
            ASSERT_MSG(run_model(path, "cpu", kv, &lc, &V, gc, G, &err) == 0, "cpu: %s", err.msg);
            ASSERT_MSG(run_model(path, "vulkan", kv, &lv, &V2, gv, G, &err) == 0, "vulkan: %s", err.msg);
            ASSERT_EQ(V, V2);
            double d = vt_diff(lv, lc, 40 * (size_t)V);
            int top_differ = 0;
            for (int i = 0; i < 40; i++) top_differ += rlx_argmax(lc + (size_t)i * V, V) != rlx_argmax(lv + (size_t)i * V, V);
            free(lc);
            free(lv);
            const char *kvn = kvi ? "f32" : "f16";
            ASSERT_MSG(d <= 0, "%s %s KV: logits differ by %g of the largest", models[m].file, kvn, d);
            ASSERT_MSG(top_differ == 0, "%s %s KV: top-1 differs at %d of 40 positions", models[m].file, kvn, top_differ);
            ASSERT_MSG(memcmp(gc, gv, sizeof gc) == 0, "%s %s KV: greedy continuations differ", models[m].file, kvn);
        }
}

TEST_MAIN(TEST_ENTRY(commands_recorded_once_per_shape), TEST_ENTRY(kv_pool_split_across_bindings),
          TEST_ENTRY(oversized_activation_fails_prepare), TEST_ENTRY(staging_without_mapped_device_memory),
          TEST_ENTRY(full_bar_window_falls_back), TEST_ENTRY(default_kv_pool_fits_device_memory),
          TEST_ENTRY(gemma_matches_cpu))
#else
TEST(no_vulkan) { SKIP("this build has no Vulkan backend (configure with -DRLX_VULKAN=ON)"); }
TEST_MAIN(TEST_ENTRY(no_vulkan))
#endif
