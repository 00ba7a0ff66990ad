/* vulkan.h - the Vulkan compute backend (built with -DRLX_VULKAN=ON, which defines
 * RLX_HAVE_VULKAN for consumers of rlx_backends). It runs the same plans as the CPU backend
 * with GLSL compute shaders compiled to SPIR-V at build time; weights are copied to device
 * memory once at prepare(), activations and the paged KV pool (f32, f16 or q8_0) live in
 * device memory, and each batch shape's commands are recorded once and resubmitted.
 * Environment: RLX_VK_FORCE_STAGING=1 keeps device memory unmapped (every upload and readback
 * through staging copies, as on a discrete GPU without resizable BAR); RLX_VK_BAR_BYTES,
 * RLX_VK_HEAP_BYTES, RLX_VK_MAX_RANGE and RLX_VK_KV_CHUNK shrink device limits for tests.
 * Tested on Mesa's lavapipe; any Vulkan 1.2 device with a compute queue should do. */
#ifndef RLX_VULKAN_H
#define RLX_VULKAN_H

#include "backends/backend.h"

typedef struct rlx_vk_device_info {
    char name[256];          /* driver-reported device name */
    char type[16];           /* "discrete", "integrated", "virtual", "cpu", "other" */
    uint32_t api_version;    /* VK_MAKE_API_VERSION packed */
    uint64_t heap_bytes;     /* size of the largest device-local heap */
    bool usable;             /* has a compute queue and Vulkan >= 1.2 */
} rlx_vk_device_info;

/* Lists the physical devices (at most cap, into out; may be NULL with cap 0); *n gets the
 * total. RLX_EUNSUPPORTED with a message when no Vulkan driver/loader works. */
int rlx_vk_list_devices(rlx_vk_device_info *out, int cap, int *n, rlx_error *err);

/* Creates the backend on physical device `device` (index as listed; < 0 means 0), with its
 * pipeline cache kept in cache_dir (vk_pcache.c; NULL or "": none): read at creation when the
 * file is this device's and driver's and intact, written back after the first pipelines and at
 * destruction when pipelines were created since. A bad file is ignored (rlx_vk_stats.
 * pipeline_cache says why) and replaced. Fails with RLX_EUNSUPPORTED when there is no Vulkan
 * driver or no such usable device. */
int rlx_backend_vulkan_create(rlx_backend **out, int device, const char *cache_dir, rlx_error *err);

/* The pipeline cache file found at creation. */
typedef enum rlx_vk_pcache_state {
    RLX_VK_PCACHE_OFF,     /* no cache folder */
    RLX_VK_PCACHE_NEW,     /* no file yet */
    RLX_VK_PCACHE_LOADED,  /* read and given to the driver */
    RLX_VK_PCACHE_CORRUPT, /* cut, altered, or refused by the driver: ignored, replaced */
    RLX_VK_PCACHE_STALE,   /* another device's or driver's: ignored, replaced */
} rlx_vk_pcache_state;
const char *rlx_vk_pcache_state_name(rlx_vk_pcache_state s);

/* What a Vulkan backend holds and has done, for tests and diagnostics. */
typedef struct rlx_vk_stats {
    uint64_t recordings;          /* command buffers recorded: one per new batch shape */
    uint64_t device_bytes;        /* device memory allocated */
    uint64_t mapped_device_bytes; /* of which mapped into the host (no staging copies) */
    int kv_chunks;                /* buffers per layer the K (and V) pool is split into */
    rlx_vk_pcache_state pipeline_cache;
    uint64_t pipelines_created;   /* pipelines this backend created (each through the cache) */
    uint64_t pipeline_cache_loaded_bytes; /* the driver data read at creation (0: none) */
    uint64_t pipeline_cache_saved_bytes;  /* the driver data last written (0: not written) */
} rlx_vk_stats;

/* RLX_EINVAL when `be` is not a Vulkan backend. */
int rlx_vk_get_stats(const rlx_backend *be, rlx_vk_stats *out);

#endif
