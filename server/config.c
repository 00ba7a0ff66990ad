/* config.c - flags, RLXD_* environment and INI for `rlxd serve` (see config.h). One table
 * describes every setting; each layer applies the same setter, lowest precedence first. */
#include "server/config.h"
#include "models/filemap.h"
#include "backends/dtype.h"
#include "server/cli.h"
#include "server/hf.h"
#include "proto/proto.h"
#include "engine/spec.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef enum { T_STR, T_INT, T_I64, T_BOOL, T_LOGFMT, T_KVTYPE, T_KEEPALIVE, T_PROB, T_AUTO } setting_type;

typedef struct setting {
    const char *name;        /* flag without "--"; env RLXD_<NAME>; INI key (dashes or underscores) */
    setting_type type;
    size_t off;
    long long lo, hi;        /* integer bounds */
} setting;

#define OFF(f) offsetof(rlx_serve_config, f)
static const setting settings[] = {
    {"host", T_STR, OFF(host), 0, 0},
    {"port", T_INT, OFF(port), 0, 65535},
    {"threads", T_INT, OFF(threads), 0, 1024},
    {"ctx", T_INT, OFF(ctx), 0, 1 << 24},
    {"api-key", T_STR, OFF(api_key), 0, 0},
    {"api-key-file", T_STR, OFF(api_key_file), 0, 0},
    {"stdio", T_BOOL, OFF(stdio), 0, 0},
    {"log-format", T_LOGFMT, OFF(log_json), 0, 0},
    {"max-seqs", T_INT, OFF(max_seqs), 1, 4096},
    {"max-batch-tokens", T_INT, OFF(max_batch_tokens), 1, 1 << 20},
    {"draft-max", T_INT, OFF(draft_max), 0, RLX_SPEC_MAX_DRAFT},
    {"draft-model", T_STR, OFF(draft_model), 0, 0},
    {"draft-p-min", T_PROB, OFF(draft_p_min), 0, 0},
    {"grammar-aside", T_AUTO, OFF(grammar_aside), 0, 0},
    {"kv-mem", T_I64, OFF(kv_mem_mib), 0, 1 << 24},
    {"state-cache-mb", T_I64, OFF(state_cache_mb), 0, 1 << 24},
    {"kv-type", T_KVTYPE, OFF(kv_type), 0, 0},
    {"kv-block", T_INT, OFF(kv_block), 1, 4096},
    {"db", T_STR, OFF(db), 0, 0},
    {"chat-template", T_STR, OFF(chat_template), 0, 0},
    {"session-ttl", T_INT, OFF(session_ttl), 0, 1 << 30},
    {"max-sessions", T_INT, OFF(max_sessions), 1, 1 << 24},
    {"backend", T_STR, OFF(backend), 0, 0},
    {"device", T_INT, OFF(device), 0, 64},
    {"max-body", T_I64, OFF(max_body), 1024, 1LL << 32},
    {"max-connections", T_INT, OFF(max_connections), 1, 65536},
    {"request-timeout", T_INT, OFF(request_timeout), 1, 86400},
    {"max-pending-bytes", T_I64, OFF(max_pending_bytes), 4096, 1LL << 32},
    {"max-queue", T_INT, OFF(max_queue), 1, 1 << 20},
    {"grace-seconds", T_INT, OFF(grace_seconds), 0, 86400},
    {"stop-timeout", T_INT, OFF(stop_timeout), 0, 86400},
    {"models-dir", T_STR, OFF(models_dir), 0, 0},
    {"max-loaded", T_INT, OFF(max_loaded), 0, 4096},
    {"max-loaded-mem", T_I64, OFF(max_loaded_mem), 0, 1LL << 30},
    {"keep-alive", T_KEEPALIVE, OFF(keep_alive), 0, 0},
    {"cors-origins", T_STR, OFF(cors_origins), 0, 0},
    {"cache-dir", T_STR, OFF(cache_dir), 0, 0},
};

/* Which layer last set a value: a later layer's --api-key replaces a lower layer's
 * --api-key-file and the other way round; both in one layer is an error. */
enum { L_DEFAULT, L_INI, L_ENV, L_FLAG };
static const char *const layer_names[] = {"defaults", "the config file", "the environment", "the command line"};

