/* parse_extra.c - the seed read from its literal, and other servers' sampling fields that rlxd
 * does not implement, refused unless neutral (see parse_int.h). */
#include "proto/parse_int.h"

#include <stdio.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int bad_seed(rlx_api_error *e)
{
    return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "seed", "'seed' must be a 64-bit integer.");
}

int rlx__api_parse_seed(const cJSON *root, rlx_sampling_params *s, rlx_api_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "seed");
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v)) return bad_seed(e);
    const char *lit = v->valuestring; /* the literal (models/json.h) */
    uint64_t seed;
    if (lit && lit[0] && lit[strspn(lit, "-0123456789")] == 0) {
        /* an integer literal, read exactly (as a double, 2^64 - 1 rounded to 2^64, a 400, and
           2^53 + 1 to 2^53) */
        char *end;
        errno = 0;
        if (lit[0] == '-') {
            long long x = strtoll(lit, &end, 10);
            if (errno || *end) return bad_seed(e);
            if (x == -1) return 0; /* a random seed, as llama-server */
            seed = (uint64_t)x;
        } else {
            unsigned long long x = strtoull(lit, &end, 10);
            if (errno || *end) return bad_seed(e);
            seed = (uint64_t)x;
        }
    } else { /* 1e3, 42.0: what the double says, when it is a 64-bit integer */
        const double d = v->valuedouble;
        if (!isfinite(d) || d != floor(d) || d < -9223372036854775808.0 || d >= 18446744073709551616.0) return bad_seed(e);
        if (d == -1.0) return 0;
        seed = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
    }
    s->seed = seed;
    s->has_seed = true;
    return 0;
}

static int bias_id_error(rlx_api_error *e, const char *key)
{
    return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "logit_bias", "'logit_bias' key '%s' is not a token id of this model.", key);
}

static int bias_value_error(rlx_api_error *e)
{
    return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "logit_bias",
                          "'logit_bias' values must be numbers between -100 and 100 (or false, in the array form).");
}

int rlx__api_parse_logit_bias(const cJSON *root, rlx_request *q, int32_t n_vocab, rlx_api_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "logit_bias");
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "logit_bias", "'logit_bias' must be an object mapping token ids "
                              "to biases (or llama-server's array of [id, bias] pairs).");
    int cnt = cJSON_GetArraySize(v);
    rlx_logit_bias *b = calloc((size_t)(cnt ? cnt : 1), sizeof *b);
    if (!b) return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
    q->sampling.logit_bias = b;
    const cJSON *it;
    size_t i = 0;
    cJSON_ArrayForEach(it, v) {
        long long id;
        const cJSON *val = it;
        char key[32];
        if (cJSON_IsObject(v)) { /* OpenAI: {"ID": bias}, the key read as Python's int() reads it */
            char *end = NULL;
            id = strtoll(it->string, &end, 10);
            while (end != it->string && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
            if (!it->string[0] || end == it->string || *end) return bias_id_error(e, it->string);
            snprintf(key, sizeof key, "%lld", id);
        } else { /* llama-server: [ID, bias | false] */
            const cJSON *t = cJSON_GetArrayItem(it, 0);
            val = cJSON_GetArrayItem(it, 1);
            if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !cJSON_IsNumber(t))
                return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "logit_bias", "'logit_bias' entry %zu must be a pair "
                                      "[token id, bias]%s.", i, cJSON_IsString(t) ? " (a token given as text is not "
                                      "supported: find its id with POST /tokenize)" : "");
            if (t->valuedouble != floor(t->valuedouble) || fabs(t->valuedouble) > 4e18) {
                snprintf(key, sizeof key, "%g", t->valuedouble);
                return bias_id_error(e, key);
            }
            id = (long long)t->valuedouble;
            snprintf(key, sizeof key, "%lld", id);
        }
        if (id < 0 || id > INT32_MAX || (n_vocab > 0 && id >= n_vocab))
            return bias_id_error(e, cJSON_IsObject(v) ? it->string : key);
        b[i].token = (int32_t)id;
        if (cJSON_IsFalse(val) && cJSON_IsArray(v)) b[i].bias = -100.0f; /* llama-server: never (-100 bans) */
        else if (!cJSON_IsNumber(val) || !isfinite(val->valuedouble) || fabs(val->valuedouble) > 100) return bias_value_error(e);
        else b[i].bias = (float)val->valuedouble;
        i++;
    }
    q->sampling.n_logit_bias = i;
    return 0;
}

