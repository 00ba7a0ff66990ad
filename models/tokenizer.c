/* tokenizer.c - vocabulary loading (tokens, scores, types, special ids, EOG set), the special
 * token partition that runs before any model-specific splitting, and dispatch to the
 * SentencePiece (tok_spm.c), byte-level BPE (tok_bpe.c) and WordPiece (tok_wpm.c) tokenizers.
 * Behaviour follows llama.cpp's llama-vocab.cpp so ids match the reference vectors. */
#include "models/tok_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rlx__ids_push(rlx__ids *o, int32_t id)
{
    if (o->max && o->n >= o->max) return RLX_ETOOLONG;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        int32_t *v = realloc(o->v, cap * sizeof *v);
        if (!v) return RLX_ENOMEM;
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = id;
    return 0;
}

/* FNV-1a; callers chain it to hash several pieces without concatenating them. */
uint32_t rlx__hash_bytes(uint32_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 16777619u;
    }
    return h;
}

int32_t rlx__tok_find(const rlx_tokenizer *t, const char *s, size_t n)
{
    uint32_t h = rlx__hash_bytes(RLX__HASH_SEED, s, n);
    for (uint32_t i = h & t->tok_mask;; i = (i + 1) & t->tok_mask) {
        int32_t id = t->tok_slots[i].id;
        if (id < 0) return -1;
        if (t->tok_slots[i].h == h && t->len[id] == n && memcmp(t->text[id], s, n) == 0) return id;
    }
}

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

/* Later duplicates win, as with llama.cpp's token_to_id map. */
static void tok_insert(rlx_tokenizer *t, int32_t id)
{
    uint32_t h = rlx__hash_bytes(RLX__HASH_SEED, t->text[id], t->len[id]);
    for (uint32_t i = h & t->tok_mask;; i = (i + 1) & t->tok_mask) {
        int32_t cur = t->tok_slots[i].id;
        if (cur < 0 || (t->tok_slots[i].h == h && t->len[cur] == t->len[id] &&
                        memcmp(t->text[cur], t->text[id], t->len[id]) == 0)) {
            t->tok_slots[i] = (rlx__slot){h, id};
            return;
        }
    }
}

