/* grammar_tokens.c - a tokenizer's vocabulary as the grammar sees it (grammar.h): each token's
 * bytes, end-of-generation and control tokens none (they can never continue a grammar; the end
 * is decided apart). */
#include "engine/grammar.h"
#include "models/tokenizer.h"

#include <stdlib.h>
#include <string.h>

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
