/* grammar_compile.c - GBNF text to a compiled rlx_grammar (see grammar.h for the dialect and
 * limits): a recursive-descent parser building each rule's elements, repetitions rewritten into
 * helper rules as llama.cpp does, then the checks (undefined rules, left recursion, over the
 * analysis of grammar_rules.c) and the rules laid out back to back. */
#include "engine/grammar_rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

const char rlx_grammar_json_object[] =
    "root    ::= \"{\" ws ( members )? \"}\"\n"
    "members ::= string \":\" ws value (\",\" ws string \":\" ws value)*\n"
    "value   ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object  ::= root ws\n"
    "array   ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string  ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number  ::= \"-\"? ([0-9] | [1-9] [0-9]{1,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,16})? ws\n"
    "ws      ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static _Atomic uint64_t next_serial; /* rlx_grammar.serial: unique per compiled grammar */

/* ---- compiler ---------------------------------------------------------------------------------- */

/* The character at s for a message: a whole UTF-8 character (the first byte of one printed
 * alone is not text), a control or a byte that starts no character as \xNN. */
static const char *char_text(const char *s, const char *end, char out[16])
{
    const unsigned char c = (unsigned char)*s;
    size_t n = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if (s + i >= end || ((unsigned char)s[i] & 0xc0) != 0x80) n = 0;
    if (!n || c < 0x20 || c == 0x7f) snprintf(out, 16, "\\x%02X", c);
    else snprintf(out, 16, "%.*s", (int)n, s);
    return out;
}

int rlx__gc_perr(parser *p, const char *at, const char *fmt, ...)
{
    if (p->failed) return RLX_EINVAL;
    p->failed = true;
    int line = 1, col = 1;
    for (const char *c = p->src; at && c < at && c < p->end; c++) {
        if (*c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at) rlx_errorf(p->err, RLX_EINVAL, "grammar line %d column %d: %s", line, col, msg);
    else rlx_errorf(p->err, RLX_EINVAL, "grammar: %s", msg);
    return RLX_EINVAL;
}

bool rlx__gc_push(parser *p, ebuf *b, uint32_t type, uint32_t value)
{
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 16;
        gelem *ne = realloc(b->e, nc * sizeof *ne);
        if (!ne) {
            rlx__gc_perr(p, NULL, "out of memory");
            return false;
        }
        b->e = ne;
        b->cap = nc;
    }
    b->e[b->n++] = (gelem){type, value};
    return true;
}

static int rule_find(parser *p, rule_tab *rt, const char *name, size_t len, bool create)
{
    for (int i = 0; i < rt->n; i++)
        if (strlen(rt->name[i]) == len && !memcmp(rt->name[i], name, len)) return i;
    if (!create) return -1;
    if (rt->n >= RLX_GRAMMAR_MAX_RULES) return rlx__gc_perr(p, NULL, "more than %d rules", RLX_GRAMMAR_MAX_RULES), -1;
    if (rt->n == rt->cap) {
        int nc = rt->cap ? rt->cap * 2 : 32;
        ebuf *nb = realloc(rt->body, (size_t)nc * sizeof *nb);
        if (nb) rt->body = nb;
        char **nn = realloc(rt->name, (size_t)nc * sizeof *nn);
        if (nn) rt->name = nn;
        bool *nd = realloc(rt->defined, (size_t)nc * sizeof *nd);
        if (nd) rt->defined = nd;
        int *cp = realloc(rt->chain_prev, (size_t)nc * sizeof *cp);
        if (cp) rt->chain_prev = cp;
        int *cl = realloc(rt->chain_left, (size_t)nc * sizeof *cl);
        if (cl) rt->chain_left = cl;
        int *ct = realloc(rt->chain_tlen, (size_t)nc * sizeof *ct);
        if (ct) rt->chain_tlen = ct;
        int *st = realloc(rt->star_tlen, (size_t)nc * sizeof *st);
        if (st) rt->star_tlen = st;
        if (!nb || !nn || !nd || !cp || !cl || !ct || !st) return rlx__gc_perr(p, NULL, "out of memory"), -1;
        rt->cap = nc;
    }
    char *s = malloc(len + 1);
    if (!s) return rlx__gc_perr(p, NULL, "out of memory"), -1;
    memcpy(s, name, len);
    s[len] = 0;
    rt->body[rt->n] = (ebuf){0};
    rt->name[rt->n] = s;
    rt->defined[rt->n] = false;
    rt->chain_prev[rt->n] = -1;
    rt->chain_left[rt->n] = 0;
    rt->chain_tlen[rt->n] = 0;
    rt->star_tlen[rt->n] = 0;
    return rt->n++;
}

