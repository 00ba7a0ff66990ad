/* json_schema_regex.c - a JSON Schema `pattern` (ECMA-262 regex, Unicode mode, as validators
 * run it) translated to GBNF over the JSON-encoded string content.
 *
 * Supported: literal characters, escapes (\d \w \s and their negations, \n \r \t \f \v \0,
 * \xHH, \uHHHH, \u{H...}, escaped punctuation, the general-category property escapes \p{L}
 * \p{Lu} \p{Letter} \p{gc=Nd} ... and \P{...}, from utf8proc's Unicode tables), classes [...]
 * and [^...] with ranges and those escapes, `.` (any character but a line terminator), groups (...) (?:...) (?<name>...),
 * alternation, ? * + {m} {m,} {m,n} (lazy forms too: same language). A pattern matches anywhere
 * in the string: a branch without `^` gets characters before it (any, or for a long branch only
 * those that cannot begin it: see parse_seq), one without `$` any after.
 * Refused with a message naming the construct: lookarounds, backreferences, word boundaries,
 * anchors inside the pattern, \cX, property escapes other than general categories (scripts,
 * binary properties), counts over RLX_GRAMMAR_MAX_REPEAT, nesting deeper
 * than 64 groups. The characters are matched as JSON writes them: raw where JSON allows it, an
 * escape for quotes, backslashes and control characters. rlx__regex_one_repeated_char reads
 * the one shape whose length minLength/maxLength can narrow (^A Q$, A one character). */
#include "engine/json_schema_internal.h"
#include "engine/grammar.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define RX_MAX_DEPTH 64

typedef struct rx {
    const char *s, *p;
    rlx_error *err;
    bool failed;
    bool props; /* the class being read holds a property escape (property_escape sets it) */
    int depth;
} rx;

static void rx_fail(rx *x, int code, const char *fmt, const char *what)
{
    if (x->failed) return;
    x->failed = true;
    rlx_errorf(x->err, code, fmt, what, (int)(x->p - x->s));
}

static uint32_t utf8_next(rx *x)
{
    const unsigned char *u = (const unsigned char *)x->p;
    int n = u[0] < 0x80 ? 1 : (u[0] & 0xe0) == 0xc0 ? 2 : (u[0] & 0xf0) == 0xe0 ? 3 : (u[0] & 0xf8) == 0xf0 ? 4 : 0;
    uint32_t c = n == 1 ? u[0] : n ? (uint32_t)(u[0] & (0x7f >> n)) : 0;
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xc0) != 0x80) n = 0;
        if (!n) break;
        c = (c << 6) | (u[i] & 0x3f);
    }
    if (!n) {
        rx_fail(x, RLX_EINVAL, "the pattern is not valid UTF-8%s (at byte %d)", "");
        return 0;
    }
    x->p += n;
    return c;
}

static void add_class_escape(rlx__cpset *s, char e)
{
    rlx__cpset t = {0};
    switch (e | 0x20) {
    case 'd': rlx__cpset_add(&t, '0', '9'); break;
    case 'w':
        rlx__cpset_add(&t, '0', '9');
        rlx__cpset_add(&t, 'A', 'Z');
        rlx__cpset_add(&t, 'a', 'z');
        rlx__cpset_add(&t, '_', '_');
        break;
    default: /* 's': ECMA WhiteSpace and LineTerminator */
        rlx__cpset_add(&t, 0x09, 0x0d);
        rlx__cpset_add(&t, 0x20, 0x20);
        rlx__cpset_add(&t, 0xa0, 0xa0);
        rlx__cpset_add(&t, 0x1680, 0x1680);
        rlx__cpset_add(&t, 0x2000, 0x200a);
        rlx__cpset_add(&t, 0x2028, 0x2029);
        rlx__cpset_add(&t, 0x202f, 0x202f);
        rlx__cpset_add(&t, 0x205f, 0x205f);
        rlx__cpset_add(&t, 0x3000, 0x3000);
        rlx__cpset_add(&t, 0xfeff, 0xfeff);
        break;
    }
    if (e >= 'A' && e <= 'Z') rlx__cpset_negate(&t);
    rlx__cpset_add_set(s, &t);
    rlx__cpset_free(&t);
}

