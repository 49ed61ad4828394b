/*
 * pkm_prompt.h - the pass-key prompts of the bench model (docs/quality.md):
 * held-out text with " The pass key is NNNNN. Remember it. " at a given
 * depth, ending with the question, the layout of train.py's passkey_sample
 * without the answer; and the needle-free calibration excerpts. Used by
 * model_trace and model_eval.
 */
#ifndef PKM_PROMPT_H
#define PKM_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#define PKM_KEY_DIGITS 5

/* The length of the question that ends every prompt: the context is the
 * prompt's first len - PKM_QUESTION_LEN bytes. */
#define PKM_QUESTION_LEN 39u

/* The splitmix64 step the bench/model programs draw with. */
uint64_t pkm_splitmix(uint64_t *state);

/* Builds a pass-key prompt of exactly len bytes into out from the text
 * text[0 .. text_len-1] (a random start drawn from *rng), the needle at
 * `depth` (0 .. 1) of the haystack; key receives the 5 digits (drawn
 * first). Returns 0, or -1 if len or the text is too short. */
int pkm_needle_prompt(const unsigned char *text, size_t text_len,
                      uint32_t len, double depth, uint64_t *rng,
                      unsigned char *out, char key[PKM_KEY_DIGITS + 1]);

/* The calibration texts a runtime measures its CAKE preference and its
 * profile on (model_eval's calibration, model_trace's preference records):
 * needle-free excerpts of len bytes of text[0 .. text_len-1]. The draws
 * of seed s start at pkm_calibration_rng(s); each pkm_calibration_offset
 * gives the next excerpt's start. */
uint64_t pkm_calibration_rng(uint64_t seed);
size_t pkm_calibration_offset(size_t text_len, uint32_t len, uint64_t *rng);

#endif /* PKM_PROMPT_H */