int rlx__gc_rule_new(parser *p, rule_tab *rt, const char *base)
{
    char name[160];
    for (int k = rt->n;; k++) {
        snprintf(name, sizeof name, "%.120s_%d", base, k);
        if (rule_find(p, rt, name, strlen(name), false) < 0) break;
    }
    int id = rule_find(p, rt, name, strlen(name), true);
    if (id >= 0) rt->defined[id] = true;
    return id;
}

static bool is_word_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

static const char *skip_space(parser *p, const char *s, bool newline_ok)
{
    while (s < p->end) {
        if (*s == '#') {
            while (s < p->end && *s != '\n' && *s != '\r') s++;
        } else if (*s == ' ' || *s == '\t' || ((*s == '\n' || *s == '\r') && newline_ok)) {
            s++;
        } else {
            break;
        }
    }
    return s;
}

static const char *parse_name(parser *p, const char *s)
{
    const char *b = s;
    while (s < p->end && is_word_char(*s)) s++;
    if (s == b) rlx__gc_perr(p, b, "expected a rule name");
    return s;
}

/* Decodes one UTF-8 code point at s (strictly); returns the byte count or 0. */
static int utf8_decode(const char *s, const char *end, uint32_t *cp)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t avail = (size_t)(end - s);
    if (!avail) return 0;
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    int n = (u[0] & 0xe0) == 0xc0 ? 2 : (u[0] & 0xf0) == 0xe0 ? 3 : (u[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (!n || avail < (size_t)n) return 0;
    uint32_t c = u[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xc0) != 0x80) return 0;
        c = (c << 6) | (u[i] & 0x3f);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min_cp[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return n;
}

/* One character of a literal or class, escapes included. */
static const char *parse_char(parser *p, const char *s, uint32_t *cp)
{
    if (s >= p->end) {
        rlx__gc_perr(p, s, "unexpected end of grammar");
        return s;
    }
    if (*s == '\\') {
        s++;
        if (s >= p->end) {
            rlx__gc_perr(p, s, "unfinished escape");
            return s;
        }
        char c = *s++;
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            for (int i = 0; i < digits; i++, s++) {
                int h = s < p->end ? rlx_hex_value(*s) : -1;
                if (h < 0) {
                    rlx__gc_perr(p, s, "expected %d hex digits after \\%c", digits, c);
                    return s;
                }
                v = (v << 4) | (uint32_t)h;
            }
            if (v > 0x10ffff) {
                rlx__gc_perr(p, s, "code point U+%X is out of range", v);
                return s;
            }
            *cp = v;
            return s;
        }
        switch (c) {
        case 'n': *cp = '\n'; return s;
        case 'r': *cp = '\r'; return s;
        case 't': *cp = '\t'; return s;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': *cp = (uint8_t)c; return s;
        default:
            rlx__gc_perr(p, s - 1, "unknown escape '\\%c'", c);
            return s;
        }
    }
    int n = utf8_decode(s, p->end, cp);
    if (!n) {
        rlx__gc_perr(p, s, "invalid UTF-8 in the grammar");
        return s + 1;
    }
    return s + n;
}

static const char *parse_alternates(parser *p, rule_tab *rt, const char *s, int rule, bool nested);

/* Rewrites the last term of b (elements [start, b->n)) repeated {min, max} (max -1: no bound)
 * with helper rules, as llama.cpp does: x{m,n} = x...x (m times) then nested optionals. */
