#!/usr/bin/python3
"""quality_tables.py - the per-model, per-task quality table in one command.

Runs model_eval (bench/model) once per model file x task, keeps each run's
text output and --tsv in an output directory, records each run's CPU
seconds (the "run time X s (CPU)" line model_eval prints), and writes one
markdown file: per model, per task, a table with the full cache row and one
row per budget x method, the query-aware and query-agnostic accuracy with
the paired difference from uniform SnapKV +- its standard error, the NLL
where measured, and the CPU time of every run and in total.

Held-out NLL does not depend on the task, so it is measured on one task per
model only (--nll-task, default the first of --tasks).

Each model also gets the rows that decide (--summary, a few methods): one
table per budget, a column per task and protocol, each cell the accuracy
with its paired difference from uniform. --reuse keeps the runs a previous
call with the same options finished in --out (their command is recorded
beside them), so a long table can be finished in pieces.

Plain python3, standard library only. docs/quality.md, "Reproducing the
two-model table", gives the command; "The TSV" defines the columns read.
Exit status: 0; 1 if a model_eval run failed; 2 for a usage error, a
missing model_eval or a missing model file.
"""
import argparse
import concurrent.futures
import csv
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DATA = os.path.join(HERE, "data")
TASKS = ["needle", "multikey", "multivalue", "vartrack", "multiq"]
# The models trained on the task suite: m1t (m1 taught the suite) and m2;
# model.pkvm (m1, the pass key alone) answers none of the other tasks.
DEFAULT_MODELS = [os.path.join(DATA, "model1t.pkvm"),
                  os.path.join(DATA, "model2.pkvm")]
# --summary's default: uniform, the pyramid, the head-adaptive pool, CAKE's
# layer shares, both together, and TOVA (the newest query's attention).
SUMMARY = "uniform,pyramid4,ada-snapkv,cake,ada-cake,tova"
RUN_TIME = re.compile(r"^run time ([0-9.]+) s \(CPU\)$", re.M)
UNSUPPORTED = re.compile(r"^(\S+)\s+(.+?)\s+not in this library \((.*)\)$",
                         re.M)


