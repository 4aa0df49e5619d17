/* kern_scalar.c — the CPU kernels compiled for the scalar instruction set (flags set in CMakeLists.txt). */
#define NB_KTABLE nb__kernels_scalar
#define NB_KISA "scalar"
#include "kern_template.c"
