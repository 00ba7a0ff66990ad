/* test_sample.c - the sampler: each filter alone on hand-made logits, exact penalty values,
 * seeded draws against expected distributions (chi-square at p = 0.001), determinism, greedy
 * ties, bans, validation messages, log-probabilities, and a 151,936-token vocabulary. */
#include "tests/rlx_test.h"
#include "engine/sample.h"
#include "engine/sample_internal.h"
#include "backends/cpu/kernels.h"

#include <pthread.h>

/* The sanitizer build checks memory, not statistics (the release run draws 20000): a quarter of
 * the draws there, where the 151,936-token cases cost minutes. */
#if defined(__SANITIZE_ADDRESS__)
#define N_DRAWS 5000
#else
#define N_DRAWS 20000
#endif

/* chi-square critical values at p = 0.001 for 1..9 degrees of freedom */
static const double chi2_crit[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88};

static rlx_sampling_params params(float temp, uint64_t seed)
{
    rlx_sampling_params p;
    rlx_sampling_params_default(&p);
    p.temperature = temp;
    p.seed = seed;
    p.has_seed = true;
    return p;
}

/* Draws N_DRAWS tokens from fresh copies of `logits` into counts[n]. */
static void draw_many(rlx_sampler *s, const float *logits, int n, int *counts)
{
    float buf[16];
    memset(counts, 0, (size_t)n * sizeof *counts);
    for (int i = 0; i < N_DRAWS; i++) {
        memcpy(buf, logits, (size_t)n * sizeof *buf);
        int32_t t = rlx_sampler_sample(s, buf);
        if (t >= 0 && t < n) counts[t]++;
    }
}

/* Chi-square of counts against probabilities `expect` (zero entries must have zero counts). */
static double chi2(const int *counts, const double *expect, int n, int *df)
{
    double x = 0.0;
    *df = -1;
    for (int i = 0; i < n; i++) {
        if (expect[i] == 0.0) {
            if (counts[i]) return INFINITY;
            continue;
        }
        double e = expect[i] * N_DRAWS;
        x += (counts[i] - e) * (counts[i] - e) / e;
        (*df)++;
    }
    return x;
}

#define ASSERT_DIST(counts, expect, n) do { int df_; double x_ = chi2(counts, expect, n, &df_); \
    ASSERT_MSG(df_ >= 1 && df_ < 10 && x_ < chi2_crit[df_], "chi-square %.2f with %d df", x_, df_); \
    } while (0)

static void softmax(const float *l, int n, double t, double *out)
{
    double mx = -INFINITY, z = 0;
    for (int i = 0; i < n; i++) if (l[i] > mx) mx = l[i];
    for (int i = 0; i < n; i++) z += out[i] = exp((l[i] - mx) / t);
    for (int i = 0; i < n; i++) out[i] /= z;
}

TEST(defaults)
{
    rlx_sampling_params p;
    rlx_sampling_params_default(&p);
    ASSERT_NEAR(p.temperature, 1.0, 0);
    ASSERT_NEAR(p.top_p, 1.0, 0);
    ASSERT_EQ(p.top_k, 0);
    ASSERT_NEAR(p.min_p, 0.0, 0);
    ASSERT_NEAR(p.repetition_penalty, 1.0, 0);
    ASSERT_EQ(p.penalty_last_n, 64);
    ASSERT(!p.has_seed);
    ASSERT_EQ(rlx_sampling_params_validate(&p, 10, NULL), 0);
}

static const char *validate_msg(const rlx_sampling_params *p)
{
    static rlx_error err;
    memset(&err, 0, sizeof err);
    return rlx_sampling_params_validate(p, 100, &err) == RLX_EINVAL ? err.msg : "(accepted)";
}

