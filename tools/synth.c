/* synth.c - rlxd-synth: writes a GGUF model with random weights for any supported family, with
 * llama.cpp's tensor names and metadata keys, so loaders, graph builders and kernels can be
 * tested without downloading models. Same arguments, same bytes (--seed). */
#include "tools/synth.h"
#include "backends/quant.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const arch_info archs[] = {
    {"llama", 1e-5f, 10000.f, false, false, false, false, false, false, true, 0, false},
    {"qwen2", 1e-6f, 1000000.f, true, false, false, false, false, false, false, 0, false},
    {"qwen3", 1e-6f, 1000000.f, false, true, false, false, false, false, false, 0, false},
    {"gemma2", 1e-6f, 10000.f, false, false, true, true, true, true, true, 0, false},
    {"gemma3", 1e-6f, 1000000.f, false, true, true, false, true, true, true, 0, false},
    {"bert", 1e-12f, 10000.f, true, false, false, false, false, false, false, 1, false},
    {"nomic-bert", 1e-12f, 1000.f, false, false, false, false, false, false, false, 2, false},
    {"qwen35", 1e-6f, 10000000.f, false, true, false, false, false, false, false, 0, true},
};


static const ftype_info ftypes[] = {
    {"f32", RLX_F32, 0, false},     {"f16", RLX_F16, 1, false},     {"bf16", RLX_BF16, 32, false},
    {"q8_0", RLX_Q8_0, 7, false},   {"q4_0", RLX_Q4_0, 2, false},   {"q4_k", RLX_Q4_K, 14, false},
    {"q5_k", RLX_Q5_K, 16, false},  {"q6_k", RLX_Q6_K, 18, false},  {"q4_k_m", RLX_Q4_K, 15, true},
    {"q5_k_m", RLX_Q5_K, 17, true},
};


static const struct { const char *name; shape s; } presets[] = {
    {"tiny", {64, 2, 4, 2, 16, 128, 256, 0, -1, 0, 0, 0, 0, 0, 0}},
    {"mid", {256, 2, 4, 2, 64, 768, 512, 0, -1, 0, 0, 0, 0, 0, 0}},
    {"qwen3-0.6b", {1024, 28, 16, 8, 128, 3072, 40960, 151936, 1, 0, 0, 0, 0, 0, 0}},
    /* the shape of ../shared/models/synth-qwen35-tiny and of baselines.md's Qwen3.5 bench model */
    {"qwen35-tiny", {64, 8, 4, 2, 16, 128, 4096, 0, 1, 8, 4, 4, 16, 2, 4}},
    {"minilm", {384, 6, 12, 12, 32, 1536, 512, 0, -1, 0, 0, 0, 0, 0, 0}}, /* all-MiniLM-L6's shape (encoders) */
    {"qwen35-bench", {1024, 24, 8, 2, 256, 3584, 4096, 151936, 1, 64, 4, 4, 128, 16, 16}},
};


