/* jinja_format.c - Python's two string formatting languages over template values: `fmt % args`
 * (printf-style conversions with flags, width and precision) and str.format (replacement
 * fields with a format spec: fill, align, sign, '#', '0', width, grouping, precision, type).
 * Ints of any size format exactly; floats go through C's printf, whose rounding of a double
 * is the same correctly rounded decimal Python prints. */
#include "models/jinja_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

typedef struct spec {
    const char *fill;      /* one UTF-8 character */
    size_t fill_n;
    char align;            /* 0 (the type's default), '<', '>', '^', '=' */
    char sign;             /* 0 (none given), '-', '+', ' ' */
    bool alt;              /* '#' */
    int width;             /* 0: none */
    char group;            /* 0, ',' or '_' */
    int prec;              /* -1: none */
    char type;             /* 0: none */
    int min_digits;        /* printf's precision on an integer: zero-extend the digits */
} spec;

static size_t utf8_char_len(const char *p, size_t n)
{
    size_t k = 1;
    while (k < n && ((unsigned char)p[k] & 0xc0) == 0x80) k++;
    return k;
}

/* Digits in groups of `every` separated by sep (0: none), zero-extended to at least min_width
 * characters as CPython's grouping does for '0' padding: a separator is never the first
 * character, so the result may be one longer. */
static void put_grouped(rj_rt *rt, rj_buf *b, const char *d, size_t n, char sep, size_t every, size_t min_width)
{
    char *rev = rlx__j_alloc(rt, 2 * (n + min_width) + 2);
    size_t k = 0;
    for (size_t i = 0;;) {
        rev[k++] = i < n ? d[n - 1 - i] : '0';
        i++;
        if (i >= n && k >= min_width) break;
        if (sep && i % every == 0) rev[k++] = sep;
    }
    while (k > 0) rlx__j_buf_put(rt, b, &rev[--k], 1);
}

/* a float's digits (no sign) as printf's `conv` gives them; e/f/g keep Python's spelling of
 * non-finite values */
static void float_digits(rj_rt *rt, rj_buf *b, double x, char conv, int prec, bool alt)
{
    if (isnan(x) || isinf(x)) {
        bool up = conv == 'E' || conv == 'F' || conv == 'G';
        rlx__j_buf_puts(rt, b, isnan(x) ? (up ? "NAN" : "nan") : (up ? "INF" : "inf"));
        return;
    }
    char fmt[16], tmp[512];
    snprintf(fmt, sizeof fmt, "%%%s.*%c", alt ? "#" : "", conv);
    if (prec > 300) prec = 300;
    snprintf(tmp, sizeof tmp, fmt, prec, fabs(x));
    rlx__j_buf_puts(rt, b, tmp);
}

/* The number part of a field: sign, a prefix (0x, ...), the integer digits (grouped by the
 * caller, *every apart) and the rest (fraction, exponent, '%'). */