typedef struct load_state {
    rlx_serve_config *c;
    int layer;               /* the layer being applied */
    int key_layer, key_file_layer;
} load_state;

const char *rlx_serve_usage(void)
{
    return "usage: rlxd serve (-m FILE[:NAME] [-m ...] | --models-dir DIR) [options]\n"
           "  -m, --model FILE[:NAME]   serve a GGUF model (repeatable; the first is the default)\n"
           "  -m hf:OWNER/REPO[:QUANT][:NAME], -m hf:OWNER/REPO/FILE.gguf[:NAME]\n"
           "                            a Hugging Face model, downloaded first as `rlxd pull` does\n"
           "                            (reused once in the cache; HF_TOKEN, HF_ENDPOINT)\n"
           "  --host ADDR               listen address (127.0.0.1)\n"
           "  --port N                  listen port (8080; 0 picks a free one)\n"
           "  --threads N               compute threads per model (default: the CPUs\n"
           "                            the affinity mask and cgroup quota allow)\n"
           "  --ctx N                   context length (the model's)\n"
           "  --chat-template FILE      a Jinja chat template used instead of the models' own\n"
           "                            ([model.NAME] chat-template=FILE for one model)\n"
           "  --api-key KEY[,KEY2...]   require Authorization: Bearer KEY (all routes but /health)\n"
           "  --api-key-file F          read the keys from a file, one per line\n"
           "  --config FILE             INI file ([server] keys as the flags, [model.NAME] path=...\n"
           "                            and the model's profile: ctx, kv-type, max-seqs, temperature,\n"
           "                            top-p, top-k, ...; also read from <model>.rlx.toml or\n"
           "                            <model>.rlx.ini beside the weights)\n"
           "  --stdio                   JSON lines on stdin -> results on stdout, no HTTP\n"
           "  --log-format text|json    access log format on stderr (text)\n"
           "  --max-seqs N              concurrent sequences per model (16)\n"
           "  --max-batch-tokens N      tokens per engine step (512)\n"
           "  --draft-max N             speculative decoding by prompt lookup: draft tokens per\n"
           "                            step at most (8; 0: off). Outputs are unchanged.\n"
           "  --draft-model GGUF        draft with this small model instead (it must share the\n"
           "                            vocabulary of the -m models; a --models-dir model takes\n"
           "                            draft-model from its profile)\n"
           "  --draft-p-min P           the draft model drafts while its top probability is >= P\n"
           "                            (0.75)\n"
           "  --grammar-aside auto|on|off  grammar masks and tables on a helper thread beside\n"
           "                            the forward pass (auto: on a GPU backend, or when\n"
           "                            --threads leaves a core free)\n"
           "  --kv-mem MiB              KV cache memory per model (engine default)\n"
           "  --kv-type f16|f32|q8_0    KV cache element type (f16)\n"
           "  --kv-block N              tokens per KV block, the prefix-sharing unit (16)\n"
           "  --state-cache-mb MiB      recurrent-state checkpoints per hybrid model, so prompts and\n"
           "                            sessions share a prefix (256; 0: none, recompute)\n"
           "  --db PATH                 sessions database, sqlite3 (none: sessions in memory only)\n"
           "  --session-ttl SECONDS     forget sessions idle this long (0: never)\n"
           "  --max-sessions N          sessions kept per model (1024)\n"
           "  --backend cpu|vulkan|cuda compute backend (cpu)\n"
           "  --device N                GPU index for vulkan/cuda (0)\n"
           "  --max-body BYTES          request body limit (4194304)\n"
           "  --max-connections N       requests answered at once before 503 (512)\n"
           "  --request-timeout SECONDS a request must arrive whole this soon after its\n"
           "                            connection opened (or the previous answer), else 408 (30)\n"
           "  --max-pending-bytes BYTES a stream whose client leaves more unread is cancelled (4194304)\n"
           "  --max-queue N             waiting requests per model (beyond free --max-seqs slots) before 503 (256)\n"
           "  --grace-seconds N         on SIGTERM, how long requests in flight may finish (30)\n"
           "  --stop-timeout N          then how long the models' workers, loads and unloads may\n"
           "                            take to stop before rlxd exits 1 without them (10; 0: wait)\n"
           "  --models-dir DIR          serve every GGUF model in DIR (and its subfolders), loaded\n"
           "                            when a request names it\n"
           "  --max-loaded N            models loaded at once; the least recently used idle one\n"
           "                            is unloaded to make room (0: no limit)\n"
           "  --max-loaded-mem MiB      memory the loaded models may hold, weights and KV (0: no limit)\n"
           "  --keep-alive DURATION     how long an idle model stays loaded: \"5m\", \"30s\", seconds,\n"
           "                            0 unloads after each request, -1 forever (default -1)\n"
           "  --cors-origins LIST       browser clients: \"*\" or origins (http://localhost:3000,...)\n"
           "                            get CORS headers and preflight answers (default: off)\n"
           "  --cache-dir DIR           where built tokenizers and Vulkan pipelines are cached between loads\n"
           "                            ($XDG_CACHE_HOME/rlxd or ~/.cache/rlxd; none: off)\n"
           "Every flag is also RLXD_<FLAG> in the environment (RLXD_MODEL takes a comma list)\n"
           "and a key in the INI [server] section; flags > environment > INI > defaults.\n";
}

