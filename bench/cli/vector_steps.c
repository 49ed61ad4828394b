/*
 * vector_steps.c - the steps every per-layer policy case takes
 * (docs/vectors.md): onDecodeStep, evict, the read-backs effectiveBudget,
 * windowScoreOf, keptCount, keptPositions and capacity, and reset; and the
 * helpers every step file uses to read "args", "expect" and "expectStatus"
 * and to fail a step by name.
 *
 * On the compatible surface a decode or evict step without "expectStatus"
 * goes through the vtable; every other call, and a step that pins a status,
 * goes through the native function. Owns no family and no call table
 * (vector_policy_case.c has it); the prefill step is vector_steps_prefill.c.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vector_runner_internal.h"

/* Fails the step, naming it ("step 3 (evict): ..."). */
int pb__vr_step_fail(case_state *c, const policy_case *pc, const char *fmt, ...) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "step %zu (%s): ", pc->step, pc->call);
    va_list ap;
    va_start(ap, fmt);
    pb__vr_vfail(c, prefix, fmt, ap);
    va_end(ap);
    return -1;
}

/* The step's "args" as a list of want_min .. want_max items (an absent or
 * null "args" counts as []). */
const cJSON *pb__vr_step_args(case_state *c, const policy_case *pc,
                              const cJSON *step, int want_min, int want_max) {
    static const cJSON empty = {0};
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(step, "args");
    if (a == NULL || cJSON_IsNull(a)) {
        if (want_min == 0) return &empty;
        pb__vr_step_fail(c, pc, "malformed: \"args\" is missing");
        return NULL;
    }
    const int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    if (n < want_min || n > want_max) {
        if (want_max > want_min)
            pb__vr_step_fail(c, pc,
                             "malformed: \"args\" must be a list of %d or %d items",
                             want_min, want_max);
        else
            pb__vr_step_fail(c, pc, "malformed: \"args\" must be a list of %d items",
                             want_min);
        return NULL;
    }
    return a;
}

const cJSON *pb__vr_step_pos_args(case_state *c, const policy_case *pc,
                                  const cJSON *step, int want_min,
                                  int want_max, uint32_t *pos) {
    const cJSON *a = pb__vr_step_args(c, pc, step, want_min, want_max);
    if (a == NULL) return NULL;
    if (!pb__vr_get_u32(a->child, pos)) {
        pb__vr_step_fail(c, pc, "malformed: the position must be an integer "
                                "0..4294967295");
        return NULL;
    }
    return a;
}

/* The optional "expectStatus" (default PB_OK); *given tells whether it was
 * there. */
int pb__vr_step_status(case_state *c, const policy_case *pc, const cJSON *step,
                       pb_status *st, int *given) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(step, "expectStatus");
    *st = PB_OK;
    *given = j != NULL;
    if (j != NULL && !pb__vr_get_status(j, st)) {
        pb__vr_step_fail(c, pc, "malformed: \"expectStatus\" must be a status name such "
                                "as \"PB_ERR_PARAM\"");
        return 0;
    }
    return 1;
}

/* Refuses fields a call does not take. */
int pb__vr_step_refuse(case_state *c, const policy_case *pc, const cJSON *step,
                       const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(step, key);
    if (j == NULL || (strcmp(key, "expect") == 0 && cJSON_IsNull(j))) return 1;
    pb__vr_step_fail(c, pc, "malformed: this call takes no \"%s\"", key);
    return 0;
}

uint32_t *pb__vr_step_positions(case_state *c, const policy_case *pc,
                                size_t n, uint32_t *expect) {
    uint32_t *p = malloc(n * sizeof *p);
    if (p == NULL) {
        free(expect);
        pb__vr_step_fail(c, pc, "out of memory");
    }
    return p;
}

int pb__vr_step_head(case_state *c, const policy_case *pc, const cJSON *step,
                     unsigned refused, pb_status *want, int *given) {
    return ((refused & PB__VR_NO_EXPECT) == 0u ||
            pb__vr_step_refuse(c, pc, step, "expect")) &&
           ((refused & PB__VR_NO_TOLERANCE) == 0u ||
            pb__vr_step_refuse(c, pc, step, "tolerance")) &&
           pb__vr_step_status(c, pc, step, want, given);
}

int pb__vr_check_status(case_state *c, const policy_case *pc, pb_status want,
                        pb_status got) {
    if (want == got) return 1;
    pb__vr_step_fail(c, pc, "expected status %s, got %s (%s)", pb__vr_status_name(want),
                     pb__vr_status_name(got), pb_status_str(got));
    return 0;
}

