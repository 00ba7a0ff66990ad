/* repack.h - load-time repacking of quantized weights into the layout the host's kernels read
 * fastest, as llama.cpp's "repack" buffers do. The CPU backend (cpu_backend.c, prepare) makes
 * a repacked copy of a matmul weight when the kernel path in use has a kernel for the packed
 * layout (rlx__cpu_packed_fn) and the weight is read by matmuls only; the copy belongs to the
 * backend and is freed with it. The packed kernels compute the numbers of rlx_matmul_rows /
 * rlx_matmul_rows_batched on the GGUF layout bit for bit (tests/unit/test_quant_simd.c).
 * Everything here runs on the thread that calls it; nothing keeps state. */
#ifndef RLX_CPU_REPACK_H
#define RLX_CPU_REPACK_H

#include "backends/graph.h"
#include "backends/quant.h"

#include <stdbool.h>

/* Q4_K (every SIMD path: one-thread products 2.1x the GGUF layout's at one activation row,
 * 1.0-2.1x at more; bench/RESULTS.md section 41), eight weight rows per super-block position (rows 8q..8q+7, super-block i): the
 * integer work of the eight rows shares every activation load and every instruction (each
 * 32-bit lane of a vector is one row), and the 6-bit scales and mins are laid out so that a
 * handful of vector operations unpack all 128 of them. Same size as the eight blocks.
 *  - d, dmin: the rows' f16 super-block scales, row order.
 *  - lo[e] low nibble: bits 0-3 of the scale of entry e, e = 32 (j / 4) + 16 (r / 4) +
 *    4 (j % 4) + r % 4 for row r, sub-block j (so a byte shuffle picks sub-block j's eight scales
 *    as 16-bit pairs, one per row lane); high nibble: bits 0-3 of the min of entry
 *    e' = 16 (j / 2) + 2 r + j % 2 (a sub-block pair's mins side by side per row).
 *  - hi[b]: bits 4-5 of the scales of entries b and b + 32 (bits 0-1, 2-3) and of the mins of
 *    entries b and b + 32 (bits 4-5, 6-7).
 *  - qs: [64-value chunk k][4-byte group g][row r]: bytes 32 k + 4 g .. + 3 of row r's qs (low
 *    nibbles: values 64 k + 4 g .. of sub-block 2 k; high nibbles: of sub-block 2 k + 1). */
typedef struct rlx_block_q4_k_x8 {
    uint16_t d[8], dmin[8];
    uint8_t lo[64];
    uint8_t hi[32];
    uint8_t qs[4 * RLX_QK_K];
} rlx_block_q4_k_x8; /* 1152 B = 8 x rlx_block_q4_k */

/* Q8_0: groups of R rows block by block, R the current path's Q8_0 tile height (avx2: 2,
 * avx512: 4; rlx__repack_rows): block i of row R q + r is block (q nb + i) R + r of the copy, so
 * a tile of R rows reads one contiguous stream instead of R streams a row apart. The blocks
 * themselves are unchanged (same size, same arithmetic). */

/* The rows of one packed group of `type` on the current path (Q4_K: 8; Q8_0: its tile height);
 * 0 when that type has no packed layout there. */
int rlx__repack_rows(int type);
/* Bytes of the packed copy of an N x K weight of `type`; 0 when it has no packed layout (type,
 * or N not a multiple of the group's rows, or K not of the block size). The layout is the
 * current path's: pack, unpack and read it under one path. */
size_t rlx__repack_bytes(int type, int64_t N, int64_t K);
/* Writes the packed copy of the N x K weight `src` (GGUF layout) to dst (rlx__repack_bytes). */
void rlx__repack(int type, const void *src, int64_t N, int64_t K, void *dst);
/* Unpacks weight row n of a packed copy back to the GGUF layout (tests). */
void rlx__unpack_row(int type, const void *packed, int64_t n, int64_t K, void *dst);

/* A kernel over a packed copy: rlx_matmul_rows (batched false) or rlx_matmul_rows_batched
 * (batched true) of weight rows [n0, n1), n0 and n1 multiples of 8 or n1 = N. */
