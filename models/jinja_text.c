/* jinja_text.c - Python str semantics over UTF-8: whitespace, strip, split, replace,
 * splitlines, padding, `%` formatting and str.format (case mapping: jinja_case.c). */
#include "models/jinja_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

static int32_t next_cp(const char *p, size_t n, size_t *i)
{
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)p + *i, (utf8proc_ssize_t)(n - *i), &cp);
    if (k <= 0) { cp = (unsigned char)p[*i]; k = 1; }
    *i += (size_t)k;
    return cp;
}

bool rlx__j_is_space_cp(int32_t cp)
{
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f)) return true;
    if (cp < 0x80) return false;
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

static bool in_chars(int32_t cp, const rj_value *chars)
{
    if (!chars) return rlx__j_is_space_cp(cp);
    size_t i = 0;
    while (i < chars->s.n)
        if (next_cp(chars->s.p, chars->s.n, &i) == cp) return true;
    return false;
}

rj_value rlx__j_strip(rj_rt *rt, rj_value s, const rj_value *chars, int which)
{
    (void)rt;
    if (chars && chars->type != RJ_STR) chars = NULL;
    size_t a = 0, b = s.s.n;
    if (which & 1) {
        while (a < b) {
            size_t j = a;
            if (!in_chars(next_cp(s.s.p, b, &j), chars)) break;
            a = j;
        }
    }
    if (which & 2) {
        while (b > a) {
            size_t st = b - 1;
            while (st > a && ((unsigned char)s.s.p[st] & 0xc0) == 0x80) st--;
            size_t j = st;
            if (!in_chars(next_cp(s.s.p, b, &j), chars)) break;
            b = st;
        }
    }
    return rj_str(s.s.p + a, b - a);
}

rj_value rlx__j_split(rj_rt *rt, rj_value s, const rj_value *sep, int64_t maxsplit)
{
    rj_value out = rlx__j_new_list(rt, 0);
    if (sep && sep->type == RJ_STR) {
        if (sep->s.n == 0) rlx__j_fail(rt, RLX_EINVAL, "split(): empty separator");
        size_t i = 0;
        int64_t done = 0;
        for (;;) {
            const char *f = (maxsplit < 0 || done < maxsplit) ? memmem(s.s.p + i, s.s.n - i, sep->s.p, sep->s.n) : NULL;
            if (!f) {
                rlx__j_list_push(rt, out.l, rj_str(s.s.p + i, s.s.n - i));
                break;
            }
            size_t at = (size_t)(f - s.s.p);
            rlx__j_list_push(rt, out.l, rj_str(s.s.p + i, at - i));
            i = at + sep->s.n;
            done++;
        }
        return out;
    }
    size_t i = 0;
    int64_t done = 0;
    while (i < s.s.n) {
        size_t j = i;
        while (j < s.s.n) { /* skip whitespace */
            size_t k = j;
            if (!rlx__j_is_space_cp(next_cp(s.s.p, s.s.n, &k))) break;
            j = k;
        }
        if (j >= s.s.n) break;
        if (maxsplit >= 0 && done >= maxsplit) {
            rlx__j_list_push(rt, out.l, rj_str(s.s.p + j, s.s.n - j)); /* the rest keeps trailing spaces */
            return out;
        }
        size_t e = j;
        while (e < s.s.n) {
            size_t k = e;
            if (rlx__j_is_space_cp(next_cp(s.s.p, s.s.n, &k))) break;
            e = k;
        }
        rlx__j_list_push(rt, out.l, rj_str(s.s.p + j, e - j));
        done++;
        i = e;
    }
    return out;
}

rj_value rlx__j_replace(rj_rt *rt, rj_value s, rj_value old, rj_value new_, int64_t count)
{
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    if (old.s.n == 0) { /* Python inserts the replacement between every character */
        size_t i = 0;
        int64_t done = 0;
        while (count < 0 || done < count) {
            rlx__j_buf_put(rt, &b, new_.s.p, new_.s.n);
            done++;
            if (i >= s.s.n) break;
            size_t j = i;
            next_cp(s.s.p, s.s.n, &j);
            rlx__j_buf_put(rt, &b, s.s.p + i, j - i);
            i = j;
        }
        rlx__j_buf_put(rt, &b, s.s.p + i, s.s.n - i);
        return rj_str(b.p, b.n);
    }
    size_t i = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
        const char *f = memmem(s.s.p + i, s.s.n - i, old.s.p, old.s.n);
        if (!f) break;
        size_t at = (size_t)(f - s.s.p);
        rlx__j_buf_put(rt, &b, s.s.p + i, at - i);
        rlx__j_buf_put(rt, &b, new_.s.p, new_.s.n);
        i = at + old.s.n;
        done++;
    }
    rlx__j_buf_put(rt, &b, s.s.p + i, s.s.n - i);
    return rj_str(b.p, b.n);
}

rj_value rlx__j_pad(rj_rt *rt, rj_value s, char how, rj_value width, const rj_value *fill)
{
    if (width.type != RJ_INT && width.type != RJ_BOOL)
        rlx__j_fail(rt, RLX_EINVAL, "'%s' object cannot be interpreted as an integer", rlx__j_type_name(width));
    int64_t w = width.type == RJ_INT ? width.i : width.b;
    rj_value f = rj_str(how == 'z' ? "0" : " ", 1);
    if (fill) {
        if (fill->type != RJ_STR || rlx__j_utf8_len(fill->s.p, fill->s.n) != 1)
            rlx__j_fail(rt, RLX_EINVAL, "The fill character must be exactly one character long");
        f = *fill;
    }
    size_t len = rlx__j_utf8_len(s.s.p, s.s.n);
    if (w <= (int64_t)len) return s;
    if (w > 1000000) rlx__j_fail(rt, RLX_ENOMEM, "padding to %" PRId64 " characters is too large", w);
    size_t pad = (size_t)w - len;
    /* CPython's pad(): center puts the odd space on the left when the width is odd */
    size_t left = how == 'l' ? 0 : how == 'c' ? pad / 2 + (pad & (size_t)w & 1) : pad;
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    size_t start = 0;
    if (how == 'z' && s.s.n && (s.s.p[0] == '-' || s.s.p[0] == '+')) { rlx__j_buf_put(rt, &b, s.s.p, 1); start = 1; }
    for (size_t i = 0; i < left; i++) rlx__j_buf_put(rt, &b, f.s.p, f.s.n);
    rlx__j_buf_put(rt, &b, s.s.p + start, s.s.n - start);
    for (size_t i = left; i < pad; i++) rlx__j_buf_put(rt, &b, f.s.p, f.s.n);
    return rj_str(b.p, b.n);
}

rj_value rlx__j_splitlines(rj_rt *rt, rj_value s, bool keepends)
{
    rj_value out = rlx__j_new_list(rt, 0);
    size_t i = 0, start = 0;
    while (i < s.s.n) {
        size_t at = i;
        int32_t cp = next_cp(s.s.p, s.s.n, &i);
        bool brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
                   cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (!brk) continue;
        if (cp == '\r' && i < s.s.n && s.s.p[i] == '\n') i++;
        rlx__j_list_push(rt, out.l, rj_str(s.s.p + start, (keepends ? i : at) - start));
        start = i;
    }
    if (start < s.s.n) rlx__j_list_push(rt, out.l, rj_str(s.s.p + start, s.s.n - start));
    return out;
}

