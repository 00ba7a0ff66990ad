/* safetensors.c - a Hugging Face model folder as a GGUF handle (models/safetensors.h): the
 * .safetensors files mapped and validated, config.json turned into llama.cpp's hyper-parameter
 * keys, HF tensor names into llama.cpp's, and Llama's q/k rows permuted as convert_hf_to_gguf.py
 * permutes them. Owns (through the handle's close hook): the mappings, the metadata image and
 * the copies it had to make. */
#include "models/safetensors.h"
#include "models/json.h"
#include "models/model.h"
#include "models/filemap.h"
#include "backends/dtype.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rlx__gguf_add_tensors(rlx_gguf *g, const rlx_gguf_tensor *add, uint64_t n, rlx_error *err);
void rlx__gguf_on_close(rlx_gguf *g, void (*fn)(void *), void *ctx);
void rlx__gguf_on_check(rlx_gguf *g, bool (*fn)(void *ctx, char *why, size_t cap));

#define ST_MAX_HEADER (100u << 20) /* the safetensors crate's limit */
#define ST_MAX_FILES 4096

typedef struct st_map { rlx_filemap fm; char *path; } st_map;

/* everything the handle keeps alive */
typedef struct st_owned {
    st_map *maps;
    size_t n_maps;
    void **bufs;
    size_t n_bufs, cap_bufs;
    void *image;
} st_owned;

static void owned_free(void *p)
{
    st_owned *o = p;
    if (!o) return;
    for (size_t i = 0; i < o->n_maps; i++) {
        rlx__filemap_close(&o->maps[i].fm);
        free(o->maps[i].path);
    }
    for (size_t i = 0; i < o->n_bufs; i++) free(o->bufs[i]);
    free(o->maps);
    free(o->bufs);
    free(o->image);
    free(o);
}

static bool owned_changed(void *p, char *why, size_t cap)
{
    st_owned *o = p;
    char w[96];
    for (size_t i = 0; i < o->n_maps; i++)
        if (rlx__filemap_changed(&o->maps[i].fm, w, sizeof w)) {
            if (why && cap) snprintf(why, cap, "%s: %s", o->maps[i].path ? o->maps[i].path : "", w);
            return true;
        }
    return false;
}

static void *owned_alloc(st_owned *o, size_t n)
{
    if (o->n_bufs == o->cap_bufs) {
        size_t cap = o->cap_bufs ? 2 * o->cap_bufs : 16;
        void **b = realloc(o->bufs, cap * sizeof *b);
        if (!b) return NULL;
        o->bufs = b;
        o->cap_bufs = cap;
    }
    void *p = malloc(n ? n : 1);
    if (p) o->bufs[o->n_bufs++] = p;
    return p;
}

/* dir/name into path[ST_PATH]; a path that does not fit is an error, never a shortened name */
enum { ST_PATH = 4096 };
static int join_path(char *path, const char *dir, const char *name, rlx_error *err)
{
    int n = snprintf(path, ST_PATH, "%s/%s", dir, name);
    if (n < 0 || n >= ST_PATH) return rlx_errorf(err, RLX_EINVAL, "%.200s...: path longer than %d bytes", dir, ST_PATH - 1);
    return 0;
}

static int read_json(const char *dir, const char *name, cJSON **out, bool required, rlx_error *err)
{
    *out = NULL;
    char path[ST_PATH];
    int jrc = join_path(path, dir, name, err);
    if (jrc) return jrc;
    char *text;
    size_t len;
    int rc = rlx__read_file(path, &text, &len, err);
    if (rc == RLX_ENOTFOUND && !required) return 0;
    if (rc == RLX_ENOTFOUND) return rlx_errorf(err, RLX_ENOTFOUND, "%s: the model folder has no %s", dir, name);
    if (rc) return rc;
    rlx_error e2 = {0};
    rc = rlx_json_parse(text, len, out, &e2);
    free(text);
    if (rc) return rlx_errorf(err, RLX_EFORMAT, "%s: %s", path, e2.msg);
    return 0;
}

