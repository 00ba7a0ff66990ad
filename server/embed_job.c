/* embed_job.c - the embedding kinds' part of a job (/v1/embeddings, /embedding, /v1/rerank and
 * their stdio lines): which models serve them, the inputs' tokens (prepared on the threadpool
 * like other prompts, with the admission rule for embedding inputs), the one engine request
 * that carries every input (engine.h RLX_REQ_EMBED: the worker batches each input as a
 * sequence), and the result handed to proto's formatters. jobs.c keeps the bookkeeping. */
#include "engine/pool.h"
#include "server/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rlx_embed_param(const rlx_job *j)
{
    return j->req.kind == RLX_API_RERANK ? "documents" : j->req.kind == RLX_API_EMBEDDING ? "content" : "input";
}

static const char *routes_of(const rlx_model_slot *m, char *buf, size_t cap)
{
    int p = rlx_worker_pooling(m->w);
    if (p < 0) snprintf(buf, cap, "/v1/completions, /v1/chat/completions and /v1/generate");
    else if (p == RLX_POOL_RANK) snprintf(buf, cap, "/v1/rerank");
    else if (p == RLX_POOL_NONE) snprintf(buf, cap, "/embedding (a vector per token)");
    else snprintf(buf, cap, "/v1/embeddings and /embedding");
    return buf;
}

int rlx_embed_check_model(const rlx_model_slot *m, const rlx_api_request *r, rlx_api_error *e)
{
    char routes[128];
    const char *name = m->cfg->name;
    int p = rlx_worker_pooling(m->w);
    bool embeds = p >= 0, wants = rlx_api_kind_embeds(r->kind);
    bool fits = wants == embeds;
    if (fits && r->kind == RLX_API_RERANK) fits = p == RLX_POOL_RANK;
    else if (fits && r->kind == RLX_API_EMBEDDINGS) fits = p != RLX_POOL_RANK && p != RLX_POOL_NONE;
    else if (fits && r->kind == RLX_API_EMBEDDING) fits = p != RLX_POOL_RANK;
    if (!fits) {
        const char *what = !embeds ? "generates text" : p == RLX_POOL_RANK ? "is a reranker (pooling 'rank')"
                         : p == RLX_POOL_NONE ? "is an embedding model with pooling 'none'" : "is an embedding model";
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "model", "The model '%s' %s: it serves %s, not this route.", name,
                              what, routes_of(m, routes, sizeof routes));
    }
    /* the model's own size asks for nothing (OpenAI takes it; libraries that always pass it got a 400) */
    if (wants && r->embed.dimensions && r->embed.dimensions != rlx_worker_n_embd(m->w))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "dimensions", "The model '%s' does not support 'dimensions' (it "
                              "declares no Matryoshka representation); its vectors have %d values.", name,
                              rlx_worker_n_embd(m->w));
    return 0;
}

/* An input's ids against the model: the vocabulary, emptiness, and its length against the most
 * one input may have (kept to that with truncate). */
static int check_input(rlx_job *j, size_t i, const int32_t *ids, size_t n, rlx_api_error *e)
{
    const rlx_worker *w = j->model->w;
    int32_t limit = rlx_worker_embd_limit(w);
    rlx_admit_limits lim = {.n_ctx = limit, .n_vocab = j->model->n_vocab};
    bool cut = j->req.base->truncate && n > (size_t)limit;
    rlx_admit_query q = {.ids = ids, .n_prompt = cut ? (size_t)limit : n, .bound = RLX_ADMIT_EXACT, .embed = true};
    rlx_admit a;
    if (!rlx_admit_check(&lim, &q, &a)) return 0;
    const char *param = rlx_embed_param(j);
    if (a.reason == RLX_ADMIT_PROMPT_LONG) {
        if (j->req.kind == RLX_API_RERANK)
            rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, param, "Document %zu of 'documents' with the query is %zu tokens "
                           "long but the model takes at most %d tokens per query and document; shorten them or send "
                           "\"truncate\": true.", i, a.n_prompt, limit);
        else
            rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, param, "Input %zu of '%s' is %s%zu tokens long but the model takes "
                           "at most %d tokens per input; shorten it or send \"truncate\": true.", i, param,
                           a.bound == RLX_ADMIT_MORE_THAN ? "more than " : "", a.n_prompt, limit);
        e->code = "context_length_exceeded";
        return RLX_ETOOLONG;
    }
    return rlx_api_error_from_admit(e, &a, param, "max_tokens");
}

