/*
 * pyramidkv.h - the one header a user of libpyramidkv includes.
 *
 * libpyramidkv decides how much KV cache each transformer layer keeps and
 * which token positions it forgets (PyramidKV, Cai et al. 2024): a total
 * budget is split across layers as a pyramid (pb_kvcache_pyramid_budget), and
 * inside a layer a SnapKV-style rule (attention summed over an observation
 * window, max-pooled across neighbours, newest positions protected) picks the
 * victims.
 *
 * Two surfaces share one engine:
 *   - the policybook-compatible vtables pb_kvcache_pyramidkv and
 *     pb_kvcache_snapkv, so callers of that interface switch by relinking;
 *   - the native surface (pb_kvcache_pyramidkv_create, pb_kvcache_observe,
 *     pb_kvcache_evict, ...) that reports every error as a pb_status and
 *     offers introspection and sizing queries.
 *
 * Thread safety: every function is reentrant. Distinct instances may be used
 * on distinct threads at the same time with no synchronisation. One instance
 * must not be used by two threads at once, except for concurrent calls that
 * take it as `const`. The budget functions, pb_status_str, the pb_version_
 * functions and pb_kvcache_head_reduce are pure. An allocator's callbacks
 * run only inside create and destroy, on the calling thread: an allocator
 * shared by instances created or destroyed concurrently must be
 * thread-safe itself.
 *
 * Errors: a function that fails leaves the instance exactly as it was.
 * Nothing in the library aborts, exits, prints or allocates after create.
 */
#ifndef PYRAMIDKV_PYRAMIDKV_H
#define PYRAMIDKV_PYRAMIDKV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Version and export                                                       */

#define PB_VERSION_MAJOR 0
#define PB_VERSION_MINOR 2
#define PB_VERSION_PATCH 0
#define PB_VERSION_NUMBER \
    (PB_VERSION_MAJOR * 10000 + PB_VERSION_MINOR * 100 + PB_VERSION_PATCH)
#define PB__STRINGIFY_(x) #x
#define PB__STRINGIFY(x) PB__STRINGIFY_(x)
#define PB_VERSION_STRING            \
    PB__STRINGIFY(PB_VERSION_MAJOR)  \
    "." PB__STRINGIFY(PB_VERSION_MINOR) "." PB__STRINGIFY(PB_VERSION_PATCH)

/* PB_API marks exported symbols. The library is built with hidden
 * visibility; PB_STATIC (defined for users of the static library by the
 * CMake target) turns the Windows import decoration off. */
#if defined(_WIN32) && !defined(PB_STATIC)
#  if defined(PB_BUILDING_LIBRARY)
#    define PB_API __declspec(dllexport)
#  else
#    define PB_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define PB_API __attribute__((visibility("default")))
#else
#  define PB_API
#endif

/* The version the library was built as: PB_VERSION_NUMBER of its header.
 * Compare with PB_VERSION_NUMBER to detect a header/library mismatch. */
PB_API unsigned pb_version_number(void);

/* PB_VERSION_STRING of the library, a static string. */
PB_API const char *pb_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */

/* One table makes both the enum and the messages. Values are never
 * renumbered once released; new codes are appended. */
#define PB_STATUS_MAP(X)                                                       \
    X(PB_OK, 0, "success")                                                     \
    X(PB_ERR_NULL, 1, "a required pointer argument is NULL")                   \
    X(PB_ERR_PARAM, 2, "a parameter or option is out of its valid range")      \
    X(PB_ERR_LENGTH, 3,                                                        \
      "attention length does not match the number of held positions")          \
    X(PB_ERR_POSITION, 4,                                                      \
      "position is not greater than every held position")                      \
    X(PB_ERR_WEIGHT, 5, "an attention weight is NaN, infinite or negative")    \
    X(PB_ERR_FULL, 6, "the instance holds its capacity; evict first")          \
    X(PB_ERR_BUFFER, 7, "an output buffer is too small")                       \
    X(PB_ERR_NOT_HELD, 8, "the position is not held by the instance")          \
    X(PB_ERR_NOMEM, 9, "the allocator returned NULL")                          \
    X(PB_ERR_TOO_LARGE, 10, "a size does not fit in size_t or uint32_t")       \
    X(PB_ERR_NOT_FRESH, 11,                                                    \
      "prefill needs a fresh instance (just created or reset)")                \
    X(PB_ERR_WORKSPACE, 12, "the prefill workspace is too small for the prompt")

