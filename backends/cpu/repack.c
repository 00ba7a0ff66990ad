/* repack.c - the packed weight layouts of repack.h, and which path reads which. */
#include "backends/cpu/repack.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/threadpool.h"
#include "backends/quant_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int rlx__repack_rows(int type)
{
    if (type == RLX_Q4_K) return 8;
#if defined(__x86_64__)
    if (type == RLX_Q8_0) {
        const int w = rlx__cpu_width();
        return w == 512 ? rlx__avx512_q8_0_rows : w == 256 ? rlx__avx2_q8_0_rows : 0;
    }
#endif
    return 0;
}

size_t rlx__repack_bytes(int type, int64_t N, int64_t K)
{
    const int R = rlx__repack_rows(type);
    const int64_t qk = type == RLX_Q4_K ? RLX_QK_K : RLX_QK;
    if (!R || N <= 0 || N % R || K <= 0 || K % qk) return 0;
    return (size_t)N * rlx_row_bytes(type, K);
}

static int scale_entry(int r, int j) { return 32 * (j / 4) + 16 * (r / 4) + 4 * (j % 4) + r % 4; }
static int min_entry(int r, int j) { return 16 * (j / 2) + 2 * r + j % 2; }

static void pack_q4_k(const rlx_block_q4_k *const in[8], rlx_block_q4_k_x8 *out)
{
    memset(out->lo, 0, sizeof out->lo);
    memset(out->hi, 0, sizeof out->hi);
    for (int r = 0; r < 8; r++) {
        memcpy(&out->d[r], &in[r]->d, 2);
        memcpy(&out->dmin[r], &in[r]->dmin, 2);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            rlx__scale_min_k4(j, in[r]->scales, &sc, &m);
            const int e = scale_entry(r, j), f = min_entry(r, j);
            out->lo[e] |= (uint8_t)(sc & 15);
            out->lo[f] |= (uint8_t)((m & 15) << 4);
            out->hi[e % 32] |= (uint8_t)((sc >> 4) << (e < 32 ? 0 : 2));
            out->hi[f % 32] |= (uint8_t)((m >> 4) << (f < 32 ? 4 : 6));
        }
        for (int k = 0; k < 4; k++)
            for (int g = 0; g < 8; g++) memcpy(&out->qs[256 * k + 32 * g + 4 * r], &in[r]->qs[32 * k + 4 * g], 4);
    }
}

void rlx__repack(int type, const void *src, int64_t N, int64_t K, void *dst)
{
    if (!rlx__repack_bytes(type, N, K)) return;
    if (type == RLX_Q8_0) {
        const int64_t R = rlx__repack_rows(type), nb = K / RLX_QK;
        const rlx_block_q8_0 *w = src;
        rlx_block_q8_0 *out = dst;
        for (int64_t q = 0; q < N / R; q++)
            for (int64_t i = 0; i < nb; i++)
                for (int64_t r = 0; r < R; r++) out[(q * nb + i) * R + r] = w[(q * R + r) * nb + i];
        return;
    }
    const int64_t nb = K / RLX_QK_K;
    const rlx_block_q4_k *w = src;
    rlx_block_q4_k_x8 *out = dst;
    for (int64_t q = 0; q < N / 8; q++)
        for (int64_t i = 0; i < nb; i++) {
            const rlx_block_q4_k *in[8];
            for (int r = 0; r < 8; r++) in[r] = &w[(8 * q + r) * nb + i];
            pack_q4_k(in, &out[q * nb + i]);
        }
}

