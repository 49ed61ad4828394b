/*
 * trace_synth.c - synthetic traces with a known layer profile (see
 * trace_synth.h and docs/trace_format.md, "Synthetic traces"). Every value
 * comes from uint32 draws, double products and one division per value, so
 * a trace is bit for bit the same on every IEEE-754 platform.
 */
#include "trace_synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_io.h"
#include "workload_rng.h"

#define SYNTH_SHARPEST 256u /* the largest exponent of a funnel */
#define SYNTH_FLAT 16u
#define SYNTH_BLOCK 8u /* neighbours that share an importance level */

int pb_trs_kind_parse(const char *name, pb_trs_kind *out) {
    if (strcmp(name, "funnel") == 0) *out = PB_TRS_FUNNEL;
    else if (strcmp(name, "inverted") == 0) *out = PB_TRS_INVERTED;
    else if (strcmp(name, "flat") == 0) *out = PB_TRS_FLAT;
    else return -1;
    return 0;
}

uint32_t pb_trs_gamma(pb_trs_kind kind, uint32_t layer, uint32_t layers) {
    if (kind == PB_TRS_FLAT) return SYNTH_FLAT;
    if (layers < 2u) return 1u;
    const uint64_t depth = kind == PB_TRS_FUNNEL ? layer : layers - 1u - layer;
    const uint64_t span = (uint64_t)(layers - 1u) * (layers - 1u);
    /* 1 at the broad end, SYNTH_SHARPEST at the sharp end, growing with the
     * square of the depth, rounded. */
    return 1u + (uint32_t)((depth * depth * (SYNTH_SHARPEST - 1u) + span / 2u) /
                           span);
}

/* x^n by squaring, the multiplications in a fixed order. */
static double power(double x, uint32_t n) {
    double r = 1.0;
    while (n != 0u) {
        if (n & 1u) r *= x;
        x *= x;
        n >>= 1;
    }
    return r;
}

static uint32_t mix(uint32_t seed, uint32_t a, uint32_t b, uint32_t c) {
    return seed * 2654435761u + a * 40503u + b * 977u + c * 131u;
}

/* One row: the query at q over keys 0 .. q, written to out[0 .. len-1]
 * (keys above q are the causal part, 0). */
static void make_row(const double *u, uint32_t gamma, uint32_t seed,
                     uint32_t q, uint32_t qhead, uint32_t len, double *w,
                     float *out) {
    pb_wl_rng rng;
    pb_wl_rng_seed(&rng, mix(seed, q, qhead, 0x5EEDu));
    double sum = 0.0;
    for (uint32_t p = 0; p <= q; ++p) {
        double v = power(u[p], gamma);
        v *= 1.0 + (double)pb_wl_rng_next_int(&rng, 64u) / 256.0;
        w[p] = v;
        sum += v;
    }
    for (uint32_t p = 0; p < len; ++p)
        out[p] = p <= q ? (float)(w[p] / sum) : 0.0f;
}

int pb_trs_write(const char *path, const pb_trs_params *p, char *err,
                 size_t err_len) {
    const uint32_t total = p->prompt + p->decode;
    const size_t streams = (size_t)p->layers * p->kv_heads;
    const uint32_t groups = p->group == 0u ? 1u : p->group;
    double *u = (double *)malloc(streams * total * sizeof *u);
    double *w = (double *)malloc((size_t)total * sizeof *w);
    float *block = (float *)malloc((size_t)p->window * total * sizeof *block);
    if (u == NULL || w == NULL || block == NULL) {
        free(u);
        free(w);
        free(block);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    /* Key importance per (layer, head): key 0 is a sink (1); the others
     * come in blocks of SYNTH_BLOCK neighbours (attention is local: what
     * matters comes in runs, which is what pooling assumes), a block's
     * level b uniform in (0, 1] in steps of 1/1000 and each key in it
     * b x (1 - d/1000) with d uniform in 0 .. 4. */
    for (uint32_t l = 0; l < p->layers; ++l) {
        for (uint32_t h = 0; h < p->kv_heads; ++h) {
            pb_wl_rng rng;
            pb_wl_rng_seed(&rng, mix(p->seed, l, h, 0u));
            double *ul = u + ((size_t)l * p->kv_heads + h) * total;
            double level = 1.0;
            ul[0] = 1.0;
            for (uint32_t k = 1; k < total; ++k) {
                if (k % SYNTH_BLOCK == 1u)
                    level = (double)(1u + pb_wl_rng_next_int(&rng, 1000u)) /
                            1000.0;
                ul[k] = level * (1.0 - (double)pb_wl_rng_next_int(&rng, 5u) /
                                           1000.0);
            }
        }
    }
    const pb_tr_shape shape = {p->layers, p->kv_heads, groups, 1u};
    pb_tr_writer *wr = NULL;
    int rc = pb_tr_writer_open(path, &shape, &wr, err, err_len);
    pb_tr_record rec;
    memset(&rec, 0, sizeof rec);
    rec.dtype = p->dtype;
    /* The prefill records, layer by layer; then the decode rows, step by
     * step, every layer and head at each step. */
    for (uint32_t l = 0; rc == 0 && l < p->layers; ++l) {
        const uint32_t gamma = pb_trs_gamma(p->kind, l, p->layers);
        for (uint32_t h = 0; rc == 0 && h < p->kv_heads; ++h) {
            const double *ul = u + ((size_t)l * p->kv_heads + h) * total;
            for (uint32_t g = 0; rc == 0 && g < groups; ++g) {
                const uint32_t first = p->prompt - p->window;
                for (uint32_t j = 0; j < p->window; ++j)
                    make_row(ul, gamma, mix(p->seed, l, h, 1u), first + j, g,
                             p->prompt, w, block + (size_t)j * p->prompt);
                rec.kind = PB_TR_PREFILL;
                rec.layer = l;
                rec.head = h;
                rec.qhead = p->group == 0u ? PB_TR_GROUP_REDUCED : g;
                rec.query = first;
                rec.rows = p->window;
                rec.length = p->prompt;
                rc = pb_tr_writer_add(wr, &rec, block, err, err_len);
            }
        }
    }
    for (uint32_t s = 0; rc == 0 && s < p->decode; ++s) {
        const uint32_t q = p->prompt + s;
        for (uint32_t l = 0; rc == 0 && l < p->layers; ++l) {
            const uint32_t gamma = pb_trs_gamma(p->kind, l, p->layers);
            for (uint32_t h = 0; rc == 0 && h < p->kv_heads; ++h) {
                const double *ul = u + ((size_t)l * p->kv_heads + h) * total;
                for (uint32_t g = 0; rc == 0 && g < groups; ++g) {
                    make_row(ul, gamma, mix(p->seed, l, h, 1u), q, g, q + 1u,
                             w, block);
                    rec.kind = PB_TR_DECODE;
                    rec.layer = l;
                    rec.head = h;
                    rec.qhead = p->group == 0u ? PB_TR_GROUP_REDUCED : g;
                    rec.query = q;
                    rec.rows = 1u;
                    rec.length = q + 1u;
                    rc = pb_tr_writer_add(wr, &rec, block, err, err_len);
                }
            }
        }
    }
    if (wr != NULL) {
        char cerr[128];
        if (pb_tr_writer_close(wr, cerr, sizeof cerr) != 0 && rc == 0) {
            snprintf(err, err_len, "%s", cerr);
            rc = -1;
        }
    }
    free(u);
    free(w);
    free(block);
    return rc;
}
