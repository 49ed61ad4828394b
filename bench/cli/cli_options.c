/*
 * cli_options.c - the vocabulary tables (flag aliases; policy, scorer and
 * schedule names with their aliases), argument walking and strict number
 * parsing for the pyramidkv subcommands (see cli_options.h). Every error
 * is one line on stderr that names the offending flag.
 */
#include "cli_options.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pyramidkv/pyramidkv.h"

/* A name and the value it stands for; an alias repeats a value. The first
 * entry of each value is its canonical name. */
typedef struct cli_name {
    const char *name;
    int value;
} cli_name;

/* Flag aliases: the library's field names, and trace --make's older
 * spelling of the prompt length. */
static const struct {
    const char *alias, *canonical;
} FLAG_ALIASES[] = {
    {"--recent-window", "--recent"},
    {"--obs-window", "--obs"},
    {"--pool-kernel", "--kernel"},
    {"--prompt", "--prompt-len"},
};
#define N_FLAG_ALIASES (sizeof FLAG_ALIASES / sizeof FLAG_ALIASES[0])

static const cli_name POLICIES[] = {
    {"pyramidkv", PB_CLI_POLICY_PYRAMIDKV},
    {"snapkv", PB_CLI_POLICY_SNAPKV},
    {"h2o", PB_CLI_POLICY_H2O},
    {"scissorhands", PB_CLI_POLICY_SCISSORHANDS},
    {"tova", PB_CLI_POLICY_TOVA},
    {"streaming-llm", PB_CLI_POLICY_STREAMING_LLM},
    {"sliding-window", PB_CLI_POLICY_SLIDING_WINDOW},
    {"streamingllm", PB_CLI_POLICY_STREAMING_LLM},
    {"slidingwindow", PB_CLI_POLICY_SLIDING_WINDOW},
};

/* Scorer names are the library's (pb_scorer_from_name); this lists the
 * aliases it accepts beside them, for --help. */
static const char *const SCORER_ALIASES[] = {"recency"};

/* Schedule aliases; the canonical names are the library's. */
static const cli_name SCHEDULE_ALIASES[] = {
    {"pyramid", PB_SCHEDULE_ARITHMETIC},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char pb_cli_policy_list[] =
    "pyramidkv, snapkv, h2o, scissorhands, tova, streaming-llm or "
    "sliding-window";
const char pb_cli_schedule_list[] =
    "arithmetic, uniform, kvfactory, kvfactory-balanced, taper, curve, "
    "geometric, profile or cake";

static const cli_name *find_name(const cli_name *t, size_t n,
                                 const char *text, size_t len) {
    for (size_t i = 0; i < n; ++i)
        if (strlen(t[i].name) == len && strncmp(t[i].name, text, len) == 0)
            return &t[i];
    return NULL;
}

int pb_cli_lookup_policy(const char *cmd, const char *text, int *id) {
    const cli_name *e = find_name(POLICIES, COUNT(POLICIES), text,
                                  strlen(text));
    if (e == NULL)
        return pb_cli_usage_error(cmd, "--policy: '%s' is not %s", text,
                                  pb_cli_policy_list);
    *id = e->value;
    return 0;
}

int pb_cli_lookup_scorer(const char *cmd, const char *text,
                         uint32_t *scorer) {
    if (pb_scorer_from_name(text, scorer) == PB_OK) return 0;
    /* "window, cumulative, last, votes or none", from the library. */
    char list[128] = "";
    size_t n = 0;
    while (pb_scorer_name((uint32_t)n) != NULL) ++n;
    for (size_t i = 0; i < n; ++i) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        const size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%s", sep,
                 pb_scorer_name((uint32_t)i));
    }
    return pb_cli_usage_error(cmd, "--scorer: '%s' is not %s", text, list);
}

int pb_cli_lookup_schedule(const char *text, size_t len, uint32_t *kind) {
    char name[32];
    const cli_name *e =
        find_name(SCHEDULE_ALIASES, COUNT(SCHEDULE_ALIASES), text, len);
    if (e != NULL) {
        *kind = (uint32_t)e->value;
        return 0;
    }
    if (len >= sizeof name) return -1;
    memcpy(name, text, len);
    name[len] = '\0';
    return pb_schedule_kind_from_name(name, kind) == PB_OK ? 0 : -1;
}

const char *pb_cli_policy_canonical(int id) {
    for (size_t i = 0; i < COUNT(POLICIES); ++i)
        if (POLICIES[i].value == id) return POLICIES[i].name;
    return "?";
}

const char *pb_cli_scorer_canonical(uint32_t scorer) {
    const char *name = pb_scorer_name(scorer);
    return name != NULL ? name : "?";
}

/* "alias = canonical" for every name whose value appeared before. */
static void print_aliases(FILE *out, const char *what, const cli_name *t,
                          size_t n) {
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < i; ++j)
            if (t[j].value == t[i].value) {
                fprintf(out, "  %s %s = %s\n", what, t[i].name, t[j].name);
                break;
            }
}

