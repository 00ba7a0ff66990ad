/* json_schema_scalar.c - the schemas of one JSON scalar for the walk (json_schema.c): the
 * `format` table, integers and numbers (bounds, multipleOf, number formats) and strings
 * (lengths, pattern, string formats, contentEncoding). Caller's thread, inside one
 * rlx_json_schema_to_gbnf call. */
#include "engine/json_schema_walk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- formats ---- */

/* String formats: name, rule (json_schema_prim.c), and the shortest and longest strings the rule
 * writes (characters, all ASCII; -1: unbounded), so that minLength / maxLength that every one of
 * them meets (an e-mail's maxLength 254) can stand beside the format. Each rule is a subset of
 * what the RFC and Ajv's "full" formats (ajv-formats) accept; Ajv's iso-time / iso-date-time
 * allow what RFC 3339's time / date-time do and more (no offset, a space for the T). */
static const struct { const char *name, *rule; int lo, hi; } string_formats[] = {
    {"date", "date", 10, 10}, {"time", "time", 9, 24}, {"date-time", "date-time", 20, 35},
    {"iso-time", "time", 9, 24}, {"iso-date-time", "date-time", 20, 35}, {"duration", "duration", -1, -1},
    {"uuid", "uuid", 36, 36}, {"email", "email", 5, 232}, {"hostname", "hostname", 1, 251},
    {"ipv4", "ipv4", 7, 15}, {"ipv6", "ipv6", 15, 39}, {"uri", "uri", -1, -1},
    {"uri-reference", "uri-reference", -1, -1}, {"byte", "byte", -1, -1}, {"json-pointer", "json-pointer", -1, -1},
    {"relative-json-pointer", "relative-json-pointer", -1, -1}};

/* The number formats (OpenAPI's, which ajv-formats checks): what they ask of a number. */
int rlx__js_numeric_format(const char *name)
{
    static const char *const names[] = {"int32", "int64", "float", "double"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(names[i], name)) return NF_INT32 + i;
    return NF_NONE;
}

static bool string_format(const char *name)
{
    for (size_t i = 0; i < RLX_ARRAY_LEN(string_formats); i++)
        if (!strcmp(string_formats[i].name, name)) return true;
    return false;
}

/* A number's or integer's `format`: NF_* (NF_NONE also for a string format, which says nothing
 * of numbers); -1 and a failure when it is no format this compiler knows. */
static int number_format(rlx__js *j, const cJSON *s)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    if (!fmt) return NF_NONE;
    if (!cJSON_IsString(fmt)) return rlx__js_fail(j, RLX_EINVAL, "'format' must be a string"), -1;
    int nf = rlx__js_numeric_format(fmt->valuestring);
    if (nf || string_format(fmt->valuestring)) return nf;
    rlx__js_fail(j, RLX_EINVAL, "'format' \"%.64s\" is not supported (numbers: int32, int64, float, double)", fmt->valuestring);
    return -1;
}

/* ---- numbers and strings ---- */


/* Integer bounds from minimum / maximum / exclusiveMinimum / exclusiveMaximum (numbers, or the
 * draft-4 booleans). */
