/* cu_kernels.h - the launch wrappers of kernels.cu, callable from C (cuda_backend.c). Every
 * pointer is device memory; every wrapper enqueues on `stream` and returns the cudaError_t of
 * the launch as an int (0 = success). Private to backends/cuda/. */
#ifndef RLX_CU_KERNELS_H
#define RLX_CU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_CU_MAX_CHAIN 8

/* Fused elementwise epilogue: ops in rlx_ew_op order (0 add, 1 mul, 2 silu, 3 gelu, 4 scale,
 * 5 softcap); operand[k] (add/mul) is read at row * stride[k] + col (stride 0: a vector). */
typedef struct rlx_cu_chain {
    int n;
    int op[RLX_CU_MAX_CHAIN];
    float p[RLX_CU_MAX_CHAIN];
    const float *operand[RLX_CU_MAX_CHAIN];
    int64_t stride[RLX_CU_MAX_CHAIN];
} rlx_cu_chain;

/* Layout of the per-run batch words on the device (offsets in int32 words). */
typedef struct rlx_cu_batch {
    const int32_t *words;
    int32_t n_tokens, n_outputs;
    int32_t tok, pos, seq, oidx, tstart;
} rlx_cu_batch;

/* rows of w by the batch's token ids, or by its positions (by_pos: learned positions) */
int rlx_cu_get_rows(void *stream, int type, const void *w, size_t row_bytes, int64_t cols, int64_t n_rows_w,
                    rlx_cu_batch b, int by_pos, float scale, float *y, rlx_cu_chain ch);
/* RMS norm per segment of seg columns (times w when given), or layer norm (layer != 0) */
int rlx_cu_rms_norm(void *stream, const float *x, float *y, int64_t rows, int64_t cols, int64_t seg, float eps,
                    const float *w, int layer, rlx_cu_chain ch);
int rlx_cu_ew(void *stream, const float *x, float *y, int64_t rows, int64_t cols, rlx_cu_chain ch);
/* mode 1 f16, 2 bf16, 3 Q8_0, 4 Q8_K rounding of activations (values written as q * d). */
int rlx_cu_actq(void *stream, int mode, const float *x, float *y, int64_t rows, int64_t K);
/* Y[T][N] = X[T][K] W[N][K]^T with W in `type` rows, a warp per weight row and tile of 8
 * tokens: lanes 0 for one token's rows (each lane a chunk of its own), 1 for tiles of several
 * (the lanes through each chunk together); each token's sums the same in any batch of one kind */
int rlx_cu_matmul(void *stream, int type, const void *w, size_t row_bytes, int64_t K, int64_t N, const float *x,
                  int64_t T, float *y, int64_t ldo, rlx_cu_chain ch, int lanes);
/* Y[T][N] = X[T][K] W[N][K]^T in F32 (then the chain), each output summed in K order whatever
 * T is: batch-invariant rows, for the hidden-state graphs */
int rlx_cu_sgemm(void *stream, const float *x, const float *w, int64_t T, int64_t K, int64_t N, float *y, int64_t ldo,
                 rlx_cu_chain ch);
/* W (N rows of `type`) -> f32 [N][K], for cuBLAS and rlx_cu_sgemm. */
int rlx_cu_dequant(void *stream, int type, const void *w, size_t row_bytes, int64_t K, int64_t N, float *out);
/* table: per token n_rot floats (n_rot/2 cos, then n_rot/2 sin), in the batch words at `tab`. */
int rlx_cu_rope(void *stream, const float *x, float *y, rlx_cu_batch b, int n_heads, int hd, int n_rot, int mode, int32_t tab);
/* The paged KV pool: rows of rb bytes, type 0 f32, 1 f16, 2 Q8_0 (kvc / 32 blocks of an f16
 * scale and 32 int8, quantized as quant.c does). */
int rlx_cu_kv_store(void *stream, const float *k, const float *v, void *kc, void *vc, rlx_cu_batch b, int64_t kvc,
                    int type, int64_t rb, int block_size);
/* Causal attention over the pool, or with nocache bidirectional over the step's F32 K and V rows
 * (kc, vc: rows of rb bytes; every sequence whole and contiguous in the batch) */
int rlx_cu_attention(void *stream, const float *q, float *y, const void *kc, const void *vc, rlx_cu_batch b, int n_head,
                     int group, int hd, int64_t rb, int window, float scale, float softcap, int type, int block_size,
                     int nocache);
int rlx_cu_gather(void *stream, const float *x, float *y, rlx_cu_batch b, int64_t cols);
/* KV snapshot helpers are plain cudaMemcpy; nothing here. */

#ifdef __cplusplus
}
#endif

#endif
