/* synth.c - placeholder until rlxd-synth lands. */
#include <stdio.h>

int main(void)
{
    fprintf(stderr, "rlxd-synth: not available in this build yet\n");
    return 1;
}