static void usage(FILE *f)
{
    fprintf(f,
        "usage: rlxd-synth --arch ARCH [--preset P] [options] -o OUT.gguf\n"
        "Writes a GGUF model with random weights (llama.cpp tensor names and metadata).\n\n"
        "  --arch llama|qwen2|qwen3|gemma2|gemma3|bert|nomic-bert|qwen35   model family (required)\n"
        "  --preset tiny|mid|qwen3-0.6b|minilm|qwen35-tiny|qwen35-bench   shape preset (default tiny); flags below override it\n"
        "  --pooling none|mean|cls|last|rank (or 0-4)   ARCH.pooling_type: encoders default to mean; a decoder\n"
        "                            given one is an embedding model\n"
        "  --non-causal              a decoder's ARCH.attention.causal = false (bidirectional attention)\n"
        "  --hidden N --layers N --heads N --kv-heads N --head-dim N --ffn N --ctx N --vocab N\n"
        "  --rope-dims N             rotated dims per head (default: all; qwen35: half)\n"
        "  qwen35 (gated DeltaNet + gated attention): --attn-interval N (every N-th layer is full\n"
        "  attention, default 4), --conv-kernel N (4), --ssm-state N (key/value head size of the linear\n"
        "  layers, default head-dim), --ssm-groups N (key heads, default kv-heads), --ssm-heads N\n"
        "  (value heads, default heads)\n"
        "  --tied | --untied         share token_embd with the output (gemma is always tied)\n"
        "  --type T                  f32|f16|bf16|q8_0|q4_0|q4_k|q5_k|q6_k|q4_k_m|q5_k_m (default f32)\n"
        "  --seed N                  random seed (default 1); same arguments give identical bytes\n"
        "  --vocab-from FILE.gguf    copy every tokenizer.* key of FILE (the vocab size follows it)\n"
        "  --name NAME               general.name (default synth-ARCH-PRESET)\n"
        "  --chat-template FILE      tokenizer.chat_template from FILE (a Jinja template)\n"
        "  --sliding-window N        ARCH.attention.sliding_window (0: leave it out)\n"
        "  --swa-pattern N|F,F,...   ARCH.attention.sliding_window_pattern: a number, or one 0/1 per layer\n"
        "  --rope-base-swa F         ARCH.rope.freq_base_swa\n"
        "  --final-softcap F --attn-softcap F   ARCH.final_logit_softcapping / attn_logit_softcapping\n"
        "  -o, --out PATH            output file (parent directories are created)\n"
        "  --split N                 write N parts as llama.cpp's gguf-split: OUT-00001-of-0000N.gguf, ...\n"
        "  -h, --help                this text\n"
        "  --bench [-K N] [-N N] [-T N] [--type T]   time the matmul kernels instead (one thread)\n\n"
        "Weights ~ N(0, 1/sqrt(fan_in)), norm weights ~ 1 + N(0, 0.1), biases ~ N(0, 0.02).\n"
        "Without --vocab-from the vocabulary is a small built-in byte-level BPE with a ChatML template\n"
        "(encoders: a small built-in WordPiece). Encoders have as many KV heads as heads and\n"
        "head_dim = hidden / heads; --kv-heads and --head-dim do not apply.\n"
        "Example: rlxd-synth --arch llama --preset tiny --type q8_0 --seed 1 -o build/models/default.gguf\n");
}

/* ---- deterministic random numbers: splitmix64 seeded per tensor name ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double normal(uint64_t *s)
{
    const double u1 = ((splitmix(s) >> 11) + 1.0) / 9007199254740993.0;
    const double u2 = (splitmix(s) >> 11) / 9007199254740992.0;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static uint64_t name_seed(uint64_t seed, const char *name)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h ^ (seed * 0x9E3779B97F4A7C15ull);
}

/* ---- tensor types ---- */

/* llama.cpp's use_more_bits: the first and last eighth of the layers, and every third between. */
static bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int fit_type(int type, int64_t row)
{
    if (rlx_row_bytes(type, row)) return type;
    if (rlx_dtype_get(type)->block_elems == RLX_QK_K && row % RLX_QK == 0) return RLX_Q8_0;
    return RLX_F16;
}


/* role: "output" for the output projection (token_embd when tied), "attn_v"/"ffn_down" for the
 * tensors a _M mix upgrades, NULL otherwise. */
static int pick_type(const opts *o, wkind kind, const char *role, int64_t layer, int64_t row)
{
    if (kind != W_MATRIX) return RLX_F32;
    const int base = o->ft->type;
    const bool low = base == RLX_Q4_0 || base == RLX_Q4_K || base == RLX_Q5_K;
    int t = base;
    if (role && !strcmp(role, "output") && low) t = RLX_Q6_K;
    else if (role && o->ft->mix_m && (!strcmp(role, "attn_v") || !strcmp(role, "ffn_down")) && more_bits(layer, o->s.layers))
        t = RLX_Q6_K;
    return fit_type(t, row);
}

int rlx_synth_add_tensor(rlx_gguf_writer *w, const opts *o, const char *name, wkind kind, const char *role,
                         int64_t layer, int64_t ne0, int64_t ne1, rlx_error *err)
{
    const int type = kind == W_F32 ? RLX_F32 : pick_type(o, kind, role, layer, ne0);
    const size_t rb = rlx_row_bytes(type, ne0);
    float *row = malloc((size_t)ne0 * sizeof(float));
    char *data = malloc(rb * (size_t)ne1);
    if (!row || !data) {
        free(row);
        free(data);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory for tensor %s (%lld x %lld)", name, (long long)ne0, (long long)ne1);
    }
    uint64_t s = name_seed(o->seed, name);
    const double sd = kind == W_MATRIX || kind == W_F32 ? 1.0 / sqrt((double)ne0) : kind == W_NORM ? 0.1 : 0.02;
    const double mean = kind == W_NORM ? 1.0 : 0.0;
    for (int64_t r = 0; r < ne1; r++) {
        for (int64_t i = 0; i < ne0; i++) row[i] = (float)(mean + sd * normal(&s));
        rlx_quantize_row(type, row, data + (size_t)r * rb, ne0);
    }
    const int64_t ne[2] = {ne0, ne1};
    int rc = rlx_gguf_writer_add_tensor(w, name, type, kind == W_MATRIX || kind == W_F32 || ne1 > 1 ? 2 : 1, ne, data, rb * (size_t)ne1);
    free(row);
    free(data);
    if (rc) return rlx_errorf(err, rc, "could not add tensor %s: %s", name, rlx_strerror(rc));
    return 0;
}

