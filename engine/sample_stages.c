/* sample_stages.c - the sampler chain's built-in stages (see sample.h): penalties, logit bias,
 * top-k, top-p, min-p, greedy and the temperature draw.
 *
 * Filters work on a candidate list (id, logit) that is only ever partially ordered: top-k
 * selects with a bounded heap, top-p histograms the probability mass and sorts only the bin
 * where the nucleus ends, min-p is a linear filter. A 151,936-entry vocabulary is therefore
 * never fully sorted per token. Temperature alone (no filter) keeps no list: the draw takes
 * vectorized weights of the whole vocabulary. */
#include "engine/sample_internal.h"
#include "engine/engine.h"
#include "backends/cpu/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- penalties --------------------------------------------------------------------------- */

/* Penalty window: counts of the tokens in it, kept up to date by accept so a sample costs
 * O(distinct tokens) even with penalty_last_n = -1 over a long context. */
typedef struct penalties {
    rlx_sampler_stage base;
    float repeat, presence, frequency;
    int32_t last_n;
    int32_t n_vocab;
    struct tcount { int32_t tok; int32_t cnt; } *map; /* open addressing, tok -1 = empty */
    size_t map_cap, map_used; /* map_cap a power of two; map_used: slots with a token */
    int32_t *hist;            /* bounded windows only: recent tokens, oldest first */
    size_t n_hist, cap_hist;
} penalties;

static size_t map_slot(const struct tcount *m, size_t cap, int32_t tok)
{
    size_t i = ((uint32_t)tok * 2654435761u) & (cap - 1);
    while (m[i].tok != -1 && m[i].tok != tok) i = (i + 1) & (cap - 1);
    return i;
}

/* Rebuilds the table with room for growth, dropping tokens whose count fell to zero. */
static int map_rebuild(penalties *s)
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

static int map_add(penalties *s, int32_t tok, int32_t delta)
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

/* Prompt and generated tokens alike. Under OOM the token is not counted at all: penalties
 * weaken, memory stays sound, the sequence goes on (as before the chain existed). */
static int penalties_accept(rlx_sampler_stage *st, int32_t token, bool generated)
{
    (void)generated;
    penalties *s = (penalties *)st;
    if (token < 0 || token >= s->n_vocab) return 0;
    if (map_add(s, token, 1)) return 0;
    if (s->last_n < 0) return 0; /* the whole history: nothing ever leaves */
    size_t keep = (size_t)s->last_n;
    if (s->n_hist == 2 * keep) { /* compact: keep the current window */
        memmove(s->hist, s->hist + s->n_hist - keep, keep * sizeof *s->hist);
        s->n_hist = keep;
    }
    if (s->n_hist == s->cap_hist) {
        size_t cap = RLX_MIN(s->cap_hist ? s->cap_hist * 2 : 64, 2 * keep);
        int32_t *h = realloc(s->hist, cap * sizeof *h);
        if (!h) { map_add(s, token, -1); return 0; }
        s->hist = h;
        s->cap_hist = cap;
    }
    s->hist[s->n_hist++] = token;
    if (s->n_hist > keep) map_add(s, s->hist[s->n_hist - keep - 1], -1);
    return 0;
}

/* Repetition (llama.cpp) then presence/frequency (OpenAI) over distinct tokens of the window. */
static int penalties_apply(rlx_sampler_stage *st, rlx_token_cands *c)
{
    penalties *s = (penalties *)st;
    float *logits = c->logits;
    for (size_t i = 0; i < s->map_cap; i++) {
        if (s->map[i].cnt <= 0) continue;
        int32_t tok = s->map[i].tok;
        float l = logits[tok];
        l = l > 0.0f ? l / s->repeat : l * s->repeat;
        l -= (float)s->map[i].cnt * s->frequency + s->presence;
        logits[tok] = l;
    }
    return 0;
}