int pb__vr_step_decode(case_state *c, policy_case *pc, const cJSON *step) {
    pb_status want;
    int given;
    if (!pb__vr_step_head(c, pc, step, PB__VR_NO_EXPECT | PB__VR_NO_TOLERANCE,
                          &want, &given))
        return -1;
    uint32_t pos;
    const cJSON *a = pb__vr_step_pos_args(c, pc, step, 2, 2, &pos);
    if (a == NULL) return -1;
    const cJSON *jw = a->child->next;
    float *w = NULL;
    size_t n = 0;
    if (!cJSON_IsNull(jw)) {
        if (!cJSON_IsArray(jw))
            return pb__vr_step_fail(c, pc, "malformed: the weights must be a list or "
                                           "null");
        const int size = cJSON_GetArraySize(jw);
        w = malloc(((size_t)(size > 0 ? size : 0) + 1u) * sizeof *w);
        if (w == NULL) return pb__vr_step_fail(c, pc, "out of memory");
        const cJSON *e;
        cJSON_ArrayForEach(e, jw) {
            if (n >= (size_t)size || !pb__vr_get_weight(e, &w[n])) {
                free(w);
                return pb__vr_step_fail(c, pc, "malformed: weight %zu must be a number, "
                                               "\"NaN\", \"Infinity\" or \"-Infinity\"",
                                        n);
            }
            ++n;
        }
    }
    c->run->totals->steps_decode += 1u;
    int ok = 1;
    if (pc->vt != NULL && !given) {
        pc->vt->on_decode_step(pc->kv, pos, w, n);
    } else {
        ok = pb__vr_check_status(c, pc, want, pb_kvcache_observe(pc->kv, pos, w, n));
    }
    free(w);
    return ok ? 0 : -1;
}

int pb__vr_step_evict(case_state *c, policy_case *pc, const cJSON *step) {
    pb_status want;
    int given;
    if (!pb__vr_step_head(c, pc, step, PB__VR_NO_TOLERANCE, &want, &given))
        return -1;
    const cJSON *a = pb__vr_step_args(c, pc, step, 1, 2);
    if (a == NULL) return -1;
    uint32_t budget, cap = UINT32_MAX;
    if (!pb__vr_get_u32(a->child, &budget))
        return pb__vr_step_fail(c, pc, "malformed: the budget must be an integer "
                                       "0..4294967295");
    if (a->child->next != NULL && !pb__vr_get_u32(a->child->next, &cap))
        return pb__vr_step_fail(c, pc, "malformed: the victims capacity must be an "
                                       "integer 0..4294967295");
    const cJSON *je = cJSON_GetObjectItemCaseSensitive(step, "expect");
    uint32_t *expect = NULL;
    size_t n_expect = 0;
    if (want == PB_OK) {
        if (!pb__vr_get_u32_list(je, &expect, &n_expect))
            return pb__vr_step_fail(c, pc, "malformed: \"expect\" must be the list of "
                                           "victims");
    } else if (je != NULL) {
        return pb__vr_step_fail(c, pc, "malformed: a failing evict takes no "
                                       "\"expect\"");
    }

    /* No evict drops more than what is held, so a capacity above the held
     * count behaves as the held count. */
    const size_t held = pb_kvcache_kept_count(pc->kv);
    const size_t room = cap < held ? cap : held;
    uint32_t *victims = pb__vr_step_positions(c, pc, room + 1u, expect);
    if (victims == NULL) return -1;
    c->run->totals->steps_evict += 1u;
    size_t n = 0;
    int ok = 1;
    if (pc->vt != NULL && !given) {
        n = pc->vt->evict(pc->kv, budget, victims, room);
    } else {
        ok = pb__vr_check_status(c, pc, want,
                                 pb_kvcache_evict(pc->kv, budget, victims, room, &n));
    }
    if (ok && want == PB_OK) {
        if (n > room) {
            pb__vr_step_fail(c, pc, "evict(%lu) reported %zu victims, more than the "
                                    "capacity %zu",
                             (unsigned long)budget, n, room);
            ok = 0;
        } else if (n != n_expect ||
                   (n && memcmp(victims, expect, n * sizeof *victims) != 0)) {
            pb__vr_step_fail(c, pc, "evict(%lu): expected ", (unsigned long)budget);
            pb__vr_msg_add_expected_got(&c->msg, expect, n_expect, victims, n);
            ok = 0;
        }
    }
    free(victims);
    free(expect);
    return ok ? 0 : -1;
}

int pb__vr_step_count(case_state *c, policy_case *pc, const cJSON *step,
                      uint64_t got, size_t *counter) {
    if (!pb__vr_step_refuse(c, pc, step, "expectStatus") ||
        !pb__vr_step_refuse(c, pc, step, "tolerance") ||
        pb__vr_step_args(c, pc, step, 0, 0) == NULL)
        return -1;
    uint64_t want;
    if (!pb__vr_get_u64(cJSON_GetObjectItemCaseSensitive(step, "expect"), &want))
        return pb__vr_step_fail(c, pc, "malformed: \"expect\" must be an integer");
    *counter += 1u;
    if (got != want)
        return pb__vr_step_fail(c, pc, "expected %llu, got %llu",
                                (unsigned long long)want, (unsigned long long)got);
    return 0;
}

int pb__vr_step_effective_budget(case_state *c, policy_case *pc,
                                 const cJSON *step) {
    return pb__vr_step_count(c, pc, step, pb_kvcache_effective_budget(pc->kv),
                      &c->run->totals->steps_effective);
}

int pb__vr_step_kept_count(case_state *c, policy_case *pc, const cJSON *step) {
    return pb__vr_step_count(c, pc, step, pb_kvcache_kept_count(pc->kv),
                      &c->run->totals->steps_kept_count);
}

