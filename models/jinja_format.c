/* jinja_format.c - Python's two string formatting languages over template values: `fmt % args`
 * (printf-style conversions with flags, width and precision) and str.format (replacement
 * fields with a format spec: fill, align, sign, '#', '0', width, grouping, precision, type).
 * Ints of any size format exactly; floats go through C's printf, whose rounding of a double
 * is the same correctly rounded decimal Python prints. */
#include "models/jinja_text.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

typedef struct spec_t {
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
    bool zero_align;       /* align '=' comes from the '0' flag: strings keep their '<' (3.10+) */
} spec_t;

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
static void format_number(rj_rt *rt, rj_value v, const spec_t *s, rj_buf *sign, rj_buf *prefix, rj_buf *digits, rj_buf *rest,
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
static void format_field(rj_rt *rt, rj_buf *out, rj_value v, const spec_t *s)
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
        if (s->align == '=' && !s->zero_align) rlx__j_fail(rt, RLX_EINVAL, "'=' alignment not allowed in string format specifier");
        rlx__j_str(rt, &body, v);
        if (s->prec >= 0) body.n = rlx__j_utf8_off(body.p, body.n, (size_t)s->prec);
    }
    size_t len = rlx__j_utf8_len(sign.p, sign.n) + rlx__j_utf8_len(prefix.p, prefix.n) + rlx__j_utf8_len(body.p, body.n);
    size_t pad = s->width > 0 && (size_t)s->width > len ? (size_t)s->width - len : 0;
    char align = s->align && (number || !s->zero_align) ? s->align : number ? '>' : '<';
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
static spec_t parse_spec(rj_rt *rt, const char *p, size_t n)
{
    spec_t s = {.fill = " ", .fill_n = 1, .prec = -1};
    size_t i = 0, k = n ? utf8_char_len(p, n) : 0;
    bool fill_given = false;
    if (n > k && strchr("<>^=", p[k])) { s.fill = p; s.fill_n = k; s.align = p[k]; i = k + 1; fill_given = true; }
    else if (n && strchr("<>^=", p[0])) { s.align = p[0]; i = 1; }
    if (i < n && strchr("+- ", p[i])) s.sign = p[i++];
    if (i < n && p[i] == 'z') i++;
    if (i < n && p[i] == '#') { s.alt = true; i++; }
    if (i < n && p[i] == '0') { /* sign-aware zero padding, unless a fill or an alignment says otherwise */
        if (!fill_given) { s.fill = "0"; s.fill_n = 1; }
        if (!s.align) { s.align = '='; s.zero_align = true; }
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
    if (strchr("diu", conv)) { /* int(x) (%u: Python's obsolete alias of %d) */
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

/* a '*' width or precision: the next positional argument, which must be an int */
static int64_t star_arg(rj_rt *rt, const rj_value *args, size_t nargs, size_t *argi)
{
    if (*argi >= nargs) rlx__j_fail(rt, RLX_EINVAL, "not enough arguments for format string");
    rj_value v = args[(*argi)++];
    if (v.type == RJ_BOOL) return v.b;
    if (v.type == RJ_BIGINT) rlx__j_fail(rt, RLX_EINVAL, "Python int too large to convert to C ssize_t");
    if (v.type != RJ_INT) rlx__j_fail(rt, RLX_EINVAL, "* wants int");
    return v.i;
}

static rj_value ascii_repr(rj_rt *rt, rj_value v);

/* Python's "%(name)s" lookup in the lone argument that % takes as a mapping */
static const rj_value *percent_key(rj_rt *rt, const rj_value *mapping, const char *k, size_t n)
{
    if (!mapping) rlx__j_fail(rt, RLX_EINVAL, "format requires a mapping");
    if (mapping->type == RJ_UNDEF) rlx__j_fail_undefined(rt, *mapping);
    if (mapping->type != RJ_DICT) rlx__j_fail(rt, RLX_EINVAL, "%s indices must be integers or slices, not str", rlx__j_type_name(*mapping));
    const rj_value *v = rlx__j_dict_gets(mapping->d, k, n);
    if (!v) rlx__j_fail(rt, RLX_EINVAL, "format: key '%.*s' not found (KeyError)", (int)RLX_MIN(n, (size_t)60), k);
    return v;
}

rj_value rlx__j_percent_format(rj_rt *rt, rj_value fmt, const rj_value *args, size_t nargs, bool single)
{
    /* a lone non-tuple argument with __getitem__ (dict, list, Undefined) serves %(name)s, and
       Python does not complain when the format leaves it unused */
    const rj_value *mapping = single && nargs == 1 && ((args[0].type == RJ_LIST && !args[0].tuple &&
                              (args[0].view == RJ_VIEW_NONE || args[0].view == RJ_VIEW_RANGE)) ||
                              args[0].type == RJ_DICT || args[0].type == RJ_UNDEF) ? &args[0] : NULL;
    bool esc = fmt.safe; /* Markup % args: each argument escaped (_MarkupEscapeHelper) */
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
        if (p < e && *p == '(') { /* the key runs to the matching ')' */
            if (!mapping) rlx__j_fail(rt, RLX_EINVAL, "format requires a mapping");
            const char *k = ++p;
            int depth = 1;
            for (; p < e && depth; p++) depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
            if (depth) rlx__j_fail(rt, RLX_EINVAL, "incomplete format key");
            val = percent_key(rt, mapping, k, (size_t)(p - 1 - k));
        }
        spec_t s = {.fill = " ", .fill_n = 1, .prec = -1};
        bool left = false, zero = false;
        for (; p < e && *p && strchr("-+ 0#", *p); p++) {
            if (*p == '-') left = true;
            else if (*p == '0') zero = true;
            else if (*p == '#') s.alt = true;
            else if (*p == '+' || s.sign != '+') s.sign = *p;
        }
        if (p < e && *p == '*') { /* the width from the next argument; negative: left-justified */
            p++;
            int64_t w = star_arg(rt, args, nargs, &argi);
            if (w < 0) { left = true; w = -w; }
            if (w > 100000) rlx__j_fail(rt, RLX_EINVAL, "format: width too large");
            s.width = (int)w;
        } else while (p < e && *p >= '0' && *p <= '9') {
            s.width = s.width * 10 + (*p++ - '0');
            if (s.width > 100000) rlx__j_fail(rt, RLX_EINVAL, "format: width too large");
        }
        if (p < e && *p == '.') {
            p++;
            s.prec = 0;
            if (p < e && *p == '*') { /* a negative precision counts as 0 */
                p++;
                int64_t pr = star_arg(rt, args, nargs, &argi);
                s.prec = pr < 0 ? 0 : pr > 100000 ? 100001 : (int)pr;
            } else while (p < e && *p >= '0' && *p <= '9' && s.prec <= 100000) s.prec = s.prec * 10 + (*p++ - '0');
            if (s.prec > 100000) rlx__j_fail(rt, RLX_EINVAL, "format: precision too large");
        }
        if (p >= e) rlx__j_fail(rt, RLX_EINVAL, "incomplete format");
        char conv = *p++;
        if (conv == '%' && p == pc + 2) { rlx__j_buf_puts(rt, &b, "%"); continue; } /* "%%" only: "%5%" takes an argument */
        if (!val) {
            if (argi >= nargs) rlx__j_fail(rt, RLX_EINVAL, "not enough arguments for format string");
            val = &args[argi++];
        }
        if (!conv || !strchr("sriduoxXeEfFgGca", conv)) rlx__j_fail(rt, RLX_EINVAL, "unsupported format character '%c'", conv);
        s.align = left ? '<' : zero && !strchr("srac", conv) ? '=' : '>';
        if (zero && !left && !strchr("srac", conv)) s.fill = "0";
        if (conv == 's' || conv == 'r' || conv == 'a') {
            rj_value txt;
            if (conv == 'a') {
                txt = ascii_repr(rt, *val);
            } else {
                rj_buf t = {0};
                rlx__j_buf_put(rt, &t, "", 0);
                if (conv == 's') rlx__j_str(rt, &t, *val);
                else rlx__j_repr(rt, &t, *val);
                txt = rj_str(t.p, t.n);
            }
            if (esc && !(conv == 's' && val->type == RJ_STR && val->safe)) txt = rlx__j_escape(rt, txt);
            spec_t ss = s;
            ss.sign = 0;
            ss.alt = false;
            format_field(rt, &b, txt, &ss);
        } else if (conv == 'c') {
            spec_t cs = s;
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
            spec_t ns = s;
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
    if (!mapping && argi < nargs) rlx__j_fail(rt, RLX_EINVAL, "not all arguments converted during string formatting");
    rj_value r = rj_str(b.p, b.n);
    r.safe = esc;
    return r;
}

/* ---- str.format ---- */

/* jinja2's sandbox runs str.format through string.Formatter (SandboxedFormatter): the fields
 * are parsed as CPython's formatter_parser does, attributes and items are looked up with the
 * environment's getattr/getitem (a missing one is undefined, not an error), and each format
 * spec is itself formatted first, so '{:{w}.{p}f}' takes width and precision from arguments
 * (two levels at most). On a Markup string the fields are escaped, as SandboxedEscapeFormatter. */
typedef struct fmt_ctx {
    rj_env *E;
    rj_rt *rt;
    const rj_value *args;
    size_t nargs;
    const rj_value *kwargs; /* NULL: no keyword arguments; else a dict (format_map: any value) */
    bool escape;
} fmt_ctx;

/* get_integer: all decimal digits (any script's) as an index, else -1 */
static int64_t field_index(rj_rt *rt, const char *p, size_t n)
{
    if (!n) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)p + i, (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0 || utf8proc_category(c) != UTF8PROC_CATEGORY_ND) return -1;
        int32_t zero = c;
        while (c - zero < 200 && utf8proc_category(zero - 1) == UTF8PROC_CATEGORY_ND) zero--;
        if (v > (INT64_MAX - 9) / 10) rlx__j_fail(rt, RLX_EINVAL, "Too many decimal digits in format string");
        v = v * 10 + (c - zero) % 10;
        i += (size_t)k;
    }
    return v;
}

static rj_value field_arg(fmt_ctx *c, const char *p, size_t n)
{
    int64_t idx = field_index(c->rt, p, n);
    if (idx >= 0) {
        if ((uint64_t)idx >= c->nargs) rlx__j_fail(c->rt, RLX_EINVAL, "format: replacement index %" PRId64 " out of range (tuple index out of range)", idx);
        return c->args[idx];
    }
    rj_value *v = NULL;
    if (c->kwargs && c->kwargs->type == RJ_UNDEF) rlx__j_fail_undefined(c->rt, *c->kwargs);
    if (c->kwargs && c->kwargs->type != RJ_DICT) rlx__j_fail(c->rt, RLX_EINVAL, "'%s' object is not subscriptable", rlx__j_type_name(*c->kwargs));
    if (c->kwargs) v = rlx__j_dict_gets(c->kwargs->d, p, n);
    if (!v) rlx__j_fail(c->rt, RLX_EINVAL, "format: no argument named '%.*s' (KeyError)", (int)RLX_MIN(n, (size_t)60), p);
    return *v;
}

/* SandboxedFormatter.get_field: the first name, then .attr and [key] parts */
static rj_value get_field(fmt_ctx *c, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && p[i] != '.' && p[i] != '[') i++;
    rj_value v = field_arg(c, p, i);
    while (i < n) {
        char kind = p[i++];
        size_t s0 = i;
        if (kind == '.') {
            while (i < n && p[i] != '.' && p[i] != '[') i++;
        } else if (kind == '[') {
            while (i < n && p[i] != ']') i++;
            if (i >= n) rlx__j_fail(c->rt, RLX_EINVAL, "Missing ']' in format string");
        } else {
            rlx__j_fail(c->rt, RLX_EINVAL, "Only '.' or '[' may follow ']' in format field specifier");
        }
        size_t s1 = i;
        if (kind == '[') i++;
        if (s1 == s0) rlx__j_fail(c->rt, RLX_EINVAL, "Empty attribute in format string");
        if (kind == '.') {
            v = rlx__j_getattr(c->E, v, p + s0, s1 - s0);
        } else {
            int64_t idx = field_index(c->rt, p + s0, s1 - s0);
            v = rlx__j_getitem(c->E, v, idx >= 0 ? rj_int(idx) : rj_str(p + s0, s1 - s0));
        }
    }
    return v;
}

/* ascii(): repr with non-ASCII characters escaped */
static rj_value ascii_repr(rj_rt *rt, rj_value v)
{
    rj_buf r = {0}, b = {0};
    rlx__j_buf_put(rt, &r, "", 0);
    rlx__j_buf_put(rt, &b, "", 0);
    rlx__j_repr(rt, &r, v);
    for (size_t i = 0; i < r.n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)r.p + i, (utf8proc_ssize_t)(r.n - i), &cp);
        if (k <= 0) { cp = (unsigned char)r.p[i]; k = 1; }
        if (cp < 0x80) rlx__j_buf_put(rt, &b, r.p + i, 1);
        else if (cp < 0x100) rlx__j_buf_printf(rt, &b, "\\x%02x", (unsigned)cp);
        else if (cp < 0x10000) rlx__j_buf_printf(rt, &b, "\\u%04x", (unsigned)cp);
        else rlx__j_buf_printf(rt, &b, "\\U%08x", (unsigned)cp);
        i += (size_t)k;
    }
    return rj_str(b.p, b.n);
}