/* ---- metadata ---- */

int rlx_synth_set_u32(rlx_gguf_writer *w, const opts *o, const char *key, uint64_t v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", o->arch->name, key);
    return rlx_gguf_writer_set_u32(w, k, (uint32_t)v);
}

int rlx_synth_set_f32(rlx_gguf_writer *w, const opts *o, const char *key, float v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", o->arch->name, key);
    return rlx_gguf_writer_set_f32(w, k, v);
}

/* the keys llama.cpp's converter writes for bert / nomic-bert */
static int write_encoder_metadata(rlx_gguf_writer *w, const opts *o, const char *name, rlx_error *err)
{
    const shape *s = &o->s;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.causal", o->arch->name);
    int rc;
    if ((rc = rlx_gguf_writer_set_str(w, "general.architecture", o->arch->name, strlen(o->arch->name))) ||
        (rc = rlx_gguf_writer_set_str(w, "general.name", name, strlen(name))) ||
        (rc = rlx_gguf_writer_set_u32(w, "general.file_type", o->ft->file_type)) ||
        (rc = rlx_gguf_writer_set_u32(w, "general.quantization_version", 2)) ||
        (rc = rlx_gguf_writer_set_u32(w, "general.alignment", 32)) ||
        (rc = rlx_synth_set_u32(w, o, "context_length", (uint64_t)s->ctx)) ||
        (rc = rlx_synth_set_u32(w, o, "embedding_length", (uint64_t)s->hidden)) ||
        (rc = rlx_synth_set_u32(w, o, "block_count", (uint64_t)s->layers)) ||
        (rc = rlx_synth_set_u32(w, o, "feed_forward_length", (uint64_t)s->ffn)) ||
        (rc = rlx_synth_set_u32(w, o, "attention.head_count", (uint64_t)s->heads)) ||
        (rc = rlx_synth_set_f32(w, o, "attention.layer_norm_epsilon", o->arch->eps)) ||
        (rc = rlx_gguf_writer_set_bool(w, key, false)) ||
        (rc = rlx_synth_set_u32(w, o, "pooling_type", (uint64_t)(o->pooling >= 0 ? o->pooling : 1))) ||
        (rc = rlx_gguf_writer_set_u32(w, "tokenizer.ggml.token_type_count", 2)) ||
        (o->arch->encoder == 2 && (rc = rlx_synth_set_f32(w, o, "rope.freq_base", o->arch->rope_base))))
        return rlx_errorf(err, rc, "could not store metadata: %s", rlx_strerror(rc));
    return 0;
}

