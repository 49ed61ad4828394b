#!/usr/bin/python3
"""quality_tables_check.py - bench/model/quality_tables.py end to end, small.

Runs the script on both model files (the m1 weights and the random-init
file of the second model's shape) x two tasks (needle: both protocols and
NLL; multiq: query-agnostic only), two methods at budget 1/4, 3 prompts,
context 360, and checks the markdown's structure (a section per model and
task, the full cache row first, the columns each task has, the notes), that
every number in it equals its run's TSV and its run's text table, and that
the CPU table adds up to the "run time" lines; each model's rows that
decide (--summary) against the TSVs. --reuse: the same call again runs
nothing and writes the same markdown; without --reuse or with another
--needles the runs run again. Then the
usage errors: a missing model_eval and a missing model file exit 2 with a
message.

usage: quality_tables_check.py MODEL_EVAL BENCH_MODEL_DIR WORK_DIR
"""
import csv
import math
import os
import re
import shutil
import subprocess
import sys

MODEL_EVAL, BENCH, WORK = sys.argv[1:4]
SCRIPT = os.path.join(BENCH, "quality_tables.py")
MODELS = [os.path.join(BENCH, "data", "model.pkvm"),
          os.path.join(BENCH, "data", "model2_init.pkvm")]
TASKS = ["needle", "multiq"]
ARGS = []  # the first call's arguments
errors = []


def check(cond, what):
    if not cond:
        errors.append(what)
    return cond


def num(s):
    return float("nan") if s == "NaN" else float(s)


def acc(v):
    return "" if math.isnan(v) else "%.1f%%" % v


def diff(d, se, prec):
    return "" if math.isnan(d) else "%+.*f ± %.*f" % (prec, d, prec, se)


def run(args):
    return subprocess.run([sys.executable, SCRIPT] + args,
                          capture_output=True, text=True)


def compact(v, sign=False):
    t = "%.1f" % v
    t = t[:-2] if t.endswith(".0") else t
    t = "0" if t == "-0" else t
    return ("+" + t if sign and t[0] != "-" else t).replace("-", "\u2212")


def md_sections(md):
    """{(model, task): (context line, table rows as cell lists, notes)};
    the rows that decide under (model, "the rows that decide")."""
    out = {}
    blocks = re.split(r"^### ", md, flags=re.M)[1:]
    for b in blocks:
        lines = b.split("\n## ")[0].split("\n")
        model, task = lines[0].split(": ")
        rows = [[c.strip() for c in l.strip().strip("|").split("|")]
                for l in lines if l.startswith("|")]
        notes = [l[2:] for l in lines if l.startswith("- ")]
        ctx = next((l for l in lines if l.startswith("context")), "")
        out[(model, task)] = (ctx, rows, notes)
    return out


def text_rows(text):
    """The text table's rows: {(label, name): [accuracy and vs-uniform
    strings per protocol]} (fixed-width label and name, eval_report.c)."""
    rows = {}
    for l in text.splitlines():
        if not (l.startswith("full ") or re.match(r"1/\d+=\d+ ", l)):
            continue
        if "not in this library" in l:
            continue
        label, name, rest = l[:7].strip(), l[8:40].strip(), l[40:].split()
        vals, i = [], 3
        while i < len(rest) and rest[i].endswith("%"):
            a = rest[i]
            i += 1
            d = ""
            if i + 2 < len(rest) and rest[i + 1] == "+-":
                d = "%s ± %s" % (rest[i], rest[i + 2])
                i += 3
            vals += [a, d]
        rows[(label, name)] = vals
    return rows


