/* session_snapshot.c - KV snapshot files of sessions, and the model identity they are tied to.
 *
 * A snapshot holds a session's pinned blocks (full, registered): a header, then per block and
 * per KV layer its K then V bytes in the pool's row layout (backends/backend.h), each layer at
 * its own row width; layers without KV have no bytes (for a model whose layers are all KV of
 * one width this is the version 3 layout, unchanged). Blocks are read and written through
 * engine/memory.h. A model with recurrent-state layers pins the blocks up to its latest state
 * checkpoint (engine/memory.h), and its file (magic RLXKS1) carries that checkpoint's bytes after
 * the blocks (every state layer's slot, in layer order; in the checksum too), which a restore
 * puts back into the checkpoint cache; without a checkpoint cache it writes none. The header names
 * the model hash and the chained content hash of the last block (engine/kv.h), so a file is
 * loaded only by the same model file and KV layout, for the same token history, and a checksum
 * over the header and every K/V byte, verified before any block enters the pool; anything else
 * (a file of another model, one overwritten by a later turn whose row did not commit, a
 * damaged one, one of an older format version) is ignored and the history recomputed.
 *
 * The model hash covers every byte of the model file, not just its shapes: two files of one
 * shape with other weights must not read each other's KV. Measured on this project's machine
 * (page cache warm): 0.07-0.09 s for a 1.2 GB file, single-threaded. */
#include "engine/worker_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* version 3 added the checksum; files of version 2 fail the magic and are recomputed */
static const char kv_magic[8] = {'R', 'L', 'X', 'K', 'V', '3', 0, 0};
/* a model with state layers: the blocks, then the state checkpoint at their end */
static const char ks_magic[8] = {'R', 'L', 'X', 'K', 'S', '1', 0, 0};

static const char *magic_of(const rlx_runner *r) { return r->mem.has_state ? ks_magic : kv_magic; }

typedef struct kv_header {
    char magic[8];
    uint64_t model_hash;
    uint32_t kv_type, block_size, n_layers, n_blocks;
    uint64_t kv_cols, n_tokens;   /* tokens covered by the blocks */
    uint64_t last_hash;           /* chained content hash of the last block */
    uint64_t checksum;            /* kv_checksum: this header (checksum 0) then each K/V buffer */
} kv_header;

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* xxHash64's stripe round over four lanes (32-byte stripes), then the tail bytes: a full pass
 * over the data at memory speed. Not cryptographic: it tells files apart, it does not resist
 * someone forging a collision. */
static uint64_t digest_bytes(const uint8_t *p, size_t n, uint64_t seed)
{
    const uint64_t P1 = 0x9E3779B185EBCA87ULL, P2 = 0xC2B2AE3D27D4EB4FULL;
    uint64_t a = seed + P1 + P2, b = seed + P2, c = seed, d = seed - P1;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t x[4];
        memcpy(x, p + i, 32);
        a = rotl64(a + x[0] * P2, 31) * P1;
        b = rotl64(b + x[1] * P2, 31) * P1;
        c = rotl64(c + x[2] * P2, 31) * P1;
        d = rotl64(d + x[3] * P2, 31) * P1;
    }
    uint64_t h = rotl64(a, 1) + rotl64(b, 7) + rotl64(c, 12) + rotl64(d, 18) + (uint64_t)n;
    for (; i < n; i++) h = rotl64(h ^ (p[i] * P1), 11) * P2;
    return h;
}

/* The snapshot's checksum starts from its header (checksum field 0) and chains over each K
 * and V buffer in file order, so a reader can verify in fixed-size pieces. */
static uint64_t kv_checksum_start(const kv_header *h)
{
    kv_header c = *h;
    c.checksum = 0;
    return digest_bytes((const uint8_t *)&c, sizeof c, 0x524C584B56330000ULL);
}

uint64_t rlx__model_hash(const rlx_runner *r)
{
    const rlx_gguf *g = r->model->gguf;
    int32_t geo[6] = {r->kv_geo.n_layers, (int32_t)r->kv_geo.kv_cols, r->kv_geo.block_size, r->kv_geo.type,
                      (int32_t)rlx_gguf_n_tensors(g), (int32_t)(rlx_gguf_file_size(g) & 0x7fffffff)};
    uint64_t h = rlx_memory_hash(rlx_gguf_file_size(g), geo, 6);
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        int32_t d[6] = {t->type, (int32_t)t->ne[0], (int32_t)t->ne[1], (int32_t)t->offset, (int32_t)(t->offset >> 32),
                        (int32_t)t->size};
        h = rlx_memory_hash(h, d, 6);
    }
    uint64_t content = digest_bytes(rlx_gguf_bytes(g), (size_t)rlx_gguf_file_size(g), h);
    int32_t c[2] = {(int32_t)content, (int32_t)(content >> 32)};
    return rlx_memory_hash(h, c, 2);
}