/* ---- Unicode general categories (\p{...}) ---- */

/* Each category's runs of code points (utf8proc's numbering, UTF8PROC_CATEGORY_*: 0 Cn .. 29
 * Co), built once for the process and kept. The 66 noncharacters (U+FDD0..U+FDEF, U+xFFFE,
 * U+xFFFF), Cn in every Unicode version, are a run list of their own (GC_NONCHAR), so that
 * gc_runs[Cn] holds only what a later version may assign. */
#define GC_NONCHAR 30
#define GC_COUNT 31
static struct { uint32_t (*r)[2]; size_t n, cap; } gc_runs[GC_COUNT];
static bool gc_oom;
static pthread_once_t gc_once = PTHREAD_ONCE_INIT;

static void gc_build(void)
{
    int cur = -1;
    uint32_t start = 0;
    for (uint32_t cp = 0; cp <= 0x110000; cp++) {
        int c = cp > 0x10ffff ? -1
              : (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) == 0xfffe ? GC_NONCHAR
                                                                         : (int)utf8proc_category((utf8proc_int32_t)cp);
        if (c == cur) continue;
        if (cur >= 0 && cur < GC_COUNT) {
            if (gc_runs[cur].n == gc_runs[cur].cap) {
                size_t cap = gc_runs[cur].cap ? gc_runs[cur].cap * 2 : 64;
                uint32_t(*r)[2] = realloc(gc_runs[cur].r, cap * sizeof *r);
                if (!r) {
                    gc_oom = true;
                    return;
                }
                gc_runs[cur].r = r;
                gc_runs[cur].cap = cap;
            }
            gc_runs[cur].r[gc_runs[cur].n][0] = start;
            gc_runs[cur].r[gc_runs[cur].n++][1] = cp - 1;
        }
        cur = c;
        start = cp;
    }
}

#define GC(c) (1u << UTF8PROC_CATEGORY_##c)
/* ECMA-262's General_Category values (short name, long name, alias) */
static const struct { const char *s, *l, *alias; uint32_t mask; } gc_names[] = {
    {"L", "Letter", NULL, GC(LU) | GC(LL) | GC(LT) | GC(LM) | GC(LO)}, {"LC", "Cased_Letter", NULL, GC(LU) | GC(LL) | GC(LT)},
    {"Lu", "Uppercase_Letter", NULL, GC(LU)}, {"Ll", "Lowercase_Letter", NULL, GC(LL)}, {"Lt", "Titlecase_Letter", NULL, GC(LT)},
    {"Lm", "Modifier_Letter", NULL, GC(LM)}, {"Lo", "Other_Letter", NULL, GC(LO)},
    {"M", "Mark", "Combining_Mark", GC(MN) | GC(MC) | GC(ME)}, {"Mn", "Nonspacing_Mark", NULL, GC(MN)},
    {"Mc", "Spacing_Mark", NULL, GC(MC)}, {"Me", "Enclosing_Mark", NULL, GC(ME)},
    {"N", "Number", NULL, GC(ND) | GC(NL) | GC(NO)}, {"Nd", "Decimal_Number", "digit", GC(ND)},
    {"Nl", "Letter_Number", NULL, GC(NL)}, {"No", "Other_Number", NULL, GC(NO)},
    {"P", "Punctuation", "punct", GC(PC) | GC(PD) | GC(PS) | GC(PE) | GC(PI) | GC(PF) | GC(PO)},
    {"Pc", "Connector_Punctuation", NULL, GC(PC)}, {"Pd", "Dash_Punctuation", NULL, GC(PD)},
    {"Ps", "Open_Punctuation", NULL, GC(PS)}, {"Pe", "Close_Punctuation", NULL, GC(PE)},
    {"Pi", "Initial_Punctuation", NULL, GC(PI)}, {"Pf", "Final_Punctuation", NULL, GC(PF)},
    {"Po", "Other_Punctuation", NULL, GC(PO)},
    {"S", "Symbol", NULL, GC(SM) | GC(SC) | GC(SK) | GC(SO)}, {"Sm", "Math_Symbol", NULL, GC(SM)},
    {"Sc", "Currency_Symbol", NULL, GC(SC)}, {"Sk", "Modifier_Symbol", NULL, GC(SK)}, {"So", "Other_Symbol", NULL, GC(SO)},
    {"Z", "Separator", NULL, GC(ZS) | GC(ZL) | GC(ZP)}, {"Zs", "Space_Separator", NULL, GC(ZS)},
    {"Zl", "Line_Separator", NULL, GC(ZL)}, {"Zp", "Paragraph_Separator", NULL, GC(ZP)},
    {"C", "Other", NULL, GC(CC) | GC(CF) | GC(CS) | GC(CO) | GC(CN)}, {"Cc", "Control", "cntrl", GC(CC)},
    {"Cf", "Format", NULL, GC(CF)}, {"Cs", "Surrogate", NULL, GC(CS)}, {"Co", "Private_Use", NULL, GC(CO)},
    {"Cn", "Unassigned", NULL, GC(CN)},
};
#undef GC

