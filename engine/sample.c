/* sample.c - the token sampler (see sample.h).
 *
 * Chain, as llama-server's default order: penalties -> logit bias -> top_k -> top_p -> min_p ->
 * temperature -> draw. temperature <= 0 means greedy after penalties and bias, so a banned token
 * is never picked even greedily. Filters work on a candidate list (id, logit) that is only ever
 * partially ordered: top-k selects with a bounded heap, top-p histograms the probability mass
 * and sorts only the bin where the nucleus ends, min-p is a linear filter. A 151,936-entry
 * vocabulary is therefore never fully sorted per token. Temperature alone (no filter) skips the
 * list: sample_full_vocab draws straight from vectorized weights.
 *
 * RNG: xoshiro256** seeded through splitmix64, one state per sampler, so a seeded sequence
 * draws the same numbers whatever else the worker is running. */
#include "engine/sample.h"
#include "engine/engine.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct cand { int32_t id; float logit; } cand;

/* Top-p mass histogram: bins by distance below the max logit; logits further below than
 * TOP_P_RANGE share the last bin (their mass is below e^-64 of the max's). */
#define TOP_P_BINS 4096
#define TOP_P_RANGE 64.0f

/* Full-vocabulary draws sum the weights per block of this many tokens. */
#define DRAW_BLOCK 256

/* Per-thread scratch of vocabulary size, shared by every sampler the thread runs: a worker
 * sampling 256 sequences keeps one set of buffers (~2.7 MB at 151,936 tokens), not 256. */
typedef struct scratch {
    size_t cap;               /* entries in each per-token array */
    cand *cands;
    double *probs;
    uint16_t *bin_of;         /* each candidate's top-p bin */
    double bins[TOP_P_BINS];
    float *weights;           /* full-vocabulary path: each token's weight */
    double *block_sums;       /* full-vocabulary path: per DRAW_BLOCK tokens */
} scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p)
{
    scratch *sc = p;
    if (!sc) return;
    free(sc->cands);
    free(sc->probs);
    free(sc->bin_of);
    free(sc->weights);
    free(sc->block_sums);
    free(sc);
}

static void scratch_key_init(void) { pthread_key_create(&scratch_key, scratch_free); }

static scratch *get_scratch(size_t n)
{
    pthread_once(&scratch_once, scratch_key_init);
    scratch *sc = pthread_getspecific(scratch_key);
    if (!sc) {
        if (!(sc = calloc(1, sizeof *sc))) return NULL;
        if (pthread_setspecific(scratch_key, sc)) { free(sc); return NULL; }
    }
    if (sc->cap < n) {
        cand *c = realloc(sc->cands, n * sizeof *c);
        if (c) sc->cands = c;
        double *pr = realloc(sc->probs, n * sizeof *pr);
        if (pr) sc->probs = pr;
        uint16_t *b = realloc(sc->bin_of, n * sizeof *b);
        if (b) sc->bin_of = b;
        float *wt = realloc(sc->weights, n * sizeof *wt);
        if (wt) sc->weights = wt;
        double *bs = realloc(sc->block_sums, (n / DRAW_BLOCK + 1) * sizeof *bs);
        if (bs) sc->block_sums = bs;
        if (!c || !pr || !b || !wt || !bs) return NULL;
        sc->cap = n;
    }
    return sc;
}

struct rlx_sampler {
    rlx_sampling_params p;    /* p.logit_bias points at bias below */
    rlx_logit_bias *bias;     /* owned copy */
    int32_t n_vocab;
    /* Penalty window: counts of the tokens in it, kept up to date by accept so a sample costs
     * O(distinct tokens) even with penalty_last_n = -1 over a long context. */
    struct tcount { int32_t tok; int32_t cnt; } *map; /* open addressing, tok -1 = empty */
    size_t map_cap, map_used; /* map_cap a power of two; map_used: slots with a token */
    int32_t *hist;            /* bounded windows only: recent tokens, oldest first */
    size_t n_hist, cap_hist;
    uint64_t rng[4];          /* xoshiro256** state */
};

/* ---- parameters -------------------------------------------------------------------------- */

