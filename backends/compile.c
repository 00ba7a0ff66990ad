/* compile.c - graph -> plan: validation, fusion of elementwise chains into their producer,
 * and arena placement of activations by liveness. */
#include "backends/graph.h"
#include "backends/quant.h"

#include <stdlib.h>
#include <string.h>

static bool is_elementwise(rlx_op op)
{
    return op == RLX_OP_ADD || op == RLX_OP_MUL || op == RLX_OP_SILU || op == RLX_OP_GELU ||
           op == RLX_OP_SCALE || op == RLX_OP_SOFTCAP;
}

/* Heads whose output may be extended with an elementwise epilogue. */
static bool takes_epilogue(rlx_op op)
{
    return op == RLX_OP_MATMUL || op == RLX_OP_RMS_NORM || op == RLX_OP_GET_ROWS ||
           op == RLX_OP_HEAD_NORM || is_elementwise(op);
}

/* Heads that read each element (or row) before writing the same position, so the output may
 * share the buffer of its dying first input. */
static bool in_place_safe(rlx_op op)
{
    return op == RLX_OP_RMS_NORM || op == RLX_OP_HEAD_NORM || op == RLX_OP_ROPE || is_elementwise(op);
}

static int n_inputs(rlx_op op)
{
    switch (op) {
    case RLX_OP_GET_ROWS: return 1;
    case RLX_OP_MATMUL: case RLX_OP_ADD: case RLX_OP_MUL: case RLX_OP_HEAD_NORM: return 2;
    case RLX_OP_ATTENTION: return 3;
    default: return 1;
    }
}

static const char *op_name(rlx_op op)
{
    static const char *names[RLX_OP_COUNT] = {
        "none", "get_rows", "rms_norm", "head_norm", "matmul", "add", "mul", "silu", "gelu",
        "scale", "softcap", "rope", "attention", "gather"};
    return op < RLX_OP_COUNT ? names[op] : "?";
}

static int validate(const rlx_graph *g, rlx_error *err)
{
    if (g->oom) return rlx_errorf(err, RLX_ENOMEM, "out of memory while building the graph");
    if (g->output < 0 || g->output >= g->n_tensors)
        return rlx_errorf(err, RLX_EINVAL, "graph has no output tensor");
    for (int i = 0; i < g->n_nodes; i++) {
        const rlx_node *n = &g->nodes[i];
        const rlx_gtensor *o = &g->tensors[n->out];
        for (int k = 0; k < n_inputs(n->op); k++) {
            int t = n->in[k];
            bool optional = (n->op == RLX_OP_ROPE && k == 1);
            if (t < 0 && optional) continue;
            if (t < 0 || t >= n->out)
                return rlx_errorf(err, RLX_EINVAL, "node %d (%s): input %d is undefined", i, op_name(n->op), k);
        }
        const rlx_gtensor *a = &g->tensors[n->in[0]];
        switch (n->op) {
        case RLX_OP_GET_ROWS:
            if (!a->is_weight || !rlx_dtype_get(a->wtype) || !rlx_dtype_get(a->wtype)->computable)
                return rlx_errorf(err, RLX_EUNSUPPORTED, "get_rows on '%s': not a weight of a supported type", a->name ? a->name : "?");
            break;
        case RLX_OP_MATMUL: {
            const rlx_gtensor *w = &g->tensors[n->in[1]];
            if (!w->is_weight) return rlx_errorf(err, RLX_EINVAL, "node %d: matmul needs a weight", i);
            const rlx_dtype_info *ti = rlx_dtype_get(w->wtype);
            if (!ti || !ti->computable)
                return rlx_errorf(err, RLX_EUNSUPPORTED, "tensor '%s': type %s has no matmul kernel", w->name, ti ? ti->name : "unknown");
            if (a->cols != w->ne[0])
                return rlx_errorf(err, RLX_EINVAL, "matmul with '%s': input has %lld columns, weight rows have %lld",
                                  w->name, (long long)a->cols, (long long)w->ne[0]);
            if (w->ne[0] % ti->block_elems)
                return rlx_errorf(err, RLX_EINVAL, "tensor '%s': row of %lld is not a multiple of the %s block (%d)",
                                  w->name, (long long)w->ne[0], ti->name, ti->block_elems);
            break;
        }
        case RLX_OP_ADD: case RLX_OP_MUL: case RLX_OP_HEAD_NORM: {
            const rlx_gtensor *b = &g->tensors[n->in[1]];
            int64_t need = n->op == RLX_OP_HEAD_NORM ? n->ip[0] : a->cols;
            if (b->cols != need || (b->rows != RLX_ROWS_ONE && b->rows != a->rows))
                return rlx_errorf(err, RLX_EINVAL, "node %d (%s): operand shapes differ (%lld vs %lld columns)",
                                  i, op_name(n->op), (long long)a->cols, (long long)b->cols);
            if (b->is_weight && (b->wtype != RLX_F32 || b->ne[1] != 1))
                return rlx_errorf(err, RLX_EUNSUPPORTED, "tensor '%s': elementwise operands must be F32 vectors", b->name);
            break;
        }
        case RLX_OP_ATTENTION:
            if (n->ip[0] < 0 || n->ip[0] >= g->n_layers || n->ip[2] <= 0 || n->ip[1] % n->ip[2] ||
                rlx_graph_layer_mem(g, n->ip[0]).kind != RLX_MEM_KV ||
                g->tensors[n->in[1]].cols != rlx_graph_layer_mem(g, n->ip[0]).kv_cols)
                return rlx_errorf(err, RLX_EINVAL, "node %d: attention geometry is inconsistent", i);
            break;
        default:
            break;
        }
        if (a->is_weight && n->op != RLX_OP_GET_ROWS)
            return rlx_errorf(err, RLX_EINVAL, "node %d (%s): a weight cannot be the first input", i, op_name(n->op));
        (void)o;
    }
    return 0;
}


