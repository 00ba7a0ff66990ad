/* kernels.h - SIMD matmul kernels of the CPU backend and the run-time choice between them.
 *
 * Each path implements rlx_matmul_rows and rlx_matmul_rows_batched (see backends/quant.h) for
 * the types it accelerates and falls back to the scalar reference for the rest. Every path
 * computes the scalar references' numbers bit for bit (llama.cpp's arithmetic; see
 * tests/unit/test_quant_simd.c), independent of T and of the row range (batch invariance).
 * Nothing here allocates. */
#ifndef RLX_CPU_KERNELS_H
#define RLX_CPU_KERNELS_H

#include "backends/quant.h"

typedef void (*rlx_matmul_rows_fn)(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                                   size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);

/* Forces a kernel path by name ("scalar", "avx2", "avx512"; tests also reach "avx2-novnni" and
 * "avx512-novnni", the kernels without VNNI, which a VNNI CPU never picks); later
 * rlx_matmul_rows calls use it.
 * Returns RLX_EUNSUPPORTED (and changes nothing) if this CPU or build lacks it, RLX_EINVAL for
 * an unknown name. Meant for tests and benchmarks; not thread-safe against running products. */
int rlx_cpu_force_path(const char *name);

/* True if this CPU can run the named path. */
bool rlx_cpu_has_path(const char *name);

/* True if the avx512 path uses VNNI (vpdpbusd/vpdpwssd) on this CPU. */
bool rlx_cpu_has_vnni(void);
/* True if the avx2 path uses AVX-VNNI on this CPU. */
bool rlx_cpu_has_avxvnni(void);
/* True if the float kernels of the current path run AVX512-BF16's vdpbf16ps for BF16 weights
 * (the "avx512" path on CPUs that have it; the other paths compute its numbers without it). */
bool rlx__cpu_bf16dp(void);

/* True when a SIMD path is in use (then rlx_quantize_act hands Q8_0/Q8_K activations to the
 * AVX2 quantizers below, which give the scalar code's bytes). */
bool rlx__cpu_simd(void);
/* The current path's vector width in bits: 512 (the avx512 paths), 256 (the avx2 paths) or 0
 * (scalar); what the elementwise kernels dispatch on, without comparing names per call. */
int rlx__cpu_width(void);
void rlx__avx2_quant_q8_0(const float *x, rlx_block_q8_0 *y, int64_t nb);
void rlx__avx2_quant_q8_k(const float *x, rlx_block_q8_k *y, int64_t nb, bool batched);

/* F32/F16/BF16 weight rows `wrow` bytes apart (not necessarily packed) times f32 activation
 * rows `astr` floats apart: out[t * ldo + n] for n in [n0, n1), t < T, with the arithmetic of
 * rlx_matmul_rows for rows with decode[t] != 0 and of rlx_matmul_rows_batched for the others
 * (decode NULL: all batched). Attention's products use it. */
void rlx_cpu_float_gemm(int type, const void *w, size_t wrow, int64_t n0, int64_t n1, const float *act, size_t astr,
                        int64_t T, int64_t K, float *out, int64_t ldo, const uint8_t *decode);
typedef void (*rlx_float_gemm_fn)(int type, const void *w, size_t wrow, int64_t n0, int64_t n1, const float *act,
                                  size_t astr, int64_t T, int64_t K, float *out, int64_t ldo, const uint8_t *decode);

void rlx__avx2_float_gemm(int type, const void *w, size_t wrow, int64_t n0, int64_t n1, const float *act, size_t astr,
                          int64_t T, int64_t K, float *out, int64_t ldo, const uint8_t *decode);
void rlx__avx2vnni_float_gemm(int type, const void *w, size_t wrow, int64_t n0, int64_t n1, const float *act, size_t astr,
                              int64_t T, int64_t K, float *out, int64_t ldo, const uint8_t *decode);
void rlx__avx512_float_gemm(int type, const void *w, size_t wrow, int64_t n0, int64_t n1, const float *act, size_t astr,
                            int64_t T, int64_t K, float *out, int64_t ldo, const uint8_t *decode);
void rlx__avx512vnni_float_gemm(int type, const void *w, size_t wrow, int64_t n0, int64_t n1, const float *act, size_t astr,
                                int64_t T, int64_t K, float *out, int64_t ldo, const uint8_t *decode);
/* The weight rows of the current path's batched F32/F16 product tile (avx2: 3, avx512: 4,
 * scalar: 1): k_matmul keeps its claims of rows whole tiles (a claim's rows that fill no tile
 * take a slower one). From the paths' own constants: */
int rlx__cpu_float_tile_rows(void);
extern const int rlx__avx2_float_tile_rows, rlx__avx2vnni_float_tile_rows, rlx__avx512_float_tile_rows,
    rlx__avx512vnni_float_tile_rows;
/* Path entry points (x86-64 only), and their rlx_matmul_rows_batched. */
void rlx__avx2_matmul_rows_batched(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                                   size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);
void rlx__avx2vnni_matmul_rows_batched(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                                       size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);
void rlx__avx512_matmul_rows_batched(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                                     size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);
void rlx__avx512vnni_matmul_rows_batched(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                                         size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);
void rlx__avx2_matmul_rows(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                           size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);
void rlx__avx2vnni_matmul_rows(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                               size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);
void rlx__avx512_matmul_rows(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                             size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);
void rlx__avx512vnni_matmul_rows(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                                 size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);

#endif