static bool apply_repeat(parser *p, rule_tab *rt, int rule, ebuf *b, size_t start, int min, int max, const char *at)
{
    size_t tlen = b->n - start;
    gelem term[64];
    if (tlen > RLX_ARRAY_LEN(term)) { /* a long char class: make it a rule so the copies are refs */
        int sub = rlx__gc_rule_new(p, rt, rt->name[rule]);
        if (sub < 0) return false;
        for (size_t i = start; i < b->n; i++)
            if (!rlx__gc_push(p, &rt->body[sub], b->e[i].type, b->e[i].value)) return false;
        if (!rlx__gc_push(p, &rt->body[sub], G_END, 0)) return false;
        b->n = start;
        if (!rlx__gc_push(p, b, G_REF, (uint32_t)sub)) return false;
        tlen = 1;
    }
    memcpy(term, b->e + start, tlen * sizeof *term);
    b->n = start;
    if (min > RLX_GRAMMAR_MAX_REPEAT || max > RLX_GRAMMAR_MAX_REPEAT) {
        rlx__gc_perr(p, at, "repetition count over %d", RLX_GRAMMAR_MAX_REPEAT);
        return false;
    }
    for (int k = 0; k < min; k++)
        for (size_t i = 0; i < tlen; i++)
            if (!rlx__gc_push(p, b, term[i].type, term[i].value)) return false;
    if (max == min) return true;
    if (max < 0) { /* star: R ::= term R | (empty) */
        int r = rlx__gc_rule_new(p, rt, rt->name[rule]);
        if (r < 0) return false;
        ebuf *rb = &rt->body[r];
        for (size_t i = 0; i < tlen; i++)
            if (!rlx__gc_push(p, rb, term[i].type, term[i].value)) return false;
        if (!rlx__gc_push(p, rb, G_REF, (uint32_t)r) || !rlx__gc_push(p, rb, G_ALT, 0) || !rlx__gc_push(p, rb, G_END, 0)) return false;
        rt->star_tlen[r] = (int)tlen;
        return rlx__gc_push(p, b, G_REF, (uint32_t)r);
    }
    /* up to (max - min) more: R1 ::= term R2 | (empty), ..., Rk ::= term | (empty), made from
     * the last; a chain for the tables (grammar_internal.h; dropped at the end if term is
     * nullable) */
    int last = -1;
    for (int k = 0; k < max - min; k++) {
        int r = rlx__gc_rule_new(p, rt, rt->name[rule]);
        if (r < 0) return false;
        if (last >= 0) rt->chain_prev[last] = r;
        rt->chain_left[r] = k;
        rt->chain_tlen[r] = (int)tlen;
        rt->any_chain = true;
        ebuf *rb = &rt->body[r];
        for (size_t i = 0; i < tlen; i++)
            if (!rlx__gc_push(p, rb, term[i].type, term[i].value)) return false;
        if (last >= 0 && !rlx__gc_push(p, rb, G_REF, (uint32_t)last)) return false;
        if (!rlx__gc_push(p, rb, G_ALT, 0) || !rlx__gc_push(p, rb, G_END, 0)) return false;
        last = r;
    }
    return rlx__gc_push(p, b, G_REF, (uint32_t)last);
}

static const char *parse_int(parser *p, const char *s, int *v)
{
    const char *b = s;
    long x = 0;
    while (s < p->end && *s >= '0' && *s <= '9') {
        x = x * 10 + (*s - '0');
        if (x > RLX_GRAMMAR_MAX_REPEAT) {
            rlx__gc_perr(p, b, "repetition count over %d", RLX_GRAMMAR_MAX_REPEAT);
            return s;
        }
        s++;
    }
    if (s == b) rlx__gc_perr(p, b, "expected a number");
    *v = (int)x;
    return s;
}

