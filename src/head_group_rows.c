/*
 * head_group_rows.c - the row pool of a layer group's pooled K/V layout
 * (docs/spec.md §16.6) and its public queries: a LIFO stack of free rows
 * and, per head, the list of its rows in held order. Rows never move; the
 * group calls in after each admission, evict and prefill, so the rows
 * follow the heads' decisions and never make one.
 */
#include <assert.h>
#include <string.h>

#include "block_layout.h"
#include "head_group_internal.h"
#include "head_group_rows.h"

size_t pb__row_pool_bytes(uint32_t num_heads, uint32_t rows) {
    if (rows == 0u) return 0u;
    return 3u * pb__lines((size_t)rows * sizeof(uint32_t)) +
           2u * pb__lines((size_t)num_heads * sizeof(uint32_t));
}

void pb__row_pool_init(pb__row_pool *pool, void *mem, uint32_t num_heads,
                       uint32_t rows) {
    unsigned char *m = (unsigned char *)mem;
    const size_t pr = pb__lines((size_t)rows * sizeof(uint32_t));
    const size_t ph = pb__lines((size_t)num_heads * sizeof(uint32_t));
    pool->on = 1u;
    pool->num_heads = num_heads;
    pool->rows = rows;
    pool->free_rows = (uint32_t *)(void *)m;
    pool->next = (uint32_t *)(void *)(m + pr);
    pool->pos = (uint32_t *)(void *)(m + 2u * pr);
    pool->first = (uint32_t *)(void *)(m + 3u * pr);
    pool->last = (uint32_t *)(void *)(m + 3u * pr + ph);
    pb__row_pool_reset(pool);
}

/* The free stack holds rows from .. P - 1, popped ascending. */
static void fill_free(pb__row_pool *pool, uint32_t from) {
    const uint32_t n = pool->rows - from;
    for (uint32_t i = 0; i < n; i++) pool->free_rows[i] = pool->rows - 1u - i;
    pool->free_n = n;
}

void pb__row_pool_reset(pb__row_pool *pool) {
    if (!pool->on) return;
    const uint32_t nh = pool->num_heads;
    assert(pool->rows >= nh);
    for (uint32_t h = 0; h < nh; h++) {
        pool->first[h] = h;
        pool->last[h] = h;
        pool->next[h] = PB__ROW_NONE;
        pool->pos[h] = 0u;
    }
    fill_free(pool, nh);
}

static void append(pb__row_pool *pool, uint32_t h, uint32_t row,
                   uint32_t pos) {
    pool->next[row] = PB__ROW_NONE;
    pool->pos[row] = pos;
    if (pool->last[h] == PB__ROW_NONE)
        pool->first[h] = row;
    else
        pool->next[pool->last[h]] = row;
    pool->last[h] = row;
}

void pb__row_pool_admit(pb__row_pool *pool, uint32_t pos) {
    if (!pool->on) return;
    assert(pool->free_n >= pool->num_heads);
    for (uint32_t h = 0; h < pool->num_heads; h++)
        append(pool, h, pool->free_rows[--pool->free_n], pos);
}

void pb__row_pool_release(pb__row_pool *pool, uint32_t h,
                          const uint32_t *victims, size_t n,
                          uint32_t *rows_out) {
    if (!pool->on || n == 0u) return;
    uint32_t prev = PB__ROW_NONE;
    uint32_t row = pool->first[h];
    size_t i = 0;
    while (row != PB__ROW_NONE && i < n) {
        const uint32_t nx = pool->next[row];
        if (pool->pos[row] == victims[i]) {
            if (prev == PB__ROW_NONE)
                pool->first[h] = nx;
            else
                pool->next[prev] = nx;
            if (pool->last[h] == row) pool->last[h] = prev;
            pool->next[row] = PB__ROW_NONE;
            pool->free_rows[pool->free_n++] = row;
            if (rows_out != NULL) rows_out[i] = row;
            i++;
        } else {
            prev = row;
        }
        row = nx;
    }
    /* Every victim was one of the head's held positions. */
    assert(i == n);
}

void pb__row_pool_clear(pb__row_pool *pool) {
    if (!pool->on) return;
    for (uint32_t h = 0; h < pool->num_heads; h++) {
        pool->first[h] = PB__ROW_NONE;
        pool->last[h] = PB__ROW_NONE;
    }
    pool->used = 0u;
    pool->free_n = 0u;
}

void pb__row_pool_assign(pb__row_pool *pool, uint32_t h, const uint32_t *pos,
                         size_t n) {
    if (!pool->on) return;
    assert(n <= (size_t)(pool->rows - pool->used));
    for (size_t i = 0; i < n; i++) append(pool, h, pool->used++, pos[i]);
}

void pb__row_pool_close(pb__row_pool *pool) {
    if (!pool->on) return;
    fill_free(pool, pool->used);
}

pb_status pb_kvcache_group_head_rows(const pb_kvcache_group *group,
                                     uint32_t h, uint32_t *rows,
                                     size_t rows_cap, size_t *n) {
    if (group == NULL || n == NULL || (rows == NULL && rows_cap > 0u))
        return PB_ERR_NULL;
    const pb__row_pool *pool = &group->pool;
    if (h >= group->num_heads || !pool->on) return PB_ERR_PARAM;
    const size_t held = pb_kvcache_kept_count(group->heads[h]);
    if (rows_cap < held) {
        *n = held;
        return PB_ERR_BUFFER;
    }
    size_t i = 0;
    for (uint32_t r = pool->first[h]; r != PB__ROW_NONE; r = pool->next[r])
        rows[i++] = r;
    assert(i == held);
    *n = i;
    return PB_OK;
}

pb_status pb_kvcache_group_new_rows(const pb_kvcache_group *group,
                                    uint32_t *rows, size_t rows_len) {
    if (group == NULL || rows == NULL) return PB_ERR_NULL;
    if (!group->pool.on) return PB_ERR_PARAM;
    if (rows_len < group->num_heads) return PB_ERR_BUFFER;
    for (uint32_t h = 0; h < group->num_heads; h++)
        rows[h] = group->pool.last[h];
    return PB_OK;
}
