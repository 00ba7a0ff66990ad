/* graph.h - the graph IR model family builders emit, the op table every layer shares, and the
 * compiled plan backends run.
 *
 * A graph describes ONE forward step over a batch with a symbolic token count: activation
 * tensors have either one row per batch token (RLX_ROWS_TOKENS) or one row per token whose
 * logits are wanted (RLX_ROWS_OUTPUTS), and a fixed column count. Weights are borrowed views
 * of model memory (usually the GGUF mapping) and must outlive the graph and its plan. The graph
 * declares its output (rlx_output_kind): logits of the selected rows, or a hidden state per
 * batch token.
 *
 * Nodes are made by one constructor per op (rlx_g_rope, rlx_g_attention, ...) that stores the
 * op's typed parameter struct (rlx_rope_params, rlx_attn_params, ...) in the node; kernels read
 * the same struct. The op table (ops.c: rlx_op_get) says per op its name, inputs (and which are
 * optional), whether it fuses as an elementwise epilogue or heads one, parameter size and its
 * validation; rlx_compile() and every backend consume it instead of lists of their own.
 * rlx_op_register() adds ops at run time; the CPU backend runs one through its `cpu` kernel,
 * and a backend declares what it runs (rlx_backend_ops.unsupported in backend.h), so a graph
 * needing more is refused at prepare time with the op and backend named.
 *
 * rlx_compile() turns a graph into a plan: nodes in emission (topological) order, elementwise
 * chains fused into their producer (rms_norm * w, silu * up, matmul + bias / + residual,
 * softcap), and every activation buffer placed at an offset of one arena by liveness, for a
 * given maximum batch. Compiling happens once per model load; each step binds a batch
 * (tokens, positions, sequences, block tables) and runs the plan on a backend.
 *
 * Threads: graphs and plans are built by one thread and then only read (backends read plans
 * from their run thread); the op table is read from any thread, registration is locked. */
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
    RLX_OP_SCALE,      /* x * value                                       in: x        */
    RLX_OP_SOFTCAP,    /* value * tanh(x / value)                         in: x        */
    RLX_OP_ROPE,       /* rotary embedding of every head at the token's position  in: x, [freq factors] */
    RLX_OP_ATTENTION,  /* stores k, v of the batch in the paged KV cache of the layer, then
                          causal (optionally sliding-window) or bidirectional attention  in: q, k, v */
    RLX_OP_GATHER,     /* out[o] = x[token index of output o]             in: x        */
    RLX_OP_NORM,       /* layer norm: (x - mean(x)) / sqrt(var(x) + eps)  in: x        */
    RLX_OP_GET_ROWS_POS, /* out[t] = dequant(W[pos[t]]) (learned positions)  in: W      */
    /* ---- ops of hybrid recurrent models (Qwen3.5); the CPU backend runs them, GPU backends
     * refuse them by name (rlx_backend_builtin_causal) ---- */
    RLX_OP_SIGMOID,    /* 1 / (1 + exp(-x)), elementwise                  in: x        */
    RLX_OP_SOFTPLUS,   /* log(1 + exp(x)) (x above 20 passes), elementwise in: x       */
    RLX_OP_COLS,       /* column slices: out[g*width + i] = x[g*stride + offset + i]  in: x */
    RLX_OP_SSM_CONV,   /* causal depthwise conv1d over the layer's carried conv state  in: x, w */
    RLX_OP_DELTA_NET,  /* the gated delta rule over the layer's carried state  in: qkv, g, beta */
    RLX_OP_COUNT       /* built-in ops; rlx_op_register() hands out ids from here to RLX_OP_MAX - 1 */
} rlx_op;

#define RLX_OP_MAX 64

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

/* ---- typed op parameters: one struct per op kind, stored in the node's rlx_op_params ---- */

/* ROPE: n_rot leading dims of each of n_heads heads of head_dim rotated (mode: pairs adjacent
 * or NEOX halves); freq_scale 0 means 1. in[1]: optional per-pair frequency factors (n_rot/2 f32). */
typedef struct rlx_rope_params {
    int32_t n_heads, head_dim, n_rot;
    rlx_rope_mode mode;
    float freq_base, freq_scale;
} rlx_rope_params;

