/* cli.h - the rlxd subcommands. Each lives in server/cmd_<name>.c, takes argv after the
 * subcommand name (argv[0] is the subcommand), prints results on stdout and diagnostics on
 * stderr, and returns the process exit status. */
#ifndef RLX_CLI_H
#define RLX_CLI_H

#include <stdbool.h>
#include <stddef.h>

int rlx_cmd_serve(int argc, char **argv);
int rlx_cmd_inspect(int argc, char **argv);
int rlx_cmd_check(int argc, char **argv);
int rlx_cmd_tokenize(int argc, char **argv);
int rlx_cmd_logits(int argc, char **argv);
int rlx_cmd_generate(int argc, char **argv);
int rlx_cmd_render_template(int argc, char **argv);
int rlx_cmd_bench(int argc, char **argv);
int rlx__bench_spec(int argc, char **argv); /* rlxd bench --spec (cmd_bench_spec.c) */
int rlx_cmd_devices(int argc, char **argv);
int rlx_cmd_pull(int argc, char **argv);

/* `rlxd inspect DIR` (cmd_inspect_dir.c): prefer is a canonical quantization name or NULL. */
int rlx__cmd_inspect_dir(const char *dir, const char *prefer, bool json);
/* Whether q names a llama.cpp quantization (any case); *canon gets its canonical spelling. */
bool rlx__quant_known(const char *q, const char **canon);
/* rlxd inspect DIR's default preference, best first, NULL-terminated. */
extern const char *const rlx__quant_order[];

/* `rlxd bench --grammar` (cmd_bench_grammar.c): what a grammar costs. */
int rlx__cmd_bench_grammar(int argc, char **argv);

/* Reads a whole file (or a FIFO: `<(cmd)`) into a malloc'ed NUL-terminated buffer; NULL on
 * error with errno set: ENODEV for a device or socket (/dev/zero never ends), EISDIR, EFBIG past
 * RLX_CLI_FILE_MAX bytes. */
#define RLX_CLI_FILE_MAX ((size_t)1 << 30)
char *rlx_read_file(const char *path, size_t *len);

/* s as a JSON string literal with its quotes (malloc'ed; NULL when out of memory). */
char *rlx_json_string(const char *s);
/* Strict number parsing for flags: prints "rlxd CMD: FLAG expects ..." and returns false on
 * malformed or out-of-range values. */
bool rlx_arg_long(const char *cmd, const char *flag, const char *val, long min, long max, long *out);
bool rlx_arg_float(const char *cmd, const char *flag, const char *val, double min, double max, float *out);
/* A model path given to a subcommand that is a FIFO, a socket or a device is refused with a
 * message (false), never opened: open() would wait for a FIFO's writer for ever. A path that
 * does not exist or a folder passes (the open names what is wrong). stat() only: no wait. */
bool rlx__cli_model_path_ok(const char *cmd, const char *path);
/* The value after flag argv[*i], advancing *i; prints an error and returns NULL if missing. */
const char *rlx_arg_value(const char *cmd, int argc, char **argv, int *i);
/* "f16" | "f32" -> RLX_F16 / RLX_F32, -1 otherwise. */
int rlx_arg_kv_type(const char *val);

#endif
