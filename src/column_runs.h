/*
 * column_runs.h - runs of live columns: the walk over ranks 0 .. n-1 of a
 * column array with a few dead columns (holes, ascending), one contiguous
 * run at a time. The doors, the window scorer and the kernels that store
 * or fold a row past the holes use it. Not installed.
 */
#ifndef PB_SRC_COLUMN_RUNS_H
#define PB_SRC_COLUMN_RUNS_H

#include <stddef.h>

/* A run of live columns: ranks [rank, rank + len) live in columns
 * [col, col + len). */
typedef struct pb__run {
    size_t rank, col, len;
} pb__run;

/* Walks the runs covering ranks 0 .. n-1 in order: start from a zeroed
 * pb__runs and call pb__run_next until it returns 0. */
typedef struct pb__runs {
    size_t rank, col, hole;
} pb__runs;

/* An iterator positioned at rank `rank`, for pb__run_next with n > rank
 * (window_ring.c). */
pb__runs pb__runs_at(const size_t *holes, size_t n_holes, size_t rank);

static inline int pb__run_next(pb__runs *it, const size_t *holes,
                               size_t n_holes, size_t n, pb__run *out) {
    if (it->rank >= n) return 0;
    while (it->hole < n_holes && holes[it->hole] == it->col) {
        it->col += 1u;
        it->hole += 1u;
    }
    size_t len = n - it->rank;
    if (it->hole < n_holes && holes[it->hole] - it->col < len)
        len = holes[it->hole] - it->col;
    out->rank = it->rank;
    out->col = it->col;
    out->len = len;
    it->rank += len;
    it->col += len;
    return 1;
}

#endif /* PB_SRC_COLUMN_RUNS_H */
