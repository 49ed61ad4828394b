/*
 * model_eval.c - the quality of libpyramidkv's cache management on a real
 * (small, trained) transformer at equal memory: for average budgets of
 * 1/32, 1/16, 1/8 and 1/4 of the context and every method of pkm_methods.c,
 * plus the full cache, it prints
 *   - needle accuracy: pass-key prompts (text with "The pass key is NNNNN."
 *     at one of 5 depths, asked at the end), greedy decode of the 5 digits,
 *     exact match;
 *   - held-out NLL: a prompt of held-out text, compressed at its end, then
 *     teacher-forced decoding with eviction; mean NLL per byte and its
 *     difference from the full cache;
 *   - retained attention mass per layer: during that decode, the share of
 *     the full-cache model's attention (same tokens) that falls on the
 *     positions the compressed cache holds, averaged over steps and heads;
 * with the positions held and K/V bytes of each configuration, and the full
 * model's per-layer attention entropy. docs/quality.md explains the numbers.
 *
 * --quick: a small run for ctest (short prompts, few samples) that also
 * checks that a library configuration which evicts nothing reproduces the
 * full cache's NLL bit for bit. Any integration error exits non-zero.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pkm_cache.h"
#include "pkm_io.h"
#include "pkm_model.h"

#define N_DEPTHS 5
#define KEY_DIGITS 5
#define N_FRACTIONS 4

static const char NEEDLE_FMT[] = " The pass key is %s. Remember it. ";
static const char QUESTION[] = "\nWhat is the pass key? The pass key is ";
static const unsigned budget_den[N_FRACTIONS] = {32, 16, 8, 4};

typedef struct opts {
    const char *model, *text, *tsv;
    uint32_t ctx, needles, nll_samples, nll_prompt, nll_decode;
    uint32_t obs, pool, cadence;
    uint64_t seed;
    int quick;
} opts;

typedef struct cfg {
    const pkm_method *method; /* NULL: full cache */
    uint32_t budget;
    int supported;
    char why[96];
    pkm_cache kc;
    uint32_t needle_ok, needle_n;
    double nll, mass[64];
    uint64_t nll_n, mass_n;
} cfg;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t argmax(const float *x, uint32_t n)
{
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static double nll_of(const float *lg, uint32_t n, uint32_t target)
{
    float mx = lg[0];
    for (uint32_t i = 1; i < n; i++)
        if (lg[i] > mx) mx = lg[i];
    double z = 0.0;
    for (uint32_t i = 0; i < n; i++) z += exp((double)(lg[i] - mx));
    return log(z) - (double)(lg[target] - mx);
}

static void usage(void)
{
    puts("usage: model_eval [--quick] [--model FILE] [--text FILE] [--ctx N]\n"
         "                  [--needles N] [--nll-samples N] [--obs N]\n"
         "                  [--cadence N] [--seed N] [--tsv FILE]\n"
         "Runs the bench/model transformer with libpyramidkv managing its\n"
         "K/V cache and prints needle accuracy, held-out NLL and retained\n"
         "attention mass per layer for every method of pkm_methods.c at\n"
         "budgets 1/32, 1/16, 1/8 and 1/4 of the context, plus the full\n"
         "cache. Defaults: the committed model and held-out text, ctx = the\n"
         "model's trained context, 300 needles (5 depths), 8 NLL samples,\n"
         "obs 16, cadence 1, seed 1. --quick: ctx 128, 5 needles, 1 NLL\n"
         "sample, and the no-eviction bit-exactness check. --tsv also\n"
         "writes the rows tab-separated (bench/model/plot_quality.sh).");
}

static int parse(int argc, char **argv, opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            o->quick = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            exit(0);
        }
        if (!v) {
            fprintf(stderr, "model_eval: %s needs a value (--help)\n", a);
            return -1;
        }
        i++;
        char *end = NULL;
        const unsigned long long n = strtoull(v, &end, 10);
        const int num_ok = end && *end == 0 && n <= 1000000;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--text")) o->text = v;
        else if (!strcmp(a, "--tsv")) o->tsv = v;
        else if (!num_ok) {
            fprintf(stderr, "model_eval: bad value for %s: %s\n", a, v);
            return -1;
        } else if (!strcmp(a, "--ctx")) o->ctx = (uint32_t)n;
        else if (!strcmp(a, "--needles")) o->needles = (uint32_t)n;
        else if (!strcmp(a, "--nll-samples")) o->nll_samples = (uint32_t)n;
        else if (!strcmp(a, "--obs")) o->obs = (uint32_t)n;
        else if (!strcmp(a, "--cadence")) o->cadence = (uint32_t)n;
        else if (!strcmp(a, "--seed")) o->seed = n;
        else {
            fprintf(stderr, "model_eval: unknown option %s (--help)\n", a);
            return -1;
        }
    }
    return 0;
}