static void format_number(rj_rt *rt, rj_value v, const spec *s, rj_buf *sign, rj_buf *prefix, rj_buf *digits, rj_buf *rest,
                          size_t *every)
{
    *every = 3;
    char t = s->type;
    bool is_int = rlx__j_is_int(v);
    if (t == 's') rlx__j_fail(rt, RLX_EINVAL, "Unknown format code 's' for object of type '%s'", rlx__j_type_name(v));
    if (s->group && (t == 'n' || t == 'c' || (s->group == ',' && (t == 'x' || t == 'X' || t == 'o' || t == 'b'))))
        rlx__j_fail(rt, RLX_EINVAL, "Cannot specify '%c' with '%c'.", s->group, t);
    if (t == 'c') {
        if (!is_int) rlx__j_fail(rt, RLX_EINVAL, "Unknown format code 'c' for object of type '%s'", rlx__j_type_name(v));
        if (s->sign) rlx__j_fail(rt, RLX_EINVAL, "Sign not allowed with integer format specifier 'c'");
        if (s->alt) rlx__j_fail(rt, RLX_EINVAL, "Alternate form (#) not allowed with integer format specifier 'c'");
        if (s->prec >= 0) rlx__j_fail(rt, RLX_EINVAL, "Precision not allowed in integer format specifier");
        if (v.type == RJ_BIGINT) rlx__j_fail(rt, RLX_ERANGE, "Python int too large to convert to C long");
        int64_t c = v.type == RJ_INT ? v.i : v.b;
        utf8proc_uint8_t u[4];
        utf8proc_ssize_t k = c >= 0 && c <= 0x10ffff ? utf8proc_encode_char((utf8proc_int32_t)c, u) : 0;
        if (k <= 0) rlx__j_fail(rt, RLX_EINVAL, "%%c arg not in range(0x110000)");
        rlx__j_buf_put(rt, digits, (const char *)u, (size_t)k);
        return;
    }
    bool int_type = t == 'd' || t == 'x' || t == 'X' || t == 'o' || t == 'b' || ((t == 'n' || t == 0) && is_int);
    bool neg;
    if (int_type) {
        if (!is_int) rlx__j_fail(rt, RLX_EINVAL, "Unknown format code '%c' for object of type '%s'", t ? t : 'd', rlx__j_type_name(v));
        if (s->prec >= 0) rlx__j_fail(rt, RLX_EINVAL, "Precision not allowed in integer format specifier");
        neg = rlx__j_int_cmp(v, rj_int(0)) < 0;
        int base = t == 'x' || t == 'X' ? 16 : t == 'o' ? 8 : t == 'b' ? 2 : 10;
        rj_buf d = {0};
        rlx__j_buf_put(rt, &d, "", 0);
        rlx__j_int_base(rt, &d, v, base, t == 'X');
        for (int z = (int)d.n; z < s->min_digits; z++) rlx__j_buf_puts(rt, digits, "0");
        if (s->alt && base != 10) rlx__j_buf_puts(rt, prefix, base == 16 ? (t == 'X' ? "0X" : "0x") : base == 8 ? "0o" : "0b");
        rlx__j_buf_put(rt, digits, d.p, d.n);
        *every = base == 10 ? 3 : 4;
    } else {
        if (!rlx__j_is_number(v)) rlx__j_fail(rt, RLX_EINVAL, "Unknown format code '%c' for object of type '%s'", t, rlx__j_type_name(v));
        double x = rlx__j_num(v);
        neg = signbit(x) && !isnan(x);
        int prec = s->prec;
        rj_buf d = {0};
        rlx__j_buf_put(rt, &d, "", 0);
        if (t == '%') {
            float_digits(rt, &d, x * 100.0, 'f', prec < 0 ? 6 : prec, s->alt);
        } else if (t == 0 && prec < 0) { /* str(): repr, and an int value stays an int */
            rj_buf r = {0};
            if (is_int) rlx__j_int_base(rt, &r, v, 10, false);
            else {
                char num[48];
                rlx__j_float_repr(num, sizeof num, fabs(x));
                char *ep = strchr(num, 'e');
                if (s->alt && ep && !memchr(num, '.', (size_t)(ep - num))) { /* '#': 1e+16 -> 1.e+16 */
                    rlx__j_buf_put(rt, &r, num, (size_t)(ep - num));
                    rlx__j_buf_puts(rt, &r, ".");
                    rlx__j_buf_puts(rt, &r, ep);
                } else {
                    rlx__j_buf_puts(rt, &r, num);
                }
            }
            rlx__j_buf_put(rt, &d, r.p, r.n);
        } else if (t == 0) { /* like 'g', but scientific from exp >= p - 1 and a fixed result keeps ".0" */
            int pr = prec ? prec : 1;
            char tmp[512];
            snprintf(tmp, sizeof tmp, "%.*e", RLX_MIN(pr - 1, 300), fabs(x));
            int ex = isfinite(x) ? atoi(strchr(tmp, 'e') + 1) : 0;
            if (!isfinite(x)) float_digits(rt, &d, x, 'g', pr, false);
            else if (ex >= -4 && ex < pr - 1) {
                snprintf(tmp, sizeof tmp, "%.*f", RLX_MIN(pr - 1 - ex, 300), fabs(x));
                size_t n = strlen(tmp);
                if (!s->alt && strchr(tmp, '.'))
                    while (n > 0 && tmp[n - 1] == '0' && tmp[n - 2] != '.') n--;
                rlx__j_buf_put(rt, &d, tmp, n);
                if (!strchr(tmp, '.')) rlx__j_buf_puts(rt, &d, ".0");
            } else {
                char *ep = strchr(tmp, 'e');
                size_t n = (size_t)(ep - tmp);
                if (!s->alt && memchr(tmp, '.', n)) {
                    while (n > 0 && tmp[n - 1] == '0') n--;
                    if (tmp[n - 1] == '.') n--;
                }
                rlx__j_buf_put(rt, &d, tmp, n);
                if (s->alt && !memchr(tmp, '.', n)) rlx__j_buf_puts(rt, &d, "."); /* '#' keeps the point */
                rlx__j_buf_puts(rt, &d, ep);
            }
        } else {
            float_digits(rt, &d, x, t == 'n' ? 'g' : t, prec < 0 ? 6 : prec, s->alt);
        }
        size_t intlen = 0;
        while (intlen < d.n && d.p[intlen] >= '0' && d.p[intlen] <= '9') intlen++;
        rlx__j_buf_put(rt, digits, d.p, intlen);
        rlx__j_buf_put(rt, rest, d.p + intlen, d.n - intlen);
        if (t == '%') rlx__j_buf_puts(rt, rest, "%");
    }
    if (neg) rlx__j_buf_puts(rt, sign, "-");
    else if (s->sign == '+') rlx__j_buf_puts(rt, sign, "+");
    else if (s->sign == ' ') rlx__j_buf_puts(rt, sign, " ");
}

