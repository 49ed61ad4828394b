/*
 * cli_calibrate.c - `pyramidkv calibrate TRACE`: the model's per-layer
 * attention profile from a trace file (entropy, support, k for 50/90/99 %
 * of the mass), the schedule derived from it, and, at the user's average
 * budget, every schedule under three head modes (per-head uniform,
 * head-adaptive, per-head shares) measured by running prefill compression
 * (the paper's selection) on the recorded window rows at equal held
 * positions: the window figures and, with future records, the peak loss
 * (docs/spec.md §18), best first, with a one-line recommendation.
 * --plot draws the entropy profile and the shares with gnuplot.
 *
 * Owns the flags, the profile and the rows; the measuring pass is
 * cli_calibrate_measure.c's, the tables, JSON and plot
 * cli_calibrate_output.c's. Four passes over the file (scan, profile,
 * prep, compression); nothing is printed before the last one has read the
 * whole file, so a malformed trace gives one error line and no output.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_calibrate.h"
#include "cli_commands.h"
#include "cli_options.h"
#include "cli_trace_common.h"
#include "pyramidkv/pyramidkv.h"
#include "trace_io.h"

#define MAX_SCHED 16u
#define MAX_ALLOC (3u * MAX_SCHED)

static void help(FILE *out) {
    fprintf(out,
        "usage: pyramidkv calibrate TRACE [--budget B] [--recent N] [--fraction F]\n"
        "                 [--floor N] [--tau1 X] [--tau2 X] [--cake-pref LIST]\n"
        "                 [--progress on|off]\n"
        "                 [--per-layer] [--json] [--plot FILE.png]\n"
        "\n"
        "Ranks every allocation on a trace of a model's attention\n"
        "(docs/trace_format.md; bench/model/model_trace records the bench\n"
        "model, `pyramidkv trace --make` writes synthetic ones). Every figure\n"
        "is defined in docs/spec.md section 18; docs/calibrate.md shows how\n"
        "far its pick agrees with a model's measured accuracy.\n"
        "\n"
        "1. The profile, per layer: entropy, support, k50/k90/k99, and the\n"
        "   profile schedule's weights (k for --fraction, floored at --floor)\n"
        "   with the best-fitting arithmetic ratio.\n"
        "2. The rows: at average budget B per layer and recent window N (every\n"
        "   layer holds at least N + 1; equal held positions for every row),\n"
        "   uniform, arithmetic:2, :4, :8, kvfactory, kvfactory-balanced,\n"
        "   taper, curve:4, profile and cake (CAKE's preference from the\n"
        "   trace's preference records, version 3: the text the runtime\n"
        "   measures it on, else from the prompts' windows; temperatures\n"
        "   --tau1, --tau2), each under three head modes: uniform\n"
        "   (every KV head the layer's share), adaptive (one pool per layer,\n"
        "   Ada-KV) and shares (per-head shares from the trace's per-head\n"
        "   profile).\n"
        "3. Each prompt of each layer compressed under each row (window rows\n"
        "   scoring, pooling 7, max); recall and mass of the window rows; with\n"
        "   future records (version 2), peak: the later queries' attention on\n"
        "   each head's 8 most attended prompt positions lost to eviction,\n"
        "   pooled over a prompt's heads, mean over prompts, with its standard\n"
        "   error. Best first by peak (by recall without future records); tie:\n"
        "   within two paired standard errors of the top row, where the trace\n"
        "   does not decide.\n"
        "\n"
        "options:\n"
        "  --budget B      average positions per layer, above the recent window\n"
        "                  [the longest prompt / 8, at least N + 1]\n"
        "  --recent N      newest positions every head keeps [the window rows]\n"
        "  --fraction F    mass fraction the profile weights hold, in percent,\n"
        "                  1 .. 100 [90]\n"
        "  --floor N       smallest profile weight, >= 1 [the largest window]\n"
        "  --tau1 X, --tau2 X  CAKE's temperatures, (0, 1000] [1.6, 0.6]\n"
        "  --cake-pref LIST    CAKE's layer preference given, one number >= 0\n"
        "                  per layer separated by commas (as a runtime measured\n"
        "                  it on text the trace does not hold), instead of\n"
        "                  measured on the trace\n"
        "  --progress on|off   a progress line on stderr [on for a terminal]\n"
        "  --per-layer     also print every layer's share and mass per schedule\n"
        "  --json          one JSON document instead of the tables\n"
        "  --plot FILE     also draw the entropy profile and the shares into FILE\n"
        "                  (PNG, gnuplot; never on stdout). A FILE that cannot be\n"
        "                  written is an input error (2) before anything runs;\n"
        "                  gnuplot failing is 1; without gnuplot the plot is\n"
        "                  skipped with a message\n"
        "  --help          this text\n"
        "\n"
        "Trace sizes: a prefill record is rows x prompt values (4 bytes each in\n"
        "float32, 2 in float16). 32 layers x 8 KV heads x 32 window rows x an\n"
        "8,192-position prompt is 67.1 M values: 256 MiB in float32, 128 MiB in\n"
        "float16; record a subset of layers or heads, or the group reduced, to\n"
        "shrink it (docs/calibrate.md).\n");
    pb_cli_help_common(out);
}

static int parse(int argc, char **argv, cal_opts *o) {
    memset(o, 0, sizeof *o);
    o->fraction_ppm = 900000u;
    o->tau1 = 1.6;
    o->tau2 = 0.6;
    pb_cli_walk w;
    pb_cli_walk_init(&w, "calibrate", argc, argv);
    const char *v = NULL;
    int wrc;
    while ((wrc = pb_cli_trace_walk(&w, &o->t, help, &v)) ==
           PB_CLI_WALK_FLAG) {
        const char *f = w.flag;
        if (strcmp(f, "--plot") == 0) {
            o->plot = v;
        } else if (strcmp(f, "--cake-pref") == 0) {
            o->cake_pref = v;
        } else if (strcmp(f, "--recent") == 0) {
            if (pb_cli_parse_u32("calibrate", f, v, 0u, 1u << 20,
                                 &o->recent) != 0)
                return PB_CLI_USAGE;
            o->have_recent = 1;
        } else if (strcmp(f, "--progress") == 0) {
            if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
                return pb_cli_usage_error("calibrate", "--progress takes on "
                                          "or off, not '%s'", v);
            o->progress = v[1] == 'n' ? 1 : -1;
        } else if (strcmp(f, "--tau1") == 0 || strcmp(f, "--tau2") == 0) {
            char *end = NULL;
            const double t = strtod(v, &end);
            if (end == v || *end != '\0' || !(t > 0.0 && t <= 1000.0))
                return pb_cli_usage_error("calibrate", "%s takes a number in "
                                          "(0, 1000], not '%s'", f, v);
            if (f[5] == '1') o->tau1 = t;
            else o->tau2 = t;
        } else if (strcmp(f, "--budget") == 0) {
            if (pb_cli_parse_u32("calibrate", f, v, 1u, UINT32_MAX,
                                 &o->budget) != 0)
                return PB_CLI_USAGE;
            o->have_budget = 1;
        } else if (strcmp(f, "--fraction") == 0) {
            uint32_t pct = 0;
            if (pb_cli_parse_u32("calibrate", f, v, 1u, 100u, &pct) != 0)
                return PB_CLI_USAGE;
            o->fraction_ppm = pct * 10000u;
        } else if (strcmp(f, "--floor") == 0) {
            if (pb_cli_parse_u32("calibrate", f, v, 1u, UINT32_MAX,
                                 &o->floor_w) != 0)
                return PB_CLI_USAGE;
            o->have_floor = 1;
        } else {
            return pb_cli_usage_error("calibrate",
                                      "unknown option '%s' (see pyramidkv "
                                      "calibrate --help)", f);
        }
    }
    return wrc;
}

/* --cake-pref: exactly n finite numbers >= 0 into pref. 0 or -1. */
static int parse_prefs(const char *text, double *pref, uint32_t n) {
    const char *at = text;
    for (uint32_t l = 0; l < n; ++l) {
        char *end = NULL;
        const double x = strtod(at, &end);
        if (end == at || !(x >= 0.0 && x <= 1e300)) return -1;
        if (*end != (l + 1u < n ? ',' : '\0')) return -1;
        pref[l] = x;
        at = end + 1;
    }
    return 0;
}

