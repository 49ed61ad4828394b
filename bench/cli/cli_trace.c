/*
 * cli_trace.c - `pyramidkv trace`: writes a synthetic attention trace with
 * a known layer profile (--make), or reads a trace file through and prints
 * what it holds (the check that a file written by another tool, e.g. the
 * Python writer, is well formed).
 *
 * Owns the flags and the summary; the format is bench/trace/trace_io.h,
 * the synthetic traces bench/trace/trace_synth.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_commands.h"
#include "cli_input.h"
#include "cli_options.h"
#include "cli_trace_common.h"
#include "trace_io.h"
#include "trace_synth.h"

static void help(FILE *out) {
    fprintf(out,
        "usage: pyramidkv trace FILE [--dump]\n"
        "       pyramidkv trace --make KIND --out FILE [--layers L] [--kv-heads H]\n"
        "                       [--group G] [--prompt-len N] [--window W]\n"
        "                       [--decode D] [--dtype f32|f16] [--seed S]\n"
        "\n"
        "With FILE: reads an attention trace (docs/trace_format.md) through,\n"
        "checking every checksum and field, and prints its shape and records.\n"
        "--dump prints every record instead: a line 'record INDEX KIND layer L\n"
        "head H qhead Q query P rows R length N dtype f32|f16', then one line\n"
        "per row with its values (%%.9g, exact for float32).\n"
        "\n"
        "With --make: writes a synthetic trace whose layer profile is known:\n"
        "  funnel    shallow layers attend broadly, deep layers sharply\n"
        "  inverted  the opposite\n"
        "  flat      every layer alike\n"
        "One prefill record (W observation-window rows over an N-position prompt)\n"
        "per layer and head, then D decode rows per layer and head.\n"
        "\n"
        "options of --make:\n"
        "  --out FILE      the trace to write (required)\n"
        "  --layers L      1 .. 4096 [32]\n"
        "  --kv-heads H    1 .. 64 [2]\n"
        "  --group G       query heads per KV head written separately, 1 .. 64;\n"
        "                  0 writes one record per KV head, the group reduced [0]\n"
        "  --prompt-len N  prompt positions, W+1 .. 1048576 [1024]\n"
        "  --window W      observation-window rows, 1 .. 1024 [32]\n"
        "  --decode D      decode rows after the prompt, 0 .. 65536 [32]\n"
        "  --dtype T       f32 or f16 [f32]\n"
        "  --seed S        [7]\n"
        "  --help          this text\n");
    pb_cli_help_common(out);
}

static int make(int argc, char **argv) {
    pb_trs_params p = {PB_TRS_FUNNEL, 32u, 2u, 0u, 1024u, 32u, 32u,
                       PB_TR_F32, 7u};
    const char *out = NULL;
    int have_kind = 0;
    pb_cli_walk w;
    pb_cli_walk_init(&w, "trace", argc, argv);
    int rc;
    while ((rc = pb_cli_walk_flag(&w, help)) == 1) {
        const char *f = w.flag, *v = NULL;
        if (pb_cli_walk_value(&w, &v) != 0) return PB_CLI_USAGE;
        uint32_t *dst = NULL, lo = 0, hi = 0;
        if (strcmp(f, "--make") == 0) {
            if (pb_trs_kind_parse(v, &p.kind) != 0)
                return pb_cli_usage_error("trace",
                                          "--make: '%s' is not funnel, "
                                          "inverted or flat", v);
            have_kind = 1;
            continue;
        }
        if (strcmp(f, "--out") == 0) {
            out = v;
            continue;
        }
        if (strcmp(f, "--dtype") == 0) {
            if (strcmp(v, "f32") == 0) p.dtype = PB_TR_F32;
            else if (strcmp(v, "f16") == 0) p.dtype = PB_TR_F16;
            else
                return pb_cli_usage_error("trace",
                                          "--dtype: '%s' is not f32 or f16", v);
            continue;
        }
        if (strcmp(f, "--layers") == 0) dst = &p.layers, lo = 1, hi = 4096;
        else if (strcmp(f, "--kv-heads") == 0) dst = &p.kv_heads, lo = 1, hi = 64;
        else if (strcmp(f, "--group") == 0) dst = &p.group, lo = 0, hi = 64;
        else if (strcmp(f, "--prompt-len") == 0) dst = &p.prompt, lo = 2, hi = 1048576;
        else if (strcmp(f, "--window") == 0) dst = &p.window, lo = 1, hi = 1024;
        else if (strcmp(f, "--decode") == 0) dst = &p.decode, lo = 0, hi = 65536;
        else if (strcmp(f, "--seed") == 0) dst = &p.seed, lo = 0, hi = UINT32_MAX;
        else
            return pb_cli_usage_error("trace",
                                      "unknown option '%s' (see pyramidkv "
                                      "trace --help)", f);
        if (pb_cli_parse_u32("trace", f, v, lo, hi, dst) != 0)
            return PB_CLI_USAGE;
    }
    if (rc != 0) return rc == PB_CLI_WALK_HELP ? 0 : PB_CLI_USAGE;
    if (!have_kind) return pb_cli_usage_error("trace", "--make is required");
    if (out == NULL) return pb_cli_usage_error("trace", "--out is required");
    if (p.window >= p.prompt)
        return pb_cli_usage_error("trace", "--window must be below --prompt-len");
    char err[256];
    if (pb_trs_write(out, &p, err, sizeof err) != 0) {
        fprintf(stderr, "pyramidkv trace: %s: %s\n", out, err);
        return PB_CLI_USAGE; /* an output file that cannot be written */
    }
    return 0;
}

