/* main.c - the rlxd command line: dispatches to the subcommands of cli.h. */
#include "server/cli.h"

#include <stdio.h>
#include <string.h>

#ifndef RLX_VERSION
#define RLX_VERSION "dev"
#endif
#ifndef RLX_COMMIT
#define RLX_COMMIT "unknown"
#endif

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"serve", rlx_cmd_serve, "serve models over HTTP (OpenAI API, /v1/generate) or --stdio JSON lines"},
    {"generate", rlx_cmd_generate, "generate text from a prompt"},
    {"logits", rlx_cmd_logits, "print logits for a token sequence as JSON"},
    {"tokenize", rlx_cmd_tokenize, "print the token ids of a text as a JSON array"},
    {"inspect", rlx_cmd_inspect, "show a GGUF file's (or Hugging Face folder's) metadata and tensors, or a folder's models"},
    {"check", rlx_cmd_check, "say whether rlxd can serve a GGUF file, a Hugging Face folder or each model of a folder"},
    {"render-template", rlx_cmd_render_template, "render a chat template with a JSON context"},
    {"bench", rlx_cmd_bench, "measure prompt and generation speed"},
    {"devices", rlx_cmd_devices, "list compute devices usable now"},
    {"pull", rlx_cmd_pull, "download a model from Hugging Face: hf:OWNER/REPO[:QUANT]"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: rlxd COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-16s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nrlxd COMMAND --help shows a command's options; rlxd --version the build.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("rlxd %s (commit %s)\nbackends: cpu", RLX_VERSION, RLX_COMMIT);
#ifdef RLX_HAVE_VULKAN
        printf(" vulkan");
#endif
#ifdef RLX_HAVE_CUDA
        printf(" cuda");
#endif
        printf("\n");
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "rlxd: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
