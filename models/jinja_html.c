/* jinja_html.c - the filters that treat strings as HTML or URLs: striptags (markupsafe's
 * Markup.striptags: comments, then tags removed, whitespace collapsed, then html.unescape) and
 * urlencode (urllib.parse.quote of a string, or key=value pairs of a dict or of an iterable of
 * pairs joined by '&', as jinja2's do_urlencode). */
#include "models/jinja_text.h"

#include <utf8proc.h>

static void put_cp(rj_rt *rt, rj_buf *b, int32_t cp)
{
    utf8proc_uint8_t u[4];
    utf8proc_ssize_t k = utf8proc_encode_char(cp, u);
    rlx__j_buf_put(rt, b, (const char *)u, (size_t)(k > 0 ? k : 0));
}

/* html's _invalid_charrefs: numeric references to C1 controls mean their windows-1252 glyphs */
static const uint16_t k_cp1252[32] = {
    0x20ac, 0x81, 0x201a, 0x192, 0x201e, 0x2026, 0x2020, 0x2021, 0x2c6, 0x2030, 0x160, 0x2039, 0x152, 0x8d, 0x17d, 0x8f,
    0x90, 0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014, 0x2dc, 0x2122, 0x161, 0x203a, 0x153, 0x9d, 0x17e, 0x178,
};

/* html._replace_charref for a numeric reference with value num (saturated past 0x10ffff) */
static void put_numeric_ref(rj_rt *rt, rj_buf *b, uint32_t num)
{
    if (num == 0) { put_cp(rt, b, 0xfffd); return; }
    if (num == 0x0d) { rlx__j_buf_puts(rt, b, "\r"); return; }
    if (num >= 0x80 && num <= 0x9f) { put_cp(rt, b, k_cp1252[num - 0x80]); return; }
    if ((num >= 0xd800 && num <= 0xdfff) || num > 0x10ffff) { put_cp(rt, b, 0xfffd); return; }
    bool invalid = (num >= 0x1 && num <= 0x8) || num == 0xb || (num >= 0xe && num <= 0x1f) || (num >= 0x7f && num <= 0x9f) ||
                   (num >= 0xfdd0 && num <= 0xfdef) || (num & 0xfffe) == 0xfffe;
    if (!invalid) put_cp(rt, b, (int32_t)num);
}

/* Python's html.unescape: &name; (the HTML5 names, the longest known prefix of a name without
 * its ';'), &#NNN; and &#xHHH; with the standard's replacements of invalid numbers */
static rj_value unescape(rj_rt *rt, rj_value s)
{
    const char *p = s.s.p;
    size_t n = s.s.n, i = 0;
    if (!memchr(p, '&', n)) return s;
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    while (i < n) {
        const char *amp = memchr(p + i, '&', n - i);
        if (!amp) { rlx__j_buf_put(rt, &b, p + i, n - i); break; }
        size_t a = (size_t)(amp - p);
        rlx__j_buf_put(rt, &b, p + i, a - i);
        i = a + 1;
        if (i < n && p[i] == '#') { /* #[0-9]+;? | #[xX][0-9a-fA-F]+;? */
            bool hex = i + 1 < n && (p[i + 1] | 0x20) == 'x';
            size_t j = i + (hex ? 2 : 1), d = j;
            uint32_t num = 0;
            while (j < n && (hex ? rlx_hex_value(p[j]) >= 0 : (p[j] >= '0' && p[j] <= '9'))) {
                uint32_t v = (uint32_t)rlx_hex_value(p[j]);
                num = num > 0x10ffff ? num : num * (hex ? 16 : 10) + v;
                j++;
            }
            if (j == d) { rlx__j_buf_puts(rt, &b, "&"); continue; } /* no digits: not a reference */
            if (j < n && p[j] == ';') j++;
            put_numeric_ref(rt, &b, num);
            i = j;
            continue;
        }
        /* [^\t\n\f <&#;]{1,32};? (32 code points) */
        size_t j = i, cps = 0;
        while (j < n && cps < 32 && !memchr("\t\n\f <&#;", p[j], 8)) {
            j++;
            while (j < n && ((unsigned char)p[j] & 0xc0) == 0x80) j++;
            cps++;
        }
        if (!cps) { rlx__j_buf_puts(rt, &b, "&"); continue; }
        if (j < n && p[j] == ';') j++;
        const rj_entity *e = rlx__j_entity(p + i, j - i);
        size_t used = j - i;
        for (size_t x = j - i - 1; !e && x >= 2; x--) { /* the longest name that is a prefix */
            e = rlx__j_entity(p + i, x);
            used = x;
        }
        if (e) {
            put_cp(rt, &b, (int32_t)e->cp1);
            if (e->cp2) put_cp(rt, &b, (int32_t)e->cp2);
            rlx__j_buf_put(rt, &b, p + i + used, j - i - used);
        } else {
            rlx__j_buf_puts(rt, &b, "&");
            rlx__j_buf_put(rt, &b, p + i, j - i);
        }
        i = j;
    }
    return rj_str(b.p, b.n);
}

