/* vk_pcache.c - the Vulkan backend's pipeline cache on disk (vk_internal.h): what the driver
 * compiled for our shaders, kept under the daemon's cache folder and handed back to
 * vkCreateComputePipelines at the next load, so that a driver that keeps pipelines in a
 * VkPipelineCache (RADV, NVIDIA, ...) skips their compilation. One file per device and driver:
 * vulkan-pipelines-VVVV-DDDD-<driver version>-<pipelineCacheUUID>.bin. Its content is ours
 * around the driver's: a magic, the data's length and an FNV-1a checksum of it, then the data,
 * whose Vulkan header (VkPipelineCacheHeaderVersionOne) must name this device and its cache
 * UUID. A file that fails any check (cut, bit flips, another device or driver) is ignored and
 * replaced at the next save: the driver never sees it. Writes go to a temporary file of their
 * own (two backends of one daemon, two models on one device, may save the same file at once)
 * renamed over the old one, so a reader never sees half a file. Called by the backend's thread. */
#include "backends/vulkan/vk_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PC_MAGIC "RLXVKPC1"
#define PC_HEAD 24 /* magic, length, checksum */
#define PC_MAX (256u << 20) /* a larger file is not ours */

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void cache_path(const vk_dev *d, const char *dir, char *buf, size_t cap)
{
    char uuid[2 * VK_UUID_SIZE + 1];
    for (unsigned i = 0; i < VK_UUID_SIZE; i++) snprintf(uuid + 2 * i, 3, "%02x", d->props.pipelineCacheUUID[i]);
    snprintf(buf, cap, "%s/vulkan-pipelines-%04x-%04x-%08x-%s.bin", dir, d->props.vendorID, d->props.deviceID,
             d->props.driverVersion, uuid);
}

/* Does data (n bytes, checksummed already) start with a Vulkan cache header for this device? */
static bool header_ours(const vk_dev *d, const uint8_t *p, size_t n)
{
    uint32_t len, ver, vendor, device;
    if (n < 16 + VK_UUID_SIZE) return false;
    memcpy(&len, p, 4);
    memcpy(&ver, p + 4, 4);
    memcpy(&vendor, p + 8, 4);
    memcpy(&device, p + 12, 4);
    return len >= 16 + VK_UUID_SIZE && len <= n && ver == VK_PIPELINE_CACHE_HEADER_VERSION_ONE &&
           vendor == d->props.vendorID && device == d->props.deviceID &&
           !memcmp(p + 16, d->props.pipelineCacheUUID, VK_UUID_SIZE);
}

/* The file's driver data into *data (malloc'd, *n bytes), or the reason it cannot be used. */
static rlx_vk_pcache_state read_file(const vk_dev *d, const char *path, uint8_t **data, size_t *n)
{
    *data = NULL;
    *n = 0;
    /* not blocking in open, and only a regular file: a FIFO at the path must not hold the load */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return RLX_VK_PCACHE_NEW;
    struct stat fst;
    FILE *f = !fstat(fd, &fst) && S_ISREG(fst.st_mode) ? fdopen(fd, "rb") : NULL;
    if (!f) {
        close(fd);
        return RLX_VK_PCACHE_CORRUPT;
    }
    uint8_t head[PC_HEAD];
    uint64_t len = 0, sum = 0;
    rlx_vk_pcache_state st = RLX_VK_PCACHE_CORRUPT;
    if (fread(head, 1, PC_HEAD, f) == PC_HEAD && !memcmp(head, PC_MAGIC, 8)) {
        memcpy(&len, head + 8, 8);
        memcpy(&sum, head + 16, 8);
        uint8_t *p = len && len <= PC_MAX ? malloc((size_t)len + 1) : NULL;
        size_t got = p ? fread(p, 1, (size_t)len + 1, f) : 0; /* exactly len bytes must follow */
        if (p && got == len && fnv1a(p, (size_t)len) == sum) {
            if (header_ours(d, p, (size_t)len)) {
                *data = p;
                *n = (size_t)len;
                p = NULL;
                st = RLX_VK_PCACHE_LOADED;
            } else {
                st = RLX_VK_PCACHE_STALE;
            }
        }
        free(p);
    }
    fclose(f);
    return st;
}

