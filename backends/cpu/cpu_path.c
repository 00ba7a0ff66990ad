/* cpu_path.c - chooses the SIMD path of rlx_matmul_rows from CPUID at first use, or from the
 * environment variable RLX_CPU_PATH=scalar|avx2|avx512 (a path this CPU lacks is ignored and
 * the best available one is used). */
#include "backends/cpu/kernels.h"
#include "backends/quant_internal.h"

#include <stdatomic.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <stdlib.h>
#include <string.h>

typedef struct cpu_path {
    const char *name;
    rlx_matmul_rows_fn fn, fn_batched;
    rlx_float_gemm_fn gemm;
    bool bf16dp;
} cpu_path;

/* the scalar path's float products: quant_f.c's one-row or batched dot per output */
static void scalar_float_gemm(int type, const void *w, size_t wrow, int64_t n0, int64_t n1, const float *act, size_t astr,
                              int64_t T, int64_t K, float *out, int64_t ldo, const uint8_t *decode)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = n0; n < n1; n++) {
            const void *wr = (const uint8_t *)w + (size_t)n * wrow;
            const float *a = act + (size_t)t * astr;
            out[t * ldo + n] = decode && decode[t] ? rlx_vec_dot(type, wr, a, K) : rlx__dot_float_batched(type, wr, a, K);
        }
}

static bool has_avx2(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    return false;
#endif
}