void rlx_sampling_params_default(rlx_sampling_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
    p->presence_penalty = 0.0f;
    p->frequency_penalty = 0.0f;
    p->penalty_last_n = 64;
}

static int check_range(const char *name, float v, float lo, float hi, rlx_error *err)
{
    if (!(v >= lo && v <= hi)) /* also rejects NaN */
        return rlx_errorf(err, RLX_EINVAL, "%s must be between %g and %g (got %g)", name,
                          (double)lo, (double)hi, (double)v);
    return 0;
}

int rlx_sampling_params_validate(const rlx_sampling_params *p, int32_t n_vocab, rlx_error *err)
{
    int rc;
    if (!p) return rlx_errorf(err, RLX_EINVAL, "sampling parameters are missing");
    if ((rc = check_range("temperature", p->temperature, 0.0f, 2.0f, err))) return rc;
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return rlx_errorf(err, RLX_EINVAL, "top_p must be greater than 0 and at most 1 (got %g)",
                          (double)p->top_p);
    if (p->top_k < -1)
        return rlx_errorf(err, RLX_EINVAL, "top_k must be 0 or more (0 or -1 disables it; got %d)",
                          (int)p->top_k);
    if ((rc = check_range("min_p", p->min_p, 0.0f, 1.0f, err))) return rc;
    if ((rc = check_range("presence_penalty", p->presence_penalty, -2.0f, 2.0f, err))) return rc;
    if ((rc = check_range("frequency_penalty", p->frequency_penalty, -2.0f, 2.0f, err))) return rc;
    if (!(p->repetition_penalty > 0.0f && isfinite(p->repetition_penalty)))
        return rlx_errorf(err, RLX_EINVAL,
                          "repetition_penalty must be a positive number (1 disables it; got %g)",
                          (double)p->repetition_penalty);
    if (p->penalty_last_n < -1)
        return rlx_errorf(err, RLX_EINVAL,
                          "penalty_last_n must be -1 (whole history), 0 (off) or a positive "
                          "count (got %d)", (int)p->penalty_last_n);
    if (p->n_logit_bias && !p->logit_bias)
        return rlx_errorf(err, RLX_EINVAL, "logit_bias has %zu entries but no data",
                          p->n_logit_bias);
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        const rlx_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return rlx_errorf(err, RLX_EINVAL,
                              "logit_bias token %d is outside the vocabulary (0..%d)",
                              (int)b->token, (int)n_vocab - 1);
        if (!(b->bias >= -100.0f && b->bias <= 100.0f))
            return rlx_errorf(err, RLX_EINVAL,
                              "logit_bias for token %d must be between -100 and 100 (got %g)",
                              (int)b->token, (double)b->bias);
    }
    return 0;
}

/* ---- RNG --------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform01(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; }

/* ---- lifetime ---------------------------------------------------------------------------- */

rlx_sampler *rlx_sampler_new(const rlx_sampling_params *p, int32_t n_vocab)
{
    if (!p || n_vocab <= 0) return NULL;
    rlx_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    s->n_vocab = n_vocab;
    if (p->n_logit_bias && p->logit_bias) {
        s->bias = malloc(p->n_logit_bias * sizeof *s->bias);
        if (!s->bias) goto fail;
        memcpy(s->bias, p->logit_bias, p->n_logit_bias * sizeof *s->bias);
    } else {
        s->p.n_logit_bias = 0;
    }
    s->p.logit_bias = s->bias;
    uint64_t seed = p->seed;
    if (!p->has_seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        /* the address separates samplers created in the same nanosecond */
        seed = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)s;
    }
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&seed);
    return s;
fail:
    rlx_sampler_free(s);
    return NULL;
}

void rlx_sampler_free(rlx_sampler *s)
{
    if (!s) return;
    free(s->bias);
    free(s->map);
    free(s->hist);
    free(s);
}

static bool penalties_on(const rlx_sampling_params *p)
{
    return p->penalty_last_n != 0 && (p->repetition_penalty != 1.0f ||
                                      p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f);
}

static size_t map_slot(const struct tcount *m, size_t cap, int32_t tok)
{
    size_t i = ((uint32_t)tok * 2654435761u) & (cap - 1);
    while (m[i].tok != -1 && m[i].tok != tok) i = (i + 1) & (cap - 1);
    return i;
}