/* \p{NAME} / \P{NAME} (x->p at the '{'): the category's code points (surrogates left out: they
 * are no characters) added to set; for \P the categories NAME leaves out. */
static void property_escape(rx *x, rlx__cpset *set, bool negate)
{
    const char *open = x->p, *close = *open == '{' ? strchr(open, '}') : NULL;
    if (!close || close - open > 64) {
        rx_fail(x, RLX_EINVAL, "bad escape '%s' in the pattern (at byte %d)", negate ? "\\P{...}" : "\\p{...}");
        return;
    }
    char name[72];
    memcpy(name, open + 1, (size_t)(close - open - 1));
    name[close - open - 1] = 0;
    const char *v = name;
    if (!strncmp(v, "gc=", 3)) v += 3;
    else if (!strncmp(v, "General_Category=", 17)) v += 17;
    uint32_t mask = 0;
    for (size_t i = 0; i < RLX_ARRAY_LEN(gc_names) && !mask; i++)
        if (!strcmp(v, gc_names[i].s) || !strcmp(v, gc_names[i].l) || (gc_names[i].alias && !strcmp(v, gc_names[i].alias)))
            mask = gc_names[i].mask;
    if (!mask) {
        rx_fail(x, RLX_EINVAL, "pattern construct '%s' is not supported (at byte %d)",
                "\\p{...} other than a general category (scripts, binary properties)");
        return;
    }
    x->p = close + 1;
    pthread_once(&gc_once, gc_build);
    /* \P{X} is the union of the categories X leaves out, not a complement: a code point
     * unassigned in utf8proc's Unicode version may be a letter (or anything) in the validator's
     * newer one (U+A7DC: unassigned in 15.0, a letter in 16.0), so unassigned code points are
     * in no property's set, neither \p{..} nor \P{..}, except the 66 noncharacters, which are
     * Cn in every version. The sets are then subsets of the same sets under any later version. */
    if (negate) mask = ~mask;
    if (gc_oom) set->oom = true;
    for (int c = 0; c < GC_NONCHAR; c++) {
        if (!(mask >> c & 1) || c == UTF8PROC_CATEGORY_CS) continue;
        int k = c == UTF8PROC_CATEGORY_CN ? GC_NONCHAR : c;
        for (size_t i = 0; i < gc_runs[k].n; i++) rlx__cpset_add(set, gc_runs[k].r[i][0], gc_runs[k].r[i][1]);
    }
    x->props = true;
}

/* A negated class that held a property escape ([^\p{L}]) leaves out the code points a later
 * Unicode version may assign, as \P{..} does: set = set less gc_runs[Cn]. */
static void drop_unassigned(rlx__cpset *set)
{
    rlx__cpset_negate(set);
    const int c = UTF8PROC_CATEGORY_CN;
    for (size_t i = 0; i < gc_runs[c].n; i++) rlx__cpset_add(set, gc_runs[c].r[i][0], gc_runs[c].r[i][1]);
    rlx__cpset_negate(set);
}

/* One escape after '\' (x->p at the letter): a class shorthand goes into `set` (returns
 * UINT32_MAX), anything else returns its code point. */
