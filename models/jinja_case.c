/* jinja_case.c - Python's str case mapping and character predicates over UTF-8.
 *
 * Python maps case with the full (one-to-many) mappings of SpecialCasing.txt: 'ß'.upper() is
 * "SS", 'ﬁ'.upper() "FI", 'İ'.lower() "i̇", and a capital sigma at the end of a word lowers to
 * 'ς'. utf8proc offers the simple (one-to-one) mappings and the full case folding; every
 * unconditional SpecialCasing entry is a letter whose full folding has several code points, so
 * the full uppercase is the folding uppercased letter by letter, and the full titlecase the
 * folding with its first letter titlecased (an iota that came from a ypogegrammeni stays
 * U+0345, and ŉ titles to ʼN). Only U+0130 has a full lowercase mapping. */
#include "models/jinja_text.h"

#include <utf8proc.h>

static int32_t next_cp(const char *p, size_t n, size_t *i)
{
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)p + *i, (utf8proc_ssize_t)(n - *i), &cp);
    if (k <= 0) { cp = (unsigned char)p[*i]; k = 1; }
    *i += (size_t)k;
    return cp;
}

static void put_cp(rj_rt *rt, rj_buf *b, int32_t cp)
{
    utf8proc_uint8_t u[4];
    utf8proc_ssize_t k = utf8proc_encode_char(cp, u);
    if (k > 0) rlx__j_buf_put(rt, b, (const char *)u, (size_t)k);
}

static utf8proc_category_t cat(int32_t c) { return utf8proc_category(c); }

/* the full case folding of c, when it has more than one code point */
static int fold_multi(int32_t c, int32_t out[4])
{
    if (c < 0xdf) return 0;
    int last = 0;
    utf8proc_int32_t f[8];
    utf8proc_ssize_t n = utf8proc_decompose_char(c, f, 8, UTF8PROC_CASEFOLD, &last);
    if (n < 2 || n > 4) return 0;
    for (utf8proc_ssize_t i = 0; i < n; i++) out[i] = f[i];
    return (int)n;
}

/* Python's Lowercase / Uppercase properties: the letter categories, plus the Other_Lowercase
 * and Other_Uppercase code points that have case mappings (ⅰ, ⓐ, ...) or are listed here */
static bool other_lower(int32_t c)
{
    return c == 0xaa || c == 0xba || (c >= 0x2b0 && c <= 0x2b8) || c == 0x2c0 || c == 0x2c1 || (c >= 0x2e0 && c <= 0x2e4) ||
           c == 0x345 || c == 0x37a || (c >= 0x1d2c && c <= 0x1d6a) || c == 0x1d78 || (c >= 0x1d9b && c <= 0x1dbf) ||
           c == 0x2071 || c == 0x207f || (c >= 0x2090 && c <= 0x209c) || c == 0xa69c || c == 0xa69d || c == 0xa770 ||
           c == 0xa7f8 || c == 0xa7f9 || (c >= 0xab5c && c <= 0xab5f) || c == 0x2c7c || c == 0x2c7d || c == 0x10780 ||
           (c >= 0x10783 && c <= 0x10785) || (c >= 0x10787 && c <= 0x107b0) || (c >= 0x107b2 && c <= 0x107ba);
}

static bool py_lower(int32_t c)
{
    utf8proc_category_t k = cat(c);
    if (k == UTF8PROC_CATEGORY_LL) return true;
    if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT) return false;
    return other_lower(c) || utf8proc_toupper(c) != c;
}

static bool py_upper(int32_t c)
{
    utf8proc_category_t k = cat(c);
    if (k == UTF8PROC_CATEGORY_LU) return true;
    if (k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT) return false;
    /* Other_Uppercase: the squared and negative Latin capitals */
    if ((c >= 0x1f130 && c <= 0x1f149) || (c >= 0x1f150 && c <= 0x1f169) || (c >= 0x1f170 && c <= 0x1f189)) return true;
    return utf8proc_tolower(c) != c;
}