int pb__vr_step_capacity(case_state *c, policy_case *pc, const cJSON *step) {
    return pb__vr_step_count(c, pc, step, pb_kvcache_capacity(pc->kv),
                      &c->run->totals->steps_capacity);
}

int pb__vr_step_kept_positions(case_state *c, policy_case *pc, const cJSON *step) {
    if (!pb__vr_step_refuse(c, pc, step, "expectStatus") ||
        !pb__vr_step_refuse(c, pc, step, "tolerance") ||
        pb__vr_step_args(c, pc, step, 0, 0) == NULL)
        return -1;
    uint32_t *expect = NULL;
    size_t n_expect = 0;
    if (!pb__vr_get_u32_list(cJSON_GetObjectItemCaseSensitive(step, "expect"), &expect,
                             &n_expect))
        return pb__vr_step_fail(c, pc, "malformed: \"expect\" must be a list of "
                                       "positions");
    const size_t held = pb_kvcache_kept_count(pc->kv);
    uint32_t *got = pb__vr_step_positions(c, pc, held + 1u, expect);
    if (got == NULL) return -1;
    c->run->totals->steps_kept_positions += 1u;
    size_t n = 0;
    int ok = 0;
    const pb_status st = pb_kvcache_kept_positions(pc->kv, got, held, &n);
    if (st != PB_OK)
        pb__vr_step_fail(c, pc, "pb_kvcache_kept_positions returned %s",
                         pb__vr_status_name(st));
    else if (n > held)
        pb__vr_step_fail(c, pc, "pb_kvcache_kept_positions reported %zu positions, "
                                "more than the %zu held",
                         n, held);
    else if (n != n_expect ||
             (n && memcmp(got, expect, n * sizeof *got) != 0)) {
        pb__vr_step_fail(c, pc, "expected ");
        pb__vr_msg_add_expected_got(&c->msg, expect, n_expect, got, n);
    } else
        ok = 1;
    free(got);
    free(expect);
    return ok ? 0 : -1;
}

int pb__vr_step_window_score(case_state *c, policy_case *pc, const cJSON *step) {
    pb_status want;
    int given;
    if (!pb__vr_step_status(c, pc, step, &want, &given)) return -1;
    (void)given;
    uint32_t pos;
    const cJSON *a = pb__vr_step_pos_args(c, pc, step, 1, 1, &pos);
    if (a == NULL) return -1;
    const cJSON *je = cJSON_GetObjectItemCaseSensitive(step, "expect");
    const cJSON *jt = cJSON_GetObjectItemCaseSensitive(step, "tolerance");
    double tolerance = 0.0;
    if (want == PB_OK) {
        if (!cJSON_IsNumber(je) || !isfinite(je->valuedouble))
            return pb__vr_step_fail(c, pc, "malformed: \"expect\" must be a number");
        if (jt != NULL && (!cJSON_IsNumber(jt) || !isfinite(jt->valuedouble) ||
                           jt->valuedouble < 0.0))
            return pb__vr_step_fail(c, pc, "malformed: \"tolerance\" must be a number "
                                           ">= 0");
        if (jt != NULL) tolerance = jt->valuedouble;
    } else if (je != NULL || jt != NULL) {
        return pb__vr_step_fail(c, pc, "malformed: a failing windowScoreOf takes no "
                                       "\"expect\" or \"tolerance\"");
    }
    c->run->totals->steps_window += 1u;
    double score = 0.0;
    if (!pb__vr_check_status(c, pc, want, pb_kvcache_window_score(pc->kv, pos, &score)))
        return -1;
    if (want != PB_OK) return 0;
    const double expect = je->valuedouble;
    const int equal = jt == NULL ? score == expect
                                 : fabs(score - expect) <= tolerance;
    if (!equal) {
        char e[32], g[32], t[32];
        if (jt == NULL)
            return pb__vr_step_fail(c, pc, "windowScoreOf(%lu): expected %s, got %s "
                                           "(compared exactly)",
                                    (unsigned long)pos, pb__vr_shortest(expect, e, sizeof e),
                                    pb__vr_shortest(score, g, sizeof g));
        return pb__vr_step_fail(c, pc, "windowScoreOf(%lu): expected %s within %s, got %s",
                                (unsigned long)pos, pb__vr_shortest(expect, e, sizeof e),
                                pb__vr_shortest(tolerance, t, sizeof t),
                                pb__vr_shortest(score, g, sizeof g));
    }
    return 0;
}

int pb__vr_step_reset(case_state *c, policy_case *pc, const cJSON *step) {
    pb_status want;
    int given;
    if (!pb__vr_step_head(c, pc, step, PB__VR_NO_EXPECT | PB__VR_NO_TOLERANCE,
                          &want, &given) ||
        pb__vr_step_args(c, pc, step, 0, 0) == NULL)
        return -1;
    (void)given;
    c->run->totals->steps_reset += 1u;
    return pb__vr_check_status(c, pc, want, pb_kvcache_reset(pc->kv)) ? 0 : -1;
}
