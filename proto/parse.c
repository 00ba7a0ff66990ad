/* parse.c - request bodies -> rlx_api_request, with OpenAI-style validation: a wrong type or an
 * out-of-range value is a 400 naming the parameter; unknown fields are ignored; null counts
 * as absent. */
#include "proto/proto.h"
#include "proto/parse_int.h"
#include "models/json.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "engine/session.h"
#include "engine/spec.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROMPTS 64

int rlx_api_errorf(rlx_api_error *e, int status, const char *type, const char *param,
                   const char *fmt, ...)
{
    if (e) {
        e->status = status;
        e->type = type;
        e->code = NULL;
        snprintf(e->param, sizeof e->param, "%s", param ? param : "");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->message, sizeof e->message, fmt, ap);
        va_end(ap);
    }
    return status >= 500 ? RLX_EFULL : RLX_EINVAL;
}

int rlx_api_error_shutdown(rlx_api_error *e)
{
    return rlx_api_errorf(e, 503, RLX_API_ERR_UNAVAILABLE, NULL, "The server is shutting down.");
}

void rlx_api_error_from_rlx(rlx_api_error *e, int code, const char *msg)
{
    switch (code) {
    case RLX_EFULL:
        rlx_api_errorf(e, 503, RLX_API_ERR_SERVER, NULL, "%s", msg);
        e->code = "server_busy";
        break;
    case RLX_ETOOLONG:
        rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, NULL, "The request cannot fit the model's context: %s", msg);
        e->code = "context_length_exceeded";
        break;
    case RLX_EINVAL: case RLX_ERANGE:
        rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, NULL, "%s", msg);
        break;
    case RLX_ENOTFOUND:
        rlx_api_errorf(e, 404, RLX_API_ERR_INVALID, NULL, "%s", msg);
        break;
    default:
        rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "%s", msg);
        break;
    }
}

int rlx_api_error_from_admit(rlx_api_error *e, const rlx_admit *a, const char *prompt_param,
                             const char *max_tokens_param)
{
    const char *pp = prompt_param, *mp = max_tokens_param;
    int n_ctx = a->n_ctx;
    switch (a->reason) {
    case RLX_ADMIT_OK:
        return 0;
    case RLX_ADMIT_PROMPT_EMPTY:
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, pp, "'%s' must not be empty.", pp);
    case RLX_ADMIT_TOKEN_ID:
        if (!mp) /* a list of ids, not a prompt (/detokenize) */
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, pp, "'%s' must hold token ids between 0 and %lld.", pp,
                                  (long long)a->limit - 1);
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, pp, "Token id %lld is outside the vocabulary (0..%lld).",
                              (long long)a->value, (long long)a->limit - 1);
    case RLX_ADMIT_BIAS_ID:
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "logit_bias",
                              "'logit_bias' key %lld is not a token id of this model.", (long long)a->value);
    case RLX_ADMIT_MAX_TOKENS: /* no code: it is not about the prompt (as it always answered) */
        rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, mp,
                       "'%s' is %d but the model's context holds %d tokens in all (prompt included).", mp,
                       a->max_tokens, n_ctx);
        return RLX_ETOOLONG;
    case RLX_ADMIT_PROMPT_LONG:
        if (a->bound == RLX_ADMIT_AT_LEAST)
            rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, pp, "The prompt ('%s') is %zu bytes long, so at least %zu "
                           "tokens for this model, but the model's context holds %d tokens in all; shorten it.", pp,
                           a->prompt_bytes, a->n_prompt, n_ctx);
        else if (a->bound == RLX_ADMIT_MORE_THAN)
            rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, pp, "The prompt ('%s') is more than %zu tokens long but the "
                           "model's context holds %d tokens in all; shorten it.", pp, a->n_prompt, n_ctx);
        else
            rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, pp, "The prompt ('%s') is %zu tokens long but the model's "
                           "context holds %d tokens in all; shorten it.", pp, a->n_prompt, n_ctx);
        break;
    case RLX_ADMIT_CONTEXT:
        rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, mp, "The prompt (%zu tokens) plus '%s' (%d) exceeds the model's "
                       "context of %d tokens; lower '%s' to at most %lld.", a->n_prompt, mp, a->max_tokens, n_ctx, mp,
                       (long long)n_ctx - (long long)a->n_prompt);
        break;
    }
    e->code = "context_length_exceeded";
    return RLX_ETOOLONG;
}

