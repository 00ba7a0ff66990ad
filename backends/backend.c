/* backend.c - backend selection by name: the configured name, else the RLXD_BACKEND
 * environment variable (with RLXD_DEVICE for the GPU index; so every command and the daemon
 * can be pointed at a GPU without a flag), else "cpu". GPU backends exist only when compiled in (RLX_HAVE_VULKAN/RLX_HAVE_CUDA). */
#include "backends/backend.h"
#ifdef RLX_HAVE_VULKAN
#include "backends/vulkan/vulkan.h"
#endif
#ifdef RLX_HAVE_CUDA
#include "backends/cuda/cuda.h"
#endif

#include <stdlib.h>
#include <string.h>

#define AVAILABLE "cpu" VK_NAME CUDA_NAME
#ifdef RLX_HAVE_VULKAN
#define VK_NAME ", vulkan"
#else
#define VK_NAME ""
#endif
#ifdef RLX_HAVE_CUDA
#define CUDA_NAME ", cuda"
#else
#define CUDA_NAME ""
#endif

int rlx_backend_create(rlx_backend **out, const rlx_backend_config *cfg, rlx_error *err)
{
    const char *name = cfg && cfg->name && *cfg->name ? cfg->name : getenv("RLXD_BACKEND");
    int device = cfg ? cfg->device : 0;
    /* a backend named by the environment takes its device index from there too */
    if (name && (!cfg || !cfg->name || !*cfg->name) && getenv("RLXD_DEVICE")) device = atoi(getenv("RLXD_DEVICE"));
    if (!name || !*name) name = "cpu";
    if (!strcmp(name, "cpu")) return rlx_backend_cpu_create(out, cfg ? cfg->n_threads : 0, err);
#ifdef RLX_HAVE_VULKAN
    if (!strcmp(name, "vulkan")) return rlx_backend_vulkan_create(out, device, err);
#endif
#ifdef RLX_HAVE_CUDA
    if (!strcmp(name, "cuda")) return rlx_backend_cuda_create(out, device, err);
#endif
    (void)device;
    if (!strcmp(name, "vulkan") || !strcmp(name, "cuda"))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "backend '%s' is not compiled into this build (available: %s); "
                          "rebuild with -DRLX_%s=ON", name, AVAILABLE, !strcmp(name, "cuda") ? "CUDA" : "VULKAN");
    return rlx_errorf(err, RLX_EUNSUPPORTED, "unknown backend '%s' (available: %s)", name, AVAILABLE);
}