typedef enum pb_status {
#define PB__STATUS_ENUM(name, value, message) name = value,
    PB_STATUS_MAP(PB__STATUS_ENUM)
#undef PB__STATUS_ENUM
    PB_STATUS_COUNT_ /* not a status: one past the largest value */
} pb_status;

/* A static, human-readable message for `status`; "unknown status" for a
 * value that is not a pb_status. Never NULL. Pure and thread-safe. */
PB_API const char *pb_status_str(pb_status status);

/* ------------------------------------------------------------------------ */
/* Allocation: how much cache each layer keeps                              */

/* The positions layer `layer` of `num_layers` keeps when the average per
 * layer is `budget` and the first layer keeps `pyramid_ratio` times as much
 * as the last (PyramidKV's arithmetic schedule).
 *
 * With L = num_layers, r = pyramid_ratio, k = layer:
 *   L == 1: budget.
 *   L  > 1: floor( 2*budget*( r*(L-1) - k*(r-1) ) / ( (r+1)*(L-1) ) ),
 * one division of exact integers; no floating point is involved, so every
 * platform floors at the same point. Layer 0 gets 2*budget*r/(r+1), the last
 * layer 2*budget/(r+1); before flooring the mean is budget, so the shares
 * never add up to more than num_layers * budget (see
 * pb_kvcache_pyramid_total). r == 1 gives every layer `budget`.
 *
 * Exact for every uint32_t input (the intermediate product needs up to 97
 * bits and is computed exactly). A result above UINT32_MAX saturates to
 * UINT32_MAX. Returns 0 where no share is defined: num_layers == 0,
 * layer >= num_layers or pyramid_ratio == 0.
 *
 * Pure: no allocation, thread-safe, constant time. */
PB_API uint32_t pb_kvcache_pyramid_budget(uint32_t budget, uint32_t layer,
                                          uint32_t num_layers,
                                          uint32_t pyramid_ratio);

/* Fills shares[0 .. num_layers-1] with pb_kvcache_pyramid_budget(budget, k,
 * num_layers, pyramid_ratio) for every layer k, to size every layer's buffer
 * at once.
 *
 * Returns PB_OK; PB_ERR_NULL if shares is NULL; PB_ERR_PARAM if num_layers
 * or pyramid_ratio is 0; PB_ERR_BUFFER if shares_len < num_layers. On error
 * nothing is written. O(num_layers), no allocation, thread-safe. */
PB_API pb_status pb_kvcache_pyramid_budgets(uint32_t budget,
                                            uint32_t num_layers,
                                            uint32_t pyramid_ratio,
                                            uint32_t *shares,
                                            size_t shares_len);

/* The exact sum over all layers of pb_kvcache_pyramid_budget(budget, k,
 * num_layers, pyramid_ratio), saturated shares counted as UINT32_MAX. It is
 * never above num_layers * budget: the unfloored shares average exactly
 * budget and flooring and saturation only lower them. Returns 0 where no
 * share is defined (num_layers == 0 or pyramid_ratio == 0).
 *
 * Computed in closed form (O(log) time) for every uint32_t input; the result
 * always fits in 64 bits. Pure, no allocation, thread-safe. */
PB_API uint64_t pb_kvcache_pyramid_total(uint32_t budget, uint32_t num_layers,
                                         uint32_t pyramid_ratio);

/* ------------------------------------------------------------------------ */
/* Policybook-compatible surface                                            */

/* Per-object allocator. `free` receives the size given to `alloc`. A NULL
 * pb_allocator pointer means malloc/free. Both functions must be set. */
