/* model_files.h - models as users keep them on disk: `rlxd check`'s support verdict for a GGUF
 * file (model_check.c), a folder's models with split parts grouped (model_scan.c), and the
 * quantization a file carries (model_scan.c).
 *
 * Ownership: results are plain structs the caller owns; rlx_model_scan's array and strings are
 * freed by rlx_model_scan_free. Every function is synchronous and touches no global state, so
 * any thread may call them (the loop thread must not: they read whole files). */
#ifndef RLX_MODEL_FILES_H
#define RLX_MODEL_FILES_H

#include "models/gguf.h"

#include <stddef.h>

typedef enum rlx_check_status {
    RLX_CHECK_SUPPORTED = 0,          /* rlxd loads it, builds its graph and its tokenizer */
    RLX_CHECK_KNOWN_UNIMPLEMENTED,    /* a model llama.cpp would load, of an architecture or tensor type rlxd lacks */
    RLX_CHECK_MISSING_METADATA,       /* a key llama.cpp's loader requires is absent */
    RLX_CHECK_UNKNOWN,                /* not GGUF, corrupt, missing split parts, or an unknown architecture */
} rlx_check_status;

typedef struct rlx_check_result {
    rlx_check_status status;
    uint32_t n_parts;        /* split parts mapped (1 for a plain file; 0 when it did not open) */
    char arch[64];           /* general.architecture, "" when unread */
    char detail[128];        /* MissingMetadata: the key; KnownUnimplemented: the architecture or tensor type; else "" */
    char reason[768];        /* one line for people; "" when SUPPORTED */
} rlx_check_result;

/* "SUPPORTED", "KnownUnimplemented", "MissingMetadata", "Unknown" */
const char *rlx_check_status_name(rlx_check_status s);

/* The verdict for a GGUF file or any part of a split one, in llama.cpp's load-time order:
 * 1. the file parses, every split part included (a tensor type id rlxd does not know is
 *    KnownUnimplemented; any other parse error, or a missing part, Unknown);
 * 2. general.architecture is present (MissingMetadata); an architecture outside rlxd's registry
 *    (rlx_arch_find) with no <arch>.* keys at all is Unknown;
 * 3. <arch>.context_length, <arch>.embedding_length, <arch>.block_count, tokenizer.ggml.model
 *    and (unless that is "none"/"no_vocab") tokenizer.ggml.tokens are present, and for registered
 *    architectures the keys rlxd's loader requires (rlx_model_required_keys): MissingMetadata
 *    naming the first absent one;
 * 4. the file holds tensors (a vocabulary-only file is Unknown);
 * 5. an architecture outside the registry is KnownUnimplemented (llama.cpp's converters wrote
 *    its hyper-parameters, so llama.cpp would try it); a tensor of a type rlxd cannot compute is
 *    KnownUnimplemented naming the type;
 * 6. rlx_model_load, rlx_model_build and rlx_tokenizer_from_gguf succeed: SUPPORTED; a failure
 *    reported as RLX_EUNSUPPORTED is KnownUnimplemented, any other Unknown, with its message. */
void rlx_model_check(const char *path, rlx_check_result *r);

/* ---- folders (model_scan.c) ---- */

typedef struct rlx_model_entry {
    char *name;              /* the file name without ".gguf" and without -NNNNN-of-MMMMM; "SUB/name" in a subfolder */
    char *path;              /* the file to open: a plain file, or the lowest-numbered part present */
    uint32_t n_parts;        /* split.count as the names state it (1 for a plain file) */
    uint32_t n_present;      /* parts found on disk */
} rlx_model_entry;

/* Every *.gguf in dir and in its direct subfolders (hidden names skipped), split parts grouped
 * into one entry, sorted by name. Names are unique: where several models would share one (m.gguf
 * beside an m-00001-of-00003.gguf set, or a complete set beside an incomplete one), the first
 * complete one keeps it and each other is named by its path relative to dir (".gguf" kept, a
 * folder's with '/'). An unreadable dir is an error; unreadable subfolders are skipped. */
int rlx_model_scan(const char *dir, rlx_model_entry **out, size_t *n, rlx_error *err);
void rlx_model_scan_free(rlx_model_entry *e, size_t n);

/* llama.cpp's name for a general.file_type value ("Q4_K_M", "F16", ...), NULL if unknown. */
const char *rlx_ftype_name(uint32_t ftype);
/* The quantization of a model: rlx_ftype_name(general.file_type) when present and known, else
 * the upper-cased type of the tensors holding the most bytes among 2-D ones ("Q8_0"). */
void rlx_model_quant(const rlx_gguf *g, char *buf, size_t cap);

#endif