void pb_cli_help_common(FILE *out) {
    fprintf(out, "\naliases (accepted everywhere the canonical name is; "
                 "docs/cli.md):\n");
    for (size_t i = 0; i < N_FLAG_ALIASES; ++i)
        fprintf(out, "  %s = %s\n", FLAG_ALIASES[i].alias,
                FLAG_ALIASES[i].canonical);
    print_aliases(out, "--policy", POLICIES, COUNT(POLICIES));
    for (size_t i = 0; i < COUNT(SCORER_ALIASES); ++i) {
        uint32_t s = 0;
        if (pb_scorer_from_name(SCORER_ALIASES[i], &s) == PB_OK)
            fprintf(out, "  --scorer %s = %s\n", SCORER_ALIASES[i],
                    pb_scorer_name(s));
    }
    for (size_t i = 0; i < COUNT(SCHEDULE_ALIASES); ++i)
        fprintf(out, "  --schedule %s = %s\n", SCHEDULE_ALIASES[i].name,
                pb_schedule_kind_name((uint32_t)SCHEDULE_ALIASES[i].value));
    fprintf(out,
            "A flag may be given once; --flag=value and --flag value are the "
            "same.\n"
            "\n"
            "exit status: 0 success; 1 a run that failed (a failing vector, "
            "out of\n"
            "memory, gnuplot failing); 2 a usage or input error (an unknown, "
            "repeated\n"
            "or conflicting flag, a bad value or name, a file that cannot be "
            "read\n"
            "or is malformed): one line on stderr, nothing on stdout.\n");
}

void pb_cli_walk_init(pb_cli_walk *w, const char *cmd, int argc, char **argv) {
    memset(w, 0, sizeof *w);
    w->argc = argc;
    w->argv = argv;
    w->next = 1;
    w->cmd = cmd;
}

int pb_cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "pyramidkv %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return PB_CLI_USAGE;
}

int pb_cli_walk_next(pb_cli_walk *w) {
    if (w->next >= w->argc) return 0;
    const char *arg = w->argv[w->next++];
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
        if (strcmp(arg, "-h") == 0) {
            w->flag = "--help";
            w->inline_value = NULL;
            return 1;
        }
        return pb_cli_usage_error(w->cmd,
                                  "unexpected argument '%s' (see pyramidkv "
                                  "%s --help)", arg, w->cmd);
    }
    const char *eq = strchr(arg, '=');
    if (eq == NULL) {
        w->flag = arg;
        w->inline_value = NULL;
    } else {
        size_t len = (size_t)(eq - arg);
        if (len >= sizeof w->flag_buf) len = sizeof w->flag_buf - 1;
        memcpy(w->flag_buf, arg, len);
        w->flag_buf[len] = '\0';
        w->flag = w->flag_buf;
        w->inline_value = eq + 1;
    }
    for (size_t i = 0; i < N_FLAG_ALIASES; ++i)
        if (strcmp(w->flag, FLAG_ALIASES[i].alias) == 0)
            w->flag = FLAG_ALIASES[i].canonical;
    for (size_t i = 0; i < w->n_seen; ++i)
        if (strcmp(w->seen[i], w->flag) == 0)
            return pb_cli_usage_error(w->cmd,
                                      "%s given twice (an alias is the same "
                                      "flag; see pyramidkv %s --help)",
                                      w->flag, w->cmd);
    if (w->n_seen < sizeof w->seen / sizeof w->seen[0] &&
        strlen(w->flag) < sizeof w->seen[0])
        strcpy(w->seen[w->n_seen++], w->flag);
    return 1;
}

int pb_cli_walk_flag(pb_cli_walk *w, void (*help)(FILE *out)) {
    const int rc = pb_cli_walk_next(w);
    if (rc != 1 || strcmp(w->flag, "--help") != 0) return rc;
    help(stdout);
    return PB_CLI_WALK_HELP;
}

int pb_cli_walk_value(pb_cli_walk *w, const char **value) {
    if (w->inline_value != NULL) {
        *value = w->inline_value;
        return 0;
    }
    if (w->next >= w->argc)
        return pb_cli_usage_error(w->cmd, "%s needs a value", w->flag);
    *value = w->argv[w->next++];
    return 0;
}

int pb_cli_walk_no_value(pb_cli_walk *w) {
    if (w->inline_value == NULL) return 0;
    return pb_cli_usage_error(w->cmd, "%s takes no value", w->flag);
}

/* Parses digits into *out if the value is in [lo, hi]; -1 otherwise. */
static int parse_digits(const char *s, size_t len, uint32_t lo, uint32_t hi,
                        uint32_t *out) {
    if (len == 0 || len > 10) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; ++i) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10u + (uint64_t)(s[i] - '0');
    }
    if (v < lo || v > hi) return -1;
    *out = (uint32_t)v;
    return 0;
}

int pb_cli_parse_u32(const char *cmd, const char *flag, const char *text,
                     uint32_t lo, uint32_t hi, uint32_t *out) {
    if (parse_digits(text, strlen(text), lo, hi, out) != 0)
        return pb_cli_usage_error(cmd, "%s: '%s' is not an integer in %u .. %u",
                                  flag, text, lo, hi);
    return 0;
}

int pb_cli_parse_u32_list(const char *cmd, const char *flag, const char *text,
                          uint32_t lo, uint32_t hi, uint32_t *out, size_t cap,
                          size_t *n) {
    size_t count = 0;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (count == cap)
            return pb_cli_usage_error(cmd, "%s: at most %zu values", flag,
                                      cap);
        if (parse_digits(p, len, lo, hi, &out[count]) != 0)
            return pb_cli_usage_error(cmd,
                                      "%s: '%.*s' is not an integer in "
                                      "%u .. %u",
                                      flag, (int)(len > 40 ? 40 : len), p, lo,
                                      hi);
        ++count;
        if (comma == NULL) break;
        p = comma + 1;
    }
    *n = count;
    return 0;
}