/* free-list allocator over the arena (offsets kept sorted, neighbours merged) */
typedef struct span { size_t off, len; } span;
typedef struct arena { span *free; int n, cap; size_t top; } arena;

static size_t arena_alloc(arena *a, size_t len)
{
    for (int i = 0; i < a->n; i++) {
        if (a->free[i].len >= len) {
            size_t off = a->free[i].off;
            a->free[i].off += len;
            a->free[i].len -= len;
            if (!a->free[i].len) { memmove(&a->free[i], &a->free[i + 1], (size_t)(a->n - i - 1) * sizeof(span)); a->n--; }
            return off;
        }
    }
    /* grow at the top, absorbing a free span that touches it */
    if (a->n && a->free[a->n - 1].off + a->free[a->n - 1].len == a->top) {
        size_t off = a->free[a->n - 1].off;
        a->n--;
        a->top = off + len;
        return off;
    }
    size_t off = a->top;
    a->top += len;
    return off;
}

static int arena_free(arena *a, size_t off, size_t len)
{
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 64;
        span *f = realloc(a->free, (size_t)cap * sizeof *f);
        if (!f) return RLX_ENOMEM;
        a->free = f;
        a->cap = cap;
    }
    int i = 0;
    while (i < a->n && a->free[i].off < off) i++;
    memmove(&a->free[i + 1], &a->free[i], (size_t)(a->n - i) * sizeof(span));
    a->free[i] = (span){off, len};
    a->n++;
    if (i + 1 < a->n && a->free[i].off + a->free[i].len == a->free[i + 1].off) {
        a->free[i].len += a->free[i + 1].len;
        memmove(&a->free[i + 1], &a->free[i + 2], (size_t)(a->n - i - 2) * sizeof(span));
        a->n--;
    }
    if (i > 0 && a->free[i - 1].off + a->free[i - 1].len == a->free[i].off) {
        a->free[i - 1].len += a->free[i].len;
        memmove(&a->free[i], &a->free[i + 1], (size_t)(a->n - i - 1) * sizeof(span));
        a->n--;
    }
    return 0;
}

static size_t tensor_bytes(const rlx_graph *g, const rlx_compile_opts *o, int t)
{
    const rlx_gtensor *x = &g->tensors[t];
    size_t rows = x->rows == RLX_ROWS_TOKENS ? (size_t)o->max_tokens
                : x->rows == RLX_ROWS_OUTPUTS ? (size_t)o->max_outputs : 1;
    size_t b = rows * (size_t)x->cols * 4;
    return (b + 63) & ~(size_t)63;
}