def fail(msg, code=2):
    print("quality_tables.py: " + msg, file=sys.stderr)
    sys.exit(code)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="quality_tables.py",
        description="Run model_eval for every model file x task and write "
        "one markdown file of per-model, per-task tables (accuracy under "
        "both protocols with the paired difference from uniform SnapKV +- "
        "its standard error, NLL, full cache row, CPU time). Each run's "
        "text and TSV are kept in --out.",
        epilog="Defaults give the full two-model table: both model files "
        "that exist (bench/model/data/model1t.pkvm, model2.pkvm), all five "
        "tasks, every method, budgets 1/4, 1/8, 1/16, 50 prompts, 8 NLL "
        "windows on the first task. Exit 0; 1 if a run failed; 2 for a "
        "usage error, a missing model_eval or model file.")
    p.add_argument("--models", metavar="LIST",
                   help="comma-separated model files (default: those of "
                   "model1t.pkvm, model2.pkvm in bench/model/data that exist)")
    p.add_argument("--tasks", metavar="LIST", default=",".join(TASKS),
                   help="comma-separated tasks of model_eval --task "
                   "(default: %(default)s)")
    p.add_argument("--methods", default="all", metavar="LIST",
                   help="model_eval --methods (default: all)")
    p.add_argument("--budgets", default="4,8,16", metavar="LIST",
                   help="budget denominators (default: %(default)s)")
    p.add_argument("--needles", type=int, default=50, metavar="N",
                   help="prompts per task (default: %(default)s)")
    p.add_argument("--nll-samples", type=int, default=8, metavar="N",
                   help="held-out NLL windows, on --nll-task only "
                   "(default: %(default)s; 0: no NLL)")
    p.add_argument("--nll-task", metavar="TASK",
                   help="the task whose runs measure NLL (default: the "
                   "first of --tasks)")
    p.add_argument("--ctx", type=int, metavar="N",
                   help="model_eval --ctx (default: each model's context)")
    p.add_argument("--seed", type=int, metavar="N",
                   help="model_eval --seed (default: model_eval's, 1)")
    p.add_argument("--out", default="quality_tables", metavar="DIR",
                   help="output directory (default: %(default)s); the "
                   "markdown is DIR/tables.md")
    p.add_argument("--model-eval", metavar="PATH",
                   help="the model_eval binary (default: build/release/"
                   "model_eval of this checkout)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="runs in parallel (default: 1)")
    p.add_argument("--summary", default=SUMMARY, metavar="LIST",
                   help="method keys of each model's rows-that-decide "
                   "tables (default: %(default)s; empty: none)")
    p.add_argument("--reuse", action="store_true",
                   help="keep the runs in --out that finished with the "
                   "same command (DIR/MODEL.TASK.cmd); run the others")
    a = p.parse_args(argv)
    a.tasks = [t for t in a.tasks.split(",") if t]
    a.summary = [k for k in a.summary.split(",") if k]
    for t in a.tasks:
        if t not in TASKS:
            p.error("unknown task '%s' (tasks: %s)" % (t, " ".join(TASKS)))
    if not a.tasks:
        p.error("--tasks is empty")
    if a.nll_task is None:
        a.nll_task = a.tasks[0]
    elif a.nll_task not in a.tasks:
        p.error("--nll-task %s is not among --tasks" % a.nll_task)
    if a.jobs < 1 or a.needles < 1 or a.nll_samples < 0:
        p.error("--jobs and --needles must be >= 1, --nll-samples >= 0")
    if a.models:
        a.models = [m for m in a.models.split(",") if m]
        for m in a.models:
            if not os.path.isfile(m):
                fail("model file %s is missing" % m)
    else:
        a.models = [m for m in DEFAULT_MODELS if os.path.isfile(m)]
        if not a.models:
            fail("no model file: neither of %s exists (--models)"
                 % ", ".join(DEFAULT_MODELS))
    if a.model_eval is None:
        a.model_eval = os.path.join(ROOT, "build", "release", "model_eval")
    if not (os.path.isfile(a.model_eval) and
            os.access(a.model_eval, os.X_OK)):
        fail("model_eval is missing: %s (build it: cmake --preset release "
             "&& cmake --build build/release --target model_eval, or "
             "--model-eval PATH)" % a.model_eval)
    return a


def stem(model):
    return os.path.splitext(os.path.basename(model))[0]


def command(a, model, task):
    """One run's output base name and model_eval command line."""
    base = os.path.join(a.out, "%s.%s" % (stem(model), task))
    cmd = [a.model_eval, "--model", model, "--task", task,
           "--methods", a.methods, "--budgets", a.budgets,
           "--needles", str(a.needles), "--tsv", base + ".tsv",
           "--nll-samples",
           str(a.nll_samples if task == a.nll_task else 0)]
    if a.ctx:
        cmd += ["--ctx", str(a.ctx)]
    if a.seed is not None:
        cmd += ["--seed", str(a.seed)]
    return base, cmd


def finished(base, cmd):
    """The run at base finished with this command: its recorded command is
    cmd, its text has the run time line and its TSV exists."""
    try:
        with open(base + ".cmd") as f:
            if f.read() != " ".join(cmd) + "\n":
                return False
        with open(base + ".txt") as f:
            return (RUN_TIME.search(f.read()) is not None
                    and os.path.isfile(base + ".tsv"))
    except OSError:
        return False


def run_one(a, model, task):
    """One model_eval run (or with --reuse the finished one in --out):
    returns a dict with its files and CPU seconds."""
    base, cmd = command(a, model, task)
    if a.reuse and finished(base, cmd):
        rc = 0
    else:
        rc = run_eval(base, cmd)
    with open(base + ".txt") as f:
        text = f.read()
    m = RUN_TIME.search(text)
    return {"model": model, "task": task, "cmd": cmd, "rc": rc,
            "base": base, "text": text,
            "cpu": float(m.group(1)) if m else float("nan")}


def run_eval(base, cmd):
    """Runs model_eval, its output and stderr beside its command."""
    if os.path.exists(base + ".cmd"):
        os.remove(base + ".cmd")
    with open(base + ".txt", "w") as out, open(base + ".err", "w") as err:
        rc = subprocess.call(cmd, stdout=out, stderr=err)
    if rc == 0:
        with open(base + ".cmd", "w") as f:
            f.write(" ".join(cmd) + "\n")
    return rc


def num(s):
    return float(s) if s not in ("", "NaN", "nan") else float("nan")


def fmt_acc(v):
    return "" if math.isnan(v) else "%.1f%%" % v


def fmt_diff(d, se):
    return "" if math.isnan(d) else "%+.1f ± %.1f" % (d, se)


def fmt_nll(v):
    return "" if math.isnan(v) else "%.4f" % v


def fmt_dnll(d, se):
    return "" if math.isnan(d) else "%+.4f ± %.4f" % (d, se)


def read_tsv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def table(r):
    """The markdown lines of one run's table."""
    rows = read_tsv(r["base"] + ".tsv")
    aware = any(not math.isnan(num(x["needle_aware"])) for x in rows)
    agn = any(not math.isnan(num(x["needle_agnostic"])) for x in rows)
    nll = any(not math.isnan(num(x["nll"])) for x in rows)
    head = ["budget", "method", "positions"]
    if aware:
        head += ["aware", "aware vs uniform"]
    if agn:
        head += ["agnostic", "agnostic vs uniform"]
    if nll:
        head += ["NLL", "NLL vs uniform"]
    out = ["| " + " | ".join(head) + " |",
           "|" + "---|" * len(head)]
    for x in rows:
        den = int(x["den"])
        cells = ["full" if den == 0 else "1/%d=%s" % (den, x["budget"]),
                 x["method"], x["positions"]]
        if aware:
            cells += [fmt_acc(num(x["needle_aware"])),
                      fmt_diff(num(x["diff_aware"]), num(x["se_aware"]))]
        if agn:
            cells += [fmt_acc(num(x["needle_agnostic"])),
                      fmt_diff(num(x["diff_agnostic"]),
                               num(x["se_agnostic"]))]
        if nll:
            cells += [fmt_nll(num(x["nll"])),
                      fmt_dnll(num(x["dnll_uniform"]),
                               num(x["se_dnll_uniform"]))]
        out.append("| " + " | ".join(cells) + " |")
    notes = []
    if not aware:
        notes.append("query-aware does not apply (several questions of one "
                     "compressed cache: query-agnostic by construction)")
    for m in UNSUPPORTED.finditer(r["text"]):
        notes.append("%s %s: not in this library (%s)" % m.groups())
    with open(r["base"] + ".err") as f:
        notes += [l.strip() for l in f if l.startswith("model_eval: warning")]
    return out, notes


def compact(v, sign=False):
    """A figure as the summary prints it: whole numbers without decimals,
    one decimal otherwise, a minus sign (U+2212) for negatives."""
    t = "%.1f" % v
    t = t[:-2] if t.endswith(".0") else t
    t = "0" if t == "-0" else t
    if sign and not t.startswith("-"):
        t = "+" + t
    return t.replace("-", "\u2212")


PROTOCOLS = (("aw", "needle_aware", "diff_aware", "se_aware"),
             ("ag", "needle_agnostic", "diff_agnostic", "se_agnostic"))


def summary(a, mine):
    """The rows that decide for one model's runs: per budget a table, one
    column per task and protocol measured, one row per --summary key (and
    the full cache above the first budget), each cell the accuracy and
    (difference from uniform ± its standard error) where there is one and
    it is not 0 ± 0 (right on the same prompts as uniform)."""
    data = {r["task"]: read_tsv(r["base"] + ".tsv") for r in mine}
    cols = [(t, p) for t in data for p in PROTOCOLS
            if any(not math.isnan(num(x[p[1]])) for x in data[t])]
    dens = sorted({int(x["den"]) for t in data for x in data[t]} - {0})
    out = []
    for i, den in enumerate(dens):
        keys = (["full"] if i == 0 else []) + a.summary
        out += ["| 1/%d | %s |" % (den, " | ".join(
                    "%s %s" % (t, p[0]) for t, p in cols)),
                "|" + " --- |" * (len(cols) + 1)]
        for k in keys:
            cells, name = [], None
            for t, p in cols:
                x = next((x for x in data[t] if x["key"] == k and
                          int(x["den"]) == (0 if k == "full" else den)),
                         None)
                if x is None or math.isnan(num(x[p[1]])):
                    cells.append("")
                    continue
                name = x["method"]
                c = compact(num(x[p[1]]))
                d, se = num(x[p[2]]), num(x[p[3]])
                if not (math.isnan(d) or d == se == 0):
                    c += " (%s ± %s)" % (compact(d, True), compact(se))
                cells.append(c)
            if name is not None:
                out.append("| %s | %s |" % (name, " | ".join(cells)))
        out.append("")
    return out


def header_line(text, prefix):
    for line in text.splitlines():
        if line.startswith(prefix):
            return line
    return ""


def markdown(a, runs, argv):
    total = sum(r["cpu"] for r in runs)
    md = ["# Quality per model and task",
          "",
          "Written by `bench/model/quality_tables.py %s`; each run's text "
          "and TSV are beside this file. Accuracy in %% of questions; "
          "`vs uniform`: paired difference from uniform SnapKV at the same "
          "budget on the same prompts, in points (NLL: nats per byte), "
          "± its standard error." % " ".join(argv),
          ""]
    for model in a.models:
        mine = [r for r in runs if r["model"] == model]
        md += ["## %s" % os.path.basename(model), "",
               header_line(mine[0]["text"], "model:"), ""]
        if a.summary:
            md += ["### %s: the rows that decide" % os.path.basename(model),
                   "",
                   "Accuracy in %% (multiq: of its questions), aw "
                   "query-aware, ag query-agnostic; in brackets the paired "
                   "difference from uniform SnapKV ± its standard error, "
                   "left out where it is 0 ± 0; "
                   "methods %s." % ", ".join(a.summary), ""]
            md += summary(a, mine)
        for r in mine:
            lines, notes = table(r)
            md += ["### %s: %s" % (os.path.basename(model), r["task"]), "",
                   header_line(r["text"], "context") +
                   "; %.1f s CPU" % r["cpu"], ""]
            md += lines
            if notes:
                md += [""] + ["- " + n for n in notes]
            md.append("")
    md += ["## CPU time", "",
           "| model | task | CPU s |", "|---|---|---|"]
    for r in runs:
        md.append("| %s | %s | %.1f |" % (os.path.basename(r["model"]),
                                          r["task"], r["cpu"]))
    for model in a.models:
        md.append("| %s | all | %.1f |" % (
            os.path.basename(model),
            sum(r["cpu"] for r in runs if r["model"] == model)))
    md += ["| all | all | %.1f |" % total, ""]
    return "\n".join(md)


def main(argv):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    jobs = [(m, t) for m in a.models for t in a.tasks]
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        runs = list(ex.map(lambda j: run_one(a, *j), jobs))
    bad = [r for r in runs if r["rc"] != 0 or math.isnan(r["cpu"])]
    for r in runs:
        print("%-16s %-10s %8.1f s CPU%s" % (
            os.path.basename(r["model"]), r["task"], r["cpu"],
            "" if r not in bad else "  FAILED (exit %d, see %s.err)"
            % (r["rc"], r["base"])))
    if bad:
        for r in bad:
            with open(r["base"] + ".err") as f:
                tail = f.read().strip().splitlines()[-3:]
            print("quality_tables.py: %s failed:\n  %s\n  %s" % (
                " ".join(r["cmd"]), "\n  ".join(tail),
                "" if tail else "(no message)"), file=sys.stderr)
        return 1
    path = os.path.join(a.out, "tables.md")
    with open(path, "w") as f:
        f.write(markdown(a, runs, argv))
    print("total %.1f s CPU; wrote %s" % (sum(r["cpu"] for r in runs), path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
