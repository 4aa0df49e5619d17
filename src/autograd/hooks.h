/* hooks.h — post-accumulate gradient hooks inside a backward pass (hooks.c; used by backward.c). */
#ifndef NB_AUTOGRAD_HOOKS_H
#define NB_AUTOGRAD_HOOKS_H

#include "../core/internal.h"

typedef struct nb__hook_pass nb__hook_pass;

/** *out: the hooked leaves the tape nodes order[0..n) reach, with their counts of input slots naming
 *  them; NULL when no hook is registered.  NB_ERR_OOM (*out NULL) when it cannot be built. */
nb_status nb__hooks_begin(nb_node *const *order, size_t n, nb__hook_pass **out);
/** The pass is done with node (its contributions added to leaves' grads, or none when no gradient
 *  reached it): run the hooks of the hooked leaves it fed for the last time. */
void nb__hooks_node_done(nb__hook_pass *p, const nb_node *node);
void nb__hooks_end(nb__hook_pass *p);
/** True while a hook of this thread runs (a backward pass started from one is refused). */
bool nb__hooks_running(void);

#endif
