/* util.c - small helpers shared by the subcommands. */
#include "server/cli.h"

#include <stdio.h>
#include <stdlib.h>

char *rlx_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
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