/* one field: the value under the spec, padded */
static void format_field(rj_rt *rt, rj_buf *out, rj_value v, const spec *s)
{
    rj_buf sign = {0}, prefix = {0}, body = {0};
    rlx__j_buf_put(rt, &sign, "", 0);
    rlx__j_buf_put(rt, &prefix, "", 0);
    rlx__j_buf_put(rt, &body, "", 0);
    /* a bool formats as an int under any spec but the empty one */
    bool any = s->type || s->width || s->prec >= 0 || s->align || s->sign || s->alt || s->group;
    bool number = rlx__j_is_number(v) && (v.type != RJ_BOOL || any);
    if (number) {
        rj_buf digits = {0}, rest = {0};
        rlx__j_buf_put(rt, &digits, "", 0);
        rlx__j_buf_put(rt, &rest, "", 0);
        size_t every;
        format_number(rt, v, s, &sign, &prefix, &digits, &rest, &every);
        /* '0' padding (fill 0, '=' alignment) goes into the digits, grouped with them */
        size_t fixed = rlx__j_utf8_len(sign.p, sign.n) + prefix.n + rlx__j_utf8_len(rest.p, rest.n);
        bool zero = s->align == '=' && s->fill_n == 1 && s->fill[0] == '0' && s->group;
        size_t min_width = zero && (size_t)s->width > fixed ? (size_t)s->width - fixed : 0;
        if (digits.n) put_grouped(rt, &body, digits.p, digits.n, s->group, every, min_width);
        rlx__j_buf_put(rt, &body, rest.p, rest.n);
    } else {
        if (s->type && s->type != 's')
            rlx__j_fail(rt, RLX_EINVAL, "Unknown format code '%c' for object of type '%s'", s->type, rlx__j_type_name(v));
        bool any_spec = s->type || s->width || s->prec >= 0 || s->align;
        if (any_spec && v.type != RJ_STR && v.type != RJ_BOOL) /* object.__format__ takes only an empty spec */
            rlx__j_fail(rt, RLX_EINVAL, "unsupported format string passed to %s.__format__", rlx__j_type_name(v));
        if (s->sign) rlx__j_fail(rt, RLX_EINVAL, "Sign not allowed in string format specifier");
        if (s->alt) rlx__j_fail(rt, RLX_EINVAL, "Alternate form (#) not allowed in string format specifier");
        if (s->group) rlx__j_fail(rt, RLX_EINVAL, "Cannot specify '%c' with 's'.", s->group);
        if (s->align == '=') rlx__j_fail(rt, RLX_EINVAL, "'=' alignment not allowed in string format specifier");
        rlx__j_str(rt, &body, v);
        if (s->prec >= 0) body.n = rlx__j_utf8_off(body.p, body.n, (size_t)s->prec);
    }
    size_t len = rlx__j_utf8_len(sign.p, sign.n) + rlx__j_utf8_len(prefix.p, prefix.n) + rlx__j_utf8_len(body.p, body.n);
    size_t pad = s->width > 0 && (size_t)s->width > len ? (size_t)s->width - len : 0;
    char align = s->align ? s->align : number ? '>' : '<';
    size_t left = align == '<' ? 0 : align == '^' ? pad / 2 : align == '=' ? 0 : pad;
    for (size_t i = 0; i < left; i++) rlx__j_buf_put(rt, out, s->fill, s->fill_n);
    rlx__j_buf_put(rt, out, sign.p, sign.n);
    rlx__j_buf_put(rt, out, prefix.p, prefix.n);
    if (align == '=')
        for (size_t i = 0; i < pad; i++) rlx__j_buf_put(rt, out, s->fill, s->fill_n);
    rlx__j_buf_put(rt, out, body.p, body.n);
    if (align != '=')
        for (size_t i = left; i < pad; i++) rlx__j_buf_put(rt, out, s->fill, s->fill_n);
}

