/* ops.c - the op table: name, inputs, fusion properties, parameter size and the compile-time
 * check of every built-in op, and the run-time registration of further ops (graph.h). */
#include "backends/graph.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* ---- validation of built-in ops (called by rlx_compile once inputs are known to exist) ---- */

static int v_get_rows(const rlx_graph *g, const rlx_node *n, rlx_error *err)
{
    const rlx_gtensor *a = &g->tensors[n->in[0]];
    const rlx_dtype_info *ti = rlx_dtype_get(a->wtype);
    if (!a->is_weight || !ti || !ti->computable)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "get_rows on '%s': not a weight of a supported type", a->name ? a->name : "?");
    return 0;
}

static int v_matmul(const rlx_graph *g, const rlx_node *n, rlx_error *err)
{
    const rlx_gtensor *a = &g->tensors[n->in[0]], *w = &g->tensors[n->in[1]];
    if (!w->is_weight) return rlx_errorf(err, RLX_EINVAL, "node %d: matmul needs a weight", (int)(n - g->nodes));
    const rlx_dtype_info *ti = rlx_dtype_get(w->wtype);
    if (!ti || !ti->computable)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "tensor '%s': type %s has no matmul kernel", w->name, ti ? ti->name : "unknown");
    if (a->cols != w->ne[0])
        return rlx_errorf(err, RLX_EINVAL, "matmul with '%s': input has %lld columns, weight rows have %lld", w->name,
                          (long long)a->cols, (long long)w->ne[0]);
    if (w->ne[0] % ti->block_elems)
        return rlx_errorf(err, RLX_EINVAL, "tensor '%s': row of %lld is not a multiple of the %s block (%d)", w->name,
                          (long long)w->ne[0], ti->name, ti->block_elems);
    return 0;
}

/* the second operand of ADD / MUL (a's columns) and HEAD_NORM (head_dim columns) */
static int v_operand(const rlx_graph *g, const rlx_node *n, rlx_error *err)
{
    const rlx_gtensor *a = &g->tensors[n->in[0]], *b = &g->tensors[n->in[1]];
    int64_t need = n->op == RLX_OP_HEAD_NORM ? n->p.norm.head_dim : a->cols;
    if (n->op == RLX_OP_HEAD_NORM && (need <= 0 || a->cols % need))
        return rlx_errorf(err, RLX_EINVAL, "node %d (head_norm): %lld columns are not whole heads of %lld",
                          (int)(n - g->nodes), (long long)a->cols, (long long)need);
    if (b->cols != need || (b->rows != RLX_ROWS_ONE && b->rows != a->rows))
        return rlx_errorf(err, RLX_EINVAL, "node %d (%s): operand shapes differ (%lld vs %lld columns)", (int)(n - g->nodes),
                          rlx_op_name(n->op), (long long)a->cols, (long long)b->cols);
    if (b->is_weight && (b->wtype != RLX_F32 || b->ne[1] != 1))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "tensor '%s': elementwise operands must be F32 vectors", b->name);
    return 0;
}

static int v_attention(const rlx_graph *g, const rlx_node *n, rlx_error *err)
{
    const rlx_attn_params *p = &n->p.attn;
    if (p->layer < 0 || p->layer >= g->n_layers || p->n_head_kv <= 0 || p->n_head % p->n_head_kv)
        return rlx_errorf(err, RLX_EINVAL, "node %d: attention geometry is inconsistent", (int)(n - g->nodes));
    const rlx_mem_layer m = rlx_graph_layer_mem(g, p->layer);
    const int64_t kv_cols = (int64_t)p->n_head_kv * p->head_dim;
    if (m.kind == RLX_MEM_NONE) {
        /* no cache: K and V are this step's rows (graph.h) */
        if (p->mask != RLX_ATTN_BIDIRECTIONAL)
            return rlx_errorf(err, RLX_EINVAL, "node %d: attention of layer %d keeps no KV cache, so it must be bidirectional",
                              (int)(n - g->nodes), p->layer);
        if (g->tensors[n->in[1]].cols != kv_cols || g->tensors[n->in[2]].cols != kv_cols ||
            g->tensors[n->in[0]].cols != (int64_t)p->n_head * p->head_dim)
            return rlx_errorf(err, RLX_EINVAL, "node %d: attention geometry is inconsistent", (int)(n - g->nodes));
    } else if (m.kind != RLX_MEM_KV || g->tensors[n->in[1]].cols != m.kv_cols) {
        return rlx_errorf(err, RLX_EINVAL, "node %d: attention geometry is inconsistent", (int)(n - g->nodes));
    }
    if (p->mask != RLX_ATTN_CAUSAL && p->mask != RLX_ATTN_BIDIRECTIONAL)
        return rlx_errorf(err, RLX_EINVAL, "node %d: attention mask %d is unknown", (int)(n - g->nodes), (int)p->mask);
    if (p->mask == RLX_ATTN_BIDIRECTIONAL && p->window)
        return rlx_errorf(err, RLX_EINVAL, "node %d: bidirectional attention takes no sliding window", (int)(n - g->nodes));
    return 0;
}

