/* kernels.cu - the CUDA kernels of every plan step kind, mirroring the Vulkan shaders
 * (backends/vulkan/shaders/) and the CPU reference (backends/cpu/cpu_ops.c): dequantization
 * of F32/F16/BF16/Q8_0/Q4_0/Q4_K/Q5_K/Q6_K in 32-element chunks, activations rounded or
 * quantized as the CPU does before its dot products, the fused elementwise chain, rope from
 * host-computed cos/sin tables, and two-pass attention over the paged KV pool or, for encoders,
 * over the step's own K and V rows; rows by token id or by position; RMS and layer norm. */
#include "backends/cuda/cu_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>

#define CU_STREAM(s) ((cudaStream_t)(s))

static inline int launched(void) { return (int)cudaGetLastError(); }
static inline unsigned blocks_for(int64_t n, int per) { return (unsigned)((n + per - 1) / per); }

/* ---- chain ---------------------------------------------------------------------------- */

__device__ static float silu_f(float x) { return x / (1.0f + expf(-x)); }

__device__ static float f16_round(float x) { return __half2float(__float2half_rn(x)); }

/* tanh within one float ulp (as vulkan/shaders/common.glsl; the CPU's tanhf is within one too,
 * CUDA's tanhf within two): an odd polynomial below 0.55, 1 - 2 / (e^2|x| + 1) above, 1 beyond
 * 9. The _rn intrinsics keep nvcc from contracting into FMAs the CPU does not use. */
__device__ static float tanh_acc(float x)
{
    float ax = fabsf(x), z;
    if (ax >= 9.0f) z = 1.0f;
    else if (ax >= 0.55f) z = __fsub_rn(1.0f, __fdiv_rn(2.0f, __fadd_rn(expf(__fmul_rn(2.0f, ax)), 1.0f)));
    else {
        float s = __fmul_rn(ax, ax), p = 0.0025662498f;
        p = __fadd_rn(__fmul_rn(p, s), -0.0085542398f);
        p = __fadd_rn(__fmul_rn(p, s), 0.021825222f);
        p = __fadd_rn(__fmul_rn(p, s), -0.053965364f);
        p = __fadd_rn(__fmul_rn(p, s), 0.13333327f);
        p = __fadd_rn(__fmul_rn(p, s), -0.33333334f);
        z = __fadd_rn(ax, __fmul_rn(__fmul_rn(ax, s), p));
    }
    return x < 0.0f ? -z : z;
}

/* cap * tanh(x * (1/cap)): the CPU scales by the reciprocal */
__device__ static float softcap_f(float x, float cap) { return __fmul_rn(cap, tanh_acc(__fmul_rn(x, __fdiv_rn(1.0f, cap)))); }

/* ggml's CPU GELU reads a table of f16(gelu(f16(x))) and passes |x| >= 10 through; the CPU
 * backend (cpu_ops.c) and the Vulkan shaders compute the same roundings, in the same order */
__device__ static float gelu_f(float x)
{
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float c = 0.79788456080286535587989211986876f;
    float h = f16_round(x);
    float u = __fmul_rn(__fmul_rn(c, h), __fadd_rn(1.0f, __fmul_rn(__fmul_rn(0.044715f, h), h)));
    return f16_round(__fmul_rn(__fmul_rn(0.5f, h), __fadd_rn(1.0f, tanh_acc(u))));
}

__device__ static float apply_chain(const rlx_cu_chain &ch, float y, int64_t row, int64_t col)
{
    for (int k = 0; k < ch.n; k++) {
        switch (ch.op[k]) {
        case 0: y += ch.operand[k][row * ch.stride[k] + col]; break;
        case 1: y *= ch.operand[k][row * ch.stride[k] + col]; break;
        case 2: y = silu_f(y); break;
        case 3: y = gelu_f(y); break;
        case 4: y *= ch.p[k]; break;
        default: y = softcap_f(y, ch.p[k]); break;
        }
    }
    return y;
}

/* ---- dequantization ------------------------------------------------------------------------ */

__device__ static float h2f(const uint8_t *p) { return __half2float(*(const __half *)p); }
__device__ static uint16_t u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

__device__ static void scale_min_k4(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) { *sc = q[j] & 63; *m = q[j + 4] & 63; }
    else { *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}