typedef struct pb_allocator {
    void *(*alloc)(void *ctx, size_t n);
    void (*free)(void *ctx, void *p, size_t n);
    void *ctx;
} pb_allocator;

/* Accepted by create for interface compatibility and never read: every
 * decision of this library is deterministic. */
typedef struct pb_rng pb_rng;

/* One policy instance: the positions of one layer (or one layer and KV
 * head) and their recent attention. Opaque. */
typedef struct pb_kvcache pb_kvcache;

typedef struct pb_kvcache_vtable {
    /* params: pb_kvcache_pyramidkv_params* or pb_kvcache_snapkv_params*
     * (NULL: the defaults). Returns NULL on refused params or allocation
     * failure. The instance holds max(effective, budget) + 1 positions. */
    pb_kvcache *(*create)(const void *params, const pb_allocator *allocator,
                          pb_rng *rng);
    /* pb_kvcache_observe without a status: a rejected call changes
     * nothing. */
    void (*on_decode_step)(pb_kvcache *policy, uint32_t pos, const float *attn,
                           size_t attn_len);
    /* Evicts down to min(budget, effective share) and writes the victims in
     * ascending position order. Returns how many were written; 0, with
     * nothing changed, when `capacity` is smaller than the number it would
     * drop, when policy is NULL, or when victims is NULL and it would drop
     * any. */
    size_t (*evict)(pb_kvcache *policy, uint32_t budget, uint32_t *victims,
                    size_t capacity);
    /* pb_kvcache_memory_bytes. */
    size_t (*memory_bytes)(const pb_kvcache *policy);
    /* pb_kvcache_destroy; accepts NULL. */
    void (*destroy)(pb_kvcache *policy);
} pb_kvcache_vtable;

/* Parameters of a PyramidKV layer policy. Defaults in brackets; create
 * refuses any value outside the stated range. */
typedef struct pb_kvcache_pyramidkv_params {
    uint32_t budget;        /* [512] average positions kept per layer;
                               1 .. UINT32_MAX-1, and > recent_window */
    uint32_t layer;         /* [0] this layer, 0 .. num_layers-1 */
    uint32_t num_layers;    /* [1] layers in the model, >= 1; 1 is SnapKV */
    uint32_t pyramid_ratio; /* [4] first layer's share over the last's, >= 1 */
    uint32_t recent_window; /* [32] newest positions never evicted on score,
                               0 .. budget-1 */
    uint32_t obs_window;    /* [16] observed decode steps a window score sums,
                               >= 1 */
    uint32_t pool_kernel;   /* [7] pooling width across kept neighbours, odd,
                               >= 1 (1: no pooling) */
} pb_kvcache_pyramidkv_params;

#define PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT { 512u, 0u, 1u, 4u, 32u, 16u, 7u }

/* Parameters of a SnapKV policy: PyramidKV with one layer. */
typedef struct pb_kvcache_snapkv_params {
    uint32_t budget;        /* [512] positions kept, as above */
    uint32_t recent_window; /* [32] as above */
    uint32_t obs_window;    /* [16] as above */
    uint32_t pool_kernel;   /* [7] as above */
} pb_kvcache_snapkv_params;

#define PB_KVCACHE_SNAPKV_PARAMS_DEFAULT { 512u, 32u, 16u, 7u }

PB_API extern const pb_kvcache_vtable pb_kvcache_pyramidkv;
PB_API extern const pb_kvcache_vtable pb_kvcache_snapkv;

/* The rest of the policybook family (0.2.0), declared exactly as that
 * interface declares them. Each create takes params == NULL as its
 * defaults, ignores the rng, returns NULL on refused params or allocation
 * failure; on_decode_step with bad input (NULL policy, wrong length, bad
 * weight, full) does nothing; evict that would need more victims than
 * `capacity` writes nothing and returns 0; victims come out in ascending
 * position order. Unlike pb_kvcache_pyramidkv and pb_kvcache_snapkv they
 * hold budget + 1 positions and evict down to the budget each evict is
 * given, whatever the params' budget (their instances report an effective
 * share of UINT32_MAX). pb_kvcache_score and pb_kvcache_sink_count read
 * their scores and sinks. docs/spec.md §13.6 gives each
 * one's exact rules. */

