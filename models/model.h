/* model.h - a loaded model: its GGUF mapping, hyper-parameters and family (architecture),
 * and the graph builder that turns it into backends/graph.h IR.
 *
 * Ownership: rlx_model owns the rlx_gguf (weights are borrowed views of its mapping, so the
 * model must outlive every graph/plan built from it). The tokenizer is separate
 * (models/tokenizer.h) so vocabulary-only files need no weights. */
#ifndef RLX_MODEL_H
#define RLX_MODEL_H

#include "backends/graph.h"
#include "models/gguf.h"

typedef struct rlx_model_config {
    char arch[32];
    int32_t n_layer, n_embd, n_ff, n_head, n_head_kv;
    int32_t head_dim;          /* attention.key_length, default n_embd / n_head */
    int32_t n_rot;             /* rope.dimension_count, default head_dim */
    int32_t n_ctx_train;
    int32_t n_vocab;
    float norm_eps;
    float rope_base;
    float rope_freq_scale;     /* 1 / rope.scaling.factor for linear scaling */
    float rope_base_swa;       /* RoPE base of sliding-window layers (Gemma 3: 10000); 0 = rope_base */
    float rope_freq_scale_swa; /* frequency scale of sliding-window layers; 0 = rope_freq_scale */
    int rope_mode;             /* RLX_ROPE_NORM or RLX_ROPE_NEOX */
    float attn_softcap;        /* 0 = none */
    float final_softcap;       /* 0 = none */
    int32_t sliding_window;    /* 0 = none */
    int32_t swa_pattern;       /* every swa_pattern-th layer (1-based) is global; 0 = all layers use the window */
    const uint8_t *swa_layers; /* per layer, non-zero: it slides (attention.sliding_window_pattern given as an
                                  array); overrides swa_pattern. Borrowed from the GGUF mapping, or NULL */
    float attn_scale;          /* scale applied to q.k, default 1/sqrt(head_dim) */
    bool embd_scale;           /* multiply embeddings by sqrt(n_embd) (Gemma) */
    bool tied;                 /* output.weight absent: reuse token_embd */
    /* hybrid recurrent families (qwen35): gated DeltaNet layers between full-attention ones */
    int32_t full_attn_interval;/* layer l is full attention when (l + 1) % interval == 0 */
    int32_t head_dim_v;        /* attention.value_length */
    int32_t ssm_conv_kernel;   /* ssm.conv_kernel */
    int32_t ssm_state_size;    /* ssm.state_size: head_k_dim of the linear layers */
    int32_t ssm_group_count;   /* ssm.group_count: key heads of the linear layers */
    int32_t ssm_time_step_rank;/* ssm.time_step_rank: value heads of the linear layers */
    int32_t ssm_inner_size;    /* ssm.inner_size: value heads x head_v_dim */
    int32_t rope_sections[4];  /* rope.dimension_sections (multi-section RoPE; text uses one position) */
    /* Embedding models (llama.cpp's keys): "<arch>.pooling_type" (0 none, 1 mean, 2 cls, 3 last,
     * 4 rank; engine/pool.h rlx_pooling), read for every family: -1 when absent from a decoder
     * (a generative model; with the key a decoder outputs hidden states instead of logits, and
     * "<arch>.attention.causal" false makes its attention bidirectional); encoders (bert,
     * nomic-bert) take 0 when absent and are never causal. */
    int32_t pooling_type;
    bool causal;
    /* encoders (bert, nomic-bert): bidirectional attention without a KV cache (every layer
     * RLX_MEM_NONE), the graph's output is the hidden state of every batch token, which the
     * engine pools (engine/embed.h, engine/worker_embed.c) */
    bool encoder;
    int32_t n_token_types;     /* tokenizer.ggml.token_type_count (token type 0 is always added) */
    bool rank_head;            /* cls.weight or cls.output.weight: a classifier for pooling rank */
} rlx_model_config;

typedef struct rlx_model rlx_model;

typedef struct rlx_arch {
    const char *name;          /* general.architecture */
    /* Reads the family's metadata into c (common keys are read before this is called). */
    int (*config)(const rlx_gguf *g, rlx_model_config *c, rlx_error *err);
    int (*build)(const rlx_model *m, rlx_graph *graph, rlx_error *err);
} rlx_arch;

