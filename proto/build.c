/* build.c - from a parsed API request to engine requests and template contexts; the small
 * bodies of /tokenize and /detokenize. */
#include "proto/proto.h"
#include "models/chat_template.h"
#include "models/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

rlx_request *rlx_api_make_request(const rlx_api_request *r, const int32_t *ids, size_t n_ids, uint64_t id)
{
    const rlx_request *b = r->base;
    rlx_request *q = rlx_request_new();
    if (!q) return NULL;
    q->id = id;
    q->add_special = b->add_special;
    q->sampling = b->sampling;
    q->sampling.logit_bias = NULL;
    q->sampling.n_logit_bias = 0;
    q->max_tokens = b->max_tokens;
    q->no_generation = b->no_generation;
    q->json_keys_unique = b->json_keys_unique;
    q->ignore_eos = b->ignore_eos;
    q->draft_max = b->draft_max;
    q->draft_p_min = b->draft_p_min;
    q->top_logprobs = b->top_logprobs;
    if (b->sampling.n_logit_bias) {
        rlx_logit_bias *lb = malloc(b->sampling.n_logit_bias * sizeof *lb);
        if (!lb) goto fail;
        memcpy(lb, b->sampling.logit_bias, b->sampling.n_logit_bias * sizeof *lb);
        q->sampling.logit_bias = lb;
        q->sampling.n_logit_bias = b->sampling.n_logit_bias;
    }
    if (b->n_stop) {
        if (!(q->stop = calloc(b->n_stop, sizeof *q->stop))) goto fail;
        for (size_t i = 0; i < b->n_stop; i++) {
            if (!(q->stop[i] = strdup(b->stop[i]))) goto fail;
            q->n_stop = i + 1;
        }
    }
    if (b->session_id && !(q->session_id = strdup(b->session_id))) goto fail;
    if (b->grammar && !(q->grammar = strdup(b->grammar))) goto fail;
    if (b->n_grammar_triggers) {
        if (!(q->grammar_triggers = calloc(b->n_grammar_triggers, sizeof *q->grammar_triggers))) goto fail;
        for (size_t i = 0; i < b->n_grammar_triggers; i++) {
            if (!(q->grammar_triggers[i] = strdup(b->grammar_triggers[i]))) goto fail;
            q->n_grammar_triggers = i + 1;
        }
    }
    if (b->grammar_trigger_pattern && !(q->grammar_trigger_pattern = strdup(b->grammar_trigger_pattern))) goto fail;
    q->session_replace = b->session_replace;
    if (!(q->prompt_ids = malloc((n_ids ? n_ids : 1) * sizeof *ids))) goto fail;
    if (n_ids) memcpy(q->prompt_ids, ids, n_ids * sizeof *ids);
    q->n_prompt = n_ids;
    return q;
fail:
    rlx_request_free(q);
    return NULL;
}

/* Every assistant tool call's function.arguments that is a JSON string holding an object becomes
 * that object (a string that is not one, or holds a NUL, stays as sent). -1 out of memory. */
static int object_arguments(cJSON *messages)
{
    cJSON *msg;
    cJSON_ArrayForEach(msg, messages) {
        cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"), *call;
        if (!cJSON_IsArray(calls)) continue;
        cJSON_ArrayForEach(call, calls) {
            cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
            cJSON *args = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
            if (!cJSON_IsString(args) || args->valueint == RLX_JSON_STR_NUL) continue;
            cJSON *obj = NULL;
            rlx_error jerr = {0};
            int rc = rlx_json_parse(args->valuestring, strlen(args->valuestring), &obj, &jerr);
            if (rc == RLX_ENOMEM) return -1;
            if (rc == 0 && cJSON_IsObject(obj)) {
                if (!cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj)) {
                    cJSON_Delete(obj);
                    return -1;
                }
            } else {
                cJSON_Delete(obj);
            }
        }
    }
    return 0;
}