static const setting *find_setting(const char *name)
{
    char norm[64];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof norm; i++) norm[i] = name[i] == '_' ? '-' : (char)tolower((unsigned char)name[i]);
    norm[i] = 0;
    for (size_t k = 0; k < RLX_ARRAY_LEN(settings); k++)
        if (!strcmp(settings[k].name, norm)) return &settings[k];
    if (!strcmp(norm, "cors-origin")) return find_setting("cors-origins"); /* one origin is a list too */
    return NULL;
}

static int parse_bool(const char *v, bool *out)
{
    if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) *out = true;
    else if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) *out = false;
    else return -1;
    return 0;
}

static int apply_value(rlx_serve_config *c, const setting *s, const char *v, const char *src, rlx_error *err)
{
    char *base = (char *)c + s->off;
    switch (s->type) {
    case T_STR: {
        rlx_error cerr = {0};
        if (s->off == OFF(cors_origins) && rlx_cors_check_config(v, &cerr))
            return rlx_errorf(err, RLX_EINVAL, "%s: %s", src, cerr.msg);
        char **p = (char **)base;
        free(*p);
        *p = strdup(v);
        return *p ? 0 : rlx_errorf(err, RLX_ENOMEM, "out of memory");
    }
    case T_INT: case T_I64: {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < s->lo || x > s->hi)
            return rlx_errorf(err, RLX_EINVAL, "%s: '%s' must be an integer between %lld and %lld, got '%s'",
                              src, s->name, s->lo, s->hi, v);
        if (s->type == T_INT) *(int *)base = (int)x;
        else *(int64_t *)base = x;
        return 0;
    }
    case T_BOOL:
        if (parse_bool(v, (bool *)base))
            return rlx_errorf(err, RLX_EINVAL, "%s: '%s' must be true or false, got '%s'", src, s->name, v);
        return 0;
    case T_LOGFMT:
        if (strcmp(v, "text") && strcmp(v, "json"))
            return rlx_errorf(err, RLX_EINVAL, "%s: 'log-format' must be text or json, got '%s'", src, v);
        *(bool *)base = !strcmp(v, "json");
        return 0;
    case T_AUTO:
        if (strcmp(v, "auto") && strcmp(v, "on") && strcmp(v, "off"))
            return rlx_errorf(err, RLX_EINVAL, "%s: '%s' must be auto, on or off, got '%s'", src, s->name, v);
        *(int *)base = !strcmp(v, "on") ? 1 : !strcmp(v, "off") ? -1 : 0;
        return 0;
    case T_KVTYPE:
        if (strcmp(v, "f16") && strcmp(v, "f32") && strcmp(v, "q8_0"))
            return rlx_errorf(err, RLX_EINVAL, "%s: 'kv-type' must be f16, f32 or q8_0, got '%s'", src, v);
        *(int *)base = !strcmp(v, "f16") ? RLX_F16 : !strcmp(v, "f32") ? RLX_F32 : RLX_Q8_0;
        return 0;
    case T_PROB: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *end || !(x >= 0 && x <= 1))
            return rlx_errorf(err, RLX_EINVAL, "%s: '%s' must be a number between 0 and 1, got '%s'", src, s->name, v);
        *(float *)base = (float)x;
        return 0;
    }
    case T_KEEPALIVE: {
        rlx_error kerr = {0};
        if (rlx_keep_alive_parse(v, (double *)base, &kerr))
            return rlx_errorf(err, RLX_EINVAL, "%s: %s", src, kerr.msg);
        return 0;
    }
    }
    return 0;
}

