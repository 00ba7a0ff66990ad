/* toolcall_json.c - the incremental JSON scanner and text helpers of the tool-call parser
 * (proto/toolcall_int.h). */
#include "proto/toolcall_int.h"
#include "models/json.h"

#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool js_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

rlx__js_res rlx__jscan_feed(rlx__jscan *s, unsigned char c)
{
    if (s->done || s->bad) return RLX__JS_SKIP;
    if (s->in_str) {
        if (s->esc) s->esc = false;
        else if (c == '\\') s->esc = true;
        else if (c == '"') {
            s->in_str = false;
            if (s->depth == 0) s->done = true;
        }
        return RLX__JS_KEEP;
    }
    if (s->scalar) {
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '+' || c == '.' || c == 'E')
            return RLX__JS_KEEP;
        s->done = true;
        return RLX__JS_END_BEFORE;
    }
    if (js_space(c)) return RLX__JS_SKIP;
    if (!s->started) {
        s->started = true;
        if (c == '"') { s->in_str = true; return RLX__JS_KEEP; }
        if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
            s->scalar = true;
            return RLX__JS_KEEP;
        }
        if (c != '{' && c != '[') { s->bad = true; return RLX__JS_SKIP; }
    }
    if (c == '{' || c == '[') {
        if (s->depth >= (int)sizeof s->stack) { s->bad = true; return RLX__JS_SKIP; }
        s->stack[s->depth++] = (char)c;
        return RLX__JS_KEEP;
    }
    if (c == '}' || c == ']') {
        if (!s->depth || s->stack[s->depth - 1] != (c == '}' ? '{' : '[')) { s->bad = true; return RLX__JS_SKIP; }
        if (--s->depth == 0) s->done = true;
        return RLX__JS_KEEP;
    }
    if (s->depth == 0) { s->bad = true; return RLX__JS_SKIP; }
    if (c == '"') s->in_str = true;
    return RLX__JS_KEEP;
}

int rlx__tc_buf_add(rlx__tc_buf *b, const void *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return RLX_ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    if (n && s) memcpy(b->p + b->len, s, n); /* s NULL: n bytes reserved for the caller to write */
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int rlx__tc_buf_str(rlx__tc_buf *b, const char *s) { return rlx__tc_buf_add(b, s, strlen(s)); }

int rlx__tc_buf_json_str(rlx__tc_buf *b, const char *s, size_t n)
{
    if (rlx__tc_buf_add(b, "\"", 1)) return RLX_ENOMEM;
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        if (rlx__tc_buf_add(b, s + from, i - from)) return RLX_ENOMEM;
        char esc[8];
        switch (c) {
        case '"': strcpy(esc, "\\\""); break;
        case '\\': strcpy(esc, "\\\\"); break;
        case '\n': strcpy(esc, "\\n"); break;
        case '\r': strcpy(esc, "\\r"); break;
        case '\t': strcpy(esc, "\\t"); break;
        default: snprintf(esc, sizeof esc, "\\u%04x", c);
        }
        if (rlx__tc_buf_str(b, esc)) return RLX_ENOMEM;
        from = i + 1;
    }
    if (rlx__tc_buf_add(b, s + from, n - from)) return RLX_ENOMEM;
    return rlx__tc_buf_add(b, "\"", 1);
}

int rlx__tc_ctl_escape(rlx__tc_buf *b, unsigned char c)
{
    char e[8];
    if (c == '\n') return rlx__tc_buf_add(b, "\\n", 2);
    if (c == '\t') return rlx__tc_buf_add(b, "\\t", 2);
    if (c == '\r') return rlx__tc_buf_add(b, "\\r", 2);
    snprintf(e, sizeof e, "\\u%04x", c);
    return rlx__tc_buf_add(b, e, 6);
}

int rlx__tc_buf_minify(rlx__tc_buf *b, const char *s, size_t n)
{
    bool in_str = false, esc = false;
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if ((unsigned char)c < 0x20) { /* a raw control character: escaped, as JSON writes it */
                if (rlx__tc_buf_add(b, s + from, i - from) || rlx__tc_ctl_escape(b, (unsigned char)c)) return RLX_ENOMEM;
                from = i + 1;
                esc = false;
            } else if (esc) esc = false;
            else if (c == '\\') esc = true;
            else if (c == '"') in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (js_space((unsigned char)c)) {
            if (rlx__tc_buf_add(b, s + from, i - from)) return RLX_ENOMEM;
            from = i + 1;
        }
    }
    return rlx__tc_buf_add(b, s + from, n - from);
}