void rlx__unpack_row(int type, const void *packed, int64_t n, int64_t K, void *dst)
{
    if (type == RLX_Q8_0 && rlx__repack_rows(type)) {
        const int64_t R = rlx__repack_rows(type), nb = K / RLX_QK;
        for (int64_t i = 0; i < nb; i++)
            ((rlx_block_q8_0 *)dst)[i] = ((const rlx_block_q8_0 *)packed)[((n / R) * nb + i) * R + n % R];
        return;
    }
    if (type != RLX_Q4_K) return;
    const int64_t nb = K / RLX_QK_K;
    const int r = (int)(n % 8);
    for (int64_t i = 0; i < nb; i++) {
        const rlx_block_q4_k_x8 *b = &((const rlx_block_q4_k_x8 *)packed)[(n / 8) * nb + i];
        rlx_block_q4_k *o = &((rlx_block_q4_k *)dst)[i];
        memcpy(&o->d, &b->d[r], 2);
        memcpy(&o->dmin, &b->dmin[r], 2);
        memset(o->scales, 0, sizeof o->scales);
        for (int j = 0; j < 8; j++) {
            const int e = scale_entry(r, j), f = min_entry(r, j);
            const int sc = (b->lo[e] & 15) | (((b->hi[e % 32] >> (e < 32 ? 0 : 2)) & 3) << 4);
            const int m = (b->lo[f] >> 4) | (((b->hi[f % 32] >> (f < 32 ? 4 : 6)) & 3) << 4);
            /* ggml's packing of eight 6-bit scales and mins into 12 bytes */
            if (j < 4) {
                o->scales[j] |= (uint8_t)sc;
                o->scales[j + 4] |= (uint8_t)m;
            } else {
                o->scales[j + 4] = (uint8_t)((sc & 15) | ((m & 15) << 4));
                o->scales[j - 4] |= (uint8_t)((sc >> 4) << 6);
                o->scales[j] |= (uint8_t)((m >> 4) << 6);
            }
        }
        for (int k = 0; k < 4; k++)
            for (int g = 0; g < 8; g++) memcpy(&o->qs[32 * k + 4 * g], &b->qs[256 * k + 32 * g + 4 * r], 4);
    }
}

rlx_packed_fn rlx__cpu_packed_fn(int type)
{
    /* RLX_CPU_REPACK=0 keeps every weight in the GGUF layout (as llama.cpp's --no-repack) */
    const char *env = getenv("RLX_CPU_REPACK");
    if ((type != RLX_Q4_K && type != RLX_Q8_0) || (env && !strcmp(env, "0"))) return NULL;
#if defined(__x86_64__)
    const char *p = rlx_cpu_path();
    if (type == RLX_Q8_0) {
        if (!strcmp(p, "avx2")) return rlx_cpu_has_avxvnni() ? rlx__avx2vnni_matmul_q8_0_packed : rlx__avx2_matmul_q8_0_packed;
        if (!strcmp(p, "avx2-novnni")) return rlx__avx2_matmul_q8_0_packed;
        if (!strcmp(p, "avx512")) return rlx_cpu_has_vnni() ? rlx__avx512vnni_matmul_q8_0_packed : rlx__avx512_matmul_q8_0_packed;
        if (!strcmp(p, "avx512-novnni")) return rlx__avx512_matmul_q8_0_packed;
        return NULL;
    }
    if (!strcmp(p, "avx2")) return rlx_cpu_has_avxvnni() ? rlx__avx2vnni_matmul_q4_k_x8 : rlx__avx2_matmul_q4_k_x8;
    if (!strcmp(p, "avx2-novnni")) return rlx__avx2_matmul_q4_k_x8;
    if (!strcmp(p, "avx512")) return rlx_cpu_has_vnni() ? rlx__avx512vnni_matmul_q4_k_x8 : rlx__avx512_matmul_q4_k_x8;
    if (!strcmp(p, "avx512-novnni")) return rlx__avx512_matmul_q4_k_x8;
#endif
    return NULL;
}

/* Transparent huge pages for anonymous memory on request: "always" or "madvise" chosen in
 * /sys/kernel/mm/transparent_hugepage/enabled (the chosen one is in brackets). Read once per
 * process (a plan asks for every weight; racing first callers read the same answer). */
static bool thp_usable(void)
{
    static atomic_int known = -1;
    int v = atomic_load(&known);
    if (v < 0) {
        char line[128];
        v = rlx__read_line("/sys/kernel/mm/transparent_hugepage/enabled", line, sizeof line) &&
            (strstr(line, "[always]") || strstr(line, "[madvise]"));
        atomic_store(&known, v);
    }
    return v;
}

