/*
 * bench_replay_plan.c - the plan of a decode replay (the rows and the
 * victims of a reference run over the decode-4096 trace) and the timed
 * replay of it through any implementation; see bench_replay_plan.h. Both
 * tables of bench_decode_replay use it: the library against the reference
 * model, and each scorer against the memcpy floor.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_replay_plan.h"

#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "trace_decode.h"

static const char *const NAME = "bench_decode_replay";

void bench_replay_plan_free(bench_replay_plan *pl) {
    free(pl->off);
    free(pl->len); /* and victims */
    bench_free(pl->attn);
    memset(pl, 0, sizeof *pl);
}

int bench_replay_plan_build(bench_replay_plan *pl,
                            const pb_kvcache_config *config, uint32_t steps,
                            uint32_t cadence) {
    memset(pl, 0, sizeof *pl);
    const uint32_t budget = config->budget;
    pl->steps = steps;
    pl->budget = budget;
    pl->cadence = cadence;
    const size_t most = (size_t)budget + cadence;
    size_t total = 0;
    for (uint32_t t = 1; t <= steps; ++t) total += t < most ? t : most;
    pl->off = malloc(steps * sizeof *pl->off);
    pl->len = malloc(2u * (size_t)steps * sizeof *pl->len);
    pl->victims = pl->len != NULL ? pl->len + steps : NULL;
    pl->attn = bench_alloc(total * sizeof *pl->attn);
    float *full = malloc(PB_WL_POSITIONS * sizeof *full);
    pb_wl_shape shape;
    pb_wl_trace trace;
    memset(&trace, 0, sizeof trace);
    pb_wl_shape_decode4096(&shape);
    ref_policy ref;
    memset(&ref, 0, sizeof ref);
    int rc = 0;
    if (!pl->off || !pl->len || !pl->attn || !pl->victims || !full ||
        pb_wl_trace_init(&trace, &shape, PB_WL_POSITIONS) != 0 ||
        ref_create_config(&ref, config) != PB_OK)
        rc = bench_fail(NAME, "cannot allocate the plan (budget %u, cadence "
                              "%u)",
                        (unsigned)budget, (unsigned)cadence);
    size_t off = 0;
    uint32_t hash = PB_WL_FNV_OFFSET;
    for (uint32_t t = 1; t <= steps && rc == 0; ++t) {
        const size_t n = ref.kept;
        if (off + n > total) { /* unreachable: held <= min(t, most) */
            rc = bench_fail(NAME, "plan overflow at step %u", (unsigned)t);
            break;
        }
        if (pb_wl_trace_next(&trace, full) != t) {
            rc = bench_fail(NAME, "the trace ended before step %u",
                            (unsigned)t);
            break;
        }
        hash = pb_wl_fnv1a_floats(hash, full, t);
        float *row = pl->attn + off;
        for (size_t i = 0; i < n; ++i) row[i] = full[ref.pos[i]];
        pl->off[t - 1] = off;
        pl->len[t - 1] = (uint32_t)n;
        off += n;
        pb_status st = ref_observe(&ref, t, row, n);
        if (st == PB_OK && ref.kept >= most) {
            size_t nv = 0;
            st = ref_evict(&ref, budget, pl->victims + pl->n_victims,
                           steps - pl->n_victims, &nv);
            pl->n_victims += nv;
        }
        if (st != PB_OK)
            rc = bench_fail(NAME, "the reference refused step %u: %s",
                            (unsigned)t, pb_status_str(st));
    }
    if (rc == 0 && steps == PB_WL_POSITIONS - 1u &&
        hash != PB_WL_DECODE4096_HASH)
        rc = bench_fail(NAME, "decode-4096 hash %u, expected %u",
                        (unsigned)hash, (unsigned)PB_WL_DECODE4096_HASH);
    pl->row_bytes = off * sizeof(float);
    ref_destroy(&ref);
    pb_wl_trace_free(&trace);
    free(full);
    if (rc) bench_replay_plan_free(pl);
    return rc;
}

static int library_reset(void *self) {
    return pb_kvcache_reset(self) != PB_OK;
}

static pb_status library_observe(void *self, uint32_t pos, const float *attn,
                                  size_t len) {
    return pb_kvcache_observe(self, pos, attn, len);
}

static pb_status library_evict(void *self, uint32_t budget, uint32_t *victims,
                               size_t cap, size_t *n) {
    return pb_kvcache_evict(self, budget, victims, cap, n);
}

bench_replayer bench_replayer_library(pb_kvcache *policy) {
    const bench_replayer r = {policy, library_reset, library_observe,
                              library_evict};
    return r;
}

static int reference_reset(void *self) {
    ref_reset(self);
    return 0;
}

static pb_status reference_observe(void *self, uint32_t pos,
                                   const float *attn, size_t len) {
    return ref_observe(self, pos, attn, len);
}

static pb_status reference_evict(void *self, uint32_t budget,
                                 uint32_t *victims, size_t cap, size_t *n) {
    return ref_evict(self, budget, victims, cap, n);
}

bench_replayer bench_replayer_reference(ref_policy *ref) {
    const bench_replayer r = {ref, reference_reset, reference_observe,
                              reference_evict};
    return r;
}

double bench_replay_run(const bench_replayer *who, const bench_replay_plan *pl,
                        uint32_t *out, size_t out_cap, size_t *n_out,
                        double *cpu) {
    if (who->reset(who->self) != 0) return -1.0;
    const size_t trigger = (size_t)pl->budget + pl->cadence;
    size_t held = 1, nv = 0;
    unsigned bad = 0;
    const double c0 = bench_cpu_now();
    const double t0 = bench_now();
    for (uint32_t t = 1; t <= pl->steps; ++t) {
        bad |= (unsigned)who->observe(who->self, t, pl->attn + pl->off[t - 1],
                                      pl->len[t - 1]);
        if (++held >= trigger) {
            size_t n = 0;
            bad |= (unsigned)who->evict(who->self, pl->budget, out + nv,
                                        out_cap - nv, &n);
            nv += n;
            held -= n;
        }
    }
    const double t1 = bench_now();
    *cpu = bench_cpu_now() - c0;
    *n_out = nv;
    return bad ? -1.0 : t1 - t0;
}

int bench_replay_check(const bench_replay_plan *pl, const uint32_t *got,
                       size_t n_got, const char *what, const char *who) {
    if (n_got != pl->n_victims)
        return bench_fail(NAME, "%s: the %s evicted %zu positions, the "
                                "reference run of the plan %zu",
                          what, who, n_got, pl->n_victims);
    for (size_t i = 0; i < n_got; ++i)
        if (got[i] != pl->victims[i])
            return bench_fail(NAME, "%s: victim #%zu differs: %s %u, "
                                    "reference run of the plan %u",
                              what, i, who, (unsigned)got[i],
                              (unsigned)pl->victims[i]);
    return 0;
}