static uint32_t parse_escape(rx *x, rlx__cpset *set, bool in_class)
{
    char c = *x->p;
    if (!c) {
        rx_fail(x, RLX_EINVAL, "the pattern ends with a lone backslash%s (at byte %d)", "");
        return 0;
    }
    x->p++;
    switch (c) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
        add_class_escape(set, c);
        return UINT32_MAX;
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'b':
        if (in_class) return '\b';
        x->p--;
        rx_fail(x, RLX_EINVAL, "pattern construct '%s' is not supported (at byte %d)", "\\b (word boundary)");
        return 0;
    case 'x': case 'u': {
        uint32_t v = 0;
        int want = c == 'x' ? 2 : 4;
        if (c == 'u' && *x->p == '{') {
            x->p++;
            int k = 0;
            while (rlx_hex_value(*x->p) >= 0 && k < 7) v = v * 16 + (uint32_t)rlx_hex_value(*x->p++), k++;
            if (!k || *x->p != '}' || v > 0x10ffff) {
                rx_fail(x, RLX_EINVAL, "bad escape '%s' in the pattern (at byte %d)", "\\u{...}");
                return 0;
            }
            x->p++;
            return v;
        }
        for (int i = 0; i < want; i++) {
            int h = rlx_hex_value(*x->p);
            if (h < 0) {
                rx_fail(x, RLX_EINVAL, "bad escape '%s' in the pattern (at byte %d)", c == 'x' ? "\\x" : "\\u");
                return 0;
            }
            v = v * 16 + (uint32_t)h;
            x->p++;
        }
        if (v >= 0xd800 && v <= 0xdfff) {
            rx_fail(x, RLX_EINVAL, "pattern construct '%s' is not supported (at byte %d)", "\\u surrogate");
            return 0;
        }
        return v;
    }
    case 'p': case 'P':
        property_escape(x, set, c == 'P');
        return UINT32_MAX;
    case 'B': case 'c': case 'k': {
        static const char *names[] = {"\\B (word boundary)", "\\cX (control escape)", "\\k<name> (backreference)"};
        const char *n = names[c == 'B' ? 0 : c == 'c' ? 1 : 2];
        x->p--;
        rx_fail(x, RLX_EINVAL, "pattern construct '%s' is not supported (at byte %d)", n);
        return 0;
    }
    default:
        if (c >= '1' && c <= '9') {
            x->p--;
            rx_fail(x, RLX_EINVAL, "pattern construct '%s' is not supported (at byte %d)", "\\1 (backreference)");
            return 0;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c & 0x80)) {
            x->p--;
            rx_fail(x, RLX_EINVAL, "unknown escape in the pattern%s (at byte %d)", "");
            return 0;
        }
        return (uint32_t)(unsigned char)c; /* escaped punctuation stands for itself */
    }
}

static void parse_class(rx *x, rlx__cpset *set)
{
    bool neg = *x->p == '^';
    if (neg) x->p++;
    x->props = false;
    bool first = true;
    while (!x->failed && (first || *x->p != ']')) {
        first = false;
        if (!*x->p) {
            rx_fail(x, RLX_EINVAL, "unterminated character class%s in the pattern (at byte %d)", "");
            return;
        }
        uint32_t lo;
        if (*x->p == '\\') {
            x->p++;
            lo = parse_escape(x, set, true);
        } else if (*x->p == ']') { /* ECMA: [] matches nothing, []...] is not a literal */
            break;
        } else {
            lo = utf8_next(x);
        }
        if (x->failed) return;
        if (lo == UINT32_MAX) continue;
        if (*x->p == '-' && x->p[1] && x->p[1] != ']') {
            x->p++;
            uint32_t hi;
            if (*x->p == '\\') {
                x->p++;
                hi = parse_escape(x, set, true);
            } else {
                hi = utf8_next(x);
            }
            if (x->failed) return;
            if (hi == UINT32_MAX || hi < lo) {
                rx_fail(x, RLX_EINVAL, "bad range%s in a class of the pattern (at byte %d)", "");
                return;
            }
            rlx__cpset_add(set, lo, hi);
        } else {
            rlx__cpset_add(set, lo, lo);
        }
    }
    if (*x->p != ']') {
        rx_fail(x, RLX_EINVAL, "unterminated character class%s in the pattern (at byte %d)", "");
        return;
    }
    x->p++;
    if (neg) rlx__cpset_negate(set);
    if (neg && x->props) drop_unassigned(set);
}

