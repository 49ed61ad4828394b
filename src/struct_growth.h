/*
 * struct_growth.h - the one reader of a caller's versioned struct, by the
 * growth rule of docs/abi.md ("How structs grow"), and the first released
 * size of each struct under that rule. Every door that takes such a
 * struct reads it through pb__struct_read, and every door that fills one
 * for its caller writes it through pb__struct_write. Not installed.
 */
#ifndef PB_SRC_STRUCT_GROWTH_H
#define PB_SRC_STRUCT_GROWTH_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

/* The first released sizes (rule 1): a caller's struct_size may not be
 * smaller. Each stays what that release's header made it, whatever is
 * appended later. */
#define PB__CONFIG_SIZE_0_2 ((size_t)64) /* pb_kvcache_config: to row_stores */
#define PB__PROFILE_PARAMS_SIZE_0_2 ((size_t)PB_PROFILE_PARAMS_SIZE_0_2)
#define PB__SCHEDULE_SIZE_0_2                                                 \
    (offsetof(pb_schedule, weights) + sizeof(const uint32_t *))
#define PB__GROUP_PARAMS_SIZE_0_2 ((size_t)PB_KVCACHE_GROUP_PARAMS_SIZE_0_2)
#define PB__GROUP_INFO_SIZE_0_2 ((size_t)40) /* pb_kvcache_group_plan_info */
#define PB__QK_CONFIG_SIZE_0_2 ((size_t)32)  /* pb_qk_config: to max_rows */

/* Reads the caller's struct `user` (its first member a uint32_t
 * struct_size; NULL: none) into *out, which holds this library's layout
 * of `known` bytes, its defaults already filled in: the bytes
 * user->struct_size covers are copied, the rest keep their defaults, and
 * out's struct_size becomes `known`. PB_OK (nothing read for NULL), or
 * PB_ERR_PARAM with *out unspecified when struct_size is below
 * `first_size` or a byte of user past `known` (a newer caller's field) is
 * not zero. first_size <= known. */
pb_status pb__struct_read(const void *user, size_t first_size, size_t known,
                          void *out);

/* Checks a caller's output struct `user` (its first member a uint32_t
 * struct_size, the size of the caller's layout): PB_ERR_PARAM when that
 * is below `first_size`, else PB_OK. Nothing is written. */
pb_status pb__struct_check_out(const void *user, size_t first_size);

/* Writes this library's `known` bytes of `own` (its own struct_size
 * first) into the caller's checked struct `user`: the bytes its
 * struct_size covers, with struct_size itself left as the caller set it;
 * a newer caller's bytes past `known` are not touched. */
void pb__struct_write(void *user, const void *own, size_t known);

#endif /* PB_SRC_STRUCT_GROWTH_H */
