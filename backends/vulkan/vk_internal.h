/* vk_internal.h - private seams of backends/vulkan/: the device layer (vk_device.c: instance,
 * device, queue, buffers and their memory, staging copies, pipelines) and the embedded SPIR-V
 * table generated at build time. Nothing here is public. */
#ifndef RLX_VK_INTERNAL_H
#define RLX_VK_INTERNAL_H

#include "backends/vulkan/vulkan.h"

#include <vulkan/vulkan.h>

typedef struct rlx__vk_shader { const char *name; const uint32_t *code; size_t size; } rlx__vk_shader;
extern const rlx__vk_shader rlx__vk_shaders[];
extern const int rlx__vk_n_shaders;

/* Storage-buffer bindings shared by every pipeline (see shaders/common.glsl). */
enum { VK_B_PARAMS = 0, VK_B_OUT = 1, VK_B_IN0 = 2, VK_B_IN1 = 3, VK_B_IN2 = 4, VK_B_OP0 = 5,
       VK_B_BATCH = 9, VK_B_KC = 10, VK_B_VC = 11, VK_N_BINDINGS = 12 };
#define VK_PARAM_WORDS 96

/* A buffer and the memory it owns. `map` is non-NULL when the memory is host visible
 * (always for host buffers; on unified-memory devices such as lavapipe also for device ones). */
typedef struct vk_buffer {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size;
    void *map;
} vk_buffer;

typedef struct vk_dev {
    VkInstance inst;
    VkPhysicalDevice pd;
    VkDevice dev;
    VkQueue queue;
    uint32_t qfam;
    VkCommandPool cpool;
    VkCommandBuffer cmd;     /* the one command buffer runs are recorded into */
    VkFence fence;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem;
    VkDeviceSize max_range;  /* maxStorageBufferRange */
    VkDeviceSize align;      /* minStorageBufferOffsetAlignment */
    VkDeviceSize max_alloc;  /* largest single allocation */
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
} vk_dev;

int rlx__vk_open(vk_dev *d, int index, rlx_error *err);
void rlx__vk_close(vk_dev *d);
/* host: host-visible coherent memory (params, batch, staging); else device-local preferred. */
int rlx__vk_buffer(vk_dev *d, vk_buffer *b, VkDeviceSize size, bool host, rlx_error *err);
void rlx__vk_buffer_free(vk_dev *d, vk_buffer *b);
/* Host <-> buffer copies; they go through a staging buffer when b is not mapped. They use
 * (and wait for) the device's command buffer, so never call them while a run is recorded. */
int rlx__vk_write(vk_dev *d, vk_buffer *b, VkDeviceSize off, const void *src, size_t n, rlx_error *err);
int rlx__vk_read(vk_dev *d, vk_buffer *b, VkDeviceSize off, void *dst, size_t n, rlx_error *err);
/* Command buffer bracket: begin() resets and begins d->cmd; submit() ends, submits and waits. */
int rlx__vk_begin(vk_dev *d, rlx_error *err);
int rlx__vk_submit(vk_dev *d, rlx_error *err);
/* Compute pipeline of the embedded shader `name`. */
int rlx__vk_pipeline(vk_dev *d, const char *name, VkPipeline *out, rlx_error *err);
int rlx__vk_check(VkResult r, const char *what, rlx_error *err);


/* ---- the backend (vk_backend.c: lifetime, memory, run; vk_record.c: one step -> dispatches) */

enum { PL_EW, PL_RMS, PL_GET_ROWS, PL_ACTQ, PL_MATMUL, PL_ROPE, PL_GATHER, PL_KV_STORE, PL_ATTN, PL_COUNT };

/* A rope configuration whose cos/sin table is computed on the host per run (bit-identical to
 * the CPU backend's) and placed in the batch buffer at word `off`. */
typedef struct vk_rope_tab { int n_rot; float base, scale; int ff; uint32_t off; } vk_rope_tab;

typedef struct vk_backend {
    rlx_backend base;                /* must be first */
    vk_dev d;
    VkPipeline pl[PL_COUNT];
    const rlx_plan *plan;            /* borrowed, set by prepare() */
    vk_buffer *slabs;                /* weight memory, tensors packed at aligned offsets */
    int n_slabs;
    int *w_slab;                     /* per tensor id: slab index (-1: not a weight) */
    VkDeviceSize *w_off;             /* per tensor id: byte offset in its slab */
    vk_buffer arena, scratch, dummy;
    vk_buffer params;                /* host-visible: one VK_PARAM_WORDS slot per dispatch */
    uint32_t n_slots;                /* dispatches a run needs (counted at prepare) */
    VkDeviceSize slot_bytes;
    vk_buffer batch;                 /* host-visible batch words (see vk_record.c) */
    int32_t *host_batch;
    size_t host_batch_cap;           /* words */
    VkDescriptorPool dpool;
    vk_rope_tab *ropes;
    int n_ropes;
    int64_t min_vocab;               /* smallest get_rows table: token ids must stay below */
    rlx_kv_geometry kv;
    vk_buffer *kv_k, *kv_v;          /* per layer: [n_blocks * block_size][kv_cols] */
    VkDeviceSize kv_layer_bytes;
    /* recording state of the current run */
    bool counting;
    uint32_t slot;
    const rlx_batch *b;
    uint32_t batch_words[8];         /* P[40..47]: layout of the batch buffer */
} vk_backend;

/* Records every dispatch of step s into d.cmd (or only counts them when be->counting). */
int rlx__vk_record_step(vk_backend *be, const rlx_step *s, rlx_error *err);
/* Rows of tensor t in this run, and the most it can have. */
int64_t rlx__vk_rows(const vk_backend *be, int t);

#endif