static void emit_set(rx *x, rlx__sb *out, rlx__cpset *set)
{
    if (set->oom) out->oom = true;
    if (!rlx__cpset_gbnf(out, set)) rx_fail(x, RLX_EINVAL, "pattern construct '%s' matches nothing (at byte %d)", "[]");
}

static const char any_char[] = "char";

typedef struct rx_first rx_first;
static void parse_alt(rx *x, rlx__sb *out, bool top, rx_first *f);

/* {m}, {m,}, {m,n}: true when x->p is at one (then parsed into *m, *n; n -1 = unbounded). */
static bool parse_count(rx *x, int *m, int *n)
{
    const char *p = x->p + 1;
    long a = 0, b = -1;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9' && a <= 100000) a = a * 10 + (*p++ - '0');
    if (*p == ',') {
        p++;
        if (*p >= '0' && *p <= '9') {
            b = 0;
            while (*p >= '0' && *p <= '9' && b <= 100000) b = b * 10 + (*p++ - '0');
        }
    } else {
        b = a;
    }
    if (*p != '}') return false; /* ECMA (non-Unicode) would read it literally; refuse below */
    x->p = p + 1;
    if (a > RLX_GRAMMAR_MAX_REPEAT || b > RLX_GRAMMAR_MAX_REPEAT) {
        rx_fail(x, RLX_ERANGE, "pattern repetition %s over 1000 (at byte %d)", "count");
        return true;
    }
    if (b >= 0 && b < a) {
        rx_fail(x, RLX_EINVAL, "pattern repetition %s out of order (at byte %d)", "{m,n}");
        return true;
    }
    *m = (int)a;
    *n = (int)b;
    return true;
}

/* One character at x->p (a class, `.`, an escape or a literal) into set. */
static void parse_char_atom(rx *x, rlx__cpset *set)
{
    char c = *x->p;
    if (c == '[') {
        x->p++;
        parse_class(x, set);
    } else if (c == '.') {
        x->p++;
        rlx__cpset_add(set, '\n', '\n');
        rlx__cpset_add(set, '\r', '\r');
        rlx__cpset_add(set, 0x2028, 0x2029);
        rlx__cpset_negate(set);
    } else {
        uint32_t cp;
        if (c == '\\') {
            x->p++;
            cp = parse_escape(x, set, false);
        } else {
            cp = utf8_next(x);
        }
        if (!x->failed && cp != UINT32_MAX) rlx__cpset_add(set, cp, cp);
    }
}

/* The quantifier at x->p (lazy forms too: the same language) as counts m, n (n -1: no upper
 * bound); m and n stay -2 when there is none. */
static void parse_quant(rx *x, int *m, int *n)
{
    if (*x->p == '?') *m = 0, *n = 1, x->p++;
    else if (*x->p == '*') *m = 0, *n = -1, x->p++;
    else if (*x->p == '+') *m = 1, *n = -1, x->p++;
    else if (*x->p == '{' && !parse_count(x, m, n) && !x->failed)
        rx_fail(x, RLX_EINVAL, "pattern construct '%s' is not supported (at byte %d)", "{ without a count");
    if (!x->failed && *m != -2 && *x->p == '?') x->p++;
}

/* What a match of the part parsed can begin with: its first characters, whether it can be
 * empty (then what follows it can begin the match too), and how many characters long a match
 * may be counting a loop once (the positions a parse may be at inside it; saturated). */
typedef struct rx_first {
    rlx__cpset set;
    bool nullable;
    long size;
} rx_first;

/* A branch without ^ up to this size stays `char* P` (a stack per position inside P, each
 * character set a few alternatives: some hundreds of stacks at most) */
#define RX_FREE_START 32
#define RX_SIZE_CAP 1000000L

/* A top-level branch without ^ may match anywhere: `char* P`. Every character read could start
 * P or not, so a parse holds a stack per position P may be at; past RX_FREE_START positions
 * (an unanchored .{100} needed thousands of stacks) the match starts instead at the first
 * character that can begin it: the prefix takes only characters P cannot begin with,
 * (char - FIRST(P))* P. Every string of that form contains a match, so each output still
 * validates; strings where such a character comes before the match without beginning it are
 * not generated (for .{100}$: exactly 100 characters, after line terminators only). A P that
 * can be empty matches in every string: its branch is `char*`. */