/* 32 values of chunk c of a row at `row` (bytes); plain types may end in a partial chunk. */
__device__ static void dequant32(int type, const uint8_t *row, int64_t c, int64_t K, float *v)
{
    switch (type) {
    case 0: case 1: case 30:
        for (int i = 0; i < 32; i++) {
            int64_t k = c * 32 + i;
            if (k >= K) { v[i] = 0.0f; continue; }
            if (type == 0) v[i] = ((const float *)row)[k];
            else if (type == 1) v[i] = __half2float(((const __half *)row)[k]);
            else v[i] = __uint_as_float((uint32_t)u16(row + 2 * k) << 16);
        }
        break;
    case 8: {
        const uint8_t *b = row + 34 * c;
        float d = h2f(b);
        for (int i = 0; i < 32; i++) v[i] = (float)(int8_t)b[2 + i] * d;
        break;
    }
    case 2: {
        const uint8_t *b = row + 18 * c;
        float d = h2f(b);
        for (int i = 0; i < 16; i++) {
            v[i] = (float)((b[2 + i] & 0xF) - 8) * d;
            v[i + 16] = (float)((b[2 + i] >> 4) - 8) * d;
        }
        break;
    }
    case 12: case 13: {
        bool q5 = type == 13;
        const uint8_t *b = row + (q5 ? 176 : 144) * (c / 8);
        int j = (int)(c % 8), il = j / 2, hi = j & 1, sc, m;
        float d = h2f(b), dmin = h2f(b + 2);
        scale_min_k4(j, b + 4, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        const uint8_t *qs = b + (q5 ? 48 : 16) + 32 * il;
        for (int l = 0; l < 32; l++) {
            int q = hi ? qs[l] >> 4 : qs[l] & 0xF;
            if (q5 && ((b[16 + l] >> (2 * il + hi)) & 1)) q += 16;
            v[l] = d1 * (float)q - m1;
        }
        break;
    }
    default: { /* Q6_K */
        const uint8_t *b = row + 210 * (c / 8);
        int j = (int)(c % 8), h = j / 4, qq = j % 4;
        float d = h2f(b + 208);
        const uint8_t *ql = b + 64 * h + ((qq & 1) ? 32 : 0), *qh = b + 128 + 32 * h;
        for (int l = 0; l < 32; l++) {
            int lo = qq < 2 ? ql[l] & 0xF : ql[l] >> 4;
            int q = (lo | (((qh[l] >> (2 * qq)) & 3) << 4)) - 32;
            v[l] = d * (float)(int8_t)b[192 + 8 * h + 2 * qq + l / 16] * (float)q;
        }
        break;
    }
    }
}

/* ---- get_rows / gather / elementwise ------------------------------------------------------- */

/* rows by token id, or by position (by_pos: learned position embeddings) */
__global__ static void k_get_rows(int type, const uint8_t *w, size_t rb, int64_t cols, int64_t nrw, rlx_cu_batch b, int by_pos,
                                  float scale, float *y, rlx_cu_chain ch)
{
    int64_t nch = (cols + 31) / 32, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)b.n_tokens * nch) return;
    int64_t t = i / nch, c = i % nch;
    int32_t id = b.words[(by_pos ? b.pos : b.tok) + t];
    if (id < 0 || id >= nrw) return; /* validated on the host */
    float v[32];
    dequant32(type, w + (size_t)id * rb, c, cols, v);
    for (int k = 0; k < 32 && c * 32 + k < cols; k++) {
        float x = v[k];
        if (scale != 0.0f && scale != 1.0f) x *= scale;
        y[t * cols + c * 32 + k] = apply_chain(ch, x, t, c * 32 + k);
    }
}

__global__ static void k_ew(const float *x, float *y, int64_t rows, int64_t cols, rlx_cu_chain ch)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    y[i] = apply_chain(ch, x[i], i / cols, i % cols);
}

__global__ static void k_gather(const float *x, float *y, rlx_cu_batch b, int64_t cols)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)b.n_outputs * cols) return;
    int64_t o = i / cols, c = i % cols;
    y[i] = x[(int64_t)b.words[b.oidx + o] * cols + c];
}

/* ---- norms: one block of 256 per (row, segment) ----------------------------------------- */

/* the sum of v over a block of 256 threads, in double (every thread gets it) */
__device__ static double block_sum(double v, double *red)
{
    int tid = threadIdx.x;
    red[tid] = v;
    __syncthreads();
    for (int st = 128; st > 0; st >>= 1) {
        if (tid < st) red[tid] += red[tid + st];
        __syncthreads();
    }
    double r = red[0];
    __syncthreads(); /* red is reused by the next sum */
    return r;
}