/* Rebuilds the table with room for growth, dropping tokens whose count fell to zero. */
static int map_rebuild(rlx_sampler *s)
{
    size_t live = 0;
    for (size_t i = 0; i < s->map_cap; i++) live += s->map[i].cnt > 0;
    size_t cap = 16;
    while (cap < 4 * (live + 1)) cap *= 2;
    struct tcount *m = malloc(cap * sizeof *m);
    if (!m) return RLX_ENOMEM;
    for (size_t i = 0; i < cap; i++) m[i] = (struct tcount){-1, 0};
    for (size_t i = 0; i < s->map_cap; i++)
        if (s->map[i].cnt > 0) m[map_slot(m, cap, s->map[i].tok)] = s->map[i];
    free(s->map);
    s->map = m;
    s->map_cap = cap;
    s->map_used = live;
    return 0;
}

static int map_add(rlx_sampler *s, int32_t tok, int32_t delta)
{
    if (delta > 0 && (s->map_used + 1) * 2 > s->map_cap && map_rebuild(s)) return RLX_ENOMEM;
    if (!s->map_cap) return 0;
    size_t i = map_slot(s->map, s->map_cap, tok);
    if (s->map[i].tok == -1) {
        if (delta < 0) return 0;
        s->map[i].tok = tok;
        s->map_used++;
    }
    s->map[i].cnt = RLX_MAX(s->map[i].cnt + delta, 0);
    return 0;
}

void rlx_sampler_accept(rlx_sampler *s, int32_t token)
{
    /* under OOM the token is not counted at all: penalties weaken, memory stays sound */
    if (!s || !penalties_on(&s->p) || token < 0 || token >= s->n_vocab) return;
    if (map_add(s, token, 1)) return;
    if (s->p.penalty_last_n < 0) return; /* the whole history: nothing ever leaves */
    size_t keep = (size_t)s->p.penalty_last_n;
    if (s->n_hist == 2 * keep) { /* compact: keep the current window */
        memmove(s->hist, s->hist + s->n_hist - keep, keep * sizeof *s->hist);
        s->n_hist = keep;
    }
    if (s->n_hist == s->cap_hist) {
        size_t cap = RLX_MIN(s->cap_hist ? s->cap_hist * 2 : 64, 2 * keep);
        int32_t *h = realloc(s->hist, cap * sizeof *h);
        if (!h) { map_add(s, token, -1); return; }
        s->hist = h;
        s->cap_hist = cap;
    }
    s->hist[s->n_hist++] = token;
    if (s->n_hist > keep) map_add(s, s->hist[s->n_hist - keep - 1], -1);
}

/* ---- chain steps ------------------------------------------------------------------------- */

/* Repetition (llama.cpp) then presence/frequency (OpenAI) over distinct tokens of the window. */
static void apply_penalties(rlx_sampler *s, float *logits)
{
    const rlx_sampling_params *p = &s->p;
    if (!penalties_on(p)) return;
    for (size_t i = 0; i < s->map_cap; i++) {
        if (s->map[i].cnt <= 0) continue;
        int32_t tok = s->map[i].tok;
        float l = logits[tok];
        l = l > 0.0f ? l / p->repetition_penalty : l * p->repetition_penalty;
        l -= (float)s->map[i].cnt * p->frequency_penalty + p->presence_penalty;
        logits[tok] = l;
    }
}

/* Bias -100 is a ban (OpenAI: "should result in a ban"), so it is exact rather than additive. */
static void apply_bias(const rlx_sampler *s, float *logits)
{
    for (size_t i = 0; i < s->p.n_logit_bias; i++) {
        const rlx_logit_bias *b = &s->bias[i];
        if (b->token < 0 || b->token >= s->n_vocab) continue;
        if (b->bias <= -100.0f) logits[b->token] = -INFINITY;
        else logits[b->token] += b->bias;
    }
}

/* "a ranks above b": larger logit, ties to the lower id. NaN ranks lowest. */
static inline int above(cand a, cand b)
{
    if (a.logit > b.logit) return 1;
    if (a.logit < b.logit) return 0;
    if (a.logit != a.logit) return 0;
    if (b.logit != b.logit) return 1;
    return a.id < b.id;
}

