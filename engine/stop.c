/* stop.c - hold-back stop-string matcher (see stop.h). */
#include "engine/stop.h"

#include <stdlib.h>
#include <string.h>

static int reserve(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    char *nb = realloc(*buf, nc);
    if (!nb) return RLX_ENOMEM;
    *buf = nb;
    *cap = nc;
    return 0;
}

int rlx_stop_init(rlx_stop_matcher *m, char *const *stops, size_t n, rlx_error *err)
{
    memset(m, 0, sizeof *m);
    if (n == 0) return 0;
    m->stops = calloc(n, sizeof *m->stops);
    m->stop_len = calloc(n, sizeof *m->stop_len);
    if (!m->stops || !m->stop_len) {
        rlx_stop_free(m);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory copying stop strings");
    }
    for (size_t i = 0; i < n; i++) {
        if (!stops[i] || !stops[i][0]) {
            rlx_stop_free(m);
            return rlx_errorf(err, RLX_EINVAL, "stop strings must not be empty");
        }
        m->stops[i] = strdup(stops[i]);
        if (!m->stops[i]) {
            rlx_stop_free(m);
            return rlx_errorf(err, RLX_ENOMEM, "out of memory copying stop strings");
        }
        m->stop_len[i] = strlen(stops[i]);
        m->n_stop = i + 1;
    }
    return 0;
}

void rlx_stop_free(rlx_stop_matcher *m)
{
    for (size_t i = 0; i < m->n_stop; i++) free(m->stops[i]);
    free(m->stops);
    free(m->stop_len);
    free(m->held);
    free(m->out);
    memset(m, 0, sizeof *m);
}

/* Earliest position where any stop string occurs in h[0..n), or n if none. */
static size_t find_stop(const rlx_stop_matcher *m, const char *h, size_t n)
{
    size_t best = n;
    for (size_t i = 0; i < m->n_stop; i++) {
        const char *p = memmem(h, n, m->stops[i], m->stop_len[i]);
        if (p && (size_t)(p - h) < best) best = (size_t)(p - h);
    }
    return best;
}

/* Length of the longest suffix of h[0..n) that is a proper prefix of some stop string. */
static size_t partial_suffix(const rlx_stop_matcher *m, const char *h, size_t n)
{
    size_t best = 0;
    for (size_t i = 0; i < m->n_stop; i++) {
        size_t l = m->stop_len[i] - 1;
        if (l > n) l = n;
        for (; l > best; l--)
            if (!memcmp(h + n - l, m->stops[i], l)) { best = l; break; }
    }
    return best;
}

static int release(rlx_stop_matcher *m, size_t n, const char **out, size_t *out_len)
{
    if (reserve(&m->out, &m->cap_out, n + 1)) return RLX_ENOMEM;
    memcpy(m->out, m->held, n);
    m->out[n] = 0;
    memmove(m->held, m->held + n, m->n_held - n);
    m->n_held -= n;
    *out = m->out;
    *out_len = n;
    return 0;
}

int rlx_stop_push(rlx_stop_matcher *m, const char *text, size_t len, const char **out, size_t *out_len)
{
    *out = "";
    *out_len = 0;
    if (m->matched) return 1;
    if (reserve(&m->held, &m->cap_held, m->n_held + len + 1)) return RLX_ENOMEM;
    if (len) memcpy(m->held + m->n_held, text, len);
    m->n_held += len;
    if (m->n_stop == 0) return release(m, m->n_held, out, out_len);
    size_t pos = find_stop(m, m->held, m->n_held);
    if (pos < m->n_held) {
        m->matched = true;
        if (release(m, pos, out, out_len)) return RLX_ENOMEM;
        m->n_held = 0;
        return 1;
    }
    size_t keep = partial_suffix(m, m->held, m->n_held);
    return release(m, m->n_held - keep, out, out_len);
}

void rlx_stop_flush(rlx_stop_matcher *m, const char **out, size_t *out_len)
{
    *out = "";
    *out_len = 0;
    if (m->matched || m->n_held == 0) return;
    if (release(m, m->n_held, out, out_len)) m->n_held = 0;
}
