/* kern_avx2vnni.c - the avx2 build of the x86 kernels in kern_x86.h with AVX-VNNI (CPUs with
 * VNNI but no AVX-512, e.g. recent Intel client parts). */
#include "backends/cpu/kernels.h"

#if defined(__x86_64__)
#pragma GCC target("avx2,fma,f16c,avxvnni")
#define KPFX(name) rlx__avx2vnni_##name
#define KVNNI 2
#define KAVX512 0
#include "backends/cpu/kern_x86.h"
#endif
