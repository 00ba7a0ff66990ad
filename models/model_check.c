/* model_check.c - `rlxd check`'s verdict on one GGUF model (see model_files.h for the order of
 * the checks and what each status means). */
#include "models/model_files.h"
#include "models/safetensors.h"
#include "models/model.h"
#include "models/tokenizer.h"
#include "backends/dtype.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "models/filemap.h"

const char *rlx_check_status_name(rlx_check_status s)
{
    switch (s) {
    case RLX_CHECK_SUPPORTED: return "SUPPORTED";
    case RLX_CHECK_KNOWN_UNIMPLEMENTED: return "KnownUnimplemented";
    case RLX_CHECK_MISSING_METADATA: return "MissingMetadata";
    default: return "Unknown";
    }
}

/* err.msg without a leading "PATH: " (the caller prints the path) */
static const char *msg_after(const char *msg, const char *path)
{
    size_t n = strlen(path);
    return !strncmp(msg, path, n) && msg[n] == ':' && msg[n + 1] == ' ' ? msg + n + 2 : msg;
}

__attribute__((format(printf, 4, 5)))
static void verdict(rlx_check_result *r, rlx_check_status s, const char *detail, const char *fmt, ...)
{
    r->status = s;
    snprintf(r->detail, sizeof r->detail, "%s", detail ? detail : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
}

/* Whether the file has any "<arch>." key: the hyper-parameters llama.cpp's converters write. */
static bool has_arch_keys(const rlx_gguf *g, const char *arch)
{
    size_t n = strlen(arch);
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) {
        const char *k = rlx_gguf_kv_at(g, i)->key;
        if (!strncmp(k, arch, n) && k[n] == '.') return true;
    }
    return false;
}

/* llama.cpp's load-time predicate: the first required key absent, into r; false if none. */
static bool missing_key(const rlx_gguf *g, const char *arch, bool ours, rlx_check_result *r)
{
    static const char *const llama_keys[] = {"context_length", "embedding_length", "block_count"};
    char key[160];
    for (size_t i = 0; i < RLX_ARRAY_LEN(llama_keys); i++) {
        snprintf(key, sizeof key, "%s.%s", arch, llama_keys[i]);
        if (!rlx_gguf_find(g, key)) {
            verdict(r, RLX_CHECK_MISSING_METADATA, key, "required metadata key '%s' is missing", key);
            return true;
        }
    }
    rlx_gguf_str model;
    if (rlx_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL)) {
        verdict(r, RLX_CHECK_MISSING_METADATA, "tokenizer.ggml.model", "required metadata key 'tokenizer.ggml.model' "
                "is missing or not a string (no tokenizer)");
        return true;
    }
    bool no_vocab = (model.len == 4 && !memcmp(model.ptr, "none", 4)) || (model.len == 8 && !memcmp(model.ptr, "no_vocab", 8));
    const rlx_gguf_array *tokens;
    if (!no_vocab && rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", &tokens, NULL)) {
        verdict(r, RLX_CHECK_MISSING_METADATA, "tokenizer.ggml.tokens", "required metadata key 'tokenizer.ggml.tokens' "
                "is missing or not an array");
        return true;
    }
    for (size_t i = 0; ours && rlx_model_required_keys[i]; i++) {
        snprintf(key, sizeof key, "%s.%s", arch, rlx_model_required_keys[i]);
        if (!rlx_gguf_find(g, key)) {
            verdict(r, RLX_CHECK_MISSING_METADATA, key, "metadata key '%s', which rlxd needs, is missing", key);
            return true;
        }
    }
    return false;
}

