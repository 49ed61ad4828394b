/*
 * qk_model_loop.c - the standalone example of a runtime integration: the
 * trained transformer of docs/model.md (bench/model: weights, forward step,
 * K/V rows per layer and KV head) with libpyramidkv managing its cache
 * through the runtime calls only. Per (layer, KV head): one policy
 * instance with the layer's pyramid share; prefill compression scored from
 * the last prompt tokens' queries and the prompt's keys (pb_qk_prefill);
 * then, every decode step, the three calls pb_qk_observe,
 * pb_kvcache_evict_slots and pb_kvcache_compact_rows on the model's own
 * K/V rows. The library never sees a softmaxed row from the model.
 *
 * It prints each layer's held rows against its share and the greedy
 * continuation next to the full-cache one, and exits non-zero if a layer
 * does not hold exactly its share or a K/V row does not hold the position
 * the instance says it does.
 *
 * Usage: qk_model_loop [weights.pkvm [text.txt [prompt_len [steps]]]]
 * (defaults: the repository's model and held-out text, 320, 64).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pyramidkv/pyramidkv.h>

#include "pkm_model.h"

enum { BUDGET = 96, RATIO = 4, OBS = 16 };

/* Reads up to n bytes of a text file as byte tokens. */
static size_t read_tokens(const char *path, uint8_t *out, size_t n) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    const size_t got = fread(out, 1, n, f);
    fclose(f);
    return got;
}

static uint32_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    return (uint32_t)best;
}

/* Greedy continuation with the full cache: the baseline. */
static int run_full(pkm_model *m, const uint8_t *prompt, size_t len,
                    size_t steps, uint8_t *gen) {
    const pkm_config *c = &m->c;
    const size_t n_slots = (size_t)c->n_layers * c->n_kv_heads;
    pkm_slot *slots = calloc(n_slots, sizeof *slots);
    float *logits = malloc(c->vocab * sizeof *logits);
    int rc = slots == NULL || logits == NULL;
    for (size_t s = 0; s < n_slots && rc == 0; ++s)
        rc = pkm_slot_init(&slots[s], (uint32_t)(len + steps + 1), c->head_dim);
    uint32_t tok = prompt[0];
    for (size_t pos = 0; pos < len + steps && rc == 0; ++pos) {
        tok = pos < len ? prompt[pos] : tok;
        rc = pkm_model_step(m, slots, tok, (uint32_t)pos, NULL, 0, logits);
        if (pos + 1 >= len) {
            tok = argmax(logits, c->vocab);
            if (pos + 1 - len < steps) gen[pos + 1 - len] = (uint8_t)tok;
        }
    }
    for (size_t s = 0; slots != NULL && s < n_slots; ++s) pkm_slot_free(&slots[s]);
    free(slots);
    free(logits);
    return rc;
}

