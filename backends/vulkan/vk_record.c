/* vk_record.c - turns one plan step into compute dispatches: fills the step's parameter slot,
 * binds its buffers (tensors at arbitrary arena offsets are bound at the device's alignment
 * and addressed with an element offset; weights larger than maxStorageBufferRange are bound
 * in row ranges, one dispatch each), and puts a barrier after each dispatch.
 * Elementwise chains longer than the four operand bindings continue in place with ew passes. */
#include "backends/vulkan/vk_internal.h"
#include "backends/quant.h"

#include <string.h>

#define CH 48
#define MAX_OPERANDS 4
#define MM_TILE 8u

typedef struct vk_bind { vk_buffer *b; VkDeviceSize off, size; int tensor; /* for messages; -1 none */ } vk_bind;

typedef struct vk_disp {
    int pl;
    VkPipeline pipe;         /* a KV variant (instead of pl) */
    uint32_t P[VK_PARAM_WORDS];
    vk_bind bind[VK_N_BINDINGS];
    uint32_t g[3];
} vk_disp;

int64_t rlx__vk_rows(const vk_backend *be, int t)
{
    const rlx_gtensor *x = &be->plan->graph->tensors[t];
    if (x->is_weight || x->rows == RLX_ROWS_ONE) return 1;
    return x->rows == RLX_ROWS_TOKENS ? be->cur_tokens : be->cur_outputs;
}

static int64_t max_rows(const vk_backend *be, int t)
{
    const rlx_gtensor *x = &be->plan->graph->tensors[t];
    if (x->is_weight) return x->ne[1];
    return x->rows == RLX_ROWS_TOKENS ? be->plan->max_tokens : x->rows == RLX_ROWS_OUTPUTS ? be->plan->max_outputs : 1;
}

/* Binds [off, off + size) of b at binding i; returns the byte distance from the bound start. */
static uint32_t bind_range(vk_backend *be, vk_disp *ds, int i, vk_buffer *b, VkDeviceSize off, VkDeviceSize size)
{
    VkDeviceSize start = off & ~(be->d.align - 1);
    /* whole words: shaders read weights as uint[], and a word only partly inside the range
     * would read as 0 (buffers are allocated in multiples of 16 bytes, so this stays inside) */
    VkDeviceSize range = (off - start + size + 3) & ~(VkDeviceSize)3;
    if (start + range > b->size) range = b->size - start;
    ds->bind[i] = (vk_bind){b, start, range, -1};
    return (uint32_t)(off - start);
}

/* Binds tensor t (activation or weight, whole) at binding i; returns its element offset. */
static uint32_t bind_tensor(vk_backend *be, vk_disp *ds, int i, int t)
{
    const rlx_gtensor *x = &be->plan->graph->tensors[t];
    if (x->is_weight) {
        size_t bytes = rlx_row_bytes(x->wtype, x->ne[0]) * (size_t)x->ne[1];
        return bind_range(be, ds, i, &be->slabs[be->w_slab[t]], be->w_off[t], bytes) / 4;
    }
    VkDeviceSize bytes = (VkDeviceSize)max_rows(be, t) * (VkDeviceSize)x->cols * 4;
    uint32_t e = bind_range(be, ds, i, &be->arena, (VkDeviceSize)be->plan->offset[t], bytes) / 4;
    ds->bind[i].tensor = t;
    return e;
}

/* Every binding within maxStorageBufferRange; checked while prepare() counts dispatches, so a
 * plan whose largest batch cannot be bound fails at model load with what to change. */
static int check_ranges(const vk_backend *be, const vk_disp *ds, rlx_error *err)
{
    for (int i = 0; i < VK_N_BINDINGS; i++) {
        const vk_bind *bd = &ds->bind[i];
        if (!bd->b || bd->size <= be->d.max_range) continue;
        unsigned long long mib = (unsigned long long)(bd->size >> 20), lim = (unsigned long long)(be->d.max_range >> 20);
        if (bd->tensor < 0)
            return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: a buffer range of %llu MiB exceeds this device's storage-buffer "
                              "range (%llu MiB)", mib, lim);
        const rlx_gtensor *x = &be->plan->graph->tensors[bd->tensor];
        bool outs = x->rows == RLX_ROWS_OUTPUTS;
        long long fit = (long long)(be->d.max_range / ((VkDeviceSize)x->cols * 4));
        return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: an activation of %lld rows x %lld values (%llu MiB) exceeds this "
                          "device's storage-buffer range (%llu MiB); at most %lld rows fit: lower %s", (long long)max_rows(be, bd->tensor),
                          (long long)x->cols, mib, lim, fit, outs ? be->plan->outputs_hint : be->plan->tokens_hint);
    }
    return 0;
}

