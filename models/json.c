/* json.c - a strict recursive-descent JSON reader producing cJSON trees that keep number
 * literals and NULs inside strings (see json.h for the representation and why). */
#include "models/json.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { JSON_MAX_DEPTH = 1000 };

typedef struct jp {
    const char *s;
    size_t n, i;
    int depth;
    int code;          /* first failure */
    rlx_error *err;
    char *buf;         /* scratch for decoding strings */
    size_t cap;
} jp;

static void fail(jp *P, int code, const char *what)
{
    if (P->code) return;
    size_t line = 1, col = 1;
    for (size_t k = 0; k < P->i && k < P->n; k++) {
        if (P->s[k] == '\n') { line++; col = 1; }
        else col++;
    }
    P->code = rlx_errorf(P->err, code, "JSON line %zu column %zu: %s", line, col, what);
}

static void skip_ws(jp *P)
{
    while (P->i < P->n && (P->s[P->i] == ' ' || P->s[P->i] == '\t' || P->s[P->i] == '\n' || P->s[P->i] == '\r')) P->i++;
}

static bool lit(jp *P, const char *w)
{
    size_t k = strlen(w);
    if (P->n - P->i < k || memcmp(P->s + P->i, w, k)) return false;
    P->i += k;
    return true;
}

static bool reserve(jp *P, size_t need)
{
    if (need <= P->cap) return true;
    size_t cap = P->cap ? P->cap : 256;
    while (cap < need) cap *= 2;
    char *b = realloc(P->buf, cap);
    if (!b) { fail(P, RLX_ENOMEM, "out of memory"); return false; }
    P->buf = b;
    P->cap = cap;
    return true;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        int d = rlx_hex_value(c);
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Decodes the string at P->i (on the opening quote) into P->buf, NUL-terminated; *has_nul
 * tells whether U+0000 was stored as C0 80. Returns the byte length or (size_t)-1. */
static size_t read_string(jp *P, bool *has_nul)
{
    *has_nul = false;
    P->i++; /* opening quote */
    size_t o = 0;
    for (;;) {
        if (P->i >= P->n) { fail(P, RLX_EINVAL, "unterminated string"); return (size_t)-1; }
        if (!reserve(P, o + 8)) return (size_t)-1;
        char c = P->s[P->i];
        if (c == '"') { P->i++; break; }
        if (c != '\\') {
            /* a raw NUL byte (invalid JSON, but cJSON-era clients may send it) is kept like \u0000 */
            if (c == 0) { P->buf[o++] = (char)0xc0; P->buf[o++] = (char)0x80; *has_nul = true; P->i++; continue; }
            P->buf[o++] = c;
            P->i++;
            continue;
        }
        if (P->i + 1 >= P->n) { fail(P, RLX_EINVAL, "unterminated string"); return (size_t)-1; }
        char e = P->s[P->i + 1];
        P->i += 2;
        switch (e) {
        case '"': P->buf[o++] = '"'; break;
        case '\\': P->buf[o++] = '\\'; break;
        case '/': P->buf[o++] = '/'; break;
        case 'b': P->buf[o++] = '\b'; break;
        case 'f': P->buf[o++] = '\f'; break;
        case 'n': P->buf[o++] = '\n'; break;
        case 'r': P->buf[o++] = '\r'; break;
        case 't': P->buf[o++] = '\t'; break;
        case 'u': {
            int u = P->n - P->i >= 4 ? hex4(P->s + P->i) : -1;
            if (u < 0) { P->i -= 2; fail(P, RLX_EINVAL, "invalid \\u escape"); return (size_t)-1; }
            P->i += 4;
            uint32_t cp = (uint32_t)u;
            if (cp >= 0xd800 && cp < 0xdc00 && P->n - P->i >= 6 && P->s[P->i] == '\\' && P->s[P->i + 1] == 'u') {
                int lo = hex4(P->s + P->i + 2);
                if (lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
                    P->i += 6;
                }
            }
            if (cp == 0) { P->buf[o++] = (char)0xc0; P->buf[o++] = (char)0x80; *has_nul = true; }
            else o += put_utf8(P->buf + o, cp);
            break;
        }
        default:
            P->i -= 2;
            fail(P, RLX_EINVAL, "invalid escape in a string");
            return (size_t)-1;
        }
    }
    P->buf[o] = 0;
    return o;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static cJSON *read_number(jp *P)
{
    size_t st = P->i, i = P->i;
    const char *s = P->s;
    if (i < P->n && s[i] == '-') i++;
    if (i < P->n && s[i] == '0') i++;
    else if (i < P->n && is_digit(s[i])) while (i < P->n && is_digit(s[i])) i++;
    else { fail(P, RLX_EINVAL, "invalid number"); return NULL; }
    if (i < P->n && s[i] == '.') {
        i++;
        if (i >= P->n || !is_digit(s[i])) { P->i = i; fail(P, RLX_EINVAL, "invalid number: digits must follow '.'"); return NULL; }
        while (i < P->n && is_digit(s[i])) i++;
    }
    if (i < P->n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < P->n && (s[j] == '+' || s[j] == '-')) j++;
        if (j < P->n && is_digit(s[j])) { /* Python leaves "1e" unparsed: then the value ends at 1 */
            while (j < P->n && is_digit(s[j])) j++;
            i = j;
        }
    }
    P->i = i;
    if (!reserve(P, i - st + 1)) return NULL;
    memcpy(P->buf, s + st, i - st);
    P->buf[i - st] = 0;
    cJSON *node = cJSON_CreateNumber(strtod(P->buf, NULL));
    if (node) node->valuestring = strdup(P->buf);
    if (!node || !node->valuestring) { cJSON_Delete(node); fail(P, RLX_ENOMEM, "out of memory"); return NULL; }
    return node;
}

/* NaN, Infinity, -Infinity: Python's json reads (and writes) them. */
static cJSON *special_number(jp *P, const char *word, double v)
{
    cJSON *node = cJSON_CreateNumber(v);
    if (node) {
        node->valuestring = strdup(word);
        /* cJSON_CreateNumber saturates valueint from a finite double; NaN must not reach that path */
        node->valueint = isnan(v) ? 0 : v > 0 ? INT_MAX : INT_MIN;
    }
    if (!node || !node->valuestring) { cJSON_Delete(node); fail(P, RLX_ENOMEM, "out of memory"); return NULL; }
    return node;
}

static cJSON *read_value(jp *P);

/* An object's members by name, for duplicate keys: a linear scan while it is small, then an
 * open-addressing table (a body of 100,000 keys stays linear in time). */
typedef struct keys {
    cJSON **slot;
    size_t cap, n; /* n: members counted (the table holds them once cap > 0) */
} keys;

enum { KEYS_SCAN = 32 };

static uint64_t key_hash(const char *k)
{
    uint64_t h = 1469598103934665603ull;
    for (; *k; k++) h = (h ^ (unsigned char)*k) * 1099511628211ull;
    return h;
}

static void keys_put(keys *t, cJSON *m)
{
    size_t i = (size_t)key_hash(m->string) & (t->cap - 1);
    while (t->slot[i] && strcmp(t->slot[i]->string, m->string)) i = (i + 1) & (t->cap - 1);
    t->slot[i] = m;
}

static bool keys_grow(keys *t, const cJSON *c)
{
    size_t cap = t->cap ? 2 * t->cap : 4 * KEYS_SCAN;
    cJSON **slot = calloc(cap, sizeof *slot);
    if (!slot) return false;
    free(t->slot);
    t->slot = slot;
    t->cap = cap;
    for (cJSON *m = c->child; m; m = m->next) keys_put(t, m);
    return true;
}

/* The member of c named key, or NULL. */
static cJSON *keys_find(const keys *t, const cJSON *c, const char *key)
{
    if (!t->cap) {
        for (cJSON *m = c->child; m; m = m->next)
            if (!strcmp(m->string, key)) return m;
        return NULL;
    }
    size_t i = (size_t)key_hash(key) & (t->cap - 1);
    while (t->slot[i] && strcmp(t->slot[i]->string, key)) i = (i + 1) & (t->cap - 1);
    return t->slot[i];
}

/* Adds member v (its string set) to object c, as Python's dict does: a later duplicate key
 * replaces the earlier member's value where that member stood. False when out of memory. */
static bool add_member(keys *t, cJSON *c, cJSON *v)
{
    cJSON *old = keys_find(t, c, v->string);
    if (old) {
        if (t->cap) keys_put(t, v); /* (its slot holds old, compared before old is freed) */
        cJSON_ReplaceItemViaPointer(c, old, v);
        return true;
    }
    cJSON_AddItemToArray(c, v);
    t->n++;
    if (t->cap ? 2 * t->n > t->cap : t->n > KEYS_SCAN) return keys_grow(t, c);
    if (t->cap) keys_put(t, v);
    return true;
}

static cJSON *read_container(jp *P, bool object)
{
    keys kt = {0};
    if (++P->depth > JSON_MAX_DEPTH) { fail(P, RLX_ERANGE, "nested more than 1000 levels deep"); return NULL; }
    cJSON *c = object ? cJSON_CreateObject() : cJSON_CreateArray();
    if (!c) { fail(P, RLX_ENOMEM, "out of memory"); return NULL; }
    P->i++;
    skip_ws(P);
    char close = object ? '}' : ']';
    if (P->i < P->n && P->s[P->i] == close) { P->i++; P->depth--; return c; }
    for (;;) {
        char *key = NULL;
        skip_ws(P);
        if (object) {
            if (P->i >= P->n || P->s[P->i] != '"') { fail(P, RLX_EINVAL, "expected a string key"); goto bad; }
            bool nul;
            size_t kn = read_string(P, &nul);
            if (kn == (size_t)-1) goto bad;
            if (!(key = strdup(P->buf))) { fail(P, RLX_ENOMEM, "out of memory"); goto bad; }
            skip_ws(P);
            if (P->i >= P->n || P->s[P->i] != ':') { free(key); fail(P, RLX_EINVAL, "expected ':' after a key"); goto bad; }
            P->i++;
        }
        cJSON *v = read_value(P);
        if (!v) { free(key); goto bad; }
        if (object) {
            v->string = key; /* owned by the node from here, as cJSON_AddItemToObject would make it */
            if (!add_member(&kt, c, v)) { fail(P, RLX_ENOMEM, "out of memory"); goto bad; }
        } else {
            cJSON_AddItemToArray(c, v);
        }
        skip_ws(P);
        if (P->i < P->n && P->s[P->i] == ',') { P->i++; continue; }
        if (P->i < P->n && P->s[P->i] == close) { P->i++; break; }
        fail(P, RLX_EINVAL, object ? "expected ',' or '}'" : "expected ',' or ']'");
        goto bad;
    }
    P->depth--;
    free(kt.slot);
    return c;
bad:
    free(kt.slot);
    cJSON_Delete(c);
    return NULL;
}

static cJSON *read_value(jp *P)
{
    skip_ws(P);
    if (P->i >= P->n) { fail(P, RLX_EINVAL, "expected a value"); return NULL; }
    char c = P->s[P->i];
    if (c == '{' || c == '[') return read_container(P, c == '{');
    if (c == '"') {
        bool nul;
        size_t n = read_string(P, &nul);
        if (n == (size_t)-1) return NULL;
        cJSON *s = cJSON_CreateString(P->buf);
        if (!s) { fail(P, RLX_ENOMEM, "out of memory"); return NULL; }
        if (nul) s->valueint = RLX_JSON_STR_NUL;
        return s;
    }
    if (c == '-' && P->n - P->i >= 9 && !memcmp(P->s + P->i, "-Infinity", 9)) { P->i += 9; return special_number(P, "-Infinity", -INFINITY); }
    if (c == '-' || is_digit(c)) return read_number(P);
    if (lit(P, "true")) return cJSON_CreateTrue();
    if (lit(P, "false")) return cJSON_CreateFalse();
    if (lit(P, "null")) return cJSON_CreateNull();
    if (lit(P, "NaN")) return special_number(P, "NaN", NAN);
    if (lit(P, "Infinity")) return special_number(P, "Infinity", INFINITY);
    fail(P, RLX_EINVAL, "expected a value");
    return NULL;
}

int rlx_json_parse(const char *text, size_t len, cJSON **out, rlx_error *err)
{
    if (!out || (!text && len)) return rlx_errorf(err, RLX_EINVAL, "rlx_json_parse: no text or output pointer");
    *out = NULL;
    jp P = {.s = text ? text : "", .n = len, .err = err};
    cJSON *v = read_value(&P);
    if (v) {
        skip_ws(&P);
        if (P.i < P.n) fail(&P, RLX_EINVAL, "extra data after the JSON value");
    } else if (!P.code) {
        fail(&P, RLX_ENOMEM, "out of memory");
    }
    free(P.buf);
    if (P.code) {
        cJSON_Delete(v);
        return P.code;
    }
    *out = v;
    return 0;
}
