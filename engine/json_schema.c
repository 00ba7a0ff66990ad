/* json_schema.c - the JSON Schema walk (see json_schema.h): each schema becomes a GBNF
 * expression, compound ones a rule of their own; $ref targets are rules named once so that
 * recursion works; objects, arrays and the rest are in json_schema_obj.c. */
#include "engine/json_schema_walk.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors, paths, rules ---- */

bool rlx__js_fail(rlx__js *j, int code, const char *fmt, ...)
{
    if (j->failed) return false;
    j->failed = true;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rlx_errorf(j->err, code, "%s (at %s)", msg, j->path[0] ? j->path : "the schema's root");
    return false;
}

size_t rlx__js_push(rlx__js *j, const char *seg)
{
    size_t at = strlen(j->path);
    if (at + 2 < sizeof j->path) snprintf(j->path + at, sizeof j->path - at, "/%s", seg);
    return at;
}

void rlx__js_pop(rlx__js *j, size_t at) { j->path[at] = 0; }

static bool check_size(rlx__js *j)
{
    if (j->rules.oom) return rlx__js_fail(j, RLX_ENOMEM, "out of memory");
    if (j->rules.n > RLX_JSON_SCHEMA_MAX_GBNF)
        return rlx__js_fail(j, RLX_ERANGE, "the schema's grammar is over %u KiB", RLX_JSON_SCHEMA_MAX_GBNF >> 10);
    return true;
}

