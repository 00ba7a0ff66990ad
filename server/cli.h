/* cli.h - the rlxd subcommands. Each lives in server/cmd_<name>.c, takes argv after the
 * subcommand name (argv[0] is the subcommand), prints results on stdout and diagnostics on
 * stderr, and returns the process exit status. */
#ifndef RLX_CLI_H
#define RLX_CLI_H

#include <stddef.h>

int rlx_cmd_serve(int argc, char **argv);
int rlx_cmd_inspect(int argc, char **argv);
int rlx_cmd_tokenize(int argc, char **argv);
int rlx_cmd_logits(int argc, char **argv);
int rlx_cmd_generate(int argc, char **argv);
int rlx_cmd_render_template(int argc, char **argv);
int rlx_cmd_bench(int argc, char **argv);
int rlx_cmd_devices(int argc, char **argv);

/* Reads a whole file into a malloc'ed NUL-terminated buffer; NULL on error (errno set). */
char *rlx_read_file(const char *path, size_t *len);

#endif
