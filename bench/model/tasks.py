"""The synthetic tasks the bench models train on (train.py), in Python.

What this file owns: the byte layout of every task's context, questions and
answers. model_eval builds its evaluation prompts from the same layouts in C
(eval_tasks.c); docs/quality.md, "The tasks", is the reference for both.
Training draws from random.Random(--seed) over the training text (the KJV
without Revelation); evaluation draws from splitmix64 seeds over Revelation
only, so no evaluation prompt's haystack is ever trained on.

Every task fills a haystack of text with needles at random depths (in
increasing order), then appends its questions, each followed by its answer
and "." (training) or by nothing (evaluation, the answer is scored):

  needle     " The pass key is 12345. Remember it. "
             Q "\\nWhat is the pass key? The pass key is "  A "12345"
  multikey   4 needles " The key of abcde is 12345. " (distinct names);
             Q "\\nWhat is the key of abcde? The key of abcde is "  A the key
             of one named needle, the other three are distractors
  multivalue 4 needles " A value of abcde is 12345. " (one name);
             Q "\\nWhat are the values of abcde? The values of abcde are "
             A "11111 22222 33333 44444" (order of appearance)
  vartrack   two chains " COPY 12345 TO ABCDE. " " COPY ABCDE TO FGHIJ. "
             " COPY FGHIJ TO KLMNO. " interleaved, in chain order;
             Q "\\nWhich variables hold 12345? They are "  A "ABCDE FGHIJ KLMNO"
  multiq     the multikey context, then all four keys asked in turn (a random
             order): Q1 A1 "." Q2 A2 "." ... from one context

Training only (never evaluated): letterkey, the needle's layout with a key
of LETTER_MIN to LETTER_MAX upper-case letters. A model whose copy formed
on digit keys does not copy letters (m1t after 13 M tokens: 3.2 to 10 nats
on a letter key's bytes in the needle's own frame, 0.01 on digits), and
vartrack's answers are letters. The key was 5 letters until m1t's 15.3 M
tokens: its bytes stayed at 2.5-3.2 nats through 2.2 M tokens of that
draw, the letters after the first included (a copy from the letter before,
not learnt); a longer key gives every sequence more such copies to learn.

Training only, m2: repeat, a string of REPEAT_MIN to REPEAT_MAX symbols
of one alphabet (digits, lower- or upper-case letters, drawn per string)
said once and repeated after the question:
             " The text is 0412...93. "  Q "\nRepeat the text: "  A the string
Every answer byte after the first is a copy of what followed the same
bytes earlier (induction); with ten digits in 64 symbols one byte before
does not say where, two or three do, as a name does in multikey. m2
answered the pass key from 8 M tokens on without this copy: at 13.7 M its
letter keys were at chance (3.26 nats a letter) and multikey's digits
were not the named key's (probe, 12 held-out haystacks at 384).
"""
import string

TASKS = ("needle", "multikey", "multivalue", "vartrack", "multiq")
LETTER_KEY = "letterkey"
REPEAT = "repeat"

PASS_NEEDLE = " The pass key is {k}. Remember it. "
PASS_Q = "\nWhat is the pass key? The pass key is "
KEY_NEEDLE = " The key of {n} is {k}. "
KEY_Q = "\nWhat is the key of {n}? The key of {n} is "
VAL_NEEDLE = " A value of {n} is {k}. "
VAL_Q = "\nWhat are the values of {n}? The values of {n} are "
# source first: each name of the answer follows what precedes it (the value,
# then the name before it) by one forward lookup; docs/quality.md says why
VAR_VALUE = " COPY {k} TO {n}. "
VAR_COPY = " COPY {m} TO {n}. "
VAR_Q = "\nWhich variables hold {k}? They are "
TEXT_NEEDLE = " The text is {k}. "
TEXT_Q = "\nRepeat the text: "
N_KEYS = 4
CHAIN = 3
LETTER_MIN, LETTER_MAX = 5, 24
REPEAT_MIN, REPEAT_MAX = 16, 64
REPEAT_ALPHABETS = (string.digits, string.ascii_lowercase,
                    string.ascii_uppercase)


def _key(rng):
    return "%05d" % rng.randrange(100000)


def _word(rng, letters, n):
    return "".join(rng.choice(letters) for _ in range(n))


