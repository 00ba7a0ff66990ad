/* tok_wpm.c - WordPiece ("bert"), as llama.cpp's llm_tokenizer_wpm_session does it. Each code
 * point is normalised on its own (with strip_accents: replaced by the first code point of its
 * NFD, and dropped if it is a mark \p{M}; lowercased with lowercase), control characters are
 * dropped (unassigned code points are kept), whitespace splits words, and punctuation, ASCII
 * symbols and CJK ideographs are words of their own. Each word is cut greedily into the
 * longest vocabulary pieces. The GGUF stores word-initial pieces with a leading U+2581 and
 * continuation pieces bare (the converter rewrote "##x" to "x"). */
#include "models/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>


/* the White_Space property (llama.cpp's unicode_set_whitespace) */
static bool is_ws(int32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || c == ' ' || c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
           c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* \p{C} without Cn: llama.cpp's flags know only assigned code points */
static bool is_control(int32_t c)
{
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CS:
        return true;
    default:
        return false;
    }
}

static bool is_mark(int32_t c)
{
    int cat = utf8proc_category(c);
    return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
}

static bool is_punct(int32_t c)
{
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
    int cat = utf8proc_category(c);
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

/* HF's (and llama.cpp's) CJK ranges, with their 0x2B920 where Unicode has 0x2B820 */
static bool is_cjk(int32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

int rlx__wpm_init(rlx_tokenizer *t, const rlx_gguf *g, rlx_error *err)
{
    /* BertNormalizer options: lowercase defaults to true, strip_accents to lowercase */
    t->wpm_lowercase = true;
    int rc = rlx_gguf_get_bool(g, "tokenizer.ggml.normalizer.lowercase", &t->wpm_lowercase, err);
    if (rc && rc != RLX_ENOTFOUND) return rc;
    t->wpm_strip_accents = t->wpm_lowercase;
    rc = rlx_gguf_get_bool(g, "tokenizer.ggml.normalizer.strip_accents", &t->wpm_strip_accents, err);
    return rc == RLX_ENOTFOUND ? 0 : rc;
}

typedef struct word {
    char *b;       /* "\xe2\x96\x81" + the word's UTF-8 */
    size_t n, cap;
} word;

static int word_put(word *w, int32_t c)
{
    if (w->n + 4 > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        char *b = realloc(w->b, cap);
        if (!b) return RLX_ENOMEM;
        w->b = b;
        w->cap = cap;
    }
    if (w->n == 0) { memcpy(w->b, "\xe2\x96\x81", 3); w->n = 3; }
    w->n += (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)w->b + w->n);
    return 0;
}

/* Greedy longest-prefix pieces; a word with any unmatched position is [UNK] as a whole. A word
 * of any length is cut (llama.cpp has no cap; HF's BertTokenizer makes words over 100 chars [UNK]). */
static int word_flush(const rlx_tokenizer *t, word *w, rlx__ids *out)
{
    if (w->n == 0) return 0;
    size_t start = out->n, n = w->n;
    int rc = 0;
    bool ok = true;
    for (size_t i = 0; i < n && ok && !rc;) {
        size_t j = RLX_MIN(n, i + t->max_token_len);
        int32_t id = -1;
        for (; j > i; j--)
            if ((id = rlx__tok_find(t, w->b + i, j - i)) >= 0) break;
        if (id < 0) { ok = false; break; }
        rc = rlx__ids_push(out, id);
        i = j;
    }
    if (!rc && !ok) {
        out->n = start;
        if (t->unk >= 0) rc = rlx__ids_push(out, t->unk);
    }
    w->n = 0;
    return rc;
}

int rlx__wpm_tokenize(const rlx_tokenizer *t, const char *text, size_t n, rlx__ids *out)
{
    word w = {0};
    int rc = 0;
    for (size_t off = 0; off < n && !rc;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + off, (utf8proc_ssize_t)(n - off), &cp);
        if (k <= 0) { off++; continue; } /* invalid UTF-8 is dropped like U+FFFD */
        off += (size_t)k;
        if (t->wpm_strip_accents) { /* the first code point of its NFD only, as llama.cpp's table has it */
            utf8proc_int32_t dec[8];
            int bc = 0;
            if (utf8proc_decompose_char(cp, dec, 8, UTF8PROC_DECOMPOSE, &bc) >= 1) cp = dec[0];
        }
        if (is_ws(cp)) { rc = word_flush(t, &w, out); continue; }
        if (cp == 0 || cp == 0xFFFD || is_control(cp)) continue;
        if (t->wpm_strip_accents && is_mark(cp)) continue;
        /* punctuation and CJK are judged before lowercasing, as in llama.cpp */
        bool alone = is_punct(cp) || is_cjk(cp);
        int32_t c = t->wpm_lowercase ? utf8proc_tolower(cp) : cp;
        if (alone) {
            rc = word_flush(t, &w, out);
            if (!rc) rc = word_put(&w, c);
            if (!rc) rc = word_flush(t, &w, out);
        } else {
            rc = word_put(&w, c);
        }
    }
    if (!rc) rc = word_flush(t, &w, out);
    free(w.b);
    return rc;
}
