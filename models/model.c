/* model.c - loading a GGUF model: common hyper-parameters, family lookup, weight views. */
#include "models/model.h"
#include "models/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const rlx_arch rlx_arch_llama, rlx_arch_qwen2, rlx_arch_qwen3, rlx_arch_gemma2, rlx_arch_gemma3, rlx_arch_bert,
    rlx_arch_nomic_bert, rlx_arch_qwen35;

const char *const rlx_model_required_keys[] = {"block_count", "embedding_length", "feed_forward_length",
                                               "attention.head_count", NULL};

/* Registered families, by general.architecture. */
static const rlx_arch *const archs[] = {&rlx_arch_llama, &rlx_arch_qwen2, &rlx_arch_qwen3, &rlx_arch_gemma2, &rlx_arch_gemma3,
                                        &rlx_arch_bert, &rlx_arch_nomic_bert, &rlx_arch_qwen35};

const rlx_arch *rlx_arch_find(const char *name)
{
    for (size_t i = 0; i < RLX_ARRAY_LEN(archs); i++)
        if (!strcmp(archs[i]->name, name)) return archs[i];
    return NULL;
}

const char *rlx_arch_list(void)
{
    static char buf[256];
    if (!buf[0])
        for (size_t i = 0; i < RLX_ARRAY_LEN(archs); i++)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? ", " : "", archs[i]->name);
    return buf;
}

/* Reads "<arch>.<key>" as u32; required keys fail with a message naming the key. */
int rlx_model_key_u32(const rlx_gguf *g, const char *arch, const char *key, int32_t *out, bool required, rlx_error *err)
{
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    uint32_t v;
    int rc = rlx_gguf_get_u32(g, full, &v, err);
    if (rc == RLX_ENOTFOUND) {
        if (required) return rlx_errorf(err, RLX_EFORMAT, "%s: required metadata key '%s' is missing", rlx_gguf_path(g), full);
        return 0;
    }
    if (rc) return rc;
    if (v > INT32_MAX) return rlx_errorf(err, RLX_EFORMAT, "%s: '%s' = %u is out of range", rlx_gguf_path(g), full, v);
    *out = (int32_t)v;
    return 0;
}

int rlx_model_key_f32(const rlx_gguf *g, const char *arch, const char *key, float *out, rlx_error *err)
{
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int rc = rlx_gguf_get_f32(g, full, out, err);
    return rc == RLX_ENOTFOUND ? 0 : rc;
}

int rlx_model_swa_pattern(const rlx_gguf *g, rlx_model_config *c, int32_t default_pattern, rlx_error *err)
{
    char full[160];
    snprintf(full, sizeof full, "%s.attention.sliding_window_pattern", c->arch);
    c->swa_pattern = default_pattern;
    c->swa_layers = NULL;
    const rlx_gguf_value *v = rlx_gguf_find(g, full);
    if (!v) return 0;
    if (v->type != RLX_GGUF_ARRAY) return rlx_model_key_u32(g, c->arch, "attention.sliding_window_pattern", &c->swa_pattern, false, err);
    const rlx_gguf_array *a = &v->arr;
    if (a->type != RLX_GGUF_BOOL && a->type != RLX_GGUF_UINT8 && a->type != RLX_GGUF_INT8)
        return rlx_errorf(err, RLX_EFORMAT, "%s: '%s' must be a number or an array of per-layer booleans", rlx_gguf_path(g), full);
    if (a->n != (uint64_t)c->n_layer)
        return rlx_errorf(err, RLX_EFORMAT, "%s: '%s' has %llu entries for %d layers", rlx_gguf_path(g), full,
                          (unsigned long long)a->n, c->n_layer);
    c->swa_layers = a->data;
    return 0;
}

/* Every "blk.N." tensor belongs to a layer below block_count: a count smaller than the file's
 * layers would run part of the model without a word (llama.cpp refuses such a file: its tensor
 * count disagrees). */
