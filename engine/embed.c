/* embed.c - one encoder step over several inputs, pooled per input (see embed.h). */
#include "engine/embed.h"
#include "backends/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool rlx_embed_is_encoder(const rlx_runner *r)
{
    return r && r->model->cfg.encoder && r->graph.output_kind == RLX_OUTPUT_HIDDEN;
}

rlx_pooling rlx_embed_default_pooling(const rlx_runner *r)
{
    rlx_pooling p = RLX_POOL_NONE;
    if (rlx_embed_is_encoder(r) && rlx_pooling_from_gguf(r->model->cfg.pooling_type, &p, NULL)) p = RLX_POOL_NONE;
    return p;
}

/* The classifier head (llama.cpp's rank pooling): h = tanh(cls x + cls.b) when cls.weight is
 * present, then cls.output h + cls.output.b when that is; either may be absent. */
typedef struct rank_head {
    const rlx_gguf_tensor *w1, *b1, *w2, *b2;
} rank_head;

static void get_head(const rlx_runner *r, rank_head *h)
{
    const rlx_gguf *g = r->model->gguf;
    h->w1 = rlx_gguf_find_tensor(g, "cls.weight");
    h->b1 = rlx_gguf_find_tensor(g, "cls.bias");
    h->w2 = rlx_gguf_find_tensor(g, "cls.output.weight");
    h->b2 = rlx_gguf_find_tensor(g, "cls.output.bias");
}

int64_t rlx_embed_dim(const rlx_runner *r, rlx_pooling p)
{
    if (!rlx_embed_is_encoder(r)) return 0;
    if (p != RLX_POOL_RANK) return r->model->cfg.n_embd;
    rank_head h;
    get_head(r, &h);
    return h.w2 ? h.w2->ne[1] : h.w1 ? h.w1->ne[1] : 0;
}

int32_t rlx_embed_max_tokens(const rlx_runner *r)
{
    int32_t n = r->n_ctx;
    const rlx_gguf_tensor *pos = rlx_gguf_find_tensor(r->model->gguf, "position_embd.weight");
    if (pos && pos->ne[1] < n) n = (int32_t)pos->ne[1];
    return n;
}

/* y[n_out] = W x (+ b) for a weight of ne {n_in, n_out} (any computable type; rows dequantized
 * one at a time into row), products summed in double */
static int affine(const rlx_gguf_tensor *w, const rlx_gguf_tensor *b, const float *x, int64_t n_in, float *y, float *row)
{
    if (w->ne[0] != n_in || (b && (b->type != RLX_F32 || b->ne[0] != w->ne[1]))) return RLX_EFORMAT;
    const size_t rb = rlx_row_bytes(w->type, w->ne[0]);
    for (int64_t o = 0; o < w->ne[1]; o++) {
        if (rlx_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)o * rb, row, n_in)) return RLX_EUNSUPPORTED;
        double s = 0.0;
        for (int64_t i = 0; i < n_in; i++) s += (double)row[i] * (double)x[i];
        y[o] = (float)s + (b ? ((const float *)b->data)[o] : 0.0f);
    }
    return 0;
}

int rlx_embed_rank_scores(const rlx_runner *r, const float *cls_row, float *out, rlx_error *err)
{
    rank_head h;
    get_head(r, &h);
    const int64_t d = r->model->cfg.n_embd, hid = h.w1 ? h.w1->ne[1] : d;
    float *tmp = malloc((size_t)(hid + RLX_MAX(d, hid)) * sizeof *tmp), *row = tmp ? tmp + hid : NULL;
    if (!tmp) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    int rc = 0;
    const float *x = cls_row;
    if (h.w1) {
        rc = affine(h.w1, h.b1, x, d, h.w2 ? tmp : out, row);
        if (!rc) {
            float *y = h.w2 ? tmp : out;
            for (int64_t i = 0; i < hid; i++) y[i] = tanhf(y[i]);
            x = tmp;
        }
    }
    if (!rc && h.w2) rc = affine(h.w2, h.b2, x, hid, out, row);
    free(tmp);
    if (rc) return rlx_errorf(err, rc, "%s: the cls head's tensors have unexpected shapes or types",
                              rlx_gguf_path(r->model->gguf));
    return 0;
}

