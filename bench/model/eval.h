/*
 * eval.h - what the parts of model_eval share: the options, one row of the
 * table (a method at a budget, or the full cache) with its results under
 * each protocol, and the command line, run and report functions
 * (eval_cli.c, eval_run.c, eval_report.c). model_eval.c drives them.
 */
#ifndef EVAL_H
#define EVAL_H

#include <stdint.h>

#include "eval_prompts.h"
#include "pkm_cache.h"
#include "pkm_model.h"

/* Protocols: query-aware compresses the prompt with the question in it;
 * query-agnostic compresses the context, then feeds the question as decode
 * steps against the kept context (with eviction, as the answer). */
enum { EVAL_AWARE, EVAL_AGNOSTIC, EVAL_N_PROTOCOLS };

typedef struct eval_opts {
    const char *model, *text, *tsv, *prompts, *methods, *write_prompts;
    int task;             /* an EVAL_TASK_* (eval_tasks.h) */
    uint32_t ctx, needles, nll_samples, nll_prompt, nll_decode;
    uint32_t obs, pool, cadence;
    uint32_t budgets[8], n_budgets; /* denominators: budget = ctx / den */
    int protocol[EVAL_N_PROTOCOLS];
    uint64_t seed;
    int quick, detail, show_answers;
} eval_opts;

typedef struct eval_result {
    uint8_t *ok;          /* [prompt] its questions answered exactly */
    uint32_t n_ok;        /* questions answered exactly, all prompts */
    uint64_t *held;       /* [layer] (prompt, KV head) pairs that still held
                             every byte of the answer's occurrence in the
                             context when the answer began */
    uint64_t held_n;      /* prompts with such an occurrence */
} eval_result;

typedef struct eval_row {
    const pkm_method *method; /* NULL: full cache */
    uint32_t den, budget;
    int supported;
    char why[96];
    pkm_cache kc;
    eval_result res[EVAL_N_PROTOCOLS];
    double nll, mass[PKM_MAX_LAYERS];
    uint64_t nll_n, mass_n;
    double *nll_w;            /* [window] NLL sum of each held-out window */
} eval_row;

typedef struct eval_work {
    pkm_model *m;
    pkm_slot *full;
    float *rows, *step_attn, *full_attn, *logits0, *logits;
    uint32_t n_rows_max; /* prompt rows captured: every one if a row replays
                            the prompt, else the observation window */
    uint32_t stride;
    int show_answers; /* print the full cache's decoded answers */
} eval_work;

/* The command line into o (defaults set first): returns 0, 1 after
 * printing --help, or -1 after a one-line usage error on stderr. *list is
 * set by --list-methods. */
int eval_parse(int argc, char **argv, eval_opts *o, int *list);

/* Fills what the command line left unset from --quick, --full or the
 * quick comparison's defaults. */
void eval_presets(eval_opts *o);

/* The method rows of a --methods list: 0, or -1 after a message. */
int eval_select_methods(const char *list, const pkm_method **out, size_t *n);

/* Scores one prompt under one protocol for every supported row; prompt
 * index i selects the result slot. Returns 0 or -1. */
int eval_prompt_run(eval_work *w, eval_row *rows, size_t n_rows,
                    const eval_prompt *p, uint32_t i, int protocol);

/* Held-out NLL and retained mass: prompt tok[0 .. P-1], then predict
 * tok[P .. P+D-1] (window `window`: each row's nll_w[window] gets its
 * sum); rows[0] must be the full cache. ent / ent_n get the
 * full cache's per-layer attention entropy sums. Returns 0 or -1. */
int eval_nll_run(eval_work *w, eval_row *rows, size_t n_rows,
                 const unsigned char *tok, uint32_t P, uint32_t D,
                 uint32_t window, double *ent, uint64_t *ent_n);

/* Calibrates on n prompts of len bytes drawn from text with the
 * calibration seed (never the evaluation's prompts), from their
 * observation-window rows: sets pkm_profile_weights, bits[layer] and
 * *ratio (the profile schedule), cake_pref[layer] (CAKE's preference, mean
 * over the prompts) and *head_prof (a profile per (layer, KV head), the
 * caller destroys it). Returns 0 or -1. */
int eval_calibrate(pkm_model *m, const eval_opts *o, const unsigned char *text,
                   size_t text_len, uint32_t len, uint32_t max_len, uint32_t n,
                   double *bits, uint32_t *ratio, double *cake_pref,
                   pb_profile **head_prof);

/* The table on stdout (and the TSV if o->tsv); returns 0 or -1. */
int eval_report(const eval_opts *o, const pkm_model *m, const eval_row *rows,
                size_t n_rows, const eval_prompt_set *ps);

#endif /* EVAL_H */