static int layer_tensors_fit(const rlx_gguf *g, const char *arch, int32_t n_layer, rlx_error *err)
{
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const char *name = rlx_gguf_tensor_at(g, i)->name;
        if (strncmp(name, "blk.", 4)) continue;
        char *end;
        long l = strtol(name + 4, &end, 10);
        if (end != name + 4 && *end == '.' && l >= n_layer)
            return rlx_errorf(err, RLX_EFORMAT, "%s: tensor '%s' is of layer %ld but %s.block_count is %d",
                              rlx_gguf_path(g), name, l, arch, n_layer);
    }
    return 0;
}

static int read_common(const rlx_gguf *g, rlx_model_config *c, rlx_error *err)
{
    const char *a = c->arch;
    int rc;
    int32_t *const req[] = {&c->n_layer, &c->n_embd, &c->n_ff, &c->n_head}; /* rlx_model_required_keys' order */
    for (size_t i = 0; i < RLX_ARRAY_LEN(req); i++)
        if ((rc = rlx_model_key_u32(g, a, rlx_model_required_keys[i], req[i], true, err))) return rc;
    c->n_head_kv = c->n_head;
    c->n_ctx_train = 2048;
    c->norm_eps = 1e-5f;
    c->rope_base = 10000.0f;
    c->rope_freq_scale = 1.0f;
    if ((rc = rlx_model_key_u32(g, a, "attention.head_count_kv", &c->n_head_kv, false, err)) ||
        (rc = rlx_model_key_u32(g, a, "context_length", &c->n_ctx_train, false, err)) ||
        (rc = rlx_model_key_f32(g, a, "attention.layer_norm_rms_epsilon", &c->norm_eps, err)) ||
        (rc = rlx_model_key_f32(g, a, "rope.freq_base", &c->rope_base, err)))
        return rc;
    if (c->n_layer <= 0 || c->n_embd <= 0 || c->n_head <= 0 || c->n_head_kv <= 0 || c->n_head % c->n_head_kv)
        return rlx_errorf(err, RLX_EFORMAT, "%s: inconsistent hyper-parameters (layers %d, embedding %d, heads %d / %d kv)",
                          rlx_gguf_path(g), c->n_layer, c->n_embd, c->n_head, c->n_head_kv);
    /* values no model has, which would serve nothing or NaN everywhere rather than fail */
    if (c->n_ctx_train <= 0)
        return rlx_errorf(err, RLX_EFORMAT, "%s: %s.context_length is %d: the file states no context length",
                          rlx_gguf_path(g), a, c->n_ctx_train);
    if (!isfinite(c->norm_eps) || c->norm_eps < 0.0f)
        return rlx_errorf(err, RLX_EFORMAT, "%s: %s.attention.layer_norm_rms_epsilon is %g (a finite value >= 0)",
                          rlx_gguf_path(g), a, (double)c->norm_eps);
    if (!isfinite(c->rope_base) || c->rope_base <= 0.0f)
        return rlx_errorf(err, RLX_EFORMAT, "%s: %s.rope.freq_base is %g (a finite value > 0)", rlx_gguf_path(g), a,
                          (double)c->rope_base);
    if ((rc = layer_tensors_fit(g, a, c->n_layer, err))) return rc;
    c->head_dim = c->n_embd / c->n_head;
    if ((rc = rlx_model_key_u32(g, a, "attention.key_length", &c->head_dim, false, err))) return rc;
    c->n_rot = c->head_dim;
    if ((rc = rlx_model_key_u32(g, a, "rope.dimension_count", &c->n_rot, false, err))) return rc;
    if (c->head_dim <= 0 || c->head_dim > 1024 || c->n_rot <= 0 || c->n_rot > c->head_dim || c->n_rot % 2)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: head size %d / rotary dims %d are not supported",
                          rlx_gguf_path(g), c->head_dim, c->n_rot);
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    const rlx_gguf_tensor *emb = rlx_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return rlx_errorf(err, RLX_EFORMAT, "%s: tensor 'token_embd.weight' is missing", rlx_gguf_path(g));
    c->n_vocab = (int32_t)emb->ne[1];
    /* a token the tokenizer can produce must have an embedding row (llama.cpp checks the shape) */
    const rlx_gguf_value *tv = rlx_gguf_find(g, "tokenizer.ggml.tokens");
    if (tv && tv->type == RLX_GGUF_ARRAY && tv->arr.n > (uint64_t)emb->ne[1])
        return rlx_errorf(err, RLX_EFORMAT, "%s: the tokenizer has %llu tokens but 'token_embd.weight' has %lld rows",
                          rlx_gguf_path(g), (unsigned long long)tv->arr.n, (long long)emb->ne[1]);
    c->tied = rlx_gguf_find_tensor(g, "output.weight") == NULL;
    char key[160];
    c->pooling_type = -1;
    if ((rc = rlx_model_key_u32(g, a, "pooling_type", &c->pooling_type, false, err))) return rc;
    if (c->pooling_type > 4)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: %s.pooling_type %d is unknown (0 none, 1 mean, 2 cls, 3 last, 4 rank)",
                          rlx_gguf_path(g), a, c->pooling_type);
    c->causal = true;
    snprintf(key, sizeof key, "%s.attention.causal", a);
    if ((rc = rlx_gguf_get_bool(g, key, &c->causal, err)) && rc != RLX_ENOTFOUND) return rc;
    return 0;
}