/* ATTENTION masks: causal (token at pos p sees positions 0..p of its sequence, or the last
 * `window` of them), or bidirectional (every position of its sequence present in the KV cache
 * after this step's writes, i.e. 0..max pos of the sequence in the batch; no window).
 * A layer whose memory is RLX_MEM_NONE has no cache: its attention must be bidirectional and
 * reads K and V straight from this step's rows, so every sequence must be whole in the batch,
 * its tokens contiguous and in position order 0..n-1 (encoders). */
typedef enum rlx_attn_mask { RLX_ATTN_CAUSAL = 0, RLX_ATTN_BIDIRECTIONAL = 1 } rlx_attn_mask;

/* ATTENTION: KV layer, heads (n_head % n_head_kv == 0), head_dim, sliding window (0 = none),
 * scale applied to q.k, logit softcap (0 = none), mask. */
typedef struct rlx_attn_params {
    int32_t layer, n_head, n_head_kv, head_dim, window;
    float scale, softcap;
    rlx_attn_mask mask;
} rlx_attn_params;

/* RMS_NORM, NORM: eps. HEAD_NORM: eps, and the head_dim each slice of which is normalised. */
typedef struct rlx_norm_params {
    float eps;
    int32_t head_dim;
} rlx_norm_params;

/* COLS: `groups` slices of `width` columns, the g-th starting at column g * stride + offset
 * of the input; the output is their concatenation (groups * width columns). */
typedef struct rlx_cols_params {
    int32_t groups, width, stride, offset;
} rlx_cols_params;

/* Recurrent state of a layer (an RLX_MEM_STATE slot of floats), shared by its SSM_CONV and
 * DELTA_NET: RLX_SSM_HEADER floats first, whose float 0 holds (as an int32) the position the
 * sequence computes next (0 in a cleared slot: SSM_CONV checks that a batch continues there,
 * DELTA_NET advances it), then the conv state at conv_off, the delta-rule states at state_off. */
#define RLX_SSM_HEADER 16

/* SSM_CONV: in[0] x (one row per batch token, `channels` columns), in[1] the F32 weight of ne
 * {kernel, channels} (kernel values of a channel, oldest tap first). Per sequence of the batch,
 * in position order: out[t][c] = sum_j w[c][j] * X[c][t + j] over the previous kernel - 1
 * inputs of the sequence (the conv state, zero at position 0) and x; the state then keeps the
 * last kernel - 1 inputs (floats conv_off + c * (kernel - 1) + j). Fusable elementwise ops
 * follow (SiLU). A DELTA_NET of the same layer must follow it in the graph. */
typedef struct rlx_ssm_conv_params {
    int32_t layer, kernel, channels, conv_off;
} rlx_ssm_conv_params;

/* DELTA_NET: in[0] the conv output of n_k_heads query heads | n_k_heads key heads (head_k
 * each) | n_v_heads value heads (head_v each), in[1] g (n_v_heads: the log decay), in[2] beta
 * (n_v_heads). Value head j uses key head j % n_k_heads. q and k are L2-normalised
 * (x / max(||x||, eps)), q scaled by `scale`; per token and value head, with the head's state S
 * (head_k x head_v floats, row i over the key dim, at state_off + j * head_k * head_v):
 *   S = exp(g) S;  d = beta (v - S^T k);  S += k d^T;  out = S^T q.
 * Output: n_v_heads * head_v columns. */
typedef struct rlx_delta_params {
    int32_t layer, n_k_heads, n_v_heads, head_k, head_v, state_off;
    float eps, scale;
} rlx_delta_params;

/* GET_ROWS, GET_ROWS_POS: scale (0 = 1). SCALE: factor. SOFTCAP: cap. */
typedef struct rlx_scalar_params {
    float value;
} rlx_scalar_params;

#define RLX_OP_PARAMS_MAX 32

/* A node's parameters; which member is valid follows from its op (rlx_op_info.param_size
 * bytes of it are copied in by the constructor). Registered ops keep theirs in raw. */
typedef union rlx_op_params {
    rlx_rope_params rope;
    rlx_attn_params attn;
    rlx_norm_params norm;
    rlx_scalar_params scalar;
    rlx_cols_params cols;
    rlx_ssm_conv_params conv;
    rlx_delta_params delta;
    unsigned char raw[RLX_OP_PARAMS_MAX];
} rlx_op_params;

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
    rlx_op_params p;          /* typed parameters of op (see rlx_op_params) */
} rlx_node;

