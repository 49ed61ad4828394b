/*
 * pyramidkv_schedule.h - the allocation family: every published per-layer
 * schedule (the registry's arithmetic pyramid, uniform, the paper's own code
 * and its balanced variant, VeloxQuant-MLX's taper, the guide's curvature,
 * the ablation's geometric decay, a measured profile) as one call that fills
 * the L shares and returns their exact total. Included by
 * <pyramidkv/pyramidkv.h> (including it directly works too: it includes the
 * umbrella header first).
 *
 * It owns the schedule description and its call. The rules each schedule
 * follows, to the last unit, are in docs/spec.md §12; the guide's
 * "Choosing a schedule" compares them on a 32-layer model.
 */
#ifndef PYRAMIDKV_PYRAMIDKV_SCHEDULE_H
#define PYRAMIDKV_PYRAMIDKV_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which schedule a pb_schedule describes. Values are never renumbered;
 * new schedules are appended. */
typedef enum pb_schedule_kind {
    PB_SCHEDULE_ARITHMETIC = 0,   /* pb_kvcache_pyramid_budget (ratio) */
    PB_SCHEDULE_UNIFORM,          /* budget for every layer */
    PB_SCHEDULE_KVFACTORY,        /* the paper's code, bit for bit (budget is
                                     its KV size C; window, beta,
                                     prompt_len) */
    PB_SCHEDULE_KVFACTORY_BALANCED, /* the same endpoints, exact steps: the
                                     total is exactly L x C */
    PB_SCHEDULE_TAPER,            /* VeloxQuant-MLX's linear taper with sink
                                     floors (sinks, taper_beta) */
    PB_SCHEDULE_CURVE,            /* the guide's curvature (ratio,
                                     gamma_milli), total exactly L x B */
    PB_SCHEDULE_GEOMETRIC,        /* shares proportional to
                                     ratio^(-l/(L-1)), total exactly L x B */
    PB_SCHEDULE_PROFILE,          /* shares proportional to caller weights
                                     (weights, min_share), total exactly
                                     L x B */
    PB_SCHEDULE_CAKE              /* CAKE's layer preferences: window plus
                                     a part of L x (B - window) proportional
                                     to weights (pb_cake_weights); prompt_len
                                     (docs/spec.md §17) */
} pb_schedule_kind;

/* A schedule: its kind and every parameter any kind reads. A kind reads
 * only the fields its comment names and ignores the others. Defaults in
 * brackets (PB_SCHEDULE_DEFAULT); pb_kvcache_schedule_shares refuses any
 * value outside the stated range with PB_ERR_PARAM.
 *
 * struct_size comes first and is set to sizeof(pb_schedule) as the caller's
 * header knew it (PB_SCHEDULE_DEFAULT does that): the library reads only
 * the bytes it covers, so fields appended by a later release take their
 * defaults for an older caller. */
typedef struct pb_schedule {
    uint32_t struct_size; /* [sizeof(pb_schedule)] bytes of this struct the
                             caller's header knew; at least the 0.2 layout
                             (64 bytes on LP64 platforms), and bytes past
                             the library's own size must be zero */
    uint32_t kind;        /* [PB_SCHEDULE_ARITHMETIC] a pb_schedule_kind */
    uint32_t num_layers;  /* [1] L, >= 1 (every kind) */
    uint32_t budget;      /* [512] B, the average positions per layer, any
                             value (every kind); for kvfactory and
                             kvfactory-balanced the KV size C (the
                             reference's max_capacity_prompt), > window */
    uint32_t ratio;       /* [4] r, >= 1 (arithmetic, curve, geometric): the
                             first layer's share over the last one's; 1 is
                             uniform */
    uint32_t window;      /* [8] w, < budget (kvfactory, kvfactory-balanced,
                             cake):
                             the observation window every layer adds */
    uint32_t beta;        /* [20] integer beta >= 1 (kvfactory,
                             kvfactory-balanced): the last layer's prefix
                             is (budget - window) / beta */
    uint32_t prompt_len;  /* [0] q (kvfactory, kvfactory-balanced, cake): the prompt
                             length when known; 0 means not given, the
                             schedule of a prompt longer than any clamp */
    uint32_t sinks;       /* [4] n_sink (taper): attention-sink positions;
                             every layer keeps at least sinks + 1,
                             0 .. UINT32_MAX - 1 */
    uint32_t gamma_milli; /* [750] gamma in thousandths (curve), 1 ..
                             1000000: 1000 is linear, the guide suggests
                             700 - 800 */
    uint32_t min_share;   /* [0] (profile) every layer's base: each gets
                             min_share plus its weight's part of
                             L x (budget - min_share); <= budget */
    double taper_beta;    /* [2.0] beta (taper), finite, >= 1: the first
                             layer keeps about budget + (budget - sinks - 1)
                             x (beta - 1) */
    const uint32_t *weights; /* [NULL] (profile, cake) num_layers non-negative
                             weights, layer 0 first, not all zero; read
                             only during the call. Scale decimals to
                             integers first (the CLI multiplies every
                             weight by one power of ten, see
                             docs/spec.md §12) */
} pb_schedule;

