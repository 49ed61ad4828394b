/*
 * pkm_io.h - small helpers shared by the bench/model programs: reading a
 * whole file, the reference-logits file of docs/model.md, and the full
 * prefill of a prompt with the observation-window rows captured.
 */
#ifndef PKM_IO_H
#define PKM_IO_H

#include <stddef.h>
#include <stdint.h>

#include "pkm_model.h"

/* Reads a whole file; returns a malloc'd buffer (NUL-terminated, *len
 * excludes the NUL) or NULL. */
unsigned char *pkm_read_file(const char *path, size_t *len);

typedef struct pkm_ref_prompt {
    uint32_t len;
    const unsigned char *bytes;
    const float *logits; /* [len][256], little-endian floats decoded */
} pkm_ref_prompt;

typedef struct pkm_ref {
    uint32_t count;
    pkm_ref_prompt *prompts;
    unsigned char *raw;
    float *floats;
} pkm_ref;

int pkm_ref_load(pkm_ref *r, const char *path);
void pkm_ref_free(pkm_ref *r);

/* Runs the prompt tok[0 .. len-1] through the model with the full cache
 * `full` (emptied first; each slot must hold len rows). The attention of
 * the last n_rows tokens goes to rows ([layer][query head][n_rows][len],
 * zero beyond each row's position; may be NULL when n_rows is 0), the
 * logits after the last token to logits (may be NULL). Returns 0 or -1. */
int pkm_prefill_full(pkm_model *m, pkm_slot *full, const unsigned char *tok,
                     uint32_t len, float *rows, uint32_t n_rows, float *logits,
                     float *step_attn);

#endif /* PKM_IO_H */