/* What the graph's output tensor holds, and so what rlx_backend_ops.run() returns. */
typedef enum rlx_output_kind {
    RLX_OUTPUT_LOGITS = 0,    /* ROWS_OUTPUTS rows: logits of the tokens marked for output */
    RLX_OUTPUT_HIDDEN,        /* ROWS_TOKENS rows: a hidden state per batch token (pooling is
                                 the caller's) */
} rlx_output_kind;

typedef struct rlx_graph {
    rlx_gtensor *tensors;
    int n_tensors, cap_tensors;
    rlx_node *nodes;
    int n_nodes, cap_nodes;
    int output;               /* output tensor (see output_kind) */
    rlx_output_kind output_kind;
    /* the memory of each layer (ATTENTION nodes read their layer's KV) */
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

/* ---- the op table (ops.c) ----
 * One entry per op: what the compiler validates and fuses, what every backend names in its
 * errors and checks support against. Built-in entries are constant; rlx_op_register() appends
 * entries at run time (from any thread, before graphs using them are built; entries are never
 * removed or changed). */

typedef enum rlx_ew_op { RLX_EW_ADD, RLX_EW_MUL, RLX_EW_SILU, RLX_EW_GELU, RLX_EW_SCALE, RLX_EW_SOFTCAP, RLX_EW_SIGMOID,
                         RLX_EW_SOFTPLUS } rlx_ew_op;

/* One CPU call of a registered op's kernel: rows [row0, row0 + n_rows) of the output.
 * Row r of input k starts at in[k] + r * in_stride[k] (stride 0: a broadcast vector). */
typedef struct rlx_op_call {
    const rlx_node *node;                 /* node->p.raw holds the op's parameters */
    const float *in[RLX_NODE_MAX_IN];     /* NULL where the input is unused */
    int64_t in_cols[RLX_NODE_MAX_IN];
    int64_t in_stride[RLX_NODE_MAX_IN];
    float *out;
    int64_t out_cols;
    int64_t row0, n_rows;
} rlx_op_call;

typedef struct rlx_op_info {
    const char *name;
    int n_in;                 /* inputs read (in[0..n_in)) */
    unsigned optional;        /* bit k set: input k may be -1 */
    bool elementwise;         /* may be fused into its producer's epilogue as `ew` */
    rlx_ew_op ew;
    bool epilogue;            /* may head a fused chain of elementwise ops */
    bool in_place;            /* output may share its dying first input's buffer */
    size_t param_size;        /* bytes of rlx_op_params the constructor copies (<= RLX_OP_PARAMS_MAX) */
    /* optional: checks a node's inputs and parameters (compile time); RLX_EINVAL etc. */
    int (*validate)(const rlx_graph *g, const rlx_node *n, rlx_error *err);
    /* registered ops: the CPU kernel (row-parallel; must not depend on the split). Built-in
     * ops leave it NULL: each backend has its own kernels for them. */
    void (*cpu)(const rlx_op_call *call);
} rlx_op_info;

/* The entry of op (built-in or registered), NULL for an unknown id. */
const rlx_op_info *rlx_op_get(rlx_op op);
/* Its name, "?" for an unknown id. */
const char *rlx_op_name(rlx_op op);
/* Appends an op (the entry is copied; name must outlive the process' use of it). Registered ops
 * take 1 to RLX_NODE_MAX_IN inputs, are neither elementwise-fusable nor chain heads, output
 * one row per row of in[0] and run only where a backend supports them (the CPU backend: those
 * with a `cpu` kernel). *id receives the new op. RLX_EINVAL for a bad entry or a duplicate
 * name, RLX_ENOMEM when the table is full. */
int rlx_op_register(const rlx_op_info *info, rlx_op *id, rlx_error *err);

/* ---- builders ----
 * Each returns the new tensor id (or -1 after an allocation failure or an undefined input,
 * which also sets g->oom; builders check it once at the end). */
int rlx_g_weight(rlx_graph *g, const char *name, int wtype, int64_t ne0, int64_t ne1, const void *data);
/* Any op: params points to rlx_op_get(op)->param_size bytes (NULL: zeros). */
int rlx_g_op(rlx_graph *g, rlx_op op, rlx_rows rows, int64_t cols, int a, int b, int c, const void *params);
/* An op without parameters. */
int rlx_g_node(rlx_graph *g, rlx_op op, rlx_rows rows, int64_t cols, int a, int b, int c);
int rlx_g_get_rows(rlx_graph *g, int w, float scale);
/* The rows of w at each batch token's position (learned position embeddings); a position
 * past w's rows is a run-time RLX_ERANGE. */
int rlx_g_get_rows_pos(rlx_graph *g, int w);
int rlx_g_rms_norm(rlx_graph *g, int x, float eps);
/* Layer norm (mean and variance of the row, no weight: follow with rlx_g_mul / rlx_g_add,
 * which fuse into it as an epilogue). */
int rlx_g_norm(rlx_graph *g, int x, float eps);
int rlx_g_head_norm(rlx_graph *g, int x, int w, int32_t head_dim, float eps);
int rlx_g_matmul(rlx_graph *g, int x, int w);
int rlx_g_add(rlx_graph *g, int a, int b);
int rlx_g_mul(rlx_graph *g, int a, int b);
/* SILU, GELU, SIGMOID, SOFTPLUS (p unused), SCALE (factor p), SOFTCAP (cap p) */
int rlx_g_unary(rlx_graph *g, rlx_op op, int x, float p);
/* ff: frequency factors tensor or -1 */
int rlx_g_rope(rlx_graph *g, int x, int ff, const rlx_rope_params *p);
int rlx_g_attention(rlx_graph *g, int q, int k, int v, const rlx_attn_params *p);
int rlx_g_gather(rlx_graph *g, int x);
/* Columns of x (rlx_cols_params). */
int rlx_g_cols(rlx_graph *g, int x, int32_t groups, int32_t width, int32_t stride, int32_t offset);
/* Recurrent ops (their layer must be RLX_MEM_STATE with room for what they keep). */
int rlx_g_ssm_conv(rlx_graph *g, int x, int w, const rlx_ssm_conv_params *p);
int rlx_g_delta_net(rlx_graph *g, int qkv, int gate, int beta, const rlx_delta_params *p);
/* Declares the output tensor and what it holds. */
void rlx_g_set_output(rlx_graph *g, int t, rlx_output_kind kind);

/* ---- plans ---- */

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
    const char *tokens_hint, *outputs_hint; /* what bounds them, for errors (see rlx_compile_opts) */
    /* scratch for activation conversion (matmul input in vec-dot type) */
    size_t scratch_bytes;
    int n_fused;              /* nodes folded into chains (for diagnostics / tests) */
} rlx_plan;

