/* test_arch_ref.h - a naive single-sequence f32 forward of the decoder families, written from
 * llama.cpp's graphs (llama, qwen2, qwen3, gemma2, gemma3) independently of models/arch, for
 * the family tests. Every position's logits; K/V kept in f32 (compare with an F32 KV cache).
 * Header-only, test use only. */
#ifndef RLX_TEST_ARCH_REF_H
#define RLX_TEST_ARCH_REF_H

#include "backends/dtype.h"
#include "models/gguf.h"
#include "tests/rlx_test.h"

#include <math.h>

typedef struct ref_family {
    bool qkv_bias, qk_norm, post_norms, gelu, embd_scale, neox, scale_q;
    int swa_period;          /* every swa_period-th layer (1-based) is global; 0: all slide if window > 0 */
    const bool *swa_layers;  /* per layer: slides (overrides swa_period), or NULL */
    int window;              /* sliding window, 0 = none */
    float rope_base, rope_base_swa; /* rope_base_swa 0 = rope_base */
    float attn_softcap, final_softcap;
    const float *rope_factors;      /* per-dimension frequency divisors, or NULL */
} ref_family;

typedef struct ref_model {
    const rlx_gguf *g;
    int L, d, nh, nkv, hd, ff, V;
    float eps;
} ref_model;

static const float *ref_w(const ref_model *m, const char *name, int l)
{
    char full[96];
    if (l >= 0) snprintf(full, sizeof full, "blk.%d.%s", l, name);
    else snprintf(full, sizeof full, "%s", name);
    const rlx_gguf_tensor *t = rlx_gguf_find_tensor(m->g, full);
    if (!t || t->type != RLX_F32) return NULL;
    return (const float *)t->data;
}

static void ref_matvec(const float *W, const float *x, float *y, int K, int N)
{
    for (int n = 0; n < N; n++) {
        float s = 0.0f;
        for (int k = 0; k < K; k++) s += W[(size_t)n * K + k] * x[k];
        y[n] = s;
    }
}

static void ref_rms(const float *x, const float *w, float *y, int n, float eps)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(s / n) + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

