/*
 * struct_growth.c - the reader of a caller's versioned struct by the
 * growth rule of docs/abi.md: refuse a struct_size below the first
 * released size, read only what struct_size covers (the defaults for the
 * rest), accept a newer caller's longer struct only if its unknown bytes
 * are zero; and its writer for the structs a door fills for its caller.
 * It knows no struct's fields; the doors (policy_config.c, profile.c,
 * schedule.c, head_group.c, qk_score.c) fill in the defaults and validate
 * the values.
 */
#include <string.h>

#include "struct_growth.h"

pb_status pb__struct_read(const void *user, size_t first_size, size_t known,
                          void *out) {
    if (user == NULL) return PB_OK;
    uint32_t claimed;
    memcpy(&claimed, user, sizeof claimed);
    const size_t size = (size_t)claimed;
    if (size < first_size) return PB_ERR_PARAM;
    /* A newer caller's fields this library does not know must be unset: a
     * zero is their default. */
    const unsigned char *bytes = (const unsigned char *)user;
    for (size_t i = known; i < size; ++i)
        if (bytes[i] != 0u) return PB_ERR_PARAM;
    memcpy(out, user, size < known ? size : known);
    const uint32_t own = (uint32_t)known;
    memcpy(out, &own, sizeof own);
    return PB_OK;
}

pb_status pb__struct_check_out(const void *user, size_t first_size) {
    uint32_t claimed;
    memcpy(&claimed, user, sizeof claimed);
    return (size_t)claimed < first_size ? PB_ERR_PARAM : PB_OK;
}

void pb__struct_write(void *user, const void *own, size_t known) {
    uint32_t claimed;
    memcpy(&claimed, user, sizeof claimed);
    const size_t size = (size_t)claimed;
    unsigned char *out = (unsigned char *)user;
    const unsigned char *in = (const unsigned char *)own;
    const size_t n = size < known ? size : known;
    if (n > sizeof claimed)
        memcpy(out + sizeof claimed, in + sizeof claimed, n - sizeof claimed);
}
