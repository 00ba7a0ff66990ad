/* test_gpu_common.h - tests every GPU backend runs alike (test_vulkan_ops.c, test_cuda_ops.c):
 * GELU value by value against the CPU, and the Q8_0 KV pool against a scalar reference of its
 * layout. The includer sets GPU_BACKEND and VT_Q8_TOL (the attention tolerance: its summation
 * order) and lists TEST_ENTRY(gelu_matches_cpu_f16_rounding) and
 * TEST_ENTRY(attention_q8_0_kv_against_reference). */
#ifndef RLX_TEST_GPU_COMMON_H
#define RLX_TEST_GPU_COMMON_H

#include "tests/unit/test_vulkan_util.h"

/* ---- GELU against the CPU, value by value ---------------------------------------------------
 * GELU rounds its input and output through f16 as ggml's table does (cpu_ops.c), so a GPU gives
 * the same f16 values except where its exp/tanh error straddles an f16 rounding boundary: counts
 * the values that differ (*differ of *n) and the largest difference in f16 steps. Inputs span
 * [-12, 12]; fused: GELU after an f32 matmul (beyond +-10 GELU passes the float product through,
 * which may differ in its last bits). */
static inline int vt_gelu_against_cpu(rlx_backend *gpu, int fused, size_t *differ, size_t *n, double *worst_steps)
{
    vt_case c;
    vt_init(&c, 5);
    int E = vt_weight(&c, RLX_F32, 256, 40, 12.0f), W = vt_weight(&c, RLX_F32, 256, 256, 0.2f);
    int x = rlx_g_get_rows(&c.g, E, 0.0f);
    if (fused) x = rlx_g_matmul(&c.g, x, W);
    x = rlx_g_unary(&c.g, RLX_OP_GELU, x, 0.0f);
    c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 256, x, -1, -1);
    vt_batch_linear(&c, 20, 40);
    *n = (size_t)c.n_tokens * 256;
    float *a = calloc(*n, 4), *b = calloc(*n, 4);
    rlx_error err = {0};
    int rc = rlx_backend_cpu_create(&c.cpu, 2, &err);
    if (!rc) rc = vt_run_one(&c, c.cpu, b, &err);
    if (!rc) rc = vt_run_one(&c, gpu, a, &err);
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    *differ = 0;
    *worst_steps = 0;
    for (size_t i = 0; !rc && i < *n; i++) {
        if (a[i] == b[i]) continue;
        if (fabs(b[i]) >= 10.0 && fabs(a[i] - b[i]) <= 1e-5 * fabs(b[i])) continue;
        (*differ)++;
        double step = ldexp(1.0, (fabs(b[i]) < 6.1e-5 ? -14 : ilogb(b[i])) - 10); /* at b's magnitude */
        *worst_steps = fmax(*worst_steps, fabs((double)a[i] - b[i]) / step);
    }
    free(a);
    free(b);
    vt_free(&c);
    return rc;
}

/* ---- Q8_0 KV cache, against a scalar reference of its layout -------------------------------
 * Each token's K and V row (kv_cols values) is kv_cols / 32 rlx_block_q8_0 (f16 scale, 32 int8)
 * quantized as quant.c's Q8_0 quantizer, in the same block/slot arrangement as F16; attention
 * reads the dequantized values (q and p unrounded, as for an f32 pool). q, k and v come
 * straight from get_rows here, so the reference knows them exactly. */

typedef struct q8_ref {
    int nh, nkv, hd, window;
    float softcap;
    int64_t kvc;
    size_t rb;            /* row bytes */
    uint8_t *K, *V;       /* pool: [12 blocks * 4 slots][rb] */
    const float *Eq, *Ek, *Ev;
} q8_ref;

