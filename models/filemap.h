/* filemap.h - read-only mappings of model files that survive the file changing under them.
 *
 * Weights are read straight from a file mapping. When an operator overwrites a served model's
 * file in place (`cp new.gguf model.gguf` truncates it, then writes), a read of a page past the
 * new end raises SIGBUS, which would end the whole daemon and every other model with it; pages
 * still inside the file silently show the new bytes. So every mapping made here is watched:
 * - a process-wide SIGBUS handler (installed at the first mapping, chaining to the handler it
 *   replaced for any other address) puts anonymous zero pages over the whole mapping that
 *   faulted and marks it damaged; the faulting read then goes on with zeros;
 * - the file stays open, and rlx__filemap_changed compares its size and modification time with
 *   those it had when mapped (a write in place shows there, a truncation that no read has hit
 *   yet too).
 * A file that is deleted, or replaced by a rename (a new inode), is neither: the mapping keeps
 * the old contents. Callers (the runner, after each forward pass) check rlx__filemap_changed
 * and fail the work computed from a changed file instead of returning its numbers.
 *
 * Threads: any thread may open and close its own mappings (registration takes a mutex);
 * rlx__filemap_changed may run on any thread while other threads read the mapping. At most
 * RLX_FILEMAP_SLOTS mappings are watched at once; beyond that a mapping is made unwatched
 * (SIGBUS then ends the process, as before) and its changes are still seen by fstat. */
#ifndef RLX_FILEMAP_H
#define RLX_FILEMAP_H

#include "backends/rlx.h"

#include <stdio.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RLX_FILEMAP_SLOTS 1024

typedef struct rlx_filemap {
    void *base;              /* the mapping (NULL for an empty file) */
    size_t len;
    int fd;                  /* kept open for fstat; -1 when closed */
    int slot;                /* the SIGBUS registry's slot, -1 when unwatched */
    uint64_t dev, ino;       /* identity, size and mtime when mapped */
    int64_t size, mtime_ns;
} rlx_filemap;

/* Maps the regular file open as fd (taking ownership of fd: it is closed by rlx__filemap_close,
 * or here on failure) read-only, as large as fstat says. path only names it in messages. */
int rlx__filemap_open(rlx_filemap *m, int fd, const char *path, rlx_error *err);
void rlx__filemap_close(rlx_filemap *m);
/* Whether the file was cut short under a read (SIGBUS), or its size or modification time
 * differ from when it was mapped; why (may be NULL) gets a few words saying which. */
bool rlx__filemap_changed(const rlx_filemap *m, char *why, size_t cap);

/* Reads a whole regular file into a malloc'ed, NUL-terminated buffer (*len without the NUL;
 * len may be NULL). Anything but a regular file (a FIFO, a device, a folder) is an error at
 * once, never a read that waits. */
int rlx__read_file(const char *path, char **out, size_t *len, rlx_error *err);
/* Opens a regular file of at most max_bytes for reading as a stdio stream, never waiting in
 * open (a FIFO) and never reading a device (/dev/zero) or a folder: RLX_ENOTFOUND when it does
 * not exist, RLX_EIO with a message naming it otherwise. */
int rlx__fopen_regular(const char *path, int64_t max_bytes, FILE **out, rlx_error *err);
/* What path is when it is neither a regular file nor a folder, by stat alone (no open, so no
 * wait on a FIFO): "a FIFO", "a socket" or "a device"; NULL for a file, a folder, or a path that
 * cannot be stat'ed (its open says why). Any thread. */
const char *rlx__special_file(const char *path);

#endif
