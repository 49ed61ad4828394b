/*
 * eval_run.c - model_eval's measurements: one prompt under the query-aware
 * or the query-agnostic protocol for every row, the held-out NLL with the
 * retained attention mass, and the calibration of the profile schedule
 * (see eval.h).
 */
#include "eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkm_io.h"
#include "pkm_prompt.h"

static uint32_t argmax(const float *x, uint32_t n)
{
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static double nll_of(const float *lg, uint32_t n, uint32_t target)
{
    float mx = lg[0];
    for (uint32_t i = 1; i < n; i++)
        if (lg[i] > mx) mx = lg[i];
    double z = 0.0;
    for (uint32_t i = 0; i < n; i++) z += exp((double)(lg[i] - mx));
    return log(z) - (double)(lg[target] - mx);
}

/* Whether the slot holds every position of [b, b + n). */
static int holds(const pkm_slot *s, uint32_t b, uint32_t n)
{
    uint32_t found = 0;
    for (uint32_t i = 0; i < s->n; i++)
        found += s->pos[i] >= b && s->pos[i] < b + n;
    return found == n;
}

/* Prints n bytes with \n \t \\ and other control bytes escaped. */
static void put_escaped(const unsigned char *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (b[i] == '\n') fputs("\\n", stdout);
        else if (b[i] == '\t') fputs("\\t", stdout);
        else if (b[i] == '\\') fputs("\\\\", stdout);
        else if (b[i] < 32 || b[i] == 127) printf("\\x%02x", b[i]);
        else putchar(b[i]);
    }
}

/* Feeds token tok at position pos to row k's cache as a decode step:
 * w->logits gets the next byte's logits. Returns 0 or -1. */
static int feed(eval_work *w, eval_row *k, uint32_t tok, uint32_t pos)
{
    if (pkm_model_step(w->m, k->kc.slots, tok, pos, w->step_attn, w->stride,
                       w->logits) != 0 ||
        pkm_cache_after_step(&k->kc, w->step_attn, w->stride, pos) != 0)
        return -1;
    return 0;
}

/* Per layer, the row's KV heads that hold every byte of the answer's
 * occurrence in the context. */
static void count_held(const pkm_config *mc, const eval_row *k,
                       const eval_prompt *p, eval_result *r)
{
    for (uint32_t l = 0; l < mc->n_layers; l++)
        for (uint32_t kv = 0; kv < mc->n_kv_heads; kv++)
            r->held[l] += (uint64_t)holds(
                &k->kc.slots[(size_t)l * mc->n_kv_heads + kv], p->key_pos,
                p->ans_len[0]);
    r->held_n++;
}

int eval_prompt_run(eval_work *w, eval_row *rows, size_t n_rows,
                    const eval_prompt *p, uint32_t i, int protocol)
{
    const pkm_config *mc = &w->m->c;
    const uint32_t plen = protocol == EVAL_AWARE ? p->len : p->ctx_len;
    const uint32_t nr = w->n_rows_max < plen ? w->n_rows_max : plen;
    if (pkm_prefill_full(w->m, w->full, p->text, plen, w->rows, nr, w->logits0,
                         w->step_attn) != 0)
        return -1;
    for (size_t c = 0; c < n_rows; c++) {
        eval_row *k = &rows[c];
        eval_result *r = &k->res[protocol];
        if (!k->supported) continue;
        if (pkm_cache_reset(&k->kc) != 0 ||
            pkm_cache_prefill(&k->kc, w->full, w->rows, nr, plen) != 0)
            return -1;
        const float *lg = w->logits0;
        uint32_t x = plen, pos = plen, right = 0;
        for (uint32_t q = 0; q < p->n_q; q++) {
            /* the question's bytes not compressed with the context: decode
             * steps on the kept cache (after the previous answer) */
            for (; x < p->q_end[q]; x++, pos++) {
                if (feed(w, k, p->text[x], pos) != 0) return -1;
                lg = w->logits;
            }
            if (q == 0 && p->key_pos != UINT32_MAX) count_held(mc, k, p, r);
            uint32_t tok = argmax(lg, mc->vocab);
            unsigned char got[EVAL_MAX_ANSWER];
            got[0] = (unsigned char)tok;
            int ok = tok == p->answer[q][0];
            for (uint32_t j = 1; j < p->ans_len[q]; j++, pos++) {
                if (feed(w, k, tok, pos) != 0) return -1;
                tok = argmax(w->logits, mc->vocab);
                got[j] = (unsigned char)tok;
                ok = ok && tok == p->answer[q][j];
            }
            /* the answer as decoded stays in the cache for the next one */
            if (q + 1 < p->n_q && feed(w, k, tok, pos++) != 0) return -1;
            right += (uint32_t)ok;
            if (w->show_answers && !k->method) {
                printf("%s prompt %u question %u: expected \"",
                       protocol == EVAL_AWARE ? "aware" : "agnostic", i, q);
                put_escaped(p->answer[q], p->ans_len[q]);
                printf("\", full cache decoded \"");
                put_escaped(got, p->ans_len[q]);
                printf("\"\n");
            }
        }
        r->ok[i] = (uint8_t)right;
        r->n_ok += right;
    }
    return 0;
}