/* H2O (heavy hitters): the attention a position received since it was
 * admitted, summed in double. */
typedef struct pb_kvcache_h2o_params {
    uint32_t budget;        /* [512] 1 .. UINT32_MAX-1 */
    uint32_t recent_window; /* [32] newest positions protected, < budget */
} pb_kvcache_h2o_params;

#define PB_KVCACHE_H2O_PARAMS_DEFAULT { 512u, 32u }

/* Scissorhands: the number of steps in which a position's weight exceeded
 * the step's fair share 1/attn_len. */
typedef struct pb_kvcache_scissorhands_params {
    uint32_t budget;        /* [512] 1 .. UINT32_MAX-1 */
    uint32_t recent_window; /* [32] newest positions protected, < budget */
} pb_kvcache_scissorhands_params;

#define PB_KVCACHE_SCISSORHANDS_PARAMS_DEFAULT { 512u, 32u }

/* TOVA: the attention a position received at the latest observed step. */
typedef struct pb_kvcache_tova_params {
    uint32_t budget; /* [512] 1 .. UINT32_MAX-1 */
} pb_kvcache_tova_params;

#define PB_KVCACHE_TOVA_PARAMS_DEFAULT { 512u }

/* StreamingLLM: attention sinks plus the newest positions. */
typedef struct pb_kvcache_streaming_llm_params {
    uint32_t budget; /* [512] 1 .. UINT32_MAX-1 */
    uint32_t sinks;  /* [4] positions below `sinks` are never evicted,
                        < budget; 0 is a plain sliding window */
} pb_kvcache_streaming_llm_params;

#define PB_KVCACHE_STREAMING_LLM_PARAMS_DEFAULT { 512u, 4u }

/* Sliding window: the newest `budget` positions. */
typedef struct pb_kvcache_sliding_window_params {
    uint32_t budget; /* [512] 1 .. UINT32_MAX-1 */
} pb_kvcache_sliding_window_params;

#define PB_KVCACHE_SLIDING_WINDOW_PARAMS_DEFAULT { 512u }

PB_API extern const pb_kvcache_vtable pb_kvcache_h2o;
PB_API extern const pb_kvcache_vtable pb_kvcache_scissorhands;
PB_API extern const pb_kvcache_vtable pb_kvcache_tova;
PB_API extern const pb_kvcache_vtable pb_kvcache_streaming_llm;
PB_API extern const pb_kvcache_vtable pb_kvcache_sliding_window;

/* ------------------------------------------------------------------------ */
/* Native surface                                                           */

/* How pooled scores are formed from the window scores of the 2h+1 kept
 * neighbours (h = (pool_kernel-1)/2, clamped to the kept range). */
typedef enum pb_pool {
    PB_POOL_MAX = 0, /* the largest window score among the neighbours */
    PB_POOL_AVG = 1  /* the sum of the in-range neighbours' window scores
                        (ascending order, double) divided by pool_kernel:
                        out-of-range neighbours count as 0, as PyTorch's
                        avg_pool1d with count_include_pad does */
} pb_pool;

/* Which semantics pb_kvcache_prefill follows (see pyramidkv_prefill.h). */
typedef enum pb_prefill_scope {
    PB_PREFILL_CONSISTENT = 0, /* as if the rows were fed as decode steps */
    PB_PREFILL_REFERENCE = 1   /* the paper's code, exactly */
} pb_prefill_scope;

/* How an instance writes the attention rows it keeps (pb_kvcache_config
 * .row_stores). Only speed differs: victims, scores and every status are
 * the same either way. */
