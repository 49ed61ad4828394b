/*
 * qk_group_pool.c - the standalone example of a head-adaptive runtime with
 * the pooled K/V layout: the trained transformer of docs/model.md with
 * every layer's KV heads in one layer group (Ada-KV over a pyramid of
 * layer shares) and the layer's K/V in one store of the group's
 * pool_rows rows, shared by its heads (docs/guide.md, "Running in an
 * inference runtime"; docs/spec.md §16.6). Prefill scores the prompt
 * from the last prompt tokens' queries (pb_qk_attention) and compresses
 * every head at once (pb_kvcache_group_prefill); each decode step gathers
 * each head's keys through its rows (pb_kvcache_group_head_rows), scores
 * the layer from Q and K (pb_qk_group_observe), writes the new token's
 * K/V to the row each head got (pb_kvcache_group_new_rows) and evicts
 * the layer (pb_kvcache_group_evict_rows), whose freed rows the next
 * admissions reuse. No K/V row ever moves.
 *
 * Every store row carries a tag (head, position) written with its K/V;
 * the example exits non-zero if a head's rows do not hold exactly the
 * positions its instance holds, a new row is not free, a freed row is not
 * its victim's, or a layer's store is not layer_total + heads x slack
 * rows. It prints each layer's rows against the per-head buffers
 * (heads x head_capacity) the fixed layout would allocate, and the greedy
 * continuation next to the full-cache one.
 *
 * Usage: qk_group_pool [weights.pkvm [text.txt [prompt_len [steps]]]]
 * (defaults: the repository's model and held-out text, 320, 64).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pyramidkv/pyramidkv.h>

#include "pkm_model.h"

enum { BUDGET = 96, RATIO = 4, OBS = 16, SLACK = 1 };
#define NONE 0xFFFFFFFFu

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

/* One layer of the runtime: its group, its pooled store and the tags. */
typedef struct layer_rt {
    pb_kvcache_group *grp;
    pb_kvcache_group_plan_info info;
    float *k, *v;              /* [pool_rows][hd] */
    uint32_t *tag_h, *tag_p;   /* [pool_rows]: whose K/V a row holds */
} layer_rt;

/* Each head's view (pkm_slot with rows) from the group: held positions
 * and their rows in held order; checks every row's tag. */
static int sync_views(layer_rt *lr, pkm_slot *views, size_t kv_heads) {
    int bad = 0;
    for (size_t kv = 0; kv < kv_heads; ++kv) {
        pkm_slot *s = &views[kv];
        size_t n = 0, nr = 0;
        if (pb_kvcache_kept_positions(pb_kvcache_group_head(lr->grp,
                                                            (uint32_t)kv),
                                      s->pos, s->cap, &n) != PB_OK ||
            pb_kvcache_group_head_rows(lr->grp, (uint32_t)kv, s->row, s->cap,
                                       &nr) != PB_OK || n != nr)
            return 1;
        s->n = (uint32_t)n;
        for (size_t i = 0; i < n; ++i)
            bad |= lr->tag_h[s->row[i]] != kv || lr->tag_p[s->row[i]] != s->pos[i];
    }
    return bad;
}

