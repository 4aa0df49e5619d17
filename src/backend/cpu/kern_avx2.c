/* kern_avx2.c — the CPU kernels compiled for the avx2 instruction set (flags set in CMakeLists.txt). */
#define NB_KTABLE nb__kernels_avx2
#define NB_KISA "avx2"
#include "kern_template.c"
