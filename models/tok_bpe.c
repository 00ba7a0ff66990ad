/* tok_bpe.c - byte-level BPE ("gpt2"): the family's pre-tokenizer regexes (by
 * tokenizer.ggml.pre, as llama.cpp's llama-vocab.cpp lists them) run with PCRE2 (UTF + UCP,
 * JIT), each piece is mapped byte -> unicode (GPT-2's table) and merged by rank from
 * tokenizer.ggml.merges (lowest rank first, leftmost on ties).
 *
 * The regexes are llama.cpp's, not the tokenizer.json originals: llama.cpp runs them (or a
 * hand-written equivalent) on text whose non-ASCII code points are collapsed to their general
 * category, so \p{Lu} and \p{Ll} both mean "a letter" there, which is why it rewrote the
 * case-sensitive ones with ASCII [^a-z]/[^A-Z]; and its hand-written splitters (kimi-k2) are
 * written out here as the regex they implement. */
#include "models/tok_internal.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h> /* RUNNING_ON_VALGRIND: a no-op instruction sequence otherwise */
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pre-tokenizers ------------------------------------------------------------------- */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
/* llama.cpp's case-insensitive contractions written without (?i) */
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_BLOOM " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+"
/* llama.cpp's digit splitter: runs of \p{N} cut into threes from the right */
#define RE_DIGITS3 "\\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N}))"
#define RE_CJK "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+" /* [一-龥ࠀ-一가-퟿]+ */

/* kimi-k2's Han ranges (llama.cpp's unicode_cpt_is_han) */
#define HAN_RANGES "\\x{3400}-\\x{4DBF}\\x{4E00}-\\x{9FFF}\\x{F900}-\\x{FAFF}\\x{20000}-\\x{2A6DF}\\x{2A700}-\\x{2EBEF}\\x{2F800}-\\x{2FA1F}"
/* the case-sensitive letter runs of gpt-4o / tekken as llama.cpp has them: ASCII case only */
#define RE_UPPER_LOWER "((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
#define RE_LOWER_UPPER "((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"

typedef struct pre_def {
    const char *names[12];
    const char *re[RLX_BPE_MAX_RE];
    bool ignore_merges, add_bos;
} pre_def;

