/* vk_device.c - the Vulkan device layer: instance and physical-device selection, one compute
 * queue, buffers with their own memory (device-local; mapped where that memory is host
 * visible and plentiful, else reached through staging copies), and compute pipelines from
 * embedded SPIR-V. */
#include "backends/vulkan/vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGING_BYTES ((VkDeviceSize)16 << 20)

/* Mesa's lavapipe keeps one small allocation made while it enumerates devices (from JIT code, so
 * no suppression file can name it). Sanitizer builds hide allocations of that window from
 * LeakSanitizer so the tests' leak checks stay meaningful for our own memory. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define DRIVER_INIT_BEGIN() __lsan_disable()
#define DRIVER_INIT_END() __lsan_enable()
#else
#define DRIVER_INIT_BEGIN() ((void)0)
#define DRIVER_INIT_END() ((void)0)
#endif

int rlx__vk_check(VkResult r, const char *what, rlx_error *err)
{
    if (r == VK_SUCCESS) return 0;
    int code = r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? RLX_ENOMEM
             : r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED ? RLX_EUNSUPPORTED : RLX_EIO;
    return rlx_errorf(err, code, "Vulkan: %s failed (VkResult %d)%s", what, (int)r,
                      code == RLX_ENOMEM ? ": not enough device memory for this model and batch size" : "");
}

static int create_instance(VkInstance *inst, rlx_error *err)
{
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "rlxd",
                             .pEngineName = "rlxd", .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkResult r = vkCreateInstance(&ci, NULL, inst);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "no Vulkan driver is installed (install mesa-vulkan-drivers for "
                          "lavapipe, or your GPU vendor's driver)");
    return rlx__vk_check(r, "vkCreateInstance", err);
}

static int compute_family(VkPhysicalDevice pd, uint32_t *fam)
{
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties qf[32];
    if (n > 32) n = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, qf);
    int best = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
        /* a compute-only family is usually the dedicated async-compute engine */
        if (best < 0 || !(qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = (int)i;
    }
    if (best < 0) return -1;
    *fam = (uint32_t)best;
    return 0;
}

static bool usable(VkPhysicalDevice pd)
{
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pd, &p);
    uint32_t fam;
    return p.apiVersion >= VK_API_VERSION_1_2 && compute_family(pd, &fam) == 0;
}

static const char *type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

int rlx_vk_list_devices(rlx_vk_device_info *out, int cap, int *n, rlx_error *err)
{
    *n = 0;
    VkInstance inst;
    int rc = create_instance(&inst, err);
    if (rc) return rc;
    uint32_t count = 0;
    DRIVER_INIT_BEGIN(); /* lavapipe starts its LLVM JIT here */
    VkResult r = vkEnumeratePhysicalDevices(inst, &count, NULL);
    DRIVER_INIT_END();
    VkPhysicalDevice pds[16];
    if (count > 16) count = 16;
    if (r == VK_SUCCESS || r == VK_INCOMPLETE) r = vkEnumeratePhysicalDevices(inst, &count, pds);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        vkDestroyInstance(inst, NULL);
        return rlx__vk_check(r, "vkEnumeratePhysicalDevices", err);
    }
    for (uint32_t i = 0; i < count && (int)i < cap; i++) {
        VkPhysicalDeviceProperties p;
        VkPhysicalDeviceMemoryProperties m;
        vkGetPhysicalDeviceProperties(pds[i], &p);
        vkGetPhysicalDeviceMemoryProperties(pds[i], &m);
        rlx_vk_device_info *o = &out[i];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "%s", p.deviceName);
        snprintf(o->type, sizeof o->type, "%s", type_name(p.deviceType));
        o->api_version = p.apiVersion;
        for (uint32_t h = 0; h < m.memoryHeapCount; h++)
            if ((m.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && m.memoryHeaps[h].size > o->heap_bytes)
                o->heap_bytes = m.memoryHeaps[h].size;
        o->usable = usable(pds[i]);
    }
    *n = (int)count;
    vkDestroyInstance(inst, NULL);
    return 0;
}

