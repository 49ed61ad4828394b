/*
 * policy_internal.h - the engine behind every policy door (the native
 * functions, the policybook vtables, the prefill door and the layer
 * group), by concern:
 *   - instance_internal.h: the resolved configuration and the common part
 *     of an instance (struct pb_kvcache), its holes and its peek,
 *   - scorer_ops.h: the table of scorer operations and the scorers,
 *   - column_runs.h: runs of live columns past the holes,
 *   - pooling.h, selection.h: pooling of scores, the k lowest keys,
 *   - kernels.h: the hot loops, one variant per instruction set.
 * A door includes this; a module includes only the headers it uses. Each
 * scorer keeps its own state in a struct that starts with the common part,
 * in the instance's one block: the window scorer's in window_internal.h,
 * the others' in source_internal.h. It does not own the budget arithmetic
 * (pyramid_budget.c) or any public declaration (pyramidkv.h).
 *
 * A door validates its caller's input, then drives these pieces; none of
 * them allocates, prints or aborts, and each assumes validated arguments
 * (they assert their invariants).
 */
#ifndef PB_SRC_POLICY_INTERNAL_H
#define PB_SRC_POLICY_INTERNAL_H

#include "column_runs.h"
#include "instance_internal.h"
#include "kernels.h"
#include "pooling.h"
#include "scorer_ops.h"
#include "selection.h"
#include "weight_check.h"

#endif /* PB_SRC_POLICY_INTERNAL_H */
