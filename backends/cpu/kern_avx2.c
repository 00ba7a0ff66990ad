/* kern_avx2.c - the avx2 build of the x86 kernels in kern_x86.h. */
#include "backends/cpu/kernels.h"

#if defined(__x86_64__)
#pragma GCC target("avx2,fma,f16c")
#define KPFX(name) rlx__avx2_##name
#define KVNNI 0
#define KAVX512 0
#include "backends/cpu/kern_x86.h"
#endif