static int create_layouts(vk_dev *d, rlx_error *err)
{
    VkDescriptorSetLayoutBinding b[VK_N_BINDINGS];
    for (uint32_t i = 0; i < VK_N_BINDINGS; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = VK_N_BINDINGS, .pBindings = b};
    int rc = rlx__vk_check(vkCreateDescriptorSetLayout(d->dev, &dci, NULL, &d->dsl), "vkCreateDescriptorSetLayout", err);
    if (rc) return rc;
    VkPipelineLayoutCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1, .pSetLayouts = &d->dsl};
    return rlx__vk_check(vkCreatePipelineLayout(d->dev, &pci, NULL, &d->layout), "vkCreatePipelineLayout", err);
}

int rlx__vk_open(vk_dev *d, int index, rlx_error *err)
{
    memset(d, 0, sizeof *d);
    int rc = create_instance(&d->inst, err);
    if (rc) return rc;
    uint32_t count = 0;
    VkPhysicalDevice pds[16];
    DRIVER_INIT_BEGIN();
    VkResult r = vkEnumeratePhysicalDevices(d->inst, &count, NULL);
    DRIVER_INIT_END();
    if (count > 16) count = 16;
    if (r == VK_SUCCESS || r == VK_INCOMPLETE) r = vkEnumeratePhysicalDevices(d->inst, &count, pds);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return rlx__vk_check(r, "vkEnumeratePhysicalDevices", err);
    if (index < 0) index = 0;
    if (count == 0)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "the Vulkan driver reports no device (install mesa-vulkan-drivers "
                          "for lavapipe, or check the GPU driver)");
    if ((uint32_t)index >= count)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan device %d does not exist (%u found; see `rlxd devices`)", index, count);
    d->pd = pds[index];
    vkGetPhysicalDeviceProperties(d->pd, &d->props);
    vkGetPhysicalDeviceMemoryProperties(d->pd, &d->mem);
    if (!usable(d->pd))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan device %d (%s) lacks Vulkan 1.2 or a compute queue", index, d->props.deviceName);
    compute_family(d->pd, &d->qfam);
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
    vkGetPhysicalDeviceProperties2(d->pd, &p2);
    d->max_range = d->props.limits.maxStorageBufferRange;
    /* test hook: a smaller range makes small tensors exercise the split bindings */
    const char *mr = getenv("RLX_VK_MAX_RANGE");
    if (mr && strtoull(mr, NULL, 10) >= 1024 && strtoull(mr, NULL, 10) < d->max_range) d->max_range = strtoull(mr, NULL, 10);
    d->align = d->props.limits.minStorageBufferOffsetAlignment;
    if (d->align < 16) d->align = 16;
    d->max_alloc = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : ((VkDeviceSize)1 << 30);
    if (d->props.limits.maxPerStageDescriptorStorageBuffers < VK_N_BINDINGS)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan device %d (%s) binds %u storage buffers per shader; rlxd needs %d",
                          index, d->props.deviceName, d->props.limits.maxPerStageDescriptorStorageBuffers, VK_N_BINDINGS);
    for (uint32_t h = 0; h < d->mem.memoryHeapCount; h++)
        if ((d->mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && d->mem.memoryHeaps[h].size > d->heap_bytes)
            d->heap_bytes = d->mem.memoryHeaps[h].size;
    /* test hooks: a smaller device, a BAR window, a device without host-visible VRAM */
    const char *hb = getenv("RLX_VK_HEAP_BYTES"), *bar = getenv("RLX_VK_BAR_BYTES"), *fs = getenv("RLX_VK_FORCE_STAGING");
    if (hb && strtoull(hb, NULL, 10) > 0 && strtoull(hb, NULL, 10) < d->heap_bytes) d->heap_bytes = strtoull(hb, NULL, 10);
    if (bar) d->bar_limit = strtoull(bar, NULL, 10);
    d->force_staging = fs && !strcmp(fs, "1");
    /* 64-bit floats reproduce the CPU backend's double sums (norms, softmax, F16/BF16 dot
     * tails) and glibc's expf/tanhf, hence its bits */
    VkPhysicalDeviceFeatures have;
    vkGetPhysicalDeviceFeatures(d->pd, &have);
    const char *nf = getenv("RLX_VK_NO_F64");
    d->f64 = have.shaderFloat64 && !(nf && !strcmp(nf, "1"));
    const char *sf = getenv("RLX_VK_SOFT_FMA");
    d->soft_fma = d->f64 && (sf && (!strcmp(sf, "0") || !strcmp(sf, "1")) ? sf[0] == '1' : d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU);

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = d->qfam,
                                   .queueCount = 1, .pQueuePriorities = &prio};
    VkPhysicalDeviceFeatures feat = {.shaderFloat64 = d->f64};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci,
                              .pEnabledFeatures = &feat};
    if ((rc = rlx__vk_check(vkCreateDevice(d->pd, &dci, NULL, &d->dev), "vkCreateDevice", err))) return rc;
    vkGetDeviceQueue(d->dev, d->qfam, 0, &d->queue);
    VkCommandPoolCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, .queueFamilyIndex = d->qfam};
    if ((rc = rlx__vk_check(vkCreateCommandPool(d->dev, &cpi, NULL, &d->cpool), "vkCreateCommandPool", err))) return rc;
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = d->cpool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    if ((rc = rlx__vk_check(vkAllocateCommandBuffers(d->dev, &cai, &d->cmd), "vkAllocateCommandBuffers", err))) return rc;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((rc = rlx__vk_check(vkCreateFence(d->dev, &fci, NULL, &d->fence), "vkCreateFence", err))) return rc;
    return create_layouts(d, err);
}