char *rlx__js_integer(rlx__js *j, const cJSON *s)
{
    bool has_lo = false, has_hi = false;
    long long lo = 0, hi = 0;
    static const char *const kws[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int k = 0; k < 4; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, kws[k]);
        if (!v || (cJSON_IsBool(v) && (k == 1 || k == 3))) continue; /* only draft 4's exclusive* are booleans */
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || fabs(v->valuedouble) > (double)RLX__INT_BOUND)
            return rlx__js_fail(j, RLX_ERANGE, "'%s' must be a number within +-(2^53-1)", kws[k]), NULL;
        double d = v->valuedouble;
        bool excl = k == 1 || k == 3;
        if (k == 0 || k == 2) { /* draft 4: exclusiveMinimum: true makes minimum exclusive */
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, kws[k + 1]);
            excl = cJSON_IsTrue(x);
        }
        if (k < 2) {
            long long b = excl ? (long long)floor(d) + 1 : (long long)ceil(d);
            if (!has_lo || b > lo) lo = b;
            has_lo = true;
        } else {
            long long b = excl ? (long long)ceil(d) - 1 : (long long)floor(d);
            if (!has_hi || b < hi) hi = b;
            has_hi = true;
        }
    }
    int nf = number_format(j, s);
    if (nf < 0) return NULL;
    if (nf == NF_INT32) { /* int64, float and double hold every integer the grammar writes */
        if (!has_lo || lo < INT32_MIN) lo = INT32_MIN, has_lo = true;
        if (!has_hi || hi > INT32_MAX) hi = INT32_MAX, has_hi = true;
    }
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(s, "multipleOf");
    if (mo && (!cJSON_IsNumber(mo) || !(mo->valuedouble > 0) || mo->valuedouble != floor(mo->valuedouble) ||
               mo->valuedouble > (double)RLX__INT_BOUND))
        return rlx__js_fail(j, RLX_EINVAL, "'multipleOf' other than a positive whole number is not supported"), NULL;
    if (mo && mo->valuedouble > 1) {
        if ((has_lo && lo > RLX__INT_BOUND) || (has_hi && hi < -RLX__INT_BOUND) || (has_lo && has_hi && lo > hi))
            return rlx__js_fail(j, RLX_EINVAL, "no integer lies between 'minimum' and 'maximum'"), NULL;
        if (has_lo && lo < -RLX__INT_BOUND) lo = -RLX__INT_BOUND;
        if (has_hi && hi > RLX__INT_BOUND) hi = RLX__INT_BOUND;
        return rlx__js_multiples(j, (long long)mo->valuedouble, has_lo, lo, has_hi, hi);
    }
    if (!has_lo && !has_hi) return strdup("integer");
    if ((has_lo && lo > RLX__INT_BOUND) || (has_hi && hi < -RLX__INT_BOUND))
        return rlx__js_fail(j, RLX_ERANGE, "integer bounds beyond +-(2^53-1) are not supported"), NULL;
    rlx__sb b = {0};
    if (!rlx__int_range(&b, has_lo, lo, has_hi, hi)) {
        free(rlx__sb_take(&b));
        return rlx__js_fail(j, RLX_EINVAL, "no integer meets 'minimum' / 'exclusiveMinimum' and 'maximum' / 'exclusiveMaximum' (the "
                            "least allowed is %lld, the greatest %lld)", lo,
                            hi), NULL;
    }
    return rlx__js_rule(j, "int", rlx__js_take(j, &b));
}

/* Number bounds: integers within +-RLX__NUM_BOUND (inclusive or exclusive; the draft-4
 * booleans too), exact through rlx__num_range; a fractional bound is refused. */
char *rlx__js_number(rlx__js *j, const cJSON *s)
{
    int nf = number_format(j, s);
    if (nf < 0) return NULL;
    if (nf == NF_INT32 || nf == NF_INT64) return rlx__js_integer(j, s); /* whole numbers only */
    if (cJSON_GetObjectItemCaseSensitive(s, "multipleOf")) return rlx__js_integer(j, s); /* of a whole number: whole */
    bool has[2] = {false, false}, excl[2] = {false, false};
    long long v[2] = {0, 0};
    static const char *const kws[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int k = 0; k < 4; k++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, kws[k]);
        if (!x || (cJSON_IsBool(x) && (k == 1 || k == 3))) continue;
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || fabs(x->valuedouble) > (double)RLX__NUM_BOUND)
            return rlx__js_fail(j, RLX_EINVAL, "'%s' on type number must be an integer within +-%lld (other bounds are not supported)",
                                kws[k], RLX__NUM_BOUND), NULL;
        long long d = (long long)x->valuedouble;
        bool ex = k == 1 || k == 3;
        if (k == 0 || k == 2) ex = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, kws[k + 1]));
        int side = k >= 2;
        /* the tighter bound wins; at equal values the exclusive one */
        bool tighter = !has[side] || (side ? d < v[side] : d > v[side]) || (d == v[side] && ex);
        if (tighter) {
            v[side] = d;
            excl[side] = ex;
            has[side] = true;
        }
    }
    if (!has[0] && !has[1]) return strdup(nf == NF_FLOAT ? "float" : "number"); /* bounds keep within a float's range */
    rlx__sb b = {0};
    if (!rlx__num_range(&b, has[0], v[0], excl[0], has[1], v[1], excl[1])) {
        free(rlx__sb_take(&b));
        return rlx__js_fail(j, RLX_EINVAL, "no number lies between the 'minimum' and 'maximum' bounds"), NULL;
    }
    return rlx__js_rule(j, "num", rlx__js_take(j, &b));
}

