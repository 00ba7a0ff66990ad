/* attn_dec.h - attention's products for one-token (decode) rows with the K and V rows given as
 * row pointers (a head's slices in the cache, contiguous within a block: cpu_ops.h
 * rlx__cpu_kv_at), in llama.cpp's one-row arithmetic (attention.c picks them per path; the
 * scalar path and rows of other kinds take rlx_cpu_float_gemm). Private to backends/cpu/; the
 * functions keep no state and run on the calling thread. */
#ifndef RLX_CPU_ATTN_DEC_H
#define RLX_CPU_ATTN_DEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* V^T.p: nr rows of probabilities p[r] over positions [0, nvalid) (V rows vrow[k], hd values of
 * F16 or F32 each) into y[r][0, hd); hd % 16 == 0. */
typedef void (*rlx_kqv_dec_fn)(const float *const *p, int nr, int64_t nvalid, const uint8_t *const *vrow, bool f16, int hd,
                               float *const *y);
/* Positions ahead of the K.q loop whose K rows it touches toward L1. */
#define RLX_KQ_PREFETCH 16
/* K.q: S[r * sstride + k] for nr query rows q[r * hd ...] (values already rounded to the cache
 * type) and K rows krow[k], k < n; hd % 64 == 0. */
typedef void (*rlx_kq_dec_fn)(const float *q, int nr, int hd, const uint8_t *const *krow, int64_t n, bool f16, float *S,
                              size_t sstride);

#if defined(__x86_64__)
void rlx__kqv_dec512(const float *const *p, int nr, int64_t nvalid, const uint8_t *const *vrow, bool f16, int hd,
                     float *const *y);
void rlx__kqv_dec256(const float *const *p, int nr, int64_t nvalid, const uint8_t *const *vrow, bool f16, int hd,
                     float *const *y);
void rlx__kq_dec512(const float *q, int nr, int hd, const uint8_t *const *krow, int64_t n, bool f16, float *S, size_t sstride);
void rlx__kq_dec256(const float *q, int nr, int hd, const uint8_t *const *krow, int64_t n, bool f16, float *S, size_t sstride);
#endif

#endif
