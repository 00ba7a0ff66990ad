/* test_quant.c - dequantization and quantization against the llama.cpp-made files in
 * ../shared/models: synth-llama-mid-{q8_0,q4_0,q4_k_m,q5_k_m,q6_k,f16,bf16}.gguf hold the same
 * weights as synth-llama-mid-f32.gguf in other types, stories260K-{q8_0,f16}.gguf those of
 * stories260K.gguf.
 *  - every tensor dequantizes to the f32 original within a per-type relative RMS error bound;
 *  - quantizing the f32 original with rlx_quantize_row reproduces llama.cpp's bytes exactly for
 *    every type (llama.cpp made these files with its reference quantizers and no imatrix);
 *  - matmul_rows on the real weights agrees with a double-precision dot of the dequantized
 *    weights and quantized activations;
 *  - hand-packed Q4_K, Q5_K and Q6_K blocks (every sub-block, the 6-bit scales and mins of
 *    sub-blocks 4-7 whose top bits sit in other bytes, negative Q6_K scales) dequantize to
 *    hand-computed values, and their dot products with a hand-packed Q8_K row equal the exact
 *    sums of those values (no file, and no use of our own dequantizer). */
#include "tests/rlx_test.h"
#include "backends/quant.h"
#include "models/gguf.h"
#include "backends/cpu/kernels.h"

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
        rlx_matmul_rows(t->type, t->data, 0, N, aq, arb, T, K, out, N);
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

/* ---- hand-packed K-quant blocks ---------------------------------------------------------- */

/* Q4_K/Q5_K: d = 0.5, dmin = 0.25; sub-block j has scale sc[j] and min mn[j] (6 bits each);
 * values are d * sc * q - dmin * mn, exact in float for these numbers. */
static const int k4_sc[8] = {1, 2, 3, 63, 37, 16, 0, 63}, k4_mn[8] = {0, 1, 2, 63, 50, 0, 17, 1};
/* the 12 packed bytes, worked out by hand from the layout: bytes 0-3 scales 0-3 (low 6 bits)
 * with the top 2 bits of scales 4-7 above them, bytes 4-7 the same for the mins, bytes 8-11 the
 * low nibbles of scale (low half) and min (high half) of sub-blocks 4-7.
 *   sc4 = 37 = 10 0101b, sc5 = 16 = 01 0000b, sc6 = 0, sc7 = 63 = 11 1111b
 *   mn4 = 50 = 11 0010b, mn5 = 0, mn6 = 17 = 01 0001b, mn7 = 1 */
static const uint8_t k4_packed[12] = {0x81, 0x42, 0x03, 0xFF, 0xC0, 0x01, 0x42, 0x3F, 0x25, 0x00, 0x10, 0x1F};

/* qs[l] (l < 128) = (l % 16) | (15 - l % 16) << 4: sub-block 2k takes the low nibbles of
 * qs[32k..32k+31], 2k+1 the high ones; Q5_K's fifth bit j of element i is bit j of qh[i] =
 * 0xF0 (i even) or 0x0F (i odd). */
static int k45_level(int j, int i, bool five)
{
    int q = (j & 1) ? 15 - i % 16 : i % 16;
    if (five) q += 16 * (((i % 2 ? 0x0F : 0xF0) >> j) & 1);
    return q;
}

static void pack_k45(void *blk, bool five)
{
    rlx_block_q4_k *b4 = blk;
    rlx_block_q5_k *b5 = blk;
    uint16_t *d = five ? &b5->d : &b4->d, *dmin = five ? &b5->dmin : &b4->dmin;
    uint8_t *scales = five ? b5->scales : b4->scales, *qs = five ? b5->qs : b4->qs;
    *d = 0x3800;    /* 0.5 */
    *dmin = 0x3400; /* 0.25 */
    memcpy(scales, k4_packed, 12);
    for (int l = 0; l < 128; l++) qs[l] = (uint8_t)((l % 16) | ((15 - l % 16) << 4));
    if (five)
        for (int i = 0; i < 32; i++) b5->qh[i] = i % 2 ? 0x0F : 0xF0;
}

/* Q6_K: d = 0.5, signed 8-bit scales per 16 values, every qh byte 0xE4 (quarter k of a 128-value
 * half takes bits 2k, 2k+1: 0, 1, 2, 3), ql[i] as qs above; value (lo | hi << 4) - 32. */
