/* kern_avx512.c — the CPU kernels compiled for the avx512 instruction set (flags set in CMakeLists.txt). */
#define NB_KTABLE nb__kernels_avx512
#define NB_KISA "avx512"
#include "kern_template.c"