/* ---- typed field access -------------------------------------------------------------- */

static const cJSON *field(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

static int get_number(const cJSON *o, const char *name, double lo, double hi, double *out,
                      bool *present, rlx_api_error *e)
{
    const cJSON *v = field(o, name);
    if (present) *present = v != NULL;
    if (!v) return 0;
    if (!cJSON_IsNumber(v))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must be a number.", name);
    if (!isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) /* 1e400 reads as infinity */
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must be between %g and %g, got %g.",
                              name, lo, hi, v->valuedouble);
    *out = v->valuedouble;
    return 0;
}

static bool is_integer(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble)
        && fabs(v->valuedouble) < 9.007199254740992e15;
}

static int get_int(const cJSON *o, const char *name, long long lo, long long hi, long long *out,
                   bool *present, rlx_api_error *e)
{
    const cJSON *v = field(o, name);
    if (present) *present = v != NULL;
    if (!v) return 0;
    if (!is_integer(v)) {
        const double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        if (isfinite(d) && d == floor(d)) /* an integer past 2^53: out of range, not a fraction */
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must be between %lld and %lld.", name,
                                  RLX_MAX(lo, -9007199254740991LL), RLX_MIN(hi, 9007199254740991LL));
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must be an integer.", name);
    }
    long long x = (long long)v->valuedouble;
    if (x < lo || x > hi)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must be between %lld and %lld, got %lld.",
                              name, lo, hi, x);
    *out = x;
    return 0;
}

static int get_bool(const cJSON *o, const char *name, bool *out, rlx_api_error *e)
{
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsBool(v))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must be a boolean.", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_string(const cJSON *o, const char *name, char **out, rlx_api_error *e)
{
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsString(v))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must be a string.", name);
    free(*out);
    *out = strdup(v->valuestring);
    if (!*out) return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
    return 0;
}

static int oom(rlx_api_error *e)
{
    rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory while parsing the request.");
    return RLX_ENOMEM;
}

/* A JSON array of token ids. */
static int get_ids(const cJSON *arr, const char *name, int32_t n_vocab, int32_t **ids, size_t *n,
                   rlx_api_error *e)
{
    size_t cnt = (size_t)cJSON_GetArraySize(arr);
    int32_t *v = malloc((cnt ? cnt : 1) * sizeof *v);
    if (!v) return oom(e);
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        /* range-checked before the cast: 4294967297 as an int32_t is undefined behaviour */
        int32_t hi = n_vocab > 0 ? n_vocab - 1 : INT32_MAX;
        if (!is_integer(it) || it->valuedouble < 0 || it->valuedouble > hi) {
            free(v);
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must hold integer token ids between 0 and %d.", name, hi);
        }
        v[i++] = (int32_t)it->valuedouble;
    }
    *ids = v;
    *n = cnt;
    return 0;
}

/* ---- sampling and generation limits (shared by every kind) --------------------------------- */

static int parse_stop(const cJSON *root, rlx_request *q, rlx_api_error *e)
{
    const cJSON *v = field(root, "stop");
    if (!v) return 0;
    if (cJSON_IsString(v)) {
        if (!v->valuestring[0]) return 0; /* "" means no stop string, as OpenAI treats it */
        q->stop = calloc(1, sizeof *q->stop);
        if (!q->stop || !(q->stop[0] = strdup(v->valuestring))) return oom(e);
        q->n_stop = 1;
        return 0;
    }
    if (!cJSON_IsArray(v))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "stop", "'stop' must be a string or an array of strings.");
    int cnt = cJSON_GetArraySize(v);
    if (cnt > RLX_MAX_STOP)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "stop", "'stop' may hold at most %d strings, got %d.",
                              RLX_MAX_STOP, cnt);
    q->stop = calloc((size_t)(cnt ? cnt : 1), sizeof *q->stop);
    if (!q->stop) return oom(e);
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsString(it) || !it->valuestring[0])
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "stop", "'stop' must hold non-empty strings.");
        if (!(q->stop[q->n_stop] = strdup(it->valuestring))) return oom(e);
        q->n_stop++;
    }
    return 0;
}

/* A JSON Schema compiled to GBNF (engine/json_schema.h) into *gbnf; a schema it cannot honour
 * is a 400 naming `param` and, in the message, the keyword. */
