/* grammar_rules.h - private to the GBNF compiler (grammar_compile.c, grammar_rules.c): the
 * parser's state, the rule table it builds, and the analysis over the parsed rules - which
 * can match the empty text or any text at all, left recursion, the counted repetitions' chains,
 * and repetitions of terms that can match nothing rewritten. Caller's thread: one compile. */
#ifndef RLX_GRAMMAR_RULES_H
#define RLX_GRAMMAR_RULES_H

#include "engine/grammar_internal.h"

typedef struct parser {
    const char *src, *end;
    rlx_error *err;
    const rlx_grammar_token_ids *ids; /* token references' vocabulary (NULL: ids unchecked, no <text>) */
    bool failed, has_tokens;
} parser;

typedef struct ebuf { gelem *e; size_t n, cap; } ebuf;

/* rule bodies are built as separate element buffers, then laid out back to back */
typedef struct rule_tab {
    ebuf *body;
    char **name;
    bool *defined;
    int *chain_prev;        /* rlx_grammar's (grammar_internal.h); -1 none */
    int *chain_left;
    int *chain_tlen;        /* the repeated term's elements (0: not in a chain) */
    int *star_tlen;         /* a star rule R ::= term R | (empty): the term's elements (0: not one) */
    bool any_chain;
    int n, cap;
} rule_tab;

/* Records the compile's first error ("grammar line L column C: ..." where at is in the source,
 * else "grammar: ..."); returns RLX_EINVAL. */
int rlx__gc_perr(parser *p, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Appends an element; false (and the error recorded) when out of memory. */
bool rlx__gc_push(parser *p, ebuf *b, uint32_t type, uint32_t value);
/* A new defined helper rule named after base; -1 on error. */
int rlx__gc_rule_new(parser *p, rule_tab *rt, const char *base);

/* The rules that can match the empty text (terminals false), or some finite text (terminals
 * true: "productive"), into out[rt->n]. */
void rlx__gc_fix(const rule_tab *rt, bool *out, bool terminals);
/* A rule reachable from r through leading references that leads back to it, -1 when none;
 * mark[rt->n] zeroed by the caller, shared across calls. */
int rlx__gc_left_recursive(const rule_tab *rt, const bool *nullable, int r, uint8_t *mark);
/* The counted repetitions' chains into g; false when out of memory. */
bool rlx__gc_chains_out(const rule_tab *rt, const bool *nullable, rlx_grammar *g);
/* Every star rule whose term can match nothing rewritten to repeat the term's non-empty
 * matches; false on error (recorded in p). */
bool rlx__gc_star_terms_nonempty(parser *p, rule_tab *rt, const bool *nullable);

#endif
