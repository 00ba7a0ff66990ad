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

rj_value rlx__j_splitlines(rj_rt *rt, rj_value s)
{
    rj_value out = rlx__j_new_list(rt, 0);
    size_t i = 0, start = 0;
    while (i < s.s.n) {
        size_t at = i;
        int32_t cp = next_cp(s.s.p, s.s.n, &i);
        bool brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
                   cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (!brk) continue;
        rlx__j_list_push(rt, out.l, rj_str(s.s.p + start, at - start));
        if (cp == '\r' && i < s.s.n && s.s.p[i] == '\n') i++;
        start = i;
    }
    if (start < s.s.n) rlx__j_list_push(rt, out.l, rj_str(s.s.p + start, s.s.n - start));
    return out;
}

/* One conversion of printf-style or format-spec formatting for a number or string. */
static void fmt_one(rj_rt *rt, rj_buf *b, char conv, const char *flags, int width, int prec, rj_value v)
{
    char spec[32], tmp[512];
    if (conv == 's' || conv == 'r') {
        rj_buf sb = {0};
        rlx__j_buf_put(rt, &sb, "", 0);
        if (conv == 'r') rlx__j_repr(rt, &sb, v); else rlx__j_str(rt, &sb, v);
        size_t len = rlx__j_utf8_len(sb.p, sb.n);
        if (prec >= 0 && (size_t)prec < len) { sb.n = rlx__j_utf8_off(sb.p, sb.n, (size_t)prec); len = (size_t)prec; }
        bool left = strchr(flags, '-') != NULL;
        size_t pad = width > 0 && (size_t)width > len ? (size_t)width - len : 0;
        for (size_t i = 0; !left && i < pad; i++) rlx__j_buf_puts(rt, b, " ");
        rlx__j_buf_put(rt, b, sb.p, sb.n);
        for (size_t i = 0; left && i < pad; i++) rlx__j_buf_puts(rt, b, " ");
        return;
    }
    if (!rlx__j_is_number(v)) rlx__j_fail(rt, RLX_EINVAL, "%%%c format: a real number is required, not %s", conv, rlx__j_type_name(v));
    if (width > 200) width = 200;
    if (prec > 100) prec = 100;
    if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
        int64_t x = v.type == RJ_FLOAT ? rj_trunc(v.f) : v.type == RJ_INT ? v.i : v.b;
        if (conv == 'd' || conv == 'i') {
            snprintf(spec, sizeof spec, "%%%s*%s", flags, PRId64);
            snprintf(tmp, sizeof tmp, spec, width, x);
        } else {
            snprintf(spec, sizeof spec, "%%%s*l%c", flags, conv);
            snprintf(tmp, sizeof tmp, spec, width, (long)x);
        }
    } else {
        double x = rlx__j_num(v);
        if (strchr("eEfFgG", conv) == NULL) rlx__j_fail(rt, RLX_EINVAL, "unsupported format character '%c'", conv);
        snprintf(spec, sizeof spec, "%%%s*.*%c", flags, conv);
        snprintf(tmp, sizeof tmp, spec, width > 0 ? width : 0, prec >= 0 ? prec : 6, x);
    }
    rlx__j_buf_puts(rt, b, tmp);
}

