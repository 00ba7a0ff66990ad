/* cmd_inspect.c - placeholder until the subcommand lands (replaced by its owner). */
#include "server/cli.h"

#include <stdio.h>

int rlx_cmd_inspect(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "rlxd %s: not available in this build yet\n", argv[0]);
    return 1;
}
