/* json_schema_prim.c - text helpers and fixed rules of the JSON Schema compiler: growable
 * buffers, GBNF / JSON string escaping, code point sets written as JSON string characters, the
 * primitive rules, and exact integer range rules (see json_schema_internal.h). */
#include "engine/json_schema_walk.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

/* ---- buffers ---- */

static bool sb_reserve(rlx__sb *b, size_t extra)
{
    if (b->oom) return false;
    if (b->n + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void rlx__sb_put(rlx__sb *b, const char *s, size_t n)
{
    if (!sb_reserve(b, n)) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void rlx__sb_puts(rlx__sb *b, const char *s) { rlx__sb_put(b, s, strlen(s)); }

void rlx__sb_printf(rlx__sb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !sb_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

char *rlx__sb_take(rlx__sb *b)
{
    char *p = b->oom ? NULL : b->p ? b->p : strdup("");
    if (b->oom) free(b->p);
    *b = (rlx__sb){0};
    return p;
}

/* ---- escaping ---- */

void rlx__gbnf_literal(rlx__sb *b, const char *s, size_t n)
{
    rlx__sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            rlx__sb_put(b, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            rlx__sb_printf(b, "\\x%02X", c);
        } else {
            rlx__sb_put(b, (const char *)&s[i], 1); /* UTF-8 bytes pass through */
        }
    }
    rlx__sb_put(b, "\"", 1);
}

/* Alternatives that share a prefix are written once, the prefix then a group of what follows
 * it, until a group has at most ALT_FLAT texts: a parse holds one stack per alternative that
 * is still possible, so a flat alternation of thousands of values (an enum) would hold
 * thousands at its first byte; shared prefixes keep it at the branching of the current byte.
 * Splits fall on code point boundaries (the grammar reads code points). Groups nest as deep as
 * values are prefixes of longer ones ("a", "aa", ...: ~700 levels within the schema's 256 KiB). */
#define ALT_FLAT 32

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* bytes of the UTF-8 sequence starting with c (1 for a stray continuation byte) */
static size_t seq_len(unsigned char c) { return c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1; }

/* t[0..n) sorted, distinct, sharing their first d bytes (a code point boundary): what follows */
static void alt_tail(rlx__sb *b, char **t, size_t n, size_t d)
{
    if (n <= ALT_FLAT) {
        bool empty = false; /* one text may end at d (sorted first) */
        size_t k = 0;
        rlx__sb_puts(b, "(");
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(t[i] + d);
            if (!len) {
                empty = true;
                continue;
            }
            rlx__sb_puts(b, k++ ? " | " : " ");
            rlx__gbnf_literal(b, t[i] + d, len);
        }
        rlx__sb_puts(b, empty ? " )?" : " )");
        return;
    }
    /* the group's common prefix: that of its first and last (sorted), ended at a boundary */
    size_t L = d;
    while (t[0][L] && t[0][L] == t[n - 1][L]) L++;
    while (L > d && ((unsigned char)t[0][L] & 0xC0) == 0x80) L--;
    if (L > d) {
        rlx__sb_puts(b, "( ");
        rlx__gbnf_literal(b, t[0] + d, L - d);
        rlx__sb_puts(b, " ");
    }
    size_t i = 0;
    bool empty = !t[0][L];
    if (empty) i = 1;
    rlx__sb_puts(b, "(");
    for (size_t k = 0; i < n; k++) { /* one branch per code point at L */
        size_t c = seq_len((unsigned char)t[i][L]), e = i + 1;
        while (e < n && !strncmp(t[e] + L, t[i] + L, c)) e++;
        rlx__sb_puts(b, k ? " | " : " ");
        if (e - i == 1) {
            rlx__gbnf_literal(b, t[i] + L, strlen(t[i] + L));
        } else {
            rlx__gbnf_literal(b, t[i] + L, c);
            rlx__sb_puts(b, " ");
            alt_tail(b, t + i, e - i, L + c);
        }
        i = e;
    }
    rlx__sb_puts(b, empty ? " )?" : " )");
    if (L > d) rlx__sb_puts(b, " )");
}

bool rlx__gbnf_alternatives(rlx__sb *b, char **texts, size_t n)
{
    qsort(texts, n, sizeof *texts, str_cmp);
    size_t m = 0; /* distinct */
    for (size_t i = 0; i < n; i++) {
        if (m && !strcmp(texts[m - 1], texts[i])) {
            free(texts[i]);
            continue;
        }
        texts[m++] = texts[i];
    }
    for (size_t i = 0; i < n; i++) if (i >= m) texts[i] = NULL;
    if (!m || (m == 1 && !*texts[0])) return false;
    alt_tail(b, texts, m, 0);
    return true;
}

void rlx__json_string(rlx__sb *b, const char *s, size_t n)
{
    rlx__sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (e) rlx__sb_puts(b, e);
        else if (c < 0x20) rlx__sb_printf(b, "\\u%04x", c);
        else rlx__sb_put(b, (const char *)&s[i], 1);
    }
    rlx__sb_put(b, "\"", 1);
}

/* ---- code point sets ---- */

void rlx__cpset_add(rlx__cpset *s, uint32_t lo, uint32_t hi)
{
    if (s->oom || lo > hi) return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        uint32_t (*r)[2] = realloc(s->r, cap * sizeof *r);
        if (!r) {
            s->oom = true;
            return;
        }
        s->r = r;
        s->cap = cap;
    }
    /* insert in order, then merge overlapping or adjacent neighbours */
    size_t i = 0;
    while (i < s->n && s->r[i][0] < lo) i++;
    memmove(s->r + i + 1, s->r + i, (s->n - i) * sizeof *s->r);
    s->r[i][0] = lo;
    s->r[i][1] = hi;
    s->n++;
    size_t w = 0;
    for (size_t k = 1; k < s->n; k++) {
        if (s->r[k][0] <= s->r[w][1] + 1) {
            if (s->r[k][1] > s->r[w][1]) s->r[w][1] = s->r[k][1];
        } else {
            w++;
            s->r[w][0] = s->r[k][0];
            s->r[w][1] = s->r[k][1];
        }
    }
    s->n = w + 1;
}