static int schema_grammar(const cJSON *schema, const char *param, char **gbnf, rlx_api_error *e)
{
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, param, "'%s' must be a JSON Schema (an object).", param);
    rlx_error err = {0};
    if (!(*gbnf = rlx_json_schema_to_gbnf(schema, &err))) {
        if (err.code == RLX_ENOMEM) return oom(e);
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, param, "'%s' is not supported: %s", param, err.msg);
    }
    return 0;
}

/* A token reference's text, for the syntax check: the vocabulary is the worker's to ask. */
static int32_t any_token(const void *ctx, const char *text, size_t len)
{
    (void)ctx, (void)text, (void)len;
    return 0;
}

/* "grammar" (GBNF, as llama-server), "json_schema" (native) and "response_format" (OpenAI)
 * become the request's grammar, compiled here once so that a bad one is a 400 naming the field
 * (the worker compiles its own). At most one of them may constrain a request. */
static int parse_constraint(const cJSON *root, rlx_request *q, const char **param_out, rlx_api_error *e)
{
    const cJSON *g = field(root, "grammar"), *rf = field(root, "response_format"), *js = field(root, "json_schema");
    const char *src = NULL, *param = "grammar", *other = NULL;
    char *owned = NULL;
    int rc;
    if (g && !cJSON_IsNull(g)) {
        if (!cJSON_IsString(g))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "grammar", "'grammar' must be a string of GBNF rules.");
        if (g->valuestring[0]) src = g->valuestring, other = "grammar"; /* "" is no grammar, as in llama-server */
    }
    if (js && !cJSON_IsNull(js)) {
        if (other)
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "json_schema", "'grammar' and 'json_schema' cannot be combined.");
        if ((rc = schema_grammar(js, "json_schema", &owned, e))) return rc;
        src = owned;
        param = other = "json_schema";
    }
    if (rf && !cJSON_IsNull(rf)) {
        const cJSON *type = cJSON_IsObject(rf) ? field(rf, "type") : NULL;
        rc = 0;
        if (!cJSON_IsString(type)) {
            rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "response_format",
                                "'response_format' must be an object with a string 'type' (\"text\", \"json_object\", "
                                "\"json_schema\").");
        } else if (!strcmp(type->valuestring, "json_object") || !strcmp(type->valuestring, "json_schema")) {
            bool object = type->valuestring[5] == 'o';
            const cJSON *spec = object ? NULL : field(rf, "json_schema");
            const cJSON *oschema = object ? field(rf, "schema") : NULL;
            if (oschema && !cJSON_IsNull(oschema) && !cJSON_IsObject(oschema) && !cJSON_IsBool(oschema))
                rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "response_format.schema",
                                    "'response_format.schema' must be a JSON Schema (an object).");
            else if (other)
                rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "response_format",
                                    "'%s' and a JSON 'response_format' cannot be combined.", other);
            else if (object && oschema && !cJSON_IsNull(oschema)) {
                /* llama-server's form: {"type": "json_object", "schema": {...}} follows the schema */
                if ((rc = schema_grammar(oschema, "response_format.schema", &owned, e)) == 0)
                    src = owned, param = "response_format.schema";
            } else if (object)
                src = rlx_grammar_json_object, param = "response_format";
            else if (!cJSON_IsObject(spec))
                rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "response_format.json_schema",
                                    "'response_format.json_schema' must be an object {\"name\", \"schema\", \"strict\"}.");
            else if (field(spec, "name") && !cJSON_IsString(field(spec, "name")))
                rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "response_format.json_schema.name",
                                    "'response_format.json_schema.name' must be a string.");
            else if (field(spec, "strict") && !cJSON_IsBool(field(spec, "strict")) && !cJSON_IsNull(field(spec, "strict")))
                rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "response_format.json_schema.strict",
                                    "'response_format.json_schema.strict' must be a boolean.");
            else {
                /* no schema: any JSON value; strict or not, the output follows the schema */
                static const cJSON any = {.type = cJSON_True};
                const cJSON *schema = field(spec, "schema");
                if ((rc = schema_grammar(schema && !cJSON_IsNull(schema) ? schema : &any, "response_format.json_schema",
                                         &owned, e)) == 0)
                    src = owned, param = "response_format.json_schema";
            }
        } else if (strcmp(type->valuestring, "text")) {
            rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "response_format.type",
                                "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", not '%s'.",
                                type->valuestring);
        }
        if (rc) {
            free(owned);
            return rc;
        }
    }
    if (!src) return 0;
    rlx_error gerr = {0};
    /* the syntax here; a token reference's text and id are checked against the model's
     * vocabulary where the worker compiles the grammar (a 400 too) */
    rlx_grammar_token_ids any_ids = {.lookup = any_token};
    rlx_grammar *gr = rlx_grammar_compile_ids(src, strlen(src), NULL, &any_ids, &gerr);
    if (!gr) {
        /* a schema's grammar is never left-recursive but through a $ref that reaches itself
           before any text ({"$ref": "#"}, a -> b -> a) */
        const char *why = owned && strstr(gerr.msg, "left-recursive") ? "; in the schema, a '$ref' reaches itself before any "
                                                                          "text (a cycle of references)" : "";
        rc = owned ? rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, param, "'%s' is not supported: its grammar is refused: %s%s", param,
                                    gerr.msg, why)
                   : rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, param, "'%s' is not a valid grammar: %s", param, gerr.msg);
        free(owned);
        return rc;
    }
    rlx_grammar_free(gr);
    q->grammar = owned ? owned : strdup(src);
    if (!q->grammar) return oom(e);
    q->json_keys_unique = strcmp(param, "grammar") != 0; /* a JSON value: its objects' keys unique */
    *param_out = param;
    return 0;
}