#define PB_SCHEDULE_DEFAULT                                                  \
    { (uint32_t)sizeof(pb_schedule), 0u, 1u, 512u, 4u, 8u, 20u, 0u, 4u, 750u, \
      0u, 2.0, NULL }

/* Fills shares[0 .. num_layers-1] with every layer's share under
 * `schedule` (layer 0 first) and sets *total to their exact sum (a
 * uint64_t: it always fits, every share being a uint32_t). total may be
 * NULL when the sum is not wanted.
 *
 * The shares are raw: a policy instance still keeps at least
 * recent_window + 1 positions whatever its share. The totals: arithmetic
 * never above L x B; uniform, kvfactory-balanced, curve, geometric and
 * profile exactly L x B (L x C); kvfactory and taper whatever their
 * reference computes, which can be above L x B (kvfactory's floored steps
 * at small C spend up to about 12 % more than L x C).
 *
 * Returns PB_OK; otherwise, checked in this order:
 *   PB_ERR_NULL   schedule or shares is NULL;
 *   PB_ERR_PARAM  struct_size below sizeof(pb_schedule) of this release, or
 *                 a non-zero byte past it; kind not a pb_schedule_kind;
 *                 num_layers 0;
 *   PB_ERR_NULL   kind profile or cake with weights NULL;
 *   PB_ERR_PARAM  a field the kind reads out of its range (see the
 *                 struct), or profile or cake weights that are all zero;
 *   PB_ERR_BUFFER shares_len < num_layers;
 *   PB_ERR_TOO_LARGE a share does not fit in uint32_t (for curve,
 *                 geometric, profile and kvfactory-balanced: an unrounded
 *                 share reaches UINT32_MAX; for taper also a non-finite
 *                 value).
 * On error nothing is written to shares or *total.
 *
 * Pure: no allocation, no floating point except taper's (which follows its
 * reference's double operations exactly), thread-safe; O(num_layers) for
 * most kinds, O(64 num_layers) for those that apportion a remainder, and
 * taper O(num_layers^2) in the worst case. */
PB_API pb_status pb_kvcache_schedule_shares(const pb_schedule *schedule,
                                            uint32_t *shares,
                                            size_t shares_len,
                                            uint64_t *total);

/* The schedule's name as the CLI spells it ("arithmetic", "uniform",
 * "kvfactory", "kvfactory-balanced", "taper", "curve", "geometric",
 * "profile", "cake"), a static string; NULL for a value that is not a
 * pb_schedule_kind. Pure and thread-safe. */
PB_API const char *pb_schedule_kind_name(uint32_t kind);

/* The kind whose name is `name` (as above, exact and case-sensitive)
 * written to *kind. Returns PB_OK; PB_ERR_NULL if name or kind is NULL;
 * PB_ERR_PARAM for an unknown name (*kind untouched). Pure and
 * thread-safe. */
PB_API pb_status pb_schedule_kind_from_name(const char *name, uint32_t *kind);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PYRAMIDKV_PYRAMIDKV_SCHEDULE_H */
