/*
 * pyramidkv_cli.c - the entry point of the pyramidkv program: dispatches to
 * the subcommands in cli_commands.h and prints the top-level help.
 */
#include <stdio.h>
#include <string.h>

#include "cli_commands.h"
#include "pyramidkv/pyramidkv.h"

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} cli_command;

static const cli_command commands[] = {
    {"vectors", pb_cli_vectors,
     "run golden vector files (JSON) against the library"},
    {"bench", pb_cli_bench,
     "pyramid vs uniform budgets at equal memory on layered traces"},
    {"plan", pb_cli_plan,
     "per-layer shares, K+V bytes and paged blocks for a runtime"},
    {"trace", pb_cli_trace,
     "check an attention trace file, or write a synthetic one"},
    {"calibrate", pb_cli_calibrate,
     "a model's layer profile from a trace, and schedules compared on it"},
    {"replay", pb_cli_replay,
     "a trace's decode rows through a policy under a schedule"},
};

static void usage(FILE *out) {
    fprintf(out,
            "usage: pyramidkv <command> [options]\n"
            "\n"
            "PyramidKV per-layer KV-cache budgets and SnapKV-style eviction\n"
            "(libpyramidkv %s).\n"
            "\n"
            "commands:\n",
            pb_version_string());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'pyramidkv <command> --help' describes a command; "
                 "docs/cli.md has the one\nvocabulary of all of them. Exit "
                 "status: 0 success, 1 a run that failed, 2 a\nusage or input "
                 "error.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("pyramidkv %s\n", pb_version_string());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "pyramidkv: unknown command '%s' (see pyramidkv --help)\n",
            argv[1]);
    return 2;
}
