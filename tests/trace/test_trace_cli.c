/*
 * test_trace_cli.c - the pyramidkv program on trace files (its path is
 * argv[1]): `trace`, `calibrate` and `replay` on the malformed files of
 * docs/trace_format.md (truncated, bit-flipped, wrong magic, wrong version,
 * oversize header, missing) each exit with status 2, print nothing on
 * stdout and exactly one line on stderr holding the documented message
 * (a directory is named as such); replay gives the same figures for the
 * same records in another order; calibrate --plot keeps the PNG off
 * stdout;
 * and `calibrate` on synthetic 32-layer traces recommends a funnel for the
 * funnel profile and an inverted or uniform schedule for the inverted one.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "trace_io.h"

static const char *bin;

typedef struct run_out {
    int status;
    char out[65536];
    char err[4096];
} run_out;

static void read_file(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = 0;
    if (f != NULL) {
        n = fread(buf, 1, cap - 1u, f);
        fclose(f);
    }
    buf[n] = '\0';
}

static void run(const char *args, run_out *r) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s >tc_out.txt 2>tc_err.txt", bin, args);
    const int st = system(cmd);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    read_file("tc_out.txt", r->out, sizeof r->out);
    read_file("tc_err.txt", r->err, sizeof r->err);
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len + 8192u);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static void spit(const char *path, const unsigned char *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

/* Every command that reads a trace refuses `path` with `want`. */
/* One line on stderr, nothing on stdout, status 2, naming `want`. */
static void expect_one_line(const char *args, const char *want) {
    static run_out r;
    run(args, &r);
    if (r.status != 2 || r.out[0] != '\0' || strstr(r.err, want) == NULL)
        fail_msg("'%s': status %d, stdout '%.80s', stderr '%s' (want '%s')",
                 args, r.status, r.out, r.err, want);
    const char *nl = strchr(r.err, '\n');
    assert_non_null(nl);
    assert_true(nl[1] == '\0');
    assert_true(strncmp(r.err, "pyramidkv ", 10) == 0);
}

static void expect_refused(const char *path, const char *want) {
    const char *cmds[] = {
        "trace %s", "trace %s --dump", "calibrate %s", "calibrate %s --json",
        "replay %s --policy snapkv --schedule uniform --budget 40",
    };
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; ++c) {
        char args[512];
        snprintf(args, sizeof args, cmds[c], path);
        expect_one_line(args, want);
    }
}

static void malformed_files(void **state) {
    (void)state;
    static run_out r;
    run("trace --make funnel --out tc_good.trace --layers 4 --kv-heads 1 "
        "--prompt 64 --window 8 --decode 3", &r);
    assert_int_equal(r.status, 0);
    size_t n = 0;
    unsigned char *good = slurp("tc_good.trace", &n);
    unsigned char *buf = malloc(n + 8192u);
    assert_non_null(buf);

    run("trace tc_good.trace", &r);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "4 prefill, 12 decode"));

    spit("tc_bad.trace", good, n / 2u);
    expect_refused("tc_bad.trace", "truncated");
    spit("tc_bad.trace", good, n - PB_TR_RECORD_HEAD);
    expect_refused("tc_bad.trace", "truncated: the file ends after 16 "
                                   "records without the end record");

    memcpy(buf, good, n);
    buf[n / 2u] ^= 0x08u;
    spit("tc_bad.trace", buf, n);
    expect_refused("tc_bad.trace", "checksum mismatch (corrupt file)");

    memcpy(buf, good, n);
    memcpy(buf, "GIF89a..", 8);
    spit("tc_bad.trace", buf, n);
    expect_refused("tc_bad.trace", "not a pyramidkv trace (bad magic)");

    memcpy(buf, good, n);
    put32(buf + 8, 4u);
    put32(buf + 36, pb_tr_crc32(0u, buf, 36u));
    spit("tc_bad.trace", buf, n);
    expect_refused("tc_bad.trace", "unsupported trace version 4 (this reader "
                                   "reads versions 1 to 3)");

    /* The new record kinds in a file whose version predates them. */
    memcpy(buf, good, n);
    buf[40 + 4] = 4u;
    put32(buf + 40 + 32, pb_tr_crc32(0u, buf + 40, 32u));
    spit("tc_bad.trace", buf, n);
    expect_refused("tc_bad.trace", "record 0 at byte 40: record kind 4 "
                                   "(preference rows) needs trace version 3, "
                                   "the header says version 1");
    buf[40 + 4] = 3u;
    put32(buf + 40 + 32, pb_tr_crc32(0u, buf + 40, 32u));
    spit("tc_bad.trace", buf, n);
    expect_refused("tc_bad.trace", "record 0 at byte 40: record kind 3 "
                                   "(future rows) needs trace version 2");

    memcpy(buf, good, n);
    put32(buf + 12, 1u << 20);
    spit("tc_bad.trace", buf, n);
    expect_refused("tc_bad.trace",
                   "header size 1048576 is outside 40 .. 4096 bytes");

    remove("tc_missing.trace");
    expect_refused("tc_missing.trace", "cannot open the file");
    free(buf);
    free(good);
    remove("tc_good.trace");
    remove("tc_bad.trace");
}