static void penalties_free(rlx_sampler_stage *st)
{
    penalties *s = (penalties *)st;
    free(s->map);
    free(s->hist);
    free(s);
}

rlx_sampler_stage *rlx__stage_penalties(const rlx_sampling_params *p, int32_t n_vocab)
{
    static const rlx_stage_ops ops = {.name = "penalties", .apply = penalties_apply, .accept = penalties_accept,
                                      .free = penalties_free};
    penalties *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->base.ops = &ops;
    s->repeat = p->repetition_penalty;
    s->presence = p->presence_penalty;
    s->frequency = p->frequency_penalty;
    s->last_n = p->penalty_last_n;
    s->n_vocab = n_vocab;
    return &s->base;
}

/* ---- logit bias -------------------------------------------------------------------------- */

typedef struct bias_stage {
    rlx_sampler_stage base;
    int32_t n_vocab;
    size_t n;
    rlx_logit_bias b[]; /* owned copy */
} bias_stage;

/* Bias -100 is a ban (OpenAI: "should result in a ban"), so it is exact rather than additive. */
static int bias_apply(rlx_sampler_stage *st, rlx_token_cands *c)
{
    const bias_stage *s = (const bias_stage *)st;
    for (size_t i = 0; i < s->n; i++) {
        const rlx_logit_bias *b = &s->b[i];
        if (b->token < 0 || b->token >= s->n_vocab) continue;
        if (b->bias <= -100.0f) c->logits[b->token] = -INFINITY;
        else c->logits[b->token] += b->bias;
    }
    return 0;
}

static void stage_free(rlx_sampler_stage *st) { free(st); }

rlx_sampler_stage *rlx__stage_bias(const rlx_sampling_params *p, int32_t n_vocab)
{
    static const rlx_stage_ops ops = {.name = "logit_bias", .apply = bias_apply, .free = stage_free};
    bias_stage *s = calloc(1, sizeof *s + p->n_logit_bias * sizeof s->b[0]);
    if (!s) return NULL;
    s->base.ops = &ops;
    s->n_vocab = n_vocab;
    s->n = p->n_logit_bias;
    if (s->n) memcpy(s->b, p->logit_bias, s->n * sizeof s->b[0]);
    return &s->base;
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
size_t rlx__select_top_k(const float *logits, size_t n, size_t k, cand *dst)
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
static size_t top_p_cut(rlx__sample_scratch *sc, cand *c, size_t n, float top_p, int sorted)
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
static size_t min_p_cut(cand *c, size_t n, float min_p)
{
    if (n <= 1 || min_p <= 0.0f) return n;
    float mx = -INFINITY;
    for (size_t i = 0; i < n; i++) if (c[i].logit > mx) mx = c[i].logit;
    float thr = mx + logf(min_p);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) if (c[i].logit >= thr) c[w++] = c[i];
    return w ? w : n;
}

/* ---- truncations ------------------------------------------------------------------------ */

void rlx__cands_list(rlx_token_cands *c)
{
    if (c->listed) return;
    rlx__sample_scratch *sc = c->scratch;
    size_t n = 0;
    for (int32_t i = 0; i < c->n_vocab; i++)
        if (c->logits[i] > -INFINITY) sc->cands[n++] = (cand){i, c->logits[i]};
    c->list = sc->cands;
    c->n = n;
    c->listed = true;
    c->sorted = false;
}

typedef struct trunc_stage {
    rlx_sampler_stage base;
    int32_t k;
    float p;
} trunc_stage;

