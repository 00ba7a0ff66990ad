/* parse_int.h - request fields read apart from parse.c's generic getters (proto/parse_extra.c):
 * the seed from its literal, and the sampling fields of other servers rlxd does not implement,
 * refused when they would change the output. Called by rlx_api_parse (any thread). */
#ifndef RLX_PROTO_PARSE_INT_H
#define RLX_PROTO_PARSE_INT_H

#include "proto/proto.h"

/* "seed": any 64-bit integer (an integer literal read exactly, as OpenAI and Python take
 * random.getrandbits(64)); -1 or absent: none (a random one, as llama-server). */
int rlx__api_parse_seed(const cJSON *root, rlx_sampling_params *s, rlx_api_error *e);

/* "logit_bias": OpenAI's object {"ID": bias} (keys read as Python's int() reads them) or
 * llama-server's array [[ID, bias], [ID, false], ...] (false: the token never comes); biases in
 * [-100, 100]; ids of this vocabulary (n_vocab > 0). Into q->sampling (the array owned by q). */
int rlx__api_parse_logit_bias(const cJSON *root, rlx_request *q, int32_t n_vocab, rlx_api_error *e);

/* llama-server's and vLLM's fields rlxd does not implement (mirostat, typical_p, DRY, XTC, ...):
 * a value that would change the output is a 400 naming the field, never silently ignored; the
 * neutral value (or null) is accepted. */
int rlx__api_refuse_unsupported(const cJSON *root, rlx_api_error *e);

#endif
