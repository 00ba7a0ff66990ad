/* fuzz_proto.c - libFuzzer target for the request parsers (proto/parse.c): the first byte picks
 * the entry point (completions, chat, generate, tokenize, detokenize), the rest is the body. A
 * parsed request is then used as the server uses it: its chat template context built, its
 * engine request made, and everything freed. A parse must either succeed or fill an OpenAI error
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
    int which = data[0] % 5;
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
            cJSON *ctx = rlx_api_chat_context(&r, "<s>", "</s>");
            cJSON_Delete(ctx);
            int32_t ids[3] = {1, 2, 3};
            rlx_request *q = rlx_api_make_request(&r, r.n_prompts && r.prompts[0].ids ? r.prompts[0].ids : ids,
                                                  r.n_prompts && r.prompts[0].ids ? r.prompts[0].n_ids : 3, 1);
            rlx_request_free(q);
        }
        rlx_api_request_free(&r);
    } else if (which == 3) {
        char *text = NULL, *model = NULL;
        bool add = false, parse = false;
        if (rlx_api_parse_tokenize(body, len, &text, &add, &parse, &model, &e)) check_error(&e);
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
