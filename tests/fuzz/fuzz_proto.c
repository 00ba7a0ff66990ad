/* fuzz_proto.c - libFuzzer target for the request parsers (proto/parse.c, proto/embed.c): the
 * first byte picks the entry point (completions, chat, generate, tokenize, detokenize,
 * embeddings, native embedding, rerank), the rest is the body. A parsed request is then used as
 * the server uses it: its chat template context built, its engine request made (embedding kinds:
 * a result of the right shape formatted as the response and the stdio line), and everything
 * freed. A parse must either succeed or fill an OpenAI error
 * with a 4xx/5xx status and a message. */
#include "proto/proto.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_error(const rlx_api_error *e)
{
    if (e->status < 400 || e->status > 599 || !e->type || !e->message[0]) {
        fprintf(stderr, "bad error: status %d type %s message '%s'\n", e->status, e->type ? e->type : "(null)",
                e->message);
        abort();
    }
    char *j = rlx_api_error_json(e);
    free(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int which = data[0] % 8;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    rlx_api_error e;
    memset(&e, 0, sizeof e);
    if (which < 3) {
        rlx_api_request r;
        memset(&r, 0, sizeof r);
        int rc = rlx_api_parse(&r, (rlx_api_kind)which, body, len, 512, &e);
        if (rc) {
            check_error(&e);
        } else {
            cJSON *ctx = rlx_api_chat_context(&r, "<s>", "</s>", true);
            cJSON_Delete(ctx);
            int32_t ids[3] = {1, 2, 3};
            rlx_request *q = rlx_api_make_request(&r, r.n_prompts && r.prompts[0].ids ? r.prompts[0].ids : ids,
                                                  r.n_prompts && r.prompts[0].ids ? r.prompts[0].n_ids : 3, 1);
            rlx_request_free(q);
        }
        rlx_api_request_free(&r);
    } else if (which >= 5) { /* the embedding kinds */
        rlx_api_request r;
        memset(&r, 0, sizeof r);
        int rc = rlx_api_parse(&r, (rlx_api_kind)(RLX_API_EMBEDDINGS + which - 5), body, len, 512, &e);
        if (rc) {
            check_error(&e);
        } else {
            /* two values per input (per token for the native kind: each input's length) */
            bool per_token = r.kind == RLX_API_EMBEDDING;
            size_t n = 0;
            int32_t *toks = calloc(r.n_prompts ? r.n_prompts : 1, sizeof *toks);
            for (size_t i = 0; toks && i < r.n_prompts; i++) {
                toks[i] = per_token ? (int32_t)(r.prompts[i].ids ? r.prompts[i].n_ids % 8 + 1 : 3) : 1;
                n += (size_t)toks[i] * 2;
            }
            float *v = calloc(n ? n : 1, sizeof *v);
            for (size_t i = 0; v && i < n; i++) v[i] = (float)i * 0.37f - 1.0f;
            rlx_api_embd_result res = {.v = v, .n = n, .dim = 2, .tokens = toks, .n_inputs = r.n_prompts,
                                       .per_token = per_token};
            rlx_usage u = {.prompt_tokens = 5};
            if (toks && v) {
                free(rlx_api_embed_response(&r, "m", &res, &u));
                free(rlx_api_line_embed("1", &r, "m", &res, &u, 1.0));
            }
            free(toks);
            free(v);
        }
        rlx_api_request_free(&r);
    } else if (which == 3) {
        char *text = NULL, *model = NULL;
        bool add = false, parse = false, pieces = false;
        if (rlx_api_parse_tokenize(body, len, &text, &add, &parse, &pieces, &model, &e)) check_error(&e);
        free(text);
        free(model);
    } else {
        int32_t *ids = NULL;
        size_t n = 0;
        char *model = NULL;
        if (rlx_api_parse_detokenize(body, len, 512, &ids, &n, &model, &e)) check_error(&e);
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= 512) abort();
        free(ids);
        free(model);
    }
    return 0;
}
