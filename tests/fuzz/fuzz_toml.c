/* fuzz_toml.c - libFuzzer target for the flat TOML reader of model profiles
 * (server/toml_flat.h): any bytes either read to their end or fail with RLX_EINVAL / RLX_ENOMEM
 * and a message naming the file; what reaches the callback holds together (integers in
 * decimal, strings valid UTF-8 without NUL, booleans spelt true/false). */
#include "server/toml_flat.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static int check(void *user, const char *table, const char *key, rlx_toml_kind kind, const char *value,
                 const char *src, rlx_error *err)
{
    (void)user;
    (void)err;
    if (!table || !key || !value || !strstr(src, "fuzz.toml:")) abort();
    size_t n = strlen(value);
    switch (kind) {
    case RLX_TOML_INT: {
        char *end;
        errno = 0;
        (void)strtoll(value, &end, 10);
        if (end == value || *end) abort();
        break;
    }
    case RLX_TOML_FLOAT: {
        char *end;
        (void)strtod(value, &end);
        if (end == value || *end) abort();
        break;
    }
    case RLX_TOML_BOOL:
        if (strcmp(value, "true") && strcmp(value, "false")) abort();
        break;
    case RLX_TOML_STRING: {
        utf8proc_int32_t cp;
        for (size_t i = 0; i < n;) {
            utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)value + i, (utf8proc_ssize_t)(n - i), &cp);
            if (k <= 0) abort();
            i += (size_t)k;
        }
        break;
    }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    FILE *f = size ? fmemopen(buf, size, "r") : fopen("/dev/null", "r");
    if (!f) {
        free(buf);
        return 0;
    }
    rlx_error err = {0};
    int rc = rlx_toml_flat_read(f, "fuzz.toml", check, NULL, &err);
    fclose(f);
    free(buf);
    if (rc && ((rc != RLX_EINVAL && rc != RLX_ENOMEM) || !err.msg[0])) abort();
    if (rc == RLX_EINVAL && !strstr(err.msg, "fuzz.toml")) abort();
    return 0;
}