/* Tokens of a text: all of them with truncate (the engine keeps the first; a text's closing
 * [SEP] or EOS stays its last, as Hugging Face tokenizers and sentence-transformers truncate),
 * else stopping once past the limit (refused then). */
static int tokenize(rlx_job *j, size_t i, const char *text, bool add_special, int32_t **ids, size_t *n, rlx_api_error *e)
{
    const rlx_tokenizer *tok = j->model->tok;
    int32_t limit = rlx_worker_embd_limit(j->model->w);
    rlx_error err = {0};
    int rc = j->req.base->truncate ? rlx_tokenize(tok, text, strlen(text), add_special, true, ids, n, &err)
                                   : rlx_tokenize_capped(tok, text, strlen(text), add_special, true, (size_t)limit, ids, n, &err);
    if (rc == RLX_ETOOLONG) {
        *ids = NULL;
        const char *param = rlx_embed_param(j);
        rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, param, "%s %zu of '%s' is more than %d tokens long but the model takes "
                       "at most %d tokens per input; shorten it or send \"truncate\": true.",
                       j->req.kind == RLX_API_RERANK ? "Document" : "Input", i, param, limit, limit);
        e->code = "context_length_exceeded";
        return RLX_ETOOLONG;
    }
    if (rc) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, rlx_embed_param(j), "Input %zu cannot be tokenized: %s", i, err.msg);
    const int32_t closing = !add_special ? -1 : rlx_tokenizer_add_sep(tok) ? rlx_tokenizer_sep(tok)
                          : rlx_tokenizer_add_eos(tok) ? rlx_tokenizer_eos(tok) : -1;
    if (j->req.base->truncate && *n > (size_t)limit && limit > 1 && closing >= 0 && (*ids)[*n - 1] == closing) {
        (*ids)[limit - 1] = closing;
        *n = (size_t)limit;
    }
    return 0;
}

/* The special tokens rerank_pair adds around a query and a document. */
static size_t rerank_specials(const rlx_tokenizer *tok)
{
    int32_t eos = rlx_tokenizer_eos(tok) >= 0 ? rlx_tokenizer_eos(tok) : rlx_tokenizer_sep(tok);
    return (rlx_tokenizer_add_bos(tok) ? 1 : 0) + (rlx_tokenizer_add_eos(tok) && eos >= 0 ? 2 : 0) +
           (rlx_tokenizer_add_sep(tok) ? 1 : 0);
}

/* llama-server's rerank input: [BOS] query [EOS] [SEP] document [EOS], each special token as
 * the vocabulary asks (EOS falls back to SEP), query and document tokenized without them. */
static int rerank_pair(const rlx_tokenizer *tok, const int32_t *q, size_t nq, const int32_t *d, size_t nd, int32_t **out,
                       size_t *n)
{
    int32_t eos = rlx_tokenizer_eos(tok) >= 0 ? rlx_tokenizer_eos(tok) : rlx_tokenizer_sep(tok);
    bool add_eos = rlx_tokenizer_add_eos(tok) && eos >= 0;
    int32_t *v = malloc((nq + nd + 4) * sizeof *v);
    if (!v) return RLX_ENOMEM;
    size_t k = 0;
    if (rlx_tokenizer_add_bos(tok)) v[k++] = rlx_tokenizer_bos(tok);
    memcpy(v + k, q, nq * sizeof *q);
    k += nq;
    if (add_eos) v[k++] = eos;
    if (rlx_tokenizer_add_sep(tok)) v[k++] = rlx_tokenizer_sep(tok);
    memcpy(v + k, d, nd * sizeof *d);
    k += nd;
    if (add_eos) v[k++] = eos;
    *out = v;
    *n = k;
    return 0;
}

