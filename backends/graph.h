/* graph.h - the graph IR model family builders emit, and the compiled plan backends run.
 *
 * A graph describes ONE forward step over a batch with a symbolic token count: activation
 * tensors have either one row per batch token (RLX_ROWS_TOKENS) or one row per token whose
 * logits are wanted (RLX_ROWS_OUTPUTS), and a fixed column count. Weights are borrowed views
 * of model memory (usually the GGUF mapping) and must outlive the graph and its plan.
 *
 * rlx_compile() turns a graph into a plan: nodes in emission (topological) order, elementwise
 * chains fused into their producer (rms_norm * w, silu * up, matmul + bias / + residual,
 * softcap), and every activation buffer placed at an offset of one arena by liveness, for a
 * given maximum batch. Compiling happens once per model load; each step binds a batch
 * (tokens, positions, sequences, block tables) and runs the plan on a backend. */
#ifndef RLX_GRAPH_H
#define RLX_GRAPH_H

#include "backends/dtype.h"

typedef enum rlx_rows {
    RLX_ROWS_TOKENS = 0,   /* one row per token of the batch */
    RLX_ROWS_OUTPUTS,      /* one row per token that produces logits */
    RLX_ROWS_ONE,          /* a single row (weights used as broadcast vectors) */
} rlx_rows;

typedef enum rlx_op {
    RLX_OP_NONE = 0,
    RLX_OP_GET_ROWS,   /* out[t] = dequant(W[token[t]]) (* scale)        in: W        */
    RLX_OP_RMS_NORM,   /* out = x / sqrt(mean(x^2) + eps)                 in: x        */
    RLX_OP_HEAD_NORM,  /* rms_norm over each head_dim slice, then * w     in: x, w     */
    RLX_OP_MATMUL,     /* out[t,n] = dot(W[n], x[t])                      in: x, W     */
    RLX_OP_ADD,        /* elementwise; b may be a ROWS_ONE vector         in: a, b     */
    RLX_OP_MUL,        /* elementwise; b may be a ROWS_ONE vector         in: a, b     */
    RLX_OP_SILU,       /* x * sigmoid(x)                                  in: x        */
    RLX_OP_GELU,       /* tanh-approximated GELU                          in: x        */
    RLX_OP_SCALE,      /* x * fp[0]                                       in: x        */
    RLX_OP_SOFTCAP,    /* fp[0] * tanh(x / fp[0])                         in: x        */
    RLX_OP_ROPE,       /* rotary embedding of every head at the token's position  in: x, [freq factors] */
    RLX_OP_ATTENTION,  /* stores k, v of the batch in the paged KV cache of layer ip[0], then
                          causal (optionally sliding-window) attention    in: q, k, v  */
    RLX_OP_GATHER,     /* out[o] = x[token index of output o]             in: x        */
    RLX_OP_COUNT
} rlx_op;

/* What a layer keeps between steps for each sequence (the model's memory description; backends
 * allocate it, engine/memory.h manages it):
 *   RLX_MEM_KV     paged attention K/V, rows of kv_cols values per token (backend.h layout);
 *   RLX_MEM_STATE  a recurrent state of state_bytes per sequence (e.g. conv + SSM state), held
 *                  in a fixed pool of slots; it cannot be truncated, so no prefix of it is shared;
 *   RLX_MEM_NONE   nothing. */
typedef enum rlx_mem_kind { RLX_MEM_KV = 0, RLX_MEM_NONE = 1, RLX_MEM_STATE = 2 } rlx_mem_kind;

typedef struct rlx_mem_layer {
    rlx_mem_kind kind;
    int64_t kv_cols;          /* RLX_MEM_KV: values per K (and V) row, n_head_kv * head_dim */
    int64_t state_bytes;      /* RLX_MEM_STATE: bytes of one sequence's state */
} rlx_mem_layer;

typedef enum rlx_rope_mode { RLX_ROPE_NORM = 0, RLX_ROPE_NEOX = 2 } rlx_rope_mode;

typedef struct rlx_gtensor {
    rlx_rows rows;
    int64_t cols;
    /* weights (is_weight): borrowed data of wtype with ne[1] rows of ne[0] elements */
    bool is_weight;
    int wtype;
    int64_t ne[2];
    const void *data;
    const char *name;     /* borrowed, for diagnostics */
} rlx_gtensor;

#define RLX_NODE_MAX_IN 3

typedef struct rlx_node {
    rlx_op op;
    int out;                  /* tensor id */
    int in[RLX_NODE_MAX_IN];  /* tensor ids, -1 if unused */
    float fp[4];              /* op parameters (see rlx_op and the rope/attention notes) */
    int32_t ip[6];
} rlx_node;

