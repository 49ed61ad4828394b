/*
 * eval_prompts.h - the prompts model_eval scores: the built-in prompts of
 * each task cut from the held-out text (the pass key here, the other tasks
 * in eval_tasks.h), and prompts read from a file (the format is in
 * docs/quality.md, "Your own prompts"). A prompt is a context, then one to
 * EVAL_MAX_Q questions, each with the answer expected after it; the
 * query-agnostic protocol compresses the context before the first question
 * arrives, and a prompt with several questions asks them in turn of the
 * same compressed cache.
 */
#ifndef EVAL_PROMPTS_H
#define EVAL_PROMPTS_H

#include <stddef.h>
#include <stdint.h>

#define EVAL_MAX_ANSWER 64
#define EVAL_MAX_Q 4
#define EVAL_N_DEPTHS 5

typedef struct eval_prompt {
    unsigned char *text;  /* context, then every question in turn (without
                             the answers), q_end[n_q - 1] bytes (malloc'd) */
    uint32_t ctx_len;     /* bytes of context */
    uint32_t len;         /* context + first question (== q_end[0]) */
    uint32_t n_q;         /* questions, 1 .. EVAL_MAX_Q */
    uint32_t q_end[EVAL_MAX_Q]; /* question j is text[q_end[j-1] ..
                             q_end[j]) (question 0 starts at ctx_len); it is
                             fed after answer j-1 as the model decoded it */
    unsigned char answer[EVAL_MAX_Q][EVAL_MAX_ANSWER];
    uint32_t ans_len[EVAL_MAX_Q]; /* 1 .. EVAL_MAX_ANSWER */
    int depth;            /* pass key: depth index 0 .. 4; else -1 */
    uint32_t key_pos;     /* first byte of the first answer's first
                             occurrence in the context, or UINT32_MAX if it
                             has none */
} eval_prompt;

typedef struct eval_prompt_set {
    eval_prompt *p;
    uint32_t n;
} eval_prompt_set;

/* The built-in needle prompts: n prompts of `len` bytes (context + question),
 * the needle " The pass key is NNNNN. Remember it. " at depth
 * (i mod 5) / 4 of the haystack, the question
 * "\nWhat is the pass key? The pass key is ", the answer the 5 digits.
 * Deterministic in seed: *rng is set from it and left after the last draw
 * (the held-out NLL windows are drawn next). Returns 0, or -1 (message in
 * err). */
int eval_needles(eval_prompt_set *s, const unsigned char *text,
                 size_t text_len, uint32_t len, uint32_t n, uint64_t seed,
                 uint64_t *rng, char *err, size_t errlen);

/* Bytes a prompt feeds and decodes: context, questions and answers. */
uint32_t eval_prompt_total(const eval_prompt *p);

/* Sets p->key_pos from p's context and first answer. */
void eval_prompt_find_key(eval_prompt *p);

/* Reads prompts from a file: one prompt a line, tab-separated fields
 * context, question, answer[, question, answer ...] (1 .. EVAL_MAX_Q
 * pairs), with the escapes \n \t \\ (a line starting with '#' and an
 * empty line are skipped). Every prompt's eval_prompt_total must be at
 * most max_total. Returns 0, or -1 (message with the line number in
 * err). */
int eval_prompts_read(eval_prompt_set *s, const char *path,
                      uint32_t max_total, char *err, size_t errlen);

/* Writes s in the format eval_prompts_read reads (escaping \n \t \\),
 * after a '#' line holding `comment`. Returns 0, or -1 if the file cannot
 * be written. */
int eval_prompts_write(const eval_prompt_set *s, const char *path,
                       const char *comment);

void eval_prompts_free(eval_prompt_set *s);

#endif /* EVAL_PROMPTS_H */