TEST(validation_names_the_parameter)
{
    rlx_sampling_params p;
    rlx_logit_bias b = {100, 1.0f};
#define BAD(field, value, word) do { rlx_sampling_params_default(&p); p.field = value; \
    const char *m_ = validate_msg(&p); \
    ASSERT_MSG(strstr(m_, word) != NULL, "%s = %s: \"%s\" lacks \"%s\"", #field, #value, m_, word); \
    } while (0)
    BAD(temperature, 2.5f, "temperature");
    BAD(temperature, -0.1f, "temperature");
    BAD(temperature, NAN, "temperature");
    BAD(top_p, -0.1f, "top_p");
    BAD(top_p, 1.5f, "top_p");
    BAD(top_k, -2, "top_k");
    BAD(min_p, 1.01f, "min_p");
    BAD(min_p, -0.5f, "min_p");
    BAD(presence_penalty, 2.5f, "presence_penalty");
    BAD(frequency_penalty, -2.5f, "frequency_penalty");
    BAD(repetition_penalty, 0.0f, "repetition_penalty");
    BAD(penalty_last_n, -5, "penalty_last_n");
    rlx_sampling_params_default(&p);
    p.logit_bias = &b;
    p.n_logit_bias = 1;
    ASSERT(strstr(validate_msg(&p), "logit_bias token 100") != NULL);
    b.token = 5;
    b.bias = 101.0f;
    ASSERT(strstr(validate_msg(&p), "logit_bias for token 5") != NULL);
    b.bias = -100.0f;
    ASSERT_STR_EQ(validate_msg(&p), "(accepted)");
    /* edges that must pass */
    rlx_sampling_params_default(&p);
    p.temperature = 2.0f; p.top_p = 1.0f; p.top_k = -1; p.min_p = 1.0f;
    p.presence_penalty = -2.0f; p.frequency_penalty = 2.0f; p.penalty_last_n = -1;
    ASSERT_STR_EQ(validate_msg(&p), "(accepted)");
}

TEST(greedy_ties_to_lowest_id)
{
    float l[] = {1, 3, 3, 2};
    ASSERT_EQ(rlx_argmax(l, 4), 1);
    float l2[] = {NAN, -1, 5, 5};
    ASSERT_EQ(rlx_argmax(l2, 4), 2);
    rlx_sampling_params p = params(0.0f, 1);
    rlx_sampler *s = rlx_sampler_new(&p, 4);
    ASSERT(s);
    for (int i = 0; i < 10; i++) {
        float b[] = {1, 3, 3, 2};
        ASSERT_EQ(rlx_sampler_sample(s, b), 1);
    }
    rlx_sampler_free(s);
}

TEST(logit_bias_ban_and_boost)
{
    rlx_logit_bias ban[] = {{1, -100.0f}};
    rlx_sampling_params p = params(0.0f, 1);
    p.logit_bias = ban;
    p.n_logit_bias = 1;
    rlx_sampler *s = rlx_sampler_new(&p, 4);
    ban[0].token = 3; /* the sampler must hold its own copy */
    float g[] = {1, 30, 3, 2};
    ASSERT_EQ(rlx_sampler_sample(s, g), 2);
    rlx_sampler_free(s);

    /* with sampling: the banned token never appears even at high temperature */
    ban[0].token = 1;
    p = params(2.0f, 7);
    p.logit_bias = ban;
    p.n_logit_bias = 1;
    s = rlx_sampler_new(&p, 4);
    float l[] = {0, 50, 0, 0};
    int counts[4];
    draw_many(s, l, 4, counts);
    ASSERT_EQ(counts[1], 0);
    double e[] = {1 / 3.0, 0, 1 / 3.0, 1 / 3.0};
    ASSERT_DIST(counts, e, 4);
    rlx_sampler_free(s);

    /* additive: +ln(3) on token 0 of four equal logits gives it probability 1/2 */
    rlx_logit_bias boost[] = {{0, (float)log(3.0)}};
    p = params(1.0f, 11);
    p.logit_bias = boost;
    p.n_logit_bias = 1;
    s = rlx_sampler_new(&p, 4);
    float z[] = {0, 0, 0, 0};
    draw_many(s, z, 4, counts);
    double e2[] = {0.5, 1 / 6.0, 1 / 6.0, 1 / 6.0};
    ASSERT_DIST(counts, e2, 4);
    rlx_sampler_free(s);
}