char *rlx__js_name(rlx__js *j, const char *hint)
{
    if (++j->n_rules > RLX_JSON_SCHEMA_MAX_RULES) {
        rlx__js_fail(j, RLX_ERANGE, "the schema needs over %d grammar rules", RLX_JSON_SCHEMA_MAX_RULES);
        return NULL;
    }
    char name[48];
    int n = snprintf(name, sizeof name, "s%zu-", j->n_rules);
    for (const char *h = hint ? hint : ""; *h && n < 40; h++)
        if ((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') || (*h >= '0' && *h <= '9')) name[n++] = *h;
    name[n] = 0;
    if (name[n - 1] == '-') name[n - 1] = 0;
    char *s = strdup(name);
    if (!s) rlx__js_fail(j, RLX_ENOMEM, "out of memory");
    return s;
}

void rlx__js_define(rlx__js *j, const char *name, const char *body)
{
    rlx__sb_printf(&j->rules, "%s ::= %s\n", name, body);
    check_size(j);
}

char *rlx__js_rule(rlx__js *j, const char *hint, char *body)
{
    if (!body) {
        if (!j->failed) rlx__js_fail(j, RLX_ENOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < j->n_dd; i++) /* the same body twice: one rule */
        if (!strcmp(j->dd[i].body, body)) {
            free(body);
            char *s = strdup(j->dd[i].name);
            if (!s) rlx__js_fail(j, RLX_ENOMEM, "out of memory");
            return s;
        }
    char *name = rlx__js_name(j, hint);
    if (!name) {
        free(body);
        return NULL;
    }
    rlx__js_define(j, name, body);
    if (j->n_dd == j->cap_dd) {
        size_t cap = j->cap_dd ? j->cap_dd * 2 : 16;
        void *p = realloc(j->dd, cap * sizeof *j->dd);
        if (!p) {
            free(body);
            free(name);
            rlx__js_fail(j, RLX_ENOMEM, "out of memory");
            return NULL;
        }
        j->dd = p;
        j->cap_dd = cap;
    }
    char *n2 = strdup(name);
    if (!n2) {
        free(body);
        free(name);
        rlx__js_fail(j, RLX_ENOMEM, "out of memory");
        return NULL;
    }
    j->dd[j->n_dd].body = body;
    j->dd[j->n_dd++].name = n2;
    return name;
}

char *rlx__js_take(rlx__js *j, rlx__sb *b)
{
    char *s = rlx__sb_take(b);
    if (!s) rlx__js_fail(j, RLX_ENOMEM, "out of memory");
    return s;
}

/* ---- keywords ---- */

static const struct { const char *name; int family; } keywords[] = {
    {"title", KW_ANNOT}, {"description", KW_ANNOT}, {"$schema", KW_ANNOT}, {"$id", KW_ANNOT},
    {"$anchor", KW_ANNOT}, {"default", KW_ANNOT}, {"examples", KW_ANNOT}, {"$comment", KW_ANNOT},
    {"deprecated", KW_ANNOT}, {"readOnly", KW_ANNOT}, {"writeOnly", KW_ANNOT},
    /* OpenAPI's (Pydantic's tagged unions): which property tells a oneOf/anyOf's branches
     * apart; the branches' own const values constrain it, so it is an annotation here */
    {"discriminator", KW_ANNOT}, {"example", KW_ANNOT}, {"contentMediaType", KW_ANNOT}, {"enumDescriptions", KW_ANNOT},
    {"markdownDescription", KW_ANNOT},
    /* OpenAPI 3.0's: null allowed beside the `type` (as Ajv reads it, which wants a type) */
    {"nullable", KW_TYPE},
    {"$defs", KW_DEFS}, {"definitions", KW_DEFS},
    {"type", KW_TYPE}, {"enum", KW_ENUM}, {"const", KW_ENUM},
    {"anyOf", KW_COMB}, {"oneOf", KW_COMB}, {"allOf", KW_COMB}, {"$ref", KW_COMB},
    {"properties", KW_OBJ}, {"required", KW_OBJ}, {"additionalProperties", KW_OBJ}, {"patternProperties", KW_OBJ},
    {"items", KW_ARR}, {"prefixItems", KW_ARR}, {"minItems", KW_ARR}, {"maxItems", KW_ARR},
    {"additionalItems", KW_ARR}, {"uniqueItems", KW_ARR}, {"minProperties", KW_OBJ}, {"maxProperties", KW_OBJ},
    {"minLength", KW_STR}, {"maxLength", KW_STR}, {"pattern", KW_STR}, {"format", KW_STR}, {"contentEncoding", KW_STR},
    {"minimum", KW_NUM}, {"maximum", KW_NUM}, {"exclusiveMinimum", KW_NUM}, {"exclusiveMaximum", KW_NUM},
    {"multipleOf", KW_NUM},
};

int rlx__js_family(const char *key)
{
    if (!strncmp(key, "x-", 2)) return KW_ANNOT; /* OpenAPI's extensions */
    for (size_t i = 0; i < RLX_ARRAY_LEN(keywords); i++)
        if (!strcmp(keywords[i].name, key)) return keywords[i].family;
    return KW_UNKNOWN;
}

/* The JSON types a `type` keyword allows (0 and a failure when it is malformed). */
static unsigned type_bits(rlx__js *j, const cJSON *t)
{
    static const struct { const char *name; unsigned bit; } names[] = {
        {"null", T_NULL}, {"boolean", T_BOOL}, {"integer", T_INT}, {"number", T_NUM},
        {"string", T_STR}, {"array", T_ARR}, {"object", T_OBJ},
    };
    unsigned bits = 0;
    const cJSON *one = cJSON_IsArray(t) ? t->child : t;
    for (; one; one = cJSON_IsArray(t) ? one->next : NULL) {
        unsigned b = 0;
        for (size_t i = 0; cJSON_IsString(one) && i < RLX_ARRAY_LEN(names); i++)
            if (!strcmp(names[i].name, one->valuestring)) b = names[i].bit;
        if (!b) {
            rlx__js_fail(j, RLX_EINVAL, "'type' must be a type name or an array of them (%s, %s, %s, %s, %s, %s, %s)",
                         "null", "boolean", "integer", "number", "string", "array", "object");
            return 0;
        }
        bits |= b;
    }
    if (!bits) rlx__js_fail(j, RLX_EINVAL, "'type' is an empty array: nothing matches");
    return bits;
}

/* The type of one JSON value, as type_bits counts them. */
unsigned rlx__js_value_type(const cJSON *v)
{
    if (cJSON_IsNull(v)) return T_NULL;
    if (cJSON_IsBool(v)) return T_BOOL;
    if (cJSON_IsNumber(v)) return v->valuedouble == floor(v->valuedouble) ? T_INT | T_NUM : T_NUM;
    if (cJSON_IsString(v)) return T_STR;
    if (cJSON_IsArray(v)) return T_ARR;
    return T_OBJ;
}

/* ---- $ref ---- */

const cJSON *rlx__js_resolve(rlx__js *j, const char *ref)
{
    if (ref[0] != '#')
        return rlx__js_fail(j, RLX_EINVAL, "'$ref' '%.200s' is not local: only \"#...\" references are supported", ref), NULL;
    if (ref[1] && ref[1] != '/')
        return rlx__js_fail(j, RLX_EINVAL, "'$ref' '%.200s': anchors are not supported, only JSON pointers", ref), NULL;
    const cJSON *at = j->root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char seg[256];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof seg) {
            char c = *p++;
            if (c == '~' && (*p == '0' || *p == '1')) c = *p++ == '0' ? '~' : '/';
            else if (c == '%' && p[0] && p[1]) {
                int h = 0, ok = 1;
                for (int k = 0; k < 2; k++) {
                    char d = p[k];
                    int v = d >= '0' && d <= '9' ? d - '0' : (d | 0x20) >= 'a' && (d | 0x20) <= 'f' ? (d | 0x20) - 'a' + 10 : -1;
                    if (v < 0) ok = 0;
                    h = h * 16 + v;
                }
                if (ok) {
                    c = (char)h;
                    p += 2;
                }
            }
            seg[n++] = c;
        }
        seg[n] = 0;
        if (cJSON_IsArray(at)) {
            char *end;
            long k = strtol(seg, &end, 10);
            at = *seg && !*end && k >= 0 ? cJSON_GetArrayItem(at, (int)k) : NULL;
        } else {
            at = cJSON_IsObject(at) ? cJSON_GetObjectItemCaseSensitive(at, seg) : NULL;
        }
        if (!at) return rlx__js_fail(j, RLX_EINVAL, "'$ref' '%.200s' points at nothing in the schema", ref), NULL;
    }
    return at;
}

static char *visit_ref(rlx__js *j, const char *ref)
{
    for (size_t i = 0; i < j->n_refs; i++)
        if (!strcmp(j->refs[i].ref, ref)) return strdup(j->refs[i].name);
    const cJSON *target = rlx__js_resolve(j, ref);
    if (!target) return NULL;
    const char *hint = strrchr(ref, '/');
    char *name = rlx__js_name(j, hint ? hint + 1 : "root");
    if (!name) return NULL;
    if (j->n_refs == j->cap_refs) {
        size_t cap = j->cap_refs ? j->cap_refs * 2 : 8;
        void *p = realloc(j->refs, cap * sizeof *j->refs);
        if (!p) {
            free(name);
            return rlx__js_fail(j, RLX_ENOMEM, "out of memory"), NULL;
        }
        j->refs = p;
        j->cap_refs = cap;
    }
    char *r = strdup(ref), *n2 = strdup(name);
    if (!r || !n2) {
        free(r), free(n2), free(name);
        return rlx__js_fail(j, RLX_ENOMEM, "out of memory"), NULL;
    }
    j->refs[j->n_refs].ref = r;
    j->refs[j->n_refs++].name = n2;
    /* the target is compiled where it lives, so its errors name that place */
    char saved[sizeof j->path];
    memcpy(saved, j->path, sizeof saved);
    snprintf(j->path, sizeof j->path, "%s", ref[1] ? ref + 1 : "");
    char *body = rlx__js_visit(j, target, hint ? hint + 1 : "root");
    memcpy(j->path, saved, sizeof saved);
    if (!body) {
        free(name);
        return NULL;
    }
    rlx__js_define(j, name, body);
    free(body);
    return name;
}

/* ---- enum / const ---- */

static char *visit_enum(rlx__js *j, const cJSON *s, unsigned types)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum"), *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (en && !cJSON_IsArray(en)) return rlx__js_fail(j, RLX_EINVAL, "'enum' must be an array"), NULL;
    for (const cJSON *k = s->child; k; k = k->next) {
        int f = rlx__js_family(k->string);
        if (f != KW_ANNOT && f != KW_DEFS && f != KW_ENUM && f != KW_TYPE)
            return rlx__js_fail(j, RLX_EINVAL, "'%s' beside 'enum'/'const' is not supported", k->string), NULL;
    }
    size_t n = 0, cap = 0, bytes = 0;
    char **texts = NULL;
    bool oom = false;
    for (const cJSON *v = cn ? cn : en->child; v && !oom && bytes <= RLX_JSON_SCHEMA_MAX_GBNF; v = cn ? NULL : v->next) {
        if (!(rlx__js_value_type(v) & types)) continue;
        if (en && cn && !cJSON_Compare(v, cJSON_GetArrayItem(en, 0), true)) {
            bool found = false;
            for (const cJSON *e = en->child; e && !found; e = e->next) found = cJSON_Compare(v, e, true);
            if (!found) continue;
        }
        if (n == cap) {
            size_t c2 = cap ? 2 * cap : 16;
            void *p = realloc(texts, c2 * sizeof *texts);
            if (!p) {
                oom = true;
                break;
            }
            texts = p;
            cap = c2;
        }
        if (!(texts[n] = cJSON_PrintUnformatted(v))) {
            oom = true;
            break;
        }
        bytes += strlen(texts[n++]) + 3; /* the literal's quotes and " | " */
    }
    rlx__sb b = {0};
    const bool any = !oom && bytes <= RLX_JSON_SCHEMA_MAX_GBNF && n && rlx__gbnf_alternatives(&b, texts, n);
    for (size_t i = 0; i < n; i++) free(texts[i]);
    free(texts);
    if (oom || b.oom) {
        free(rlx__sb_take(&b));
        return rlx__js_fail(j, RLX_ENOMEM, "out of memory"), NULL;
    }
    if (bytes > RLX_JSON_SCHEMA_MAX_GBNF || b.n > RLX_JSON_SCHEMA_MAX_GBNF) {
        free(rlx__sb_take(&b));
        return rlx__js_fail(j, RLX_ERANGE, "'enum' is over %u KiB of grammar", RLX_JSON_SCHEMA_MAX_GBNF >> 10), NULL;
    }
    if (!any) {
        free(rlx__sb_take(&b));
        return rlx__js_fail(j, RLX_EINVAL, "'%s' has no value of the schema's type: nothing matches", cn ? "const" : "enum"), NULL;
    }
    return rlx__js_rule(j, cn ? "const" : "enum", rlx__js_take(j, &b));
}

