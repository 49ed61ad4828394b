/*
 * fuzz_replay_main.c - a plain main that feeds every file named on the
 * command line (directories: every regular file in them, in name order) to
 * a fuzz target's LLVMFuzzerTestOneInput, without libFuzzer. ctest runs it
 * on each committed corpus (label fuzz-regress), so every build, with any
 * compiler and sanitizer, re-checks every input ever found. A finding
 * aborts inside the target; an empty corpus is an error, so a lost corpus
 * directory cannot pass silently.
 */
/* opendir and stat are POSIX, not C11. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t replayed;

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    if (buf == NULL) {
        fclose(f);
        return 1;
    }
    for (;;) {
        if (len == cap) {
            uint8_t *grown = realloc(buf, cap * 2u);
            if (grown == NULL) {
                free(buf);
                fclose(f);
                return 1;
            }
            buf = grown;
            cap *= 2u;
        }
        const size_t got = fread(buf + len, 1, cap - len, f);
        if (got == 0u) break;
        len += got;
    }
    const int failed = ferror(f);
    fclose(f);
    if (failed) {
        fprintf(stderr, "cannot read %s\n", path);
        free(buf);
        return 1;
    }
    /* A copy of exactly len bytes, so that ASan sees reads past the end
     * of the input as libFuzzer would. */
    uint8_t *exact = malloc(len != 0u ? len : 1u);
    if (exact == NULL) {
        free(buf);
        return 1;
    }
    if (len != 0u) memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    replayed += 1u;
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int replay_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "cannot open directory %s\n", dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int status = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? cap * 2u : 64u;
            char **grown = realloc(names, cap * sizeof *names);
            if (grown == NULL) {
                status = 1;
                break;
            }
            names = grown;
        }
        const size_t len = strlen(dir) + strlen(e->d_name) + 2u;
        names[n] = malloc(len);
        if (names[n] == NULL) {
            status = 1;
            break;
        }
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n += 1u;
    }
    closedir(d);
    if (n > 0u) qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; ++i) {
        struct stat st;
        if (status == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            status = replay_file(names[i]);
        free(names[i]);
    }
    free(names);
    return status;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; ++i) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "no such file or directory: %s\n", argv[i]);
            return 1;
        }
        const int status = S_ISDIR(st.st_mode) ? replay_dir(argv[i])
                                               : replay_file(argv[i]);
        if (status != 0) return status;
    }
    if (replayed == 0u) {
        fprintf(stderr, "no input found in the corpus\n");
        return 1;
    }
    printf("replayed %zu inputs\n", replayed);
    return 0;
}