static void parse_seq(rx *x, rlx__sb *out, bool top, rx_first *f)
{
    bool anchored_start = false, anchored_end = false;
    f->nullable = true;
    f->size = 0;
    rlx__sb body = {0};
    if (top && *x->p == '^') {
        anchored_start = true;
        x->p++;
    }
    while (!x->failed && *x->p && *x->p != '|' && *x->p != ')') {
        char c = *x->p;
        if (c == '$') {
            x->p++;
            if (!top || (*x->p && *x->p != '|')) {
                x->p--;
                rx_fail(x, RLX_EINVAL, "pattern construct '%s' is not supported (at byte %d)", "$ inside the pattern");
                break;
            }
            anchored_end = true;
            break;
        }
        if (c == '^') {
            rx_fail(x, RLX_EINVAL, "pattern construct '%s' is not supported (at byte %d)", "^ inside the pattern");
            break;
        }
        if (c == '*' || c == '+' || c == '?' || (c == '{' && x->p[1] >= '0' && x->p[1] <= '9')) {
            rx_fail(x, RLX_EINVAL, "pattern construct '%s' is not supported (at byte %d)", "quantifier without a target");
            break;
        }
        rlx__sb atom = {0};
        rx_first af = {0};
        if (c == '(') {
            x->p++;
            if (*x->p == '?') {
                if (x->p[1] == ':') {
                    x->p += 2;
                } else if (x->p[1] == '<' && x->p[2] != '=' && x->p[2] != '!') {
                    const char *q = strchr(x->p, '>');
                    if (!q) {
                        rx_fail(x, RLX_EINVAL, "pattern construct '%s' is not supported (at byte %d)", "(?<");
                        break;
                    }
                    x->p = q + 1;
                } else {
                    rx_fail(x, RLX_EINVAL, "pattern construct '%s' is not supported (at byte %d)",
                            x->p[1] == '=' || x->p[1] == '!' || x->p[1] == '<' ? "lookaround (?= (?! (?<= (?<!" : "(?");
                    break;
                }
            }
            if (++x->depth > RX_MAX_DEPTH) {
                rx_fail(x, RLX_ERANGE, "pattern groups nested deeper than %s (at byte %d)", "64");
                break;
            }
            parse_alt(x, &atom, false, &af);
            x->depth--;
            if (!x->failed && *x->p != ')') rx_fail(x, RLX_EINVAL, "unbalanced parenthesis%s in the pattern (at byte %d)", "");
            if (!x->failed) x->p++;
        } else {
            parse_char_atom(x, &af.set);
            if (!x->failed) emit_set(x, &atom, &af.set);
        }
        int m = -2, n = -2;
        if (!x->failed) parse_quant(x, &m, &n);
        if (m == 0) af.nullable = true;
        if (c != '(') af.size = 1;
        const long copies = m == -2 ? 1 : n >= 0 ? n : m + 1;
        f->size = af.size > RX_SIZE_CAP / (copies ? copies : 1) ? RX_SIZE_CAP : RLX_MIN(f->size + af.size * copies, RX_SIZE_CAP);
        if (f->nullable) { /* everything before this atom can be empty: it may begin the match */
            rlx__cpset_add_set(&f->set, &af.set);
            f->nullable = af.nullable;
        }
        rlx__cpset_free(&af.set);
        if (x->failed) {
            free(rlx__sb_take(&atom));
            break;
        }
        if (atom.oom) body.oom = true;
        rlx__sb_put(&body, atom.p ? atom.p : "", atom.n);
        free(rlx__sb_take(&atom));
        if (m == 0 && n == 1) rlx__sb_puts(&body, "?");
        else if (m == 0 && n == -1) rlx__sb_puts(&body, "*");
        else if (m == 1 && n == -1) rlx__sb_puts(&body, "+");
        else if (m != -2 && n == -1) rlx__sb_printf(&body, "{%d,}", m);
        else if (m != -2 && m == n) rlx__sb_printf(&body, "{%d}", m);
        else if (m != -2) rlx__sb_printf(&body, "{%d,%d}", m, n);
        rlx__sb_puts(&body, " ");
    }
    if (x->failed) {
        free(rlx__sb_take(&body));
        return;
    }
    if (body.oom || f->set.oom) out->oom = true;
    rlx__sb_puts(out, "( ");
    const bool anywhere = top && !anchored_start;
    if (anywhere && f->nullable) {
        rlx__sb_printf(out, "%s* ", any_char); /* an empty match anywhere: every string */
    } else {
        if (anywhere && f->size <= RX_FREE_START) {
            rlx__sb_printf(out, "%s* ", any_char);
        } else if (anywhere) {
            rlx__cpset pre = {0};
            rlx__cpset_add_set(&pre, &f->set);
            rlx__cpset_negate(&pre);
            rlx__sb ps = {0};
            if (rlx__cpset_gbnf(&ps, &pre)) /* (none: every character can begin the match) */
                rlx__sb_printf(out, "%s* ", ps.p ? ps.p : "");
            if (pre.oom || ps.oom) out->oom = true;
            free(rlx__sb_take(&ps));
            rlx__cpset_free(&pre);
        }
        rlx__sb_put(out, body.p ? body.p : "", body.n);
        if (top && !anchored_end) rlx__sb_printf(out, "%s* ", any_char); /* no '$': anything may follow */
    }
    free(rlx__sb_take(&body));
    rlx__sb_puts(out, ")");
}