/* RMS norm (x / sqrt(mean(x^2) + eps), times w per segment for HEAD_NORM), or with `layer` layer
 * norm as the CPU's norm_row: the mean in double, then the centred values' float squares in
 * double, (x - mean) * (1 / sqrt(var + eps)). */
__global__ static void k_rms_norm(const float *x, float *y, int64_t cols, int64_t seg, float eps, const float *w, int layer,
                                  rlx_cu_chain ch)
{
    __shared__ double red[256];
    int64_t row = blockIdx.x, s = blockIdx.y, base = row * cols + s * seg;
    int tid = threadIdx.x;
    float mean = 0.0f;
    if (layer) {
        double sum = 0.0;
        for (int64_t i = tid; i < seg; i += 256) sum += (double)x[base + i];
        mean = (float)(block_sum(sum, red) / (double)seg);
    }
    double sum = 0.0;
    for (int64_t i = tid; i < seg; i += 256) { float v = __fsub_rn(x[base + i], mean); sum += (double)__fmul_rn(v, v); }
    const float scale = __fdiv_rn(1.0f, sqrtf(__fadd_rn((float)(block_sum(sum, red) / (double)seg), eps)));
    for (int64_t i = tid; i < seg; i += 256) {
        float v = __fmul_rn(__fsub_rn(x[base + i], mean), scale);
        if (w) v = __fmul_rn(v, w[i]);
        y[base + i] = apply_chain(ch, v, row, s * seg + i);
    }
}

/* ---- matmul ----------------------------------------------------------------------------- */

__device__ static float bf16_round(float x)
{
    uint32_t u = __float_as_uint(x);
    u += 0x7fffu + ((u >> 16) & 1u);
    return __uint_as_float(u & 0xffff0000u);
}

/* Activations rounded (mode 1 f16, 2 bf16: a thread per value) or quantized as the CPU does
 * (3 Q8_0, 4 Q8_K: a warp per block of 32 or 256 values, lane l taking values l, l + 32, ...):
 * the block's largest magnitude by a warp reduction - max is exact in any order, and for Q8_K
 * the value that holds it is the first one in the block, as the CPU's strict > scan picks -
 * then each value's rounding, the CPU's formulas. A thread per block took ~6.6 us a decode row
 * (its serial loads one after another), a fifth of a decode step's GPU time on the H200. */
__global__ static void k_actq(int mode, const float *x, float *y, int64_t rows, int64_t K)
{
    if (mode == 1 || mode == 2) {
        int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
        if (i < rows * K) y[i] = mode == 1 ? __half2float(__float2half_rn(x[i])) : bf16_round(x[i]);
        return;
    }
    const int64_t bs = mode == 4 ? 256 : 32, nb = (K + bs - 1) / bs;
    const int64_t wi = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (wi >= rows * nb) return; /* whole warps leave together: rows * nb counts warps */
    const int64_t r = wi / nb, blk = wi % nb, o = r * K + blk * bs, n = K - blk * bs < bs ? K - blk * bs : bs;
    float amax = 0.0f, mx = 0.0f;
    int first = INT_MAX;
    for (int64_t k = lane; k < n; k += 32) {
        const float a = fabsf(x[o + k]);
        if (a > amax) { amax = a; mx = x[o + k]; first = (int)k; }
    }
    for (int off = 16; off > 0; off >>= 1) {
        const float oa = __shfl_xor_sync(0xffffffffu, amax, off), om = __shfl_xor_sync(0xffffffffu, mx, off);
        const int of = __shfl_xor_sync(0xffffffffu, first, off);
        if (oa > amax || (oa == amax && of < first)) { amax = oa; mx = om; first = of; }
    }
    if (mode == 3) {
        /* llama.cpp's x86 quantize_row_q8_0: times 127/amax, rounded half to even */
        float d = __fdiv_rn(amax, 127.0f), id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f, dh = __half2float(__float2half_rn(d));
        for (int64_t k = lane; k < n; k += 32) y[o + k] = rintf(__fmul_rn(x[o + k], id)) * dh;
        return;
    }
    if (amax == 0.0f) { for (int64_t k = lane; k < n; k += 32) y[o + k] = 0.0f; return; }
    float iscale = -127.0f / mx, d = 1.0f / iscale;
    for (int64_t k = lane; k < n; k += 32) y[o + k] = fminf(127.0f, rintf(iscale * x[o + k])) * d;
}

