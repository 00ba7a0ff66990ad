/* config.h - `rlxd serve` settings from four layers: command-line flags > RLXD_* environment
 * > INI file (inih: [server] plus one [model.NAME] section per model) > built-in defaults.
 *
 * Ownership: rlx_serve_config owns every string in it (free with rlx_serve_config_free). */
#ifndef RLX_SERVE_CONFIG_H
#define RLX_SERVE_CONFIG_H

#include "backends/rlx.h"
#include "server/profile.h"

#define RLX_SERVE_MAX_MODELS 16

typedef struct rlx_serve_model {
    char *name;              /* served name, routed by the request's "model" */
    char *path;              /* GGUF file */
} rlx_serve_model;

/* A [model.NAME] section's profile keys (profile.h): for the model of that name, whether given
 * with -m, path= or found in --models-dir. */
typedef struct rlx_serve_profile {
    char *name;
    rlx_profile prof;
} rlx_serve_profile;

typedef struct rlx_serve_config {
    rlx_serve_model models[RLX_SERVE_MAX_MODELS];
    size_t n_models;         /* the first is the default model */
    rlx_serve_profile *profiles; /* [model.NAME] sections' profiles (owned), n_profiles */
    size_t n_profiles;
    char *host;              /* "127.0.0.1" */
    int port;                /* 8080; 0 picks a free port (logged at start) */
    int threads;             /* per worker, 0: all cores */
    int32_t ctx;             /* 0: the model's context length */
    char *api_key;           /* NULL: no authentication; after load, the accepted keys, one per line */
    char *api_key_file;      /* read into api_key at load (one key per line) */
    char *config_path;
    bool stdio;              /* JSON lines on stdin/stdout instead of HTTP */
    bool log_json;           /* --log-format json */
    int32_t max_seqs;        /* 16 */
    int32_t max_batch_tokens;/* 512 */
    int32_t draft_max;       /* 8; 0: no speculative decoding */
    char *draft_model;       /* --draft-model: drafts from this model instead of prompt lookup */
    float draft_p_min;       /* 0.75 */
    int grammar_aside;       /* --grammar-aside: 1 on, -1 off, 0 auto (rlx_worker_config) */
    int64_t kv_mem_mib;      /* 0: the engine's choice */
    int64_t state_cache_mb;  /* state checkpoints per hybrid model, MiB (256; 0: none) */
    int kv_type;             /* RLX_F16 */
    int kv_block;            /* tokens per KV block, 16 */
    char *db;                /* sessions database, NULL: none */
    char *chat_template;     /* --chat-template FILE: overrides every model's GGUF template */
    int session_ttl;         /* seconds an idle session is kept, 0: forever */
    int max_sessions;        /* sessions kept per model, 1024 */
    char *backend;           /* "cpu" (default), "vulkan", "cuda" */
    int device;              /* GPU index */
    int64_t max_body;        /* request body limit in bytes, 4 MiB */
    int max_connections;     /* requests being answered at once before 503, 512 */
    int request_timeout;     /* seconds from accept (or the previous answer) to a whole request, 30 */
    int64_t max_pending_bytes; /* response bytes waiting for a client that does not read, 4 MiB */
    int max_queue;           /* waiting requests per model before 503, 256 */
    int grace_seconds;       /* SIGTERM: how long requests in flight may finish, 30 */
    int stop_timeout;        /* then how long workers, tasks and loads may take to stop (server/watchdog.h), 10; 0: no limit */
    char *models_dir;        /* --models-dir: every GGUF model there is served, loaded on demand */
    int max_loaded;          /* models loaded at once, 0: no limit (the LRU idle one is evicted) */
    int64_t max_loaded_mem;  /* MiB the loaded models may hold (weights + KV), 0: no limit */
    double keep_alive;       /* seconds a model stays loaded once idle; 0: unload after each
                                request; -1 (default): forever */
    char *cors_origins;      /* --cors-origins: "*" or a comma list of origins; NULL: no CORS */
    char *cache_dir;         /* --cache-dir: the tokenizer cache's folder; NULL: $XDG_CACHE_HOME/rlxd
                                (~/.cache/rlxd); "none": no cache (rlx_serve_cache_dir) */
    bool help;               /* --help was given */
} rlx_serve_config;

/* Builds the configuration; a bad flag, value, file or missing model fails with RLX_EINVAL and
 * a message naming the setting and its source. */
int rlx_serve_config_load(rlx_serve_config *c, int argc, char **argv, rlx_error *err);
void rlx_serve_config_free(rlx_serve_config *c);
/* The names of every setting (flag names without "--"), for tests and documentation. */
const char *const *rlx_serve_setting_names(size_t *n);
/* The current value of setting `name` as text (as a flag would give it); RLX_ENOTFOUND for an
 * unknown name. */
int rlx_serve_config_get(const rlx_serve_config *c, const char *name, char *buf, size_t cap);
/* cors.c: validates --cors-origins ("*" or a comma list of http(s)://host[:port] origins). */
int rlx_cors_check_config(const char *origins, rlx_error *err);
/* The [model.NAME] profile of that model, NULL when the config has none. */
const rlx_profile *rlx_serve_config_profile(const rlx_serve_config *c, const char *name);
/* The cache folder in effect (see cache_dir) into buf; false when the cache is off (or no
 * folder can be named: neither XDG_CACHE_HOME nor HOME is set). */
bool rlx_serve_cache_dir(const rlx_serve_config *c, char *buf, size_t cap);
/* Writes the usage text. */
const char *rlx_serve_usage(void);

#endif