/* Opens the trace of dump or summary: 0, or the status after the message. */
static int open_trace(const char *path, pb_tr_reader **r) {
    char err[256];
    if (pb_tr_reader_open_file(path, r, err, sizeof err) != 0)
        return pb_cli_trace_error("trace", path, err);
    return 0;
}

/* Closes r and reports running out of memory while reading path. */
static int out_of_memory(pb_tr_reader *r, const char *path) {
    pb_tr_reader_close(r);
    return pb_cli_trace_error("trace", path, "out of memory");
}

static int dump(const char *path) {
    pb_tr_reader *r = NULL;
    const int orc = open_trace(path, &r);
    if (orc != 0) return orc;
    /* Collected into memory first: a malformed file prints nothing. */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem == NULL) return out_of_memory(r, path);
    char err[256];
    const pb_tr_shape s = *pb_tr_reader_shape(r);
    fprintf(mem, "shape layers %u kv_heads %u group %u\n", s.num_layers,
            s.num_kv_heads, s.group_size);
    pb_tr_record rec;
    const float *v;
    int got;
    while ((got = pb_tr_reader_next(r, &rec, &v, err, sizeof err)) == 1) {
        fprintf(mem,
                "record %llu %s layer %u head %u qhead %lld query %u rows %u "
                "length %u dtype %s\n",
                (unsigned long long)rec.index,
                rec.kind == PB_TR_PREFILL  ? "prefill"
                : rec.kind == PB_TR_DECODE ? "decode"
                : rec.kind == PB_TR_FUTURE ? "future"
                                           : "preference",
                rec.layer,
                rec.head,
                rec.qhead == PB_TR_GROUP_REDUCED ? -1LL : (long long)rec.qhead,
                rec.query, rec.rows, rec.length,
                rec.dtype == PB_TR_F32 ? "f32" : "f16");
        for (uint32_t j = 0; j < rec.rows; ++j) {
            const float *row = v + (size_t)j * rec.length;
            for (uint32_t i = 0; i < rec.length; ++i)
                fprintf(mem, i ? " %.9g" : "%.9g", (double)row[i]);
            fputc('\n', mem);
        }
    }
    pb_tr_reader_close(r);
    fclose(mem);
    if (got < 0) {
        free(text);
        return pb_cli_trace_error("trace", path, err);
    }
    fwrite(text, 1, len, stdout);
    free(text);
    return 0;
}

