/* request.c - allocation and release of rlx_request. */
#include "engine/engine.h"

#include <stdlib.h>

rlx_request *rlx_request_new(void)
{
    rlx_request *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    rlx_sampling_params_default(&r->sampling);
    r->top_logprobs = -1;
    r->add_special = true;
    r->embd_normalize = 2;
    r->draft_max = -1;
    return r;
}

void rlx_request_free(rlx_request *r)
{
    if (!r) return;
    free(r->prompt_ids);
    free((void *)r->sampling.logit_bias);
    for (size_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->session_id);
    free(r->grammar);
    for (size_t i = 0; i < r->n_grammar_triggers; i++) free(r->grammar_triggers[i]);
    free(r->grammar_triggers);
    free(r->grammar_trigger_pattern);
    free(r->input_ends);
    free(r);
}
