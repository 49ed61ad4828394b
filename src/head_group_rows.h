/*
 * head_group_rows.h - the row pool of a layer group's pooled K/V layout
 * (docs/spec.md §16.6, internal): which of the layer's pool_rows K/V rows
 * each held (head, position) occupies. It owns the row numbering only; the
 * heads' decisions stay with the group and its instances, which call it
 * after each admission, evict and prefill.
 */
#ifndef PB_SRC_HEAD_GROUP_ROWS_H
#define PB_SRC_HEAD_GROUP_ROWS_H

#include <stddef.h>
#include <stdint.h>

/* A free row, the end of a head's list. */
#define PB__ROW_NONE UINT32_MAX

/* The pool: a LIFO stack of free rows, and per head a singly linked list
 * of its rows in held order (ascending position) with each row's
 * position. All arrays live in the group's one block. */
typedef struct pb__row_pool {
    uint32_t on;       /* params.pooled_rows */
    uint32_t num_heads;
    uint32_t rows;     /* P (when on) */
    uint32_t free_n;   /* free rows: free_rows[0 .. free_n-1], top last */
    uint32_t used;     /* rows handed out by a prefill's assignment */
    uint32_t *free_rows; /* [P] */
    uint32_t *next;      /* [P] the next row of the same head */
    uint32_t *pos;       /* [P] the position a held row holds */
    uint32_t *first;     /* [H] head h's first row, or PB__ROW_NONE */
    uint32_t *last;      /* [H] head h's last row, or PB__ROW_NONE */
} pb__row_pool;

/* The bytes of a pool of `rows` rows for num_heads heads: four arrays,
 * each rounded up to whole lines (0 when rows is 0). */
size_t pb__row_pool_bytes(uint32_t num_heads, uint32_t rows);

/* Points the pool at mem (pb__row_pool_bytes, line-aligned) and resets it. */
void pb__row_pool_init(pb__row_pool *pool, void *mem, uint32_t num_heads,
                       uint32_t rows);

/* After create and reset: head h holds position 0 in row h; pops give
 * rows H, H + 1, ... in that order. */
void pb__row_pool_reset(pb__row_pool *pool);

/* Whether every head can admit a position now. */
static inline int pb__row_pool_can_admit(const pb__row_pool *pool) {
    return !pool->on || pool->free_n >= pool->num_heads;
}

/* Every head admits pos: head 0 pops a row first, then head 1, ...
 * Requires pb__row_pool_can_admit. No-op when off. */
void pb__row_pool_admit(pb__row_pool *pool, uint32_t pos);

/* Head h gave up victims[0 .. n-1] (ascending, each held by it): their
 * rows leave its list and are pushed in that order; rows_out[i] (when not
 * NULL) gets victims[i]'s row. No-op when off. */
void pb__row_pool_release(pb__row_pool *pool, uint32_t h,
                          const uint32_t *victims, size_t n,
                          uint32_t *rows_out);

/* A prefill ended: every list is emptied, then head h (in head order)
 * appends its held positions pos[0 .. n-1] (ascending) on rows taken in
 * ascending order from 0; the rest are free, popped ascending. Call once
 * per head, h = 0, 1, ..., after pb__row_pool_clear. */
void pb__row_pool_clear(pb__row_pool *pool);
void pb__row_pool_assign(pb__row_pool *pool, uint32_t h, const uint32_t *pos,
                         size_t n);
/* Closes a prefill's assignment: the free stack holds the rows not taken. */
void pb__row_pool_close(pb__row_pool *pool);

#endif /* PB_SRC_HEAD_GROUP_ROWS_H */