/* What rlxd itself does with the file: load, build the graph, load the tokenizer. */
static void try_load(const char *path, rlx_check_result *r)
{
    rlx_error err = {0};
    rlx_model *m = NULL;
    rlx_tokenizer *tok = NULL;
    rlx_graph graph;
    rlx_graph_init(&graph);
    int rc = rlx_model_load(&m, path, &err);
    if (!rc) rc = rlx_model_build(m, &graph, &err);
    if (!rc) rc = rlx_tokenizer_from_gguf(&tok, m->gguf, &err);
    if (rc == RLX_EUNSUPPORTED) verdict(r, RLX_CHECK_KNOWN_UNIMPLEMENTED, "", "%s", msg_after(err.msg, path));
    else if (rc) verdict(r, RLX_CHECK_UNKNOWN, "", "%s", msg_after(err.msg, path));
    else verdict(r, RLX_CHECK_SUPPORTED, "", "%s", "");
    rlx_tokenizer_free(tok);
    rlx_graph_free(&graph);
    rlx_model_free(m);
}

void rlx_model_check(const char *path, rlx_check_result *r)
{
    memset(r, 0, sizeof *r);
    rlx_error err = {0};
    rlx_gguf *g;
    const char *special = rlx__special_file(path); /* a FIFO would hold open() until written: refused unopened */
    if (special) {
        verdict(r, RLX_CHECK_UNKNOWN, "", "not a regular file (%s)", special);
        return;
    }
    int rc = rlx_model_open(&g, path, &err);
    if (rc) {
        /* the parser says RLX_EUNSUPPORTED for a tensor type id outside rlxd's table and for a GGUF
           version it does not read; for a Hugging Face folder, an architecture, dtype or
           tokenizer kind it names in the message */
        const char *what = rlx_st_is_folder(path) ? "" : strstr(err.msg, "tensor type") ? "tensor type"
                           : strstr(err.msg, "version") ? "GGUF version" : "";
        verdict(r, rc == RLX_EUNSUPPORTED ? RLX_CHECK_KNOWN_UNIMPLEMENTED : RLX_CHECK_UNKNOWN,
                rc == RLX_EUNSUPPORTED ? what : "", "%s", msg_after(err.msg, path));
        return;
    }
    r->n_parts = rlx_gguf_n_parts(g);
    rlx_gguf_str s;
    rc = rlx_gguf_get_str(g, "general.architecture", &s, &err);
    if (rc == RLX_ENOTFOUND) {
        verdict(r, RLX_CHECK_MISSING_METADATA, "general.architecture", "required metadata key 'general.architecture' is missing");
        goto done;
    }
    if (rc || !s.len || s.len >= sizeof r->arch || memchr(s.ptr, 0, s.len)) {
        verdict(r, RLX_CHECK_UNKNOWN, "", "general.architecture is not a usable name");
        goto done;
    }
    memcpy(r->arch, s.ptr, s.len);
    bool ours = rlx_arch_find(r->arch) != NULL;
    if (!ours && !has_arch_keys(g, r->arch)) {
        verdict(r, RLX_CHECK_UNKNOWN, "", "unknown architecture '%s': the file has no '%s.*' hyper-parameters",
                r->arch, r->arch);
        goto done;
    }
    if (missing_key(g, r->arch, ours, r)) goto done;
    if (!rlx_gguf_n_tensors(g)) {
        verdict(r, RLX_CHECK_UNKNOWN, "", "the file holds no tensors (a vocabulary-only GGUF?)");
        goto done;
    }
    if (!ours) {
        verdict(r, RLX_CHECK_KNOWN_UNIMPLEMENTED, r->arch, "architecture '%s' is not implemented (rlxd has %s)", r->arch,
                rlx_arch_list());
        goto done;
    }
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        const rlx_dtype_info *di = rlx_dtype_get(t->type);
        if (!di->computable) {
            verdict(r, RLX_CHECK_KNOWN_UNIMPLEMENTED, di->name, "tensor '%s' has type %s, which rlxd cannot compute with",
                    t->name, di->name);
            goto done;
        }
    }
    rlx_gguf_close(g);
    g = NULL;
    try_load(path, r);
done:
    rlx_gguf_close(g);
}
