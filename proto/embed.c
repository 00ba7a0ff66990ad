/* embed.c - the wire formats of embeddings and reranking: the bodies of POST /v1/embeddings
 * (OpenAI), POST /embedding (llama-server's native) and POST /v1/rerank, and their responses
 * (see proto.h). Inputs become the request's prompts (texts or token ids), tokenized and
 * checked by the server like other prompts. No I/O, no engine calls. */
#include "proto/proto.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int oom(rlx_api_error *e)
{
    return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory while parsing the request.");
}

static const cJSON *field(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static bool is_integer(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble) &&
           fabs(v->valuedouble) < 9.007199254740992e15;
}

static int get_int(const cJSON *root, const char *name, long long lo, long long hi, int32_t *out, rlx_api_error *e)
{
    const cJSON *v = field(root, name);
    if (!v) return 0;
    if (!is_integer(v) || v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must be an integer between %lld and %lld.", name, lo, hi);
    *out = (int32_t)v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *root, const char *name, bool *out, rlx_api_error *e)
{
    const cJSON *v = field(root, name);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must be a boolean.", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* One input: a non-empty string or a non-empty array of token ids (range-checked later, against
 * the model's vocabulary). */
static int add_input(rlx_api_request *r, const cJSON *v, const char *name, long idx, rlx_api_error *e)
{
    char where[48] = "";
    if (idx >= 0) snprintf(where, sizeof where, "[%ld]", idx);
    if (r->n_prompts >= RLX_API_MAX_INPUTS)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' may hold at most %d inputs.", name, RLX_API_MAX_INPUTS);
    rlx_api_prompt *p = &r->prompts[r->n_prompts];
    if (cJSON_IsString(v)) {
        if (!v->valuestring[0])
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s%s' must not be an empty string.", name, where);
        if (!(p->text = strdup(v->valuestring))) return oom(e);
    } else if (cJSON_IsArray(v)) {
        size_t n = (size_t)cJSON_GetArraySize(v);
        if (!n) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s%s' must not be an empty array.", name, where);
        if (!(p->ids = malloc(n * sizeof *p->ids))) return oom(e);
        const cJSON *it;
        cJSON_ArrayForEach(it, v) {
            if (is_integer(it) && it->valuedouble > INT32_MAX) /* an id, but of no vocabulary */
                return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s%s' holds the token id %.0f, outside the "
                                      "vocabulary.", name, where, it->valuedouble);
            if (!is_integer(it) || it->valuedouble < 0)
                return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s%s' must hold integer token ids (>= 0).", name,
                                      where);
            p->ids[p->n_ids++] = (int32_t)it->valuedouble;
        }
    } else {
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name,
                              "'%s%s' must be a string, an array of strings, an array of token ids, or an array of such "
                              "arrays.", name, where);
    }
    r->n_prompts++;
    return 0;
}

static int alloc_prompts(rlx_api_request *r, size_t n, rlx_api_error *e)
{
    n = n < 1 ? 1 : n > RLX_API_MAX_INPUTS ? RLX_API_MAX_INPUTS : n;
    if (!(r->prompts = calloc(n, sizeof *r->prompts))) return oom(e);
    r->cap_prompts = n;
    return 0;
}

/* "input" / "content": one input, or an array of them (strings or id arrays); a flat array of
 * numbers is one input of ids. */
static int parse_inputs(const cJSON *root, rlx_api_request *r, rlx_api_error *e)
{
    const bool native = r->kind == RLX_API_EMBEDDING;
    const char *name = native && (field(root, "content") || !field(root, "input")) ? "content" : "input";
    const cJSON *v = field(root, name);
    if (!v && native) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'content' (or 'input') is required.");
    if (!v) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' is required.", name);
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must not be empty.", name);
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > RLX_API_MAX_INPUTS && !cJSON_IsNumber(cJSON_GetArrayItem(v, 0)))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' may hold at most %d inputs.", name, RLX_API_MAX_INPUTS);
    if (cJSON_IsArray(v) && !cJSON_IsNumber(cJSON_GetArrayItem(v, 0))) {
        int rc = alloc_prompts(r, (size_t)cJSON_GetArraySize(v), e);
        long i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, v) {
            if (!rc) rc = add_input(r, it, name, i++, e);
        }
        return rc;
    }
    int rc = alloc_prompts(r, 1, e);
    return rc ? rc : add_input(r, v, name, -1, e);
}