static int v_cols(const rlx_graph *g, const rlx_node *n, rlx_error *err)
{
    const rlx_cols_params *p = &n->p.cols;
    const int64_t in = g->tensors[n->in[0]].cols;
    if (p->groups <= 0 || p->width <= 0 || p->offset < 0 || p->stride < 0 ||
        (int64_t)(p->groups - 1) * p->stride + p->offset + p->width > in ||
        g->tensors[n->out].cols != (int64_t)p->groups * p->width)
        return rlx_errorf(err, RLX_EINVAL, "node %d (cols): %d slices of %d at stride %d + %d do not fit %lld columns",
                          (int)(n - g->nodes), p->groups, p->width, p->stride, p->offset, (long long)in);
    return 0;
}

/* the layer of a recurrent op: a state slot of at least `floats` floats */
static int v_state_layer(const rlx_graph *g, const rlx_node *n, int32_t layer, int64_t floats, rlx_error *err)
{
    if (layer < 0 || layer >= g->n_layers || rlx_graph_layer_mem(g, layer).kind != RLX_MEM_STATE ||
        rlx_graph_layer_mem(g, layer).state_bytes < floats * 4)
        return rlx_errorf(err, RLX_EINVAL, "node %d (%s): layer %d is not a recurrent-state layer of at least %lld bytes",
                          (int)(n - g->nodes), rlx_op_name(n->op), layer, (long long)floats * 4);
    if (g->tensors[n->in[0]].rows != RLX_ROWS_TOKENS)
        return rlx_errorf(err, RLX_EINVAL, "node %d (%s): needs one row per batch token", (int)(n - g->nodes), rlx_op_name(n->op));
    return 0;
}

static int v_ssm_conv(const rlx_graph *g, const rlx_node *n, rlx_error *err)
{
    const rlx_ssm_conv_params *p = &n->p.conv;
    const rlx_gtensor *x = &g->tensors[n->in[0]], *w = &g->tensors[n->in[1]];
    if (p->kernel < 1 || p->kernel > 64 || p->channels <= 0 || p->conv_off < RLX_SSM_HEADER || x->cols != p->channels ||
        g->tensors[n->out].cols != p->channels)
        return rlx_errorf(err, RLX_EINVAL, "node %d (ssm_conv): geometry is inconsistent", (int)(n - g->nodes));
    if (!w->is_weight || w->wtype != RLX_F32 || w->ne[0] != p->kernel || w->ne[1] != p->channels)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "node %d (ssm_conv): the weight '%s' must be F32 of ne {%d, %d}", (int)(n - g->nodes),
                          w->name ? w->name : "?", p->kernel, p->channels);
    /* the layer's DELTA_NET advances the position the state stands at (backends/cpu/ssm.c) */
    bool delta = false;
    for (const rlx_node *m = n + 1; m < g->nodes + g->n_nodes && !delta; m++)
        delta = m->op == RLX_OP_DELTA_NET && m->p.delta.layer == p->layer;
    if (!delta)
        return rlx_errorf(err, RLX_EINVAL, "node %d (ssm_conv): layer %d has no delta_net after it to advance its state",
                          (int)(n - g->nodes), p->layer);
    return v_state_layer(g, n, p->layer, (int64_t)p->conv_off + (int64_t)(p->kernel - 1) * p->channels, err);
}

static int v_delta_net(const rlx_graph *g, const rlx_node *n, rlx_error *err)
{
    const rlx_delta_params *p = &n->p.delta;
    const rlx_gtensor *x = &g->tensors[n->in[0]], *ga = &g->tensors[n->in[1]], *be = &g->tensors[n->in[2]];
    if (p->n_k_heads <= 0 || p->n_v_heads <= 0 || p->n_v_heads % p->n_k_heads || p->head_k <= 0 || p->head_v <= 0 ||
        p->head_k > 512 || p->head_v > 512 ||
        p->state_off < RLX_SSM_HEADER || x->cols != 2 * (int64_t)p->n_k_heads * p->head_k + (int64_t)p->n_v_heads * p->head_v ||
        ga->cols != p->n_v_heads || be->cols != p->n_v_heads || ga->is_weight || be->is_weight || ga->rows != x->rows ||
        be->rows != x->rows || g->tensors[n->out].cols != (int64_t)p->n_v_heads * p->head_v)
        return rlx_errorf(err, RLX_EINVAL, "node %d (delta_net): geometry is inconsistent", (int)(n - g->nodes));
    return v_state_layer(g, n, p->layer, (int64_t)p->state_off + (int64_t)p->n_v_heads * p->head_k * p->head_v, err);
}

#define EW(nm, nin, code, psz) {.name = nm, .n_in = nin, .elementwise = true, .ew = code, .epilogue = true, .in_place = true, \
                                .param_size = psz, .validate = (nin) == 2 ? v_operand : NULL}