rj_value rlx__j_percent_format(rj_rt *rt, rj_value fmt, const rj_value *args, size_t nargs, const rj_value *mapping)
{
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    const char *p = fmt.s.p, *e = p + fmt.s.n;
    size_t argi = 0;
    while (p < e) {
        const char *pc = memchr(p, '%', (size_t)(e - p));
        if (!pc) { rlx__j_buf_put(rt, &b, p, (size_t)(e - p)); break; }
        rlx__j_buf_put(rt, &b, p, (size_t)(pc - p));
        p = pc + 1;
        if (p < e && *p == '%') { rlx__j_buf_puts(rt, &b, "%"); p++; continue; }
        const rj_value *val = NULL;
        if (p < e && *p == '(') {
            const char *close = memchr(p, ')', (size_t)(e - p));
            if (!close || !mapping) rlx__j_fail(rt, RLX_EINVAL, "format requires a mapping for %%(name)");
            val = rlx__j_dict_gets(mapping->d, p + 1, (size_t)(close - p - 1));
            if (!val) rlx__j_fail(rt, RLX_EINVAL, "format: key '%.*s' not found", (int)(close - p - 1), p + 1);
            p = close + 1;
        }
        char flags[8] = "";
        size_t nf = 0;
        while (p < e && strchr("-+ 0#", *p) && nf < sizeof flags - 1) flags[nf++] = *p++;
        flags[nf] = 0;
        int width = 0, prec = -1;
        while (p < e && *p >= '0' && *p <= '9') width = width * 10 + (*p++ - '0');
        if (p < e && *p == '.') {
            p++;
            prec = 0;
            while (p < e && *p >= '0' && *p <= '9') prec = prec * 10 + (*p++ - '0');
        }
        if (p >= e) rlx__j_fail(rt, RLX_EINVAL, "incomplete format");
        char conv = *p++;
        if (!val) {
            if (argi >= nargs) rlx__j_fail(rt, RLX_EINVAL, "not enough arguments for format string");
            val = &args[argi++];
        }
        if (!strchr("sridxXoeEfFgG", conv)) rlx__j_fail(rt, RLX_EINVAL, "unsupported format character '%c'", conv);
        fmt_one(rt, &b, conv, flags, width, prec, *val);
    }
    /* Python treats a lone non-tuple argument with __getitem__ (list, dict) as a mapping and
     * does not complain when the format leaves it unused */
    bool mapping_like = nargs == 1 && ((args[0].type == RJ_LIST && !args[0].tuple) || args[0].type == RJ_DICT ||
                                       args[0].type == RJ_UNDEF);
    if (!mapping && !mapping_like && argi < nargs) rlx__j_fail(rt, RLX_EINVAL, "not all arguments converted during string formatting");
    return rj_str(b.p, b.n);
}

/* str.format: {} {0} {name}, .attr and [key] lookups, !r/!s, and a format spec with fill, align,
 * sign, width, precision and type. */
