/*
 * cli_trace_common.c - see cli_trace_common.h.
 */
#include "cli_trace_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"

int pb_cli_trace_error(const char *cmd, const char *path, const char *msg) {
    fprintf(stderr, "pyramidkv %s: %s: %s\n", cmd, path, msg);
    return PB_CLI_USAGE;
}

int pb_cli_scan_trace(const char *path, pb_cli_scan *out, char *err,
                      size_t err_len) {
    memset(out, 0, sizeof *out);
    pb_tr_reader *r = NULL;
    if (pb_tr_reader_open_file(path, &r, err, err_len) != 0) return -1;
    out->shape = *pb_tr_reader_shape(r);
    uint8_t *seen = (uint8_t *)calloc(out->shape.num_layers, 1);
    if (seen == NULL) {
        pb_tr_reader_close(r);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    pb_tr_record rec;
    const float *v;
    int got;
    while ((got = pb_tr_reader_next(r, &rec, &v, err, err_len)) == 1) {
        if (rec.kind == PB_TR_PREFILL) {
            out->prefill += 1u;
            if (rec.rows > out->max_window) out->max_window = rec.rows;
            if (rec.length > out->max_prompt) out->max_prompt = rec.length;
        } else {
            out->decode += 1u;
        }
        out->rows += rec.rows;
        if (rec.length > out->max_len) out->max_len = rec.length;
        if (!seen[rec.layer]) out->layers_present += 1u;
        seen[rec.layer] = 1u;
    }
    free(seen);
    pb_tr_reader_close(r);
    if (got < 0) return -1;
    if (out->rows == 0u) {
        snprintf(err, err_len, "the trace holds no record");
        return -1;
    }
    return 0;
}

int pb_cli_profile_trace(const char *path, const pb_cli_scan *scan,
                         pb_profile **out, char *err, size_t err_len) {
    *out = NULL;
    pb_profile_params pp = PB_PROFILE_PARAMS_DEFAULT;
    pp.num_layers = scan->shape.num_layers;
    pp.max_len = scan->max_len;
    pb_profile *prof = NULL;
    const pb_status st = pb_profile_create(&pp, NULL, &prof);
    if (st != PB_OK) {
        snprintf(err, err_len, "profile of %u layers x %u keys: %s",
                 pp.num_layers, pp.max_len, pb_status_str(st));
        return -1;
    }
    pb_tr_reader *r = NULL;
    if (pb_tr_reader_open_file(path, &r, err, err_len) != 0) {
        pb_profile_destroy(prof);
        return -1;
    }
    pb_tr_record rec;
    const float *v;
    int got;
    while ((got = pb_tr_reader_next(r, &rec, &v, err, err_len)) == 1) {
        for (uint32_t j = 0; j < rec.rows; ++j) {
            /* Row j's query sits at query + j and sees keys 0 .. that. */
            const size_t seen = (size_t)rec.query + j + 1u;
            const pb_status s = pb_profile_add_row(
                prof, rec.layer, v + (size_t)j * rec.length, seen);
            if (s == PB_ERR_WEIGHT) continue; /* an all-zero row: no shape */
            if (s != PB_OK) {
                snprintf(err, err_len, "record %llu: profile: %s",
                         (unsigned long long)rec.index, pb_status_str(s));
                got = -1;
                break;
            }
        }
        if (got < 0) break;
    }
    pb_tr_reader_close(r);
    if (got < 0) {
        pb_profile_destroy(prof);
        return -1;
    }
    *out = prof;
    return 0;
}

/* ------------------------------------------------------------------------ */

static void sched_set(pb_cli_sched *s, int kind, uint32_t ratio) {
    s->kind = kind;
    s->ratio = ratio;
    if (kind == PB_CLI_SCHED_UNIFORM) snprintf(s->name, sizeof s->name, "uniform");
    else if (kind == PB_CLI_SCHED_PROFILE) snprintf(s->name, sizeof s->name, "profile");
    else snprintf(s->name, sizeof s->name, "arithmetic:%u", ratio);
}

int pb_cli_sched_parse(const char *text, pb_cli_sched *out) {
    if (strcmp(text, "uniform") == 0) {
        sched_set(out, PB_CLI_SCHED_UNIFORM, 1u);
        return 0;
    }
    if (strcmp(text, "profile") == 0) {
        sched_set(out, PB_CLI_SCHED_PROFILE, 0u);
        return 0;
    }
    if (strcmp(text, "pyramid") == 0 || strcmp(text, "arithmetic") == 0) {
        sched_set(out, PB_CLI_SCHED_ARITHMETIC, 4u);
        return 0;
    }
    if (strncmp(text, "arithmetic:", 11) == 0) {
        uint32_t r = 0;
        const char *d = text + 11;
        if (*d == '\0' || strlen(d) > 6) return -1;
        for (; *d; ++d) {
            if (*d < '0' || *d > '9') return -1;
            r = r * 10u + (uint32_t)(*d - '0');
        }
        if (r == 0u) return -1;
        sched_set(out, PB_CLI_SCHED_ARITHMETIC, r);
        return 0;
    }
    return -1;
}

size_t pb_cli_sched_all(pb_cli_sched *out, size_t cap) {
    static const uint32_t ratios[] = {2u, 4u, 8u};
    size_t n = 0;
    if (n < cap) sched_set(&out[n++], PB_CLI_SCHED_UNIFORM, 1u);
    for (size_t i = 0; i < sizeof ratios / sizeof ratios[0] && n < cap; ++i)
        sched_set(&out[n++], PB_CLI_SCHED_ARITHMETIC, ratios[i]);
    if (n < cap) sched_set(&out[n++], PB_CLI_SCHED_PROFILE, 0u);
    return n;
}

int pb_cli_sched_shares(const pb_cli_sched *s, uint32_t budget,
                        uint32_t layers, const uint32_t *weights,
                        uint32_t min_share, uint32_t *shares, char *err,
                        size_t err_len) {
    if (s->kind == PB_CLI_SCHED_UNIFORM || s->kind == PB_CLI_SCHED_ARITHMETIC) {
        const pb_status st = pb_kvcache_pyramid_budgets(
            budget, layers, s->kind == PB_CLI_SCHED_UNIFORM ? 1u : s->ratio,
            shares, layers);
        if (st != PB_OK) {
            snprintf(err, err_len, "%s: %s", s->name, pb_status_str(st));
            return -1;
        }
        return 0;
    }
    /* profile: the total layers x budget apportioned by the weights, each
     * layer at least min_share when the total allows it. */
    uint64_t wsum = 0;
    for (uint32_t l = 0; l < layers; ++l) wsum += weights[l];
    const uint64_t total = (uint64_t)layers * budget;
    uint64_t floor_total = (uint64_t)layers * min_share;
    if (floor_total > total) floor_total = total, min_share = budget;
    const uint64_t spread = total - floor_total;
    uint64_t given = 0;
    for (uint32_t l = 0; l < layers; ++l) {
        /* floor(spread * w / wsum) in double (the product may not fit in
         * 64 bits); never more than what is left. */
        uint64_t extra = (uint64_t)((double)spread * (double)weights[l] /
                                    (double)wsum);
        if (extra > spread - given) extra = spread - given;
        given += extra;
        shares[l] = min_share + (uint32_t)extra;
    }
    return 0;
}