static int parse_rerank(const cJSON *root, rlx_api_request *r, rlx_api_error *e)
{
    const cJSON *q = field(root, "query"), *d = field(root, "documents");
    if (!q || !cJSON_IsString(q) || !q->valuestring[0])
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "query", "'query' must be a non-empty string.");
    if (!(r->embed.query = strdup(q->valuestring))) return oom(e);
    if (!d || !cJSON_IsArray(d) || cJSON_GetArraySize(d) == 0)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "documents", "'documents' must be a non-empty array of strings.");
    if (cJSON_GetArraySize(d) > RLX_API_MAX_INPUTS)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "documents", "'documents' may hold at most %d entries.",
                              RLX_API_MAX_INPUTS);
    int rc = alloc_prompts(r, (size_t)cJSON_GetArraySize(d), e);
    long i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, d) {
        if (rc) break;
        if (!cJSON_IsString(it))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "documents", "'documents[%ld]' must be a string.", i);
        rc = add_input(r, it, "documents", i++, e);
    }
    if (!rc) rc = get_int(root, "top_n", 1, RLX_API_MAX_INPUTS, &r->embed.top_n, e);
    if (!rc) rc = get_bool(root, "return_documents", &r->embed.return_documents, e);
    return rc;
}

int rlx__api_parse_embed(cJSON *root, rlx_api_request *r, rlx_api_error *e)
{
    int rc;
    const cJSON *m = field(root, "model");
    if (m && !cJSON_IsString(m)) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "model", "'model' must be a string.");
    if (m && !(r->model = strdup(m->valuestring))) return oom(e);
    if ((rc = get_bool(root, "truncate", &r->base->truncate, e))) return rc;
    if (r->kind == RLX_API_RERANK) return parse_rerank(root, r, e);
    if ((rc = parse_inputs(root, r, e))) return rc;
    if ((rc = get_int(root, "embd_normalize", -1, 1000, &r->base->embd_normalize, e))) return rc;
    const cJSON *u = field(root, "user");
    if (u && !cJSON_IsString(u)) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "user", "'user' must be a string.");
    const cJSON *f = field(root, "encoding_format");
    if (f) {
        if (!cJSON_IsString(f) || (strcmp(f->valuestring, "float") && strcmp(f->valuestring, "base64")))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "encoding_format",
                                  "'encoding_format' must be \"float\" or \"base64\".");
        r->embed.base64 = !strcmp(f->valuestring, "base64");
    }
    return get_int(root, "dimensions", 1, INT32_MAX, &r->embed.dimensions, e);
}

/* ---- responses ------------------------------------------------------------------------------ */

char *rlx_api_base64(const void *data, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = data;
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t x = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
        *o++ = tab[x >> 18];
        *o++ = tab[(x >> 12) & 63];
        *o++ = tab[(x >> 6) & 63];
        *o++ = tab[x & 63];
    }
    if (i < n) {
        uint32_t x = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0);
        *o++ = tab[x >> 18];
        *o++ = tab[(x >> 12) & 63];
        *o++ = i + 1 < n ? tab[(x >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = 0;
    return out;
}

/* floats as a JSON array, each a text that reads back as exactly the same double (the float32
 * value), so a client reading them gets the float32 values base64 gives. (cJSON's own printing
 * compares with a tolerance and may lose the last bits.) */
static cJSON *float_array(const float *v, size_t n)
{
    size_t cap = n * 25 + 32, len = 0; /* rlx_api_f32_text: 23 characters at most, 32 bytes of room */
    char *s = malloc(cap);
    if (!s) return NULL;
    s[len++] = '[';
    for (size_t i = 0; i < n; i++) {
        double d = (double)v[i];
        if (i) s[len++] = ',';
        if (!isfinite(d)) { /* JSON has no NaN or infinity */
            memcpy(s + len, "null", 4);
            len += 4;
            continue;
        }
        /* %.17g: 17 significant digits always read back exactly, in one conversion (%g drops
         * trailing zeros, so a value with a short exact decimal form - 0, 0.5, 0.125 - still
         * prints short); at most 24 characters */
        len += rlx_api_f32_text(v[i], s + len);
    }
    s[len++] = ']';
    s[len] = 0;
    cJSON *a = cJSON_CreateRaw(s);
    free(s);
    return a;
}

/* Little-endian float32 bytes as base64 (the host is little-endian: x86-64, aarch64). */
static cJSON *base64_vector(const float *v, size_t n)
{
    char *s = rlx_api_base64(v, n * sizeof *v);
    cJSON *o = s ? cJSON_CreateString(s) : NULL;
    free(s);
    return o;
}

static cJSON *usage(const rlx_usage *u)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "prompt_tokens", u->prompt_tokens);
    cJSON_AddNumberToObject(o, "total_tokens", u->prompt_tokens);
    return o;
}

typedef struct scored { double score; size_t index; } scored;

static int by_score(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The response's JSON (an object, or /embedding's array); NULL when out of memory or when the
 * result does not match the request. */