static const rlx_op_info builtin[RLX_OP_COUNT] = {
    [RLX_OP_NONE] = {.name = "none"},
    [RLX_OP_GET_ROWS] = {.name = "get_rows", .n_in = 1, .epilogue = true, .param_size = sizeof(rlx_scalar_params),
                         .validate = v_get_rows},
    [RLX_OP_RMS_NORM] = {.name = "rms_norm", .n_in = 1, .epilogue = true, .in_place = true, .param_size = sizeof(rlx_norm_params)},
    [RLX_OP_HEAD_NORM] = {.name = "head_norm", .n_in = 2, .epilogue = true, .in_place = true,
                          .param_size = sizeof(rlx_norm_params), .validate = v_operand},
    [RLX_OP_MATMUL] = {.name = "matmul", .n_in = 2, .epilogue = true, .validate = v_matmul},
    [RLX_OP_ADD] = EW("add", 2, RLX_EW_ADD, 0),
    [RLX_OP_MUL] = EW("mul", 2, RLX_EW_MUL, 0),
    [RLX_OP_SILU] = EW("silu", 1, RLX_EW_SILU, sizeof(rlx_scalar_params)),
    [RLX_OP_GELU] = EW("gelu", 1, RLX_EW_GELU, sizeof(rlx_scalar_params)),
    [RLX_OP_SCALE] = EW("scale", 1, RLX_EW_SCALE, sizeof(rlx_scalar_params)),
    [RLX_OP_SOFTCAP] = EW("softcap", 1, RLX_EW_SOFTCAP, sizeof(rlx_scalar_params)),
    [RLX_OP_ROPE] = {.name = "rope", .n_in = 2, .optional = 1u << 1, .in_place = true, .param_size = sizeof(rlx_rope_params)},
    [RLX_OP_ATTENTION] = {.name = "attention", .n_in = 3, .param_size = sizeof(rlx_attn_params), .validate = v_attention},
    [RLX_OP_GATHER] = {.name = "gather", .n_in = 1},
    [RLX_OP_SIGMOID] = EW("sigmoid", 1, RLX_EW_SIGMOID, sizeof(rlx_scalar_params)),
    [RLX_OP_SOFTPLUS] = EW("softplus", 1, RLX_EW_SOFTPLUS, sizeof(rlx_scalar_params)),
    [RLX_OP_COLS] = {.name = "cols", .n_in = 1, .epilogue = true, .param_size = sizeof(rlx_cols_params), .validate = v_cols},
    [RLX_OP_SSM_CONV] = {.name = "ssm_conv", .n_in = 2, .epilogue = true, .param_size = sizeof(rlx_ssm_conv_params),
                         .validate = v_ssm_conv},
    [RLX_OP_DELTA_NET] = {.name = "delta_net", .n_in = 3, .param_size = sizeof(rlx_delta_params), .validate = v_delta_net},
    [RLX_OP_GET_ROWS_POS] = {.name = "get_rows_pos", .n_in = 1, .epilogue = true, .param_size = sizeof(rlx_scalar_params),
                             .validate = v_get_rows},
    [RLX_OP_NORM] = {.name = "norm", .n_in = 1, .epilogue = true, .in_place = true, .param_size = sizeof(rlx_norm_params)},
};

/* registered ops: entries [RLX_OP_COUNT, n_ops) are immutable once n_ops covers them */
static rlx_op_info registered[RLX_OP_MAX - RLX_OP_COUNT];
static _Atomic int n_ops = RLX_OP_COUNT;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

const rlx_op_info *rlx_op_get(rlx_op op)
{
    if ((int)op < 0) return NULL;
    if (op < RLX_OP_COUNT) return &builtin[op];
    return (int)op < atomic_load_explicit(&n_ops, memory_order_acquire) ? &registered[op - RLX_OP_COUNT] : NULL;
}

const char *rlx_op_name(rlx_op op)
{
    const rlx_op_info *i = rlx_op_get(op);
    return i && i->name ? i->name : "?";
}

int rlx_op_register(const rlx_op_info *info, rlx_op *id, rlx_error *err)
{
    if (!info || !info->name || !*info->name || info->n_in < 1 || info->n_in > RLX_NODE_MAX_IN ||
        info->param_size > RLX_OP_PARAMS_MAX || (info->optional & 1u) || info->elementwise || info->epilogue)
        return rlx_errorf(err, RLX_EINVAL, "op '%s': a registered op takes 1 to %d inputs (the first required), at most %d "
                          "bytes of parameters, and is not fusable", info && info->name ? info->name : "?",
                          RLX_NODE_MAX_IN, RLX_OP_PARAMS_MAX);
    pthread_mutex_lock(&reg_lock);
    int n = atomic_load_explicit(&n_ops, memory_order_relaxed), rc = 0;
    for (int i = 0; i < n && !rc; i++)
        if (!strcmp(rlx_op_name((rlx_op)i), info->name))
            rc = rlx_errorf(err, RLX_EINVAL, "op '%s' is already in the op table", info->name);
    if (!rc && n == RLX_OP_MAX) rc = rlx_errorf(err, RLX_ENOMEM, "op '%s': the op table is full (%d ops)", info->name, RLX_OP_MAX);
    if (!rc) {
        registered[n - RLX_OP_COUNT] = *info;
        *id = (rlx_op)n;
        atomic_store_explicit(&n_ops, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&reg_lock);
    return rc;
}
