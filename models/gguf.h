/* gguf.h - read-only GGUF (v2, v3) files over mmap, and a writer.
 *
 * Ownership: rlx_gguf_open() maps the file and returns an rlx_gguf that owns the mapping and
 * every parsed structure; all pointers obtained from it (keys, strings, array data, tensor
 * data) stay valid until rlx_gguf_close(). String values point into the mapping and are NOT
 * NUL-terminated: always use the length. Every offset and size is validated at open time, so
 * callers may read tensor data and arrays without further bounds checks. A handle from
 * rlx_gguf_open_split also owns the other parts of a split model. Handles are not shared state:
 * any thread may open and close its own; concurrent reads of one handle are safe. */
#ifndef RLX_GGUF_H
#define RLX_GGUF_H

#include "backends/rlx.h"

typedef enum rlx_gguf_type {
    RLX_GGUF_UINT8 = 0, RLX_GGUF_INT8 = 1, RLX_GGUF_UINT16 = 2, RLX_GGUF_INT16 = 3,
    RLX_GGUF_UINT32 = 4, RLX_GGUF_INT32 = 5, RLX_GGUF_FLOAT32 = 6, RLX_GGUF_BOOL = 7,
    RLX_GGUF_STRING = 8, RLX_GGUF_ARRAY = 9, RLX_GGUF_UINT64 = 10, RLX_GGUF_INT64 = 11,
    RLX_GGUF_FLOAT64 = 12,
} rlx_gguf_type;

typedef struct rlx_gguf_str { const char *ptr; uint64_t len; } rlx_gguf_str;

typedef struct rlx_gguf_array {
    rlx_gguf_type type;               /* element type */
    uint64_t n;                       /* element count */
    const void *data;                 /* scalar elements: packed little-endian, in the mapping */
    const rlx_gguf_str *strs;         /* STRING elements (n of them) */
    const struct rlx_gguf_array *arrs;/* nested ARRAY elements (n of them) */
} rlx_gguf_array;

typedef struct rlx_gguf_value {
    rlx_gguf_type type;
    union {
        uint64_t u64;       /* UINT8/16/32/64 */
        int64_t i64;        /* INT8/16/32/64 */
        double f64;         /* FLOAT32/64 */
        bool b;             /* BOOL */
        rlx_gguf_str str;   /* STRING */
        rlx_gguf_array arr; /* ARRAY */
    };
} rlx_gguf_value;

typedef struct rlx_gguf_kv {
    const char *key;        /* NUL-terminated copy */
    rlx_gguf_value value;
} rlx_gguf_kv;

#define RLX_GGUF_MAX_DIMS 4

typedef struct rlx_gguf_tensor {
    const char *name;       /* NUL-terminated copy */
    uint32_t n_dims;
    int64_t ne[RLX_GGUF_MAX_DIMS]; /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    int type;               /* rlx_dtype id */
    uint64_t offset;        /* relative to the data section */
    uint64_t size;          /* bytes */
    const void *data;       /* into the mapping */
} rlx_gguf_tensor;

typedef struct rlx_gguf rlx_gguf;

int rlx_gguf_open(rlx_gguf **out, const char *path, rlx_error *err);
/* Parses an in-memory image (borrowed; must outlive the handle). Used by tests and fuzzers. */
int rlx_gguf_open_memory(rlx_gguf **out, const void *data, size_t size, const char *name, rlx_error *err);
/* The beginning of a GGUF file (header, metadata and tensor infos; the data need not follow):
 * 0 with *extent = the size the whole file needs (its data section's end) and its alignment;
 * RLX_EFORMAT when the bytes are too few for the tensor infos, or not GGUF. Any thread. */
int rlx_gguf_extent(const void *data, size_t size, uint64_t *extent, uint64_t *alignment, rlx_error *err);
void rlx_gguf_close(rlx_gguf *g);
/* Whether a file the handle maps (every split part, a safetensors folder's files) was cut
 * short, written to or resized since it was opened (models/filemap.h): its tensors no longer
 * hold what was loaded. why gets "PATH: what happened". A deleted or renamed-over file is not a
 * change (the mapping keeps its contents). Any thread, while others read the tensors. */
