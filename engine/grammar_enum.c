/* grammar_enum.c - the few strings a grammar state lets come before a given character
 * (rlx_grammar_strings_before, grammar.h): a depth-first walk over code points, each step the
 * union of the parse stacks' top sets; the stop character right after an escape (a JSON key's
 * \" after \) is part of the string. It gives up (RLX_ERANGE) as soon as the language cannot
 * be a short finite list: a negated or wide set, a token reference, a string or a walk over its
 * limits. Called by the thread that owns the state; the state is not changed. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

#define ENUM_FANOUT 64 /* code points one position may offer, at most */

typedef struct enum_walk {
    const rlx_grammar *g;
    uint32_t stop, esc, *path, *buf;
    size_t max_strings, max_len, steps_left, count;
    int (*cb)(void *ctx, const uint32_t *cps, size_t n);
    void *ctx;
} enum_walk;

/* The code points the stacks' top sets hold, into cand (sorted, distinct); RLX_ERANGE when a
 * set is negated, holds everything, is a token reference or the union is over ENUM_FANOUT. */
static int candidates(const rlx_grammar *g, const rlx__sset *set, uint32_t *cand, size_t *n_cand)
{
    size_t nc = 0;
    for (size_t i = 0; i < set->n; i++) {
        if (!set->len[i]) continue; /* the grammar may end here: no character to offer */
        uint32_t p = set->data[set->off[i] + set->len[i] - 1];
        if (g->e[p].type != G_CHAR) return RLX_ERANGE; /* G_CHAR_NOT, G_ANY, a token reference */
        do {
            uint32_t a, b;
            p = rlx__grammar_set_range(g->e, p, &a, &b);
            if (b < a) continue;
            if (b - a >= ENUM_FANOUT) return RLX_ERANGE;
            for (uint32_t c = a; c <= b; c++) {
                size_t k = 0;
                while (k < nc && cand[k] < c) k++;
                if (k < nc && cand[k] == c) continue;
                if (nc == ENUM_FANOUT) return RLX_ERANGE;
                memmove(cand + k + 1, cand + k, (nc - k) * sizeof *cand);
                cand[k] = c;
                nc++;
            }
        } while (g->e[p].type == G_CHAR_ALT);
    }
    *n_cand = nc;
    return 0;
}

/* escaped: the code point before this position is an escape that takes the next one literally. */
static int walk(enum_walk *w, const rlx__sset *set, size_t depth, bool escaped)
{
    uint32_t cand[ENUM_FANOUT];
    size_t nc = 0;
    int rc = candidates(w->g, set, cand, &nc);
    if (rc) return rc;
    rlx__sset next = {0};
    for (size_t k = 0; k < nc && !rc; k++) {
        if (!w->steps_left--) {
            rc = RLX_ERANGE;
            break;
        }
        rlx__grammar_step_cp(w->g, set, cand[k], &next, w->buf);
        if (next.oom) rc = RLX_ENOMEM;
        else if (next.overflow) rc = RLX_ERANGE;
        else if (!next.n) continue;
        else if (cand[k] == w->stop && !escaped) {
            rc = ++w->count > w->max_strings ? RLX_ERANGE : w->cb(w->ctx, w->path, depth);
        } else if (depth == w->max_len) {
            rc = RLX_ERANGE;
        } else {
            w->path[depth] = cand[k];
            rc = walk(w, &next, depth + 1, cand[k] == w->esc && !escaped);
        }
    }
    rlx__sset_free(&next);
    return rc;
}

int rlx_grammar_strings_before(const rlx_grammar_state *s, uint32_t stop, uint32_t esc, size_t max_strings, size_t max_len,
                               size_t max_steps, int (*cb)(void *ctx, const uint32_t *cps, size_t n), void *ctx,
                               size_t *count)
{
    if (s->remain) return RLX_ERANGE; /* inside a character: not a position to start from */
    enum_walk w = {.g = s->g, .stop = stop, .esc = esc, .max_strings = max_strings, .max_len = max_len, .steps_left = max_steps,
                   .cb = cb, .ctx = ctx};
    w.path = malloc((max_len + 1) * sizeof *w.path);
    w.buf = malloc((RLX_GRAMMAR_MAX_DEPTH + 1) * sizeof *w.buf);
    int rc = w.path && w.buf ? walk(&w, &s->stacks, 0, false) : RLX_ENOMEM;
    free(w.path);
    free(w.buf);
    if (!rc && count) *count = w.count;
    return rc;
}