static inline void q8_ref_step(q8_ref *r, const rlx_batch *b, float *y)
{
    const int32_t bs = 4;
    for (int32_t t = 0; t < b->n_tokens; t++) { /* the batch's K/V first, as the backends do */
        const rlx_batch_seq *s = &b->seqs[b->seq[t]];
        size_t slot = (size_t)s->blocks[b->pos[t] / bs] * bs + (size_t)(b->pos[t] % bs);
        rlx_quantize_row(RLX_Q8_0, r->Ek + (size_t)b->tokens[t] * r->kvc, r->K + slot * r->rb, r->kvc);
        rlx_quantize_row(RLX_Q8_0, r->Ev + (size_t)b->tokens[t] * r->kvc, r->V + slot * r->rb, r->kvc);
    }
    float *kr = malloc((size_t)r->kvc * 4), *vr = malloc((size_t)r->kvc * 4), *sc = malloc(64 * 4);
    for (int32_t t = 0; t < b->n_tokens; t++) {
        const rlx_batch_seq *s = &b->seqs[b->seq[t]];
        int32_t p = b->pos[t], j0 = r->window > 0 && p - r->window + 1 > 0 ? p - r->window + 1 : 0;
        for (int h = 0; h < r->nh; h++) {
            const float *q = r->Eq + (size_t)b->tokens[t] * (size_t)(r->nh * r->hd) + (size_t)h * r->hd;
            int hk = h / (r->nh / r->nkv);
            float mx = -INFINITY, acc[64] = {0};
            for (int32_t j = j0; j <= p; j++) {
                size_t slot = (size_t)s->blocks[j / bs] * bs + (size_t)(j % bs);
                rlx_dequantize_row(RLX_Q8_0, r->K + slot * r->rb, kr, r->kvc);
                float d = 0.0f;
                for (int i = 0; i < r->hd; i++) d += q[i] * kr[hk * r->hd + i];
                if (r->softcap > 0.0f) d = r->softcap * tanhf(d * (1.0f / r->softcap));
                d *= 1.0f / sqrtf((float)r->hd);
                sc[j - j0] = d;
                mx = fmaxf(mx, d);
            }
            double sum = 0.0;
            for (int32_t j = j0; j <= p; j++) sum += (double)(sc[j - j0] = expf(sc[j - j0] - mx));
            float inv = (float)(1.0 / sum);
            for (int32_t j = j0; j <= p; j++) {
                size_t slot = (size_t)s->blocks[j / bs] * bs + (size_t)(j % bs);
                rlx_dequantize_row(RLX_Q8_0, r->V + slot * r->rb, vr, r->kvc);
                float pj = sc[j - j0] * inv;
                for (int i = 0; i < r->hd; i++) acc[i] += pj * vr[hk * r->hd + i];
            }
            memcpy(y + ((size_t)t * r->nh + (size_t)h) * r->hd, acc, (size_t)r->hd * 4);
        }
    }
    free(kr);
    free(vr);
    free(sc);
}

#define VT_Q8_CASES 4

/* Case ci (heads, KV heads, head size, window, softcap) over four steps of two sequences with
 * scattered blocks: *worst relative difference from the reference, *same whether every block of
 * the GPU's pool holds the reference's bytes. Non-zero when it could not run. */
