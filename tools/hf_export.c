/* hf_export.c - a GGUF model as a Hugging Face folder (tools/hf_export.h). */
#include "tools/hf_export.h"
#include "models/model.h"
#include "models/tokenizer.h"
#include "backends/dtype.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER = 4, T_UNUSED = 5, T_BYTE = 6 };

static int write_text(const char *dir, const char *name, const char *text, rlx_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return rlx_errorf(err, RLX_EIO, "%s: cannot create: %s", path, strerror(errno));
    fputs(text, f);
    if (fclose(f)) return rlx_errorf(err, RLX_EIO, "%s: write error", path);
    return 0;
}

static int write_json(const char *dir, const char *name, cJSON *j, rlx_error *err)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    if (!s) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    int rc = write_text(dir, name, s, err);
    free(s);
    return rc;
}

static char *str_dup(rlx_gguf_str s)
{
    char *p = malloc(s.len + 1);
    if (p) { memcpy(p, s.ptr, s.len); p[s.len] = 0; }
    return p;
}

/* ---- tokenizer ------------------------------------------------------------------------- */

#define HF_CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
static const char *const re_llama3 = HF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const re_qwen2 = HF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static cJSON *byte_level(bool use_regex)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "ByteLevel");
    cJSON_AddBoolToObject(b, "add_prefix_space", false);
    cJSON_AddBoolToObject(b, "trim_offsets", true);
    cJSON_AddBoolToObject(b, "use_regex", use_regex);
    return b;
}

/* the pre-tokenizer transformers writes for llama.cpp's tokenizer.ggml.pre, NULL if we know none */
static cJSON *pre_tokenizer(const char *pre)
{
    cJSON *seq = cJSON_CreateObject(), *steps = cJSON_CreateArray();
    cJSON_AddStringToObject(seq, "type", "Sequence");
    cJSON_AddItemToObject(seq, "pretokenizers", steps);
    if (!strcmp(pre, "gpt-2") || !strcmp(pre, "mpt")) {
        cJSON_Delete(seq);
        return byte_level(true);
    }
    if (!strcmp(pre, "starcoder") || !strcmp(pre, "refact")) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "type", "Digits");
        cJSON_AddBoolToObject(d, "individual_digits", true);
        cJSON_AddItemToArray(steps, d);
        cJSON_AddItemToArray(steps, byte_level(true));
        return seq;
    }
    const char *re = !strcmp(pre, "llama-bpe") || !strcmp(pre, "llama3") ? re_llama3 : !strcmp(pre, "qwen2") ? re_qwen2 : NULL;
    if (!re) {
        cJSON_Delete(seq);
        return NULL;
    }
    cJSON *sp = cJSON_CreateObject(), *pat = cJSON_CreateObject();
    cJSON_AddStringToObject(sp, "type", "Split");
    cJSON_AddStringToObject(pat, "Regex", re);
    cJSON_AddItemToObject(sp, "pattern", pat);
    cJSON_AddStringToObject(sp, "behavior", "Isolated");
    cJSON_AddBoolToObject(sp, "invert", false);
    cJSON_AddItemToArray(steps, sp);
    cJSON_AddItemToArray(steps, byte_level(false));
    return seq;
}

typedef struct tokset {
    char **text;
    int32_t *type;
    float *score;
    int64_t n;
    int32_t *slots;
    uint64_t mask;
} tokset;