cJSON *rlx_api_chat_context(const rlx_api_request *r, const char *bos, const char *eos, bool object_args)
{
    cJSON *ctx = cJSON_CreateObject();
    if (!ctx) return NULL;
    /* cJSON_AddItemToObject fails (copying the key) without taking the item: free it then */
    cJSON *m = r->messages ? cJSON_Duplicate(r->messages, true) : cJSON_CreateArray();
    if (!m) goto fail;
    if (!cJSON_AddItemToObject(ctx, "messages", m)) {
        cJSON_Delete(m);
        goto fail;
    }
    if (object_args && object_arguments(m)) goto fail;
    if (r->tools) {
        cJSON *t = cJSON_Duplicate(r->tools, true);
        if (!t) goto fail;
        if (!cJSON_AddItemToObject(ctx, "tools", t)) {
            cJSON_Delete(t);
            goto fail;
        }
    }
    if (!cJSON_AddBoolToObject(ctx, "add_generation_prompt", r->add_generation_prompt)) goto fail;
    if (!cJSON_AddStringToObject(ctx, "bos_token", bos ? bos : "")) goto fail;
    if (!cJSON_AddStringToObject(ctx, "eos_token", eos ? eos : "")) goto fail;
    /* chat_template_kwargs go over everything above, as in vLLM (parse refused 'messages') */
    const cJSON *kv;
    cJSON_ArrayForEach(kv, r->template_kwargs) {
        cJSON *v = cJSON_Duplicate(kv, true);
        if (!v) goto fail;
        if (cJSON_GetObjectItemCaseSensitive(ctx, kv->string)) {
            if (!cJSON_ReplaceItemInObjectCaseSensitive(ctx, kv->string, v)) { cJSON_Delete(v); goto fail; }
        } else if (!cJSON_AddItemToObject(ctx, kv->string, v)) {
            cJSON_Delete(v);
            goto fail;
        }
    }
    return ctx;
fail:
    cJSON_Delete(ctx);
    return NULL;
}

static bool names_role(const char *src, size_t len, const char *role)
{
    char q[2][40];
    snprintf(q[0], sizeof q[0], "'%s'", role);
    snprintf(q[1], sizeof q[1], "\"%s\"", role);
    return src && (memmem(src, len, q[0], strlen(q[0])) || memmem(src, len, q[1], strlen(q[1])));
}

int rlx_api_chat_roles(cJSON *ctx, const char *tmpl_src, size_t tmpl_len)
{
    if (names_role(tmpl_src, tmpl_len, "developer")) return 0;
    cJSON *msg;
    cJSON_ArrayForEach(msg, cJSON_GetObjectItemCaseSensitive(ctx, "messages")) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        if (!cJSON_IsString(role) || strcmp(role->valuestring, "developer")) continue;
        cJSON *sys = cJSON_CreateString("system");
        if (!sys || !cJSON_ReplaceItemInObjectCaseSensitive(msg, "role", sys)) {
            cJSON_Delete(sys);
            return -1;
        }
    }
    return 0;
}

/* name = v unless the context has it (chat_template_kwargs win); takes v. -1 out of memory. */
static int add_default(cJSON *ctx, const char *name, cJSON *v)
{
    if (!v) return -1;
    if (cJSON_GetObjectItemCaseSensitive(ctx, name)) {
        cJSON_Delete(v);
        return 0;
    }
    if (!cJSON_AddItemToObject(ctx, name, v)) {
        cJSON_Delete(v);
        return -1;
    }
    return 0;
}