/* Greedy continuation with the full cache: the baseline. */
static int run_full(pkm_model *m, const uint8_t *prompt, size_t len,
                    size_t steps, uint8_t *gen) {
    const pkm_config *c = &m->c;
    const size_t n_slots = (size_t)c->n_layers * c->n_kv_heads;
    pkm_slot *slots = pkm_slots_new(n_slots, (uint32_t)(len + steps + 1),
                                    c->head_dim);
    float *logits = malloc(c->vocab * sizeof *logits);
    int rc = slots == NULL || logits == NULL;
    uint32_t tok = prompt[0];
    for (size_t pos = 0; pos < len + steps && rc == 0; ++pos) {
        tok = pos < len ? prompt[pos] : tok;
        rc = pkm_model_step(m, slots, tok, (uint32_t)pos, NULL, 0, logits);
        if (pos + 1 >= len) {
            tok = argmax(logits, c->vocab);
            if (pos + 1 - len < steps) gen[pos + 1 - len] = (uint8_t)tok;
        }
    }
    pkm_slots_free(slots, n_slots);
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
    const size_t hd = c->head_dim, G = H / KV;
    const size_t cap = len + steps + 1u;
    uint8_t *prompt = malloc(len);
    if (len < OBS || len + steps >= c->max_ctx ||
        read_tokens(text, prompt, len) != len) {
        fprintf(stderr, "need a text of %zu bytes, OBS <= prompt, prompt + "
                        "steps < %u\n", len, (unsigned)c->max_ctx);
        return 1;
    }

    /* The library side: one group per layer with its pooled rows, one
     * Q/K scorer. */
    pb_qk_config qc = PB_QK_CONFIG_DEFAULT;
    qc.head_dim = (uint32_t)hd;
    qc.group = (uint32_t)G;
    qc.scale = 1.0f; /* the model's queries come scaled by 1/sqrt(hd) */
    qc.max_keys = (uint32_t)cap;
    qc.max_rows = OBS;
    pb_qk *qk = NULL;
    if (pb_qk_create(&qc, NULL, &qk) != PB_OK) return 1;
    layer_rt *lr = calloc(L, sizeof *lr);
    pkm_slot *views = calloc(L * KV, sizeof *views);
    size_t head_cap_max = 0;
    for (size_t l = 0; l < L; ++l) {
        pb_kvcache_config hc = PB_KVCACHE_CONFIG_DEFAULT;
        hc.budget = BUDGET;
        hc.layer = (uint32_t)l;
        hc.num_layers = (uint32_t)L;
        hc.pyramid_ratio = RATIO;
        hc.recent_window = OBS;
        hc.obs_window = OBS;
        pb_kvcache_group_params gp = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
        gp.num_heads = (uint32_t)KV;
        gp.slack = SLACK;
        gp.prefill_max_len = (uint32_t)len;
        gp.pooled_rows = 1u;
        lr[l].info.struct_size = (uint32_t)sizeof lr[l].info;
        if (pb_kvcache_group_create(&hc, &gp, NULL, &lr[l].grp) != PB_OK ||
            pb_kvcache_group_info(lr[l].grp, &lr[l].info) != PB_OK)
            return 1;
        /* The runtime side: one store of pool_rows K/V rows per layer,
         * each head a view of it (positions and rows, head_capacity
         * entries of indices) with one staging row for the new token. */
        const size_t P = (size_t)lr[l].info.pool_rows;
        lr[l].k = malloc(P * hd * sizeof(float));
        lr[l].v = malloc(P * hd * sizeof(float));
        lr[l].tag_h = malloc(P * sizeof(uint32_t));
        lr[l].tag_p = malloc(P * sizeof(uint32_t));
        if (!lr[l].k || !lr[l].v || !lr[l].tag_h || !lr[l].tag_p) return 1;
        for (size_t r = 0; r < P; ++r) lr[l].tag_h[r] = NONE;
        for (size_t kv = 0; kv < KV; ++kv) {
            pkm_slot *s = &views[l * KV + kv];
            s->cap = lr[l].info.head_capacity;
            s->k = lr[l].k;
            s->v = lr[l].v;
            s->pos = malloc(s->cap * sizeof *s->pos);
            s->row = malloc(s->cap * sizeof *s->row);
            s->stage = malloc(2u * hd * sizeof(float));
            if (!s->pos || !s->row || !s->stage) return 1;
        }
        if (lr[l].info.head_capacity > head_cap_max)
            head_cap_max = lr[l].info.head_capacity;
    }

    /* Prefill: the prompt through the model with the full cache; the last
     * OBS tokens' queries score it, then each layer's group compresses
     * all its heads and the survivors' K/V go to their rows. */
    pkm_slot *full = pkm_slots_new(L * KV, (uint32_t)len, (uint32_t)hd);
    float *logits = malloc(c->vocab * sizeof *logits);
    m.q_out = malloc(L * H * hd * sizeof *m.q_out);
    float *wq = malloc(L * H * OBS * hd * sizeof *wq);
    float *rows = malloc(KV * OBS * len * sizeof *rows);
    float *gk = malloc(KV * (head_cap_max + 1u) * hd * sizeof *gk);
    uint32_t *victims = malloc(KV * cap * sizeof *victims);
    uint32_t *vrows = malloc(KV * cap * sizeof *vrows);
    size_t *counts = malloc(KV * sizeof *counts);
    size_t *n_keys = malloc(KV * sizeof *n_keys);
    const void **kp = malloc(KV * sizeof *kp);
    uint32_t *newr = malloc(KV * sizeof *newr);
    if (!full || !logits || !m.q_out || !wq || !rows || !gk || !victims ||
        !vrows || !counts || !n_keys || !kp || !newr)
        return 1;
    for (size_t pos = 0; pos < len; ++pos) {
        if (pkm_model_step(&m, full, prompt[pos], (uint32_t)pos, NULL, 0,
                           logits) != 0)
            return 1;
        if (pos + OBS >= len) {
            const size_t r = pos + OBS - len;
            for (size_t lh = 0; lh < L * H; ++lh)
                memcpy(wq + (lh * OBS + r) * hd, m.q_out + lh * hd,
                       hd * sizeof *wq);
        }
    }
    int bad = 0;
    for (size_t l = 0; l < L; ++l) {
        for (size_t kv = 0; kv < KV; ++kv) {
            const float *q = wq + ((l * H + kv * G) * OBS) * hd;
            if (pb_qk_attention(qk, q, OBS * hd, hd, OBS, full[l * KV + kv].k,
                                hd, len, rows + kv * OBS * len) != PB_OK)
                return 1;
        }
        size_t n_kept = 0;
        if (pb_kvcache_group_prefill(lr[l].grp, rows, OBS * len, OBS, len,
                                     UINT64_MAX, NULL, 0, victims, KV * cap,
                                     counts, KV, &n_kept) != PB_OK)
            return 1;
        size_t at = 0;
        for (size_t kv = 0; kv < KV; ++kv) {
            size_t nr = 0;
            pkm_slot *s = &views[l * KV + kv];
            if (pb_kvcache_group_head_rows(lr[l].grp, (uint32_t)kv, s->row,
                                           s->cap, &nr) != PB_OK ||
                nr != counts[kv])
                return 1;
            for (size_t i = 0; i < nr; ++i, ++at) {
                const uint32_t r = s->row[i], p = victims[at]; /* kept */
                memcpy(lr[l].k + r * hd, full[l * KV + kv].k + p * hd,
                       hd * sizeof(float));
                memcpy(lr[l].v + r * hd, full[l * KV + kv].v + p * hd,
                       hd * sizeof(float));
                lr[l].tag_h[r] = (uint32_t)kv;
                lr[l].tag_p[r] = p;
            }
        }
        bad |= sync_views(&lr[l], views + l * KV, KV);
    }

    /* Decode: the model step writes each head's new K/V to its stage and
     * attends through the rows; then per layer the keys gathered by rows,
     * one group observe, the new rows filled, one group evict. */
    uint8_t *gen = malloc(steps), *fullgen = malloc(steps);
    uint32_t tok = argmax(logits, c->vocab);
    for (size_t t = 0; t < steps && !bad; ++t) {
        gen[t] = (uint8_t)tok;
        const uint32_t pos = (uint32_t)(len + t);
        if (pkm_model_step(&m, views, tok, pos, NULL, 0, logits) != 0)
            return 1;
        for (size_t l = 0; l < L; ++l) {
            for (size_t kv = 0; kv < KV; ++kv) {
                const pkm_slot *s = &views[l * KV + kv];
                float *dst = gk + kv * (head_cap_max + 1u) * hd;
                for (uint32_t i = 0; i + 1 < s->n; ++i)
                    memcpy(dst + i * hd, lr[l].k + (size_t)s->row[i] * hd,
                           hd * sizeof(float));
                memcpy(dst + (size_t)(s->n - 1) * hd, s->stage,
                       hd * sizeof(float));
                kp[kv] = dst;
                n_keys[kv] = s->n; /* the held keys and the new token's */
            }
            size_t n = 0;
            if (pb_qk_group_observe(qk, lr[l].grp, pos,
                                    m.q_out + l * H * hd, G * hd, hd, kp, hd,
                                    n_keys) != PB_OK ||
                pb_kvcache_group_new_rows(lr[l].grp, newr, KV) != PB_OK)
                return 1;
            for (size_t kv = 0; kv < KV; ++kv) {
                const pkm_slot *s = &views[l * KV + kv];
                const uint32_t r = newr[kv];
                bad |= r >= lr[l].info.pool_rows || lr[l].tag_h[r] != NONE;
                if (bad) break;
                memcpy(lr[l].k + (size_t)r * hd, s->stage, hd * sizeof(float));
                memcpy(lr[l].v + (size_t)r * hd, s->stage + hd,
                       hd * sizeof(float));
                lr[l].tag_h[r] = (uint32_t)kv;
                lr[l].tag_p[r] = pos;
            }
            if (pb_kvcache_group_evict_rows(lr[l].grp, UINT64_MAX, victims,
                                            vrows, KV * cap, counts, KV,
                                            &n) != PB_OK)
                return 1;
            size_t at = 0;
            for (size_t kv = 0; kv < KV; ++kv)
                for (size_t i = 0; i < counts[kv]; ++i, ++at) {
                    const uint32_t r = vrows[at];
                    bad |= lr[l].tag_h[r] != kv || lr[l].tag_p[r] != victims[at];
                    lr[l].tag_h[r] = NONE; /* free: K/V stays, unused */
                }
            bad |= sync_views(&lr[l], views + l * KV, KV);
        }
        tok = argmax(logits, c->vocab);
    }

    printf("layer  held  K/V rows (pooled = layer_total + %zu x %d)  "
           "per-head buffers (%zu x head_capacity)\n", KV, SLACK, KV);
    for (size_t l = 0; l < L; ++l) {
        const pb_kvcache_group_plan_info *in = &lr[l].info;
        const uint64_t held = pb_kvcache_group_kept_total(lr[l].grp);
        bad |= in->pool_rows != in->layer_total + KV * SLACK ||
               held > in->layer_total;
        printf("%5zu  %4llu  %5llu = %llu + %zu %40llu\n", l,
               (unsigned long long)held, (unsigned long long)in->pool_rows,
               (unsigned long long)in->layer_total, KV * SLACK,
               (unsigned long long)KV * in->head_capacity);
    }
    if (run_full(&m, prompt, len, steps, fullgen) != 0) return 1;
    size_t same = 0;
    while (same < steps && gen[same] == fullgen[same]) ++same;
    printf("prompt %zu tokens, %zu generated; the same as with the full "
           "cache for the first %zu\n", len, steps, same);
    printf("compressed: \"");
    for (size_t t = 0; t < steps; ++t)
        putchar(gen[t] >= 32 && gen[t] < 127 ? gen[t] : '.');
    printf("\"\nfull:       \"");
    for (size_t t = 0; t < steps; ++t)
        putchar(fullgen[t] >= 32 && fullgen[t] < 127 ? fullgen[t] : '.');
    printf("\"\n%s\n", bad ? "FAIL: a row does not hold what its head holds"
                           : "every head's rows hold its positions; no row "
                             "moved");

    for (size_t l = 0; l < L; ++l) {
        pb_kvcache_group_destroy(lr[l].grp);
        for (size_t kv = 0; kv < KV; ++kv) {
            pkm_slot *s = &views[l * KV + kv];
            s->k = s->v = NULL; /* the layer's store, freed below */
            pkm_slot_free(s);
        }
        free(lr[l].k);
        free(lr[l].v);
        free(lr[l].tag_h);
        free(lr[l].tag_p);
    }
    pb_qk_destroy(qk);
    pkm_slots_free(full, L * KV);
    free(lr);
    free(views);
    free(logits);
    free(m.q_out);
    m.q_out = NULL;
    free(wq);
    free(rows);
    free(gk);
    free(victims);
    free(vrows);
    free(counts);
    free(n_keys);
    free(kp);
    free(newr);
    free(gen);
    free(fullgen);
    free(prompt);
    pkm_model_free(&m);
    return bad;
}