TEST(penalties_exact_values)
{
    rlx_sampling_params p = params(0.0f, 1);
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    rlx_sampler *s = rlx_sampler_new(&p, 5);
    int32_t hist[] = {0, 1, 0, 4};
    for (size_t i = 0; i < RLX_ARRAY_LEN(hist); i++) rlx_sampler_accept(s, hist[i], true);
    float l[] = {2.0f, -2.0f, 1.0f, 0.5f, 0.0f};
    rlx_sampler_sample(s, l); /* logits are modified in place: check the chain's values */
    ASSERT_NEAR(l[0], 2.0 / 2 - (2 * 0.25 + 0.5), 1e-6);  /* positive: divided; seen twice */
    ASSERT_NEAR(l[1], -2.0 * 2 - (1 * 0.25 + 0.5), 1e-6); /* negative: multiplied */
    ASSERT_NEAR(l[2], 1.0, 0);                            /* unseen: untouched */
    ASSERT_NEAR(l[3], 0.5, 0);
    ASSERT_NEAR(l[4], 0.0 - 0.75, 1e-6);                  /* zero stays zero before OpenAI terms */
    rlx_sampler_free(s);
}

TEST(penalty_window)
{
    rlx_sampling_params p = params(0.0f, 1);
    p.frequency_penalty = 1.0f;
    p.penalty_last_n = 3;
    rlx_sampler *s = rlx_sampler_new(&p, 8);
    /* a long history: only the last three tokens (5, 6, 6) count */
    for (int i = 0; i < 1000; i++) rlx_sampler_accept(s, i % 5, true);
    rlx_sampler_accept(s, 5, true);
    rlx_sampler_accept(s, 6, true);
    rlx_sampler_accept(s, 6, true);
    float l[8] = {0};
    rlx_sampler_sample(s, l);
    for (int i = 0; i < 5; i++) ASSERT_NEAR(l[i], 0.0, 0);
    ASSERT_NEAR(l[5], -1.0, 0);
    ASSERT_NEAR(l[6], -2.0, 0);
    rlx_sampler_free(s);

    /* repeats leaving the window are uncounted one by one */
    s = rlx_sampler_new(&p, 8);
    for (int i = 0; i < 10; i++) rlx_sampler_accept(s, 6, true);
    rlx_sampler_accept(s, 1, true);
    float r[8] = {0};
    rlx_sampler_sample(s, r);
    ASSERT_NEAR(r[6], -2.0, 0);
    ASSERT_NEAR(r[1], -1.0, 0);
    rlx_sampler_accept(s, 2, true);
    rlx_sampler_accept(s, 3, true);
    float r2[8] = {0};
    rlx_sampler_sample(s, r2);
    ASSERT_NEAR(r2[6], 0.0, 0);
    ASSERT_NEAR(r2[1] + r2[2] + r2[3], -3.0, 0);
    rlx_sampler_free(s);

    /* 0 disables; -1 means the whole history */
    p.penalty_last_n = 0;
    s = rlx_sampler_new(&p, 8);
    rlx_sampler_accept(s, 2, true);
    float a[8] = {0};
    rlx_sampler_sample(s, a);
    ASSERT_NEAR(a[2], 0.0, 0);
    rlx_sampler_free(s);
    p.penalty_last_n = -1;
    s = rlx_sampler_new(&p, 8);
    for (int i = 0; i < 500; i++) rlx_sampler_accept(s, 2, true);
    for (int i = 0; i < 7; i++) rlx_sampler_accept(s, i, true); /* grows the count table */
    rlx_sampler_accept(s, 99, true); /* out of the vocabulary: ignored */
    float b[8] = {0};
    rlx_sampler_sample(s, b);
    ASSERT_NEAR(b[2], -501.0, 0);
    ASSERT_NEAR(b[0], -1.0, 0);
    ASSERT_NEAR(b[7], 0.0, 0);
    rlx_sampler_free(s);
}

