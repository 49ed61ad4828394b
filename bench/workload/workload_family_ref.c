/*
 * workload_family_ref.c - the naive H2O, Scissorhands, TOVA, StreamingLLM
 * and sliding-window policies (see the header). One struct serves all five;
 * every rule is one plain loop, so a reader can check it against the
 * declared rules line by line. Speed is not a goal.
 */
#include "workload_family_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum fam_kind {
    FAM_H2O,
    FAM_SCISSORHANDS,
    FAM_TOVA,
    FAM_STREAMING_LLM,
    FAM_SLIDING_WINDOW
} fam_kind;

typedef struct fam_policy {
    fam_kind kind;
    uint32_t budget;
    uint32_t recent; /* h2o, scissorhands */
    uint32_t sinks;  /* streaming-llm */
    size_t capacity; /* budget + 1 */
    size_t held;
    uint32_t *pos;           /* [capacity] held positions, ascending */
    double *score;           /* [capacity] h2o: summed attention; tova: the
                                latest record */
    uint32_t *votes;         /* [capacity] scissorhands */
    unsigned char *observed; /* [capacity] tova: 1 once a step observed it */
    unsigned char *gone;     /* [capacity] evict scratch */
} fam_policy;

static fam_policy *fam_of(pb_kvcache *p) { return (fam_policy *)(void *)p; }

static pb_kvcache *fam_create(fam_kind kind, uint32_t budget, uint32_t recent,
                              uint32_t sinks) {
    if (budget == 0u || budget == UINT32_MAX) return NULL;
    if ((kind == FAM_H2O || kind == FAM_SCISSORHANDS) && recent >= budget)
        return NULL;
    if (kind == FAM_STREAMING_LLM && sinks >= budget) return NULL;
    if (budget > (1u << 26)) return NULL; /* a reference, not a product */
    /* One zeroed block: the struct, then score, pos, votes, observed and
     * gone, each [capacity]; the doubles start at a multiple of 8. */
    const size_t cap = (size_t)budget + 1u;
    const size_t head = (sizeof(fam_policy) + 7u) / 8u * 8u;
    unsigned char *block = calloc(
        1, head + cap * (sizeof(double) + 2u * sizeof(uint32_t) + 2u));
    if (block == NULL) return NULL;
    fam_policy *f = (fam_policy *)(void *)block;
    f->kind = kind;
    f->budget = budget;
    f->recent = recent;
    f->sinks = sinks;
    f->capacity = cap;
    f->score = (double *)(void *)(block + head);
    f->pos = (uint32_t *)(void *)(f->score + cap);
    f->votes = f->pos + cap;
    f->observed = (unsigned char *)(void *)(f->votes + cap);
    f->gone = f->observed + cap;
    f->held = 1; /* position 0, score 0, no votes, unobserved */
    return (pb_kvcache *)(void *)f;
}

/* NAME_create: the member's params (NULL: its defaults) through
 * fam_create, with the recent window and sinks it has (0u where none). */
#define FAM_CREATE(name, T, DEFAULT, kind, recent, sinks)                    \
    static pb_kvcache *name##_create(const void *params,                    \
                                     const pb_allocator *a, pb_rng *rng) {  \
        (void)a;                                                            \
        (void)rng;                                                          \
        const T d = DEFAULT;                                                \
        const T *p = params ? params : &d;                                  \
        return fam_create(kind, p->budget, recent, sinks);                  \
    }

FAM_CREATE(h2o, pb_kvcache_h2o_params, PB_KVCACHE_H2O_PARAMS_DEFAULT, FAM_H2O,
           p->recent_window, 0u)
FAM_CREATE(scissorhands, pb_kvcache_scissorhands_params,
           PB_KVCACHE_SCISSORHANDS_PARAMS_DEFAULT, FAM_SCISSORHANDS,
           p->recent_window, 0u)
FAM_CREATE(tova, pb_kvcache_tova_params, PB_KVCACHE_TOVA_PARAMS_DEFAULT,
           FAM_TOVA, 0u, 0u)
FAM_CREATE(streaming_llm, pb_kvcache_streaming_llm_params,
           PB_KVCACHE_STREAMING_LLM_PARAMS_DEFAULT, FAM_STREAMING_LLM, 0u,
           p->sinks)
FAM_CREATE(sliding_window, pb_kvcache_sliding_window_params,
           PB_KVCACHE_SLIDING_WINDOW_PARAMS_DEFAULT, FAM_SLIDING_WINDOW, 0u,
           0u)
#undef FAM_CREATE

/* Bad input (a position not above every held one, a wrong length, a NaN,
 * infinite or negative weight, a full instance) changes nothing. */