int eval_nll_run(eval_work *w, eval_row *rows, size_t n_rows,
                 const unsigned char *tok, uint32_t P, uint32_t D,
                 uint32_t window, double *ent, uint64_t *ent_n)
{
    const pkm_config *mc = &w->m->c;
    const size_t LH = (size_t)mc->n_layers * mc->n_heads;
    const uint32_t g = mc->n_heads / mc->n_kv_heads;
    const uint32_t nr = w->n_rows_max < P ? w->n_rows_max : P;
    if (pkm_prefill_full(w->m, w->full, tok, P, w->rows, nr, w->logits0,
                         w->step_attn) != 0)
        return -1;
    for (size_t c = 0; c < n_rows; c++) {
        eval_row *k = &rows[c];
        if (!k->supported) continue;
        if (pkm_cache_reset(&k->kc) != 0 ||
            pkm_cache_prefill(&k->kc, w->full, w->rows, nr, P) != 0)
            return -1;
        double nll = nll_of(w->logits0, mc->vocab, tok[P]);
        for (uint32_t t = P; t + 1 < P + D; t++) {
            const size_t step = t - P;
            float *attn = c == 0 ? w->full_attn + step * LH * w->stride
                                 : w->step_attn;
            if (pkm_model_step(w->m, k->kc.slots, tok[t], t, attn, w->stride,
                               w->logits) != 0)
                return -1;
            nll += nll_of(w->logits, mc->vocab, tok[t + 1]);
            const float *fa = w->full_attn + step * LH * w->stride;
            for (uint32_t l = 0; l < mc->n_layers; l++) {
                for (uint32_t h = 0; h < mc->n_heads; h++) {
                    const pkm_slot *s =
                        &k->kc.slots[(size_t)l * mc->n_kv_heads + h / g];
                    const float *row = fa + ((size_t)l * mc->n_heads + h) * w->stride;
                    double m = 0.0;
                    for (uint32_t i = 0; i < s->n; i++) m += row[s->pos[i]];
                    k->mass[l] += m;
                    if (c == 0 && ent) {
                        double e = 0.0;
                        for (uint32_t i = 0; i <= t; i++)
                            if (row[i] > 0.0f)
                                e -= (double)row[i] * log((double)row[i]);
                        ent[l] += e;
                        ent_n[l]++;
                    }
                }
            }
            k->mass_n += mc->n_heads;
            if (pkm_cache_after_step(&k->kc, attn, w->stride, t) != 0)
                return -1;
        }
        k->nll += nll;
        k->nll_n += D;
        if (k->nll_w) k->nll_w[window] = nll;
    }
    return 0;
}

