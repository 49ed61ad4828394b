/*
 * vector_steps_prefill.c - the prefill step of a per-layer policy case:
 * prefill [ask, len, [[row 0], [row 1], ...]] calls pb_kvcache_prefill
 * (docs/prefill.md, docs/spec.md) and checks the survivors, the victims
 * and the state left behind.
 *
 * Owns the checks of the rows and the memory a prefill step may take; the
 * call table that names it is vector_policy_case.c's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vector_runner_internal.h"

/* acc += n; 0 (and acc saturated) when the sum does not fit in size_t. */
static int add_bytes(size_t *acc, size_t n) {
    if (n > SIZE_MAX - *acc) {
        *acc = SIZE_MAX;
        return 0;
    }
    *acc += n;
    return 1;
}

/* Whether `row` is a list of exactly `len` weights. Counts only up to
 * len + 1 items, so a hostile row costs no more than a well-formed one;
 * *bad_weight is the index of the first item that is not a weight, or
 * SIZE_MAX. */
static int row_is_weights(const cJSON *row, size_t len, size_t *count,
                          size_t *bad_weight) {
    *count = 0;
    *bad_weight = SIZE_MAX;
    if (!cJSON_IsArray(row)) return 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, row) {
        float w;
        if (*count == len) {
            *count += 1u;
            return 0;
        }
        if (!pb__vr_get_weight(e, &w)) {
            *bad_weight = *count;
            return 0;
        }
        *count += 1u;
    }
    return *count == len;
}

/* Whether kept[0 .. n_kept-1] (ascending, below len) and
 * victims[0 .. len-n_kept-1] are together exactly 0 .. len-1. */
static int partition_of_prompt(const uint32_t *kept, size_t n_kept,
                               const uint32_t *victims, size_t len) {
    const size_t n_victims = len - n_kept;
    size_t i = 0, j = 0;
    for (size_t p = 0; p < len; ++p) {
        if (i < n_kept && kept[i] == p) ++i;
        else if (j < n_victims && victims[j] == p) ++j;
        else return 0;
    }
    return i == n_kept && j == n_victims;
}

/* prefill [ask, len, [[row 0], [row 1], ...]]: pb_kvcache_prefill on the
 * case's instance (docs/prefill.md, "Golden vectors"). There is no vtable
 * door for it, so it always calls the native function, as introspection
 * does. The workspace is exactly pb_kvcache_prefill_workspace_size bytes
 * (so a sanitizer build catches any access past the size the query
 * promised), or NULL when the case set options.prefillMaxLen. Besides
 * "expect", a successful call must write survivors and victims that
 * partition the prompt and leave exactly the survivors held. */