static bool get_count(rlx__js *j, const cJSON *s, const char *kw, long long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, kw);
    if (!v) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble))
        return rlx__js_fail(j, RLX_EINVAL, "'%s' must be a non-negative integer", kw);
    if (v->valuedouble > RLX_GRAMMAR_MAX_REPEAT)
        return rlx__js_fail(j, RLX_ERANGE, "'%s' over %d is not supported", kw, RLX_GRAMMAR_MAX_REPEAT);
    *out = (long long)v->valuedouble;
    return true;
}

bool rlx__js_counts(rlx__js *j, const cJSON *s, const char *kmin, const char *kmax, long long *mn, long long *mx)
{
    *mn = 0;
    *mx = -1;
    if (!get_count(j, s, kmin, mn) || !get_count(j, s, kmax, mx)) return false;
    if (*mx >= 0 && *mx < *mn) return rlx__js_fail(j, RLX_EINVAL, "'%s' is below '%s': nothing matches", kmax, kmin);
    return true;
}

/* pattern and minLength/maxLength together: for a pattern of one repeated character
 * (^[a-z0-9_]+$, ^\\d{3,8}$, ...) the lengths narrow its counts; any other is refused. */
static char *pattern_with_lengths(rlx__js *j, const char *pat, long long mn, long long mx)
{
    rlx_error e = {0};
    char *atom = NULL;
    int qmin, qmax, shape = rlx__regex_one_repeated_char(pat, &atom, &qmin, &qmax, &e);
    if (shape < 0) return rlx__js_fail(j, e.code, "'pattern': %s", e.msg), NULL;
    if (!shape)
        return rlx__js_fail(j, RLX_EINVAL, "'pattern' together with 'minLength'/'maxLength' is supported only for a "
                            "pattern of one repeated character (such as ^[a-z0-9_]+$)"), NULL;
    long long lo = RLX_MAX(mn, (long long)qmin), hi = qmax < 0 ? mx : mx < 0 ? qmax : RLX_MIN(mx, (long long)qmax);
    if (hi >= 0 && hi < lo) {
        free(atom);
        return rlx__js_fail(j, RLX_EINVAL, "'pattern' and 'minLength'/'maxLength' leave no length: nothing matches"), NULL;
    }
    rlx__sb b = {0};
    if (hi < 0) rlx__sb_printf(&b, "\"\\\"\" %s{%lld,} \"\\\"\"", atom, lo);
    else rlx__sb_printf(&b, "\"\\\"\" %s{%lld,%lld} \"\\\"\"", atom, lo, hi);
    free(atom);
    return rlx__js_rule(j, "pattern", rlx__js_take(j, &b));
}