TEST(temperature_distribution)
{
    float l[] = {(float)log(0.5), (float)log(0.3), (float)log(0.15), (float)log(0.05)};
    double e[4];
    int counts[4];
    const float temps[] = {1.0f, 0.5f, 1.7f};
    for (size_t k = 0; k < RLX_ARRAY_LEN(temps); k++) {
        rlx_sampling_params p = params(temps[k], 7 + k);
        rlx_sampler *s = rlx_sampler_new(&p, 4);
        draw_many(s, l, 4, counts);
        softmax(l, 4, temps[k], e);
        ASSERT_DIST(counts, e, 4);
        rlx_sampler_free(s);
    }
    /* a wrong distribution must be rejected by the same check: T=1 counts vs T=0.5 probs */
    rlx_sampling_params p = params(1.0f, 3);
    rlx_sampler *s = rlx_sampler_new(&p, 4);
    draw_many(s, l, 4, counts);
    softmax(l, 4, 0.5, e);
    int df;
    ASSERT(chi2(counts, e, 4, &df) > chi2_crit[3]);
    rlx_sampler_free(s);
}

/* Temperature alone over a Qwen-size vocabulary takes the full-vocabulary path (vectorized
 * weights, block sums): its draws must follow the softmax across block boundaries, never pick
 * -inf or NaN logits, and repeat with the seed. */
TEST(full_vocab_temperature_distribution)
{
    enum { NV = 151936 };
    static const int32_t ids[] = {0, 255, 256, 40000, NV - 1}; /* block edges and the vocabulary's end */
    const double prob[] = {0.3, 0.25, 0.2, 0.15, 0.1};
    static float l[NV], buf[NV];
    for (int32_t i = 0; i < NV; i++) l[i] = -60.0f; /* e^-60 x 151931: nothing drawn in 20000 */
    for (int32_t i = 1000; i < 1100; i++) l[i] = -INFINITY;
    l[2000] = NAN;
    const float temps[] = {1.0f, 0.7f};
    for (size_t k = 0; k < RLX_ARRAY_LEN(temps); k++) {
        for (size_t j = 0; j < RLX_ARRAY_LEN(ids); j++) l[ids[j]] = (float)log(prob[j]) * temps[k];
        rlx_sampling_params p = params(temps[k], 11 + k);
        rlx_sampler *s = rlx_sampler_new(&p, NV);
        int counts[6] = {0};
        int32_t first[8];
        for (int d = 0; d < N_DRAWS; d++) {
            memcpy(buf, l, sizeof buf);
            const int32_t t = rlx_sampler_sample(s, buf);
            if (d < 8) first[d] = t;
            size_t j = 0;
            while (j < RLX_ARRAY_LEN(ids) && ids[j] != t) j++;
            counts[j]++; /* j == 5: any other token */
        }
        double e[6] = {0.3, 0.25, 0.2, 0.15, 0.1, 0.0};
        ASSERT_DIST(counts, e, 6);
        rlx_sampler_free(s);
        s = rlx_sampler_new(&p, NV); /* the same seed draws the same tokens */
        for (int d = 0; d < 8; d++) {
            memcpy(buf, l, sizeof buf);
            ASSERT_EQ(rlx_sampler_sample(s, buf), first[d]);
        }
        rlx_sampler_free(s);
    }
}

/* The full-vocabulary weights and the masked zeroing on every CPU path the host has
 * (rlx_cpu_force_path; RLX_CPU_PATH in the daemon): the same bits as the scalar path's, for
 * logits around the -87 floor, -inf, NaN, the maximum itself and a vocabulary length that is no
 * multiple of any vector width. */