/* Value l (0-31) of chunk c of a row: dequant32's arithmetic for that one value. (dequant32
 * stays a chunk at a time: written as 32 calls of this, nvcc re-decodes the type and scales
 * per value - 4x the PTX of k_matmul and k_dequant, a 160-byte stack frame in k_matmul.) */
__device__ static float dequant1(int type, const uint8_t *row, int64_t c, int l, int64_t K)
{
    switch (type) {
    case 0: case 1: case 30: {
        const int64_t k = c * 32 + l;
        if (k >= K) return 0.0f;
        if (type == 0) return ((const float *)row)[k];
        if (type == 1) return __half2float(((const __half *)row)[k]);
        return __uint_as_float((uint32_t)u16(row + 2 * k) << 16);
    }
    case 8: {
        const uint8_t *b = row + 34 * c;
        return (float)(int8_t)b[2 + l] * h2f(b);
    }
    case 2: {
        const uint8_t *b = row + 18 * c;
        const float d = h2f(b);
        return l < 16 ? (float)((b[2 + l] & 0xF) - 8) * d : (float)((b[2 + l - 16] >> 4) - 8) * d;
    }
    case 12: case 13: {
        const bool q5 = type == 13;
        const uint8_t *b = row + (q5 ? 176 : 144) * (c / 8);
        int j = (int)(c % 8), il = j / 2, hi = j & 1, sc, m;
        const float d = h2f(b), dmin = h2f(b + 2);
        scale_min_k4(j, b + 4, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        const uint8_t *qs = b + (q5 ? 48 : 16) + 32 * il;
        int q = hi ? qs[l] >> 4 : qs[l] & 0xF;
        if (q5 && ((b[16 + l] >> (2 * il + hi)) & 1)) q += 16;
        return d1 * (float)q - m1;
    }
    default: { /* Q6_K */
        const uint8_t *b = row + 210 * (c / 8);
        const int j = (int)(c % 8), h = j / 4, qq = j % 4;
        const float d = h2f(b + 208);
        const uint8_t *ql = b + 64 * h + ((qq & 1) ? 32 : 0), *qh = b + 128 + 32 * h;
        const int lo = qq < 2 ? ql[l] & 0xF : ql[l] >> 4;
        const int q = (lo | (((qh[l] >> (2 * qq)) & 3) << 4)) - 32;
        return d * (float)(int8_t)b[192 + 8 * h + 2 * qq + l / 16] * (float)q;
    }
    }
}

#define MM_TT 8
/* one warp per weight row and tile of 8 tokens; lanes take 32-element chunks (one token's
 * rows: a decode step's) */
__global__ static void k_matmul(int type, const uint8_t *w, size_t rb, int64_t K, int64_t N, const float *x, int64_t T,
                                float *y, int64_t ldo, rlx_cu_chain ch)
{
    int64_t n = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, t0 = (int64_t)blockIdx.y * MM_TT;
    int lane = threadIdx.x % 32;
    if (n >= N) return;
    int nt = (int)(T - t0 < MM_TT ? T - t0 : MM_TT);
    float acc[MM_TT] = {0}, v[32];
    const uint8_t *row = w + (size_t)n * rb;
    for (int64_t c = lane; c < (K + 31) / 32; c += 32) {
        dequant32(type, row, c, K, v);
        int kn = (int)(K - c * 32 < 32 ? K - c * 32 : 32);
        for (int t = 0; t < nt; t++) {
            const float *xr = x + (t0 + t) * K + c * 32;
            float s = 0.0f;
            for (int k = 0; k < kn; k++) s += v[k] * xr[k];
            acc[t] += s;
        }
    }
    for (int t = 0; t < nt; t++) {
        float s = acc[t];
        for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
        if (lane == 0) y[(t0 + t) * ldo + n] = apply_chain(ch, s, t0 + t, n);
    }
}

/* The same product for tiles of several tokens: the lanes walk the row's 32-value chunks
 * together, lane l taking value l of each, so a chunk's bytes and each token's floats are one
 * coalesced access each (in k_matmul each lane reads a chunk of its own byte by byte, every
 * access touching 32 sectors, which costs little for one token and much for eight); each
 * token's sum: lane l's values in K order, then the warp's tree. On the H200 (bench/RESULTS.md
 * section 68) 2.5x k_matmul's aggregate decode at 16 sequences, but 0.7x at one token, where
 * fewer bytes are in flight per warp. */
__global__ static void k_matmul_lanes(int type, const uint8_t *w, size_t rb, int64_t K, int64_t N, const float *x,
                                      int64_t T, float *y, int64_t ldo, rlx_cu_chain ch)
{
    const int64_t n = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, t0 = (int64_t)blockIdx.y * MM_TT;
    const int lane = threadIdx.x % 32;
    if (n >= N) return;
    const int nt = (int)(T - t0 < MM_TT ? T - t0 : MM_TT);
    float acc[MM_TT];
#pragma unroll
    for (int t = 0; t < MM_TT; t++) acc[t] = 0.0f;
    const uint8_t *row = w + (size_t)n * rb;
    const float *xt = x + t0 * K;
    const int64_t nch = (K + 31) / 32;
#pragma unroll 4
    for (int64_t c = 0; c < nch; c++) {
        const int64_t k = c * 32 + lane;
        const float v = dequant1(type, row, c, lane, K);
        if (k < K) {
#pragma unroll
            for (int t = 0; t < MM_TT; t++)
                if (t < nt) acc[t] += v * xt[t * K + k];
        }
    }
#pragma unroll
    for (int t = 0; t < MM_TT; t++) {
        float s = acc[t];
        for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
        if (lane == 0 && t < nt) y[(t0 + t) * ldo + n] = apply_chain(ch, s, t0 + t, n);
    }
}

#define SG_BM 64
#define SG_BN 64
#define SG_BK 16
/* Y[T][N] = X[T][K] W[N][K]^T over F32 (a quantized W dequantized first): 64 x 64 output tiles,
 * K in slices of 16 through shared memory, 4 x 4 outputs per thread. Every output sums its
 * products in the order k = 0, 1, ..., K-1, one fmaf each, whatever T is and wherever its token
 * sits in the batch: a token's row is the same in any batch (the hidden-state graphs' batch
 * invariance, which cuBLAS, choosing its algorithm by the shape, does not give). */
__global__ static void __launch_bounds__(256) k_sgemm(const float *x, const float *w, int64_t T, int64_t K, int64_t N,
                                                      float *y, int64_t ldo, rlx_cu_chain ch)
{
    __shared__ float xs[SG_BK][SG_BM + 4], ws[SG_BK][SG_BN + 4];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16, lr = tid / 4, lk = (tid % 4) * 4;
    const int64_t t0 = (int64_t)blockIdx.y * SG_BM, n0 = (int64_t)blockIdx.x * SG_BN;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += SG_BK) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t k = k0 + lk + j, t = t0 + lr, n = n0 + lr;
            xs[lk + j][lr] = t < T && k < K ? x[t * K + k] : 0.0f;
            ws[lk + j][lr] = n < N && k < K ? w[n * K + k] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < SG_BK; kk++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = xs[kk][ty + 16 * i];
                b[i] = ws[kk][tx + 16 * i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t t = t0 + ty + 16 * i, n = n0 + tx + 16 * j;
            if (t < T && n < N) y[t * ldo + n] = apply_chain(ch, acc[i][j], t, n);
        }
}

