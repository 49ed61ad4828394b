/*
 * cli_options.c - argument walking and strict number parsing for the
 * pyramidkv subcommands (see cli_options.h). Every error is one line on
 * stderr that names the offending flag.
 */
#include "cli_options.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
        return 1;
    }
    size_t len = (size_t)(eq - arg);
    if (len >= sizeof w->flag_buf) len = sizeof w->flag_buf - 1;
    memcpy(w->flag_buf, arg, len);
    w->flag_buf[len] = '\0';
    w->flag = w->flag_buf;
    w->inline_value = eq + 1;
    return 1;
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