static bool py_title(int32_t c) { return cat(c) == UTF8PROC_CATEGORY_LT; }
static bool py_cased(int32_t c) { return py_lower(c) || py_upper(c) || py_title(c); }

static bool case_ignorable(int32_t c)
{
    switch (cat(c)) {
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_SK: return true;
    default: break;
    }
    /* Word_Break MidLetter, MidNumLet, Single_Quote */
    return c == '\'' || c == '.' || c == ':' || c == 0xb7 || c == 0x387 || c == 0x5f4 || c == 0x2018 || c == 0x2019 ||
           c == 0x2024 || c == 0x2027 || c == 0xfe13 || c == 0xfe52 || c == 0xfe55 || c == 0xff07 || c == 0xff0e || c == 0xff1a;
}

static int map_lower(const int32_t *s, size_t n, size_t i, int32_t out[4])
{
    int32_t c = s[i];
    if (c == 0x130) { out[0] = 'i'; out[1] = 0x307; return 2; }
    if (c == 0x3a3) { /* final sigma: cased letter, case-ignorables, Σ, and no cased letter after */
        size_t j = i;
        while (j > 0 && case_ignorable(s[j - 1])) j--;
        bool final = j > 0 && py_cased(s[j - 1]);
        if (final) {
            size_t k = i + 1;
            while (k < n && case_ignorable(s[k])) k++;
            final = k == n || !py_cased(s[k]);
        }
        out[0] = final ? 0x3c2 : 0x3c3;
        return 1;
    }
    out[0] = utf8proc_tolower(c);
    return 1;
}

static int map_upper(int32_t c, int32_t out[4])
{
    utf8proc_category_t k = cat(c);
    if (k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT) {
        int n = fold_multi(c, out);
        if (n) {
            for (int i = 0; i < n; i++) out[i] = utf8proc_toupper(out[i]);
            return n;
        }
    }
    out[0] = utf8proc_toupper(c);
    return 1;
}

static int map_title(int32_t c, int32_t out[4])
{
    if (c == 0xdf) { out[0] = 'S'; out[1] = 's'; return 2; } /* utf8proc titles it to ẞ */
    if (c == 0x149) { out[0] = 0x2bc; out[1] = 'N'; return 2; }
    int32_t t = utf8proc_totitle(c);
    if (t != c) { out[0] = t; return 1; }
    if (cat(c) == UTF8PROC_CATEGORY_LL) {
        int n = fold_multi(c, out);
        if (n) {
            out[0] = utf8proc_totitle(out[0]);
            /* U+0345 folds to ι; in a title it stays the subscript */
            int last = 0;
            utf8proc_int32_t d[8];
            utf8proc_ssize_t dn = utf8proc_decompose_char(c, d, 8, UTF8PROC_DECOMPOSE, &last);
            if (dn > 0 && d[dn - 1] == 0x345 && out[n - 1] == 0x3b9) out[n - 1] = 0x345;
            return n;
        }
    }
    out[0] = c;
    return 1;
}

/* code points of s (invalid bytes pass as themselves) */
static int32_t *decode(rj_rt *rt, rj_value s, size_t *n)
{
    int32_t *cp = rlx__j_alloc(rt, (s.s.n + 1) * sizeof *cp);
    size_t i = 0, k = 0;
    while (i < s.s.n) cp[k++] = next_cp(s.s.p, s.s.n, &i);
    *n = k;
    return cp;
}

static bool jinja_title_sep(int32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || rlx__j_is_space_cp(c); }