bool rlx_st_is_folder(const char *path)
{
    struct stat st;
    char p[4096];
    if (!path || stat(path, &st) || !S_ISDIR(st.st_mode)) return false;
    snprintf(p, sizeof p, "%s/config.json", path);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int rlx_model_open(rlx_gguf **out, const char *path, rlx_error *err)
{
    struct stat st;
    if (path && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (rlx_st_is_folder(path)) return rlx_st_open(out, path, err);
        *out = NULL;
        return rlx_errorf(err, RLX_EIO, "%s: is a folder without config.json, neither a GGUF file nor a Hugging Face "
                          "model folder", path);
    }
    return rlx_gguf_open_split(out, path, err);
}

/* ---- config.json ------------------------------------------------------------------------ */

typedef struct hf_arch {
    const char *hf, *arch;
    bool permute_qk;      /* llama.cpp's converter permutes q/k rows (Llama's interleaved RoPE) */
    bool gemma;           /* Gemma 2 and 3: norms stored as w - 1 (the converter adds 1), four norms
                             per block, a sliding window, lm_head ignored */
    bool gemma3;          /* Gemma 3: q/k norms, no attention soft-capping, a local RoPE base for the
                             sliding layers; the language model of a multimodal checkpoint is read
                             (tensors under language_model., vision tensors skipped) */
} hf_arch;

static const hf_arch k_archs[] = {
    {"LlamaForCausalLM", "llama", true, false, false},
    {"Qwen2ForCausalLM", "qwen2", false, false, false},
    {"Qwen3ForCausalLM", "qwen3", false, false, false},
    {"Gemma2ForCausalLM", "gemma2", false, true, false},
    {"Gemma3ForCausalLM", "gemma3", false, true, true},
    {"Gemma3ForConditionalGeneration", "gemma3", false, true, true},
};

static const cJSON *obj(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* An integer field (required or not) into *out; RLX_EFORMAT naming it when not a whole number. */
static int cfg_int(const cJSON *c, const char *dir, const char *key, int64_t *out, bool required, rlx_error *err)
{
    const cJSON *v = obj(c, key);
    if (!v) {
        if (required) return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: '%s' is missing", dir, key);
        return RLX_ENOTFOUND;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0)
        return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: '%s' must be a non-negative integer", dir, key);
    if (v->valuedouble > INT32_MAX)
        return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: '%s' is %.0f, past the largest value read (%d)", dir, key,
                          v->valuedouble, INT32_MAX);
    *out = (int64_t)v->valuedouble;
    return 0;
}

static int set_u32(rlx_gguf_writer *w, const char *arch, const char *key, int64_t v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return rlx_gguf_writer_set_u32(w, k, (uint32_t)v);
}

static int set_f32(rlx_gguf_writer *w, const char *arch, const char *key, double v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return rlx_gguf_writer_set_f32(w, k, (float)v);
}

typedef struct hparams {
    const hf_arch *a;
    int64_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab;
    bool tied;
} hparams;

/* Gemma 2 / 3 keys as convert_hf_to_gguf.py writes them. query_pre_attn_scalar must be the
 * query scale llama.cpp's graphs use (head_dim; n_embd / n_head for the 27B shapes): any other
 * value is refused rather than giving other numbers. Gemma 3: no attention soft-capping; the
 * sliding layers from layer_types (per-layer flags) or sliding_window_pattern (every n-th layer
 * global; 1: none slides), with rope_local_base_freq as their RoPE base. */
static int gemma_keys(rlx_gguf_writer *w, const cJSON *c, const char *dir, const hparams *h, rlx_error *err)
{
    const char *arch = h->a->arch;
    const cJSON *v;
    int64_t sw = 0, qpas = 0, pattern = -1;
    int rc;
    if ((rc = cfg_int(c, dir, "sliding_window", &sw, false, err)) > 0 ||
        (rc = cfg_int(c, dir, "query_pre_attn_scalar", &qpas, false, err)) > 0)
        return rc;
    int64_t want = rlx_model_gemma_query_dim(h->a->gemma3, h->n_layer, h->n_embd, h->n_head,
                                             h->head_dim ? h->head_dim : h->n_embd / h->n_head);
    if (qpas && qpas != want)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s/config.json: query_pre_attn_scalar %lld is not supported for this shape "
                          "(llama.cpp's graph scales queries by 1/sqrt(%lld))", dir, (long long)qpas, (long long)want);
    rc = 0;
    if (!h->a->gemma3) {
        rc = sw ? set_u32(w, arch, "attention.sliding_window", sw) : 0;
        const char *caps[] = {"attn_logit_softcapping", "final_logit_softcapping"};
        for (size_t i = 0; !rc && i < RLX_ARRAY_LEN(caps); i++)
            if ((v = obj(c, caps[i])) && cJSON_IsNumber(v)) rc = set_f32(w, arch, caps[i], v->valuedouble);
        return rc ? rlx_errorf(err, rc, "%s: %s", dir, rlx_gguf_writer_last_error(w)) : 0;
    }
    if (obj(c, "attn_logit_softcapping"))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s/config.json: attn_logit_softcapping is set; Gemma 3 has no attention "
                          "soft-capping", dir);
    if ((v = obj(c, "final_logit_softcapping"))) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0)
            return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: 'final_logit_softcapping' must be a non-negative number", dir);
        rc = set_f32(w, arch, "final_logit_softcapping", v->valuedouble);
    }
    if (!rc && (rc = cfg_int(c, dir, "sliding_window_pattern", &pattern, false, err)) > 0) return rc;
    if (pattern == 0) return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: 'sliding_window_pattern' must be positive", dir);
    const cJSON *lt = obj(c, "layer_types");
    rc = 0;
    if (lt) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != h->n_layer)
            return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: 'layer_types' must list one type per layer (%lld)", dir,
                              (long long)h->n_layer);
        uint8_t *flags = calloc((size_t)h->n_layer, 1);
        if (!flags) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        int64_t l = 0;
        cJSON_ArrayForEach(v, lt) {
            const char *t = cJSON_IsString(v) ? v->valuestring : "";
            if (!strcmp(t, "sliding_attention")) flags[l] = 1;
            else if (strcmp(t, "full_attention")) {
                free(flags);
                return rlx_errorf(err, RLX_EUNSUPPORTED, "%s/config.json: layer_types[%lld] '%.40s' is not supported "
                                  "(sliding_attention, full_attention)", dir, (long long)l, t);
            }
            l++;
        }
        char k[128];
        snprintf(k, sizeof k, "%s.attention.sliding_window_pattern", arch);
        rc = rlx_gguf_writer_set_arr(w, k, RLX_GGUF_BOOL, flags, (uint64_t)h->n_layer);
        free(flags);
    } else if (pattern > 1 && pattern != 6) { /* 6: llama.cpp's default for Gemma 3 */
        rc = set_u32(w, arch, "attention.sliding_window_pattern", pattern);
    }
    if (!rc && sw && (lt || pattern != 1)) rc = set_u32(w, arch, "attention.sliding_window", sw);
    if (!rc && (v = obj(c, "rope_local_base_freq"))) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0))
            return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: 'rope_local_base_freq' must be a positive number", dir);
        rc = set_f32(w, arch, "rope.freq_base_swa", v->valuedouble);
    }
    return rc ? rlx_errorf(err, rc, "%s: %s", dir, rlx_gguf_writer_last_error(w)) : 0;
}

