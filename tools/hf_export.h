/* hf_export.h - writes a GGUF model (or vocabulary) as the Hugging Face folder it could have
 * been converted from: config.json, model.safetensors (or shards with
 * model.safetensors.index.json), tokenizer.json and tokenizer_config.json. The inverse of
 * models/safetensors.c, for tests (rlxd-hf-export, tests/unit/test_safetensors.c): loading the
 * folder must give the GGUF's logits and tokens.
 *
 * Weights: F32/F16/BF16 tensors of llama, qwen2, qwen3, gemma2 and gemma3 models under HF names, Llama's
 * q/k rows un-permuted (convert_hf_to_gguf.py's permute inverted), Gemma's norms less 1; gemma3
 * also as a multimodal checkpoint (RLX_HF_EXPORT_MULTIMODAL: Gemma3ForConditionalGeneration with
 * text_config, language_model.* tensors and a small vision tower). Tokenizers: "gpt2" with the
 * pre-tokenizers gpt-2, mpt, starcoder, refact, llama-bpe and qwen2 (their tokenizer.json form),
 * and "llama" SentencePiece as a byte_fallback BPE whose merges are ordered by the merged token's
 * score (as transformers' converter orders them; Gemma's with GemmaConverter's Replace normalizer
 * and Split(" ") pre-tokenizer). Other inputs: RLX_EUNSUPPORTED naming them.
 * Synchronous, no global state. */
#ifndef RLX_HF_EXPORT_H
#define RLX_HF_EXPORT_H

#include "models/gguf.h"

/* tokenizer.json and tokenizer_config.json of g's vocabulary into dir (which must exist). */
int rlx_hf_export_tokenizer(const rlx_gguf *g, const char *dir, rlx_error *err);

enum { RLX_HF_EXPORT_MULTIMODAL = 1 };

/* The whole model into dir (created if absent): weights in n_shards files (1: model.safetensors);
 * flags: RLX_HF_EXPORT_* */
int rlx_hf_export(const rlx_gguf *g, const char *dir, int n_shards, unsigned flags, rlx_error *err);

#endif
