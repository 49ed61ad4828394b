/*
 * block_layout.h - the one layout rule of every object that lives in one
 * block obtained at create (a policy instance, a layer group, a Q/K
 * scorer): parts appended in order, each starting on its own cache line
 * and padded to whole lines, the block asked of the allocator with room to
 * align its start wherever the allocator places it. Sizes that overflow
 * size_t are caught once, in the cursor. Not installed.
 */
#ifndef PB_SRC_BLOCK_LAYOUT_H
#define PB_SRC_BLOCK_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* Every part starts on its own cache line, and a block is padded to whole
 * lines, so two objects never share a line. */
#define PB__ALIGN ((size_t)64)

/* A layout under construction: the bytes so far, whole lines unless a
 * part was appended unpadded, and whether a size overflowed. */
typedef struct pb__cursor {
    size_t at;
    int overflow;
} pb__cursor;

/* n rounded up to whole lines; n itself is left to the caller to keep
 * below SIZE_MAX - PB__ALIGN. */
static inline size_t pb__lines(size_t n) {
    return (n + PB__ALIGN - 1u) & ~(PB__ALIGN - 1u);
}

/* Appends `bytes` at the cursor without padding (parts that must stay
 * contiguous) and returns their offset. */
static inline size_t pb__part_unpadded(pb__cursor *c, size_t bytes) {
    const size_t start = c->at;
    if (bytes > SIZE_MAX - c->at)
        c->overflow = 1;
    else
        c->at += bytes;
    return start;
}

/* Appends a part of `bytes`, rounded up to whole lines, starting on a
 * line (the cursor is rounded up first), and returns its offset. */
static inline size_t pb__part(pb__cursor *c, size_t bytes) {
    if (c->at > SIZE_MAX - (PB__ALIGN - 1u) ||
        bytes > SIZE_MAX - (PB__ALIGN - 1u)) {
        c->overflow = 1;
        return c->at;
    }
    c->at = pb__lines(c->at);
    return pb__part_unpadded(c, pb__lines(bytes));
}

/* The bytes to ask of the allocator for the layout: its whole lines plus
 * PB__ALIGN - 1 for the alignment of the start; 0 if a size overflowed. */
static inline size_t pb__block_bytes(const pb__cursor *c) {
    if (c->overflow || c->at > SIZE_MAX - 2u * (PB__ALIGN - 1u)) return 0u;
    return pb__lines(c->at) + (PB__ALIGN - 1u);
}

/* The first line-aligned address in a block the allocator returned. */
static inline unsigned char *pb__block_start(void *raw) {
    const uintptr_t at = (uintptr_t)raw;
    const uintptr_t start =
        (at + (PB__ALIGN - 1u)) & ~(uintptr_t)(PB__ALIGN - 1u);
    return (unsigned char *)raw + (start - at);
}

#endif /* PB_SRC_BLOCK_LAYOUT_H */