struct rlx_model {
    rlx_gguf *gguf;
    rlx_model_config cfg;
    const rlx_arch *arch;
    char name[128];            /* general.name or the file's base name */
    float *rope_factors;       /* owned: Llama 3 frequency factors (n_rot / 2) computed from the
                                  rope.scaling keys when rope_freqs.weight is absent, else NULL */
};

/* path: a GGUF file, or any part of a split GGUF (every part is mapped; see rlx_gguf_open_split). */
int rlx_model_load(rlx_model **out, const char *path, rlx_error *err);
void rlx_model_free(rlx_model *m);

const rlx_arch *rlx_arch_find(const char *name);
/* The "<arch>." keys rlx_model_load requires of every family, NULL-terminated (rlxd check
 * reports a file lacking one as MissingMetadata). */
extern const char *const rlx_model_required_keys[];
/* "llama, qwen2, ..." for error messages */
const char *rlx_arch_list(void);

/* Reads "<arch>.<key>" as u32 / f32 for family config hooks. An absent key leaves *out
 * unchanged and returns 0, unless required (then RLX_EFORMAT naming the key). */
int rlx_model_key_u32(const rlx_gguf *g, const char *arch, const char *key, int32_t *out, bool required, rlx_error *err);
int rlx_model_key_f32(const rlx_gguf *g, const char *arch, const char *key, float *out, rlx_error *err);

/* "<arch>.attention.sliding_window_pattern", as llama.cpp's load_swa_pattern reads it: an array
 * of per-layer flags (c->swa_layers), or a number n (every n-th layer is global; 0: all slide),
 * else default_pattern. */
int rlx_model_swa_pattern(const rlx_gguf *g, rlx_model_config *c, int32_t default_pattern, rlx_error *err);

/* Gemma's query_pre_attn_scalar as llama.cpp's gemma2 / gemma3 graphs take it (they read no key
 * for it): head_dim, except the 27B shapes (46 layers for Gemma 2, 62 for Gemma 3), which use
 * n_embd / n_head. Queries are scaled by 1 / sqrt of it; Hugging Face folders whose config says
 * otherwise are refused (models/safetensors.c). */
static inline int64_t rlx_model_gemma_query_dim(bool gemma3, int64_t n_layer, int64_t n_embd, int64_t n_head, int64_t head_dim)
{
    return n_layer == (gemma3 ? 62 : 46) ? n_embd / n_head : head_dim;
}

/* whether layer l of c uses the sliding window */
static inline bool rlx_model_layer_swa(const rlx_model_config *c, int32_t l)
{
    if (c->sliding_window <= 0) return false;
    if (c->swa_layers) return c->swa_layers[l] != 0;
    return !(c->swa_pattern > 0 && (l + 1) % c->swa_pattern == 0);
}

/* Builds the forward graph of m into graph (initialised by the caller). */
int rlx_model_build(const rlx_model *m, rlx_graph *graph, rlx_error *err);

/* Looks up a weight and checks its shape (ne1 == 0 means a vector). Returns the graph tensor id,
 * -1 if the tensor is absent and !required, or a negative RLX_E* (< -1) code with err set. */
int rlx_model_weight(const rlx_model *m, rlx_graph *graph, const char *name, int64_t ne0, int64_t ne1,
                     bool required, rlx_error *err);

/* The shared decoder block builder (Llama-style pre-norm transformer); family files state only
 * what differs through these options. */
typedef struct rlx_decoder_opts {
    bool qkv_bias;        /* attn_q/k/v.bias (Qwen2) */
    bool out_bias;        /* output.bias when the file has one (Qwen2, as llama.cpp loads it) */
    bool qk_norm;         /* attn_q_norm / attn_k_norm per head (Qwen3) */
    bool post_norms;      /* post_attention_norm / post_ffw_norm (Gemma 2/3) */
    bool gelu;            /* GeGLU instead of SwiGLU (Gemma) */
    bool scale_q;         /* scale Q by attn_scale before attention instead of q.k after it
                             (Gemma: soft-capping sees scaled logits, and the f16 K.Q product
                             rounds the scaled Q, as in llama.cpp) */
} rlx_decoder_opts;

int rlx_build_decoder(const rlx_model *m, const rlx_decoder_opts *o, rlx_graph *graph, rlx_error *err);

/* The encoder's pooling type as a name ("none", "mean", "cls", "last", "rank"). */
const char *rlx_model_pooling_name(int32_t pooling_type);

#endif