int rlx_api_chat_format_vars(cJSON *ctx, const rlx_api_request *r, rlx_tc_format format, time_t now)
{
    if (format != RLX_TC_FIREFUNCTION) return 0;
    char *functions = NULL;
    if (cJSON_GetArraySize(r->tools) > 0) {
        rlx_error err = {0};
        if (rlx_chat_template_tojson(r->tools, 2, &functions, &err)) return -1;
    }
    int rc = add_default(ctx, "functions", cJSON_CreateString(functions ? functions : ""));
    free(functions);
    struct tm tm;
    char date[64];
    if (!rc && gmtime_r(&now, &tm) && strftime(date, sizeof date, "%b %d %Y %H:%M:%S GMT", &tm))
        rc = add_default(ctx, "datetime", cJSON_CreateString(date));
    return rc;
}

/* The bytes of the character at s[0, n) if it is whitespace as Python's str.strip() strips it
 * (str.isspace: ASCII blanks and \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028,
 * U+2029, U+202F, U+205F, U+3000), else 0. */
static size_t py_space_at(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    if (!n) return 0;
    if (u[0] < 0x80) return u[0] == ' ' || (u[0] >= '\t' && u[0] <= '\r') || (u[0] >= 0x1c && u[0] <= 0x1f);
    if (n >= 2 && u[0] == 0xc2 && (u[1] == 0x85 || u[1] == 0xa0)) return 2;
    if (n < 3) return 0;
    const unsigned cp = ((u[0] & 0x0fu) << 12) | ((u[1] & 0x3fu) << 6) | (u[2] & 0x3fu);
    if ((u[0] & 0xf0) != 0xe0) return 0;
    return cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
                   cp == 0x205f || cp == 0x3000 ? 3 : 0;
}

/* The whitespace character that ends s[0, n), its bytes, else 0. */
static size_t py_space_before(const char *s, size_t n)
{
    size_t k = 1;
    while (k < n && k < 3 && ((unsigned char)s[n - k] & 0xc0) == 0x80) k++; /* back to the lead byte */
    size_t w = py_space_at(s + n - k, k);
    return w == k ? k : (k > 1 && py_space_at(s + n - 1, 1) ? 1 : 0);
}

int rlx_api_continue_final(const rlx_api_request *r, char *rendered, rlx_api_error *e)
{
    if (!r->continue_final_message) return 0;
    const cJSON *last = NULL, *m;
    cJSON_ArrayForEach(m, r->messages) last = m;
    const cJSON *c = last ? cJSON_GetObjectItemCaseSensitive(last, "content") : NULL;
    if (!cJSON_IsString(c))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "continue_final_message",
                              "'continue_final_message' needs a final message with text content.");
    /* transformers: find the stripped message last in the rendering and cut after it, keeping
     * its leading-stripped length when the template kept the message's trailing space */
    const char *msg = c->valuestring;
    size_t n = strlen(msg), lo = 0, hi = n;
    for (size_t w; lo < n && (w = py_space_at(msg + lo, n - lo));) lo += w;
    for (size_t w; hi > lo && (w = py_space_before(msg + lo, hi - lo));) hi -= w;
    const char *core = msg + lo, *at = NULL;
    size_t core_n = hi - lo, len = strlen(rendered);
    /* its last occurrence: the first in the reversed texts (linear; a comparison at every
       position from the end was len x core_n) */
    if (core_n <= len) {
        char *rr = malloc(len + 1), *rc = malloc(core_n + 1);
        if (!rr || !rc) {
            free(rr);
            free(rc);
            return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
        }
        for (size_t i = 0; i < len; i++) rr[i] = rendered[len - 1 - i];
        for (size_t i = 0; i < core_n; i++) rc[i] = core[core_n - 1 - i];
        const char *hit = core_n ? memmem(rr, len, rc, core_n) : rr;
        if (hit) at = rendered + (len - (size_t)(hit - rr) - core_n);
        free(rr);
        free(rc);
    }
    if (!at)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "continue_final_message",
                              "'continue_final_message' is set but the final message does not appear in the "
                              "rendered chat template (the template changes it).");
    size_t keep = (size_t)(at - rendered), lstripped = n - lo;
    if (len - keep >= lstripped && !memcmp(at, msg + lo, lstripped) && lstripped == n) keep += lstripped;
    else keep += core_n;
    rendered[keep] = 0;
    return 0;
}