static void grid_flat(vk_disp *ds, uint64_t invocations)
{
    uint64_t groups = (invocations + 63) / 64;
    if (groups == 0) groups = 1;
    ds->g[0] = (uint32_t)(groups < 65535 ? groups : 65535);
    ds->g[1] = (uint32_t)((groups + ds->g[0] - 1) / ds->g[0]);
    ds->g[2] = 1;
}

static int emit(vk_backend *be, vk_disp *ds, rlx_error *err)
{
    int rc = check_ranges(be, ds, err);
    if (rc) return rc;
    if (be->counting) { be->slot++; return 0; }
    if (be->slot >= be->n_slots) return rlx_errorf(err, RLX_EINVAL, "Vulkan: the plan needs more dispatches than prepared");
    for (int k = 0; k < 3; k++)
        if (ds->g[k] == 0) return 0; /* nothing to do (e.g. no outputs) */
    vk_shape *sh = be->rec;
    memcpy(&ds->P[40], be->batch_words, sizeof be->batch_words);
    ds->P[40 + VK_BW_TOKENS] = (uint32_t)be->cur_tokens;
    ds->P[40 + VK_BW_OUTPUTS] = (uint32_t)be->cur_outputs;
    VkDeviceSize poff = (VkDeviceSize)be->slot * be->slot_bytes;
    memcpy((uint8_t *)sh->params.map + poff, ds->P, sizeof ds->P);
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, .descriptorPool = sh->pool,
                                      .descriptorSetCount = 1, .pSetLayouts = &be->d.dsl};
    VkDescriptorSet set;
    if ((rc = rlx__vk_check(vkAllocateDescriptorSets(be->d.dev, &ai, &set), "vkAllocateDescriptorSets", err))) return rc;
    ds->bind[VK_B_PARAMS] = (vk_bind){&sh->params, poff, sizeof ds->P, -1};
    ds->bind[VK_B_BATCH] = (vk_bind){&be->batch, 0, be->batch.size, -1};
    VkDescriptorBufferInfo bi[VK_N_BINDINGS];
    VkWriteDescriptorSet w[VK_N_BINDINGS];
    for (int i = 0; i < VK_N_BINDINGS; i++) {
        vk_bind *bd = &ds->bind[i];
        if (!bd->b) *bd = (vk_bind){&be->dummy, 0, be->dummy.size, -1};
        if (bd->size > be->d.max_range) bd->size = be->d.max_range; /* the batch buffer: read within the range */
        bi[i] = (VkDescriptorBufferInfo){bd->b->buf, bd->off, bd->size};
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set, .dstBinding = (uint32_t)i,
                                      .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &bi[i]};
    }
    vkUpdateDescriptorSets(be->d.dev, VK_N_BINDINGS, w, 0, NULL);
    vkCmdBindPipeline(sh->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, ds->pipe ? ds->pipe : be->pl[ds->pl]);
    vkCmdBindDescriptorSets(sh->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, be->d.layout, 0, 1, &set, 0, NULL);
    vkCmdDispatch(sh->cmd, ds->g[0], ds->g[1], ds->g[2]);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(sh->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    be->slot++;
    return 0;
}

static void disp_init(vk_disp *ds, int pl)
{
    memset(ds, 0, sizeof *ds);
    ds->pl = pl;
    for (int i = 0; i < VK_N_BINDINGS; i++) ds->bind[i].tensor = -1;
}

/* Puts chain entries e[0..n) into ds's parameter block, as many as the operand bindings
 * allow; returns how many were taken. */
