/*
 * vector_policy_case.c - the shape every per-layer policy case shares
 * (docs/vectors.md): "params" (read by the family), "options", "surface",
 * "expectCreateError", "seed" and the "steps" replayed in order, and THE
 * CALL TABLE that maps a step's "call" to the function that runs it.
 *
 * A case stops at its first failing step, because later steps depend on
 * the state the failed one left. A new call every policy family takes is
 * one entry in pb__vr_common_calls plus its function (in its own step file
 * when it is more than a few lines); a call only one family takes goes in
 * that family's `calls` table instead (vector_runner_internal.h). Owns no
 * family's params and no step's checks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vector_runner_internal.h"

static const char *const policy_case_keys[] = {
    "name", "why", "seed", "params", "options", "surface", "expectCreateError",
    "steps", NULL};
static const char *const option_keys[] = {
    "capacity", "pool", "prefillScope", "prefillMaxLen", NULL};
static const char *const step_keys[] = {
    "call", "args", "expect", "expectStatus", "tolerance", "why", NULL};

/* The calls every policy family takes, in the order the "unknown call"
 * message lists them. */
const pb__vr_call pb__vr_common_calls[] = {
    {"onDecodeStep", pb__vr_step_decode},
    {"evict", pb__vr_step_evict},
    {"effectiveBudget", pb__vr_step_effective_budget},
    {"windowScoreOf", pb__vr_step_window_score},
    {"keptCount", pb__vr_step_kept_count},
    {"keptPositions", pb__vr_step_kept_positions},
    {"capacity", pb__vr_step_capacity},
    {"reset", pb__vr_step_reset},
    {"prefill", pb__vr_step_prefill},
    {"sinkCount", pb__vr_step_sink_count},
    {NULL, NULL}};

static int parse_options(case_state *c, const cJSON *jo, pb_kvcache_options *o) {
    const pb_kvcache_options d = PB_KVCACHE_OPTIONS_DEFAULT;
    *o = d;
    const int obj = pb__vr_object_keys(c, jo, "\"options\"", option_keys);
    if (obj <= 0) return obj < 0;
    static const char *const capacity[] = {"capacity"};
    uint32_t *const capacity_field[] = {&o->capacity};
    if (!pb__vr_read_u32s(c, jo, "options", capacity, capacity_field, 1))
        return 0;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(jo, "pool")) != NULL &&
        !pb__vr_get_named(v, "max", "avg", &o->pool)) {
        pb__vr_fail(c, "malformed: options.pool must be \"max\", \"avg\" or an integer");
        return 0;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(jo, "prefillScope")) != NULL &&
        !pb__vr_get_named(v, "consistent", "reference", &o->prefill_scope)) {
        pb__vr_fail(c, "malformed: options.prefillScope must be \"consistent\", "
                       "\"reference\" or an integer");
        return 0;
    }
    static const char *const max_len[] = {"prefillMaxLen"};
    uint32_t *const max_len_field[] = {&o->prefill_max_len};
    return pb__vr_read_u32s(c, jo, "options", max_len, max_len_field, 1);
}

/* The call named `name` among the common calls and then the family's own;
 * NULL when neither has it. */
static const pb__vr_call *find_call(const pb__vr_policy *policy,
                                    const char *name) {
    const pb__vr_call *const tables[] = {pb__vr_common_calls, policy->calls};
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; ++t)
        for (const pb__vr_call *k = tables[t]; k != NULL && k->name != NULL; ++k)
            if (strcmp(k->name, name) == 0) return k;
    return NULL;
}

/* Fails the step with the list of the calls the family takes. */
static int unknown_call(case_state *c, const policy_case *pc) {
    const pb__vr_call *const tables[] = {pb__vr_common_calls, pc->policy->calls};
    pb__vr_fail(c, "step %zu: malformed: unknown call (the calls are ", pc->step);
    const char *sep = "";
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; ++t)
        for (const pb__vr_call *k = tables[t]; k != NULL && k->name != NULL; ++k) {
            pb__vr_msg_add(&c->msg, "%s%s", sep, k->name);
            sep = ", ";
        }
    pb__vr_msg_add(&c->msg, ")");
    return -1;
}

static int run_step(case_state *c, policy_case *pc, const cJSON *step) {
    if (!cJSON_IsObject(step))
        return pb__vr_fail(c, "step %zu: malformed: a step must be an object", pc->step);
    const cJSON *call = cJSON_GetObjectItemCaseSensitive(step, "call");
    if (!cJSON_IsString(call) || call->valuestring == NULL)
        return pb__vr_fail(c, "step %zu: malformed: \"call\" must be a string", pc->step);
    const pb__vr_call *k = find_call(pc->policy, call->valuestring);
    if (k == NULL) return unknown_call(c, pc);
    pc->call = k->name;
    char what[64];
    snprintf(what, sizeof what, "step %zu (%s)", pc->step, pc->call);
    if (!pb__vr_check_keys(c, step, what, step_keys)) return -1;
    return k->run(c, pc, step);
}

