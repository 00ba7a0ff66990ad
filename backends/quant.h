/* quant.h - block formats of the GGUF tensor types: dequantization, quantization and dot
 * products. Scalar reference code lives in quant.c; SIMD variants (backends/cpu/) must agree
 * with it within the tolerances stated in their tests.
 *
 * Dot products follow llama.cpp's scheme so logits match its reference: the activation row is
 * first converted to the weight type's "vec dot type" (Q8_0 for Q4_0/Q8_0, Q8_K for the
 * K-quants, F32 for F32/F16/BF16) by rlx_quantize_act(), then rlx_vec_dot() combines one weight
 * row with it. The quantized dots repeat the float operations of llama.cpp's x86 kernels in
 * their order (every path here gives the same bits), so quantized models reproduce its
 * logits exactly.
 * All pointers are borrowed; nothing here allocates. n must be a multiple of the block size. */
#ifndef RLX_QUANT_H
#define RLX_QUANT_H

#include "backends/dtype.h"

/* Block layouts (GGUF spec / ggml). Sizes are checked with static asserts in quant.c. */
#define RLX_QK 32     /* elements per block of the legacy formats */
#define RLX_QK_K 256  /* elements per super-block of the K formats */

typedef struct { uint16_t d; uint8_t qs[RLX_QK / 2]; } rlx_block_q4_0;                 /* 18 B */
typedef struct { uint16_t d; int8_t qs[RLX_QK]; } rlx_block_q8_0;                      /* 34 B */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[RLX_QK_K / 2]; } rlx_block_q4_k; /* 144 B */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[RLX_QK_K / 8]; uint8_t qs[RLX_QK_K / 2]; } rlx_block_q5_k; /* 176 B */
typedef struct { uint8_t ql[RLX_QK_K / 2]; uint8_t qh[RLX_QK_K / 4]; int8_t scales[RLX_QK_K / 16]; uint16_t d; } rlx_block_q6_k; /* 210 B */
typedef struct { float d; int8_t qs[RLX_QK_K]; int16_t bsums[RLX_QK_K / 16]; } rlx_block_q8_k; /* 292 B */

/* Converts n elements of a row of `type` to f32. Returns RLX_EUNSUPPORTED for types without
 * a dequantizer. */
int rlx_dequantize_row(int type, const void *src, float *dst, int64_t n);

/* Quantizes n f32 values into `type` (reference quantizers; used by rlxd-synth and tests).
 * Supports F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q8_K. */
int rlx_quantize_row(int type, const float *src, void *dst, int64_t n);

/* Converts n activations to Q8_0 or Q8_K the way llama.cpp's x86 CPU backend does before its
 * dot products (Q8_0: scale amax/127, values times 127/amax rounded to nearest even; Q8_K:
 * ggml's reference). Not the weight quantizer: rlx_quantize_row(Q8_0) is llama-quantize's,
 * which rounds half away from zero. RLX_EINVAL for other types or a partial block. */
int rlx_quantize_act(int type, const float *src, void *dst, int64_t n);

/* The type activations are converted to before rlx_vec_dot with a weight of `type`. */
int rlx_vec_dot_type(int type);

/* dot(weight row of `type`, activation row already converted to rlx_vec_dot_type(type)). */
float rlx_vec_dot(int type, const void *w, const void *act, int64_t n);

/* The product used by matrix multiplications: for every activation row t in [0, T) and weight
 * row n in [n0, n1):  out[t * ldo + n] = rlx_vec_dot(type, W row n, act row t).
 * `act` holds T rows already converted to rlx_vec_dot_type(type), act_row_bytes apart; W rows
 * are rlx_row_bytes(type, K) apart. Implementations tile over t so each weight byte is read
 * once per call, and keep the per-element reduction order independent of T and of [n0, n1)
 * (batch invariance: a row's result never depends on what else is in the batch). This is
 * llama.cpp's one-row (decode) arithmetic; rlx_matmul_rows_batched below its batched one.
 * Dispatches to the best SIMD path of this CPU (see rlx_cpu_path). */
void rlx_matmul_rows(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                     size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);

/* The arithmetic of llama.cpp's batched CPU kernels for rows of a multi-row product, where it
 * differs from the one-row (decode) arithmetic of rlx_quantize_act / rlx_matmul_rows:
 *  - Q4_K (llama.cpp repacks weights of 8 | N rows): its gemm takes rows four at a time and
 *    folds every 64 values into the float sums where its gemv folds every 256; its 4-row Q8_K
 *    quantizer takes the positive sign when a block's largest magnitude has both signs;
 *  - F32/F16/BF16 (when llamafile's tinyBLAS takes the shape): one 16-lane accumulator instead
 *    of ggml_vec_dot's four (BF16: vdpbf16ps chains). Every path computes both exactly.
 * rlx_batched_rows(type, N, K) tells which rows get it for an N x K weight: 0 none, 1 every row
 * of a multi-row product, 4 those in llama.cpp's groups of four (the first c - c % 4 of the c
 * rows of a prompt). The CPU backend decides per row from the row's kind (rlx_batch.decode:
 * a generated token, a prompt token, or one of a prompt's last c % 4), which depends only on the
 * request, so results stay batch invariant. Activations for rlx_matmul_rows_batched come from
 * rlx_quantize_act_batched. Every other case gives the same bits either way. */
int rlx_batched_rows(int type, int64_t N, int64_t K);
int rlx_quantize_act_batched(int type, const float *src, void *dst, int64_t n);
void rlx_matmul_rows_batched(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                             size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);

/* Kernel path in use: "scalar", "avx2", "avx512", ...; chosen from CPUID at first use, or forced
 * with the environment variable RLX_CPU_PATH (tests use it to exercise every path). */
const char *rlx_cpu_path(void);

#endif