/* ---- anyOf / oneOf ---- */

/* The JSON types (T_NUM standing for numbers and integers) an alternative may produce. */
static unsigned alt_types(rlx__js *j, const cJSON *s, int hops)
{
    if (cJSON_IsBool(s)) return cJSON_IsTrue(s) ? T_ALL : 0;
    if (!cJSON_IsObject(s) || hops > 16) return T_ALL;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (cJSON_IsString(ref)) {
        bool failed = j->failed;
        const cJSON *t = rlx__js_resolve(j, ref->valuestring);
        j->failed = failed;
        return t ? alt_types(j, t, hops + 1) : T_ALL;
    }
    unsigned bits = 0;
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum"), *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (cn) return rlx__js_value_type(cn) & T_NUM ? T_NUM : rlx__js_value_type(cn);
    if (cJSON_IsArray(en)) {
        for (const cJSON *v = en->child; v; v = v->next) bits |= rlx__js_value_type(v);
        return bits & (T_INT | T_NUM) ? (bits & ~T_INT) | T_NUM : bits;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (!t) return T_ALL;
    bool failed = j->failed;
    bits = type_bits(j, t);
    j->failed = failed;
    return bits & (T_INT | T_NUM) ? (bits & ~T_INT) | T_NUM : bits ? bits : T_ALL;
}

/* The schema a $ref chain ends at (s itself without one; NULL where it does not resolve). */
static const cJSON *deref(rlx__js *j, const cJSON *s)
{
    for (int hops = 0; hops <= 16 && cJSON_IsObject(s); hops++) {
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        if (!cJSON_IsString(ref)) return s;
        bool failed = j->failed;
        s = rlx__js_resolve(j, ref->valuestring);
        j->failed = failed;
    }
    return cJSON_IsObject(s) ? s : NULL;
}

/* Can two alternatives both match one instance? False only when that is certain: different
 * types, or objects with a required property whose const/enum values differ (also through
 * $ref, as Pydantic writes its tagged unions). */
static bool may_overlap(rlx__js *j, const cJSON *a, const cJSON *b)
{
    if (!(alt_types(j, a, 0) & alt_types(j, b, 0))) return false;
    if (!(a = deref(j, a)) || !(b = deref(j, b))) return true;
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "properties"), *pb = cJSON_GetObjectItemCaseSensitive(b, "properties");
    const cJSON *ra = cJSON_GetObjectItemCaseSensitive(a, "required");
    for (const cJSON *r = cJSON_IsArray(ra) ? ra->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) continue;
        const cJSON *sa = cJSON_GetObjectItemCaseSensitive(pa, r->valuestring);
        const cJSON *sb = cJSON_GetObjectItemCaseSensitive(pb, r->valuestring);
        const cJSON *ca = cJSON_GetObjectItemCaseSensitive(sa, "const"), *cb = cJSON_GetObjectItemCaseSensitive(sb, "const");
        const cJSON *ea = cJSON_GetObjectItemCaseSensitive(sa, "enum"), *eb = cJSON_GetObjectItemCaseSensitive(sb, "enum");
        if ((!ca && !cJSON_IsArray(ea)) || (!cb && !cJSON_IsArray(eb))) continue;
        bool common = false;
        for (const cJSON *x = ca ? ca : ea->child; x && !common; x = ca ? NULL : x->next)
            for (const cJSON *y = cb ? cb : eb->child; y && !common; y = cb ? NULL : y->next)
                common = cJSON_Compare(x, y, true);
        if (!common) return false;
    }
    return true;
}