/* --plot FILE must be a file this process can write, checked before the
 * run (a quote would end gnuplot's string). 0 or PB_CLI_USAGE. */
static int check_plot_path(const char *path) {
    if (strchr(path, '\'') != NULL)
        return pb_cli_usage_error("calibrate", "--plot: '%s' holds a quote",
                                  path);
    const int existed = access(path, F_OK) == 0;
    FILE *f = fopen(path, "ab");
    if (f == NULL)
        return pb_cli_usage_error("calibrate", "--plot: %s: cannot be "
                                  "written (%s)", path, strerror(errno));
    fclose(f);
    if (!existed) remove(path); /* gnuplot creates it */
    return 0;
}

/* The rows of one schedule: its shares at equal memory, then one row per
 * head mode. A schedule the values refuse is noted in `skipped`; a
 * head-shares row whose profile lacks a layer's heads likewise. 0, or 1
 * out of memory. */
static int add_rows(const pb_cli_sched *sched, const pb_cli_sched_ctx *ctx,
                    const cal_prep *prep, uint32_t recent, cal_sched *sc,
                    size_t *n_sched, char *skipped, size_t skipped_len) {
    const uint32_t L = prep->layers, H = prep->kv_heads;
    cal_sched one;
    memset(&one, 0, sizeof one);
    one.s = *sched;
    uint32_t *shares = (uint32_t *)calloc(L, sizeof *shares);
    uint32_t *hs = (uint32_t *)calloc((size_t)L * H, sizeof *hs);
    char why[160];
    int rc = shares == NULL || hs == NULL;
    if (rc == 0 && pb_cli_sched_shares(&one.s, ctx, shares, &one.total,
                                       &one.held, &one.used, why,
                                       sizeof why) != 0) {
        const size_t used = strlen(skipped);
        snprintf(skipped + used, skipped_len - used, "%s%s", used ? "; " : "",
                 why);
        free(shares);
        free(hs);
        return 0;
    }
    int have_hs = rc == 0;
    for (uint32_t l = 0; have_hs && l < L; ++l) {
        const uint32_t held = shares[l] > recent ? shares[l] : recent + 1u;
        have_hs = pb_profile_head_shares(prep->head_prof, l, H, held,
                                         recent + 1u, 900000u,
                                         hs + (size_t)l * H, H) == PB_OK;
    }
    if (rc == 0 && !have_hs) {
        const size_t used = strlen(skipped);
        snprintf(skipped + used, skipped_len - used, "%s%s shares: a layer's "
                 "heads have no window rows", used ? "; " : "", one.s.name);
    }
    const size_t prompt_cells = (size_t)prep->prompts * L * H;
    for (int heads = PB_CAL_HEADS_UNIFORM;
         rc == 0 && heads <= PB_CAL_HEADS_SHARES; ++heads) {
        if (heads == PB_CAL_HEADS_SHARES && !have_hs) continue;
        cal_sched *e = &sc[(*n_sched)++];
        *e = one;
        e->heads = heads;
        /* Two blocks per row: the shares, and every sum (free_rows). */
        const size_t n_d = 2u * (size_t)L * H + L + 6u * (prompt_cells + 1u) +
                           prep->prompts + 1u;
        e->shares = (uint32_t *)malloc((size_t)L * (H + 1u) * sizeof *hs);
        e->mass_sum = (double *)calloc(n_d, sizeof(double));
        if (e->shares == NULL || e->mass_sum == NULL) {
            rc = 1;
            continue;
        }
        e->head_shares = e->shares + L;
        memcpy(e->shares, shares, L * sizeof *shares);
        memcpy(e->head_shares, hs, (size_t)L * H * sizeof *hs);
        e->head_sum = e->mass_sum + L;
        e->recall_sum = e->head_sum + (size_t)L * H;
        double **cell[6] = {&e->pmass, &e->precall, &e->lost, &e->peak_lost,
                            &e->peak_all, &e->seen};
        for (size_t i = 0; i < 6u; ++i)
            *cell[i] = e->recall_sum + (size_t)L * H + i * (prompt_cells + 1u);
        e->prompt_loss = e->recall_sum + (size_t)L * H +
                         6u * (prompt_cells + 1u);
        e->n_cells = prompt_cells;
    }
    free(shares);
    free(hs);
    return rc;
}