static int parse_common(const cJSON *root, rlx_api_request *r, int32_t n_vocab, rlx_api_error *e)
{
    rlx_request *q = r->base;
    rlx_sampling_params *s = &q->sampling;
    double d;
    long long x;
    bool has;
    int rc;
    if ((rc = get_string(root, "model", &r->model, e))) return rc;
    if ((rc = get_number(root, "temperature", 0, 2, &d, &has, e))) return rc;
    if (has) { s->temperature = (float)d; r->given |= RLX_API_GIVEN_TEMPERATURE; }
    if ((rc = get_number(root, "top_p", 0, 1, &d, &has, e))) return rc;
    if (has) { s->top_p = (float)d; r->given |= RLX_API_GIVEN_TOP_P; }
    if ((rc = get_int(root, "top_k", -1, INT32_MAX, &x, &has, e))) return rc;
    if (has) { s->top_k = x < 0 ? 0 : (int32_t)x; r->given |= RLX_API_GIVEN_TOP_K; }
    if ((rc = get_number(root, "min_p", 0, 1, &d, &has, e))) return rc;
    if (has) { s->min_p = (float)d; r->given |= RLX_API_GIVEN_MIN_P; }
    if ((rc = get_number(root, "presence_penalty", -2, 2, &d, &has, e))) return rc;
    if (has) { s->presence_penalty = (float)d; r->given |= RLX_API_GIVEN_PRESENCE_PENALTY; }
    if ((rc = get_number(root, "frequency_penalty", -2, 2, &d, &has, e))) return rc;
    if (has) { s->frequency_penalty = (float)d; r->given |= RLX_API_GIVEN_FREQUENCY_PENALTY; }
    /* vLLM's name, or llama-server's repeat_penalty */
    const char *rp = field(root, "repetition_penalty") || !field(root, "repeat_penalty") ? "repetition_penalty" : "repeat_penalty";
    if ((rc = get_number(root, rp, 0.01, 10, &d, &has, e))) return rc;
    if (has) { s->repetition_penalty = (float)d; r->given |= RLX_API_GIVEN_REPEAT_PENALTY; }
    if ((rc = get_int(root, "repeat_last_n", -1, INT32_MAX, &x, &has, e))) return rc;
    if (has) { s->penalty_last_n = (int32_t)x; r->given |= RLX_API_GIVEN_REPEAT_LAST_N; }
    if ((rc = rlx__api_parse_seed(root, s, e))) return rc;
    /* completions take 0, as OpenAI's legacy API does: the prompt scored, nothing generated
       (echo + logprobs + max_tokens 0 is how evaluation harnesses read a text's log-likelihood) */
    if ((rc = get_int(root, "max_tokens", r->kind == RLX_API_COMPLETIONS ? 0 : 1, INT32_MAX, &x, &has, e))) return rc;
    if (has) { q->max_tokens = (int32_t)(x ? x : 1); q->no_generation = !x; r->given |= RLX_API_GIVEN_MAX_TOKENS; }
    if ((rc = get_int(root, "max_completion_tokens", 1, INT32_MAX, &x, &has, e))) return rc;
    if (has) { r->given |= RLX_API_GIVEN_MAX_TOKENS; q->max_tokens = (int32_t)x; r->max_tokens_param = "max_completion_tokens"; }
    if ((rc = get_int(root, "n", 1, RLX_MAX_N, &x, &has, e))) return rc;
    if (has) r->n = (int)x;
    if ((rc = get_bool(root, "ignore_eos", &q->ignore_eos, e))) return rc;
    /* speculative decoding (outputs are the same; only speed differs): "speculative": false
     * opts out, llama-server's "speculative.n_max" caps the draft length (0: none) and
     * "speculative.p_min" sets a draft model's confidence floor */
    bool spec = true;
    if ((rc = get_bool(root, "speculative", &spec, e))) return rc;
    if (!spec) q->draft_max = 0;
    if ((rc = get_int(root, "speculative.n_max", 0, RLX_SPEC_MAX_DRAFT, &x, &has, e))) return rc;
    if (has) q->draft_max = spec ? (int32_t)x : 0;
    if ((rc = get_number(root, "speculative.p_min", 0, 1, &d, &has, e))) return rc;
    if (has) q->draft_p_min = d > 0 ? (float)d : -1; /* 0: draft however unsure (-1 in the engine) */
    if ((rc = get_bool(root, "stream", &r->stream, e))) return rc;
    if ((rc = get_string(root, "session_id", &q->session_id, e))) return rc; /* checked: rlx_api_session_check */
    /* the OpenAI routes resend the whole conversation; the native route sends one turn */
    q->session_replace = r->kind != RLX_API_GENERATE;
    const cJSON *ka = field(root, "keep_alive");
    if (ka) {
        rlx_error kerr = {0};
        if (rlx_keep_alive_json(ka, &r->keep_alive_s, &kerr))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "keep_alive", "%s.", kerr.msg);
        r->has_keep_alive = true;
    }
    const cJSON *u = field(root, "user");
    if (u && !cJSON_IsString(u))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "user", "'user' must be a string.");
    const cJSON *so = field(root, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "stream_options", "'stream_options' must be an object.");
        const cJSON *iu = field(so, "include_usage");
        if (iu && !cJSON_IsBool(iu))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "stream_options.include_usage",
                                  "'stream_options.include_usage' must be a boolean.");
        r->include_usage = iu && cJSON_IsTrue(iu);
    }
    if ((rc = parse_stop(root, q, e))) return rc;
    if ((rc = rlx__api_parse_logit_bias(root, q, n_vocab, e))) return rc;
    if ((rc = parse_constraint(root, q, &r->grammar_param, e))) return rc;

    /* logprobs: an int for completions, a bool (+ top_logprobs) for chat and generate */
    const cJSON *lp = field(root, "logprobs");
    if (r->kind == RLX_API_COMPLETIONS) {
        if ((rc = get_int(root, "logprobs", 0, RLX_MAX_TOP_LOGPROBS, &x, &has, e))) return rc;
        if (has) r->logprobs = (int)x;
    } else if (lp) {
        if (!cJSON_IsBool(lp)) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "logprobs", "'logprobs' must be a boolean.");
        if (cJSON_IsTrue(lp)) r->logprobs = 0;
    }
    if (r->kind != RLX_API_COMPLETIONS) {
        if ((rc = get_int(root, "top_logprobs", 0, RLX_MAX_TOP_LOGPROBS, &x, &has, e))) return rc;
        if (has) {
            if (r->logprobs < 0)
                return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "top_logprobs",
                                      "'top_logprobs' requires 'logprobs' to be true.");
            r->logprobs = (int)x;
        }
    }
    q->top_logprobs = r->logprobs;
    return 0;
}

