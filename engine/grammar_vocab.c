/* grammar_vocab.c - the vocabulary as a byte trie, and token masks: one walk down the trie
 * steps the recogniser a byte at a time, so a rejected prefix prunes every token under it. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- vocabulary trie ------------------------------------------------------------------------- */

typedef struct tok_ref { const char *s; size_t n; int32_t id; } tok_ref;

static int tok_ref_cmp(const void *a, const void *b)
{
    const tok_ref *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    if (c) return c;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Built from the tokens sorted by their bytes: each token shares its longest common prefix with
 * the one before it, so new nodes are always the last child of a node on the current path. */
rlx_grammar_vocab *rlx_grammar_vocab_new(int32_t n_vocab, const char *const *texts, const size_t *lens)
{
    if (n_vocab < 0) return NULL;
    rlx_grammar_vocab *v = calloc(1, sizeof *v);
    tok_ref *refs = malloc(((size_t)n_vocab + 1) * sizeof *refs);
    uint32_t *path = NULL, *last = NULL;
    size_t n_refs = 0, max_len = 0, total = 1;
    if (!v || !refs) goto fail;
    v->n_vocab = n_vocab;
    v->next_tok = malloc(((size_t)n_vocab + 1) * sizeof *v->next_tok);
    v->tok_off = malloc(((size_t)n_vocab + 1) * sizeof *v->tok_off);
    if (!v->next_tok || !v->tok_off) goto fail;
    for (int32_t t = 0; t < n_vocab; t++) {
        v->next_tok[t] = -1;
        if (!lens[t]) continue;
        refs[n_refs++] = (tok_ref){texts[t], lens[t], t};
        if (lens[t] > max_len) max_len = lens[t];
        total += lens[t];
    }
    if (total > UINT32_MAX) goto fail;
    v->bytes = malloc(total);
    if (!v->bytes) goto fail;
    {
        size_t o = 0;
        for (int32_t t = 0; t < n_vocab; t++) {
            v->tok_off[t] = (uint32_t)o;
            if (lens[t]) memcpy(v->bytes + o, texts[t], lens[t]);
            o += lens[t];
        }
        v->tok_off[n_vocab] = (uint32_t)o;
    }
    if (!(v->len7 = calloc(((size_t)n_vocab + 63) / 64 * 64, 1))) goto fail; /* whole words of 64 */
    for (int32_t t = 0; t < n_vocab; t++) v->len7[t] = (uint8_t)(lens[t] < 127 ? lens[t] : 127);
    qsort(refs, n_refs, sizeof *refs, tok_ref_cmp);
    v->nodes = malloc(total * sizeof *v->nodes); /* an upper bound: one node per byte */
    path = malloc((max_len + 1) * sizeof *path);
    last = calloc(total, sizeof *last);          /* last child of each node while building */
    if (!v->nodes || !path || !last) goto fail;
    v->nodes[0] = (rlx__tnode){.child = 0, .sibling = 0, .token = -1, .byte = 0};
    v->n_nodes = 1;
    path[0] = 0;
    const tok_ref *prev = NULL;
    int32_t *tail_tok = NULL; /* the last token id appended at the previous token's node */
    for (size_t i = 0; i < n_refs; i++) {
        const tok_ref *r = &refs[i];
        size_t l = 0;
        if (prev)
            while (l < prev->n && l < r->n && prev->s[l] == r->s[l]) l++;
        for (size_t d = l; d < r->n; d++) {
            uint32_t parent = path[d], id = v->n_nodes++;
            v->nodes[id] = (rlx__tnode){.child = 0, .sibling = 0, .token = -1, .byte = (uint8_t)r->s[d]};
            if (last[parent]) v->nodes[last[parent]].sibling = id;
            else v->nodes[parent].child = id;
            last[parent] = id;
            path[d + 1] = id;
        }
        rlx__tnode *end = &v->nodes[path[r->n]];
        if (prev && l == r->n && l == prev->n) { /* same bytes as the previous token: chain it */
            *tail_tok = r->id;
            end->more = 1;
        } else {
            end->token = r->id;
        }
        tail_tok = &v->next_tok[r->id];
        prev = r;
    }
    v->max_depth = (uint32_t)max_len;
    /* preorder facts: the nodes were made in preorder (tokens sorted, children by byte), so a
     * node's subtree is the run of nodes up to its end */
    v->depth = malloc((size_t)v->n_nodes * sizeof *v->depth);
    v->end = malloc((size_t)v->n_nodes * sizeof *v->end);
    if (!v->depth || !v->end) goto fail;
    v->depth[0] = 0;
    for (uint32_t i = 0; i < v->n_nodes; i++) /* children have their parent's depth + 1 */
        for (uint32_t c = v->nodes[i].child; c; c = v->nodes[c].sibling) v->depth[c] = v->depth[i] + 1;
    {
        size_t top = 0; /* path[] as a stack of open nodes */
        for (uint32_t i = 0; i < v->n_nodes; i++) {
            while (top && v->depth[path[top - 1]] >= v->depth[i]) v->end[path[--top]] = i;
            path[top++] = i;
        }
        while (top) v->end[path[--top]] = v->n_nodes;
    }
    if (!(v->maxlen = malloc((size_t)v->n_nodes * sizeof *v->maxlen))) goto fail;
    for (uint32_t i = v->n_nodes; i-- > 0;) { /* children come after their parent */
        uint32_t m = v->nodes[i].token >= 0 ? v->depth[i] : 0;
        for (uint32_t c = v->nodes[i].child; c; c = v->nodes[c].sibling) m = v->maxlen[c] > m ? v->maxlen[c] : m;
        v->maxlen[i] = m;
    }
    if (!(v->tend = malloc(((size_t)v->n_nodes + 1) * sizeof *v->tend))) goto fail;
    v->tend[0] = 0;
    for (uint32_t i = 0; i < v->n_nodes; i++) v->tend[i + 1] = v->tend[i] + (v->nodes[i].token >= 0);
    free(refs);
    free(path);
    free(last);
    return v;
fail:
    free(refs);
    free(path);
    free(last);
    rlx_grammar_vocab_free(v);
    return NULL;
}

void rlx_grammar_vocab_free(rlx_grammar_vocab *v)
{
    if (!v) return;
    free(v->nodes);
    free(v->next_tok);
    free(v->tok_off);
    free(v->bytes);
    free(v->depth);
    free(v->end);
    free(v->maxlen);
    free(v->tend);
    free(v->len7);
    free(v->eog);
    free(v);
}

int rlx_grammar_vocab_set_eog(rlx_grammar_vocab *v, bool (*is_eog)(const void *ctx, int32_t token), const void *ctx)
{
    if (!v->eog && !(v->eog = calloc(((size_t)v->n_vocab + 63) / 64 + 1, sizeof *v->eog))) return RLX_ENOMEM;
    for (int32_t t = 0; t < v->n_vocab; t++)
        if (is_eog(ctx, t)) v->eog[t / 64] |= 1ull << (t % 64);
    return 0;
}

typedef struct mask_level {
    rlx__sset set;
    uint32_t partial;
    int remain;
    const rlx__sset *cur;    /* this level's stacks: &set or an ancestor's */
} mask_level;

int64_t rlx_grammar_mask(const rlx_grammar_state *s, const rlx_grammar_vocab *v, uint8_t *allowed)
{
    memset(allowed, 0, (size_t)v->n_vocab);
    uint32_t depth = v->max_depth + 1;
    mask_level *lv = calloc(depth, sizeof *lv);
    uint32_t *path = malloc(depth * sizeof *path), *buf = s->buf; /* the state's scratch */
    int64_t count = 0;
    int rc = 0;
    if (!lv || !path) {
        rc = RLX_ENOMEM;
        goto done;
    }
    lv[0].cur = &s->stacks;
    lv[0].partial = s->partial;
    lv[0].remain = s->remain;
    /* iterative DFS: path[d] is the node at depth d + 1 being visited */
    uint32_t d = 0;
    uint32_t node = v->nodes[0].child;
    while (node || d > 0) {
        if (!node) { /* climb: next sibling of the parent */
            d--;
            node = v->nodes[path[d]].sibling;
            continue;
        }
        mask_level *up = &lv[d], *here = &lv[d + 1];
        here->partial = up->partial;
        here->remain = up->remain;
        int r = rlx__grammar_step_byte(s->g, up->cur, &here->partial, &here->remain, v->nodes[node].byte, &here->set, buf);
        if (r < 0) {
            rc = r;
            goto done;
        }
        if (r == 0) { /* rejected: every token under this node too */
            node = v->nodes[node].sibling;
            continue;
        }
        here->cur = r == 1 ? &here->set : up->cur;
        for (int32_t t = v->nodes[node].token; t >= 0; t = v->next_tok[t]) {
            allowed[t] = 1;
            count++;
        }
        path[d++] = node;
        node = v->nodes[node].child;
    }
    count += rlx__grammar_token_bits(s, v, NULL, allowed);
done:
    if (lv)
        for (uint32_t i = 0; i < depth; i++) rlx__sset_free(&lv[i].set);
    free(lv);
    free(path);
    return rc ? rc : count;
}

