/*
 * cli_vectors.c - `pyramidkv vectors FILE...`: runs golden vector files
 * through the runner in vector_runner.c and prints the failures and the
 * closing "N passed, M failed" line. It owns the command line only; the
 * schema and the replay live in the runner.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_calibrate.h"
#include "cli_commands.h"
#include "cli_input.h"
#include "vector_runner.h"
#include "vector_runner_internal.h"

/* The largest vector file read. */
#define VECTORS_MAX_BYTES ((size_t)64u << 20)

static void vectors_usage(FILE *out) {
    fputs(
        "usage: pyramidkv vectors [--verbose] [--] FILE...\n"
        "\n"
        "Runs every step of every case of each golden vector FILE (JSON; '-' reads\n"
        "standard input) against libpyramidkv, prints each failing case with the\n"
        "file, case name, step index, expected and actual values, and ends with\n"
        "the line 'N passed, M failed' (cases over all files). Exit status: 0 when\n"
        "every case passed and every file was readable; 1 when a case failed; 2 on\n"
        "a usage error or a file that cannot be read or parsed (docs/cli.md).\n"
        "\n"
        "options:\n"
        "  -v, --verbose  also list passing cases and count the steps run per call\n"
        "  -h, --help     show this help\n"
        "\n"
        "schema (docs/vectors.md has it in full):\n"
        "  {\"policy\": \"kv-cache/pyramidkv\" | \"kv-cache/snapkv\" | \"kv-cache/h2o\" |\n"
        "     \"kv-cache/scissorhands\" | \"kv-cache/tova\" | \"kv-cache/streaming-llm\" |\n"
        "     \"kv-cache/sliding-window\", \"version\": 1,\n"
        "   \"cases\": [{\"name\", \"why\", \"seed\", \"params\": {budget, layer, numLayers,\n"
        "     pyramidRatio, recentWindow, obsWindow, poolKernel} (snapkv: budget,\n"
        "     recentWindow, obsWindow, poolKernel; h2o, scissorhands: budget,\n"
        "     recentWindow; streaming-llm: budget, sinks; tova, sliding-window:\n"
        "     budget; missing -> default),\n"
        "     \"options\": {capacity, pool: \"max\"|\"avg\", prefillScope, prefillMaxLen}\n"
        "       (native surface), \"surface\": \"compatible\"|\"native\",\n"
        "     \"expectCreateError\": true | \"PB_ERR_...\", \"steps\": [{\"call\", \"args\",\n"
        "     \"expect\", \"expectStatus\", \"tolerance\"}]}]}\n"
        "  calls: onDecodeStep [pos, [weights...] | null]; evict [budget] or\n"
        "    [budget, victimsCapacity] -> [victims ascending]; effectiveBudget,\n"
        "    keptCount, capacity -> int; windowScoreOf [pos] -> number (exact unless\n"
        "    \"tolerance\"); keptPositions -> [positions]; reset; sinkCount -> int;\n"
        "    scoreOf (h2o), lastAttentionOf (tova) [pos] -> number, votesOf\n"
        "    (scissorhands) [pos] -> int, each -1 for a position not held (and\n"
        "    lastAttentionOf while unobserved);\n"
        "    prefill [ask, len, [[row 0: len weights], ...]] -> [kept ascending]\n"
        "    (docs/prefill.md; a workspace of the queried size, or the create-time\n"
        "    reservation when options.prefillMaxLen is set).\n"
        "  Steps run on the policybook-compatible vtable unless the case or step\n"
        "  needs the native surface (options, an exact status); introspection and\n"
        "  prefill always use the native functions on the same instance.\n"
        "  {\"policy\": \"kv-cache/pyramid-budget\", \"version\": 1, \"cases\": [{\"name\",\n"
        "   \"why\", \"budget\", \"numLayers\", \"pyramidRatio\", \"expect\": [share of\n"
        "   every layer] | (\"layer\" and \"expect\": share), \"expectTotal\"}]}\n",
        out);
}

/* Whether argv[i] is a file name: anything after "--", "-" (standard
 * input) and every argument that does not start with '-'. */
static int is_file_arg(char **argv, int i, int dashdash) {
    return (dashdash && i > dashdash) || argv[i][0] != '-' ||
           argv[i][1] == '\0';
}

/* Runs one vector file with the report in options->report: 0, or the
 * exit status after the one stderr line for a file that cannot be read or
 * is not a vector document (the runner's "LABEL: error: MESSAGE", taken
 * back from the report). */
static int run_file(const char *path, const pb_vector_options *options,
                    pb_vector_totals *totals) {
    char *text = NULL;
    size_t len = 0;
    const int rc = pb_cli_input_read("vectors", path, VECTORS_MAX_BYTES, &text,
                                     &len);
    if (rc != 0) return rc;
    const long at = ftell(options->report);
    const size_t unreadable = totals->unreadable;
    (void)pb_vector_run_document(text, len, path, options, totals);
    free(text);
    if (totals->unreadable == unreadable) return 0;
    char line[640] = "";
    const size_t skip = strlen(path) + strlen(": error: ");
    if (at < 0 || fseek(options->report, at, SEEK_SET) != 0 ||
        fgets(line, sizeof line, options->report) == NULL ||
        strlen(line) <= skip)
        return pb_cli_input_error("vectors", path, "not a vector document");
    line[strcspn(line, "\n")] = '\0';
    return pb_cli_input_error("vectors", path, line + skip);
}

int pb_cli_vectors(int argc, char **argv) {
    pb_vector_options options = {stdout, 0, 0};
    pb__vr_calibrate_hook = pb_cli_calibrate_vector_case;
    int dashdash = 0, files = 0;
    /* First pass: flags may come anywhere before "--"; check them all before
     * running anything. */
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (is_file_arg(argv, i, dashdash)) {
            ++files;
        } else if (strcmp(a, "--") == 0) {
            dashdash = i;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            vectors_usage(stdout);
            return 0;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            options.verbose = 1;
        } else {
            fprintf(stderr,
                    "pyramidkv vectors: unknown option '%s' (see pyramidkv "
                    "vectors --help)\n",
                    a);
            return 2;
        }
    }
    if (files == 0) {
        fprintf(stderr, "pyramidkv vectors: no vector file given (see pyramidkv "
                        "vectors --help)\n");
        return 2;
    }
    /* The report is held back until every file has been read and
     * understood: a file that cannot be is one line on stderr and nothing
     * on stdout (docs/cli.md). */
    FILE *report = tmpfile();
    if (report == NULL) {
        fputs("pyramidkv vectors: cannot create a temporary file\n", stderr);
        return 1;
    }
    options.report = report;
    pb_vector_totals totals = PB_VECTOR_TOTALS_INIT;
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; ++i)
        if (is_file_arg(argv, i, dashdash))
            rc = run_file(argv[i], &options, &totals);
    if (rc == 0) {
        rewind(report);
        char chunk[4096];
        size_t got;
        while ((got = fread(chunk, 1, sizeof chunk, report)) > 0u)
            fwrite(chunk, 1, got, stdout);
        if (options.verbose) pb_vector_print_step_counts(stdout, &totals);
        pb_vector_print_summary(stdout, &totals);
        rc = pb_vector_exit_status(&totals);
    }
    fclose(report);
    return rc;
}