static const pre_def k_pre[] = {
    {{"default"},
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
     {RE_LLAMA3}, true, true},
    {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {RE_LLAMA3}, false, false},
    {{"deepseek-llm"},
     {"[\r\n]",
      "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf\xc7\x84-\xca\x93\xca\x95-\xca\xaf"
      "\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf\xce\x86\xce\x88-\xce\x8a\xce\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5"
      "\xcf\xb7-\xd2\x81\xd2\x8a-\xd4\xaf\xd4\xb1-\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f\xb5\xe1\x8f\xb8-\xe1\x8f\xbd"
      "\xe1\xb2\x90-\xe1\xb2\xba\xe1\xb2\xbd-\xe1\xb2\xbf\xe1\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-\xe1\xb6\x9a"
      "\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85\xe1\xbd\x88-\xe1\xbd\x8d\xe1\xbd\x90-\xe1\xbd\x97"
      "\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd\xe1\xbe\x80-\xe1\xbe\xb4\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe"
      "\xe1\xbf\x82-\xe1\xbf\x84\xe1\xbf\x86-\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1\xbf\xa0-\xe1\xbf\xac"
      "\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93\xe2\x84\x95\xe2\x84\x99-\xe2\x84\x9d"
      "\xe2\x84\xa4\xe2\x84\xa6\xe2\x84\xa8\xe2\x84\xaa-\xe2\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf"
      "\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0\x80-\xe2\xb1\xbb\xe2\xb1\xbe-\xe2\xb3\xa4\xe2\xb3\xab-\xe2\xb3\xae"
      "\xe2\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea\x9a\x9b\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-\xea\x9e\x87"
      "\xea\x9e\x8b-\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86\xef\xac\x93-\xef\xac\x97\xef\xbc\xa1-\xef\xbc\xba"
      "\xef\xbd\x81-\xef\xbd\x9a\xf0\x90\x90\x80-\xf0\x90\x91\x8f\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93\x98-\xf0\x90\x93\xbb"
      "\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2\xf0\x90\xb3\x80-\xf0\x90\xb3\xb2\xf0\x91\xa2\xa0-\xf0\x91\xa3\x9f\xf0\x9e\xa4\x80-\xf0\x9e\xa5\x83]+",
      "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f\xe3\x80\x80-\xe3\x80\x82]+",
      "\\s+$", RE_CJK, "\\p{N}+"}, false, false},
    {{"deepseek-coder"}, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}, false, false},
    {{"deepseek-v3", "hunyuan-dense", "hy_v4", "joyai-llm"},
     {"\\p{N}{1,3}", "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
     false, false},
    {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, false, false},
    {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
     {"\\p{N}", RE_GPT2}, false, false},
    {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code"},
     {RE_GPT2}, false, false},
    {{"roberta-bpe", "mpt", "olmo", "jais", "trillion", "a.x-4.0", "mellum", "modern-bert", "exaone4", "granite-docling"},
     {RE_GPT2}, false, false},
    {{"qwen2", "qwen2.5", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "grok-2", "kormo", "f2llmv2",
      "solar-open"}, {RE_QWEN2}, false, false},
    {{"qwen35"},
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     false, false},
    {{"bailingmoe", "bailingmoe2", "llada-moe"},
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}, false, false},
    {{"seed-coder"},
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     false, false},
    /* a digit run, then empty matches that cut it into threes from the right: \\d is ASCII in
     * llama.cpp's std::regex */
    {{"superbpe"}, {"\\p{N}+", "(?=([0-9]{3})+(?![0-9]))"}, false, false},
    /* llama.cpp's hand-written splitter: Han runs, then letter words without Han (marks split
     * them), contractions, numbers in threes */
    {{"kimi-k2"},
     {"[" HAN_RANGES "]+|[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}" HAN_RANGES "]+(?:'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?|"
      "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, false, false},
    {{"poro-chat", "bloom", "gpt3-finnish"}, {RE_BLOOM}, false, false},
    {{"viking"}, {RE_BLOOM, "\\p{N}"}, false, false},
    {{"tekken"},
     {"[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER_LOWER "|[^\\r\\n\\p{L}\\p{N}]?" RE_LOWER_UPPER
      "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, true, true},
    /* the whole text merged at once, split only at newlines, after ' ' became U+2581 */
    /* the later llama.cpp pre-tokenizers that are regexes (JAIS2, SPARK2_5, YOUTU, EXAONE_MOE,
     * LAGUNA, GRANITE_EMB_MULTI, TINY_AYA, MINICPM5, UFAKZEKA, CHAMELEON, AFMOE). Where llama.cpp
     * kept the tokenizer.json original's \p{Lu}/\p{Ll}, its collapsed-category engine reads
     * them as any letter: written \p{L} here. Its digit splitter (groups of three from the
     * left remainder) is the lookahead regex it stands for. */
    {{"jais-2"},
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
      "\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|"
      "\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"}, false, false},
    {{"spark2_5"},
     {"\\p{N}{1,3}", "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
      "\\p{N}"}, false, false},
    {{"youtu"},
     {"[\xea\xb0\x80-\xed\x9e\xa3\xe3\x84\xb1-\xe3\x86\x8e]+|[\xef\xbc\x81\xe2\x80\xa6\xe2\x80\x9c\xe2\x80\x9d\xe2\x80\x98\xe2\x80\x99\xe2\x80\x94"
      "\xef\xbc\x9a\xef\xbc\x9b\xef\xbc\x8c\xe3\x80\x81-\xe3\x80\xbf\xef\xb8\xb0-\xef\xb9\x8f]+|[\xe3\x84\x85-\xe3\x84\xaf]+|"
      "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]*[\\p{L}\\p{M}]+" RE_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+[\\p{L}\\p{M}]*"
      RE_CONTRACTIONS "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, true, false},
    {{"exaone-moe"},
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|"
      "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}, false, false},
    {{"laguna"}, {"[^\\n]+|[\\n]+", RE_QWEN2}, false, false},
    {{"granite-embed-multi-97m"},
     {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+" RE_CONTRACTIONS "?|"
      "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*" RE_CONTRACTIONS "?|"
      "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, true, false},
    {{"tiny_aya", "cohere2moe"},
     {RE_DIGITS3,
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]*[\\p{L}\\p{M}]+" RE_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+[\\p{L}\\p{M}]*"
      RE_CONTRACTIONS "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, false, false},
    {{"minicpm5"},
     {"\\p{N}{1,3}", RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     true, false},
    {{"ufakzeka"}, {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, false, false},
    {{"chameleon"},
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2},
     false, true},
    {{"afmoe"}, /* its CJK class runs from U+8C48 (the unified 豈), not U+F900, as llama.cpp has it */
     {RE_DIGITS3,
      "[\xe4\xb8\x80-\xe9\xbf\xbf\xe3\x90\x80-\xe4\xb6\xbf\xe8\xb1\x88-\xef\xab\xbf\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf"
      "\xef\xbd\xa5-\xef\xbe\x9f\xe2\xbc\x80-\xe2\xbf\x9f\xe0\xb9\x80-\xe0\xb9\xbf\xe0\xba\x80-\xe0\xbb\xbf\xe1\x9e\x80-\xe1\x9f\xbf"
      "\xe1\x80\x80-\xe1\x82\x9f\xea\xa9\xa0-\xea\xa9\xbf\xea\xa7\xa0-\xea\xa7\xbf\xea\xb0\x80-\xed\x9e\xaf\xe1\x84\x80-\xe1\x87\xbf]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, false, false},
    {{"gemma4", "granite-embed-multi-311m", "sarvam-moe"}, {"[^\\n]+|[\\n]+"}, false, false},
    {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"},
     {"[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER_LOWER RE_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?" RE_LOWER_UPPER RE_CONTRACTIONS
      "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, false, false},
};

/* SentencePiece-style BPE (rlx_tokenizer.bpe_raw), and whether it is llama.cpp's GEMMA4 type */
static const struct { const char *name; bool gemma4; } k_raw[] = {
    {"gemma4", true}, {"granite-embed-multi-311m", true}, {"sarvam-moe", false},
};

/* ---- GPT-2 byte <-> unicode ------------------------------------------------------------ */

/* Printable bytes map to themselves; the other 68 take U+0100.. in byte order. */
static bool byte_printable(unsigned b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

uint32_t rlx__bpe_byte_to_cp(uint8_t b)
{
    if (byte_printable(b)) return b;
    if (b <= 32) return 256u + b;
    if (b <= 160) return 256u + 33 + (b - 127u);
    return 256u + 67; /* 173 */
}

int rlx__bpe_cp_to_byte(uint32_t cp)
{
    if (cp < 256) return byte_printable(cp) ? (int)cp : -1;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 289 + 127);
    if (cp == 323) return 173;
    return -1;
}

/* ---- merges ------------------------------------------------------------------------------ */

static uint32_t pair_hash(const char *l, size_t ln, const char *r, size_t rn)
{
    uint32_t h = rlx__hash_bytes(RLX__HASH_SEED, l, ln);
    h = rlx__hash_bytes(h, " ", 1);
    return rlx__hash_bytes(h, r, rn);
}

static int32_t merge_rank(const rlx_tokenizer *t, const char *l, size_t ln, const char *r, size_t rn)
{
    if (!t->merge_slots) return -1;
    uint32_t h = pair_hash(l, ln, r, rn);
    for (uint32_t i = h & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        int32_t k = t->merge_slots[i].id;
        if (k < 0) return -1;
        if (t->merge_slots[i].h != h) continue;
        const char *m = t->merge_str[k];
        if (t->merge_llen[k] == ln && t->merge_rlen[k] == rn && memcmp(m, l, ln) == 0 &&
            memcmp(m + ln + 1, r, rn) == 0)
            return k;
    }
}

static int load_merges(rlx_tokenizer *t, const rlx_gguf *g, rlx_error *err)
{
    const rlx_gguf_array *a = NULL;
    int rc = rlx_gguf_get_arr(g, "tokenizer.ggml.merges", &a, err);
    if (rc == RLX_ENOTFOUND)
        return rlx_errorf(err, RLX_EFORMAT, "a 'gpt2' (BPE) vocabulary needs tokenizer.ggml.merges, which is missing");
    if (rc) return rc;
    if (a->type != RLX_GGUF_STRING || a->n > INT32_MAX)
        return rlx_errorf(err, RLX_EFORMAT, "tokenizer.ggml.merges must be an array of strings");
    size_t n = a->n, bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += a->strs[i].len + 1;
    t->merge_str = malloc((n ? n : 1) * sizeof *t->merge_str);
    t->merge_llen = malloc((n ? n : 1) * sizeof *t->merge_llen);
    t->merge_rlen = malloc((n ? n : 1) * sizeof *t->merge_rlen);
    t->merge_arena = malloc(bytes ? bytes : 1);
    t->merge_arena_bytes = bytes;
    uint32_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    t->merge_mask = cap - 1;
    t->merge_slots = malloc((size_t)cap * sizeof *t->merge_slots);
    if (!t->merge_str || !t->merge_llen || !t->merge_rlen || !t->merge_arena || !t->merge_slots)
        return rlx_errorf(err, RLX_ENOMEM, "out of memory loading %zu BPE merges", n);
    memset(t->merge_slots, 0xff, (size_t)cap * sizeof *t->merge_slots);
    char *p = t->merge_arena;
    for (size_t i = 0; i < n; i++) {
        rlx_gguf_str s = a->strs[i];
        memcpy(p, s.ptr, s.len);
        p[s.len] = 0;
        t->merge_str[i] = p;
        /* The separator is the first space after the first byte (a piece may itself be " "). */
        const char *sp = s.len > 1 ? memchr(p + 1, ' ', s.len - 1) : NULL;
        p += s.len + 1;
        t->merge_llen[i] = t->merge_rlen[i] = 0;
        if (!sp) continue; /* malformed entry: never matches, like llama.cpp's empty pair */
        size_t ln = (size_t)(sp - t->merge_str[i]), rn = s.len - ln - 1;
        t->merge_llen[i] = (uint32_t)ln;
        t->merge_rlen[i] = (uint32_t)rn;
        uint32_t h = pair_hash(t->merge_str[i], ln, sp + 1, rn);
        for (uint32_t j = h & t->merge_mask;; j = (j + 1) & t->merge_mask) {
            int32_t k = t->merge_slots[j].id;
            if (k < 0) { t->merge_slots[j] = (rlx__slot){h, (int32_t)i}; break; }
            if (t->merge_slots[j].h == h && t->merge_llen[k] == ln && t->merge_rlen[k] == rn && memcmp(t->merge_str[k], t->merge_str[i], s.len) == 0)
                break; /* a duplicate keeps its first (lowest) rank */
        }
    }
    t->n_merges = (uint32_t)n;
    return 0;
}

static const pre_def *find_pre(const char *name, size_t len)
{
    for (size_t i = 0; i < RLX_ARRAY_LEN(k_pre); i++)
        for (size_t j = 0; j < RLX_ARRAY_LEN(k_pre[i].names) && k_pre[i].names[j]; j++)
            if (strlen(k_pre[i].names[j]) == len && memcmp(k_pre[i].names[j], name, len) == 0) return &k_pre[i];
    return NULL;
}

/* The pre-tokenizer's regexes, compiled (JIT where it can) into t->re. */
static int compile_res(rlx_tokenizer *t, const pre_def *d, rlx_error *err)
{
    for (int i = 0; i < RLX_BPE_MAX_RE && d->re[i]; i++) {
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)d->re[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                                       &ec, &eo, NULL);
        if (!re) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return rlx_errorf(err, RLX_EUNSUPPORTED, "pre-tokenizer '%s' regex %d does not compile at %zu: %s",
                              t->pre, i, (size_t)eo, (const char *)msg);
        }
        /* failure just means the slower interpreter, which also serves under valgrind: memcheck
         * cannot follow the machine code PCRE2's JIT writes (Debian builds it without valgrind
         * support) and reports its every branch; the interpreter gives the same matches */
        if (!RUNNING_ON_VALGRIND) pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
        t->re[t->n_re++] = re;
    }
    return 0;
}

int rlx__bpe_restore(rlx_tokenizer *t, rlx_error *err)
{
    const pre_def *d = find_pre(t->pre, strlen(t->pre));
    if (!d) return rlx_errorf(err, RLX_EFORMAT, "BPE pre-tokenizer '%s' is not supported", t->pre);
    t->n_re = 0;
    return compile_res(t, d, err);
}

int rlx__bpe_init(rlx_tokenizer *t, const rlx_gguf *g, rlx_error *err)
{
    rlx_gguf_str pre = {"default", 7}, model = {"", 0};
    int rc = rlx_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err);
    if (rc && rc != RLX_ENOTFOUND) return rc;
    /* tokenizer.ggml.model "gemma4" is this BPE with its own pre-tokenizer, whatever the key says */
    if (rlx_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL) == 0 && model.len == 6 && !memcmp(model.ptr, "gemma4", 6))
        pre = (rlx_gguf_str){"gemma4", 6};
    const pre_def *d = find_pre(pre.ptr, pre.len);
    if (!d) {
        char names[480] = "";
        for (size_t i = 0; i < RLX_ARRAY_LEN(k_pre); i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", k_pre[i].names[0]);
        return rlx_errorf(err, RLX_EUNSUPPORTED,
                          "BPE pre-tokenizer '%.*s' (tokenizer.ggml.pre) is not supported; supported: %s and their aliases",
                          (int)RLX_MIN(pre.len, 64), pre.ptr, names);
    }
    snprintf(t->pre, sizeof t->pre, "%.*s", (int)RLX_MIN(pre.len, sizeof t->pre - 1), pre.ptr);
    t->ignore_merges = d->ignore_merges;
    t->add_bos = d->add_bos;
    for (size_t i = 0; i < RLX_ARRAY_LEN(k_raw); i++)
        if (!strcmp(t->pre, k_raw[i].name)) {
            t->bpe_raw = true;
            t->bpe_gemma4 = k_raw[i].gemma4;
        }
    if ((rc = compile_res(t, d, err))) return rc;
    return load_merges(t, g, err);
}

void rlx__bpe_free(rlx_tokenizer *t)
{
    for (int i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
    free(t->merge_str);
    free(t->merge_llen);
    free(t->merge_rlen);
    free(t->merge_arena);
    free(t->merge_slots);
}

/* ---- tokenization ---------------------------------------------------------------------- */

typedef struct span {
    size_t off, len;
} span;

typedef struct spans {
    span *v;
    size_t n, cap;
} spans;

static int span_push(spans *s, size_t off, size_t len)
{
    if (!len) return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        span *v = realloc(s->v, cap * sizeof *v);
        if (!v) return RLX_ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (span){off, len};
    return 0;
}

/* Each regex splits every current piece into its matches and the text between them; the
 * matching sees only the piece (as llama.cpp's unicode_regex_split does). */
static int pretokenize(const rlx_tokenizer *t, const char *text, size_t n, spans *cur)
{
    spans next = {0};
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    int rc = md ? span_push(cur, 0, n) : RLX_ENOMEM;
    for (int r = 0; r < t->n_re && !rc; r++) {
        next.n = 0;
        for (size_t i = 0; i < cur->n && !rc; i++) {
            const char *s = text + cur->v[i].off;
            size_t len = cur->v[i].len, pos = 0, last = 0;
            while (pos < len && !rc) {
                int m = pcre2_match(t->re[r], (PCRE2_SPTR)s, len, pos, 0, md, NULL);
                if (m == PCRE2_ERROR_NOMATCH) break;
                if (m < 0) { rc = RLX_ERANGE; break; } /* match or depth limit: never split silently */
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                size_t ms = ov[0], me = ov[1];
                if (me <= ms) { /* an empty match cuts the piece there (superbpe's digit groups), as
                                 * std::regex_iterator's empty matches do in llama.cpp */
                    if (ms > last) rc = span_push(&next, cur->v[i].off + last, ms - last);
                    last = ms;
                    pos = ms + 1;
                    while (pos < len && ((unsigned char)s[pos] & 0xc0) == 0x80) pos++;
                    continue;
                }
                rc = span_push(&next, cur->v[i].off + last, ms - last);
                if (!rc) rc = span_push(&next, cur->v[i].off + ms, me - ms);
                pos = last = me;
            }
            if (!rc) rc = span_push(&next, cur->v[i].off + last, len - last);
        }
        spans tmp = *cur; *cur = next; next = tmp;
    }
    pcre2_match_data_free(md);
    free(next.v);
    return rc;
}

typedef struct bpe_ws {
    char *w;      /* byte-encoded word */
    size_t wcap;
    rlx__sym *syms;
    size_t scap;
    rlx__merge_heap q;
} bpe_ws;

static int add_bigram(const rlx_tokenizer *t, bpe_ws *ws, int left, int right)
{
    if (left < 0 || right < 0) return 0;
    const rlx__sym *l = &ws->syms[left], *r = &ws->syms[right];
    int32_t rank = merge_rank(t, ws->w + l->off, l->n, ws->w + r->off, r->n);
    if (rank < 0) return 0;
    return rlx__merge_push(&ws->q, (rlx__merge){left, right, -(float)rank, l->n, r->n});
}

static int bpe_word(const rlx_tokenizer *t, bpe_ws *ws, const char *src, size_t n, rlx__ids *out)
{
    if (ws->wcap < 2 * n) {
        char *w = realloc(ws->w, 2 * n);
        if (!w) return RLX_ENOMEM;
        ws->w = w;
        ws->wcap = 2 * n;
    }
    size_t m = 0;
    if (t->bpe_raw) {
        memcpy(ws->w, src, n);
        m = n;
    } else {
        for (size_t i = 0; i < n; i++) {
            uint32_t cp = rlx__bpe_byte_to_cp((uint8_t)src[i]);
            if (cp < 0x80) ws->w[m++] = (char)cp;
            else { ws->w[m++] = (char)(0xC0 | (cp >> 6)); ws->w[m++] = (char)(0x80 | (cp & 0x3F)); }
        }
    }
    bool newlines = t->bpe_gemma4; /* a run of newlines is one token if it has one */
    for (size_t i = 0; newlines && i < m; i++) newlines = ws->w[i] == '\n';
    if (t->ignore_merges || newlines) {
        int32_t id = rlx__tok_find(t, ws->w, m);
        if (id >= 0) return rlx__ids_push(out, id);
    }
    if (ws->scap < m) {
        rlx__sym *s = realloc(ws->syms, m * sizeof *s);
        if (!s) return RLX_ENOMEM;
        ws->syms = s;
        ws->scap = m;
    }
    int ns = 0;
    for (size_t off = 0; off < m;) {
        size_t len = RLX_MIN(rlx__utf8_len((unsigned char)ws->w[off]), m - off);
        ws->syms[ns] = (rlx__sym){ns - 1, off + len == m ? -1 : ns + 1, off, len};
        off += len;
        ns++;
    }
    ws->q.n = 0;
    int rc = 0;
    for (int i = 1; i < ns && !rc; i++) rc = add_bigram(t, ws, i - 1, i);
    while (!rc && ws->q.n) {
        rlx__merge b = rlx__merge_pop(&ws->q);
        rlx__sym *l = &ws->syms[b.left], *r = &ws->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n != b.ln || r->n != b.rn) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) ws->syms[r->next].prev = b.left;
        rc = add_bigram(t, ws, l->prev, b.left);
        if (!rc) rc = add_bigram(t, ws, b.left, l->next);
    }
    for (int i = ns ? 0 : -1; i >= 0 && !rc; i = ws->syms[i].next) {
        const rlx__sym *y = &ws->syms[i];
        int32_t id = rlx__tok_find(t, ws->w + y->off, y->n);
        if (id >= 0) { rc = rlx__ids_push(out, id); continue; }
        /* Not in the vocabulary: each byte on its own, if the vocabulary has it (llama.cpp);
         * SentencePiece-style vocabularies spell bytes <0xXX> */
        for (size_t j = 0; j < y->n && !rc; j++) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", (unsigned char)ws->w[y->off + j]);
            id = t->bpe_raw ? rlx__tok_find(t, hex, 6) : rlx__tok_find(t, ws->w + y->off + j, 1);
            if (id >= 0) rc = rlx__ids_push(out, id);
        }
    }
    return rc;
}

/* SentencePiece-style BPE sees ' ' as U+2581 and, like llama.cpp's code point split, each
 * malformed UTF-8 byte as U+FFFD. Returns a malloc'ed copy, *len its length. */
static char *escape_raw(const char *text, size_t n, size_t *len)
{
    char *o = malloc(3 * n + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)text[i];
        size_t need = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        bool ok = need && i + need <= n;
        for (size_t j = 1; ok && j < need; j++) ok = ((unsigned char)text[i + j] & 0xc0) == 0x80;
        if (c == ' ') { memcpy(o + k, "\xe2\x96\x81", 3); k += 3; i++; }
        else if (!ok) { memcpy(o + k, "\xef\xbf\xbd", 3); k += 3; i++; }
        else { memcpy(o + k, text + i, need); k += need; i += need; }
    }
    *len = k;
    return o;
}

int rlx__bpe_tokenize(const rlx_tokenizer *t, const char *text, size_t n, rlx__ids *out)
{
    spans words = {0};
    bpe_ws ws = {0};
    char *esc = NULL;
    if (t->bpe_raw) {
        if (!(esc = escape_raw(text, n, &n))) return RLX_ENOMEM;
        text = esc;
    }
    char *seen = NULL; /* what the regexes match: classes as llama.cpp's Unicode 15.1 has them */
    int rc = rlx__ucd_regex_text(text, n, &seen);
    if (!rc) rc = pretokenize(t, seen ? seen : text, n, &words);
    free(seen);
    for (size_t i = 0; i < words.n && !rc; i++)
        rc = bpe_word(t, &ws, text + words.v[i].off, words.v[i].len, out);
    free(words.v);
    free(ws.w);
    free(ws.syms);
    free(ws.q.v);
    free(esc);
    return rc;
}