typedef enum pb_row_stores {
    PB_ROW_STORES_CACHED = 0,  /* ordinary stores: the row stays in the
                                  caches for the next evict to read */
    PB_ROW_STORES_STREAMED = 1 /* a row the window scorer keeps as a plain
                                  copy (evicts more than 8 observed steps
                                  apart, average pooling, or pool_kernel
                                  above 31) is written past the caches:
                                  non-temporal stores on x86; elsewhere,
                                  and in a PB_SIMD=OFF build, as CACHED.
                                  Can pay when the rings of all
                                  instances together are well beyond the
                                  last-level cache, as for a whole model,
                                  on some machines and not on others
                                  (measure); costs when they fit
                                  (docs/performance.md) */
} pb_row_stores;

/* Options of the native create. Defaults in brackets. */
typedef struct pb_kvcache_options {
    uint32_t capacity;        /* [0] positions the instance can hold before an
                                 evict is mandatory. 0: max(effective, budget)
                                 + 1, as the compatible surface. Otherwise
                                 recent_window + 2 .. UINT32_MAX */
    uint32_t pool;            /* [PB_POOL_MAX] a pb_pool */
    uint32_t prefill_scope;   /* [PB_PREFILL_CONSISTENT] a pb_prefill_scope */
    uint32_t prefill_max_len; /* [0] longest prompt pb_kvcache_prefill takes
                                 with scratch reserved at create; 0 reserves
                                 none (the caller passes a workspace) */
} pb_kvcache_options;

#define PB_KVCACHE_OPTIONS_DEFAULT { 0u, 0u, 0u, 0u }

/* Creates a policy instance holding the single position 0.
 *
 * params NULL: PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT; options NULL:
 * PB_KVCACHE_OPTIONS_DEFAULT; allocator NULL: malloc/free. All memory the
 * instance will ever use is allocated here, in the amount
 * pb_kvcache_pyramidkv_size reports.
 *
 * Returns PB_OK and sets *out; PB_ERR_NULL if out is NULL; PB_ERR_PARAM if a
 * parameter or option is refused (see the struct comments) or the allocator
 * lacks a function; PB_ERR_TOO_LARGE if the memory needed does not fit in
 * size_t; PB_ERR_NOMEM if the allocator fails. The checks run in that
 * order (out first, so a NULL out with refused params is PB_ERR_NULL), all
 * before the allocator is called. On error *out is set to NULL (when out
 * is not NULL) and nothing is left allocated. Thread-safe. */
PB_API pb_status pb_kvcache_pyramidkv_create(
    const pb_kvcache_pyramidkv_params *params,
    const pb_kvcache_options *options, const pb_allocator *allocator,
    pb_kvcache **out);

/* The exact bytes pb_kvcache_pyramidkv_create would allocate for these
 * params and options (NULL: defaults), written to *bytes. Returns the status
 * create would return before allocating (PB_OK, PB_ERR_NULL if bytes is
 * NULL, PB_ERR_PARAM, PB_ERR_TOO_LARGE, checked in that order; the
 * allocator is not an argument, so its PB_ERR_PARAM cannot arise). *bytes
 * is written on PB_OK only. Pure, no allocation. */
PB_API pb_status pb_kvcache_pyramidkv_size(
    const pb_kvcache_pyramidkv_params *params,
    const pb_kvcache_options *options, size_t *bytes);

/* ------------------------------------------------------------------------ */
/* Versioned configuration (the create of every scorer and share)           */

/* The score a layer's instance ranks its positions by (docs/spec.md §13).
 * Any scorer takes any share (the pyramid formula or
 * an explicit one), recent_window and sinks. obs_window, pool_kernel and
 * pool shape the window scorer only: the others validate them and ignore
 * them. An instance allocates only what its scorer keeps per position:
 * beside the 4-byte position, 8 bytes (cumulative), 4 (votes), 8.75
 * (last: its records twice, a step writing the new ones beside the old,
 * and a 16th of room to close a victim's gap from the front) or nothing
 * (none). */
typedef enum pb_scorer {
    PB_SCORER_WINDOW = 0,     /* SnapKV/PyramidKV: attention summed over the
                                 last obs_window observed steps, pooled */
    PB_SCORER_CUMULATIVE = 1, /* H2O: attention summed since admission */
    PB_SCORER_LAST = 2,       /* TOVA: attention at the latest observed
                                 step */
    PB_SCORER_VOTES = 3,      /* Scissorhands: steps whose weight exceeded
                                 the step's fair share 1/n */
    PB_SCORER_NONE = 4        /* recency: the oldest evictable goes first */
} pb_scorer;