void rlx__vk_close(vk_dev *d)
{
    if (d->dev) {
        vkDeviceWaitIdle(d->dev);
        rlx__vk_pcache_close(d);
        if (d->layout) vkDestroyPipelineLayout(d->dev, d->layout, NULL);
        if (d->dsl) vkDestroyDescriptorSetLayout(d->dev, d->dsl, NULL);
        if (d->fence) vkDestroyFence(d->dev, d->fence, NULL);
        if (d->cpool) vkDestroyCommandPool(d->dev, d->cpool, NULL);
        vkDestroyDevice(d->dev, NULL);
    }
    if (d->inst) vkDestroyInstance(d->inst, NULL);
    memset(d, 0, sizeof *d);
}

/* First memory type allowed by `bits` that has every flag of `want` and none of `avoid`. */
static int memory_type(const vk_dev *d, uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid)
{
    for (uint32_t i = 0; i < d->mem.memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = d->mem.memoryTypes[i].propertyFlags;
        if ((bits & (1u << i)) && (f & want) == want && !(f & avoid)) return (int)i;
    }
    return -1;
}

static const VkMemoryPropertyFlags HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
static const VkMemoryPropertyFlags DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;

/* Memory types to try for a buffer, best first; a mapped choice is marked in map_ok. Device
 * buffers: device-local and host-visible only where that memory is the device's main heap
 * (unified memory, resizable BAR), else (and when allocating there fails) device-local alone. */