/* config.json -> the keys convert_hf_to_gguf.py writes for these families */
static int config_keys(rlx_gguf_writer *w, const cJSON *c, const char *dir, hparams *h, rlx_error *err)
{
    const cJSON *archs = obj(c, "architectures");
    const cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    if (!cJSON_IsString(a0))
        return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: 'architectures' must be a list naming the model class", dir);
    for (size_t i = 0; i < RLX_ARRAY_LEN(k_archs) && !h->a; i++)
        if (!strcmp(k_archs[i].hf, a0->valuestring)) h->a = &k_archs[i];
    if (!h->a) {
        char list[256] = "";
        for (size_t i = 0; i < RLX_ARRAY_LEN(k_archs); i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", k_archs[i].hf);
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: architecture '%.64s' (config.json) is not supported for safetensors "
                          "folders (supported: %s)", dir, a0->valuestring, list);
    }
    const char *arch = h->a->arch;
    int rc;
    int64_t ctx = 0;
    if ((rc = cfg_int(c, dir, "num_hidden_layers", &h->n_layer, true, err)) ||
        (rc = cfg_int(c, dir, "hidden_size", &h->n_embd, true, err)) ||
        (rc = cfg_int(c, dir, "intermediate_size", &h->n_ff, true, err)) ||
        (rc = cfg_int(c, dir, "num_attention_heads", &h->n_head, true, err)))
        return rc;
    h->n_head_kv = h->n_head;
    if ((rc = cfg_int(c, dir, "num_key_value_heads", &h->n_head_kv, false, err)) > 0) return rc;
    if (h->n_head <= 0 || h->n_head_kv <= 0 || h->n_embd <= 0 || h->n_layer <= 0)
        return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: layers, hidden_size and head counts must be positive", dir);
    h->head_dim = 0;
    if ((rc = cfg_int(c, dir, "head_dim", &h->head_dim, false, err)) > 0) return rc;
    if ((rc = cfg_int(c, dir, "max_position_embeddings", &ctx, false, err)) > 0) return rc;
    if (!rc && !ctx) return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: 'max_position_embeddings' is 0", dir);
    if ((rc = cfg_int(c, dir, "vocab_size", &h->n_vocab, false, err)) > 0) return rc;
    const cJSON *tie = obj(c, "tie_word_embeddings");
    h->tied = tie ? cJSON_IsTrue(tie) : false;

    const char *name = strrchr(dir, '/');
    name = name && name[1] ? name + 1 : dir;
    rc = rlx_gguf_writer_set_str(w, "general.architecture", arch, strlen(arch));
    if (!rc) rc = rlx_gguf_writer_set_str(w, "general.name", name, strlen(name));
    if (!rc && ctx) rc = set_u32(w, arch, "context_length", ctx);
    if (!rc) rc = set_u32(w, arch, "embedding_length", h->n_embd);
    if (!rc) rc = set_u32(w, arch, "block_count", h->n_layer);
    if (!rc) rc = set_u32(w, arch, "feed_forward_length", h->n_ff);
    if (!rc) rc = set_u32(w, arch, "attention.head_count", h->n_head);
    if (!rc) rc = set_u32(w, arch, "attention.head_count_kv", h->n_head_kv);
    if (!rc && h->head_dim) rc = set_u32(w, arch, "attention.key_length", h->head_dim);
    if (!rc && h->head_dim) rc = set_u32(w, arch, "attention.value_length", h->head_dim);
    if (!rc && h->head_dim) rc = set_u32(w, arch, "rope.dimension_count", h->head_dim);
    const cJSON *v;
    if (!rc && (v = obj(c, "rope_theta"))) {
        if (!cJSON_IsNumber(v)) return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: 'rope_theta' must be a number", dir);
        rc = set_f32(w, arch, "rope.freq_base", v->valuedouble);
    }
    if (!rc && (v = obj(c, "rms_norm_eps"))) {
        if (!cJSON_IsNumber(v)) return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: 'rms_norm_eps' must be a number", dir);
        rc = set_f32(w, arch, "attention.layer_norm_rms_epsilon", v->valuedouble);
    }
    if (!rc && h->a->gemma && (rc = gemma_keys(w, c, dir, h, err))) return rc;
    /* RoPE as transformers v5 writes it: rope_parameters, flat or per layer type (Gemma 3:
     * full_attention for the global layers, sliding_attention for the sliding ones) */
    const cJSON *rp = obj(c, "rope_parameters"), *rs = obj(c, "rope_scaling");
    if (!rc && rp) {
        if (!cJSON_IsObject(rp)) return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: 'rope_parameters' must be an object", dir);
        const cJSON *full = obj(rp, "full_attention"), *slide = obj(rp, "sliding_attention");
        if (full || slide) {
            if ((full && !cJSON_IsObject(full)) || (slide && !cJSON_IsObject(slide)))
                return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: rope_parameters' entries must be objects", dir);
            if (slide && !h->a->gemma3)
                return rlx_errorf(err, RLX_EUNSUPPORTED, "%s/config.json: per-layer-type rope_parameters are read for Gemma 3 only", dir);
            if (slide && (v = obj(slide, "rope_theta")) && !obj(c, "rope_local_base_freq")) {
                if (!cJSON_IsNumber(v)) return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: 'rope_theta' must be a number", dir);
                if ((v = obj(slide, "rope_type")) && (!cJSON_IsString(v) || strcmp(v->valuestring, "default")))
                    return rlx_errorf(err, RLX_EUNSUPPORTED, "%s/config.json: the sliding layers' RoPE must be 'default' (no scaling)", dir);
                rc = set_f32(w, arch, "rope.freq_base_swa", obj(slide, "rope_theta")->valuedouble);
            }
            rp = full;
        }
        if (!rc && rp && (v = obj(rp, "rope_theta")) && !obj(c, "rope_theta")) {
            if (!cJSON_IsNumber(v)) return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: 'rope_theta' must be a number", dir);
            rc = set_f32(w, arch, "rope.freq_base", v->valuedouble);
        }
        if (!rs) rs = rp;
    }
    if (!rc && rs) {
        const cJSON *t = obj(rs, "rope_type");
        if (!t) t = obj(rs, "type");
        const cJSON *f = obj(rs, "factor");
        const char *ty = cJSON_IsString(t) ? t->valuestring : rs == rp ? "default" : "";
        if (!strcmp(ty, "default")) {
        } else if ((!strcmp(ty, "linear") || !strcmp(ty, "llama3")) && cJSON_IsNumber(f)) {
            char k[128];
            snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
            rc = rlx_gguf_writer_set_str(w, k, ty, strlen(ty));
            if (!rc) rc = set_f32(w, arch, "rope.scaling.factor", f->valuedouble);
            const cJSON *lo = obj(rs, "low_freq_factor"), *hi = obj(rs, "high_freq_factor"),
                        *orig = obj(rs, "original_max_position_embeddings");
            if (!rc && cJSON_IsNumber(lo)) rc = set_f32(w, arch, "rope.scaling.low_freq_factor", lo->valuedouble);
            if (!rc && cJSON_IsNumber(hi)) rc = set_f32(w, arch, "rope.scaling.high_freq_factor", hi->valuedouble);
            if (!rc && cJSON_IsNumber(orig) && orig->valuedouble >= 0 && orig->valuedouble <= INT32_MAX)
                rc = set_u32(w, arch, "rope.scaling.original_context_length", (int64_t)orig->valuedouble);
        } else {
            return rlx_errorf(err, RLX_EUNSUPPORTED, "%s/config.json: rope_scaling type '%.32s' is not supported (linear, "
                              "llama3)", dir, ty);
        }
    }
    if (rc) return rlx_errorf(err, rc, "%s: %s", dir, rlx_gguf_writer_last_error(w));
    return 0;
}

