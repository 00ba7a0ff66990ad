/* model_policy.h - which models `rlxd serve` may hold loaded at once (--max-loaded, --max-loaded-mem)
 * and which idle model makes room: the least recently used one. Pure functions over a view of
 * the models (models.c builds it); no I/O, no libuv, any thread.
 *
 * Ownership: the caller owns every array passed in and out. */
#ifndef RLX_MODEL_POLICY_H
#define RLX_MODEL_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A served model's life: UNLOADED -> QUEUED (a load accepted, waiting for evicted models to be
 * gone) -> LOADING -> READY -> UNLOADING -> UNLOADED; a failed load is FAILED (until POST
 * /models/load retries it). */
typedef enum {
    RLX_MODEL_UNLOADED,
    RLX_MODEL_QUEUED,
    RLX_MODEL_LOADING,
    RLX_MODEL_READY,
    RLX_MODEL_UNLOADING,
    RLX_MODEL_FAILED,
} rlx_model_state;

/* The name /v1/models shows: "unloaded", "loading" (QUEUED too), "loaded", "unloading", "failed". */
const char *rlx_model_state_name(rlx_model_state s);

typedef struct rlx_model_view {
    rlx_model_state state;
    bool busy;               /* requests use it or wait for it: never evicted */
    double last_used;        /* when its last request ended (any clock, larger is later) */
    uint64_t bytes;          /* memory it holds or will hold when loaded (estimate) */
} rlx_model_view;

typedef struct rlx_model_limits {
    int max_loaded;          /* models loaded at once, 0: no limit */
    uint64_t max_bytes;      /* their memory, 0: no limit */
} rlx_model_limits;

/* Whether models[target] (UNLOADED or FAILED) may be loaded: the models that will stay (READY,
 * QUEUED, LOADING) plus it must fit the limits, after evicting idle READY models, least
 * recently used first. Writes the indices to evict (at most n) to victims and their count to
 * *n_victims, and returns true; false (*n_victims 0) when even evicting every idle model would
 * not make room. A model bigger than max_bytes on its own never fits. */
bool rlx_model_plan_load(const rlx_model_view *models, size_t n, size_t target, const rlx_model_limits *lim,
                         size_t *victims, size_t *n_victims);

/* Whether the load of models[target] (QUEUED) may start now: the models holding memory now
 * (READY, LOADING, UNLOADING) plus it fit the limits. */
bool rlx_model_can_start(const rlx_model_view *models, size_t n, size_t target, const rlx_model_limits *lim);

#endif