__global__ static void k_dequant(int type, const uint8_t *w, size_t rb, int64_t K, int64_t N, float *out)
{
    int64_t nch = (K + 31) / 32, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * nch) return;
    int64_t n = i / nch, c = i % nch;
    float v[32];
    dequant32(type, w + (size_t)n * rb, c, K, v);
    for (int k = 0; k < 32 && c * 32 + k < K; k++) out[n * K + c * 32 + k] = v[k];
}

/* ---- rope, KV store, attention ---------------------------------------------------------- */

__global__ static void k_rope(const float *x, float *y, rlx_cu_batch b, int nh, int hd, int nrot, int mode, int32_t tab)
{
    int64_t half = hd / 2, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)b.n_tokens * nh * half) return;
    int64_t t = i / (nh * half), h = (i / half) % nh, p = i % half, base = t * nh * hd + h * hd, hr = nrot / 2;
    if (p < hr) {
        const float *tb = (const float *)(b.words + tab) + t * nrot;
        float cs = tb[p], sn = tb[hr + p];
        int64_t i0 = mode == 2 ? p : 2 * p, i1 = mode == 2 ? p + hr : 2 * p + 1;
        float x0 = x[base + i0], x1 = x[base + i1];
        y[base + i0] = x0 * cs - x1 * sn;
        y[base + i1] = x0 * sn + x1 * cs;
    } else {
        int64_t k = nrot + 2 * (p - hr);
        y[base + k] = x[base + k];
        y[base + k + 1] = x[base + k + 1];
    }
}

