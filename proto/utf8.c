/* utf8.c - UTF-8 at the wire: request strings must be valid (a 400 naming the parameter
 * otherwise), and every string the daemon writes is made valid (U+FFFD for each broken
 * sequence) so no response carries raw bytes. */
#include "proto/proto.h"
#include "models/json.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

size_t rlx_api_utf8_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

bool rlx_api_utf8_valid(const char *s, size_t n)
{
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) { i++; continue; }
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0 || cp < 0) return false;
        i += (size_t)k;
    }
    return true;
}

/* The length of the maximal subpart of an ill-formed sequence at p (Unicode 3.9, U+FFFD
 * substitution of maximal subparts, as WHATWG, Python and llama-server replace): the lead byte
 * and the continuation bytes that could still have begun a valid character; at least 1. */
static size_t maximal_subpart(const unsigned char *p, size_t n)
{
    const unsigned char c = p[0];
    size_t need = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 1;
    size_t k = 1;
    while (k < need && k < n) {
        unsigned char lo = 0x80, hi = 0xbf; /* the second byte's narrower ranges */
        if (k == 1 && c == 0xe0) lo = 0xa0;
        else if (k == 1 && c == 0xed) hi = 0x9f;
        else if (k == 1 && c == 0xf0) lo = 0x90;
        else if (k == 1 && c == 0xf4) hi = 0x8f;
        if (p[k] < lo || p[k] > hi) break;
        k++;
    }
    return k;
}

char *rlx_api_utf8_sanitize(const char *s, size_t n, size_t *out_len)
{
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    char *out = malloc(n * 3 + 1), *w = out; /* each bad byte may become 3 */
    if (!out) return NULL;
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = p[i] < 0x80 ? 1 : utf8proc_iterate(p + i, (utf8proc_ssize_t)(n - i), &cp);
        if (p[i] >= 0x80 && (k <= 0 || cp < 0)) { /* one U+FFFD per maximal subpart (F0 9F: one) */
            memcpy(w, "\xef\xbf\xbd", 3);
            w += 3;
            i += maximal_subpart(p + i, n - i);
            continue;
        }
        memcpy(w, s + i, (size_t)k);
        w += k;
        i += (size_t)k;
    }
    *w = 0;
    if (out_len) *out_len = (size_t)(w - out);
    return out;
}

static bool tree_valid(const cJSON *v)
{
    if (v->string && !rlx_api_utf8_valid(v->string, strlen(v->string))) return false;
    if (cJSON_IsString(v) && !rlx_api_utf8_valid(v->valuestring, strlen(v->valuestring))) return false;
    for (const cJSON *c = v->child; c; c = c->next)
        if (!tree_valid(c)) return false;
    return true;
}

static bool holds_nul(const cJSON *v)
{
    if (cJSON_IsString(v) && v->valueint == RLX_JSON_STR_NUL) return true;
    for (const cJSON *c = v->child; c; c = c->next)
        if (holds_nul(c)) return true;
    return false;
}

int rlx_api_check_nul(const cJSON *root, const char *body, size_t len, rlx_api_error *e)
{
    if (!rlx_api_has_escaped_nul(body, len)) return 0;
    for (const cJSON *c = root ? root->child : NULL; c; c = c->next)
        if (c->string && holds_nul(c) && rlx_api_utf8_valid(c->string, strlen(c->string)))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, c->string, "'%s' must not contain NUL characters (\\u0000).",
                                  c->string);
    return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, NULL, "Strings in the request must not contain NUL characters (\\u0000).");
}

int rlx_api_check_utf8(const cJSON *root, rlx_api_error *e)
{
    for (const cJSON *c = root->child; c; c = c->next) {
        if (tree_valid(c)) continue;
        bool key_ok = c->string && rlx_api_utf8_valid(c->string, strlen(c->string));
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, key_ok ? c->string : NULL,
                              key_ok ? "'%s' is not valid UTF-8 text." : "A field name is not valid UTF-8 text.",
                              key_ok ? c->string : "");
    }
    return 0;
}