static bool str_is(rlx_gguf_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

static uint16_t attr_from_type(int64_t type)
{
    switch (type) {
    case 1: return RLX_ATTR_NORMAL;
    case 2: return RLX_ATTR_UNKNOWN;
    case 3: return RLX_ATTR_CONTROL;
    case 4: return RLX_ATTR_USER_DEFINED;
    case 5: return RLX_ATTR_UNUSED;
    case 6: return RLX_ATTR_BYTE;
    default: return RLX_ATTR_UNDEFINED;
    }
}

static int64_t arr_int(const rlx_gguf_array *a, uint64_t i)
{
    const uint8_t *p = a->data;
    switch (a->type) {
    case RLX_GGUF_INT32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case RLX_GGUF_UINT32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case RLX_GGUF_INT8: return (int8_t)p[i];
    case RLX_GGUF_UINT8: return p[i];
    case RLX_GGUF_INT16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case RLX_GGUF_UINT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case RLX_GGUF_INT64: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
    case RLX_GGUF_UINT64: { uint64_t v; memcpy(&v, p + 8 * i, 8); return (int64_t)v; }
    default: return 0;
    }
}

static bool arr_is_int(const rlx_gguf_array *a)
{
    switch (a->type) {
    case RLX_GGUF_INT8: case RLX_GGUF_UINT8: case RLX_GGUF_INT16: case RLX_GGUF_UINT16:
    case RLX_GGUF_INT32: case RLX_GGUF_UINT32: case RLX_GGUF_INT64: case RLX_GGUF_UINT64:
        return true;
    default:
        return false;
    }
}

/* Reads an optional id key; ids outside the vocabulary keep the previous value. */
static int read_id(const rlx_gguf *g, const char *key, int32_t n_vocab, int32_t *id, rlx_error *err)
{
    uint32_t v;
    int rc = rlx_gguf_get_u32(g, key, &v, err);
    if (rc == RLX_ENOTFOUND) return 0;
    if (rc) return rc;
    if (v < (uint32_t)n_vocab) *id = (int32_t)v;
    return 0;
}

static int read_bool(const rlx_gguf *g, const char *key, bool *b, rlx_error *err)
{
    int rc = rlx_gguf_get_bool(g, key, b, err);
    return rc == RLX_ENOTFOUND ? 0 : rc;
}

static int cmp_special(const void *a, const void *b, void *ctx)
{
    const rlx_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->len[x] != t->len[y]) return t->len[x] > t->len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Special tokens found by their text, as llama.cpp's vocabulary loader does (llama-vocab.cpp):
 * end-of-turn, fill-in-the-middle roles, and the texts that end generation. The first list entry
 * present wins (llama.cpp takes the first in its hash map's order, which only matters for a
 * vocabulary with two candidates). */
static const char *const k_eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
    ("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"), "<end_of_utterance>",
};
enum { FIM_PRE, FIM_SUF, FIM_MID, FIM_PAD, FIM_REP, FIM_SEP, FIM_N };
static const char *const k_fim_texts[FIM_N][9] = {
    [FIM_PRE] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>",
                 "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"},
    [FIM_SUF] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>",
                 "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"},
    [FIM_MID] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>",
                 "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"},
    [FIM_PAD] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
    [FIM_REP] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
    [FIM_SEP] = {"<|file_sep|>"},
};
static const char *const k_fim_keys[FIM_N][2] = {
    [FIM_PRE] = {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
    [FIM_SUF] = {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
    [FIM_MID] = {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
    [FIM_PAD] = {"tokenizer.ggml.fim_pad_token_id"},
    [FIM_REP] = {"tokenizer.ggml.fim_rep_token_id"},
    [FIM_SEP] = {"tokenizer.ggml.fim_sep_token_id"},
};
/* Tokens that end generation whatever the file says; they become control tokens. */
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>",
    "<eos>", "<turn|>", "<|tool_response>", ("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"), "[e~[",
};

static int32_t find_cstr(const rlx_tokenizer *t, const char *s)
{
    return rlx__tok_find(t, s, strlen(s));
}

static bool str_contains(rlx_gguf_str s, const char *lit)
{
    size_t n = strlen(lit);
    for (size_t i = 0; i + n <= s.len; i++) {
        size_t k = 0;
        while (k < n && (char)tolower((unsigned char)s.ptr[i + k]) == lit[k]) k++;
        if (k == n) return true;
    }
    return false;
}

static void set_attr(rlx_tokenizer *t, const char *text, uint16_t bit, bool on)
{
    int32_t id = find_cstr(t, text);
    if (id < 0) return;
    if (on) t->attr[id] |= bit;
    else t->attr[id] &= (uint16_t)~bit;
}

/* Whitespace stripping around some special tokens, chosen by model name as llama.cpp does
 * (HF's added-token lstrip/rstrip flags are not carried by GGUF). */
static void set_strip_attrs(rlx_tokenizer *t, const rlx_gguf *g)
{
    rlx_gguf_str name = {"", 0}, arch = {"", 0};
    rlx_gguf_get_str(g, "general.name", &name, NULL);
    rlx_gguf_get_str(g, "general.architecture", &arch, NULL);
    rlx_gguf_str pre = {t->pre, strlen(t->pre)};
    if (str_contains(pre, "jina-v2-de") || str_contains(pre, "jina-v2-es") || str_contains(pre, "jina-v2-code") ||
        str_contains(arch, "nomic-bert-moe")) {
        set_attr(t, "<mask>", RLX_ATTR_LSTRIP, true);
    } else if (str_contains(name, "phi-3") || str_contains(name, "phi3")) {
        for (size_t i = 0; i < t->n_special; i++) t->attr[t->special[i]] |= RLX_ATTR_RSTRIP;
        set_attr(t, "</s>", RLX_ATTR_RSTRIP, true);
        set_attr(t, "<unk>", RLX_ATTR_RSTRIP, false);
        set_attr(t, "<s>", RLX_ATTR_RSTRIP, false);
        set_attr(t, "<|endoftext|>", RLX_ATTR_RSTRIP, false);
    }
}

static int load_specials(rlx_tokenizer *t, const rlx_gguf *g, rlx_error *err)
{
    int32_t n = t->n_vocab;
    int32_t cls = -1;
    int rc = 0;
    rc = rc ? rc : read_id(g, "tokenizer.ggml.bos_token_id", n, &t->bos, err);
    rc = rc ? rc : read_id(g, "tokenizer.ggml.eos_token_id", n, &t->eos, err);
    rc = rc ? rc : read_id(g, "tokenizer.ggml.eot_token_id", n, &t->eot, err);
    rc = rc ? rc : read_id(g, "tokenizer.ggml.eom_token_id", n, &t->eom, err);
    rc = rc ? rc : read_id(g, "tokenizer.ggml.unknown_token_id", n, &t->unk, err);
    rc = rc ? rc : read_id(g, "tokenizer.ggml.seperator_token_id", n, &t->sep, err);
    rc = rc ? rc : read_id(g, "tokenizer.ggml.padding_token_id", n, &t->pad, err);
    rc = rc ? rc : read_id(g, "tokenizer.ggml.cls_token_id", n, &cls, err);
    rc = rc ? rc : read_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos, err);
    rc = rc ? rc : read_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos, err);
    rc = rc ? rc : read_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err);
    if (rc) return rc;
    if (t->kind == RLX_TOK_WPM && cls >= 0 && !rlx_gguf_find(g, "tokenizer.ggml.bos_token_id"))
        t->bos = cls; /* BERT's [CLS] plays the BOS role */
    /* Defaults may point past a small vocabulary. */
    int32_t *ids[] = {&t->bos, &t->eos, &t->eot, &t->eom, &t->unk, &t->sep, &t->pad};
    for (size_t i = 0; i < RLX_ARRAY_LEN(ids); i++)
        if (*ids[i] >= n) *ids[i] = -1;

    /* found by text when the metadata does not name them: these become control tokens */
    if (t->eot < 0)
        for (size_t i = 0; i < RLX_ARRAY_LEN(k_eot_texts) && t->eot < 0; i++)
            if ((t->eot = find_cstr(t, k_eot_texts[i])) >= 0) t->attr[t->eot] |= RLX_ATTR_CONTROL;
    if (t->eom < 0 && (t->eom = find_cstr(t, "<|eom_id|>")) >= 0) t->attr[t->eom] |= RLX_ATTR_CONTROL;
    int32_t fim[FIM_N];
    for (int f = 0; f < FIM_N; f++) {
        fim[f] = -1;
        for (int k = 0; k < 2 && k_fim_keys[f][k]; k++)
            if ((rc = read_id(g, k_fim_keys[f][k], n, &fim[f], err))) return rc;
        for (size_t i = 0; fim[f] < 0 && i < RLX_ARRAY_LEN(k_fim_texts[f]) && k_fim_texts[f][i]; i++)
            if ((fim[f] = find_cstr(t, k_fim_texts[f][i])) >= 0) t->attr[fim[f]] |= RLX_ATTR_CONTROL;
    }
    /* control tokens named "unused" */
    for (int32_t i = 0; i < n; i++)
        if ((t->attr[i] & RLX_ATTR_CONTROL) && strstr(t->text[i], "unused")) t->attr[i] |= RLX_ATTR_UNUSED;
    /* what ends generation: FIM pad/repo/separator, the texts above (made control tokens), then
     * EOS/EOT/EOM */
    for (int f = FIM_PAD; f <= FIM_SEP; f++)
        if (fim[f] >= 0) t->attr[fim[f]] |= RLX_ATTR_EOG;
    for (size_t i = 0; i < RLX_ARRAY_LEN(k_eog_texts); i++) {
        int32_t id = find_cstr(t, k_eog_texts[i]);
        if (id >= 0) t->attr[id] |= RLX_ATTR_CONTROL | RLX_ATTR_EOG;
    }
    /* gpt-oss: these are rendered, whatever their type */
    static const char *const k_rendered[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
    for (size_t i = 0; i < RLX_ARRAY_LEN(k_rendered); i++) {
        int32_t id = find_cstr(t, k_rendered[i]);
        if (id >= 0) t->attr[id] = (uint16_t)(RLX_ATTR_USER_DEFINED | (t->attr[id] & RLX_ATTR_EOG));
    }
    int32_t eogs[] = {t->eos, t->eot, t->eom};
    for (size_t i = 0; i < RLX_ARRAY_LEN(eogs); i++)
        if (eogs[i] >= 0) t->attr[eogs[i]] |= RLX_ATTR_EOG;
    /* o200k_harmony / solar-open: "<|end|>" is not an end of generation there */
    int32_t ret = find_cstr(t, "<|return|>"), call = find_cstr(t, "<|call|>"), calls = find_cstr(t, "<|calls|>"),
            flush = find_cstr(t, "<|flush|>"), end = find_cstr(t, "<|end|>");
#define IS_EOG(id) ((id) >= 0 && (t->attr[id] & RLX_ATTR_EOG))
    const bool has_call = IS_EOG(call) || IS_EOG(calls);
    if (IS_EOG(end) && ((IS_EOG(ret) && has_call) || (has_call && IS_EOG(flush)))) t->attr[end] = RLX_ATTR_USER_DEFINED;
    /* gemma4 / paddleocr: "</s>" is ordinary text when "<|tool_response>" ends generation */
    int32_t tool = find_cstr(t, "<|tool_response>"), eos_s = find_cstr(t, "</s>");
    if (IS_EOG(tool) && IS_EOG(eos_s)) t->attr[eos_s] = RLX_ATTR_NORMAL;
#undef IS_EOG

    size_t ns = 0;
    for (int32_t i = 0; i < n; i++)
        if ((t->attr[i] & (RLX_ATTR_CONTROL | RLX_ATTR_USER_DEFINED | RLX_ATTR_UNKNOWN)) && t->len[i] > 0) ns++;
    t->special = malloc((ns ? ns : 1) * sizeof *t->special);
    if (!t->special) return rlx_errorf(err, RLX_ENOMEM, "out of memory loading the vocabulary");
    for (int32_t i = 0; i < n; i++)
        if ((t->attr[i] & (RLX_ATTR_CONTROL | RLX_ATTR_USER_DEFINED | RLX_ATTR_UNKNOWN)) && t->len[i] > 0)
            t->special[t->n_special++] = i;
    qsort_r(t->special, t->n_special, sizeof *t->special, cmp_special, t);
    set_strip_attrs(t, g);
    return 0;
}