static int apply(load_state *ls, const setting *s, const char *v, const char *src, rlx_error *err)
{
    bool is_key = s->off == OFF(api_key), is_file = s->off == OFF(api_key_file);
    if (is_key || is_file) {
        int *mine = is_key ? &ls->key_layer : &ls->key_file_layer;
        int other = is_key ? ls->key_file_layer : ls->key_layer;
        char **other_val = is_key ? &ls->c->api_key_file : &ls->c->api_key;
        if (other == ls->layer)
            return rlx_errorf(err, RLX_EINVAL, "%s: give either 'api-key' or 'api-key-file', not both (in %s)", src,
                              layer_names[ls->layer]);
        if (other > L_DEFAULT) { /* a lower layer's choice of the other form gives way */
            free(*other_val);
            *other_val = NULL;
            if (is_key) ls->key_file_layer = L_DEFAULT;
            else ls->key_layer = L_DEFAULT;
        }
        *mine = ls->layer;
    }
    return apply_value(ls->c, s, v, src, err);
}

static void clear_models(rlx_serve_config *c)
{
    for (size_t i = 0; i < c->n_models; i++) {
        free(c->models[i].name);
        free(c->models[i].path);
    }
    memset(c->models, 0, sizeof c->models);
    c->n_models = 0;
}

static rlx_serve_model *model_by_name(rlx_serve_config *c, const char *name)
{
    for (size_t i = 0; i < c->n_models; i++)
        if (!strcmp(c->models[i].name, name)) return &c->models[i];
    return NULL;
}

static int add_model(rlx_serve_config *c, const char *path, const char *name, const char *src, rlx_error *err)
{
    if (!path[0]) return rlx_errorf(err, RLX_EINVAL, "%s: a model needs a file path (FILE[:NAME])", src);
    char derived[256];
    if (!name || !name[0]) {
        const char *b = strrchr(path, '/');
        snprintf(derived, sizeof derived, "%s", b ? b + 1 : path);
        size_t n = strlen(derived);
        if (n > 5 && !strcmp(derived + n - 5, ".gguf")) derived[n - 5] = 0;
        name = derived;
    }
    if (model_by_name(c, name))
        return rlx_errorf(err, RLX_EINVAL, "%s: two models are named '%s'; give one another name with FILE:NAME",
                          src, name);
    if (c->n_models == RLX_SERVE_MAX_MODELS)
        return rlx_errorf(err, RLX_EINVAL, "%s: at most %d models can be served", src, RLX_SERVE_MAX_MODELS);
    rlx_serve_model *m = &c->models[c->n_models];
    m->path = strdup(path);
    m->name = strdup(name);
    if (!m->path || !m->name) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    c->n_models++;
    return 0;
}

/* A Hugging Face reference (hf.h): kept as "hf:OWNER/REPO[:QUANT]" or "hf:OWNER/REPO/FILE" in
 * path, resolved to the downloaded file by `rlxd serve` before the models load. */
static int add_hf_spec(rlx_serve_config *c, const char *spec, const char *src, rlx_error *err)
{
    rlx_hf_ref r;
    rlx_error e = {0};
    if (rlx_hf_ref_parse(spec, true, &r, &e)) return rlx_errorf(err, RLX_EINVAL, "%s: %s", src, e.msg);
    char path[800], name[300];
    if (r.file[0]) snprintf(path, sizeof path, "hf:%s/%s", r.repo, r.file);
    else snprintf(path, sizeof path, "hf:%s%s%s", r.repo, r.quant[0] ? ":" : "", r.quant);
    if (r.name[0]) snprintf(name, sizeof name, "%s", r.name);
    else rlx_hf_ref_default_name(&r, name, sizeof name);
    return add_model(c, path, name, src, err);
}