void rlx__cpset_add_set(rlx__cpset *s, const rlx__cpset *o)
{
    for (size_t i = 0; i < o->n; i++) rlx__cpset_add(s, o->r[i][0], o->r[i][1]);
    if (o->oom) s->oom = true;
}

void rlx__cpset_negate(rlx__cpset *s)
{
    rlx__cpset out = {0};
    uint32_t next = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i][0] > next) rlx__cpset_add(&out, next, s->r[i][0] - 1);
        next = s->r[i][1] + 1;
    }
    if (next <= 0x10ffff) rlx__cpset_add(&out, next, 0x10ffff);
    /* no surrogates: they are not characters */
    rlx__cpset cut = {0};
    for (size_t i = 0; i < out.n; i++) {
        uint32_t lo = out.r[i][0], hi = out.r[i][1];
        if (hi < 0xd800 || lo > 0xdfff) {
            rlx__cpset_add(&cut, lo, hi);
        } else {
            if (lo < 0xd800) rlx__cpset_add(&cut, lo, 0xd7ff);
            if (hi > 0xdfff) rlx__cpset_add(&cut, 0xe000, hi);
        }
    }
    cut.oom |= out.oom | s->oom;
    rlx__cpset_free(&out);
    rlx__cpset_free(s);
    *s = cut;
}

bool rlx__cpset_has(const rlx__cpset *s, uint32_t c)
{
    for (size_t i = 0; i < s->n; i++)
        if (c >= s->r[i][0] && c <= s->r[i][1]) return true;
    return false;
}

void rlx__cpset_free(rlx__cpset *s)
{
    free(s->r);
    *s = (rlx__cpset){0};
}

static void class_cp(rlx__sb *b, uint32_t c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) rlx__sb_printf(b, "%c", (char)c);
    else if (c < 0x100) rlx__sb_printf(b, "\\x%02X", c);
    else if (c < 0x10000) rlx__sb_printf(b, "\\u%04X", c);
    else rlx__sb_printf(b, "\\U%08X", c);
}

