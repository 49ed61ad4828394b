/*
 * eval_report.c - model_eval's output: the table (memory, needle accuracy
 * under each protocol with the paired difference from uniform SnapKV at
 * the same budget, NLL, retained mass per layer), the --detail breakdown
 * (accuracy by needle depth, and per layer the share of KV heads that
 * still held the answer's bytes when the answer began), and the TSV that
 * bench/model/plot_quality.sh draws.
 */
#include "eval.h"
#include "eval_tasks.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const PROTO_NAME[EVAL_N_PROTOCOLS] = {"query-aware",
                                                         "query-agnostic"};

/* The uniform SnapKV row of the same budget (the paired reference), or
 * NULL. */
static const eval_row *reference(const eval_row *rows, size_t n,
                                 const eval_row *k)
{
    for (size_t c = 0; c < n; c++)
        if (rows[c].method && rows[c].supported && rows[c].den == k->den &&
            !strcmp(rows[c].method->key, "uniform"))
            return &rows[c];
    return NULL;
}

/* Questions asked over all prompts: the accuracy's denominator. */
static uint32_t questions(const eval_prompt_set *ps)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < ps->n; i++) n += ps->p[i].n_q;
    return n;
}

/* Paired difference of row a and b on the same prompts, in points, and
 * its standard error (sd of the per-prompt difference of the share of
 * questions answered / sqrt(n)). */
static void paired(const eval_result *a, const eval_result *b,
                   const eval_prompt_set *ps, double *diff, double *se)
{
    const uint32_t n = ps->n;
    double s = 0.0, s2 = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        const double d = ((double)a->ok[i] - (double)b->ok[i]) / ps->p[i].n_q;
        s += d;
        s2 += d * d;
    }
    const double mean = n ? s / n : 0.0;
    const double var = n > 1 ? (s2 - n * mean * mean) / (n - 1) : 0.0;
    *diff = 100.0 * mean;
    *se = n ? 100.0 * sqrt(var > 0.0 ? var : 0.0) / sqrt((double)n) : 0.0;
}

/* Paired NLL difference of row a and b over the held-out windows (each
 * window's NLL per byte), in nats per byte, and its standard error. */
static void paired_nll(const eval_row *a, const eval_row *b, uint32_t nw,
                       double *diff, double *se)
{
    const double per = nw ? (double)a->nll_n / nw : 1.0;
    double s = 0.0, s2 = 0.0;
    for (uint32_t i = 0; i < nw; i++) {
        const double d = (a->nll_w[i] - b->nll_w[i]) / per;
        s += d;
        s2 += d * d;
    }
    const double mean = nw ? s / nw : 0.0;
    const double var = nw > 1 ? (s2 - nw * mean * mean) / (nw - 1) : 0.0;
    *diff = mean;
    *se = nw ? sqrt(var > 0.0 ? var : 0.0) / sqrt((double)nw) : 0.0;
}

static void label(const eval_row *k, char *b, size_t n)
{
    if (k->method) snprintf(b, n, "1/%u=%u", k->den, k->budget);
    else snprintf(b, n, "full");
}

static void detail(const eval_opts *o, const pkm_model *m, const eval_row *rows,
                   size_t n_rows, const eval_prompt_set *ps)
{
    const pkm_config *mc = &m->c;
    printf("\ndetail: needle accuracy by depth of the needle (0, 1/4, 1/2, "
           "3/4, 1 of the haystack; built-in prompts) and, per layer 0..%u, "
           "the share of KV heads still holding every byte of the answer in "
           "the context when the answer began\n", mc->n_layers - 1);
    for (int pr = 0; pr < EVAL_N_PROTOCOLS; pr++) {
        if (!o->protocol[pr]) continue;
        printf("%s:\n", PROTO_NAME[pr]);
        for (size_t c = 0; c < n_rows; c++) {
            const eval_row *k = &rows[c];
            const eval_result *r = &k->res[pr];
            if (!k->supported) continue;
            char b[16];
            label(k, b, sizeof b);
            printf("  %-7s %-32s", b, k->method ? k->method->name : "full cache");
            uint32_t ok[EVAL_N_DEPTHS] = {0}, n[EVAL_N_DEPTHS] = {0};
            for (uint32_t i = 0; i < ps->n; i++) {
                const int d = ps->p[i].depth;
                if (d < 0) continue;
                n[d]++;
                ok[d] += r->ok[i] / ps->p[i].n_q;
            }
            for (int d = 0; d < EVAL_N_DEPTHS; d++)
                if (n[d]) printf(" %5.1f", 100.0 * ok[d] / n[d]);
            /* no prompt's answer occurs in its context as one string
             * (multivalue, vartrack): nothing to count */
            if (!r->held_n) {
                printf("  held: n/a (the answer is not one string of the "
                       "context)\n");
                continue;
            }
            printf("  held:");
            for (uint32_t l = 0; l < mc->n_layers; l++)
                printf(" %.2f", (double)r->held[l] /
                                    ((double)r->held_n * mc->n_kv_heads));
            printf("\n");
        }
    }
}

/* The rows tab-separated, one header line (docs/quality.md, "The TSV"):
 * a value not measured, and a paired difference of the uniform row with
 * itself or of the full cache, is NaN. */