/* Llama 3 RoPE scaling: per-dimension frequency factors as convert_hf_to_gguf.py computes them
 * into rope_freqs.weight (wavelengths below original_ctx / high_freq_factor keep their
 * frequency, those above original_ctx / low_freq_factor are divided by factor, and the band
 * between is interpolated). Used when a file names the scaling but lacks that tensor. */
static int llama3_factors(rlx_model *m, float factor, rlx_error *err)
{
    const rlx_gguf *g = m->gguf;
    const char *a = m->cfg.arch;
    float lo = 1.0f, hi = 4.0f;
    int32_t orig = 8192;
    int rc;
    if ((rc = rlx_model_key_f32(g, a, "rope.scaling.low_freq_factor", &lo, err)) ||
        (rc = rlx_model_key_f32(g, a, "rope.scaling.high_freq_factor", &hi, err)) ||
        (rc = rlx_model_key_u32(g, a, "rope.scaling.original_context_length", &orig, false, err)))
        return rc;
    if (!(factor > 0.0f) || !(lo > 0.0f) || !(hi > lo) || orig <= 0)
        return rlx_errorf(err, RLX_EFORMAT, "%s: llama3 rope scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor "
                          "and a positive original_context_length (have %g, %g, %g, %d)", rlx_gguf_path(g), factor, lo, hi, orig);
    int n = m->cfg.n_rot / 2;
    m->rope_factors = malloc((size_t)n * sizeof(float));
    if (!m->rope_factors) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    const double lo_wavelen = orig / lo, hi_wavelen = orig / hi;
    for (int i = 0; i < n; i++) {
        double freq = 1.0 / pow(m->cfg.rope_base, 2.0 * i / m->cfg.n_rot);
        double wavelen = 2.0 * M_PI / freq, f;
        if (wavelen < hi_wavelen) f = 1.0;
        else if (wavelen > lo_wavelen) f = factor;
        else {
            double smooth = (orig / wavelen - lo) / (hi - lo);
            f = 1.0 / ((1.0 - smooth) / factor + smooth);
        }
        m->rope_factors[i] = (float)f;
    }
    return 0;
}

/* <arch>.rope.scaling.type: none, linear (frequencies divided by the factor) or llama3
 * (frequency factors from rope_freqs.weight, or computed from the scaling keys). */
static int read_rope_scaling(rlx_model *m, rlx_error *err)
{
    const rlx_gguf *g = m->gguf;
    rlx_model_config *c = &m->cfg;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", c->arch);
    rlx_gguf_str st;
    int rc = rlx_gguf_get_str(g, key, &st, err);
    if (rc == RLX_ENOTFOUND || (!rc && st.len == 4 && !memcmp(st.ptr, "none", 4))) return 0;
    if (rc) return rc;
    float factor = 1.0f;
    if ((rc = rlx_model_key_f32(g, c->arch, "rope.scaling.factor", &factor, err))) return rc;
    if (st.len == 6 && !memcmp(st.ptr, "linear", 6)) {
        if (!(factor > 0.0f)) return rlx_errorf(err, RLX_EFORMAT, "%s: rope.scaling.factor must be positive", rlx_gguf_path(g));
        c->rope_freq_scale = 1.0f / factor;
        return 0;
    }
    if (st.len == 6 && !memcmp(st.ptr, "llama3", 6))
        return rlx_gguf_find_tensor(g, "rope_freqs.weight") ? 0 : llama3_factors(m, factor, err);
    return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: rope scaling '%.*s' is not supported (none, linear or llama3)",
                      rlx_gguf_path(g), (int)st.len, st.ptr);
}