int pb__vr_run_policy_case(case_state *c, const pb__vr_policy *policy,
                           const cJSON *cs) {
    if (!pb__vr_check_keys(c, cs, "the case", policy_case_keys)) return -1;
    vr_params p;
    pb_kvcache_options o;
    const cJSON *jopt = cJSON_GetObjectItemCaseSensitive(cs, "options");
    if (!policy->parse_params(c, cJSON_GetObjectItemCaseSensitive(cs, "params"),
                              &p) ||
        !parse_options(c, jopt, &o))
        return -1;
    const cJSON *jseed = cJSON_GetObjectItemCaseSensitive(cs, "seed");
    uint64_t seed;
    if (jseed != NULL && !pb__vr_get_u64(jseed, &seed))
        return pb__vr_fail(c, "malformed: \"seed\" must be an integer (it is not read: "
                              "the policy is deterministic)");

    /* Which surface: the compatible vtable unless the case needs the
     * native create (options, an exact create status) or asks for it. */
    const cJSON *jerr = cJSON_GetObjectItemCaseSensitive(cs, "expectCreateError");
    int expect_refusal = 0, exact_status = 0;
    pb_status want_create = PB_OK;
    if (jerr != NULL) {
        if (cJSON_IsBool(jerr)) {
            expect_refusal = cJSON_IsTrue(jerr);
        } else if (pb__vr_get_status(jerr, &want_create)) {
            exact_status = 1;
            expect_refusal = want_create != PB_OK;
        } else {
            return pb__vr_fail(c, "malformed: \"expectCreateError\" must be true, false "
                                  "or a status name");
        }
    }
    int native = jopt != NULL || exact_status;
    const cJSON *jsurf = cJSON_GetObjectItemCaseSensitive(cs, "surface");
    if (jsurf != NULL) {
        if (!cJSON_IsString(jsurf) || jsurf->valuestring == NULL ||
            (strcmp(jsurf->valuestring, "native") != 0 &&
             strcmp(jsurf->valuestring, "compatible") != 0))
            return pb__vr_fail(c, "malformed: \"surface\" must be \"native\" or "
                                  "\"compatible\"");
        if (strcmp(jsurf->valuestring, "native") == 0) native = 1;
        else if (native)
            return pb__vr_fail(c, "malformed: \"options\" and a status in "
                                  "\"expectCreateError\" need the native surface");
    }
    const cJSON *jsteps = cJSON_GetObjectItemCaseSensitive(cs, "steps");
    if (jsteps != NULL && !cJSON_IsArray(jsteps))
        return pb__vr_fail(c, "malformed: \"steps\" must be a list");
    if (expect_refusal && jsteps != NULL && jsteps->child != NULL)
        return pb__vr_fail(c, "malformed: a case whose create is refused has no steps");

    /* Keep hostile or mistaken params from allocating without bound. */
    size_t bytes = 0;
    if (policy->size(&p, &o, &bytes) == PB_OK &&
        bytes > c->run->max_bytes)
        return pb__vr_fail(c, "the instance would need %zu bytes, above the runner's "
                              "limit of %zu",
                           bytes, c->run->max_bytes);

    policy_case pc = {NULL, NULL, 0, "", o.prefill_max_len, policy};
    pb_status st = PB_OK;
    if (native) {
        st = policy->create(&p, &o, &pc.kv);
        if (st == PB_OK && pc.kv == NULL)
            return pb__vr_fail(c, "create returned PB_OK and no instance");
    } else {
        pc.vt = policy->vtable;
        pc.kv = policy->create_compatible(&p);
    }
    if (expect_refusal) {
        if (pc.kv != NULL) {
            if (pc.vt) pc.vt->destroy(pc.kv);
            else pb_kvcache_destroy(pc.kv);
            return pb__vr_fail(c, "expected create to be refused%s%s, it succeeded",
                               exact_status ? " with " : "",
                               exact_status ? pb__vr_status_name(want_create) : "");
        }
        if (exact_status && st != want_create)
            return pb__vr_fail(c, "create: expected %s, got %s",
                               pb__vr_status_name(want_create),
                               pb__vr_status_name(st));
        return 0;
    }
    if (pc.kv == NULL) {
        if (native)
            return pb__vr_fail(c, "create refused the params: %s (%s)",
                               pb__vr_status_name(st),
                               pb_status_str(st));
        return pb__vr_fail(c, "create returned NULL (params refused or out of memory)");
    }

    int rc = 0;
    if (jsteps != NULL) {
        const cJSON *step;
        cJSON_ArrayForEach(step, jsteps) {
            if (run_step(c, &pc, step) != 0) {
                rc = -1;
                break;
            }
            ++pc.step;
        }
    }
    if (pc.vt) pc.vt->destroy(pc.kv);
    else pb_kvcache_destroy(pc.kv);
    return rc;
}