static const char *parse_sequence(parser *p, rule_tab *rt, const char *s, int rule, ebuf *b, bool nested)
{
    size_t last_start = b->n;
    bool have_last = false;
    while (s < p->end && !p->failed) {
        const char *at = s;
        if (*s == '"') {
            s++;
            last_start = b->n;
            have_last = true;
            bool empty = true;
            while (s < p->end && *s != '"' && !p->failed) {
                uint32_t cp;
                const char *cat = s;
                s = parse_char(p, s, &cp);
                /* text is UTF-8: a surrogate never comes (it was "allows no token ... here") */
                if (!p->failed && cp >= 0xd800 && cp <= 0xdfff)
                    return rlx__gc_perr(p, cat, "U+%X is a UTF-16 surrogate, not a character: text never holds it", cp), s;
                if (!rlx__gc_push(p, b, G_CHAR, cp)) return s;
                empty = false;
            }
            if (s >= p->end) return rlx__gc_perr(p, at, "unterminated string literal"), s;
            s++;
            if (empty) have_last = false; /* "" matches nothing: repeating it is a no-op */
        } else if (*s == '[') {
            s++;
            last_start = b->n;
            have_last = true;
            uint32_t start_type = G_CHAR;
            if (s < p->end && *s == '^') {
                start_type = G_CHAR_NOT;
                s++;
            }
            bool first = true;
            while (s < p->end && *s != ']' && !p->failed) {
                uint32_t cp;
                s = parse_char(p, s, &cp);
                if (!rlx__gc_push(p, b, first ? start_type : G_CHAR_ALT, cp)) return s;
                first = false;
                if (s + 1 < p->end && *s == '-' && s[1] != ']') {
                    uint32_t hi;
                    const char *rat = s;
                    s = parse_char(p, s + 1, &hi);
                    if (hi < cp) return rlx__gc_perr(p, rat, "character range end U+%X is below its start U+%X", hi, cp), s;
                    if (!p->failed && start_type == G_CHAR && cp >= 0xd800 && hi <= 0xdfff)
                        return rlx__gc_perr(p, rat, "character range U+%X-U+%X holds only UTF-16 surrogates, not characters", cp, hi), s;
                    if (!rlx__gc_push(p, b, G_RNG_UPPER, hi)) return s;
                }
            }
            if (s >= p->end) return rlx__gc_perr(p, at, "unterminated character class"), s;
            if (first) return rlx__gc_perr(p, at, "empty character class"), s;
            s++;
        } else if (*s == '.') {
            s++;
            last_start = b->n;
            have_last = true;
            if (!rlx__gc_push(p, b, G_ANY, 0)) return s;
        } else if (is_word_char(*s)) {
            const char *e = parse_name(p, s);
            int ref = rule_find(p, rt, s, (size_t)(e - s), true);
            if (ref < 0) return e;
            s = e;
            last_start = b->n;
            have_last = true;
            if (!rlx__gc_push(p, b, G_REF, (uint32_t)ref)) return s;
        } else if (*s == '<' || *s == '!') { /* a token reference (grammar_tokens.c) */
            bool neg = *s == '!';
            if (neg && (s + 1 >= p->end || s[1] != '<')) return rlx__gc_perr(p, at, "'!' must be followed by a token reference <...>"), s;
            char why[256];
            uint32_t id;
            if (!(s = rlx__grammar_token_ref(s + neg, p->end, neg, p->ids, &id, why, sizeof why))) return rlx__gc_perr(p, at, "%s", why), at;
            last_start = b->n;
            have_last = p->has_tokens = true;
            if (!rlx__gc_push(p, b, neg ? G_TOKEN_NOT : G_TOKEN, id)) return s;
        } else if (*s == '(') {
            int sub = rlx__gc_rule_new(p, rt, rt->name[rule]);
            if (sub < 0) return s;
            s = parse_alternates(p, rt, s + 1, sub, true);
            if (p->failed) return s;
            if (s >= p->end || *s != ')') return rlx__gc_perr(p, at, "unclosed '('"), s;
            s++;
            last_start = b->n;
            have_last = true;
            if (!rlx__gc_push(p, b, G_REF, (uint32_t)sub)) return s;
        } else if (*s == '*' || *s == '+' || *s == '?' || *s == '{') {
            if (!have_last) return rlx__gc_perr(p, at, "'%c' follows nothing it could repeat", *s), s; /* one of *+?{ */
            int min = 0, max = -1;
            if (*s == '*') {
                s++;
            } else if (*s == '+') {
                min = 1;
                s++;
            } else if (*s == '?') {
                max = 1;
                s++;
            } else {
                s = skip_space(p, s + 1, nested);
                s = parse_int(p, s, &min);
                s = skip_space(p, s, nested);
                if (p->failed) return s;
                if (s < p->end && *s == ',') {
                    s = skip_space(p, s + 1, nested);
                    if (s < p->end && *s >= '0' && *s <= '9') s = parse_int(p, s, &max);
                    s = skip_space(p, s, nested);
                } else {
                    max = min;
                }
                if (p->failed) return s;
                if (s >= p->end || *s != '}') return rlx__gc_perr(p, at, "expected '}'"), s;
                s++;
                if (max >= 0 && max < min) return rlx__gc_perr(p, at, "{%d,%d}: the maximum is below the minimum", min, max), s;
            }
            if (!apply_repeat(p, rt, rule, b, last_start, min, max, at)) return s;
            have_last = false; /* x** is an error, as in llama.cpp */
        } else {
            break;
        }
        s = skip_space(p, s, nested);
    }
    return s;
}