int rlx_model_load(rlx_model **out, const char *path, rlx_error *err)
{
    rlx_model *m = calloc(1, sizeof *m);
    if (!m) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    int rc = rlx_model_open(&m->gguf, path, err);
    if (rc) { free(m); return rc; }
    rlx_gguf_str s;
    if ((rc = rlx_gguf_get_str(m->gguf, "general.architecture", &s, err))) {
        if (rc == RLX_ENOTFOUND) rlx_errorf(err, RLX_EFORMAT, "%s: general.architecture is missing (not a model file?)", path);
        goto fail;
    }
    if (s.len >= sizeof m->cfg.arch) s.len = sizeof m->cfg.arch - 1;
    memcpy(m->cfg.arch, s.ptr, s.len);
    m->arch = rlx_arch_find(m->cfg.arch);
    if (!m->arch) {
        rc = rlx_errorf(err, RLX_EUNSUPPORTED, "%s: architecture '%s' is not supported (supported: %s)", path, m->cfg.arch, rlx_arch_list());
        goto fail;
    }
    if ((rc = read_common(m->gguf, &m->cfg, err)) || (rc = read_rope_scaling(m, err)) ||
        (rc = m->arch->config(m->gguf, &m->cfg, err)))
        goto fail;
    if (rlx_gguf_get_str(m->gguf, "general.name", &s, NULL) == 0 && s.len) {
        snprintf(m->name, sizeof m->name, "%.*s", (int)RLX_MIN(s.len, sizeof m->name - 1), s.ptr);
    } else {
        const char *base = strrchr(path, '/');
        snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : path);
    }
    *out = m;
    return 0;
fail:
    rlx_gguf_close(m->gguf);
    free(m->rope_factors);
    free(m);
    return rc;
}

void rlx_model_free(rlx_model *m)
{
    if (!m) return;
    rlx_gguf_close(m->gguf);
    free(m->rope_factors);
    free(m);
}

int rlx_model_build(const rlx_model *m, rlx_graph *graph, rlx_error *err)
{
    int rc = m->arch->build(m, graph, err);
    if (!rc && graph->oom) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory while building the graph");
    return rc;
}

int rlx_model_weight(const rlx_model *m, rlx_graph *graph, const char *name, int64_t ne0, int64_t ne1,
                     bool required, rlx_error *err)
{
    const rlx_gguf_tensor *t = rlx_gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (!required) return -1;
        return rlx_errorf(err, RLX_EFORMAT, "%s: tensor '%s' is missing", rlx_gguf_path(m->gguf), name);
    }
    int64_t want1 = ne1 ? ne1 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1)
        return rlx_errorf(err, RLX_EFORMAT, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                          rlx_gguf_path(m->gguf), name, (long long)t->ne[0], (long long)t->ne[1],
                          (long long)t->ne[2], (long long)t->ne[3], (long long)ne0, (long long)want1);
    const rlx_dtype_info *ti = rlx_dtype_get(t->type);
    if (!ti || !ti->computable)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: tensor '%s' has type %s, which rlxd cannot compute with",
                          rlx_gguf_path(m->gguf), name, ti ? ti->name : "unknown");
    if (!ne1 && t->type != RLX_F32)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: vector '%s' must be f32, not %s", rlx_gguf_path(m->gguf), name, ti->name);
    /* names point into the GGUF's own copy, which outlives the graph */
    int id = rlx_g_weight(graph, t->name, t->type, t->ne[0], t->ne[1], t->data);
    if (id < 0) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    return id;
}
