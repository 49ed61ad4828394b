/*
 * cli_trace_common.c - see cli_trace_common.h.
 */
#include "cli_trace_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_input.h"
#include "cli_options.h"

int pb_cli_trace_error(const char *cmd, const char *path, const char *msg) {
    return pb_cli_input_error(cmd, path, msg);
}

int pb_cli_trace_walk(pb_cli_walk *w, pb_cli_trace_args *a,
                      void (*help)(FILE *), const char **value) {
    for (;;) {
        if (w->next < w->argc && w->argv[w->next][0] != '-') {
            if (a->path != NULL)
                return pb_cli_usage_error(w->cmd, "more than one TRACE given");
            a->path = w->argv[w->next++];
            continue;
        }
        const int rc = pb_cli_walk_flag(w, help);
        if (rc == 0) {
            if (a->path == NULL)
                return pb_cli_usage_error(w->cmd,
                                          "a TRACE file is required (see "
                                          "pyramidkv %s --help)", w->cmd);
            return pb_cli_input_check(w->cmd, a->path);
        }
        if (rc != 1) return rc == PB_CLI_WALK_HELP ? 1 : PB_CLI_USAGE;
        const char *f = w->flag;
        if (strcmp(f, "--json") == 0 || strcmp(f, "--per-layer") == 0) {
            if (pb_cli_walk_no_value(w) != 0) return PB_CLI_USAGE;
            if (f[2] == 'j') a->json = 1;
            else a->per_layer = 1;
            continue;
        }
        if (pb_cli_walk_value(w, value) != 0) return PB_CLI_USAGE;
        return PB_CLI_WALK_FLAG;
    }
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
        } else if (rec.kind == PB_TR_DECODE) {
            out->decode += 1u;
        } else if (rec.kind == PB_TR_FUTURE) {
            out->future += 1u;
        } else {
            out->preference += 1u;
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

/* One record's rows into the layer profile. */
static int profile_record(void *ctx, const pb_tr_record *rec, const float *v,
                          char *err, size_t err_len) {
    for (uint32_t j = 0; j < rec->rows; ++j) {
        /* Row j's query sits at query + j and sees keys 0 .. that. */
        const size_t seen = (size_t)rec->query + j + 1u;
        const pb_status s = pb_profile_add_row(
            (pb_profile *)ctx, rec->layer, v + (size_t)j * rec->length, seen);
        if (s == PB_ERR_WEIGHT) continue; /* an all-zero row: no shape */
        if (s != PB_OK) {
            snprintf(err, err_len, "record %llu: profile: %s",
                     (unsigned long long)rec->index, pb_status_str(s));
            return -1;
        }
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
    /* prefill and decode rows: future rows are scored, preference rows
     * give CAKE's P only */
    if (pb_cli_visit_stream_order(path,
                                  (1u << PB_TR_PREFILL) | (1u << PB_TR_DECODE),
                                  profile_record, prof, err, err_len) != 0) {
        pb_profile_destroy(prof);
        return -1;
    }
    *out = prof;
    return 0;
}

/* ------------------------------------------------------------------------ */

static void sched_set(pb_cli_sched *s, uint32_t kind, uint32_t ratio) {
    s->kind = kind;
    s->ratio = ratio;
    if (kind == PB_SCHEDULE_ARITHMETIC || kind == PB_SCHEDULE_CURVE ||
        kind == PB_SCHEDULE_GEOMETRIC)
        snprintf(s->name, sizeof s->name, "%s:%u", pb_schedule_kind_name(kind),
                 ratio);
    else
        snprintf(s->name, sizeof s->name, "%s", pb_schedule_kind_name(kind));
}

int pb_cli_sched_parse(const char *text, pb_cli_sched *out) {
    uint32_t ratio = PB_CLI_DEFAULT_RATIO;
    const char *colon = strchr(text, ':');
    const size_t len = colon ? (size_t)(colon - text) : strlen(text);
    if (len == 0u) return -1;
    if (colon != NULL) {
        const char *d = colon + 1;
        if (*d == '\0' || strlen(d) > 6) return -1;
        ratio = 0u;
        for (; *d; ++d) {
            if (*d < '0' || *d > '9') return -1;
            ratio = ratio * 10u + (uint32_t)(*d - '0');
        }
        if (ratio == 0u) return -1;
    }
    uint32_t kind = 0;
    if (pb_cli_lookup_schedule(text, len, &kind) != 0) return -1;
    if (colon != NULL && kind != PB_SCHEDULE_ARITHMETIC &&
        kind != PB_SCHEDULE_CURVE && kind != PB_SCHEDULE_GEOMETRIC)
        return -1;
    sched_set(out, kind, ratio);
    return 0;
}

size_t pb_cli_sched_all(pb_cli_sched *out, size_t cap) {
    static const struct {
        uint32_t kind, ratio;
    } all[] = {
        {PB_SCHEDULE_UNIFORM, 1u},   {PB_SCHEDULE_ARITHMETIC, 2u},
        {PB_SCHEDULE_ARITHMETIC, 4u}, {PB_SCHEDULE_ARITHMETIC, 8u},
        {PB_SCHEDULE_KVFACTORY, 4u}, {PB_SCHEDULE_KVFACTORY_BALANCED, 4u},
        {PB_SCHEDULE_TAPER, 4u},     {PB_SCHEDULE_CURVE, 4u},
        {PB_SCHEDULE_PROFILE, 4u},   {PB_SCHEDULE_CAKE, 4u},
    };
    size_t n = 0;
    for (; n < sizeof all / sizeof all[0] && n < cap; ++n)
        sched_set(&out[n], all[n].kind, all[n].ratio);
    return n;
}

/* The shares at `budget`, their sum and the held total. */
static pb_status shares_at(const pb_cli_sched *s, const pb_cli_sched_ctx *c,
                           uint32_t budget, uint32_t *shares,
                           uint64_t *total, uint64_t *held) {
    pb_schedule sc = PB_SCHEDULE_DEFAULT;
    sc.kind = s->kind;
    sc.num_layers = c->layers;
    sc.budget = budget;
    sc.ratio = s->ratio;
    if (c->window > 0u) sc.window = c->window;
    sc.prompt_len = c->prompt_len;
    sc.weights = s->kind == PB_SCHEDULE_CAKE ? c->cake_weights : c->weights;
    sc.min_share = c->min_share < budget ? c->min_share : budget;
    const pb_status st =
        pb_kvcache_schedule_shares(&sc, shares, c->layers, total);
    *held = 0u;
    for (uint32_t l = 0; st == PB_OK && l < c->layers; ++l)
        *held += shares[l] > c->floor ? shares[l] : c->floor;
    return st;
}

int pb_cli_sched_shares(const pb_cli_sched *s, const pb_cli_sched_ctx *c,
                        uint32_t *shares, uint64_t *share_total,
                        uint64_t *held, uint32_t *used, char *err,
                        size_t err_len) {
    const uint64_t cap =
        (uint64_t)c->layers * (c->budget > c->floor ? c->budget : c->floor);
    pb_status st = shares_at(s, c, c->budget, shares, share_total, held);
    *used = c->budget;
    if (st == PB_OK && *held > cap) {
        /* The largest budget below whose held total fits. The totals grow
         * with the budget and a schedule refuses only small budgets
         * (kvfactory: not above the window), so "refused or fits" holds up
         * to some budget and not above it: bisect for that budget. */
        uint32_t lo = 0u, hi = c->budget; /* the predicate holds at lo, not hi */
        while (hi - lo > 1u) {
            const uint32_t mid = lo + (hi - lo) / 2u;
            uint64_t t = 0, h = 0;
            const pb_status ms = shares_at(s, c, mid, shares, &t, &h);
            if (ms != PB_OK || h <= cap) lo = mid;
            else hi = mid;
        }
        st = lo == 0u ? PB_ERR_PARAM
                      : shares_at(s, c, lo, shares, share_total, held);
        *used = lo;
    }
    if (st != PB_OK) {
        snprintf(err, err_len, "%s: %s", s->name, pb_status_str(st));
        return -1;
    }
    return 0;
}