static const char *parse_alternates(parser *p, rule_tab *rt, const char *s, int rule, bool nested)
{
    ebuf b = {0};
    s = skip_space(p, s, nested);
    s = parse_sequence(p, rt, s, rule, &b, nested);
    while (!p->failed && s < p->end && *s == '|') {
        if (!rlx__gc_push(p, &b, G_ALT, 0)) break;
        s = skip_space(p, s + 1, true);
        s = parse_sequence(p, rt, s, rule, &b, nested);
    }
    if (!p->failed) rlx__gc_push(p, &b, G_END, 0);
    free(rt->body[rule].e);
    rt->body[rule] = b;
    return s;
}

rlx_grammar *rlx_grammar_compile(const char *src, size_t len, const char *root, rlx_error *err)
{
    return rlx_grammar_compile_ids(src, len, root, NULL, err);
}

rlx_grammar *rlx_grammar_compile_ids(const char *src, size_t len, const char *root, const rlx_grammar_token_ids *ids,
                                     rlx_error *err)
{
    if (!src) len = 0;
    if (len > RLX_GRAMMAR_MAX_SOURCE) {
        rlx_errorf(err, RLX_ERANGE, "grammar: %zu bytes, over the limit of %u", len, RLX_GRAMMAR_MAX_SOURCE);
        return NULL;
    }
    if (!root) root = "root";
    parser p = {.src = src, .end = src + len, .err = err, .ids = ids};
    rule_tab rt = {0};
    rlx_grammar *g = NULL;
    bool *nullable = NULL;
    uint8_t *mark = NULL;
    const char *s = skip_space(&p, src, true);
    while (s < p.end && !p.failed) {
        const char *at = s;
        const char *e = parse_name(&p, s);
        if (p.failed) break;
        int r = rule_find(&p, &rt, s, (size_t)(e - s), true);
        if (r < 0) break;
        if (rt.defined[r]) {
            rlx__gc_perr(&p, at, "rule '%s' is defined twice", rt.name[r]);
            break;
        }
        rt.defined[r] = true;
        s = skip_space(&p, e, false);
        if (p.end - s < 3 || memcmp(s, "::=", 3)) {
            rlx__gc_perr(&p, s, "expected '::=' after '%s'", rt.name[r]);
            break;
        }
        s = parse_alternates(&p, &rt, skip_space(&p, s + 3, true), r, false); /* the body may start on the next line */
        if (p.failed) break;
        if (s < p.end && *s == '\r') s++;
        if (s < p.end && *s != '\n') {
            char ch[16];
            rlx__gc_perr(&p, s, "unexpected '%s'", char_text(s, p.end, ch));
            break;
        }
        s = skip_space(&p, s, true);
    }
    if (p.failed) goto fail;
    for (int r = 0; r < rt.n; r++)
        if (!rt.defined[r]) {
            rlx__gc_perr(&p, NULL, "rule '%s' is used but not defined", rt.name[r]);
            goto fail;
        }
    int root_id = rule_find(&p, &rt, root, strlen(root), false);
    if (root_id < 0) {
        rlx__gc_perr(&p, NULL, "no rule named '%s' (the start rule)", root);
        goto fail;
    }
    nullable = malloc((size_t)rt.n * sizeof *nullable);
    mark = calloc((size_t)rt.n, 1);
    if (!nullable || !mark) {
        rlx__gc_perr(&p, NULL, "out of memory");
        goto fail;
    }
    rlx__gc_fix(&rt, nullable, false);
    int n_before = rt.n;
    if (!rlx__gc_star_terms_nonempty(&p, &rt, nullable)) goto fail;
    if (rt.n != n_before) { /* rules NE added (a rewrite always adds one): nullable again */
        bool *nn = realloc(nullable, (size_t)rt.n * sizeof *nn);
        uint8_t *nm = realloc(mark, (size_t)rt.n);
        if (nn) nullable = nn;
        if (nm) mark = nm;
        if (!nn || !nm) {
            rlx__gc_perr(&p, NULL, "out of memory");
            goto fail;
        }
        memset(mark, 0, (size_t)rt.n);
        rlx__gc_fix(&rt, nullable, false);
    }
    for (int r = 0; r < rt.n; r++) {
        int hit = rlx__gc_left_recursive(&rt, nullable, r, mark);
        if (hit >= 0) {
            rlx__gc_perr(&p, NULL, "rule '%s' is left-recursive (it can reach itself before any character)", rt.name[hit]);
            goto fail;
        }
    }
    bool *finite = malloc((size_t)rt.n * sizeof *finite); /* (a root without: the output could never end) */
    if (finite) rlx__gc_fix(&rt, finite, true);
    if (!finite || !finite[root_id]) {
        if (finite) rlx__gc_perr(&p, NULL, "rule '%s' matches no finite text: every way through it recurses forever", root);
        else rlx__gc_perr(&p, NULL, "out of memory");
        free(finite);
        goto fail;
    }
    free(finite);
    size_t total = 0;
    for (int r = 0; r < rt.n; r++) total += rt.body[r].n;
    if (total > RLX_GRAMMAR_MAX_ELEMS) {
        rlx_errorf(err, RLX_ERANGE, "grammar: %zu elements after expansion, over the limit of %u", total,
                   RLX_GRAMMAR_MAX_ELEMS);
        p.failed = true;
        goto fail;
    }
    g = calloc(1, sizeof *g);
    if (!g || !(g->e = malloc((total + 1) * sizeof *g->e)) || !(g->rule_start = malloc((size_t)rt.n * sizeof *g->rule_start))) {
        rlx__gc_perr(&p, NULL, "out of memory");
        goto fail;
    }
    for (int r = 0; r < rt.n; r++) {
        g->rule_start[r] = g->n_e;
        memcpy(g->e + g->n_e, rt.body[r].e, rt.body[r].n * sizeof *g->e);
        g->n_e += (uint32_t)rt.body[r].n;
    }
    if (rt.any_chain && !rlx__gc_chains_out(&rt, nullable, g)) {
        rlx__gc_perr(&p, NULL, "out of memory");
        goto fail;
    }
    g->e[g->n_e] = (gelem){G_END, 0}; /* a sentinel: the set scanners read one past a set */
    g->root = (uint32_t)root_id;
    g->has_tokens = p.has_tokens;
    g->n_rules = (uint32_t)rt.n;
    g->serial = atomic_fetch_add(&next_serial, 1) + 1;
    goto done;
fail:
    rlx_grammar_free(g);
    g = NULL;
done: /* the rule table is scratch either way */
    for (int r = 0; r < rt.n; r++) {
        free(rt.body[r].e);
        free(rt.name[r]);
    }
    free(rt.body);
    free(rt.name);
    free(rt.defined);
    free(rt.chain_prev);
    free(rt.chain_left);
    free(rt.chain_tlen);
    free(rt.star_tlen);
    free(nullable);
    free(mark);
    return g;
}

void rlx_grammar_free(rlx_grammar *g)
{
    if (!g) return;
    free(g->e);
    free(g->rule_start);
    free(g->chain_prev);
    free(g->chain_left);
    free(g);
}