static int load_tokens(rlx_tokenizer *t, const rlx_gguf *g, rlx_error *err)
{
    const rlx_gguf_array *toks = NULL, *scores = NULL, *types = NULL;
    int rc = rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", &toks, err);
    if (rc == RLX_ENOTFOUND)
        return rlx_errorf(err, RLX_EFORMAT, "the GGUF has no token list (tokenizer.ggml.tokens); it cannot be tokenized");
    if (rc) return rc;
    if (toks->type != RLX_GGUF_STRING || toks->n == 0 || toks->n > INT32_MAX)
        return rlx_errorf(err, RLX_EFORMAT, "tokenizer.ggml.tokens must be a non-empty array of strings");
    t->n_vocab = (int32_t)toks->n;
    rc = rlx_gguf_get_arr(g, "tokenizer.ggml.scores", &scores, err);
    if (rc && rc != RLX_ENOTFOUND) return rc;
    if (scores && (scores->type != RLX_GGUF_FLOAT32 || scores->n != toks->n))
        return rlx_errorf(err, RLX_EFORMAT, "tokenizer.ggml.scores must hold one float32 per token (%llu tokens)",
                          (unsigned long long)toks->n);
    rc = rlx_gguf_get_arr(g, "tokenizer.ggml.token_type", &types, err);
    if (rc && rc != RLX_ENOTFOUND) return rc;
    if (types && (!arr_is_int(types) || types->n != toks->n))
        return rlx_errorf(err, RLX_EFORMAT, "tokenizer.ggml.token_type must hold one integer per token (%llu tokens)",
                          (unsigned long long)toks->n);

    size_t n = toks->n, bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += toks->strs[i].len + 1;
    t->text = malloc(n * sizeof *t->text);
    t->len = malloc(n * sizeof *t->len);
    t->score = malloc(n * sizeof *t->score);
    t->attr = malloc(n * sizeof *t->attr);
    t->arena = malloc(bytes);
    t->arena_bytes = bytes;
    t->tok_mask = pow2_at_least(n * 2) - 1;
    t->tok_slots = malloc(((size_t)t->tok_mask + 1) * sizeof *t->tok_slots);
    t->pairs = calloc(65536 / 64, sizeof *t->pairs);
    if (!t->text || !t->len || !t->score || !t->attr || !t->arena || !t->tok_slots || !t->pairs)
        return rlx_errorf(err, RLX_ENOMEM, "out of memory loading %zu tokens", n);
    memset(t->tok_slots, 0xff, ((size_t)t->tok_mask + 1) * sizeof *t->tok_slots);
    char *p = t->arena;
    for (size_t i = 0; i < n; i++) {
        rlx_gguf_str s = toks->strs[i];
        if (s.len > UINT32_MAX / 2)
            return rlx_errorf(err, RLX_EFORMAT, "token %zu is implausibly long (%llu bytes)", i, (unsigned long long)s.len);
        memcpy(p, s.ptr, s.len);
        p[s.len] = 0;
        t->text[i] = p;
        t->len[i] = (uint32_t)s.len;
        p += s.len + 1;
        if (scores) memcpy(&t->score[i], (const char *)scores->data + 4 * i, 4);
        else t->score[i] = 0.0f;
        t->attr[i] = types ? attr_from_type(arr_int(types, i)) : RLX_ATTR_NORMAL;
        if (s.len > t->max_token_len) t->max_token_len = s.len;
        if (s.len > 0) tok_insert(t, (int32_t)i);
        for (size_t k = 1; k < s.len; k++) {
            unsigned pair = (unsigned)(uint8_t)s.ptr[k - 1] << 8 | (uint8_t)s.ptr[k];
            t->pairs[pair >> 6] |= 1ull << (pair & 63);
        }
    }
    return 0;
}