static void ref_rope(float *x, int nheads, int hd, int pos, float base, bool neox, const float *ff)
{
    for (int h = 0; h < nheads; h++) {
        float *v = x + h * hd;
        for (int i = 0; i < hd / 2; i++) {
            double th = pos * pow(base, -2.0 * i / hd);
            if (ff) th /= ff[i];
            float c = (float)cos(th), s = (float)sin(th);
            int a = neox ? i : 2 * i, b = neox ? i + hd / 2 : 2 * i + 1;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

/* ggml's GELU: a table of f16(gelu(f16(x))), identity/zero beyond |x| >= 10 */
static float ref_gelu(float x)
{
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    float h = rlx_f16_to_f32(rlx_f32_to_f16(x));
    return rlx_f16_to_f32(rlx_f32_to_f16(0.5f * h * (1.0f + tanhf(0.7978845608f * h * (1.0f + 0.044715f * h * h)))));
}

/* logits: n x V. Returns false if a weight is missing. */
static bool ref_forward(const ref_model *m, const ref_family *f, const int32_t *tok, int n, float *logits)
{
    const int d = m->d, hd = m->hd, nq = m->nh * hd, nk = m->nkv * hd, group = m->nh / m->nkv;
    float *x = calloc((size_t)n * d, 4), *h = malloc((size_t)d * 4), *q = malloc((size_t)n * nq * 4);
    float *K = malloc((size_t)n * nk * 4), *Vv = malloc((size_t)n * nk * 4), *att = malloc((size_t)nq * 4);
    float *o = malloc((size_t)d * 4), *g = malloc((size_t)m->ff * 4), *u = malloc((size_t)m->ff * 4), *sc = malloc((size_t)n * 4);
    const float *emb = ref_w(m, "token_embd.weight", -1);
    bool ok = emb != NULL;
    for (int t = 0; ok && t < n; t++)
        for (int i = 0; i < d; i++) x[(size_t)t * d + i] = emb[(size_t)tok[t] * d + i] * (f->embd_scale ? sqrtf((float)d) : 1.0f);
    const float scale = 1.0f / sqrtf((float)hd);
    for (int l = 0; ok && l < m->L; l++) {
        const float *an = ref_w(m, "attn_norm.weight", l), *wq = ref_w(m, "attn_q.weight", l), *wk = ref_w(m, "attn_k.weight", l);
        const float *wv = ref_w(m, "attn_v.weight", l), *wo = ref_w(m, "attn_output.weight", l), *fn = ref_w(m, "ffn_norm.weight", l);
        const float *wg = ref_w(m, "ffn_gate.weight", l), *wu = ref_w(m, "ffn_up.weight", l), *wd = ref_w(m, "ffn_down.weight", l);
        const float *bq = ref_w(m, "attn_q.bias", l), *bk = ref_w(m, "attn_k.bias", l), *bv = ref_w(m, "attn_v.bias", l);
        const float *qn = ref_w(m, "attn_q_norm.weight", l), *kn = ref_w(m, "attn_k_norm.weight", l);
        const float *pa = ref_w(m, "post_attention_norm.weight", l), *pf = ref_w(m, "post_ffw_norm.weight", l);
        ok = an && wq && wk && wv && wo && fn && wg && wu && wd && (!f->qkv_bias || (bq && bk && bv)) &&
             (!f->qk_norm || (qn && kn)) && (!f->post_norms || (pa && pf));
        if (!ok) break;
        bool swa = f->window > 0 && (f->swa_layers ? f->swa_layers[l] : !(f->swa_period > 0 && (l + 1) % f->swa_period == 0));
        float base = swa && f->rope_base_swa > 0 ? f->rope_base_swa : f->rope_base;
        for (int t = 0; t < n; t++) {
            ref_rms(x + (size_t)t * d, an, h, d, m->eps);
            float *qt = q + (size_t)t * nq, *kt = K + (size_t)t * nk, *vt = Vv + (size_t)t * nk;
            ref_matvec(wq, h, qt, d, nq);
            ref_matvec(wk, h, kt, d, nk);
            ref_matvec(wv, h, vt, d, nk);
            if (f->qkv_bias) {
                for (int i = 0; i < nq; i++) qt[i] += bq[i];
                for (int i = 0; i < nk; i++) { kt[i] += bk[i]; vt[i] += bv[i]; }
            }
            if (f->qk_norm) {
                for (int hh = 0; hh < m->nh; hh++) ref_rms(qt + hh * hd, qn, qt + hh * hd, hd, m->eps);
                for (int hh = 0; hh < m->nkv; hh++) ref_rms(kt + hh * hd, kn, kt + hh * hd, hd, m->eps);
            }
            ref_rope(qt, m->nh, hd, t, base, f->neox, f->rope_factors);
            ref_rope(kt, m->nkv, hd, t, base, f->neox, f->rope_factors);
            if (f->scale_q) for (int i = 0; i < nq; i++) qt[i] *= scale;
        }
        for (int t = 0; t < n; t++) {
            int j0 = swa && t - f->window + 1 > 0 ? t - f->window + 1 : 0;
            for (int hh = 0; hh < m->nh; hh++) {
                const float *qh = q + (size_t)t * nq + hh * hd;
                float mx = -INFINITY;
                for (int j = j0; j <= t; j++) {
                    const float *kj = K + (size_t)j * nk + (hh / group) * hd;
                    float s = 0.0f;
                    for (int i = 0; i < hd; i++) s += qh[i] * kj[i];
                    if (f->attn_softcap > 0) s = f->attn_softcap * tanhf(s / f->attn_softcap);
                    if (!f->scale_q) s *= scale;
                    sc[j] = s;
                    if (s > mx) mx = s;
                }
                double sum = 0.0;
                for (int j = j0; j <= t; j++) { sc[j] = expf(sc[j] - mx); sum += sc[j]; }
                float *ah = att + hh * hd;
                for (int i = 0; i < hd; i++) ah[i] = 0.0f;
                for (int j = j0; j <= t; j++)
                    for (int i = 0; i < hd; i++) ah[i] += (float)(sc[j] / sum) * Vv[(size_t)j * nk + (hh / group) * hd + i];
            }
            float *xt = x + (size_t)t * d;
            ref_matvec(wo, att, o, nq, d);
            if (f->post_norms) ref_rms(o, pa, o, d, m->eps);
            for (int i = 0; i < d; i++) xt[i] += o[i];
            ref_rms(xt, fn, h, d, m->eps);
            ref_matvec(wg, h, g, d, m->ff);
            ref_matvec(wu, h, u, d, m->ff);
            for (int i = 0; i < m->ff; i++) g[i] = (f->gelu ? ref_gelu(g[i]) : g[i] / (1.0f + expf(-g[i]))) * u[i];
            ref_matvec(wd, g, o, m->ff, d);
            if (f->post_norms) ref_rms(o, pf, o, d, m->eps);
            for (int i = 0; i < d; i++) xt[i] += o[i];
        }
    }
    const float *on = ref_w(m, "output_norm.weight", -1), *wout = ref_w(m, "output.weight", -1);
    if (!wout) wout = emb;
    ok = ok && on && wout;
    for (int t = 0; ok && t < n; t++) {
        ref_rms(x + (size_t)t * d, on, h, d, m->eps);
        float *lt = logits + (size_t)t * m->V;
        ref_matvec(wout, h, lt, d, m->V);
        if (f->final_softcap > 0)
            for (int v = 0; v < m->V; v++) lt[v] = f->final_softcap * tanhf(lt[v] / f->final_softcap);
    }
    free(x); free(h); free(q); free(K); free(Vv); free(att); free(o); free(g); free(u); free(sc);
    return ok;
}

#endif
