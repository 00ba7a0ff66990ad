/* pool.h - what an embedding request does with an encoder's hidden states: pooling per
 * sequence (llama.cpp's pooling types) and normalization of the pooled vector (llama-server's
 * `embd_normalize`). Pure functions on caller memory; any thread. */
#ifndef RLX_POOL_H
#define RLX_POOL_H

#include "backends/rlx.h"

/* The values are GGUF's `{arch}.pooling_type` (llama.cpp's LLAMA_POOLING_TYPE_*). */
typedef enum rlx_pooling {
    RLX_POOL_NONE = 0,     /* one vector per token */
    RLX_POOL_MEAN = 1,     /* the average of every token's row ([CLS] and [SEP] included) */
    RLX_POOL_CLS = 2,      /* the first token's row */
    RLX_POOL_LAST = 3,     /* the last token's row */
    RLX_POOL_RANK = 4,     /* the first row through the classifier head: a relevance score */
} rlx_pooling;

/* From GGUF's integer; RLX_EUNSUPPORTED naming the value when it is none of the above. */
int rlx_pooling_from_gguf(int64_t v, rlx_pooling *out, rlx_error *err);
/* "none", "mean", "cls", "last", "rank". */
const char *rlx_pooling_name(rlx_pooling p);
/* The inverse of rlx_pooling_name; RLX_EINVAL naming the accepted values otherwise. */
int rlx_pooling_parse(const char *name, rlx_pooling *out, rlx_error *err);

/* Pools one sequence's rows (n_tokens x n_embd, row-major) into out (n_embd) for MEAN, CLS and
 * LAST (RANK's head and NONE are not a pooling of rows: RLX_EINVAL). The mean sums in double
 * in token order and divides once, so a sequence's vector never depends on its neighbours in
 * a batch. RLX_EINVAL for n_tokens < 1. */
int rlx_pool_rows(rlx_pooling p, const float *rows, int32_t n_tokens, int64_t n_embd, float *out);

/* llama-server's normalizations (`embd_normalize`): -1 none, 0 max-absolute scaled to the
 * int16 range (32760), 1 taxicab, 2 Euclidean (the default), p > 2 the p-norm. As llama.cpp's
 * common_embd_normalize: the norm in double (Euclidean: squares in double too, which gives the
 * goldens' embedding_l2 bit for bit), then each value times (float)(1/norm); a zero vector
 * stays zero. in and out may be the same array. RLX_EINVAL for p < -1. */
int rlx_embd_normalize(const float *in, float *out, int64_t n, int norm);

#endif
