/* test_quant.c - dequantization and quantization against the llama.cpp-made files in
 * ../shared/models: synth-llama-mid-{q8_0,q4_0,q4_k_m,q5_k_m,q6_k,f16,bf16}.gguf hold the same
 * weights as synth-llama-mid-f32.gguf in other types, stories260K-{q8_0,f16}.gguf those of
 * stories260K.gguf.
 *  - every tensor dequantizes to the f32 original within a per-type relative RMS error bound;
 *  - quantizing the f32 original with rlx_quantize_row reproduces llama.cpp's bytes exactly for
 *    every type (llama.cpp made these files with its reference quantizers and no imatrix);
 *  - matmul_rows on the real weights agrees with a double-precision dot of the dequantized
 *    weights and quantized activations. */
#include "tests/rlx_test.h"
#include "backends/quant.h"
#include "models/gguf.h"

/* Reference f32 file and the llama.cpp conversions of the same weights. The synth weights are
 * random, so a too-small error also flags a broken test; stories260K's trained weights sit
 * much closer to the Q8_0 grid, so only the upper bound applies there. */
static const struct { const char *ref, *pattern; const char *variants[8]; bool random; } families[] = {
    {"models/synth-llama-mid-f32.gguf", "models/synth-llama-mid-%s.gguf",
     {"q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "f16", "bf16", NULL}, true},
    {"models/stories260K.gguf", "models/stories260K-%s.gguf", {"q8_0", "f16", NULL}, false},
};

/* relative RMS error of a dequantized tensor (random N(0,1/sqrt(fan_in)) weights); measured
 * values are ~70% of these */
static double max_rel_rms(int type)
{
    switch (type) {
    case RLX_F32: return 0;
    case RLX_F16: return 3e-4;
    case RLX_BF16: return 2.5e-3;
    case RLX_Q8_0: return 7.5e-3;
    case RLX_Q4_0: return 0.12;
    case RLX_Q4_K: return 0.10;
    case RLX_Q5_K: return 0.05;
    case RLX_Q6_K: return 0.025;
    default: return -1;
    }
}

static rlx_gguf *open_shared(const char *rel)
{
    const char *p = rlx_test_shared(rel);
    if (!p) return NULL;
    rlx_gguf *g = NULL;
    rlx_error err = {0};
    if (rlx_gguf_open(&g, p, &err)) {
        fprintf(stderr, "  cannot open %s: %s\n", p, err.msg);
        return NULL;
    }
    return g;
}

TEST(dequantize_matches_f32_original)
{
    int types_seen[RLX_DTYPE_COUNT] = {0};
    for (size_t f = 0; f < RLX_ARRAY_LEN(families); f++) {
        rlx_gguf *ref = open_shared(families[f].ref);
        if (!ref) SKIP("../shared/%s not found (set RLX_SHARED)", families[f].ref);
        for (size_t v = 0; families[f].variants[v]; v++) {
            char rel[128];
            snprintf(rel, sizeof rel, families[f].pattern, families[f].variants[v]);
            rlx_gguf *g = open_shared(rel);
            ASSERT_MSG(g, "%s missing from ../shared", rel);
            ASSERT_EQ(rlx_gguf_n_tensors(g), rlx_gguf_n_tensors(ref));
            for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
                const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i), *r = rlx_gguf_find_tensor(ref, t->name);
                ASSERT_MSG(r && r->type == RLX_F32, "%s: %s has no f32 original", rel, t->name);
                ASSERT_EQ(t->ne[0], r->ne[0]);
                ASSERT_EQ(t->ne[1], r->ne[1]);
                const double bound = max_rel_rms(t->type);
                ASSERT_MSG(bound >= 0, "%s: %s has unexpected type %d", rel, t->name, t->type);
                types_seen[t->type]++;
                const int64_t K = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
                const size_t rb = rlx_row_bytes(t->type, K);
                ASSERT_EQ(rb * (size_t)rows, t->size);
                float *d = malloc((size_t)K * sizeof(float));
                const float *x = r->data;
                double err = 0, mag = 0;
                for (int64_t row = 0; row < rows; row++) {
                    ASSERT_EQ(rlx_dequantize_row(t->type, (const char *)t->data + rb * (size_t)row, d, K), 0);
                    for (int64_t j = 0; j < K; j++) {
                        const double e = (double)d[j] - x[row * K + j];
                        err += e * e;
                        mag += (double)x[row * K + j] * x[row * K + j];
                    }
                }
                free(d);
                const double rel_rms = sqrt(err / mag);
                ASSERT_MSG(rel_rms <= bound, "%s: %s (%s) relative RMS error %.5f > %.5f", rel, t->name,
                           rlx_dtype_get(t->type)->name, rel_rms, bound);
                ASSERT_MSG(!families[f].random || t->type == RLX_F32 || rel_rms > bound / 20,
                           "%s: %s error %.3g is implausibly small", rel, t->name, rel_rms);
            }
            rlx_gguf_close(g);
        }
        rlx_gguf_close(ref);
    }
    static const int expected[] = {RLX_F16, RLX_BF16, RLX_Q8_0, RLX_Q4_0, RLX_Q4_K, RLX_Q5_K, RLX_Q6_K};
    for (size_t i = 0; i < RLX_ARRAY_LEN(expected); i++)
        ASSERT_MSG(types_seen[expected[i]] > 0, "no %s tensor in the shared files", rlx_dtype_get(expected[i])->name);
}

