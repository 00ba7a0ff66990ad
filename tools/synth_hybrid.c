/* synth_hybrid.c - rlxd-synth's qwen35 family (gated DeltaNet + gated full attention), with the
 * tensor names, shapes and storage conventions of llama.cpp's converter
 * (../shared/models/NOTES-bert-qwen35.md): per-head [q, gate] rows in attn_q, attn_qkv rows
 * q | k | v, ssm_conv1d with the kernel as ne[0] (F32), ssm_a = -exp(A_log) without a .weight
 * suffix, ssm_dt.bias, norms with the +1 folded in. Weight scales follow the shared model's:
 * conv ~N(0, 1/sqrt(kernel)), A ~U(0.05, 1), dt_bias ~N(-1, 0.5), so the decay exp(g) spans
 * roughly 0.6 to 0.97 and the state carries memory. */
#include "tools/synth.h"
#include "backends/dtype.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rlx_synth_hybrid_shape(shape *s)
{
    if (!s->rot) s->rot = s->head_dim / 2;
    if (!s->interval) s->interval = 4;
    if (!s->conv) s->conv = 4;
    if (!s->ssm_state) s->ssm_state = s->head_dim;
    if (!s->ssm_groups) s->ssm_groups = s->kv_heads;
    if (!s->ssm_heads) s->ssm_heads = s->heads;
    if (s->rot % 2 || s->rot > s->head_dim || s->ssm_heads % s->ssm_groups || s->conv > 64 || s->ssm_state > 512) {
        fprintf(stderr, "rlxd-synth: qwen35 needs even --rope-dims <= --head-dim, --ssm-heads a multiple of --ssm-groups, "
                        "--conv-kernel <= 64 and --ssm-state <= 512\n");
        return 1;
    }
    return 0;
}

int rlx_synth_hybrid_metadata(rlx_gguf_writer *w, const opts *o, rlx_error *err)
{
    const shape *s = &o->s;
    /* multi-section RoPE: the rotated pairs split over three sections as the converter's default
     * [11, 11, 10, 0] splits 32 (text uses one position for all of them) */
    const int64_t pairs = s->rot / 2, s0 = (pairs + 2) / 3, s1 = (pairs - s0 + 1) / 2;
    const int32_t sections[4] = {(int32_t)s0, (int32_t)s1, (int32_t)(pairs - s0 - s1), 0};
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", o->arch->name);
    int rc;
    if ((rc = rlx_synth_set_u32(w, o, "full_attention_interval", (uint64_t)s->interval)) ||
        (rc = rlx_synth_set_u32(w, o, "ssm.conv_kernel", (uint64_t)s->conv)) ||
        (rc = rlx_synth_set_u32(w, o, "ssm.state_size", (uint64_t)s->ssm_state)) ||
        (rc = rlx_synth_set_u32(w, o, "ssm.group_count", (uint64_t)s->ssm_groups)) ||
        (rc = rlx_synth_set_u32(w, o, "ssm.time_step_rank", (uint64_t)s->ssm_heads)) ||
        (rc = rlx_synth_set_u32(w, o, "ssm.inner_size", (uint64_t)(s->ssm_heads * s->ssm_state))) ||
        (rc = rlx_gguf_writer_set_arr(w, key, RLX_GGUF_INT32, sections, 4)))
        return rlx_errorf(err, rc, "could not store metadata: %s", rlx_strerror(rc));
    return 0;
}

/* a vector of n F32 values: ssm_a (-U(0.05, 1)) or dt_bias (N(-1, 0.5)), from the tensor's name */
static int add_vector(rlx_gguf_writer *w, const opts *o, const char *name, int64_t n, bool decay, rlx_error *err)
{
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    uint64_t x = o->seed * 0x9E3779B97F4A7C15ull;
    for (const char *p = name; *p; p++) x = (x ^ (uint8_t)*p) * 1099511628211ull;
    for (int64_t i = 0; i < n; i++) {
        double u1, u2;
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        u1 = ((x >> 11) + 1.0) / 9007199254740993.0;
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        u2 = (x >> 11) / 9007199254740992.0;
        v[i] = decay ? (float)-(0.05 + 0.95 * u1) : (float)(-1.0 + 0.5 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    const int64_t ne[1] = {n};
    int rc = rlx_gguf_writer_add_tensor(w, name, RLX_F32, 1, ne, v, (size_t)n * sizeof *v);
    free(v);
    return rc ? rlx_errorf(err, rc, "could not add tensor %s: %s", name, rlx_strerror(rc)) : 0;
}

int rlx_synth_hybrid_layer(rlx_gguf_writer *w, const opts *o, int64_t l, rlx_error *err)
{
    const shape *s = &o->s;
    const int64_t h = s->hidden, hd = s->head_dim, q = s->heads * hd, kv = s->kv_heads * hd;
    const int64_t st = s->ssm_state, nv = s->ssm_heads, ch = 2 * s->ssm_groups * st + nv * st;
    const bool full = (l + 1) % s->interval == 0;
    const struct { const char *n; wkind k; const char *role; int64_t ne0, ne1; bool on; } t[] = {
        {"attn_norm.weight", W_NORM, NULL, h, 1, true},
        {"attn_q.weight", W_MATRIX, NULL, h, 2 * q, full},
        {"attn_k.weight", W_MATRIX, NULL, h, kv, full},
        {"attn_v.weight", W_MATRIX, "attn_v", h, kv, full},
        {"attn_q_norm.weight", W_NORM, NULL, hd, 1, full},
        {"attn_k_norm.weight", W_NORM, NULL, hd, 1, full},
        {"attn_output.weight", W_MATRIX, NULL, q, h, full},
        {"attn_qkv.weight", W_MATRIX, NULL, h, ch, !full},
        {"attn_gate.weight", W_MATRIX, NULL, h, nv * st, !full},
        {"ssm_conv1d.weight", W_F32, NULL, s->conv, ch, !full},
        {"ssm_beta.weight", W_MATRIX, NULL, h, nv, !full},
        {"ssm_alpha.weight", W_MATRIX, NULL, h, nv, !full},
        {"ssm_norm.weight", W_NORM, NULL, st, 1, !full},
        {"ssm_out.weight", W_MATRIX, NULL, nv * st, h, !full},
        {"post_attention_norm.weight", W_NORM, NULL, h, 1, true},
        {"ffn_gate.weight", W_MATRIX, NULL, h, s->ffn, true},
        {"ffn_up.weight", W_MATRIX, NULL, h, s->ffn, true},
        {"ffn_down.weight", W_MATRIX, "ffn_down", s->ffn, h, true},
    };
    char name[96];
    int rc;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (!t[i].on) continue;
        snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, t[i].n);
        if ((rc = rlx_synth_add_tensor(w, o, name, t[i].k, t[i].role, l, t[i].ne0, t[i].ne1, err))) return rc;
    }
    if (full) return 0;
    snprintf(name, sizeof name, "blk.%lld.ssm_a", (long long)l);
    if ((rc = add_vector(w, o, name, nv, true, err))) return rc;
    snprintf(name, sizeof name, "blk.%lld.ssm_dt.bias", (long long)l);
    return add_vector(w, o, name, nv, false, err);
}