static int set_chain(vk_backend *be, vk_disp *ds, int t, const rlx_ew *e, int n)
{
    int used[MAX_OPERANDS], n_used = 0, k;
    ds->P[CH + 33] = (uint32_t)be->plan->graph->tensors[t].cols; /* SiLU's vector/libm split */
    for (k = 0; k < n && k < 8; k++) {
        uint32_t slot = 0;
        if (e[k].op == RLX_EW_ADD || e[k].op == RLX_EW_MUL) {
            int j;
            for (j = 0; j < n_used && used[j] != e[k].operand; j++) {}
            if (j == n_used) {
                if (n_used == MAX_OPERANDS) break;
                const rlx_gtensor *x = &be->plan->graph->tensors[e[k].operand];
                used[n_used] = e[k].operand;
                ds->P[CH + 25 + n_used] = bind_tensor(be, ds, VK_B_OP0 + n_used, e[k].operand);
                ds->P[CH + 29 + n_used] = (x->is_weight || x->rows == RLX_ROWS_ONE) ? 0u : (uint32_t)x->cols;
                n_used++;
            }
            slot = (uint32_t)j;
        }
        ds->P[CH + 1 + k] = (uint32_t)e[k].op;
        memcpy(&ds->P[CH + 9 + k], &e[k].p, 4);
        ds->P[CH + 17 + k] = slot;
    }
    ds->P[CH] = (uint32_t)k;
    return k;
}

/* Applies e[0..n) in place on tensor t with ew passes. */
static int chain_passes(vk_backend *be, int t, const rlx_ew *e, int n, rlx_error *err)
{
    const rlx_gtensor *x = &be->plan->graph->tensors[t];
    while (n > 0) {
        vk_disp ds;
        disp_init(&ds, PL_EW);
        uint32_t rows = (uint32_t)rlx__vk_rows(be, t);
        ds.P[0] = rows;
        ds.P[1] = (uint32_t)x->cols;
        ds.P[2] = bind_tensor(be, &ds, VK_B_IN0, t);
        ds.P[3] = bind_tensor(be, &ds, VK_B_OUT, t);
        int k = set_chain(be, &ds, t, e, n);
        grid_flat(&ds, (uint64_t)rows * (uint64_t)x->cols);
        int rc = emit(be, &ds, err);
        if (rc) return rc;
        e += k;
        n -= k;
    }
    return 0;
}

/* The head's dispatch took `taken` chain entries; the rest run as ew passes. */
static int finish_chain(vk_backend *be, const rlx_step *s, int taken, rlx_error *err)
{
    return chain_passes(be, s->out, s->chain + taken, s->n_chain - taken, err);
}

static int rec_elementwise(vk_backend *be, const rlx_step *s, rlx_error *err)
{
    rlx_ew all[RLX_MAX_CHAIN + 1];
    all[0] = rlx_ew_of_node(&s->node);
    memcpy(all + 1, s->chain, (size_t)s->n_chain * sizeof *all);
    int n = s->n_chain + 1;
    const rlx_gtensor *x = &be->plan->graph->tensors[s->out];
    vk_disp ds;
    disp_init(&ds, PL_EW);
    uint32_t rows = (uint32_t)rlx__vk_rows(be, s->out);
    ds.P[0] = rows;
    ds.P[1] = (uint32_t)x->cols;
    ds.P[2] = bind_tensor(be, &ds, VK_B_IN0, s->node.in[0]);
    ds.P[3] = bind_tensor(be, &ds, VK_B_OUT, s->out);
    int k = set_chain(be, &ds, s->out, all, n);
    grid_flat(&ds, (uint64_t)rows * (uint64_t)x->cols);
    int rc = emit(be, &ds, err);
    return rc ? rc : chain_passes(be, s->out, all + k, n - k, err);
}

static int rec_norm(vk_backend *be, const rlx_step *s, rlx_error *err)
{
    const rlx_gtensor *x = &be->plan->graph->tensors[s->out];
    bool head = s->node.op == RLX_OP_HEAD_NORM;
    vk_disp ds;
    disp_init(&ds, PL_RMS);
    ds.P[7] = s->node.op == RLX_OP_NORM; /* layer norm: mean and variance */
    ds.P[0] = (uint32_t)x->cols;
    ds.P[1] = bind_tensor(be, &ds, VK_B_IN0, s->node.in[0]);
    ds.P[2] = bind_tensor(be, &ds, VK_B_OUT, s->out);
    memcpy(&ds.P[3], &s->node.p.norm.eps, 4);
    ds.P[4] = head ? (uint32_t)s->node.p.norm.head_dim : (uint32_t)x->cols;
    ds.P[5] = head;
    if (head) ds.P[6] = bind_tensor(be, &ds, VK_B_IN1, s->node.in[1]);
    int k = set_chain(be, &ds, s->out, s->chain, s->n_chain);
    ds.g[0] = (uint32_t)rlx__vk_rows(be, s->out);
    ds.g[1] = (uint32_t)(x->cols / ds.P[4]);
    ds.g[2] = 1;
    int rc = emit(be, &ds, err);
    return rc ? rc : finish_chain(be, s, k, err);
}

