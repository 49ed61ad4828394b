/*
 * bench_binding_c.c - the C side of bench/python/bench_binding.py: the
 * same decode steps the Python benchmark makes through the binding, run in
 * a C loop and timed with the same clock, plus a function that does nothing,
 * whose ctypes call is the floor of any call through ctypes.
 */
#define _POSIX_C_SOURCE 199309L
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <pyramidkv/pyramidkv.h>

/* PB_API-like export: the library's own macro is for the library. */
#define PBPY_API __attribute__((visibility("default")))

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The floor: a call with the arguments of pb_kvcache_observe. */
PBPY_API int pbpy_noop(void *p, uint32_t pos, const float *attn, size_t n)
{
    (void)p; (void)pos; (void)attn; (void)n;
    return 0;
}

/* `steps` decode steps on each of `n_inst` instances (the heads of a
 * layer): observe pos with the first kept_count weights of `row`, then
 * evict down to the share, as the Python loop does. Returns the elapsed
 * nanoseconds, or -1 on a library error. */
PBPY_API double pbpy_steps(pb_kvcache **inst, size_t n_inst, uint32_t first,
                           uint32_t steps, const float *row,
                           uint32_t *victims, size_t victims_cap)
{
    const double t0 = now_ns();
    for (uint32_t s = 0; s < steps; s++) {
        for (size_t h = 0; h < n_inst; h++) {
            size_t nv = 0;
            if (pb_kvcache_observe(inst[h], first + s, row,
                                   pb_kvcache_kept_count(inst[h])) != PB_OK ||
                pb_kvcache_evict(inst[h], UINT32_MAX, victims, victims_cap,
                                 &nv) != PB_OK)
                return -1.0;
        }
    }
    return now_ns() - t0;
}

/* One decode step's observation on `n_inst` instances (8 C calls for a
 * layer of 8 KV heads), timed inside C; returns the nanoseconds, or -1 on
 * a library error. */
PBPY_API double pbpy_observe_heads(pb_kvcache **inst, size_t n_inst,
                                   uint32_t pos, const float *row)
{
    const double t0 = now_ns();
    for (size_t h = 0; h < n_inst; h++)
        if (pb_kvcache_observe(inst[h], pos, row,
                               pb_kvcache_kept_count(inst[h])) != PB_OK)
            return -1.0;
    return now_ns() - t0;
}

/* Evicts each instance down to its share (untimed bookkeeping between the
 * timed observations). Returns 0, or -1 on a library error. */
PBPY_API int pbpy_evict_heads(pb_kvcache **inst, size_t n_inst,
                              uint32_t *victims, size_t victims_cap)
{
    for (size_t h = 0; h < n_inst; h++) {
        size_t nv = 0;
        if (pb_kvcache_evict(inst[h], UINT32_MAX, victims, victims_cap,
                             &nv) != PB_OK)
            return -1;
    }
    return 0;
}

/* The same observation through one pb_kvcache_group_observe call, timed
 * inside C: the group's own cost, apart from Python's. */
PBPY_API double pbpy_group_observe(pb_kvcache_group *group, uint32_t pos,
                                   const float *rows, size_t stride,
                                   const size_t *lens)
{
    const double t0 = now_ns();
    if (pb_kvcache_group_observe(group, pos, rows, stride, lens) != PB_OK)
        return -1.0;
    return now_ns() - t0;
}

/* `steps` decode steps of a group through pb_kvcache_group_step (observe
 * with rows [heads, stride] of which each head reads its held count, then
 * evict to the layer's total), timed inside C: the group's own cost of
 * what the Python Group.step does. Returns the nanoseconds, or -1 on a
 * library error. */
PBPY_API double pbpy_group_steps(pb_kvcache_group *group, uint32_t first,
                                 uint32_t steps, const float *rows,
                                 size_t stride, size_t *lens,
                                 uint32_t *victims, size_t victims_cap,
                                 size_t *counts, size_t counts_len)
{
    const double t0 = now_ns();
    for (uint32_t s = 0; s < steps; s++) {
        size_t nv = 0;
        if (pb_kvcache_group_step(group, first + s, rows, stride, lens,
                                  UINT64_MAX, victims, victims_cap, counts,
                                  counts_len, &nv) != PB_OK)
            return -1.0;
    }
    return now_ns() - t0;
}
