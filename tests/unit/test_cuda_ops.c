/* test_cuda_ops.c - the CUDA backend against the CPU backend on small random graphs: every
 * weight type through get_rows and matmul (both the kernel path and, at 40 tokens, the cuBLAS
 * path), fused chains, head norm + rope, GELU value by value, paged attention with f16/f32/Q8_0
 * KV, window and softcap, the encoder ops (layer norm, position rows, attention without a
 * cache, hidden output; test_gpu_common.h), decode steps as CUDA graphs, a plan prepared after
 * the last one was freed, runs from another thread. Skips (77) without a CUDA build or device; CI compiles it
 * everywhere (tests/integration/test_cuda_build.sh builds it with -DRLX_CUDA=ON).
 * Tolerances are looser than Vulkan's: the CUDA kernels sum in their own order (warp
 * reductions, cuBLAS), so only rounding differences are expected (relative 1e-3, 5e-3 for
 * quantized weights whose 8-bit activations can round differently). */
#define GPU_BACKEND "cuda"
#define VT_Q8_TOL 1e-4 /* CUDA sums exp in its own order */
#define VT_ENC_TOL 1e-3 /* and matmuls, norms and attention in its own order */
#include "tests/unit/test_gpu_common.h"

#include <pthread.h>
#ifdef RLX_HAVE_CUDA
#include "backends/cuda/cuda.h"
#include <cuda_runtime_api.h>
#endif

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
    int q = rlx_g_head_norm(&c.g, h, qn, hd, 1e-6f);
    const rlx_rope_params rp = {.n_heads = nh, .head_dim = hd, .n_rot = hd / 2, .mode = RLX_ROPE_NEOX, .freq_base = 10000.0f};
    q = rlx_g_rope(&c.g, q, ff, &rp);
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

#ifdef RLX_HAVE_CUDA
/* Decode steps replay a graph captured once per shape: the same logits as launching the steps
 * one by one (RLX_CUDA_GRAPHS=0), bit for bit, and no capture for a shape seen before. */
TEST(decode_steps_as_graphs)
{
    VK_OPEN_OR_SKIP();
    setenv("RLX_CUDA_GRAPHS", "0", 1);
    rlx_backend *plain = NULL;
    rlx_error err = {0};
    rlx_backend_config cfg = {.name = "cuda"};
    int rc = rlx_backend_create(&plain, &cfg, &err);
    unsetenv("RLX_CUDA_GRAPHS");
    ASSERT_MSG(rc == 0, "%s", err.msg);
    rlx_cuda_stats st = {0};
    ASSERT_EQ(rlx_cuda_get_stats(vk, &st), 0);
    ASSERT(st.graphs);
    ASSERT_EQ(rlx_cuda_get_stats(plain, &st), 0);
    ASSERT(!st.graphs);
    for (int kv = 0; kv < 3; kv++) {
        vt_case c;
        vt_init(&c, 2);
        vt_attention_graph(&c, 4, 2, 32, 0, 0.0f);
        c.kv_type = kv == 0 ? RLX_F16 : kv == 1 ? RLX_F32 : RLX_Q8_0;
        c.geo = (rlx_mem_desc){2, c.g.kv_cols, 12, 4, c.kv_type, NULL, 0};
        c.blocks_needed = 16;
        ASSERT_MSG(vt_prepare(&c, vk, &err) == 0 && vt_prepare(&c, plain, &err) == 0, "%s", err.msg);
        static const int32_t t0[] = {5, 1, 8, 3}, t1[] = {0, 7, 2, 9};
        rlx_batch_seq seqs[2] = {{t0, 4, -1}, {t1, 4, -1}};
        int64_t cols = c.g.tensors[c.g.output].cols;
        float *a = malloc(16 * (size_t)cols * 4), *b = malloc(16 * (size_t)cols * 4);
        uint64_t captures0 = 0;
        for (int step = 0; step < 8; step++) { /* a prefill of 7 + 5, then decodes of both: one shape */
            int32_t ids[16], pos[16], seq[16];
            uint8_t out[16];
            int n = 0;
            int n0 = step == 0 ? 7 : 1, n1 = step == 0 ? 5 : 1, p0 = step == 0 ? 0 : 6 + step, p1 = step == 0 ? 0 : 4 + step;
            for (int i = 0; i < n0; i++, n++) { ids[n] = (7 * n + step) % 40; pos[n] = p0 + i; seq[n] = 0; out[n] = 1; }
            for (int i = 0; i < n1; i++, n++) { ids[n] = (11 * n + 3 * step) % 40; pos[n] = p1 + i; seq[n] = 1; out[n] = 1; }
            rlx_batch bt = {n, ids, pos, seq, out, n, 2, seqs, NULL};
            ASSERT_MSG(vk->ops->run(vk, &c.plan, &bt, a, &err) == 0, "%s", err.msg);
            ASSERT_MSG(plain->ops->run(plain, &c.plan, &bt, b, &err) == 0, "%s", err.msg);
            ASSERT_MSG(memcmp(a, b, (size_t)n * (size_t)cols * 4) == 0, "kv %d step %d: the graph's logits differ", kv, step);
            ASSERT_EQ(rlx_cuda_get_stats(vk, &st), 0);
            if (step == 1) captures0 = st.graph_captures;
            if (step > 1) ASSERT_EQ(st.graph_captures, captures0);
        }
        free(a);
        free(b);
        vt_free(&c);
    }
    rlx_backend_destroy(plain);
    VK_CLOSE();
}