/* ---- tensors ------------------------------------------------------------------------------ */

typedef struct st_tensor {
    char *hf;             /* the HF name */
    int dtype;            /* RLX_F32 / F16 / BF16 */
    uint32_t n_dims;
    int64_t shape[RLX_GGUF_MAX_DIMS]; /* as stored: shape[0] outermost */
    const void *data;
    uint64_t size;
    uint64_t offset;      /* in its file, with the file's number in the top 16 bits (a distinct place per tensor) */
} st_tensor;

typedef struct st_set {
    st_tensor *v;
    size_t n, cap;
} st_set;

static int dtype_of(const char *s, int *out)
{
    if (!strcmp(s, "F32")) *out = RLX_F32;
    else if (!strcmp(s, "F16")) *out = RLX_F16;
    else if (!strcmp(s, "BF16")) *out = RLX_BF16;
    else return -1;
    return 0;
}

/* One .safetensors file: mapped (into o), its tensors appended to set. */
static int load_file(const char *path, st_owned *o, st_set *set, rlx_error *err)
{
    /* not waiting in open: a FIFO in the folder is refused (rlx__filemap_open: not a regular
       file), never a load - or a scan on the loop thread - held for ever */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return rlx_errorf(err, errno == ENOENT ? RLX_ENOTFOUND : RLX_EIO, "%s: cannot open: %s", path, strerror(errno));
    st_map *maps = realloc(o->maps, (o->n_maps + 1) * sizeof *maps);
    if (!maps) { close(fd); return rlx_errorf(err, RLX_ENOMEM, "out of memory"); }
    o->maps = maps;
    st_map *sm = &maps[o->n_maps];
    int frc = rlx__filemap_open(&sm->fm, fd, path, err);
    if (frc) return frc;
    o->n_maps++;
    sm->path = strdup(path);
    if (sm->fm.size < 8) return rlx_errorf(err, RLX_EFORMAT, "%s: not a safetensors file (under 8 bytes)", path);
    const uint8_t *b = sm->fm.base;
    uint64_t size = (uint64_t)sm->fm.size, hlen;
    memcpy(&hlen, b, 8); /* little-endian, like the GGUF reader assumes */
    if (hlen > ST_MAX_HEADER || hlen > size - 8)
        return rlx_errorf(err, RLX_EFORMAT, "%s: header length %llu runs past the end of the file (%llu bytes)", path,
                          (unsigned long long)hlen, (unsigned long long)size);
    cJSON *h = NULL;
    rlx_error e2 = {0};
    if (rlx_json_parse((const char *)b + 8, (size_t)hlen, &h, &e2) || !cJSON_IsObject(h)) {
        cJSON_Delete(h);
        return rlx_errorf(err, RLX_EFORMAT, "%s: the header is not a JSON object: %s", path, e2.msg[0] ? e2.msg : "");
    }
    const uint8_t *data = b + 8 + hlen;
    uint64_t dsize = size - 8 - hlen;
    int rc = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, h) {
        if (!strcmp(t->string, "__metadata__")) continue;
        const cJSON *dt = obj(t, "dtype"), *shape = obj(t, "shape"), *offs = obj(t, "data_offsets");
        if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2) {
            rc = rlx_errorf(err, RLX_EFORMAT, "%s: tensor '%.200s' lacks dtype, shape or data_offsets", path, t->string);
            break;
        }
        st_tensor x = {0};
        if (dtype_of(dt->valuestring, &x.dtype)) {
            rc = rlx_errorf(err, RLX_EUNSUPPORTED, "%s: tensor '%.200s' has dtype %.16s; rlxd reads F32, F16 and BF16 "
                            "safetensors", path, t->string, dt->valuestring);
            break;
        }
        int nd = cJSON_GetArraySize(shape);
        if (nd < 1 || nd > RLX_GGUF_MAX_DIMS) {
            rc = rlx_errorf(err, RLX_EUNSUPPORTED, "%s: tensor '%.200s' has %d dimensions (1 to 4 supported)", path, t->string, nd);
            break;
        }
        uint64_t numel = 1;
        for (int i = 0; i < nd && !rc; i++) {
            const cJSON *d = cJSON_GetArrayItem(shape, i);
            if (!cJSON_IsNumber(d) || d->valuedouble < 1 || d->valuedouble > (double)(1ull << 40) ||
                d->valuedouble != floor(d->valuedouble))
                rc = rlx_errorf(err, RLX_EFORMAT, "%s: tensor '%.200s' has a bad shape", path, t->string);
            else {
                x.shape[i] = (int64_t)d->valuedouble;
                /* checked before it can wrap: a shape whose product wrapped to the tensor's real byte
                   size passed the offsets check, and later products overflowed (UBSan) */
                if (__builtin_mul_overflow(numel, (uint64_t)x.shape[i], &numel) || numel > (1ull << 44))
                    rc = rlx_errorf(err, RLX_EFORMAT, "%s: tensor '%.200s' is too large", path, t->string);
            }
        }
        if (rc) break;
        x.n_dims = (uint32_t)nd;
        double o0 = cJSON_GetArrayItem(offs, 0)->valuedouble, o1 = cJSON_GetArrayItem(offs, 1)->valuedouble;
        uint64_t want = numel * (x.dtype == RLX_F32 ? 4 : 2);
        if (!(o0 >= 0 && o1 >= o0 && o1 <= (double)dsize) || (uint64_t)o1 - (uint64_t)o0 != want) {
            rc = rlx_errorf(err, RLX_EFORMAT, "%s: tensor '%.200s': data_offsets [%.0f, %.0f] do not hold its %llu bytes "
                            "within the %llu-byte data section", path, t->string, o0, o1, (unsigned long long)want,
                            (unsigned long long)dsize);
            break;
        }
        x.data = data + (uint64_t)o0;
        x.offset = ((uint64_t)(o->n_maps - 1) << 48) | (8 + hlen + (uint64_t)o0);
        x.size = want;
        x.hf = strdup(t->string);
        if (set->n == set->cap) {
            size_t cap = set->cap ? 2 * set->cap : 64;
            st_tensor *v = realloc(set->v, cap * sizeof *v);
            if (!v) { free(x.hf); rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); break; }
            set->v = v;
            set->cap = cap;
        }
        if (!x.hf) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); break; }
        set->v[set->n++] = x;
    }
    cJSON_Delete(h);
    return rc;
}