/* Rows of weight w that fit one binding. */
static int64_t rows_per_binding(const vk_backend *be, size_t row_bytes)
{
    VkDeviceSize room = be->d.max_range - be->d.align;
    int64_t rows = (int64_t)(room / row_bytes);
    return rows > 0 ? rows : 1; /* a row beyond the range is reported by emit() */
}

static int rec_get_rows(vk_backend *be, const rlx_step *s, rlx_error *err)
{
    int wt = s->node.in[0];
    const rlx_gtensor *w = &be->plan->graph->tensors[wt];
    size_t rb = rlx_row_bytes(w->wtype, w->ne[0]);
    int64_t per = rows_per_binding(be, rb), nch = (w->ne[0] + 31) / 32;
    int k = 0;
    for (int64_t r0 = 0; r0 < w->ne[1]; r0 += per) {
        int64_t r1 = RLX_MIN(w->ne[1], r0 + per);
        vk_disp ds;
        disp_init(&ds, PL_GET_ROWS);
        ds.P[0] = (uint32_t)w->wtype;
        ds.P[1] = (uint32_t)w->ne[0];
        ds.P[2] = (uint32_t)rb;
        ds.P[3] = bind_range(be, &ds, VK_B_IN1, &be->slabs[be->w_slab[wt]], be->w_off[wt] + (VkDeviceSize)r0 * rb,
                             (VkDeviceSize)(r1 - r0) * rb);
        ds.P[4] = (uint32_t)r0;
        ds.P[5] = (uint32_t)r1;
        ds.P[6] = bind_tensor(be, &ds, VK_B_OUT, s->out);
        memcpy(&ds.P[7], &s->node.p.scalar.value, 4);
        ds.P[8] = (uint32_t)nch;
        ds.P[9] = s->node.op == RLX_OP_GET_ROWS_POS; /* rows by position, not token id */
        k = set_chain(be, &ds, s->out, s->chain, s->n_chain);
        grid_flat(&ds, (uint64_t)rlx__vk_rows(be, s->out) * (uint64_t)nch);
        int rc = emit(be, &ds, err);
        if (rc) return rc;
    }
    return finish_chain(be, s, k, err);
}

/* How the CPU converts activations before the dot product with weights of this type. */
static uint32_t actq_mode(int wtype)
{
    switch (wtype) {
    case RLX_F16: return 1;
    case RLX_BF16: return 2;
    case RLX_Q8_0: case RLX_Q4_0: return 3;
    case RLX_Q4_K: case RLX_Q5_K: case RLX_Q6_K: return 4;
    default: return 0;
    }
}

