/* synth.h - private seams of rlxd-synth: synth.c (command line, tensors, metadata),
 * synth_hybrid.c (the qwen35 family's layers), synth_vocab.c (the built-in byte-level BPE and
 * WordPiece vocabularies) and synth_bench.c (--bench). */
#ifndef RLX_SYNTH_H
#define RLX_SYNTH_H

#include "models/gguf.h"

typedef struct arch_info {
    const char *name;
    float eps, rope_base;
    bool qkv_bias, qk_norm, post_norms, softcap, swa, always_tied, add_bos;
    int encoder;           /* 0 decoder, 1 bert, 2 nomic-bert (models/arch/bert.c) */
    bool hybrid;           /* qwen35: gated DeltaNet layers between full-attention ones (synth_hybrid.c) */
} arch_info;

/* --type: the main tensor type, llama.cpp's general.file_type, and whether it is a _M mix. */
typedef struct ftype_info { const char *name; int type; uint32_t file_type; bool mix_m; } ftype_info;

/* A model's shape. rot: rotated dims per head (0: all). The hybrid family's (0: its defaults,
 * rlx_synth_hybrid_shape): every interval-th layer full attention, conv kernel, linear layers of
 * ssm_groups key heads and ssm_heads value heads of ssm_state dims. */
typedef struct shape {
    int64_t hidden, layers, heads, kv_heads, head_dim, ffn, ctx, vocab;
    int tied;
    int64_t rot, interval, conv, ssm_state, ssm_groups, ssm_heads;
} shape;

typedef struct opts {
    const arch_info *arch;
    const ftype_info *ft;
    shape s;
    uint64_t seed;
    const char *out, *vocab_from, *name, *preset;
    const char *chat_template; /* --chat-template FILE: replaces the vocabulary's template */
    /* sliding-window and soft-capping metadata (gemma2/gemma3); NAN / -1 / NULL: the family default */
    int64_t window;            /* attention.sliding_window; 0: leave the key out */
    const char *swa_pattern;   /* attention.sliding_window_pattern: "N", or "1,0,1,..." per layer */
    float rope_base_swa, final_softcap, attn_softcap;
    int64_t split;             /* --split N parts (1: one file) */
    int pooling;               /* --pooling: ARCH.pooling_type; -2 when not given (encoders: mean; a
                                  decoder then has no pooling type, i.e. it is generative) */
    bool non_causal;           /* --non-causal: ARCH.attention.causal = false (decoders) */
} opts;

/* W_F32: a 2-D F32 tensor whatever --type says (~N(0, 1/sqrt(ne0))) */
typedef enum { W_MATRIX, W_NORM, W_BIAS, W_F32 } wkind;

/* Adds a random tensor (synth.c): matrices in the --type's type, ~N(0, 1/sqrt(ne0)); norm weights
 * ~1 + N(0, 0.1), biases ~N(0, 0.02) as F32 vectors. */
int rlx_synth_add_tensor(rlx_gguf_writer *w, const opts *o, const char *name, wkind kind, const char *role,
                         int64_t layer, int64_t ne0, int64_t ne1, rlx_error *err);
/* "<arch>.<key>" metadata */
int rlx_synth_set_u32(rlx_gguf_writer *w, const opts *o, const char *key, uint64_t v);
int rlx_synth_set_f32(rlx_gguf_writer *w, const opts *o, const char *key, float v);

/* synth_hybrid.c (qwen35): fills the family defaults into s and checks it (message on stderr,
 * non-zero when unusable); the family's keys; the tensors of layer l. */
int rlx_synth_hybrid_shape(shape *s);
int rlx_synth_hybrid_metadata(rlx_gguf_writer *w, const opts *o, rlx_error *err);
int rlx_synth_hybrid_layer(rlx_gguf_writer *w, const opts *o, int64_t l, rlx_error *err);

/* Writes the built-in tokenizer (tokenizer.* keys, ChatML template) into w, padded with unused
 * tokens up to n_vocab entries. n_vocab 0 means "exactly the built-in size". Returns the number
 * of tokens written, or a negative RLX_E* code with err filled. */
int64_t rlx_synth_vocab(rlx_gguf_writer *w, int64_t n_vocab, bool add_bos, rlx_error *err);

/* The built-in WordPiece vocabulary of the encoders (tokenizer.ggml.model "bert": [CLS] 2,
 * [SEP] 3, [UNK] 1, printable ASCII pieces and the words of the built-in corpus), padded up to
 * n_vocab (0: exactly its size). Returns the token count or a negative RLX_E* code. */
int64_t rlx_synth_vocab_wpm(rlx_gguf_writer *w, int64_t n_vocab, rlx_error *err);

/* `rlxd-synth --bench ...`: the kernel micro benchmark (synth_bench.c). Returns an exit code. */
int rlx_synth_bench(int argc, char **argv);

/* Number of tokens of the built-in vocabulary before padding. */
int64_t rlx_synth_vocab_size(void);

#endif
