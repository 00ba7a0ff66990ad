/* kernels.h - SIMD matmul kernels of the CPU backend and the run-time choice between them.
 *
 * Each path implements rlx_matmul_rows (see backends/quant.h) for the types it accelerates and
 * falls back to the scalar reference for the rest. Integer block sums are exact on every path;
 * paths differ from the scalar code only by float reassociation (vector lanes accumulate across
 * blocks), see tests/unit/test_quant_simd.c for the bound. Within a path, results are bitwise
 * independent of T and of the row range (batch invariance). Nothing here allocates. */
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

/* True when a SIMD path is in use (then rlx_quantize_act hands Q8_0/Q8_K activations to the
 * AVX2 quantizers below, which give the scalar code's bytes). */
bool rlx__cpu_simd(void);
void rlx__avx2_quant_q8_0(const float *x, rlx_block_q8_0 *y, int64_t nb);
void rlx__avx2_quant_q8_k(const float *x, rlx_block_q8_k *y, int64_t nb, bool batched);

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