static inline int vt_q8_kv_case(rlx_backend *gpu, int ci, double *worst, bool *same)
{
    static const struct { int nh, nkv, hd, window; float cap; } cases[VT_Q8_CASES] = {
        {4, 2, 32, 0, 0.0f}, {2, 1, 64, 5, 30.0f}, {6, 3, 32, 0, 0.0f}, {2, 1, 32, 3, 0.0f}};
    vt_case c;
    vt_init(&c, 11 + (uint64_t)ci);
    q8_ref r = {cases[ci].nh, cases[ci].nkv, cases[ci].hd, cases[ci].window, cases[ci].cap, 0, 0, NULL, NULL, NULL, NULL, NULL};
    r.kvc = (int64_t)r.nkv * r.hd;
    r.rb = (size_t)(r.kvc / 32) * 34;
    int Eq = vt_weight(&c, RLX_F32, r.nh * r.hd, 40, 1.0f), Ek = vt_weight(&c, RLX_F32, r.kvc, 40, 1.0f);
    int Ev = vt_weight(&c, RLX_F32, r.kvc, 40, 2.0f);
    r.Eq = c.g.tensors[Eq].data;
    r.Ek = c.g.tensors[Ek].data;
    r.Ev = c.g.tensors[Ev].data;
    c.g.n_layers = 1;
    c.g.kv_cols = r.kvc;
    const rlx_attn_params ap = {.layer = 0, .n_head = r.nh, .n_head_kv = r.nkv, .head_dim = r.hd, .window = r.window,
                                .scale = 1.0f / sqrtf((float)r.hd), .softcap = r.softcap};
    int a = rlx_g_attention(&c.g, rlx_g_get_rows(&c.g, Eq, 0.0f), rlx_g_get_rows(&c.g, Ek, 0.0f), rlx_g_get_rows(&c.g, Ev, 0.0f), &ap);
    c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, (int64_t)r.nh * r.hd, a, -1, -1);
    c.kv_type = RLX_Q8_0;
    c.geo = (rlx_mem_desc){1, r.kvc, 12, 4, RLX_Q8_0, NULL, 0};
    rlx_error err = {0};
    int rc = vt_prepare(&c, gpu, &err);
    r.K = calloc(48, r.rb);
    r.V = calloc(48, r.rb);
    static const int32_t t0[] = {5, 1, 8, 3}, t1[] = {0, 7, 2, 9};
    rlx_batch_seq seqs[2] = {{t0, 4, -1}, {t1, 4, -1}};
    size_t cols = (size_t)r.nh * r.hd;
    float *got = malloc(16 * cols * 4), *want = malloc(16 * cols * 4);
    *worst = 0;
    for (int step = 0; step < 4 && !rc; step++) { /* prefill 7 + 5, decodes, a chunk with a decode, decodes */
        int32_t ids[16], pos[16], seq[16];
        uint8_t out[16];
        static const int n0s[] = {7, 1, 6, 1}, p0s[] = {0, 7, 8, 14}, n1s[] = {5, 1, 1, 1}, p1s[] = {0, 5, 6, 7};
        int nt = 0;
        for (int i = 0; i < n0s[step]; i++, nt++) { ids[nt] = (7 * nt + step) % 40; pos[nt] = p0s[step] + i; seq[nt] = 0; out[nt] = 1; }
        for (int i = 0; i < n1s[step]; i++, nt++) { ids[nt] = (11 * nt + 3 * step) % 40; pos[nt] = p1s[step] + i; seq[nt] = 1; out[nt] = 1; }
        rlx_batch b = {nt, ids, pos, seq, out, nt, 2, seqs, NULL};
        if ((rc = gpu->ops->run(gpu, &c.plan, &b, got, &err))) break;
        q8_ref_step(&r, &b, want);
        *worst = fmax(*worst, vt_diff(got, want, (size_t)nt * cols));
    }
    uint8_t *kb = malloc(4 * r.rb), *vb = malloc(4 * r.rb);
    *same = !rc;
    for (int32_t blk = 0; blk < 12 && !rc; blk++) {
        if ((rc = gpu->ops->kv_read_block(gpu, 0, blk, kb, vb, &err))) break;
        *same &= !memcmp(kb, r.K + (size_t)blk * 4 * r.rb, 4 * r.rb) && !memcmp(vb, r.V + (size_t)blk * 4 * r.rb, 4 * r.rb);
    }
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    free(kb); free(vb); free(got); free(want); free(r.K); free(r.V);
    vt_free(&c);
    return rc;
}

/* GELU rounds its input and output through f16 as ggml's table does (cpu_ops.c): the GPU must
 * give the same f16 values, not a float GELU within 1e-3 (that moved quantized Gemma logits by
 * ~1% and flipped greedy tokens). Only a value whose exact GELU lies within the device's
 * exp/tanh error of an f16 rounding boundary may differ, by one f16 step (measured on
 * lavapipe: 2 of 5120; 3261 before the f16 roundings). */
TEST(gelu_matches_cpu_f16_rounding)
{
    VK_OPEN_OR_SKIP();
    for (int fused = 0; fused < 2; fused++) {
        size_t differ = 0, n = 0;
        double worst_steps = 0;
        ASSERT(vt_gelu_against_cpu(vk, fused, &differ, &n, &worst_steps) == 0);
        ASSERT_MSG(differ * 100 <= n, "fused=%d: %zu of %zu GELU values differ from the CPU's", fused, differ, n);
        ASSERT_MSG(worst_steps <= 1.0, "fused=%d: a GELU value is %.2f f16 steps from the CPU's", fused, worst_steps);
    }
    VK_CLOSE();
}

/* The Q8_0 pool holds the reference's bytes exactly; attention over it is within VT_Q8_TOL
 * (Vulkan measured 2e-7); rows of 1 to 4 blocks (34 bytes: neighbouring rows share words),
 * GQA, window and softcap. Rows that are not whole blocks are refused with a clear error. */
