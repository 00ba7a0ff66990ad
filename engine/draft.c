/* draft.c - speculative decoding with a draft model (see draft.h). */
#include "engine/draft.h"
#include "engine/sample.h"
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
    /* one forward's batch: tokens, positions, sequences, outputs (max_batch_tokens long), the
     * sequences (max_seqs) and, per batch sequence, its job */
    int32_t *tok, *pos, *seqv, *job_of;
    uint8_t *outv;
    rlx_batch_seq *seqs;
    /* finished sequences' draft KV, oldest first (max_seqs at most), for a later sequence with
     * the same beginning (a chat's system prompt and history) */
    rlx_draft_seq *parked;
    int32_t n_parked;
};

static bool same_str(rlx_gguf_str a, rlx_gguf_str b) { return a.len == b.len && !memcmp(a.ptr, b.ptr, a.len); }

/* A tokenizer.ggml.* scalar as a comparable string ("(none)" when absent). */
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
        /* the model kind must be there in both; the others only when both files say */
        if (i > 0 && (!rlx_gguf_find(t, keys[i]) || !rlx_gguf_find(d, keys[i]))) continue;
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
        .max_outputs = max_seqs, /* one row per sequence drafting */
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
    size_t cap = (size_t)d->rn->max_batch_tokens, ns = (size_t)d->rn->max_seqs;
    if (!rc_ && (!(d->tok = malloc(cap * sizeof *d->tok)) || !(d->pos = malloc(cap * sizeof *d->pos)) ||
                 !(d->seqv = malloc(cap * sizeof *d->seqv)) || !(d->outv = malloc(cap)) ||
                 !(d->seqs = malloc(ns * sizeof *d->seqs)) || !(d->job_of = malloc(ns * sizeof *d->job_of)) ||
                 !(d->parked = calloc(ns, sizeof *d->parked))))
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
    for (int32_t i = 0; i < d->n_parked; i++) rlx_draft_seq_free(d, &d->parked[i]);
    free(d->parked);
    rlx_runner_close(d->rn);
    free(d->tok);
    free(d->pos);
    free(d->seqv);
    free(d->outv);
    free(d->seqs);
    free(d->job_of);
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

/* Frees the oldest parked draft KV; false when none is parked. */
static bool unpark_oldest(rlx_draft *d)
{
    if (!d->n_parked) return false;
    rlx_draft_seq_free(d, &d->parked[0]);
    memmove(&d->parked[0], &d->parked[1], (size_t)(d->n_parked - 1) * sizeof *d->parked);
    d->n_parked--;
    return true;
}

void rlx_draft_seq_park(rlx_draft *d, rlx_draft_seq *ds)
{
    if (!d || ds->n_hist < d->rn->kv.block_size) { /* nothing worth keeping */
        rlx_draft_seq_free(d, ds);
        return;
    }
    if (d->n_parked == d->rn->max_seqs) unpark_oldest(d);
    d->parked[d->n_parked++] = *ds;
    memset(ds, 0, sizeof *ds);
}

/* A fresh sequence takes over the parked draft KV that shares the longest beginning with its
 * tokens (at least a block), as llama.cpp's server reuses a slot's draft context. */
static void adopt(rlx_draft *d, rlx_draft_seq *ds, const int32_t *tokens, int32_t n)
{
    int32_t best = -1, best_len = d->rn->kv.block_size - 1;
    for (int32_t i = 0; i < d->n_parked; i++) {
        const rlx_draft_seq *p = &d->parked[i];
        int32_t c = 0;
        while (c < p->n_hist && c < n && p->hist[c] == tokens[c]) c++;
        if (c > best_len) best = i, best_len = c;
    }
    if (best < 0) return;
    rlx_draft_seq_free(d, ds); /* holds nothing computed; blocks or arrays it has go back */
    *ds = d->parked[best];
    memmove(&d->parked[best], &d->parked[best + 1], (size_t)(d->n_parked - best - 1) * sizeof *d->parked);
    d->n_parked--;
}

uint64_t rlx_draft_positions(const rlx_draft *d) { return d ? d->positions : 0; }

bool rlx_draft_file_changed(const rlx_draft *d, char *why, size_t cap) { return rlx_runner_file_changed(d->rn, why, cap); }

void rlx_draft_memory(const rlx_draft *d, size_t *weights, size_t *kv)
{
    *weights = d ? d->rn->weight_bytes : 0;
    *kv = d ? rlx_mem_block_bytes(&d->rn->kv_geo) * (size_t)d->rn->kv_geo.n_blocks : 0;
}

/* The most likely token of logits row `row` (the sampler's greedy choice) and its probability. */
static int32_t top(const rlx_draft *d, int32_t row, float *p)
{
    const float *l = d->rn->logits + (size_t)row * (size_t)d->rn->n_vocab;
    int32_t best = rlx_argmax(l, d->rn->n_vocab);
    *p = expf(rlx_logprobs(l, d->rn->n_vocab, best, 0, NULL, NULL));
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

/* Job j's next draft from logits row `row`: stored as its candidate, or the job stops. */
static void candidate(rlx_draft *d, rlx_draft_job *j, int32_t row)
{
    float p;
    int32_t t = top(d, row, &p);
    float p_min = j->p_min > 0 ? j->p_min : j->p_min < 0 ? 0 : d->p_min;
    j->cand = p >= p_min && t < d->target_vocab ? t : -1;
}

/* Runs the batch of n tokens built in d's arrays over n_seqs sequences; each output row goes to
 * its job's candidate. On failure every job forgets its history (its K/V may be half written). */
static int run(rlx_draft *d, rlx_draft_job *jobs, int32_t n_jobs, int32_t n, int32_t n_seqs, rlx_error *err)
{
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++) n_out += d->outv[i];
    rlx_batch b = {n, d->tok, d->pos, d->seqv, d->outv, n_out, n_seqs, d->seqs, NULL};
    int rc = rlx_runner_forward(d->rn, &b, err);
    if (rc) {
        for (int32_t j = 0; j < n_jobs; j++) jobs[j].ds->n_hist = 0, jobs[j].got = 0, jobs[j].cand = -1;
        return rc;
    }
    d->positions += (uint64_t)n;
    for (int32_t i = 0, row = 0; i < n; i++)
        if (d->outv[i]) candidate(d, &jobs[d->job_of[d->seqv[i]]], row++);
    return 0;
}