typedef void (*rlx_packed_fn)(const void *packed, int64_t n0, int64_t n1, const void *act, size_t act_row_bytes,
                              int64_t T, int64_t K, float *out, int64_t ldo, bool batched);
/* The current kernel path's kernel for packed `type` weights; NULL when the path reads that
 * type in the GGUF layout (then nothing is repacked). */
rlx_packed_fn rlx__cpu_packed_fn(int type);

/* Whether rlx__repack_plan packs weights of `type` on the current path: its path has a packed
 * kernel (rlx__cpu_packed_fn), and for Q8_0 transparent huge pages can be had for the copy (THP
 * "always" or "madvise"), or RLX_CPU_REPACK=1 asks for it anyway: Q8_0's layout gains nothing
 * in arithmetic, and its copy in 4 KiB pages decoded slower than the file's pages
 * (bench/RESULTS.md 73). RLX_CPU_REPACK=0 packs nothing. */
bool rlx__repack_wanted(int type);

/* A plan's packed weights: per graph tensor its packed copy and kernel, or data NULL. */
typedef struct rlx_packed_weight {
    void *data;
    rlx_packed_fn fn;
} rlx_packed_weight;
/* Packs every weight of the plan's graph that only matmuls read (as their weight operand) and
 * whose type rlx__repack_wanted: *out gets graph->n_tensors + 1 entries (NULL when none is
 * packed; the last one's data is the allocation all copies live in, asked to be in huge
 * pages), *bytes the copies' total size; the GGUF pages of a packed weight are handed back to
 * the kernel (MADV_PAGEOUT: file pages are dropped, they are still readable). RLX_ENOMEM when
 * the copies cannot be allocated. */
int rlx__repack_plan(const rlx_plan *plan, rlx_packed_weight **out, size_t *bytes, rlx_error *err);
/* Frees rlx__repack_plan's result; n: the graph's tensor count it was made for. */
void rlx__repack_free(rlx_packed_weight *p, int n);

void rlx__avx2_matmul_q4_k_x8(const void *packed, int64_t n0, int64_t n1, const void *act, size_t act_row_bytes,
                              int64_t T, int64_t K, float *out, int64_t ldo, bool batched);
void rlx__avx512_matmul_q4_k_x8(const void *packed, int64_t n0, int64_t n1, const void *act, size_t act_row_bytes,
                                int64_t T, int64_t K, float *out, int64_t ldo, bool batched);
void rlx__avx512vnni_matmul_q4_k_x8(const void *packed, int64_t n0, int64_t n1, const void *act, size_t act_row_bytes,
                                    int64_t T, int64_t K, float *out, int64_t ldo, bool batched);
void rlx__avx2_matmul_q8_0_packed(const void *packed, int64_t n0, int64_t n1, const void *act, size_t act_row_bytes,
                                  int64_t T, int64_t K, float *out, int64_t ldo, bool batched);
void rlx__avx2vnni_matmul_q8_0_packed(const void *packed, int64_t n0, int64_t n1, const void *act, size_t act_row_bytes,
                                      int64_t T, int64_t K, float *out, int64_t ldo, bool batched);
void rlx__avx512_matmul_q8_0_packed(const void *packed, int64_t n0, int64_t n1, const void *act, size_t act_row_bytes,
                                    int64_t T, int64_t K, float *out, int64_t ldo, bool batched);
void rlx__avx512vnni_matmul_q8_0_packed(const void *packed, int64_t n0, int64_t n1, const void *act, size_t act_row_bytes,
                                        int64_t T, int64_t K, float *out, int64_t ldo, bool batched);
/* the Q8_0 tile heights of the paths (their packed row groups) */
extern const int rlx__avx2_q8_0_rows, rlx__avx2vnni_q8_0_rows, rlx__avx512_q8_0_rows, rlx__avx512vnni_q8_0_rows;
void rlx__avx2vnni_matmul_q4_k_x8(const void *packed, int64_t n0, int64_t n1, const void *act, size_t act_row_bytes,
                                  int64_t T, int64_t K, float *out, int64_t ldo, bool batched);

#endif