/* Builds a pass-key prompt of exactly len bytes ending with QUESTION, the
 * needle at `depth` (0..1) of the haystack; key gets the 5 digits. Same
 * layout as train.py passkey_sample without the answer. */
static int needle_prompt(const unsigned char *text, size_t text_len,
                         uint32_t len, double depth, uint64_t *rng,
                         unsigned char *out, char key[KEY_DIGITS + 1])
{
    char needle[64];
    snprintf(key, KEY_DIGITS + 1, "%05u",
             (unsigned)(splitmix(rng) % 100000u));
    snprintf(needle, sizeof needle, NEEDLE_FMT, key);
    const size_t nl = strlen(needle), ql = strlen(QUESTION);
    if (len < nl + ql + 8 || text_len < len + 2) return -1;
    const size_t hay = len - nl - ql;
    const size_t start = (size_t)(splitmix(rng) % (text_len - hay - 1));
    const size_t pos = (size_t)floor(depth * (double)hay + 0.5);
    memcpy(out, text + start, pos);
    memcpy(out + pos, needle, nl);
    memcpy(out + pos + nl, text + start + pos, hay - pos);
    memcpy(out + hay + nl, QUESTION, ql);
    return 0;
}

typedef struct work {
    pkm_model *m;
    pkm_slot *full;
    float *rows, *step_attn, *full_attn, *logits0, *logits;
    uint32_t W, stride;
} work;

/* The full prefill is shared by every configuration; each then compresses
 * it and decodes. */
static int run_needle(work *w, cfg *cfgs, size_t n_cfg,
                      const unsigned char *prompt, uint32_t len,
                      const char *key)
{
    if (pkm_prefill_full(w->m, w->full, prompt, len, w->rows, len,
                         w->logits0, w->step_attn) != 0)
        return -1;
    for (size_t c = 0; c < n_cfg; c++) {
        cfg *k = &cfgs[c];
        if (!k->supported) continue;
        if (pkm_cache_reset(&k->kc) != 0 ||
            pkm_cache_prefill(&k->kc, w->full, w->rows, len, len) != 0)
            return -1;
        uint32_t tok = argmax(w->logits0, w->m->c.vocab);
        int ok = tok == (unsigned char)key[0];
        for (uint32_t j = 1; j < KEY_DIGITS; j++) {
            const uint32_t pos = len + j - 1;
            if (pkm_model_step(w->m, k->kc.slots, tok, pos, w->step_attn,
                               w->stride, w->logits) != 0 ||
                pkm_cache_after_step(&k->kc, w->step_attn, w->stride, pos) != 0)
                return -1;
            tok = argmax(w->logits, w->m->c.vocab);
            ok = ok && tok == (unsigned char)key[j];
        }
        k->needle_ok += (uint32_t)ok;
        k->needle_n++;
    }
    return 0;
}

/* Held-out NLL: prompt tok[0 .. P-1], then predict tok[P .. P+D-1]. The
 * full cache (cfgs[0]) runs first and leaves its attention in full_attn
 * for the retained-mass figure; ent gets the per-layer entropy sums. */