/* Each row owns two blocks: the shares and the sums (add_rows). */
static void free_rows(cal_sched *sc, size_t n_sched) {
    for (size_t s = 0; s < n_sched; ++s) {
        free(sc[s].shares);
        free(sc[s].mass_sum);
    }
}

int pb_cli_calibrate(int argc, char **argv) {
    cal_opts o;
    const int prc = parse(argc, argv, &o);
    if (prc == 1) return 0;
    if (prc != 0) return prc;
    if (o.plot != NULL && check_plot_path(o.plot) != 0) return PB_CLI_USAGE;
    char err[320];
    pb_cli_scan scan;
    if (pb_cli_scan_trace(o.t.path, &scan, err, sizeof err) != 0)
        return pb_cli_trace_error("calibrate", o.t.path, err);
    if (scan.prefill == 0u)
        return pb_cli_trace_error("calibrate", o.t.path,
                                  "no prefill record: calibrate compresses "
                                  "the recorded window rows");
    if (!o.have_recent) o.recent = scan.max_window;
    if (!o.have_budget) {
        o.budget = scan.max_prompt / 8u;
        if (o.budget <= o.recent) o.budget = o.recent + 1u;
    }
    if (o.budget <= o.recent)
        return pb_cli_usage_error("calibrate", "--budget %u does not exceed "
                                  "the recent window %u: every layer holds "
                                  "at least %u, no allocation fits",
                                  o.budget, o.recent, o.recent + 1u);
    if (!o.have_floor) o.floor_w = scan.max_window;
    if (o.progress == 0) o.progress = isatty(2) ? 1 : -1;
    pb_profile *prof = NULL;
    if (pb_cli_profile_trace(o.t.path, &scan, &prof, err, sizeof err) != 0)
        return pb_cli_trace_error("calibrate", o.t.path, err);
    cal_prep prep;
    if (pb_cli_calibrate_prep(o.t.path, &scan, o.tau1, o.tau2, &prep, err,
                              sizeof err) != 0) {
        pb_profile_destroy(prof);
        return pb_cli_trace_error("calibrate", o.t.path, err);
    }

    const uint32_t L = scan.shape.num_layers;
    const uint32_t H = scan.shape.num_kv_heads;
    cal_layer *ly = (cal_layer *)calloc(L, sizeof *ly);
    uint32_t *weights = (uint32_t *)calloc(L, sizeof *weights);
    uint32_t *cake_w = (uint32_t *)calloc(L, sizeof *cake_w);
    uint64_t *recs = (uint64_t *)calloc((size_t)L * H, sizeof *recs);
    cal_sched sc[MAX_ALLOC];
    memset(sc, 0, sizeof sc);
    pb_cli_sched all[MAX_SCHED];
    const size_t n_all = pb_cli_sched_all(all, MAX_SCHED);
    size_t n_sched = 0;
    int rc = (ly == NULL || weights == NULL || cake_w == NULL ||
              recs == NULL) ? 1 : 0;
    if (rc != 0) snprintf(err, sizeof err, "out of memory");
    for (uint32_t l = 0; rc == 0 && l < L; ++l) {
        (void)pb_profile_layer_rows(prof, l, &ly[l].rows);
        if (ly[l].rows == 0u) continue;
        (void)pb_profile_entropy(prof, l, &ly[l].bits, &ly[l].support);
        (void)pb_profile_mass_k(prof, l, 500000u, &ly[l].k50);
        (void)pb_profile_mass_k(prof, l, 900000u, &ly[l].k90);
        (void)pb_profile_mass_k(prof, l, 990000u, &ly[l].k99);
    }
    uint32_t fit = 1u;
    if (rc == 0) {
        pb_status st = pb_profile_weights(prof, o.fraction_ppm, o.floor_w,
                                          weights, L);
        if (st == PB_OK) st = pb_profile_fit_ratio(weights, L, 64u, &fit, NULL);
        if (st != PB_OK) {
            snprintf(err, sizeof err, "profile schedule: %s",
                     pb_status_str(st));
            rc = 1;
        }
    }
    pb_profile_destroy(prof);
    /* CAKE's weights from the preference; all zero (no prefix attention)
     * leaves cake out. */
    if (rc == 0 && o.cake_pref != NULL &&
        parse_prefs(o.cake_pref, prep.cake_pref, L) != 0) {
        pb_cli_calibrate_prep_free(&prep);
        free(ly);
        free(weights);
        free(cake_w);
        free(recs);
        return pb_cli_usage_error("calibrate", "--cake-pref: '%s' is not %u "
                                  "numbers >= 0 separated by commas",
                                  o.cake_pref, L);
    }
    const int have_cake =
        rc == 0 && pb_cake_weights(prep.cake_pref, L, cake_w, L) == PB_OK;
    /* Every schedule under every head mode. A schedule that refuses these
     * values (kvfactory with a budget not above the window) is left out,
     * with a note. */
    const pb_cli_sched_ctx ctx = {o.budget, L, o.recent, scan.max_prompt,
                                  weights, o.recent + 1u, o.recent + 1u,
                                  have_cake ? cake_w : NULL};
    char skipped[512] = "";
    for (size_t a = 0; rc == 0 && a < n_all; ++a)
        if (add_rows(&all[a], &ctx, &prep, o.recent, sc, &n_sched, skipped,
                     sizeof skipped) != 0) {
            snprintf(err, sizeof err, "out of memory");
            rc = 1;
        }
    const cal_measure_opts mo = {o.recent, 7u, o.progress > 0};
    if (rc == 0 && pb_cli_calibrate_measure(o.t.path, &scan, &prep, &mo, sc,
                                            n_sched, recs, err,
                                            sizeof err) != 0)
        rc = 2;
    if (rc == 0) {
        pb_cli_calibrate_rank(sc, n_sched, recs, &prep, scan.future > 0u);
        for (uint32_t l = 0; l < L; ++l)
            for (uint32_t h = 0; h < H; ++h)
                ly[l].records += recs[(size_t)l * H + h];
        for (uint32_t l = 0; l < L; ++l) {
            ly[l].cake_pref = prep.cake_pref[l];
            ly[l].cake_from = o.cake_pref != NULL     ? "option"
                              : prep.pref_from_texts[l] ? "preference"
                                                        : "prompts";
        }
        rc = pb_cli_calibrate_report(&o, &scan, ly, weights, fit, sc, n_sched,
                                     skipped);
    } else if (rc == 2) {
        (void)pb_cli_trace_error("calibrate", o.t.path, err);
    } else {
        fprintf(stderr, "pyramidkv calibrate: %s\n", err);
    }
    free_rows(sc, n_sched);
    pb_cli_calibrate_prep_free(&prep);
    free(ly);
    free(weights);
    free(cake_w);
    free(recs);
    return rc;
}