/* [[fill]align][sign][z][#][0][width][grouping][.precision][type] */
static spec parse_spec(rj_rt *rt, const char *p, size_t n)
{
    spec s = {.fill = " ", .fill_n = 1, .prec = -1};
    size_t i = 0, k = n ? utf8_char_len(p, n) : 0;
    bool fill_given = false;
    if (n > k && strchr("<>^=", p[k])) { s.fill = p; s.fill_n = k; s.align = p[k]; i = k + 1; fill_given = true; }
    else if (n && strchr("<>^=", p[0])) { s.align = p[0]; i = 1; }
    if (i < n && strchr("+- ", p[i])) s.sign = p[i++];
    if (i < n && p[i] == 'z') i++;
    if (i < n && p[i] == '#') { s.alt = true; i++; }
    if (i < n && p[i] == '0') { /* sign-aware zero padding, unless a fill or an alignment says otherwise */
        if (!fill_given) { s.fill = "0"; s.fill_n = 1; }
        if (!s.align) s.align = '=';
        i++;
    }
    while (i < n && p[i] >= '0' && p[i] <= '9') {
        s.width = s.width * 10 + (p[i++] - '0');
        if (s.width > 100000) rlx__j_fail(rt, RLX_EINVAL, "format: width too large");
    }
    if (i < n && (p[i] == ',' || p[i] == '_')) s.group = p[i++];
    if (i < n && p[i] == '.') {
        i++;
        if (i >= n || p[i] < '0' || p[i] > '9') rlx__j_fail(rt, RLX_EINVAL, "Format specifier missing precision");
        s.prec = 0;
        while (i < n && p[i] >= '0' && p[i] <= '9') {
            s.prec = s.prec * 10 + (p[i++] - '0');
            if (s.prec > 100000) rlx__j_fail(rt, RLX_EINVAL, "format: precision too large");
        }
    }
    if (i < n) s.type = p[i++];
    if (i < n || (s.type && !strchr("bcdeEfFgGnosxX%", s.type)))
        rlx__j_fail(rt, RLX_EINVAL, "Invalid format specifier '%.*s'", (int)RLX_MIN(n, (size_t)40), p);
    return s;
}

/* ---- fmt % args ---- */

