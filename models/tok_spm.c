/* tok_spm.c - SentencePiece ("llama") tokenization as llama.cpp's llm_tokenizer_spm does it:
 * spaces become U+2581 (with an optional leading one), the text is split into UTF-8
 * characters, and adjacent symbols are merged greedily by the score of the merged piece
 * (highest first, leftmost on ties). Symbols that are not tokens fall back to <0xXX> bytes. */
#include "models/tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct sym {
    int prev, next; /* neighbours in the live chain, -1 at the ends */
    size_t off, n;  /* bytes in the escaped text; n == 0 once merged away */
} sym;

typedef struct bigram {
    int left, right;
    float score;
    size_t size; /* combined byte length when queued; detects stale entries */
} bigram;

typedef struct heap {
    bigram *v;
    size_t n, cap;
} heap;

/* Higher score first; on ties the leftmost pair. */
static bool before(const bigram *a, const bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(heap *h, bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v) return RLX_ENOMEM;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&b, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
    return 0;
}

static bigram heap_pop(heap *h)
{
    bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

typedef struct spm_ctx {
    const rlx_tokenizer *t;
    const char *s;
    sym *syms;
    heap q;
} spm_ctx;

static int try_bigram(spm_ctx *c, int left, int right)
{
    if (left < 0 || right < 0) return 0;
    size_t n = c->syms[left].n + c->syms[right].n;
    int32_t id = rlx__tok_find(c->t, c->s + c->syms[left].off, n);
    if (id < 0) return 0;
    return heap_push(&c->q, (bigram){left, right, c->t->score[id], n});
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
    spm_ctx c = {t, s, malloc((m ? m : 1) * sizeof(sym)), {0}};
    int rc = c.syms ? 0 : RLX_ENOMEM;
    int ns = 0;
    for (size_t off = 0; !rc && off < m;) {
        size_t len = rlx__utf8_valid_len(s + off, m - off); /* same as llama.cpp on valid UTF-8 */
        c.syms[ns] = (sym){ns - 1, off + len == m ? -1 : ns + 1, off, len};
        off += len;
        ns++;
    }
    for (int i = 1; i < ns && !rc; i++) rc = try_bigram(&c, i - 1, i);
    while (!rc && c.q.n) {
        bigram b = heap_pop(&c.q);
        sym *l = &c.syms[b.left], *r = &c.syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
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
        const sym *y = &c.syms[i];
        int32_t id = rlx__tok_find(t, s + y->off, y->n);
        if (id >= 0) { rc = rlx__ids_push(out, id); continue; }
        for (size_t j = 0; j < y->n && !rc; j++) {
            int32_t b = t->byte_tok[(uint8_t)s[y->off + j]];
            if (b >= 0) rc = rlx__ids_push(out, b);
        }
    }
    free(c.q.v);
    free(c.syms);
    free(s);
    return rc;
}