static cJSON *response(const rlx_api_request *r, const char *model, const rlx_api_embd_result *res, const rlx_usage *u)
{
    size_t per_input = res->per_token ? 0 : (size_t)res->dim;
    size_t need = 0;
    for (size_t i = 0; i < res->n_inputs; i++) need += res->per_token ? (size_t)res->tokens[i] * (size_t)res->dim : per_input;
    if (need != res->n || res->n_inputs != r->n_prompts || res->dim < 1) return NULL;
    if (r->kind == RLX_API_RERANK) {
        scored *sc = malloc((res->n_inputs ? res->n_inputs : 1) * sizeof *sc);
        cJSON *o = cJSON_CreateObject(), *results = NULL;
        if (!sc || !o) goto rerank_oom;
        for (size_t i = 0; i < res->n_inputs; i++) sc[i] = (scored){res->v[i * (size_t)res->dim], i};
        qsort(sc, res->n_inputs, sizeof *sc, by_score);
        cJSON_AddStringToObject(o, "object", "list");
        cJSON_AddStringToObject(o, "model", model);
        results = cJSON_AddArrayToObject(o, "results");
        size_t keep = r->embed.top_n > 0 && (size_t)r->embed.top_n < res->n_inputs ? (size_t)r->embed.top_n : res->n_inputs;
        for (size_t k = 0; results && k < keep; k++) {
            cJSON *it = cJSON_CreateObject();
            if (!it) goto rerank_oom;
            cJSON_AddItemToArray(results, it);
            cJSON_AddNumberToObject(it, "index", (double)sc[k].index);
            cJSON_AddNumberToObject(it, "relevance_score", sc[k].score);
            if (r->embed.return_documents) {
                cJSON *d = cJSON_AddObjectToObject(it, "document");
                const char *t = r->prompts[sc[k].index].text;
                if (d) cJSON_AddStringToObject(d, "text", t ? t : "");
            }
        }
        cJSON_AddItemToObject(o, "usage", usage(u));
        free(sc);
        return o;
    rerank_oom:
        free(sc);
        cJSON_Delete(o);
        return NULL;
    }
    bool native = r->kind == RLX_API_EMBEDDING;
    cJSON *data = cJSON_CreateArray();
    const float *v = res->v;
    for (size_t i = 0; data && i < res->n_inputs; i++) {
        cJSON *it = cJSON_CreateObject();
        if (!it) break;
        cJSON_AddItemToArray(data, it);
        if (!native) cJSON_AddStringToObject(it, "object", "embedding");
        cJSON_AddNumberToObject(it, "index", (double)i);
        size_t rows = res->per_token ? (size_t)res->tokens[i] : 1;
        cJSON *emb;
        if (native) { /* always an array of vectors, as llama-server's */
            emb = cJSON_CreateArray();
            for (size_t t = 0; emb && t < rows; t++) cJSON_AddItemToArray(emb, float_array(v + t * (size_t)res->dim, (size_t)res->dim));
        } else {
            emb = r->embed.base64 ? base64_vector(v, (size_t)res->dim) : float_array(v, (size_t)res->dim);
        }
        if (!emb) {
            cJSON_Delete(data);
            return NULL;
        }
        cJSON_AddItemToObject(it, "embedding", emb);
        v += rows * (size_t)res->dim;
    }
    if (!data || native) return data;
    cJSON *o = cJSON_CreateObject();
    if (!o) {
        cJSON_Delete(data);
        return NULL;
    }
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddItemToObject(o, "data", data);
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddItemToObject(o, "usage", usage(u));
    return o;
}

static char *print(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *rlx_api_embed_response(const rlx_api_request *r, const char *model, const rlx_api_embd_result *res,
                             const rlx_usage *u)
{
    return print(response(r, model, res, u));
}

char *rlx_api_line_embed(const char *id, const rlx_api_request *r, const char *model, const rlx_api_embd_result *res,
                         const rlx_usage *u, double elapsed_ms)
{
    cJSON *body = response(r, model, res, u);
    cJSON *o = body ? cJSON_CreateObject() : NULL;
    cJSON *idv = o ? cJSON_Parse(id) : NULL;
    if (!idv) {
        cJSON_Delete(body);
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddItemToObject(o, "id", idv);
    cJSON_AddBoolToObject(o, "ok", true);
    if (cJSON_IsArray(body)) {
        cJSON_AddItemToObject(o, "data", body);
    } else {
        cJSON *it = body->child;
        while (it) { /* move the response's fields */
            cJSON *next = it->next;
            cJSON_AddItemToObject(o, it->string, cJSON_DetachItemViaPointer(body, it));
            it = next;
        }
        cJSON_Delete(body);
    }
    cJSON_AddNumberToObject(o, "elapsed_ms", elapsed_ms);
    char *s = print(o);
    if (!s) return NULL;
    size_t n = strlen(s);
    char *line = realloc(s, n + 2);
    if (!line) {
        free(s);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = 0;
    return line;
}
