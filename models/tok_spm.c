/* tok_spm.c - SentencePiece ("llama") tokenization as llama.cpp's llm_tokenizer_spm does it:
 * spaces become U+2581 (with an optional leading one), the text is split into UTF-8
 * characters by their lead bytes, and adjacent symbols are merged greedily by the score of the merged piece
 * (highest first, leftmost on ties). Symbols that are not tokens fall back to <0xXX> bytes. */
#include "models/tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct spm_ctx {
    const rlx_tokenizer *t;
    const char *s;
    rlx__sym *syms;
    rlx__merge_heap q;
} spm_ctx;

static int try_bigram(spm_ctx *c, int left, int right)
{
    if (left < 0 || right < 0) return 0;
    size_t n = c->syms[left].n + c->syms[right].n;
    int32_t id = rlx__tok_find(c->t, c->s + c->syms[left].off, n);
    if (id < 0) return 0;
    return rlx__merge_push(&c->q, (rlx__merge){left, right, c->t->score[id], c->syms[left].n, c->syms[right].n});
}

/* Merges the symbols of s[off, end) (a cut between whole symbols) and appends their ids. */
static int spm_merge(const rlx_tokenizer *t, const char *s, size_t off, size_t end, rlx__ids *out)
{
    size_t m = end - off;
    spm_ctx c = {t, s, malloc((m ? m : 1) * sizeof(rlx__sym)), {0}};
    int rc = c.syms ? 0 : RLX_ENOMEM;
    int ns = 0;
    for (size_t o = off; !rc && o < end;) {
        /* as llama.cpp: the lead byte's length, valid or not ("\xe2ab" is one symbol that then
         * falls back to three bytes), cut at the end of the text */
        size_t len = RLX_MIN(rlx__utf8_len((unsigned char)s[o]), end - o);
        c.syms[ns] = (rlx__sym){ns - 1, o + len == end ? -1 : ns + 1, o, len};
        o += len;
        ns++;
    }
    for (int i = 1; i < ns && !rc; i++) rc = try_bigram(&c, i - 1, i);
    while (!rc && c.q.n) {
        rlx__merge b = rlx__merge_pop(&c.q);
        rlx__sym *l = &c.syms[b.left], *r = &c.syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n != b.ln || r->n != b.rn) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) c.syms[r->next].prev = b.left;
        rc = try_bigram(&c, l->prev, b.left);
        if (!rc) rc = try_bigram(&c, b.left, l->next);
    }
    /* Merges only ever form vocabulary pieces, so a symbol that is not a token is a single
     * character the vocabulary lacks: spell it as bytes. */
    for (int i = ns ? 0 : -1; i >= 0 && !rc; i = c.syms[i].next) {
        const rlx__sym *y = &c.syms[i];
        int32_t id = rlx__tok_find(t, s + y->off, y->n);
        if (id >= 0) { rc = rlx__ids_push(out, id); continue; }
        for (size_t j = 0; j < y->n && !rc; j++) {
            int32_t b = t->byte_tok[(uint8_t)s[y->off + j]];
            if (b >= 0) rc = rlx__ids_push(out, b);
        }
    }
    free(c.q.v);
    free(c.syms);
    return rc;
}

/* Bytes of escaped text merged at once when the output is capped: a cap is noticed after each
 * such chunk, so a huge text costs about the cap's worth of merging. */
#define SPM_CHUNK 4096

/* A cut before s[p] (a symbol start) changes nothing when no vocabulary entry holds the bytes
 * s[p-1] s[p] next to each other: every symbol the merging forms is a vocabulary entry, so none
 * spans the cut, and the merges on either side neither see nor outrank each other (the queue
 * orders pairs by score, then position, which the cut keeps). */
static bool spm_cut_ok(const rlx_tokenizer *t, const char *s, size_t p)
{
    unsigned pair = (unsigned)(uint8_t)s[p - 1] << 8 | (uint8_t)s[p];
    return !(t->pairs[pair >> 6] >> (pair & 63) & 1);
}

int rlx__spm_tokenize(const rlx_tokenizer *t, const char *text, size_t n, bool prefix_space, rlx__ids *out)
{
    /* Escape: ' ' -> U+2581 ("\xe2\x96\x81"), at most 3x the input plus the prefix. */
    char *s = malloc(3 * n + 4);
    if (!s) return RLX_ENOMEM;
    size_t m = 0;
    if (prefix_space) { memcpy(s, "\xe2\x96\x81", 3); m = 3; }
    for (size_t i = 0; i < n; i++) {
        if (text[i] == ' ') { memcpy(s + m, "\xe2\x96\x81", 3); m += 3; }
        else s[m++] = text[i];
    }
    int rc = 0;
    if (!out->max) {
        rc = spm_merge(t, s, 0, m, out);
    } else {
        /* capped: chunks of about SPM_CHUNK bytes, cut only where the result cannot change */
        for (size_t off = 0; !rc && off < m;) {
            size_t p = off;
            while (p < m) {
                p += RLX_MIN(rlx__utf8_len((unsigned char)s[p]), m - p);
                if (p - off >= SPM_CHUNK && p < m && spm_cut_ok(t, s, p)) break;
            }
            rc = spm_merge(t, s, off, p, out);
            off = p;
        }
    }
    free(s);
    return rc;
}
