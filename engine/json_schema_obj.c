/* json_schema_obj.c - objects and arrays of the JSON Schema compiler (see json_schema.h).
 *
 * An object's properties come in the schema's order, each optional one may be left out: the
 * members are "first" alternatives (which property comes first) followed by rest rules
 * rest_i ::= ("," ws kv_i)? rest_{i+1}, so the grammar grows linearly with the properties.
 * Extra properties (additionalProperties true or a schema) come last, with keys that differ
 * from every declared name (a rule over the names' trie; extra keys are written without
 * escapes so that no escape can spell a declared name). allOf members are merged into one
 * property list; an additionalProperties false of one member must cover every merged name. */
#include "engine/json_schema_walk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct prop { const char *name; const cJSON *schema; bool required; } prop;

typedef struct objspec {
    prop *p;
    size_t n, cap;
    const cJSON *members[64]; /* the schemas merged (the object itself and its allOf members) */
    size_t n_members;
    const char *req[256];     /* required names seen */
    size_t n_req;
    const char *never[256];   /* optional properties whose schema is false: never written, and no
                                 extra key may take their names */
    size_t n_never;
} objspec;

static prop *find_prop(objspec *o, const char *name)
{
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->p[i].name, name)) return &o->p[i];
    return NULL;
}

static bool add_prop(rlx__js *j, objspec *o, const char *name, const cJSON *schema)
{
    prop *p = find_prop(o, name);
    if (p) {
        if (cJSON_Compare(p->schema, schema, true)) return true;
        return rlx__js_fail(j, RLX_EINVAL, "property '%.100s' is declared twice with different schemas (allOf)", name);
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 8;
        prop *np = realloc(o->p, cap * sizeof *np);
        if (!np) return rlx__js_fail(j, RLX_ENOMEM, "out of memory");
        o->p = np;
        o->cap = cap;
    }
    o->p[o->n++] = (prop){name, schema, false};
    return true;
}

static bool gather(rlx__js *j, objspec *o, const cJSON *s, int hops)
{
    if (hops > 16) return rlx__js_fail(j, RLX_ERANGE, "'allOf'/'$ref' chain deeper than 16");
    if (cJSON_IsTrue(s)) return true;
    if (!cJSON_IsObject(s)) return rlx__js_fail(j, RLX_EINVAL, "an 'allOf' member must be an object schema");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (ref) {
        if (!cJSON_IsString(ref)) return rlx__js_fail(j, RLX_EINVAL, "'$ref' must be a string");
        const cJSON *t = rlx__js_resolve(j, ref->valuestring);
        if (!t || !gather(j, o, t, hops + 1)) return false;
    }
    if (o->n_members == RLX_ARRAY_LEN(o->members)) return rlx__js_fail(j, RLX_ERANGE, "over 64 'allOf' members");
    o->members[o->n_members++] = s;
    for (const cJSON *k = s->child; k; k = k->next) {
        int f = rlx__js_family(k->string);
        if (f == KW_UNKNOWN) return rlx__js_fail(j, RLX_EINVAL, "keyword '%.100s' is not supported", k->string);
        if (f == KW_TYPE && !strcmp(k->string, "type")) { /* nullable: null is no object, nothing to merge */
            bool obj = cJSON_IsString(k) && !strcmp(k->valuestring, "object");
            for (const cJSON *t = cJSON_IsArray(k) ? k->child : NULL; t; t = t->next)
                obj |= cJSON_IsString(t) && !strcmp(t->valuestring, "object");
            if (!obj) return rlx__js_fail(j, RLX_EINVAL, "'allOf' is supported for object schemas only");
        } else if (f == KW_ENUM || (f == KW_COMB && strcmp(k->string, "allOf") && strcmp(k->string, "$ref"))) {
            /* string, array and number keywords say nothing about an object; these do */
            return rlx__js_fail(j, RLX_EINVAL, "'%s' beside an object's properties is not supported", k->string);
        }
    }
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    if (props && !cJSON_IsObject(props)) return rlx__js_fail(j, RLX_EINVAL, "'properties' must be an object");
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next)
        if (!add_prop(j, o, p->string, p)) return false;
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    if (req && !cJSON_IsArray(req)) return rlx__js_fail(j, RLX_EINVAL, "'required' must be an array of names");
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) return rlx__js_fail(j, RLX_EINVAL, "'required' must be an array of names");
        if (o->n_req == RLX_ARRAY_LEN(o->req)) return rlx__js_fail(j, RLX_ERANGE, "over 256 'required' names");
        o->req[o->n_req++] = r->valuestring;
    }
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (all && (!cJSON_IsArray(all) || !all->child)) return rlx__js_fail(j, RLX_EINVAL, "'allOf' must be a non-empty array");
    for (const cJSON *m = all ? all->child : NULL; m; m = m->next)
        if (!gather(j, o, m, hops + 1)) return false;
    return true;
}