def _names(rng, n, letters):
    out = []
    while len(out) < n:
        s = _word(rng, letters, 5)
        if s not in out:
            out.append(s)
    return out


def _needles(rng, task):
    """(needles in context order, [(question, answer)])."""
    if task in ("needle", LETTER_KEY):
        k = (_key(rng) if task == "needle" else
             _word(rng, string.ascii_uppercase,
                   rng.randint(LETTER_MIN, LETTER_MAX)))
        return [PASS_NEEDLE.format(k=k)], [(PASS_Q, k)]
    if task == REPEAT:
        k = _word(rng, rng.choice(REPEAT_ALPHABETS),
                  rng.randint(REPEAT_MIN, REPEAT_MAX))
        return [TEXT_NEEDLE.format(k=k)], [(TEXT_Q, k)]
    if task in ("multikey", "multiq"):
        names = _names(rng, N_KEYS, string.ascii_lowercase)
        keys = [_key(rng) for _ in names]
        ndl = [KEY_NEEDLE.format(n=n, k=k) for n, k in zip(names, keys)]
        order = list(range(N_KEYS))
        rng.shuffle(order)
        if task == "multikey":
            order = order[:1]
        return ndl, [(KEY_Q.format(n=names[i]), keys[i]) for i in order]
    if task == "multivalue":
        n = _names(rng, 1, string.ascii_lowercase)[0]
        keys = [_key(rng) for _ in range(N_KEYS)]
        return ([VAL_NEEDLE.format(n=n, k=k) for k in keys],
                [(VAL_Q.format(n=n), " ".join(keys))])
    if task == "vartrack":
        names = _names(rng, 2 * CHAIN, string.ascii_uppercase)
        k0 = _key(rng)
        k1 = _key(rng)
        while k1 == k0:
            k1 = _key(rng)
        chains = []
        for c, k in ((names[:CHAIN], k0), (names[CHAIN:], k1)):
            chains.append([VAR_VALUE.format(n=c[0], k=k)] +
                          [VAR_COPY.format(n=c[i], m=c[i - 1])
                           for i in range(1, CHAIN)])
        # interleave keeping each chain in order: a random merge
        ndl, a, b = [], 0, 0
        while a < CHAIN or b < CHAIN:
            if b == CHAIN or (a < CHAIN and rng.random() < 0.5):
                ndl.append(chains[0][a])
                a += 1
            else:
                ndl.append(chains[1][b])
                b += 1
        return ndl, [(VAR_Q.format(k=k0), " ".join(names[:CHAIN]))]
    raise ValueError(task)


def tail_bytes(task):
    """An upper bound on the bytes a task needs besides the haystack."""
    return {"needle": 90, LETTER_KEY: 90 + 2 * (LETTER_MAX - 5),
            REPEAT: 40 + 2 * REPEAT_MAX,
            "multikey": 180, "multivalue": 220,
            "vartrack": 200, "multiq": 330}[task]


def fits(task, T):
    """Whether a task is drawn at context T: its needles and questions
    leave at least 32 bytes of haystack."""
    return tail_bytes(task) + 32 <= T


def sample(rng, text, task, T):
    """One training sequence of exactly T+1 bytes and the byte ranges
    [start, end) of its answers (the '.' after each answer included)."""
    seq, spans, _ = sample_tail(rng, text, task, T)
    return seq, spans


def sample_tail(rng, text, task, T):
    """sample(), and where the questions begin (the index of the first
    question's first byte): train.py's position skips fall before it."""
    ndl, qa = _needles(rng, task)
    ndl = [n.encode() for n in ndl]
    tail, spans = b"", []
    for q, a in qa:
        tail += q.encode()
        spans.append((len(tail), len(tail) + len(a) + 1))
        tail += a.encode() + b"."
    hay_len = T + 1 - sum(len(n) for n in ndl) - len(tail)
    assert hay_len > 0, (task, T)
    start = rng.randrange(len(text) - hay_len - 1)
    hay = text[start:start + hay_len]
    cuts = sorted(rng.randrange(hay_len + 1) for _ in ndl)
    seq, prev = b"", 0
    for c, n in zip(cuts, ndl):
        seq += hay[prev:c] + n
        prev = c
    seq += hay[prev:]
    off = len(seq)
    seq += tail
    assert len(seq) == T + 1
    return seq, [(off + s, off + e) for s, e in spans], off