static int cmp_cand_desc(const void *pa, const void *pb)
{
    cand a = *(const cand *)pa, b = *(const cand *)pb;
    return above(a, b) ? -1 : above(b, a) ? 1 : 0;
}

/* Min-heap on rank (root = the worst kept candidate). */
static void heap_sift_down(cand *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && above(h[m], h[l])) m = l;
        if (r < n && above(h[m], h[r])) m = r;
        if (m == i) return;
        cand t = h[i]; h[i] = h[m]; h[m] = t;
        i = m;
    }
}

/* Keeps the k best logits in dst[0..k), sorted best first; a bounded heap, so O(n log k) at
 * worst and O(n) when most logits lose to the heap's root. Returns the count kept. */
static size_t select_top_k(const float *logits, size_t n, size_t k, cand *dst)
{
    if (k > n) k = n;
    if (k == 0) return 0;
    for (size_t i = 0; i < k; i++) dst[i] = (cand){(int32_t)i, logits[i]};
    for (size_t i = k / 2; i-- > 0;) heap_sift_down(dst, k, i);
    for (size_t i = k; i < n; i++) {
        cand ci = {(int32_t)i, logits[i]};
        if (above(ci, dst[0])) {
            dst[0] = ci;
            heap_sift_down(dst, k, 0);
        }
    }
    qsort(dst, k, sizeof *dst, cmp_cand_desc);
    return k;
}

/* Nucleus: the smallest best-first prefix whose probability mass reaches top_p (ties ordered
 * by lower id). Without sorting the vocabulary: the mass is binned by distance below the
 * maximum logit, bins are summed from the top until the target is reached, candidates of
 * higher bins are all kept, and only the boundary bin is sorted and cut. */
static size_t apply_top_p(scratch *sc, cand *c, size_t n, float top_p, int sorted)
{
    if (n <= 1 || top_p >= 1.0f) return n;
    float mx = -INFINITY;
    for (size_t i = 0; i < n; i++) if (c[i].logit > mx) mx = c[i].logit;
    double *e = sc->probs, z = 0.0;
    for (size_t i = 0; i < n; i++) z += e[i] = exp((double)c[i].logit - mx);
    double target = (double)top_p * z, cum = 0.0;
    if (sorted) {
        for (size_t i = 0; i < n; i++)
            if ((cum += e[i]) >= target) return i + 1;
        return n;
    }
    double *mass = sc->bins;
    uint16_t *bin = sc->bin_of;
    memset(mass, 0, TOP_P_BINS * sizeof *mass);
    const float scale = (float)TOP_P_BINS / TOP_P_RANGE;
    for (size_t i = 0; i < n; i++) {
        float d = (mx - c[i].logit) * scale;
        bin[i] = d < (float)(TOP_P_BINS - 1) ? (uint16_t)d : TOP_P_BINS - 1;
        mass[bin[i]] += e[i];
    }
    size_t b = 0;
    while (b < TOP_P_BINS - 1 && cum + mass[b] < target) cum += mass[b++];
    /* the bins above b to the front, then bin b after them (bin[] follows every swap) */
    size_t above = 0, edge;
#define SWAP_CB(i, j) do { cand t_ = c[i]; c[i] = c[j]; c[j] = t_; \
    uint16_t u_ = bin[i]; bin[i] = bin[j]; bin[j] = u_; } while (0)
    for (size_t i = 0; i < n; i++) if (bin[i] < b) { SWAP_CB(i, above); above++; }
    edge = above;
    for (size_t i = above; i < n; i++) if (bin[i] == b) { SWAP_CB(i, edge); edge++; }
#undef SWAP_CB
    qsort(c + above, edge - above, sizeof *c, cmp_cand_desc);
    for (size_t i = above; i < edge; i++)
        if ((cum += exp((double)c[i].logit - mx)) >= target) return i + 1;
    return edge;
}