__device__ static int64_t kv_slot(const rlx_cu_batch &b, int32_t seq, int32_t pos, int bsz)
{
    const int32_t *table = b.words + b.words[b.tstart + seq];
    return (int64_t)table[pos / bsz] * bsz + pos % bsz;
}

/* round half away from zero as quant.c's quantizers: truncate, then step away from zero when
 * the dropped fraction is at least one half */
__device__ static float round_away(float v)
{
    float t = truncf(v), f = __fsub_rn(v, t);
    return fabsf(f) >= 0.5f ? t + copysignf(1.0f, v) : t;
}

/* One Q8_0 block (32 values of x) to dst: f16 scale amax / 127, then the int8 values. */
__device__ static void quant_q8_0(const float *x, uint8_t *dst)
{
    float amax = 0.0f;
    for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(x[k]));
    float d = __fdiv_rn(amax, 127.0f), id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    *(__half *)dst = __float2half_rn(d); /* rows and blocks start at even offsets */
    for (int k = 0; k < 32; k++) dst[2 + k] = (uint8_t)(int8_t)round_away(__fmul_rn(x[k], id));
}

/* one thread per (token, unit): a value of an f32/f16 row, or a Q8_0 block of 32 */
__global__ static void k_kv_store(const float *k, const float *v, uint8_t *kc, uint8_t *vc, rlx_cu_batch b, int64_t kvc,
                                  int type, int64_t rb, int bsz)
{
    int64_t units = type == 2 ? kvc / 32 : kvc, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)b.n_tokens * units) return;
    int64_t t = i / units, u = i % units;
    int64_t row = kv_slot(b, b.words[b.seq + t], b.words[b.pos + t], bsz) * rb;
    if (type == 2) {
        quant_q8_0(k + t * kvc + u * 32, kc + row + u * 34);
        quant_q8_0(v + t * kvc + u * 32, vc + row + u * 34);
    } else if (type == 1) {
        ((__half *)(kc + row))[u] = __float2half_rn(k[t * kvc + u]);
        ((__half *)(vc + row))[u] = __float2half_rn(v[t * kvc + u]);
    } else {
        ((float *)(kc + row))[u] = k[t * kvc + u];
        ((float *)(vc + row))[u] = v[t * kvc + u];
    }
}

/* value `col` of the pool row at byte `row` (a Q8_0 value is its int8 times the block's scale) */
__device__ static float kv_at(const uint8_t *p, int64_t row, int64_t col, int type)
{
    if (type == 1) return __half2float(((const __half *)(p + row))[col]);
    if (type == 0) return ((const float *)(p + row))[col];
    const uint8_t *blk = p + row + (col / 32) * 34;
    return __fmul_rn((float)(int8_t)blk[2 + col % 32], __half2float(*(const __half *)blk));
}

/* q.k in the CPU's order and precision (sequential, no FMA), softcap, then scale */
__device__ static float score_at(const float *qs, const uint8_t *kc, int64_t row, int64_t c0, int hd, int type, float scale,
                                 float softcap)
{
    float d = 0.0f;
    for (int i = 0; i < hd; i++) d = __fadd_rn(d, __fmul_rn(qs[i], kv_at(kc, row, c0 + i, type)));
    if (softcap > 0.0f) d = softcap_f(d, softcap);
    return __fmul_rn(d, scale);
}

/* byte offset of position j's row: in the paged pool (base < 0), or without a cache the step's
 * row base + j (the sequence's first batch token is base) */
__device__ static int64_t row_of(const rlx_cu_batch &b, int32_t seq, int32_t j, int bsz, int64_t rb, int64_t base)
{
    return (base >= 0 ? base + j : kv_slot(b, seq, j, bsz)) * rb;
}

/* one block of 128 per (token, head) (tokens on grid x: up to 2^31 - 1; heads on y); head_dim
 * <= 512. Pass 1: max and sum of exp (merged across threads in double, as the CPU sums in
 * double); pass 2: p-weighted sum of V. q and p are rounded to f16 for an f16 pool (the CPU's
 * rounding); a Q8_0 pool is read as its dequantized values. Causal over the pool, or with
 * `nocache` bidirectional over the step's own F32 K and V rows (kc, vc; rows of rb bytes): each
 * token sees its whole sequence, which lies contiguous in the batch at positions 0..n-1
 * (rlx_batch_whole_seqs checked it on the host). */