typedef struct rlx_compile_opts {
    int32_t max_tokens;       /* largest batch the plan must run */
    int32_t max_outputs;      /* largest number of logit rows per batch */
    bool no_fusion;           /* for tests: one node per step */
    /* The settings a user lowers when a backend cannot hold a batch of max_tokens rows or
     * max_outputs logit rows, named in its error (static strings; NULL: the server's options,
     * "--max-batch-tokens" and "--max-seqs (one logit row per sequence)"). */
    const char *tokens_hint, *outputs_hint;
} rlx_compile_opts;

/* The elementwise op a node of an elementwise op performs (fused or not): its operand for
 * binary ops, its scalar parameter for SCALE/SOFTCAP. */
rlx_ew rlx_ew_of_node(const rlx_node *n);

/* cos/sin of the n_rot/2 rotation angles of position pos, with ggml's arithmetic (angles
 * advanced by repeated multiplication in float) so every backend and llama.cpp agree exactly.
 * ff: optional per-pair frequency factors (NULL: none); freq_scale 0 means 1. */
void rlx_rope_angles(float base, float freq_scale, const float *ff, int n_rot, int32_t pos, float *cs, float *sn);

int rlx_compile(const rlx_graph *g, const rlx_compile_opts *opts, rlx_plan *plan, rlx_error *err);
void rlx_plan_free(rlx_plan *plan);
/* Bytes of one row of tensor t in the arena (activations are f32). */
static inline size_t rlx_plan_row_bytes(const rlx_graph *g, int t) { return (size_t)g->tensors[t].cols * 4; }

#endif
