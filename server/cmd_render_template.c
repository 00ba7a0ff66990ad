/* cmd_render_template.c - `rlxd render-template`: renders a chat template (a Jinja file, or
 * the tokenizer.chat_template of a GGUF model) with a JSON context and prints the result
 * exactly, without adding a newline. With -m, bos_token and eos_token come from the model's
 * vocabulary unless the context sets them. */
#include "server/cli.h"
#include "models/chat_template.h"
#include "models/gguf.h"
#include "models/safetensors.h"
#include "models/json.h"

#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rlxd render-template (--template FILE.jinja | -m MODEL.gguf) --context CONTEXT.json [--now ISO8601]\n"
            "  --template, -t FILE   Jinja chat template source\n"
            "  --model, -m FILE      GGUF model: use its tokenizer.chat_template (ChatML if it has none)\n"
            "  --context, -c FILE    JSON object: messages, tools, add_generation_prompt, ... ('-' reads stdin)\n"
            "  --now ISO8601         fixed time for strftime_now, e.g. 2026-01-01T00:00:00\n");
}

static char *read_stdin(size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        size_t got = fread(b + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) break;
        if (n == cap) {
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb) { free(b); return NULL; }
            b = nb;
            cap *= 2;
        }
    }
    if (b) b[n] = 0;
    *len = n;
    return b;
}

/* Copies token `key` (an id) of the vocabulary into the context as `name` unless present. */
static void fill_token(const rlx_gguf *g, cJSON *ctx, const char *key, const char *name)
{
    if (cJSON_GetObjectItem(ctx, name)) return;
    uint32_t id;
    const rlx_gguf_array *toks;
    if (rlx_gguf_get_u32(g, key, &id, NULL) != 0) return;
    if (rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", &toks, NULL) != 0) return;
    if (toks->type != RLX_GGUF_STRING || id >= toks->n) return;
    char *s = malloc(toks->strs[id].len + 1);
    if (!s) return;
    memcpy(s, toks->strs[id].ptr, toks->strs[id].len);
    s[toks->strs[id].len] = 0;
    cJSON_AddStringToObject(ctx, name, s);
    free(s);
}

int rlx_cmd_render_template(int argc, char **argv)
{
    const char *tmpl_path = NULL, *model_path = NULL, *ctx_path = NULL, *now = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = NULL;
        if (!strcmp(a, "--template") || !strcmp(a, "-t")) dst = &tmpl_path;
        else if (!strcmp(a, "--model") || !strcmp(a, "-m")) dst = &model_path;
        else if (!strcmp(a, "--context") || !strcmp(a, "-c")) dst = &ctx_path;
        else if (!strcmp(a, "--now")) dst = &now;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else {
            fprintf(stderr, "rlxd render-template: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "rlxd render-template: %s needs a value\n", a);
            return 2;
        }
        *dst = argv[++i];
    }
    if ((!tmpl_path) == (!model_path) || !ctx_path) {
        fprintf(stderr, "rlxd render-template: give exactly one of --template or -m, and --context\n");
        usage(stderr);
        return 2;
    }

    size_t ctx_len = 0;
    char *ctx_text = !strcmp(ctx_path, "-") ? read_stdin(&ctx_len) : rlx_read_file(ctx_path, &ctx_len);
    if (!ctx_text) {
        fprintf(stderr, "rlxd render-template: cannot read the context %s: %s\n", ctx_path, strerror(errno));
        return 1;
    }
    /* read as Python's json reads it: 1.0 stays a float, big ints stay exact, NULs survive */
    cJSON *ctx = NULL;
    rlx_error jerr = {0};
    int jrc = rlx_json_parse(ctx_text, ctx_len, &ctx, &jerr);
    free(ctx_text);
    if (jrc || !cJSON_IsObject(ctx)) {
        if (jrc) fprintf(stderr, "rlxd render-template: %s: %s\n", ctx_path, jerr.msg);
        else fprintf(stderr, "rlxd render-template: %s is not a JSON object\n", ctx_path);
        cJSON_Delete(ctx);
        return 1;
    }

    char *src = NULL;
    size_t src_len = 0;
    rlx_error err = {0};
    if (tmpl_path) {
        src = rlx_read_file(tmpl_path, &src_len);
        if (!src) {
            fprintf(stderr, "rlxd render-template: cannot read the template %s: %s\n", tmpl_path, strerror(errno));
            cJSON_Delete(ctx);
            return 1;
        }
    } else {
        rlx_gguf *g = NULL;
        if (!rlx__cli_model_path_ok("render-template", model_path)) {
            cJSON_Delete(ctx);
            return 1;
        }
        if ((rlx_st_is_folder(model_path) ? rlx_st_open(&g, model_path, &err) : rlx_gguf_open(&g, model_path, &err)) != 0) {
            fprintf(stderr, "rlxd render-template: %s\n", err.msg);
            cJSON_Delete(ctx);
            return 1;
        }
        rlx_gguf_str s;
        if (rlx_gguf_get_str(g, "tokenizer.chat_template", &s, NULL) == 0) {
            src_len = (size_t)s.len;
            src = malloc(src_len + 1);
            if (src) { memcpy(src, s.ptr, src_len); src[src_len] = 0; }
        } else {
            fprintf(stderr, "rlxd render-template: %s has no tokenizer.chat_template; using ChatML\n", model_path);
            src = strdup(rlx_chatml_template);
            src_len = src ? strlen(src) : 0;
        }
        fill_token(g, ctx, "tokenizer.ggml.bos_token_id", "bos_token");
        fill_token(g, ctx, "tokenizer.ggml.eos_token_id", "eos_token");
        rlx_gguf_close(g);
        if (!src) {
            fprintf(stderr, "rlxd render-template: out of memory\n");
            cJSON_Delete(ctx);
            return 1;
        }
    }

    rlx_chat_template *t = NULL;
    char *out = NULL;
    int rc = rlx_chat_template_parse(&t, src, src_len, &err);
    size_t out_len = 0;
    if (rc == 0) rc = rlx_chat_template_render_len(t, ctx, now, &out, &out_len, &err);
    if (rc == 0) {
        fwrite(out, 1, out_len, stdout);
        fflush(stdout);
    } else {
        fprintf(stderr, "rlxd render-template: %s\n", err.msg);
    }
    free(out);
    rlx_chat_template_free(t);
    free(src);
    cJSON_Delete(ctx);
    return rc == 0 ? 0 : 1;
}
