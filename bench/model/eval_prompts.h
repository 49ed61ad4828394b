/*
 * eval_prompts.h - the prompts model_eval scores: the built-in pass-key
 * prompts cut from the held-out text, and prompts read from a file (the
 * format is in docs/quality.md, "Your own prompts"). A prompt is a context,
 * a question and the answer expected after them; the query-agnostic
 * protocol compresses the context before the question arrives.
 */
#ifndef EVAL_PROMPTS_H
#define EVAL_PROMPTS_H

#include <stddef.h>
#include <stdint.h>

#define EVAL_MAX_ANSWER 64
#define EVAL_N_DEPTHS 5

typedef struct eval_prompt {
    unsigned char *text;  /* context then question, len bytes (malloc'd) */
    uint32_t ctx_len;     /* bytes of context */
    uint32_t len;         /* context + question */
    unsigned char answer[EVAL_MAX_ANSWER];
    uint32_t ans_len;     /* 1 .. EVAL_MAX_ANSWER */
    int depth;            /* built-in: depth index 0 .. 4; file: -1 */
    uint32_t key_pos;     /* first byte of the answer's first occurrence in
                             the context, or UINT32_MAX if it has none */
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

/* Reads prompts from a file: one prompt a line, three tab-separated fields
 * context, question, answer, with the escapes \n \t \\ (a line starting
 * with '#' and an empty line are skipped). Every prompt must satisfy
 * len + ans_len <= max_total. Returns 0, or -1 (message with the line
 * number in err). */
int eval_prompts_read(eval_prompt_set *s, const char *path,
                      uint32_t max_total, char *err, size_t errlen);

void eval_prompts_free(eval_prompt_set *s);

#endif /* EVAL_PROMPTS_H */