static int rec_matmul(vk_backend *be, const rlx_step *s, rlx_error *err)
{
    int xt = s->node.in[0], wt = s->node.in[1];
    const rlx_gtensor *w = &be->plan->graph->tensors[wt];
    int64_t K = w->ne[0], N = w->ne[1], T = rlx__vk_rows(be, xt);
    size_t rb = rlx_row_bytes(w->wtype, K);
    uint32_t mode = actq_mode(w->wtype), xoff;
    vk_disp ds;
    int rc;
    /* scratch: quantized activations (T x K), one scale per block (T x nbx), then for Q8_K
     * the sums of 16 values (T x K/16), computed once here instead of per weight row */
    VkDeviceSize qbytes = (VkDeviceSize)T * (VkDeviceSize)K * 4;
    uint32_t nbx = (uint32_t)(K / (mode == 4 ? 256 : 32)), nbs = mode == 4 ? (uint32_t)(K / 16) : 0;
    VkDeviceSize sbytes = qbytes + (VkDeviceSize)T * (nbx + nbs) * 4;
    /* which rows take llama.cpp's batched arithmetic (as the CPU backend's row_roles) */
    const int rows = be->plan->graph->tensors[xt].rows, rule = rlx_batched_rows(w->wtype, N, K);
    uint32_t kinds = !rule ? ~0u : rows == RLX_ROWS_TOKENS ? be->kind_off
                   : rows == RLX_ROWS_OUTPUTS ? be->kind_off + (uint32_t)be->plan->max_tokens : ~0u;
    if (mode) {
        disp_init(&ds, PL_ACTQ);
        ds.P[0] = mode;
        ds.P[1] = (uint32_t)K;
        ds.P[2] = (uint32_t)T;
        ds.P[3] = bind_tensor(be, &ds, VK_B_IN0, xt);
        ds.P[4] = bind_range(be, &ds, VK_B_OUT, &be->scratch, 0, sbytes) / 4;
        ds.P[5] = ds.P[4] + (uint32_t)(qbytes / 4);
        ds.P[8] = ds.P[5] + (uint32_t)T * nbx;
        ds.P[6] = kinds;
        ds.P[7] = (uint32_t)rule;
        int64_t bs = mode == 4 ? 256 : 32;
        grid_flat(&ds, (uint64_t)T * (uint64_t)((K + bs - 1) / bs));
        if ((rc = emit(be, &ds, err))) return rc;
    }
    int64_t per = rows_per_binding(be, rb);
    int k = 0;
    for (int64_t n0 = 0; n0 < N; n0 += per) {
        int64_t n1 = RLX_MIN(N, n0 + per);
        disp_init(&ds, PL_MATMUL);
        if (mode) xoff = bind_range(be, &ds, VK_B_IN0, &be->scratch, 0, sbytes) / 4;
        else xoff = bind_tensor(be, &ds, VK_B_IN0, xt);
        ds.P[0] = (uint32_t)w->wtype;
        ds.P[1] = (uint32_t)K;
        ds.P[2] = (uint32_t)(n1 - n0);
        ds.P[3] = (uint32_t)rb;
        ds.P[4] = bind_range(be, &ds, VK_B_IN1, &be->slabs[be->w_slab[wt]], be->w_off[wt] + (VkDeviceSize)n0 * rb,
                             (VkDeviceSize)(n1 - n0) * rb);
        ds.P[5] = (uint32_t)n0;
        ds.P[6] = (uint32_t)T;
        ds.P[7] = xoff;
        ds.P[8] = bind_tensor(be, &ds, VK_B_OUT, s->out);
        ds.P[9] = (uint32_t)N;
        ds.P[10] = xoff + (uint32_t)(qbytes / 4);
        ds.P[11] = kinds;
        ds.P[12] = (uint32_t)rule;
        ds.P[13] = ds.P[10] + (uint32_t)T * nbx;
        k = set_chain(be, &ds, s->out, s->chain, s->n_chain);
        ds.g[0] = (uint32_t)((n1 - n0 + 63) / 64);
        ds.g[1] = (uint32_t)((T + MM_TILE - 1) / MM_TILE);
        ds.g[2] = 1;
        if ((rc = emit(be, &ds, err))) return rc;
    }
    return finish_chain(be, s, k, err);
}

static int rec_rope(vk_backend *be, const rlx_step *s, rlx_error *err)
{
    const rlx_node *n = &s->node;
    const rlx_rope_params *rp = &n->p.rope;
    int tab = -1;
    for (int i = 0; i < be->n_ropes; i++) {
        const vk_rope_tab *r = &be->ropes[i];
        if (r->n_rot == rp->n_rot && r->base == rp->freq_base && r->scale == rp->freq_scale && r->ff == n->in[1]) tab = i;
    }
    if (tab < 0) return rlx_errorf(err, RLX_EINVAL, "Vulkan: rope step was not prepared");
    vk_disp ds;
    disp_init(&ds, PL_ROPE);
    ds.P[0] = (uint32_t)rp->n_heads;
    ds.P[1] = (uint32_t)rp->head_dim;
    ds.P[2] = (uint32_t)rp->n_rot;
    ds.P[3] = (uint32_t)rp->mode;
    ds.P[4] = bind_tensor(be, &ds, VK_B_IN0, n->in[0]);
    ds.P[5] = bind_tensor(be, &ds, VK_B_OUT, s->out);
    ds.P[6] = be->ropes[tab].off;
    grid_flat(&ds, (uint64_t)rlx__vk_rows(be, s->out) * (uint64_t)rp->n_heads * (uint64_t)(rp->head_dim / 2));
    return emit(be, &ds, err);
}