/* model.safetensors, or every shard model.safetensors.index.json's weight_map names */
static int load_weights(const char *dir, st_owned *o, st_set *set, rlx_error *err)
{
    char path[ST_PATH];
    cJSON *idx = NULL;
    int rc = read_json(dir, "model.safetensors.index.json", &idx, false, err);
    if (rc) return rc;
    if (!idx) {
        rc = join_path(path, dir, "model.safetensors", err);
        if (!rc) rc = load_file(path, o, set, err);
        if (rc == RLX_ENOTFOUND)
            rc = rlx_errorf(err, RLX_ENOTFOUND, "%s: the model folder has neither model.safetensors nor "
                            "model.safetensors.index.json", dir);
        return rc;
    }
    const cJSON *wm = obj(idx, "weight_map"), *e;
    if (!cJSON_IsObject(wm)) rc = rlx_errorf(err, RLX_EFORMAT, "%s/model.safetensors.index.json: no weight_map object", dir);
    /* each shard once, in the order the map first names it */
    const char **files = calloc(ST_MAX_FILES, sizeof *files);
    size_t nf = 0;
    if (!rc && !files) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
    if (!rc) cJSON_ArrayForEach(e, wm) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/') || e->valuestring[0] == '.') {
            rc = rlx_errorf(err, RLX_EFORMAT, "%s/model.safetensors.index.json: '%.200s' maps to a bad file name", dir, e->string);
            break;
        }
        size_t i = 0;
        while (i < nf && strcmp(files[i], e->valuestring)) i++;
        if (i < nf) continue;
        if (nf == ST_MAX_FILES) { rc = rlx_errorf(err, RLX_EFORMAT, "%s: too many shards", dir); break; }
        files[nf++] = e->valuestring;
    }
    /* every missing shard at once */
    char missing[1024] = "";
    size_t n_missing = 0;
    for (size_t i = 0; !rc && i < nf; i++) {
        if ((rc = join_path(path, dir, files[i], err))) break;
        if (access(path, F_OK) == 0) continue;
        snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", n_missing++ ? ", " : "", files[i]);
    }
    if (!rc && n_missing)
        rc = rlx_errorf(err, RLX_ENOTFOUND, "%s: %zu of the %zu shards model.safetensors.index.json names %s missing: %s",
                        dir, n_missing, nf, n_missing == 1 ? "is" : "are", missing);
    size_t before = set->n;
    for (size_t i = 0; !rc && i < nf; i++) {
        rc = join_path(path, dir, files[i], err);
        if (!rc) rc = load_file(path, o, set, err);
    }
    /* the index and the shards must agree */
    if (!rc) cJSON_ArrayForEach(e, wm) {
        size_t i = before;
        while (i < set->n && strcmp(set->v[i].hf, e->string)) i++;
        if (i == set->n) {
            rc = rlx_errorf(err, RLX_EFORMAT, "%s: tensor '%.200s' is in the index but not in %s", dir, e->string, e->valuestring);
            break;
        }
    }
    free(files);
    cJSON_Delete(idx);
    return rc;
}