def check_summary(out, model, sec):
    """The rows that decide of one model (default --summary: uniform and
    ada-snapkv are in it, the rest not measured): a column per task and
    protocol, the full cache then uniform then ada-snapkv, each cell the
    TSV's accuracy and, but for 0 +- 0, its difference +- standard error."""
    if not check(sec is not None, "%s: no rows that decide" % model):
        return
    _, rows, _ = sec
    check(rows[0] == ["1/4", "needle aw", "needle ag", "multiq ag"],
          "%s summary header %s" % (model, rows[0]))
    stem = os.path.splitext(os.path.basename(model))[0]
    tsv = {}
    for t in TASKS:
        with open(os.path.join(out, "%s.%s.tsv" % (stem, t)),
                  newline="") as f:
            tsv[t] = {x["key"]: x for x in csv.DictReader(f, delimiter="\t")}
    body = rows[2:]
    check([r[0] for r in body] == [tsv["needle"][k]["method"] for k in
                                   ("full", "uniform", "ada-snapkv")],
          "%s summary rows %s" % (model, [r[0] for r in body]))
    cols = [("needle", "aware"), ("needle", "agnostic"), ("multiq", "agnostic")]
    for r, k in zip(body, ("full", "uniform", "ada-snapkv")):
        for cell, (t, p) in zip(r[1:], cols):
            x = tsv[t][k]
            want = compact(num(x["needle_" + p]))
            d, se = num(x["diff_" + p]), num(x["se_" + p])
            if not (math.isnan(d) or d == se == 0):
                want += " (%s ± %s)" % (compact(d, True), compact(se))
            check(cell == want, "%s summary %s %s %s: %r, tsv %r"
                  % (model, k, t, p, cell, want))


