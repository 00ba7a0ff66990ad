/* cmd_tokenize.c - `rlxd tokenize`: prints the token ids of a text as a JSON array, using the
 * vocabulary of a GGUF file (a vocabulary-only GGUF is enough). */
#include "server/cli.h"
#include "models/tokenizer.h"
#include "models/safetensors.h"

#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rlxd tokenize -m MODEL.gguf (-p TEXT | -f FILE) [--no-add-special] [--parse-special]\n"
            "  -m, --model FILE     GGUF file (or Hugging Face folder: tokenizer.json) whose vocabulary to use\n"
            "  -p, --prompt TEXT    text to tokenize\n"
            "  -f, --file FILE      read the text from FILE (bytes as they are)\n"
            "  --no-add-special     do not add BOS/EOS as the vocabulary would\n"
            "  --parse-special      recognise control tokens such as <|im_start|> in the text\n");
}

int rlx_cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool add_special = true, parse_special = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_val) model = argv[++i];
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && has_val) prompt = argv[++i];
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && has_val) file = argv[++i];
        else if (!strcmp(a, "--no-add-special")) add_special = false;
        else if (!strcmp(a, "--parse-special")) parse_special = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else {
            fprintf(stderr, "rlxd tokenize: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model || (!prompt == !file)) {
        fprintf(stderr, "rlxd tokenize: need -m MODEL and exactly one of -p TEXT or -f FILE\n");
        usage(stderr);
        return 2;
    }
    if (!rlx__cli_model_path_ok("tokenize", model)) return 1;
    char *owned = NULL;
    size_t len = 0;
    if (file) {
        owned = rlx_read_file(file, &len);
        if (!owned) {
            fprintf(stderr, "rlxd tokenize: cannot read %s: %s\n", file, strerror(errno));
            return 1;
        }
        prompt = owned;
    } else {
        len = strlen(prompt);
    }

    rlx_error err = {0};
    rlx_gguf *g = NULL;
    rlx_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = rlx_st_is_folder(model) ? rlx_st_open(&g, model, &err) : rlx_gguf_open(&g, model, &err);
    if (!rc) rc = rlx_tokenizer_from_gguf(&tok, g, &err);
    if (!rc) rc = rlx_tokenize(tok, prompt, len, add_special, parse_special, &ids, &n, &err);
    if (rc) {
        fprintf(stderr, "rlxd tokenize: %s\n", err.msg[0] ? err.msg : rlx_strerror(rc));
    } else {
        putchar('[');
        for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
        puts("]");
    }
    free(ids);
    rlx_tokenizer_free(tok);
    if (g) rlx_gguf_close(g);
    free(owned);
    return rc ? 1 : 0;
}
