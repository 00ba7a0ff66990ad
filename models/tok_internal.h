/* tok_internal.h - private to models/tokenizer.c, tok_detok.c and tok_{spm,bpe,wpm}.c.
 *
 * Ownership: every string an rlx_tokenizer points at lives in its own arenas (copied from the
 * GGUF at load), so nothing here borrows the file. The struct is immutable after load. */
#ifndef RLX_TOK_INTERNAL_H
#define RLX_TOK_INTERNAL_H

#include "models/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

enum { RLX_TOK_SPM = 1, RLX_TOK_BPE = 2, RLX_TOK_WPM = 3 };

/* Token attributes, derived from tokenizer.ggml.token_type (llama.cpp's token types). */
enum {
    RLX_ATTR_UNDEFINED = 0,
    RLX_ATTR_UNKNOWN = 1 << 0,
    RLX_ATTR_UNUSED = 1 << 1,
    RLX_ATTR_NORMAL = 1 << 2,
    RLX_ATTR_CONTROL = 1 << 3,
    RLX_ATTR_USER_DEFINED = 1 << 4,
    RLX_ATTR_BYTE = 1 << 5,
    RLX_ATTR_EOG = 1 << 6, /* ends generation */
    RLX_ATTR_LSTRIP = 1 << 7, /* as a special token, eats the whitespace before it */
    RLX_ATTR_RSTRIP = 1 << 8, /* ... and after it */
};

#define RLX_BPE_MAX_RE 8

/* Open-addressing hash slot: the full hash is kept so probes rarely touch the entries. */
typedef struct rlx__slot {
    uint32_t h;
    int32_t id; /* -1 = empty */
} rlx__slot;

struct rlx_tokenizer {
    int kind;                  /* RLX_TOK_* */
    int32_t n_vocab;
    const char **text;         /* n_vocab NUL-terminated texts in `arena` */
    uint32_t *len;             /* byte length of each text */
    float *score;              /* SentencePiece scores (0 when absent) */
    uint16_t *attr;            /* RLX_ATTR_* bits */
    char *arena;
    size_t arena_bytes;        /* the texts, each NUL-terminated, one after the other */
    rlx__slot *tok_slots;      /* hash of text -> id */
    uint32_t tok_mask;
    size_t max_token_len;
    uint64_t *pairs;           /* 65536 bits: bit (a << 8 | b) set when some token's text holds byte a
                                * followed by byte b (where SentencePiece may cut a text into chunks) */
    size_t max_bytes_per_token;/* 0 when a token may stand for unboundedly many input bytes */

    int32_t bos, eos, eot, eom, unk, sep, pad; /* -1 when absent */
    bool add_bos, add_eos, add_sep, add_space_prefix, ignore_merges;
    bool wpm_lowercase, wpm_strip_accents; /* WordPiece: tokenizer.ggml.normalizer.* (default true) */

    int32_t *special;          /* control/user-defined/unknown ids, longest text first */
    size_t n_special;
    int32_t byte_tok[256];     /* spm: the <0xXX> token; bpe: the token of the byte's unicode char */

    /* BPE: merges "left right" by rank, hashed on the (left, right) pair. */
    uint32_t n_merges;
    const char **merge_str;    /* "left right" as stored, in merge_arena */
    uint32_t *merge_llen, *merge_rlen;
    char *merge_arena;
    size_t merge_arena_bytes;
    rlx__slot *merge_slots;    /* hash of "left right" -> rank */
    uint32_t merge_mask;
    pcre2_code *re[RLX_BPE_MAX_RE]; /* pre-tokenizer regexes, applied in order */
    int n_re;
    char pre[64];              /* tokenizer.ggml.pre */
    bool bpe_raw;              /* SentencePiece-style BPE (gemma4): ' ' -> U+2581, merges on raw UTF-8,
                                * <0xXX> byte fallback, no GPT-2 byte mapping */
    bool bpe_gemma4;           /* llama.cpp's GEMMA4 pre-type: BOS forced on, a newline run is one token */
    /* read from the tokenizer cache (tok_cache.c): the tables but text and merge_str point
     * into this read-only mapping of the cache file, unmapped (not freed) by rlx_tokenizer_free */
    void *map;
    size_t map_len;
};