bool rlx__cpset_gbnf(rlx__sb *b, const rlx__cpset *s)
{
    if (!s->n) return false;
    /* raw: what JSON lets stand for itself (not a control character, quote or backslash) */
    rlx__cpset raw = {0};
    for (size_t i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i][0] < 0x20 ? 0x20 : s->r[i][0], hi = s->r[i][1];
        for (uint32_t a = lo; a <= hi;) { /* split around '"' and '\\' */
            uint32_t stop = a <= '"' && hi >= '"' ? '"' : a <= '\\' && hi >= '\\' ? '\\' : hi + 1;
            if (stop > a) rlx__cpset_add(&raw, a, stop - 1);
            if (stop > hi) break;
            a = stop + 1;
        }
    }
    int alts = 0;
    rlx__sb_puts(b, "(");
    if (raw.n) {
        rlx__sb_puts(b, "[");
        for (size_t i = 0; i < raw.n; i++) {
            class_cp(b, raw.r[i][0]);
            if (raw.r[i][1] != raw.r[i][0]) {
                rlx__sb_puts(b, "-");
                class_cp(b, raw.r[i][1]);
            }
        }
        rlx__sb_puts(b, "]");
        alts++;
    }
    b->oom |= raw.oom;
    rlx__cpset_free(&raw);
    for (uint32_t c = 0; c < 0x20; c++) {
        if (!rlx__cpset_has(s, c)) continue;
        const char *e = c == '\n' ? "\"\\\\n\"" : c == '\r' ? "\"\\\\r\"" : c == '\t' ? "\"\\\\t\""
                      : c == '\b' ? "\"\\\\b\"" : c == '\f' ? "\"\\\\f\"" : NULL;
        rlx__sb_puts(b, alts++ ? " | " : "");
        if (e) rlx__sb_puts(b, e);
        else rlx__sb_printf(b, "\"\\\\u%04x\"", c);
    }
    if (rlx__cpset_has(s, '"')) rlx__sb_puts(b, alts++ ? " | \"\\\\\\\"\"" : "\"\\\\\\\"\"");
    if (rlx__cpset_has(s, '\\')) rlx__sb_puts(b, alts++ ? " | \"\\\\\\\\\"" : "\"\\\\\\\\\"");
    rlx__sb_puts(b, ")");
    return true;
}

/* ---- primitive rules ---- */