/* FILE[:NAME]: the part after the last ':' is a name when it holds no '/'. */
static int add_model_spec(rlx_serve_config *c, const char *spec, const char *src, rlx_error *err)
{
    if (rlx_hf_is_ref(spec)) return add_hf_spec(c, spec, src, err);
    char buf[4200]; /* PATH_MAX and a name: a longer one is refused, never cut to another file */
    if (strlen(spec) >= sizeof buf)
        return rlx_errorf(err, RLX_EINVAL, "%s: the model '%.64s...' is %zu bytes long, over the %zu a path and name "
                          "may take", src, spec, strlen(spec), sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", spec);
    char *colon = strrchr(buf, ':');
    const char *name = NULL;
    if (colon && !strchr(colon, '/')) {
        *colon = 0;
        name = colon + 1;
    }
    return add_model(c, buf, name, src, err);
}

static rlx_profile *profile_by_name(rlx_serve_config *c, const char *name)
{
    for (size_t i = 0; i < c->n_profiles; i++)
        if (!strcmp(c->profiles[i].name, name)) return &c->profiles[i].prof;
    rlx_serve_profile *v = realloc(c->profiles, (c->n_profiles + 1) * sizeof *v);
    if (!v) return NULL;
    c->profiles = v;
    rlx_serve_profile *p = &v[c->n_profiles];
    memset(p, 0, sizeof *p);
    if (!(p->name = strdup(name))) return NULL;
    c->n_profiles++;
    return &p->prof;
}

const rlx_profile *rlx_serve_config_profile(const rlx_serve_config *c, const char *name)
{
    for (size_t i = 0; i < c->n_profiles; i++)
        if (!strcmp(c->profiles[i].name, name)) return &c->profiles[i].prof;
    return NULL;
}

typedef struct ini_ctx {
    load_state *ls;
    rlx_serve_config *c;
    rlx_error *err;
    int rc;
    bool models_given;
    char src[1100];
    const char *path;
    FILE *f;
    int line;                /* the line being read (the reader counts them) */
} ini_ctx;

static char *ini_read_line(char *str, int num, void *stream)
{
    ini_ctx *x = stream;
    char *r = fgets(str, num, x->f);
    if (r && !x->rc && !strchr(r, '\n') && strlen(r) + 1 < (size_t)num && !feof(x->f)) {
        /* fgets stopped at a newline past a NUL byte (it was reported as a line too long) */
        x->rc = rlx_errorf(x->err, RLX_EINVAL, "config %s:%d: the line holds a NUL byte", x->path, x->line + 1);
        return NULL;
    }
    if (r && (strchr(r, '\n') || feof(x->f))) x->line++;
    else if (r && !x->rc) { /* inih reads lines of at most num - 1 bytes: the rest would be cut off
                               and read as a line of its own (another key, a bad section) */
        x->rc = rlx_errorf(x->err, RLX_EINVAL, "config %s:%d: a line longer than %d bytes (the INI reader's limit)",
                           x->path, x->line + 1, num - 2);
        return NULL;
    }
    return r;
}

static int on_ini(void *user, const char *section, const char *key, const char *value)
{
    ini_ctx *x = user;
    if (x->rc) return 1; /* inih: nonzero = keep going; errors are kept in x->rc */
    snprintf(x->src, sizeof x->src, "config %s:%d", x->path, x->line);
    if (!strcmp(section, "server")) {
        if (!strcmp(key, "model")) {
            x->rc = add_model_spec(x->c, value, x->src, x->err);
        } else {
            const setting *s = find_setting(key);
            if (!s) {
                x->rc = rlx_errorf(x->err, RLX_EINVAL, "%s: unknown key '%s' in [server]", x->src, key);
                return 1;
            }
            x->rc = apply(x->ls, s, value, x->src, x->err);
        }
    } else if (!strncmp(section, "model.", 6) && section[6]) {
        const char *name = section + 6;
        rlx_serve_model *m = model_by_name(x->c, name);
        if (!strcmp(key, "path")) {
            if (m) {
                free(m->path);
                if (!(m->path = strdup(value))) x->rc = rlx_errorf(x->err, RLX_ENOMEM, "out of memory");
            } else {
                x->rc = add_model(x->c, value, name, x->src, x->err);
            }
        } else {
            rlx_profile *p = profile_by_name(x->c, name);
            if (!p) x->rc = rlx_errorf(x->err, RLX_ENOMEM, "out of memory");
            else x->rc = rlx_profile_set(p, key, value, x->src, NULL, x->err);
        }
    } else {
        x->rc = rlx_errorf(x->err, RLX_EINVAL, "%s: unknown section [%s] ([server] or [model.NAME])", x->src, section);
    }
    return 1;
}

static int load_env(load_state *ls, rlx_error *err)
{
    rlx_serve_config *c = ls->c;
    ls->layer = L_ENV;
    char env[64], src[80];
    for (size_t k = 0; k < RLX_ARRAY_LEN(settings); k++) {
        size_t i = 0;
        i += (size_t)snprintf(env, sizeof env, "RLXD_");
        for (const char *p = settings[k].name; *p && i + 1 < sizeof env; p++)
            env[i++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
        env[i] = 0;
        const char *v = getenv(env);
        if (!v) continue;
        snprintf(src, sizeof src, "environment %s", env);
        int rc = apply(ls, &settings[k], v, src, err);
        if (rc) return rc;
    }
    const char *models = getenv("RLXD_MODEL");
    if (models && models[0]) {
        clear_models(c);
        char *copy = strdup(models), *save = NULL;
        if (!copy) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        int rc = 0;
        for (char *t = strtok_r(copy, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save))
            rc = add_model_spec(c, t, "environment RLXD_MODEL", err);
        free(copy);
        if (rc) return rc;
    }
    return 0;
}

static int load_flags(load_state *ls, int argc, char **argv, rlx_error *err)
{
    rlx_serve_config *c = ls->c;
    ls->layer = L_FLAG;
    bool models_cleared = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { c->help = true; continue; }
        if (strncmp(a, "--", 2) && strcmp(a, "-m"))
            return rlx_errorf(err, RLX_EINVAL, "unexpected argument '%s' (see rlxd serve --help)", a);
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(a, '=');
        if (!strcmp(a, "-m")) snprintf(name, sizeof name, "model");
        else if (eq) { snprintf(name, sizeof name, "%.*s", (int)(eq - a - 2), a + 2); val = eq + 1; }
        else snprintf(name, sizeof name, "%s", a + 2);
        const setting *s = strcmp(name, "model") && strcmp(name, "config") ? find_setting(name) : NULL;
        if (strcmp(name, "model") && strcmp(name, "config") && !s)
            return rlx_errorf(err, RLX_EINVAL, "unknown option '%s' (see rlxd serve --help)", a);
        if (!val && s && s->type == T_BOOL) val = "true";
        if (!val) {
            if (i + 1 >= argc) return rlx_errorf(err, RLX_EINVAL, "option '%s' needs a value", a);
            val = argv[++i];
        }
        int rc = 0;
        if (!strcmp(name, "model")) {
            if (!models_cleared) { clear_models(c); models_cleared = true; }
            rc = add_model_spec(c, val, "command line -m", err);
        } else if (!strcmp(name, "config")) {
            continue; /* read first, see rlx_serve_config_load */
        } else {
            char src[96];
            snprintf(src, sizeof src, "command line --%s", s->name);
            rc = apply(ls, s, val, src, err);
        }
        if (rc) return rc;
    }
    return 0;
}

/* The --config file (else RLXD_CONFIG's); given twice, an error (the second was ignored while
 * every other flag takes its last value: one file is read, so which one must be clear). */
static int find_config_flag(int argc, char **argv, const char **out, rlx_error *err)
{
    *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = !strncmp(argv[i], "--config=", 9) ? argv[i] + 9 : !strcmp(argv[i], "--config") && i + 1 < argc ? argv[++i] : NULL;
        if (v && *out) return rlx_errorf(err, RLX_EINVAL, "--config is given twice ('%s' and '%s'); one file is read", *out, v);
        if (v) *out = v;
    }
    if (!*out) *out = getenv("RLXD_CONFIG");
    return 0;
}

