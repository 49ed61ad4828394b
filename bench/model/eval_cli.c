/*
 * eval_cli.c - model_eval's command line: the usage text, the options into
 * an eval_opts (with the defaults of the quick comparison, --quick and
 * --full), and the method rows a --methods list names (see eval.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "eval_tasks.h"

#define UNSET UINT32_MAX

static void usage(FILE *f)
{
    fputs(
"usage: model_eval [options]\n"
"Runs the bench/model transformer with libpyramidkv managing its K/V cache\n"
"and prints, per method and budget at equal held positions, the accuracy on\n"
"a task's prompts under two protocols, with the paired difference from\n"
"uniform SnapKV (+- its standard error), and optionally held-out NLL.\n"
"Without options: the quick comparison (uniform SnapKV, PyramidKV r=4 and\n"
"the head-adaptive row if the library has it, budget 1/4, 50 prompts, both\n"
"protocols; about a minute).\n"
"\n"
"  --methods LIST   comma-separated keys (--list-methods), or all\n"
"  --budgets LIST   denominators: 4,8 = budgets of 1/4 and 1/8 of --ctx\n"
"  --protocol P     aware | agnostic | both  (default both)\n"
"                   aware: compress the whole prompt, question included;\n"
"                   agnostic: compress the context, then feed the question\n"
"                   as decode steps (evicting as during the answer)\n"
"  --task NAME      the built-in prompts (docs/quality.md, \"The tasks\"):\n"
"                   needle      one pass key, depths 0,1/4,1/2,3/4,1 in turn\n"
"                               (the default)\n"
"                   multikey    four named keys, one asked\n"
"                   multivalue  one name with four values, all asked\n"
"                   vartrack    two chains of assignments, one value's\n"
"                               variables asked\n"
"                   multiq      the multikey context, all four keys asked in\n"
"                               turn of one compressed cache (agnostic only)\n"
"  --needles N      how many built-in prompts (default 50)\n"
"  --prompts FILE   your prompts instead: one a line, context<TAB>question\n"
"                   <TAB>answer[<TAB>question<TAB>answer ...] (up to 4\n"
"                   questions asked in turn of one compressed cache),\n"
"                   escapes \\n \\t \\\\, '#' lines skipped\n"
"                   (docs/quality.md, \"Your own prompts\")\n"
"  --write-prompts FILE  write the prompts in that format and stop\n"
"  --nll-samples N  held-out NLL windows (default 0; --full 8)\n"
"  --seed N         prompt seed (default 1); calibration uses its own draws\n"
"  --ctx N          context (default: the model's, or with --prompts the\n"
"                   longest prompt's, at least 96); budgets are ctx/den\n"
"  --obs N --pool N --cadence N   observation window 16, pooling 7, evict\n"
"                   every N decode steps (1)\n"
"  --model FILE --text FILE       weights and held-out text (committed ones)\n"
"  --detail         accuracy by needle depth and, per layer, the share of KV\n"
"                   heads that held the answer's bytes when it began\n"
"  --show-answers   print each answer the full cache decodes beside the\n"
"                   expected one\n"
"  --tsv FILE       rows tab-separated, columns named in the header\n"
"                   (docs/quality.md, \"The TSV\"; plot_quality.sh,\n"
"                   quality_tables.py)\n"
"  --full           every method, budgets 32,16,8,4, 300 prompts, 8 NLL\n"
"                   samples, both protocols (about an hour in a Release build)\n"
"  --quick          ctest smoke run: ctx 128, 5 prompts, every method and\n"
"                   budget, and the no-eviction bit-exactness check\n"
"  --list-methods   the method keys and row names\n"
"  --help\n"
"Explicit options override --full and --quick.\n", f);
}

static int parse_list(const char *v, uint32_t *out, uint32_t max, uint32_t *n)
{
    *n = 0;
    while (*v) {
        char *end = NULL;
        const unsigned long x = strtoul(v, &end, 10);
        if (end == v || x < 1 || x > 4096 || *n >= max ||
            (*end && *end != ','))
            return -1;
        out[(*n)++] = (uint32_t)x;
        v = *end ? end + 1 : end;
    }
    return *n ? 0 : -1;
}

static int bad(const char *a, const char *v)
{
    fprintf(stderr, "model_eval: bad value for %s: %s (--help)\n", a, v);
    return -1;
}

int eval_parse(int argc, char **argv, eval_opts *o, int *list)
{
    o->model = PKM_DATA_DIR "/model.pkvm";
    o->text = PKM_DATA_DIR "/heldout.txt";
    o->needles = o->nll_samples = UNSET;
    o->obs = 16;
    o->pool = 7;
    o->cadence = 1;
    o->seed = 1;
    o->task = EVAL_TASK_NEEDLE;
    int task_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--quick")) { o->quick = 1; continue; }
        if (!strcmp(a, "--full")) { o->quick = 2; continue; }
        if (!strcmp(a, "--detail")) { o->detail = 1; continue; }
        if (!strcmp(a, "--show-answers")) { o->show_answers = 1; continue; }
        if (!strcmp(a, "--list-methods")) { *list = 1; continue; }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "model_eval: unexpected argument %s (--help)\n", a);
            return -1;
        }
        if (!v) {
            fprintf(stderr, "model_eval: %s needs a value (--help)\n", a);
            return -1;
        }
        i++;
        char *end = NULL;
        const unsigned long long n = strtoull(v, &end, 10);
        const int num_ok = *v >= '0' && *v <= '9' && end && *end == 0 &&
                           n <= 1000000;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--write-prompts")) o->write_prompts = v;
        else if (!strcmp(a, "--task")) {
            if ((o->task = eval_task_find(v)) < 0) {
                fprintf(stderr, "model_eval: unknown task '%s' (tasks:", v);
                for (int t = 0; t < EVAL_N_TASKS; t++)
                    fprintf(stderr, " %s", eval_task_names[t]);
                fprintf(stderr, ")\n");
                return -1;
            }
            task_set = 1;
        }
        else if (!strcmp(a, "--text")) o->text = v;
        else if (!strcmp(a, "--tsv")) o->tsv = v;
        else if (!strcmp(a, "--prompts")) o->prompts = v;
        else if (!strcmp(a, "--methods")) o->methods = v;
        else if (!strcmp(a, "--budgets")) {
            if (parse_list(v, o->budgets, 8, &o->n_budgets) != 0)
                return bad(a, v);
        } else if (!strcmp(a, "--protocol")) {
            const int aw = !strcmp(v, "aware"), ag = !strcmp(v, "agnostic"),
                      both = !strcmp(v, "both");
            if (!aw && !ag && !both) return bad(a, v);
            o->protocol[EVAL_AWARE] = aw || both;
            o->protocol[EVAL_AGNOSTIC] = ag || both;
        } else if (!num_ok) return bad(a, v);
        else if (!strcmp(a, "--ctx")) o->ctx = (uint32_t)n;
        else if (!strcmp(a, "--needles")) o->needles = (uint32_t)n;
        else if (!strcmp(a, "--nll-samples")) o->nll_samples = (uint32_t)n;
        else if (!strcmp(a, "--obs")) o->obs = (uint32_t)n;
        else if (!strcmp(a, "--pool")) o->pool = (uint32_t)n;
        else if (!strcmp(a, "--cadence")) o->cadence = (uint32_t)n;
        else if (!strcmp(a, "--seed")) o->seed = n;
        else {
            fprintf(stderr, "model_eval: unknown option %s (--help)\n", a);
            return -1;
        }
    }
    if (task_set && o->prompts) {
        fprintf(stderr, "model_eval: --task and --prompts exclude each other "
                "(--help)\n");
        return -1;
    }
    return 0;
}

/* The method rows the run uses, by key; 0, or -1 for an unknown key. */
int eval_select_methods(const char *list, const pkm_method **out,
                          size_t *n)
{
    *n = 0;
    if (!strcmp(list, "all")) {
        for (size_t i = 0; i < pkm_method_count; i++) out[(*n)++] = &pkm_methods[i];
        return 0;
    }
    const char *c = list;
    while (*c) {
        const char *e = strchr(c, ',');
        const size_t len = e ? (size_t)(e - c) : strlen(c);
        size_t i = 0;
        while (i < pkm_method_count &&
               (strlen(pkm_methods[i].key) != len ||
                strncmp(pkm_methods[i].key, c, len)))
            i++;
        if (i == pkm_method_count) {
            fprintf(stderr, "model_eval: unknown method '%.*s' "
                    "(--list-methods)\n", (int)len, c);
            return -1;
        }
        out[(*n)++] = &pkm_methods[i];
        c += len + (e != NULL);
    }
    return *n ? 0 : -1;
}

