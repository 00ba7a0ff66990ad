/* metrics.h - request counters and latency histograms of the daemon, rendered as Prometheus
 * text with vLLM-style names (rlxd_ prefix); and the one-line access log.
 *
 * Threads: used on the loop thread only. Ownership: rlx_metrics is a plain value; the render
 * functions return malloc'ed strings owned by the caller. */
#ifndef RLX_METRICS_H
#define RLX_METRICS_H

#include "backends/rlx.h"

#define RLX_HIST_MAX_BUCKETS 20
#define RLX_METRICS_MAX_SERIES 64

typedef struct rlx_histogram {
    const double *bounds;              /* upper bounds, ascending (static) */
    int n_bounds;
    uint64_t counts[RLX_HIST_MAX_BUCKETS + 1]; /* per bucket, the last is +Inf */
    double sum;
    uint64_t count;
} rlx_histogram;

typedef struct rlx_metrics {
    struct { char endpoint[32]; int status; uint64_t n; } requests[RLX_METRICS_MAX_SERIES];
    int n_requests;
    uint64_t prompt_tokens, generation_tokens;
    uint64_t cancelled;                /* generations cancelled because the client left */
    uint64_t request_timeouts;         /* requests not whole within --request-timeout (408) */
    uint64_t evicted;                  /* sockets still sending a request closed to make room */
    uint64_t unread_cancelled;         /* streams cancelled: over --max-pending-bytes unread */
    rlx_histogram ttft, itl, e2e;
    /* rlxd_build_info{version,commit,backend} 1 when version is set (static strings) */
    const char *version, *commit, *backend;
} rlx_metrics;

/* Live per-model values sampled from the workers at render time. */
typedef struct rlx_metrics_model {
    const char *name;
    int32_t running, waiting;
    double kv_usage;
    int32_t state_slots_used, state_slots_total; /* recurrent-state slots (hybrid models) */
    int32_t state_ckpt_entries;        /* recurrent-state checkpoints held, their bytes; requests started
                                          at one; checkpoints evicted for the budget */
    uint64_t state_ckpt_bytes, state_ckpt_hits, state_ckpt_evictions;
    uint64_t prefix_queries, prefix_hits;
    uint64_t preemptions;              /* sequences preempted for want of KV blocks */
    uint64_t embd_inputs, embd_tokens; /* embedding inputs computed, and their tokens */
    uint64_t draft_tokens, draft_accepted; /* speculative decoding: drafted and kept tokens */
    uint64_t draft_positions;  /* positions a draft model computed */
    uint64_t cpu_passes_one, cpu_passes_more; /* CPU forward passes on one thread / more */
    double grammar_aside_s;                   /* constrained sampling's helper: seconds worked */
} rlx_metrics_model;

/* Copies s into out (cap > 0, always NUL-terminated) as a Prometheus label value: '\\', '"' and
 * a line feed escaped as the text format wants, bytes that are not UTF-8 as U+FFFD, so that a
 * name (a model's, from a file name) can neither break the exposition nor add series to it.
 * Text that does not fit is cut at a character. Returns out. */
const char *rlx_metrics_label(const char *s, char *out, size_t cap);
void rlx_metrics_init(rlx_metrics *m);
void rlx_metrics_request(rlx_metrics *m, const char *endpoint, int status);
void rlx_histogram_observe(rlx_histogram *h, double v);
char *rlx_metrics_render(const rlx_metrics *m, const rlx_metrics_model *models, size_t n_models);

typedef struct rlx_access_entry {
    const char *method, *path, *model; /* model may be NULL */
    int status;
    int32_t prompt_tokens, completion_tokens;
    double ttft_s;                     /* < 0: none */
    double duration_s;
    const char *finish;                /* NULL or "stop", "length", "cancelled" */
} rlx_access_entry;

/* One line (with '\n') in text or JSON form. */
void rlx_access_log_format(const rlx_access_entry *e, bool json, char *buf, size_t cap);

#endif