bool rlx__repack_wanted(int type)
{
    if (!rlx__cpu_packed_fn(type)) return false;
    if (type != RLX_Q8_0) return true;
    const char *env = getenv("RLX_CPU_REPACK");
    return (env && !strcmp(env, "1")) || thp_usable();
}

int rlx__repack_plan(const rlx_plan *plan, rlx_packed_weight **out, size_t *bytes, rlx_error *err)
{
    const rlx_graph *g = plan->graph;
    *out = NULL;
    *bytes = 0;
    /* 1: the weight operand of a matmul; 2: read otherwise (GET_ROWS of tied embeddings, ...) */
    uint8_t *use = calloc((size_t)RLX_MAX(g->n_tensors, 1), 1);
    if (!use) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    for (int i = 0; i < plan->n_steps; i++) {
        const rlx_step *s = &plan->steps[i];
        for (int k = 0; k < RLX_NODE_MAX_IN; k++)
            if (s->node.in[k] >= 0) use[s->node.in[k]] |= s->node.op == RLX_OP_MATMUL && k == 1 ? 1 : 2;
        for (int k = 0; k < s->n_chain; k++)
            if (s->chain[k].operand >= 0) use[s->chain[k].operand] |= 2;
    }
    /* which weights, where in the arena (64-byte aligned), how many bytes in all */
    size_t *off = calloc((size_t)RLX_MAX(g->n_tensors, 1), sizeof *off), total = 0;
    rlx_packed_weight *p = calloc((size_t)g->n_tensors + 1, sizeof *p);
    if (!off || !p) {
        free(use);
        free(off);
        free(p);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    }
    for (int t = 0; t < g->n_tensors; t++) {
        const rlx_gtensor *w = &g->tensors[t];
        const size_t n = w->is_weight && use[t] == 1 && rlx__repack_wanted(w->wtype)
                             ? rlx__repack_bytes(w->wtype, w->ne[1], w->ne[0]) : 0;
        if (!n) continue;
        p[t].fn = rlx__cpu_packed_fn(w->wtype);
        off[t] = total;
        total += (n + 63) & ~(size_t)63;
    }
    free(use);
    if (!total) {
        free(off);
        free(p);
        return 0;
    }
    /* One allocation in 2 MiB huge pages where the kernel gives them (MADV_HUGEPAGE before the
     * first write). On the hosts measured, decode from packed copies in 4 KiB anonymous pages ran
     * slower than from the file's own pages, and faster in huge pages (bench/RESULTS.md 73). */
    const size_t huge = 2u << 20, size = (total + huge - 1) & ~(huge - 1);
    uint8_t *arena = aligned_alloc(huge, size);
    if (!arena) {
        free(off);
        free(p);
        return rlx_errorf(err, RLX_ENOMEM, "cannot allocate %zu MiB for the packed weights", size >> 20);
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(arena, size, MADV_HUGEPAGE); /* a hint: failure changes nothing */
#endif
    p[g->n_tensors].data = arena;
    for (int t = 0; t < g->n_tensors; t++) {
        const rlx_gtensor *w = &g->tensors[t];
        if (!p[t].fn) continue;
        p[t].data = arena + off[t];
        rlx__repack(w->wtype, w->data, w->ne[1], w->ne[0], p[t].data);
        *bytes += rlx__repack_bytes(w->wtype, w->ne[1], w->ne[0]);
        /* the GGUF copy is not read again: give its whole pages back (a file mapping's are
         * dropped and would be read again from the file; failure changes nothing) */
        const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = ((uintptr_t)w->data + pg - 1) & ~(pg - 1);
        const uintptr_t e = ((uintptr_t)w->data + rlx_row_bytes(w->wtype, w->ne[0]) * (size_t)w->ne[1]) & ~(pg - 1);
#ifdef MADV_PAGEOUT
        if (e > a) (void)madvise((void *)a, e - a, MADV_PAGEOUT);
#endif
    }
    free(off);
    *out = p;
    return 0;
}

void rlx__repack_free(rlx_packed_weight *p, int n)
{
    if (p) free(p[n].data); /* the arena: every copy lives in it */
    free(p);
}
