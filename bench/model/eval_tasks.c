/*
 * eval_tasks.c - model_eval's task generators (eval_tasks.h). Each draws,
 * as tasks.py's _needles and sample do, the task's names and keys, then a
 * haystack of held-out text and the needles' depths, and lays out the
 * bytes of tasks.py's format strings; only the generator differs
 * (splitmix64 over the held-out text here, Python's random over the
 * training text there). The pass key keeps its own generator
 * (eval_prompts.c, fixed depths) so the default run is unchanged.
 */
#include "eval_tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkm_prompt.h"

const char *const eval_task_names[EVAL_N_TASKS] = {
    "needle", "multikey", "multivalue", "vartrack", "multiq"};

/* tasks.py's format strings, in printf form */
static const char KEY_NEEDLE[] = " The key of %s is %s. ";
static const char KEY_Q[] = "\nWhat is the key of %s? The key of %s is ";
static const char VAL_NEEDLE[] = " A value of %s is %s. ";
static const char VAL_Q[] =
    "\nWhat are the values of %s? The values of %s are ";
static const char VAR_VALUE[] = " COPY %s TO %s. "; /* source, name */
static const char VAR_Q[] = "\nWhich variables hold %s? They are ";

#define N_KEYS 4
#define CHAIN 3
#define MIN_HAY 32u
#define MAX_NEEDLES (2 * CHAIN)

/* One draw of a task: its needles in context order, its questions (the
 * '.' that ends the previous answer leads each later one) and answers. */
typedef struct draw {
    char ndl[MAX_NEEDLES][48];
    uint32_t n_ndl;
    char q[EVAL_MAX_Q][96];
    char a[EVAL_MAX_Q][EVAL_MAX_ANSWER];
    uint32_t n_q;
    uint32_t asked; /* multikey: the needle asked (for its depth) */
} draw;

int eval_task_find(const char *name)
{
    for (int t = 0; t < EVAL_N_TASKS; t++)
        if (!strcmp(name, eval_task_names[t])) return t;
    return -1;
}

uint64_t eval_task_stream(int task, uint64_t seed)
{
    return seed * 0x100000001B3ull + 17u +
           (uint64_t)(uint32_t)task * 0xD1B54A32D192ED03ull;
}

static void key5(uint64_t *rng, char out[6])
{
    snprintf(out, 6, "%05u", (unsigned)(pkm_splitmix(rng) % 100000u));
}

/* n distinct names of 5 letters from base .. base + 25 */
static void names(uint64_t *rng, uint32_t n, char base, char out[][6])
{
    for (uint32_t k = 0; k < n;) {
        for (int i = 0; i < 5; i++)
            out[k][i] = (char)(base + (int)(pkm_splitmix(rng) % 26u));
        out[k][5] = 0;
        uint32_t j = 0;
        while (j < k && strcmp(out[j], out[k])) j++;
        k += j == k;
    }
}