/* The length of the UTF-8 sequence that starts at s (1 for a stray byte). */
static size_t seq_len(const char *s)
{
    unsigned char c = (unsigned char)*s;
    size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
    for (size_t i = 1; i < n; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80) return 1;
    return n;
}

static uint32_t seq_cp(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = n == 1 ? u[0] : (uint32_t)(u[0] & (0x7f >> n));
    for (size_t i = 1; i < n; i++) c = (c << 6) | (u[i] & 0x3f);
    return c;
}

/* Rule for JSON-string content (no escapes) other than the names[0..n) (sorted, distinct, all
 * sharing their first `at` bytes, which are already matched), one code point at a time. */
static char *keys_not(rlx__js *j, const char **names, size_t n, size_t at)
{
    rlx__sb b = {0};
    bool terminal = names[0][at] == 0; /* sorted: a name ending here comes first */
    if (n == 1 && terminal) {
        rlx__sb_puts(&b, "keychar+");
        return rlx__js_rule(j, "key", rlx__js_take(j, &b));
    }
    int alts = 0;
    if (!terminal) rlx__sb_puts(&b, "\"\""), alts++;
    /* a next character no name has here, then anything */
    rlx__cpset other = {0};
    for (size_t i = terminal; i < n; i++) {
        uint32_t c = seq_cp(names[i] + at, seq_len(names[i] + at));
        rlx__cpset_add(&other, c, c);
    }
    rlx__cpset_add(&other, 0, 0x1f);
    rlx__cpset_add(&other, '"', '"');
    rlx__cpset_add(&other, '\\', '\\');
    rlx__cpset_negate(&other);
    if (other.n) {
        rlx__sb_puts(&b, alts++ ? " | " : "");
        rlx__cpset_gbnf(&b, &other);
        rlx__sb_puts(&b, " keychar*");
    }
    b.oom |= other.oom;
    rlx__cpset_free(&other);
    /* names sharing the next character: that character, then the rest (a character an extra key
       cannot hold unescaped - '"', '\\', a control - ends the names that have it: no key reaches
       them, and writing it raw gave keys that broke the JSON) */
    for (size_t i = terminal; i < n && !j->failed;) {
        size_t len = seq_len(names[i] + at), e = i + 1;
        while (e < n && !strncmp(names[e] + at, names[i] + at, len)) e++;
        const unsigned char c0 = (unsigned char)names[i][at];
        if (c0 < 0x20 || c0 == '"' || c0 == '\\') {
            i = e;
            continue;
        }
        char *sub = keys_not(j, names + i, e - i, at + len);
        if (sub) {
            rlx__sb_puts(&b, alts++ ? " | " : "");
            rlx__gbnf_literal(&b, names[i] + at, len);
            rlx__sb_printf(&b, " %s", sub);
        }
        free(sub);
        i = e;
    }
    if (j->failed) {
        free(rlx__sb_take(&b));
        return NULL;
    }
    return rlx__js_rule(j, "key", rlx__js_take(j, &b));
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* kv rule for an extra property: a key other than the declared names (or, given, the
 * patternProperties key rule `pkey`), then a value of `add` (found under keyword `kw`). */
static char *extra_kv(rlx__js *j, objspec *o, const cJSON *add, const char *kw, const char *pkey)
{
    size_t at = rlx__js_push(j, kw);
    if (pkey) rlx__js_push(j, add->string);
    char *val = rlx__js_visit(j, add, "additional");
    rlx__js_pop(j, at);
    if (!val) return NULL;
    char *key = NULL;
    if (pkey) {
        key = strdup(pkey);
    } else if (o->n || o->n_never) {
        const char **names = malloc((o->n + o->n_never) * sizeof *names);
        if (!names) {
            free(val);
            return rlx__js_fail(j, RLX_ENOMEM, "out of memory"), NULL;
        }
        for (size_t i = 0; i < o->n; i++) names[i] = o->p[i].name;
        for (size_t i = 0; i < o->n_never; i++) names[o->n + i] = o->never[i];
        qsort(names, o->n + o->n_never, sizeof *names, cmp_str);
        char *inner = keys_not(j, names, o->n + o->n_never, 0);
        free(names);
        if (inner) {
            rlx__sb b = {0};
            rlx__sb_printf(&b, "\"\\\"\" %s \"\\\"\"", inner);
            key = rlx__js_rule(j, "xkey", rlx__js_take(j, &b));
        }
        free(inner);
    } else {
        key = strdup("string");
    }
    char *out = NULL;
    if (key) {
        rlx__sb b = {0};
        rlx__sb_printf(&b, "%s \":\" ws %s", key, val);
        out = rlx__js_rule(j, "xkv", rlx__js_take(j, &b));
    }
    free(key);
    free(val);
    return out;
}

/* The key rule body `body` (a pattern between quotes) as a grammar of its own, compiled once for
 * every declared name's check (NULL with err set). */
static rlx_grammar *key_grammar(const char *body, rlx_error *err)
{
    rlx__sb g = {0};
    rlx__sb_printf(&g, "root ::= %s\n", body);
    if (!g.oom) rlx__json_schema_prims_for(&g, g.p, g.n);
    rlx_grammar *gr = NULL;
    if (g.oom) rlx_errorf(err, RLX_ENOMEM, "out of memory");
    else gr = rlx_grammar_compile(g.p, g.n, NULL, err);
    free(rlx__sb_take(&g));
    return gr;
}

/* Does the JSON string of `name` match the key grammar? 1 yes, 0 no, -1 (err set) neither known. */
static int name_matches(const rlx_grammar *gr, const char *name, rlx_error *err)
{
    rlx__sb key = {0};
    rlx__json_string(&key, name, strlen(name));
    int r = -1;
    if (key.oom) {
        rlx_errorf(err, RLX_ENOMEM, "out of memory");
    } else {
        rlx_grammar_state *st = rlx_grammar_state_new(gr, err);
        if (st) {
            int rc = rlx_grammar_accept(st, key.p, key.n);
            if (rc == RLX_ERANGE || rc == RLX_ENOMEM) rlx_errorf(err, rc, "%s", rc == RLX_ENOMEM ? "out of memory" : RLX_GRAMMAR_STACKS_MSG);
            else r = !rc && rlx_grammar_can_end(st);
        }
        rlx_grammar_state_free(st);
    }
    free(rlx__sb_take(&key));
    return r;
}

/* patternProperties: one pattern, its keys unlike every declared name, and no other extras;
 * then extra properties are the pattern's. Returns the key rule in *pkey and the pattern's
 * schema (NULL: none given), or false after a failure. */
static bool pattern_props(rlx__js *j, objspec *o, const cJSON *s, const cJSON *add, char **pkey, const cJSON **pschema)
{
    *pkey = NULL;
    *pschema = NULL;
    for (size_t m = 0; m < o->n_members; m++)
        if (o->n_members > 1 && cJSON_GetObjectItemCaseSensitive(o->members[m], "patternProperties"))
            return rlx__js_fail(j, RLX_EINVAL, "'patternProperties' with 'allOf' or '$ref' members is not supported");
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
    if (!pp) return true;
    if (!cJSON_IsObject(pp)) return rlx__js_fail(j, RLX_EINVAL, "'patternProperties' must be an object");
    if (!pp->child) return true;
    if (pp->child->next) return rlx__js_fail(j, RLX_EINVAL, "'patternProperties' with more than one pattern is not supported");
    if (add && !cJSON_IsFalse(add))
        return rlx__js_fail(j, RLX_EINVAL, "'patternProperties' together with 'additionalProperties' other than false is not supported");
    rlx_error e = {0};
    size_t at = rlx__js_push(j, "patternProperties");
    char *re = rlx__regex_to_gbnf(pp->child->string, &e);
    if (!re) {
        rlx__js_fail(j, e.code, "'patternProperties' pattern: %s", e.msg);
        rlx__js_pop(j, at);
        return false;
    }
    rlx__sb b = {0};
    rlx__sb_printf(&b, "\"\\\"\" %s \"\\\"\"", re);
    free(re);
    char *body = rlx__js_take(j, &b);
    bool ok = body != NULL;
    rlx_grammar *kg = NULL;
    if (ok && o->n) {
        rlx_error ke = {0};
        if (!(kg = key_grammar(body, &ke))) {
            ok = false;
            rlx__js_fail(j, ke.code ? ke.code : RLX_EINVAL, "'patternProperties' pattern: %s", ke.msg);
        }
    }
    for (size_t i = 0; ok && i < o->n + o->n_never; i++) {
        rlx_error ke = {0};
        const char *name = i < o->n ? o->p[i].name : o->never[i - o->n];
        int r = name_matches(kg, name, &ke);
        if (r) {
            ok = false;
            if (r < 0) rlx__js_fail(j, ke.code ? ke.code : RLX_EINVAL, "'patternProperties' pattern: %s", ke.msg);
            else rlx__js_fail(j, RLX_EINVAL, "property '%.100s' also matches the 'patternProperties' pattern: not supported", name);
        }
    }
    rlx_grammar_free(kg);
    rlx__js_pop(j, at);
    if (!ok) {
        free(body);
        return false;
    }
    *pkey = rlx__js_rule(j, "pkey", body);
    *pschema = pp->child;
    return *pkey != NULL;
}

/* minProperties / maxProperties (of the schema and its allOf members) where the object's
 * shape decides them: a minimum the required properties already meet, or 1 with none required
 * (*nonempty: the empty object is left out); a maximum no object of this shape can exceed (no
 * extra properties, at most that many declared), or 0 with none required (which
 * rlx__js_object then writes as the empty object). Anything else would need the grammar to count
 * properties: refused by name. */
static bool property_counts(rlx__js *j, const objspec *o, bool extras, bool *nonempty, bool *empty)
{
    long long mn = 0, mx = -1;
    for (size_t m = 0; m < o->n_members; m++) {
        long long a, b;
        if (!rlx__js_counts(j, o->members[m], "minProperties", "maxProperties", &a, &b)) return false;
        if (a > mn) mn = a;
        if (b >= 0 && (mx < 0 || b < mx)) mx = b;
    }
    size_t req = 0;
    for (size_t i = 0; i < o->n; i++) req += o->p[i].required;
    if (mx >= 0 && (size_t)mx < req)
        return rlx__js_fail(j, RLX_EINVAL, "'maxProperties' %lld is below the %zu required properties: nothing matches", mx, req);
    if (mx >= 0 && mx < mn) return rlx__js_fail(j, RLX_EINVAL, "'maxProperties' is below 'minProperties': nothing matches");
    if ((size_t)mn > req) {
        if (mn > 1 || req)
            return rlx__js_fail(j, RLX_EINVAL, "'minProperties' %lld above the %zu required properties is not supported", mn, req);
        if (!o->n && !extras) return rlx__js_fail(j, RLX_EINVAL, "'minProperties' %lld cannot be met: no property is allowed", mn);
        *nonempty = true;
    }
    if (mx > 0 && (extras || (size_t)mx < o->n))
        return rlx__js_fail(j, RLX_EINVAL, "'maxProperties' %lld below the properties this object allows is not supported", mx);
    *empty = mx == 0;
    return true;
}

char *rlx__js_object(rlx__js *j, const cJSON *s, const char *hint)
{
    objspec o = {0};
    char **kv = NULL, **rest = NULL, *xkv = NULL, *out = NULL, *pkey = NULL;
    if (!gather(j, &o, s, 0)) goto done;
    const cJSON *add = o.n_members == 1 ? cJSON_GetObjectItemCaseSensitive(s, "additionalProperties") : NULL;
    /* additionalProperties of merged members: false must allow every merged name; what the
     * members' say of other names holds for the merged object (false if one says false, a
     * member's schema if one gives one) */
    static const cJSON no_extras = {.type = cJSON_False};
    const cJSON *member_add = NULL;
    for (size_t m = 0; m < o.n_members && o.n_members > 1; m++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(o.members[m], "additionalProperties");
        if (!a || cJSON_IsTrue(a)) continue;
        if (cJSON_IsFalse(a)) member_add = &no_extras;
        else if (!member_add) member_add = a;
        else if (member_add != &no_extras && member_add != a) {
            rlx__js_fail(j, RLX_EINVAL, "'additionalProperties' schemas in more than one 'allOf' member are not supported");
            goto done;
        }
        const cJSON *own = cJSON_GetObjectItemCaseSensitive(o.members[m], "properties");
        for (size_t i = 0; i < o.n; i++)
            if (!cJSON_GetObjectItemCaseSensitive(own, o.p[i].name)) {
                if (o.members[m] == s) /* the schema's own, beside its allOf */
                    rlx__js_fail(j, RLX_EINVAL, "'additionalProperties' beside 'allOf' excludes property '%.100s' of an 'allOf' "
                                 "member (it sees only the properties beside it)", o.p[i].name);
                else
                    rlx__js_fail(j, RLX_EINVAL, "'additionalProperties' of an 'allOf' member excludes property '%.100s' of "
                                 "another", o.p[i].name);
                goto done;
            }
    }
    if (member_add) add = member_add;
    for (size_t r = 0; r < o.n_req; r++) {
        prop *p = find_prop(&o, o.req[r]);
        if (!p) { /* required but not declared: a value of additionalProperties, if extras are allowed */
            if (cJSON_IsFalse(add) || o.n_members > 1) {
                rlx__js_fail(j, RLX_EINVAL, "required property '%.100s' is not among 'properties'", o.req[r]);
                goto done;
            }
            if (cJSON_GetObjectItemCaseSensitive(s, "patternProperties")) {
                rlx__js_fail(j, RLX_EINVAL, "required property '%.100s' is not among 'properties' (with 'patternProperties' "
                             "this is not supported)", o.req[r]);
                goto done;
            }
            static const cJSON any = {.type = cJSON_True};
            if (!add_prop(j, &o, o.req[r], cJSON_IsObject(add) ? add : &any)) goto done;
            p = &o.p[o.n - 1];
        }
        p->required = true;
    }
    if (add && !cJSON_IsBool(add) && !cJSON_IsObject(add)) {
        rlx__js_fail(j, RLX_EINVAL, "'additionalProperties' must be a boolean or a schema");
        goto done;
    }
    /* a property whose schema is false can never be written: optional, it is left out (and kept
       from extra keys); required, no object matches */
    size_t kept = 0;
    for (size_t i = 0; i < o.n; i++) {
        if (!cJSON_IsFalse(o.p[i].schema)) {
            o.p[kept++] = o.p[i];
            continue;
        }
        if (o.p[i].required) {
            rlx__js_fail(j, RLX_EINVAL, "property '%.100s' is required but its schema is false: no object matches", o.p[i].name);
            goto done;
        }
        if (o.n_never == RLX_ARRAY_LEN(o.never)) {
            rlx__js_fail(j, RLX_ERANGE, "over 256 properties whose schema is false");
            goto done;
        }
        o.never[o.n_never++] = o.p[i].name;
    }
    o.n = kept;
    const cJSON *pschema = NULL;
    if (!pattern_props(j, &o, s, add, &pkey, &pschema)) goto done;
    bool extras = pschema || (o.n || o.n_never ? add && !cJSON_IsFalse(add) : !cJSON_IsFalse(add));
    bool nonempty = false, empty = false;
    if (!property_counts(j, &o, extras, &nonempty, &empty)) goto done;
    if (empty) {
        out = rlx__js_rule(j, hint, strdup("\"{\" ws \"}\""));
        goto done;
    }
    if (!pschema && !o.n && !o.n_never && extras && (!add || cJSON_IsTrue(add))) {
        out = strdup(nonempty ? "object-nonempty" : "object");
        goto done;
    }
    if (pschema) xkv = extra_kv(j, &o, pschema, "patternProperties", pkey);
    else if (extras) xkv = extra_kv(j, &o, add ? add : cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"), "additionalProperties", NULL);
    if (extras && !xkv) goto done;
    kv = calloc(o.n + 1, sizeof *kv);
    rest = calloc(o.n + 1, sizeof *rest);
    if (!kv || !rest) {
        rlx__js_fail(j, RLX_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < o.n; i++) {
        size_t at = rlx__js_push(j, "properties");
        rlx__js_push(j, o.p[i].name);
        char *v = rlx__js_visit(j, o.p[i].schema, o.p[i].name);
        rlx__js_pop(j, at);
        if (!v) goto done;
        rlx__sb b = {0}, key = {0};
        rlx__json_string(&key, o.p[i].name, strlen(o.p[i].name));
        if (key.oom) b.oom = true;
        rlx__gbnf_literal(&b, key.p ? key.p : "", key.n);
        free(rlx__sb_take(&key));
        rlx__sb_printf(&b, " \":\" ws %s", v);
        free(v);
        if (!(kv[i] = rlx__js_rule(j, o.p[i].name, rlx__js_take(j, &b)))) goto done;
    }
    /* rest[i]: what may follow once something was written, from property i on */
    for (size_t i = o.n + 1; i-- > 0;) {
        rlx__sb b = {0};
        if (i == o.n) {
            if (extras) rlx__sb_printf(&b, "( \",\" ws %s )*", xkv);
        } else {
            rlx__sb_printf(&b, o.p[i].required ? "\",\" ws %s" : "( \",\" ws %s )?", kv[i]);
            if (rest[i + 1]) rlx__sb_printf(&b, " %s", rest[i + 1]);
        }
        if (!b.n && !b.oom) {
            free(rlx__sb_take(&b));
            continue;
        }
        if (!(rest[i] = rlx__js_rule(j, "rest", rlx__js_take(j, &b)))) goto done;
    }
    rlx__sb b = {0};
    rlx__sb_puts(&b, "\"{\" ws ( ");
    int alts = 0;
    bool all_optional = true;
    for (size_t i = 0; i < o.n; i++) {
        rlx__sb_puts(&b, alts++ ? " | " : "");
        rlx__sb_printf(&b, "%s%s%s", kv[i], rest[i + 1] ? " " : "", rest[i + 1] ? rest[i + 1] : "");
        if (o.p[i].required) {
            all_optional = false;
            break;
        }
    }
    if (all_optional) {
        if (extras) rlx__sb_printf(&b, "%s%s %s", alts++ ? " | " : "", xkv, rest[o.n]);
        if (!nonempty) rlx__sb_puts(&b, alts ? " | \"\"" : "\"\"");
        else if (!alts) { /* property_counts refused this */
            free(rlx__sb_take(&b));
            goto done;
        }
    }
    rlx__sb_puts(&b, " ) ws \"}\"");
    out = rlx__js_rule(j, hint, rlx__js_take(j, &b));
done:
    for (size_t i = 0; kv && i < o.n; i++) free(kv[i]);
    for (size_t i = 0; rest && i <= o.n; i++) free(rest[i]);
    free(kv);
    free(rest);
    free(xkv);
    free(pkey); /* the patternProperties key rule, also when a later check refused the object */
    free(o.p);
    return out;
}

/* One list of items: `fixed` atoms first (each once), then `item` between emin and emax
 * (-1: unbounded) times. */
static void item_list(rlx__sb *b, char **fixed, size_t nf, const char *item, long long emin, long long emax)
{
    for (size_t i = 0; i < nf; i++) rlx__sb_printf(b, i ? " \",\" ws %s" : "%s", fixed[i]);
    if (!item || emax == 0) return;
    if (nf) {
        rlx__sb_printf(b, " ( \",\" ws %s )", item);
    } else {
        /* the first item has no comma before it */
        if (emin == 0) {
            rlx__sb_printf(b, "( %s ", item);
            if (emax < 0) rlx__sb_printf(b, "( \",\" ws %s )* )?", item);
            else if (emax > 1) rlx__sb_printf(b, "( \",\" ws %s ){0,%lld} )?", item, emax - 1);
            else rlx__sb_puts(b, ")?");
            return;
        }
        rlx__sb_printf(b, "%s", item);
        emin--;
        if (emax > 0) emax--;
        if (emax == 0) return;
        rlx__sb_printf(b, " ( \",\" ws %s )", item);
    }
    if (emax < 0 && emin == 0) rlx__sb_puts(b, "*");
    else if (emax < 0) rlx__sb_printf(b, "{%lld,}", emin);
    else rlx__sb_printf(b, "{%lld,%lld}", emin, emax);
}

char *rlx__js_array(rlx__js *j, const cJSON *s, const char *hint)
{
    long long mn, mx;
    if (!rlx__js_counts(j, s, "minItems", "maxItems", &mn, &mx)) return NULL;
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items"), *pre = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
    const cJSON *rest_schema = items;
    const char *rest_kw = "items";
    if (cJSON_IsArray(items)) { /* the older tuple form: additionalItems for what follows */
        if (pre) return rlx__js_fail(j, RLX_EINVAL, "'items' as an array beside 'prefixItems' is not supported"), NULL;
        pre = items;
        rest_schema = addl;
        rest_kw = "additionalItems";
    } else if (addl && pre) {
        return rlx__js_fail(j, RLX_EINVAL, "'additionalItems' beside 'prefixItems' is not supported ('items' says what follows "
                            "'prefixItems')"), NULL;
    } /* else additionalItems applies to nothing (draft 2019-09 and earlier: only after an items array) */
    if (pre && !cJSON_IsArray(pre)) return rlx__js_fail(j, RLX_EINVAL, "'prefixItems' must be an array of schemas"), NULL;
    if (addl && !cJSON_IsObject(addl) && !cJSON_IsBool(addl))
        return rlx__js_fail(j, RLX_EINVAL, "'additionalItems' must be a schema"), NULL;
    if (rest_schema && !cJSON_IsObject(rest_schema) && !cJSON_IsBool(rest_schema))
        return rlx__js_fail(j, RLX_EINVAL, "'items' must be a schema"), NULL;
    /* uniqueItems: false is the default; true holds by itself only where at most one item fits */
    const cJSON *uniq = cJSON_GetObjectItemCaseSensitive(s, "uniqueItems");
    if (uniq && !cJSON_IsBool(uniq)) return rlx__js_fail(j, RLX_EINVAL, "'uniqueItems' must be a boolean"), NULL;

    size_t np = pre ? (size_t)cJSON_GetArraySize(pre) : 0;
    size_t nf = mx >= 0 && (size_t)mx < np ? (size_t)mx : np; /* prefix items written */
    char **fixed = calloc(nf + 1, sizeof *fixed), *item = NULL, *out = NULL;
    if (!fixed) return rlx__js_fail(j, RLX_ENOMEM, "out of memory"), NULL;
    long long emin = mn > (long long)nf ? mn - (long long)nf : 0, emax;
    if (nf < np) emax = 0;
    else if (rest_schema || !pre) emax = mx < 0 ? -1 : mx - (long long)nf;
    else emax = emin; /* extra items only as many as minItems demands, any value */
    long long most = cJSON_IsFalse(rest_schema) ? (long long)nf : emax < 0 ? -1 : (long long)nf + emax; /* items written */
    if (cJSON_IsTrue(uniq) && (most < 0 || most > 1)) {
        rlx__js_fail(j, RLX_EINVAL, "'uniqueItems': true is not supported (only where at most one item can be written)");
        goto done;
    }
    if (emin > 0 && cJSON_IsFalse(rest_schema)) {
        rlx__js_fail(j, RLX_EINVAL, "'minItems' %lld cannot be met: '%s' is false", mn, rest_kw);
        goto done;
    }
    const cJSON *p = pre ? pre->child : NULL;
    for (size_t i = 0; i < nf; i++, p = p->next) {
        char seg[48]; /* "prefixItems/" and 20 digits */
        snprintf(seg, sizeof seg, "%s/%zu", pre == items ? "items" : "prefixItems", i);
        size_t at = rlx__js_push(j, seg);
        fixed[i] = rlx__js_visit(j, p, "item");
        rlx__js_pop(j, at);
        if (!fixed[i]) goto done;
    }
    if (emax != 0 && !cJSON_IsFalse(rest_schema)) {
        size_t at = rlx__js_push(j, rest_kw);
        item = rest_schema ? rlx__js_visit(j, rest_schema, "item") : strdup("value"); /* absent: any value */
        rlx__js_pop(j, at);
        if (!item) {
            if (!j->failed) rlx__js_fail(j, RLX_ENOMEM, "out of memory");
            goto done;
        }
    }
    rlx__sb b = {0};
    rlx__sb_puts(&b, "\"[\" ws ");
    item_list(&b, fixed, nf, item, emin, emax);
    rlx__sb_puts(&b, " ws \"]\"");
    out = rlx__js_rule(j, hint, rlx__js_take(j, &b));
done:
    for (size_t i = 0; i < nf; i++) free(fixed[i]);
    free(fixed);
    free(item);
    return out;
}