static int write_tsv(const eval_opts *o, const pkm_model *m,
                     const eval_row *rows, size_t n_rows,
                     const eval_prompt_set *ps, uint32_t n_q, double full_nll)
{
    const pkm_config *mc = &m->c;
    FILE *f = fopen(o->tsv, "w");
    if (!f) return -1;
    const char *task = o->prompts ? "prompts" : eval_task_names[o->task];
    fprintf(f, "method\tkey\ttask\tden\tbudget\tpositions\tkv_bytes\t"
               "needle_aware\tdiff_aware\tse_aware\t"
               "needle_agnostic\tdiff_agnostic\tse_agnostic\t"
               "nll\tdnll\tdnll_uniform\tse_dnll_uniform");
    for (uint32_t l = 0; l < mc->n_layers; l++) fprintf(f, "\tmass%u", l);
    fprintf(f, "\n");
    for (size_t c = 0; c < n_rows; c++) {
        const eval_row *k = &rows[c];
        if (!k->supported) continue;
        const eval_row *ref = k->method ? reference(rows, n_rows, k) : NULL;
        if (ref == k) ref = NULL;
        fprintf(f, "%s\t%s\t%s\t%u\t%u\t%llu\t%llu",
                k->method ? k->method->name : "full cache",
                k->method ? k->method->key : "full", task, k->den, k->budget,
                (unsigned long long)k->kc.positions,
                (unsigned long long)(k->kc.positions * 2u * mc->head_dim * 4u));
        for (int pr = 0; pr < EVAL_N_PROTOCOLS; pr++) {
            if (o->protocol[pr] && n_q)
                fprintf(f, "\t%.4f", 100.0 * k->res[pr].n_ok / n_q);
            else
                fprintf(f, "\tNaN");
            if (o->protocol[pr] && n_q && ref) {
                double d = 0.0, se = 0.0;
                paired(&k->res[pr], &ref->res[pr], ps, &d, &se);
                fprintf(f, "\t%.4f\t%.4f", d, se);
            } else {
                fprintf(f, "\tNaN\tNaN");
            }
        }
        if (k->nll_n) {
            const double nll = k->nll / (double)k->nll_n;
            fprintf(f, "\t%.6f\t%.6f", nll, nll - full_nll);
        } else {
            fprintf(f, "\tNaN\tNaN");
        }
        if (k->nll_n && ref && ref->nll_n) {
            double d = 0.0, se = 0.0;
            paired_nll(k, ref, o->nll_samples, &d, &se);
            fprintf(f, "\t%.6f\t%.6f", d, se);
        } else {
            fprintf(f, "\tNaN\tNaN");
        }
        for (uint32_t l = 0; l < mc->n_layers; l++)
            if (k->mass_n) fprintf(f, "\t%.4f", k->mass[l] / (double)k->mass_n);
            else fprintf(f, "\tNaN");
        fprintf(f, "\n");
    }
    return fclose(f) == 0 ? 0 : -1;
}

int eval_report(const eval_opts *o, const pkm_model *m, const eval_row *rows,
                size_t n_rows, const eval_prompt_set *ps)
{
    const pkm_config *mc = &m->c;
    const int nll = o->nll_samples > 0;
    const uint32_t n_q = questions(ps);
    const double full_nll =
        rows[0].nll_n ? rows[0].nll / (double)rows[0].nll_n : 0.0;
    printf("\n%-7s %-32s %9s %10s %7s", "budget", "method", "positions",
           "K/V bytes", "peak");
    for (int pr = 0; pr < EVAL_N_PROTOCOLS; pr++)
        if (o->protocol[pr])
            printf(" %8s %13s", pr == EVAL_AWARE ? "aware" : "agnostic",
                   "vs uniform");
    if (nll)
        printf(" %8s %8s %17s  retained attention mass, layer 0..%u", "NLL",
               "dNLL", "NLL vs uniform", mc->n_layers - 1);
    printf("\n");
    for (size_t c = 0; c < n_rows; c++) {
        const eval_row *k = &rows[c];
        char b[16];
        label(k, b, sizeof b);
        const char *name = k->method ? k->method->name : "full cache";
        if (!k->supported) {
            printf("%-7s %-32s not in this library (%s)\n", b, name, k->why);
            continue;
        }
        printf("%-7s %-32s %9llu %10llu %7llu", b, name,
               (unsigned long long)k->kc.positions,
               (unsigned long long)(k->kc.positions * 2u * mc->head_dim * 4u),
               (unsigned long long)k->kc.capacity);
        const eval_row *ref = k->method ? reference(rows, n_rows, k) : NULL;
        for (int pr = 0; pr < EVAL_N_PROTOCOLS; pr++) {
            if (!o->protocol[pr]) continue;
            printf(" %7.1f%%", n_q ? 100.0 * k->res[pr].n_ok / n_q : 0.0);
            if (ref && ref != k) {
                double d = 0.0, se = 0.0;
                paired(&k->res[pr], &ref->res[pr], ps, &d, &se);
                char t[32];
                snprintf(t, sizeof t, "%+.1f +- %.1f", d, se);
                printf(" %13s", t);
            } else {
                printf(" %13s", "");
            }
        }
        if (nll) {
            const double v = k->nll_n ? k->nll / (double)k->nll_n : 0.0;
            printf(" %8.4f %+8.4f", v, v - full_nll);
            if (ref && ref != k) {
                double d = 0.0, se = 0.0;
                paired_nll(k, ref, o->nll_samples, &d, &se);
                char t[32];
                snprintf(t, sizeof t, "%+.4f+-%.4f", d, se);
                printf(" %17s ", t);
            } else {
                printf(" %17s ", "");
            }
            for (uint32_t l = 0; l < mc->n_layers; l++)
                printf(" %.3f", k->mass_n ? k->mass[l] / (double)k->mass_n : 0.0);
        }
        printf("\n");
    }
    if (o->detail) detail(o, m, rows, n_rows, ps);
    if (o->tsv && write_tsv(o, m, rows, n_rows, ps, n_q, full_nll) != 0) {
        fprintf(stderr, "model_eval: cannot write %s\n", o->tsv);
        return -1;
    }
    return 0;
}
