/* stop.h - stop-string matching over a stream of text pieces, with hold-back: text that might
 * be the start of a stop string is withheld until it is decided, so a client never sees any
 * part of a stop string. Matches across piece (token) boundaries. The worker runs one per
 * sequence on its detokenized output (engine/sched.c), so a match ends the sequence at the
 * token that completed it.
 *
 * Ownership: the matcher copies the stop strings. The text returned by push/flush points into
 * the matcher and stays valid until the next call on it. Not thread-safe (one per sequence). */
#ifndef RLX_STOP_H
#define RLX_STOP_H

#include "backends/rlx.h"

typedef struct rlx_stop_matcher {
    char **stops;        /* owned copies, none empty */
    size_t *stop_len;
    size_t n_stop;
    char *held;          /* withheld text (a possible stop-string prefix) */
    size_t n_held, cap_held;
    char *out;           /* text released by the last call */
    size_t cap_out;
    bool matched;        /* a stop string was found: everything after it is dropped */
} rlx_stop_matcher;

/* Empty stop strings are rejected with RLX_EINVAL. n may be 0 (then push passes text through). */
int rlx_stop_init(rlx_stop_matcher *m, char *const *stops, size_t n, rlx_error *err);
void rlx_stop_free(rlx_stop_matcher *m);

/* Feeds a piece; *out and *out_len receive the text that can be released now. Returns 1 when a
 * stop string completed (the released text ends just before it), 0 otherwise, RLX_ENOMEM. */
int rlx_stop_push(rlx_stop_matcher *m, const char *text, size_t len, const char **out, size_t *out_len);
/* End of the stream: releases what was held back (nothing once matched). */
void rlx_stop_flush(rlx_stop_matcher *m, const char **out, size_t *out_len);

#endif
