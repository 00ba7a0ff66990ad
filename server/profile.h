/* profile.h - compile profiles: per-model defaults of `rlxd serve`, from a `[model.NAME]`
 * section of the INI config and from an optional profile file next to the weights:
 * `<model>.rlx.toml` (TOML as RLX writes it, read by server/toml_flat.h: flat keys at the top
 * or in [profile], typed values) or `<model>.rlx.ini` (INI syntax, the same keys); a model
 * with both is an error. Keys (dashes or underscores): ctx, kv-type, max-seqs,
 * max-batch-tokens, threads, backend, chat-template and draft-model (files; relative to the
 * profile file's folder), and the sampling defaults temperature, top-p, top-k, min-p,
 * repeat-penalty (repetition-penalty), presence-penalty, frequency-penalty, repeat-last-n,
 * max-tokens.
 *
 * Precedence: a request's own fields > the INI section > the profile file > the
 * server-wide flags, environment and [server] keys > built-in defaults.
 *
 * Pure data and parsing: no libuv; any thread. Ownership: a profile owns its strings
 * (rlx_profile_free); merge copies them. */
#ifndef RLX_PROFILE_H
#define RLX_PROFILE_H

#include "backends/rlx.h"
#include "engine/engine.h"
#include "proto/proto.h"

/* rlx_profile.set: which keys the profile gives */
enum {
    RLX_PF_CTX = 1u << 0,
    RLX_PF_KV_TYPE = 1u << 1,
    RLX_PF_MAX_SEQS = 1u << 2,
    RLX_PF_MAX_BATCH_TOKENS = 1u << 3,
    RLX_PF_THREADS = 1u << 4,
    RLX_PF_BACKEND = 1u << 5,
    RLX_PF_CHAT_TEMPLATE = 1u << 6,
    RLX_PF_TEMPERATURE = 1u << 7,
    RLX_PF_TOP_P = 1u << 8,
    RLX_PF_TOP_K = 1u << 9,
    RLX_PF_MIN_P = 1u << 10,
    RLX_PF_REPEAT_PENALTY = 1u << 11,
    RLX_PF_PRESENCE_PENALTY = 1u << 12,
    RLX_PF_FREQUENCY_PENALTY = 1u << 13,
    RLX_PF_REPEAT_LAST_N = 1u << 14,
    RLX_PF_MAX_TOKENS = 1u << 15,
    RLX_PF_DRAFT_MODEL = 1u << 16,
};

typedef struct rlx_profile {
    uint32_t set;              /* RLX_PF_* */
    int32_t ctx, max_seqs, max_batch_tokens, threads, top_k, repeat_last_n, max_tokens;
    int kv_type;               /* RLX_F16, RLX_F32, RLX_Q8_0 */
    float temperature, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
    char *backend;             /* owned: "cpu", "vulkan" or "cuda" */
    char *chat_template;       /* owned: the template file's path */
    char *draft_model;         /* owned: the draft model's path (engine/draft.h) */
    char sources[512];         /* where it came from, "; "-separated (for /v1/models) */
} rlx_profile;

/* Sets one key; src names the place for errors ("config rlxd.ini:12"), base_dir (may be NULL)
 * is the folder a relative chat-template path is taken from. An unknown key or a bad value is
 * RLX_EINVAL with a message naming src, the key and what it takes. */
int rlx_profile_set(rlx_profile *p, const char *key, const char *value, const char *src, const char *base_dir,
                    rlx_error *err);
/* The profile file of a model with extension ext (".rlx.toml" or ".rlx.ini") beside path
 * (`qwen.gguf` -> `qwen<ext>`; for split parts `NAME-00001-of-00003.gguf`: `NAME<ext>`),
 * written into buf. */
void rlx_profile_file_for(const char *model_path, const char *ext, char *buf, size_t cap);
/* Reads a profile file (keys at the top or in a [profile] section; TOML when its name ends in
 * .toml, else INI) into p. A missing file is RLX_ENOTFOUND (p untouched); errors name
 * file:line, and nothing of a bad file is kept. */
int rlx_profile_load_file(rlx_profile *p, const char *path, rlx_error *err);
/* The model's profile file, `<model>.rlx.toml` or `<model>.rlx.ini`, into p: RLX_ENOTFOUND
 * when there is neither, RLX_EINVAL naming both when there are both. */
int rlx_profile_load_beside(rlx_profile *p, const char *model_path, rlx_error *err);
/* dst gets every key over sets (over wins), strings copied; sources appended. */
int rlx_profile_merge(rlx_profile *dst, const rlx_profile *over, rlx_error *err);
/* The model's worker settings from the profile (what it sets replaces wc's). */
void rlx_profile_apply_worker(const rlx_profile *p, rlx_worker_config *wc);
/* The request's sampling defaults: each key the profile sets and the body did not (r->given). */
void rlx_profile_apply_request(const rlx_profile *p, rlx_api_request *r);
/* The profile's keys as a JSON object (for /v1/models meta.profile), NULL when out of memory. */
cJSON *rlx_profile_json(const rlx_profile *p);
void rlx_profile_free(rlx_profile *p);

#endif
