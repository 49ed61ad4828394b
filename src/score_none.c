/*
 * score_none.c - the none scorer (recency, StreamingLLM with sinks): no
 * score at all; the oldest evictable positions go first, and a step
 * reads no weight past the door's check. The rest is the score sources'
 * shared engine.
 */
#include "source_internal.h"

static double none_score(const pb__source *p, size_t rank) {
    (void)p;
    (void)rank;
    return 0.0;
}

static const pb__source_kind none_kind = {.score = none_score};

PB__SOURCE_ENTRY(pb__none_ops, "none", none_kind, NULL)