TEST(full_vocab_weights_same_bits_on_every_path)
{
    enum { NV = 151939 };
    static float l[NV], ref[NV], got[NV], zref[NV], zgot[NV];
    uint64_t x = 0x243f6a8885a308d3ull;
    for (int32_t i = 0; i < NV; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        l[i] = (float)((double)(x >> 40) / (double)(1ull << 24) * 120.0 - 100.0); /* -100 .. 20 */
    }
    l[7] = -INFINITY, l[8] = NAN, l[9] = 20.0f, l[10] = 20.0f - 87.0f, l[11] = nextafterf(20.0f - 87.0f, 0.0f);
    l[NV - 1] = -INFINITY;
    const char *was = rlx_cpu_path();
    const char *paths[] = {"scalar", "avx2", "avx512"};
    const float inv_t[] = {1.0f, 1.0f / 0.7f, 4.0f};
    int ran = 0;
    for (size_t k = 0; k < RLX_ARRAY_LEN(inv_t); k++)
        for (size_t p = 0; p < RLX_ARRAY_LEN(paths); p++) {
            if (rlx_cpu_force_path(paths[p])) continue; /* this CPU lacks it */
            float *w = p == 0 ? ref : got, *z = p == 0 ? zref : zgot;
            rlx__sample_weights(l, NV, 20.0f, inv_t[k], w);
            memcpy(z, w, sizeof ref);
            for (int32_t i = 0; i < NV; i += 3) z[i] += 1.0f; /* weights the zeroing must keep or clear */
            rlx__sample_zero_masked(l, NV, z);
            if (p == 0) {
                ASSERT_EQ(ref[7], 0.0f);
                ASSERT_EQ(ref[8], 0.0f);
                ASSERT_EQ(ref[9], 1.0f);
                ASSERT(ref[1] >= 0.0f && ref[1] <= 1.0f);
                continue;
            }
            ran++;
            ASSERT_MSG(!memcmp(ref, got, sizeof ref), "path %s: weights differ from scalar's (1/T %g)", paths[p],
                       (double)inv_t[k]);
            ASSERT_MSG(!memcmp(zref, zgot, sizeof zref), "path %s: masked zeroing differs from scalar's", paths[p]);
        }
    ASSERT_EQ(rlx_cpu_force_path(was), 0);
    fprintf(stderr, "  %d path comparisons against scalar\n", ran);
    ASSERT(ran >= 3 || !rlx_cpu_has_path("avx2")); /* at least avx2 x 3 temperatures where the CPU has it */
}

TEST(top_k_alone)
{
    float l[] = {0.1f, 2.0f, 1.0f, 3.0f, -1.0f, 2.0f, 0.5f, -3.0f};
    rlx_sampling_params p = params(1.0f, 5);
    p.top_k = 3;
    rlx_sampler *s = rlx_sampler_new(&p, 8);
    int counts[8];
    draw_many(s, l, 8, counts);
    /* keeps 3 (logit 3), then 1 and 5 (tied at 2) */
    float kept[] = {-INFINITY, 2.0f, -INFINITY, 3.0f, -INFINITY, 2.0f, -INFINITY, -INFINITY};
    double e[8];
    softmax(kept, 8, 1.0, e);
    ASSERT_DIST(counts, e, 8);
    rlx_sampler_free(s);

    /* a tie at the cut keeps the lower id: top_k=2 keeps 3 and 1, not 5 */
    p.top_k = 2;
    s = rlx_sampler_new(&p, 8);
    draw_many(s, l, 8, counts);
    ASSERT_EQ(counts[5], 0);
    ASSERT(counts[1] > 0 && counts[3] > 0);
    ASSERT_EQ(counts[1] + counts[3], N_DRAWS);
    rlx_sampler_free(s);
}

