/* fuzz_grammar.c - libFuzzer target for the GBNF compiler and recogniser (engine/grammar.h). The
 * input is a grammar's source; when it compiles, a fixed walk feeds it whole tokens and the
 * trie mask over a small vocabulary (multi-byte pieces, partial and overlong UTF-8, duplicates,
 * a control token and an end token without bytes) must equal the token-by-token check at every
 * step, token references (<[id]>, <text> for "<" piece ">", !<..>) included, except for a token
 * whose own step passes a stack limit (the mask may allow it; taking it is the clean error).
 * Compile errors must carry a message. */
#include "engine/grammar.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const pieces[] = {
    "{", "}", "\"", "a", "ab", "x", "(", ")", " ", "\n", "1", "-", "hi", "hello", "\xc3", "\xa9", "\xc3\xa9",
    "\xc1\xbb", "\xf0\x9f\x98\x80", "\\", "\"a\"", ":", ",", "0", "ey", "H", "", "a",
};
enum { NV = sizeof pieces / sizeof pieces[0], EOG = 26 /* the "" before the last */ };
static rlx_grammar_vocab *g_vocab;
static size_t g_lens[NV];

/* <text>: the piece between the brackets, by its index (the first of duplicates) */
static int32_t lookup(const void *ctx, const char *text, size_t len)
{
    (void)ctx;
    for (int i = 0; i < NV; i++)
        if (g_lens[i] == len - 2 && !memcmp(pieces[i], text + 1, len - 2)) return i;
    return -1;
}

static bool is_eog(const void *ctx, int32_t t)
{
    (void)ctx;
    return t == EOG;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    for (int i = 0; i < NV; i++) g_lens[i] = strlen(pieces[i]);
    g_vocab = rlx_grammar_vocab_new(NV, pieces, g_lens);
    if (!g_vocab || rlx_grammar_vocab_set_eog(g_vocab, is_eog, NULL)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rlx_error err = {0};
    const rlx_grammar_token_ids ids = {.n_vocab = NV, .lookup = lookup, .is_eog = is_eog};
    rlx_grammar *g = rlx_grammar_compile_ids((const char *)data, size, NULL, &ids, &err);
    if (!g) {
        if (!err.msg[0]) abort(); /* every refusal says why */
        return 0;
    }
    rlx_grammar_state *s = rlx_grammar_state_new(g, &err);
    if (!s) {
        if (!err.msg[0]) abort();
        rlx_grammar_free(g);
        return 0;
    }
    /* walk: at each step the mask must equal the per-token checks; take the first allowed token
     * after a pseudo-random offset derived from the input */
    uint8_t mask[NV];
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 16777619u;
    for (int step = 0; step < 24; step++) {
        int64_t n = rlx_grammar_mask(s, g_vocab, mask);
        if (n < 0) break; /* a limit: a clean error */
        for (int t = 0; t < NV; t++) {
            int rc = t == EOG ? RLX_EINVAL : rlx_grammar_token_check(s, t, pieces[t], g_lens[t]);
            /* a token whose step would pass a limit (too many or too deep stacks): the mask, from
               a table of the grammar's position, may still allow it; taking it is then the
               request's clean "too ambiguous" error, never a wrong acceptance */
            if (rc != 0 && rc != RLX_EINVAL && mask[t]) continue;
            if ((mask[t] != 0) != (rc == 0)) abort();
        }
        if (!n) break;
        h = h * 1103515245u + 12345u;
        int t = (int)(h % NV);
        while (!mask[t]) t = (t + 1) % NV;
        int rc = rlx_grammar_accept_token(s, t, pieces[t], g_lens[t]);
        if (rc && rc != RLX_EINVAL) break; /* a limit, as above */
        if (rc) abort(); /* the mask said yes */
        (void)rlx_grammar_can_end(s);
        (void)rlx_grammar_must_end(s);
    }
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
    return 0;
}