static int write_metadata(rlx_gguf_writer *w, const opts *o, rlx_error *err)
{
    const shape *s = &o->s;
    char name[256];
    if (o->name) snprintf(name, sizeof name, "%s", o->name);
    else snprintf(name, sizeof name, "synth-%s-%s", o->arch->name, o->preset ? o->preset : "custom");
    if (o->arch->encoder) return write_encoder_metadata(w, o, name, err);
    int rc;
    if ((rc = rlx_gguf_writer_set_str(w, "general.architecture", o->arch->name, strlen(o->arch->name))) ||
        (rc = rlx_gguf_writer_set_str(w, "general.name", name, strlen(name))) ||
        (rc = rlx_gguf_writer_set_u32(w, "general.file_type", o->ft->file_type)) ||
        (rc = rlx_gguf_writer_set_u32(w, "general.quantization_version", 2)) ||
        (rc = rlx_gguf_writer_set_u32(w, "general.alignment", 32)) ||
        (rc = rlx_synth_set_u32(w, o, "vocab_size", (uint64_t)s->vocab)) ||
        (rc = rlx_synth_set_u32(w, o, "context_length", (uint64_t)s->ctx)) ||
        (rc = rlx_synth_set_u32(w, o, "embedding_length", (uint64_t)s->hidden)) ||
        (rc = rlx_synth_set_u32(w, o, "block_count", (uint64_t)s->layers)) ||
        (rc = rlx_synth_set_u32(w, o, "feed_forward_length", (uint64_t)s->ffn)) ||
        (rc = rlx_synth_set_u32(w, o, "attention.head_count", (uint64_t)s->heads)) ||
        (rc = rlx_synth_set_u32(w, o, "attention.head_count_kv", (uint64_t)s->kv_heads)) ||
        (rc = rlx_synth_set_u32(w, o, "attention.key_length", (uint64_t)s->head_dim)) ||
        (rc = rlx_synth_set_u32(w, o, "attention.value_length", (uint64_t)s->head_dim)) ||
        (rc = rlx_synth_set_f32(w, o, "attention.layer_norm_rms_epsilon", o->arch->eps)) ||
        (rc = rlx_synth_set_f32(w, o, "rope.freq_base", o->arch->rope_base)) ||
        (rc = rlx_synth_set_u32(w, o, "rope.dimension_count", (uint64_t)(s->rot ? s->rot : s->head_dim))))
        return rlx_errorf(err, rc, "could not store metadata: %s", rlx_strerror(rc));
    if (o->arch->hybrid && (rc = rlx_synth_hybrid_metadata(w, o, err))) return rc;
    if (o->arch->softcap &&
        ((rc = rlx_synth_set_f32(w, o, "attn_logit_softcapping", 50.0f)) ||
         (rc = rlx_synth_set_f32(w, o, "final_logit_softcapping", 30.0f))))
        return rlx_errorf(err, rc, "could not store metadata: %s", rlx_strerror(rc));
    /* a window well inside the context, so tests see it act */
    int64_t window = o->window >= 0 ? o->window : o->arch->swa ? RLX_MAX(1, RLX_MIN(4096, s->ctx / 8)) : 0;
    if (window > 0 && (rc = rlx_synth_set_u32(w, o, "attention.sliding_window", (uint64_t)window)))
        return rlx_errorf(err, rc, "could not store metadata: %s", rlx_strerror(rc));
    if ((o->pooling >= 0 && (rc = rlx_synth_set_u32(w, o, "pooling_type", (uint64_t)o->pooling))))
        return rlx_errorf(err, rc, "could not store metadata: %s", rlx_strerror(rc));
    if (o->non_causal) {
        char k[128];
        snprintf(k, sizeof k, "%s.attention.causal", o->arch->name);
        if ((rc = rlx_gguf_writer_set_bool(w, k, false))) return rlx_errorf(err, rc, "could not store metadata: %s", rlx_strerror(rc));
    }
    if ((!isnan(o->rope_base_swa) && (rc = rlx_synth_set_f32(w, o, "rope.freq_base_swa", o->rope_base_swa))) ||
        (!isnan(o->final_softcap) && (rc = rlx_synth_set_f32(w, o, "final_logit_softcapping", o->final_softcap))) ||
        (!isnan(o->attn_softcap) && (rc = rlx_synth_set_f32(w, o, "attn_logit_softcapping", o->attn_softcap))))
        return rlx_errorf(err, rc, "could not store metadata: %s", rlx_strerror(rc));
    if (o->swa_pattern) {
        char key[128];
        snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", o->arch->name);
        if (!strchr(o->swa_pattern, ',')) {
            char *end;
            unsigned long n = strtoul(o->swa_pattern, &end, 10);
            if (*end || !*o->swa_pattern || n > 1000) return rlx_errorf(err, RLX_EINVAL, "--swa-pattern: '%s' is not a number", o->swa_pattern);
            rc = rlx_gguf_writer_set_u32(w, key, (uint32_t)n);
        } else {
            bool flags[1024];
            int64_t n = 0;
            for (const char *p = o->swa_pattern; *p && n < 1024; p++)
                if (*p == '0' || *p == '1') flags[n++] = *p == '1';
                else if (*p != ',') return rlx_errorf(err, RLX_EINVAL, "--swa-pattern: flags are 0 or 1, got '%c'", *p);
            if (n != s->layers)
                return rlx_errorf(err, RLX_EINVAL, "--swa-pattern has %lld flags for %lld layers", (long long)n, (long long)s->layers);
            rc = rlx_gguf_writer_set_arr(w, key, RLX_GGUF_BOOL, flags, (uint64_t)n);
        }
        if (rc) return rlx_errorf(err, rc, "could not store metadata: %s", rlx_strerror(rc));
    }
    return 0;
}