/* The canonical name of a scorer: "window", "cumulative", "last", "votes"
 * or "none" (the enum's names, lower case), a static string; NULL for a
 * value that is not a pb_scorer. Pure and thread-safe. */
PB_API const char *pb_scorer_name(uint32_t scorer);

/* The scorer whose name is `name` written to *scorer: a canonical name as
 * above, or the alias "recency" for PB_SCORER_NONE (exact and
 * case-sensitive). Returns PB_OK; PB_ERR_NULL if name or scorer is NULL;
 * PB_ERR_PARAM for an unknown name (*scorer untouched). Pure and
 * thread-safe. */
PB_API pb_status pb_scorer_from_name(const char *name, uint32_t *scorer);

/* Everything a native create takes, in one struct that grows by the rule of
 * docs/abi.md: the caller sets struct_size to sizeof(pb_kvcache_config) as
 * its header knows it (PB_KVCACHE_CONFIG_DEFAULT does), the library reads
 * only the fields that size covers and uses the defaults for the rest, and
 * bytes beyond the fields this library knows must be zero. Defaults in
 * brackets; create refuses any value outside the stated range. */
typedef struct pb_kvcache_config {
    uint32_t struct_size;     /* sizeof(pb_kvcache_config) of the caller's
                                 header; at least 64 (the 0.2 layout) */
    uint32_t budget;          /* [512] average positions kept per layer;
                                 1 .. UINT32_MAX-1, and > recent_window */
    uint32_t layer;           /* [0] this layer, 0 .. num_layers-1 */
    uint32_t num_layers;      /* [1] layers in the model, >= 1 */
    uint32_t pyramid_ratio;   /* [4] first layer's share over the last's,
                                 >= 1 */
    uint32_t share;           /* [0] this instance's share, from any
                                 schedule; 0: pb_kvcache_pyramid_budget(
                                 budget, layer, num_layers, pyramid_ratio) */
    uint32_t recent_window;   /* [32] newest positions never evicted on
                                 score, 0 .. budget-1 */
    uint32_t obs_window;      /* [16] observed steps a window score sums,
                                 >= 1 */
    uint32_t pool_kernel;     /* [7] pooling width across kept neighbours,
                                 odd, >= 1 (1: no pooling) */
    uint32_t pool;            /* [PB_POOL_MAX] a pb_pool */
    uint32_t scorer;          /* [PB_SCORER_WINDOW] a pb_scorer; other
                                 than the window, prefill_max_len must
                                 be 0 */
    uint32_t sinks;           /* [0] attention sinks: every held position
                                 below `sinks` is never evicted, whatever
                                 the scorer (positions, not a count: a
                                 sequence whose positions skip 1 .. 3 has
                                 only position 0 as a sink with sinks 4);
                                 0 .. capacity - recent_window - 1, so a
                                 full instance can always evict. With
                                 sinks, prefill_max_len must be 0 */
    uint32_t capacity;        /* [0] as pb_kvcache_options.capacity */
    uint32_t prefill_scope;   /* [PB_PREFILL_CONSISTENT] a pb_prefill_scope */
    uint32_t prefill_max_len; /* [0] as pb_kvcache_options.prefill_max_len */
    uint32_t row_stores;      /* [PB_ROW_STORES_CACHED] a pb_row_stores */
} pb_kvcache_config;

#define PB_KVCACHE_CONFIG_DEFAULT                                             \
    { (uint32_t)sizeof(pb_kvcache_config), 512u, 0u, 1u, 4u, 0u, 32u, 16u,   \
      7u, 0u, 0u, 0u, 0u, 0u, 0u, 0u }