void rlx__vk_pcache_open(vk_dev *d, const char *dir)
{
    d->pc_state = RLX_VK_PCACHE_OFF;
    d->pc_loaded = 0;
    uint8_t *data = NULL;
    size_t n = 0;
    if (dir && dir[0]) {
        if (!(d->pc_path = malloc(PATH_MAX))) return;
        cache_path(d, dir, d->pc_path, PATH_MAX);
        d->pc_state = read_file(d, d->pc_path, &data, &n);
    }
    VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, .initialDataSize = n,
                                    .pInitialData = data};
    /* with no folder the cache still serves the load's own pipelines (the attention variants
     * share shaders); a driver that refuses the data gets an empty cache instead */
    if (vkCreatePipelineCache(d->dev, &ci, NULL, &d->pcache) != VK_SUCCESS) {
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        if (n) d->pc_state = RLX_VK_PCACHE_CORRUPT;
        n = 0;
        if (vkCreatePipelineCache(d->dev, &ci, NULL, &d->pcache) != VK_SUCCESS) d->pcache = VK_NULL_HANDLE;
    }
    d->pc_loaded = d->pc_file_n = n;
    d->pc_file_sum = n ? fnv1a(data, n) : 0;
    free(data);
}

int rlx__vk_pcache_save(vk_dev *d, rlx_error *err)
{
    if (!d->pc_path || !d->pcache || d->pc_saved == d->pc_created) return 0;
    size_t n = 0;
    if (vkGetPipelineCacheData(d->dev, d->pcache, &n, NULL) != VK_SUCCESS || !n || n > PC_MAX) return 0;
    uint8_t *buf = malloc(PC_HEAD + n);
    if (!buf) return rlx_errorf(err, RLX_ENOMEM, "out of memory saving the Vulkan pipeline cache");
    VkResult vr = vkGetPipelineCacheData(d->dev, d->pcache, &n, buf + PC_HEAD);
    if (vr != VK_SUCCESS) { /* VK_INCOMPLETE: it grew between the calls; next time */
        free(buf);
        return 0;
    }
    uint64_t len = n, sum = fnv1a(buf + PC_HEAD, n);
    if (n == d->pc_file_n && sum == d->pc_file_sum) { /* what the file holds already */
        free(buf);
        d->pc_saved = d->pc_created;
        return 0;
    }
    memcpy(buf, PC_MAGIC, 8);
    memcpy(buf + 8, &len, 8);
    memcpy(buf + 16, &sum, 8);
    char tmp[PATH_MAX + 32];
    (void)rlx_mkdirs_for(d->pc_path, 0755); /* a failure shows at the temporary file below */
    FILE *f = rlx_tmpfile_beside(d->pc_path, 0644, tmp, sizeof tmp);
    bool ok = f && fwrite(buf, 1, PC_HEAD + n, f) == PC_HEAD + n;
    if (f && fclose(f)) ok = false;
    free(buf);
    if (!ok || rename(tmp, d->pc_path)) {
        int e = errno;
        if (tmp[0]) unlink(tmp);
        return rlx_errorf(err, RLX_EIO, "cannot write the Vulkan pipeline cache %s: %s", d->pc_path, strerror(e));
    }
    d->pc_saved = d->pc_created;
    d->pc_bytes = n;
    d->pc_file_n = n, d->pc_file_sum = sum;
    return 0;
}

void rlx__vk_pcache_close(vk_dev *d)
{
    if (d->pcache) vkDestroyPipelineCache(d->dev, d->pcache, NULL);
    d->pcache = VK_NULL_HANDLE;
    free(d->pc_path);
    d->pc_path = NULL;
}