TEST(attention_q8_0_kv_against_reference)
{
    VK_OPEN_OR_SKIP();
    for (int ci = 0; ci < VT_Q8_CASES; ci++) {
        double worst = 1e9;
        bool same = false;
        ASSERT_MSG(vt_q8_kv_case(vk, ci, &worst, &same) == 0, "case %d did not run", ci);
        ASSERT_MSG(same, "case %d: the Q8_0 pool differs from the reference's bytes", ci);
        ASSERT_MSG(worst <= VT_Q8_TOL, "case %d: attention over a Q8_0 pool differs by %g", ci, worst);
    }
    rlx_mem_desc bad = {1, 48, 4, 4, RLX_Q8_0, NULL, 0};
    rlx_error err = {0};
    ASSERT_EQ(vk->ops->mem_init(vk, &bad, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "32") && strstr(err.msg, "48"), "%s", err.msg);
    VK_CLOSE();
}

/* ---- encoders: layer norm, position rows, attention without a cache, hidden output ----------
 * Two bert-style layers (token rows + learned position rows, layer norm * w + b, q/k/v with
 * biases, bidirectional attention over the step's own K and V with GQA, GELU feed-forward,
 * post-norm), every token's hidden state as output. One step of three sequences (5, 1 and 9
 * tokens), one of the longest alone, and that one again among 44 tokens (bit for bit its rows
 * alone: batch invariance): each against the CPU, relative to its largest value. A
 * batch whose sequence is split, does not start at position 0 or runs past the learned
 * positions is refused with the reason (a kernel cannot raise it). */
