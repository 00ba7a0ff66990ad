/* prepare.c - what a generation request needs before it can be submitted, computed on the
 * libuv threadpool: the chat template rendered, text prompts tokenized, token prompts checked
 * against the vocabulary and the context (the engine's admission rule, rlx_job_admit), echoed
 * prompts detokenized. The loop then submits
 * token ids only, so every check the engine makes at submit time (context, KV capacity,
 * queue) is answered before the first byte of a response goes out. */
#include "server/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rlx_job_prompt_param(const rlx_job *j, size_t prompt)
{
    if (rlx_api_kind_embeds(j->req.kind)) return rlx_embed_param(j);
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

/* The admission rule (engine.h) for one prompt of the job, against the model's context and
 * vocabulary (the KV pool and a session's history are the engine's, at submit); a refusal becomes
 * the API's 400 naming the prompt's parameter or max_tokens. */
int rlx_job_admit(const rlx_job *j, size_t prompt, const rlx_admit_query *q, rlx_api_error *e)
{
    rlx_admit_limits lim = {.n_ctx = rlx_worker_n_ctx(j->model->w), .n_vocab = j->model->n_vocab};
    rlx_admit a;
    if (!rlx_admit_check(&lim, q, &a)) return 0;
    return rlx_api_error_from_admit(e, &a, rlx_job_prompt_param(j, prompt), j->req.max_tokens_param);
}

int rlx_job_check_prompt_bytes(const rlx_job *j, size_t prompt, size_t len, rlx_api_error *e)
{
    size_t bpt = rlx_tokenizer_max_bytes_per_token(j->model->tok);
    if (!bpt) return 0;
    /* the prompt alone (max_tokens was checked before): an estimate says nothing about the rest */
    rlx_admit_query q = {.n_prompt = len / bpt, .bound = RLX_ADMIT_AT_LEAST, .prompt_bytes = len,
                         .scored = j->req.base->no_generation};
    return rlx_job_admit(j, prompt, &q, e);
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
    if (rc == RLX_ETOOLONG) { /* more than the cap: the prompt alone is too long */
        rlx_admit_query q = {.n_prompt = (size_t)RLX_MAX(n_ctx, 1), .bound = RLX_ADMIT_MORE_THAN};
        return rlx_job_admit(j, i, &q, e);
    }
    if (rc) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, param, "The prompt cannot be tokenized: %s", err.msg);
    return 0;
}

static int check_prompt(rlx_job *j, size_t i, const int32_t *ids, size_t n, rlx_api_error *e)
{
    rlx_admit_query q = {.ids = ids, .n_prompt = n, .bound = RLX_ADMIT_EXACT, .max_tokens = j->req.base->max_tokens,
                         .scored = j->req.base->no_generation};
    return rlx_job_admit(j, i, &q, e);
}

int rlx_job_prepare(rlx_job *j, rlx_api_error *e)
{
    rlx_api_request *r = &j->req;
    rlx_model_slot *m = j->model;
    int rc;
    if (rlx_api_kind_embeds(r->kind)) return rlx_embed_prepare(j, e);
    if (r->messages) {
        char *prompt = NULL;
        if ((rc = rlx_render_chat(m, r, &prompt, e))) return rc;
        /* the template already wrote BOS as text when it starts with it */
        bool add_special = !(m->bos[0] && !strncmp(prompt, m->bos, strlen(m->bos)));
        rc = prompt_ids(j, 0, prompt, add_special, &j->chat_ids, &j->n_chat_ids, e);
        if (r->continue_final_message && m->tc.thinks && m->tc.reasoning_open) {
            /* the final message's reasoning block left open ("<think>\nI think"): the output
               continues the reasoning (only a prompt ending with the tag was read so) */
            const cJSON *last = NULL, *msg;
            cJSON_ArrayForEach(msg, r->messages) last = msg;
            const cJSON *c = last ? cJSON_GetObjectItemCaseSensitive(last, "content") : NULL;
            const char *t = cJSON_IsString(c) ? c->valuestring : "", *o = NULL, *cl = NULL;
            for (const char *x = t; (x = strstr(x, m->tc.reasoning_open)); x++) o = x;
            for (const char *x = t; (x = strstr(x, m->tc.reasoning_close)); x++) cl = x;
            j->continues_reasoning = o && (!cl || cl < o);
        }
        if (!rc && (r->tool_choice != RLX_TOOL_CHOICE_NONE || m->tc.thinks)) {
            /* the prompt's end: whether it opens the reasoning (the parser of tool calls, or of the
               reasoning alone) */
            size_t len = strlen(prompt);
            j->prompt_hash = rlx_tc_prompt_hash(prompt); /* seeded call ids: the whole history counts */
            if (!(j->prompt_tail = strdup(prompt + (len > 256 ? len - 256 : 0))))
                rc = rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
        }
        if (!rc && r->tool_choice != RLX_TOOL_CHOICE_NONE) {
            char *g = NULL; /* "required" or a named tool: a grammar forces the call */
            if (!rc && !(rc = rlx_api_tool_grammar(r, &m->tc, prompt, &g, e)) && g) {
                free(r->base->grammar);
                r->base->grammar = g;
            }
            /* "auto": a lazy grammar, from the call's opening marker on (or, for formats whose call
             * is the output's JSON, once an anchored pattern over the output matches) */
            const char *trigger = NULL;
            char *pattern = NULL;
            if (!rc && !g && !(rc = rlx_api_tool_grammar_auto(r, &m->tc, prompt, &g, &trigger, &pattern, e)) && g) {
                char **t = trigger ? calloc(1, sizeof *t) : NULL;
                if (trigger && (!t || !(t[0] = strdup(trigger)))) {
                    free(t);
                    free(g);
                    free(pattern);
                    rc = rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
                } else {
                    r->base->grammar = g;
                    r->base->grammar_triggers = t;
                    r->base->n_grammar_triggers = t ? 1 : 0;
                    r->base->grammar_trigger_pattern = pattern;
                }
            }
        }
        free(prompt);
        return rc ? rc : check_prompt(j, 0, j->chat_ids, j->n_chat_ids, e);
    }
    if (r->echo && !(j->echo = calloc(r->n_prompts, sizeof *j->echo)))
        return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
    for (size_t i = 0; i < r->n_prompts; i++) {
        rlx_api_prompt *p = &r->prompts[i];
        if (p->text && (rc = prompt_ids(j, i, p->text, r->base->add_special, &p->ids, &p->n_ids, e))) return rc;
        if ((rc = check_prompt(j, i, p->ids, p->n_ids, e))) return rc;
        if (r->echo) {
            char *raw = p->text ? NULL : rlx_detokenize(m->tok, p->ids, p->n_ids, false);
            const char *src = p->text ? p->text : raw;
            j->echo[i] = src ? rlx_api_utf8_sanitize(src, strlen(src), NULL) : NULL;
            free(raw);
            if (!j->echo[i]) return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
        }
    }
    return 0;
}
