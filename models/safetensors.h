/* safetensors.h - Hugging Face model folders (config.json, model.safetensors or a sharded index,
 * tokenizer.json, tokenizer_config.json, generation_config.json) presented to the engine as the
 * GGUF llama.cpp's convert_hf_to_gguf.py would have written from them, so the rest of rlxd
 * (model.c, tokenizer.c, the graph builders) cannot tell the two apart.
 *
 * How (models/safetensors.c): config.json becomes the family's "<arch>.*" keys, tokenizer.json
 * (models/hf_tokenizer.c) the "tokenizer.ggml.*" keys; they are written as a tensor-less GGUF
 * image in memory (rlx_gguf_writer_write_memory) and parsed by the ordinary reader, then the
 * weights are added (rlx__gguf_add_tensors) under llama.cpp's names, pointing into the mmapped
 * .safetensors files. Only what llama.cpp's converter changes is copied: Llama's q/k rows
 * (permuted for its interleaved RoPE), and 1-D tensors stored as F16/BF16 (GGUF keeps them F32);
 * and a tensor whose data is not aligned to its element size (safetensors pads nothing).
 * The handle owns every mapping and copy (released by rlx_gguf_close).
 *
 * Supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM
 * and Gemma3ForConditionalGeneration's language model (text_config over the top level, tensors
 * without "language_model.", vision tensors skipped) - Gemma's norms + 1 as the converter adds it,
 * in the checkpoint's type - with F32, F16 and BF16 weights; tokenizer.json model BPE, byte-level
 * (with the pre-tokenizers of models/hf_tokenizer.c's table) or with byte_fallback
 * (SentencePiece-style, as llama.cpp's "llama" vocabulary; Gemma's no-op Split(" ") after
 * Replace(" ", "▁") accepted). Anything else is
 * RLX_EUNSUPPORTED naming what is missing.
 *
 * Threads: synchronous, no global state; any thread but the loop thread (it reads whole files). */
#ifndef RLX_SAFETENSORS_H
#define RLX_SAFETENSORS_H

#include "models/gguf.h"

/* Whether path is a folder holding config.json (a Hugging Face model folder). */
bool rlx_st_is_folder(const char *path);

/* Opens a Hugging Face model folder as a GGUF handle (see above); rlx_gguf_path is dir. */
int rlx_st_open(rlx_gguf **out, const char *dir, rlx_error *err);

/* Any model as users name it: a Hugging Face folder (rlx_st_open), else a GGUF file or any part
 * of a split one (rlx_gguf_open_split). */
int rlx_model_open(rlx_gguf **out, const char *path, rlx_error *err);

/* tokenizer.json (+ tokenizer_config.json and generation_config.json when present) of dir as
 * llama.cpp's "tokenizer.ggml.*" keys (and tokenizer.chat_template) set on w (hf_tokenizer.c).
 * n_vocab_min: the embedding's rows, so tokens missing from the json are padded as llama.cpp's
 * converter pads them ("[PAD<id>]", unused); 0 for none. */
int rlx_hf_tokenizer_keys(rlx_gguf_writer *w, const char *dir, int64_t n_vocab_min, rlx_error *err);


#endif