int pb__vr_step_prefill(case_state *c, policy_case *pc, const cJSON *step) {
    pb_status want;
    int given;
    if (!pb__vr_step_head(c, pc, step, PB__VR_NO_TOLERANCE, &want, &given))
        return -1;
    (void)given;
    const cJSON *a = pb__vr_step_args(c, pc, step, 3, 3);
    if (a == NULL) return -1;
    uint32_t ask, len32;
    if (!pb__vr_get_u32(a->child, &ask))
        return pb__vr_step_fail(c, pc, "malformed: the ask (args[0]) must be an integer "
                                       "0..4294967295");
    if (!pb__vr_get_u32(a->child->next, &len32))
        return pb__vr_step_fail(c, pc, "malformed: len (args[1]) must be an integer "
                                       "0..4294967295");
    const size_t len = len32;
    const cJSON *jrows = a->child->next->next;
    if (!cJSON_IsArray(jrows))
        return pb__vr_step_fail(c, pc, "malformed: the rows (args[2]) must be a list of "
                                       "rows, each a list of len weights");
    /* Every row is checked before anything is allocated: a malformed step
     * is reported as such, whatever its size. */
    size_t rows = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, jrows) {
        size_t count, bad;
        if (!row_is_weights(row, len, &count, &bad)) {
            if (!cJSON_IsArray(row))
                return pb__vr_step_fail(c, pc, "malformed: row %zu must be a list of "
                                               "len = %zu weights",
                                        rows, len);
            if (bad != SIZE_MAX)
                return pb__vr_step_fail(c, pc, "malformed: row %zu, weight %zu must be "
                                               "a number, \"NaN\", \"Infinity\" or "
                                        "\"-Infinity\"",
                                        rows, bad);
            return pb__vr_step_fail(c, pc, "malformed: row %zu has %s%zu weights, len "
                                           "is %zu (every row is len weights long)",
                                    rows, count > len ? "more than " : "",
                                    count > len ? len : count, len);
        }
        ++rows;
    }
    const cJSON *je = cJSON_GetObjectItemCaseSensitive(step, "expect");
    if (cJSON_IsNull(je)) je = NULL;
    if (want != PB_OK && je != NULL)
        return pb__vr_step_fail(c, pc, "malformed: a failing prefill takes no "
                                       "\"expect\"");
    uint32_t *expect = NULL;
    size_t n_expect = 0;
    if (je != NULL && !pb__vr_get_u32_list(je, &expect, &n_expect))
        return pb__vr_step_fail(c, pc, "malformed: \"expect\" must be the list of kept "
                                       "positions");

    /* What the step needs: the rows x len block, the workspace and the two
     * output arrays (len entries each, so no count can overflow them). It
     * is held to the same limit as an instance. */
    size_t ws_bytes = 0, need = 0;
    int fits = len == 0u || rows <= SIZE_MAX / len;
    const size_t cells = fits ? rows * len : SIZE_MAX;
    fits = fits && cells <= SIZE_MAX / sizeof(float) &&
           add_bytes(&need, cells * sizeof(float));
    if (pc->prefill_max_len == 0u) {
        const pb_status wst = pb_kvcache_prefill_workspace_size(pc->kv, len,
                                                                &ws_bytes);
        if (wst != PB_OK) {
            free(expect);
            return pb__vr_step_fail(c, pc, "pb_kvcache_prefill_workspace_size(len %zu) "
                                           "returned %s",
                                    len, pb__vr_status_name(wst));
        }
        fits = fits && add_bytes(&need, ws_bytes);
    }
    fits = fits && len < SIZE_MAX / (2u * sizeof(uint32_t)) &&
           add_bytes(&need, 2u * (len + 1u) * sizeof(uint32_t));
    if (!fits || need > c->run->max_bytes) {
        free(expect);
        if (!fits)
            return pb__vr_step_fail(c, pc, "the step (%zu rows x len %zu) would need "
                                           "more memory than size_t can count, above "
                                    "the runner's limit of %zu bytes",
                                    rows, len, c->run->max_bytes);
        return pb__vr_step_fail(c, pc, "the step (%zu rows x len %zu) would need %zu "
                                       "bytes for the rows, the workspace and the "
                                "outputs, above the runner's limit of %zu",
                                rows, len, need, c->run->max_bytes);
    }

    /* A non-NULL block even for rows == 0, so the call sees the row count
     * and not a missing pointer. The workspace is allocated at exactly the
     * queried size. */
    float *attn = malloc(cells ? cells * sizeof *attn : 1u);
    void *ws = pc->prefill_max_len ? NULL : malloc(ws_bytes ? ws_bytes : 1u);
    uint32_t *kept = malloc((len + 1u) * sizeof *kept);
    uint32_t *victims = malloc((len + 1u) * sizeof *victims);
    int ok = attn != NULL && (ws != NULL || pc->prefill_max_len) &&
             kept != NULL && victims != NULL;
    if (!ok) pb__vr_step_fail(c, pc, "out of memory");
    if (ok) {
        size_t at = 0;
        cJSON_ArrayForEach(row, jrows) {
            const cJSON *e;
            cJSON_ArrayForEach(e, row) {
                float w = 0.0f;
                (void)pb__vr_get_weight(e, &w); /* checked above */
                attn[at++] = w;
            }
        }
        c->run->totals->steps_prefill += 1u;
        size_t n_kept = SIZE_MAX;
        const pb_status st =
            pb_kvcache_prefill(pc->kv, attn, rows, len, ask, ws, ws_bytes, kept,
                               len, victims, len, &n_kept);
        ok = pb__vr_check_status(c, pc, want, st);
        if (ok && st == PB_OK) {
            if (n_kept == SIZE_MAX) {
                pb__vr_step_fail(c, pc, "prefill returned PB_OK without setting the "
                                        "survivor count");
                ok = 0;
            } else if (n_kept > len) {
                pb__vr_step_fail(c, pc, "prefill reported %zu survivors of a %zu-position "
                                        "prompt",
                                 n_kept, len);
                ok = 0;
            } else if (expect != NULL &&
                       (n_kept != n_expect ||
                        (n_kept && memcmp(kept, expect, n_kept * sizeof *kept)))) {
                pb__vr_step_fail(c, pc, "prefill(ask %lu, len %zu, %zu rows): expected "
                                        "kept ",
                                 (unsigned long)ask, len, rows);
                pb__vr_msg_add_expected_got(&c->msg, expect, n_expect, kept, n_kept);
                ok = 0;
            } else {
                int ascending = 1;
                for (size_t i = 0; i < n_kept && ascending; ++i)
                    ascending = kept[i] < len && (i == 0u || kept[i - 1u] < kept[i]);
                if (!ascending || !partition_of_prompt(kept, n_kept, victims, len)) {
                    pb__vr_step_fail(c, pc, "the kept positions ");
                    pb__vr_msg_add_u32_list(&c->msg, kept, n_kept);
                    pb__vr_msg_add(&c->msg, " and the victims ");
                    pb__vr_msg_add_u32_list(&c->msg, victims, len - n_kept);
                    pb__vr_msg_add(&c->msg, " written are not two ascending lists "
                                            "that together make 0 .. %zu",
                                   len ? len - 1u : 0u);
                    ok = 0;
                }
            }
            /* The survivors written are the survivors held. The victims
             * array is free again and has room for len positions. */
            size_t n_held = 0;
            const pb_status kst =
                ok ? pb_kvcache_kept_positions(pc->kv, victims, len, &n_held)
                   : PB_OK;
            if (ok && (kst != PB_OK || n_held != n_kept ||
                       (n_kept && memcmp(victims, kept, n_kept * sizeof *kept)))) {
                pb__vr_step_fail(c, pc, "after prefill wrote kept ");
                pb__vr_msg_add_u32_list(&c->msg, kept, n_kept);
                if (kst != PB_OK)
                    pb__vr_msg_add(&c->msg, ", pb_kvcache_kept_positions returned %s",
                                   pb__vr_status_name(kst));
                else {
                    pb__vr_msg_add(&c->msg, ", the instance holds ");
                    pb__vr_msg_add_u32_list(&c->msg, victims, n_held);
                }
                ok = 0;
            }
        }
    }
    free(attn);
    free(ws);
    free(kept);
    free(victims);
    free(expect);
    return ok ? 0 : -1;
}
