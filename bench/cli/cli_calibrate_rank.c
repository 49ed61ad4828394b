/*
 * cli_calibrate_rank.c - the figures `pyramidkv calibrate` prints for each
 * allocation, from the sums of the measuring pass, and the order of its
 * rows (docs/spec.md §18.5): the window figures (recall, mass, the worst
 * head), the future figures (peak loss, worst-head loss, mean loss) with
 * their standard errors over the prompts, and which rows lie within noise
 * of the top one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_calibrate.h"

const char *pb_cli_calibrate_heads_name(int heads) {
    return heads == PB_CAL_HEADS_ADAPTIVE ? "adaptive"
           : heads == PB_CAL_HEADS_SHARES ? "shares"
                                          : "uniform";
}

/* Recall, mass and the worst head: each (layer, KV head) with a record
 * weighs the same; the worst is the first lowest in (layer, head) order. */
static void window_figures(cal_sched *s, const uint64_t *recs,
                           const cal_prep *p) {
    const uint32_t L = p->layers, H = p->kv_heads;
    for (uint32_t k = 0; k < p->prompts; ++k)
        for (uint32_t l = 0; l < L; ++l)
            for (uint32_t h = 0; h < H; ++h) {
                const size_t c = (size_t)l * H + h;
                const size_t i = (size_t)k * L * H + c;
                s->mass_sum[l] += s->pmass[i];
                s->head_sum[c] += s->pmass[i];
                s->recall_sum[c] += s->precall[i];
            }
    double mass = 0.0, recall = 0.0;
    uint32_t n = 0;
    s->worst = 2.0;
    for (uint32_t l = 0; l < L; ++l)
        for (uint32_t h = 0; h < H; ++h) {
            const size_t i = (size_t)l * H + h;
            if (recs[i] == 0u) continue;
            const double r = s->recall_sum[i] / (double)recs[i];
            mass += s->head_sum[i] / (double)recs[i];
            recall += r;
            n += 1u;
            if (r < s->worst) {
                s->worst = r;
                s->worst_layer = l;
                s->worst_head = h;
            }
        }
    s->mass = n ? mass / n : 0.0;
    s->recall = n ? recall / n : 0.0;
    if (n == 0u) s->worst = 0.0;
}

/* The mean of the x_k >= 0 of `n` prompts (those below 0 have no future
 * rows) into *mean, its standard error into *se. */
static void mean_se(const double *x, uint32_t n, double *mean, double *se) {
    double sum = 0.0, sq = 0.0;
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; ++k) {
        if (x[k] < 0.0) continue;
        sum += x[k];
        sq += x[k] * x[k];
        m += 1u;
    }
    *mean = m ? sum / m : 0.0;
    *se = m > 1u ? sqrt(fmax(0.0, (sq - sum * sum / m) / (m - 1u)) / m) : 0.0;
}

/* The future figures. Per prompt: the peak loss, the evicted share of the
 * peak attention pooled over its (layer, KV head)s (into prompt_loss, -1
 * without future rows), and the worst head's loss, the largest lost /
 * seen; each a mean over the prompts with its standard error; and
 * loss_mean, the mean of lost / seen over every (prompt, layer, KV head)
 * with future rows. */
static void future_figures(cal_sched *s, const cal_prep *p, double *worst) {
    const size_t cells = (size_t)p->layers * p->kv_heads;
    double all = 0.0;
    uint64_t n_all = 0;
    for (uint32_t k = 0; k < p->prompts; ++k) {
        double w = -1.0, lost = 0.0, tot = 0.0;
        for (size_t c = 0; c < cells; ++c) {
            const size_t i = (size_t)k * cells + c;
            lost += s->peak_lost[i];
            tot += s->peak_all[i];
            if (s->seen[i] <= 0.0) continue;
            const double x = s->lost[i] / s->seen[i];
            if (x > w) w = x;
            all += x;
            n_all += 1u;
        }
        worst[k] = w;
        s->prompt_loss[k] = w < 0.0 ? -1.0 : tot > 0.0 ? lost / tot : 0.0;
    }
    mean_se(s->prompt_loss, p->prompts, &s->peak, &s->peak_se);
    mean_se(worst, p->prompts, &s->loss, &s->loss_se);
    s->loss_mean = n_all ? all / (double)n_all : 0.0;
}

static int g_future; /* cmp_sched's key: rank by the future loss */

/* Best first: the lower peak loss (when the trace has future rows),
 * the higher recall, the higher mass, then uniform, adaptive, shares,
 * then the name. */
static int cmp_sched(const void *a, const void *b) {
    const cal_sched *x = (const cal_sched *)a, *y = (const cal_sched *)b;
    if (g_future && x->peak != y->peak) return x->peak < y->peak ? -1 : 1;
    if (x->recall != y->recall) return x->recall > y->recall ? -1 : 1;
    if (x->mass != y->mass) return x->mass > y->mass ? -1 : 1;
    if (x->heads != y->heads) return x->heads < y->heads ? -1 : 1;
    return strcmp(x->s.name, y->s.name);
}

/* Each row's paired standard error against the top row: of the mean over
 * the prompts of its per-prompt peak loss minus the top row's; within
 * noise when its peak loss exceeds the top's by at most twice that. */
static void noise(cal_sched *sc, size_t n_sched, const cal_prep *p) {
    for (size_t r = 0; r < n_sched; ++r) {
        double sum = 0.0, sq = 0.0;
        uint32_t n = 0;
        for (uint32_t k = 0; k < p->prompts; ++k) {
            if (sc[0].prompt_loss[k] < 0.0) continue;
            const double d = sc[r].prompt_loss[k] - sc[0].prompt_loss[k];
            sum += d;
            sq += d * d;
            n += 1u;
        }
        sc[r].gap_se =
            n > 1u ? sqrt(fmax(0.0, (sq - sum * sum / n) / (n - 1u)) / n) : 0.0;
        sc[r].tied = sc[r].peak - sc[0].peak <= 2.0 * sc[r].gap_se;
    }
}

void pb_cli_calibrate_rank(cal_sched *sc, size_t n_sched, const uint64_t *recs,
                           const cal_prep *prep, int have_future) {
    double *worst = (double *)calloc(prep->prompts + 1u, sizeof *worst);
    for (size_t s = 0; s < n_sched; ++s) {
        window_figures(&sc[s], recs, prep);
        if (worst != NULL) future_figures(&sc[s], prep, worst);
    }
    free(worst);
    g_future = have_future;
    qsort(sc, n_sched, sizeof sc[0], cmp_sched);
    if (have_future) noise(sc, n_sched, prep);
}