const char rlx__json_schema_prims[] =
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws ( string \":\" ws value ( \",\" ws string \":\" ws value )* ws )? \"}\"\n"
    "object-nonempty ::= \"{\" ws string \":\" ws value ( \",\" ws string \":\" ws value )* ws \"}\"\n"
    "array ::= \"[\" ws ( value ( \",\" ws value )* ws )? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    /* one character: raw, a short escape, a \u escape of a non-surrogate, or a surrogate pair
     * (so that a length counts code points, as JSON Schema does) */
    "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" hex4 ) | "
    "\"\\\\u\" [dD] [89abAB] hex hex \"\\\\u\" [dD] [c-fC-F] hex hex\n"
    "keychar ::= [^\"\\\\\\x00-\\x1F]\n"
    "hex ::= [0-9a-fA-F]\n"
    "hex4 ::= [0-9a-cA-Ce-fE-F] hex hex hex | [dD] [0-7] hex hex\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?\n"
    /* format float: a power of ten up to 22 keeps 16 digits within a float's range */
    "float ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] ( \"-\" [0-9]{1,2} | \"+\"? ( [0-9] | \"1\" [0-9] | \"2\" [0-2] ) ) )?\n"
    "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
    "boolean ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n"
    /* RFC 3339 full-date with the days of each month (29 February in leap years only) */
    "date ::= [0-9]{4} \"-\" ( date-m31 \"-\" date-d31 | date-m30 \"-\" date-d30 | \"02-\" date-d28 ) | date-leap \"-02-29\"\n"
    "date-leap ::= [0-9] [0-9] ( [02468] [48] | [2468] \"0\" | [13579] [26] ) | ( [02468] [048] | [13579] [26] ) \"00\"\n"
    "date-m31 ::= \"0\" [13578] | \"1\" [02]\n"
    "date-m30 ::= \"0\" [469] | \"11\"\n"
    "date-d28 ::= \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]\n"
    "date-d30 ::= date-d28 | \"29\" | \"30\"\n"
    "date-d31 ::= date-d30 | \"31\"\n"
    /* RFC 3339 full-time: the offset is always written */
    "time ::= time-h \":\" time-ms \":\" time-ms ( \".\" [0-9]{1,9} )? ( \"Z\" | [+-] time-h \":\" time-ms )\n"
    "time-h ::= [01] [0-9] | \"2\" [0-3]\n"
    "time-ms ::= [0-5] [0-9]\n"
    "date-time ::= date \"T\" time\n"
    "uuid ::= [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}\n"
    /* simple forms, each a subset of what RFC 5321 / 1123 / 2673 and Ajv's "full" formats
     * accept: labels of at most 62 characters (1-20 alphanumerics, up to two hyphens inside),
     * hostnames of at most 4 labels (251 characters), e-mail local parts of up to 4 dot-separated
     * runs of [A-Za-z0-9_+-] (64 characters at most, RFC 5321's limit), a domain of 2 to 4
     * labels of at most 41 characters: an address of at most 232 characters, within RFC 5321's
     * 254 (the lengths json_schema_scalar.c's table states) */
    "host-label ::= [a-zA-Z0-9]{1,20} ( \"-\" [a-zA-Z0-9]{1,20} ){0,2}\n"
    "hostname ::= host-label ( \".\" host-label ){0,3}\n"
    "email ::= [a-zA-Z0-9_+-]{1,16} ( \".\" [a-zA-Z0-9_+-]{1,15} ){0,3} \"@\" email-label ( \".\" email-label ){1,3}\n"
    "email-label ::= [a-zA-Z0-9]{1,20} ( \"-\" [a-zA-Z0-9]{1,20} )?\n"
    "ipv4 ::= ipv4-octet ( \".\" ipv4-octet ){3}\n"
    "ipv4-octet ::= \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]\n"
    /* RFC 3986 absolute URIs in two shapes, a subset of Ajv's "full" uri: scheme "://" a
     * hostname, an optional port and up to 6 path segments, or scheme ":" a rootless path
     * (mailto:, urn:); then an optional query and fragment. The rootless path's first segment
     * is not empty, so the text never reads as an authority it is not. */
    "uri ::= uri-scheme \":\" ( \"//\" hostname ( \":\" [0-9]{1,5} )? ( \"/\" uri-pchar{0,24} ){0,6} | "
    "uri-pchar{1,24} ( \"/\" uri-pchar{0,24} ){0,5} ) ( \"?\" uri-qchar{0,48} )? ( \"#\" uri-qchar{0,24} )?\n"
    "uri-scheme ::= [a-zA-Z] [a-zA-Z0-9+.-]{0,9}\n"
    "uri-pchar ::= [-a-zA-Z0-9._~!$&'()*+,;=:@] | \"%\" hex hex\n"
    "uri-qchar ::= uri-pchar | [/?]\n"
    /* relative references (RFC 3986 4.2) beside the absolute ones: an absolute path, or a
     * relative path whose first segment has no colon (so it never reads as a scheme), or only a
     * query or a fragment; a subset of Ajv's "full" uri-reference */
    "uri-reference ::= uri | ( \"/\" uri-pchar{1,24} ( \"/\" uri-pchar{0,24} ){0,5} | "
    "uri-nc{1,24} ( \"/\" uri-pchar{0,24} ){0,5} )? ( \"?\" uri-qchar{0,48} )? ( \"#\" uri-qchar{0,24} )?\n"
    "uri-nc ::= [-a-zA-Z0-9._~!$&'()*+,;=@] | \"%\" hex hex\n"
    /* RFC 3339 Appendix A durations (units in order, each of up to 4 digits), which Ajv's
     * "duration" also accepts */
    "duration ::= \"P\" ( dur-date ( \"T\" dur-time )? | \"T\" dur-time | dur-n \"W\" )\n"
    "dur-n ::= [0-9]{1,4}\n"
    "dur-date ::= dur-n \"Y\" ( dur-n \"M\" ( dur-n \"D\" )? )? | dur-n \"M\" ( dur-n \"D\" )? | dur-n \"D\"\n"
    "dur-time ::= dur-n \"H\" ( dur-n \"M\" ( dur-n \"S\" )? )? | dur-n \"M\" ( dur-n \"S\" )? | dur-n \"S\"\n"
    /* RFC 4291 2.2's first form: eight groups, nothing compressed */
    "ipv6 ::= hex{1,4} ( \":\" hex{1,4} ){7}\n"
    /* base64 (RFC 4648 4) of up to 24 groups, padded */
    "byte ::= ( b64 b64 b64 b64 ){0,24} ( b64{2} \"==\" | b64{3} \"=\" )?\n"
    "b64 ::= [A-Za-z0-9+/]\n"
    /* RFC 6901 JSON pointers (up to 6 tokens of up to 16 characters) and the relative ones of
     * draft-handrews-relative-json-pointer */
    "json-pointer ::= ( \"/\" jp-char{0,16} ){0,6}\n"
    "jp-char ::= [^~/\"\\\\\\x00-\\x1F] | \"~0\" | \"~1\"\n"
    "relative-json-pointer ::= ( \"0\" | [1-9] [0-9]{0,3} ) ( \"#\" | json-pointer )\n";

