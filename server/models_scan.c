/* models_scan.c - the served models' slots: built at start (the -m models, then --models-dir's),
 * and kept in step with the folder afterwards (rlx_models_rescan): a model added to the folder
 * gets a slot, one whose file went away loses it (at once when nothing uses it; a loaded one
 * keeps serving, marked removed, until it is unloaded), one whose file or profile changed while
 * unloaded is read again. Each slot is allocated on its own (uv handles live in it, so slots
 * never move); s->models is the array of their pointers. Loop thread. */
#include "server/cli.h"
#include "server/serve.h"
#include "backends/cpu/threadpool.h"
#include "models/model_files.h"
#include "models/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

rlx_model_slot *rlx_models_find(rlx_srv *s, const char *name)
{
    for (size_t i = 0; i < s->n_models; i++)
        if (!strcmp(s->models[i]->cfg->name, name)) return s->models[i];
    return NULL;
}

/* The header of a model's file (every split part): its weights' bytes, or why it cannot load. */
static int probe(rlx_model_slot *m)
{
    rlx_gguf *g = NULL;
    int rc = rlx_model_open(&g, m->cfg->path, &m->err);
    if (rc) return rc;
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) bytes += rlx_gguf_tensor_at(g, i)->size;
    m->bytes = bytes;
    rlx_gguf_close(g);
    return 0;
}

static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* What a rescan compares: the model file's size and time, and its profile file's time. */
void rlx_model_signature(const char *path, int64_t sig[RLX_MODEL_SIG])
{
    struct stat st;
    char prof[4200];
    sig[0] = sig[1] = sig[2] = sig[3] = -1;
    if (!stat(path, &st)) sig[0] = (int64_t)st.st_size, sig[1] = mtime_ns(&st);
    rlx_profile_file_for(path, ".rlx.ini", prof, sizeof prof);
    if (!stat(prof, &st)) sig[2] = mtime_ns(&st);
    rlx_profile_file_for(path, ".rlx.toml", prof, sizeof prof);
    if (!stat(prof, &st)) sig[3] = mtime_ns(&st);
}

/* The slot of a served model, with its compile profile applied: 0, or the profile's error in
 * m->err (a bad <model>.rlx.toml or .rlx.ini names its file and line). */
static int slot_init(rlx_srv *s, rlx_model_slot *m, const rlx_serve_model *cfg)
{
    const rlx_serve_config *c = s->cfg;
    m->srv = s;
    m->cfg = cfg;
    rlx_log_escape(cfg->name, true, m->lname, sizeof m->lname);
    rlx_log_escape(cfg->path, true, m->lpath, sizeof m->lpath);
    m->keep_alive = c->keep_alive;
    m->wc = (rlx_worker_config){.model_path = cfg->path, .name = cfg->name, .n_threads = c->threads,
                                .n_ctx = c->ctx, .kv_type = c->kv_type, .kv_type_set = true,
                                .kv_block = c->kv_block, .kv_mem_mib = (size_t)c->kv_mem_mib,
                                .state_cache_mib = c->state_cache_mb > 0 ? c->state_cache_mb : -1,
                                .max_batch_tokens = c->max_batch_tokens, .max_seqs = c->max_seqs,
                                .draft_max = c->draft_max > 0 ? c->draft_max : -1,
                                /* --draft-model is for the -m models: a folder's may have other vocabularies
                                   (theirs is draft-model in their profile) */
                                .draft_model = cfg == &m->own ? NULL : c->draft_model, .draft_p_min = c->draft_p_min > 0 ? c->draft_p_min : -1,
                                .grammar_aside = c->grammar_aside,
                                .backend = c->backend, .device = c->device, .db_path = c->db,
                                .session_ttl_s = c->session_ttl, .max_sessions = c->max_sessions,
                                .max_queue = c->max_queue, .chat_template_file = c->chat_template,
                                .cache_dir = s->cache_dir[0] ? s->cache_dir : NULL};
    uv_timer_init(s->loop, &m->idle_timer);
    m->idle_timer.data = m;
    rlx_model_signature(cfg->path, m->sig);
    /* the profile: the file beside the weights, then the operator's [model.NAME] over it */
    int rc = rlx_profile_load_beside(&m->prof, cfg->path, &m->err);
    if (rc == RLX_ENOTFOUND) rc = 0;
    const rlx_profile *ini = rlx_serve_config_profile(c, cfg->name);
    if (!rc && ini) rc = rlx_profile_merge(&m->prof, ini, &m->err);
    if (rc) return rc;
    rlx_profile_apply_worker(&m->prof, &m->wc);
    /* the default heeds the affinity mask and a cgroup CPU quota (a container's --cpus) */
    if (m->wc.n_threads <= 0) m->wc.n_threads = rlx_cpu_count();
    if (m->prof.set) fprintf(stderr, "rlxd: model '%s': profile from %s\n", m->lname, m->prof.sources);
    return 0;
}