/* ---- prompts and messages ------------------------------------------------------------- */

static int add_prompt(rlx_api_request *r, const cJSON *v, const char *name, int32_t n_vocab,
                      rlx_api_error *e)
{
    if (r->n_prompts >= MAX_PROMPTS)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' may hold at most %d prompts.", name, MAX_PROMPTS);
    rlx_api_prompt *p = &r->prompts[r->n_prompts];
    if (!strcmp(name, "input_ids") && !cJSON_IsArray(v))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'input_ids' must be an array of token ids (integers).");
    if (cJSON_IsString(v)) {
        if (!(p->text = strdup(v->valuestring))) return oom(e);
    } else if (cJSON_IsArray(v)) {
        int rc = get_ids(v, name, n_vocab, &p->ids, &p->n_ids, e);
        if (rc) return rc;
        if (p->n_ids == 0) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must not be empty.", name);
    } else {
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name,
                              "'%s' must be a string, an array of token ids, or an array of those.", name);
    }
    r->n_prompts++;
    return 0;
}

static int parse_prompts(const cJSON *root, rlx_api_request *r, int32_t n_vocab, rlx_api_error *e)
{
    const char *name = "prompt";
    const cJSON *v = field(root, "prompt");
    if (v && r->kind == RLX_API_GENERATE && field(root, "input_ids")) /* the ids were silently ignored */
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "input_ids", "Give either 'prompt' or 'input_ids', not both.");
    if (r->kind == RLX_API_GENERATE && cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0 && !cJSON_IsNumber(cJSON_GetArrayItem(v, 0)))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "prompt", "'prompt' must be a string or an array of token ids: "
                              "/v1/generate answers one prompt (/v1/completions takes several).");
    if (!v && r->kind == RLX_API_GENERATE && (v = field(root, "input_ids"))) name = "input_ids";
    if (!v)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, r->kind == RLX_API_GENERATE
                              ? "Either 'prompt' or 'input_ids' is required."
                              : "'prompt' is required.");
    r->prompts = calloc(MAX_PROMPTS, sizeof *r->prompts);
    if (!r->prompts) return oom(e);
    r->cap_prompts = MAX_PROMPTS;
    /* a list of strings or of id lists is a batch; a flat list of ints is one prompt */
    if (cJSON_IsArray(v) && r->kind == RLX_API_COMPLETIONS && cJSON_GetArraySize(v) > 0
        && !cJSON_IsNumber(cJSON_GetArrayItem(v, 0))) {
        const cJSON *it;
        cJSON_ArrayForEach(it, v) {
            int rc = add_prompt(r, it, name, n_vocab, e);
            if (rc) return rc;
        }
        return 0;
    }
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, name, "'%s' must not be empty.", name);
    return add_prompt(r, v, name, n_vocab, e);
}