size_t rlx__tc_value_end(const char *s, size_t n, size_t i)
{
    rlx__jscan js = {0};
    for (; i < n; i++) {
        rlx__js_res r = rlx__jscan_feed(&js, (unsigned char)s[i]);
        if (js.bad) return 0;
        if (r == RLX__JS_END_BEFORE) return i;
        if (js.done) return i + 1;
    }
    return js.scalar ? n : 0;
}

bool rlx__tc_obj_field(const char *s, size_t n, const char *key, size_t *a, size_t *b)
{
    size_t i = 0, kl = strlen(key);
    while (i < n && js_space((unsigned char)s[i])) i++;
    if (i >= n || s[i] != '{') return false;
    i++;
    for (;;) {
        while (i < n && (js_space((unsigned char)s[i]) || s[i] == ',')) i++;
        if (i >= n || s[i] != '"') return false;
        size_t ke = rlx__tc_value_end(s, n, i);
        if (!ke) return false;
        bool match = ke - i == kl + 2 && !memcmp(s + i + 1, key, kl);
        i = ke;
        while (i < n && js_space((unsigned char)s[i])) i++;
        if (i >= n || s[i] != ':') return false;
        i++;
        while (i < n && js_space((unsigned char)s[i])) i++;
        size_t ve = rlx__tc_value_end(s, n, i);
        if (!ve) return false;
        if (match) { *a = i; *b = ve; return true; }
        i = ve;
    }
}

/* A literal at s[*i]: 1 matched (i moved past it), 0 the text ends inside it, -1 not it. */
static int head_lit(const char *s, size_t n, size_t *i, const char *lit)
{
    size_t l = strlen(lit), k = n - *i < l ? n - *i : l;
    if (memcmp(s + *i, lit, k)) return -1;
    if (k < l) return 0;
    *i += l;
    return 1;
}

int rlx__tc_obj_head(const char *s, size_t n, size_t name_max, size_t *na, size_t *nb, size_t *args)
{
    size_t i = 0;
    int r;
#define HEAD_WS() do { while (i < n && js_space((unsigned char)s[i])) i++; if (i == n) return 0; } while (0)
    if (!n) return 0;
    if (s[i++] != '{') return -1;
    HEAD_WS();
    if ((r = head_lit(s, n, &i, "\"name\"")) < 1) return r;
    HEAD_WS();
    if (s[i++] != ':') return -1;
    HEAD_WS();
    if (s[i] != '"') return -1;
    *na = i++;
    for (bool esc = false;; i++) {
        if (i == n) return i - *na > name_max ? -1 : 0;
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || i - *na > name_max) return -1; /* not a JSON string, or no name */
        if (esc) esc = false;
        else if (c == '\\') esc = true;
        else if (c == '"') break;
    }
    *nb = ++i;
    HEAD_WS();
    if (s[i++] != ',') return -1;
    HEAD_WS();
    int ra = head_lit(s, n, &(size_t){i}, "\"arguments\"");
    int rp = head_lit(s, n, &(size_t){i}, "\"parameters\"");
    if (ra < 1 && rp < 1) return ra == 0 || rp == 0 ? 0 : -1;
    i += ra == 1 ? strlen("\"arguments\"") : strlen("\"parameters\"");
    HEAD_WS();
    if (s[i++] != ':') return -1;
    HEAD_WS();
    if (s[i] != '{') return -1;
    *args = i;
    return 1;
#undef HEAD_WS
}

size_t rlx__tc_partial(const char *s, size_t n, const char *marker)
{
    size_t m = strlen(marker);
    for (size_t k = (m - 1 < n ? m - 1 : n); k > 0; k--)
        if (!memcmp(s + n - k, marker, k)) return k;
    return 0;
}

size_t rlx__tc_utf8_tail(const char *s, size_t n)
{
    /* look back at most 3 bytes for a lead byte whose sequence is not complete */
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = (unsigned char)s[n - k];
        if ((c & 0xc0) == 0x80) continue;      /* continuation: look further back */
        size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

/* No NaN or Infinity word (their literals, models/json.h); 1e400 is a JSON number, however big
 * (as JSON.parse and Python read it: it made a call plain content) */
static bool all_finite(const cJSON *v)
{
    if (cJSON_IsNumber(v) && (v->valuestring ? strpbrk(v->valuestring, "NI") != NULL : !isfinite(v->valuedouble))) return false;
    for (const cJSON *c = v->child; c; c = c->next)
        if (!all_finite(c)) return false;
    return true;
}

bool rlx__tc_json_strict(const char *s, size_t n)
{
    /* models/json.c reads numbers by RFC 8259's grammar (as Python does) and refuses every other
       word; it takes NaN and Infinity, as Python does, which JSON does not */
    cJSON *root = NULL;
    rlx_error err = {0};
    bool ok = s && n && rlx_json_parse(s, n, &root, &err) == 0 && all_finite(root);
    cJSON_Delete(root);
    return ok;
}