/* HF name -> llama.cpp name (false: not a tensor of these families) */
static bool map_name(const char *hf, char *out, size_t cap, bool *skip, const hf_arch *a)
{
    bool gemma = a->gemma;
    static const char *const gemma_blk[][2] = {
        {"post_attention_layernorm.weight", "post_attention_norm.weight"},
        {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    };
    static const char *const glob[][2] = {
        {"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
        {"lm_head.weight", "output.weight"},
    };
    static const char *const blk[][2] = {
        {"input_layernorm.weight", "attn_norm.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"}, {"self_attn.k_proj.bias", "attn_k.bias"},
        {"self_attn.v_proj.bias", "attn_v.bias"}, {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"}, {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"}, {"mlp.down_proj.weight", "ffn_down.weight"},
    };
    *skip = false;
    char lm[256];
    if (a->gemma3) {
        /* a multimodal checkpoint: the vision tower and projector are not the language model's;
         * "language_model." is dropped wherever it sits (language_model.model.layers... in older
         * exports, model.language_model.layers... in newer ones), as llama.cpp's converter does */
        static const char *const vision[] = {"vision_tower.", "multi_modal_projector.", "multimodal_projector.", "vision_model.",
                                             "model.vision_tower.", "model.multi_modal_projector."};
        for (size_t i = 0; i < RLX_ARRAY_LEN(vision); i++)
            if (!strncmp(hf, vision[i], strlen(vision[i]))) { *skip = true; return true; }
        const char *at = strstr(hf, "language_model.");
        if (at && strlen(hf) < sizeof lm) {
            snprintf(lm, sizeof lm, "%.*s%s", (int)(at - hf), hf, at + strlen("language_model."));
            hf = lm;
        }
    }
    for (size_t i = 0; i < RLX_ARRAY_LEN(glob); i++)
        if (!strcmp(hf, glob[i][0])) { snprintf(out, cap, "%s", glob[i][1]); return true; }
    unsigned layer;
    int pos = 0;
    if (sscanf(hf, "model.layers.%u.%n", &layer, &pos) == 1 && pos > 0) {
        const char *rest = hf + pos;
        if (!strcmp(rest, "self_attn.rotary_emb.inv_freq")) { *skip = true; return true; } /* llama.cpp skips it too */
        for (size_t i = 0; gemma && i < RLX_ARRAY_LEN(gemma_blk); i++)
            if (!strcmp(rest, gemma_blk[i][0])) { snprintf(out, cap, "blk.%u.%s", layer, gemma_blk[i][1]); return true; }
        for (size_t i = 0; i < RLX_ARRAY_LEN(blk); i++)
            if (!strcmp(rest, blk[i][0])) { snprintf(out, cap, "blk.%u.%s", layer, blk[i][1]); return true; }
    }
    return false;
}

static float half_to_f32(int dtype, const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return dtype == RLX_BF16 ? rlx_bf16_to_f32(h) : rlx_f16_to_f32(h);
}

/* llama.cpp's permute(w, n_head, n_head_kv) for Llama's q/k: within each head, rows
 * [first half | second half] become interleaved pairs (row 2i+j of the GGUF is row j*hd/2+i). */
static void permute_rows(uint8_t *dst, const uint8_t *src, int64_t rows, int64_t heads, size_t row_bytes)
{
    int64_t hd = rows / heads, half = hd / 2;
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++)
                memcpy(dst + (size_t)(h * hd + 2 * i + j) * row_bytes, src + (size_t)(h * hd + j * half + i) * row_bytes, row_bytes);
}

static int add_tensors(rlx_gguf *g, const char *dir, const hparams *hp, st_set *set, st_owned *o, rlx_error *err)
{
    rlx_gguf_tensor *ts = calloc(set->n ? set->n : 1, sizeof *ts);
    char (*names)[96] = calloc(set->n ? set->n : 1, sizeof *names);
    size_t n = 0;
    int rc = 0;
    if (!ts || !names) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < set->n; i++) {
        const st_tensor *x = &set->v[i];
        bool skip;
        if (!map_name(x->hf, names[n], sizeof names[n], &skip, hp->a)) {
            rc = rlx_errorf(err, RLX_EUNSUPPORTED, "%s: tensor '%.200s' is not one rlxd maps for %s models", dir, x->hf,
                            hp->a->hf);
            break;
        }
        if (skip || ((hp->tied || hp->a->gemma) && !strcmp(names[n], "output.weight")))
            continue; /* tied (Gemma always): the embedding is the output */
        rlx_gguf_tensor *t = &ts[n];
        t->name = names[n];
        t->n_dims = x->n_dims;
        for (int d = 0; d < RLX_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < x->n_dims; d++) t->ne[d] = x->shape[x->n_dims - 1 - d]; /* GGUF: innermost first */
        t->type = x->dtype;
        t->data = x->data;
        t->offset = x->offset;
        t->size = x->size;
        int64_t numel = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        size_t nl = strlen(names[n]);
        bool shift = hp->a->gemma && nl > 11 && !strcmp(names[n] + nl - 11, "norm.weight");
        if ((x->n_dims == 1 && x->dtype != RLX_F32) || shift) { /* GGUF keeps vectors F32 */
            float *f = owned_alloc(o, (size_t)numel * sizeof *f);
            if (!f) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); break; }
            for (int64_t k = 0; k < numel; k++) {
                const uint8_t *p = (const uint8_t *)x->data + (x->dtype == RLX_F32 ? 4 : 2) * k;
                float v;
                if (x->dtype == RLX_F32) memcpy(&v, p, 4);
                else v = half_to_f32(x->dtype, p);
                /* Gemma: + 1 in the checkpoint's own type, as torch adds it in the converter */
                if (shift && x->dtype == RLX_F32) v += 1.0f;
                else if (shift) v = x->dtype == RLX_BF16 ? rlx_bf16_to_f32(rlx_f32_to_bf16(v + 1.0f))
                                                        : rlx_f16_to_f32(rlx_f32_to_f16(v + 1.0f));
                f[k] = v;
            }
            t->type = RLX_F32;
            t->data = f;
            t->size = (uint64_t)numel * 4;
        }
        size_t el = t->type == RLX_F32 ? 4 : 2;
        if ((uintptr_t)t->data % el) { /* safetensors does not align tensors; the kernels read whole elements */
            void *p = owned_alloc(o, (size_t)t->size);
            if (!p) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); break; }
            memcpy(p, t->data, (size_t)t->size);
            t->data = p;
        }
        const char *suffix = strrchr(names[n], '.');
        bool is_q = suffix && strstr(names[n], ".attn_q.weight"), is_k = suffix && strstr(names[n], ".attn_k.weight");
        if (hp->a->permute_qk && (is_q || is_k)) {
            int64_t heads = is_q ? hp->n_head : hp->n_head_kv, rows = t->ne[1];
            if (x->n_dims != 2 || rows % heads || (rows / heads) % 2) {
                rc = rlx_errorf(err, RLX_EFORMAT, "%s: tensor '%.200s' has %lld rows, not a whole number of %lld heads of "
                                "even size", dir, x->hf, (long long)rows, (long long)heads);
                break;
            }
            uint8_t *p = owned_alloc(o, (size_t)t->size);
            if (!p) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); break; }
            permute_rows(p, t->data, rows, heads, (size_t)(t->size / (uint64_t)rows));
            t->data = p;
        }
        n++;
    }
    if (!rc) rc = rlx__gguf_add_tensors(g, ts, n, err);
    free(ts);
    free(names);
    return rc;
}