/* Top-k over the logits with a bounded heap (tokens at -inf dropped), best first. */
static int top_k_apply(rlx_sampler_stage *st, rlx_token_cands *c)
{
    const trunc_stage *s = (const trunc_stage *)st;
    rlx__sample_scratch *sc = c->scratch;
    if (!sc) return 0; /* no scratch memory: the draw falls back to greedy */
    if (c->listed) { /* after another truncation (not a built-in order): cut the list */
        qsort(c->list, c->n, sizeof *c->list, cmp_cand_desc);
        c->sorted = true;
        if (c->n > (size_t)s->k) c->n = (size_t)s->k;
        return 0;
    }
    size_t k = rlx__select_top_k(c->logits, (size_t)c->n_vocab, (size_t)s->k, sc->cands), n = 0;
    for (size_t i = 0; i < k; i++) if (sc->cands[i].logit > -INFINITY) sc->cands[n++] = sc->cands[i];
    c->list = sc->cands;
    c->n = n;
    c->listed = true;
    c->sorted = true;
    return 0;
}

static int top_p_apply(rlx_sampler_stage *st, rlx_token_cands *c)
{
    if (!c->scratch) return 0;
    rlx__cands_list(c);
    c->n = top_p_cut(c->scratch, c->list, c->n, ((const trunc_stage *)st)->p, c->sorted);
    return 0;
}

static int min_p_apply(rlx_sampler_stage *st, rlx_token_cands *c)
{
    if (!c->scratch) return 0;
    rlx__cands_list(c);
    c->n = min_p_cut(c->list, c->n, ((const trunc_stage *)st)->p);
    return 0;
}

static rlx_sampler_stage *trunc_new(const rlx_stage_ops *ops, int32_t k, float p)
{
    trunc_stage *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->base.ops = ops;
    s->k = k;
    s->p = p;
    return &s->base;
}

rlx_sampler_stage *rlx__stage_top_k(int32_t k)
{
    static const rlx_stage_ops ops = {.name = "top_k", .apply = top_k_apply, .free = stage_free};
    return trunc_new(&ops, k, 0.0f);
}

rlx_sampler_stage *rlx__stage_top_p(float p)
{
    static const rlx_stage_ops ops = {.name = "top_p", .apply = top_p_apply, .free = stage_free};
    return trunc_new(&ops, 0, p);
}

rlx_sampler_stage *rlx__stage_min_p(float p)
{
    static const rlx_stage_ops ops = {.name = "min_p", .apply = min_p_apply, .free = stage_free};
    return trunc_new(&ops, 0, p);
}

/* ---- draws ------------------------------------------------------------------------------- */

/* Greedy: the best logit after penalties, bias and constraints (ties to the lower id). */
static int32_t greedy_select(rlx_sampler_stage *st, rlx_token_cands *c)
{
    (void)st;
    if (!c->listed) return rlx_argmax(c->logits, c->n_vocab);
    if (c->n == 0) return rlx_argmax(c->logits, c->n_vocab);
    size_t best = 0;
    for (size_t i = 1; i < c->n; i++) if (above(c->list[i], c->list[best])) best = i;
    return c->list[best].id;
}