TEST(top_p_alone)
{
    float l[] = {(float)log(0.15), (float)log(0.5), (float)log(0.05), (float)log(0.3)};
    rlx_sampling_params p = params(1.0f, 9);
    p.top_p = 0.75f; /* 0.5 + 0.3 reaches it: keep tokens 1 and 3 */
    rlx_sampler *s = rlx_sampler_new(&p, 4);
    int counts[4];
    draw_many(s, l, 4, counts);
    double e[] = {0, 0.5 / 0.8, 0, 0.3 / 0.8};
    ASSERT_DIST(counts, e, 4);
    rlx_sampler_free(s);
    /* ties at the cut are ordered by lower id: four equal tokens, top_p 0.5 keeps 0 and 1 */
    p.top_p = 0.5f;
    s = rlx_sampler_new(&p, 4);
    float eq[] = {2, 2, 2, 2};
    draw_many(s, eq, 4, counts);
    double e_eq[] = {0.5, 0.5, 0, 0};
    ASSERT_DIST(counts, e_eq, 4);
    rlx_sampler_free(s);
    /* small top_p keeps only the best, 0 too (llama.cpp's; OpenAI's API accepts 0) */
    for (float tp = 0.1f; tp >= 0.0f; tp -= 0.1f) {
        p.top_p = tp;
        rlx_error err = {0};
        ASSERT_MSG(rlx_sampling_params_validate(&p, 4, &err) == 0, "%s", err.msg);
        s = rlx_sampler_new(&p, 4);
        draw_many(s, l, 4, counts);
        ASSERT_EQ(counts[1], N_DRAWS);
        rlx_sampler_free(s);
    }
}

TEST(min_p_alone)
{
    float l[] = {(float)log(0.5), (float)log(0.3), (float)log(0.15), (float)log(0.05)};
    rlx_sampling_params p = params(1.0f, 13);
    p.min_p = 0.25f; /* threshold 0.125: drops only token 3 */
    rlx_sampler *s = rlx_sampler_new(&p, 4);
    int counts[4];
    draw_many(s, l, 4, counts);
    double e[] = {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0};
    ASSERT_DIST(counts, e, 4);
    rlx_sampler_free(s);
}

TEST(chain_order_filters_before_temperature)
{
    /* top_p is computed on the untempered distribution (as llama.cpp): with T = 2 the
     * tempered nucleus would be larger, but only tokens 0 and 1 may appear. */
    float l[] = {(float)log(0.5), (float)log(0.3), (float)log(0.15), (float)log(0.05)};
    rlx_sampling_params p = params(2.0f, 17);
    p.top_p = 0.78f;
    rlx_sampler *s = rlx_sampler_new(&p, 4);
    int counts[4];
    draw_many(s, l, 4, counts);
    float kept[] = {l[0], l[1], -INFINITY, -INFINITY};
    double e[4];
    softmax(kept, 4, 2.0, e);
    ASSERT_DIST(counts, e, 4);
    rlx_sampler_free(s);
}

TEST(seed_determinism)
{
    float base[] = {0.3f, 0.1f, 0.2f, 0.0f, 0.25f, 0.15f};
    int32_t a[200], b[200];
    rlx_sampling_params p = params(1.0f, 1234);
    rlx_sampler *s1 = rlx_sampler_new(&p, 6), *s2 = rlx_sampler_new(&p, 6);
    rlx_sampling_params q = params(1.0f, 999);
    rlx_sampler *other = rlx_sampler_new(&q, 6);
    for (int i = 0; i < 200; i++) {
        float x[6], y[6], z[6];
        memcpy(x, base, sizeof x); memcpy(y, base, sizeof y); memcpy(z, base, sizeof z);
        a[i] = rlx_sampler_sample(s1, x);
        rlx_sampler_sample(other, z); /* another sequence drawing in between changes nothing */
        rlx_sampler_sample(other, z);
        b[i] = rlx_sampler_sample(s2, y);
    }
    ASSERT(memcmp(a, b, sizeof a) == 0);
    rlx_sampler_free(s1);
    rlx_sampler_free(s2);
    /* another seed gives another sequence */
    p.seed = 1235;
    s1 = rlx_sampler_new(&p, 6);
    int same = 0;
    for (int i = 0; i < 200; i++) {
        float x[6];
        memcpy(x, base, sizeof x);
        same += rlx_sampler_sample(s1, x) == a[i];
    }
    ASSERT(same < 150);
    rlx_sampler_free(s1);
    rlx_sampler_free(other);
}