/* Content given as an array of parts becomes its text parts joined with "\n", as llama.cpp
 * (common_chat_msg's concat_typed_text) and vLLM join them for templates that take a string. */
static int normalise_content(cJSON *msg, int i, rlx_api_error *e)
{
    cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
    if (!c || cJSON_IsNull(c) || cJSON_IsString(c)) return 0;
    if (!cJSON_IsArray(c))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages",
                              "messages[%d].content must be a string or an array of content parts.", i);
    size_t len = 0;
    bool nul = false; /* a part holds U+0000 (stored as C0 80, models/json.h): so does the whole */
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(part, "type");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text"))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages",
                                  "messages[%d].content: only parts of type 'text' are supported.", i);
        if (!cJSON_IsString(t))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages",
                                  "messages[%d].content: a part of type 'text' needs a string 'text'.", i);
        len += strlen(t->valuestring) + 1;
        nul = nul || t->valueint == RLX_JSON_STR_NUL;
    }
    char *s = malloc(len + 1), *p = s;
    if (!s) return oom(e);
    cJSON_ArrayForEach(part, c) {
        const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        size_t l = strlen(t);
        if (p > s) *p++ = '\n';
        memcpy(p, t, l);
        p += l;
    }
    *p = 0;
    cJSON *str = cJSON_CreateString(s);
    free(s);
    if (!str) return oom(e);
    if (nul) str->valueint = RLX_JSON_STR_NUL;
    cJSON_ReplaceItemInObjectCaseSensitive(msg, "content", str);
    return 0;
}

/* An assistant message with tool_calls, as OpenAI clients send it, for templates written against
 * transformers' shape (its content null or absent: normalise_null_content). tool_calls must be
 * an array of objects. function.arguments stays as sent here: whether a
 * template gets it as a string or an object depends on the template (rlx_api_chat_context). */
/* A message's members that are null (tool_calls, function_call, refusal, audio, name: what
 * client libraries send for "none") are left out, as llama-server and vLLM build the template's
 * messages: a template tests `message.tool_calls is defined` and then iterates it ("'NoneType'
 * object is not iterable" on Llama 3.x and Hermes). An empty tool_calls is no calls either.
 * Content is normalise_null_content's. */
static void drop_null_members(cJSON *msg)
{
    for (cJSON *it = msg->child, *next; it; it = next) {
        next = it->next;
        if (!it->string || !strcmp(it->string, "content")) continue;
        if (cJSON_IsNull(it) || (!strcmp(it->string, "tool_calls") && cJSON_IsArray(it) && !it->child))
            cJSON_Delete(cJSON_DetachItemViaPointer(msg, it));
    }
}

