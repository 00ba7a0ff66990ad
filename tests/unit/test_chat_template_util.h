/* test_chat_template_util.h - helpers of the chat template tests: a file's bytes, and a
 * template source rendered with a JSON context. */
#ifndef TEST_CHAT_TEMPLATE_UTIL_H
#define TEST_CHAT_TEMPLATE_UTIL_H

#include "models/chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

/* src rendered with the context ctx_json (NULL: none) at `now`; *rc the result code */
static inline char *render_src(const char *src, const char *ctx_json, const char *now, int *rc, rlx_error *err)
{
    rlx_chat_template *t = NULL;
    char *out = NULL;
    cJSON *ctx = ctx_json ? cJSON_Parse(ctx_json) : NULL;
    *rc = rlx_chat_template_parse(&t, src, strlen(src), err);
    if (*rc == 0) *rc = rlx_chat_template_render(t, ctx, now, &out, err);
    rlx_chat_template_free(t);
    cJSON_Delete(ctx);
    return out;
}

#endif