int rlx_compile(const rlx_graph *g, const rlx_compile_opts *opts, rlx_plan *plan, rlx_error *err)
{
    memset(plan, 0, sizeof *plan);
    if (!opts || opts->max_tokens <= 0 || opts->max_outputs <= 0)
        return rlx_errorf(err, RLX_EINVAL, "compile: max_tokens and max_outputs must be positive");
    int rc = validate(g, err);
    if (rc) return rc;

    int nt = g->n_tensors;
    int *consumers = calloc((size_t)nt, sizeof *consumers);
    plan->steps = calloc((size_t)g->n_nodes, sizeof *plan->steps);
    plan->offset = malloc((size_t)nt * sizeof *plan->offset);
    int *last_use = malloc((size_t)nt * sizeof *last_use);
    arena ar = {0};
    if (!consumers || !plan->steps || !plan->offset || !last_use) { rc = RLX_ENOMEM; goto fail; }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < RLX_NODE_MAX_IN; k++)
            if (g->nodes[i].in[k] >= 0) consumers[g->nodes[i].in[k]]++;
    consumers[g->output]++;

    /* fusion: fold the next node into the current step while it is elementwise over the step's
     * sole-consumed output and its other operand already exists */
    for (int i = 0; i < g->n_nodes;) {
        rlx_step *s = &plan->steps[plan->n_steps++];
        s->node = g->nodes[i];
        s->out = s->node.out;
        i++;
        while (!opts->no_fusion && takes_epilogue(s->node.op) && s->n_chain < RLX_MAX_CHAIN && i < g->n_nodes) {
            const rlx_node *n = &g->nodes[i];
            if (!is_elementwise(n->op) || consumers[s->out] != 1) break;
            int other = -1;
            if (n->in[0] == s->out) other = n->in[1];
            else if ((n->op == RLX_OP_ADD || n->op == RLX_OP_MUL) && n->in[1] == s->out) other = n->in[0];
            else break;
            if ((n->op == RLX_OP_ADD || n->op == RLX_OP_MUL) &&
                (other < 0 || other >= s->node.out || g->tensors[other].cols != g->tensors[s->out].cols))
                break;
            s->chain[s->n_chain++] = (rlx_ew){rlx_ew_of_op(n->op), (n->op == RLX_OP_ADD || n->op == RLX_OP_MUL) ? other : -1, n->fp[0]};
            s->out = n->out;
            plan->n_fused++;
            i++;
        }
    }

    /* liveness over steps */
    for (int t = 0; t < nt; t++) { last_use[t] = -1; plan->offset[t] = -1; }
    for (int si = 0; si < plan->n_steps; si++) {
        const rlx_step *s = &plan->steps[si];
        for (int k = 0; k < RLX_NODE_MAX_IN; k++) if (s->node.in[k] >= 0) last_use[s->node.in[k]] = si;
        for (int k = 0; k < s->n_chain; k++) if (s->chain[k].operand >= 0) last_use[s->chain[k].operand] = si;
    }
    last_use[g->output] = plan->n_steps;

    for (int si = 0; si < plan->n_steps; si++) {
        rlx_step *s = &plan->steps[si];
        size_t need = tensor_bytes(g, opts, s->out);
        int reuse = -1;
        /* share the buffer of a dying input of the same size where the kernel allows it */
        if (in_place_safe(s->node.op) && s->node.in[0] >= 0 && !g->tensors[s->node.in[0]].is_weight &&
            last_use[s->node.in[0]] == si && tensor_bytes(g, opts, s->node.in[0]) == need &&
            s->node.in[1] != s->node.in[0]) {
            reuse = s->node.in[0];
            /* a chain operand must not be overwritten before the chain reads it */
            for (int k = 0; k < s->n_chain; k++)
                if (s->chain[k].operand == reuse) reuse = -1;
        }
        if (reuse >= 0) {
            plan->offset[s->out] = plan->offset[reuse];
            last_use[reuse] = -2; /* ownership moved to s->out */
        } else {
            plan->offset[s->out] = (int64_t)arena_alloc(&ar, need);
        }
        for (int t = 0; t < nt; t++) {
            /* quadratic in graph size, once per model load */
            if (last_use[t] == si && plan->offset[t] >= 0 && !g->tensors[t].is_weight)
                if ((rc = arena_free(&ar, (size_t)plan->offset[t], tensor_bytes(g, opts, t)))) goto fail;
        }
        if (s->node.op == RLX_OP_MATMUL) {
            const rlx_gtensor *w = &g->tensors[s->node.in[1]];
            size_t rows = g->tensors[s->node.in[0]].rows == RLX_ROWS_OUTPUTS ? (size_t)opts->max_outputs : (size_t)opts->max_tokens;
            size_t b = rows * rlx_row_bytes(rlx_vec_dot_type(w->wtype), w->ne[0]);
            if (b > plan->scratch_bytes) plan->scratch_bytes = b;
        }
    }
    plan->arena_bytes = ar.top;
    plan->graph = g;
    plan->max_tokens = opts->max_tokens;
    plan->max_outputs = opts->max_outputs;
    free(ar.free);
    free(consumers);
    free(last_use);
    return 0;
fail:
    free(ar.free);
    free(consumers);
    free(last_use);
    rlx_plan_free(plan);
    return rlx_errorf(err, rc, "out of memory while compiling the graph");
}

void rlx_plan_free(rlx_plan *plan)
{
    free(plan->steps);
    free(plan->offset);
    memset(plan, 0, sizeof *plan);
}
