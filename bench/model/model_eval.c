/*
 * model_eval.c - the quality of libpyramidkv's cache management on a real
 * (small, trained) transformer at equal held positions. For the chosen
 * methods of pkm_methods.c at the chosen average budgets (fractions of the
 * context), plus the full cache, it prints
 *   - answer accuracy (greedy decode, exact match) on the prompts of a
 *     task (--task, eval_tasks.c) cut from the held-out text or on the
 *     user's prompts (--prompts), under
 *     the query-aware protocol (the question is in the compressed prompt)
 *     and the query-agnostic one (the context is compressed before the
 *     question arrives), each with its paired difference from uniform
 *     SnapKV on the same prompts and that difference's standard error;
 *   - held-out NLL and retained attention mass per layer (--nll-samples);
 * with the positions held and K/V bytes of each row. Without options it
 * runs the quick comparison of the README; --full runs the table of
 * docs/quality.md; --quick is the ctest smoke run, which also checks that a
 * library configuration evicting nothing reproduces the full cache's NLL
 * bit for bit. Usage errors exit 2, any run-time failure 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eval.h"
#include "eval_tasks.h"
#include "pkm_prompt.h"
#include "pkm_io.h"

int main(int argc, char **argv)
{
    eval_opts o = {0};
    int list = 0;
    const int parsed = eval_parse(argc, argv, &o, &list);
    if (parsed != 0) return parsed > 0 ? 0 : 2;
    if (list) {
        for (size_t i = 0; i < pkm_method_count; i++)
            printf("%-20s %s\n", pkm_methods[i].key, pkm_methods[i].name);
        return 0;
    }
    eval_presets(&o);
    const pkm_method *sel[64];
    size_t n_sel = 0;
    if (eval_select_methods(o.methods, sel, &n_sel) != 0) return 2;
    const clock_t t0 = clock();
    static pkm_model m;
    char err[256];
    if (pkm_model_load(&m, o.model, err, sizeof err) != 0) {
        fprintf(stderr, "model_eval: %s\n", err);
        return 1;
    }
    const pkm_config *mc = &m.c;
    eval_prompt_set ps = {0};
    uint32_t max_len = 0;
    if (o.prompts) {
        if (eval_prompts_read(&ps, o.prompts, m.rope_len - 8, err, sizeof err)) {
            fprintf(stderr, "model_eval: %s\n", err);
            return 2;
        }
        for (uint32_t i = 0; i < ps.n; i++)
            if (eval_prompt_total(&ps.p[i]) + 8 > max_len)
                max_len = eval_prompt_total(&ps.p[i]) + 8;
    }
    /* the context the budgets and the positions column are sized from:
     * --ctx, else the longest prompt of a file (at least 96), else the
     * model's */
    for (uint32_t i = 0; !o.ctx && i < ps.n; i++)
        if (ps.p[i].len > o.ctx) o.ctx = ps.p[i].len;
    if (o.prompts && o.ctx && o.ctx < 96) o.ctx = 96;
    if (!o.ctx) o.ctx = mc->max_ctx;
    if (!o.nll_prompt) o.nll_prompt = o.ctx / 2;
    if (!o.nll_decode) o.nll_decode = o.ctx - o.nll_prompt;
    if (o.ctx < 96 || o.ctx + 8 > m.rope_len || mc->n_layers > PKM_MAX_LAYERS ||
        o.cadence == 0 || o.obs == 0) {
        fprintf(stderr, "model_eval: bad --ctx/--cadence/--obs (ctx 96 .. %u)\n",
                m.rope_len - 8);
        return 2;
    }
    if (!o.prompts && o.ctx < eval_task_min_ctx(o.task)) {
        fprintf(stderr, "model_eval: task %s needs --ctx of at least %u\n",
                eval_task_names[o.task], eval_task_min_ctx(o.task));
        return 2;
    }
    for (uint32_t b = 0; b < o.n_budgets; b++)
        if (o.ctx / o.budgets[b] < 1) {
            fprintf(stderr, "model_eval: budget 1/%u of %u is empty\n",
                    o.budgets[b], o.ctx);
            return 2;
        }
    size_t text_len = 0;
    unsigned char *text = pkm_read_file(o.text, &text_len);
    if (!text || text_len < 4u * o.ctx) {
        fprintf(stderr, "model_eval: cannot read held-out text %s\n", o.text);
        return 1;
    }
    /* the pass-key prompt (its 5 digits and '.' fit the context): the
     * calibration prompts are as long */
    const uint32_t plen = o.ctx - 6;
    if (max_len < o.ctx + 8) max_len = o.ctx + 8;
    /* the prompts' draws, then the NLL windows' (for the pass key as in
     * every earlier version of this program: --full draws the same
     * windows) */
    uint64_t rng = eval_task_stream(o.task, o.seed);
    if (!o.prompts && eval_task_prompts(&ps, o.task, text, text_len, o.ctx,
                                        o.needles, o.seed, &rng, err,
                                        sizeof err) != 0) {
        fprintf(stderr, "model_eval: %s\n", err);
        free(text);
        return 1;
    }
    int multi_q = 0; /* several questions of one compressed cache */
    for (uint32_t i = 0; i < ps.n; i++) multi_q |= ps.p[i].n_q > 1;
    if (multi_q && !o.protocol[EVAL_AGNOSTIC]) {
        fprintf(stderr, "model_eval: --protocol aware does not apply to "
                "several questions of one compressed cache\n");
        eval_prompts_free(&ps);
        free(text);
        return 2;
    }
    o.protocol[EVAL_AWARE] &= !multi_q;
    if (o.write_prompts) {
        char what[128];
        snprintf(what, sizeof what, "model_eval --task %s --seed %llu --ctx "
                 "%u: context, then question<TAB>answer pairs; escapes \\n "
                 "\\t \\\\", o.prompts ? "(file)" : eval_task_names[o.task],
                 (unsigned long long)o.seed, o.ctx);
        const int wr = eval_prompts_write(&ps, o.write_prompts, what);
        if (wr != 0)
            fprintf(stderr, "model_eval: cannot write %s\n", o.write_prompts);
        eval_prompts_free(&ps);
        free(text);
        pkm_model_free(&m);
        return wr != 0;
    }

    /* the profile schedule is calibrated on this model's attention (the
     * observation-window rows of prompts drawn with the calibration seed,
     * never the evaluation's prompts) before anything is sized */
    double prof_bits[PKM_MAX_LAYERS] = {0};
    uint32_t fit_ratio = 0;
    const uint32_t n_cal = o.quick == 1 ? 1 : 8;
    int want_profile = 0;
    for (size_t i = 0; i < n_sel; i++)
        want_profile |= !strcmp(sel[i]->key, "profile") ||
                        strstr(sel[i]->key, "cake") != NULL ||
                        sel[i]->head_shares;
    double cake_pref[PKM_MAX_LAYERS] = {0};
    pb_profile *head_prof = NULL;
    if (want_profile) {
        if (eval_calibrate(&m, &o, text, text_len, plen, max_len, n_cal,
                           prof_bits, &fit_ratio, cake_pref, &head_prof) != 0 ||
            pb_cake_weights(cake_pref, mc->n_layers, pkm_cake_weights,
                            PKM_MAX_LAYERS) != PB_OK) {
            fprintf(stderr, "model_eval: calibration failed\n");
            return 1;
        }
        pkm_cake_ready = 1;
        pkm_head_profile = head_prof;
    }

    /* rows: the full cache, then every (budget, method) */
    const size_t n_rows = 1 + (size_t)o.n_budgets * n_sel;
    eval_row *rows = calloc(n_rows, sizeof *rows);
    eval_work w = {&m, NULL, NULL, NULL, NULL, NULL, NULL, o.obs, m.rope_len,
                   o.show_answers};
    const size_t LH = (size_t)mc->n_layers * mc->n_heads;
    const size_t n_slots = (size_t)mc->n_layers * mc->n_kv_heads;
    if (!rows) return 1;
    for (size_t c = 0; c < n_rows; c++) {
        eval_row *k = &rows[c];
        pkm_cache_params p = {NULL, 0, 0, o.obs, o.pool, o.cadence, max_len};
        if (c > 0) {
            k->den = o.budgets[(c - 1) / n_sel];
            k->method = sel[(c - 1) % n_sel];
            k->budget = o.ctx / k->den;
            p.method = k->method;
            p.budget = k->budget;
            p.recent_window = k->budget / 4 ? k->budget / 4 : 1;
        }
        const int r = pkm_cache_init(&k->kc, &m, &p, k->why, sizeof k->why);
        if (r < 0) {
            fprintf(stderr, "model_eval: %s\n", k->why);
            return 1;
        }
        k->supported = r == 0;
        if (!k->method) /* the full cache holds the context, not its slack */
            k->kc.positions = (uint64_t)n_slots * o.ctx;
        if (k->supported && k->kc.replay) w.n_rows_max = max_len;
        for (int pr = 0; pr < EVAL_N_PROTOCOLS; pr++) {
            k->res[pr].ok = calloc(ps.n ? ps.n : 1, 1);
            k->res[pr].held = calloc(mc->n_layers, sizeof(uint64_t));
            if (!k->res[pr].ok || !k->res[pr].held) return 1;
        }
        k->nll_w = calloc(o.nll_samples ? o.nll_samples : 1, sizeof(double));
        if (!k->nll_w) return 1;
    }
    w.full = pkm_slots_new(n_slots, max_len, mc->head_dim);
    w.rows = malloc(LH * (size_t)w.n_rows_max * max_len * sizeof(float));
    w.step_attn = malloc(LH * w.stride * sizeof(float));
    w.full_attn = calloc((size_t)o.nll_decode * LH * w.stride, sizeof(float));
    w.logits0 = malloc(mc->vocab * sizeof(float));
    w.logits = malloc(mc->vocab * sizeof(float));
    if (!w.full || !w.rows || !w.step_attn || !w.full_attn || !w.logits0 ||
        !w.logits) {
        fprintf(stderr, "model_eval: out of memory\n");
        return 1;
    }
    /* --quick also proves the integration exact: a library configuration
     * whose shares exceed the sequence evicts nothing and must reproduce
     * the full cache's NLL bit for bit */
    eval_row exact = {0};
    if (o.quick == 1) {
        pkm_cache_params p = {&pkm_methods[0], max_len, 4, o.obs, o.pool,
                              o.cadence, max_len};
        if (pkm_cache_init(&exact.kc, &m, &p, err, sizeof err) != 0) {
            fprintf(stderr, "model_eval: %s\n", err);
            return 1;
        }
        exact.supported = 1;
    }

    /* prompts, under each protocol */
    for (int pr = 0; pr < EVAL_N_PROTOCOLS; pr++) {
        if (!o.protocol[pr]) continue;
        for (uint32_t i = 0; i < ps.n; i++)
            if (eval_prompt_run(&w, rows, n_rows, &ps.p[i], i, pr) != 0) {
                fprintf(stderr, "model_eval: prompt %u failed\n", i);
                return 1;
            }
    }
    /* prompts the model cannot answer make every row 0 %: say so */
    uint32_t n_q = 0;
    for (uint32_t i = 0; i < ps.n; i++) n_q += ps.p[i].n_q;
    for (int pr = 0; pr < EVAL_N_PROTOCOLS; pr++)
        if (o.protocol[pr] && n_q && 2u * rows[0].res[pr].n_ok < n_q)
            fprintf(stderr,
                    "model_eval: warning: the full cache answers only %u of "
                    "%u %s (%s): the rows compare eviction on prompts "
                    "this model cannot answer\n", rows[0].res[pr].n_ok, n_q,
                    n_q == ps.n ? "prompts" : "questions",
                    pr == EVAL_AWARE ? "aware" : "agnostic");
    /* held-out NLL and retained mass */
    double ent[PKM_MAX_LAYERS] = {0};
    uint64_t ent_n[PKM_MAX_LAYERS] = {0};
    const uint32_t nl = o.nll_prompt + o.nll_decode;
    for (uint32_t s = 0; s < o.nll_samples; s++) {
        const size_t off = (size_t)(pkm_splitmix(&rng) % (text_len - nl - 1));
        if (eval_nll_run(&w, rows, n_rows, text + off, o.nll_prompt,
                         o.nll_decode, s, ent, ent_n) != 0) {
            fprintf(stderr, "model_eval: NLL sample %u failed\n", s);
            return 1;
        }
        if (o.quick == 1) {
            /* the exact configuration, after the full cache (rows[0]) */
            eval_row pair[2] = {rows[0], exact};
            pair[0].supported = 0; /* keep full_attn from this sample */
            pair[1].nll_w = NULL;
            if (eval_nll_run(&w, pair, 2, text + off, o.nll_prompt,
                             o.nll_decode, s, NULL, NULL) != 0)
                return 1;
            exact = pair[1];
        }
    }
    int status = 0;
    if (o.quick == 1 && exact.nll != rows[0].nll) {
        fprintf(stderr,
                "model_eval: a library cache that evicts nothing gave NLL sum "
                "%.17g, the full cache %.17g\n", exact.nll, rows[0].nll);
        status = 1;
    }

    const double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("model: %u layers, %u query / %u KV heads of %u, trained %llu "
           "steps (%llu tokens)\n",
           mc->n_layers, mc->n_heads, mc->n_kv_heads, mc->head_dim,
           (unsigned long long)mc->train_step,
           (unsigned long long)mc->train_tokens);
    if (o.prompts)
        printf("context %u; %u prompts from %s", o.ctx, ps.n, o.prompts);
    else if (o.task != EVAL_TASK_NEEDLE)
        printf("context %u; %u %s prompts of %u bytes with their answers "
               "(seed %llu)", o.ctx, ps.n, eval_task_names[o.task], o.ctx - 1,
               (unsigned long long)o.seed);
    else
        printf("context %u; %u pass-key prompts of %u bytes over %d depths "
               "(seed %llu)", o.ctx, ps.n, plen, EVAL_N_DEPTHS,
               (unsigned long long)o.seed);
    if (o.nll_samples)
        printf("; NLL: %u samples, prompt %u, %u teacher-forced bytes",
               o.nll_samples, o.nll_prompt, o.nll_decode);
    printf("\nobs window %u, pool %u, recent = budget/4, cadence %u; "
           "positions = sum of (layer, KV head) shares; K/V bytes = positions "
           "x 2 x %u x 4 (float32); equal at a budget: the positions held; peak = "
           "K/V rows allocated: a head-adaptive row with the window scorer "
           "pools each layer's rows (layer_total + KV heads x cadence, as "
           "uniform's), one replaying its prompt (Ada-H2O) sizes every head's "
           "buffer for the largest share it can take\n"
           "aware: the question inside the compressed prompt; agnostic: the "
           "context compressed before the question; vs uniform: paired "
           "difference from uniform SnapKV at that budget on the same "
           "prompts, in points, +- its standard error\n",
           o.obs, o.pool, o.cadence, mc->head_dim);
    if (multi_q)
        printf("several questions of one cache: the context is compressed "
               "once, the questions are asked in turn (each after the "
               "previous answer as decoded); query-aware does not apply "
               "(query-agnostic by construction); accuracy = questions "
               "answered exactly\n");
    if (eval_report(&o, &m, rows, n_rows, &ps) != 0) status = 1;
    if (o.nll_samples) {
        printf("\nfull-cache attention entropy per layer (nats, mean over "
               "decode steps and heads):");
        for (uint32_t l = 0; l < mc->n_layers; l++)
            printf(" %.3f", ent_n[l] ? ent[l] / (double)ent_n[l] : 0.0);
        printf("\n");
    }
    if (want_profile) {
        printf("profile of the prompt's observation window (pb_profile, %u "
               "calibration prompts): entropy per layer in bits:", n_cal);
        for (uint32_t l = 0; l < mc->n_layers; l++) printf(" %.2f", prof_bits[l]);
        printf("\nprofile schedule weights (k for 90 %% of the mass):");
        for (uint32_t l = 0; l < mc->n_layers; l++)
            printf(" %u", pkm_profile_weights[l]);
        printf("; nearest arithmetic ratio (pb_profile_fit_ratio, up to 8): "
               "%u\n", fit_ratio);
        printf("CAKE layer preference (tau 1.6, 0.6; mean over the "
               "calibration prompts):");
        for (uint32_t l = 0; l < mc->n_layers; l++) printf(" %.3g", cake_pref[l]);
        printf("\n");
    }
    printf("\nrun time %.1f s (CPU)\n", secs);
    if (o.quick == 1) {
        printf("quick check: no-eviction library NLL %s the full cache's\n",
               status ? "DIFFERS from" : "equals");
        pkm_cache_free(&exact.kc);
    }

    for (size_t c = 0; c < n_rows; c++) {
        pkm_cache_free(&rows[c].kc);
        for (int pr = 0; pr < EVAL_N_PROTOCOLS; pr++) {
            free(rows[c].res[pr].ok);
            free(rows[c].res[pr].held);
        }
        free(rows[c].nll_w);
    }
    free(rows);
    pkm_slots_free(w.full, n_slots);
    free(w.rows);
    free(w.step_attn);
    free(w.full_attn);
    free(w.logits0);
    free(w.logits);
    eval_prompts_free(&ps);
    pb_profile_destroy(head_prof);
    free(text);
    pkm_model_free(&m);
    return status;
}
