"""model_eval's task generators (bench/model/eval_tasks.c) lay out the bytes
of bench/model/tasks.py: every prompt model_eval writes (--write-prompts) is
parsed back with tasks.py's own format strings, its haystack must be one
piece of the held-out text, and its length that of tasks.py's training
sequence at the same context. Also: the prompts are a function of the seed,
the tasks draw apart, and a written file reads back unchanged (--prompts,
up to four questions a line).

usage: task_layouts.py MODEL_EVAL BENCH_MODEL_DIR SCRATCH_DIR
Exit 0 when every check holds, 1 with the first failure on stderr.
"""
import os
import re
import string
import subprocess
import sys

MODEL_EVAL, BENCH_MODEL, SCRATCH = sys.argv[1:4]
sys.path.insert(0, BENCH_MODEL)
import tasks  # noqa: E402  (the layouts under test)

CTX = 512
N = 40
HELD = open(os.path.join(BENCH_MODEL, "data", "heldout.txt"), "rb").read()
KEY = "[0-9]{5}"
HAYS = set()  # the haystacks of the task being checked


def fail(msg):
    sys.stderr.write("task_layouts: %s\n" % msg)
    sys.exit(1)


def pattern(fmt, **groups):
    """tasks.py's format string as a regex: literal parts escaped, the
    first {field} a group of that name, a repeated one the same text."""
    out, seen = "", set()
    for lit, field, _, _ in string.Formatter().parse(fmt):
        out += re.escape(lit)
        if field in seen:
            out += "(?P=%s)" % field
        elif field is not None:
            out += "(?P<%s>%s)" % (field, groups[field])
            seen.add(field)
    return out


def unescape(f):
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "\\": "\\"}[m.group(1)], f)


def write(task, seed, path, ctx=CTX):
    r = subprocess.run([MODEL_EVAL, "--task", task, "--seed", str(seed),
                        "--needles", str(N), "--ctx", str(ctx),
                        "--write-prompts", path], capture_output=True)
    if r.returncode != 0:
        fail("%s: exit %d: %s" % (task, r.returncode, r.stderr.decode()))
    return open(path, "rb").read()


def prompts(data):
    out = []
    for line in data.decode("latin-1").split("\n"):
        if not line or line.startswith("#"):
            continue
        f = [unescape(x) for x in line.split("\t")]
        out.append((f[0], list(zip(f[1::2], f[2::2]))))
    return out


def needles(ctx, regex, what):
    """The needles of a context in order (match objects), after checking that
    removing them leaves one piece of the held-out text."""
    found = list(re.finditer(regex, ctx))
    hay = re.sub(regex, "", ctx)
    if hay.encode("latin-1") not in HELD:
        fail("%s: the context without its needles is not one piece of the "
             "held-out text: %r" % (what, hay[:80]))
    HAYS.add(hay)
    return found


def check(task, ctx, qa, what):
    total = len(ctx) + sum(len(q) + len(a) for q, a in qa) + 1
    if total != CTX:
        fail("%s: context, questions, answers and '.' take %d bytes, tasks.py's "
             "sequence at T = %d takes %d" % (what, total, CTX - 1, CTX))
    if task == "needle":
        ndl = needles(ctx, pattern(tasks.PASS_NEEDLE, k=KEY), what)
        ok = (len(ndl) == 1 and qa == [(tasks.PASS_Q, ndl[0].group(1))])
    elif task in ("multikey", "multiq"):
        ndl = needles(ctx, pattern(tasks.KEY_NEEDLE, n="[a-z]{5}",
                                   k=KEY), what)
        keys = dict(m.groups() for m in ndl)
        want_q = 1 if task == "multikey" else tasks.N_KEYS
        asked = []
        for j, (q, a) in enumerate(qa):
            m = re.fullmatch(("\\." if j else "") +
                             pattern(tasks.KEY_Q, n="[a-z]{5}"), q)
            if not m or keys.get(m.group("n")) != a:
                fail("%s: question %d %r / answer %r is not tasks.py's KEY_Q "
                     "of a needle with its key" % (what, j, q, a))
            asked.append(m.group("n"))
        ok = (len(ndl) == tasks.N_KEYS and len(keys) == tasks.N_KEYS and
              len(qa) == want_q and len(set(asked)) == want_q)
    elif task == "multivalue":
        ndl = needles(ctx, pattern(tasks.VAL_NEEDLE, n="[a-z]{5}",
                                   k=KEY), what)
        names = {m.group(1) for m in ndl}
        n = ndl[0].group(1) if ndl else ""
        ok = (len(ndl) == tasks.N_KEYS and len(names) == 1 and
              qa == [(tasks.VAL_Q.format(n=n),
                      " ".join(m.group(2) for m in ndl))])
    else:  # vartrack
        ndl = needles(ctx, pattern(tasks.VAR_VALUE, n="[A-Z]{5}",
                                   k="[0-9]{5}|[A-Z]{5}"), what)
        held = {}
        chains = []
        for m in ndl:  # each assignment extends the chain of its source
            n, v = m.group("n"), m.group("k")
            if v.isdigit():
                chains.append([v, n])
            else:
                chains[held[v]].append(n)
            held[n] = len(chains) - 1 if v.isdigit() else held[v]
        names = [n for c in chains for n in c[1:]]
        ok = (len(ndl) == 2 * tasks.CHAIN and len(chains) == 2 and
              all(len(c) == tasks.CHAIN + 1 for c in chains) and
              len(set(names)) == 2 * tasks.CHAIN and chains[0][0] != chains[1][0] and
              len(qa) == 1 and any(qa[0] == (tasks.VAR_Q.format(k=c[0]),
                                             " ".join(c[1:])) for c in chains))
    if not ok:
        fail("%s: not tasks.py's layout: %r ... %r" % (what, ctx[:60], qa))


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    seen = {}
    for task in tasks.TASKS:
        path = os.path.join(SCRATCH, task + ".tsv")
        data = write(task, 1, path)
        ps = prompts(data)
        if len(ps) != N:
            fail("%s: %d prompts, want %d" % (task, len(ps), N))
        HAYS.clear()
        for i, (ctx, qa) in enumerate(ps):
            check(task, ctx, qa, "%s prompt %d" % (task, i))
        seen[task] = set(HAYS)
        if write(task, 1, path + ".again") != data:
            fail("%s: the same seed gave other prompts" % task)
        if write(task, 2, path + ".seed2") == data:
            fail("%s: seeds 1 and 2 gave the same prompts" % task)
        # a written file reads back as the same prompts
        r = subprocess.run([MODEL_EVAL, "--prompts", path, "--write-prompts",
                            path + ".read"], capture_output=True)
        if r.returncode != 0:
            fail("%s: --prompts of a written file: exit %d: %s" %
                 (task, r.returncode, r.stderr.decode()))
        if prompts(open(path + ".read", "rb").read()) != ps:
            fail("%s: a written file does not read back unchanged" % task)
    # the tasks draw from streams of their own: no two share a haystack
    for a in tasks.TASKS:
        for b in tasks.TASKS:
            if a < b and seen[a] & seen[b]:
                fail("tasks %s and %s share a context" % (a, b))
    print("task_layouts: %d prompts of each of %s match tasks.py" %
          (N, ", ".join(tasks.TASKS)))


main()