/* A backend prepared for a plan that its owner has since freed prepares the next plan (with a
 * different tensor count) and is destroyed without reading the old plan. */
TEST(prepare_after_plan_freed)
{
    VK_OPEN_OR_SKIP();
    rlx_error err = {0};
    for (int k = 0; k < 2; k++) {
        vt_case c;
        vt_init(&c, 9);
        int E = vt_weight(&c, RLX_F32, 64, 20, 1.0f), y = rlx_g_get_rows(&c.g, E, 0.0f);
        for (int i = 0; i < 3 + 4 * k; i++) y = rlx_g_matmul(&c.g, y, vt_weight(&c, RLX_Q8_0, 64, 64, 0.2f));
        c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 64, y, -1, -1);
        vt_batch_linear(&c, 3, 20);
        ASSERT_MSG(vt_run_one(&c, vk, NULL, &err) == 0, "%s", err.msg);
        vt_free(&c); /* frees the plan vk was prepared for */
    }
    VK_CLOSE();
}

typedef struct thread_run { vt_case *c; rlx_backend *be; float *out; int rc; rlx_error err; } thread_run;

static void *run_in_thread(void *arg)
{
    thread_run *t = arg;
    t->rc = vt_run_one(t->c, t->be, t->out, &t->err);
    return NULL;
}

/* The engine runs steps on its worker thread: on the last device (the one a thread does not get
 * by default), a run from another thread gives the creating thread's results. */
TEST(runs_from_another_thread)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) SKIP("no CUDA device");
    rlx_backend *be = NULL;
    rlx_error err = {0};
    rlx_backend_config cfg = {.name = "cuda", .device = count - 1};
    ASSERT_MSG(rlx_backend_create(&be, &cfg, &err) == 0, "%s", err.msg);
    vt_case c;
    vt_init(&c, 4);
    vt_attention_graph(&c, 4, 2, 32, 0, 0.0f);
    vt_batch_linear(&c, 5, 40);
    int64_t cols = c.g.tensors[c.g.output].cols;
    float *a = calloc(5 * (size_t)cols, 4), *b = calloc(5 * (size_t)cols, 4);
    ASSERT_MSG(vt_run_one(&c, be, a, &err) == 0, "%s", err.msg);
    thread_run t = {&c, be, b, -1, {0}};
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, run_in_thread, &t), 0);
    pthread_join(th, NULL);
    ASSERT_MSG(t.rc == 0, "%s", t.err.msg);
    ASSERT(memcmp(a, b, 5 * (size_t)cols * 4) == 0);
    free(a);
    free(b);
    vt_free(&c);
    rlx_backend_destroy(be);
}
#endif

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

#ifdef RLX_HAVE_CUDA
#define CUDA_ONLY_TESTS TEST_ENTRY(decode_steps_as_graphs), TEST_ENTRY(prepare_after_plan_freed), TEST_ENTRY(runs_from_another_thread),
#else
#define CUDA_ONLY_TESTS
#endif

TEST_MAIN(TEST_ENTRY(get_rows_and_matmul_every_type), TEST_ENTRY(norms_chains_rope), TEST_ENTRY(attention_paged),
          TEST_ENTRY(gelu_matches_cpu_f16_rounding), TEST_ENTRY(attention_q8_0_kv_against_reference),
          TEST_ENTRY(encoder_ops_against_cpu), CUDA_ONLY_TESTS
          TEST_ENTRY(no_device_is_a_clean_error))
