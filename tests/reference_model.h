/*
 * reference_model.h - a small, obviously-correct model of the layer policy
 * for every scorer and sinks (docs/spec.md, "Scorers and sinks"), written
 * straight from the specification for differential tests, fuzzers and
 * benchmarks. It is deliberately naive: records are kept per position
 * (position, obs_window ring entries, the cumulative sum, the last record
 * with an observed flag, the votes), every window score is re-summed on
 * every evict, pooling looks at every neighbour, a flag per position says
 * whether it is protected, and victims are picked by one full linear scan
 * per victim. It shares no code with src/ but
 * pb_kvcache_pyramid_budget (whose own tests pin it) and the pb_status
 * values.
 */
#ifndef PB_TESTS_REFERENCE_MODEL_H
#define PB_TESTS_REFERENCE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

typedef struct ref_policy {
    pb_kvcache_pyramidkv_params params;
    uint32_t pool;      /* pb_pool */
    uint32_t scorer;    /* pb_scorer */
    uint32_t sinks;     /* held positions below this are never evicted */
    uint32_t effective; /* max(share, recent_window + 1) */
    size_t capacity;    /* positions held at most */
    size_t kept;        /* positions held now */
    uint32_t slot;      /* ring slot the next observed step writes */
    uint32_t *pos;      /* [capacity] held positions, ascending */
    float *ring;        /* [capacity * obs_window], position-major */
    double *scratch;    /* [capacity] window scores during evict */
    double *pooled;     /* [capacity] pooled scores during evict */
    unsigned char *gone;/* [capacity] victim flags during evict */
    double *cum;        /* [capacity] cumulative: attention since admission */
    float *last;        /* [capacity] last: the latest observed weight
                           (-0.0 recorded as +0.0) */
    unsigned char *observed; /* [capacity] last: observed by some step */
    uint32_t *votes;    /* [capacity] votes */
} ref_policy;

/* Validates like pb_kvcache_pyramidkv_create (params/options NULL: defaults)
 * and allocates with malloc. Returns PB_OK, PB_ERR_PARAM or PB_ERR_NOMEM;
 * capacities above 2^26 positions are refused with PB_ERR_TOO_LARGE (the
 * model is for tests). */
pb_status ref_create(ref_policy *r, const pb_kvcache_pyramidkv_params *params,
                     const pb_kvcache_options *options);
/* The pb_kvcache_config with the same values as params and options (both
 * non-NULL): the versioned door's view of the 0.1 door's arguments. */
pb_kvcache_config ref_config_of(const pb_kvcache_pyramidkv_params *p,
                                const pb_kvcache_options *o);
/* Validates a full pb_kvcache_config (struct_size ignored) like
 * pb_kvcache_create and allocates with malloc; the same statuses. */
pb_status ref_create_config(ref_policy *r, const pb_kvcache_config *config);
void ref_destroy(ref_policy *r);
void ref_reset(ref_policy *r);

/* The checks and their order are those documented for pb_kvcache_observe. */
pb_status ref_observe(ref_policy *r, uint32_t pos, const float *attn,
                      size_t attn_len);

/* pb_kvcache_evict's contract: victims ascending, *n_victims set. */
pb_status ref_evict(ref_policy *r, uint32_t budget, uint32_t *victims,
                    size_t victims_cap, size_t *n_victims);

/* Window score of held position pos; PB_ERR_NOT_HELD if not held,
 * PB_ERR_PARAM if the scorer is not the window (checked first). */
pb_status ref_window_score(const ref_policy *r, uint32_t pos, double *score);

/* pb_kvcache_score: the scorer's value of held position pos. */
pb_status ref_score(const ref_policy *r, uint32_t pos, double *score);

/* pb_kvcache_sink_count: held positions below sinks. */
size_t ref_sink_count(const ref_policy *r);

#endif /* PB_TESTS_REFERENCE_MODEL_H */