/* Every token stands for at most max_token_len bytes of input (SentencePiece's U+2581 and the
 * byte-level mapping only lengthen the text; a special token's text is a vocabulary entry),
 * unless some input can vanish: a byte without a fallback token, whitespace that a special token
 * strips, or WordPiece, which drops whitespace and control characters. */
static size_t bytes_per_token_bound(const rlx_tokenizer *t)
{
    if (t->kind == RLX_TOK_WPM || !t->max_token_len) return 0;
    for (size_t i = 0; i < t->n_special; i++)
        if (t->attr[t->special[i]] & (RLX_ATTR_LSTRIP | RLX_ATTR_RSTRIP)) return 0;
    for (int b = 0; b < 256; b++) {
        if (t->kind == RLX_TOK_BPE && t->bpe_raw) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", b);
            if (rlx__tok_find(t, hex, 6) < 0) return 0;
        } else if (t->byte_tok[b] < 0) {
            return 0;
        }
    }
    return t->max_token_len;
}

int rlx_tokenizer_from_gguf(rlx_tokenizer **out, const rlx_gguf *g, rlx_error *err)
{
    *out = NULL;
    rlx_gguf_str model;
    int rc = rlx_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (rc == RLX_ENOTFOUND)
        return rlx_errorf(err, RLX_ENOTFOUND, "the GGUF carries no tokenizer (tokenizer.ggml.model is missing)");
    if (rc) return rc;
    int kind = str_is(model, "llama") ? RLX_TOK_SPM : str_is(model, "gpt2") || str_is(model, "gemma4") ? RLX_TOK_BPE
             : str_is(model, "bert") ? RLX_TOK_WPM : 0;
    if (!kind)
        return rlx_errorf(err, RLX_EUNSUPPORTED,
                          "tokenizer model '%.*s' is not supported (supported: 'llama' SentencePiece, 'gpt2' "
                          "byte-level BPE, 'bert' WordPiece)", (int)RLX_MIN(model.len, 64), model.ptr);
    rlx_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return rlx_errorf(err, RLX_ENOMEM, "out of memory creating the tokenizer");
    t->kind = kind;
    t->bos = t->eos = t->eot = t->eom = t->unk = t->sep = t->pad = -1;
    /* Per-family defaults, overridden by the file's keys (llama.cpp's choices). */
    if (kind == RLX_TOK_SPM) {
        t->bos = 1; t->eos = 2; t->unk = 0;
        t->add_bos = true; t->add_space_prefix = true;
    } else if (kind == RLX_TOK_BPE) {
        /* llama.cpp defaults to id 11 here, which in GPT-2-style vocabularies is ",": without the
         * keys we rather have no BOS/EOS than end generation on a comma. */
    } else {
        t->bos = 101; t->unk = 100; t->sep = 102; t->pad = 0;
        t->add_bos = true; t->add_sep = true;
    }
    rc = load_tokens(t, g, err);
    if (!rc && kind == RLX_TOK_BPE) rc = rlx__bpe_init(t, g, err); /* may set add_bos by pre-tokenizer */
    if (!rc && kind == RLX_TOK_WPM) rc = rlx__wpm_init(t, g, err);
    if (!rc) rc = load_specials(t, g, err);
    if (!rc && t->bpe_gemma4) t->add_bos = true; /* gemma4: llama.cpp overrides add_bos_token */
    if (!rc) {
        for (int b = 0; b < 256; b++) {
            char buf[8];
            int32_t id = -1;
            if (kind == RLX_TOK_SPM) {
                snprintf(buf, sizeof buf, "<0x%02X>", b);
                id = find_cstr(t, buf);
                if (id < 0) { buf[0] = (char)b; id = rlx__tok_find(t, buf, 1); }
                if (id < 0) id = t->unk;
            } else if (kind == RLX_TOK_BPE) {
                uint32_t cp = rlx__bpe_byte_to_cp((uint8_t)b);
                size_t n = cp < 0x80 ? 1 : 2; /* mapped code points are all below U+0800 */
                if (n == 1) buf[0] = (char)cp;
                else { buf[0] = (char)(0xC0 | (cp >> 6)); buf[1] = (char)(0x80 | (cp & 0x3F)); }
                id = rlx__tok_find(t, buf, n);
            }
            t->byte_tok[b] = id;
        }
        t->max_bytes_per_token = bytes_per_token_bound(t);
    }
    if (rc) {
        rlx_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void rlx_tokenizer_free(rlx_tokenizer *t)
{
    if (!t) return;
    if (t->map) { /* tables in the cache file's mapping: only the pointer arrays are ours */
        for (int i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
        free(t->text);
        free(t->merge_str);
        rlx__tok_unmap(t->map, t->map_len);
        free(t);
        return;
    }
    rlx__bpe_free(t);
    free(t->text);
    free(t->len);
    free(t->score);
    free(t->attr);
    free(t->arena);
    free(t->tok_slots);
    free(t->special);
    free(t->pairs);
    free(t);
}

int32_t rlx_tokenizer_n_vocab(const rlx_tokenizer *t) { return t->n_vocab; }
int32_t rlx_tokenizer_bos(const rlx_tokenizer *t) { return t->bos; }
int32_t rlx_tokenizer_eos(const rlx_tokenizer *t) { return t->eos; }
bool rlx_tokenizer_add_bos(const rlx_tokenizer *t) { return t->add_bos && t->bos >= 0; }
int32_t rlx_tokenizer_sep(const rlx_tokenizer *t) { return t->sep; }
bool rlx_tokenizer_add_eos(const rlx_tokenizer *t) { return t->add_eos && t->eos >= 0; }
bool rlx_tokenizer_add_sep(const rlx_tokenizer *t) { return t->add_sep && t->sep >= 0; }

bool rlx_tokenizer_is_eog(const rlx_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && (t->attr[id] & RLX_ATTR_EOG);
}

const char *rlx_tokenizer_piece(const rlx_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? t->text[id] : NULL;
}

/* ---- special-token partition ---------------------------------------------------------- */

/* A piece of the input: raw text [off, off+len) or an already recognised token. */
typedef struct frag {
    int32_t tok; /* -1 for raw text */
    size_t off, len;
} frag;

typedef struct frags {
    frag *v;
    size_t n, cap;
} frags;

static int frag_push(frags *f, int32_t tok, size_t off, size_t len)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        frag *v = realloc(f->v, cap * sizeof *v);
        if (!v) return RLX_ENOMEM;
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = (frag){tok, off, len};
    return 0;
}

static bool is_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Splits raw fragments around every occurrence of each special token, longest first.
 * Without parse_special only user-defined tokens are split out (as llama.cpp and HF do). */
static int partition(const rlx_tokenizer *t, const char *text, size_t len, bool parse_special, frags *cur)
{
    frags next = {0};
    int rc = frag_push(cur, -1, 0, len);
    for (size_t s = 0; s < t->n_special && !rc; s++) {
        int32_t id = t->special[s];
        if (!parse_special && (t->attr[id] & (RLX_ATTR_CONTROL | RLX_ATTR_UNKNOWN))) continue;
        const char *st = t->text[id];
        size_t sl = t->len[id];
        bool any = false;
        for (size_t i = 0; i < cur->n && !any; i++)
            any = cur->v[i].tok < 0 && cur->v[i].len >= sl && memmem(text + cur->v[i].off, cur->v[i].len, st, sl);
        if (!any) continue;
        next.n = 0;
        for (size_t i = 0; i < cur->n && !rc; i++) {
            frag f = cur->v[i];
            if (f.tok >= 0) { rc = frag_push(&next, f.tok, 0, 0); continue; }
            size_t pos = f.off, end = f.off + f.len;
            while (!rc && pos < end) {
                const char *hit = end - pos >= sl ? memmem(text + pos, end - pos, st, sl) : NULL;
                if (!hit) { rc = frag_push(&next, -1, pos, end - pos); break; }
                size_t at = (size_t)(hit - text), left = at;
                if (t->attr[id] & RLX_ATTR_LSTRIP)
                    while (left > pos && is_space(text[left - 1])) left--;
                if (left > pos) rc = frag_push(&next, -1, pos, left - pos);
                if (!rc) rc = frag_push(&next, id, 0, 0);
                pos = at + sl;
                if (t->attr[id] & RLX_ATTR_RSTRIP)
                    while (pos < end && is_space(text[pos])) pos++;
            }
        }
        frags tmp = *cur; *cur = next; next = tmp;
    }
    free(next.v);
    return rc;
}

static int tokenize(const rlx_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                    size_t max_ids, int32_t **ids, size_t *n_ids, rlx_error *err)
{
    *ids = NULL;
    *n_ids = 0;
    if (!text && len) return rlx_errorf(err, RLX_EINVAL, "no text given to tokenize");
    rlx__ids out = {.max = max_ids};
    frags fr = {0};
    int rc = 0;
    if (len) rc = partition(t, text, len, parse_special, &fr);
    bool bos = add_special && t->add_bos && t->bos >= 0;
    if (!rc && bos) rc = rlx__ids_push(&out, t->bos);
    bool prev_special = true; /* SentencePiece prefixes a space at the start and after specials */
    for (size_t i = 0; i < fr.n && !rc; i++) {
        frag f = fr.v[i];
        if (f.tok >= 0) {
            rc = rlx__ids_push(&out, f.tok);
            prev_special = true;
            continue;
        }
        switch (t->kind) {
        case RLX_TOK_SPM:
            rc = rlx__spm_tokenize(t, text + f.off, f.len, t->add_space_prefix && prev_special, &out);
            break;
        case RLX_TOK_BPE: rc = rlx__bpe_tokenize(t, text + f.off, f.len, &out); break;
        default: rc = rlx__wpm_tokenize(t, text + f.off, f.len, &out); break;
        }
        prev_special = false;
    }
    if (!rc && add_special && t->add_sep && t->sep >= 0) rc = rlx__ids_push(&out, t->sep);
    if (!rc && add_special && t->add_eos && t->eos >= 0) rc = rlx__ids_push(&out, t->eos);
    free(fr.v);
    if (!rc && !out.v) { /* callers always get a freeable array */
        out.v = malloc(sizeof *out.v);
        if (!out.v) rc = RLX_ENOMEM;
    }
    if (rc) {
        free(out.v);
        if (rc == RLX_ENOMEM) return rlx_errorf(err, rc, "out of memory tokenizing %zu bytes of text", len);
        if (rc == RLX_ETOOLONG) {
            *n_ids = max_ids + 1;
            return rlx_errorf(err, rc, "the text makes more than %zu tokens", max_ids);
        }
        return rlx_errorf(err, rc, "the '%s' pre-tokenizer could not split this text (regex limit reached); "
                          "split the input into smaller parts", t->pre);
    }
    *ids = out.v;
    *n_ids = out.n;
    return 0;
}

int rlx_tokenize(const rlx_tokenizer *t, const char *text, size_t len, bool add_special,
                 bool parse_special, int32_t **ids, size_t *n_ids, rlx_error *err)
{
    return tokenize(t, text, len, add_special, parse_special, 0, ids, n_ids, err);
}

int rlx_tokenize_capped(const rlx_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                        size_t max_ids, int32_t **ids, size_t *n_ids, rlx_error *err)
{
    return tokenize(t, text, len, add_special, parse_special, max_ids, ids, n_ids, err);
}

size_t rlx_tokenizer_max_bytes_per_token(const rlx_tokenizer *t)
{
    return t->max_bytes_per_token;
}

/* ---- the merge heap shared by SentencePiece and BPE ---- */

static bool merge_before(const rlx__merge *a, const rlx__merge *b)
{
    return a->priority > b->priority || (a->priority == b->priority && a->left < b->left);
}

int rlx__merge_push(rlx__merge_heap *h, rlx__merge m)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        rlx__merge *v = realloc(h->v, cap * sizeof *v);
        if (!v) return RLX_ENOMEM;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!merge_before(&m, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = m;
    return 0;
}

rlx__merge rlx__merge_pop(rlx__merge_heap *h)
{
    rlx__merge top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && merge_before(&h->v[c + 1], &h->v[c])) c++;
        if (!merge_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}
