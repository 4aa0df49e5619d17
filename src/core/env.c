/*
 * env.c — the on/off switches among the NB_* run-time settings (NB_FUSE,
 * NB_JIT): one reading and one warning for all of them.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool nb__env_switch(const char *name, const char *doing) {
    const char *e = getenv(name);
    if (e && strcmp(e, "0") != 0 && strcmp(e, "1") != 0)
        fprintf(stderr, "nabla: ignoring %s='%s' (expected 0 or 1); %s\n", name, e, doing);
    return !e || strcmp(e, "0") != 0;
}