static char *visit_alts(rlx__js *j, const cJSON *s, const cJSON *list, const char *kw)
{
    for (const cJSON *k = s->child; k; k = k->next) {
        int f = rlx__js_family(k->string);
        if (f != KW_ANNOT && f != KW_DEFS && strcmp(k->string, kw))
            return rlx__js_fail(j, RLX_EINVAL, "'%s' beside '%s' is not supported", k->string, kw), NULL;
    }
    if (!cJSON_IsArray(list) || !list->child)
        return rlx__js_fail(j, RLX_EINVAL, "'%s' must be a non-empty array of schemas", kw), NULL;
    if (!strcmp(kw, "oneOf"))
        for (const cJSON *a = list->child; a; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (may_overlap(j, a, b))
                    return rlx__js_fail(j, RLX_EINVAL, "'oneOf' alternatives that may both match are not supported: they "
                                                      "must differ in type or in a required property's const/enum "
                                                      "(anyOf has no such limit)"), NULL;
    rlx__sb b = {0};
    int i = 0;
    for (const cJSON *a = list->child; a; a = a->next, i++) {
        char seg[32];
        snprintf(seg, sizeof seg, "%s/%d", kw, i);
        size_t at = rlx__js_push(j, seg);
        char *e = rlx__js_visit(j, a, kw);
        rlx__js_pop(j, at);
        if (!e) {
            free(rlx__sb_take(&b));
            return NULL;
        }
        rlx__sb_puts(&b, i ? " | " : "");
        rlx__sb_puts(&b, e);
        free(e);
    }
    return rlx__js_rule(j, kw, rlx__js_take(j, &b));
}

/* ---- formats ---- */

/* String formats: name, rule (json_schema_prim.c). Each rule is a subset of what the RFC and
 * Ajv's "full" formats (ajv-formats) accept; Ajv's iso-time / iso-date-time allow what RFC
 * 3339's time / date-time do and more (no offset, a space for the T). */
static const char *const string_formats[][2] = {
    {"date", "date"}, {"time", "time"}, {"date-time", "date-time"}, {"iso-time", "time"},
    {"iso-date-time", "date-time"}, {"duration", "duration"}, {"uuid", "uuid"}, {"email", "email"},
    {"hostname", "hostname"}, {"ipv4", "ipv4"}, {"ipv6", "ipv6"}, {"uri", "uri"},
    {"uri-reference", "uri-reference"}, {"byte", "byte"}, {"json-pointer", "json-pointer"},
    {"relative-json-pointer", "relative-json-pointer"}};

enum { NF_NONE, NF_INT32, NF_INT64, NF_FLOAT, NF_DOUBLE };

/* The number formats (OpenAPI's, which ajv-formats checks): what they ask of a number. */
static int numeric_format(const char *name)
{
    static const char *const names[] = {"int32", "int64", "float", "double"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(names[i], name)) return NF_INT32 + i;
    return NF_NONE;
}

static bool string_format(const char *name)
{
    for (size_t i = 0; i < RLX_ARRAY_LEN(string_formats); i++)
        if (!strcmp(string_formats[i][0], name)) return true;
    return false;
}

/* A number's or integer's `format`: NF_* (NF_NONE also for a string format, which says nothing
 * of numbers); -1 and a failure when it is no format this compiler knows. */
static int number_format(rlx__js *j, const cJSON *s)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    if (!fmt) return NF_NONE;
    if (!cJSON_IsString(fmt)) return rlx__js_fail(j, RLX_EINVAL, "'format' must be a string"), -1;
    int nf = numeric_format(fmt->valuestring);
    if (nf || string_format(fmt->valuestring)) return nf;
    rlx__js_fail(j, RLX_EINVAL, "'format' \"%.64s\" is not supported (numbers: int32, int64, float, double)", fmt->valuestring);
    return -1;
}