static const int8_t k6_sc[16] = {1, -2, 3, -4, 5, 6, 7, 8, 9, 10, 11, 12, -13, 14, 127, -128};

static int k6_level(int l)
{
    const int half = l / 128, r = l % 128, quarter = r / 32, p = r % 32, i = 64 * half + 32 * (quarter & 1) + p;
    const int lo = quarter < 2 ? i % 16 : 15 - i % 16;
    return lo + 16 * quarter - 32;
}

static void pack_k6(rlx_block_q6_k *b)
{
    for (int i = 0; i < 128; i++) b->ql[i] = (uint8_t)((i % 16) | ((15 - i % 16) << 4));
    memset(b->qh, 0xE4, sizeof b->qh);
    memcpy(b->scales, k6_sc, 16);
    b->d = 0x3800;
}

static double k_value(int type, int l)
{
    if (type == RLX_Q6_K) return 0.5 * k6_sc[l / 16] * k6_level(l);
    const int j = l / 32;
    return 0.5 * k4_sc[j] * k45_level(j, l % 32, type == RLX_Q5_K) - 0.25 * k4_mn[j];
}

TEST(k_quant_blocks_dequantize_to_hand_values)
{
    static const struct { int type; int l; float want; } spot[] = {
        /* Q4_K: d*sc*q - dmin*m */
        {RLX_Q4_K, 0, 0.0f},          /* j0 q0 */
        {RLX_Q4_K, 5, 2.5f},          /* j0: 0.5*1*5 */
        {RLX_Q4_K, 35, 11.75f},       /* j1 (high nibbles): q 15-3 = 12: 0.5*2*12 - 0.25*1 */
        {RLX_Q4_K, 103, 236.25f},     /* j3: q 15-7 = 8: 0.5*63*8 - 0.25*63 */
        {RLX_Q4_K, 137, 154.0f},      /* j4: q 9: 0.5*37*9 - 0.25*50 */
        {RLX_Q4_K, 161, 112.0f},      /* j5: q 14: 0.5*16*14 - 0 */
        {RLX_Q4_K, 207, -4.25f},      /* j6: scale 0, min 17 */
        {RLX_Q4_K, 224, 472.25f},     /* j7: q 15: 0.5*63*15 - 0.25*1 */
        {RLX_Q4_K, 255, -0.25f},      /* j7: q 0 */
        /* Q5_K: the fifth bit adds 16 */
        {RLX_Q5_K, 137, 154.0f},      /* j4, i = 9 odd: bit 4 of 0x0F clear */
        {RLX_Q5_K, 136, 431.5f},      /* j4, i = 8 even: q 8+16: 0.5*37*24 - 12.5 */
        {RLX_Q5_K, 224, 976.25f},     /* j7, i = 0: q 15+16: 0.5*63*31 - 0.25 */
        {RLX_Q5_K, 207, -4.25f},      /* j6 */
        {RLX_Q5_K, 35, 27.75f},       /* j1, i = 3 odd: bit 1 of 0x0F set: q 12+16: 0.5*2*28 - 0.25 */
        {RLX_Q5_K, 162, 232.0f},      /* j5, i = 2 even: q 13+16: 0.5*16*29 */
        /* Q6_K: d*scale*(level - 32) */
        {RLX_Q6_K, 0, -16.0f},        /* 0.5*1*(0 - 32) */
        {RLX_Q6_K, 40, -12.0f},       /* quarter 1: lo 8, hi 1: 24-32; scale 3 */
        {RLX_Q6_K, 70, 22.5f},        /* quarter 2: high nibble of ql[6] = 9, hi 2: 41-32; scale 5 */
        {RLX_Q6_K, 127, 64.0f},       /* quarter 3: 0 + 48 - 32 = 16; scale 8 */
        {RLX_Q6_K, 150, -130.0f},     /* second half, quarter 0: ql[86] low 6: -26; scale 10 */
        {RLX_Q6_K, 200, -45.5f},      /* quarter 2: 7; scale -13 */
        {RLX_Q6_K, 230, 1587.5f},     /* quarter 3: 25; scale 127 */
        {RLX_Q6_K, 240, -1984.0f},    /* quarter 3: 31; scale -128 */
    };
    static rlx_block_q4_k b4;
    static rlx_block_q5_k b5;
    static rlx_block_q6_k b6;
    pack_k45(&b4, false);
    pack_k45(&b5, true);
    pack_k6(&b6);
    const void *blk[3] = {&b4, &b5, &b6};
    const int types[3] = {RLX_Q4_K, RLX_Q5_K, RLX_Q6_K};
    float y[3][256];
    for (int k = 0; k < 3; k++) {
        ASSERT_EQ(rlx_dequantize_row(types[k], blk[k], y[k], 256), 0);
        for (int l = 0; l < 256; l++)
            ASSERT_MSG(y[k][l] == (float)k_value(types[k], l), "%s value %d: %.9g, want %.9g", rlx_dtype_get(types[k])->name, l,
                       y[k][l], k_value(types[k], l));
    }
    for (size_t i = 0; i < RLX_ARRAY_LEN(spot); i++) {
        const int k = spot[i].type == RLX_Q4_K ? 0 : spot[i].type == RLX_Q5_K ? 1 : 2;
        ASSERT_MSG(y[k][spot[i].l] == spot[i].want, "%s value %d: %.9g, hand value %.9g", rlx_dtype_get(spot[i].type)->name,
                   spot[i].l, y[k][spot[i].l], spot[i].want);
    }
}