/* Creates a policy instance holding the single position 0, configured by
 * *config (NULL: PB_KVCACHE_CONFIG_DEFAULT). The same instance as
 * pb_kvcache_pyramidkv_create makes for the same values; it adds an
 * explicit share (any schedule's share drives any instance), the scorer and
 * the sinks. allocator NULL: malloc/free. All memory the instance will ever
 * use is allocated here, in the amount pb_kvcache_size reports.
 *
 * Returns PB_OK and sets *out; PB_ERR_NULL if out is NULL; PB_ERR_PARAM if
 * struct_size is below 64, a byte past the known fields is not zero, a
 * field is refused (see the struct comments) or the allocator lacks a
 * function; PB_ERR_TOO_LARGE if the memory needed does not fit in size_t;
 * PB_ERR_NOMEM if the allocator fails. Checked in that order, all before
 * the allocator is called. On error *out is set to NULL (when out is not
 * NULL) and nothing is left allocated. Thread-safe. */
PB_API pb_status pb_kvcache_create(const pb_kvcache_config *config,
                                   const pb_allocator *allocator,
                                   pb_kvcache **out);

/* The exact bytes pb_kvcache_create would allocate for *config (NULL: the
 * defaults), written to *bytes on PB_OK only. Returns PB_OK, PB_ERR_NULL if
 * bytes is NULL, PB_ERR_PARAM or PB_ERR_TOO_LARGE as create would, checked
 * in that order. Pure, no allocation. */
PB_API pb_status pb_kvcache_size(const pb_kvcache_config *config,
                                 size_t *bytes);

/* Frees the instance and everything it allocated. Accepts NULL. */
PB_API void pb_kvcache_destroy(pb_kvcache *policy);

/* Records one decode step: the token at `pos` attended to the held
 * positions with weights attn[0 .. attn_len-1] (attn[i] belongs to the i-th
 * held position in ascending order), then `pos` is admitted with no
 * observed attention of its own.
 *
 * The weights enter the observation ring and the ring advances one step;
 * attn == NULL admits `pos` without observing anything (the ring does not
 * advance and attn_len is ignored).
 *
 * Returns PB_OK; PB_ERR_NULL if policy is NULL; PB_ERR_POSITION if pos is
 * not greater than every held position (UINT32_MAX is a valid position);
 * PB_ERR_LENGTH if attn_len is not the held count; PB_ERR_WEIGHT if a weight
 * is NaN, infinite or negative; PB_ERR_FULL if the instance already holds
 * its capacity. When several apply, the first in that order is returned.
 * On error nothing changed. O(held), no allocation. */
PB_API pb_status pb_kvcache_observe(pb_kvcache *policy, uint32_t pos,
                                    const float *attn, size_t attn_len);

/* Evicts down to target = min(budget, effective share), never choosing a
 * protected position: one of the newest min(recent_window, held), a sink
 * (a held position below the instance's sinks) or, with the last scorer, a
 * position no step has observed yet. The victims are the evictable
 * positions with the lowest score (window scorer: pooled window score;
 * none: the position itself, so the oldest go; ties: the lower position
 * first); they are written to victims[] in ascending position order and
 * their count to *n_victims. The count is held - target, or the number of
 * evictable positions if fewer (the instance then stays above target).
 * Survivors keep their scores. budget 0 is valid (everything but the
 * protected positions may go).
 *
 * victims may be NULL when victims_cap is 0. Returns PB_OK (also when nothing
 * needs to go: *n_victims = 0); PB_ERR_NULL if policy or n_victims is NULL,
 * or victims is NULL with victims_cap > 0; PB_ERR_BUFFER if victims_cap is
 * smaller than the number to drop, in which case *n_victims is set to that
 * number and the instance is unchanged. O(held * obs_window) worst case, no
 * allocation. */
PB_API pb_status pb_kvcache_evict(pb_kvcache *policy, uint32_t budget,
                                  uint32_t *victims, size_t victims_cap,
                                  size_t *n_victims);

/* Returns the instance to its state right after create: holding position 0
 * with no observed attention. No allocation. PB_ERR_NULL if policy is NULL. */
PB_API pb_status pb_kvcache_reset(pb_kvcache *policy);