bool rlx_gguf_changed(const rlx_gguf *g, char *why, size_t cap);

const char *rlx_gguf_path(const rlx_gguf *g);
uint32_t rlx_gguf_version(const rlx_gguf *g);
uint64_t rlx_gguf_alignment(const rlx_gguf *g);
uint64_t rlx_gguf_file_size(const rlx_gguf *g);
/* The whole file image (rlx_gguf_file_size bytes: the mapping or the caller's buffer). */
const void *rlx_gguf_bytes(const rlx_gguf *g);
/* File offset where the tensor data section starts (tensor offsets are relative to it). */
uint64_t rlx_gguf_data_offset(const rlx_gguf *g);
/* "uint8", "string", "array", ... ("unknown" for ids outside the enum). */
const char *rlx_gguf_type_name(rlx_gguf_type t);

uint64_t rlx_gguf_n_kv(const rlx_gguf *g);
const rlx_gguf_kv *rlx_gguf_kv_at(const rlx_gguf *g, uint64_t i);
const rlx_gguf_value *rlx_gguf_find(const rlx_gguf *g, const char *key); /* NULL if absent */

/* Typed getters: RLX_ENOTFOUND if absent (err untouched), RLX_EFORMAT if the stored type does
 * not convert (integers convert between widths when the value fits; floats accept integers). */
int rlx_gguf_get_u32(const rlx_gguf *g, const char *key, uint32_t *out, rlx_error *err);
int rlx_gguf_get_i64(const rlx_gguf *g, const char *key, int64_t *out, rlx_error *err);
int rlx_gguf_get_f32(const rlx_gguf *g, const char *key, float *out, rlx_error *err);
int rlx_gguf_get_bool(const rlx_gguf *g, const char *key, bool *out, rlx_error *err);
int rlx_gguf_get_str(const rlx_gguf *g, const char *key, rlx_gguf_str *out, rlx_error *err);
int rlx_gguf_get_arr(const rlx_gguf *g, const char *key, const rlx_gguf_array **out, rlx_error *err);

uint64_t rlx_gguf_n_tensors(const rlx_gguf *g);
const rlx_gguf_tensor *rlx_gguf_tensor_at(const rlx_gguf *g, uint64_t i);
const rlx_gguf_tensor *rlx_gguf_find_tensor(const rlx_gguf *g, const char *name); /* NULL if absent */

/* ---- split models (gguf_split.c) ----
 * llama.cpp's gguf-split layout: parts PREFIX-00001-of-0000N.gguf ... (1-based in the name),
 * each with split.no (0-based), split.count and split.tensors.count (the total); the first part
 * holds the model's metadata, every part its own tensors.
 * rlx_gguf_open_split opens any part of a split model (or a plain file, as rlx_gguf_open) and
 * returns the FIRST part's handle, owning every part's mapping, whose tensor table and
 * rlx_gguf_find_tensor span all parts; keys are the first part's. Errors: a missing part
 * (RLX_ENOTFOUND, listing every missing file), a part whose split.no / split.count disagree with
 * its name, a split.tensors.count that disagrees, a tensor in two parts, any part's parse error.
 * rlx_gguf_file_size/bytes/data_offset stay the first part's. */
int rlx_gguf_open_split(rlx_gguf **out, const char *path, rlx_error *err);
uint32_t rlx_gguf_n_parts(const rlx_gguf *g);                    /* 1 for a plain file */
const char *rlx_gguf_part_path(const rlx_gguf *g, uint32_t i);   /* i < n_parts; 0 is rlx_gguf_path */
/* split.no / split.count of one file (0 / 1 when it has no split keys); RLX_EFORMAT if malformed. */
int rlx_gguf_split_keys(const rlx_gguf *g, uint32_t *no, uint32_t *count, rlx_error *err);
/* Parses "PREFIX-NNNNN-of-MMMMM.gguf": PREFIX into prefix (cap bytes), NNNNN (1-based) into *no,
 * MMMMM into *count; false when path is not so named (any out pointer may be NULL). */
