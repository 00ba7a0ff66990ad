/* spec.c - prompt-lookup drafting and the draft length control (see spec.h). */
#include "engine/spec.h"

#include <string.h>

int32_t rlx_spec_lookup(const int32_t *tokens, int32_t n, int32_t ngram_min, int32_t ngram_max, int32_t *draft,
                        int32_t max_draft)
{
    if (!tokens || !draft || max_draft <= 0 || ngram_min < 1 || ngram_max < ngram_min) return 0;
    if (max_draft > RLX_SPEC_MAX_DRAFT) max_draft = RLX_SPEC_MAX_DRAFT;
    const int32_t lo = n > RLX_SPEC_WINDOW ? n - RLX_SPEC_WINDOW : 0;
    for (int32_t g = ngram_max; g >= ngram_min; g--) {
        if (n - lo < g + 1) continue;
        const int32_t *pat = tokens + n - g;
        /* most recent occurrence first; it must end before the suffix itself starts ending,
         * so that at least one token follows it */
        for (int32_t i = n - g - 1; i >= lo; i--) {
            if (tokens[i] != pat[0] || memcmp(tokens + i, pat, (size_t)g * sizeof *pat) != 0) continue;
            /* what followed it, up to the end; a repeat closer than max_draft tokens (a loop)
             * continues with its own period */
            int32_t from = i + g, period = n - from;
            for (int32_t j = 0; j < max_draft; j++) draft[j] = j < period ? tokens[from + j] : draft[j - period];
            return max_draft;
        }
    }
    return 0;
}

int32_t rlx_spec_allow(rlx_spec_state *st, int32_t max_draft)
{
    if (max_draft <= 0) return 0;
    if (max_draft > RLX_SPEC_MAX_DRAFT) max_draft = RLX_SPEC_MAX_DRAFT;
    if (st->cooldown > 0) {
        st->cooldown--;
        return 0;
    }
    if (st->len <= 0 || st->len > max_draft) st->len = max_draft;
    return st->len;
}

void rlx_spec_pause(rlx_spec_state *st, int32_t steps)
{
    if (st->cooldown <= 0 && steps > 0) st->cooldown = steps;
}

void rlx_spec_update(rlx_spec_state *st, int32_t n_draft, int32_t n_accepted, int32_t max_draft)
{
    if (n_draft <= 0) return;
    if (max_draft > RLX_SPEC_MAX_DRAFT) max_draft = RLX_SPEC_MAX_DRAFT;
    if (n_accepted >= n_draft) {
        st->misses = 0;
        st->len = st->len * 2 > max_draft ? max_draft : st->len * 2;
        return;
    }
    st->len = n_accepted + 1;
    if (n_accepted == 0) {
        /* 1, 2, 4, ... 16 steps without drafting after consecutive first-token misses */
        st->misses++;
        st->cooldown = 1 << (st->misses - 1 < 4 ? st->misses - 1 : 4);
    } else {
        st->misses = 0;
    }
}