TEST(quantize_reproduces_llama_cpp_bytes)
{
    int checked = 0;
    for (size_t f = 0; f < RLX_ARRAY_LEN(families); f++) {
        rlx_gguf *ref = open_shared(families[f].ref);
        if (!ref) SKIP("../shared/%s not found (set RLX_SHARED)", families[f].ref);
        for (size_t v = 0; families[f].variants[v]; v++) {
            char rel[128];
            snprintf(rel, sizeof rel, families[f].pattern, families[f].variants[v]);
            rlx_gguf *g = open_shared(rel);
            ASSERT_MSG(g, "%s missing from ../shared", rel);
            for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
                const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i), *r = rlx_gguf_find_tensor(ref, t->name);
                if (t->type == RLX_F32) continue;
                const int64_t K = t->ne[0], rows = t->ne[1];
                const size_t rb = rlx_row_bytes(t->type, K);
                unsigned char *q = malloc(rb * (size_t)rows);
                for (int64_t row = 0; row < rows; row++)
                    ASSERT_EQ(rlx_quantize_row(t->type, (const float *)r->data + row * K, q + rb * (size_t)row, K), 0);
                size_t first = SIZE_MAX, ndiff = 0;
                for (size_t b = 0; b < rb * (size_t)rows; b++)
                    if (q[b] != ((const unsigned char *)t->data)[b]) { ndiff++; if (first == SIZE_MAX) first = b; }
                free(q);
                ASSERT_MSG(ndiff == 0, "%s: %s (%s): %zu bytes differ from llama.cpp's, first at byte %zu (row %zu)",
                           rel, t->name, rlx_dtype_get(t->type)->name, ndiff, first, first / rb);
                checked++;
            }
            rlx_gguf_close(g);
        }
        rlx_gguf_close(ref);
    }
    ASSERT(checked >= 130);
}

TEST(matmul_on_real_weights)
{
    rlx_gguf *g = open_shared("models/synth-llama-mid-q4_k_m.gguf");
    if (!g) SKIP("../shared/models/synth-llama-mid-q4_k_m.gguf not found (set RLX_SHARED)");
    static const char *const names[] = {"blk.1.ffn_down.weight", "blk.0.ffn_gate.weight", "output.weight"};
    for (size_t k = 0; k < RLX_ARRAY_LEN(names); k++) {
        const rlx_gguf_tensor *t = rlx_gguf_find_tensor(g, names[k]);
        ASSERT(t);
        const int64_t K = t->ne[0], N = t->ne[1], T = 3;
        const int at = rlx_vec_dot_type(t->type);
        const size_t arb = rlx_row_bytes(at, K), wrb = rlx_row_bytes(t->type, K);
        float *a = malloc((size_t)(T * K) * 4), *ad = malloc((size_t)K * 4), *wd = malloc((size_t)K * 4);
        float *out = malloc((size_t)(T * N) * 4);
        char *aq = malloc(arb * (size_t)T);
        for (int64_t i = 0; i < T * K; i++) a[i] = sinf((float)i * 0.37f) + 0.1f * cosf((float)i * 1.3f);
        for (int64_t t0 = 0; t0 < T; t0++) ASSERT_EQ(rlx_quantize_row(at, a + t0 * K, aq + arb * (size_t)t0, K), 0);
        rlx_matmul_rows(t->type, t->data, 0, N, aq, arb, T, K, out, N, NULL);
        for (int64_t t0 = 0; t0 < T; t0++) {
            /* Q8_K activations have no public dequantizer: qs * d */
            const rlx_block_q8_k *b = (const rlx_block_q8_k *)(aq + arb * (size_t)t0);
            for (int64_t i = 0; i < K; i++) ad[i] = b[i / RLX_QK_K].qs[i % RLX_QK_K] * b[i / RLX_QK_K].d;
            for (int64_t n = 0; n < N; n += 7) {
                rlx_dequantize_row(t->type, (const char *)t->data + wrb * (size_t)n, wd, K);
                double ref = 0, mag = 0;
                for (int64_t i = 0; i < K; i++) { ref += (double)wd[i] * ad[i]; mag += fabs((double)wd[i] * ad[i]); }
                ASSERT_MSG(fabs(out[t0 * N + n] - ref) <= 2e-6 * mag, "%s row %lld: %.9g vs %.9g", names[k],
                           (long long)n, out[t0 * N + n], ref);
            }
        }
        free(a); free(ad); free(wd); free(out); free(aq);
    }
    rlx_gguf_close(g);
}

TEST_MAIN(TEST_ENTRY(dequantize_matches_f32_original), TEST_ENTRY(quantize_reproduces_llama_cpp_bytes),
          TEST_ENTRY(matmul_on_real_weights))
