/* hf_tokenizer.c - tokenizer.json (+ tokenizer_config.json) as llama.cpp's tokenizer.ggml.* keys,
 * so models/tokenizer.c serves a Hugging Face folder unchanged (models/safetensors.h).
 *
 * Two kinds, as llama.cpp's converter maps them:
 *   - BPE, byte-level (pre-tokenizer ByteLevel): "gpt2" with its merges; the pre-tokenizer is
 *     recognised by its structure and regexes (k_pre below) and named as llama.cpp names it
 *     (tokenizer.ggml.pre), since tok_bpe.c runs llama.cpp's regex for that name.
 *   - BPE with byte_fallback (SentencePiece converted: normalizer Prepend("▁") + Replace, or a
 *     Metaspace pre-tokenizer; Gemma's Split(" ") after the Replace, which never matches, is
 *     accepted as the no-op it is): "llama". llama.cpp's SentencePiece tokenizer merges the pair of
 *     highest score whose concatenation is a token; each merged token gets the score -rank of
 *     the first merge that makes it, so that order is the merges' order (llama.cpp's own HF path
 *     gives every token -1000, which loses it).
 * generation_config.json's eos_token_id list gives EOS (when tokenizer_config.json names none), then
 * EOT and EOM. Token types: added tokens with "special" are CONTROL, other added ones USER_DEFINED, <0xXX>
 * BYTE (byte_fallback), the unk token UNKNOWN, ids without a token "[PAD<id>]" UNUSED. Anything
 * else (WordPiece, Unigram, another pre-tokenizer or normalizer) is RLX_EUNSUPPORTED naming it. */
#include "models/safetensors.h"
#include "models/filemap.h"
#include "models/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER = 4, T_UNUSED = 5, T_BYTE = 6 };

#define HF_CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
/* tokenizer.json pre-tokenizers, flattened to steps ("BL" ByteLevel without its regex, "BL+re"
 * with it, "D1" Digits(individual_digits), "S:<regex>" an isolating Split), joined by '|' */