typedef struct thr { uint64_t seed; int32_t out[64]; } thr;

static void run_seq(thr *t)
{
    enum { NV = 5000 };
    static float base[NV];
    float *w = malloc(NV * sizeof *w);
    for (int i = 0; i < NV; i++) base[i] = (float)((i * 7919) % 1000) / 100.0f;
    rlx_sampling_params p = params(0.9f, t->seed);
    p.top_p = 0.9f;
    rlx_sampler *s = rlx_sampler_new(&p, NV);
    for (int i = 0; i < 64; i++) {
        memcpy(w, base, sizeof base);
        t->out[i] = rlx_sampler_sample(s, w);
        rlx_sampler_accept(s, t->out[i], true);
    }
    rlx_sampler_free(s);
    free(w);
}

static void *thr_main(void *arg) { run_seq(arg); return NULL; }

TEST(threads_draw_like_one_thread)
{
    /* samplers share per-thread scratch; results must not depend on the thread */
    thr a[4], b[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        a[i].seed = b[i].seed = 100 + (uint64_t)i;
        run_seq(&a[i]);
    }
    for (int i = 0; i < 4; i++) ASSERT_EQ(pthread_create(&th[i], NULL, thr_main, &b[i]), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) ASSERT(memcmp(a[i].out, b[i].out, sizeof a[i].out) == 0);
    ASSERT(memcmp(a[0].out, a[1].out, sizeof a[0].out) != 0);
}

TEST(everything_banned_falls_back)
{
    rlx_sampling_params p = params(1.0f, 3);
    rlx_sampler *s = rlx_sampler_new(&p, 3);
    float l[] = {-INFINITY, -INFINITY, -INFINITY};
    ASSERT_EQ(rlx_sampler_sample(s, l), 0);
    float m[] = {NAN, -INFINITY, 2.0f};
    ASSERT_EQ(rlx_sampler_sample(s, m), 2);
    rlx_sampler_free(s);
}

TEST(logprobs)
{
    float l[] = {1, 2, 3, 3};
    int32_t ids[6];
    float lp[6];
    double lse = log(exp(1) + exp(2) + 2 * exp(3));
    float r = rlx_logprobs(l, 4, 0, 3, ids, lp);
    ASSERT_NEAR(r, 1 - lse, 1e-6);
    ASSERT_EQ(ids[0], 2);
    ASSERT_EQ(ids[1], 3);
    ASSERT_EQ(ids[2], 1);
    ASSERT_NEAR(lp[0], 3 - lse, 1e-6);
    ASSERT_NEAR(lp[2], 2 - lse, 1e-6);
    /* k beyond the vocabulary: the tail is marked empty */
    rlx_logprobs(l, 4, 1, 6, ids, lp);
    ASSERT_EQ(ids[3], 0);
    ASSERT_EQ(ids[4], -1);
    ASSERT(isinf(lp[5]) && lp[5] < 0);
    /* stable for large logits */
    float big[] = {1000.0f, 1000.0f};
    ASSERT_NEAR(rlx_logprobs(big, 2, 1, 0, NULL, NULL), -log(2.0), 1e-6);
    ASSERT(isinf(rlx_logprobs(big, 2, 7, 0, NULL, NULL)));
}

static uint64_t lcg(uint64_t *x) { *x = *x * 6364136223846793005ull + 1442695040888963407ull; return *x >> 33; }

