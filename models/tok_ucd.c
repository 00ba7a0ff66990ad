/* tok_ucd.c - the BPE pre-tokenizers' regexes see characters as llama.cpp does.
 *
 * llama.cpp classifies code points with its own tables (Unicode 15.1); PCRE2 with its own
 * (Debian 12's 10.42: Unicode 14.0). The ~5,000 characters Unicode 15.0 and 15.1 added (CJK
 * extensions H and I, Kawi, Nag Mundari, ...) are letters, marks or digits to llama.cpp and
 * unassigned to PCRE2, so `[^\s\p{L}\p{N}]+` swallowed them with the "'" of a contraction; and
 * PCRE2's \s still holds U+180E MONGOLIAN VOWEL SEPARATOR, a format character (Cf) since Unicode
 * 6.3. The regexes therefore match a copy of the text in which each such code point is replaced
 * by a representative of its class with the same UTF-8 length (so every offset holds), while
 * the tokens are made from the text itself.
 *
 * Which code points: those utf8proc (this system's, 15.0 in Debian 12) assigns and PCRE2 reads
 * as unassigned (found once, by matching \p{Cn} over them), CJK extension I (15.1's only letters,
 * U+2EBF0..U+2EE5D) while PCRE2 does not know it, and U+180E while PCRE2's \s holds it. With
 * newer libraries the set shrinks by itself. Built once per process (pthread_once); read-only
 * afterwards, so any thread may tokenize. */
#include "models/tok_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef struct { uint32_t lo, hi, rep; } remap;

static remap *g_map;
static size_t g_n;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static size_t put_utf8(uint32_t cp, char *o)
{
    return (size_t)utf8proc_encode_char((utf8proc_int32_t)cp, (utf8proc_uint8_t *)o);
}

/* A code point of the same general class and UTF-8 length that PCRE2 (Unicode 14) classifies so,
 * outside every explicit range the regexes of tok_bpe.c name (Han, CJK, the deepseek letter
 * lists); 0 when the class needs none. */
static uint32_t representative(utf8proc_category_t c, size_t len)
{
    switch (c) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return len == 3 ? 0xA000 : len == 4 ? 0x10000 : 0;  /* YI SYLLABLE IT, LINEAR B SYLLABLE B008 A */
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
        return len == 3 ? 0x0EC8 : len == 4 ? 0x101FD : 0;  /* LAO TONE MAI EK, PHAISTOS DISC COMBINING OBLIQUE STROKE */
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return len == 3 ? 0x0E50 : len == 4 ? 0x104A0 : 0;  /* THAI DIGIT ZERO, OSMANYA DIGIT ZERO */
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF: case UTF8PROC_CATEGORY_PO:
        return len == 3 ? 0x0E4F : len == 4 ? 0x10100 : 0;  /* THAI FONGMAN, AEGEAN WORD SEPARATOR LINE */
    case UTF8PROC_CATEGORY_SM: case UTF8PROC_CATEGORY_SC: case UTF8PROC_CATEGORY_SK: case UTF8PROC_CATEGORY_SO:
        return len == 3 ? 0x2FF0 : len == 4 ? 0x1D000 : 0;  /* IDEOGRAPHIC DESCRIPTION LEFT TO RIGHT, BYZANTINE MUSICAL SYMBOL */
    case UTF8PROC_CATEGORY_CF:
        return len == 3 ? 0x200B : len == 4 ? 0x1BCA0 : 0;  /* ZERO WIDTH SPACE, SHORTHAND FORMAT LETTER OVERLAP */
    default:
        return 0;
    }
}

static bool add(remap **m, size_t *n, size_t *cap, uint32_t cp, uint32_t rep)
{
    if (!rep) return true;
    if (*n && (*m)[*n - 1].hi + 1 == cp && (*m)[*n - 1].rep == rep) {
        (*m)[*n - 1].hi = cp;
        return true;
    }
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        remap *t = realloc(*m, c * sizeof *t);
        if (!t) return false;
        *m = t;
        *cap = c;
    }
    (*m)[(*n)++] = (remap){cp, cp, rep};
    return true;
}

