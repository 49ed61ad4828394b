/*
 * vector_steps_family.c - the read-back steps of the policybook family
 * (docs/vectors.md): sinkCount (every policy family), and the score of one
 * position under the instance's scorer: scoreOf (H2O's summed attention),
 * votesOf (Scissorhands' votes) and lastAttentionOf (TOVA's latest
 * record). Each of the three reads pb_kvcache_score and expects -1 for a
 * position not held; lastAttentionOf is also -1 while no step has observed
 * the position. Owns no family and no call table.
 */
#include <math.h>
#include <stdint.h>

#include "vector_runner_internal.h"

int pb__vr_step_sink_count(case_state *c, policy_case *pc, const cJSON *step) {
    return pb__vr_step_count(c, pc, step, pb_kvcache_sink_count(pc->kv),
                             &c->run->totals->steps_sink_count);
}

/* The score of args[0], -1 when it is not held. `integer`: the expectation
 * must be an integer (votes) and "tolerance" is refused. */
static int step_score(case_state *c, policy_case *pc, const cJSON *step,
                      int integer, size_t *counter) {
    if (!pb__vr_step_refuse(c, pc, step, "expectStatus") ||
        (integer && !pb__vr_step_refuse(c, pc, step, "tolerance")))
        return -1;
    uint32_t pos;
    const cJSON *a = pb__vr_step_pos_args(c, pc, step, 1, 1, &pos);
    if (a == NULL) return -1;
    const cJSON *je = cJSON_GetObjectItemCaseSensitive(step, "expect");
    const cJSON *jt = cJSON_GetObjectItemCaseSensitive(step, "tolerance");
    if (!cJSON_IsNumber(je) || !isfinite(je->valuedouble))
        return pb__vr_step_fail(c, pc, "malformed: \"expect\" must be a number "
                                       "(-1: not held)");
    if (integer && (je->valuedouble != floor(je->valuedouble) ||
                    je->valuedouble < -1.0 || je->valuedouble > 4294967295.0))
        return pb__vr_step_fail(c, pc, "malformed: \"expect\" must be a vote count "
                                       "0..4294967295, or -1 (not held)");
    if (jt != NULL && (!cJSON_IsNumber(jt) || !isfinite(jt->valuedouble) ||
                       jt->valuedouble < 0.0))
        return pb__vr_step_fail(c, pc, "malformed: \"tolerance\" must be a number >= 0");
    *counter += 1u;

    double got = 0.0;
    const pb_status st = pb_kvcache_score(pc->kv, pos, &got);
    if (st == PB_ERR_NOT_HELD)
        got = -1.0;
    else if (st != PB_OK)
        return pb__vr_step_fail(c, pc, "pb_kvcache_score returned %s",
                                pb__vr_status_name(st));
    const double want = je->valuedouble;
    const int equal =
        jt == NULL ? got == want : fabs(got - want) <= jt->valuedouble;
    if (!equal) {
        char e[32], g[32], t[32];
        if (jt == NULL)
            return pb__vr_step_fail(c, pc, "%s(%lu): expected %s, got %s%s", pc->call,
                                    (unsigned long)pos,
                                    pb__vr_shortest(want, e, sizeof e),
                                    pb__vr_shortest(got, g, sizeof g),
                                    integer ? "" : " (compared exactly)");
        return pb__vr_step_fail(c, pc, "%s(%lu): expected %s within %s, got %s",
                                pc->call, (unsigned long)pos,
                                pb__vr_shortest(want, e, sizeof e),
                                pb__vr_shortest(jt->valuedouble, t, sizeof t),
                                pb__vr_shortest(got, g, sizeof g));
    }
    return 0;
}

int pb__vr_step_score_of(case_state *c, policy_case *pc, const cJSON *step) {
    return step_score(c, pc, step, 0, &c->run->totals->steps_score);
}

int pb__vr_step_votes_of(case_state *c, policy_case *pc, const cJSON *step) {
    return step_score(c, pc, step, 1, &c->run->totals->steps_votes);
}

int pb__vr_step_last_attention_of(case_state *c, policy_case *pc,
                                  const cJSON *step) {
    return step_score(c, pc, step, 0, &c->run->totals->steps_last_attention);
}