/* Formatter._vformat over p[0..n): *auto_i is the next automatic index, -1 once a field
 * was numbered by hand */
static void vformat(fmt_ctx *c, rj_buf *out, const char *p, size_t n, int depth, int64_t *auto_i)
{
    rj_rt *rt = c->rt;
    if (depth < 0) rlx__j_fail(rt, RLX_EINVAL, "Max string recursion exceeded");
    size_t i = 0;
    while (i < n) {
        /* literal text up to a '{' or '}'; doubled ones are literal */
        size_t start = i, len;
        char ch = 0;
        bool markup = false;
        while (i < n) {
            ch = p[i++];
            if (ch == '{' || ch == '}') { markup = true; break; }
        }
        len = i - start;
        if (markup) {
            bool at_end = i >= n;
            if (ch == '}' && (at_end || p[i] != '}')) rlx__j_fail(rt, RLX_EINVAL, "Single '}' encountered in format string");
            if (ch == '{' && at_end) rlx__j_fail(rt, RLX_EINVAL, "Single '{' encountered in format string");
            if (p[i] == ch) { i++; markup = false; }
            else len--;
        }
        rlx__j_buf_put(rt, out, p + start, len);
        if (!markup) continue;
        /* the field: name, then !conversion, then :spec up to the matching '}' */
        size_t name_s = i;
        ch = 0;
        while (i < n) {
            ch = p[i++];
            if (ch == '{') rlx__j_fail(rt, RLX_EINVAL, "unexpected '{' in field name");
            if (ch == '[') { while (i < n && p[i] != ']') i++; continue; }
            if (ch == '}' || ch == ':' || ch == '!') break;
        }
        size_t name_e = i - 1;
        const char *conv = NULL, *spec_p = p + i;
        size_t conv_n = 0, spec_n = 0;
        if (ch == '!' || ch == ':') {
            bool done = false;
            if (ch == '!') {
                if (i >= n) rlx__j_fail(rt, RLX_EINVAL, "end of string while looking for conversion specifier");
                conv = p + i;
                conv_n = utf8_char_len(p + i, n - i);
                i += conv_n;
                if (i < n) {
                    char nx = p[i++];
                    if (nx == '}') done = true;
                    else if (nx != ':') rlx__j_fail(rt, RLX_EINVAL, "expected ':' after conversion specifier");
                }
            }
            if (!done) {
                spec_p = p + i;
                int count = 1;
                while (i < n && count) {
                    if (p[i] == '{') count++;
                    else if (p[i] == '}') count--;
                    i++;
                }
                if (count) rlx__j_fail(rt, RLX_EINVAL, "unmatched '{' in format spec");
                spec_n = (size_t)(p + i - 1 - spec_p);
            }
        } else if (ch != '}') {
            rlx__j_fail(rt, RLX_EINVAL, "expected '}' before end of string");
        }
        /* automatic or manual numbering, then the value */
        const char *fname = p + name_s;
        size_t fname_n = name_e - name_s;
        rj_value v;
        if (!fname_n) {
            if (*auto_i < 0) rlx__j_fail(rt, RLX_EINVAL, "cannot switch from manual field specification to automatic field numbering");
            if ((uint64_t)*auto_i >= c->nargs) rlx__j_fail(rt, RLX_EINVAL, "format: replacement index %" PRId64 " out of range (tuple index out of range)", *auto_i);
            v = c->args[(*auto_i)++];
        } else {
            if (rlx__j_str_is(rj_str(fname, fname_n), STR_ISDIGIT)) {
                if (*auto_i > 0) rlx__j_fail(rt, RLX_EINVAL, "cannot switch from manual field specification to automatic field numbering");
                *auto_i = -1;
            }
            v = get_field(c, fname, fname_n);
        }
        if (conv) {
            if (conv_n == 1 && *conv == 's') { v = rlx__j_to_str(rt, v); v.safe = 0; }
            else if (conv_n == 1 && *conv == 'a') v = ascii_repr(rt, v);
            else if (conv_n == 1 && *conv == 'r') {
                rj_buf t = {0};
                rlx__j_buf_put(rt, &t, "", 0);
                rlx__j_repr(rt, &t, v);
                v = rj_str(t.p, t.n);
            } else {
                rlx__j_fail(rt, RLX_EINVAL, "Unknown conversion specifier %.*s", (int)conv_n, conv);
            }
        }
        rj_buf spec = {0};
        rlx__j_buf_put(rt, &spec, "", 0);
        vformat(c, &spec, spec_p, spec_n, depth - 1, auto_i);
        if (c->escape && v.type == RJ_STR && v.safe) { /* Markup.__html_format__ */
            if (spec.n) rlx__j_fail(rt, RLX_EINVAL, "Unsupported format specification for Markup.");
            rlx__j_buf_put(rt, out, v.s.p, v.s.n);
            continue;
        }
        spec_t s = parse_spec(rt, spec.p, spec.n);
        if (!c->escape) {
            format_field(rt, out, v, &s);
            continue;
        }
        rj_buf f = {0};
        rlx__j_buf_put(rt, &f, "", 0);
        format_field(rt, &f, v, &s);
        rj_value e = rlx__j_escape(rt, rj_str(f.p, f.n));
        rlx__j_buf_put(rt, out, e.s.p, e.s.n);
    }
}

rj_value rlx__j_str_format(rj_env *E, rj_value fmt, const rj_value *args, size_t nargs, const rj_value *kwargs)
{
    rj_rt *rt = rlx__j_env_rt(E);
    fmt_ctx c = {.E = E, .rt = rt, .args = args, .nargs = nargs, .kwargs = kwargs, .escape = fmt.safe};
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    int64_t auto_i = 0;
    vformat(&c, &b, fmt.s.p, fmt.s.n, 2, &auto_i);
    rj_value r = rj_str(b.p, b.n);
    r.safe = fmt.safe;
    return r;
}
