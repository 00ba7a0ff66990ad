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

/* Storage-buffer bindings shared by every pipeline (see shaders/common.glsl, kv.glsl): the KV
 * pool of a layer is bound as up to VK_KV_CHUNKS buffers of whole blocks each for K and V. */
#define VK_KV_CHUNKS 4
enum { VK_B_PARAMS = 0, VK_B_OUT = 1, VK_B_IN0 = 2, VK_B_IN1 = 3, VK_B_IN2 = 4, VK_B_OP0 = 5,
       VK_B_BATCH = 9, VK_B_KC = 10, VK_B_VC = VK_B_KC + VK_KV_CHUNKS, VK_N_BINDINGS = VK_B_VC + VK_KV_CHUNKS };
#define VK_PARAM_WORDS 96

/* A buffer and the memory it owns. `map` is non-NULL when the memory is host visible
 * (always for host buffers; for device ones where device-local memory is host visible, as on
 * lavapipe, integrated GPUs and discrete ones with resizable BAR). */
typedef struct vk_buffer {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size;
    void *map;
    bool device;             /* counted in vk_dev.device_bytes */
    bool bar;                /* device-local and mapped (counted in vk_dev.bar_bytes) */
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
    VkDeviceSize heap_bytes; /* the largest device-local heap (RLX_VK_HEAP_BYTES lowers it) */
    VkDeviceSize device_bytes; /* allocated by us for device buffers */
    /* Mapped device-local memory: a discrete GPU without resizable BAR has only a 256 MiB
     * window of it; allocations past it fall back to unmapped memory + staging copies.
     * bar_limit (RLX_VK_BAR_BYTES, a test hook) simulates such a window: 0 = none. */
    VkDeviceSize bar_bytes, bar_limit;
    bool force_staging;      /* RLX_VK_FORCE_STAGING=1: device buffers never mapped */
    /* Shaders' fma() computed through doubles (specialization constant 7): Vulkan lets a driver
     * evaluate fma() unfused, and lavapipe does in some shaders; GPUs fuse it in hardware.
     * On for CPU devices; RLX_VK_SOFT_FMA=0/1 overrides. */
    uint32_t soft_fma;
    /* shaderFloat64: the exact shader builds; without it (or with RLX_VK_NO_F64=1, a test hook)
     * the <name>_f32 builds, whose sums and libm functions are float ones (common.glsl) */
    bool f64;
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    /* the pipeline cache every pipeline is created through (vk_pcache.c) */
    VkPipelineCache pcache;
    char *pc_path;           /* its file (NULL: no cache folder) */
    rlx_vk_pcache_state pc_state;
    size_t pc_loaded, pc_bytes;   /* driver data read at creation / last written */
    size_t pc_file_n;             /* what the file holds (read or written; 0: nothing good) and */
    uint64_t pc_file_sum;         /* its checksum: a save of the same data writes nothing */
    uint64_t pc_created, pc_saved; /* pipelines created; their count at the last save */
} vk_dev;

int rlx__vk_open(vk_dev *d, int index, rlx_error *err);
void rlx__vk_close(vk_dev *d);
/* The pipeline cache (vk_pcache.c): open reads dir's file for this device when it is intact
 * and ours (dir NULL or "": none) and creates the VkPipelineCache (best effort: without one,
 * pipelines are created without); save writes the driver's data back when pipelines were
 * created since the last save; close (called by rlx__vk_close) destroys it. */
void rlx__vk_pcache_open(vk_dev *d, const char *dir);
int rlx__vk_pcache_save(vk_dev *d, rlx_error *err);
void rlx__vk_pcache_close(vk_dev *d);
/* host: host-visible coherent memory (params, batch, staging, readback); else device-local,
 * mapped where that memory is host visible, else unmapped (reached through staging copies). */
int rlx__vk_buffer(vk_dev *d, vk_buffer *b, VkDeviceSize size, bool host, rlx_error *err);
void rlx__vk_buffer_free(vk_dev *d, vk_buffer *b);
/* Host <-> buffer copies; they go through a staging buffer when b is not mapped. They use
 * (and wait for) the device's command buffer, so never call them while a run is recorded. */
int rlx__vk_write(vk_dev *d, vk_buffer *b, VkDeviceSize off, const void *src, size_t n, rlx_error *err);
int rlx__vk_read(vk_dev *d, vk_buffer *b, VkDeviceSize off, void *dst, size_t n, rlx_error *err);
/* Command buffer bracket: begin() resets and begins d->cmd; submit() ends, submits and waits. */
int rlx__vk_begin(vk_dev *d, rlx_error *err);
int rlx__vk_submit(vk_dev *d, rlx_error *err);
/* Submits an ended command buffer and waits for it. */
int rlx__vk_submit_cmd(vk_dev *d, VkCommandBuffer cmd, rlx_error *err);
/* A global barrier: every earlier write (shaders, transfers, host) before every later access. */
void rlx__vk_barrier_all(VkCommandBuffer cmd);
/* Compute pipeline of the embedded shader `name` (its _f32 build without d->f64), its
 * specialization constants 0.. set to spec[0..n_spec) (at most 4), and constant 7 to
 * d->soft_fma. */
int rlx__vk_pipeline(vk_dev *d, const char *name, const uint32_t *spec, uint32_t n_spec, VkPipeline *out, rlx_error *err);
int rlx__vk_check(VkResult r, const char *what, rlx_error *err);


