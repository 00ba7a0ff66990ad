/* gaside.h - constrained sampling's work beside the forward pass: a helper thread that, while
 * the worker thread waits for a step's forward pass, computes the masks the step's constrained
 * sequences would need if their draws are refused (rlx_sampler_prefetch: the mask of each
 * grammar position into the worker's rlx_grammar_cache) and then goes on with the cache's walks
 * ahead (rlx_grammar_cache_prepare_until), instead of the worker doing the walks in slices
 * between steps.
 *
 * Where the backend allows it (rlx__gaside_wanted; `rlxd serve --grammar-aside auto|on|off`): a GPU backend leaves the host's cores idle
 * during the forward pass, and a CPU backend does when its threads leave a core free; on a host
 * whose every core runs the CPU backend's threads the helper would only slow the forward pass,
 * so the worker keeps the in-line slices.
 *
 * Threads and ownership: the worker owns the helper (new / free on the worker thread). Between
 * rlx__gaside_begin and rlx__gaside_end the helper thread alone touches the cache and reads the
 * samplers given; the worker thread touches neither (it runs the forward pass). end sets the
 * stop flag and waits until the helper is idle again, so after it the worker owns everything as
 * before. Outputs do not depend on the helper: masks and tables are the same whoever builds
 * them, and the sampler draws nothing on the helper. */
#ifndef RLX_GASIDE_H
#define RLX_GASIDE_H

#include "engine/grammar.h"
#include "engine/sample.h"

typedef struct rlx__gaside rlx__gaside;

/* Whether a worker should use the helper: `force` > 0 yes, < 0 no, 0 auto (a backend other than
 * the CPU one, or a CPU backend whose n_threads leave one of the n_cpus cores free). */
bool rlx__gaside_wanted(int force, const char *backend, int n_threads, int n_cpus);

/* Starts the helper thread (idle). NULL when out of memory or threads. */
rlx__gaside *rlx__gaside_new(void);
/* Stops and joins it (after an end). NULL is fine. */
void rlx__gaside_free(rlx__gaside *a);

/* Hands the helper one step's work: prefetch for samplers[0..n) (borrowed until end; n may be
 * 0), then c's walks until end. */
void rlx__gaside_begin(rlx__gaside *a, rlx_grammar_cache *c, const rlx_grammar_vocab *v, rlx_sampler *const *samplers,
                       size_t n);
/* Calls the work off and waits for the helper to be idle (a table being built is finished
 * first). */
void rlx__gaside_end(rlx__gaside *a);

/* What the helper did, for tests and /metrics. */
typedef struct rlx__gaside_stats {
    uint64_t runs;        /* begin/end pairs */
    uint64_t prefetches;  /* sampler prefetches made */
    int64_t tables;       /* tables the walks built on the helper */
    double busy_s;        /* seconds the helper worked */
} rlx__gaside_stats;
/* Call between an end and the next begin (worker thread). */
void rlx__gaside_get_stats(const rlx__gaside *a, rlx__gaside_stats *out);

#endif