static void parse_alt(rx *x, rlx__sb *out, bool top, rx_first *f)
{
    rx_first bf = {0};
    rlx__sb_puts(out, "( ");
    parse_seq(x, out, top, &bf);
    rlx__cpset_add_set(&f->set, &bf.set);
    f->nullable = bf.nullable;
    f->size = bf.size;
    while (!x->failed && *x->p == '|') {
        x->p++;
        rlx__sb_puts(out, " | ");
        rlx__cpset_free(&bf.set);
        bf = (rx_first){0};
        parse_seq(x, out, top, &bf);
        rlx__cpset_add_set(&f->set, &bf.set);
        f->nullable = f->nullable || bf.nullable;
        f->size = RLX_MAX(f->size, bf.size);
    }
    rlx__cpset_free(&bf.set);
    rlx__sb_puts(out, " )");
}

char *rlx__regex_to_gbnf(const char *re, rlx_error *err)
{
    rx x = {.s = re, .p = re, .err = err};
    rlx__sb out = {0};
    rx_first f = {0};
    parse_alt(&x, &out, true, &f);
    rlx__cpset_free(&f.set);
    if (!x.failed && *x.p) rx_fail(&x, RLX_EINVAL, "unbalanced parenthesis%s in the pattern (at byte %d)", "");
    if (x.failed) {
        free(rlx__sb_take(&out));
        return NULL;
    }
    char *s = rlx__sb_take(&out);
    if (!s) rlx_errorf(err, RLX_ENOMEM, "out of memory translating a pattern");
    return s;
}

/* ^A Q$ with A one character (a class, `.`, an escape or a literal) and Q a quantifier or none:
 * the GBNF of A and Q's counts (n -1: no upper bound), for minLength/maxLength to narrow.
 * Returns 1 when the pattern has that form, 0 when it has another (nothing reported), -1 when
 * it is refused (err set). */
int rlx__regex_one_repeated_char(const char *re, char **atom_gbnf, int *qmin, int *qmax, rlx_error *err)
{
    rx x = {.s = re, .p = re, .err = err};
    *atom_gbnf = NULL;
    if (*x.p++ != '^' || !*x.p || strchr("()|$^*+?{", *x.p)) return 0;
    rlx__cpset set = {0};
    parse_char_atom(&x, &set);
    int m = -2, n = -2;
    if (!x.failed) parse_quant(&x, &m, &n);
    if (m == -2) m = n = 1; /* no quantifier: the character once */
    if (x.failed || strcmp(x.p, "$") != 0) {
        rlx__cpset_free(&set);
        return x.failed ? -1 : 0;
    }
    rlx__sb out = {0};
    emit_set(&x, &out, &set);
    rlx__cpset_free(&set);
    *atom_gbnf = rlx__sb_take(&out);
    if (!*atom_gbnf) {
        rlx_errorf(err, RLX_ENOMEM, "out of memory translating a pattern");
        return -1;
    }
    *qmin = m;
    *qmax = n;
    return 1;
}