static int cmp_desc_idx(const void *a, const void *b, void *ctx)
{
    const float *l = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (l[x] != l[y]) return l[x] > l[y] ? -1 : 1;
    return x < y ? -1 : 1;
}

TEST(large_vocab_top_p_matches_full_sort)
{
    enum { NV = 151936 };
    float *l = malloc(NV * sizeof *l), *w = malloc(NV * sizeof *w);
    int32_t *idx = malloc(NV * sizeof *idx);
    char *in_nucleus = calloc(NV, 1);
    ASSERT(l && w && idx && in_nucleus);
    uint64_t x = 77;
    for (int i = 0; i < NV; i++) l[i] = (float)lcg(&x) / (float)(1u << 31) * 12.0f - 6.0f;
    /* reference nucleus by sorting everything */
    for (int i = 0; i < NV; i++) idx[i] = i;
    qsort_r(idx, NV, sizeof *idx, cmp_desc_idx, l);
    double z = 0, cum = 0;
    for (int i = 0; i < NV; i++) z += exp(l[i] - l[idx[0]]);
    int n_nuc = 0;
    while (cum < 0.9 * z) cum += exp(l[idx[n_nuc]] - l[idx[0]]), in_nucleus[idx[n_nuc++]] = 1;
    ASSERT(n_nuc > 1000 && n_nuc < NV);
    rlx_sampling_params p = params(1.0f, 21);
    p.top_p = 0.9f;
    rlx_sampler *s = rlx_sampler_new(&p, NV);
    double t0 = rlx_now();
    int outside = 0;
    for (int i = 0; i < 200; i++) {
        memcpy(w, l, NV * sizeof *w);
        outside += !in_nucleus[rlx_sampler_sample(s, w)];
    }
    double dt = rlx_now() - t0;
    /* boundary rounding may differ by a token or two at most; draws there are rare */
    ASSERT_MSG(outside <= 1, "%d of 200 draws outside the nucleus", outside);
    fprintf(stderr, "  top_p over %d tokens: %.2f ms per draw\n", NV, dt / 200 * 1e3);
    rlx_sampler_free(s);

    /* top_k 40 + top_p: every draw is among the 40 best */
    p.top_k = 40;
    p.top_p = 0.95f;
    s = rlx_sampler_new(&p, NV);
    for (int i = 0; i < 200; i++) {
        memcpy(w, l, NV * sizeof *w);
        int32_t t = rlx_sampler_sample(s, w);
        int rank = 0;
        while (rank < 40 && idx[rank] != t) rank++;
        ASSERT_MSG(rank < 40, "token %d is not in the top 40", t);
    }
    rlx_sampler_free(s);
    /* greedy over the big vocabulary = the sort's first */
    ASSERT_EQ(rlx_argmax(l, NV), idx[0]);
    free(l); free(w); free(idx); free(in_nucleus);
}

TEST_MAIN(TEST_ENTRY(defaults), TEST_ENTRY(validation_names_the_parameter),
          TEST_ENTRY(greedy_ties_to_lowest_id), TEST_ENTRY(logit_bias_ban_and_boost),
          TEST_ENTRY(penalties_exact_values), TEST_ENTRY(penalty_window),
          TEST_ENTRY(temperature_distribution), TEST_ENTRY(full_vocab_temperature_distribution),
          TEST_ENTRY(full_vocab_weights_same_bits_on_every_path), TEST_ENTRY(top_k_alone), TEST_ENTRY(top_p_alone),
          TEST_ENTRY(min_p_alone), TEST_ENTRY(chain_order_filters_before_temperature),
          TEST_ENTRY(seed_determinism), TEST_ENTRY(threads_draw_like_one_thread),
          TEST_ENTRY(everything_banned_falls_back),
          TEST_ENTRY(logprobs), TEST_ENTRY(large_vocab_top_p_matches_full_sort))
