/* tok_detok.c - ids -> text: one token's bytes (byte fallback and the GPT-2 byte mapping
 * undone, U+2581 -> space), whole sequences, and a UTF-8-safe stream that holds back the bytes
 * of an unfinished code point and replaces invalid sequences with U+FFFD. */
#include "models/tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct sink {
    char *buf;
    size_t cap, n; /* n counts every byte, written or not */
} sink;

static void put(sink *s, const char *p, size_t n)
{
    if (s->n < s->cap) memcpy(s->buf + s->n, p, RLX_MIN(n, s->cap - s->n));
    s->n += n;
}

size_t rlx_token_to_bytes(const rlx_tokenizer *t, int32_t id, bool special, char *buf, size_t cap)
{
    sink s = {buf, cap, 0};
    if (id < 0 || id >= t->n_vocab) return 0;
    uint16_t a = t->attr[id];
    const char *p = t->text[id];
    size_t n = t->len[id];
    if (!special && (a & RLX_ATTR_CONTROL)) return 0;
    if (a & (RLX_ATTR_CONTROL | RLX_ATTR_UNKNOWN | RLX_ATTR_USER_DEFINED)) {
        put(&s, p, n);
        return s.n;
    }
    if (t->kind == RLX_TOK_BPE && !t->bpe_raw) { /* SentencePiece-style BPE decodes as SentencePiece below */
        if (!(a & RLX_ATTR_NORMAL)) return 0;
        for (size_t i = 0; i < n;) {
            size_t k = RLX_MIN(rlx__utf8_len((unsigned char)p[i]), n - i);
            uint32_t cp = (unsigned char)p[i];
            if (k == 2) cp = ((cp & 0x1F) << 6) | ((unsigned char)p[i + 1] & 0x3F);
            int b = k <= 2 ? rlx__bpe_cp_to_byte(cp) : -1;
            if (b >= 0) { char c = (char)b; put(&s, &c, 1); }
            else put(&s, p + i, k); /* not a mapped byte: keep the character itself */
            i += k;
        }
        return s.n;
    }
    if (a & RLX_ATTR_BYTE) {
        int hi = n == 6 ? rlx_hex_value(p[3]) : -1, lo = n == 6 ? rlx_hex_value(p[4]) : -1;
        char c = hi >= 0 && lo >= 0 ? (char)(hi * 16 + lo) : p[0];
        put(&s, &c, 1);
        return s.n;
    }
    if (!(a & RLX_ATTR_NORMAL)) return 0; /* unused / undefined */
    for (size_t i = 0; i < n;) {
        if (n - i >= 3 && memcmp(p + i, "\xe2\x96\x81", 3) == 0) { put(&s, " ", 1); i += 3; }
        else { put(&s, p + i, 1); i++; }
    }
    return s.n;
}

char *rlx_detokenize(const rlx_tokenizer *t, const int32_t *ids, size_t n, bool special)
{
    return rlx_detokenize_n(t, ids, n, special, true, NULL);
}

char *rlx_detokenize_n(const rlx_tokenizer *t, const int32_t *ids, size_t n, bool special, bool strip_prefix,
                       size_t *out_len)
{
    size_t cap = 256, len = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    /* SentencePiece and WordPiece texts gained a leading space when tokenized: drop it. */
    bool strip = strip_prefix && (t->kind == RLX_TOK_WPM || (t->kind == RLX_TOK_SPM && t->add_space_prefix));
    for (size_t i = 0; i < n; i++) {
        size_t k;
        for (;;) {
            k = rlx_token_to_bytes(t, ids[i], special, out + len, cap - len - 1);
            if (len + k + 1 <= cap) break;
            size_t nc = RLX_MAX(cap * 2, len + k + 1);
            char *no = realloc(out, nc);
            if (!no) { free(out); return NULL; }
            out = no;
            cap = nc;
        }
        if (strip && k > 0) {
            strip = false;
            if (out[len] == ' ') { memmove(out + len, out + len + 1, k - 1); k--; }
        }
        len += k;
    }
    out[len] = 0;
    if (out_len) *out_len = len;
    return out;
}

/* ---- streaming ------------------------------------------------------------------------- */

/* Length of a UTF-8 sequence from its lead byte, 0 for bytes that cannot start one. */
static int seq_len(unsigned char c)
{
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* Whether byte k (1-based position after the lead) may follow in a valid sequence. */
static bool cont_ok(unsigned char lead, int k, unsigned char c)
{
    if (k == 1) {
        if (lead == 0xE0) return c >= 0xA0 && c <= 0xBF; /* no overlongs */
        if (lead == 0xED) return c >= 0x80 && c <= 0x9F; /* no surrogates */
        if (lead == 0xF0) return c >= 0x90 && c <= 0xBF;
        if (lead == 0xF4) return c >= 0x80 && c <= 0x8F; /* <= U+10FFFF */
    }
    return c >= 0x80 && c <= 0xBF;
}

static const char k_repl[3] = {'\xef', '\xbf', '\xbd'};

/* Emits the complete, valid part of b[0..n); keeps an unfinished tail in s->pending. */
static size_t emit_valid(rlx_detok_stream *s, const unsigned char *b, size_t n, char *out, size_t cap)
{
    size_t w = 0;
#define EMIT(p, len) do { size_t l_ = (len); if (w + l_ <= cap) { memcpy(out + w, (p), l_); w += l_; } } while (0)
    s->n_pending = 0;
    for (size_t i = 0; i < n;) {
        int L = seq_len(b[i]);
        if (L == 0) { EMIT(k_repl, 3); i++; continue; }
        int k = 1;
        while (k < L && i + k < n && cont_ok(b[i], k, b[i + k])) k++;
        if (k == L) { EMIT(b + i, (size_t)L); i += (size_t)L; continue; }
        if (i + k == n) { /* unfinished but valid so far: wait for more */
            memcpy(s->pending, b + i, (size_t)k);
            s->n_pending = k;
            break;
        }
        EMIT(k_repl, 3); /* broken sequence: one replacement, resume at the offending byte */
        i += (size_t)k;
    }
#undef EMIT
    return w;
}

size_t rlx_detok_push(const rlx_tokenizer *t, rlx_detok_stream *s, int32_t id, bool special,
                      char *out, size_t cap)
{
    char small[256];
    size_t np = (size_t)s->n_pending;
    size_t k = rlx_token_to_bytes(t, id, special, small + np, sizeof small - np);
    char *b = small;
    if (np + k > sizeof small) {
        b = malloc(np + k);
        if (!b) return 0;
        rlx_token_to_bytes(t, id, special, b + np, k);
    }
    memcpy(b, s->pending, np);
    size_t w = emit_valid(s, (const unsigned char *)b, np + k, out, cap);
    if (b != small) free(b);
    return w;
}

size_t rlx_detok_flush(rlx_detok_stream *s, char *out, size_t cap)
{
    if (s->n_pending == 0) return 0;
    s->n_pending = 0;
    if (cap < 3) return 0;
    memcpy(out, k_repl, 3);
    return 3;
}