static int set_chat_template(rlx_gguf_writer *w, const char *path, rlx_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return rlx_errorf(err, RLX_EIO, "cannot open the chat template %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *nb = realloc(b, cap *= 2);
        if (!nb) { free(b); b = NULL; }
        else b = nb;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!b || bad) {
        free(b);
        return rlx_errorf(err, b ? RLX_EIO : RLX_ENOMEM, "cannot read the chat template %s", path);
    }
    int rc = rlx_gguf_writer_set_str(w, "tokenizer.chat_template", b, n);
    free(b);
    return rc ? rlx_errorf(err, rc, "could not store the chat template: %s", rlx_strerror(rc)) : 0;
}

static int copy_vocab(rlx_gguf_writer *w, opts *o, rlx_error *err)
{
    rlx_gguf *g;
    int rc = rlx_gguf_open(&g, o->vocab_from, err);
    if (rc) return rc;
    const rlx_gguf_array *toks;
    if (rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", &toks, NULL) || toks->type != RLX_GGUF_STRING) {
        rlx_gguf_close(g);
        return rlx_errorf(err, RLX_EFORMAT, "%s has no tokenizer.ggml.tokens string array to copy", o->vocab_from);
    }
    if (o->s.vocab && o->s.vocab != (int64_t)toks->n)
        fprintf(stderr, "rlxd-synth: --vocab %lld replaced by the %llu tokens of %s\n", (long long)o->s.vocab,
                (unsigned long long)toks->n, o->vocab_from);
    o->s.vocab = (int64_t)toks->n;
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g) && !rc; i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
        if (!strncmp(kv->key, "tokenizer.", 10) && (rc = rlx_gguf_writer_copy_kv(w, kv)))
            rlx_errorf(err, rc, "could not copy %s from %s", kv->key, o->vocab_from);
    }
    rlx_gguf_close(g);
    return rc;
}

/* bert: learned positions, token types, Q/K/V with biases, GELU FFN with biases, post-norm
 * LayerNorms; nomic-bert: fused QKV, SwiGLU FFN, no biases, no positions (RoPE) */
static int add_encoder_tensors(rlx_gguf_writer *w, const opts *o, rlx_error *err)
{
    const shape *s = &o->s;
    const bool bert = o->arch->encoder == 1;
    const int64_t h = s->hidden;
    int rc;
    const struct { const char *n; wkind k; int64_t ne0, ne1; bool on; } e[] = {
        {"token_embd.weight", W_MATRIX, h, s->vocab, true},
        {"token_types.weight", W_BIAS, h, 2, true},
        {"position_embd.weight", W_BIAS, h, s->ctx, bert},
        {"token_embd_norm.weight", W_NORM, h, 1, true},
        {"token_embd_norm.bias", W_BIAS, h, 1, true},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(e); i++)
        if (e[i].on && (rc = rlx_synth_add_tensor(w, o, e[i].n, e[i].k, NULL, 0, e[i].ne0, e[i].ne1, err))) return rc;
    for (int64_t l = 0; l < s->layers; l++) {
        const struct { const char *n; wkind k; const char *role; int64_t ne0, ne1; bool on; } t[] = {
            {"attn_q.weight", W_MATRIX, NULL, h, h, bert},
            {"attn_q.bias", W_BIAS, NULL, h, 1, bert},
            {"attn_k.weight", W_MATRIX, NULL, h, h, bert},
            {"attn_k.bias", W_BIAS, NULL, h, 1, bert},
            {"attn_v.weight", W_MATRIX, "attn_v", h, h, bert},
            {"attn_v.bias", W_BIAS, NULL, h, 1, bert},
            {"attn_qkv.weight", W_MATRIX, NULL, h, 3 * h, !bert},
            {"attn_output.weight", W_MATRIX, NULL, h, h, true},
            {"attn_output.bias", W_BIAS, NULL, h, 1, bert},
            {"attn_output_norm.weight", W_NORM, NULL, h, 1, true},
            {"attn_output_norm.bias", W_BIAS, NULL, h, 1, true},
            {"ffn_up.weight", W_MATRIX, NULL, h, s->ffn, true},
            {"ffn_up.bias", W_BIAS, NULL, s->ffn, 1, bert},
            {"ffn_gate.weight", W_MATRIX, NULL, h, s->ffn, !bert},
            {"ffn_down.weight", W_MATRIX, "ffn_down", s->ffn, h, true},
            {"ffn_down.bias", W_BIAS, NULL, h, 1, bert},
            {"layer_output_norm.weight", W_NORM, NULL, h, 1, true},
            {"layer_output_norm.bias", W_BIAS, NULL, h, 1, true},
        };
        for (size_t i = 0; i < RLX_ARRAY_LEN(t); i++) {
            if (!t[i].on) continue;
            char name[96];
            snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, t[i].n);
            if ((rc = rlx_synth_add_tensor(w, o, name, t[i].k, t[i].role, l, t[i].ne0, t[i].ne1, err))) return rc;
        }
    }
    return 0;
}