/* Keeps candidates with p >= min_p * p_max, i.e. logit >= max + log(min_p). Order kept. */
static size_t apply_min_p(cand *c, size_t n, float min_p)
{
    if (n <= 1 || min_p <= 0.0f) return n;
    float mx = -INFINITY;
    for (size_t i = 0; i < n; i++) if (c[i].logit > mx) mx = c[i].logit;
    float thr = mx + logf(min_p);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) if (c[i].logit >= thr) c[w++] = c[i];
    return w ? w : n;
}

int32_t rlx_argmax(const float *logits, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best] || (logits[best] != logits[best] && logits[i] == logits[i]))
            best = i;
    return best;
}

/* Pure temperature sampling over the whole vocabulary (no top-k / top-p / min-p: the OpenAI and
 * vLLM default) was ~0.8 ms per token at 151,936 tokens, serial on the worker thread: a
 * candidate list of the whole vocabulary and a double exp per entry. This path keeps no list
 * and takes the weights with a branch-free exp the compiler vectorizes (relative error ~2e-7,
 * immaterial to a draw), summed per block so the draw finds its block first: 0.97 -> 0.13 ms
 * per draw. Deterministic: the same logits and RNG state give the same token. */

/* e^x for x <= 0, and 0 below -87 (where float would go subnormal) or for NaN: Cody-Waite
 * reduction to r in [-ln2/2, ln2/2], a degree-6 Taylor polynomial, the exponent put in by bits. */
static inline float exp_nonpos(float x)
{
    const float xc = x > -87.0f ? x : -87.0f; /* NaN too: the float-to-int below must be in range */
    const float n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f; /* round to nearest */
    const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
    const float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f + r * (8.3333338e-3f + r * 1.3888889e-3f)))));
    union { uint32_t i; float f; } sc = {.i = (uint32_t)((int32_t)n + 127) << 23};
    return x > -87.0f ? p * sc.f : 0.0f;
}

/* w[i] = e^((l[i] - mx) / T) for logits above -inf, 0 for -inf and NaN. One clone per vector
 * width, chosen at load time; all give the same bits (ISO C mode: no FMA contraction, and each
 * lane does the scalar code's IEEE operations). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void full_vocab_weights(const float *l, int32_t n, float mx, float inv_t, float *w)
{
    for (int32_t i = 0; i < n; i++) {
        const float li = l[i];
        const float e = exp_nonpos((li - mx) * inv_t);
        w[i] = li > -INFINITY ? e : 0.0f; /* NaN compares false */
    }
}

static int32_t sample_full_vocab(rlx_sampler *s, const float *logits, scratch *sc)
{
    const int32_t nv = s->n_vocab;
    float mx = -INFINITY;
    for (int32_t i = 0; i < nv; i++) mx = logits[i] > mx ? logits[i] : mx;
    if (mx == -INFINITY || mx == INFINITY) return rlx_argmax(logits, nv);
    float *w = sc->weights;
    full_vocab_weights(logits, nv, mx, (float)(1.0 / (double)s->p.temperature), w);
    /* block sums (eight float lanes each, then in double), and z */
    double *bsum = sc->block_sums;
    const int32_t nblk = (nv + DRAW_BLOCK - 1) / DRAW_BLOCK;
    double z = 0.0;
    for (int32_t b = 0; b < nblk; b++) {
        const int32_t i0 = b * DRAW_BLOCK, i1 = i0 + DRAW_BLOCK < nv ? i0 + DRAW_BLOCK : nv;
        float lane[8] = {0};
        int32_t i = i0;
        for (; i + 8 <= i1; i += 8)
            for (int k = 0; k < 8; k++) lane[k] += w[i + k];
        double t = 0.0;
        for (int k = 0; k < 8; k++) t += (double)lane[k];
        for (; i < i1; i++) t += (double)w[i];
        bsum[b] = t;
        z += t;
    }
    if (!(z > 0.0)) return rlx_argmax(logits, nv);
    const double u = uniform01(s->rng) * z;
    double cum = 0.0;
    int32_t last = -1;
    for (int32_t b = 0; b < nblk; b++) {
        if (cum + bsum[b] <= u && b + 1 < nblk) { cum += bsum[b]; continue; }
        /* the draw falls in this block (or rounding carried it past the last one) */
        const int32_t i0 = b * DRAW_BLOCK;
        for (int32_t i = i0; i < nv; i++) {
            if (w[i] <= 0.0f) continue;
            cum += (double)w[i];
            last = i;
            if (u < cum) return i;
        }
        break;
    }
    return last >= 0 ? last : rlx_argmax(logits, nv);
}