/* Bytes of one block over every layer, K and V (the file's per-block record). */
static size_t record_bytes(const rlx_runner *r)
{
    size_t n = 0;
    for (int32_t l = 0; l < r->kv_geo.n_layers; l++) n += 2 * rlx_memory_layer_block_bytes(&r->mem, l);
    return n;
}

void rlx__snapshot_path(const rlx_worker *w, const char *id, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s.kv", w->kv_dir, id);
}

uint8_t *rlx__snapshot_capture(rlx_worker *w, const int32_t *blocks, int32_t n_blocks, uint64_t last_hash,
                               size_t *bytes)
{
    rlx_runner *r = w->runner;
    *bytes = 0;
    if (!rlx_memory_snapshots(&r->mem) || n_blocks <= 0) return NULL;
    size_t sb = r->mem.has_state ? r->mem.state_bytes : 0;
    size_t total = sizeof(kv_header) + (size_t)n_blocks * record_bytes(r) + sb;
    uint8_t *img = malloc(total);
    if (!img) return NULL;
    kv_header h = {.model_hash = w->model_hash, .kv_type = (uint32_t)r->kv_geo.type,
                   .block_size = (uint32_t)r->kv_geo.block_size, .n_layers = (uint32_t)r->kv_geo.n_layers,
                   .n_blocks = (uint32_t)n_blocks, .kv_cols = (uint64_t)r->kv_geo.kv_cols,
                   .n_tokens = (uint64_t)n_blocks * (uint64_t)r->kv_geo.block_size, .last_hash = last_hash};
    memcpy(h.magic, magic_of(r), 8);
    memcpy(img, &h, sizeof h);
    uint8_t *p = img + sizeof h;
    uint64_t sum = kv_checksum_start(&h);
    for (int32_t b = 0; b < n_blocks; b++)
        for (int32_t l = 0; l < r->kv_geo.n_layers; l++) {
            size_t bb = rlx_memory_layer_block_bytes(&r->mem, l);
            if (!bb) continue;
            if (rlx_memory_read_block(&r->mem, l, blocks[b], p, p + bb, NULL)) {
                free(img);
                return NULL;
            }
            sum = digest_bytes(p + bb, bb, digest_bytes(p, bb, sum));
            p += 2 * bb;
        }
    if (sb) { /* the state at the last block: the checkpoint the pins end at */
        int32_t pos = n_blocks * r->kv_geo.block_size;
        if (!rlx_memory_checkpoint_read(&r->mem, last_hash, pos, p)) {
            free(img);
            return NULL;
        }
        sum = digest_bytes(p, sb, sum);
    }
    memcpy(img + offsetof(kv_header, checksum), &sum, sizeof sum);
    *bytes = total;
    return img;
}

int rlx__snapshot_write(const char *path, const uint8_t *img, size_t bytes, rlx_error *err)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return rlx_errorf(err, RLX_EIO, "cannot create %s: %s", tmp, strerror(errno));
    size_t off = 0;
    while (off < bytes) {
        ssize_t k = write(fd, img + off, bytes - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        off += (size_t)k;
    }
    /* the row naming the file commits after this: its bytes must be on disk first */
    bool ok = off == bytes && fsync(fd) == 0;
    int e = errno;
    if (close(fd)) ok = false;
    if (!ok || rename(tmp, path)) {
        if (ok) e = errno;
        unlink(tmp);
        return rlx_errorf(err, RLX_EIO, "cannot write the KV snapshot %s: %s", path, strerror(e));
    }
    return 0;
}