/* The recommendation line's schedule and shape. */
static void recommendation(const char *out, char *name, char *shape) {
    const char *p = strstr(out, "recommendation: ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "recommendation: %31s (%15[a-z])", name, shape),
                     2);
}

static void calibrate_recommends_by_profile(void **state) {
    (void)state;
    static run_out r;
    char name[32], shape[16];
    run("trace --make funnel --out tc_funnel.trace --layers 32 --kv-heads 1 "
        "--prompt 512 --window 16 --decode 0", &r);
    assert_int_equal(r.status, 0);
    run("calibrate tc_funnel.trace", &r);
    assert_int_equal(r.status, 0);
    recommendation(r.out, name, shape);
    print_message("funnel trace: %s (%s)\n", name, shape);
    assert_non_null(strstr(r.out, "(funnel profile)"));
    /* Every schedule of docs/spec.md §12, cake included, is compared under
     * the three head modes, at equal memory: no total above 32 x the
     * budget; best first by heavy-hitter recall (no future rows), the
     * recommendation the first row; with one KV head a layer group is that
     * head and its per-head share the layer's, so the modes measure the
     * same. */
    const char *names[] = {"uniform", "arithmetic:2", "arithmetic:4",
                           "arithmetic:8", "kvfactory", "kvfactory-balanced",
                           "taper", "curve:4", "profile", "cake"};
    double mode_recall[10][3], mode_mass[10][3];
    int seen[10][3];
    memset(seen, 0, sizeof seen);
    {
        unsigned budget = 0;
        const char *b = strstr(r.out, "at budget ");
        assert_non_null(b);
        assert_int_equal(sscanf(b, "at budget %u", &budget), 1);
        const char *line = strstr(r.out, "\nschedule ");
        assert_non_null(line);
        double prev = 2.0;
        int first = 1;
        for (line = strchr(line + 1, '\n'); line && line[1] != '\n';
             line = strchr(line + 1, '\n')) {
            char nm[32], heads[16], shp[16];
            unsigned used = 0, lo = 0, hi = 0;
            unsigned long long total = 0, held = 0;
            double recall = 0, mass = 0;
            if (sscanf(line + 1, "%31s %15s %u %llu %llu %u %u %15s %lf %lf",
                       nm, heads, &used, &total, &held, &lo, &hi, shp,
                       &recall, &mass) != 10)
                break;
            assert_true(held <= 32ull * budget);
            assert_true(used <= budget);
            assert_true(recall <= prev);
            prev = recall;
            if (first) {
                assert_string_equal(nm, name);
                assert_string_equal(shp, shape);
                first = 0;
            }
            const int mode = strcmp(heads, "adaptive") == 0   ? 1
                             : strcmp(heads, "shares") == 0 ? 2
                                                            : 0;
            if (!mode) assert_string_equal(heads, "uniform");
            for (size_t i = 0; i < 10; ++i)
                if (strcmp(nm, names[i]) == 0) {
                    seen[i][mode] += 1;
                    mode_recall[i][mode] = recall;
                    mode_mass[i][mode] = mass;
                }
        }
        for (size_t i = 0; i < 10; ++i) {
            if (seen[i][0] != 1 || seen[i][1] != 1 || seen[i][2] != 1)
                fail_msg("%s: not once per head mode", names[i]);
            assert_true(mode_recall[i][0] == mode_recall[i][1]);
            assert_true(mode_mass[i][0] == mode_mass[i][1]);
            assert_true(mode_recall[i][0] == mode_recall[i][2]);
            assert_true(mode_mass[i][0] == mode_mass[i][2]);
        }
    }

    run("trace --make inverted --out tc_inverted.trace --layers 32 "
        "--kv-heads 1 --prompt 512 --window 16 --decode 0", &r);
    assert_int_equal(r.status, 0);
    run("calibrate tc_inverted.trace", &r);
    assert_int_equal(r.status, 0);
    recommendation(r.out, name, shape);
    print_message("inverted trace: %s (%s)\n", name, shape);
    assert_true(strcmp(shape, "inverted") == 0 || strcmp(shape, "uniform") == 0);
    assert_non_null(strstr(r.out, "best-fitting arithmetic ratio 1 "
                                  "(inverted profile)"));

    /* --json carries the same recommendation and a profile per layer. */
    run("calibrate tc_inverted.trace --json", &r);
    assert_int_equal(r.status, 0);
    char want[64];
    snprintf(want, sizeof want, "\"recommendation\":\t\"%s\"", name);
    assert_non_null(strstr(r.out, want));
    assert_non_null(strstr(r.out, "\"entropyBits\""));

    /* replay on the funnel: every schedule runs, pyramid keeps more of the
     * decode rows' mass than the same budget uniform. */
    run("trace --make funnel --out tc_funnel_d.trace --layers 8 --kv-heads 1 "
        "--prompt 256 --window 16 --decode 16", &r);
    assert_int_equal(r.status, 0);
    double mass[3];
    const char *sched[3] = {"uniform", "arithmetic:4", "profile"};
    for (int s = 0; s < 3; ++s) {
        char args[256];
        snprintf(args, sizeof args,
                 "replay tc_funnel_d.trace --policy pyramidkv --schedule %s "
                 "--budget 64 --json", sched[s]);
        run(args, &r);
        assert_int_equal(r.status, 0);
        const char *m = strstr(r.out, "\"retainedAttentionMass\":");
        assert_non_null(m);
        assert_int_equal(sscanf(m + 24, "%lf", &mass[s]), 1);
        assert_true(mass[s] > 0.0 && mass[s] <= 1.0);
    }
    print_message("replay funnel: uniform %.6f arithmetic:4 %.6f profile "
                  "%.6f\n", mass[0], mass[1], mass[2]);
    /* Every schedule drives the replay. */
    const char *sch[] = {"kvfactory", "kvfactory-balanced", "taper",
                         "curve:2", "geometric:8", "uniform"};
    for (size_t i = 0; i < sizeof sch / sizeof sch[0]; ++i) {
        char args[256];
        snprintf(args, sizeof args,
                 "replay tc_funnel_d.trace --policy snapkv --schedule %s "
                 "--budget 64", sch[i]);
        run(args, &r);
        if (r.status != 0) fail_msg("'%s': %d %s", args, r.status, r.err);
    }
    /* Every policy of the family replays the same trace. */
    const char *pol[] = {"snapkv", "h2o", "scissorhands", "tova",
                         "streaming-llm", "sliding-window"};
    for (size_t p = 0; p < sizeof pol / sizeof pol[0]; ++p) {
        char args[256];
        snprintf(args, sizeof args,
                 "replay tc_funnel_d.trace --policy %s --schedule pyramid "
                 "--budget 64 --per-layer", pol[p]);
        run(args, &r);
        if (r.status != 0) fail_msg("'%s': %d %s", args, r.status, r.err);
        assert_non_null(strstr(r.out, pol[p]));
    }
    remove("tc_funnel.trace");
    remove("tc_inverted.trace");
    remove("tc_funnel_d.trace");
    remove("tc_out.txt");
    remove("tc_err.txt");
}