/* The API keys of --api-key (comma-separated, as llama-server reads it) or of --api-key-file
 * (one per line, blank lines skipped, as llama-server reads it; a UTF-8 BOM first skipped), each
 * trimmed of spaces and tabs, into *out (malloc'ed, replacing it) as lines joined by '\n'. A key
 * no client can send in a header (a control byte) or an empty list is an error: the server
 * started with such a file and answered 401 to everything. */
static int key_list(const char *s, size_t n, char sep, const char *file, char **out, rlx_error *err)
{
    char *list = malloc(n + 1), *w = list;
    if (!list) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    if (n >= 3 && !memcmp(s, "\xef\xbb\xbf", 3)) s += 3, n -= 3;
    int line = 0;
    for (size_t i = 0; i <= n;) {
        size_t e = i;
        while (e < n && s[e] != sep) e++;
        line++;
        size_t a = i, b = e;
        while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r')) a++;
        while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r')) b--;
        for (size_t k = a; k < b; k++) {
            if ((unsigned char)s[k] < 0x20 || s[k] == 0x7f) {
                free(list);
                return file ? rlx_errorf(err, RLX_EINVAL, "the API key on line %d of %s holds a control character", line, file)
                            : rlx_errorf(err, RLX_EINVAL, "API key %d of --api-key holds a control character", line);
            }
        }
        if (b > a) {
            if (w > list) *w++ = '\n';
            memcpy(w, s + a, b - a);
            w += b - a;
        } else if (!file && n) {
            free(list);
            return rlx_errorf(err, RLX_EINVAL, "API key %d of --api-key is empty (keys are separated by commas)", line);
        }
        i = e + 1;
    }
    *w = 0;
    if (w == list) {
        free(list);
        return file ? rlx_errorf(err, RLX_EINVAL, "the API key file %s holds no key", file)
                    : rlx_errorf(err, RLX_EINVAL, "the API key must not be empty (omit --api-key for no auth)");
    }
    free(*out);
    *out = list;
    return 0;
}

