/* sha256.h - SHA-256 (FIPS 180-4) for `rlxd pull`'s checksums: Hugging Face gives the sha256 of
 * a large file as its ETag / X-Linked-Etag.
 *
 * Threads: any; a context is used by one thread at a time. Ownership: plain values. */
#ifndef RLX_SHA256_H
#define RLX_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct rlx_sha256 {
    uint32_t h[8];
    uint64_t len;            /* bytes hashed so far */
    uint8_t buf[64];
    size_t n;                /* bytes waiting in buf */
} rlx_sha256;

void rlx_sha256_init(rlx_sha256 *s);
void rlx_sha256_update(rlx_sha256 *s, const void *data, size_t len);
/* The digest as 64 lowercase hex digits and a NUL. */
void rlx_sha256_hex(rlx_sha256 *s, char out[65]);
/* The digest of a whole file into out; -1 (errno set) when it cannot be read. */
int rlx_sha256_file(const char *path, char out[65]);

#endif