static int run_nll(work *w, cfg *cfgs, size_t n_cfg, const unsigned char *tok,
                   uint32_t P, uint32_t D, double *ent, uint64_t *ent_n)
{
    const pkm_config *mc = &w->m->c;
    const size_t LH = (size_t)mc->n_layers * mc->n_heads;
    const uint32_t g = mc->n_heads / mc->n_kv_heads;
    if (pkm_prefill_full(w->m, w->full, tok, P, w->rows, P, w->logits0,
                         w->step_attn) != 0)
        return -1;
    for (size_t c = 0; c < n_cfg; c++) {
        cfg *k = &cfgs[c];
        if (!k->supported) continue;
        if (pkm_cache_reset(&k->kc) != 0 ||
            pkm_cache_prefill(&k->kc, w->full, w->rows, P, P) != 0)
            return -1;
        double nll = nll_of(w->logits0, mc->vocab, tok[P]);
        for (uint32_t t = P; t + 1 < P + D; t++) {
            const size_t step = t - P;
            float *attn = c == 0 ? w->full_attn + step * LH * w->stride
                                 : w->step_attn;
            if (pkm_model_step(w->m, k->kc.slots, tok[t], t, attn, w->stride,
                               w->logits) != 0)
                return -1;
            nll += nll_of(w->logits, mc->vocab, tok[t + 1]);
            const float *fa = w->full_attn + step * LH * w->stride;
            for (uint32_t l = 0; l < mc->n_layers; l++) {
                for (uint32_t h = 0; h < mc->n_heads; h++) {
                    const pkm_slot *s =
                        &k->kc.slots[(size_t)l * mc->n_kv_heads + h / g];
                    const float *row = fa + ((size_t)l * mc->n_heads + h) * w->stride;
                    double m = 0.0;
                    for (uint32_t i = 0; i < s->n; i++) m += row[s->pos[i]];
                    k->mass[l] += m;
                    if (c == 0) {
                        double e = 0.0;
                        for (uint32_t i = 0; i <= t; i++)
                            if (row[i] > 0.0f)
                                e -= (double)row[i] * log((double)row[i]);
                        ent[l] += e;
                        ent_n[l]++;
                    }
                }
            }
            k->mass_n += mc->n_heads;
            if (pkm_cache_after_step(&k->kc, attn, w->stride, t) != 0)
                return -1;
        }
        k->nll += nll;
        k->nll_n += D;
    }
    return 0;
}

/* One line per supported configuration: method, budget denominator
 * (0: full), budget, positions, K/V bytes, needle %, NLL, dNLL, then the
 * retained mass of each layer. */
