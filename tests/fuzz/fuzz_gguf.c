/* fuzz_gguf.c - libFuzzer target for the GGUF loader (models/gguf.c, opened from memory; and
 * rlx_gguf_extent, the prefix reading of a download) and
 * what reads its metadata: every value and tensor of a file that opens is walked (ASan sees any
 * pointer outside the input), then the tokenizer is built from it and its chat template, if
 * any, parsed, as a model load does. A file that does not open must fail with a negative code
 * and a message. */
#include "models/gguf.h"
#include "models/tokenizer.h"
#include "models/chat_template.h"
#include "backends/dtype.h"
#include "tests/gguf_walk.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exactly sized copy: a read past the end is a heap overflow ASan reports */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    rlx_gguf *g = NULL;
    rlx_error err = {0};
    /* the prefix reading pull uses on a download's start: a result or a clean error, and for a
       file that opens, the end its tensors need (at most its size) */
    uint64_t ext = 0, align = 0;
    int xrc = rlx_gguf_extent(buf, size, &ext, &align, &err);
    if (xrc > 0 || (xrc && !err.msg[0])) abort();
    int rc = rlx_gguf_open_memory(&g, buf, size, "fuzz.gguf", &err);
    if (!rc && (xrc || ext > size)) abort();
    if (rc) {
        if (g || rc >= 0 || !err.msg[0]) abort();
        free(buf);
        return 0;
    }
    uint64_t h = 0;
    if (rlx_test_gguf_walk(g, buf, size, &h)) abort(); /* an opened file must hold together */
    /* the model loader's next steps: the tokenizer and the chat template */
    rlx_tokenizer *tok = NULL;
    if (rlx_tokenizer_from_gguf(&tok, g, &err) == 0) {
        static const char text[] = "Hello world <|im_start|> \xc3\xa9\xf0\x9f\x98\x80 123";
        int32_t *ids = NULL;
        size_t n = 0;
        if (rlx_tokenize(tok, text, sizeof text - 1, true, true, &ids, &n, &err) == 0) {
            char *back = rlx_detokenize(tok, ids, n, true);
            free(back);
        }
        free(ids);
        int32_t nv = rlx_tokenizer_n_vocab(tok);
        char piece[256];
        for (int32_t id = 0; id < nv && id < 64; id++) h += rlx_token_to_bytes(tok, id, true, piece, sizeof piece);
        rlx_tokenizer_free(tok);
    }
    rlx_gguf_str src;
    if (rlx_gguf_get_str(g, "tokenizer.chat_template", &src, NULL) == 0) {
        rlx_chat_template *t = NULL;
        if (rlx_chat_template_parse(&t, src.ptr, src.len, &err) == 0) rlx_chat_template_free(t);
    }
    sink += h;
    rlx_gguf_close(g);
    free(buf);
    return 0;
}
