/* graph.c - building graphs: tensors and nodes appended in emission order, each node through
 * its op's constructor (parameters typed, see graph.h). */
#include "backends/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void rlx_graph_init(rlx_graph *g)
{
    memset(g, 0, sizeof *g);
    g->output = -1;
}

void rlx_graph_free(rlx_graph *g)
{
    free(g->tensors);
    free(g->nodes);
    free(g->mem);
    memset(g, 0, sizeof *g);
    g->output = -1;
}

static int new_tensor(rlx_graph *g)
{
    if (g->oom) return -1;
    if (g->n_tensors == g->cap_tensors) {
        int cap = g->cap_tensors ? g->cap_tensors * 2 : 256;
        rlx_gtensor *t = realloc(g->tensors, (size_t)cap * sizeof *t);
        if (!t) { g->oom = true; return -1; }
        g->tensors = t;
        g->cap_tensors = cap;
    }
    memset(&g->tensors[g->n_tensors], 0, sizeof g->tensors[0]);
    return g->n_tensors++;
}

int rlx_g_weight(rlx_graph *g, const char *name, int wtype, int64_t ne0, int64_t ne1, const void *data)
{
    int id = new_tensor(g);
    if (id < 0) return -1;
    rlx_gtensor *t = &g->tensors[id];
    t->rows = RLX_ROWS_ONE;
    t->cols = ne0;
    t->is_weight = true;
    t->wtype = wtype;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->data = data;
    t->name = name;
    return id;
}

int rlx_g_op(rlx_graph *g, rlx_op op, rlx_rows rows, int64_t cols, int a, int b, int c, const void *params)
{
    const rlx_op_info *info = rlx_op_get(op);
    if (g->oom || !info || (a < 0 && op != RLX_OP_GET_ROWS)) { g->oom = true; return -1; }
    int id = new_tensor(g);
    if (id < 0) return -1;
    g->tensors[id].rows = rows;
    g->tensors[id].cols = cols;
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 256;
        rlx_node *n = realloc(g->nodes, (size_t)cap * sizeof *n);
        if (!n) { g->oom = true; return -1; }
        g->nodes = n;
        g->cap_nodes = cap;
    }
    rlx_node *n = &g->nodes[g->n_nodes++];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->out = id;
    n->in[0] = a;
    n->in[1] = b;
    n->in[2] = c;
    if (params) memcpy(&n->p, params, info->param_size);
    return id;
}

int rlx_g_node(rlx_graph *g, rlx_op op, rlx_rows rows, int64_t cols, int a, int b, int c)
{
    return rlx_g_op(g, op, rows, cols, a, b, c, NULL);
}

int rlx_g_get_rows(rlx_graph *g, int w, float scale)
{
    if (w < 0) { g->oom = true; return -1; }
    rlx_scalar_params p = {scale};
    return rlx_g_op(g, RLX_OP_GET_ROWS, RLX_ROWS_TOKENS, g->tensors[w].ne[0], w, -1, -1, &p);
}

int rlx_g_get_rows_pos(rlx_graph *g, int w)
{
    if (w < 0) { g->oom = true; return -1; }
    rlx_scalar_params p = {1.0f};
    return rlx_g_op(g, RLX_OP_GET_ROWS_POS, RLX_ROWS_TOKENS, g->tensors[w].ne[0], w, -1, -1, &p);
}

int rlx_g_rms_norm(rlx_graph *g, int x, float eps)
{
    if (x < 0) { g->oom = true; return -1; }
    rlx_norm_params p = {.eps = eps};
    return rlx_g_op(g, RLX_OP_RMS_NORM, g->tensors[x].rows, g->tensors[x].cols, x, -1, -1, &p);
}

int rlx_g_norm(rlx_graph *g, int x, float eps)
{
    if (x < 0) { g->oom = true; return -1; }
    rlx_norm_params p = {.eps = eps};
    return rlx_g_op(g, RLX_OP_NORM, g->tensors[x].rows, g->tensors[x].cols, x, -1, -1, &p);
}

int rlx_g_head_norm(rlx_graph *g, int x, int w, int32_t head_dim, float eps)
{
    if (x < 0 || w < 0) { g->oom = true; return -1; }
    rlx_norm_params p = {.eps = eps, .head_dim = head_dim};
    return rlx_g_op(g, RLX_OP_HEAD_NORM, g->tensors[x].rows, g->tensors[x].cols, x, w, -1, &p);
}

