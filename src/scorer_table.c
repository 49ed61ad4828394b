/*
 * scorer_table.c - the table of scorers: which pb__scorer_ops serves each
 * pb_scorer value, and the scorers' names (pb_scorer_name,
 * pb_scorer_from_name), which are the entries' own. Adding a scorer is its
 * own file (defining a pb__scorer_ops), its value in the public enum
 * (pyramidkv.h) and one line here: docs/architecture.md.
 *
 * Built with PB_SCORER_TABLE_EXAMPLE (only by tests/scorer_example, never
 * into the library), the table has one more entry: the worked example's
 * scorer, at the first value past the public enum.
 */
#include <string.h>

#include "scorer_ops.h"

#ifdef PB_SCORER_TABLE_EXAMPLE
#define PB__SCORER_EXAMPLE (PB_SCORER_NONE + 1)
extern const pb__scorer_ops pb__peak_ops; /* tests/scorer_example */
#endif

static const pb__scorer_ops *const scorer_table[] = {
    [PB_SCORER_WINDOW] = &pb__window_ops,
    [PB_SCORER_CUMULATIVE] = &pb__cumulative_ops,
    [PB_SCORER_LAST] = &pb__last_ops,
    [PB_SCORER_VOTES] = &pb__votes_ops,
    [PB_SCORER_NONE] = &pb__none_ops,
#ifdef PB_SCORER_TABLE_EXAMPLE
    [PB__SCORER_EXAMPLE] = &pb__peak_ops,
#endif
};
#define SCORER_COUNT (sizeof scorer_table / sizeof scorer_table[0])

/* Names besides the entries' own. */
static const struct {
    const char *name;
    uint32_t scorer;
} scorer_aliases[] = {{"recency", PB_SCORER_NONE}};
#define ALIAS_COUNT (sizeof scorer_aliases / sizeof scorer_aliases[0])

const pb__scorer_ops *pb__scorer_ops_of(uint32_t scorer) {
    return scorer < SCORER_COUNT ? scorer_table[scorer] : NULL;
}

PB_API const char *pb_scorer_name(uint32_t scorer) {
    const pb__scorer_ops *ops = pb__scorer_ops_of(scorer);
    return ops != NULL ? ops->name : NULL;
}

PB_API pb_status pb_scorer_from_name(const char *name, uint32_t *scorer) {
    if (name == NULL || scorer == NULL) return PB_ERR_NULL;
    for (uint32_t s = 0; s < SCORER_COUNT; ++s)
        if (scorer_table[s] != NULL &&
            strcmp(name, scorer_table[s]->name) == 0) {
            *scorer = s;
            return PB_OK;
        }
    for (size_t a = 0; a < ALIAS_COUNT; ++a)
        if (strcmp(name, scorer_aliases[a].name) == 0) {
            *scorer = scorer_aliases[a].scorer;
            return PB_OK;
        }
    return PB_ERR_PARAM;
}