/* A Q8_K row of small integers with scale 1/64: every product and partial sum of the dots is a
 * dyadic rational with few bits, so each kernel's float operations are exact and every path
 * must return exactly the sum of value * activation. */
TEST(k_quant_dots_equal_exact_sums)
{
    static rlx_block_q4_k b4;
    static rlx_block_q5_k b5;
    static rlx_block_q6_k b6;
    pack_k45(&b4, false);
    pack_k45(&b5, true);
    pack_k6(&b6);
    static rlx_block_q8_k a;
    a.d = 1.0f / 64;
    for (int i = 0; i < 256; i++) a.qs[i] = (int8_t)((i * 7) % 11 - 5);
    for (int g = 0; g < 16; g++) {
        int sum = 0;
        for (int i = 0; i < 16; i++) sum += a.qs[16 * g + i];
        a.bsums[g] = (int16_t)sum;
    }
    const void *blk[3] = {&b4, &b5, &b6};
    const int types[3] = {RLX_Q4_K, RLX_Q5_K, RLX_Q6_K};
    static const char *const paths[] = {"scalar", "avx2", "avx2-novnni", "avx512", "avx512-novnni"};
    const char *orig = rlx_cpu_path();
    for (int k = 0; k < 3; k++) {
        double want = 0;
        for (int l = 0; l < 256; l++) want += k_value(types[k], l) * a.qs[l] / 64.0;
        ASSERT_MSG(rlx_vec_dot(types[k], blk[k], &a, 256) == (float)want, "%s: vec_dot %.9g, exact %.9g",
                   rlx_dtype_get(types[k])->name, rlx_vec_dot(types[k], blk[k], &a, 256), want);
        for (size_t p = 0; p < RLX_ARRAY_LEN(paths); p++) {
            if (!rlx_cpu_has_path(paths[p])) continue;
            ASSERT_EQ(rlx_cpu_force_path(paths[p]), 0);
            float out[2];
            rlx_matmul_rows(types[k], blk[k], 0, 1, &a, sizeof a, 1, 256, out, 1);
            rlx_matmul_rows_batched(types[k], blk[k], 0, 1, &a, sizeof a, 1, 256, out + 1, 1);
            ASSERT_MSG(out[0] == (float)want && out[1] == (float)want, "%s path %s: %.9g / %.9g, exact %.9g",
                       rlx_dtype_get(types[k])->name, paths[p], out[0], out[1], want);
        }
    }
    ASSERT_EQ(rlx_cpu_force_path(orig), 0);
}

TEST_MAIN(TEST_ENTRY(dequantize_matches_f32_original), TEST_ENTRY(quantize_reproduces_llama_cpp_bytes),
          TEST_ENTRY(matmul_on_real_weights), TEST_ENTRY(k_quant_blocks_dequantize_to_hand_values),
          TEST_ENTRY(k_quant_dots_equal_exact_sums))