static int memory_choices(const vk_dev *d, uint32_t bits, bool host, VkDeviceSize size, int mt[3], bool map_ok[3])
{
    int n = 0;
    if (host) {
        mt[n] = memory_type(d, bits, HV, 0);
        map_ok[n++] = true;
        return mt[0] >= 0 ? 1 : 0;
    }
    int bar = d->force_staging ? -1 : memory_type(d, bits, DL | HV, 0);
    if (bar >= 0 && d->mem.memoryHeaps[d->mem.memoryTypes[bar].heapIndex].size < d->heap_bytes) bar = -1;
    if (bar >= 0 && d->bar_limit && d->bar_bytes + size > d->bar_limit) bar = -1;
    if (bar >= 0) { mt[n] = bar; map_ok[n++] = true; }
    int vram = memory_type(d, bits, DL, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
    if (vram < 0) vram = memory_type(d, bits, DL, 0);
    if (vram >= 0) { mt[n] = vram; map_ok[n++] = false; }
    int any = memory_type(d, bits, 0, 0);
    if (any >= 0 && any != vram) { mt[n] = any; map_ok[n++] = false; }
    return n;
}

int rlx__vk_buffer(vk_dev *d, vk_buffer *b, VkDeviceSize size, bool host, rlx_error *err)
{
    memset(b, 0, sizeof *b);
    if (size == 0) size = 16;
    size = (size + 15) & ~(VkDeviceSize)15;
    if (size > d->max_alloc)
        return rlx_errorf(err, RLX_ENOMEM, "Vulkan: a buffer of %llu MiB exceeds the device's largest allocation (%llu MiB)",
                          (unsigned long long)(size >> 20), (unsigned long long)(d->max_alloc >> 20));
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    int rc = rlx__vk_check(vkCreateBuffer(d->dev, &bci, NULL, &b->buf), "vkCreateBuffer", err);
    if (rc) return rc;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->dev, b->buf, &req);
    int mt[3];
    bool map_ok[3];
    int n = memory_choices(d, req.memoryTypeBits, host, req.size, mt, map_ok), k = 0;
    if (n == 0) { rlx__vk_buffer_free(d, b); return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: no memory type fits a buffer"); }
    VkResult r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
    for (; k < n; k++) {
        VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                                    .memoryTypeIndex = (uint32_t)mt[k]};
        r = vkAllocateMemory(d->dev, &mai, NULL, &b->mem);
        if (r == VK_SUCCESS) break;
        /* a full BAR window (or heap) falls back to the next choice */
        if (r != VK_ERROR_OUT_OF_DEVICE_MEMORY && r != VK_ERROR_OUT_OF_HOST_MEMORY) break;
    }
    if ((rc = rlx__vk_check(r, "vkAllocateMemory", err))) {
        rlx__vk_buffer_free(d, b);
        return rc;
    }
    if ((rc = rlx__vk_check(vkBindBufferMemory(d->dev, b->buf, b->mem, 0), "vkBindBufferMemory", err))) {
        rlx__vk_buffer_free(d, b);
        return rc;
    }
    if (map_ok[k] && (rc = rlx__vk_check(vkMapMemory(d->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map), "vkMapMemory", err))) {
        rlx__vk_buffer_free(d, b);
        return rc;
    }
    b->size = size;
    b->device = !host;
    b->bar = !host && b->map;
    if (b->device) d->device_bytes += size;
    if (b->bar) d->bar_bytes += size;
    return 0;
}

void rlx__vk_buffer_free(vk_dev *d, vk_buffer *b)
{
    if (!d->dev) return;
    if (b->device) d->device_bytes -= b->size;
    if (b->bar) d->bar_bytes -= b->size;
    if (b->buf) vkDestroyBuffer(d->dev, b->buf, NULL);
    if (b->mem) vkFreeMemory(d->dev, b->mem, NULL);
    memset(b, 0, sizeof *b);
}

int rlx__vk_begin(vk_dev *d, rlx_error *err)
{
    int rc = rlx__vk_check(vkResetCommandBuffer(d->cmd, 0), "vkResetCommandBuffer", err);
    if (rc) return rc;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    return rlx__vk_check(vkBeginCommandBuffer(d->cmd, &bi), "vkBeginCommandBuffer", err);
}

int rlx__vk_submit_cmd(vk_dev *d, VkCommandBuffer cmd, rlx_error *err)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    int rc = rlx__vk_check(vkResetFences(d->dev, 1, &d->fence), "vkResetFences", err);
    if (rc) return rc;
    if ((rc = rlx__vk_check(vkQueueSubmit(d->queue, 1, &si, d->fence), "vkQueueSubmit", err))) return rc;
    return rlx__vk_check(vkWaitForFences(d->dev, 1, &d->fence, VK_TRUE, UINT64_MAX), "vkWaitForFences", err);
}

int rlx__vk_submit(vk_dev *d, rlx_error *err)
{
    rlx__vk_barrier_all(d->cmd); /* results visible to the host and to later submissions */
    int rc = rlx__vk_check(vkEndCommandBuffer(d->cmd), "vkEndCommandBuffer", err);
    return rc ? rc : rlx__vk_submit_cmd(d, d->cmd, err);
}

