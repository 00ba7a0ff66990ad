/* model_policy.c - the limits on loaded models and the least-recently-used eviction (see
 * model_policy.h). */
#include "server/model_policy.h"

const char *rlx_model_state_name(rlx_model_state s)
{
    switch (s) {
    case RLX_MODEL_UNLOADED: return "unloaded";
    case RLX_MODEL_QUEUED:
    case RLX_MODEL_LOADING: return "loading";
    case RLX_MODEL_READY: return "loaded";
    case RLX_MODEL_UNLOADING: return "unloading";
    case RLX_MODEL_FAILED: return "failed";
    }
    return "unknown";
}

static bool fits(const rlx_model_limits *lim, size_t count, uint64_t bytes)
{
    if (lim->max_loaded > 0 && count > (size_t)lim->max_loaded) return false;
    if (lim->max_bytes > 0 && bytes > lim->max_bytes) return false;
    return true;
}

static bool staying(rlx_model_state s)
{
    return s == RLX_MODEL_READY || s == RLX_MODEL_QUEUED || s == RLX_MODEL_LOADING;
}

bool rlx_model_plan_load(const rlx_model_view *models, size_t n, size_t target, const rlx_model_limits *lim,
                         size_t *victims, size_t *n_victims)
{
    size_t count = 1, nv = 0;
    uint64_t bytes = models[target].bytes;
    for (size_t i = 0; i < n; i++)
        if (i != target && staying(models[i].state)) {
            count++;
            bytes += models[i].bytes;
        }
    /* evict idle loaded models, the least recently used first, until the target fits; the
     * chosen ones are marked by their place in victims (n is small: a quadratic scan) */
    while (!fits(lim, count, bytes)) {
        size_t best = n;
        for (size_t i = 0; i < n; i++) {
            if (i == target || models[i].state != RLX_MODEL_READY || models[i].busy) continue;
            bool taken = false;
            for (size_t k = 0; k < nv && !taken; k++) taken = victims[k] == i;
            if (taken) continue;
            if (best == n || models[i].last_used < models[best].last_used) best = i;
        }
        if (best == n) {
            *n_victims = 0;
            return false;
        }
        victims[nv++] = best;
        count--;
        bytes -= models[best].bytes;
    }
    *n_victims = nv;
    return true;
}

bool rlx_model_can_start(const rlx_model_view *models, size_t n, size_t target, const rlx_model_limits *lim)
{
    size_t count = 1;
    uint64_t bytes = models[target].bytes;
    for (size_t i = 0; i < n; i++) {
        rlx_model_state s = models[i].state;
        if (i != target && (s == RLX_MODEL_READY || s == RLX_MODEL_LOADING || s == RLX_MODEL_UNLOADING)) {
            count++;
            bytes += models[i].bytes;
        }
    }
    return fits(lim, count, bytes);
}