int rlx_embed_prepare(rlx_job *j, rlx_api_error *e)
{
    rlx_api_request *r = &j->req;
    int rc = 0;
    int32_t *qids = NULL;
    size_t nq = 0;
    if (r->kind == RLX_API_RERANK) {
        rlx_error err = {0};
        if (rlx_tokenize(j->model->tok, r->embed.query, strlen(r->embed.query), false, true, &qids, &nq, &err))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "query", "'query' cannot be tokenized: %s", err.msg);
    }
    for (size_t i = 0; i < r->n_prompts && !rc; i++) {
        rlx_api_prompt *p = &r->prompts[i];
        if (r->kind == RLX_API_RERANK) {
            int32_t *d = NULL;
            size_t nd = 0;
            rlx_error err = {0};
            if (rlx_tokenize(j->model->tok, p->text, strlen(p->text), false, true, &d, &nd, &err)) {
                rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "documents", "Document %zu cannot be tokenized: %s", i, err.msg);
                break;
            }
            free(p->ids);
            p->ids = NULL;
            size_t limit = (size_t)rlx_worker_embd_limit(j->model->w), sp = rerank_specials(j->model->tok), qk = nq;
            if (r->base->truncate) {
                /* the pair cut longest first (a token off the longer of query and document until
                   it fits; the document on a tie), as Hugging Face's tokenizers truncate a pair */
                while (qk + nd + sp > limit && qk + nd > 0) {
                    if (qk > nd) qk--;
                    else nd--;
                }
            } else if (nq + sp >= limit) {
                free(d);
                rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "query", "'query' is %zu tokens long: with a document and "
                                    "the %zu special tokens it cannot fit the model's %zu tokens per query and document; "
                                    "shorten it or send \"truncate\": true.", nq, sp, limit);
                e->code = "context_length_exceeded";
                break;
            }
            if (rerank_pair(j->model->tok, qids, qk, d, nd, &p->ids, &p->n_ids))
                rc = rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
            free(d);
        } else if (p->text) {
            rc = tokenize(j, i, p->text, r->base->add_special, &p->ids, &p->n_ids, e);
        }
        if (!rc) rc = check_input(j, i, p->ids, p->n_ids, e);
    }
    free(qids);
    /* one vector per token (a model that pools none, or llama-server's per-token /embedding):
       the answer grows with tokens x dimension, so it is bounded (2,048 inputs of 256 tokens
       made a 675 MB answer of a 3 MB request; a few at once exhaust memory) */
    if (!rc && (r->base->embd_per_token || rlx_worker_pooling(j->model->w) == RLX_POOL_NONE)) {
        size_t limit = (size_t)rlx_worker_embd_limit(j->model->w), tokens = 0;
        for (size_t i = 0; i < r->n_prompts; i++) tokens += RLX_MIN(r->prompts[i].n_ids, limit);
        size_t values = tokens * (size_t)rlx_worker_n_embd(j->model->w);
        if (values > RLX_EMBED_MAX_TOKEN_VALUES)
            rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, rlx_embed_param(j),
                                "One vector per token for these inputs is %zu tokens x %d values = %zu values; a request "
                                "may ask for at most %d: send fewer or shorter inputs.", tokens,
                                rlx_worker_n_embd(j->model->w), values, RLX_EMBED_MAX_TOKEN_VALUES);
    }
    return rc;
}

rlx_request *rlx_embed_make_request(const rlx_job *j, uint64_t id)
{
    const rlx_api_request *r = &j->req;
    size_t total = 0;
    for (size_t i = 0; i < r->n_prompts; i++) total += r->prompts[i].n_ids;
    rlx_request *q = rlx_request_new();
    if (!q) return NULL;
    q->id = id;
    q->kind = RLX_REQ_EMBED;
    q->embd_normalize = r->base->embd_normalize;
    q->truncate = r->base->truncate;
    q->embd_per_token = r->base->embd_per_token;
    q->prompt_ids = malloc((total ? total : 1) * sizeof *q->prompt_ids);
    q->input_ends = malloc((r->n_prompts ? r->n_prompts : 1) * sizeof *q->input_ends);
    if (!q->prompt_ids || !q->input_ends || total > INT32_MAX) {
        rlx_request_free(q);
        return NULL;
    }
    size_t at = 0;
    for (size_t i = 0; i < r->n_prompts; i++) {
        memcpy(q->prompt_ids + at, r->prompts[i].ids, r->prompts[i].n_ids * sizeof *q->prompt_ids);
        at += r->prompts[i].n_ids;
        q->input_ends[i] = (int32_t)at;
    }
    q->n_prompt = total;
    q->n_inputs = r->n_prompts;
    return q;
}

void rlx_embed_result(const rlx_job *j, rlx_api_embd_result *res)
{
    *res = (rlx_api_embd_result){.v = j->embd, .n = j->embd_n, .dim = j->embd_dim, .tokens = j->embd_tokens,
                                 .n_inputs = j->embd_inputs,
                                 .per_token = j->req.base->embd_per_token || rlx_worker_pooling(j->model->w) == RLX_POOL_NONE};
}