/* The code points of text that pattern matches, in order (as decoded from the match starts). */
static bool each_match(const char *pattern, const char *text, size_t n, uint32_t *out, size_t *n_out)
{
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    bool ok = md != NULL;
    *n_out = 0;
    /* once per process: the interpreter (valgrind cannot follow PCRE2's JIT code, tok_bpe.c) */
    for (size_t pos = 0; ok && pos < n;) {
        /* the text is ours and valid: the check would read all of it again at every call */
        int m = pcre2_match(re, (PCRE2_SPTR)text, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (m < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + ov[0], (utf8proc_ssize_t)(n - ov[0]), &cp);
        if (k <= 0) break;
        out[(*n_out)++] = (uint32_t)cp;
        pos = ov[0] + (size_t)k;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return ok;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void build(void)
{
    /* every code point utf8proc assigns past ASCII, plus extension I, and U+180E */
    size_t cap = 0;
    for (uint32_t cp = 0x80; cp <= 0x10FFFF; cp++)
        if ((cp < 0xD800 || cp > 0xDFFF) && utf8proc_category((utf8proc_int32_t)cp) != UTF8PROC_CATEGORY_CN) cap++;
    cap += 0x2EE5D - 0x2EBF0 + 1;
    char *text = malloc(cap * 4 + 4);
    uint32_t *hit = malloc((cap + 1) * sizeof *hit);
    remap *m = NULL;
    size_t n = 0, mcap = 0, len = 0, n_hit = 0;
    if (!text || !hit) goto out;
    for (uint32_t cp = 0x80; cp <= 0x10FFFF; cp++)
        if (((cp < 0xD800 || cp > 0xDFFF) && utf8proc_category((utf8proc_int32_t)cp) != UTF8PROC_CATEGORY_CN) ||
            (cp >= 0x2EBF0 && cp <= 0x2EE5D))
            len += put_utf8(cp, text + len);
    if (!each_match("\\p{Cn}", text, len, hit, &n_hit)) goto out;
    size_t n_unassigned = n_hit;
    len = put_utf8(0x180E, text);
    if (!each_match("\\s", text, len, hit + n_unassigned, &n_hit)) goto out;
    n_hit += n_unassigned;
    qsort(hit, n_hit, sizeof *hit, cmp_u32);
    for (size_t i = 0; i < n_hit; i++) {
        const uint32_t cp = hit[i];
        utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
        if (cp >= 0x2EBF0 && cp <= 0x2EE5D && c == UTF8PROC_CATEGORY_CN) c = UTF8PROC_CATEGORY_LO; /* Unicode 15.1 */
        char b[4];
        if (!add(&m, &n, &mcap, cp, representative(c, put_utf8(cp, b)))) { free(m); m = NULL; n = 0; goto out; }
    }
    g_map = m;
    g_n = n;
out:
    free(text);
    free(hit);
}

static uint32_t lookup(uint32_t cp)
{
    size_t lo = 0, hi = g_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < g_map[mid].lo) hi = mid;
        else if (cp > g_map[mid].hi) lo = mid + 1;
        else return g_map[mid].rep;
    }
    return 0;
}

int rlx__ucd_regex_text(const char *text, size_t n, char **out)
{
    pthread_once(&g_once, build);
    *out = NULL;
    if (!g_n) return 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char b = (unsigned char)text[i];
        if (b < 0xE0) continue; /* no code point below U+0800 is remapped */
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) continue;
        uint32_t rep = lookup((uint32_t)cp);
        if (rep) {
            if (!*out) {
                if (!(*out = malloc(n ? n : 1))) return RLX_ENOMEM;
                memcpy(*out, text, n);
            }
            put_utf8(rep, *out + i);
        }
        i += (size_t)k - 1;
    }
    return 0;
}