bool rlx__snapshot_restore(rlx_worker *w, const char *path, const int32_t *tokens, int32_t n, int32_t max_blocks,
                           int32_t **blocks_out, int32_t *n_out, uint64_t *last_hash)
{
    rlx_runner *r = w->runner;
    *blocks_out = NULL;
    *n_out = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    kv_header h;
    const bool whole = fread(&h, sizeof h, 1, f) == 1;
    /* another model's, another configuration's or an older format's snapshot is no damage
       (silent, as below); a file cut short or of other bytes is */
    if (!whole || memcmp(h.magic, "RLX", 3))
        fprintf(stderr, "rlxd: KV snapshot %s is %s (damaged): ignored, the session's history is recomputed\n", path,
                whole ? "no snapshot" : "cut short");
    bool ok = whole && !memcmp(h.magic, magic_of(r), 8) && h.model_hash == w->model_hash &&
              h.kv_type == (uint32_t)r->kv_geo.type && h.block_size == (uint32_t)r->kv_geo.block_size &&
              h.n_layers == (uint32_t)r->kv_geo.n_layers && h.kv_cols == (uint64_t)r->kv_geo.kv_cols &&
              h.n_blocks > 0 && h.n_tokens == (uint64_t)h.n_blocks * h.block_size && h.n_tokens <= (uint64_t)n &&
              (int32_t)h.n_blocks <= max_blocks;
    /* the blocks must hold this history: the chain over its tokens ends at the stored hash */
    uint64_t chain = 0;
    for (uint32_t b = 0; ok && b < h.n_blocks; b++)
        chain = rlx_memory_hash(chain, tokens + (size_t)b * h.block_size, (int32_t)h.block_size);
    ok = ok && chain == h.last_hash;
    size_t bb = 0; /* the widest layer's block */
    for (int32_t l = 0; l < r->kv_geo.n_layers; l++) bb = RLX_MAX(bb, rlx_memory_layer_block_bytes(&r->mem, l));
    size_t sb = r->mem.has_state ? r->mem.state_bytes : 0;
    ok = ok && (bb > 0 || sb > 0) && rlx_memory_snapshots(&r->mem);
    uint8_t *kb = ok ? malloc(RLX_MAX(RLX_MAX(bb, sb), 1)) : NULL, *vb = ok ? malloc(RLX_MAX(bb, 1)) : NULL;
    int32_t *blocks = ok ? calloc(h.n_blocks, sizeof *blocks) : NULL;
    int32_t got = 0;
    uint64_t hash = 0;
    ok = ok && kb && vb && blocks;
    /* a first pass verifies the checksum: damaged bytes must never reach the pool (they would
     * be read as valid KV and the next turn would emit garbage) */
    if (ok) {
        uint64_t sum = kv_checksum_start(&h);
        for (uint64_t i = 0; ok && i < (uint64_t)h.n_blocks * h.n_layers * 2; i++) {
            size_t lb = rlx_memory_layer_block_bytes(&r->mem, (int32_t)(i / 2 % h.n_layers));
            if (!lb) continue;
            ok = fread(kb, lb, 1, f) == 1;
            if (ok) sum = digest_bytes(kb, lb, sum);
        }
        if (ok && sb) {
            ok = fread(kb, sb, 1, f) == 1;
            if (ok) sum = digest_bytes(kb, sb, sum);
        }
        if (!ok)
            fprintf(stderr, "rlxd: KV snapshot %s is cut short (damaged): ignored, the session's history is recomputed\n", path);
        if (ok && sum != h.checksum) {
            fprintf(stderr, "rlxd: KV snapshot %s fails its checksum (damaged): ignored, the session's history is "
                    "recomputed\n", path);
            ok = false;
        }
        ok = ok && fseek(f, (long)sizeof h, SEEK_SET) == 0;
    }
    for (uint32_t b = 0; ok && b < h.n_blocks; b++) {
        uint64_t ch = rlx_memory_hash(hash, tokens + (size_t)b * h.block_size, (int32_t)h.block_size);
        bool fresh = false;
        int32_t blk = rlx_memory_restore_block(&r->mem, ch, &fresh); /* already cached: keep it */
        if (blk < 0) { ok = false; break; }
        blocks[got++] = blk;
        for (uint32_t l = 0; l < h.n_layers; l++) {
            size_t lb = rlx_memory_layer_block_bytes(&r->mem, (int32_t)l);
            if (!lb) continue;
            if (fread(kb, lb, 1, f) != 1 || fread(vb, lb, 1, f) != 1) { ok = false; break; }
            if (fresh && rlx_memory_write_block(&r->mem, (int32_t)l, blk, kb, vb, NULL)) { ok = false; break; }
        }
        if (ok && fresh) rlx_memory_publish(&r->mem, blk, ch);
        hash = ch;
    }
    /* the state at the last block goes back into the checkpoint cache for the next turn */
    if (ok && sb)
        ok = fread(kb, sb, 1, f) == 1 &&
             rlx_memory_checkpoint_store(&r->mem, hash, (int32_t)h.n_tokens, kb);
    fclose(f);
    free(kb);
    free(vb);
    if (!ok) {
        rlx_memory_unpin(&r->mem, blocks, got);
        free(blocks);
        return false;
    }
    *blocks_out = blocks;
    *n_out = got;
    *last_hash = hash;
    return true;
}