/* ---- the backend (vk_backend.c: lifetime, memory, run; vk_kv.c: the paged KV pool;
 * vk_shape.c: command buffers recorded per batch shape; vk_record.c: one step -> dispatches) */

enum { PL_EW, PL_RMS, PL_GET_ROWS, PL_ACTQ, PL_MATMUL, PL_ROPE, PL_GATHER, PL_COUNT };
/* KV shaders come in variants per pool type (f32, f16, q8_0) and split (one chunk or more),
 * fixed by specialization constants so the hot loops carry no branches on them; made when a
 * recording first needs one. */
enum { PL_KV_STORE, PL_KV_ATTN, PL_KV_COUNT };

/* A rope configuration whose cos/sin table is computed on the host per run (bit-identical to
 * the CPU backend's) and placed in the batch buffer at word `off` (fixed per plan). */
typedef struct vk_rope_tab { int n_rot; float base, scale; int ff; uint32_t off; } vk_rope_tab;

/* Batch-buffer layout (words), fixed per plan so recorded commands stay valid for any batch:
 * tokens[max_tokens] pos[max_tokens] seq[max_tokens] out_index[max_outputs], the RLX_TOKEN_*
 * kinds of tokens[max_tokens] and of output rows[max_outputs] (at kind_off), the rope tables
 * ([max_tokens][n_rot] each), then table_start[n_seqs] and the block tables of the run. */
enum { VK_BW_TOKENS, VK_BW_OUTPUTS, VK_BW_TOK, VK_BW_POS, VK_BW_SEQ, VK_BW_OIDX, VK_BW_SBASE, VK_BW_N };

/* Commands of one batch shape: recorded once, submitted by every run of that shape. */
#define VK_MAX_SHAPES 16
typedef struct vk_shape {
    int32_t n_tokens, n_outputs;     /* the key; n_tokens 0 = empty entry */
    VkCommandBuffer cmd;
    VkDescriptorPool pool;           /* one descriptor set per dispatch */
    vk_buffer params;                /* host-visible: one VK_PARAM_WORDS slot per dispatch */
    uint64_t last_used;
} vk_shape;

/* Paged KV pool: per KV layer, K and V each in n_chunks buffers of chunk_blocks whole blocks
 * (each within maxStorageBufferRange); a layer's rows are row_bytes[layer] (its own kv_cols):
 * f32, f16 or Q8_0 blocks. Layers without KV have no buffers; recurrent state is refused. */
typedef struct vk_kv {
    rlx_mem_desc geo;
    vk_buffer *k, *v;                /* [layer * VK_KV_CHUNKS + chunk] */
    int n_chunks;
    int32_t chunk_blocks;
    VkDeviceSize *row_bytes, *block_bytes; /* per layer (0: not a KV layer) */
} vk_kv;

typedef struct vk_backend {
    rlx_backend base;                /* must be first */
    vk_dev d;
    VkPipeline pl[PL_COUNT];
    VkPipeline pl_kv[PL_KV_COUNT][3][2]; /* [shader][type: f32 f16 q8_0][split] */
    const rlx_plan *plan;            /* borrowed, set by prepare() */
    vk_buffer *slabs;                /* weight memory, tensors packed at aligned offsets */
    int n_slabs;
    int *w_slab;                     /* per tensor id: slab index (-1: not a weight) */
    VkDeviceSize *w_off;             /* per tensor id: byte offset in its slab */
    vk_buffer arena, scratch, dummy;
    vk_buffer readback;              /* host-visible logits copy when the arena is not mapped */
    uint32_t n_slots;                /* dispatches a run needs (counted at prepare) */
    VkDeviceSize slot_bytes;
    vk_buffer batch;                 /* host-visible batch words (layout above) */
    size_t batch_fixed;              /* words before table_start */
    uint32_t batch_words[VK_BW_N];   /* P[40..46] of every dispatch (tokens/outputs per shape) */
    uint32_t kind_off;               /* token kinds; output-row kinds follow at + max_tokens */
    int32_t *kind_scratch;           /* rlx_batch_kinds' counts, then the kinds as bytes */
    size_t kind_scratch_words;
    vk_rope_tab *ropes;
    int n_ropes;
    int64_t min_vocab;               /* smallest get_rows table: token ids must stay below */
    vk_kv kv;
    vk_shape shapes[VK_MAX_SHAPES];
    uint64_t use_clock, n_recordings;
    /* recording state */
    bool counting;                   /* prepare(): count dispatches, check bindings */
    int32_t cur_tokens, cur_outputs; /* rows of the shape being recorded (max when counting) */
    vk_shape *rec;
    uint32_t slot;
} vk_backend;

/* Records every dispatch of step s into be->rec (or only counts them when be->counting). */
int rlx__vk_record_step(vk_backend *be, const rlx_step *s, rlx_error *err);
/* Rows of tensor t in the shape being recorded. */
int64_t rlx__vk_rows(const vk_backend *be, int t);

/* vk_shape.c: the commands of shape (T, O), recorded on first use; drop() forgets all (their
 * buffers or bindings changed). */
int rlx__vk_shape_get(vk_backend *be, int32_t n_tokens, int32_t n_outputs, vk_shape **out, rlx_error *err);
void rlx__vk_shapes_drop(vk_backend *be);

/* vk_kv.c */
int rlx__vk_kv_init(vk_backend *be, const rlx_mem_desc *geo, rlx_error *err);
void rlx__vk_kv_free(vk_backend *be);
int rlx__vk_kv_block_io(vk_backend *be, int32_t layer, int32_t block, void *k, void *v, bool write, rlx_error *err);

#endif
