/* json_schema.c - the JSON Schema walk (see json_schema.h): each schema becomes a GBNF
 * expression, compound ones a rule of their own; $ref targets are rules named once so that
 * recursion works; objects and arrays are in json_schema_obj.c, formats, integers, numbers and
 * strings in json_schema_scalar.c. */
#include "engine/json_schema_walk.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
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

/* A local "#/a/b" reference: the fragment percent-decoded first, then split at '/', then ~1 and
 * ~0 unescaped in each part (RFC 6901 section 6; "%2F" is a separator, "~1" a '/' in a name), of
 * any length. */
const cJSON *rlx__js_resolve(rlx__js *j, const char *ref)
{
    if (ref[0] != '#')
        return rlx__js_fail(j, RLX_EINVAL, "'$ref' '%.200s' is not local: only \"#...\" references are supported", ref), NULL;
    const size_t len = strlen(ref + 1);
    char *dec = malloc(len + 1), *seg = malloc(len + 1);
    const cJSON *at = j->root;
    if (!dec || !seg) {
        rlx__js_fail(j, RLX_ENOMEM, "out of memory");
        at = NULL;
        goto done;
    }
    size_t n = 0;
    for (const char *p = ref + 1; *p;) {
        int hi = p[0] == '%' && p[1] ? rlx_hex_value(p[1]) : -1, lo = hi >= 0 && p[2] ? rlx_hex_value(p[2]) : -1;
        if (lo >= 0 && (hi || lo)) { /* (%00 stays as written: it names nothing) */
            dec[n++] = (char)(hi * 16 + lo);
            p += 3;
        } else {
            dec[n++] = *p++;
        }
    }
    dec[n] = 0;
    if (dec[0] && dec[0] != '/') {
        rlx__js_fail(j, RLX_EINVAL, "'$ref' '%.200s': anchors are not supported, only JSON pointers", ref);
        at = NULL;
        goto done;
    }
    for (const char *p = dec; *p == '/';) {
        p++;
        size_t m = 0;
        for (; *p && *p != '/'; p++) {
            char c = *p;
            if (c == '~' && (p[1] == '0' || p[1] == '1')) c = *++p == '0' ? '~' : '/';
            seg[m++] = c;
        }
        seg[m] = 0;
        if (cJSON_IsArray(at)) {
            char *end;
            long k = strtol(seg, &end, 10);
            at = *seg && !*end && k >= 0 && k <= INT32_MAX ? cJSON_GetArrayItem(at, (int)k) : NULL;
        } else {
            at = cJSON_IsObject(at) ? cJSON_GetObjectItemCaseSensitive(at, seg) : NULL;
        }
        if (!at) {
            rlx__js_fail(j, RLX_EINVAL, "'$ref' '%.200s' points at nothing in the schema", ref);
            break;
        }
    }
done:
    free(dec);
    free(seg);
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

/* Replaces, in a copy, every number node with its literal text (models/json.c keeps it in
 * valuestring) as a raw node, so that printing gives the request's own digits: cJSON prints a
 * double in 15 significant digits, or 17 where those do not read back, and a const of
 * 0.30000000000000004, 1.7976931348623157e308 or 12345678901234567 would come out another
 * number. Literals that are not JSON (NaN, Infinity) keep cJSON's printing. */
static bool numbers_as_literals(cJSON *v)
{
    for (cJSON *c = v->child, *next; c; c = next) {
        next = c->next;
        if (cJSON_IsNumber(c) && c->valuestring && isfinite(c->valuedouble) && strspn(c->valuestring, "-+.0123456789eE") ==
                                                                                    strlen(c->valuestring)) {
            cJSON *raw = cJSON_CreateRaw(c->valuestring);
            if (raw && c->string) { /* an object's member: the replacement takes over its key */
                size_t kn = strlen(c->string) + 1;
                if ((raw->string = cJSON_malloc(kn))) memcpy(raw->string, c->string, kn);
                else cJSON_Delete(raw), raw = NULL;
            }
            if (!raw || !cJSON_ReplaceItemViaPointer(v, c, raw)) {
                cJSON_Delete(raw);
                return false;
            }
        } else if ((cJSON_IsArray(c) || cJSON_IsObject(c)) && !numbers_as_literals(c)) {
            return false;
        }
    }
    return true;
}

/* A const or enum value as JSON text with its numbers as the request wrote them (NULL: out of
 * memory). */
static char *print_value(const cJSON *v)
{
    cJSON *box = cJSON_CreateArray(), *copy = cJSON_Duplicate(v, true);
    char *out = NULL;
    if (box && copy) {
        cJSON_AddItemToArray(box, copy);
        if (numbers_as_literals(box)) out = cJSON_PrintUnformatted(box->child);
    } else {
        cJSON_Delete(copy);
    }
    cJSON_Delete(box);
    return out;
}

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
        if (!(texts[n] = print_value(v))) {
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
    if (bits && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "nullable"))) bits |= T_NULL; /* as the compiler reads it */
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
                int nf = cJSON_IsString(fmt) ? rlx__js_numeric_format(fmt->valuestring) : NF_NONE;
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
            char *e = bit == T_NULL ? strdup("null") : bit == T_BOOL ? strdup("boolean") : bit == T_NUM ? rlx__js_number(j, s)
                    : bit == T_INT ? rlx__js_integer(j, s) : bit == T_STR ? rlx__js_string(j, s)
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
