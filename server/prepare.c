/* prepare.c - what a generation request needs before it can be submitted, computed on the
 * libuv threadpool: the chat template rendered, text prompts tokenized, token prompts checked
 * against the vocabulary and the context, echoed prompts detokenized. The loop then submits
 * token ids only, so every check the engine makes at submit time (context, KV capacity,
 * queue) is answered before the first byte of a response goes out. */
#include "server/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INVALID "invalid_request_error"

const char *rlx_job_prompt_param(const rlx_job *j, size_t prompt)
{
    if (j->req.messages) return "messages";
    if (j->req.kind == RLX_API_GENERATE && j->req.prompts && !j->req.prompts[prompt].text) return "input_ids";
    return "prompt";
}

void rlx_job_context_param(const rlx_job *j, size_t prompt, size_t n_prompt, rlx_api_error *e)
{
    const char *p = (int64_t)n_prompt >= rlx_worker_n_ctx(j->model->w) ? rlx_job_prompt_param(j, prompt)
                                                                      : j->req.max_tokens_param;
    snprintf(e->param, sizeof e->param, "%s", p);
}

int rlx_job_context_error(const rlx_job *j, size_t prompt, size_t n_prompt, rlx_api_error *e)
{
    int32_t n_ctx = rlx_worker_n_ctx(j->model->w);
    int32_t max_tokens = j->req.base->max_tokens;
    const char *pp = rlx_job_prompt_param(j, prompt);
    if ((int64_t)n_prompt >= n_ctx)
        rlx_api_errorf(e, 400, INVALID, pp, "The prompt ('%s') is %zu tokens long but the model's context holds %d "
                       "tokens in all; shorten it.", pp, n_prompt, n_ctx);
    else
        rlx_api_errorf(e, 400, INVALID, j->req.max_tokens_param, "The prompt (%zu tokens) plus '%s' (%d) exceeds the "
                       "model's context of %d tokens; lower '%s' to at most %lld.", n_prompt, j->req.max_tokens_param,
                       max_tokens, n_ctx, j->req.max_tokens_param, (long long)n_ctx - (long long)n_prompt);
    e->code = "context_length_exceeded";
    return RLX_ETOOLONG;
}

int rlx_job_check_prompt_bytes(const rlx_job *j, size_t prompt, size_t len, rlx_api_error *e)
{
    size_t bpt = rlx_tokenizer_max_bytes_per_token(j->model->tok);
    int32_t n_ctx = rlx_worker_n_ctx(j->model->w);
    if (!bpt || n_ctx <= 0 || len / bpt < (size_t)n_ctx) return 0;
    const char *pp = rlx_job_prompt_param(j, prompt);
    rlx_api_errorf(e, 400, INVALID, pp, "The prompt ('%s') is %zu bytes long, so at least %zu tokens for this model, "
                   "but the model's context holds %d tokens in all; shorten it.", pp, len, len / bpt, n_ctx);
    e->code = "context_length_exceeded";
    return RLX_ETOOLONG;
}

/* Token ids of one prompt: tokenized text (stored beside it), or the ids given. Tokenizing stops
 * once the prompt alone passes the context, so a huge prompt costs about a context's worth of
 * work to refuse. */
static int prompt_ids(rlx_job *j, size_t i, const char *text, bool add_special, int32_t **ids, size_t *n,
                      rlx_api_error *e)
{
    const rlx_tokenizer *tok = j->model->tok;
    const char *param = rlx_job_prompt_param(j, i);
    size_t len = strlen(text);
    int rc = rlx_job_check_prompt_bytes(j, i, len, e);
    if (rc) return rc;
    int32_t n_ctx = rlx_worker_n_ctx(j->model->w);
    rlx_error err = {0};
    rc = rlx_tokenize_capped(tok, text, len, add_special, true, (size_t)RLX_MAX(n_ctx, 1), ids, n, &err);
    if (rc == RLX_ETOOLONG) {
        rlx_api_errorf(e, 400, INVALID, param, "The prompt ('%s') is more than %d tokens long but the model's context "
                       "holds %d tokens in all; shorten it.", param, n_ctx, n_ctx);
        e->code = "context_length_exceeded";
        return rc;
    }
    if (rc) return rlx_api_errorf(e, 400, INVALID, param, "The prompt cannot be tokenized: %s", err.msg);
    if (*n == 0) return rlx_api_errorf(e, 400, INVALID, param, "'%s' must not be empty.", param);
    return 0;
}

static int check_prompt(rlx_job *j, size_t i, const int32_t *ids, size_t n, rlx_api_error *e)
{
    int32_t n_vocab = j->model->n_vocab;
    for (size_t k = 0; k < n; k++)
        if (ids[k] < 0 || ids[k] >= n_vocab)
            return rlx_api_errorf(e, 400, INVALID, rlx_job_prompt_param(j, i),
                                  "Token id %d is outside the vocabulary (0..%d).", ids[k], n_vocab - 1);
    int32_t n_ctx = rlx_worker_n_ctx(j->model->w);
    if ((int64_t)n + RLX_MAX(j->req.base->max_tokens, 1) > n_ctx) return rlx_job_context_error(j, i, n, e);
    return 0;
}

int rlx_job_prepare(rlx_job *j, rlx_api_error *e)
{
    rlx_api_request *r = &j->req;
    rlx_model_slot *m = j->model;
    int rc;
    if (r->messages) {
        char *prompt = NULL;
        if ((rc = rlx_render_chat(m, r, &prompt, e))) return rc;
        /* the template already wrote BOS as text when it starts with it */
        bool add_special = !(m->bos[0] && !strncmp(prompt, m->bos, strlen(m->bos)));
        rc = prompt_ids(j, 0, prompt, add_special, &j->chat_ids, &j->n_chat_ids, e);
        free(prompt);
        return rc ? rc : check_prompt(j, 0, j->chat_ids, j->n_chat_ids, e);
    }
    if (r->echo && !(j->echo = calloc(r->n_prompts, sizeof *j->echo)))
        return rlx_api_errorf(e, 500, "server_error", NULL, "Out of memory.");
    for (size_t i = 0; i < r->n_prompts; i++) {
        rlx_api_prompt *p = &r->prompts[i];
        if (p->text && (rc = prompt_ids(j, i, p->text, r->base->add_special, &p->ids, &p->n_ids, e))) return rc;
        if ((rc = check_prompt(j, i, p->ids, p->n_ids, e))) return rc;
        if (r->echo) {
            char *raw = p->text ? NULL : rlx_detokenize(m->tok, p->ids, p->n_ids, false);
            const char *src = p->text ? p->text : raw;
            j->echo[i] = src ? rlx_api_utf8_sanitize(src, strlen(src), NULL) : NULL;
            free(raw);
            if (!j->echo[i]) return rlx_api_errorf(e, 500, "server_error", NULL, "Out of memory.");
        }
    }
    return 0;
}