/* The pipeline of KV shader `which` for this pool (made on first use). */
static int kv_pipeline(vk_backend *be, int which, VkPipeline *out, rlx_error *err)
{
    const vk_kv *kv = &be->kv;
    uint32_t spec[2] = {kv->geo.type == RLX_F32 ? 0u : kv->geo.type == RLX_F16 ? 1u : 2u, kv->n_chunks > 1};
    VkPipeline *p = &be->pl_kv[which][spec[0]][spec[1]];
    int rc = *p ? 0 : rlx__vk_pipeline(&be->d, which == PL_KV_STORE ? "kv_store" : "attn", spec, 2, p, err);
    *out = *p;
    return rc;
}

/* The KV pool of `layer` at bindings VK_B_KC.. / VK_B_VC.. and its parameter words 33..35. */
static void bind_kv(vk_backend *be, vk_disp *ds, int layer)
{
    const vk_kv *kv = &be->kv;
    ds->P[33] = be->counting || !kv->row_bytes ? 0u : (uint32_t)kv->row_bytes[layer];
    ds->P[34] = (uint32_t)kv->chunk_blocks;
    ds->P[35] = (uint32_t)kv->geo.block_size;
    for (int c = 0; !be->counting && c < kv->n_chunks; c++) { /* prepare() may precede kv_init() */
        vk_buffer *k = &kv->k[layer * VK_KV_CHUNKS + c], *v = &kv->v[layer * VK_KV_CHUNKS + c];
        ds->bind[VK_B_KC + c] = (vk_bind){k, 0, k->size, -1};
        ds->bind[VK_B_VC + c] = (vk_bind){v, 0, v->size, -1};
    }
}

/* Attention of a layer without a cache (encoders): attn.comp in its F32 unsplit variant with the
 * step's K and V rows bound as the "pool" (one block of rows: slot = the sequence's first
 * token + position, word offsets 12 / 13), each row seeing its whole sequence. */
static int rec_attention_nocache(vk_backend *be, const rlx_step *s, rlx_error *err)
{
    const rlx_node *n = &s->node;
    const rlx_attn_params *ap = &n->p.attn;
    const uint32_t T = (uint32_t)rlx__vk_rows(be, n->in[0]), kvc = (uint32_t)(ap->n_head_kv * ap->head_dim);
    vk_disp ds;
    disp_init(&ds, 0);
    VkPipeline *p = &be->pl_kv[PL_KV_ATTN][0][0];
    const uint32_t spec[2] = {0u, 0u};
    int rc = be->counting || *p ? 0 : rlx__vk_pipeline(&be->d, "attn", spec, 2, p, err);
    if (rc) return rc;
    ds.pipe = *p;
    ds.P[0] = (uint32_t)ap->n_head;
    ds.P[1] = (uint32_t)(ap->n_head / ap->n_head_kv);
    ds.P[2] = (uint32_t)ap->head_dim;
    ds.P[3] = kvc;
    ds.P[4] = 0;
    memcpy(&ds.P[5], &ap->scale, 4);
    memcpy(&ds.P[6], &ap->softcap, 4);
    ds.P[8] = bind_tensor(be, &ds, VK_B_IN0, n->in[0]);
    ds.P[9] = bind_tensor(be, &ds, VK_B_OUT, s->out);
    ds.P[10] = be->kind_off;
    ds.P[11] = 1;
    ds.P[12] = bind_tensor(be, &ds, VK_B_KC, n->in[1]);
    ds.P[13] = bind_tensor(be, &ds, VK_B_VC, n->in[2]);
    ds.P[33] = kvc * 4;
    ds.P[34] = 0x7fffffffu; /* one chunk, one "block" per row */
    ds.P[35] = 1;
    ds.g[0] = (uint32_t)ap->n_head;
    ds.g[1] = T;
    ds.g[2] = 1;
    return emit(be, &ds, err);
}