#define VT_ENC_D 64
static inline int vt_encoder_case(rlx_backend *gpu, double *worst, char *refused, size_t refused_len)
{
    vt_case c;
    vt_init(&c, 23);
    const int nh = 4, nkv = 2, hd = 16, V = 40, P = 12, F = 96;
    int x = rlx_g_add(&c.g, rlx_g_get_rows(&c.g, vt_weight(&c, RLX_F16, VT_ENC_D, V, 1.0f), 0.0f),
                      rlx_g_get_rows_pos(&c.g, vt_weight(&c, RLX_F32, VT_ENC_D, P, 0.5f)));
    x = rlx_g_add(&c.g, rlx_g_mul(&c.g, rlx_g_norm(&c.g, x, 1e-12f), vt_weight(&c, RLX_F32, VT_ENC_D, 1, 1.0f)),
                  vt_weight(&c, RLX_F32, VT_ENC_D, 1, 0.1f));
    c.g.n_layers = 2;
    c.g.kv_cols = (int64_t)nkv * hd;
    c.g.mem = calloc(2, sizeof *c.g.mem);
    for (int l = 0; l < 2 && c.g.mem; l++) {
        c.g.mem[l] = (rlx_mem_layer){RLX_MEM_NONE, 0, 0};
        int qkv[3];
        for (int k = 0; k < 3; k++) {
            int64_t n = k ? (int64_t)nkv * hd : (int64_t)nh * hd;
            qkv[k] = rlx_g_add(&c.g, rlx_g_matmul(&c.g, x, vt_weight(&c, RLX_F32, VT_ENC_D, n, 0.3f)), vt_weight(&c, RLX_F32, n, 1, 0.1f));
        }
        const rlx_attn_params ap = {.layer = l, .n_head = nh, .n_head_kv = nkv, .head_dim = hd, .scale = 1.0f / sqrtf((float)hd),
                                    .mask = RLX_ATTN_BIDIRECTIONAL};
        int a = rlx_g_attention(&c.g, qkv[0], qkv[1], qkv[2], &ap);
        x = rlx_g_add(&c.g, rlx_g_matmul(&c.g, a, vt_weight(&c, RLX_F32, (int64_t)nh * hd, VT_ENC_D, 0.3f)), x);
        x = rlx_g_mul(&c.g, rlx_g_norm(&c.g, x, 1e-12f), vt_weight(&c, RLX_F32, VT_ENC_D, 1, 1.0f));
        int h = rlx_g_unary(&c.g, RLX_OP_GELU, rlx_g_matmul(&c.g, x, vt_weight(&c, RLX_Q8_0, VT_ENC_D, F, 0.3f)), 0.0f);
        x = rlx_g_add(&c.g, rlx_g_matmul(&c.g, h, vt_weight(&c, RLX_F32, F, VT_ENC_D, 0.2f)), x);
        x = rlx_g_norm(&c.g, x, 1e-12f);
    }
    rlx_g_set_output(&c.g, x, RLX_OUTPUT_HIDDEN);
    c.geo = (rlx_mem_desc){2, c.g.kv_cols, 1, 16, RLX_F32, c.g.mem, 0};
    rlx_error err = {0};
    int rc = c.g.mem ? 0 : RLX_ENOMEM;
    if (!rc) rc = rlx_backend_cpu_create(&c.cpu, 2, &err);
    rlx_backend *bes[2] = {c.cpu, gpu};
    c.max_tokens = 48;
    for (int i = 0; i < 2 && !rc; i++) rc = vt_prepare(&c, bes[i], &err);
    rlx_batch_seq seqs[4] = {{NULL, 0, -1}, {NULL, 0, -1}, {NULL, 0, -1}, {NULL, 0, -1}};
    float *y[2] = {malloc(48 * VT_ENC_D * 4), malloc(48 * VT_ENC_D * 4)}, alone[9 * VT_ENC_D];
    int32_t ids[48], pos[48], seq[48];
    uint8_t none[48] = {0};
    *worst = 0;
    /* the third step is batch invariance: the 9-token sequence the second ran alone, again as
     * the second of four (44 tokens, past the size where CUDA's other matmuls go to cuBLAS),
     * must give its rows bit for bit */
    for (int step = 0; step < 3 && !rc; step++) {
        static const int lens[3][4] = {{5, 1, 9, 0}, {9, 0, 0, 0}, {12, 9, 11, 12}};
        int nt = 0, ns = 0;
        for (int s = 0; s < 4 && lens[step][s]; s++, ns++)
            for (int i = 0; i < lens[step][s]; i++, nt++) {
                ids[nt] = step == 2 ? (s == 1 ? (7 * i + 1) % V : (5 * nt + s) % V) : (7 * nt + 3 * s + 1) % V;
                pos[nt] = i;
                seq[nt] = s;
            }
        rlx_batch b = {nt, ids, pos, seq, none, 0, ns, seqs, NULL};
        for (int i = 0; i < 2 && !rc; i++) rc = bes[i]->ops->run(bes[i], &c.plan, &b, y[i], &err);
        if (!rc) *worst = fmax(*worst, vt_diff(y[1], y[0], (size_t)nt * VT_ENC_D));
        if (!rc && step == 1) memcpy(alone, y[1], sizeof alone);
        if (!rc && step == 2 && memcmp(alone, y[1] + 12 * VT_ENC_D, sizeof alone)) {
            double d = 0;
            for (size_t k = 0; k < 9 * VT_ENC_D; k++) d = fmax(d, fabs((double)alone[k] - y[1][12 * VT_ENC_D + k]));
            rc = RLX_EINVAL, snprintf(err.msg, sizeof err.msg, "a sequence's hidden states among 44 tokens differ from "
                                                               "its own step's by up to %g (not bit for bit)", d);
        }
    }
    /* sequence 0 split around sequence 1 (each run from position 0); a sequence from position 1;
     * one longer than the position table */
    static const int32_t ids2[13] = {0}, bad_pos[3][13] = {{0, 0, 0}, {1, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
    static const int32_t bad_seq[3][13] = {{0, 1, 0}, {0}, {0}};
    static const char *const why[3] = {"contiguous", "position order", "learned positions"};
    refused[0] = 0;
    for (int k = 0; k < 3 && !rc; k++) {
        rlx_batch bad = {k == 2 ? P + 1 : 3, ids2, bad_pos[k], bad_seq[k], none, 0, 2, seqs, NULL};
        rlx_error e2 = {0};
        int rc2 = gpu->ops->run(gpu, &c.plan, &bad, y[1], &e2);
        if ((rc2 == RLX_EINVAL || rc2 == RLX_ERANGE) && strstr(e2.msg, why[k]))
            snprintf(refused + strlen(refused), refused_len - strlen(refused), "%s%.200s", k ? "; " : "", e2.msg);
        else rc = RLX_EINVAL, snprintf(err.msg, sizeof err.msg, "bad batch %d: %.200s", k, e2.msg[0] ? e2.msg : "accepted");
    }
    if (rc) fprintf(stderr, "  encoder: %s\n", err.msg);
    free(y[0]);
    free(y[1]);
    vt_free(&c);
    return rc;
}

/* The encoder ops on the GPU against the CPU (test_parity_embed checks whole models). */
TEST(encoder_ops_against_cpu)
{
    VK_OPEN_OR_SKIP();
    double worst = 1e9;
    char refused[512];
    ASSERT_MSG(vt_encoder_case(vk, &worst, refused, sizeof refused) == 0, "the encoder case did not run");
    fprintf(stderr, "  encoder: relative difference %g; refused: %s\n", worst, refused);
    ASSERT_MSG(worst <= VT_ENC_TOL, "hidden states differ from the CPU's by %g", worst);
    VK_CLOSE();
}

#endif