static rj_value as_percent_arg(rj_rt *rt, char conv, rj_value v)
{
    if (strchr("di", conv)) { /* int(x) */
        if (v.type == RJ_FLOAT) return rlx__j_int_from_double(rt, v.f);
        if (!rlx__j_is_int(v)) rlx__j_fail(rt, RLX_EINVAL, "%%%c format: a real number is required, not %s", conv, rlx__j_type_name(v));
        return v.type == RJ_BOOL ? rj_int(v.b) : v;
    }
    if (strchr("xXo", conv)) {
        if (!rlx__j_is_int(v)) rlx__j_fail(rt, RLX_EINVAL, "%%%c format: an integer is required, not %s", conv, rlx__j_type_name(v));
        return v.type == RJ_BOOL ? rj_int(v.b) : v;
    }
    if (!rlx__j_is_number(v)) rlx__j_fail(rt, RLX_EINVAL, "must be real number, not %s", rlx__j_type_name(v));
    return rj_float(rlx__j_num(v));
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
        const rj_value *val = NULL;
        if (p < e && *p == '(') {
            const char *close = memchr(p, ')', (size_t)(e - p));
            if (!close || !mapping) rlx__j_fail(rt, RLX_EINVAL, "format requires a mapping for %%(name)");
            val = rlx__j_dict_gets(mapping->d, p + 1, (size_t)(close - p - 1));
            if (!val) rlx__j_fail(rt, RLX_EINVAL, "format: key '%.*s' not found", (int)(close - p - 1), p + 1);
            p = close + 1;
        }
        spec s = {.fill = " ", .fill_n = 1, .prec = -1};
        bool left = false, zero = false;
        for (; p < e && strchr("-+ 0#", *p); p++) {
            if (*p == '-') left = true;
            else if (*p == '0') zero = true;
            else if (*p == '#') s.alt = true;
            else if (*p == '+' || s.sign != '+') s.sign = *p;
        }
        while (p < e && *p >= '0' && *p <= '9') {
            s.width = s.width * 10 + (*p++ - '0');
            if (s.width > 100000) rlx__j_fail(rt, RLX_EINVAL, "format: width too large");
        }
        if (p < e && *p == '.') {
            p++;
            s.prec = 0;
            while (p < e && *p >= '0' && *p <= '9') s.prec = s.prec * 10 + (*p++ - '0');
            if (s.prec > 100000) rlx__j_fail(rt, RLX_EINVAL, "format: precision too large");
        }
        if (p >= e) rlx__j_fail(rt, RLX_EINVAL, "incomplete format");
        char conv = *p++;
        if (conv == '%') { rlx__j_buf_puts(rt, &b, "%"); continue; }
        if (!strchr("sriduoxXeEfFgGca", conv)) rlx__j_fail(rt, RLX_EINVAL, "unsupported format character '%c'", conv);
        if (!val) {
            if (argi >= nargs) rlx__j_fail(rt, RLX_EINVAL, "not enough arguments for format string");
            val = &args[argi++];
        }
        s.align = left ? '<' : zero && !strchr("srac", conv) ? '=' : '>';
        if (zero && !left && !strchr("srac", conv)) s.fill = "0";
        if (conv == 's' || conv == 'r' || conv == 'a') {
            rj_buf t = {0};
            rlx__j_buf_put(rt, &t, "", 0);
            if (conv == 's') rlx__j_str(rt, &t, *val);
            else rlx__j_repr(rt, &t, *val);
            spec ss = s;
            ss.sign = 0;
            ss.alt = false;
            format_field(rt, &b, rj_str(t.p, t.n), &ss);
        } else if (conv == 'c') {
            spec cs = s;
            cs.prec = -1;
            cs.sign = 0;
            if (val->type == RJ_STR) {
                if (rlx__j_utf8_len(val->s.p, val->s.n) != 1) rlx__j_fail(rt, RLX_EINVAL, "%%c requires an int or a unicode character");
                if (cs.align == '=') cs.align = '>';
                format_field(rt, &b, *val, &cs);
            } else {
                if (!rlx__j_is_int(*val)) rlx__j_fail(rt, RLX_EINVAL, "%%c requires int or char");
                cs.type = 'c';
                format_field(rt, &b, val->type == RJ_BOOL ? rj_int(val->b) : *val, &cs);
            }
        } else {
            rj_value x = as_percent_arg(rt, conv, *val);
            spec ns = s;
            ns.type = conv == 'i' || conv == 'u' ? 'd' : conv;
            if (strchr("doxX", ns.type)) { /* a precision is printf's minimum digit count */
                ns.min_digits = ns.prec;
                ns.prec = -1;
            } else if (ns.prec < 0) {
                ns.prec = 6;
            }
            format_field(rt, &b, x, &ns);
        }
    }
    /* Python treats a lone non-tuple argument with __getitem__ (list, dict) as a mapping and
     * does not complain when the format leaves it unused */
    bool mapping_like = nargs == 1 && ((args[0].type == RJ_LIST && !args[0].tuple) || args[0].type == RJ_DICT ||
                                       args[0].type == RJ_UNDEF);
    if (!mapping && !mapping_like && argi < nargs) rlx__j_fail(rt, RLX_EINVAL, "not all arguments converted during string formatting");
    return rj_str(b.p, b.n);
}

/* ---- str.format ---- */

/* str.format: {} {0} {name}, .attr and [key] lookups, !r/!s, and a format spec */
rj_value rlx__j_str_format(rj_rt *rt, rj_value fmt, const rj_args *a)
{
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    const char *p = fmt.s.p, *e = p + fmt.s.n;
    size_t auto_i = 0;
    while (p < e) {
        char c = *p;
        if (c == '}') {
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
        if (bang && bang + 1 < fe && (bang[1] == 'r' || bang[1] == 's' || bang[1] == 'a')) {
            rj_buf t = {0};
            rlx__j_buf_put(rt, &t, "", 0);
            if (bang[1] == 's') rlx__j_str(rt, &t, v);
            else rlx__j_repr(rt, &t, v);
            v = rj_str(t.p, t.n);
        }
        const char *sp = colon ? colon + 1 : fe;
        spec s = parse_spec(rt, sp, (size_t)(fe - sp));
        format_field(rt, &b, v, &s);
        p = close + 1;
    }
    return rj_str(b.p, b.n);
}
