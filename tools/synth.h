/* synth.h - private seams of rlxd-synth: synth.c (command line, tensors, metadata),
 * synth_vocab.c (the built-in byte-level BPE and WordPiece vocabularies) and synth_bench.c (--bench). */
#ifndef RLX_SYNTH_H
#define RLX_SYNTH_H

#include "models/gguf.h"

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