static int add_tensors(rlx_gguf_writer *w, const opts *o, rlx_error *err)
{
    if (o->arch->encoder) return add_encoder_tensors(w, o, err);
    const shape *s = &o->s;
    const arch_info *a = o->arch;
    const int64_t q = s->heads * s->head_dim, kv = s->kv_heads * s->head_dim, h = s->hidden;
    const bool tied = a->always_tied || s->tied == 1;
    int rc;
    if ((rc = rlx_synth_add_tensor(w, o, "token_embd.weight", W_MATRIX, tied ? "output" : NULL, 0, h, s->vocab, err))) return rc;
    for (int64_t l = 0; l < s->layers && a->hybrid; l++)
        if ((rc = rlx_synth_hybrid_layer(w, o, l, err))) return rc;
    for (int64_t l = 0; l < s->layers && !a->hybrid; l++) {
        const struct { const char *n; wkind k; const char *role; int64_t ne0, ne1; bool on; } t[] = {
            {"attn_norm.weight", W_NORM, NULL, h, 1, true},
            {"attn_q.weight", W_MATRIX, NULL, h, q, true},
            {"attn_k.weight", W_MATRIX, NULL, h, kv, true},
            {"attn_v.weight", W_MATRIX, "attn_v", h, kv, true},
            {"attn_q.bias", W_BIAS, NULL, q, 1, a->qkv_bias},
            {"attn_k.bias", W_BIAS, NULL, kv, 1, a->qkv_bias},
            {"attn_v.bias", W_BIAS, NULL, kv, 1, a->qkv_bias},
            {"attn_q_norm.weight", W_NORM, NULL, s->head_dim, 1, a->qk_norm},
            {"attn_k_norm.weight", W_NORM, NULL, s->head_dim, 1, a->qk_norm},
            {"attn_output.weight", W_MATRIX, NULL, q, h, true},
            {"post_attention_norm.weight", W_NORM, NULL, h, 1, a->post_norms},
            {"ffn_norm.weight", W_NORM, NULL, h, 1, true},
            {"ffn_gate.weight", W_MATRIX, NULL, h, s->ffn, true},
            {"ffn_up.weight", W_MATRIX, NULL, h, s->ffn, true},
            {"ffn_down.weight", W_MATRIX, "ffn_down", s->ffn, h, true},
            {"post_ffw_norm.weight", W_NORM, NULL, h, 1, a->post_norms},
        };
        for (size_t i = 0; i < RLX_ARRAY_LEN(t); i++) {
            if (!t[i].on) continue;
            char name[96];
            snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, t[i].n);
            if ((rc = rlx_synth_add_tensor(w, o, name, t[i].k, t[i].role, l, t[i].ne0, t[i].ne1, err))) return rc;
        }
    }
    if ((rc = rlx_synth_add_tensor(w, o, "output_norm.weight", W_NORM, NULL, 0, h, 1, err))) return rc;
    if (!tied && (rc = rlx_synth_add_tensor(w, o, "output.weight", W_MATRIX, "output", 0, h, s->vocab, err))) return rc;
    return 0;
}

/* ---- command line ---- */

