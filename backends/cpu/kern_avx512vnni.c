/* kern_avx512vnni.c - the avx512vnni build of the x86 kernels in kern_x86.h. */
#include "backends/cpu/kernels.h"

#if defined(__x86_64__)
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#define KPFX(name) rlx__avx512vnni_##name
#define KVNNI 1
#define KAVX512 1
#include "backends/cpu/kern_x86.h"
#endif
