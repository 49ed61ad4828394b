/*
 * pkm_kept_dump.c - the C runtime of bench/model (pkm_cache.c) on one
 * prompt, printing what it keeps, for the torch press's comparison
 * (tests/python/test_press.py, bench/python/press_model.py).
 *
 *   pkm_kept_dump METHOD BUDGET RECENT OBS POOL CADENCE DECODE < prompt
 *
 * METHOD is an index into pkm_methods (pkm_methods.c). The prompt runs with
 * the full cache, pkm_cache_prefill compresses it, then DECODE greedy
 * tokens are decoded with pkm_cache_after_step. Output, one line each:
 *   "prefill" then "L KV p0 p1 ..." per (layer, KV head);
 *   "step POS TOKEN" (the greedy token fed at POS) then the same lines;
 * and "argmax T" for the token predicted after the last step.
 */
#include <stdio.h>
#include <stdlib.h>

#include "pkm_cache.h"
#include "pkm_io.h"
#include "pkm_model.h"

static void dump(const pkm_cache *kc)
{
    for (uint32_t l = 0; l < kc->n_layers; l++) {
        for (uint32_t kv = 0; kv < kc->n_kv; kv++) {
            const pkm_slot *s = &kc->slots[(size_t)l * kc->n_kv + kv];
            printf("%u %u", l, kv);
            for (uint32_t i = 0; i < s->n; i++) printf(" %u", s->pos[i]);
            printf("\n");
        }
    }
}

static uint32_t argmax(const float *x, uint32_t n)
{
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: pkm_kept_dump METHOD BUDGET RECENT OBS POOL "
                        "CADENCE DECODE < prompt\n");
        return 2;
    }
    unsigned long a[7];
    for (int i = 0; i < 7; i++) a[i] = strtoul(argv[i + 1], NULL, 10);
    if (a[0] >= pkm_method_count) return 2;
    static unsigned char prompt[1 << 16];
    const size_t len = fread(prompt, 1, sizeof prompt, stdin);
    static pkm_model m;
    char err[256];
    if (len == 0 || pkm_model_load(&m, PKM_DATA_DIR "/model.pkvm", err,
                                   sizeof err) != 0) {
        fprintf(stderr, "pkm_kept_dump: %s\n", len ? err : "empty prompt");
        return 1;
    }
    const pkm_config *c = &m.c;
    const uint32_t max_len = (uint32_t)len + (uint32_t)a[6] + 1;
    if (max_len > m.rope_len) return 2;
    const size_t n_slots = (size_t)c->n_layers * c->n_kv_heads;
    const size_t LH = (size_t)c->n_layers * c->n_heads;
    pkm_slot *full = calloc(n_slots, sizeof *full);
    float *rows = malloc(LH * len * len * sizeof(float));
    float *step = malloc(LH * m.rope_len * sizeof(float));
    float *logits = malloc(c->vocab * sizeof(float));
    if (!full || !rows || !step || !logits) return 1;
    for (size_t s = 0; s < n_slots; s++)
        if (pkm_slot_init(&full[s], max_len, c->head_dim) != 0) return 1;
    pkm_cache kc;
    const pkm_cache_params p = {&pkm_methods[a[0]], (uint32_t)a[1],
                                (uint32_t)a[2], (uint32_t)a[3], (uint32_t)a[4],
                                (uint32_t)a[5], max_len};
    if (pkm_cache_init(&kc, &m, &p, err, sizeof err) != 0) {
        fprintf(stderr, "pkm_kept_dump: %s\n", err);
        return 1;
    }
    if (pkm_prefill_full(&m, full, prompt, (uint32_t)len, rows, (uint32_t)len,
                         logits, step) != 0 ||
        pkm_cache_prefill(&kc, full, rows, (uint32_t)len, (uint32_t)len) != 0)
        return 1;
    printf("prefill\n");
    dump(&kc);
    uint32_t tok = argmax(logits, c->vocab);
    for (uint32_t j = 0; j < a[6]; j++) {
        const uint32_t pos = (uint32_t)len + j;
        if (pkm_model_step(&m, kc.slots, tok, pos, step, m.rope_len,
                           logits) != 0 ||
            pkm_cache_after_step(&kc, step, m.rope_len, pos) != 0)
            return 1;
        printf("step %u %u\n", pos, tok);
        dump(&kc);
        tok = argmax(logits, c->vocab);
    }
    printf("argmax %u\n", tok);
    pkm_cache_free(&kc);
    for (size_t s = 0; s < n_slots; s++) pkm_slot_free(&full[s]);
    free(full);
    free(rows);
    free(step);
    free(logits);
    pkm_model_free(&m);
    return 0;
}
