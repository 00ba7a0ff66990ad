/* cmd_devices.c - `rlxd devices`: the compute devices this build can use right now: the CPU
 * (with its kernel path), every Vulkan device and every CUDA device, or why there are none. */
#include "server/cli.h"
#include "backends/quant.h"
#ifdef RLX_HAVE_VULKAN
#include "backends/vulkan/vulkan.h"
#endif
#ifdef RLX_HAVE_CUDA
#include "backends/cuda/cuda.h"
#endif

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void list_vulkan(void)
{
#ifdef RLX_HAVE_VULKAN
    rlx_vk_device_info dev[16];
    int n = 0;
    rlx_error err = {0};
    if (rlx_vk_list_devices(dev, 16, &n, &err)) { printf("vulkan: none usable (%s)\n", err.msg); return; }
    if (n == 0) { printf("vulkan: none (the Vulkan driver reports no device)\n"); return; }
    for (int i = 0; i < n && i < 16; i++)
        printf("vulkan %d: %s (%s, Vulkan %u.%u, %llu MiB)%s  --backend vulkan --device %d\n", i, dev[i].name, dev[i].type,
               dev[i].api_version >> 22, (dev[i].api_version >> 12) & 0x3ff, (unsigned long long)(dev[i].heap_bytes >> 20),
               dev[i].usable ? "" : " [unusable: needs Vulkan 1.2 and a compute queue]", i);
#else
    printf("vulkan: not compiled in (build with -DRLX_VULKAN=ON)\n");
#endif
}

static void list_cuda(void)
{
#ifdef RLX_HAVE_CUDA
    rlx_cuda_device_info dev[16];
    int n = 0;
    rlx_error err = {0};
    if (rlx_cuda_list_devices(dev, 16, &n, &err)) { printf("cuda: %s\n", err.msg); return; }
    if (n == 0) { printf("cuda: no CUDA device\n"); return; }
    for (int i = 0; i < n && i < 16; i++)
        printf("cuda %d: %s (sm_%d%d, %llu MiB)  --backend cuda --device %d\n", i, dev[i].name, dev[i].major, dev[i].minor,
               (unsigned long long)(dev[i].mem_bytes >> 20), i);
#else
    printf("cuda: not compiled in (build with -DRLX_CUDA=ON)\n");
#endif
}

int rlx_cmd_devices(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: rlxd devices\n\nLists the compute devices usable now: the CPU, then Vulkan and CUDA\n"
                   "devices with the flags that select them (or RLXD_BACKEND=vulkan|cuda).\n");
            return 0;
        }
        fprintf(stderr, "rlxd %s: unknown option '%s' (see --help)\n", argv[0], argv[i]);
        return 2;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("cpu: %ld threads, kernels %s  --backend cpu\n", ncpu, rlx_cpu_path());
    list_vulkan();
    list_cuda();
    return 0;
}