static int summary(const char *path) {
    pb_tr_reader *r = NULL;
    const int orc = open_trace(path, &r);
    if (orc != 0) return orc;
    const pb_tr_shape s = *pb_tr_reader_shape(r);
    uint64_t n[5] = {0, 0, 0, 0, 0}, values = 0, bytes = 0;
    uint64_t f16 = 0, reduced = 0;
    uint32_t max_len = 0;
    uint32_t *per_layer = (uint32_t *)calloc(s.num_layers, sizeof *per_layer);
    if (per_layer == NULL) return out_of_memory(r, path);
    char err[256];
    pb_tr_record rec;
    const float *v;
    int got;
    while ((got = pb_tr_reader_next(r, &rec, &v, err, sizeof err)) == 1) {
        n[rec.kind] += 1u;
        values += (uint64_t)rec.rows * rec.length;
        bytes += (uint64_t)rec.rows * rec.length * (rec.dtype == PB_TR_F32 ? 4u : 2u);
        f16 += rec.dtype == PB_TR_F16;
        reduced += rec.qhead == PB_TR_GROUP_REDUCED;
        if (rec.length > max_len) max_len = rec.length;
        per_layer[rec.layer] += 1u;
    }
    pb_tr_reader_close(r);
    if (got < 0) {
        free(per_layer);
        return pb_cli_trace_error("trace", path, err);
    }
    uint32_t measured = 0;
    for (uint32_t l = 0; l < s.num_layers; ++l) measured += per_layer[l] != 0u;
    free(per_layer);
    printf("trace %s: version %u, %u layers, %u KV heads, %u query heads per "
           "group\n", path, s.version, s.num_layers, s.num_kv_heads,
           s.group_size);
    printf("records: %llu prefill, %llu decode, %llu future, %llu preference "
           "(%llu float16, %llu of a reduced group); %u of %u layers "
           "present\n",
           (unsigned long long)n[PB_TR_PREFILL],
           (unsigned long long)n[PB_TR_DECODE],
           (unsigned long long)n[PB_TR_FUTURE],
           (unsigned long long)n[PB_TR_PREFERENCE], (unsigned long long)f16,
           (unsigned long long)reduced, measured, s.num_layers);
    printf("values: %llu (%.1f MiB of payload), longest row %u keys; every "
           "checksum verified\n", (unsigned long long)values,
           (double)bytes / 1048576.0, max_len);
    return 0;
}

int pb_cli_trace(int argc, char **argv) {
    const char *path = NULL;
    int want_dump = 0;
    for (int i = 1; i < argc; ++i)
        if (strncmp(argv[i], "--make", 6) == 0) return make(argc, argv);
    pb_cli_walk w;
    pb_cli_walk_init(&w, "trace", argc, argv);
    for (;;) {
        if (w.next < w.argc && w.argv[w.next][0] != '-') {
            if (path != NULL)
                return pb_cli_usage_error("trace", "more than one FILE given");
            path = w.argv[w.next++];
            continue;
        }
        const int rc = pb_cli_walk_flag(&w, help);
        if (rc == 0) break;
        if (rc != 1) return rc == PB_CLI_WALK_HELP ? 0 : PB_CLI_USAGE;
        if (strcmp(w.flag, "--dump") != 0)
            return pb_cli_usage_error("trace",
                                      "unknown option '%s' (see pyramidkv "
                                      "trace --help)", w.flag);
        if (pb_cli_walk_no_value(&w) != 0) return PB_CLI_USAGE;
        want_dump = 1;
    }
    if (path == NULL)
        return pb_cli_usage_error("trace",
                                  "a FILE or --make is required (see "
                                  "pyramidkv trace --help)");
    if (pb_cli_input_check("trace", path) != 0) return PB_CLI_USAGE;
    return want_dump ? dump(path) : summary(path);
}