int main(int argc, char **argv) {
    const char *weights = argc > 1 ? argv[1] : PKM_DATA_DIR "/model.pkvm";
    const char *text = argc > 2 ? argv[2] : PKM_DATA_DIR "/heldout.txt";
    const size_t len = argc > 3 ? (size_t)strtoul(argv[3], NULL, 10) : 320u;
    const size_t steps = argc > 4 ? (size_t)strtoul(argv[4], NULL, 10) : 64u;

    pkm_model m;
    char err[256];
    if (pkm_model_load(&m, weights, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const pkm_config *c = &m.c;
    const size_t L = c->n_layers, KV = c->n_kv_heads, H = c->n_heads;
    const size_t hd = c->head_dim, G = H / KV, n_inst = L * KV;
    const size_t cap = len + steps + 1u;
    uint8_t *prompt = malloc(len);
    if (len < OBS || len + steps >= c->max_ctx ||
        read_tokens(text, prompt, len) != len) {
        fprintf(stderr, "need a text of %zu bytes, OBS <= prompt, prompt + "
                        "steps < %u\n", len, (unsigned)c->max_ctx);
        return 1;
    }

    /* The library side: one instance per (layer, KV head), one scorer. */
    pb_kvcache **inst = calloc(n_inst, sizeof *inst);
    pb_qk_config qc = PB_QK_CONFIG_DEFAULT;
    qc.head_dim = (uint32_t)hd;
    qc.group = (uint32_t)G;
    qc.scale = 1.0f; /* the model's queries come scaled by 1/sqrt(hd) */
    qc.max_keys = (uint32_t)cap;
    qc.max_rows = OBS;
    pb_qk *qk = NULL;
    if (pb_qk_create(&qc, NULL, &qk) != PB_OK) return 1;
    for (size_t i = 0; i < n_inst; ++i) {
        pb_kvcache_config kc = PB_KVCACHE_CONFIG_DEFAULT;
        kc.budget = BUDGET;
        kc.layer = (uint32_t)(i / KV);
        kc.num_layers = (uint32_t)L;
        kc.pyramid_ratio = RATIO;
        kc.recent_window = OBS;
        kc.obs_window = OBS;
        kc.capacity = (uint32_t)cap;
        if (pb_kvcache_create(&kc, NULL, &inst[i]) != PB_OK) return 1;
    }

    /* The runtime side: the model's K/V rows and positions per (layer, KV
     * head), and the queries of every step (q_out). */
    pkm_slot *slots = calloc(n_inst, sizeof *slots);
    for (size_t i = 0; i < n_inst; ++i)
        if (pkm_slot_init(&slots[i], (uint32_t)cap, (uint32_t)hd) != 0) return 1;
    float *logits = malloc(c->vocab * sizeof *logits);
    m.q_out = malloc(L * H * hd * sizeof *m.q_out);
    /* window queries: [layer][head][row][hd] */
    float *wq = malloc(L * H * OBS * hd * sizeof *wq);
    uint32_t *victims = malloc(cap * sizeof *victims);
    uint32_t *kept = malloc(cap * sizeof *kept);

    /* Prefill: the prompt through the model with the full cache; the last
     * OBS tokens' queries are the observation window. */
    for (size_t pos = 0; pos < len; ++pos) {
        if (pkm_model_step(&m, slots, prompt[pos], (uint32_t)pos, NULL, 0,
                           logits) != 0)
            return 1;
        if (pos + OBS >= len) {
            const size_t r = pos + OBS - len;
            for (size_t lh = 0; lh < L * H; ++lh)
                memcpy(wq + (lh * OBS + r) * hd, m.q_out + lh * hd,
                       hd * sizeof *wq);
        }
    }
    for (size_t i = 0; i < n_inst; ++i) {
        const size_t l = i / KV, kv = i % KV;
        pkm_slot *s = &slots[i];
        size_t n_kept = 0;
        /* the group of KV head kv: query heads kv*G .. kv*G+G-1 */
        const float *q = wq + ((l * H + kv * G) * OBS) * hd;
        if (pb_qk_prefill(qk, inst[i], q, OBS * hd, hd, OBS, s->k, hd, s->n,
                          PB_KVCACHE_BUDGET_SHARE, NULL, 0, victims, cap,
                          &n_kept) != PB_OK)
            return 1;
        /* a fresh prompt's rows are its positions: victims are rows */
        const size_t n_v = s->n - n_kept;
        if (pb_kvcache_compact_rows(victims, n_v, s->n, s->k,
                                    hd * sizeof(float), hd * sizeof(float),
                                    s->v, hd * sizeof(float),
                                    hd * sizeof(float)) != PB_OK ||
            pb_kvcache_compact_rows(victims, n_v, s->n, s->pos,
                                    sizeof *s->pos, sizeof *s->pos, NULL, 0,
                                    0) != PB_OK)
            return 1;
        s->n = (uint32_t)n_kept;
    }

    /* Decode: the model step appends each layer's K/V row; then, per
     * (layer, KV head), the three calls. */
    uint8_t *gen = malloc(steps), *full = malloc(steps);
    uint32_t tok = argmax(logits, c->vocab);
    for (size_t t = 0; t < steps; ++t) {
        gen[t] = (uint8_t)tok;
        const uint32_t pos = (uint32_t)(len + t);
        if (pkm_model_step(&m, slots, tok, pos, NULL, 0, logits) != 0) return 1;
        for (size_t i = 0; i < n_inst; ++i) {
            const size_t l = i / KV, kv = i % KV;
            pkm_slot *s = &slots[i];
            size_t n = 0;
            /* s->n keys: the held ones and the new token's own */
            if (pb_qk_observe(qk, inst[i], pos, m.q_out + (l * H + kv * G) * hd,
                              hd, s->k, hd, s->n) != PB_OK ||
                pb_kvcache_evict_slots(inst[i], PB_KVCACHE_BUDGET_SHARE, NULL,
                                       victims, cap, &n) != PB_OK ||
                pb_kvcache_compact_rows(victims, n, s->n, s->k,
                                        hd * sizeof(float), hd * sizeof(float),
                                        s->v, hd * sizeof(float),
                                        hd * sizeof(float)) != PB_OK ||
                pb_kvcache_compact_rows(victims, n, s->n, s->pos,
                                        sizeof *s->pos, sizeof *s->pos, NULL,
                                        0, 0) != PB_OK)
                return 1;
            s->n -= (uint32_t)n;
        }
        tok = argmax(logits, c->vocab);
    }

    /* Every (layer, KV head) at its share, its rows the instance's held
     * positions in order. */
    int bad = 0;
    printf("layer  share  held (per KV head)\n");
    for (size_t l = 0; l < L; ++l) {
        const uint32_t share = pb_kvcache_effective_budget(inst[l * KV]);
        printf("%5zu  %5u ", l, (unsigned)share);
        for (size_t kv = 0; kv < KV; ++kv) {
            const size_t i = l * KV + kv;
            size_t n = 0;
            pb_kvcache_kept_positions(inst[i], kept, cap, &n);
            bad |= n != slots[i].n || n != share;
            for (size_t r = 0; r < n && r < slots[i].n; ++r)
                bad |= slots[i].pos[r] != kept[r];
            printf(" %5u", (unsigned)slots[i].n);
        }
        printf("\n");
    }
    if (run_full(&m, prompt, len, steps, full) != 0) return 1;
    size_t same = 0;
    while (same < steps && gen[same] == full[same]) ++same;
    printf("prompt %zu tokens, %zu generated; the same as with the full "
           "cache for the first %zu\n", len, steps, same);
    printf("compressed: \"");
    for (size_t t = 0; t < steps; ++t)
        putchar(gen[t] >= 32 && gen[t] < 127 ? gen[t] : '.');
    printf("\"\nfull:       \"");
    for (size_t t = 0; t < steps; ++t)
        putchar(full[t] >= 32 && full[t] < 127 ? full[t] : '.');
    printf("\"\n%s\n", bad ? "FAIL: a layer is off its share or its rows"
                           : "every layer at its share, rows consistent");

    for (size_t i = 0; i < n_inst; ++i) {
        pb_kvcache_destroy(inst[i]);
        pkm_slot_free(&slots[i]);
    }
    pb_qk_destroy(qk);
    free(inst);
    free(slots);
    free(logits);
    free(m.q_out);
    m.q_out = NULL;
    free(wq);
    free(victims);
    free(kept);
    free(gen);
    free(full);
    free(prompt);
    pkm_model_free(&m);
    return bad;
}
