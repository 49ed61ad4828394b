/*
 * cli_input.c - see cli_input.h.
 */
#define _POSIX_C_SOURCE 200809L

#include "cli_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int pb_cli_input_error(const char *cmd, const char *path, const char *msg) {
    fprintf(stderr, "pyramidkv %s: %s: %s\n", cmd, path, msg);
    return 2;
}

int pb_cli_input_check(const char *cmd, const char *path) {
    if (strcmp(path, "-") == 0) return 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return pb_cli_input_error(cmd, path, "cannot open the file");
    /* A directory opens for reading on some systems but reads as nothing. */
    struct stat st;
    const int dir = fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode);
    fclose(f);
    if (dir)
        return pb_cli_input_error(cmd, path, "a directory, not a regular file");
    return 0;
}

int pb_cli_input_read(const char *cmd, const char *path, size_t max,
                      char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    if (pb_cli_input_check(cmd, path) != 0) return 2;
    const int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (f == NULL) return pb_cli_input_error(cmd, path, "cannot open the file");
    size_t cap = 65536u, n = 0;
    char *b = malloc(cap + 1u);
    int bad = b == NULL ? 1 : 0; /* 1 out of memory, 2 too large, 3 read */
    while (!bad) {
        if (n == cap) {
            if (cap > max) {
                bad = 2;
                break;
            }
            char *grown = realloc(b, cap * 2u + 1u);
            if (grown == NULL) {
                bad = 1;
                break;
            }
            b = grown;
            cap *= 2u;
        }
        const size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0u) {
            if (ferror(f)) bad = 3;
            break;
        }
    }
    if (!is_stdin) fclose(f);
    if (!bad && n > max) bad = 2;
    if (bad) {
        free(b);
        if (bad == 1) {
            fprintf(stderr, "pyramidkv %s: %s: out of memory\n", cmd, path);
            return 1;
        }
        char msg[64];
        snprintf(msg, sizeof msg, "the file is larger than %zu MiB",
                 max >> 20);
        return pb_cli_input_error(cmd, path,
                                  bad == 2 ? msg : "cannot read the file");
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}
