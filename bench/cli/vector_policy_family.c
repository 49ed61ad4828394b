/*
 * vector_policy_family.c - the rest of the policybook family as vector
 * families (docs/vectors.md): "kv-cache/h2o", "kv-cache/scissorhands",
 * "kv-cache/tova", "kv-cache/streaming-llm" and "kv-cache/sliding-window".
 * Each says which "params" keys it takes (budget, and recentWindow or
 * sinks where the policy has them), creates its instance through its
 * vtable on the compatible surface, and through pb_kvcache_create with the
 * config that vtable means (docs/spec.md §13.6) on the native one, and adds
 * the read-back call of its score (scoreOf, votesOf, lastAttentionOf; the
 * steps are in vector_steps_family.c).
 */
#include <stdint.h>

#include "vector_runner_internal.h"

/* What one member of the family is. */
typedef struct family_member {
    const char *const *keys; /* its params keys, NULL-terminated */
    uint32_t budget, recent_window, sinks; /* its defaults */
    pb_scorer scorer;
} family_member;

static const char *const keys_recent[] = {"budget", "recentWindow", NULL};
static const char *const keys_sinks[] = {"budget", "sinks", NULL};
static const char *const keys_budget[] = {"budget", NULL};

static const family_member h2o = {keys_recent, 512u, 32u, 0u,
                                  PB_SCORER_CUMULATIVE};
static const family_member scissorhands = {keys_recent, 512u, 32u, 0u,
                                           PB_SCORER_VOTES};
static const family_member tova = {keys_budget, 512u, 0u, 0u,
                                   PB_SCORER_LAST};
static const family_member streaming_llm = {keys_sinks, 512u, 0u, 4u,
                                            PB_SCORER_NONE};
static const family_member sliding_window = {keys_budget, 512u, 0u, 0u,
                                             PB_SCORER_NONE};

/* Reads params in the member's key set onto its defaults. */
static int parse_member(case_state *c, const cJSON *jp,
                        const family_member *m, vr_params *params) {
    params->family.budget = m->budget;
    params->family.recent_window = m->recent_window;
    params->family.sinks = m->sinks;
    const int obj = pb__vr_object_keys(c, jp, "\"params\"", m->keys);
    if (obj <= 0) return obj < 0;
    const char *const names[] = {"budget", "recentWindow", "sinks"};
    uint32_t *const fields[] = {&params->family.budget,
                                &params->family.recent_window,
                                &params->family.sinks};
    return pb__vr_read_u32s(c, jp, "params", names, fields, 3);
}

/* The native config the member's vtable means (docs/spec.md §13.6: one
 * layer, share UINT32_MAX so that evict goes down to the budget asked,
 * capacity budget + 1), with the case's options. */
static pb_kvcache_config config_of(const family_member *m, const vr_params *p,
                                   const pb_kvcache_options *o) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = p->family.budget;
    c.share = UINT32_MAX;
    c.capacity = p->family.budget + 1u; /* UINT32_MAX wraps to 0 and is
                                           refused as a budget anyway */
    c.recent_window = p->family.recent_window;
    c.sinks = p->family.sinks;
    c.scorer = (uint32_t)m->scorer;
    if (o != NULL) {
        if (o->capacity != 0u) c.capacity = o->capacity;
        c.pool = o->pool;
        c.prefill_scope = o->prefill_scope;
        c.prefill_max_len = o->prefill_max_len;
    }
    return c;
}

static pb_status size_member(const family_member *m, const vr_params *p,
                             const pb_kvcache_options *o, size_t *bytes) {
    const pb_kvcache_config c = config_of(m, p, o);
    return pb_kvcache_size(&c, bytes);
}

static pb_status create_member(const family_member *m, const vr_params *p,
                               const pb_kvcache_options *o, pb_kvcache **out) {
    const pb_kvcache_config c = config_of(m, p, o);
    return pb_kvcache_create(&c, NULL, out);
}

/* The functions of pb__vr_policy take no member, so each member gets its
 * own three. */
#define VR_MEMBER_FUNCTIONS(name)                                             \
    static int parse_##name(case_state *c, const cJSON *jp, vr_params *p) {  \
        return parse_member(c, jp, &name, p);                                 \
    }                                                                         \
    static pb_status size_##name(const vr_params *p,                          \
                                 const pb_kvcache_options *o, size_t *b) {    \
        return size_member(&name, p, o, b);                                   \
    }                                                                         \
    static pb_status create_##name(const vr_params *p,                        \
                                   const pb_kvcache_options *o,               \
                                   pb_kvcache **out) {                        \
        return create_member(&name, p, o, out);                               \
    }

VR_MEMBER_FUNCTIONS(h2o)
VR_MEMBER_FUNCTIONS(scissorhands)
VR_MEMBER_FUNCTIONS(tova)
VR_MEMBER_FUNCTIONS(streaming_llm)
VR_MEMBER_FUNCTIONS(sliding_window)

/* compat_NAME: the member through its vtable, params {__VA_ARGS__}. */
#define VR_COMPAT(name, ...)                                                 \
    static pb_kvcache *compat_##name(const vr_params *p) {                   \
        const pb_kvcache_##name##_params v = {__VA_ARGS__};                 \
        return pb_kvcache_##name.create(&v, NULL, NULL);                     \
    }

VR_COMPAT(h2o, p->family.budget, p->family.recent_window)
VR_COMPAT(scissorhands, p->family.budget, p->family.recent_window)
VR_COMPAT(tova, p->family.budget)
VR_COMPAT(streaming_llm, p->family.budget, p->family.sinks)
VR_COMPAT(sliding_window, p->family.budget)
#undef VR_COMPAT

static const pb__vr_call h2o_calls[] = {{"scoreOf", pb__vr_step_score_of},
                                        {NULL, NULL}};
static const pb__vr_call scissorhands_calls[] = {
    {"votesOf", pb__vr_step_votes_of}, {NULL, NULL}};
static const pb__vr_call tova_calls[] = {
    {"lastAttentionOf", pb__vr_step_last_attention_of}, {NULL, NULL}};

const pb__vr_policy pb__vr_policy_h2o = {
    parse_h2o, size_h2o, create_h2o, &pb_kvcache_h2o, compat_h2o, h2o_calls};

const pb__vr_policy pb__vr_policy_scissorhands = {
    parse_scissorhands, size_scissorhands, create_scissorhands,
    &pb_kvcache_scissorhands, compat_scissorhands, scissorhands_calls};

const pb__vr_policy pb__vr_policy_tova = {
    parse_tova, size_tova, create_tova, &pb_kvcache_tova, compat_tova,
    tova_calls};

const pb__vr_policy pb__vr_policy_streaming_llm = {
    parse_streaming_llm, size_streaming_llm, create_streaming_llm,
    &pb_kvcache_streaming_llm, compat_streaming_llm, NULL};

const pb__vr_policy pb__vr_policy_sliding_window = {
    parse_sliding_window, size_sliding_window, create_sliding_window,
    &pb_kvcache_sliding_window, compat_sliding_window, NULL};
