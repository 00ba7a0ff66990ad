/* draft.c - speculative decoding with a draft model (see draft.h). */
#include "engine/draft.h"
#include "models/gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { VOCAB_SIZE_SLACK = 128, VOCAB_CHECK_FROM = 5 }; /* llama.cpp's speculative vocabulary rule */

struct rlx_draft {
    rlx_runner *rn;
    float p_min;
    int32_t target_vocab;
    uint64_t positions;
    /* one forward's batch arrays, max_batch_tokens long */
    int32_t *pos, *seqv;
    uint8_t *outv;
};

static bool same_str(rlx_gguf_str a, rlx_gguf_str b) { return a.len == b.len && !memcmp(a.ptr, b.ptr, a.len); }

/* A tokenizer.ggml.* scalar as a comparable string ("" when absent). */
static void key_text(const rlx_gguf *g, const char *key, char *buf, size_t cap)
{
    const rlx_gguf_value *v = rlx_gguf_find(g, key);
    if (!v) snprintf(buf, cap, "(none)");
    else if (v->type == RLX_GGUF_STRING) snprintf(buf, cap, "%.*s", (int)RLX_MIN(v->str.len, 64), v->str.ptr);
    else if (v->type == RLX_GGUF_BOOL) snprintf(buf, cap, "%s", v->b ? "true" : "false");
    else if (v->type == RLX_GGUF_INT8 || v->type == RLX_GGUF_INT16 || v->type == RLX_GGUF_INT32 || v->type == RLX_GGUF_INT64)
        snprintf(buf, cap, "%lld", (long long)v->i64);
    else snprintf(buf, cap, "%llu", (unsigned long long)v->u64);
}

static int check_vocab(const rlx_gguf *t, const rlx_gguf *d, const char *path, rlx_error *err)
{
    static const char *const keys[] = {"tokenizer.ggml.model", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                       "tokenizer.ggml.add_bos_token"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char a[80], b[80];
        key_text(t, keys[i], a, sizeof a);
        key_text(d, keys[i], b, sizeof b);
        if (strcmp(a, b))
            return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: the draft model's %s is %s, the model's %s: it cannot draft for it",
                              path, keys[i], b, a);
    }
    const rlx_gguf_array *ta = NULL, *da = NULL;
    rlx_error e2 = {0};
    if (rlx_gguf_get_arr(t, "tokenizer.ggml.tokens", &ta, &e2) || rlx_gguf_get_arr(d, "tokenizer.ggml.tokens", &da, &e2) ||
        ta->type != RLX_GGUF_STRING || da->type != RLX_GGUF_STRING)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: the draft model and the model must both list tokenizer.ggml.tokens", path);
    uint64_t n = RLX_MIN(ta->n, da->n), diff = ta->n > da->n ? ta->n - da->n : da->n - ta->n;
    if (diff > VOCAB_SIZE_SLACK)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: the draft model has %llu tokens, the model %llu (at most %d apart)", path,
                          (unsigned long long)da->n, (unsigned long long)ta->n, VOCAB_SIZE_SLACK);
    for (uint64_t i = VOCAB_CHECK_FROM; i < n; i++)
        if (!same_str(ta->strs[i], da->strs[i]))
            return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: token %llu of the draft model is \"%.*s\", the model's \"%.*s\"", path,
                              (unsigned long long)i, (int)RLX_MIN(da->strs[i].len, 40), da->strs[i].ptr,
                              (int)RLX_MIN(ta->strs[i].len, 40), ta->strs[i].ptr);
    return 0;
}

int rlx_draft_open(rlx_draft **out, const char *path, const rlx_runner *target, const rlx_backend_config *backend,
                   int32_t max_seqs, int32_t max_batch_tokens, float p_min, rlx_error *err)
{
    *out = NULL;
    rlx_draft *d = calloc(1, sizeof *d);
    if (!d) return rlx_errorf(err, RLX_ENOMEM, "out of memory opening the draft model");
    rlx_runner_config rc = {
        .model_path = path,
        .backend = *backend,
        .n_ctx = target->n_ctx,
        .kv_type = RLX_F16,
        .kv_type_set = true,
        .max_seqs = max_seqs,
        .max_batch_tokens = max_batch_tokens,
        .max_outputs = 1,
    };
    int rc_ = rlx_runner_open(&d->rn, &rc, err);
    if (rc_) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        rlx_errorf(err, rc_, "the draft model: %s", msg);
        free(d);
        return rc_;
    }
    if (rlx_runner_embeds(d->rn) || d->rn->mem.has_state || !d->rn->mem.has_kv) {
        rc_ = rlx_errorf(err, RLX_EUNSUPPORTED, "%s: a draft model must be a decoder with only KV layers (no embedding "
                         "model, no recurrent state)", path);
    } else {
        rc_ = check_vocab(target->model->gguf, d->rn->model->gguf, path, err);
    }
    int32_t cap = d->rn->max_batch_tokens;
    if (!rc_ && (!(d->pos = malloc((size_t)cap * sizeof *d->pos)) || !(d->seqv = calloc((size_t)cap, sizeof *d->seqv)) ||
                 !(d->outv = calloc((size_t)cap, 1))))
        rc_ = rlx_errorf(err, RLX_ENOMEM, "out of memory opening the draft model");
    if (rc_) {
        rlx_draft_close(d);
        return rc_;
    }
    d->p_min = p_min;
    d->target_vocab = target->n_vocab;
    *out = d;
    return 0;
}