/* ROPE:      ip[0] n_heads, ip[1] head_dim, ip[2] n_rot, ip[3] mode; fp[0] freq_base,
 *            fp[1] freq_scale; in[1] optional per-dimension frequency factors (n_rot/2, f32).
 * ATTENTION: ip[0] layer, ip[1] n_head, ip[2] n_head_kv, ip[3] head_dim, ip[4] sliding
 *            window (0 = none); fp[0] scale applied to q.k, fp[1] logit softcap (0 = none).
 * HEAD_NORM: ip[0] head_dim; fp[0] eps.   RMS_NORM: fp[0] eps.   GET_ROWS: fp[0] scale (0=1). */

typedef struct rlx_graph {
    rlx_gtensor *tensors;
    int n_tensors, cap_tensors;
    rlx_node *nodes;
    int n_nodes, cap_nodes;
    int output;               /* tensor holding logits (ROWS_OUTPUTS x n_vocab) */
    /* the memory of each layer (ATTENTION nodes read layer ip[0]'s KV) */
    int32_t n_layers;
    rlx_mem_layer *mem;       /* n_layers entries, owned (freed by rlx_graph_free); NULL: every
                                 layer is RLX_MEM_KV with rows of kv_cols values */
    int64_t kv_cols;          /* row width of the layers `mem` leaves undescribed (mem NULL) */
    bool oom;                 /* an allocation failed while building */
} rlx_graph;

/* Layer l's memory as the graph declares it (see rlx_graph.mem). */
static inline rlx_mem_layer rlx_graph_layer_mem(const rlx_graph *g, int32_t l)
{
    return g->mem ? g->mem[l] : (rlx_mem_layer){RLX_MEM_KV, g->kv_cols, 0};
}

void rlx_graph_init(rlx_graph *g);
void rlx_graph_free(rlx_graph *g);

/* Builder helpers: return the new tensor id (or -1 after an allocation failure, which also
 * sets g->oom; builders check it once at the end). */
int rlx_g_weight(rlx_graph *g, const char *name, int wtype, int64_t ne0, int64_t ne1, const void *data);
int rlx_g_node(rlx_graph *g, rlx_op op, rlx_rows rows, int64_t cols, int a, int b, int c);
rlx_node *rlx_g_last(rlx_graph *g);
/* Convenience wrappers */
int rlx_g_get_rows(rlx_graph *g, int w, float scale);
int rlx_g_rms_norm(rlx_graph *g, int x, float eps);
int rlx_g_matmul(rlx_graph *g, int x, int w);
int rlx_g_add(rlx_graph *g, int a, int b);
int rlx_g_mul(rlx_graph *g, int a, int b);
int rlx_g_unary(rlx_graph *g, rlx_op op, int x, float p);

/* ---- plans ---- */

typedef enum rlx_ew_op { RLX_EW_ADD, RLX_EW_MUL, RLX_EW_SILU, RLX_EW_GELU, RLX_EW_SCALE, RLX_EW_SOFTCAP } rlx_ew_op;

#define RLX_MAX_CHAIN 6

typedef struct rlx_ew {
    rlx_ew_op op;
    int operand;          /* tensor id of the other operand for ADD/MUL (-1 otherwise) */
    float p;
} rlx_ew;

typedef struct rlx_step {
    rlx_node node;        /* the head node (its `out` is replaced by the chain's final tensor) */
    rlx_ew chain[RLX_MAX_CHAIN]; /* elementwise ops fused after the head, applied in order */
    int n_chain;
    int out;              /* tensor written by the step */
} rlx_step;

typedef struct rlx_plan {
    const rlx_graph *graph;   /* borrowed */
    rlx_step *steps;
    int n_steps;
    /* activation placement: offset in bytes into the arena for every tensor (-1 if none) */
    int64_t *offset;
    size_t arena_bytes;
    int32_t max_tokens, max_outputs;
    /* scratch for activation conversion (matmul input in vec-dot type) */
    size_t scratch_bytes;
    int n_fused;              /* nodes folded into chains (for diagnostics / tests) */
} rlx_plan;

typedef struct rlx_compile_opts {
    int32_t max_tokens;       /* largest batch the plan must run */
    int32_t max_outputs;      /* largest number of logit rows per batch */
    bool no_fusion;           /* for tests: one node per step */
} rlx_compile_opts;

/* The elementwise op an ADD/MUL/SILU/GELU/SCALE/SOFTCAP node performs (fused or not). */
rlx_ew_op rlx_ew_of_op(rlx_op op);

/* cos/sin of the n_rot/2 rotation angles of position pos, with ggml's arithmetic (angles
 * advanced by repeated multiplication in float) so every backend and llama.cpp agree exactly.
 * ff: optional per-pair frequency factors (NULL: none); freq_scale 0 means 1. */
void rlx_rope_angles(float base, float freq_scale, const float *ff, int n_rot, int32_t pos, float *cs, float *sn);

int rlx_compile(const rlx_graph *g, const rlx_compile_opts *opts, rlx_plan *plan, rlx_error *err);
void rlx_plan_free(rlx_plan *plan);
/* Bytes of one row of tensor t in the arena (activations are f32). */
static inline size_t rlx_plan_row_bytes(const rlx_graph *g, int t) { return (size_t)g->tensors[t].cols * 4; }

#endif