int rlx_serve_config_load(rlx_serve_config *c, int argc, char **argv, rlx_error *err)
{
    memset(c, 0, sizeof *c);
    c->port = 8080;
    c->max_seqs = 16;
    c->max_batch_tokens = 512;
    c->draft_max = 8;
    c->draft_p_min = 0.75f;
    c->state_cache_mb = 256;
    c->kv_type = RLX_F16;
    c->kv_block = 16;
    c->max_body = 4 << 20;
    c->max_connections = 512;
    c->request_timeout = 30;
    c->max_pending_bytes = 4 << 20;
    c->max_sessions = 1024;
    c->max_queue = 256;
    c->grace_seconds = 30;
    c->stop_timeout = 10;
    c->keep_alive = -1;
    load_state ls = {.c = c, .layer = L_INI};
    int rc = 0;
    if (!(c->host = strdup("127.0.0.1"))) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    const char *cfg;
    if ((rc = find_config_flag(argc, argv, &cfg, err))) return rc;
    if (cfg) {
        if (!(c->config_path = strdup(cfg))) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        ini_ctx x = {.ls = &ls, .c = c, .err = err, .path = cfg};
        int line = -1;
        rlx_error oe = {0};
        if (rlx__fopen_regular(cfg, 16 << 20, &x.f, &oe)) /* not a FIFO, /dev/zero or a folder */
            return rlx_errorf(err, RLX_EINVAL, "cannot read config file %s", oe.msg[0] ? oe.msg : cfg);
        line = ini_parse_stream(ini_read_line, &x, on_ini, &x);
        fclose(x.f);
        if (x.rc) return x.rc;
        if (line < 0) return rlx_errorf(err, RLX_EINVAL, "cannot read config file %s", cfg);
        if (line > 0) return rlx_errorf(err, RLX_EINVAL, "config %s:%d: syntax error", cfg, line);
    }
    if ((rc = load_env(&ls, err)) || (rc = load_flags(&ls, argc, argv, err))) return rc;
    if (c->help) return 0;
    if (c->api_key_file) {
        size_t n = 0;
        char *k = NULL;
        rlx_error ke = {0};
        if (rlx__read_file(c->api_key_file, &k, &n, &ke)) /* a regular file: never a FIFO's wait */
            return rlx_errorf(err, RLX_EINVAL, "cannot read the API key file %s (%s)", c->api_key_file, ke.msg);
        rc = key_list(k, n, '\n', c->api_key_file, &c->api_key, err);
        free(k);
        if (rc) return rc;
    } else if (c->api_key && (rc = key_list(c->api_key, strlen(c->api_key), ',', NULL, &c->api_key, err))) {
        return rc;
    }
    /* a backend is named when given: '' ran on the CPU under an empty name (in the ready line,
       the metrics and system_fingerprint), 'foo' failed only at load, after listening */
    if (c->backend && strcmp(c->backend, "cpu") && strcmp(c->backend, "vulkan") && strcmp(c->backend, "cuda"))
        return rlx_errorf(err, RLX_EINVAL, "--backend must be cpu, vulkan or cuda, not '%s'", c->backend);
    /* files every model reads: a FIFO, socket or device there would hold each load (a FIFO) or
       never end (/dev/zero), so they are refused at start, by stat alone (no wait) */
    const struct { const char *flag, *path; } files[] = {{"--draft-model", c->draft_model}, {"--chat-template", c->chat_template}};
    for (size_t i = 0; i < RLX_ARRAY_LEN(files); i++) {
        if (rlx__special_file(files[i].path))
            return rlx_errorf(err, RLX_EINVAL, "%s %s is a FIFO, socket or device, not a file", files[i].flag, files[i].path);
    }
    if (c->n_models == 0 && !c->models_dir)
        return rlx_errorf(err, RLX_EINVAL, "no model to serve: give -m FILE[:NAME], --models-dir DIR, RLXD_MODEL or a "
                          "[model.NAME] section with path=... in the config file");
    if (c->max_loaded > 0 && c->n_models > (size_t)c->max_loaded)
        return rlx_errorf(err, RLX_EINVAL, "--max-loaded %d is fewer than the %zu models given with -m, which load at "
                          "start", c->max_loaded, c->n_models);
    return 0;
}