static int push_slot(rlx_srv *s, rlx_model_slot *m)
{
    if (s->n_models == s->cap_models) {
        size_t cap = s->cap_models ? s->cap_models * 2 : 8;
        rlx_model_slot **v = realloc(s->models, cap * sizeof *v);
        if (!v) return RLX_ENOMEM;
        s->models = v;
        s->cap_models = cap;
    }
    /* --models-dir's models stay in name order after the -m ones, as the folder lists them */
    size_t at = s->n_models;
    if (!m->boot)
        for (at = 0; at < s->n_models; at++)
            if (!s->models[at]->boot && strcmp(s->models[at]->cfg->name, m->cfg->name) > 0) break;
    memmove(&s->models[at + 1], &s->models[at], (s->n_models - at) * sizeof *s->models);
    s->models[at] = m;
    s->n_models++;
    return 0;
}

/* A --models-dir entry's slot (taking its strings); NULL when out of memory. A corrupt or
 * incomplete file, or a bad profile, is FAILED with its reason. */
static rlx_model_slot *add_dir_model(rlx_srv *s, rlx_model_entry *e)
{
    rlx_model_slot *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->own.name = e->name;
    m->own.path = e->path;
    m->cfg = &m->own;
    m->n_present = e->n_present;
    if (push_slot(s, m)) {
        free(m);
        return NULL;
    }
    e->name = e->path = NULL;
    s->n_dir_models++;
    if (slot_init(s, m, &m->own)) {
        m->state = RLX_MODEL_FAILED;
    } else if (e->n_present < e->n_parts) {
        rlx_errorf(&m->err, RLX_ENOTFOUND, "%s: %u of its %u parts are missing", m->own.path, e->n_parts - e->n_present,
                   e->n_parts);
        m->state = RLX_MODEL_FAILED;
    } else if (probe(m)) {
        m->state = RLX_MODEL_FAILED;
    }
    if (m->state == RLX_MODEL_FAILED) {
        memcpy(m->fail_sig, m->sig, sizeof m->sig); /* the files as they failed */
        fprintf(stderr, "rlxd: model '%s' cannot be served: %s\n", m->own.name, m->err.msg);
    }
    return m;
}

static void slot_free(rlx_model_slot *m)
{
    rlx_profile_free(&m->prof);
    free(m->own.name);
    free(m->own.path);
    free(m);
}

static void on_slot_closed(uv_handle_t *h)
{
    slot_free(h->data);
}

/* Takes slot i out of the list; its timer closes, then it is freed. Only for a slot nothing
 * uses: UNLOADED or FAILED, no users, no waiters. */
static void drop_slot(rlx_srv *s, size_t i)
{
    rlx_model_slot *m = s->models[i];
    memmove(&s->models[i], &s->models[i + 1], (s->n_models - i - 1) * sizeof *s->models);
    s->n_models--;
    s->n_dir_models--;
    uv_close((uv_handle_t *)&m->idle_timer, on_slot_closed);
}

static bool droppable(const rlx_model_slot *m)
{
    return !m->boot && (m->state == RLX_MODEL_UNLOADED || m->state == RLX_MODEL_FAILED) && !m->users &&
           !m->n_waiting;
}

