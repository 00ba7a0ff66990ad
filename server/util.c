/* util.c - small helpers shared by the subcommands. */
#include "server/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "models/filemap.h"

#include "backends/dtype.h"

#include <cjson/cJSON.h>

char *rlx_read_file(const char *path, size_t *len)
{
    struct stat st; /* a device (/dev/zero) never ends: refused; a FIFO (<(cmd)) is read */
    if (!stat(path, &st) && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISDIR(st.st_mode))) {
        errno = S_ISDIR(st.st_mode) ? EISDIR : ENODEV;
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        if (cap >= RLX_CLI_FILE_MAX) { /* a pipe that never ends */
            free(buf);
            fclose(f);
            errno = EFBIG;
            return NULL;
        }
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
    }
    if (buf && ferror(f)) { free(buf); buf = NULL; }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

bool rlx_arg_long(const char *cmd, const char *flag, const char *val, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < min || v > max) {
        fprintf(stderr, "rlxd %s: %s expects an integer in [%ld, %ld], got '%s'\n", cmd, flag, min, max, val);
        return false;
    }
    *out = v;
    return true;
}

bool rlx_arg_float(const char *cmd, const char *flag, const char *val, double min, double max, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end || !(v >= min && v <= max)) {
        fprintf(stderr, "rlxd %s: %s expects a number in [%g, %g], got '%s'\n", cmd, flag, min, max, val);
        return false;
    }
    *out = (float)v;
    return true;
}

char *rlx_json_string(const char *s)
{
    cJSON *v = cJSON_CreateString(s ? s : "");
    char *out = v ? cJSON_PrintUnformatted(v) : NULL;
    cJSON_Delete(v);
    return out;
}

bool rlx__cli_model_path_ok(const char *cmd, const char *path)
{
    const char *what = rlx__special_file(path); /* else the open says the rest */
    if (what) fprintf(stderr, "rlxd %s: %s is %s, not a model file\n", cmd, path, what);
    return !what;
}

const char *rlx_arg_value(const char *cmd, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "rlxd %s: %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int rlx_arg_kv_type(const char *val)
{
    if (!strcmp(val, "f16")) return RLX_F16;
    if (!strcmp(val, "f32")) return RLX_F32;
    if (!strcmp(val, "q8_0")) return RLX_Q8_0;
    return -1;
}
