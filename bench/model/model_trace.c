/*
 * model_trace.c - records an attention trace (docs/trace_format.md,
 * version 2) of the bench model (docs/model.md) on its own kind of prompt:
 * pass-key prompts of held-out text (pkm_prompt.h; the needle at depths 0,
 * 1/4, 1/2, 3/4, 1 in turn) followed by their answer, each run through the
 * full cache. Per (layer, KV head), the group's query heads reduced to
 * their mean (query head 0xFFFFFFFF) as the bench model's SnapKV
 * integration reduces them (--query-heads each: every query head a
 * stream of its own): one prefill record, the last --obs rows of the
 * part that is compressed, and one future record, the rows of every token
 * after it. --protocol aware compresses the whole prompt (the question in
 * the window; the future is the answer), agnostic the context only (the
 * future is the question and the answer), as model_eval's two protocols
 * do. First, unless --pref-texts 0, the preference records (version 3)
 * of what the bench model's runtime measures CAKE's layer preference on:
 * the last --obs rows of every query head on --pref-texts needle-free
 * excerpts, model_eval's calibration draws of its seed --pref-seed.
 * `pyramidkv calibrate` reads the result (docs/calibrate.md). The shape
 * (layers, heads, group) comes from the model file.
 *
 *   model_trace --out FILE [--prompts N] [--protocol aware|agnostic]
 *               [--ctx N] [--obs N] [--seed S] [--model FILE] [--text FILE]
 *               [--query-heads reduced|each] [--pref-texts N]
 *               [--pref-seed S]
 *
 * The prompts are drawn with their own seed (default 7) and stream, never
 * model_eval's (eval_prompts.c seeds its own). Exit 0, 1 on a failure, 2
 * on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkm_io.h"
#include "pkm_model.h"
#include "pkm_prompt.h"
#include "pyramidkv/pyramidkv.h"
#include "trace_io.h"

#define N_DEPTHS 5

static int usage(void)
{
    fprintf(stderr,
            "usage: model_trace --out FILE [--prompts N] [--protocol P]\n"
            "                   [--ctx N] [--obs N] [--seed S] [--model FILE]\n"
            "                   [--text FILE] [--query-heads reduced|each]\n"
            "                   [--pref-texts N] [--pref-seed S]\n"
            "Records the attention of the bench model on pass-key prompts as\n"
            "a trace file: the observation window of the compressed part and\n"
            "the rows of every later token (defaults: 20 prompts, protocol\n"
            "aware - the question compressed with the context; agnostic -\n"
            "the context compressed before the question - ctx 512, obs 16,\n"
            "seed 7; --query-heads reduced writes each group's mean, each\n"
            "every query head as a stream of its own), and the window rows\n"
            "of every query head on --pref-texts needle-free excerpts that\n"
            "CAKE's preference is measured on (default 8, model_eval's\n"
            "calibration draws of --pref-seed, default 1; 0: none).\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *model = PKM_DATA_DIR "/model.pkvm";
    const char *text_path = PKM_DATA_DIR "/heldout.txt";
    unsigned long prompts = 20, ctx = 512, obs = 16, seed = 7;
    unsigned long pref_texts = 8, pref_seed = 1;
    int agnostic = 0, each = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) return usage();
        const char *v = argv[++i];
        char *end = NULL;
        unsigned long n = strtoul(v, &end, 10);
        const int num = end != v && *end == '\0';
        if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--text")) text_path = v;
        else if (!strcmp(a, "--protocol") && !strcmp(v, "aware")) agnostic = 0;
        else if (!strcmp(a, "--protocol") && !strcmp(v, "agnostic"))
            agnostic = 1;
        else if (!strcmp(a, "--query-heads") && !strcmp(v, "reduced"))
            each = 0;
        else if (!strcmp(a, "--query-heads") && !strcmp(v, "each"))
            each = 1;
        else if (!strcmp(a, "--prompts") && num && n >= 1 && n <= 100000)
            prompts = n;
        else if (!strcmp(a, "--ctx") && num) ctx = n;
        else if (!strcmp(a, "--obs") && num && n >= 1) obs = n;
        else if (!strcmp(a, "--seed") && num) seed = n;
        else if (!strcmp(a, "--pref-texts") && num && n <= 100000)
            pref_texts = n;
        else if (!strcmp(a, "--pref-seed") && num) pref_seed = n;
        else return usage();
    }
    if (out == NULL) return usage();
    char err[256];
    pkm_model m;
    if (pkm_model_load(&m, model, err, sizeof err) != 0) {
        fprintf(stderr, "model_trace: %s\n", err);
        return 1;
    }
    const pkm_config *mc = &m.c;
    if (ctx < 96 || ctx + 8 > m.rope_len || obs >= ctx - 1 - PKM_KEY_DIGITS) {
        fprintf(stderr, "model_trace: bad --ctx or --obs\n");
        pkm_model_free(&m);
        return 2;
    }
    size_t text_len = 0;
    unsigned char *text = pkm_read_file(text_path, &text_len);
    /* The sequence: the prompt, then the answer's digits; P positions are
     * compressed, F follow. */
    const uint32_t len = (uint32_t)ctx - 1u - PKM_KEY_DIGITS, W = (uint32_t)obs;
    const uint32_t T = len + PKM_KEY_DIGITS;
    const uint32_t P = agnostic ? len - PKM_QUESTION_LEN : len, F = T - P;
    const uint32_t g = mc->n_heads / mc->n_kv_heads, n_q = each ? g : 1u;
    const size_t n_slots = (size_t)mc->n_layers * mc->n_kv_heads;
    const size_t LH = (size_t)mc->n_layers * mc->n_heads;
    const size_t block = (size_t)(W + F) * T;
    pkm_slot *full = calloc(n_slots, sizeof *full);
    float *rows = malloc(LH * block * sizeof(float));
    float *red = malloc(block * sizeof(float));
    float *pre = malloc((size_t)W * P * sizeof(float));
    float *step = malloc(LH * m.rope_len * sizeof(float));
    unsigned char *buf = malloc(T);
    pb_tr_writer *w = NULL;
    int rc = 1;
    if (P <= W) {
        fprintf(stderr, "model_trace: --obs %lu leaves nothing to compress\n",
                obs);
        goto done;
    }
    if (!text || !full || !rows || !red || !pre || !step || !buf) {
        fprintf(stderr, "model_trace: out of memory or no text %s\n",
                text_path);
        goto done;
    }
    for (size_t s = 0; s < n_slots; s++)
        if (pkm_slot_init(&full[s], T, mc->head_dim) != 0) goto done;
    const pb_tr_shape shape = {mc->n_layers, mc->n_kv_heads, g,
                               pref_texts > 0 ? 3u : 2u};
    if (pb_tr_writer_open(out, &shape, &w, err, sizeof err) != 0) {
        fprintf(stderr, "model_trace: %s\n", err);
        goto done;
    }
    if (text_len < (size_t)len + 2u) {
        fprintf(stderr, "model_trace: the text %s is shorter than a prompt\n",
                text_path);
        goto done;
    }
    /* The preference records: every query head's last W rows over the
     * len keys of each calibration excerpt, as model_eval measures CAKE's
     * preference (eval_calibrate). */
    uint64_t crng = pkm_calibration_rng(pref_seed);
    for (unsigned long p = 0; p < pref_texts; p++) {
        const size_t off = pkm_calibration_offset(text_len, len, &crng);
        if (pkm_prefill_full(&m, full, text + off, len, rows, W, NULL,
                             step) != 0) {
            fprintf(stderr, "model_trace: calibration text %lu failed\n", p);
            goto done;
        }
        for (uint32_t l = 0; l < mc->n_layers; l++)
            for (uint32_t h = 0; h < mc->n_heads; h++) {
                pb_tr_record rec;
                memset(&rec, 0, sizeof rec);
                rec.kind = PB_TR_PREFERENCE;
                rec.dtype = PB_TR_F32;
                rec.layer = l;
                rec.head = h / g;
                rec.qhead = h % g;
                rec.query = len - W;
                rec.rows = W;
                rec.length = len;
                if (pb_tr_writer_add(w, &rec,
                                     rows + ((size_t)l * mc->n_heads + h) *
                                                W * len,
                                     err, sizeof err) != 0) {
                    fprintf(stderr, "model_trace: %s\n", err);
                    goto done;
                }
            }
    }
    static const double depths[N_DEPTHS] = {0.0, 0.25, 0.5, 0.75, 1.0};
    uint64_t rng = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 11u;
    for (unsigned long p = 0; p < prompts; p++) {
        char key[PKM_KEY_DIGITS + 1];
        if (pkm_needle_prompt(text, text_len, len, depths[p % N_DEPTHS], &rng,
                              buf, key) != 0 ||
            (memcpy(buf + len, key, PKM_KEY_DIGITS),
             pkm_prefill_full(&m, full, buf, T, rows, W + F, NULL, step)) != 0) {
            fprintf(stderr, "model_trace: prompt %lu failed\n", p);
            goto done;
        }
        for (uint32_t l = 0; l < mc->n_layers; l++)
            for (uint32_t kq = 0; kq < mc->n_kv_heads * n_q; kq++) {
                const uint32_t kv = kq / n_q, q = kq % n_q;
                const float *grp =
                    rows + ((size_t)l * mc->n_heads + (size_t)kv * g) * block;
                if (each)
                    memcpy(red, grp + (size_t)q * block, block * sizeof *red);
                else if (pb_kvcache_head_reduce(grp, g, block, block,
                                                PB_HEAD_REDUCE_MEAN,
                                                red) != PB_OK)
                    goto done;
                /* The window rows over the P compressed keys, then the
                 * future rows over all T. */
                for (uint32_t j = 0; j < W; j++)
                    memcpy(pre + (size_t)j * P, red + (size_t)j * T,
                           P * sizeof *pre);
                pb_tr_record rec;
                memset(&rec, 0, sizeof rec);
                rec.kind = PB_TR_PREFILL;
                rec.dtype = PB_TR_F32;
                rec.layer = l;
                rec.head = kv;
                rec.qhead = each ? q : 0xFFFFFFFFu;
                rec.query = P - W;
                rec.rows = W;
                rec.length = P;
                pb_tr_record fut = rec;
                fut.kind = PB_TR_FUTURE;
                fut.query = P;
                fut.rows = F;
                fut.length = T;
                if (pb_tr_writer_add(w, &rec, pre, err, sizeof err) != 0 ||
                    pb_tr_writer_add(w, &fut, red + (size_t)W * T, err,
                                     sizeof err) != 0) {
                    fprintf(stderr, "model_trace: %s\n", err);
                    goto done;
                }
            }
    }
    rc = 0;
done:
    if (pb_tr_writer_close(w, err, sizeof err) != 0 && rc == 0) {
        fprintf(stderr, "model_trace: %s\n", err);
        rc = 1;
    }
    if (full)
        for (size_t s = 0; s < n_slots; s++) pkm_slot_free(&full[s]);
    free(full);
    free(rows);
    free(red);
    free(pre);
    free(step);
    free(buf);
    free(text);
    pkm_model_free(&m);
    return rc;
}