static uint64_t hash_s(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int64_t tok_find(const tokset *t, const char *s, size_t n)
{
    for (uint64_t h = hash_s(s, n) & t->mask; t->slots[h]; h = (h + 1) & t->mask) {
        const char *x = t->text[t->slots[h] - 1];
        if (strlen(x) == n && !memcmp(x, s, n)) return t->slots[h] - 1;
    }
    return -1;
}

typedef struct merge { float score; int64_t id; size_t split; } merge;

static int cmp_merge(const void *a, const void *b)
{
    const merge *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return x->split < y->split ? -1 : x->split > y->split;
}

/* SentencePiece pieces as BPE merges: every split of a normal piece into two pieces, ordered by
 * the piece's score (highest first), as transformers' SentencePieceExtractor orders them. */
static cJSON *spm_merges(const tokset *t)
{
    size_t n = 0, cap = 1024;
    merge *m = malloc(cap * sizeof *m);
    if (!m) return NULL;
    for (int64_t i = 0; i < t->n; i++) {
        if (t->type[i] != T_NORMAL) continue;
        const char *s = t->text[i];
        size_t len = strlen(s);
        for (size_t k = 1; k < len; k++) {
            if ((s[k] & 0xC0) == 0x80) continue; /* inside a code point */
            int64_t l = tok_find(t, s, k), r = tok_find(t, s + k, len - k);
            if (l < 0 || r < 0) continue;
            if (n == cap) {
                merge *nm = realloc(m, 2 * cap * sizeof *m);
                if (!nm) { free(m); return NULL; }
                m = nm;
                cap *= 2;
            }
            m[n++] = (merge){t->score[i], i, k};
        }
    }
    qsort(m, n, sizeof *m, cmp_merge);
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        const char *s = t->text[m[i].id];
        char *l = strndup(s, m[i].split);
        const char *pair[2] = {l, s + m[i].split};
        cJSON_AddItemToArray(a, cJSON_CreateStringArray(pair, 2));
        free(l);
    }
    free(m);
    return a;
}

static void tokset_free(tokset *t)
{
    for (int64_t i = 0; t->text && i < t->n; i++) free(t->text[i]);
    free(t->text);
    free(t->type);
    free(t->score);
    free(t->slots);
}