/* Growable id vector. max: 0 for no limit, else a push past max ids fails with RLX_ETOOLONG
 * (the capped tokenization stops there). */
typedef struct rlx__ids {
    int32_t *v;
    size_t n, cap;
    size_t max;
} rlx__ids;

int rlx__ids_push(rlx__ids *o, int32_t id);

uint32_t rlx__hash_bytes(uint32_t h, const char *s, size_t n);
#define RLX__HASH_SEED 2166136261u

/* Token id of exactly these bytes, -1 if none. */
int32_t rlx__tok_find(const rlx_tokenizer *t, const char *s, size_t n);

/* UTF-8 sequence length from the lead byte as llama.cpp counts it (stray bytes count 1). */
static inline size_t rlx__utf8_len(unsigned char c)
{
    static const uint8_t lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[c >> 4];
}

/* Greedy pair merging shared by SentencePiece and BPE: symbols form a linked chain over a
 * byte string; candidate pairs wait in a max-heap (higher priority first, ties to the leftmost
 * pair) and are skipped when stale, i.e. when either side changed length since queued. */
typedef struct rlx__sym {
    int prev, next; /* neighbours in the live chain, -1 at the ends */
    size_t off, n;  /* bytes in the string; n == 0 once merged away */
} rlx__sym;

typedef struct rlx__merge {
    int left, right;
    float priority; /* SentencePiece: the piece's score; BPE: minus the merge rank */
    size_t ln, rn;  /* symbol lengths when queued */
} rlx__merge;

typedef struct rlx__merge_heap {
    rlx__merge *v;
    size_t n, cap;
} rlx__merge_heap;

int rlx__merge_push(rlx__merge_heap *h, rlx__merge m);
rlx__merge rlx__merge_pop(rlx__merge_heap *h);

/* Per-family pieces. Each tokenize call appends to `out` and returns 0 or RLX_ENOMEM. */
int rlx__spm_tokenize(const rlx_tokenizer *t, const char *text, size_t n, bool prefix_space, rlx__ids *out);

int rlx__bpe_init(rlx_tokenizer *t, const rlx_gguf *g, rlx_error *err);
void rlx__bpe_free(rlx_tokenizer *t);
/* A tokenizer read back from the cache (tok_cache.c): its regexes compiled again from t->pre. */
int rlx__bpe_restore(rlx_tokenizer *t, rlx_error *err);
void rlx__tok_unmap(void *map, size_t len); /* munmap, for rlx_tokenizer_free */
/* The cache file's checksum of its payload (the bytes after its 64-byte header); for tests. */
uint64_t rlx__tok_cache_checksum(const void *data, size_t n);
int rlx__bpe_tokenize(const rlx_tokenizer *t, const char *text, size_t n, rlx__ids *out);
/* The text the pre-tokenizer regexes match, when it must differ from text (tok_ucd.c): a copy
 * (same length, *out malloc'ed) whose code points PCRE2 classifies apart from llama.cpp's
 * Unicode 15.1 are replaced by ones of their class; *out NULL when none does. Any thread. */
int rlx__ucd_regex_text(const char *text, size_t n, char **out);
/* GPT-2 byte <-> unicode mapping. */
uint32_t rlx__bpe_byte_to_cp(uint8_t b);
int rlx__bpe_cp_to_byte(uint32_t cp); /* -1 if cp is not a mapped byte */

int rlx__wpm_init(rlx_tokenizer *t, const rlx_gguf *g, rlx_error *err); /* normalizer options */
int rlx__wpm_tokenize(const rlx_tokenizer *t, const char *text, size_t n, rlx__ids *out);

#endif