static int normalise_tool_calls(cJSON *msg, int i, rlx_api_error *e)
{
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
    if (!calls) return 0;
    if (!cJSON_IsArray(calls))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages", "messages[%d].tool_calls must be an array.", i);
    int j = 0;
    cJSON *call;
    cJSON_ArrayForEach(call, calls) {
        if (!cJSON_IsObject(call))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages", "messages[%d].tool_calls[%d] must be an object.", i, j);
        /* the templates print the name and iterate the arguments: a call without them failed
           inside the template ("tojson: Undefined") */
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsObject(fn) || !cJSON_IsString(name))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages",
                                  "messages[%d].tool_calls[%d].function must be an object with a string 'name'.", i, j);
        /* arguments are JSON text that becomes an object for the template: a \u0000 escape in it
           would decode to a NUL there, which cuts the prompt */
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (cJSON_IsString(args) && rlx_api_has_escaped_nul(args->valuestring, strlen(args->valuestring)))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages",
                                  "messages[%d].tool_calls[%d].function.arguments must not contain NUL characters "
                                  "(\\u0000).", i, j);
        j++;
    }
    return 0;
}

/* Content null or absent: "" (templates concatenate it, as vLLM gives them) beside tool_calls,
 * for an assistant's turn (a refusal replayed, a turn that said nothing) or a tool's result; a
 * user's or a system's turn without content is a 400 naming it. */
static int normalise_null_content(cJSON *msg, const char *role, int i, rlx_api_error *e)
{
    cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
    if (c && !cJSON_IsNull(c)) return 0;
    if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(msg, "tool_calls")) && strcmp(role, "assistant") &&
        strcmp(role, "tool") && strcmp(role, "function"))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages",
                              "messages[%d].content is required for role '%s' (a string or an array of text parts).", i,
                              role);
    cJSON *empty = cJSON_CreateString("");
    if (!empty) return oom(e);
    if (c) cJSON_ReplaceItemInObjectCaseSensitive(msg, "content", empty);
    else if (!cJSON_AddItemToObject(msg, "content", empty)) {
        cJSON_Delete(empty);
        return oom(e);
    }
    return 0;
}

/* vLLM's chat template options: add_generation_prompt, continue_final_message,
 * chat_template_kwargs */
static int parse_template_options(cJSON *root, rlx_api_request *r, rlx_api_error *e)
{
    int rc;
    r->add_generation_prompt = true;
    if ((rc = get_bool(root, "add_generation_prompt", &r->add_generation_prompt, e))) return rc;
    if ((rc = get_bool(root, "continue_final_message", &r->continue_final_message, e))) return rc;
    if (r->add_generation_prompt && r->continue_final_message)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "continue_final_message",
                              "Cannot set both 'continue_final_message' and 'add_generation_prompt' to true.");
    const cJSON *kw = field(root, "chat_template_kwargs");
    if (!kw) return 0;
    if (!cJSON_IsObject(kw))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "chat_template_kwargs", "'chat_template_kwargs' must be an object.");
    if (cJSON_GetObjectItemCaseSensitive(kw, "messages"))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "chat_template_kwargs",
                              "'chat_template_kwargs' cannot set 'messages'; send them as 'messages'.");
    r->template_kwargs = cJSON_DetachItemFromObjectCaseSensitive(root, "chat_template_kwargs");
    return 0;
}

static int parse_messages(cJSON *root, rlx_api_request *r, rlx_api_error *e)
{
    cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!m || cJSON_IsNull(m)) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages", "'messages' is required.");
    if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) == 0)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages", "'messages' must be a non-empty array.");
    int i = 0;
    cJSON *msg;
    cJSON_ArrayForEach(msg, m) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        if (!cJSON_IsObject(msg) || !cJSON_IsString(role))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages",
                                  "messages[%d] must be an object with a string 'role'.", i);
        drop_null_members(msg);
        int rc = normalise_content(msg, i, e);
        if (!rc) rc = normalise_tool_calls(msg, i, e);
        if (!rc) rc = normalise_null_content(msg, role->valuestring, i, e);
        if (rc) return rc;
        i++;
    }
    r->messages = cJSON_DetachItemFromObjectCaseSensitive(root, "messages");
    int rc = rlx_api_parse_tools(root, r, e);
    if (rc) return rc;
    return parse_template_options(root, r, e);
}

