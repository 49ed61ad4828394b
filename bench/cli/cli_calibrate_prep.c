/*
 * cli_calibrate_prep.c - the preparing pass of `pyramidkv calibrate`: how
 * many prefill and future records every stream holds (which fixes each
 * layer's prompts, docs/spec.md §18.1), the per-(layer, KV head) profile
 * that per-head shares come from (fed in stream order), and CAKE's layer
 * preference measured on the preference records, or on the prompts where
 * a layer has none (§18.2). Sums that cross records are kept per (stream,
 * prompt) and added in stream order at the end, so the file's order of
 * the streams changes no figure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_calibrate.h"
#include "pyramidkv/pyramidkv.h"
#include "trace_io.h"

void pb_cli_calibrate_prep_free(cal_prep *p) {
    free(p->n_pre);
    free(p->n_fut);
    free(p->n_prf);
    free(p->cake_pref);
    free(p->pref_from_texts);
    pb_profile_destroy(p->head_prof);
    memset(p, 0, sizeof *p);
}

uint32_t pb_cli_calibrate_stream(const cal_prep *p, const pb_tr_record *rec) {
    const uint32_t slot =
        rec->qhead == PB_TR_GROUP_REDUCED ? p->slots - 1u : rec->qhead;
    return (uint32_t)(((size_t)rec->layer * p->kv_heads + rec->head) *
                      p->slots + slot);
}

/* Grows the per-(prompt, stream) H and V arrays to hold prompt k. */
static int grow(double **hv, uint32_t *cap, uint32_t k, size_t streams) {
    if (k < *cap) return 0;
    const uint32_t want = k + 1u > 2u * *cap ? k + 1u : 2u * *cap;
    double *n = (double *)realloc(*hv, (size_t)want * streams * 2u *
                                           sizeof *n);
    if (n == NULL) return -1;
    memset(n + (size_t)*cap * streams * 2u, 0,
           (size_t)(want - *cap) * streams * 2u * sizeof *n);
    *hv = n;
    *cap = want;
    return 0;
}

int pb_cli_calibrate_visit(const char *path, cal_visit_fn fn, void *ctx,
                           char *err, size_t err_len) {
    pb_tr_reader *r = NULL;
    if (pb_tr_reader_open_file(path, &r, err, err_len) != 0) return -1;
    pb_tr_record rec;
    const float *v;
    int got;
    while ((got = pb_tr_reader_next(r, &rec, &v, err, err_len)) == 1)
        if (fn(ctx, &rec, v, err, err_len) != 0) {
            got = -1;
            break;
        }
    pb_tr_reader_close(r);
    return got < 0 ? -1 : 0;
}

/* The preparing pass's state between records. */
typedef struct prep_pass {
    cal_prep *out;
    double *hv[2]; /* [k][stream][2]: CAKE's H and V of a stream's k-th
                      prefill record (0) and preference record (1) */
    uint32_t cap[2];
    size_t streams;
    double tau1, tau2;
} prep_pass;

/* A prefill record's rows into the head profile (in stream order, so the
 * sums do not depend on the file's interleaving of query heads). */
static int head_profile_record(void *ctx, const pb_tr_record *rec,
                               const float *v, char *err, size_t err_len) {
    cal_prep *out = (cal_prep *)ctx;
    for (uint32_t j = 0; j < rec->rows; ++j) {
        const pb_status st = pb_profile_add_row(
            out->head_prof, rec->layer * out->kv_heads + rec->head,
            v + (size_t)j * rec->length, (size_t)rec->query + j + 1u);
        if (st != PB_OK && st != PB_ERR_WEIGHT) {
            snprintf(err, err_len, "record %llu at byte %llu: its rows give "
                     "no profile", (unsigned long long)rec->index,
                     (unsigned long long)rec->offset);
            return -1;
        }
    }
    return 0;
}

/* One record: its stream's counts; a prefill or preference record's CAKE
 * H and V. */
static int prep_record(void *ctx, const pb_tr_record *rec, const float *v,
                       char *err, size_t err_len) {
    prep_pass *pp = (prep_pass *)ctx;
    cal_prep *out = pp->out;
    const size_t s = pb_cli_calibrate_stream(out, rec);
    if (rec->kind == PB_TR_FUTURE) out->n_fut[s] += 1u;
    if (rec->kind != PB_TR_PREFILL && rec->kind != PB_TR_PREFERENCE) return 0;
    const int pref = rec->kind == PB_TR_PREFERENCE;
    const uint32_t k = pref ? out->n_prf[s]++ : out->n_pre[s]++;
    if (!pref && k + 1u > out->prompts) out->prompts = k + 1u;
    if (pref && k + 1u > out->pref_texts) out->pref_texts = k + 1u;
    double h = 0.0, var = 0.0, p = 0.0;
    if (rec->rows < rec->length &&
        pb_cake_layer_preference(v, 1u, (size_t)rec->rows * rec->length,
                                 rec->rows, rec->length, pp->tau1, pp->tau2,
                                 &h, &var, &p) != PB_OK) {
        snprintf(err, err_len, "record %llu at byte %llu: its rows give no "
                 "CAKE preference", (unsigned long long)rec->index,
                 (unsigned long long)rec->offset);
        return -1;
    }
    if (grow(&pp->hv[pref], &pp->cap[pref], k, pp->streams) != 0) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    pp->hv[pref][((size_t)k * pp->streams + s) * 2u] = h;
    pp->hv[pref][((size_t)k * pp->streams + s) * 2u + 1u] = var;
    return 0;
}