rj_value rlx__j_str_format(rj_rt *rt, rj_value fmt, const rj_args *a)
{
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    const char *p = fmt.s.p, *e = p + fmt.s.n;
    size_t auto_i = 0;
    while (p < e) {
        char c = *p;
        if (c == '}' ) {
            if (p + 1 < e && p[1] == '}') { rlx__j_buf_puts(rt, &b, "}"); p += 2; continue; }
            rlx__j_fail(rt, RLX_EINVAL, "format: single '}' encountered in format string");
        }
        if (c != '{') { rlx__j_buf_put(rt, &b, p, 1); p++; continue; }
        if (p + 1 < e && p[1] == '{') { rlx__j_buf_puts(rt, &b, "{"); p += 2; continue; }
        const char *close = memchr(p, '}', (size_t)(e - p));
        if (!close) rlx__j_fail(rt, RLX_EINVAL, "format: single '{' encountered in format string");
        const char *f = p + 1, *fe = close;
        const char *bang = memchr(f, '!', (size_t)(fe - f)), *colon = memchr(f, ':', (size_t)(fe - f));
        if (bang && colon && colon < bang) bang = NULL;
        const char *name_end = bang ? bang : colon ? colon : fe;
        /* field name: the first part up to . or [ */
        const char *q = f;
        while (q < name_end && *q != '.' && *q != '[') q++;
        rj_value v;
        if (q == f) {
            if (auto_i >= a->npos) rlx__j_fail(rt, RLX_EINVAL, "format: replacement index %zu out of range", auto_i);
            v = a->pos[auto_i++];
        } else if (*f >= '0' && *f <= '9') {
            size_t idx = (size_t)strtoul(f, NULL, 10);
            if (idx >= a->npos) rlx__j_fail(rt, RLX_EINVAL, "format: replacement index %zu out of range", idx);
            v = a->pos[idx];
        } else {
            size_t k;
            for (k = 0; k < a->nkw; k++)
                if (a->kwl[k] == (size_t)(q - f) && !memcmp(a->kwn[k], f, a->kwl[k])) break;
            if (k == a->nkw) rlx__j_fail(rt, RLX_EINVAL, "format: no argument named '%.*s'", (int)(q - f), f);
            v = a->kwv[k];
        }
        while (q < name_end) { /* .attr and [key] */
            const char *s0 = q + 1, *s1 = s0;
            if (*q == '.') { while (s1 < name_end && *s1 != '.' && *s1 != '[') s1++; q = s1; }
            else { while (s1 < name_end && *s1 != ']') s1++; q = s1 < name_end ? s1 + 1 : s1; }
            rj_value *got = NULL;
            if (v.type == RJ_DICT || v.type == RJ_NS) got = rlx__j_dict_gets(v.d, s0, (size_t)(s1 - s0));
            else if (v.type == RJ_LIST) {
                size_t idx = (size_t)strtoul(s0, NULL, 10);
                if (idx < v.l->n) got = &v.l->v[idx];
            }
            if (!got) rlx__j_fail(rt, RLX_EINVAL, "format: cannot look up '%.*s'", (int)(s1 - s0), s0);
            v = *got;
        }
        char conv = 's';
        if (bang && bang + 1 < fe) conv = bang[1];
        const char *spec = colon ? colon + 1 : fe;
        /* [[fill]align][sign][0][width][.precision][type] */
        char fill = ' ', align = 0, sign = 0, type = 0;
        int width = 0, prec = -1;
        const char *s = spec;
        if (fe - s >= 2 && strchr("<>^=", s[1])) { fill = s[0]; align = s[1]; s += 2; }
        else if (s < fe && strchr("<>^=", *s)) align = *s++;
        if (s < fe && strchr("+- ", *s)) sign = *s++;
        if (s < fe && *s == '0') { if (!align) { fill = '0'; align = '='; } s++; }
        while (s < fe && *s >= '0' && *s <= '9') width = width * 10 + (*s++ - '0');
        char group = 0;
        if (s < fe && (*s == ',' || *s == '_')) group = *s++;
        if (s < fe && *s == '.') { s++; prec = 0; while (s < fe && *s >= '0' && *s <= '9') prec = prec * 10 + (*s++ - '0'); }
        if (s < fe) type = *s;
        rj_buf one = {0};
        rlx__j_buf_put(rt, &one, "", 0);
        if (type && strchr("dxXoeEfFgG%", type)) {
            char flags[4] = {0};
            if (sign && sign != '-') flags[0] = sign;
            fmt_one(rt, &one, type == '%' ? 'f' : type, flags, 0, prec, v);
        } else if (conv == 'r') {
            rlx__j_repr(rt, &one, v);
        } else {
            rlx__j_str(rt, &one, v);
            if (prec >= 0 && v.type == RJ_STR) one.n = rlx__j_utf8_off(one.p, one.n, (size_t)prec);
        }
        if (group && (v.type == RJ_INT || v.type == RJ_BOOL) && (!type || type == 'd')) { /* {:,} thousands */
            rj_buf g = {0};
            rlx__j_buf_put(rt, &g, "", 0);
            size_t digits0 = (one.n && one.p[0] == '-') ? 1 : 0, nd = one.n - digits0;
            rlx__j_buf_put(rt, &g, one.p, digits0);
            for (size_t i = 0; i < nd; i++) {
                if (i && (nd - i) % 3 == 0) rlx__j_buf_put(rt, &g, &group, 1);
                rlx__j_buf_put(rt, &g, one.p + digits0 + i, 1);
            }
            one = g;
        }
        size_t len = rlx__j_utf8_len(one.p, one.n);
        size_t pad = width > 0 && (size_t)width > len ? (size_t)width - len : 0;
        if (!align) align = (v.type == RJ_STR || !rlx__j_is_number(v)) ? '<' : '>';
        size_t lpad = align == '<' ? 0 : align == '^' ? pad / 2 : pad;
        if (width > 10000) rlx__j_fail(rt, RLX_EINVAL, "format: width too large");
        for (size_t i = 0; i < lpad; i++) rlx__j_buf_put(rt, &b, &fill, 1);
        rlx__j_buf_put(rt, &b, one.p, one.n);
        for (size_t i = lpad; i < pad; i++) rlx__j_buf_put(rt, &b, &fill, 1);
        p = close + 1;
    }
    return rj_str(b.p, b.n);
}