int rlx_models_init(rlx_srv *s, rlx_error *err)
{
    const rlx_serve_config *c = s->cfg;
    rlx_model_entry *es = NULL;
    size_t ne = 0;
    if (!rlx_serve_cache_dir(c, s->cache_dir, sizeof s->cache_dir)) s->cache_dir[0] = 0;
    if (c->models_dir && rlx_model_scan(c->models_dir, &es, &ne, err)) return RLX_EINVAL;
    s->last_scan = rlx_now();
    for (size_t i = 0; i < c->n_models; i++) {
        rlx_model_slot *m = calloc(1, sizeof *m);
        if (m) m->boot = true, m->cfg = &c->models[i];
        if (!m || push_slot(s, m)) {
            free(m);
            rlx_model_scan_free(es, ne);
            return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        }
        if (slot_init(s, m, &c->models[i])) {
            rlx_model_scan_free(es, ne);
            return rlx_errorf(err, RLX_EINVAL, "model '%s': %s", c->models[i].name, m->err.msg);
        }
        /* not opened here: its load (on the threadpool) reads it; a FIFO or a slow disk must not
           hold the start-up. Its size is the estimate until then. */
        struct stat st;
        if (!stat(m->cfg->path, &st) && S_ISREG(st.st_mode)) m->bytes = (uint64_t)st.st_size;
    }
    for (size_t i = 0; i < ne; i++) {
        if (rlx_models_find(s, es[i].name)) {
            fprintf(stderr, "rlxd: %s: not served, a model given with -m is already named '%s'\n", es[i].path,
                    es[i].name);
            continue;
        }
        if (!add_dir_model(s, &es[i])) {
            rlx_model_scan_free(es, ne);
            return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        }
    }
    rlx_model_scan_free(es, ne);
    if (c->models_dir)
        fprintf(stderr, "rlxd: %zu model(s) in %s, loaded on demand\n", s->n_dir_models, c->models_dir);
    if (c->models_dir && !s->n_models)
        fprintf(stderr, "rlxd: nothing to serve yet: put GGUF files in %s (a file per model, or a subfolder with a "
                "split model's parts or a Hugging Face folder; the folder is read again on GET /v1/models), or "
                "start with -m hf:OWNER/REPO[:QUANT] (RLXD_MODEL=hf:...) to download one\n", c->models_dir);
    for (size_t i = 0; i < c->n_profiles; i++) /* a typo in a section name would go unnoticed */
        if (!rlx_models_find(s, c->profiles[i].name))
            fprintf(stderr, "rlxd: config section [model.%s] names no served model%s\n", c->profiles[i].name,
                    c->models_dir ? " (yet: it applies if one of that name appears in --models-dir)" : "");
    return 0;
}

void rlx_models_rescan(rlx_srv *s, bool force)
{
    const rlx_serve_config *c = s->cfg;
    if (!c->models_dir || s->stopping) return;
    double now = rlx_now();
    if (!force && now - s->last_scan < RLX_MODELS_RESCAN_S) return;
    s->last_scan = now;
    rlx_model_entry *es = NULL;
    size_t ne = 0;
    rlx_error err = {0};
    if (rlx_model_scan(c->models_dir, &es, &ne, &err)) {
        fprintf(stderr, "rlxd: cannot rescan --models-dir: %s (the list is kept)\n", err.msg);
        return;
    }
    /* models whose file went away (or changed while unloaded: read again below) */
    for (size_t i = 0; i < s->n_models;) {
        rlx_model_slot *m = s->models[i];
        if (m->boot) { i++; continue; }
        size_t k = 0;
        while (k < ne && strcmp(es[k].name, m->cfg->name)) k++;
        bool gone = k == ne, changed = false;
        if (!gone) {
            int64_t sig[RLX_MODEL_SIG];
            rlx_model_signature(es[k].path, sig);
            changed = strcmp(es[k].path, m->cfg->path) || memcmp(sig, m->sig, sizeof sig) || es[k].n_present != m->n_present;
        }
        if (!gone && !changed) {
            if (m->removed) fprintf(stderr, "rlxd: model '%s' is back in %s\n", m->lname, c->models_dir);
            m->removed = false;
            i++;
            continue;
        }
        if (droppable(m)) {
            fprintf(stderr, "rlxd: model '%s' %s\n", m->lname,
                    gone ? "is no longer in the models folder: not served" : "changed on disk: read again");
            drop_slot(s, i);
            continue;
        }
        if (gone && !m->removed) /* loaded or in use: it serves on until unloaded */
            fprintf(stderr, "rlxd: model '%s' is no longer in the models folder; it serves on until unloaded\n",
                    m->lname);
        m->removed = gone;
        i++;
    }
    /* models new to the folder (or dropped above for a change) */
    for (size_t k = 0; k < ne; k++) {
        if (rlx_models_find(s, es[k].name)) continue;
        rlx_model_slot *m = add_dir_model(s, &es[k]);
        if (!m) break;
        fprintf(stderr, "rlxd: model '%s' found in %s\n", m->lname, c->models_dir);
    }
    rlx_model_scan_free(es, ne);
}

void rlx_models_drop_removed(rlx_model_slot *m)
{
    rlx_srv *s = m->srv;
    if (!m->removed || !droppable(m) || s->stopping) return;
    for (size_t i = 0; i < s->n_models; i++)
        if (s->models[i] == m) {
            fprintf(stderr, "rlxd: model '%s' unloaded after its file went away: not served\n", m->lname);
            drop_slot(s, i);
            return;
        }
}

void rlx_models_free(rlx_srv *s)
{
    for (size_t i = 0; i < s->n_models; i++) {
        rlx_model_slot *m = s->models[i];
        if (m->w) rlx_worker_stop(m->w, false);
        if (m->w_new) rlx_worker_stop(m->w_new, false);
        m->w = m->w_new = NULL;
        slot_free(m);
    }
    free(s->models);
    s->models = NULL;
    s->n_models = s->cap_models = s->n_dir_models = 0;
}
