/* cuda.h - the CUDA backend (built with -DRLX_CUDA=ON, which defines RLX_HAVE_CUDA for
 * consumers of rlx_backends). Same plans as the CPU backend: kernels in kernels.cu (one per
 * step kind, weights dequantized on the fly, activations rounded/quantized like the CPU's),
 * cuBLAS SGEMM over a dequantized weight copy for large batches, one stream, the activation
 * arena and the paged KV pool (f32, f16 or q8_0) in device memory, decode steps replayed as
 * CUDA graphs captured per batch shape. Weights are copied once at prepare(). */
#ifndef RLX_CUDA_H
#define RLX_CUDA_H

#include "backends/backend.h"

typedef struct rlx_cuda_device_info {
    char name[256];
    int major, minor;        /* compute capability */
    uint64_t mem_bytes;      /* total global memory */
} rlx_cuda_device_info;

/* Lists CUDA devices (at most cap into out); *n gets the total. RLX_EUNSUPPORTED with a message
 * when there is no driver or no device (cudaErrorInsufficientDriver / cudaErrorNoDevice). */
int rlx_cuda_list_devices(rlx_cuda_device_info *out, int cap, int *n, rlx_error *err);

/* Creates the backend on device `device` (< 0 means 0); RLX_EUNSUPPORTED without a device.
 * Environment: RLX_CUDA_GRAPHS=0 runs decode steps without CUDA graphs; RLX_CUDA_SYNC=1 waits
 * after every step so a failing kernel is reported with its step (slow; implies no graphs). */
int rlx_backend_cuda_create(rlx_backend **out, int device, rlx_error *err);

/* What a CUDA backend has done, for tests and diagnostics. */
typedef struct rlx_cuda_stats {
    uint64_t graph_captures;  /* CUDA graphs captured: one per new decode batch shape */
    bool graphs;              /* decode steps run as CUDA graphs */
} rlx_cuda_stats;

/* RLX_EINVAL when `be` is not a CUDA backend. */
int rlx_cuda_get_stats(const rlx_backend *be, rlx_cuda_stats *out);

#endif
