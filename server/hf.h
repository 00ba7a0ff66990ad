/* hf.h - Hugging Face model references for `rlxd pull` and `rlxd serve -m hf:...`: parsing
 * `hf:OWNER/REPO[:QUANT]` and `hf:OWNER/REPO/PATH.gguf`, the URLs of Hugging Face's layout, and
 * which files of a repository a reference means (the quantization's file, every part of a split
 * GGUF). No I/O here (server/pull.c downloads).
 *
 * Threads: any. Ownership: rlx_hf_ref is a plain value; rlx_hf_pick's list is malloc'ed and
 * freed with rlx_hf_files_free. */
#ifndef RLX_HF_H
#define RLX_HF_H

#include "backends/rlx.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct rlx_hf_ref {
    char repo[200];          /* "OWNER/REPO" */
    char file[512];          /* a path inside the repository, "" when not named */
    char quant[48];          /* the tag asked for (canonical spelling when llama.cpp knows it), or "" */
    char name[256];          /* serve only: the served name given after the reference, or "" */
} rlx_hf_ref;

/* Parses s. Forms: hf:OWNER/REPO, hf:OWNER/REPO:QUANT, hf:OWNER/REPO/PATH.gguf. With
 * allow_name (`serve -m`), a trailing :NAME is the served name: hf:OWNER/REPO:QUANT:NAME,
 * hf:OWNER/REPO/FILE.gguf:NAME, and hf:OWNER/REPO:TAG where TAG is not a quantization llama.cpp
 * names. OWNER and REPO are Hugging Face ids ([A-Za-z0-9._-], no "--" or "..", at most 96
 * characters); a file path must end in .gguf and hold no "..", "//" or backslash. Errors are
 * RLX_EINVAL with a message naming the part that is wrong. */
int rlx_hf_ref_parse(const char *s, bool allow_name, rlx_hf_ref *r, rlx_error *err);
/* Whether s starts with "hf:". */
bool rlx_hf_is_ref(const char *s);
/* The name a reference is served under without :NAME: "OWNER/REPO", ":QUANT" appended when
 * given, or "OWNER/REPO/FILE" without ".gguf". */
void rlx_hf_ref_default_name(const rlx_hf_ref *r, char *buf, size_t cap);

/* {endpoint}/{repo}/resolve/main/{file} with file's characters outside [A-Za-z0-9._~/-]
 * percent-encoded; a trailing '/' of endpoint is dropped. RLX_ERANGE when it does not fit. */
int rlx_hf_file_url(char *buf, size_t cap, const char *endpoint, const char *repo, const char *file);
/* {endpoint}/api/models/{repo}: the listing (JSON with "siblings":[{"rfilename"}]). */
int rlx_hf_api_url(char *buf, size_t cap, const char *endpoint, const char *repo);

/* Whether name (a file name or repository path) carries tag as a quantization: the tag (any
 * case) preceded by the start, '/', '-', '.' or '_' and followed by the end of the name without
 * ".gguf" and split suffix, '-' or '.'. */
bool rlx_hf_name_has_quant(const char *name, const char *tag);

/* The files r means among names (a repository listing, or the files already downloaded):
 * r->file and, when it is a part of a split GGUF, its other parts; else the .gguf files
 * (projectors, mmproj*, left out) whose name carries r->quant, or without a quantization the
 * first of rlx__quant_order found, or the only model. A split model is all its parts (each must
 * be listed). Sets *files (paths as listed, part 1 first) and *n. Errors: RLX_ENOTFOUND with
 * the models listed (no match, a part missing) or RLX_EINVAL (several models match: name one). */
int rlx_hf_pick(const char *const *names, size_t n_names, const rlx_hf_ref *r, char ***files, size_t *n,
                rlx_error *err);
/* The "rfilename"s of a listing; RLX_EFORMAT when json is not a Hugging Face model listing. */
int rlx_hf_listing_names(const char *json, char ***names, size_t *n, rlx_error *err);
void rlx_hf_files_free(char **files, size_t n);

/* The local file name of a repository path: '%' written "%25" and '/' "%2F", so that a folder
 * holds files of every subfolder side by side (Q4_K_M/model.gguf and Q8_0/model.gguf are
 * Q4_K_M%2Fmodel.gguf and Q8_0%2Fmodel.gguf) and `serve --models-dir` still finds them one
 * level down; a top-level name without '%' is unchanged. RLX_ERANGE when the name would exceed
 * cap or RLX_HF_LOCAL_NAME_MAX bytes (NAME_MAX less room for ".part.etag"). */
#define RLX_HF_LOCAL_NAME_MAX 245
int rlx_hf_local_name(char *buf, size_t cap, const char *path);
/* The repository path of a local file name (rlx_hf_local_name's inverse); false when name is
 * no such name (another '%' sequence, or a path a listing would not hold) or does not fit. */
bool rlx_hf_local_path(const char *name, char *buf, size_t cap);

/* The local folder of a repository's files under root: root/OWNER--REPO (Hugging Face refuses
 * "--" inside ids, so the mapping is one to one). */
int rlx_hf_local_dir(char *buf, size_t cap, const char *root, const char *repo);

#endif