static int write_tsv(const char *path, const cfg *cfgs, size_t n_cfg,
                     uint32_t n_layers, uint32_t head_dim, double full_nll)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "method\tden\tbudget\tpositions\tkv_bytes\tneedle\tnll\tdnll");
    for (uint32_t l = 0; l < n_layers; l++) fprintf(f, "\tmass%u", l);
    fprintf(f, "\n");
    for (size_t c = 0; c < n_cfg; c++) {
        const cfg *k = &cfgs[c];
        if (!k->supported) continue;
        const double nll = k->nll_n ? k->nll / (double)k->nll_n : 0.0;
        fprintf(f, "%s\t%u\t%u\t%llu\t%llu\t%.4f\t%.6f\t%.6f",
                k->method ? k->method->name : "full cache",
                k->method ? budget_den[(c - 1) / pkm_method_count] : 0u,
                k->budget, (unsigned long long)k->kc.positions,
                (unsigned long long)(k->kc.positions * 2u * head_dim * 4u),
                k->needle_n ? 100.0 * k->needle_ok / k->needle_n : 0.0, nll,
                nll - full_nll);
        for (uint32_t l = 0; l < n_layers; l++)
            fprintf(f, "\t%.4f", k->mass_n ? k->mass[l] / (double)k->mass_n : 0.0);
        fprintf(f, "\n");
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* Profiles the window rows of `n` held-out prompts of len bytes and sets
 * pkm_profile_weights (k for 90 % of the mass, at least obs + 1). */
static int calibrate(pkm_model *m, const opts *o, const unsigned char *text,
                     size_t text_len, uint32_t len, uint32_t max_len,
                     double *bits, uint32_t *ratio)
{
    const pkm_config *mc = &m->c;
    const size_t LH = (size_t)mc->n_layers * mc->n_heads;
    const uint32_t g = mc->n_heads / mc->n_kv_heads;
    const uint32_t n = o->quick ? 1 : 8;
    const uint32_t W = o->obs < len ? o->obs : len;
    const size_t n_slots = (size_t)mc->n_layers * mc->n_kv_heads;
    pb_profile_params pp = PB_PROFILE_PARAMS_DEFAULT;
    pp.num_layers = mc->n_layers;
    pp.max_len = max_len;
    pb_profile *prof = NULL;
    pkm_slot *full = calloc(n_slots, sizeof *full);
    float *rows = malloc(LH * W * len * sizeof(float));
    float *red = malloc((size_t)W * len * sizeof(float));
    float *step = malloc(LH * m->rope_len * sizeof(float));
    int rc = -1;
    if (!full || !rows || !red || !step ||
        pb_profile_create(&pp, NULL, &prof) != PB_OK)
        goto out;
    for (size_t s = 0; s < n_slots; s++)
        if (pkm_slot_init(&full[s], max_len, mc->head_dim) != 0) goto out;
    uint64_t rng = o->seed * 0x9E3779B97F4A7C15ull + 5;
    for (uint32_t i = 0; i < n; i++) {
        const size_t off = (size_t)(splitmix(&rng) % (text_len - len - 1));
        if (pkm_prefill_full(m, full, text + off, len, rows, W, NULL, step) != 0)
            goto out;
        for (uint32_t l = 0; l < mc->n_layers; l++) {
            for (uint32_t kv = 0; kv < mc->n_kv_heads; kv++) {
                const size_t block = (size_t)W * len;
                if (pb_kvcache_head_reduce(rows + ((size_t)l * mc->n_heads + (size_t)kv * g) * block,
                                           g, block, block, PB_HEAD_REDUCE_MEAN,
                                           red) != PB_OK)
                    goto out;
                for (uint32_t j = 0; j < W; j++) {
                    const uint32_t q = len - W + j;
                    if (pb_profile_add_row(prof, l, red + (size_t)j * len,
                                           (size_t)q + 1) != PB_OK)
                        goto out;
                }
            }
        }
    }
    if (pb_profile_weights(prof, 900000u, o->obs + 1, pkm_profile_weights,
                           PKM_MAX_LAYERS) != PB_OK ||
        pb_profile_fit_ratio(pkm_profile_weights, mc->n_layers, 8, ratio,
                             NULL) != PB_OK)
        goto out;
    for (uint32_t l = 0; l < mc->n_layers; l++) {
        double support = 0.0;
        if (pb_profile_entropy(prof, l, &bits[l], &support) != PB_OK) goto out;
    }
    pkm_profile_ready = 1;
    rc = 0;
out:
    pb_profile_destroy(prof);
    if (full)
        for (size_t s = 0; s < n_slots; s++) pkm_slot_free(&full[s]);
    free(full);
    free(rows);
    free(red);
    free(step);
    return rc;
}

int main(int argc, char **argv)
{
    opts o = {PKM_DATA_DIR "/model.pkvm", PKM_DATA_DIR "/heldout.txt", NULL,
              0, 300, 8, 0, 0, 16, 7, 1, 1, 0};
    if (parse(argc, argv, &o) != 0) return 2;
    if (o.quick) {
        o.ctx = o.ctx ? o.ctx : 128;
        o.needles = N_DEPTHS;
        o.nll_samples = 1;
        o.nll_prompt = 32;
        o.nll_decode = 16;
    }
    const clock_t t0 = clock();
    static pkm_model m;
    char err[256];
    if (pkm_model_load(&m, o.model, err, sizeof err) != 0) {
        fprintf(stderr, "model_eval: %s\n", err);
        return 1;
    }
    const pkm_config *mc = &m.c;
    if (!o.ctx) o.ctx = mc->max_ctx;
    if (!o.nll_prompt) o.nll_prompt = o.ctx / 2;
    if (!o.nll_decode) o.nll_decode = o.ctx - o.nll_prompt;
    if (o.ctx < 96 || o.ctx + 8 > m.rope_len || mc->n_layers > 64 ||
        o.cadence == 0 || o.obs == 0) {
        fprintf(stderr, "model_eval: bad --ctx/--cadence/--obs\n");
        return 2;
    }
    size_t text_len = 0;
    unsigned char *text = pkm_read_file(o.text, &text_len);
    if (!text || text_len < 4u * o.ctx) {
        fprintf(stderr, "model_eval: cannot read held-out text %s\n", o.text);
        return 1;
    }
    const uint32_t max_len = o.ctx + 8;
    const uint32_t plen = o.ctx - 1 - KEY_DIGITS; /* needle prompt length */

    /* calibration: the profile of this model's attention (the observation
     * window rows of held-out prompts, each KV head's group reduced) gives
     * the weights of the profile schedule, as pyramidkv calibrate does */
    double prof_bits[PKM_MAX_LAYERS] = {0};
    uint32_t fit_ratio = 0;
    if (calibrate(&m, &o, text, text_len, plen, max_len, prof_bits,
                  &fit_ratio) != 0) {
        fprintf(stderr, "model_eval: calibration failed\n");
        return 1;
    }

    /* configurations: the full cache, then every (budget, method) */
    const size_t n_cfg = 1 + (size_t)N_FRACTIONS * pkm_method_count;
    cfg *cfgs = calloc(n_cfg, sizeof *cfgs);
    work w = {&m, NULL, NULL, NULL, NULL, NULL, NULL, 0, m.rope_len};
    w.W = o.obs < o.nll_prompt ? o.obs : o.nll_prompt; /* as printed */
    const size_t LH = (size_t)mc->n_layers * mc->n_heads;
    const size_t n_slots = (size_t)mc->n_layers * mc->n_kv_heads;
    w.full = calloc(n_slots, sizeof *w.full);
    /* every prompt row is captured: the window scorer uses the last obs of
     * them, the others are fed all of them (pkm_cache_prefill) */
    w.rows = malloc(LH * max_len * max_len * sizeof(float));
    w.step_attn = malloc(LH * w.stride * sizeof(float));
    w.full_attn = calloc((size_t)o.nll_decode * LH * w.stride, sizeof(float));
    w.logits0 = malloc(mc->vocab * sizeof(float));
    w.logits = malloc(mc->vocab * sizeof(float));
    unsigned char *buf = malloc(max_len);
    if (!cfgs || !w.full || !w.rows || !w.step_attn || !w.full_attn ||
        !w.logits0 || !w.logits || !buf) {
        fprintf(stderr, "model_eval: out of memory\n");
        return 1;
    }
    for (size_t s = 0; s < n_slots; s++)
        if (pkm_slot_init(&w.full[s], max_len, mc->head_dim) != 0) return 1;
    for (size_t c = 0; c < n_cfg; c++) {
        cfg *k = &cfgs[c];
        pkm_cache_params p = {NULL, 0, 0, o.obs, o.pool, o.cadence, max_len};
        if (c > 0) {
            const size_t f = (c - 1) / pkm_method_count;
            k->method = &pkm_methods[(c - 1) % pkm_method_count];
            k->budget = o.ctx / budget_den[f];
            p.method = k->method;
            p.budget = k->budget;
            p.recent_window = k->budget / 4 ? k->budget / 4 : 1;
        }
        const int r = pkm_cache_init(&k->kc, &m, &p, k->why, sizeof k->why);
        if (r < 0) {
            fprintf(stderr, "model_eval: %s\n", k->why);
            return 1;
        }
        k->supported = r == 0;
        if (!k->method) /* the full cache holds the context, not its slack */
            k->kc.positions = (uint64_t)n_slots * o.ctx;
    }
    /* --quick also proves the integration exact: a library configuration
     * whose shares exceed the sequence evicts nothing and must reproduce
     * the full cache's NLL bit for bit */
    cfg exact = {0};
    if (o.quick) {
        pkm_cache_params p = {&pkm_methods[0], max_len, 4, o.obs, o.pool,
                              o.cadence, max_len};
        if (pkm_cache_init(&exact.kc, &m, &p, err, sizeof err) != 0) {
            fprintf(stderr, "model_eval: %s\n", err);
            return 1;
        }
        exact.supported = 1;
    }

    /* needles */
    const double depths[N_DEPTHS] = {0.0, 0.25, 0.5, 0.75, 1.0};
    uint64_t rng = o.seed * 0x100000001B3ull + 17;
    for (uint32_t i = 0; i < o.needles; i++) {
        char key[KEY_DIGITS + 1];
        if (needle_prompt(text, text_len, plen, depths[i % N_DEPTHS], &rng, buf,
                          key) != 0 ||
            run_needle(&w, cfgs, n_cfg, buf, plen, key) != 0) {
            fprintf(stderr, "model_eval: needle %u failed\n", i);
            return 1;
        }
    }
    /* held-out NLL and retained mass */
    double ent[64] = {0};
    uint64_t ent_n[64] = {0};
    const uint32_t nl = o.nll_prompt + o.nll_decode;
    for (uint32_t s = 0; s < o.nll_samples; s++) {
        const size_t off = (size_t)(splitmix(&rng) % (text_len - nl - 1));
        if (run_nll(&w, cfgs, n_cfg, text + off, o.nll_prompt, o.nll_decode,
                    ent, ent_n) != 0) {
            fprintf(stderr, "model_eval: NLL sample %u failed\n", s);
            return 1;
        }
        if (o.quick) {
            /* the exact configuration, after the full cache (cfgs[0]) */
            cfg pair[2] = {cfgs[0], exact};
            pair[0].supported = 0; /* keep full_attn from this sample */
            if (run_nll(&w, pair, 2, text + off, o.nll_prompt, o.nll_decode,
                        ent, ent_n) != 0)
                return 1;
            exact = pair[1];
        }
    }
    int status = 0;
    if (o.quick && exact.nll != cfgs[0].nll) {
        fprintf(stderr,
                "model_eval: a library cache that evicts nothing gave NLL sum "
                "%.17g, the full cache %.17g\n", exact.nll, cfgs[0].nll);
        status = 1;
    }

    /* the table */
    const double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("model: %u layers, %u query / %u KV heads of %u, trained %llu "
           "steps (%llu tokens)\n",
           mc->n_layers, mc->n_heads, mc->n_kv_heads, mc->head_dim,
           (unsigned long long)mc->train_step,
           (unsigned long long)mc->train_tokens);
    printf("context %u; needles: %u prompts of %u bytes over %d depths; NLL: "
           "%u samples, prompt %u, %u teacher-forced bytes; obs window %u, "
           "pool %u, recent = budget/4, cadence %u\n",
           o.ctx, o.needles, plen, N_DEPTHS, o.nll_samples, o.nll_prompt,
           o.nll_decode, w.W, o.pool, o.cadence);
    printf("positions = sum of (layer, KV head) shares; K/V bytes = positions "
           "x 2 x %u x 4 (float32); peak = slot rows allocated\n",
           mc->head_dim);
    const double full_nll = cfgs[0].nll_n ? cfgs[0].nll / (double)cfgs[0].nll_n : 0.0;
    printf("\n%-7s %-32s %9s %10s %7s %8s %8s %8s  retained attention mass, layer 0..%u\n",
           "budget", "method", "positions", "K/V bytes", "peak", "needle",
           "NLL", "dNLL", mc->n_layers - 1);
    for (size_t c = 0; c < n_cfg; c++) {
        const cfg *k = &cfgs[c];
        char b[16];
        if (k->method) snprintf(b, sizeof b, "1/%u=%u",
                                budget_den[(c - 1) / pkm_method_count], k->budget);
        else snprintf(b, sizeof b, "full");
        const char *name = k->method ? k->method->name : "full cache";
        if (!k->supported) {
            printf("%-7s %-32s not in this library (%s)\n", b, name, k->why);
            continue;
        }
        const double nll = k->nll_n ? k->nll / (double)k->nll_n : 0.0;
        printf("%-7s %-32s %9llu %10llu %7llu %7.1f%% %8.4f %+8.4f ", b, name,
               (unsigned long long)k->kc.positions,
               (unsigned long long)(k->kc.positions * 2u * mc->head_dim * 4u),
               (unsigned long long)k->kc.capacity,
               k->needle_n ? 100.0 * k->needle_ok / k->needle_n : 0.0, nll,
               nll - full_nll);
        for (uint32_t l = 0; l < mc->n_layers; l++)
            printf(" %.3f", k->mass_n ? k->mass[l] / (double)k->mass_n : 0.0);
        printf("\n");
    }
    if (o.tsv && write_tsv(o.tsv, cfgs, n_cfg, mc->n_layers, mc->head_dim, full_nll) != 0) {
        fprintf(stderr, "model_eval: cannot write %s\n", o.tsv);
        status = 1;
    }
    printf("\nfull-cache attention entropy per layer (nats, mean over decode "
           "steps and heads):");
    for (uint32_t l = 0; l < mc->n_layers; l++)
        printf(" %.3f", ent_n[l] ? ent[l] / (double)ent_n[l] : 0.0);
    printf("\nprofile of the prompt's observation window (pb_profile, %s "
           "calibration prompts): entropy per layer in bits:",
           o.quick ? "1" : "8");
    for (uint32_t l = 0; l < mc->n_layers; l++) printf(" %.2f", prof_bits[l]);
    printf("\nprofile schedule weights (k for 90 %% of the mass):");
    for (uint32_t l = 0; l < mc->n_layers; l++)
        printf(" %u", pkm_profile_weights[l]);
    printf("; nearest arithmetic ratio (pb_profile_fit_ratio, up to 8): %u\n",
           fit_ratio);
    printf("\nrun time %.1f s (CPU)\n", secs);
    if (o.quick) {
        printf("quick check: no-eviction library NLL %s the full cache's\n",
               status ? "DIFFERS from" : "equals");
        pkm_cache_free(&exact.kc);
    }

    for (size_t c = 0; c < n_cfg; c++) pkm_cache_free(&cfgs[c].kc);
    for (size_t s = 0; s < n_slots; s++) pkm_slot_free(&w.full[s]);
    free(cfgs);
    free(w.full);
    free(w.rows);
    free(w.step_attn);
    free(w.full_attn);
    free(w.logits0);
    free(w.logits);
    free(buf);
    free(text);
    pkm_model_free(&m);
    return status;
}
