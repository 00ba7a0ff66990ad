/* compile.c - graph -> plan: validation, fusion of elementwise chains into their producer,
 * and arena placement of activations by liveness. What an op takes, fuses and checks comes
 * from the op table (ops.c); nothing here names an op but matmul (its conversion scratch). */
#include "backends/graph.h"
#include "backends/quant.h"

#include <stdlib.h>
#include <string.h>

/* registered ops: weights as F32 vectors only, activations of in[0]'s rows or broadcast */
static int validate_registered(const rlx_graph *g, const rlx_node *n, int i, rlx_error *err)
{
    const rlx_op_info *info = rlx_op_get(n->op);
    const rlx_gtensor *a = &g->tensors[n->in[0]];
    if (g->tensors[n->out].rows != a->rows)
        return rlx_errorf(err, RLX_EINVAL, "node %d (%s): output rows must follow the first input's", i, info->name);
    for (int k = 1; k < info->n_in; k++) {
        if (n->in[k] < 0) continue;
        const rlx_gtensor *b = &g->tensors[n->in[k]];
        if ((b->is_weight && (b->wtype != RLX_F32 || b->ne[1] != 1)) || (!b->is_weight && b->rows != RLX_ROWS_ONE && b->rows != a->rows))
            return rlx_errorf(err, RLX_EINVAL, "node %d (%s): input %d must be an F32 vector or have the first input's rows",
                              i, info->name, k);
    }
    return info->validate ? info->validate(g, n, err) : 0;
}

static int validate(const rlx_graph *g, rlx_error *err)
{
    if (g->oom) return rlx_errorf(err, RLX_ENOMEM, "out of memory while building the graph");
    if (g->output < 0 || g->output >= g->n_tensors)
        return rlx_errorf(err, RLX_EINVAL, "graph has no output tensor");
    for (int i = 0; i < g->n_nodes; i++) {
        const rlx_node *n = &g->nodes[i];
        const rlx_op_info *info = rlx_op_get(n->op);
        if (!info || n->op == RLX_OP_NONE) return rlx_errorf(err, RLX_EINVAL, "node %d: op %d is not in the op table", i, (int)n->op);
        for (int k = 0; k < info->n_in; k++) {
            int t = n->in[k];
            if (t < 0 && (info->optional >> k & 1u)) continue;
            if (t < 0 || t >= n->out)
                return rlx_errorf(err, RLX_EINVAL, "node %d (%s): input %d is undefined", i, info->name, k);
        }
        const rlx_gtensor *a = &g->tensors[n->in[0]];
        if (a->is_weight && n->op != RLX_OP_GET_ROWS && n->op != RLX_OP_GET_ROWS_POS)
            return rlx_errorf(err, RLX_EINVAL, "node %d (%s): a weight cannot be the first input", i, info->name);
        int rc = n->op >= RLX_OP_COUNT ? validate_registered(g, n, i, err) : info->validate ? info->validate(g, n, err) : 0;
        if (rc) return rc;
    }
    const rlx_rows want = g->output_kind == RLX_OUTPUT_HIDDEN ? RLX_ROWS_TOKENS : RLX_ROWS_OUTPUTS;
    if ((g->output_kind != RLX_OUTPUT_LOGITS && g->output_kind != RLX_OUTPUT_HIDDEN) || g->tensors[g->output].rows != want)
        return rlx_errorf(err, RLX_EINVAL, "graph output: %s need one row per %s",
                          g->output_kind == RLX_OUTPUT_HIDDEN ? "hidden states" : "logits",
                          g->output_kind == RLX_OUTPUT_HIDDEN ? "batch token" : "output token");
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
        while (!opts->no_fusion && rlx_op_get(s->node.op)->epilogue && s->n_chain < RLX_MAX_CHAIN && i < g->n_nodes) {
            const rlx_node *n = &g->nodes[i];
            const rlx_op_info *ni = rlx_op_get(n->op);
            if (!ni->elementwise || consumers[s->out] != 1) break;
            const bool binary = ni->n_in == 2;
            int other = -1;
            if (n->in[0] == s->out) other = n->in[1];
            else if (binary && n->in[1] == s->out) other = n->in[0];
            else break;
            if (binary && (other < 0 || other >= s->node.out || g->tensors[other].cols != g->tensors[s->out].cols))
                break;
            rlx_ew e = rlx_ew_of_node(n);
            e.operand = binary ? other : -1;
            s->chain[s->n_chain++] = e;
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
        if (rlx_op_get(s->node.op)->in_place && s->node.in[0] >= 0 && !g->tensors[s->node.in[0]].is_weight &&
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
    plan->tokens_hint = opts->tokens_hint ? opts->tokens_hint : "--max-batch-tokens";
    plan->outputs_hint = opts->outputs_hint ? opts->outputs_hint : "--max-seqs (one logit row per sequence)";
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