int32_t rlx_sampler_sample(rlx_sampler *s, float *logits)
{
    const rlx_sampling_params *p = &s->p;
    int32_t nv = s->n_vocab;
    apply_penalties(s, logits);
    apply_bias(s, logits);
    if (p->temperature <= 0.0f) return rlx_argmax(logits, nv);

    /* Without scratch memory the best that can be done is the greedy choice. */
    scratch *sc = get_scratch((size_t)nv);
    if (!sc) return rlx_argmax(logits, nv);
    if ((p->top_k <= 0 || p->top_k >= nv) && p->top_p >= 1.0f && p->min_p <= 0.0f)
        return sample_full_vocab(s, logits, sc);
    /* candidates: every token that can still be drawn (-inf and NaN cannot) */
    cand *c = sc->cands;
    size_t n = 0;
    int sorted = 0;
    if (p->top_k > 0 && p->top_k < nv) {
        size_t k = select_top_k(logits, (size_t)nv, (size_t)p->top_k, c);
        for (size_t i = 0; i < k; i++) if (c[i].logit > -INFINITY) c[n++] = c[i];
        sorted = 1;
    } else {
        for (int32_t i = 0; i < nv; i++) if (logits[i] > -INFINITY) c[n++] = (cand){i, logits[i]};
    }
    if (n == 0) return rlx_argmax(logits, nv);
    n = apply_top_p(sc, c, n, p->top_p, sorted);
    n = apply_min_p(c, n, p->min_p);

    /* temperature, softmax and the draw, all in double */
    double inv_t = 1.0 / (double)p->temperature, mx = -INFINITY, z = 0.0;
    for (size_t i = 0; i < n; i++) if (c[i].logit > mx) mx = c[i].logit;
    double *pr = sc->probs;
    for (size_t i = 0; i < n; i++) z += pr[i] = exp(((double)c[i].logit - mx) * inv_t);
    double u = uniform01(s->rng) * z, cum = 0.0;
    for (size_t i = 0; i < n; i++) {
        cum += pr[i];
        if (u < cum) return c[i].id;
    }
    return c[n - 1].id; /* rounding left u at the very top */
}

/* ---- log-probabilities ------------------------------------------------------------------- */

float rlx_logprobs(const float *logits, int32_t n_vocab, int32_t token, int k,
                   int32_t *top_ids, float *top_lp)
{
    if (!logits || n_vocab <= 0) return -INFINITY;
    double mx = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) if (logits[i] > mx) mx = logits[i];
    if (mx == -INFINITY) mx = 0.0; /* all -inf: every logprob is -inf, avoid inf - inf */
    double z = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) z += exp((double)logits[i] - mx);
    double lse = mx + log(z);
    if (k > 0 && top_ids && top_lp) {
        size_t kk = (size_t)k < (size_t)n_vocab ? (size_t)k : (size_t)n_vocab;
        /* on the stack for what the API asks (k <= RLX_MAX_TOP_LOGPROBS): out of memory must
         * not turn the alternatives into id -1 / -inf, which a client would get as real */
        cand stack[RLX_MAX_TOP_LOGPROBS];
        cand *h = kk <= RLX_MAX_TOP_LOGPROBS ? stack : malloc(kk * sizeof *h);
        if (h) {
            kk = select_top_k(logits, (size_t)n_vocab, kk, h);
            for (size_t i = 0; i < kk; i++) {
                top_ids[i] = h[i].id;
                top_lp[i] = (float)((double)h[i].logit - lse);
            }
            if (h != stack) free(h);
        } else {
            kk = 0;
        }
        for (size_t i = kk; i < (size_t)k; i++) { top_ids[i] = -1; top_lp[i] = -INFINITY; }
    }
    if (token < 0 || token >= n_vocab) return -INFINITY;
    return (float)((double)logits[token] - lse);
}