static int rec_attention(vk_backend *be, const rlx_step *s, rlx_error *err)
{
    const rlx_node *n = &s->node;
    const rlx_attn_params *ap = &n->p.attn;
    int layer = ap->layer;
    if (rlx_graph_layer_mem(be->plan->graph, layer).kind == RLX_MEM_NONE) return rec_attention_nocache(be, s, err);
    uint32_t T = (uint32_t)rlx__vk_rows(be, n->in[0]), kvc = (uint32_t)rlx_graph_layer_mem(be->plan->graph, layer).kv_cols;
    if (!be->counting && (layer < 0 || layer >= be->kv.geo.n_layers || rlx_mem_desc_layer(&be->kv.geo, layer).kind != RLX_MEM_KV ||
                          rlx_mem_desc_layer(&be->kv.geo, layer).kv_cols != (int64_t)kvc))
        return rlx_errorf(err, RLX_EINVAL, "Vulkan: the KV pool (%d layers) does not fit the plan (layer %d, %u values)",
                          be->kv.geo.n_layers, layer, kvc);
    int type = be->counting ? RLX_F32 : be->kv.geo.type;
    uint32_t units = type == RLX_F32 ? kvc : type == RLX_F16 ? kvc / 2 : kvc / 32;
    vk_disp ds;
    disp_init(&ds, 0);
    int rc = be->counting ? 0 : kv_pipeline(be, PL_KV_STORE, &ds.pipe, err);
    if (rc) return rc;
    ds.P[0] = kvc;
    ds.P[2] = bind_tensor(be, &ds, VK_B_IN0, n->in[1]);
    ds.P[3] = bind_tensor(be, &ds, VK_B_IN1, n->in[2]);
    bind_kv(be, &ds, layer);
    grid_flat(&ds, (uint64_t)T * units);
    if ((rc = emit(be, &ds, err))) return rc;
    disp_init(&ds, 0);
    if (!be->counting && (rc = kv_pipeline(be, PL_KV_ATTN, &ds.pipe, err))) return rc;
    ds.P[0] = (uint32_t)ap->n_head;
    ds.P[1] = (uint32_t)(ap->n_head / ap->n_head_kv);
    ds.P[2] = (uint32_t)ap->head_dim;
    ds.P[3] = kvc;
    ds.P[4] = (uint32_t)ap->window;
    memcpy(&ds.P[5], &ap->scale, 4);
    memcpy(&ds.P[6], &ap->softcap, 4);
    ds.P[8] = bind_tensor(be, &ds, VK_B_IN0, n->in[0]);
    ds.P[9] = bind_tensor(be, &ds, VK_B_OUT, s->out);
    ds.P[10] = be->kind_off;
    bind_kv(be, &ds, layer);
    ds.g[0] = (uint32_t)ap->n_head;
    ds.g[1] = T;
    ds.g[2] = 1;
    return emit(be, &ds, err);
}

static int rec_gather(vk_backend *be, const rlx_step *s, rlx_error *err)
{
    const rlx_gtensor *x = &be->plan->graph->tensors[s->out];
    vk_disp ds;
    disp_init(&ds, PL_GATHER);
    ds.P[0] = (uint32_t)x->cols;
    ds.P[1] = bind_tensor(be, &ds, VK_B_IN0, s->node.in[0]);
    ds.P[2] = bind_tensor(be, &ds, VK_B_OUT, s->out);
    grid_flat(&ds, (uint64_t)rlx__vk_rows(be, s->out) * (uint64_t)x->cols);
    return emit(be, &ds, err);
}

int rlx__vk_record_step(vk_backend *be, const rlx_step *s, rlx_error *err)
{
    switch (s->node.op) {
    case RLX_OP_GET_ROWS: case RLX_OP_GET_ROWS_POS: return rec_get_rows(be, s, err);
    case RLX_OP_RMS_NORM: case RLX_OP_HEAD_NORM: case RLX_OP_NORM: return rec_norm(be, s, err);
    case RLX_OP_MATMUL: return rec_matmul(be, s, err);
    case RLX_OP_ROPE: return rec_rope(be, s, err);
    case RLX_OP_ATTENTION: return rec_attention(be, s, err);
    case RLX_OP_GATHER: return rec_gather(be, s, err);
    case RLX_OP_ADD: case RLX_OP_MUL: case RLX_OP_SILU: case RLX_OP_GELU: case RLX_OP_SCALE: case RLX_OP_SOFTCAP:
        return rec_elementwise(be, s, err);
    default:
        return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: no kernel for op '%s'", rlx_op_name(s->node.op));
    }
}