def check_reuse(out, md):
    """--reuse with the same options runs nothing (the texts untouched) and
    writes the same markdown; without --reuse, or with another --needles,
    the runs run again."""
    txt = [os.path.join(out, f) for f in sorted(os.listdir(out))
           if f.endswith(".txt")]
    before = [os.stat(f).st_mtime_ns for f in txt]
    r = run(ARGS + ["--reuse"])
    check(r.returncode == 0, "--reuse: exit %d %s" % (r.returncode, r.stderr))
    check([os.stat(f).st_mtime_ns for f in txt] == before,
          "--reuse ran model_eval again")
    with open(os.path.join(out, "tables.md")) as f:
        again = f.read()
    strip = lambda m: m.split("\n", 3)[3]  # the command line differs
    check(strip(again) == strip(md), "--reuse: another markdown")
    r = run(ARGS)
    check(r.returncode == 0 and all(
        os.stat(f).st_mtime_ns != t for f, t in zip(txt, before)),
          "without --reuse the runs were not all run again")
    args = list(ARGS)
    args[args.index("--needles") + 1] = "2"
    r = run(args + ["--reuse", "--tasks", "needle"])
    with open(os.path.join(out, "%s.needle.txt" % os.path.splitext(
            os.path.basename(MODELS[0]))[0])) as f:
        check(r.returncode == 0 and "; 2 " in f.read(),
              "--reuse with --needles 2 did not run again")
    with open(os.path.join(out, "tables.md")) as f:
        check(f.read() != again, "--needles 2: the same markdown")


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    out = os.path.join(WORK, "out")
    ARGS[:] = ["--models", ",".join(MODELS), "--tasks", ",".join(TASKS),
               "--methods", "uniform,ada-snapkv", "--budgets", "4",
               "--needles", "3", "--nll-samples", "1", "--ctx", "360",
               "--out", out, "--model-eval", MODEL_EVAL]
    r = run(ARGS)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        print("FAIL: quality_tables.py exited %d" % r.returncode)
        return 1
    with open(os.path.join(out, "tables.md")) as f:
        md = f.read()
    secs = md_sections(md)
    summaries = {k[0]: secs.pop(k) for k in list(secs)
                 if k[1] == "the rows that decide"}
    check(sorted(secs) == sorted((os.path.basename(m), t)
                                 for m in MODELS for t in TASKS),
          "sections %s" % sorted(secs))
    check(sorted(summaries) == sorted(os.path.basename(m) for m in MODELS),
          "summaries %s" % sorted(summaries))
    for m in MODELS:
        check("\n## %s\n" % os.path.basename(m) in md,
              "no model heading for %s" % m)
    cpu = {}
    for m in MODELS:
        for t in TASKS:
            key = (os.path.basename(m), t)
            if key not in secs:
                continue
            ctx, rows, notes = secs[key]
            base = os.path.join(out, "%s.%s" % (os.path.splitext(key[0])[0],
                                                t))
            with open(base + ".tsv", newline="") as f:
                tsv = list(csv.DictReader(f, delimiter="\t"))
            with open(base + ".txt") as f:
                text = f.read()
            cpu[key] = float(re.search(r"^run time ([0-9.]+) s \(CPU\)$",
                                       text, re.M).group(1))
            head, body = rows[0], rows[2:]
            want = ["budget", "method", "positions"]
            if t != "multiq":
                want += ["aware", "aware vs uniform"]
            want += ["agnostic", "agnostic vs uniform"]
            if t == "needle":
                want += ["NLL", "NLL vs uniform"]
            check(head == want, "%s: header %s" % (key, head))
            check(rows[1] == ["---"] * len(head), "%s: rule" % (key,))
            check(ctx.startswith("context 360; 3 ") and
                  ctx.endswith("%.1f s CPU" % cpu[key]),
                  "%s: context line %r" % (key, ctx))
            check((t == "multiq") == any("query-aware does not apply" in n
                                         for n in notes),
                  "%s: notes %s" % (key, notes))
            check(len(body) == len(tsv) == 3,
                  "%s: %d rows, tsv %d" % (key, len(body), len(tsv)))
            check(body and body[0][:2] == ["full", "full cache"],
                  "%s: first row %s" % (key, body[:1]))
            trows = text_rows(text)
            for cells, x in zip(body, tsv):
                c = dict(zip(head, cells))
                label = "full" if x["den"] == "0" else \
                    "1/%s=%s" % (x["den"], x["budget"])
                exp = {"budget": label, "method": x["method"],
                       "positions": x["positions"]}
                if "aware" in c:
                    exp["aware"] = acc(num(x["needle_aware"]))
                    exp["aware vs uniform"] = diff(num(x["diff_aware"]),
                                                   num(x["se_aware"]), 1)
                exp["agnostic"] = acc(num(x["needle_agnostic"]))
                exp["agnostic vs uniform"] = diff(num(x["diff_agnostic"]),
                                                  num(x["se_agnostic"]), 1)
                if "NLL" in c:
                    exp["NLL"] = "%.4f" % num(x["nll"])
                    exp["NLL vs uniform"] = diff(num(x["dnll_uniform"]),
                                                 num(x["se_dnll_uniform"]), 4)
                for k, v in exp.items():
                    check(c.get(k) == v, "%s %s %s: markdown %r, tsv %r"
                          % (key, label, k, c.get(k), v))
                # the tsv's numbers are the text table's
                txt = [v for k, v in exp.items()
                       if k in ("aware", "aware vs uniform", "agnostic",
                                "agnostic vs uniform")]
                got = trows.get((label, x["method"]))
                check(got == txt, "%s %s %s: text table %s, markdown %s"
                      % (key, label, x["method"], got, txt))
            # the uniform row and the full cache have no difference
            check(all(r[head.index("agnostic vs uniform")] == ""
                      for r in body[:2]), "%s: uniform/full diff" % (key,))
    for m in MODELS:
        check_summary(out, m, summaries.get(os.path.basename(m)))
    check_reuse(out, md)
    cpu_rows = re.findall(r"^\| (\S+) \| (\S+) \| ([0-9.]+) \|$", md, re.M)
    got = {(a, b): float(c) for a, b, c in cpu_rows}
    for k, v in cpu.items():
        check(got.get(k) == v, "CPU %s: markdown %s, run time %s"
              % (k, got.get(k), v))
    check(abs(got.get(("all", "all"), -1) - sum(cpu.values())) < 0.051,
          "CPU total %s, sum %s" % (got.get(("all", "all")),
                                   sum(cpu.values())))
    # usage errors: exit 2, one clear message
    r = run(["--model-eval", os.path.join(WORK, "no_model_eval"),
             "--models", MODELS[0], "--out", out])
    check(r.returncode == 2 and "model_eval is missing" in r.stderr,
          "missing model_eval: exit %d, %r" % (r.returncode, r.stderr))
    r = run(["--model-eval", MODEL_EVAL, "--models",
             os.path.join(WORK, "nosuch.pkvm"), "--out", out])
    check(r.returncode == 2 and "nosuch.pkvm is missing" in r.stderr,
          "missing model: exit %d, %r" % (r.returncode, r.stderr))
    r = run(["--tasks", "nosuch", "--model-eval", MODEL_EVAL])
    check(r.returncode == 2, "unknown task: exit %d" % r.returncode)
    r = run(["--help"])
    check(r.returncode == 0 and "--jobs" in r.stdout and
          "--model-eval" in r.stdout, "--help")
    for e in errors:
        print("FAIL: " + e)
    print("%d checks failed" % len(errors) if errors else "ok")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