/* How a field is neutral: a number at most / at least / equal to a value, false, true, null or
 * an empty array or string. */
typedef enum { N_LE, N_GE, N_EQ, N_FALSE, N_TRUE, N_EMPTY } neutral_kind;

static const struct {
    const char *name;
    neutral_kind kind;
    double value;
    const char *what;  /* whose field, what it does */
} k_unsupported[] = {
    {"mirostat", N_EQ, 0, "llama-server's Mirostat sampling"},
    {"typical_p", N_GE, 1, "llama-server's and vLLM's locally typical sampling"},
    {"tfs_z", N_GE, 1, "llama-server's tail-free sampling"},
    {"top_n_sigma", N_LE, 0, "llama-server's top-n-sigma sampling"},
    {"xtc_probability", N_LE, 0, "llama-server's XTC sampling"},
    {"dry_multiplier", N_LE, 0, "llama-server's DRY repetition penalty"},
    {"dynatemp_range", N_LE, 0, "llama-server's dynamic temperature"},
    {"min_tokens", N_LE, 0, "vLLM's minimum output length"},
    {"use_beam_search", N_FALSE, 0, "vLLM's beam search"},
    {"include_stop_str_in_output", N_FALSE, 0, "vLLM's stop strings kept in the text"},
    {"skip_special_tokens", N_TRUE, 0, "vLLM's special tokens written into the text"},
    {"stop_token_ids", N_EMPTY, 0, "vLLM's stop token ids"},
    {"suffix", N_EMPTY, 0, "OpenAI's completions insertion suffix"},
};

static bool neutral(const cJSON *v, neutral_kind k, double x)
{
    switch (k) {
    case N_LE: return cJSON_IsNumber(v) && v->valuedouble <= x;
    case N_GE: return cJSON_IsNumber(v) && v->valuedouble >= x;
    case N_EQ: return cJSON_IsNumber(v) && v->valuedouble == x;
    case N_FALSE: return cJSON_IsFalse(v);
    case N_TRUE: return cJSON_IsTrue(v);
    case N_EMPTY: return (cJSON_IsArray(v) && !v->child) || (cJSON_IsString(v) && !v->valuestring[0]);
    }
    return false;
}

int rlx__api_refuse_unsupported(const cJSON *root, rlx_api_error *e)
{
    for (size_t i = 0; i < RLX_ARRAY_LEN(k_unsupported); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, k_unsupported[i].name);
        if (!v || cJSON_IsNull(v) || neutral(v, k_unsupported[i].kind, k_unsupported[i].value)) continue;
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, k_unsupported[i].name,
                              "'%s' (%s) is not supported by rlxd; leave it out (sampling takes temperature, top_k, "
                              "top_p, min_p, the repetition, presence and frequency penalties, logit_bias, seed and stop).",
                              k_unsupported[i].name, k_unsupported[i].what);
    }
    /* best_of (OpenAI's completions): as many as n (or 1) is what is generated anyway */
    const cJSON *bo = cJSON_GetObjectItemCaseSensitive(root, "best_of");
    if (bo && !cJSON_IsNull(bo)) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "n");
        const double want = cJSON_IsNumber(n) ? n->valuedouble : 1;
        if (!cJSON_IsNumber(bo) || bo->valuedouble != want)
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "best_of", "'best_of' other than n is not supported by "
                                  "rlxd (it would generate best_of choices and return the n most likely); leave it out.");
    }
    return 0;
}