void rlx__vk_barrier_all(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                                           VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT};
    VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT;
    vkCmdPipelineBarrier(cmd, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* One staged copy in either direction, in STAGING_BYTES pieces. */
static int staged(vk_dev *d, vk_buffer *b, VkDeviceSize off, void *host, size_t n, bool up, rlx_error *err)
{
    vk_buffer st;
    VkDeviceSize cap = n < STAGING_BYTES ? n : STAGING_BYTES;
    int rc = rlx__vk_buffer(d, &st, cap, true, err);
    if (rc) return rc;
    for (size_t done = 0; done < n && !rc;) {
        size_t piece = n - done < cap ? n - done : (size_t)cap;
        if (up) memcpy(st.map, (uint8_t *)host + done, piece);
        if ((rc = rlx__vk_begin(d, err))) break;
        rlx__vk_barrier_all(d->cmd); /* after the shaders of earlier submissions */
        VkBufferCopy c = {.srcOffset = up ? 0 : off + done, .dstOffset = up ? off + done : 0, .size = piece};
        vkCmdCopyBuffer(d->cmd, up ? st.buf : b->buf, up ? b->buf : st.buf, 1, &c);
        if ((rc = rlx__vk_submit(d, err))) break;
        if (!up) memcpy((uint8_t *)host + done, st.map, piece);
        done += piece;
    }
    rlx__vk_buffer_free(d, &st);
    return rc;
}

int rlx__vk_write(vk_dev *d, vk_buffer *b, VkDeviceSize off, const void *src, size_t n, rlx_error *err)
{
    if (off + n > b->size) return rlx_errorf(err, RLX_ERANGE, "Vulkan: write past the end of a buffer");
    if (b->map) { memcpy((uint8_t *)b->map + off, src, n); return 0; }
    return staged(d, b, off, (void *)(uintptr_t)src, n, true, err);
}

int rlx__vk_read(vk_dev *d, vk_buffer *b, VkDeviceSize off, void *dst, size_t n, rlx_error *err)
{
    if (off + n > b->size) return rlx_errorf(err, RLX_ERANGE, "Vulkan: read past the end of a buffer");
    if (b->map) { memcpy(dst, (const uint8_t *)b->map + off, n); return 0; }
    return staged(d, b, off, dst, n, false, err);
}

int rlx__vk_pipeline(vk_dev *d, const char *name, const uint32_t *spec, uint32_t n_spec, VkPipeline *out, rlx_error *err)
{
    const rlx__vk_shader *s = NULL;
    char want[64];
    snprintf(want, sizeof want, "%s%s", name, d->f64 ? "" : "_f32");
    for (int i = 0; i < rlx__vk_n_shaders; i++)
        if (!strcmp(rlx__vk_shaders[i].name, want)) s = &rlx__vk_shaders[i];
    if (!s) return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: shader '%s' is not built into this binary", want);
    VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = s->size, .pCode = s->code};
    VkShaderModule mod;
    int rc = rlx__vk_check(vkCreateShaderModule(d->dev, &mci, NULL, &mod), "vkCreateShaderModule", err);
    if (rc) return rc;
    VkSpecializationMapEntry me[5];
    uint32_t data[5], n = n_spec < 4 ? n_spec : 4;
    for (uint32_t i = 0; i < n; i++) {
        me[i] = (VkSpecializationMapEntry){i, i * 4, 4};
        data[i] = spec[i];
    }
    me[n] = (VkSpecializationMapEntry){7, n * 4, 4};
    data[n] = d->soft_fma;
    VkSpecializationInfo si = {n + 1, me, (n + 1) * 4, data};
    VkComputePipelineCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = mod, .pName = "main", .pSpecializationInfo = &si},
        .layout = d->layout};
    rc = rlx__vk_check(vkCreateComputePipelines(d->dev, d->pcache, 1, &pci, NULL, out), "vkCreateComputePipelines", err);
    if (!rc) d->pc_created++;
    vkDestroyShaderModule(d->dev, mod, NULL);
    return rc;
}