int rlx_hf_export_tokenizer(const rlx_gguf *g, const char *dir, rlx_error *err)
{
    rlx_gguf_str model, pre = {"default", 7};
    const rlx_gguf_array *toks, *types = NULL, *scores = NULL, *merges = NULL;
    int rc = rlx_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (!rc) rc = rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", &toks, err);
    if (rc) return rc;
    rlx_gguf_get_str(g, "tokenizer.ggml.pre", &pre, NULL);
    rlx_gguf_get_arr(g, "tokenizer.ggml.token_type", &types, NULL);
    rlx_gguf_get_arr(g, "tokenizer.ggml.scores", &scores, NULL);
    rlx_gguf_get_arr(g, "tokenizer.ggml.merges", &merges, NULL);
    bool spm = model.len == 5 && !memcmp(model.ptr, "llama", 5), bpe = model.len == 4 && !memcmp(model.ptr, "gpt2", 4);
    char *pre_s = str_dup(pre);
    cJSON *pt = bpe && pre_s ? pre_tokenizer(pre_s) : NULL;
    if (!spm && (!bpe || !pt)) {
        rc = rlx_errorf(err, RLX_EUNSUPPORTED, "tokenizer '%.*s' (pre-tokenizer '%s') has no tokenizer.json form here "
                        "(llama, or gpt2 with gpt-2, mpt, starcoder, refact, llama-bpe, qwen2)", (int)model.len, model.ptr,
                        pre_s ? pre_s : "");
        free(pre_s);
        return rc;
    }
    free(pre_s);
    if ((types && (types->n != toks->n || types->type != RLX_GGUF_INT32)) ||
        (spm && (!scores || scores->n != toks->n || scores->type != RLX_GGUF_FLOAT32))) {
        cJSON_Delete(pt);
        return rlx_errorf(err, RLX_EFORMAT, "token types or scores do not match the token list");
    }
    rlx_tokenizer *tk = NULL;
    if ((rc = rlx_tokenizer_from_gguf(&tk, g, err))) { cJSON_Delete(pt); return rc; }

    tokset t = {0};
    t.n = (int64_t)toks->n;
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)t.n) cap *= 2;
    t.text = calloc((size_t)t.n, sizeof *t.text);
    t.type = calloc((size_t)t.n, sizeof *t.type);
    t.score = calloc((size_t)t.n, sizeof *t.score);
    t.slots = calloc(cap, sizeof *t.slots);
    t.mask = cap - 1;
    if (!t.text || !t.type || !t.score || !t.slots) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
    for (int64_t i = 0; !rc && i < t.n; i++) {
        if (!(t.text[i] = str_dup(toks->strs[i]))) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); break; }
        /* GGUF arrays are not aligned to their element: read them with memcpy */
        t.type[i] = T_NORMAL;
        if (types) memcpy(&t.type[i], (const char *)types->data + (size_t)i * sizeof(int32_t), sizeof(int32_t));
        t.score[i] = 0;
        if (scores && scores->n == toks->n && scores->type == RLX_GGUF_FLOAT32)
            memcpy(&t.score[i], (const char *)scores->data + (size_t)i * sizeof(float), sizeof(float));
        if (t.type[i] == T_UNUSED) continue;
        uint64_t h = hash_s(t.text[i], strlen(t.text[i])) & t.mask;
        while (t.slots[h] && strcmp(t.text[t.slots[h] - 1], t.text[i])) h = (h + 1) & t.mask;
        if (!t.slots[h]) t.slots[h] = (int32_t)(i + 1);
    }
    cJSON *root = cJSON_CreateObject(), *added = cJSON_CreateArray(), *m = cJSON_CreateObject(), *vocab = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddItemToObject(root, "added_tokens", added);
    int32_t unk = -1;
    for (int64_t i = 0; !rc && i < t.n; i++) {
        int32_t ty = t.type[i];
        if (ty == T_UNUSED) continue;
        if (ty == T_UNKNOWN) unk = (int32_t)i;
        bool add = ty == T_CONTROL || ty == T_USER || ty == T_UNKNOWN;
        if (add) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "id", (double)i);
            cJSON_AddStringToObject(a, "content", t.text[i]);
            cJSON_AddBoolToObject(a, "single_word", false);
            cJSON_AddBoolToObject(a, "lstrip", false);
            cJSON_AddBoolToObject(a, "rstrip", false);
            cJSON_AddBoolToObject(a, "normalized", ty == T_USER);
            cJSON_AddBoolToObject(a, "special", ty != T_USER);
            cJSON_AddItemToArray(added, a);
        }
        if (spm || !add) cJSON_AddNumberToObject(vocab, t.text[i], (double)i); /* HF keeps llama's specials in the vocab too */
    }
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON_AddItemToObject(m, "vocab", vocab);
    if (spm) {
        bool asp = true;
        rlx_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &asp, NULL);
        rlx_gguf_str ga = {"", 0};
        rlx_gguf_get_str(g, "general.architecture", &ga, NULL);
        bool gemma = ga.len == 6 && (!memcmp(ga.ptr, "gemma2", 6) || !memcmp(ga.ptr, "gemma3", 6));
        cJSON *norm = cJSON_CreateObject(), *steps = cJSON_CreateArray();
        cJSON_AddStringToObject(norm, "type", "Sequence");
        cJSON_AddItemToObject(norm, "normalizers", steps);
        if (asp) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddStringToObject(p, "type", "Prepend");
            cJSON_AddStringToObject(p, "prepend", "\xe2\x96\x81");
            cJSON_AddItemToArray(steps, p);
        }
        cJSON *r = cJSON_CreateObject(), *pat = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "type", "Replace");
        cJSON_AddStringToObject(pat, "String", " ");
        cJSON_AddItemToObject(r, "pattern", pat);
        cJSON_AddStringToObject(r, "content", "\xe2\x96\x81");
        cJSON_AddItemToArray(steps, r);
        if (gemma && !asp) { /* GemmaConverter: the Replace alone */
            cJSON_DetachItemViaPointer(steps, r);
            cJSON_Delete(norm);
            norm = r;
        }
        cJSON_AddItemToObject(root, "normalizer", norm);
        if (gemma) { /* GemmaConverter's Split(" ", merged_with_previous): after the Replace, a no-op */
            cJSON *sp = cJSON_CreateObject(), *sp_pat = cJSON_CreateObject();
            cJSON_AddStringToObject(sp, "type", "Split");
            cJSON_AddStringToObject(sp_pat, "String", " ");
            cJSON_AddItemToObject(sp, "pattern", sp_pat);
            cJSON_AddStringToObject(sp, "behavior", "MergedWithPrevious");
            cJSON_AddBoolToObject(sp, "invert", false);
            cJSON_AddItemToObject(root, "pre_tokenizer", sp);
        } else {
            cJSON_AddNullToObject(root, "pre_tokenizer");
        }
        cJSON_AddBoolToObject(m, "byte_fallback", true);
        if (unk >= 0) cJSON_AddStringToObject(m, "unk_token", t.text[unk]);
        cJSON *ms = spm_merges(&t);
        if (!ms) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
        else cJSON_AddItemToObject(m, "merges", ms);
    } else {
        cJSON_AddNullToObject(root, "normalizer");
        cJSON_AddItemToObject(root, "pre_tokenizer", pt);
        pt = NULL;
        cJSON_AddBoolToObject(m, "byte_fallback", false);
        cJSON *ms = cJSON_CreateArray();
        for (uint64_t i = 0; merges && i < merges->n; i++) {
            char *s = str_dup(merges->strs[i]), *sp = s ? strchr(s, ' ') : NULL;
            if (!sp) { free(s); rc = rlx_errorf(err, RLX_EFORMAT, "merge %llu has no space", (unsigned long long)i); break; }
            *sp = 0;
            const char *pair[2] = {s, sp + 1};
            cJSON_AddItemToArray(ms, cJSON_CreateStringArray(pair, 2));
            free(s);
        }
        cJSON_AddItemToObject(m, "merges", ms);
    }
    cJSON_AddItemToObject(root, "model", m);
    if (!rc) rc = write_json(dir, "tokenizer.json", root, err);
    cJSON_Delete(root);
    cJSON_Delete(pt);

    /* tokenizer_config.json: the special tokens by content, the BOS/EOS flags as rlxd resolved them */
    cJSON *tc = cJSON_CreateObject();
    const struct { const char *key; int32_t id; } sp[] = {
        {"bos_token", rlx_tokenizer_bos(tk)}, {"eos_token", rlx_tokenizer_eos(tk)}, {"unk_token", unk},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(sp); i++)
        if (sp[i].id >= 0) cJSON_AddStringToObject(tc, sp[i].key, t.text[sp[i].id]);
    uint32_t pad;
    if (rlx_gguf_get_u32(g, "tokenizer.ggml.padding_token_id", &pad, NULL) == 0 && pad < (uint64_t)t.n)
        cJSON_AddStringToObject(tc, "pad_token", t.text[pad]);
    cJSON_AddBoolToObject(tc, "add_bos_token", rlx_tokenizer_add_bos(tk));
    cJSON_AddBoolToObject(tc, "add_eos_token", rlx_tokenizer_add_eos(tk));
    rlx_gguf_str ct;
    if (rlx_gguf_get_str(g, "tokenizer.chat_template", &ct, NULL) == 0) {
        char *s = str_dup(ct);
        if (s) cJSON_AddStringToObject(tc, "chat_template", s);
        free(s);
    }
    if (!rc) rc = write_json(dir, "tokenizer_config.json", tc, err);
    cJSON_Delete(tc);
    tokset_free(&t);
    rlx_tokenizer_free(tk);
    return rc;
}

