/* grammar_tokens.c - a tokenizer's vocabulary as the grammar sees it (grammar.h): each token's
 * bytes, end-of-generation and control tokens none (they can never continue a grammar's text;
 * the end is decided apart, a token reference names a control token by id); and the token
 * references of GBNF text (<[id]>, <text>). */
#include "engine/grammar_internal.h"
#include "models/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rlx__grammar_token_ref(const char *s, const char *end, bool negated, const rlx_grammar_token_ids *ids,
                                   uint32_t *id, char *why, size_t why_len)
{
    const char *b = s++; /* past '<' */
    int64_t t = -1;
    if (s < end && *s == '[') {
        const char *d = ++s;
        int64_t x = 0;
        while (s < end && *s >= '0' && *s <= '9' && x <= INT32_MAX) x = x * 10 + (*s++ - '0');
        if (s == d || x > INT32_MAX || s + 1 >= end || s[0] != ']' || s[1] != '>') {
            snprintf(why, why_len, "a token id is written <[digits]>, at most %d", INT32_MAX);
            return NULL;
        }
        s += 2;
        t = x;
    } else {
        while (s < end && *s != '>' && *s != '\n' && *s != '\r') s++;
        if (s >= end || *s != '>') {
            snprintf(why, why_len, "a token reference '<' has no '>' on its line");
            return NULL;
        }
        s++;
        if (!ids || !ids->lookup) {
            snprintf(why, why_len, "the token %.*s: a token given by its text needs the model's vocabulary (or give its id, <[id]>)",
                     (int)RLX_MIN(s - b, 80), b);
            return NULL;
        }
        t = ids->lookup(ids->ctx, b, (size_t)(s - b));
        if (t < 0) {
            snprintf(why, why_len, "%.*s is not one token of the model's vocabulary", (int)RLX_MIN(s - b, 80), b);
            return NULL;
        }
    }
    if (ids && ids->n_vocab > 0 && t >= ids->n_vocab) {
        snprintf(why, why_len, "token %lld is not in the vocabulary (%d tokens)", (long long)t, ids->n_vocab);
        return NULL;
    }
    if (!negated && ids && ids->is_eog && ids->is_eog(ids->ctx, (int32_t)t)) {
        snprintf(why, why_len, "%.*s (token %lld) ends generation: a grammar cannot ask for it (generation may end where the grammar is complete)",
                 (int)RLX_MIN(s - b, 80), b, (long long)t);
        return NULL;
    }
    *id = (uint32_t)t;
    return s;
}

int rlx_grammar_token_bytes(const rlx_tokenizer *tok, int32_t n_vocab, char ***texts_out, size_t **lens_out,
                            rlx_error *err)
{
    char **texts = calloc((size_t)n_vocab, sizeof *texts);
    size_t *lens = calloc((size_t)n_vocab, sizeof *lens);
    if (!texts || !lens) goto oom;
    for (int32_t t = 0; t < n_vocab; t++) {
        char buf[256];
        size_t n = rlx_tokenizer_is_eog(tok, t) ? 0 : rlx_token_to_bytes(tok, t, false, buf, sizeof buf);
        if (!n) continue;
        if (!(texts[t] = malloc(n))) goto oom;
        if (n > sizeof buf) rlx_token_to_bytes(tok, t, false, texts[t], n);
        else memcpy(texts[t], buf, n);
        lens[t] = n;
    }
    *texts_out = texts;
    *lens_out = lens;
    return 0;
oom:
    rlx_grammar_token_bytes_free(texts, lens, n_vocab);
    return rlx_errorf(err, RLX_ENOMEM, "out of memory");
}

void rlx_grammar_token_bytes_free(char **texts, size_t *lens, int32_t n_vocab)
{
    for (int32_t t = 0; texts && t < n_vocab; t++) free(texts[t]);
    free(texts);
    free(lens);
}

/* The one token a text is, special tokens parsed (llama.cpp's <text> rule), else -1. */
static int32_t tokenizer_lookup(const void *ctx, const char *text, size_t len)
{
    int32_t *ids = NULL, id = -1;
    size_t n = 0;
    rlx_error err = {0};
    if (!rlx_tokenize(ctx, text, len, false, true, &ids, &n, &err) && n == 1) id = ids[0];
    free(ids);
    return id;
}

bool rlx_grammar_tokenizer_is_eog(const void *tok, int32_t t) { return rlx_tokenizer_is_eog(tok, t); }

rlx_grammar_token_ids rlx_grammar_tokenizer_ids(const struct rlx_tokenizer *tok, int32_t n_vocab)
{
    return (rlx_grammar_token_ids){.n_vocab = n_vocab, .lookup = tokenizer_lookup, .is_eog = rlx_grammar_tokenizer_is_eog, .ctx = tok};
}