int rlx_g_matmul(rlx_graph *g, int x, int w)
{
    if (x < 0 || w < 0) { g->oom = true; return -1; }
    return rlx_g_op(g, RLX_OP_MATMUL, g->tensors[x].rows, g->tensors[w].ne[1], x, w, -1, NULL);
}

int rlx_g_add(rlx_graph *g, int a, int b)
{
    if (a < 0 || b < 0) { g->oom = true; return -1; }
    return rlx_g_op(g, RLX_OP_ADD, g->tensors[a].rows, g->tensors[a].cols, a, b, -1, NULL);
}

int rlx_g_mul(rlx_graph *g, int a, int b)
{
    if (a < 0 || b < 0) { g->oom = true; return -1; }
    return rlx_g_op(g, RLX_OP_MUL, g->tensors[a].rows, g->tensors[a].cols, a, b, -1, NULL);
}

int rlx_g_unary(rlx_graph *g, rlx_op op, int x, float p)
{
    if (x < 0) { g->oom = true; return -1; }
    rlx_scalar_params sp = {p};
    return rlx_g_op(g, op, g->tensors[x].rows, g->tensors[x].cols, x, -1, -1, &sp);
}

int rlx_g_rope(rlx_graph *g, int x, int ff, const rlx_rope_params *p)
{
    if (x < 0) { g->oom = true; return -1; }
    return rlx_g_op(g, RLX_OP_ROPE, g->tensors[x].rows, g->tensors[x].cols, x, ff, -1, p);
}

int rlx_g_attention(rlx_graph *g, int q, int k, int v, const rlx_attn_params *p)
{
    if (q < 0 || k < 0 || v < 0) { g->oom = true; return -1; }
    return rlx_g_op(g, RLX_OP_ATTENTION, g->tensors[q].rows, g->tensors[q].cols, q, k, v, p);
}

int rlx_g_gather(rlx_graph *g, int x)
{
    if (x < 0) { g->oom = true; return -1; }
    return rlx_g_op(g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, g->tensors[x].cols, x, -1, -1, NULL);
}

int rlx_g_cols(rlx_graph *g, int x, int32_t groups, int32_t width, int32_t stride, int32_t offset)
{
    if (x < 0) { g->oom = true; return -1; }
    rlx_cols_params p = {groups, width, stride, offset};
    return rlx_g_op(g, RLX_OP_COLS, g->tensors[x].rows, (int64_t)groups * width, x, -1, -1, &p);
}

int rlx_g_ssm_conv(rlx_graph *g, int x, int w, const rlx_ssm_conv_params *p)
{
    if (x < 0 || w < 0) { g->oom = true; return -1; }
    return rlx_g_op(g, RLX_OP_SSM_CONV, g->tensors[x].rows, p->channels, x, w, -1, p);
}

int rlx_g_delta_net(rlx_graph *g, int qkv, int gate, int beta, const rlx_delta_params *p)
{
    if (qkv < 0 || gate < 0 || beta < 0) { g->oom = true; return -1; }
    return rlx_g_op(g, RLX_OP_DELTA_NET, g->tensors[qkv].rows, (int64_t)p->n_v_heads * p->head_v, qkv, gate, beta, p);
}

void rlx_g_set_output(rlx_graph *g, int t, rlx_output_kind kind)
{
    g->output = t;
    g->output_kind = kind;
}

rlx_ew rlx_ew_of_node(const rlx_node *n)
{
    const rlx_op_info *info = rlx_op_get(n->op);
    bool binary = info && info->n_in == 2;
    return (rlx_ew){info ? info->ew : RLX_EW_ADD, binary ? n->in[1] : -1, binary ? 0.0f : n->p.scalar.value};
}

void rlx_rope_angles(float base, float freq_scale, const float *ff, int n_rot, int32_t pos, float *cs, float *sn)
{
    if (freq_scale == 0.0f) freq_scale = 1.0f;
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int i = 0; i < n_rot / 2; i++) {
        float th = freq_scale * (ff ? theta / ff[i] : theta);
        cs[i] = cosf(th);
        sn[i] = sinf(th);
        theta *= theta_scale;
    }
}
