/* gguf_handle.h - the GGUF handle's fields, private to models/gguf*.c: gguf.c parses and owns
 * a handle (its arena, index and mapping), gguf_get.c reads it. Not for other modules: they
 * use models/gguf.h. */
#ifndef RLX_GGUF_HANDLE_H
#define RLX_GGUF_HANDLE_H

#include "models/gguf.h"
#include "models/filemap.h"

/* the arena: many small allocations, one free at close (gguf.c) */
typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_block;

struct rlx_gguf {
    char *name;                 /* path or caller-given name, for messages */
    const uint8_t *base;        /* mapping or borrowed buffer */
    uint64_t size;
    rlx_filemap map;            /* the file's mapping (rlx_gguf_open; fd -1 for a borrowed buffer) */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;       /* start of the tensor data section */
    uint64_t n_kv, n_tensors;
    rlx_gguf_kv *kvs;
    rlx_gguf_tensor *tensors;
    uint32_t *kv_index, *tensor_index; /* open addressing: slot -> index+1, 0 = empty */
    uint64_t kv_mask, tensor_mask;
    arena_block *arena;
    rlx_gguf **parts;           /* split GGUF: the other parts, owned (their tensors are in tensors[]) */
    uint32_t n_parts;
    void (*release)(void *);    /* rlx__gguf_on_close: frees memory the handle's tensors point into */
    void *release_ctx;
    bool (*changed)(void *ctx, char *why, size_t cap); /* rlx__gguf_on_check: release_ctx's files */
};


#endif