/* ---- numbers and strings ---- */


/* Integer bounds from minimum / maximum / exclusiveMinimum / exclusiveMaximum (numbers, or the
 * draft-4 booleans). */
static char *visit_integer(rlx__js *j, const cJSON *s)
{
    bool has_lo = false, has_hi = false;
    long long lo = 0, hi = 0;
    static const char *const kws[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int k = 0; k < 4; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, kws[k]);
        if (!v || cJSON_IsBool(v)) continue;
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
        return rlx__js_fail(j, RLX_EINVAL, "no integer lies between 'minimum' %lld and 'maximum' %lld", lo, hi), NULL;
    }
    return rlx__js_rule(j, "int", rlx__js_take(j, &b));
}

/* Number bounds: integers within +-RLX__NUM_BOUND (inclusive or exclusive; the draft-4
 * booleans too), exact through rlx__num_range; a fractional bound is refused. */
static char *visit_number(rlx__js *j, const cJSON *s)
{
    int nf = number_format(j, s);
    if (nf < 0) return NULL;
    if (nf == NF_INT32 || nf == NF_INT64) return visit_integer(j, s); /* whole numbers only */
    if (cJSON_GetObjectItemCaseSensitive(s, "multipleOf")) return visit_integer(j, s); /* of a whole number: whole */
    bool has[2] = {false, false}, excl[2] = {false, false};
    long long v[2] = {0, 0};
    static const char *const kws[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int k = 0; k < 4; k++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, kws[k]);
        if (!x || cJSON_IsBool(x)) continue;
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

static char *visit_string(rlx__js *j, const cJSON *s)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format"), *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    long long mn, mx;
    if (!rlx__js_counts(j, s, "minLength", "maxLength", &mn, &mx)) return NULL;
    bool lengths = mn > 0 || mx >= 0;
    if (fmt && !cJSON_IsString(fmt)) return rlx__js_fail(j, RLX_EINVAL, "'format' must be a string"), NULL;
    if (fmt && numeric_format(fmt->valuestring)) fmt = NULL; /* a number's format says nothing of strings */
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
        while (i < RLX_ARRAY_LEN(string_formats) && strcmp(string_formats[i][0], fmt->valuestring)) i++;
        if (i == RLX_ARRAY_LEN(string_formats))
            return rlx__js_fail(j, RLX_EINVAL, "'format' \"%.64s\" is not supported (strings: date, time, date-time, "
                                "iso-time, iso-date-time, duration, uuid, email, hostname, ipv4, ipv6, uri, uri-reference, "
                                "byte, json-pointer, relative-json-pointer; numbers: int32, int64, float, double)",
                                fmt->valuestring), NULL;
        if (pat || lengths)
            return rlx__js_fail(j, RLX_EINVAL, "'format' together with '%s' is not supported", pat ? "pattern" : "minLength/maxLength"), NULL;
        rlx__sb b = {0};
        rlx__sb_printf(&b, "\"\\\"\" %s \"\\\"\"", string_formats[i][1]);
        return rlx__js_rule(j, string_formats[i][1], rlx__js_take(j, &b));
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

/* ---- the walk ---- */

char *rlx__js_visit(rlx__js *j, const cJSON *s, const char *hint)
{
    if (j->failed) return NULL;
    if (cJSON_IsBool(s)) {
        if (cJSON_IsTrue(s)) return strdup("value");
        return rlx__js_fail(j, RLX_EINVAL, "the schema false matches nothing"), NULL;
    }
    if (!cJSON_IsObject(s)) return rlx__js_fail(j, RLX_EINVAL, "a schema must be an object or a boolean"), NULL;
    if (j->depth >= RLX_JSON_SCHEMA_MAX_DEPTH)
        return rlx__js_fail(j, RLX_ERANGE, "the schema nests deeper than %d levels", RLX_JSON_SCHEMA_MAX_DEPTH), NULL;
    unsigned families = 0;
    for (const cJSON *k = s->child; k; k = k->next) {
        int f = rlx__js_family(k->string);
        if (f == KW_UNKNOWN) return rlx__js_fail(j, RLX_EINVAL, "keyword '%.100s' is not supported", k->string), NULL;
        families |= 1u << f;
    }
    j->depth++;
    char *out = NULL;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf"), *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (ref) {
        for (const cJSON *k = s->child; k; k = k->next) {
            int f = rlx__js_family(k->string);
            if (f != KW_ANNOT && f != KW_DEFS && strcmp(k->string, "$ref")) {
                rlx__js_fail(j, RLX_EINVAL, "'%s' beside '$ref' is not supported", k->string);
                goto done;
            }
        }
        if (!cJSON_IsString(ref)) rlx__js_fail(j, RLX_EINVAL, "'$ref' must be a string");
        else out = visit_ref(j, ref->valuestring);
    } else if (any || one) {
        out = visit_alts(j, s, any ? any : one, any ? "anyOf" : "oneOf");
    } else if (cJSON_GetObjectItemCaseSensitive(s, "allOf")) {
        const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
        bool alone = cJSON_IsArray(all) && all->child && !all->child->next; /* one member, only annotations beside */
        for (const cJSON *k = s->child; k && alone; k = k->next) {
            int f = rlx__js_family(k->string);
            alone = f == KW_ANNOT || f == KW_DEFS || !strcmp(k->string, "allOf");
        }
        if (alone) { /* Pydantic's {"allOf": [{"$ref": ...}], "description": ...}: that member, of any type */
            size_t at = rlx__js_push(j, "allOf");
            rlx__js_push(j, "0");
            out = rlx__js_visit(j, all->child, hint);
            rlx__js_pop(j, at);
        } else if (type && !(type_bits(j, type) & T_OBJ)) {
            if (!j->failed) rlx__js_fail(j, RLX_EINVAL, "'allOf' is supported for object schemas only");
        } else if (!j->failed) {
            out = rlx__js_object(j, s, hint);
        }
    } else {
        unsigned types = type ? type_bits(j, type) : 0;
        if (j->failed) goto done;
        const cJSON *nullable = cJSON_GetObjectItemCaseSensitive(s, "nullable");
        if (nullable && !cJSON_IsBool(nullable)) {
            rlx__js_fail(j, RLX_EINVAL, "'nullable' must be a boolean");
            goto done;
        }
        if (cJSON_IsTrue(nullable)) {
            if (!types) {
                rlx__js_fail(j, RLX_EINVAL, "'nullable' without 'type' is not supported");
                goto done;
            }
            types |= T_NULL;
        }
        if (families & (1u << KW_ENUM)) {
            out = visit_enum(j, s, types ? types : T_ALL);
            goto done;
        }
        if (!types) { /* no type: what the keywords present describe, else any value */
            if (families & (1u << KW_OBJ)) types |= T_OBJ;
            if (families & (1u << KW_ARR)) types |= T_ARR;
            if (families & (1u << KW_STR)) { /* a number format alone describes a number */
                const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
                int nf = cJSON_IsString(fmt) ? numeric_format(fmt->valuestring) : NF_NONE;
                bool str_kw = cJSON_GetObjectItemCaseSensitive(s, "minLength") || cJSON_GetObjectItemCaseSensitive(s, "maxLength") ||
                              cJSON_GetObjectItemCaseSensitive(s, "pattern");
                types |= nf && !str_kw ? (nf <= NF_INT64 ? T_INT : T_NUM) : T_STR;
            }
            if (families & (1u << KW_NUM)) types |= T_INT;
            if (!types) {
                out = strdup("value");
                goto done;
            }
        }
        if (types & T_NUM) types &= ~T_INT; /* numbers include the integers */
        rlx__sb b = {0};
        int n = 0;
        for (unsigned bit = 1; bit <= T_OBJ && !j->failed; bit <<= 1) {
            if (!(types & bit)) continue;
            char *e = bit == T_NULL ? strdup("null") : bit == T_BOOL ? strdup("boolean") : bit == T_NUM ? visit_number(j, s)
                    : bit == T_INT ? visit_integer(j, s) : bit == T_STR ? visit_string(j, s)
                    : bit == T_ARR ? rlx__js_array(j, s, hint) : rlx__js_object(j, s, hint);
            if (!e) {
                if (!j->failed) rlx__js_fail(j, RLX_ENOMEM, "out of memory");
                break;
            }
            rlx__sb_puts(&b, n++ ? " | " : "");
            rlx__sb_puts(&b, e);
            free(e);
        }
        if (j->failed) {
            free(rlx__sb_take(&b));
            goto done;
        }
        out = n == 1 ? rlx__js_take(j, &b) : rlx__js_rule(j, hint, rlx__js_take(j, &b));
    }
done:
    j->depth--;
    if (j->failed) {
        free(out);
        return NULL;
    }
    if (!out) rlx__js_fail(j, RLX_ENOMEM, "out of memory");
    return out;
}

char *rlx_json_schema_to_gbnf(const cJSON *schema, rlx_error *err)
{
    rlx__js j = {.root = schema, .err = err};
    char *root = rlx__js_visit(&j, schema, "root");
    char *out = NULL;
    if (root) {
        rlx__sb b = {0};
        rlx__sb_printf(&b, "root ::= %s\n", root);
        rlx__sb_put(&b, j.rules.p ? j.rules.p : "", j.rules.n);
        rlx__json_schema_prims_for(&b, b.p, b.n);
        out = rlx__sb_take(&b);
        if (!out) rlx_errorf(err, RLX_ENOMEM, "out of memory");
    }
    free(root);
    free(rlx__sb_take(&j.rules));
    for (size_t i = 0; i < j.n_dd; i++) free(j.dd[i].body), free(j.dd[i].name);
    for (size_t i = 0; i < j.n_refs; i++) free(j.refs[i].ref), free(j.refs[i].name);
    free(j.dd);
    free(j.refs);
    return out;
}