/* Adds job j's sequence to the batch being built; returns its index there. */
static int32_t batch_seq(rlx_draft *d, rlx_draft_job *jobs, int32_t j, int32_t *n_seqs)
{
    rlx_draft_seq *ds = jobs[j].ds;
    d->seqs[*n_seqs] = (rlx_batch_seq){ds->blocks, ds->n_blocks, -1};
    d->job_of[*n_seqs] = j;
    return (*n_seqs)++;
}

int rlx_draft_propose_many(rlx_draft *d, rlx_draft_job *jobs, int32_t n_jobs, rlx_error *err)
{
    const int32_t cap = d->rn->max_batch_tokens;
    if (n_jobs > d->rn->max_seqs) { /* in groups the runner's batch takes */
        for (int32_t at = 0; at < n_jobs; at += d->rn->max_seqs) {
            int rc = rlx_draft_propose_many(d, jobs + at, RLX_MIN(d->rn->max_seqs, n_jobs - at), err);
            if (rc) return rc;
        }
        return 0;
    }
    for (int32_t j = 0; j < n_jobs; j++) {
        rlx_draft_job *jb = &jobs[j];
        rlx_draft_seq *ds = jb->ds;
        jb->got = 0;
        jb->cand = -1;
        int32_t n = jb->n;
        jb->max = RLX_MIN(jb->max, d->rn->n_ctx - n);
        if (n <= 0 || jb->max <= 0) {
            jb->max = 0;
            continue;
        }
        if (ds->n_hist == 0 && d->n_parked) adopt(d, ds, jb->tokens, n);
        /* positions 0..n+max-2 get K/V: the tokens and every draft but the last; parked draft
         * KV makes room when the pool is short */
        int rc = hist_reserve(ds, n + jb->max) ? 0 : RLX_ENOMEM;
        while (!rc && (rc = rlx_runner_reserve(d->rn, &ds->blocks, &ds->n_blocks, &ds->cap_blocks, n + jb->max - 1)) == RLX_EFULL &&
               unpark_oldest(d))
            rc = 0;
        if (rc) {
            jb->max = 0;
            continue;
        }
        int32_t keep = 0;
        while (keep < ds->n_hist && keep < n - 1 && ds->hist[keep] == jb->tokens[keep]) keep++;
        ds->n_hist = keep; /* the last token always runs: its logits give the first draft */
    }
    /* catch up: every job's missing tokens, as many jobs per forward as the batch holds */
    for (;;) {
        int32_t n = 0, n_seqs = 0;
        for (int32_t j = 0; j < n_jobs && n < cap; j++) {
            rlx_draft_job *jb = &jobs[j];
            rlx_draft_seq *ds = jb->ds;
            if (jb->max <= 0 || ds->n_hist >= jb->n) continue;
            int32_t k = RLX_MIN(jb->n - ds->n_hist, cap - n), sq = batch_seq(d, jobs, j, &n_seqs);
            for (int32_t i = 0; i < k; i++, n++) {
                d->tok[n] = jb->tokens[ds->n_hist + i];
                d->pos[n] = ds->n_hist + i;
                d->seqv[n] = sq;
                d->outv[n] = ds->n_hist + i == jb->n - 1;
            }
            memcpy(ds->hist + ds->n_hist, jb->tokens + ds->n_hist, (size_t)k * sizeof *jb->tokens);
            ds->n_hist += k;
        }
        if (!n) break;
        int rc = run(d, jobs, n_jobs, n, n_seqs, err);
        if (rc) return rc;
    }
    /* draft: one token per job still sure of its next one, one forward per position */
    for (;;) {
        int32_t n = 0, n_seqs = 0;
        for (int32_t j = 0; j < n_jobs; j++) {
            rlx_draft_job *jb = &jobs[j];
            if (jb->cand < 0) continue;
            jb->out[jb->got++] = jb->cand;
            if (jb->got == jb->max) {
                jb->cand = -1;
                continue;
            }
            rlx_draft_seq *ds = jb->ds;
            d->tok[n] = jb->cand;
            d->pos[n] = ds->n_hist;
            d->seqv[n] = batch_seq(d, jobs, j, &n_seqs);
            d->outv[n] = 1;
            ds->hist[ds->n_hist++] = jb->cand;
            jb->cand = -1;
            n++;
        }
        if (!n) break;
        int rc = run(d, jobs, n_jobs, n, n_seqs, err);
        if (rc) return rc;
    }
    return 0;
}

int32_t rlx_draft_propose(rlx_draft *d, rlx_draft_seq *ds, const int32_t *tokens, int32_t n, int32_t max, int32_t *out,
                          rlx_error *err)
{
    rlx_draft_job j = {.ds = ds, .tokens = tokens, .n = n, .max = max, .out = out};
    int rc = rlx_draft_propose_many(d, &j, 1, err);
    return rc ? rc : j.got;
}
