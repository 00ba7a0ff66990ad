/* runner.h - a model ready to run: the loaded model, its compiled plan on a backend, and the
 * model's memory (engine/memory.h: paged KV pool and block manager, recurrent-state slots).
 * One runner per model worker (or per CLI command); not thread-safe.
 *
 * Ownership: the runner owns the model, backend, graph, plan, memory, KV manager and the output
 * buffer; rlx_runner_forward() leaves n_outputs x n_vocab logits in runner->logits, or for a
 * graph with hidden-state output (an embedding model: an encoder, or a decoder declaring a
 * pooling type) n_tokens x out_cols states, valid until the next forward (engine/embed.h and
 * engine/worker_embed.c pool those). An embedding model's step budget (max_batch_tokens) is
 * raised to its context: an input is computed whole in one step. */
#ifndef RLX_RUNNER_H
#define RLX_RUNNER_H

#include "backends/backend.h"
#include "engine/kv.h"
#include "engine/memory.h"
#include "models/model.h"

typedef struct rlx_runner_config {
    const char *model_path;
    rlx_backend_config backend;
    int32_t n_ctx;             /* per-sequence limit; <= 0: the model's training context */
    int kv_type;               /* RLX_F16, RLX_F32 or RLX_Q8_0, used when kv_type_set (default F16) */
    bool kv_type_set;
    int32_t kv_block;          /* <= 0: 16 */
    int32_t kv_blocks;         /* <= 0: from kv_mem_mib, else enough for max_seqs full contexts,
                                  capped at a quarter of the available memory */
    size_t kv_mem_mib;
    int32_t max_seqs;          /* <= 0: 1 */
    int32_t max_batch_tokens;  /* <= 0: 512 */
    int32_t max_outputs;       /* <= 0: max_seqs */
    const char *tokens_hint, *outputs_hint; /* the settings bounding them, for errors (rlx_compile_opts) */
    /* Seams for tests and embedders (NULL: the usual): run on this backend instead of creating
     * one from `backend` (the runner takes it, also when opening fails), and describe the
     * model's memory with these layers (the graph's layer count) instead of the builder's. */
    rlx_backend *backend_impl;
    const rlx_mem_layer *mem_layers;
} rlx_runner_config;

typedef struct rlx_runner {
    rlx_model *model;
    rlx_backend *backend;
    rlx_graph graph;
    rlx_plan plan;
    rlx_kv_manager kv;         /* blocks of the paged KV pool (managed through mem) */
    rlx_mem_desc kv_geo;       /* the memory description the backend holds */
    rlx_memory mem;            /* the one interface the engine uses for per-sequence memory */
    int32_t n_ctx, n_vocab, max_batch_tokens, max_outputs, max_seqs;
    int64_t out_cols;          /* floats per output row: n_vocab, or the hidden state's size */
    float *logits;             /* the step's output (logits or hidden states, see above) */
    size_t weight_bytes;
    /* seconds rlx_runner_open spent in each phase (for the load log and bench/RESULTS.md):
     * mapping and reading the GGUF header, building the graph, compiling the plan, creating the
     * backend and preparing the plan on it (weights uploaded or repacked), the memory pool */
    double t_map, t_build, t_compile, t_prepare, t_memory;
} rlx_runner;

int rlx_runner_open(rlx_runner **out, const rlx_runner_config *cfg, rlx_error *err);
/* Whether the model is an embedding model (its graph outputs hidden states, not logits): the
 * CLI commands that sample or print logits refuse it. */
static inline bool rlx_runner_embeds(const rlx_runner *r) { return r->graph.output_kind == RLX_OUTPUT_HIDDEN; }
void rlx_runner_close(rlx_runner *r);
int rlx_runner_forward(rlx_runner *r, const rlx_batch *b, rlx_error *err);
/* Whether the model's files changed since the load (rlx_gguf_changed); a forward pass that ran
 * over a changed file fails with RLX_EIO saying so instead of giving its numbers. */
bool rlx_runner_file_changed(const rlx_runner *r, char *why, size_t cap);

/* Makes `table` (capacity *cap, reallocated as needed) cover positions [0, n_pos) by allocating
 * fresh blocks; RLX_EFULL if the pool has none left (blocks already added stay). For the CLI
 * commands and tests that drive one KV-only model directly, without the scheduler. */
int rlx_runner_reserve(rlx_runner *r, int32_t **table, int32_t *n_blocks, int32_t *cap, int32_t n_pos);

#endif