__global__ static void k_attention(const float *q, float *y, const uint8_t *kc, const uint8_t *vc, rlx_cu_batch b, int n_head,
                                   int group, int hd, int64_t rb, int window, float scale, float softcap, int type, int bsz,
                                   int nocache)
{
    __shared__ float qs[512], pp[128], red_m[128];
    __shared__ double red_l[128];
    __shared__ int32_t last_sh;
    int h = blockIdx.y, hk = h / group, tid = threadIdx.x;
    int64_t t = blockIdx.x, c0 = (int64_t)hk * hd, base = -1;
    int32_t p = b.words[b.pos + t], seq = b.words[b.seq + t];
    int32_t j0 = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    if (nocache) { /* the last position of the sequence: its run of tokens from t on */
        if (tid == 0) {
            int64_t te = t;
            while (te + 1 < b.n_tokens && b.words[b.seq + te + 1] == seq) te++;
            last_sh = p + (int32_t)(te - t);
        }
        base = t - p;
        j0 = 0;
    }
    for (int i = tid; i < hd; i += 128) {
        float v = q[t * n_head * hd + (int64_t)h * hd + i];
        qs[i] = type == 1 ? f16_round(v) : v;
    }
    __syncthreads();
    const int32_t last = nocache ? last_sh : p; /* the last position this row sees */
    float m = -INFINITY;
    for (int32_t j = j0 + tid; j <= last; j += 128)
        m = fmaxf(m, score_at(qs, kc, row_of(b, seq, j, bsz, rb, base), c0, hd, type, scale, softcap));
    red_m[tid] = m;
    __syncthreads();
    for (int st = 64; st > 0; st >>= 1) {
        if (tid < st) red_m[tid] = fmaxf(red_m[tid], red_m[tid + st]);
        __syncthreads();
    }
    const float M = red_m[0];
    double l = 0.0;
    for (int32_t j = j0 + tid; j <= last; j += 128)
        l += (double)expf(__fsub_rn(score_at(qs, kc, row_of(b, seq, j, bsz, rb, base), c0, hd, type, scale, softcap), M));
    red_l[tid] = l;
    __syncthreads();
    for (int st = 64; st > 0; st >>= 1) {
        if (tid < st) red_l[tid] += red_l[tid + st];
        __syncthreads();
    }
    const float inv = (float)(1.0 / red_l[0]);
    float acc[4] = {0, 0, 0, 0};
    for (int32_t jb = j0; jb <= last; jb += 128) {
        int32_t j = jb + tid;
        float pj = 0.0f;
        if (j <= last) {
            pj = __fmul_rn(expf(__fsub_rn(score_at(qs, kc, row_of(b, seq, j, bsz, rb, base), c0, hd, type, scale, softcap), M)), inv);
            if (type == 1) pj = f16_round(pj);
        }
        __syncthreads();
        pp[tid] = pj;
        __syncthreads();
        int nj = last - jb + 1 < 128 ? last - jb + 1 : 128;
        for (int jj = 0; jj < nj; jj++) {
            int64_t row = row_of(b, seq, jb + jj, bsz, rb, base);
            for (int k = 0; k < 4; k++) {
                int i = tid + 128 * k;
                if (i < hd) acc[k] = __fadd_rn(acc[k], __fmul_rn(pp[jj], kv_at(vc, row, c0 + i, type)));
            }
        }
    }
    for (int k = 0; k < 4; k++) {
        int i = tid + 128 * k;
        if (i < hd) y[t * n_head * hd + (int64_t)h * hd + i] = acc[k];
    }
}

/* ---- launch wrappers ---------------------------------------------------------------------- */