/* CAKE's P of layer l from its k-th records of one kind (hv, n: that
 * kind's H and V and per-stream counts): the sums over the layer's
 * streams in stream order, then the mean over k. */
static double layer_pref(const cal_prep *out, const double *hv,
                         const uint32_t *n_rec, uint32_t n_k, size_t streams,
                         uint32_t l, double tau1, double tau2) {
    const size_t first = (size_t)l * out->kv_heads * out->slots;
    double sum = 0.0;
    uint32_t n = 0;
    for (uint32_t k = 0; k < n_k; ++k) {
        double hs = 0.0, vs = 0.0;
        int any = 0;
        for (size_t s = first; s < first + (size_t)out->kv_heads * out->slots;
             ++s) {
            if (n_rec[s] <= k) continue;
            hs += hv[((size_t)k * streams + s) * 2u];
            vs += hv[((size_t)k * streams + s) * 2u + 1u];
            any = 1;
        }
        if (!any) continue;
        sum += pow(hs, 1.0 / tau1) * pow(vs, 1.0 / tau2);
        n += 1u;
    }
    return n ? sum / n : 0.0;
}

int pb_cli_calibrate_prep(const char *path, const pb_cli_scan *scan,
                          double tau1, double tau2, cal_prep *out, char *err,
                          size_t err_len) {
    memset(out, 0, sizeof *out);
    const uint32_t L = scan->shape.num_layers, H = scan->shape.num_kv_heads;
    out->layers = L;
    out->kv_heads = H;
    out->slots = scan->shape.group_size + 1u;
    const size_t streams = (size_t)L * H * out->slots;
    out->n_pre = (uint32_t *)calloc(streams, sizeof *out->n_pre);
    out->n_fut = (uint32_t *)calloc(streams, sizeof *out->n_fut);
    out->n_prf = (uint32_t *)calloc(streams, sizeof *out->n_prf);
    out->cake_pref = (double *)calloc(L, sizeof *out->cake_pref);
    out->pref_from_texts = (uint8_t *)calloc(L, 1);
    pb_profile_params prp = PB_PROFILE_PARAMS_DEFAULT;
    prp.num_layers = L * H;
    prp.max_len = scan->max_len;
    prep_pass pp = {out, {NULL, NULL}, {0u, 0u}, streams, tau1, tau2};
    int got = -1;
    if (out->n_pre == NULL || out->n_fut == NULL || out->n_prf == NULL ||
        out->cake_pref == NULL || out->pref_from_texts == NULL)
        snprintf(err, err_len, "out of memory");
    else if ((uint64_t)L * H > PB_TR_MAX_LAYERS ||
             pb_profile_create(&prp, NULL, &out->head_prof) != PB_OK)
        snprintf(err, err_len, "a profile of %u x %u heads over %u keys "
                 "does not fit", L, H, scan->max_len);
    else if ((got = pb_cli_calibrate_visit(path, prep_record, &pp, err,
                                           err_len)) == 0)
        got = pb_cli_visit_stream_order(path, 1u << PB_TR_PREFILL,
                                        head_profile_record, out, err,
                                        err_len);
    /* A layer with preference records takes P from them, else from its
     * prompts (docs/spec.md §18.2). */
    for (uint32_t l = 0; got == 0 && l < L; ++l) {
        int has_pref = 0;
        for (size_t s = (size_t)l * H * out->slots;
             s < (size_t)(l + 1u) * H * out->slots; ++s)
            has_pref |= out->n_prf[s] > 0u;
        out->pref_from_texts[l] = (uint8_t)has_pref;
        out->cake_pref[l] =
            has_pref ? layer_pref(out, pp.hv[1], out->n_prf, out->pref_texts,
                                  streams, l, tau1, tau2)
                     : layer_pref(out, pp.hv[0], out->n_pre, out->prompts,
                                  streams, l, tau1, tau2);
    }
    free(pp.hv[0]);
    free(pp.hv[1]);
    if (got != 0) {
        pb_cli_calibrate_prep_free(out);
        return -1;
    }
    return 0;
}