int rlx_embed_step(rlx_runner *r, const rlx_embed_seq *in, int32_t n, rlx_pooling pooling, int norm, float *out,
                   rlx_error *err)
{
    if (!rlx_embed_is_encoder(r))
        return rlx_errorf(err, RLX_EINVAL, "model '%s' is not an encoder (embeddings need bert or nomic-bert)",
                          r ? r->model->name : "?");
    if (n < 1 || !in || !out) return rlx_errorf(err, RLX_EINVAL, "an encoder step needs at least one input");
    if (pooling < RLX_POOL_NONE || pooling > RLX_POOL_RANK)
        return rlx_errorf(err, RLX_EINVAL, "unknown pooling %d", (int)pooling);
    if (norm < -1) return rlx_errorf(err, RLX_EINVAL, "normalization %d is not one of -1, 0, 1, 2 or p > 2", norm);
    if (pooling == RLX_POOL_RANK && !r->model->cfg.rank_head)
        return rlx_errorf(err, RLX_EINVAL, "pooling rank needs a classifier head (cls), which model '%s' lacks", r->model->name);
    const int32_t max_len = rlx_embed_max_tokens(r);
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (in[i].n_tokens < 1 || !in[i].tokens) return rlx_errorf(err, RLX_EINVAL, "input %d is empty", i);
        if (in[i].n_tokens > max_len)
            return rlx_errorf(err, RLX_ETOOLONG, "input %d has %d tokens, more than the model's %d", i, in[i].n_tokens, max_len);
        for (int32_t t = 0; t < in[i].n_tokens; t++)
            if (in[i].tokens[t] < 0 || in[i].tokens[t] >= r->n_vocab)
                return rlx_errorf(err, RLX_ERANGE, "input %d: token id %d is outside the vocabulary (%d)", i, in[i].tokens[t],
                                  r->n_vocab);
        total += in[i].n_tokens;
    }
    if (total > r->max_batch_tokens)
        return rlx_errorf(err, RLX_ETOOLONG, "the inputs hold %lld tokens, more than one step's %d", (long long)total,
                          r->max_batch_tokens);

    const int32_t T = (int32_t)total;
    int32_t *tok = malloc((size_t)T * 3 * sizeof *tok);
    uint8_t *outf = calloc((size_t)T, 1);
    rlx_batch_seq *seqs = calloc((size_t)n, sizeof *seqs);
    int rc = 0;
    if (!tok || !outf || !seqs) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); goto done; }
    int32_t *pos = tok + T, *seq = pos + T;
    /* each input contiguous, in position order: what attention without a cache requires */
    for (int32_t i = 0, k = 0; i < n; i++) {
        seqs[i].state_slot = -1;
        for (int32_t t = 0; t < in[i].n_tokens; t++, k++) {
            tok[k] = in[i].tokens[t];
            pos[k] = t;
            seq[k] = i;
        }
    }
    const rlx_batch b = {.n_tokens = T, .tokens = tok, .pos = pos, .seq = seq, .output = outf, .n_outputs = 0,
                         .n_seqs = n, .seqs = seqs, .decode = NULL};
    if ((rc = rlx_runner_forward(r, &b, err))) goto done;
    const int64_t d = r->model->cfg.n_embd;
    const float *h = r->logits; /* T rows of n_embd hidden states */
    float *o = out;
    for (int32_t i = 0; i < n; i++) {
        const int32_t nt = in[i].n_tokens;
        if (pooling == RLX_POOL_NONE) {
            memcpy(o, h, (size_t)nt * (size_t)d * sizeof *o);
            o += (size_t)nt * (size_t)d;
        } else if (pooling == RLX_POOL_RANK) {
            if ((rc = rlx_embed_rank_scores(r, h, o, err))) goto done;
            o += rlx_embed_dim(r, RLX_POOL_RANK);
        } else {
            rlx_pool_rows(pooling, h, nt, d, o);
            rlx_embd_normalize(o, o, d, norm);
            o += d;
        }
        h += (size_t)nt * (size_t)d;
    }
done:
    free(tok);
    free(outf);
    free(seqs);
    return rc;
}