/* The layer's effective share: max(share, recent_window + 1), where share
 * is the explicit share of pb_kvcache_create or else
 * pb_kvcache_pyramid_budget(budget, layer, num_layers, pyramid_ratio).
 * UINT32_MAX for an instance of the h2o, scissorhands, tova,
 * streaming_llm and sliding_window vtables (no share of their own). 0 if
 * policy is NULL. */
PB_API uint32_t pb_kvcache_effective_budget(const pb_kvcache *policy);

/* How many positions are held. 0 if policy is NULL, and also when an evict
 * has dropped everything (possible only with recent_window 0 and no
 * sinks held). */
PB_API size_t pb_kvcache_kept_count(const pb_kvcache *policy);

/* How many positions the instance can hold (its options.capacity, resolved).
 * 0 if policy is NULL. */
PB_API size_t pb_kvcache_capacity(const pb_kvcache *policy);

/* Copies the held positions, ascending, to out[0 .. held-1] and sets *n to
 * the held count. Returns PB_OK; PB_ERR_NULL if policy, out or n is NULL;
 * PB_ERR_BUFFER if out_cap < held (*n is still set to the held count,
 * nothing is written to out). */
PB_API pb_status pb_kvcache_kept_positions(const pb_kvcache *policy,
                                           uint32_t *out, size_t out_cap,
                                           size_t *n);

/* The window score of held position `pos`: the sum, in double precision and
 * ring-slot order, of the attention it received in the last obs_window
 * observed steps (0 for steps before it was admitted). Returns PB_OK;
 * PB_ERR_NULL if policy or score is NULL; PB_ERR_PARAM if the instance's
 * scorer is not PB_SCORER_WINDOW (it keeps no window: see
 * pb_kvcache_score); PB_ERR_NOT_HELD if pos is not held. O(log held +
 * obs_window). */
PB_API pb_status pb_kvcache_window_score(const pb_kvcache *policy,
                                         uint32_t pos, double *score);

/* The score held position `pos` is ranked by under the instance's scorer
 * (docs/spec.md §13.2), before any pooling:
 *   PB_SCORER_WINDOW      its window score, as pb_kvcache_window_score;
 *   PB_SCORER_CUMULATIVE  the attention it received since admission, summed
 *                         in double in step order (0.0 when admitted);
 *   PB_SCORER_LAST        the weight it received at the latest observed
 *                         step, or -1.0 while no step has observed it
 *                         (unobserved positions are never victims);
 *   PB_SCORER_VOTES       its vote count (steps whose weight was strictly
 *                         above 1.0 / attn_len);
 *   PB_SCORER_NONE        0.0.
 * Returns PB_OK; PB_ERR_NULL if policy or score is NULL; PB_ERR_NOT_HELD if
 * pos is not held (*score untouched). O(log held), or O(log held +
 * obs_window) for the window scorer. No allocation; takes the instance as
 * const. */
PB_API pb_status pb_kvcache_score(const pb_kvcache *policy, uint32_t pos,
                                  double *score);

/* How many held positions are sinks: held positions below the instance's
 * `sinks` (pb_kvcache_config.sinks; 0 without sinks). Sinks are never
 * evicted. 0 if policy is NULL. O(log held), no allocation. */
PB_API size_t pb_kvcache_sink_count(const pb_kvcache *policy);

/* The bytes this instance allocated, exactly: equal to what the allocator
 * was asked for and to pb_kvcache_pyramidkv_size for its params. 0 if policy
 * is NULL. */
PB_API size_t pb_kvcache_memory_bytes(const pb_kvcache *policy);

#ifdef __cplusplus
} /* extern "C" */
#endif

#include "pyramidkv/pyramidkv_prefill.h"
#include "pyramidkv/pyramidkv_profile.h"
#include "pyramidkv/pyramidkv_schedule.h"
#include "pyramidkv/pyramidkv_group.h"
#include "pyramidkv/pyramidkv_preference.h"
#include "pyramidkv/pyramidkv_runtime.h"

#endif /* PYRAMIDKV_PYRAMIDKV_H */