static bool has_avx512(void)
{
#if defined(__x86_64__)
    return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

bool rlx_cpu_has_vnni(void)
{
#if defined(__x86_64__)
    return has_avx512() && __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

bool rlx_cpu_has_avxvnni(void)
{
#if defined(__x86_64__)
    return has_avx2() && __builtin_cpu_supports("avxvnni");
#else
    return false;
#endif
}

static bool has_avx512bf16(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!has_avx512() || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return (a >> 5) & 1; /* CPUID.(7,1):EAX.AVX512_BF16 */
#else
    return false;
#endif
}

bool rlx_cpu_has_path(const char *name)
{
    if (!strcmp(name, "scalar")) return true;
    if (!strcmp(name, "avx2") || !strcmp(name, "avx2-novnni")) return has_avx2();
    if (!strcmp(name, "avx512") || !strcmp(name, "avx512-novnni")) return has_avx512();
    return false;
}

static cpu_path make_path(const char *name)
{
#if defined(__x86_64__)
    if (!strcmp(name, "avx512"))
        return rlx_cpu_has_vnni()
                   ? (cpu_path){"avx512", rlx__avx512vnni_matmul_rows, rlx__avx512vnni_matmul_rows_batched, rlx__avx512vnni_float_gemm,
                                has_avx512bf16()}
                   : (cpu_path){"avx512", rlx__avx512_matmul_rows, rlx__avx512_matmul_rows_batched, rlx__avx512_float_gemm,
                                has_avx512bf16()};
    /* stands in for AVX-512 CPUs of the first generations: neither VNNI nor BF16 */
    if (!strcmp(name, "avx512-novnni"))
        return (cpu_path){"avx512-novnni", rlx__avx512_matmul_rows, rlx__avx512_matmul_rows_batched, rlx__avx512_float_gemm, false};
    if (!strcmp(name, "avx2-novnni"))
        return (cpu_path){"avx2-novnni", rlx__avx2_matmul_rows, rlx__avx2_matmul_rows_batched, rlx__avx2_float_gemm, false};
    if (!strcmp(name, "avx2"))
        return rlx_cpu_has_avxvnni()
                   ? (cpu_path){"avx2", rlx__avx2vnni_matmul_rows, rlx__avx2vnni_matmul_rows_batched, rlx__avx2vnni_float_gemm, false}
                   : (cpu_path){"avx2", rlx__avx2_matmul_rows, rlx__avx2_matmul_rows_batched, rlx__avx2_float_gemm, false};
#endif
    return (cpu_path){"scalar", rlx__matmul_rows_scalar, rlx__matmul_rows_scalar_batched, scalar_float_gemm, false};
}

static _Atomic(const char *) g_name;
static _Atomic(rlx_matmul_rows_fn) g_fn, g_fn_batched;
static atomic_bool g_bf16dp;
static atomic_int g_width; /* 512, 256 or 0: rlx__cpu_width */
static atomic_int g_tile_rows; /* rlx__cpu_float_tile_rows */
static _Atomic(rlx_float_gemm_fn) g_gemm;

static int path_width(const char *name)
{
    return !strncmp(name, "avx512", 6) ? 512 : !strncmp(name, "avx2", 4) ? 256 : 0;
}

/* Publishes p; the name last, which rlx_cpu_path's callers wait for. */
static void use_path(cpu_path p)
{
    const int width = path_width(p.name);
    int tile_rows = 1;
#if defined(__x86_64__)
    tile_rows = width == 512 ? rlx__avx512_float_tile_rows : width == 256 ? rlx__avx2_float_tile_rows : 1;
#endif
    atomic_store(&g_bf16dp, p.bf16dp);
    atomic_store(&g_gemm, p.gemm);
    atomic_store(&g_fn, p.fn);
    atomic_store(&g_fn_batched, p.fn_batched);
    atomic_store(&g_width, width);
    atomic_store(&g_tile_rows, tile_rows);
    atomic_store(&g_name, p.name);
}

static void choose(void)
{
    const char *want = getenv("RLX_CPU_PATH");
    const char *best = has_avx512() ? "avx512" : has_avx2() ? "avx2" : "scalar";
    /* racing first callers compute the same answer, so plain stores are enough */
    use_path(make_path(want && rlx_cpu_has_path(want) ? want : best));
}

bool rlx__cpu_bf16dp(void)
{
    (void)rlx_cpu_path();
    return atomic_load(&g_bf16dp);
}

int rlx__cpu_width(void)
{
    (void)rlx_cpu_path();
    return atomic_load(&g_width);
}

int rlx__cpu_float_tile_rows(void)
{
    (void)rlx_cpu_path();
    return atomic_load(&g_tile_rows);
}

bool rlx__cpu_simd(void) { return rlx__cpu_width() != 0; }

int rlx_cpu_force_path(const char *name)
{
    static const char *const known[] = {"scalar", "avx2", "avx2-novnni", "avx512", "avx512-novnni"};
    bool ok = false;
    for (size_t i = 0; name && i < RLX_ARRAY_LEN(known); i++) ok |= !strcmp(name, known[i]);
    if (!ok) return RLX_EINVAL;
    if (!rlx_cpu_has_path(name)) return RLX_EUNSUPPORTED;
    use_path(make_path(name));
    return 0;
}

const char *rlx_cpu_path(void)
{
    const char *n = atomic_load(&g_name);
    if (!n) {
        choose();
        n = atomic_load(&g_name);
    }
    return n;
}

void rlx_matmul_rows(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                     size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo)
{
    rlx_matmul_rows_fn fn = atomic_load(&g_fn);
    if (!fn) {
        choose();
        fn = atomic_load(&g_fn);
    }
    fn(type, w, n0, n1, act, act_row_bytes, T, K, out, ldo);
}

void rlx_cpu_float_gemm(int type, const void *w, size_t wrow, int64_t n0, int64_t n1, const float *act, size_t astr,
                        int64_t T, int64_t K, float *out, int64_t ldo, const uint8_t *decode)
{
    (void)rlx_cpu_path();
    atomic_load(&g_gemm)(type, w, wrow, n0, n1, act, astr, T, K, out, ldo, decode);
}

void rlx_matmul_rows_batched(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                             size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo)
{
    rlx_matmul_rows_fn fn = atomic_load(&g_fn_batched);
    if (!fn) {
        choose();
        fn = atomic_load(&g_fn_batched);
    }
    fn(type, w, n0, n1, act, act_row_bytes, T, K, out, ldo);
}