/* Copies trace `from` to `to` with every prefill record after all the
 * decode rows (each stream's decode rows keep their order). */
static void write_prefill_last(const char *from, const char *to) {
    char err[256];
    pb_tr_reader *r = NULL;
    assert_int_equal(pb_tr_reader_open_file(from, &r, err, sizeof err), 0);
    pb_tr_writer *w = NULL;
    assert_int_equal(pb_tr_writer_open(to, pb_tr_reader_shape(r), &w, err,
                                       sizeof err), 0);
    pb_tr_record rec;
    const float *v;
    pb_tr_record held[64];
    float *vals[64];
    size_t n_held = 0;
    while (pb_tr_reader_next(r, &rec, &v, err, sizeof err) == 1) {
        if (rec.kind == PB_TR_DECODE) {
            assert_int_equal(pb_tr_writer_add(w, &rec, v, err, sizeof err), 0);
            continue;
        }
        assert_true(n_held < 64u);
        const size_t n = (size_t)rec.rows * rec.length;
        vals[n_held] = malloc(n * sizeof(float));
        assert_non_null(vals[n_held]);
        memcpy(vals[n_held], v, n * sizeof(float));
        held[n_held++] = rec;
    }
    for (size_t i = 0; i < n_held; ++i) {
        assert_int_equal(pb_tr_writer_add(w, &held[i], vals[i], err,
                                          sizeof err), 0);
        free(vals[i]);
    }
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);
    pb_tr_reader_close(r);
}