static cJSON *parse_object(const char *body, size_t len, rlx_api_error *e)
{
    /* read as the generation routes read bodies (a lone surrogate escape becomes bytes the UTF-8
       check below refuses naming the field; cJSON alone called the whole body not JSON) */
    cJSON *root = NULL;
    rlx_error jerr = {0};
    if (rlx_json_parse(body, len, &root, &jerr)) {
        rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, NULL, "The request body is not valid JSON (%s).", jerr.msg);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, NULL, "The request body must be a JSON object.");
        return NULL;
    }
    /* cJSON-based readers would cut such a string at the NUL: refused, as the generation routes do */
    if (rlx_api_check_nul(root, body, len, e) || rlx_api_check_utf8(root, e)) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static int opt_model(const cJSON *root, char **model, rlx_api_error *e)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    *model = NULL;
    if (!m || cJSON_IsNull(m)) return 0;
    if (!cJSON_IsString(m)) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "model", "'model' must be a string.");
    *model = dup_or_null(m->valuestring);
    return 0;
}

static int opt_bool(const cJSON *root, const char *name, bool *out, rlx_api_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must be a boolean.", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

int rlx_api_parse_tokenize(const char *body, size_t len, char **text, bool *add_special,
                           bool *parse_special, bool *with_pieces, char **model, rlx_api_error *e)
{
    *text = NULL;
    *model = NULL;
    cJSON *root = parse_object(body, len, e);
    if (!root) return RLX_EINVAL;
    int rc = 0;
    const char *name = "content";
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "content");
    if (!c || cJSON_IsNull(c)) { c = cJSON_GetObjectItemCaseSensitive(root, "prompt"); name = "prompt"; }
    if (!c || cJSON_IsNull(c)) {
        rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "content", "'content' (or 'prompt') is required.");
    } else if (!cJSON_IsString(c)) {
        rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must be a string.", name);
    } else if ((rc = opt_bool(root, "add_special", add_special, e)) == 0
               && (rc = opt_bool(root, "parse_special", parse_special, e)) == 0
               && (rc = opt_bool(root, "with_pieces", with_pieces, e)) == 0
               && (rc = opt_model(root, model, e)) == 0) {
        *text = strdup(c->valuestring);
        if (!*text) rc = rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
    }
    cJSON_Delete(root);
    return rc;
}

int rlx_api_parse_detokenize(const char *body, size_t len, int32_t n_vocab, int32_t **ids,
                             size_t *n, char **model, rlx_api_error *e)
{
    *ids = NULL;
    *n = 0;
    *model = NULL;
    cJSON *root = parse_object(body, len, e);
    if (!root) return RLX_EINVAL;
    int rc = opt_model(root, model, e);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (rc) goto out;
    if (!cJSON_IsArray(t)) {
        rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tokens", "'tokens' must be an array of token ids.");
        goto out;
    }
    size_t cnt = (size_t)cJSON_GetArraySize(t), i = 0;
    *ids = malloc((cnt ? cnt : 1) * sizeof **ids);
    if (!*ids) { rc = rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory."); goto out; }
    const cJSON *it;
    cJSON_ArrayForEach(it, t) {
        /* range-checked before the cast: 1e10 or inf as an int32_t is undefined behaviour */
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
        int32_t hi = n_vocab > 0 ? n_vocab - 1 : INT32_MAX;
        if (!isfinite(v) || v < 0 || v > hi || v != floor(v)) {
            rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tokens", "'tokens' must hold integer token ids between 0 and %d.", hi);
            free(*ids);
            *ids = NULL;
            goto out;
        }
        (*ids)[i++] = (int32_t)v;
    }
    *n = i;
out:
    if (rc) { free(*model); *model = NULL; }
    cJSON_Delete(root);
    return rc;
}