static void fam_decode(pb_kvcache *policy, uint32_t pos, const float *attn,
                       size_t attn_len) {
    fam_policy *f = fam_of(policy);
    if (f == NULL) return;
    if (f->held > 0 && pos <= f->pos[f->held - 1]) return;
    if (attn != NULL) {
        if (attn_len != f->held) return;
        for (size_t i = 0; i < attn_len; ++i)
            if (!isfinite(attn[i]) || attn[i] < 0.0f) return;
    }
    if (f->held >= f->capacity) return;

    if (attn != NULL) {
        if (f->kind == FAM_H2O) {
            for (size_t i = 0; i < f->held; ++i) f->score[i] += (double)attn[i];
        } else if (f->kind == FAM_SCISSORHANDS && attn_len > 0) {
            const double share = 1.0 / (double)attn_len;
            for (size_t i = 0; i < f->held; ++i)
                if ((double)attn[i] > share) f->votes[i] += 1u;
        } else if (f->kind == FAM_TOVA) {
            for (size_t i = 0; i < f->held; ++i) {
                f->score[i] = (double)attn[i];
                f->observed[i] = 1;
            }
        }
    }
    f->pos[f->held] = pos;
    f->score[f->held] = 0.0;
    f->votes[f->held] = 0u;
    f->observed[f->held] = 0;
    f->held += 1;
}

/* The rank key of held index i: lower goes first, ties to the lower
 * position (the lower index). */
static double key_of(const fam_policy *f, size_t i) {
    return f->kind == FAM_SCISSORHANDS ? (double)f->votes[i] : f->score[i];
}

static size_t fam_evict(pb_kvcache *policy, uint32_t budget,
                        uint32_t *victims, size_t capacity) {
    fam_policy *f = fam_of(policy);
    if (f == NULL || f->held <= budget) return 0;
    const size_t want = f->held - budget;
    memset(f->gone, 0, f->held);
    size_t count = 0;

    if (f->kind == FAM_H2O || f->kind == FAM_SCISSORHANDS) {
        const size_t prot = f->recent < f->held ? f->recent : f->held;
        const size_t evictable = f->held - prot;
        count = want < evictable ? want : evictable;
        if (count > capacity || (count > 0 && victims == NULL)) return 0;
        for (size_t v = 0; v < count; ++v) {
            size_t best = evictable;
            for (size_t i = 0; i < evictable; ++i) {
                if (f->gone[i]) continue;
                if (best == evictable || key_of(f, i) < key_of(f, best))
                    best = i;
            }
            f->gone[best] = 1;
        }
    } else if (f->kind == FAM_TOVA) {
        if (want > capacity || victims == NULL) return 0;
        for (size_t v = 0; v < want; ++v) {
            size_t best = f->held;
            for (size_t i = 0; i < f->held; ++i) {
                if (f->gone[i] || !f->observed[i]) continue;
                if (best == f->held || f->score[i] < f->score[best]) best = i;
            }
            if (best == f->held) break; /* no observed position left */
            f->gone[best] = 1;
            ++count;
        }
    } else {
        /* Oldest first; StreamingLLM skips positions below `sinks`. */
        size_t nonsink = 0;
        for (size_t i = 0; i < f->held; ++i)
            if (f->kind == FAM_SLIDING_WINDOW || f->pos[i] >= f->sinks)
                ++nonsink;
        count = want < nonsink ? want : nonsink;
        if (count > capacity || (count > 0 && victims == NULL)) return 0;
        size_t taken = 0;
        for (size_t i = 0; i < f->held && taken < count; ++i)
            if (f->kind == FAM_SLIDING_WINDOW || f->pos[i] >= f->sinks) {
                f->gone[i] = 1;
                ++taken;
            }
    }

    size_t n = 0, w = 0;
    for (size_t i = 0; i < f->held; ++i) {
        if (f->gone[i]) {
            victims[n++] = f->pos[i];
            continue;
        }
        f->pos[w] = f->pos[i];
        f->score[w] = f->score[i];
        f->votes[w] = f->votes[i];
        f->observed[w] = f->observed[i];
        ++w;
    }
    f->held = w;
    return n;
}

static size_t fam_memory(const pb_kvcache *policy) {
    (void)policy;
    return 0;
}

static void fam_destroy(pb_kvcache *policy) { free(fam_of(policy)); }

const pb_kvcache_vtable pb_wl_ref_h2o = {h2o_create, fam_decode, fam_evict,
                                         fam_memory, fam_destroy};
const pb_kvcache_vtable pb_wl_ref_scissorhands = {
    scissorhands_create, fam_decode, fam_evict, fam_memory, fam_destroy};
const pb_kvcache_vtable pb_wl_ref_tova = {tova_create, fam_decode, fam_evict,
                                          fam_memory, fam_destroy};
const pb_kvcache_vtable pb_wl_ref_streaming_llm = {
    streaming_llm_create, fam_decode, fam_evict, fam_memory, fam_destroy};
const pb_kvcache_vtable pb_wl_ref_sliding_window = {
    sliding_window_create, fam_decode, fam_evict, fam_memory, fam_destroy};

size_t pb_wl_ref_kept_count(const pb_kvcache *policy) {
    return policy == NULL
               ? 0
               : ((const fam_policy *)(const void *)policy)->held;
}