/* The quick comparison's rows: uniform, the r=4 pyramid and every
 * head-adaptive window row the table has. */
static const char DEFAULT_METHODS[] = "uniform,pyramid4,ada-snapkv";

void eval_presets(eval_opts *o)
{
    static const uint32_t all_dens[4] = {32, 16, 8, 4};
    const int set_dens = o->n_budgets == 0;
    if (set_dens && o->quick) {
        memcpy(o->budgets, all_dens, sizeof all_dens);
        o->n_budgets = 4;
    } else if (set_dens) {
        o->budgets[0] = 4;
        o->n_budgets = 1;
    }
    if (!o->methods) o->methods = o->quick ? "all" : DEFAULT_METHODS;
    if (o->needles == UNSET)
        o->needles = o->quick == 1 ? 5 : o->quick == 2 ? 300 : 50;
    if (o->nll_samples == UNSET)
        o->nll_samples = o->quick == 1 ? 1 : o->quick == 2 ? 8 : 0;
    if (o->quick == 1) {
        o->ctx = o->ctx ? o->ctx : 128;
        o->nll_prompt = 32;
        o->nll_decode = 16;
    }
    if (!o->protocol[0] && !o->protocol[1])
        o->protocol[EVAL_AWARE] = o->protocol[EVAL_AGNOSTIC] = 1;
}