bool rlx_gguf_split_parse_name(const char *path, char *prefix, size_t cap, uint32_t *no, uint32_t *count);
/* Part no (0-based) of count: "PREFIX-%05u-of-%05u.gguf"; RLX_EINVAL if it does not fit. */
int rlx_gguf_split_name(char *buf, size_t cap, const char *prefix, uint32_t no, uint32_t count);

/* ---- writer (rlxd-synth, tests) ----
 * The writer copies everything it is given; rlx_gguf_writer_free releases it. Keys keep their
 * insertion order; setting an existing key replaces its value. Output is GGUF v3 with
 * general.alignment (default 32) honoured and always written, as a uint32 after the other keys
 * when it was not set. Setters return RLX_EINVAL/RLX_ENOMEM; rlx_gguf_writer_last_error says
 * why. Arrays of arrays are valid GGUF but llama.cpp's reader rejects them. */
typedef struct rlx_gguf_writer rlx_gguf_writer;

rlx_gguf_writer *rlx_gguf_writer_new(void);
void rlx_gguf_writer_free(rlx_gguf_writer *w);
int rlx_gguf_writer_set_u32(rlx_gguf_writer *w, const char *key, uint32_t v);
int rlx_gguf_writer_set_i32(rlx_gguf_writer *w, const char *key, int32_t v);
int rlx_gguf_writer_set_u64(rlx_gguf_writer *w, const char *key, uint64_t v);
int rlx_gguf_writer_set_f32(rlx_gguf_writer *w, const char *key, float v);
int rlx_gguf_writer_set_bool(rlx_gguf_writer *w, const char *key, bool v);
int rlx_gguf_writer_set_str(rlx_gguf_writer *w, const char *key, const char *v, size_t len);
/* Scalar array: n packed elements of elem_type (not STRING/ARRAY). */
int rlx_gguf_writer_set_arr(rlx_gguf_writer *w, const char *key, rlx_gguf_type elem_type, const void *data, uint64_t n);
int rlx_gguf_writer_set_arr_str(rlx_gguf_writer *w, const char *key, const rlx_gguf_str *strs, uint64_t n);
/* Copies one key/value (any type, nested arrays included) from an open file. */
int rlx_gguf_writer_copy_kv(rlx_gguf_writer *w, const rlx_gguf_kv *kv);
int rlx_gguf_writer_add_tensor(rlx_gguf_writer *w, const char *name, int type, uint32_t n_dims,
                               const int64_t *ne, const void *data, uint64_t size);
int rlx_gguf_writer_write(rlx_gguf_writer *w, const char *path, rlx_error *err);
/* Writes the model as n_split parts the way llama.cpp's gguf-split --split-max-tensors does:
 * tensors in order, ceil(n_tensors / n_split) per part (every part gets at least one), the
 * first part with every key, all parts with split.no (u16), split.count (u16) and
 * split.tensors.count (i32). Part names come from path with a trailing ".gguf" dropped:
 * PATH-00001-of-0000N.gguf. n_split 1 writes the plain file at path. */
int rlx_gguf_writer_write_split(rlx_gguf_writer *w, const char *path, uint32_t n_split, rlx_error *err);
/* The whole GGUF image in memory (malloc'ed, the caller frees *data): what rlx_gguf_writer_write
 * would write, for rlx_gguf_open_memory (models/safetensors.c builds a folder's metadata this way). */
int rlx_gguf_writer_write_memory(rlx_gguf_writer *w, void **data, size_t *size, rlx_error *err);
/* Why the last failed setter/add_tensor call failed ("" if none failed); valid until the next call. */
const char *rlx_gguf_writer_last_error(const rlx_gguf_writer *w);

#endif