/* Markup(str(value)).striptags(): while the text has "<!--" with a "-->" at or after it, the two
 * and everything between go; then the same for '<' ... '>'; then " ".join(text.split()); then
 * html.unescape. Removing a span can join a new "<!--" across it, which the next round finds,
 * so each removal resumes where the joined text could start one. */
rj_value rlx__j_f_striptags(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    rj_rt *rt = rlx__j_env_rt(E);
    rj_value s = rlx__j_to_str(rt, v);
    const char *p = s.s.p;
    size_t n = s.s.n;
    rj_buf c = {0};
    rlx__j_buf_put(rt, &c, "", 0);
    size_t i = 0;
    while (i < n) {
        rlx__j_buf_put(rt, &c, p + i, 1);
        i++;
        if (c.n < 4 || memcmp(c.p + c.n - 4, "<!--", 4)) continue;
        /* "-->" at or after the "<!--": it may reuse its dashes ("<!-->") */
        size_t end;
        if (i < n && p[i] == '>') end = i + 1;
        else if (i + 1 < n && p[i] == '-' && p[i + 1] == '>') end = i + 2;
        else {
            const char *f = memmem(p + i, n - i, "-->", 3);
            if (!f) { rlx__j_buf_put(rt, &c, p + i, n - i); break; }
            end = (size_t)(f - p) + 3;
        }
        c.n -= 4;
        i = end;
    }
    rj_buf t = {0};
    rlx__j_buf_put(rt, &t, "", 0);
    for (i = 0; i < c.n;) {
        if (c.p[i] != '<') { rlx__j_buf_put(rt, &t, c.p + i, 1); i++; continue; }
        const char *gt = memchr(c.p + i, '>', c.n - i);
        if (!gt) { rlx__j_buf_put(rt, &t, c.p + i, c.n - i); break; }
        i = (size_t)(gt - c.p) + 1;
    }
    rj_value words = rlx__j_split(rt, rj_str(t.p, t.n), NULL, -1);
    rj_buf w = {0};
    rlx__j_buf_put(rt, &w, "", 0);
    for (size_t k = 0; k < words.l->n; k++) {
        if (k) rlx__j_buf_puts(rt, &w, " ");
        rlx__j_buf_put(rt, &w, words.l->v[k].s.p, words.l->v[k].s.n);
    }
    return unescape(rt, rj_str(w.p, w.n));
}

/* jinja2's url_quote: str(obj) as UTF-8, quote_from_bytes with safe "/" (for_qs: none safe,
 * and spaces as '+') */
static void url_quote(rj_rt *rt, rj_buf *b, rj_value v, bool for_qs)
{
    rj_value s = rlx__j_to_str(rt, v);
    for (size_t i = 0; i < s.s.n; i++) {
        unsigned char c = (unsigned char)s.s.p[i];
        bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                    c == '-' || c == '~' || (c == '/' && !for_qs);
        if (safe) rlx__j_buf_put(rt, b, (const char *)&c, 1);
        else if (c == ' ' && for_qs) rlx__j_buf_puts(rt, b, "+");
        else rlx__j_buf_printf(rt, b, "%%%02X", c);
    }
}

static void url_pair(rj_rt *rt, rj_buf *b, rj_value k, rj_value v)
{
    url_quote(rt, b, k, true);
    rlx__j_buf_puts(rt, b, "=");
    url_quote(rt, b, v, true);
}

rj_value rlx__j_f_urlencode(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    rj_rt *rt = rlx__j_env_rt(E);
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    if (v.type == RJ_DICT) {
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) rlx__j_buf_puts(rt, &b, "&");
            url_pair(rt, &b, v.d->k[i], v.d->v[i]);
        }
    } else if (v.type == RJ_LIST || v.type == RJ_GEN || v.type == RJ_UNDEF) { /* `for k, v in value` */
        rj_list *l = rlx__j_iter(rt, v);
        for (size_t i = 0; i < l->n; i++) {
            rj_value it = l->v[i];
            if (it.type != RJ_LIST && it.type != RJ_STR && it.type != RJ_DICT && it.type != RJ_GEN)
                rlx__j_fail(rt, RLX_EINVAL, "cannot unpack non-iterable %s object", rlx__j_type_name(it));
            rj_list *kv = rlx__j_iter(rt, it);
            if (kv->n > 2) rlx__j_fail(rt, RLX_EINVAL, "too many values to unpack (expected 2)");
            if (kv->n < 2) rlx__j_fail(rt, RLX_EINVAL, "not enough values to unpack (expected 2, got %zu)", kv->n);
            if (i) rlx__j_buf_puts(rt, &b, "&");
            url_pair(rt, &b, kv->v[0], kv->v[1]);
        }
    } else {
        url_quote(rt, &b, v, false);
    }
    return rj_str(b.p, b.n);
}