/* stdout without the line naming the trace file. */
static void strip_trace_line(const char *out, char *buf, size_t cap) {
    const char *t = strstr(out, "\"trace\":");
    const char *nl = t ? strchr(t, '\n') : NULL;
    assert_non_null(nl);
    snprintf(buf, cap, "%.*s%s", (int)(t - out), out, nl);
}

/* docs/trace_format.md: records may come in any order. replay gives the
 * same figures whether a stream's prefill record comes before or after
 * its decode rows, for every policy and a schedule that reads the prefill
 * (kvfactory's window) and one that does not. */
static void replay_any_record_order(void **state) {
    (void)state;
    static run_out a, b;
    static char sa[65536], sb[65536];
    run("trace --make funnel --out tc_order.trace --layers 4 --kv-heads 2 "
        "--group 2 --prompt 96 --window 8 --decode 12", &a);
    assert_int_equal(a.status, 0);
    write_prefill_last("tc_order.trace", "tc_order_last.trace");
    const char *pol[] = {"pyramidkv", "snapkv", "h2o", "scissorhands", "tova",
                         "streaming-llm", "sliding-window"};
    const char *sch[] = {"arithmetic", "kvfactory"};
    for (size_t p = 0; p < sizeof pol / sizeof pol[0]; ++p)
        for (size_t k = 0; k < 2; ++k) {
            char args[256];
            snprintf(args, sizeof args, "replay tc_order.trace --policy %s "
                     "--schedule %s --budget 40 --json", pol[p], sch[k]);
            run(args, &a);
            snprintf(args, sizeof args, "replay tc_order_last.trace --policy "
                     "%s --schedule %s --budget 40 --json", pol[p], sch[k]);
            run(args, &b);
            if (a.status != 0 || b.status != 0)
                fail_msg("%s: %d %d %s %s", args, a.status, b.status, a.err,
                         b.err);
            strip_trace_line(a.out, sa, sizeof sa);
            strip_trace_line(b.out, sb, sizeof sb);
            if (strcmp(sa, sb) != 0)
                fail_msg("%s: the figures depend on the record order:\n%s\n"
                         "---\n%s", args, sa, sb);
        }
    remove("tc_order.trace");
    remove("tc_order_last.trace");
}

/* A directory given as a trace is named as such (not "truncated header"),
 * exit status 2. */
static void directory_as_trace(void **state) {
    (void)state;
    expect_refused(".", "a directory, not a regular file");
}

/* calibrate --json --plot never writes the plot on stdout: an unwritable
 * FILE is an input error before anything is printed, and a good one
 * leaves stdout one JSON document. */
static void calibrate_plot_off_stdout(void **state) {
    (void)state;
    static run_out r;
    run("trace --make funnel --out tc_plot.trace --layers 4 --kv-heads 1 "
        "--prompt 64 --window 8 --decode 3", &r);
    assert_int_equal(r.status, 0);
    run("calibrate tc_plot.trace --json --plot tc_no_such_dir/x.png", &r);
    if (r.status != 2 || r.out[0] != '\0' || strstr(r.err, "--plot") == NULL)
        fail_msg("unwritable --plot: status %d, stdout '%.8s', stderr '%s'",
                 r.status, r.out, r.err);
    run("calibrate tc_plot.trace --json --plot tc_plot.png", &r);
    assert_int_equal(r.status, 0);
    assert_true(r.out[0] == '{'); /* JSON, no PNG signature */
    assert_null(memchr(r.out, 0x89, strlen(r.out)));
    remove("tc_plot.trace");
    remove("tc_plot.png");
}

