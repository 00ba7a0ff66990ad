/* tokenizer.h - text <-> token ids for the vocabularies GGUF files carry:
 * SentencePiece ("llama"), byte-level BPE ("gpt2", pre-tokenizer from tokenizer.ggml.pre) and
 * WordPiece ("bert").
 *
 * Ownership: rlx_tokenizer_from_gguf() copies what it needs out of the GGUF, so the tokenizer
 * outlives the file. Returned id arrays are malloc'ed and owned by the caller. A tokenizer is
 * immutable after creation and safe to use from several threads at once. */
#ifndef RLX_TOKENIZER_H
#define RLX_TOKENIZER_H

#include "models/gguf.h"

typedef struct rlx_tokenizer rlx_tokenizer;

int rlx_tokenizer_from_gguf(rlx_tokenizer **out, const rlx_gguf *g, rlx_error *err);
void rlx_tokenizer_free(rlx_tokenizer *t);

/* ---- the tokenizer cache (tok_cache.c) ----
 * Building a tokenizer hashes every token and merge (a 151k-token BPE vocabulary: about 0.1 s,
 * the largest share of a warm model load after reading the file); a cache file holds the built
 * tables. It is tied to the model file it was built from (size, mtime, inode, device) and to
 * the program that wrote it (format version, struct size, the executable's size and mtime: a
 * rebuild starts afresh), and carries a checksum of its
 * contents. Reading it gives a tokenizer equal to rlx_tokenizer_from_gguf's, table for table. */
typedef enum {
    RLX_TOK_CACHE_HIT,       /* read back */
    RLX_TOK_CACHE_MISS,      /* no cache file */
    RLX_TOK_CACHE_STALE,     /* built from another version of the model file, or by another build */
    RLX_TOK_CACHE_CORRUPT,   /* truncated, wrong checksum or inconsistent tables (err says which) */
} rlx_tok_cache_status;
/* The cache file of a model: cache_dir/tokenizer-<hash of the model's absolute path>.bin. */
void rlx_tokenizer_cache_path(const char *cache_dir, const char *model_path, char *buf, size_t cap);
/* 0 and *out on a hit; otherwise a negative code, *st says why (err too, for CORRUPT/STALE). */
int rlx_tokenizer_cache_load(rlx_tokenizer **out, const char *cache_path, const char *model_path,
                             rlx_tok_cache_status *st, rlx_error *err);
/* Writes the cache file atomically (a temporary file renamed over it), creating cache_path's
 * folder (one level) when missing. */
int rlx_tokenizer_cache_save(const rlx_tokenizer *t, const char *cache_path, const char *model_path, rlx_error *err);

int32_t rlx_tokenizer_n_vocab(const rlx_tokenizer *t);
int32_t rlx_tokenizer_bos(const rlx_tokenizer *t);   /* -1 if none */
int32_t rlx_tokenizer_eos(const rlx_tokenizer *t);   /* -1 if none */
bool rlx_tokenizer_add_bos(const rlx_tokenizer *t);  /* tokenizer.ggml.add_bos_token (or model default) */
int32_t rlx_tokenizer_sep(const rlx_tokenizer *t);   /* tokenizer.ggml.seperator_token_id, -1 if none */
bool rlx_tokenizer_add_eos(const rlx_tokenizer *t);  /* add_eos_token, and an EOS exists */
bool rlx_tokenizer_add_sep(const rlx_tokenizer *t);  /* add_sep_token (WPM: true), and a SEP exists */
/* End-of-generation: eos, eot, eom and the like. */
bool rlx_tokenizer_is_eog(const rlx_tokenizer *t, int32_t id);
/* The vocabulary entry as stored (e.g. "▁the", "<0x0A>", "Ġthe"); NULL if id out of range. */
const char *rlx_tokenizer_piece(const rlx_tokenizer *t, int32_t id);

/* add_special: BOS/EOS as the vocabulary asks; parse_special: recognise control/user-defined
 * token texts like "<|im_start|>" in `text`. */
int rlx_tokenize(const rlx_tokenizer *t, const char *text, size_t len, bool add_special,
                 bool parse_special, int32_t **ids, size_t *n_ids, rlx_error *err);

/* rlx_tokenize giving up early: RLX_ETOOLONG (*ids NULL, *n_ids = max_ids + 1) as soon as the
 * text is known to make more than max_ids ids, having done work for about that many only. A text
 * that makes at most max_ids ids gets exactly rlx_tokenize's ids. (For bounded work on huge
 * texts: SentencePiece merges a long text in chunks cut where no vocabulary entry could span the
 * cut; BPE and WordPiece stop after the word that passes the cap, though BPE still runs its
 * pre-tokenizer over the whole text, and every family looks for special tokens in all of it.) */
int rlx_tokenize_capped(const rlx_tokenizer *t, const char *text, size_t len, bool add_special,
                        bool parse_special, size_t max_ids, int32_t **ids, size_t *n_ids, rlx_error *err);

/* The most bytes of text one token can stand for: a text of len bytes makes at least
 * len / this ids, so longer texts can be refused before tokenizing. 0: no such bound (WordPiece
 * drops whitespace; some special tokens strip the spaces around them). */
size_t rlx_tokenizer_max_bytes_per_token(const rlx_tokenizer *t);

/* Bytes of one token as it appears in text (byte-fallback and byte-level mapping undone,
 * "▁" -> " "). Control tokens give "" unless `special`. Writes at most cap bytes and returns
 * the full length (like snprintf, without NUL). */
size_t rlx_token_to_bytes(const rlx_tokenizer *t, int32_t id, bool special, char *buf, size_t cap);

/* Whole-sequence detokenization into a malloc'ed NUL-terminated string (NULL if out of memory).
 * The space SentencePiece/WordPiece prefixed to the text is dropped from the first non-empty
 * piece, so detokenize(tokenize(x)) == x for lossless vocabularies; bytes are kept as they are. */
char *rlx_detokenize(const rlx_tokenizer *t, const int32_t *ids, size_t n, bool special);
/* The same with its length (a byte-0 token writes a NUL inside the text); strip_prefix false
 * keeps the first piece's space (the pieces joined as they are, as llama-server's /detokenize
 * joins them, so that texts detokenized token by token concatenate to the whole). */
char *rlx_detokenize_n(const rlx_tokenizer *t, const int32_t *ids, size_t n, bool special, bool strip_prefix,
                       size_t *out_len);

/* Incremental, UTF-8-safe detokenization for streams: bytes of an incomplete code point are
 * held back until the code point completes (or flushed, as U+FFFD, at the end); malformed
 * sequences become U+FFFD, so the output is always valid UTF-8. Zero-initialise before use.
 * No prefix space is removed (a stream continues earlier text). */
typedef struct rlx_detok_stream {
    char pending[8];
    int n_pending;
} rlx_detok_stream;

/* Appends the newly completed text for token `id` to out (cap bytes); returns bytes written.
 * A cap of 64 + the longest piece is always enough. */
size_t rlx_detok_push(const rlx_tokenizer *t, rlx_detok_stream *s, int32_t id, bool special,
                      char *out, size_t cap);
size_t rlx_detok_flush(rlx_detok_stream *s, char *out, size_t cap);

#endif