/* ---- weights ----------------------------------------------------------------------------- */

/* llama.cpp name -> HF name */
static bool hf_name(const char *gg, char *out, size_t cap, bool gemma)
{
    static const char *const gemma_blk[][2] = {
        {"post_attention_norm.weight", "post_attention_layernorm.weight"},
        {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
        {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    };
    static const char *const glob[][2] = {
        {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"},
        {"output.weight", "lm_head.weight"},
    };
    static const char *const blk[][2] = {
        {"attn_norm.weight", "input_layernorm.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.weight"}, {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"}, {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_q.bias", "self_attn.q_proj.bias"}, {"attn_k.bias", "self_attn.k_proj.bias"},
        {"attn_v.bias", "self_attn.v_proj.bias"}, {"attn_q_norm.weight", "self_attn.q_norm.weight"},
        {"attn_k_norm.weight", "self_attn.k_norm.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"}, {"ffn_down.weight", "mlp.down_proj.weight"},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(glob); i++)
        if (!strcmp(gg, glob[i][0])) { snprintf(out, cap, "%s", glob[i][1]); return true; }
    unsigned l;
    int pos = 0;
    if (sscanf(gg, "blk.%u.%n", &l, &pos) == 1 && pos > 0 && gemma)
        for (size_t i = 0; i < RLX_ARRAY_LEN(gemma_blk); i++)
            if (!strcmp(gg + pos, gemma_blk[i][0])) { snprintf(out, cap, "model.layers.%u.%s", l, gemma_blk[i][1]); return true; }
    if (sscanf(gg, "blk.%u.%n", &l, &pos) == 1 && pos > 0)
        for (size_t i = 0; i < RLX_ARRAY_LEN(blk); i++)
            if (!strcmp(gg + pos, blk[i][0])) { snprintf(out, cap, "model.layers.%u.%s", l, blk[i][1]); return true; }
    return false;
}

/* <arch>.<key> as a number (u32 or f32 keys), def when absent */
static double key_num(const rlx_gguf *g, const char *arch, const char *key, double def)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    uint32_t u;
    float f;
    if (rlx_gguf_get_u32(g, k, &u, NULL) == 0) return u;
    if (rlx_gguf_get_f32(g, k, &f, NULL) == 0) return f;
    return def;
}

static uint32_t key_u32(const rlx_gguf *g, const char *arch, const char *key, uint32_t def)
{
    return (uint32_t)key_num(g, arch, key, def);
}

/* one safetensors file of tensors [t0, t1) of the exported list */
typedef struct xt { char name[96]; const rlx_gguf_tensor *t; void *data; } xt;

static int write_st(const char *path, const xt *ts, size_t t0, size_t t1, rlx_error *err)
{
    cJSON *h = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "format", "pt");
    cJSON_AddItemToObject(h, "__metadata__", meta);
    uint64_t off = 0;
    for (size_t i = t0; i < t1; i++) {
        const rlx_gguf_tensor *t = ts[i].t;
        cJSON *e = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *o = cJSON_CreateArray();
        cJSON_AddStringToObject(e, "dtype", t->type == RLX_F32 ? "F32" : t->type == RLX_F16 ? "F16" : "BF16");
        for (int d = (int)t->n_dims - 1; d >= 0; d--) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->ne[d]));
        cJSON_AddItemToObject(e, "shape", shape);
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + t->size)));
        cJSON_AddItemToObject(e, "data_offsets", o);
        cJSON_AddItemToObject(h, ts[i].name, e);
        off += t->size;
    }
    char *hs = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    if (!hs) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    uint64_t hl = strlen(hs), padded = (hl + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    if (!f) { free(hs); return rlx_errorf(err, RLX_EIO, "%s: cannot create: %s", path, strerror(errno)); }
    fwrite(&padded, 8, 1, f);
    fwrite(hs, 1, hl, f);
    for (uint64_t i = hl; i < padded; i++) fputc(' ', f);
    free(hs);
    for (size_t i = t0; i < t1; i++) fwrite(ts[i].data ? ts[i].data : ts[i].t->data, 1, ts[i].t->size, f);
    return fclose(f) ? rlx_errorf(err, RLX_EIO, "%s: write error", path) : 0;
}