/* ---- integer ranges ---- */

static int ndigits(long long v)
{
    int n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

static long long pow10ll(int k)
{
    long long p = 1;
    while (k-- > 0) p *= 10;
    return p;
}

/* Alternatives for the digit strings of length n between A and B (same length, A <= B). */
static void same_len(rlx__sb *b, const char *A, const char *B, int n)
{
    if (n == 0) return;
    if (!strncmp(A, B, (size_t)n)) {
        rlx__sb_printf(b, "\"%.*s\"", n, A);
        return;
    }
    if (A[0] == B[0]) {
        rlx__sb_printf(b, "\"%c\" ", A[0]);
        same_len(b, A + 1, B + 1, n - 1);
        return;
    }
    bool a_zero = true, b_nine = true;
    for (int i = 1; i < n; i++) {
        a_zero &= A[i] == '0';
        b_nine &= B[i] == '9';
    }
    char lo = a_zero ? A[0] : (char)(A[0] + 1), hi = b_nine ? B[0] : (char)(B[0] - 1);
    char nines[20], zeros[20];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    int alts = 0;
    rlx__sb_puts(b, "( ");
    if (!a_zero) {
        rlx__sb_printf(b, "\"%c\" ", A[0]);
        same_len(b, A + 1, nines, n - 1);
        alts++;
    }
    if (lo <= hi) {
        rlx__sb_puts(b, alts++ ? " | " : "");
        if (lo == hi) rlx__sb_printf(b, "\"%c\"", lo);
        else rlx__sb_printf(b, "[%c-%c]", lo, hi);
        if (n > 1) rlx__sb_printf(b, " [0-9]{%d}", n - 1);
    }
    if (!b_nine) {
        rlx__sb_puts(b, alts++ ? " | " : "");
        rlx__sb_printf(b, "\"%c\" ", B[0]);
        same_len(b, zeros, B + 1, n - 1);
    }
    rlx__sb_puts(b, " )");
}

/* Non-negative integers in [a, hi] (hi < 0: unbounded), as alternatives; returns the count. */
static int magnitudes(rlx__sb *b, long long a, long long hi, int alts)
{
    int la = ndigits(a), lb = hi < 0 ? la : ndigits(hi);
    for (int L = la; L <= lb; L++) {
        long long lo_l = L == la ? a : pow10ll(L - 1);
        long long hi_l = hi >= 0 && L == lb ? hi : pow10ll(L) - 1;
        char A[24], B[24];
        snprintf(A, sizeof A, "%lld", lo_l);
        snprintf(B, sizeof B, "%lld", hi_l);
        rlx__sb_puts(b, alts++ ? " | " : "");
        same_len(b, A, B, L);
    }
    if (hi < 0 && la < 16) { /* and every longer number the integer rule allows */
        rlx__sb_puts(b, alts++ ? " | " : "");
        rlx__sb_printf(b, "[1-9] [0-9]{%d,15}", la);
    }
    return alts;
}

bool rlx__int_range(rlx__sb *b, bool has_lo, long long lo, bool has_hi, long long hi)
{
    if (has_lo && has_hi && lo > hi) return false;
    int alts = 0;
    rlx__sb_puts(b, "( ");
    if (!has_lo || lo < 0) { /* negatives: "-" and a magnitude */
        long long mmin = has_hi && hi < 0 ? -hi : 1, mmax = has_lo ? -lo : -1;
        rlx__sb_puts(b, "\"-\" ( ");
        magnitudes(b, mmin, mmax, 0);
        rlx__sb_puts(b, " )");
        alts++;
    }
    if (!has_hi || hi >= 0) {
        long long from = has_lo && lo > 0 ? lo : 0;
        rlx__sb_puts(b, alts ? " | " : "");
        alts = magnitudes(b, from, has_hi ? hi : -1, 0) + alts;
    }
    rlx__sb_puts(b, " )");
    return alts > 0;
}

/* Non-negative numbers v with lo < v (lo_excl) or lo <= v, and v < hi / v <= hi (hi < 0:
 * unbounded), as alternatives of an integer part and a fraction of at most 5 digits, no exponent;
 * returns the count written. */
static int nonneg_range(rlx__sb *b, long long lo, bool lo_excl, long long hi, bool hi_excl, int alts)
{
    static const char any_frac[] = "( \".\" [0-9]{1,5} )?", nonzero_frac[] = "\".\" [0-9]{0,4} [1-9]",
                      zero_frac[] = "( \".\" \"0\"{1,5} )?";
    long long a = lo_excl ? lo + 1 : lo, z = hi < 0 ? -1 : hi - 1; /* integer parts with any fraction */
    if (hi < 0 || a <= z) {
        rlx__sb_puts(b, alts++ ? " | " : "");
        rlx__sb_puts(b, "( ");
        magnitudes(b, a, hi < 0 ? -1 : z, 0);
        rlx__sb_printf(b, " ) %s", any_frac);
    }
    if (lo_excl && (hi < 0 || lo < hi)) { /* lo itself, with a fraction above zero */
        rlx__sb_puts(b, alts++ ? " | " : "");
        rlx__sb_printf(b, "\"%lld\" %s", lo, nonzero_frac);
    }
    if (hi >= 0 && !hi_excl && (hi > lo || (hi == lo && !lo_excl))) { /* hi itself, no fraction above zero */
        rlx__sb_puts(b, alts++ ? " | " : "");
        rlx__sb_printf(b, "\"%lld\" %s", hi, zero_frac);
    }
    return alts;
}

bool rlx__num_range(rlx__sb *b, bool has_lo, long long lo, bool lo_excl, bool has_hi, long long hi, bool hi_excl)
{
    int alts = 0;
    rlx__sb_puts(b, "( ");
    if (!has_lo || lo < 0) { /* negatives: "-" and a magnitude m = -v, 0 < m, m <= -lo / m < -lo */
        long long mlo = has_hi && hi < 0 ? -hi : 0, mhi = has_lo ? -lo : -1;
        bool mlo_excl = has_hi && hi < 0 ? hi_excl : true, mhi_excl = lo_excl;
        rlx__sb m = {0};
        int n = nonneg_range(&m, mlo, mlo_excl, mhi, mhi_excl, 0);
        if (n) {
            rlx__sb_printf(b, "\"-\" ( %s )", m.p ? m.p : "");
            alts++;
        }
        if (m.oom) b->oom = true;
        free(rlx__sb_take(&m));
    }
    if (!has_hi || hi > 0 || (hi == 0 && !hi_excl)) {
        long long plo = has_lo && lo >= 0 ? lo : 0;
        bool plo_excl = has_lo && lo >= 0 && lo_excl;
        alts = nonneg_range(b, plo, plo_excl, has_hi ? hi : -1, hi_excl, alts);
    }
    rlx__sb_puts(b, " )");
    return alts > 0;
}

/* ---- multipleOf ---- */

/* The multiples of k (> 1) within the integer bounds (has_lo/lo, has_hi/hi): listed when both
 * bounds are given and at most 256 multiples lie between; else, for a divisor of 1000 and no
 * bound, every integer of at most 15 digits (exact in a double, so a validator's division is
 * too; the plain integer rule's 16th digit could pass 2^53) whose last j digits (10^j the first
 * power of ten k divides) are a multiple of k. Anything else is refused by name. */
char *rlx__js_multiples(rlx__js *j, long long k, bool has_lo, long long lo, bool has_hi, long long hi)
{
    rlx__sb b = {0};
    if (has_lo && has_hi) {
        long long first = lo >= 0 ? (lo + k - 1) / k : -((-lo) / k), last = hi >= 0 ? hi / k : -((-hi + k - 1) / k);
        if (first > last)
            return rlx__js_fail(j, RLX_EINVAL, "no multiple of 'multipleOf' %lld lies between the bounds", k), NULL;
        if (last - first < 256) {
            for (long long m = first; m <= last; m++) rlx__sb_printf(&b, "%s\"%lld\"", m > first ? " | " : "", m * k);
            return rlx__js_rule(j, "mult", rlx__js_take(j, &b));
        }
    }
    int digits = 0;
    for (long long p = 10; p <= 1000 && !digits; p *= 10) digits = p % k ? 0 : p == 10 ? 1 : p == 100 ? 2 : 3;
    if (has_lo || has_hi || !digits)
        return rlx__js_fail(j, RLX_EINVAL, "'multipleOf' %lld is supported between a 'minimum' and a 'maximum' with at most 256 "
                            "multiples, or without bounds for a divisor of 1000", k), NULL;
    long long pow = digits == 1 ? 10 : digits == 2 ? 100 : 1000;
    rlx__sb_puts(&b, "\"-\"? ( ");
    for (long long m = 0; m < pow; m += k) rlx__sb_printf(&b, "%s\"%lld\"", m ? " | " : "", m); /* fewer digits */
    rlx__sb_printf(&b, " | [1-9] [0-9]{0,%d} ( ", 14 - digits); /* 15 digits: below 2^53, exact in a double */
    for (long long m = 0; m < pow; m += k) rlx__sb_printf(&b, "%s\"%0*lld\"", m ? " | " : "", digits, m);
    rlx__sb_puts(&b, " ) )");
    return rlx__js_rule(j, "mult", rlx__js_take(j, &b));
}

/* ---- the primitive rules a grammar uses ---- */

#define N_PRIMS 96 /* rules in rlx__json_schema_prims, at most (test_json_schema checks) */

typedef struct prim_rule { const char *name, *line; size_t name_len, line_len; } prim_rule;

static prim_rule prims[N_PRIMS];
static size_t n_prims;

/* rlx__json_schema_prims split into its rules (one per line), once */
static void split_prims(void)
{
    for (const char *p = rlx__json_schema_prims; *p && n_prims < N_PRIMS;) {
        const char *nl = strchr(p, '\n'), *sp = strchr(p, ' ');
        prims[n_prims++] = (prim_rule){p, p, (size_t)(sp - p), (size_t)(nl - p + 1)};
        p = nl + 1;
    }
}

static bool word_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

/* Marks the primitive rules that GBNF text refers to (names outside literals and classes), and
 * those the marked ones refer to in turn. */
static void mark_refs(const char *p, size_t n, bool *used)
{
    const char *end = p + n;
    while (p < end) {
        if (*p == '"' || *p == '[') { /* a literal or a class: skip it, escapes and all */
            char close = *p == '"' ? '"' : ']';
            for (p++; p < end && *p != close; p++)
                if (*p == '\\' && p + 1 < end) p++;
            p++;
        } else if (word_char(*p)) {
            const char *w = p;
            while (p < end && word_char(*p)) p++;
            for (size_t i = 0; i < n_prims; i++)
                if (!used[i] && prims[i].name_len == (size_t)(p - w) && !memcmp(prims[i].name, w, prims[i].name_len)) {
                    used[i] = true;
                    mark_refs(prims[i].line + prims[i].name_len, prims[i].line_len - prims[i].name_len, used);
                }
        } else {
            p++;
        }
    }
}

void rlx__json_schema_prims_for(rlx__sb *b, const char *gbnf, size_t n)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, split_prims);
    bool used[N_PRIMS] = {0};
    mark_refs(gbnf, n, used);
    for (size_t i = 0; i < n_prims; i++)
        if (used[i]) rlx__sb_put(b, prims[i].line, prims[i].line_len);
}