int eval_calibrate(pkm_model *m, const eval_opts *o, const unsigned char *text,
                   size_t text_len, uint32_t len, uint32_t max_len, uint32_t n,
                   double *bits, uint32_t *ratio, double *cake_pref,
                   pb_profile **head_prof)
{
    const pkm_config *mc = &m->c;
    const size_t LH = (size_t)mc->n_layers * mc->n_heads;
    const uint32_t g = mc->n_heads / mc->n_kv_heads;
    const uint32_t W = o->obs < len ? o->obs : len;
    const size_t n_slots = (size_t)mc->n_layers * mc->n_kv_heads;
    pb_profile_params pp = PB_PROFILE_PARAMS_DEFAULT;
    pp.num_layers = mc->n_layers;
    pp.max_len = max_len;
    pb_profile *prof = NULL, *hprof = NULL;
    pb_profile_params hp = pp;
    hp.num_layers = mc->n_layers * mc->n_kv_heads;
    pkm_slot *full = pkm_slots_new(n_slots, max_len, mc->head_dim);
    float *rows = malloc(LH * W * len * sizeof(float));
    float *red = malloc((size_t)W * len * sizeof(float));
    float *step = malloc(LH * m->rope_len * sizeof(float));
    int rc = -1;
    if (!full || !rows || !red || !step ||
        pb_profile_create(&pp, NULL, &prof) != PB_OK ||
        pb_profile_create(&hp, NULL, &hprof) != PB_OK)
        goto out;
    for (uint32_t l = 0; l < mc->n_layers; l++) cake_pref[l] = 0.0;
    uint64_t rng = pkm_calibration_rng(o->seed);
    for (uint32_t i = 0; i < n; i++) {
        const size_t off = pkm_calibration_offset(text_len, len, &rng);
        if (pkm_prefill_full(m, full, text + off, len, rows, W, NULL, step) != 0)
            goto out;
        for (uint32_t l = 0; l < mc->n_layers; l++) {
            /* CAKE's preference over the layer's query heads (kvpress's
             * temperatures 1.6 and 0.6), averaged over the prompts */
            const size_t block = (size_t)W * len;
            double pref = 0.0;
            if (pb_cake_layer_preference(rows + (size_t)l * mc->n_heads * block,
                                         mc->n_heads, block, W, len, 1.6, 0.6,
                                         NULL, NULL, &pref) != PB_OK)
                goto out;
            cake_pref[l] += pref / n;
            for (uint32_t kv = 0; kv < mc->n_kv_heads; kv++) {
                if (pb_kvcache_head_reduce(rows + ((size_t)l * mc->n_heads + (size_t)kv * g) * block,
                                           g, block, block, PB_HEAD_REDUCE_MEAN,
                                           red) != PB_OK)
                    goto out;
                for (uint32_t j = 0; j < W; j++) {
                    const uint32_t q = len - W + j;
                    if (pb_profile_add_row(prof, l, red + (size_t)j * len,
                                           (size_t)q + 1) != PB_OK ||
                        pb_profile_add_row(hprof, l * mc->n_kv_heads + kv,
                                           red + (size_t)j * len,
                                           (size_t)q + 1) != PB_OK)
                        goto out;
                }
            }
        }
    }
    if (pb_profile_weights(prof, 900000u, o->obs + 1, pkm_profile_weights,
                           PKM_MAX_LAYERS) != PB_OK ||
        pb_profile_fit_ratio(pkm_profile_weights, mc->n_layers, 8, ratio,
                             NULL) != PB_OK)
        goto out;
    for (uint32_t l = 0; l < mc->n_layers; l++) {
        double support = 0.0;
        if (pb_profile_entropy(prof, l, &bits[l], &support) != PB_OK) goto out;
    }
    pkm_profile_ready = 1;
    *head_prof = hprof;
    hprof = NULL;
    rc = 0;
out:
    pb_profile_destroy(prof);
    pb_profile_destroy(hprof);
    pkm_slots_free(full, n_slots);
    free(rows);
    free(red);
    free(step);
    return rc;
}