static int parse_i64(const char *flag, const char *v, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || *end || x <= 0 || x > INT32_MAX) { /* GGUF keeps shapes in 32 bits (--ctx 2^32 wrote 0) */
        fprintf(stderr, "rlxd-synth: %s needs a positive integer up to %d, got '%s'\n", flag, INT32_MAX, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

int main(int argc, char **argv)
{
    opts o = {.split = 1, .seed = 1, .pooling = -2, .ft = &ftypes[0], .window = -1, .rope_base_swa = NAN, .final_softcap = NAN, .attn_softcap = NAN};
    shape over = {0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0};
    const char *arch = NULL, *preset = "tiny";
    if (argc > 1 && !strcmp(argv[1], "--bench")) return rlx_synth_bench(argc, argv);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t *num = !strcmp(f, "--hidden") ? &over.hidden : !strcmp(f, "--layers") ? &over.layers
                     : !strcmp(f, "--heads") ? &over.heads : !strcmp(f, "--kv-heads") ? &over.kv_heads
                     : !strcmp(f, "--head-dim") ? &over.head_dim : !strcmp(f, "--ffn") ? &over.ffn
                     : !strcmp(f, "--ctx") ? &over.ctx : !strcmp(f, "--vocab") ? &over.vocab
                     : !strcmp(f, "--rope-dims") ? &over.rot : !strcmp(f, "--attn-interval") ? &over.interval
                     : !strcmp(f, "--conv-kernel") ? &over.conv : !strcmp(f, "--ssm-state") ? &over.ssm_state
                     : !strcmp(f, "--ssm-groups") ? &over.ssm_groups : !strcmp(f, "--ssm-heads") ? &over.ssm_heads : NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(f, "--tied")) { over.tied = 1; continue; }
        else if (!strcmp(f, "--untied")) { over.tied = 0; continue; }
        else if (!strcmp(f, "--non-causal")) { o.non_causal = true; continue; }
        if (!v) { fprintf(stderr, "rlxd-synth: unknown option or missing value: %s (see --help)\n", f); return 2; }
        i++;
        if (num) { if (parse_i64(f, v, num)) return 2; }
        else if (!strcmp(f, "--arch")) arch = v;
        else if (!strcmp(f, "--preset")) preset = v;
        else if (!strcmp(f, "-o") || !strcmp(f, "--out")) o.out = v;
        else if (!strcmp(f, "--vocab-from")) o.vocab_from = v;
        else if (!strcmp(f, "--split")) { if (parse_i64(f, v, &o.split) || o.split > 99999) { fprintf(stderr, "rlxd-synth: --split takes 1 to 99999 parts\n"); return 2; } }
        else if (!strcmp(f, "--name")) o.name = v;
        else if (!strcmp(f, "--chat-template")) o.chat_template = v;
        else if (!strcmp(f, "--swa-pattern")) o.swa_pattern = v;
        else if (!strcmp(f, "--pooling")) {
            static const char *const pools[] = {"none", "mean", "cls", "last", "rank"};
            o.pooling = -1;
            for (int k = 0; k < 5; k++) if (!strcmp(v, pools[k])) o.pooling = k;
            if (v[0] >= '0' && v[0] <= '4' && !v[1]) o.pooling = v[0] - '0';
            if (o.pooling < 0) { fprintf(stderr, "rlxd-synth: --pooling is none, mean, cls, last, rank or 0-4, not '%s'\n", v); return 2; }
        }
        else if (!strcmp(f, "--sliding-window")) {
            char *end;
            errno = 0;
            long long x = strtoll(v, &end, 10);
            if (errno || *end || !*v || x < 0 || x > INT32_MAX) { fprintf(stderr, "rlxd-synth: --sliding-window needs a count, got '%s'\n", v); return 2; }
            o.window = x;
        } else if (!strcmp(f, "--rope-base-swa") || !strcmp(f, "--final-softcap") || !strcmp(f, "--attn-softcap")) {
            char *end;
            float x = strtof(v, &end);
            if (*end || !*v || !isfinite(x) || x < 0) { fprintf(stderr, "rlxd-synth: %s needs a non-negative number, got '%s'\n", f, v); return 2; }
            *(f[2] == 'r' ? &o.rope_base_swa : f[2] == 'f' ? &o.final_softcap : &o.attn_softcap) = x;
        }
        else if (!strcmp(f, "--type")) {
            o.ft = NULL;
            for (size_t k = 0; k < RLX_ARRAY_LEN(ftypes); k++) if (!strcmp(v, ftypes[k].name)) o.ft = &ftypes[k];
            if (!o.ft) { fprintf(stderr, "rlxd-synth: unknown --type '%s' (see --help)\n", v); return 2; }
        } else if (!strcmp(f, "--seed")) {
            char *end;
            errno = 0;
            o.seed = strtoull(v, &end, 10);
            if (errno || *end || !*v || strchr(v, '-')) { fprintf(stderr, "rlxd-synth: --seed needs a non-negative integer, got '%s'\n", v); return 2; }
        } else { fprintf(stderr, "rlxd-synth: unknown option: %s (see --help)\n", f); return 2; }
    }
    if (!arch || !o.out) { fprintf(stderr, "rlxd-synth: --arch and -o are required (see --help)\n"); return 2; }
    for (size_t k = 0; k < RLX_ARRAY_LEN(archs); k++) if (!strcmp(arch, archs[k].name)) o.arch = &archs[k];
    if (!o.arch) { fprintf(stderr, "rlxd-synth: unknown --arch '%s': llama, qwen2, qwen3, gemma2, gemma3, bert, nomic-bert or qwen35\n", arch); return 2; }
    if (o.pooling == 4) { /* a decoder's file without one was written, then refused by rlxd serve */
        fprintf(stderr, "rlxd-synth: --pooling rank needs a classifier head (cls.weight), which rlxd-synth does not write\n");
        return 2;
    }
    if (o.arch->encoder && o.non_causal) { fprintf(stderr, "rlxd-synth: --non-causal is for decoders (encoders are never causal)\n"); return 2; }
    bool found = false;
    for (size_t k = 0; k < RLX_ARRAY_LEN(presets); k++)
        if (!strcmp(preset, presets[k].name)) { o.s = presets[k].s; found = true; }
    if (!found) { fprintf(stderr, "rlxd-synth: unknown --preset '%s': tiny, mid, qwen3-0.6b, minilm, qwen35-tiny or qwen35-bench\n", preset); return 2; }
    o.preset = preset;
    int64_t *dst[] = {&o.s.hidden, &o.s.layers, &o.s.heads, &o.s.kv_heads, &o.s.head_dim, &o.s.ffn, &o.s.ctx, &o.s.vocab,
                      &o.s.rot, &o.s.interval, &o.s.conv, &o.s.ssm_state, &o.s.ssm_groups, &o.s.ssm_heads};
    const int64_t src[] = {over.hidden, over.layers, over.heads, over.kv_heads, over.head_dim, over.ffn, over.ctx, over.vocab,
                           over.rot, over.interval, over.conv, over.ssm_state, over.ssm_groups, over.ssm_heads};
    for (size_t k = 0; k < RLX_ARRAY_LEN(dst); k++) if (src[k]) *dst[k] = src[k];
    if (over.tied >= 0) o.s.tied = over.tied;
    if (o.arch->encoder) { /* no GQA; heads split the hidden size */
        if (o.s.hidden % o.s.heads) {
            fprintf(stderr, "rlxd-synth: --hidden %lld must be a multiple of --heads %lld\n", (long long)o.s.hidden, (long long)o.s.heads);
            return 2;
        }
        o.s.kv_heads = o.s.heads;
        o.s.head_dim = o.s.hidden / o.s.heads;
    }
    if (o.s.heads % o.s.kv_heads) {
        fprintf(stderr, "rlxd-synth: --heads %lld must be a multiple of --kv-heads %lld\n", (long long)o.s.heads, (long long)o.s.kv_heads);
        return 2;
    }
    if (o.s.head_dim % 2) { fprintf(stderr, "rlxd-synth: --head-dim must be even (RoPE rotates pairs)\n"); return 2; }
    if (o.s.rot && (o.s.rot % 2 || o.s.rot > o.s.head_dim)) {
        fprintf(stderr, "rlxd-synth: --rope-dims must be even and at most --head-dim\n");
        return 2;
    }
    if (o.arch->hybrid && rlx_synth_hybrid_shape(&o.s)) return 2;

    rlx_error err = {0};
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    if (!w) { fprintf(stderr, "rlxd-synth: out of memory\n"); return 1; }
    int64_t nv;
    int rc = 0;
    if (o.vocab_from) rc = copy_vocab(w, &o, &err);
    else if ((nv = o.arch->encoder ? rlx_synth_vocab_wpm(w, o.s.vocab, &err) : rlx_synth_vocab(w, o.s.vocab, o.arch->add_bos, &err)) < 0)
        rc = (int)nv;
    else o.s.vocab = nv;
    if (!rc && o.chat_template) rc = set_chat_template(w, o.chat_template, &err);
    if (!rc) rc = write_metadata(w, &o, &err);
    if (!rc) rc = add_tensors(w, &o, &err);
    if (!rc && rlx_mkdirs_for(o.out, 0777)) rc = rlx_errorf(&err, RLX_EIO, "cannot create the directory of %s: %s", o.out, strerror(errno));
    if (!rc) rc = rlx_gguf_writer_write_split(w, o.out, (uint32_t)o.split, &err);
    rlx_gguf_writer_free(w);
    if (rc) {
        fprintf(stderr, "rlxd-synth: %s\n", err.msg[0] ? err.msg : rlx_strerror(rc));
        return 1;
    }
    return 0;
}