void rlx_draft_close(rlx_draft *d)
{
    if (!d) return;
    rlx_runner_close(d->rn);
    free(d->pos);
    free(d->seqv);
    free(d->outv);
    free(d);
}

void rlx_draft_seq_free(rlx_draft *d, rlx_draft_seq *ds)
{
    if (d)
        for (int32_t i = 0; i < ds->n_blocks; i++) rlx_kv_release(&d->rn->kv, ds->blocks[i]);
    free(ds->blocks);
    free(ds->hist);
    memset(ds, 0, sizeof *ds);
}

uint64_t rlx_draft_positions(const rlx_draft *d) { return d ? d->positions : 0; }

void rlx_draft_memory(const rlx_draft *d, size_t *weights, size_t *kv)
{
    *weights = d ? d->rn->weight_bytes : 0;
    *kv = d ? rlx_mem_block_bytes(&d->rn->kv_geo) * (size_t)d->rn->kv_geo.n_blocks : 0;
}

/* Runs tokens[0..n) at positions from..from+n of ds (blocks reserved), logits for the last. */
static int forward(rlx_draft *d, rlx_draft_seq *ds, const int32_t *tokens, int32_t from, int32_t n, rlx_error *err)
{
    for (int32_t i = 0; i < n; i++) {
        d->pos[i] = from + i;
        d->outv[i] = i == n - 1;
    }
    rlx_batch_seq bs = {ds->blocks, ds->n_blocks, -1};
    rlx_batch b = {n, tokens, d->pos, d->seqv, d->outv, 1, 1, &bs, NULL};
    int rc = rlx_runner_forward(d->rn, &b, err);
    d->outv[n - 1] = 0;
    if (!rc) d->positions += (uint64_t)n;
    return rc;
}

/* The most likely token of the last logits and its probability. */
static int32_t top(const rlx_draft *d, float *p)
{
    const float *l = d->rn->logits;
    int32_t n = d->rn->n_vocab, best = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)l[i] - l[best]);
    *p = (float)(1.0 / sum);
    return best;
}

static bool hist_reserve(rlx_draft_seq *ds, int32_t n)
{
    if (n <= ds->cap_hist) return true;
    int32_t nc = RLX_MAX(n, ds->cap_hist * 2);
    int32_t *h = realloc(ds->hist, (size_t)nc * sizeof *h);
    if (!h) return false;
    ds->hist = h;
    ds->cap_hist = nc;
    return true;
}

int32_t rlx_draft_propose(rlx_draft *d, rlx_draft_seq *ds, const int32_t *tokens, int32_t n, int32_t max, int32_t *out,
                          rlx_error *err)
{
    if (n <= 0 || max <= 0) return 0;
    max = RLX_MIN(max, d->rn->n_ctx - n);
    if (max <= 0) return 0;
    /* positions 0..n+max-2 get K/V: the tokens and every draft but the last */
    if (!hist_reserve(ds, n + max) || rlx_runner_reserve(d->rn, &ds->blocks, &ds->n_blocks, &ds->cap_blocks, n + max - 1))
        return 0;
    int32_t keep = 0;
    while (keep < ds->n_hist && keep < n - 1 && ds->hist[keep] == tokens[keep]) keep++;
    ds->n_hist = keep;
    /* catch up (the last token always runs: its logits give the first draft) */
    while (ds->n_hist < n) {
        int32_t k = RLX_MIN(n - ds->n_hist, d->rn->max_batch_tokens);
        int rc = forward(d, ds, tokens + ds->n_hist, ds->n_hist, k, err);
        if (rc) {
            ds->n_hist = 0;
            return rc;
        }
        memcpy(ds->hist + ds->n_hist, tokens + ds->n_hist, (size_t)k * sizeof *tokens);
        ds->n_hist += k;
    }
    int32_t got = 0;
    for (;;) {
        float p;
        int32_t t = top(d, &p);
        if (p < d->p_min || t >= d->target_vocab) break;
        out[got++] = t;
        if (got == max) break;
        int rc = forward(d, ds, &t, ds->n_hist, 1, err);
        if (rc) {
            ds->n_hist = 0;
            return rc;
        }
        ds->hist[ds->n_hist++] = t;
    }
    return got;
}