static const struct { const char *pre, *sig; } k_pre[] = {
    {"gpt-2", "BL+re"},
    {"starcoder", "D1|BL+re"},
    {"llama-bpe", "S:" HF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+|BL"},
    {"qwen2", "S:" HF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+|BL"},
};

typedef struct sbuf { char *p; size_t n, cap; bool oom; } sbuf;

static void sb_add(sbuf *b, const char *s)
{
    size_t l = strlen(s);
    if (b->n + l + 1 > b->cap) {
        size_t cap = (b->n + l + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, l + 1);
    b->n += l;
}

static const cJSON *get(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static bool is_type(const cJSON *o, const char *t)
{
    const cJSON *v = get(o, "type");
    return cJSON_IsString(v) && !strcmp(v->valuestring, t);
}

static const char *type_of(const cJSON *o)
{
    const cJSON *v = get(o, "type");
    return cJSON_IsString(v) ? v->valuestring : "(none)";
}

/* the pre-tokenizer's signature; false when a step is of a kind we do not know */
static bool signature(const cJSON *p, sbuf *b, const char **bad)
{
    if (is_type(p, "Sequence")) {
        const cJSON *s, *steps = get(p, "pretokenizers");
        cJSON_ArrayForEach(s, steps) if (!signature(s, b, bad)) return false;
        return true;
    }
    if (b->n) sb_add(b, "|");
    if (is_type(p, "ByteLevel")) {
        const cJSON *re = get(p, "use_regex"), *aps = get(p, "add_prefix_space");
        if (cJSON_IsTrue(aps)) { *bad = "ByteLevel with add_prefix_space"; return false; }
        sb_add(b, !re || cJSON_IsTrue(re) ? "BL+re" : "BL");
        return true;
    }
    if (is_type(p, "Digits") && cJSON_IsTrue(get(p, "individual_digits"))) {
        sb_add(b, "D1");
        return true;
    }
    if (is_type(p, "Split")) {
        const cJSON *pat = get(p, "pattern"), *re = pat ? get(pat, "Regex") : NULL, *beh = get(p, "behavior");
        if (cJSON_IsString(re) && cJSON_IsString(beh) && !strcmp(beh->valuestring, "Isolated") && !cJSON_IsTrue(get(p, "invert"))) {
            sb_add(b, "S:");
            sb_add(b, re->valuestring);
            return true;
        }
        *bad = "Split (other than an isolating regex)";
        return false;
    }
    *bad = type_of(p);
    return false;
}

/* a failed writer call as an error naming why */
#define W(call) ((call) ? rlx_errorf(err, RLX_EINVAL, "tokenizer: %s", rlx_gguf_writer_last_error(w)) : 0)

/* id -> text of every token (model.vocab and added_tokens) */
typedef struct vocab {
    char **text;
    uint8_t *type;
    bool *added;
    int64_t n;
    int32_t *slots;  /* text -> id + 1, open addressing over mask + 1 slots (index_build) */
    uint64_t mask;
} vocab;

static uint64_t hash_s(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

/* the first id of each text wins, as a linear scan would find it */
static int index_build(vocab *v, rlx_error *err)
{
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)v->n) cap *= 2;
    v->slots = calloc(cap, sizeof *v->slots);
    if (!v->slots) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    v->mask = cap - 1;
    for (int64_t i = 0; i < v->n; i++)
        for (uint64_t h = hash_s(v->text[i]) & v->mask;; h = (h + 1) & v->mask) {
            if (!v->slots[h]) { v->slots[h] = (int32_t)(i + 1); break; }
            if (!strcmp(v->text[v->slots[h] - 1], v->text[i])) break;
        }
    return 0;
}

static int vocab_put(vocab *v, int64_t id, const char *s, rlx_error *err)
{
    if (id < 0 || id >= v->n) return rlx_errorf(err, RLX_EFORMAT, "tokenizer.json: token id %lld is out of range", (long long)id);
    if (v->text[id]) {
        if (strcmp(v->text[id], s))
            return rlx_errorf(err, RLX_EFORMAT, "tokenizer.json: id %lld is both '%.64s' and '%.64s'", (long long)id, v->text[id], s);
        return 0;
    }
    v->text[id] = strdup(s);
    return v->text[id] ? 0 : rlx_errorf(err, RLX_ENOMEM, "out of memory");
}

/* a token id: a whole number in [0, 2^24) */
static bool as_id(const cJSON *v, int64_t *out)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < (double)(1 << 24)) ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return false;
    *out = (int64_t)v->valuedouble;
    return true;
}

/* "bos_token": "<s>" or {"content": "<s>", ...} */
static const char *tok_content(const cJSON *v)
{
    if (cJSON_IsString(v)) return v->valuestring;
    const cJSON *c = v ? get(v, "content") : NULL;
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

static int64_t find_text(const vocab *v, const char *s)
{
    if (!s || !v->slots) return -1;
    for (uint64_t h = hash_s(s) & v->mask; v->slots[h]; h = (h + 1) & v->mask)
        if (!strcmp(v->text[v->slots[h] - 1], s)) return v->slots[h] - 1;
    return -1;
}

/* merges as "a b" strings (older files) or ["a", "b"] pairs */
static int merge_parts(const cJSON *m, const char **l, size_t *ll, const char **r)
{
    if (cJSON_IsString(m)) {
        const char *sp = strchr(m->valuestring, ' ');
        if (!sp) return -1;
        *l = m->valuestring;
        *ll = (size_t)(sp - m->valuestring);
        *r = sp + 1;
        return 0;
    }
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
        *l = m->child->valuestring;
        *ll = strlen(*l);
        *r = m->child->next->valuestring;
        return 0;
    }
    return -1;
}

static int specials(rlx_gguf_writer *w, const vocab *v, const cJSON *tc, const cJSON *tj, const cJSON *gc, rlx_error *err)
{
    static const char *const keys[][2] = {
        {"bos_token", "tokenizer.ggml.bos_token_id"}, {"eos_token", "tokenizer.ggml.eos_token_id"},
        {"unk_token", "tokenizer.ggml.unknown_token_id"}, {"pad_token", "tokenizer.ggml.padding_token_id"},
    };
    int rc = 0;
    int64_t eos = -1;
    for (size_t i = 0; !rc && i < RLX_ARRAY_LEN(keys); i++) {
        const char *s = tc ? tok_content(get(tc, keys[i][0])) : NULL;
        if (!s && i == 2) s = tok_content(get(get(tj, "model"), "unk_token"));
        int64_t id = find_text(v, s);
        if (s && id < 0) return rlx_errorf(err, RLX_EFORMAT, "tokenizer_config.json: %s '%.64s' is not a token", keys[i][0], s);
        if (id >= 0) rc = W(rlx_gguf_writer_set_u32(w, keys[i][1], (uint32_t)id));
        if (i == 1) eos = id;
    }
    /* generation_config.json's eos_token_id (a number or a list): the EOS when tokenizer_config.json
     * names none, the others as EOT and EOM (what tokenizer.c makes end generation) */
    const cJSON *ge = gc ? get(gc, "eos_token_id") : NULL, *e;
    const char *extra[] = {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"};
    size_t n_extra = 0;
    int64_t gid;
    if (ge && !cJSON_IsArray(ge) && !as_id(ge, &gid))
        return rlx_errorf(err, RLX_EFORMAT, "generation_config.json: eos_token_id must be a token id or a list of them");
    for (e = cJSON_IsArray(ge) ? ge->child : ge; !rc && e; e = cJSON_IsArray(ge) ? e->next : NULL) {
        if (!as_id(e, &gid) || gid >= v->n)
            return rlx_errorf(err, RLX_EFORMAT, "generation_config.json: eos_token_id holds an id outside the vocabulary");
        if (gid == eos) continue;
        if (eos < 0) {
            eos = gid;
            rc = W(rlx_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)gid));
        } else if (n_extra < RLX_ARRAY_LEN(extra)) {
            rc = W(rlx_gguf_writer_set_u32(w, extra[n_extra++], (uint32_t)gid));
        }
    }
    const cJSON *b;
    if (!rc && tc && cJSON_IsBool(b = get(tc, "add_bos_token"))) rc = W(rlx_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", cJSON_IsTrue(b)));
    if (!rc && tc && cJSON_IsBool(b = get(tc, "add_eos_token"))) rc = W(rlx_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", cJSON_IsTrue(b)));
    if (!rc && tc && !get(tc, "add_bos_token")) {
        /* no explicit flag: a TemplateProcessing post-processor that starts with a special token adds it */
        const cJSON *pp = get(tj, "post_processor"), *p;
        if (is_type(pp, "Sequence")) /* Llama 3: [ByteLevel, TemplateProcessing] */
            cJSON_ArrayForEach(p, get(pp, "processors")) if (is_type(p, "TemplateProcessing")) pp = p;
        const cJSON *single = pp ? get(pp, "single") : NULL;
        const cJSON *first = cJSON_IsArray(single) ? single->child : NULL;
        if (is_type(pp, "TemplateProcessing"))
            rc = W(rlx_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", first && get(first, "SpecialToken") != NULL));
    }
    const cJSON *ct = tc ? get(tc, "chat_template") : NULL;
    if (!rc && cJSON_IsString(ct)) rc = W(rlx_gguf_writer_set_str(w, "tokenizer.chat_template", ct->valuestring, strlen(ct->valuestring)));
    return rc;
}

/* The text a normalizer step adds (Replace's content, Prepend's, Append's), or NULL for another kind */
static const char *step_text(const cJSON *s)
{
    const cJSON *t = is_type(s, "Replace") ? get(s, "content") : is_type(s, "Prepend") ? get(s, "prepend")
                   : is_type(s, "Append") ? get(s, "append") : NULL;
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* Whether pre-tokenizer pre is a Split on one character that the normalizer (run before it) has
 * replaced by something else, with nothing after that bringing it back, so the Split never
 * matches: transformers' GemmaConverter writes Split(" ", merged_with_previous) after
 * Replace(" ", "▁"). */
static bool replaced_away(const cJSON *norm, const cJSON *pre)
{
    const cJSON *pat = is_type(pre, "Split") ? get(pre, "pattern") : NULL, *str = pat ? get(pat, "String") : NULL;
    if (!cJSON_IsString(str) || !norm || cJSON_IsTrue(get(pre, "invert"))) return false;
    const char *x = str->valuestring;
    size_t n = strlen(x);
    if (!n || n > 4 || (n > 1 && ((unsigned char)x[0] < 0xC0 || (int)n != ((unsigned char)x[0] >= 0xF0 ? 4 : (unsigned char)x[0] >= 0xE0 ? 3 : 2))))
        return false; /* one code point: no replacement can make it across a boundary */
    const cJSON *steps = is_type(norm, "Sequence") ? get(norm, "normalizers") : NULL;
    bool gone = false;
    for (const cJSON *s = steps ? steps->child : norm; s; s = steps ? s->next : NULL) {
        const char *text = step_text(s);
        const cJSON *sp = is_type(s, "Replace") ? get(s, "pattern") : NULL, *ss = sp ? get(sp, "String") : NULL;
        if (!text) gone = false; /* another normalizer could make anything */
        else if (cJSON_IsString(ss) && !strcmp(ss->valuestring, x) && !strstr(text, x)) gone = true;
        else if (strstr(text, x)) gone = false;
    }
    return gone;
}

/* byte_fallback BPE: SentencePiece-style unless the pieces are not "▁"-marked */
static int spm_prefix(const cJSON *tj, bool *add_space_prefix, rlx_error *err)
{
    const cJSON *norm = get(tj, "normalizer"), *pre = get(tj, "pre_tokenizer");
    *add_space_prefix = false;
    if (pre && replaced_away(norm, pre)) pre = NULL; /* a no-op: Gemma's Split(" ") after Replace(" ", "▁") */
    if (pre) {
        if (!is_type(pre, "Metaspace"))
            return rlx_errorf(err, RLX_EUNSUPPORTED, "tokenizer.json: pre-tokenizer %s with a byte_fallback BPE is not "
                              "supported (Metaspace or none)", type_of(pre));
        const cJSON *ps = get(pre, "prepend_scheme");
        *add_space_prefix = !cJSON_IsString(ps) || strcmp(ps->valuestring, "never");
        return 0;
    }
    if (!norm) return 0;
    const cJSON *s, *steps = is_type(norm, "Sequence") ? get(norm, "normalizers") : NULL;
    cJSON_ArrayForEach(s, steps) {
        if (is_type(s, "Prepend")) *add_space_prefix = true;
        else if (!is_type(s, "Replace"))
            return rlx_errorf(err, RLX_EUNSUPPORTED, "tokenizer.json: normalizer %s is not supported", type_of(s));
    }
    if (!steps && !is_type(norm, "Replace") && !is_type(norm, "Prepend"))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "tokenizer.json: normalizer %s is not supported", type_of(norm));
    if (is_type(norm, "Prepend")) *add_space_prefix = true;
    return 0;
}

static int build(rlx_gguf_writer *w, const cJSON *tj, const cJSON *tc, const cJSON *gc, int64_t n_min, rlx_error *err)
{
    const cJSON *model = get(tj, "model");
    if (!model || !is_type(model, "BPE"))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "tokenizer.json: model type %s is not supported (BPE, byte-level or with "
                          "byte_fallback)", model ? type_of(model) : "(missing)");
    bool fallback = cJSON_IsTrue(get(model, "byte_fallback"));
    const cJSON *vj = get(model, "vocab"), *mj = get(model, "merges"), *added = get(tj, "added_tokens"), *e;
    if (!cJSON_IsObject(vj) || (mj && !cJSON_IsArray(mj)))
        return rlx_errorf(err, RLX_EFORMAT, "tokenizer.json: model.vocab must be an object and model.merges a list");
    int64_t n = n_min, id = 0;
    cJSON_ArrayForEach(e, vj) {
        if (!as_id(e, &id)) return rlx_errorf(err, RLX_EFORMAT, "tokenizer.json: vocab entry '%.64s' has no valid id", e->string);
        if (id + 1 > n) n = id + 1;
    }
    cJSON_ArrayForEach(e, added) {
        if (!as_id(get(e, "id"), &id) || !cJSON_IsString(get(e, "content")))
            return rlx_errorf(err, RLX_EFORMAT, "tokenizer.json: an added token lacks a valid id or its content");
        if (id + 1 > n) n = id + 1;
    }
    if (n <= 0 || n > (1 << 24)) return rlx_errorf(err, RLX_EFORMAT, "tokenizer.json: %lld tokens", (long long)n);
    vocab v = {.text = calloc((size_t)n, sizeof(char *)), .type = calloc((size_t)n, 1), .added = calloc((size_t)n, sizeof(bool)), .n = n};
    float *scores = fallback ? calloc((size_t)n, sizeof *scores) : NULL;
    const char **texts = calloc((size_t)n, sizeof *texts);
    int32_t *types = calloc((size_t)n, sizeof *types);
    sbuf sig = {0};
    int rc = 0;
    if (!v.text || !v.type || !v.added || !texts || !types || (fallback && !scores)) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
    if (!rc) cJSON_ArrayForEach(e, vj) {
        as_id(e, &id);
        if ((rc = vocab_put(&v, id, e->string, err))) break;
    }
    if (!rc) cJSON_ArrayForEach(e, added) {
        as_id(get(e, "id"), &id);
        if ((rc = vocab_put(&v, id, get(e, "content")->valuestring, err))) break;
        v.added[id] = true;
        v.type[id] = cJSON_IsTrue(get(e, "special")) ? T_CONTROL : T_USER;
    }
    const char *unk = tok_content(get(model, "unk_token"));
    char pad[32];
    for (int64_t i = 0; !rc && i < n; i++) {
        if (!v.text[i]) {
            snprintf(pad, sizeof pad, "[PAD%lld]", (long long)i);
            if (!(v.text[i] = strdup(pad))) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
            v.type[i] = T_UNUSED;
        } else if (!v.type[i]) {
            const char *t = v.text[i];
            v.type[i] = fallback && strlen(t) == 6 && !strncmp(t, "<0x", 3) && t[5] == '>' ? T_BYTE : T_NORMAL;
        }
        if (fallback && unk && !strcmp(v.text[i], unk)) v.type[i] = T_UNKNOWN;
        texts[i] = v.text[i];
        types[i] = v.type[i];
    }
    if (!rc) rc = index_build(&v, err);
    if (!rc && fallback) {
        bool asp;
        rc = spm_prefix(tj, &asp, err);
        /* scores: -rank of the first merge that makes each token; tokens no merge makes sit below all */
        const float below = -(float)(cJSON_GetArraySize(mj) + 1);
        for (int64_t i = 0; !rc && i < n; i++) scores[i] = below;
        int rank = 0;
        char buf[1024];
        if (!rc) cJSON_ArrayForEach(e, mj) {
            const char *l, *r;
            size_t ll;
            if (merge_parts(e, &l, &ll, &r) || ll + strlen(r) >= sizeof buf) { rank++; continue; }
            memcpy(buf, l, ll);
            strcpy(buf + ll, r);
            int64_t id = find_text(&v, buf);
            if (id >= 0 && scores[id] < -(float)rank) scores[id] = -(float)rank;
            rank++;
        }
        for (int64_t i = 0; !rc && i < n; i++)
            if (v.type[i] != T_NORMAL) scores[i] = 0;
        if (!rc) rc = W(rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", 5));
        if (!rc) rc = W(rlx_gguf_writer_set_str(w, "tokenizer.ggml.pre", "default", 7));
        if (!rc) rc = W(rlx_gguf_writer_set_arr(w, "tokenizer.ggml.scores", RLX_GGUF_FLOAT32, scores, (uint64_t)n));
        if (!rc) rc = W(rlx_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", asp));
    } else if (!rc) {
        const cJSON *norm = get(tj, "normalizer"), *pre = get(tj, "pre_tokenizer");
        if (norm && !is_type(norm, "NFC")) /* NFC: llama.cpp does not normalise either */
            rc = rlx_errorf(err, RLX_EUNSUPPORTED, "tokenizer.json: normalizer %s with a byte-level BPE is not supported", type_of(norm));
        const char *bad = NULL, *name = NULL;
        if (!rc && (!pre || !signature(pre, &sig, &bad)))
            rc = rlx_errorf(err, RLX_EUNSUPPORTED, "tokenizer.json: pre-tokenizer %s is not supported", pre ? bad : "(none)");
        for (size_t i = 0; !rc && !sig.oom && i < RLX_ARRAY_LEN(k_pre) && !name; i++)
            if (!strcmp(sig.p, k_pre[i].sig)) name = k_pre[i].pre;
        if (!rc && !name) {
            char list[160] = "";
            for (size_t i = 0; i < RLX_ARRAY_LEN(k_pre); i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", k_pre[i].pre);
            rc = rlx_errorf(err, RLX_EUNSUPPORTED, "tokenizer.json: this byte-level pre-tokenizer is not one rlxd recognises "
                            "(it knows those of %s): %.300s", list, sig.p ? sig.p : "");
        }
        size_t nm = mj ? (size_t)cJSON_GetArraySize(mj) : 0, k = 0;
        rlx_gguf_str *ms = rc ? NULL : calloc(nm ? nm : 1, sizeof *ms);
        char **owned = rc ? NULL : calloc(nm ? nm : 1, sizeof *owned);
        if (!rc && (!ms || !owned)) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
        if (!rc) cJSON_ArrayForEach(e, mj) {
            const char *l, *r;
            size_t ll;
            if (merge_parts(e, &l, &ll, &r)) { rc = rlx_errorf(err, RLX_EFORMAT, "tokenizer.json: merge %zu is malformed", k); break; }
            size_t len = ll + 1 + strlen(r);
            if (!(owned[k] = malloc(len + 1))) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); break; }
            memcpy(owned[k], l, ll);
            owned[k][ll] = ' ';
            strcpy(owned[k] + ll + 1, r);
            ms[k] = (rlx_gguf_str){owned[k], len};
            k++;
        }
        if (!rc) rc = W(rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", 4));
        if (!rc) rc = W(rlx_gguf_writer_set_str(w, "tokenizer.ggml.pre", name, strlen(name)));
        if (!rc) rc = W(rlx_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", ms, k));
        for (size_t i = 0; owned && i < k; i++) free(owned[i]);
        free(owned);
        free(ms);
    }
    rlx_gguf_str *ts = rc ? NULL : calloc((size_t)n, sizeof *ts);
    if (!rc && !ts) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
    for (int64_t i = 0; !rc && i < n; i++) ts[i] = (rlx_gguf_str){texts[i], strlen(texts[i])};
    if (!rc) rc = W(rlx_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", ts, (uint64_t)n));
    if (!rc) rc = W(rlx_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", RLX_GGUF_INT32, types, (uint64_t)n));
    if (!rc) rc = specials(w, &v, tc, tj, gc, err);
    free(ts);
    for (int64_t i = 0; v.text && i < n; i++) free(v.text[i]);
    free(v.text);
    free(v.type);
    free(v.added);
    free(v.slots);
    free(scores);
    free(texts);
    free(types);
    free(sig.p);
    return rc;
}

int rlx_hf_tokenizer_keys(rlx_gguf_writer *w, const char *dir, int64_t n_vocab_min, rlx_error *err)
{
    char path[4096];
    cJSON *tj = NULL, *tc = NULL;
    char *text = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    int rc = rlx__read_file(path, &text, &len, err);
    if (rc == RLX_ENOTFOUND)
        return rlx_errorf(err, RLX_ENOTFOUND, "%s: the model folder has no tokenizer.json (tokenizer.model alone is not "
                          "supported)", dir);
    if (rc) return rc;
    rlx_error e2 = {0};
    if (rlx_json_parse(text, len, &tj, &e2) || !cJSON_IsObject(tj)) rc = rlx_errorf(err, RLX_EFORMAT, "%s: %s", path, e2.msg);
    free(text);
    text = NULL;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    int r2 = rc ? 0 : rlx__read_file(path, &text, &len, err);
    if (!rc && r2 && r2 != RLX_ENOTFOUND) rc = r2;
    if (!rc && text && (rlx_json_parse(text, len, &tc, &e2) || !cJSON_IsObject(tc)))
        rc = rlx_errorf(err, RLX_EFORMAT, "%s: %s", path, e2.msg);
    free(text);
    text = NULL;
    cJSON *gc = NULL;
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    r2 = rc ? 0 : rlx__read_file(path, &text, &len, err);
    if (!rc && r2 && r2 != RLX_ENOTFOUND) rc = r2;
    if (!rc && text && (rlx_json_parse(text, len, &gc, &e2) || !cJSON_IsObject(gc)))
        rc = rlx_errorf(err, RLX_EFORMAT, "%s: %s", path, e2.msg);
    free(text);
    text = NULL;
    if (!rc) rc = build(w, tj, tc, gc, n_vocab_min, err);
    cJSON_Delete(gc);
    if (!rc) { /* chat_template.jinja, where newer exports keep the template */
        snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
        int r3 = rlx__read_file(path, &text, &len, err);
        if (!r3) {
            rc = W(rlx_gguf_writer_set_str(w, "tokenizer.chat_template", text, len));
            free(text);
        } else if (r3 != RLX_ENOTFOUND) rc = r3;
    }
    cJSON_Delete(tj);
    cJSON_Delete(tc);
    return rc;
}
