/* backend.c - backend selection by name. */
#include "backends/backend.h"

#include <string.h>

int rlx_backend_create(rlx_backend **out, const rlx_backend_config *cfg, rlx_error *err)
{
    const char *name = cfg && cfg->name ? cfg->name : "cpu";
    if (!strcmp(name, "cpu")) return rlx_backend_cpu_create(out, cfg ? cfg->n_threads : 0, err);
    return rlx_errorf(err, RLX_EUNSUPPORTED, "backend '%s' is not compiled into this build (available: cpu)", name);
}
