/* test_tokenizer_vocab.h - helpers shared by the tokenizer tests: open a reference vocabulary
 * from ../shared/vocab and read its test vectors (entries separated by
 * "\n__ggml_vocab_test__\n"; the .out has one line of space-separated ids per entry). */
#ifndef RLX_TEST_TOKENIZER_VOCAB_H
#define RLX_TEST_TOKENIZER_VOCAB_H

#include "tests/rlx_test.h"
#include "models/tokenizer.h"
#include "server/cli.h"

typedef struct tv_vocab {
    rlx_gguf *g;
    rlx_tokenizer *t;
} tv_vocab;

/* 0 ok, 77 absent (skip), 1 error (message printed). */
static inline int tv_open(tv_vocab *v, const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", name);
    const char *path = rlx_test_shared(rel);
    v->g = NULL;
    v->t = NULL;
    if (!path) return 77;
    rlx_error err = {0};
    if (rlx_gguf_open(&v->g, path, &err) || rlx_tokenizer_from_gguf(&v->t, v->g, &err)) {
        fprintf(stderr, "  %s: %s\n", name, err.msg);
        return 1;
    }
    return 0;
}

static inline void tv_close(tv_vocab *v)
{
    rlx_tokenizer_free(v->t);
    if (v->g) rlx_gguf_close(v->g);
    v->t = NULL;
    v->g = NULL;
}

typedef struct tv_case {
    const char *text;
    size_t len;
    int32_t ids[512];
    size_t n_ids;
} tv_case;

typedef struct tv_set {
    char *inp, *out;
    tv_case *c;
    size_t n;
} tv_set;

static inline void tv_set_free(tv_set *s)
{
    free(s->inp);
    free(s->out);
    free(s->c);
}

/* Reads <vectors>.gguf.inp/.out; 0 ok, 77 absent, 1 malformed. */
static inline int tv_read(tv_set *s, const char *vectors)
{
    char rel[256];
    memset(s, 0, sizeof *s);
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.inp", vectors);
    const char *pi = rlx_test_shared(rel);
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.out", vectors);
    const char *po = rlx_test_shared(rel);
    if (!pi || !po) return 77;
    size_t ni = 0, no = 0;
    s->inp = rlx_read_file(pi, &ni);
    s->out = rlx_read_file(po, &no);
    if (!s->inp || !s->out) return 1;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t cap = 16;
    s->c = calloc(cap, sizeof *s->c);
    char *p = s->inp, *end = s->inp + ni;
    while (p < end) {
        char *q = memmem(p, (size_t)(end - p), sep, sizeof sep - 1);
        if (!q) break; /* every entry, the last included, ends with the separator */
        if (s->n == cap) { cap *= 2; s->c = realloc(s->c, cap * sizeof *s->c); }
        s->c[s->n].text = p;
        s->c[s->n].len = (size_t)(q - p);
        *q = 0;
        s->n++;
        p = q + sizeof sep - 1;
    }
    char *line = s->out;
    for (size_t i = 0; i < s->n; i++) {
        char *nl = strchr(line, '\n');
        if (!nl) return 1;
        *nl = 0;
        char *tok = line, *e;
        s->c[i].n_ids = 0;
        for (;;) {
            long v = strtol(tok, &e, 10);
            if (e == tok) break;
            if (s->c[i].n_ids < RLX_ARRAY_LEN(s->c[i].ids)) s->c[i].ids[s->c[i].n_ids++] = (int32_t)v;
            tok = e;
        }
        line = nl + 1;
    }
    return 0;
}

#endif
