/* fuzz_tokenizer.c - libFuzzer target for a tokenizer (models/tokenizer.h) loaded from the GGUF
 * named by $RLX_FUZZ_MODEL (SPM: stories260K, BPE: a qwen2 vocabulary, WPM: a bert one; see
 * run_fuzzer.sh). The first input byte holds the flags, the rest is text: tokenized (with and
 * without special tokens), detokenized whole and as a stream, and the input read once more as
 * token ids, each converted to bytes. Every id returned must be in the vocabulary and the
 * stream's output valid UTF-8. */
#include "models/tokenizer.h"
#include "proto/proto.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rlx_gguf *g_gguf;
static rlx_tokenizer *g_tok;
static int32_t g_nv;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *path = getenv("RLX_FUZZ_MODEL");
    rlx_error err = {0};
    if (!path || rlx_gguf_open(&g_gguf, path, &err) || rlx_tokenizer_from_gguf(&g_tok, g_gguf, &err)) {
        fprintf(stderr, "fuzz_tokenizer: set RLX_FUZZ_MODEL to a GGUF with a vocabulary (%s)\n", err.msg);
        exit(2);
    }
    g_nv = rlx_tokenizer_n_vocab(g_tok);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    bool add_special = data[0] & 1, parse_special = data[0] & 2, special = data[0] & 4;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int32_t *ids = NULL;
    size_t n = 0;
    rlx_error err = {0};
    if (rlx_tokenize(g_tok, text, len, add_special, parse_special, &ids, &n, &err) == 0) {
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= g_nv) abort();
        char *back = rlx_detokenize(g_tok, ids, n, special);
        if (!back) abort();
        free(back);
        /* the streaming detokenizer: valid UTF-8 whatever the pieces */
        rlx_detok_stream st;
        memset(&st, 0, sizeof st);
        char buf[1024];
        for (size_t i = 0; i < n; i++) {
            size_t k = rlx_detok_push(g_tok, &st, ids[i], special, buf, sizeof buf);
            if (k > sizeof buf || !rlx_api_utf8_valid(buf, k)) abort();
        }
        size_t k = rlx_detok_flush(&st, buf, sizeof buf);
        if (k > sizeof buf || !rlx_api_utf8_valid(buf, k)) abort();
    } else if (!err.msg[0]) {
        abort();
    }
    free(ids);
    /* the bytes as ids (any in the vocabulary) */
    rlx_detok_stream st;
    memset(&st, 0, sizeof st);
    for (size_t i = 0; i + 2 <= len; i += 2) {
        int32_t id = (int32_t)(((uint8_t)text[i] | (uint8_t)text[i + 1] << 8) % (uint32_t)g_nv);
        char piece[1024];
        size_t k = rlx_token_to_bytes(g_tok, id, special, piece, sizeof piece);
        if (k > sizeof piece) k = sizeof piece;
        k = rlx_detok_push(g_tok, &st, id, special, piece, sizeof piece);
        if (k > sizeof piece || !rlx_api_utf8_valid(piece, k)) abort();
        if (!rlx_tokenizer_piece(g_tok, id)) abort();
    }
    return 0;
}