static void usage_errors(void **state) {
    (void)state;
    static run_out r;
    const char *bad[] = {
        "calibrate", "calibrate a.trace b.trace", "calibrate x --budget 0",
        "calibrate x --fraction 101", "replay x --policy lru --schedule "
        "uniform --budget 64", "replay x --policy snapkv --schedule odd "
        "--budget 64", "replay x --policy snapkv --schedule uniform",
        "replay x --policy snapkv --schedule uniform --budget 32",
        "replay x --policy h2o --scorer none",
        "replay x --schedule arithmetic:2 --ratio 2",
        "replay x --schedule uniform --ratio 2",
        "replay x --budget 64 --budget 64",
        "calibrate x --plot a.png --plot b.png",
        "trace", "trace --make spiral --out x", "trace --make flat",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        run(bad[i], &r);
        if (r.status != 2 || r.out[0] != '\0')
            fail_msg("'%s': status %d", bad[i], r.status);
    }
    run("calibrate --help", &r);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "256 MiB in float32"));
    run("replay --help", &r);
    assert_int_equal(r.status, 0);
    run("trace --help", &r);
    assert_int_equal(r.status, 0);
}

/* Writes a version-2 trace of one layer and head: a prefill record of 2
 * rows over `len` positions (none when len is 0) and a future record of 2
 * rows from query `fq`. */
static void write_future(const char *path, uint32_t len, uint32_t fq) {
    char err[256];
    const pb_tr_shape shape = {1u, 1u, 1u, 2u};
    pb_tr_writer *w = NULL;
    assert_int_equal(pb_tr_writer_open(path, &shape, &w, err, sizeof err), 0);
    float v[2 * 64];
    for (int i = 0; i < 2 * 64; ++i) v[i] = 1.0f / 64.0f;
    if (len != 0u) {
        pb_tr_record p = {PB_TR_PREFILL, PB_TR_F32, 0u, 0u, 0u, len - 2u, 2u,
                          len, 0, 0};
        assert_int_equal(pb_tr_writer_add(w, &p, v, err, sizeof err), 0);
    }
    pb_tr_record f = {PB_TR_FUTURE, PB_TR_F32, 0u, 0u, 0u, fq, 2u, fq + 2u,
                      0, 0};
    assert_int_equal(pb_tr_writer_add(w, &f, v, err, sizeof err), 0);
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);
}

/* Future records that do not fit their prompt, and a budget no
 * allocation fits: one line each, status 2. */
static void calibrate_future_records(void **state) {
    (void)state;
    write_future("tc_future.trace", 0u, 30u);
    expect_one_line("calibrate tc_future.trace",
                    "no prefill record");
    write_future("tc_future.trace", 30u, 29u);
    expect_one_line("calibrate tc_future.trace --budget 8",
                    "record 1 at byte 320: a future record starts at query "
                    "29, its prompt (layer 0, prompt 0) has 30 positions");
    write_future("tc_future.trace", 30u, 30u);
    static run_out r;
    run("calibrate tc_future.trace --budget 8", &r);
    if (r.status != 0) fail_msg("status %d: %s", r.status, r.err);
    assert_non_null(strstr(r.out, "1 future records"));
    assert_non_null(strstr(r.out, "tie"));
    expect_one_line("calibrate tc_future.trace --budget 2",
                    "--budget 2 does not exceed the recent window 2");
    expect_one_line("calibrate tc_future.trace --tau1 0", "--tau1 takes");
    expect_one_line("calibrate tc_future.trace --progress maybe",
                    "--progress takes on or off");
    /* --cake-pref: one number >= 0 per layer (here 1), or exit 2. */
    expect_one_line("calibrate tc_future.trace --budget 8 --cake-pref 1,2",
                    "--cake-pref: '1,2' is not 1 numbers >= 0");
    expect_one_line("calibrate tc_future.trace --budget 8 --cake-pref -1",
                    "--cake-pref: '-1' is not 1 numbers");
    run("calibrate tc_future.trace --budget 8 --cake-pref 0.5 --json", &r);
    if (r.status != 0) fail_msg("status %d: %s", r.status, r.err);
    assert_non_null(strstr(r.out, "\"schedule\":\t\"cake\""));
    run("trace tc_future.trace", &r);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "version 2"));
    assert_non_null(strstr(r.out, "1 future"));
    remove("tc_future.trace");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_trace_cli PATH-TO-PYRAMIDKV\n");
        return 2;
    }
    bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(malformed_files),
        cmocka_unit_test(calibrate_recommends_by_profile),
        cmocka_unit_test(usage_errors),
        cmocka_unit_test(replay_any_record_order),
        cmocka_unit_test(directory_as_trace),
        cmocka_unit_test(calibrate_plot_off_stdout),
        cmocka_unit_test(calibrate_future_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
