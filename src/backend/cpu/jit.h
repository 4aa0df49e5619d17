/*
 * jit.h — the CPU backend's run-time kernel compiler: elementwise fused
 * kernels turned into one C loop each (jit_source.c), built by the system's
 * C compiler into a shared object, cached on disk and loaded with dlopen
 * (jit.c).  Where no compiler runs, the caller interprets the kernel
 * (fused.c): slower, the same results.
 */
#ifndef NB_CPU_JIT_H
#define NB_CPU_JIT_H

#include "../fused.h"

/**
 * A generated kernel over n elements: operand o (the loads, then the
 * outputs) contiguous at ptr[o] (FULL ones; the caller stages the others);
 * prm[2j], prm[2j + 1] instruction j's parameters; uni[v] the element of
 * UNIFORM value v; z must be 0 (the compiler cannot see it: jit_source.c);
 * inplace nonzero when an output shares memory with a load.
 */
typedef void (*nb_jit_fn)(int64_t n, char *const *ptr, const double *prm, const void *const *uni, uint64_t z,
                          int inplace);

/** C source defining function `name` for k; NULL when k holds something the generator does not
 *  emit (a reduction, an integer dtype) or on OOM.  Free with free() (libc memory: the
 *  compiler's allocations stay outside nb_set_allocator's, as they are not tensor data). */
char *nb__jit_source(const nb_fkernel *k, const char *name);

/** Whether instruction I runs a ranged f32 form (f32_forms.h): the source nb__jit_source writes
 *  depends on it, and through F32_RANGE_IF on I's parameters, so kernels are told apart by it. */
bool nb__jit_instr_ranged(const nb_finstr *I);

/** The compiled kernel for k, compiling it on first use (under a lock; later calls find it in
 *  memory, later processes on disk).  NULL: interpret it (no compiler, NB_JIT=0, a kernel the
 *  generator does not emit, a failed build). */
nb_jit_fn nb__jit_get(const nb_fkernel *k);

/** Does the run-time compiler run (a compiler like the library's, a folder to build in, NB_JIT
 *  not 0)?  When false, nb__jit_get returns NULL for every kernel. */
bool nb__jit_on(void);

/** The backend's fused_mode entry: "on: " and how kernels run — compiled (by which compiler,
 *  cached where) or interpreted, and then why no compiler runs (static text). */
const char *nb__jit_status(void);

/** NB_JIT: unset or 1 compiles, 0 does not; anything else warns on stderr and compiles. */
bool nb__jit_env(void);

#endif /* NB_CPU_JIT_H */