static void make_draw(int task, uint64_t *rng, draw *d)
{
    char nm[2 * CHAIN][6], key[N_KEYS][6];
    memset(d, 0, sizeof *d);
    if (task == EVAL_TASK_MULTIKEY || task == EVAL_TASK_MULTIQ) {
        uint32_t order[N_KEYS] = {0, 1, 2, 3};
        names(rng, N_KEYS, 'a', nm);
        for (int i = 0; i < N_KEYS; i++) key5(rng, key[i]);
        for (int i = 0; i < N_KEYS; i++)
            snprintf(d->ndl[i], sizeof d->ndl[i], KEY_NEEDLE, nm[i], key[i]);
        d->n_ndl = N_KEYS;
        for (uint32_t i = N_KEYS - 1; i > 0; i--) { /* Fisher-Yates */
            const uint32_t j = (uint32_t)(pkm_splitmix(rng) % (i + 1u));
            const uint32_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        d->n_q = task == EVAL_TASK_MULTIKEY ? 1 : N_KEYS;
        d->asked = order[0];
        for (uint32_t j = 0; j < d->n_q; j++) {
            const char *n = nm[order[j]];
            const size_t o = j ? 1 : 0; /* the '.' after answer j - 1 */
            d->q[j][0] = '.';
            snprintf(d->q[j] + o, sizeof d->q[j] - o, KEY_Q, n, n);
            snprintf(d->a[j], sizeof d->a[j], "%s", key[order[j]]);
        }
    } else if (task == EVAL_TASK_MULTIVALUE) {
        names(rng, 1, 'a', nm);
        for (int i = 0; i < N_KEYS; i++) key5(rng, key[i]);
        for (int i = 0; i < N_KEYS; i++)
            snprintf(d->ndl[i], sizeof d->ndl[i], VAL_NEEDLE, nm[0], key[i]);
        d->n_ndl = N_KEYS;
        d->n_q = 1;
        snprintf(d->q[0], sizeof d->q[0], VAL_Q, nm[0], nm[0]);
        snprintf(d->a[0], sizeof d->a[0], "%s %s %s %s", key[0], key[1],
                 key[2], key[3]);
    } else { /* vartrack */
        names(rng, 2 * CHAIN, 'A', nm);
        key5(rng, key[0]);
        do key5(rng, key[1]); while (!strcmp(key[0], key[1]));
        char chain[2][CHAIN][48];
        for (int c = 0; c < 2; c++) {
            snprintf(chain[c][0], sizeof chain[c][0], VAR_VALUE, key[c],
                     nm[c * CHAIN]);
            for (int i = 1; i < CHAIN; i++) /* VAR_COPY: the same shape */
                snprintf(chain[c][i], sizeof chain[c][i], VAR_VALUE,
                         nm[c * CHAIN + i - 1], nm[c * CHAIN + i]);
        }
        /* a random merge that keeps each chain in order */
        for (int a = 0, b = 0; a < CHAIN || b < CHAIN;) {
            const int first = b == CHAIN ||
                              (a < CHAIN && (pkm_splitmix(rng) & 1u));
            memcpy(d->ndl[d->n_ndl++], first ? chain[0][a++] : chain[1][b++],
                   sizeof chain[0][0]);
        }
        d->n_q = 1;
        snprintf(d->q[0], sizeof d->q[0], VAR_Q, key[0]);
        snprintf(d->a[0], sizeof d->a[0], "%s %s %s", nm[0], nm[1], nm[2]);
    }
}

/* Bytes of needles, questions, answers and the final '.' (every draw of a
 * task has the same). */
static uint32_t fixed_bytes(const draw *d)
{
    size_t n = 1;
    for (uint32_t i = 0; i < d->n_ndl; i++) n += strlen(d->ndl[i]);
    for (uint32_t j = 0; j < d->n_q; j++) n += strlen(d->q[j]) + strlen(d->a[j]);
    return (uint32_t)n;
}

uint32_t eval_task_min_ctx(int task)
{
    if (task == EVAL_TASK_NEEDLE) return 96; /* model_eval's least context */
    uint64_t rng = 1;
    draw d;
    make_draw(task, &rng, &d);
    return fixed_bytes(&d) + MIN_HAY;
}

static int cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Lays one draw out over the haystack text[start ..] of hay bytes with the
 * needles at cuts[] into p. Returns 0 or -1 (out of memory). */
static int lay_out(const draw *d, const unsigned char *hay, uint32_t hay_len,
                   const uint32_t *cuts, eval_prompt *p)
{
    const uint32_t total = hay_len + fixed_bytes(d) - 1;
    p->text = malloc(total);
    if (!p->text) return -1;
    uint32_t n = 0, prev = 0;
    for (uint32_t i = 0; i < d->n_ndl; i++) {
        const size_t nl = strlen(d->ndl[i]);
        memcpy(p->text + n, hay + prev, cuts[i] - prev);
        n += cuts[i] - prev;
        memcpy(p->text + n, d->ndl[i], nl);
        n += (uint32_t)nl;
        prev = cuts[i];
    }
    memcpy(p->text + n, hay + prev, hay_len - prev);
    p->ctx_len = n += hay_len - prev;
    p->n_q = d->n_q;
    for (uint32_t j = 0; j < d->n_q; j++) {
        const size_t ql = strlen(d->q[j]);
        memcpy(p->text + n, d->q[j], ql);
        p->q_end[j] = n += (uint32_t)ql;
        p->ans_len[j] = (uint32_t)strlen(d->a[j]);
        memcpy(p->answer[j], d->a[j], p->ans_len[j]);
    }
    p->len = p->q_end[0];
    return 0;
}

int eval_task_prompts(eval_prompt_set *s, int task, const unsigned char *text,
                      size_t text_len, uint32_t ctx, uint32_t n, uint64_t seed,
                      uint64_t *rng, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (task == EVAL_TASK_NEEDLE) /* 5 digits + '.' after the prompt */
        return eval_needles(s, text, text_len, ctx - 6, n, seed, rng, err,
                            errlen);
    if (ctx < eval_task_min_ctx(task) || text_len < (size_t)ctx + 2) {
        snprintf(err, errlen, "task %s needs a context of at least %u bytes "
                 "(and held-out text longer than it)", eval_task_names[task],
                 eval_task_min_ctx(task));
        return -1;
    }
    s->p = calloc(n ? n : 1, sizeof *s->p);
    if (!s->p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    *rng = eval_task_stream(task, seed);
    for (uint32_t i = 0; i < n; i++) {
        draw d;
        make_draw(task, rng, &d);
        const uint32_t hay_len = ctx - fixed_bytes(&d);
        const size_t start = (size_t)(pkm_splitmix(rng) % (text_len - hay_len - 1));
        uint32_t cuts[MAX_NEEDLES];
        for (uint32_t k = 0; k < d.n_ndl; k++)
            cuts[k] = (uint32_t)(pkm_splitmix(rng) % (hay_len + 1u));
        qsort(cuts, d.n_ndl, sizeof cuts[0], cmp_u32);
        eval_prompt *p = &s->p[i];
        if (lay_out(&d, text + start, hay_len, cuts, p) != 0) {
            snprintf(err, errlen, "out of memory");
            eval_prompts_free(s);
            return -1;
        }
        s->n = i + 1;
        /* multikey: the asked needle's depth, to the nearest of 5 */
        p->depth = task == EVAL_TASK_MULTIKEY
            ? (int)((4u * cuts[d.asked] + hay_len / 2) / hay_len) : -1;
        eval_prompt_find_key(p);
    }
    return 0;
}