rlx_sampler_stage *rlx__stage_greedy(void)
{
    static const rlx_stage_ops ops = {.name = "greedy", .select = greedy_select, .free = stage_free};
    rlx_sampler_stage *s = calloc(1, sizeof *s);
    if (s) s->ops = &ops;
    return s;
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

/* w[i] = e^((l[i] - mx) / T) for logits above -inf, 0 for -inf and NaN. */
static inline __attribute__((always_inline)) void weights_loop(const float *l, int32_t n, float mx, float inv_t, float *w)
{
    for (int32_t i = 0; i < n; i++) {
        const float li = l[i];
        const float e = exp_nonpos((li - mx) * inv_t);
        w[i] = li > -INFINITY ? e : 0.0f; /* NaN compares false */
    }
}

/* w[i] = 0 where l[i] is -inf (a mask's refusal), branch-free. */
static inline __attribute__((always_inline)) void zero_loop(const float *l, int32_t n, float *w)
{
    for (int32_t i = 0; i < n; i++) w[i] = l[i] == -INFINITY ? 0.0f : w[i];
}

/* Each loop compiled once per vector width of the CPU backend's paths and chosen with them
 * (backends/cpu/kernels.h rlx__cpu_width, so RLX_CPU_PATH / rlx_cpu_force_path pick it, in
 * tests too); all give the same bits (ISO C mode: no FMA contraction, and each lane does the
 * scalar code's IEEE operations; test_sample checks it on every path the host has). GCC only:
 * clang contracts a * b + c into an FMA where the target has one. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SAMPLE_X86 1
__attribute__((target("avx512f"))) static void weights_512(const float *l, int32_t n, float mx, float inv_t, float *w)
{
    weights_loop(l, n, mx, inv_t, w);
}
__attribute__((target("avx2"))) static void weights_256(const float *l, int32_t n, float mx, float inv_t, float *w)
{
    weights_loop(l, n, mx, inv_t, w);
}
__attribute__((target("avx512f"))) static void zero_512(const float *l, int32_t n, float *w) { zero_loop(l, n, w); }
__attribute__((target("avx2"))) static void zero_256(const float *l, int32_t n, float *w) { zero_loop(l, n, w); }
#endif

void rlx__sample_weights(const float *l, int32_t n, float mx, float inv_t, float *w)
{
#ifdef SAMPLE_X86
    switch (rlx__cpu_width()) {
    case 512: weights_512(l, n, mx, inv_t, w); return;
    case 256: weights_256(l, n, mx, inv_t, w); return;
    default: break;
    }
#endif
    weights_loop(l, n, mx, inv_t, w);
}

void rlx__sample_zero_masked(const float *l, int32_t n, float *w)
{
#ifdef SAMPLE_X86
    switch (rlx__cpu_width()) {
    case 512: zero_512(l, n, w); return;
    case 256: zero_256(l, n, w); return;
    default: break;
    }
#endif
    zero_loop(l, n, w);
}

/* The weights of block b (DRAW_BLOCK tokens): eight float lanes, then in double. */
static double block_sum(const float *w, int32_t b, int32_t nv)
{
    const int32_t i0 = b * DRAW_BLOCK, i1 = i0 + DRAW_BLOCK < nv ? i0 + DRAW_BLOCK : nv;
    float lane[8] = {0};
    int32_t i = i0;
    for (; i + 8 <= i1; i += 8)
        for (int k = 0; k < 8; k++) lane[k] += w[i + k];
    double t = 0.0;
    for (int k = 0; k < 8; k++) t += (double)lane[k];
    for (; i < i1; i++) t += (double)w[i];
    return t;
}

/* The token at u (0 <= u < the blocks' total) of the weights: its block first, then in it; -1
 * when no weight is positive. */
static int32_t draw_blocks(const float *w, const double *bsum, int32_t nv, double u)
{
    const int32_t nblk = (nv + DRAW_BLOCK - 1) / DRAW_BLOCK;
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
    return last;
}

/* *z_out: the weights' total (0 when the draw fell back to the argmax). */
static int32_t sample_full_vocab(float temperature, uint64_t *rng, const float *logits, int32_t nv,
                                 rlx__sample_scratch *sc, double *z_out)
{
    *z_out = 0.0;
    float mx = -INFINITY;
    for (int32_t i = 0; i < nv; i++) mx = logits[i] > mx ? logits[i] : mx;
    if (mx == -INFINITY || mx == INFINITY) return rlx_argmax(logits, nv);
    float *w = sc->weights;
    rlx__sample_weights(logits, nv, mx, (float)(1.0 / (double)temperature), w);
    double *bsum = sc->block_sums;
    const int32_t nblk = (nv + DRAW_BLOCK - 1) / DRAW_BLOCK;
    double z = 0.0;
    for (int32_t b = 0; b < nblk; b++) z += bsum[b] = block_sum(w, b, nv);
    if (!(z > 0.0)) return rlx_argmax(logits, nv);
    const int32_t t = draw_blocks(w, bsum, nv, rlx__uniform01(rng) * z);
    *z_out = t >= 0 ? z : 0.0;
    return t >= 0 ? t : rlx_argmax(logits, nv);
}

typedef struct dist_stage {
    rlx_sampler_stage base;
    float temperature;
    uint64_t *rng;            /* the sampler's */
    double z;                 /* the last draw's weights' total when it was a full-vocabulary
                                 draw whose weights the scratch still holds (redraw), else 0 */
} dist_stage;

/* Temperature, softmax and the draw, all in double; without a list (no truncation stage) the
 * full-vocabulary path. */
static int32_t dist_select(rlx_sampler_stage *st, rlx_token_cands *c)
{
    dist_stage *s = (dist_stage *)st;
    rlx__sample_scratch *sc = c->scratch;
    s->z = 0.0;
    if (!sc) return rlx_argmax(c->logits, c->n_vocab); /* without scratch memory: greedy */
    if (!c->listed) return sample_full_vocab(s->temperature, s->rng, c->logits, c->n_vocab, sc, &s->z);
    size_t n = c->n;
    cand *l = c->list;
    if (n == 0) return rlx_argmax(c->logits, c->n_vocab);
    double inv_t = 1.0 / (double)s->temperature, mx = -INFINITY, z = 0.0;
    for (size_t i = 0; i < n; i++) if (l[i].logit > mx) mx = l[i].logit;
    double *pr = sc->probs;
    for (size_t i = 0; i < n; i++) z += pr[i] = exp(((double)l[i].logit - mx) * inv_t);
    double u = rlx__uniform01(s->rng) * z, cum = 0.0;
    for (size_t i = 0; i < n; i++) {
        cum += pr[i];
        if (u < cum) return l[i].id;
    }
    return l[n - 1].id; /* rounding left u at the very top */
}

/* A constraint refused the draw: draws again from the last full-vocabulary draw's weights (the
 * thread's scratch, untouched since) with the refused tokens' weights taken out and their blocks
 * summed again: the distribution of a draw over the logits with those tokens at -inf (the full
 * chain run again), for one uniform, without the exps. n_refused < 0: the tokens taken out are
 * those whose logit in c is now -inf (the constraints' masks applied to the logits the draw read),
 * every block summed again. -1 when the last draw was not such a draw or what is left weighs
 * under 2^-20 of the whole (its weights may have underflowed against the refused tokens'
 * maximum: the caller runs the chain again). */
static int32_t dist_redraw(rlx_sampler_stage *st, rlx_token_cands *c, const int32_t *refused, int n_refused)
{
    dist_stage *s = (dist_stage *)st;
    rlx__sample_scratch *sc = c->scratch;
    if (!sc || !(s->z > 0.0)) return -1;
    float *w = sc->weights;
    double *bsum = sc->block_sums;
    const int32_t nv = c->n_vocab, nblk = (nv + DRAW_BLOCK - 1) / DRAW_BLOCK;
    if (n_refused < 0) {
        rlx__sample_zero_masked(c->logits, nv, w);
        for (int32_t b = 0; b < nblk; b++) bsum[b] = block_sum(w, b, nv);
    }
    for (int i = 0; i < n_refused; i++) {
        const int32_t t = refused[i];
        if (t < 0 || t >= nv || w[t] == 0.0f) continue;
        w[t] = 0.0f;
        bsum[t / DRAW_BLOCK] = block_sum(w, t / DRAW_BLOCK, nv);
    }
    double z = 0.0;
    for (int32_t b = 0; b < nblk; b++) z += bsum[b];
    if (!(z > s->z * 0x1p-20)) return -1;
    return draw_blocks(w, bsum, nv, rlx__uniform01(s->rng) * z);
}

rlx_sampler_stage *rlx__stage_dist(float temperature, uint64_t *rng)
{
    static const rlx_stage_ops ops = {.name = "dist", .select = dist_select, .redraw = dist_redraw, .free = stage_free};
    dist_stage *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->base.ops = &ops;
    s->temperature = temperature;
    s->rng = rng;
    return &s->base;
}