char *rlx__js_string(rlx__js *j, const cJSON *s)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format"), *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    long long mn, mx;
    if (!rlx__js_counts(j, s, "minLength", "maxLength", &mn, &mx)) return NULL;
    bool lengths = mn > 0 || mx >= 0;
    if (fmt && !cJSON_IsString(fmt)) return rlx__js_fail(j, RLX_EINVAL, "'format' must be a string"), NULL;
    if (fmt && rlx__js_numeric_format(fmt->valuestring)) fmt = NULL; /* a number's format says nothing of strings */
    const cJSON *enc = cJSON_GetObjectItemCaseSensitive(s, "contentEncoding");
    if (enc) { /* base64 as format byte writes it; the other RFC 2045 encodings are refused */
        if (!cJSON_IsString(enc) || strcasecmp(enc->valuestring, "base64"))
            return rlx__js_fail(j, RLX_EINVAL, "'contentEncoding' other than \"base64\" is not supported"), NULL;
        if (fmt || pat || lengths)
            return rlx__js_fail(j, RLX_EINVAL, "'contentEncoding' together with '%s' is not supported",
                                fmt ? "format" : pat ? "pattern" : "minLength/maxLength"), NULL;
        return rlx__js_rule(j, "byte", strdup("\"\\\"\" byte \"\\\"\""));
    }
    if (fmt) {
        size_t i = 0;
        while (i < RLX_ARRAY_LEN(string_formats) && strcmp(string_formats[i].name, fmt->valuestring)) i++;
        if (i == RLX_ARRAY_LEN(string_formats))
            return rlx__js_fail(j, RLX_EINVAL, "'format' \"%.64s\" is not supported (strings: date, time, date-time, "
                                "iso-time, iso-date-time, duration, uuid, email, hostname, ipv4, ipv6, uri, uri-reference, "
                                "byte, json-pointer, relative-json-pointer; numbers: int32, int64, float, double)",
                                fmt->valuestring), NULL;
        if (pat) return rlx__js_fail(j, RLX_EINVAL, "'format' together with 'pattern' is not supported"), NULL;
        if (lengths) { /* met by every string the format's rule writes, or refused */
            int lo = string_formats[i].lo, hi = string_formats[i].hi;
            if (lo < 0 || mn > lo || (mx >= 0 && (hi < 0 || mx < hi))) {
                char range[64];
                if (lo < 0) snprintf(range, sizeof range, "of unbounded length");
                else snprintf(range, sizeof range, "of %d to %d characters", lo, hi);
                return rlx__js_fail(j, RLX_EINVAL, "'format' \"%s\" writes strings %s: a 'minLength'/'maxLength' inside that "
                                    "range is not supported (one that admits the whole range is)", fmt->valuestring,
                                    range), NULL;
            }
        }
        rlx__sb b = {0};
        rlx__sb_printf(&b, "\"\\\"\" %s \"\\\"\"", string_formats[i].rule);
        return rlx__js_rule(j, string_formats[i].rule, rlx__js_take(j, &b));
    }
    if (pat) {
        if (!cJSON_IsString(pat)) return rlx__js_fail(j, RLX_EINVAL, "'pattern' must be a string"), NULL;
        rlx_error e = {0};
        if (lengths) return pattern_with_lengths(j, pat->valuestring, mn, mx);
        char *g = rlx__regex_to_gbnf(pat->valuestring, &e);
        if (!g) return rlx__js_fail(j, e.code, "'pattern': %s", e.msg), NULL;
        rlx__sb b = {0};
        rlx__sb_printf(&b, "\"\\\"\" %s \"\\\"\"", g);
        free(g);
        return rlx__js_rule(j, "pattern", rlx__js_take(j, &b));
    }
    if (!lengths) return strdup("string");
    rlx__sb b = {0};
    if (mx < 0) rlx__sb_printf(&b, "\"\\\"\" char{%lld,} \"\\\"\"", mn);
    else rlx__sb_printf(&b, "\"\\\"\" char{%lld,%lld} \"\\\"\"", mn, mx);
    return rlx__js_rule(j, "str", rlx__js_take(j, &b));
}