bool rlx_serve_cache_dir(const rlx_serve_config *c, char *buf, size_t cap)
{
    if (c->cache_dir && c->cache_dir[0]) {
        if (!strcmp(c->cache_dir, "none")) return false;
        snprintf(buf, cap, "%s", c->cache_dir);
        return true;
    }
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') snprintf(buf, cap, "%s/rlxd", xdg);
    else if (home && home[0]) snprintf(buf, cap, "%s/.cache/rlxd", home);
    else return false;
    return true;
}

const char *const *rlx_serve_setting_names(size_t *n)
{
    static const char *names[RLX_ARRAY_LEN(settings)];
    for (size_t k = 0; k < RLX_ARRAY_LEN(settings); k++) names[k] = settings[k].name;
    *n = RLX_ARRAY_LEN(settings);
    return names;
}

int rlx_serve_config_get(const rlx_serve_config *c, const char *name, char *buf, size_t cap)
{
    const setting *s = find_setting(name);
    if (!s) return RLX_ENOTFOUND;
    const char *base = (const char *)c + s->off;
    switch (s->type) {
    case T_STR: snprintf(buf, cap, "%s", *(char *const *)base ? *(char *const *)base : ""); break;
    case T_INT: snprintf(buf, cap, "%d", *(const int *)base); break;
    case T_I64: snprintf(buf, cap, "%lld", (long long)*(const int64_t *)base); break;
    case T_BOOL: snprintf(buf, cap, "%s", *(const bool *)base ? "true" : "false"); break;
    case T_LOGFMT: snprintf(buf, cap, "%s", *(const bool *)base ? "json" : "text"); break;
    case T_KVTYPE: {
        int t = *(const int *)base;
        snprintf(buf, cap, "%s", t == RLX_F16 ? "f16" : t == RLX_F32 ? "f32" : "q8_0");
        break;
    }
    case T_KEEPALIVE: snprintf(buf, cap, "%.17g", *(const double *)base); break;
    case T_PROB: snprintf(buf, cap, "%g", (double)*(const float *)base); break;
    case T_AUTO: {
        int v = *(const int *)base;
        snprintf(buf, cap, "%s", v > 0 ? "on" : v < 0 ? "off" : "auto");
        break;
    }
    }
    return 0;
}

void rlx_serve_config_free(rlx_serve_config *c)
{
    clear_models(c);
    for (size_t i = 0; i < c->n_profiles; i++) {
        free(c->profiles[i].name);
        rlx_profile_free(&c->profiles[i].prof);
    }
    free(c->profiles);
    free(c->host);
    free(c->api_key);
    free(c->api_key_file);
    free(c->config_path);
    free(c->db);
    free(c->chat_template);
    free(c->draft_model);
    free(c->backend);
    free(c->models_dir);
    free(c->cors_origins);
    free(c->cache_dir);
    memset(c, 0, sizeof *c);
}