static void set_free(st_set *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->v[i].hf);
    free(s->v);
}

/* A multimodal checkpoint's language model: text_config's entries over the top level's, as
 * convert_hf_to_gguf.py merges them ("architectures" stays the top level's). */
static int merge_text_config(cJSON *cfg, const char *dir, rlx_error *err)
{
    if (!obj(cfg, "text_config")) return 0;
    cJSON *tc = cJSON_DetachItemFromObjectCaseSensitive(cfg, "text_config"), *e;
    if (!cJSON_IsObject(tc)) {
        cJSON_Delete(tc);
        return rlx_errorf(err, RLX_EFORMAT, "%s/config.json: 'text_config' must be an object", dir);
    }
    int rc = 0;
    while (!rc && (e = tc->child)) { /* each entry moves to the top level */
        cJSON_DetachItemViaPointer(tc, e);
        if (!e->string || !strcmp(e->string, "architectures")) {
            cJSON_Delete(e);
            continue;
        }
        /* (cJSON_AddItemToObject copies the key before it frees the item's own) */
        cJSON_DeleteItemFromObjectCaseSensitive(cfg, e->string);
        if (!cJSON_AddItemToObject(cfg, e->string, e)) {
            cJSON_Delete(e);
            rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
        }
    }
    cJSON_Delete(tc);
    return rc;
}

