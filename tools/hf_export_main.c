/* hf_export_main.c - rlxd-hf-export: a GGUF model as a Hugging Face folder (tools/hf_export.h),
 * so tests can load the same weights both ways and compare. */
#include "tools/hf_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    int shards = 1;
    unsigned flags = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shards") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 99999) { fprintf(stderr, "rlxd-hf-export: --shards expects 1..99999\n"); return 2; }
            shards = (int)v;
        } else if (!strcmp(argv[i], "--multimodal")) {
            flags |= RLX_HF_EXPORT_MULTIMODAL;
        } else if (!in && argv[i][0] != '-') in = argv[i];
        else if (!out && argv[i][0] != '-') out = argv[i];
        else { fprintf(stderr, "rlxd-hf-export: unexpected argument '%s'\n", argv[i]); in = NULL; break; }
    }
    if (!in || !out) {
        fprintf(stderr, "usage: rlxd-hf-export MODEL.gguf OUT_DIR [--shards N] [--multimodal]\n"
                        "Writes config.json, model.safetensors (or N shards with an index), tokenizer.json and\n"
                        "tokenizer_config.json from an F32/F16/BF16 llama, qwen2, qwen3, gemma2 or gemma3 GGUF.\n"
                        "--multimodal (gemma3): as a Gemma3ForConditionalGeneration checkpoint (text_config,\n"
                        "language_model.* tensors, a small vision tower that loading skips).\n");
        return 2;
    }
    rlx_gguf *g;
    rlx_error err = {0};
    int rc = rlx_gguf_open_split(&g, in, &err);
    if (!rc) {
        rc = rlx_hf_export(g, out, shards, flags, &err);
        rlx_gguf_close(g);
    }
    if (rc) {
        fprintf(stderr, "rlxd-hf-export: %s\n", err.msg);
        return 1;
    }
    return 0;
}