/* Whether a JSON text holds the escape \u0000, or a NUL byte itself. cJSON decodes the escape
 * into a NUL byte, where every C string after it is cut: a session_id "a\u0000b" would silently
 * name session "a"; a raw NUL was reported as text that is not UTF-8. (Valid JSON has
 * backslashes only inside strings, each starting one escape.) */
bool rlx_api_has_escaped_nul(const char *b, size_t n)
{
    if (memchr(b, 0, n)) return true;
    for (size_t i = 0; i + 1 < n; i++) {
        if (b[i] != '\\') continue;
        if (b[i + 1] == 'u' && i + 5 < n && !memcmp(b + i + 2, "0000", 4)) return true;
        i++; /* the escaped character */
    }
    return false;
}

int rlx_api_session_check(const rlx_api_request *r, rlx_api_error *e)
{
    const char *id = r->base ? r->base->session_id : NULL;
    if (!id) return 0;
    rlx_error serr = {0};
    if (rlx_session_id_check(id, &serr)) /* the field named, as OpenAI's errors do */
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "session_id", "%s.", serr.msg);
    if (r->n > 1 || r->n_prompts > 1)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "session_id", "A session continues one conversation: use it with "
                              "n = 1 and a single prompt.");
    return 0;
}

int rlx_api_parse(rlx_api_request *r, rlx_api_kind kind, const char *body, size_t len,
                  int32_t n_vocab, rlx_api_error *e)
{
    /* read as Python's json reads it, so messages and tools reach the chat template with their
     * numbers' types (1.0 stays a float) (models/json.h) */
    cJSON *root = NULL;
    rlx_error jerr = {0};
    if (rlx_json_parse(body, len, &root, &jerr)) {
        memset(r, 0, sizeof *r);
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, NULL, "The request body is not valid JSON (%s).", jerr.msg);
    }
    int rc = rlx_api_check_nul(root, body, len, e);
    if (rc) {
        cJSON_Delete(root);
        memset(r, 0, sizeof *r);
        return rc;
    }
    rc = rlx_api_parse_json(r, kind, root, n_vocab, e);
    cJSON_Delete(root);
    return rc;
}

int rlx_api_parse_json(rlx_api_request *r, rlx_api_kind kind, cJSON *root, int32_t n_vocab,
                       rlx_api_error *e)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->n = 1;
    r->logprobs = -1;
    r->max_tokens_param = "max_tokens";
    if (!(r->base = rlx_request_new())) return oom(e);
    /* OpenAI's completions default is 16 tokens; chat and native run to EOS or context end */
    if (kind == RLX_API_COMPLETIONS) r->base->max_tokens = 16;
    int rc = 0;
    if (!cJSON_IsObject(root)) {
        rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, NULL, "The request body must be a JSON object.");
        goto out;
    }
    if ((rc = rlx_api_check_utf8(root, e))) goto out;
    if (rlx_api_kind_embeds(kind)) {
        rc = rlx__api_parse_embed(root, r, e);
        goto out;
    }
    if ((rc = parse_common(root, r, n_vocab, e)) || (rc = rlx__api_refuse_unsupported(root, e))) goto out;
    if (kind == RLX_API_COMPLETIONS && (rc = get_bool(root, "echo", &r->echo, e))) goto out;
    if (kind == RLX_API_CHAT) rc = parse_messages(root, r, e);
    else rc = parse_prompts(root, r, n_vocab, e);
    if (rc) goto out;
    if ((rc = rlx_api_session_check(r, e))) goto out;
    if (kind == RLX_API_GENERATE && r->n != 1) {
        rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "n", "'n' must be 1 for /v1/generate.");
        goto out;
    }
    if (r->n * (r->n_prompts ? r->n_prompts : 1) > MAX_PROMPTS)
        rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "n", "'n' times the number of prompts may be at most %d.",
                            MAX_PROMPTS);
out:
    return rc;
}

void rlx_api_request_free(rlx_api_request *r)
{
    if (!r) return;
    free(r->model);
    for (size_t i = 0; r->prompts && i < r->cap_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    cJSON_Delete(r->messages);
    cJSON_Delete(r->tools);
    free(r->tool_name);
    free(r->embed.query);
    cJSON_Delete(r->template_kwargs);
    rlx_request_free(r->base);
    memset(r, 0, sizeof *r);
}