rj_value rlx__j_case(rj_rt *rt, rj_value s, int mode)
{
    size_t n;
    int32_t *cp = decode(rt, s, &n);
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    bool prev_cased = false;
    size_t word = 0; /* CASE_TITLE_JINJA: where the current word starts (lower() sees only its rest) */
    for (size_t i = 0; i < n; i++) {
        int32_t c = cp[i], out[4];
        int k;
        switch (mode) {
        case CASE_LOWER: k = map_lower(cp, n, i, out); break;
        case CASE_UPPER: k = map_upper(c, out); break;
        case CASE_CAPITALIZE: k = i == 0 ? map_title(c, out) : map_lower(cp, n, i, out); break;
        case CASE_TITLE_PY: /* str.title(): titlecase after an uncased character, lowercase after a cased one */
            k = prev_cased ? map_lower(cp, n, i, out) : map_title(c, out);
            prev_cased = py_cased(c);
            break;
        case CASE_SWAP:
            if (py_upper(c)) k = map_lower(cp, n, i, out);
            else if (py_lower(c)) k = map_upper(c, out);
            else { out[0] = c; k = 1; }
            break;
        case CASE_FOLD: {
            int last = 0;
            utf8proc_int32_t f[4];
            utf8proc_ssize_t fn = utf8proc_decompose_char(c, f, 4, UTF8PROC_CASEFOLD, &last);
            if (fn < 1 || fn > 4) { out[0] = c; k = 1; }
            else for (k = 0; k < (int)fn; k++) out[k] = f[k];
            break;
        }
        default: /* CASE_TITLE_JINJA: item[0].upper() + item[1:].lower() for each piece between [-\s({[<]+ runs */
            if (jinja_title_sep(c)) { out[0] = c; k = 1; word = i + 1; break; }
            if (i == word) k = map_upper(c, out);
            else k = map_lower(cp + word + 1, n - word - 1, i - word - 1, out);
            break;
        }
        for (int j = 0; j < k; j++) put_cp(rt, &b, out[j]);
    }
    return rj_str(b.p, b.n);
}

/* ---- predicates ---- */

static bool is_digit_cp(int32_t c)
{
    if (cat(c) == UTF8PROC_CATEGORY_ND) return true;
    if (cat(c) != UTF8PROC_CATEGORY_NO) return false;
    /* No with a digit value (Numeric_Type=Digit) */
    return c == 0xb2 || c == 0xb3 || c == 0xb9 || c == 0x2070 || (c >= 0x2074 && c <= 0x2079) || (c >= 0x2080 && c <= 0x2089) ||
           (c >= 0x2460 && c <= 0x2468) || (c >= 0x2474 && c <= 0x247c) || (c >= 0x2488 && c <= 0x2490) || c == 0x24ea ||
           (c >= 0x24f5 && c <= 0x24fd) || c == 0x24ff || (c >= 0x2776 && c <= 0x277e) || (c >= 0x2780 && c <= 0x2788) ||
           (c >= 0x278a && c <= 0x2792) || (c >= 0x1369 && c <= 0x1371) || c == 0x19da || (c >= 0x10a40 && c <= 0x10a43) ||
           (c >= 0x10e60 && c <= 0x10e68) || (c >= 0x11052 && c <= 0x1105a) || (c >= 0x1f100 && c <= 0x1f10a);
}

static bool is_numeric_cp(int32_t c)
{
    utf8proc_category_t k = cat(c);
    if (k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO) return true;
    /* CJK ideographs with a numeric value */
    static const int32_t cjk[] = {0x4e00, 0x4e03, 0x4e07, 0x4e09, 0x4e5d, 0x4e8c, 0x4e94, 0x4e96, 0x4ebf, 0x4ec0, 0x4edf,
        0x4ee8, 0x4f0d, 0x4f70, 0x5104, 0x5146, 0x5169, 0x516b, 0x516d, 0x5341, 0x5343, 0x5344, 0x5345, 0x534c,
        0x53c1, 0x53c2, 0x53c3, 0x53c4, 0x56db, 0x58f1, 0x58f9, 0x5e7a, 0x5efe, 0x5eff, 0x5f0c, 0x5f0d, 0x5f0e,
        0x5f10, 0x62fe, 0x634c, 0x67d2, 0x6f06, 0x7396, 0x767e, 0x8086, 0x842c, 0x8cae, 0x8cb3, 0x8d30, 0x9621,
        0x9646, 0x964c, 0x9678, 0x96f6, 0x3405, 0x3483, 0x382a, 0x3b4d, 0xf96b, 0xf973, 0xf978, 0xf9b2, 0xf9d1,
        0xf9d3, 0xf9fd, 0x20001, 0x20064, 0x200e2, 0x20121, 0x2092a, 0x20983, 0x2098c, 0x2099c, 0x20aea, 0x20afd,
        0x20b19, 0x22390, 0x22998, 0x23b1b, 0x2626d, 0x2f890};
    if (c < 0x3405) return false;
    for (size_t i = 0; i < RLX_ARRAY_LEN(cjk); i++)
        if (cjk[i] == c) return true;
    return false;
}

