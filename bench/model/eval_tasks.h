/*
 * eval_tasks.h - the built-in evaluation tasks of model_eval: generators
 * that cut prompts from the held-out text in the byte layouts of
 * bench/model/tasks.py (its docstring; docs/quality.md, "The tasks"),
 * drawn with splitmix64 from a seed of their own. Scoring is model_eval's
 * (eval_run.c): every answer decoded greedily and matched exactly.
 */
#ifndef EVAL_TASKS_H
#define EVAL_TASKS_H

#include <stddef.h>
#include <stdint.h>

#include "eval_prompts.h"

enum {
    EVAL_TASK_NEEDLE,     /* one pass key at depths 0, 1/4 .. 1 in turn */
    EVAL_TASK_MULTIKEY,   /* four named keys, one asked */
    EVAL_TASK_MULTIVALUE, /* one name with four values, all asked */
    EVAL_TASK_VARTRACK,   /* two chains of three assignments */
    EVAL_TASK_MULTIQ,     /* the multikey context, all four keys asked in
                             turn of one compressed cache */
    EVAL_N_TASKS
};

/* The names --task takes, in the order of the enum. */
extern const char *const eval_task_names[EVAL_N_TASKS];

/* The task of a name, or -1. */
int eval_task_find(const char *name);

/* The smallest context (bytes of context, questions and answers, plus one)
 * at which the task leaves 32 bytes of haystack. */
uint32_t eval_task_min_ctx(int task);

/* The splitmix64 state a task's prompts are drawn from: seed x
 * 1099511628211 + 17 + task x 0xD1B54A32D192ED03 (the needle's stream is
 * that of every earlier version of model_eval). */
uint64_t eval_task_stream(int task, uint64_t seed);

/* n prompts of `task` for a model context of ctx: each one's context,
 * questions and answers take ctx - 1 bytes (with the '.' after the last
 * answer, ctx: tasks.py's training sequence of T + 1 = ctx bytes). The
 * haystacks are cut from text[0 .. text_len-1]. *rng is left after the
 * last draw (the held-out NLL windows are drawn next). Returns 0, or -1
 * (message in err) if the task does not fit ctx or the text is short. */
int eval_task_prompts(eval_prompt_set *s, int task, const unsigned char *text,
                      size_t text_len, uint32_t ctx, uint32_t n, uint64_t seed,
                      uint64_t *rng, char *err, size_t errlen);

#endif /* EVAL_TASKS_H */