int rlx_st_open(rlx_gguf **out, const char *dir_in, rlx_error *err)
{
    *out = NULL;
    char dir[ST_PATH];
    if (strlen(dir_in) >= sizeof dir) return rlx_errorf(err, RLX_EINVAL, "%.200s...: path longer than %d bytes", dir_in, ST_PATH - 1);
    snprintf(dir, sizeof dir, "%s", dir_in);
    for (size_t l = strlen(dir); l > 1 && dir[l - 1] == '/'; l--) dir[l - 1] = 0;
    cJSON *cfg = NULL;
    st_owned *o = calloc(1, sizeof *o);
    st_set set = {0};
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    hparams hp = {0};
    rlx_gguf *g = NULL;
    int rc = 0;
    if (!o || !w) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
    if (!rc) rc = read_json(dir, "config.json", &cfg, true, err);
    if (!rc && !cJSON_IsObject(cfg)) rc = rlx_errorf(err, RLX_EFORMAT, "%s/config.json: not a JSON object", dir);
    if (!rc) rc = merge_text_config(cfg, dir, err);
    if (!rc) rc = config_keys(w, cfg, dir, &hp, err);
    if (!rc) rc = load_weights(dir, o, &set, err);
    int64_t rows = 0;
    for (size_t i = 0; i < set.n; i++)
        if (!strcmp(set.v[i].hf, "model.embed_tokens.weight")) rows = set.v[i].shape[0];
    if (!rc) rc = rlx_hf_tokenizer_keys(w, dir, rows, err);
    /* the weights' identity in the metadata image, which is what rlx_gguf_bytes covers (the
     * session snapshots' model hash digests it): each file's name, size and modification time */
    char files[4096] = "";
    for (size_t i = 0; !rc && o && i < o->n_maps; i++) {
        const char *b = strrchr(o->maps[i].path ? o->maps[i].path : "", '/');
        snprintf(files + strlen(files), sizeof files - strlen(files), "%s%s %zu %lld", i ? "; " : "", b ? b + 1 : "",
                 o->maps[i].fm.len, (long long)o->maps[i].fm.mtime_ns);
    }
    if (!rc && rlx_gguf_writer_set_str(w, "rlxd.safetensors.files", files, strlen(files)))
        rc = rlx_errorf(err, RLX_EINVAL, "%s: %s", dir, rlx_gguf_writer_last_error(w));
    size_t len = 0;
    if (!rc) rc = rlx_gguf_writer_write_memory(w, &o->image, &len, err);
    if (!rc) rc = rlx_gguf_open_memory(&g, o->image, len, dir, err);
    if (!rc) {
        st_owned *keep = o;
        rlx__gguf_on_close(g, owned_free, o);
        rlx__gguf_on_check(g, owned_changed);
        o = NULL; /* the handle owns it now, whatever happens next */
        rc = add_tensors(g, dir, &hp, &set, keep, err);
    }
    set_free(&set);
    rlx_gguf_writer_free(w);
    cJSON_Delete(cfg);
    owned_free(o);
    if (rc) { rlx_gguf_close(g); return rc; }
    *out = g;
    return 0;
}