extern "C" {

int rlx_cu_get_rows(void *s, int type, const void *w, size_t rb, int64_t cols, int64_t nrw, rlx_cu_batch b, int by_pos,
                    float scale, float *y, rlx_cu_chain ch)
{
    int64_t n = (int64_t)b.n_tokens * ((cols + 31) / 32);
    k_get_rows<<<blocks_for(n, 128), 128, 0, CU_STREAM(s)>>>(type, (const uint8_t *)w, rb, cols, nrw, b, by_pos, scale, y, ch);
    return launched();
}

int rlx_cu_rms_norm(void *s, const float *x, float *y, int64_t rows, int64_t cols, int64_t seg, float eps, const float *w,
                    int layer, rlx_cu_chain ch)
{
    if (rows == 0) return 0;
    k_rms_norm<<<dim3((unsigned)rows, (unsigned)(cols / seg)), 256, 0, CU_STREAM(s)>>>(x, y, cols, seg, eps, w, layer, ch);
    return launched();
}

int rlx_cu_ew(void *s, const float *x, float *y, int64_t rows, int64_t cols, rlx_cu_chain ch)
{
    if (rows * cols == 0) return 0;
    k_ew<<<blocks_for(rows * cols, 256), 256, 0, CU_STREAM(s)>>>(x, y, rows, cols, ch);
    return launched();
}

int rlx_cu_actq(void *s, int mode, const float *x, float *y, int64_t rows, int64_t K)
{
    /* a thread per value (modes 1, 2) or a warp per block of values (3, 4) */
    int64_t bs = mode == 4 ? 256 : 32, n = mode == 1 || mode == 2 ? rows * K : rows * ((K + bs - 1) / bs) * 32;
    if (n == 0) return 0;
    k_actq<<<blocks_for(n, 128), 128, 0, CU_STREAM(s)>>>(mode, x, y, rows, K);
    return launched();
}

int rlx_cu_matmul(void *s, int type, const void *w, size_t rb, int64_t K, int64_t N, const float *x, int64_t T, float *y,
                  int64_t ldo, rlx_cu_chain ch, int lanes)
{
    if (T == 0) return 0;
    dim3 grid(blocks_for(N, 4), (unsigned)((T + MM_TT - 1) / MM_TT));
    if (lanes) k_matmul_lanes<<<grid, 128, 0, CU_STREAM(s)>>>(type, (const uint8_t *)w, rb, K, N, x, T, y, ldo, ch);
    else k_matmul<<<grid, 128, 0, CU_STREAM(s)>>>(type, (const uint8_t *)w, rb, K, N, x, T, y, ldo, ch);
    return launched();
}

int rlx_cu_sgemm(void *s, const float *x, const float *w, int64_t T, int64_t K, int64_t N, float *y, int64_t ldo,
                 rlx_cu_chain ch)
{
    if (T == 0) return 0;
    dim3 grid(blocks_for(N, SG_BN), blocks_for(T, SG_BM));
    k_sgemm<<<grid, 256, 0, CU_STREAM(s)>>>(x, w, T, K, N, y, ldo, ch);
    return launched();
}

int rlx_cu_dequant(void *s, int type, const void *w, size_t rb, int64_t K, int64_t N, float *out)
{
    k_dequant<<<blocks_for(N * ((K + 31) / 32), 128), 128, 0, CU_STREAM(s)>>>(type, (const uint8_t *)w, rb, K, N, out);
    return launched();
}

int rlx_cu_rope(void *s, const float *x, float *y, rlx_cu_batch b, int nh, int hd, int nrot, int mode, int32_t tab)
{
    int64_t n = (int64_t)b.n_tokens * nh * (hd / 2);
    k_rope<<<blocks_for(n, 256), 256, 0, CU_STREAM(s)>>>(x, y, b, nh, hd, nrot, mode, tab);
    return launched();
}

int rlx_cu_kv_store(void *s, const float *k, const float *v, void *kc, void *vc, rlx_cu_batch b, int64_t kvc, int type,
                    int64_t rb, int bsz)
{
    int64_t n = (int64_t)b.n_tokens * (type == 2 ? kvc / 32 : kvc);
    if (n == 0) return 0;
    k_kv_store<<<blocks_for(n, 256), 256, 0, CU_STREAM(s)>>>(k, v, (uint8_t *)kc, (uint8_t *)vc, b, kvc, type, rb, bsz);
    return launched();
}

int rlx_cu_attention(void *s, const float *q, float *y, const void *kc, const void *vc, rlx_cu_batch b, int n_head,
                     int group, int hd, int64_t rb, int window, float scale, float softcap, int type, int bsz, int nocache)
{
    if (b.n_tokens == 0) return 0;
    if (n_head > 65535) return (int)cudaErrorInvalidConfiguration; /* grid y; checked at prepare() */
    k_attention<<<dim3((unsigned)b.n_tokens, (unsigned)n_head), 128, 0, CU_STREAM(s)>>>(
        q, y, (const uint8_t *)kc, (const uint8_t *)vc, b, n_head, group, hd, rb, window, scale, softcap, type, bsz, nocache);
    return launched();
}

int rlx_cu_gather(void *s, const float *x, float *y, rlx_cu_batch b, int64_t cols)
{
    if (b.n_outputs == 0) return 0;
    k_gather<<<blocks_for((int64_t)b.n_outputs * cols, 256), 256, 0, CU_STREAM(s)>>>(x, y, b, cols);
    return launched();
}

} /* extern "C" */