static bool is_alpha_cp(int32_t c)
{
    utf8proc_category_t k = cat(c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
           k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
}

static bool is_printable_cp(int32_t c)
{
    if (c == ' ') return true;
    switch (cat(c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
        return false;
    default: return true;
    }
}

bool rlx__j_str_is(rj_value s, int what)
{
    size_t i = 0;
    bool cased = false, prev_cased = false, any = s.s.n > 0;
    if (what == STR_ISASCII || what == STR_ISPRINTABLE) any = true; /* true for '' */
    bool first = true;
    while (i < s.s.n) {
        int32_t c = next_cp(s.s.p, s.s.n, &i);
        switch (what) {
        case STR_ISLOWER:
            if (py_upper(c) || py_title(c)) return false;
            if (py_lower(c)) cased = true;
            break;
        case STR_ISUPPER:
            if (py_lower(c) || py_title(c)) return false;
            if (py_upper(c)) cased = true;
            break;
        case STR_ISTITLE:
            if (py_upper(c) || py_title(c)) {
                if (prev_cased) return false;
                prev_cased = cased = true;
            } else if (py_lower(c)) {
                if (!prev_cased) return false;
                prev_cased = cased = true;
            } else {
                prev_cased = false;
            }
            break;
        case STR_ISALPHA: if (!is_alpha_cp(c)) return false; break;
        case STR_ISDECIMAL: if (cat(c) != UTF8PROC_CATEGORY_ND) return false; break;
        case STR_ISDIGIT: if (!is_digit_cp(c)) return false; break;
        case STR_ISNUMERIC: if (!is_numeric_cp(c)) return false; break;
        case STR_ISALNUM: if (!is_alpha_cp(c) && !is_numeric_cp(c) && !is_digit_cp(c)) return false; break;
        case STR_ISSPACE: if (!rlx__j_is_space_cp(c)) return false; break;
        case STR_ISASCII: if (c >= 0x80) return false; break;
        case STR_ISPRINTABLE: if (!is_printable_cp(c)) return false; break;
        case STR_ISIDENTIFIER: { /* XID_Start, then XID_Continue */
            utf8proc_category_t k = cat(c);
            bool other_start = c == 0x1885 || c == 0x1886 || c == 0x2118 || c == 0x212e;
            bool nfkc_out = c == 0x37a || c == 0xe33 || c == 0xeb3 || c == 0x2e2f || (c >= 0xfc5e && c <= 0xfc63) ||
                            c == 0xfdfa || c == 0xfdfb || (c >= 0xfe70 && c <= 0xfe7e && !(c & 1)) || c == 0xff9e || c == 0xff9f;
            if (nfkc_out) return false;
            bool start = is_alpha_cp(c) || k == UTF8PROC_CATEGORY_NL || c == '_' || other_start;
            bool cont = start || k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ND ||
                        k == UTF8PROC_CATEGORY_PC;
            if (first ? !start : !cont) return false;
            break;
        }
        default: return false;
        }
        first = false;
    }
    if (what == STR_ISLOWER || what == STR_ISUPPER || what == STR_ISTITLE) return cased;
    return any;
}