int rlx_hf_export(const rlx_gguf *g, const char *dir, int n_shards, unsigned flags, rlx_error *err)
{
    rlx_gguf_str as;
    int rc = rlx_gguf_get_str(g, "general.architecture", &as, err);
    if (rc) return rc;
    char arch[32];
    snprintf(arch, sizeof arch, "%.*s", (int)(as.len < 31 ? as.len : 31), as.ptr);
    bool gemma3 = !strcmp(arch, "gemma3"), multimodal = gemma3 && (flags & RLX_HF_EXPORT_MULTIMODAL);
    const char *cls = !strcmp(arch, "llama") ? "LlamaForCausalLM" : !strcmp(arch, "qwen2") ? "Qwen2ForCausalLM"
                    : !strcmp(arch, "qwen3") ? "Qwen3ForCausalLM" : !strcmp(arch, "gemma2") ? "Gemma2ForCausalLM"
                    : multimodal ? "Gemma3ForConditionalGeneration" : gemma3 ? "Gemma3ForCausalLM" : NULL;
    if (!cls)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "architecture '%s' has no Hugging Face export here (llama, qwen2, qwen3, gemma2, "
                          "gemma3)", arch);
    if ((flags & RLX_HF_EXPORT_MULTIMODAL) && !multimodal)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "the multimodal layout is written for gemma3 only");
    bool gemma = !strcmp(arch, "gemma2") || gemma3;
    if (mkdir(dir, 0755) && errno != EEXIST) return rlx_errorf(err, RLX_EIO, "%s: cannot create: %s", dir, strerror(errno));
    uint32_t n_embd = key_u32(g, arch, "embedding_length", 0), n_head = key_u32(g, arch, "attention.head_count", 1);
    uint32_t n_head_kv = key_u32(g, arch, "attention.head_count_kv", n_head);
    uint32_t head_dim = key_u32(g, arch, "attention.key_length", n_embd / n_head);
    const rlx_gguf_tensor *emb = rlx_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return rlx_errorf(err, RLX_EFORMAT, "no token_embd.weight");
    bool tied = !rlx_gguf_find_tensor(g, "output.weight");
    char k[128];
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    if (rlx_gguf_find(g, k) || rlx_gguf_find_tensor(g, "rope_freqs.weight"))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "RoPE scaling is not exported");

    cJSON *top = cJSON_CreateObject(), *a = cJSON_CreateArray(), *c = top;
    cJSON_AddItemToArray(a, cJSON_CreateString(cls));
    cJSON_AddItemToObject(top, "architectures", a);
    if (multimodal) { /* Gemma3ForConditionalGeneration: the language model's settings in text_config */
        cJSON_AddStringToObject(top, "model_type", "gemma3");
        c = cJSON_AddObjectToObject(top, "text_config");
        cJSON_AddStringToObject(c, "model_type", "gemma3_text");
        cJSON *vc = cJSON_AddObjectToObject(top, "vision_config");
        cJSON_AddStringToObject(vc, "model_type", "siglip_vision_model");
        cJSON_AddNumberToObject(vc, "hidden_size", 8);
    } else {
        cJSON_AddStringToObject(c, "model_type", gemma3 ? "gemma3_text" : arch);
    }
    cJSON_AddNumberToObject(c, "hidden_size", n_embd);
    cJSON_AddNumberToObject(c, "intermediate_size", key_u32(g, arch, "feed_forward_length", 0));
    cJSON_AddNumberToObject(c, "num_hidden_layers", key_u32(g, arch, "block_count", 0));
    cJSON_AddNumberToObject(c, "num_attention_heads", n_head);
    cJSON_AddNumberToObject(c, "num_key_value_heads", n_head_kv);
    cJSON_AddNumberToObject(c, "head_dim", head_dim);
    cJSON_AddNumberToObject(c, "max_position_embeddings", key_u32(g, arch, "context_length", 2048));
    cJSON_AddNumberToObject(c, "rope_theta", key_num(g, arch, "rope.freq_base", 10000.0f));
    cJSON_AddNumberToObject(c, "rms_norm_eps", key_num(g, arch, "attention.layer_norm_rms_epsilon", 1e-5f));
    cJSON_AddNumberToObject(c, "vocab_size", (double)emb->ne[1]);
    cJSON_AddBoolToObject(c, "tie_word_embeddings", tied);
    cJSON_AddStringToObject(c, "torch_dtype", "float32");
    if (gemma3) {
        /* as a Gemma 3 checkpoint says it (convert_hf_to_gguf.py's inverse) */
        uint32_t n_layer = key_u32(g, arch, "block_count", 0), sw = key_u32(g, arch, "attention.sliding_window", 0);
        cJSON_AddNumberToObject(c, "query_pre_attn_scalar", (double)rlx_model_gemma_query_dim(true, n_layer, n_embd, n_head, head_dim));
        cJSON_AddNullToObject(c, "attn_logit_softcapping");
        snprintf(k, sizeof k, "%s.final_logit_softcapping", arch);
        if (rlx_gguf_find(g, k)) cJSON_AddNumberToObject(c, "final_logit_softcapping", key_num(g, arch, "final_logit_softcapping", 0));
        else cJSON_AddNullToObject(c, "final_logit_softcapping");
        cJSON_AddNumberToObject(c, "rope_local_base_freq", key_num(g, arch, "rope.freq_base_swa", 10000.0f));
        snprintf(k, sizeof k, "%s.attention.sliding_window_pattern", arch);
        const rlx_gguf_value *pv = rlx_gguf_find(g, k);
        if (!sw) { /* no window: every layer global */
            cJSON_AddNumberToObject(c, "sliding_window", 4096);
            cJSON_AddNumberToObject(c, "sliding_window_pattern", 1);
        } else if (pv && pv->type == RLX_GGUF_ARRAY && pv->arr.n == n_layer &&
                   (pv->arr.type == RLX_GGUF_BOOL || pv->arr.type == RLX_GGUF_UINT8 || pv->arr.type == RLX_GGUF_INT8)) {
            cJSON_AddNumberToObject(c, "sliding_window", sw);
            cJSON *lt = cJSON_AddArrayToObject(c, "layer_types");
            for (uint32_t l = 0; l < n_layer; l++)
                cJSON_AddItemToArray(lt, cJSON_CreateString(((const uint8_t *)pv->arr.data)[l] ? "sliding_attention" : "full_attention"));
        } else if (pv && pv->type != RLX_GGUF_ARRAY) {
            cJSON_AddNumberToObject(c, "sliding_window", sw);
            cJSON_AddNumberToObject(c, "sliding_window_pattern", key_u32(g, arch, "attention.sliding_window_pattern", 6));
        } else if (pv) {
            cJSON_Delete(top);
            return rlx_errorf(err, RLX_EUNSUPPORTED, "%s has a form this export does not write", k);
        } else {
            cJSON_AddNumberToObject(c, "sliding_window", sw);
            cJSON_AddNumberToObject(c, "sliding_window_pattern", 6);
        }
    } else if (gemma) {
        cJSON_AddNumberToObject(c, "sliding_window", key_u32(g, arch, "attention.sliding_window", 4096));
        cJSON_AddNumberToObject(c, "attn_logit_softcapping", key_num(g, arch, "attn_logit_softcapping", 50.0f));
        cJSON_AddNumberToObject(c, "final_logit_softcapping", key_num(g, arch, "final_logit_softcapping", 30.0f));
        snprintf(k, sizeof k, "%s.attention.sliding_window_pattern", arch);
        if (rlx_gguf_find(g, k)) { cJSON_Delete(top); return rlx_errorf(err, RLX_EUNSUPPORTED, "a sliding window pattern is not exported"); }
    }
    rc = write_json(dir, "config.json", top, err);
    cJSON_Delete(top);
    if (!rc) rc = rlx_hf_export_tokenizer(g, dir, err);
    if (rc) return rc;

    /* a multimodal checkpoint also holds a vision tower and projector, which loading skips */
    static const float vis_data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const rlx_gguf_tensor vis[2] = {
        {.name = "vision_tower.vision_model.embeddings.patch_embedding.weight", .n_dims = 2, .ne = {4, 2, 1, 1},
         .type = RLX_F32, .data = vis_data, .size = sizeof vis_data},
        {.name = "multi_modal_projector.mm_input_projection_weight", .n_dims = 2, .ne = {2, 4, 1, 1}, .type = RLX_F32,
         .data = vis_data, .size = sizeof vis_data},
    };
    uint64_t n_model = rlx_gguf_n_tensors(g), n = n_model + (multimodal ? RLX_ARRAY_LEN(vis) : 0);
    xt *ts = calloc(n ? n : 1, sizeof *ts);
    if (!ts) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    for (uint64_t i = n_model; i < n; i++) {
        ts[i].t = &vis[i - n_model];
        snprintf(ts[i].name, sizeof ts[i].name, "%s", vis[i - n_model].name);
    }
    for (uint64_t i = 0; !rc && i < n_model; i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        ts[i].t = t;
        char name[sizeof ts[i].name];
        if (!hf_name(t->name, name, sizeof name, gemma))
            rc = rlx_errorf(err, RLX_EUNSUPPORTED, "tensor '%s' has no Hugging Face name here", t->name);
        else if (snprintf(ts[i].name, sizeof ts[i].name, "%s%s", multimodal ? "language_model." : "", name) >= (int)sizeof ts[i].name)
            rc = rlx_errorf(err, RLX_EUNSUPPORTED, "tensor name '%s' is too long", name);
        /* (the older multimodal layout: language_model.model.layers..., language_model.lm_head...) */
        else if (t->type != RLX_F32 && t->type != RLX_F16 && t->type != RLX_BF16)
            rc = rlx_errorf(err, RLX_EUNSUPPORTED, "tensor '%s' is %s; safetensors export takes F32, F16, BF16", t->name,
                            rlx_dtype_get(t->type)->name);
        size_t nl = strlen(t->name);
        if (!rc && gemma && nl > 11 && !strcmp(t->name + nl - 11, "norm.weight")) {
            /* Gemma's checkpoints hold w - 1; the converter adds the 1 back */
            if (t->type != RLX_F32) { rc = rlx_errorf(err, RLX_EUNSUPPORTED, "%s: a Gemma norm must be F32", t->name); break; }
            float *f = malloc((size_t)t->size);
            if (!f) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); break; }
            for (uint64_t e = 0; e < t->size / 4; e++) f[e] = ((const float *)t->data)[e] - 1.0f;
            ts[i].data = f;
        }
        bool q = strstr(t->name, ".attn_q.weight") != NULL, kk = strstr(t->name, ".attn_k.weight") != NULL;
        if (!rc && !strcmp(arch, "llama") && (q || kk)) {
            /* undo convert_hf_to_gguf.py's permute: GGUF row h*hd + 2i + j is HF row h*hd + j*hd/2 + i */
            int64_t heads = q ? n_head : n_head_kv, rows = t->ne[1], hd = rows / heads, half = hd / 2;
            size_t rb = (size_t)(t->size / (uint64_t)rows);
            uint8_t *p = malloc((size_t)t->size);
            if (!p) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); break; }
            for (int64_t h = 0; h < heads; h++)
                for (int64_t r = 0; r < half; r++)
                    for (int64_t j = 0; j < 2; j++)
                        memcpy(p + (size_t)(h * hd + j * half + r) * rb, (const uint8_t *)t->data + (size_t)(h * hd + 2 * r + j) * rb, rb);
            ts[i].data = p;
        }
    }
    char path[4096];
    if (n_shards < 1) n_shards = 1;
    if ((uint64_t)n_shards > n) n_shards = (int)n;
    size_t per = (size_t)((n + (uint64_t)n_shards - 1) / (uint64_t)n_shards);
    cJSON *idx = cJSON_CreateObject(), *wm = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    uint64_t total = 0;
    for (int s = 0; !rc && s < n_shards; s++) {
        size_t t0 = (size_t)s * per, t1 = t0 + per < n ? t0 + per : (size_t)n;
        char file[64];
        if (n_shards == 1) snprintf(file, sizeof file, "model.safetensors");
        else snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        rc = write_st(path, ts, t0, t1, err);
        for (size_t i = t0; i < t1; i++) {
            cJSON_AddStringToObject(wm, ts[i].name, file);
            total += ts[i].t->size;
        }
    }
    cJSON_AddNumberToObject(meta, "total_size", (double)total);
    cJSON_AddItemToObject(idx, "metadata", meta);
    cJSON_AddItemToObject(idx, "weight_map", wm);
    if (!rc && n_shards > 1) rc = write_json(dir, "model.safetensors.index.json", idx, err);
    cJSON_Delete(idx);
    for (uint64_t i = 0; i < n; i++) free(ts[i].data);
    free(ts);
    return rc;
}
