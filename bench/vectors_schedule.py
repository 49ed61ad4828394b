#!/usr/bin/python3
"""vectors_schedule.py - writes vectors/schedule_*.json, the golden vectors
of pb_kvcache_schedule_shares, from an independent Python reading of
docs/spec.md §12: kvfactory's integer rules, taper in Python floats
(the reference's own arithmetic), the exact apportionment with Python's
unbounded integers, and the fixed-point log2 / 2^-y of curve and geometric.

Run from the repository root: /usr/bin/python3 bench/vectors_schedule.py
The cases (names, the arithmetic by hand, the inputs) are in
bench/vectors_schedule_cases.json. The C library is then checked against
the files it writes by `pyramidkv vectors` (ctest label `vectors`);
nothing here imports the library.
"""
import json
import os

U32 = (1 << 32) - 1
KINDS = ["arithmetic", "uniform", "kvfactory", "kvfactory-balanced", "taper",
         "curve", "geometric", "profile"]


class Refused(Exception):
    def __init__(self, status):
        Exception.__init__(self, status)
        self.status = status


def check_fits(shares):
    if any(v > U32 for v in shares):
        raise Refused("PB_ERR_TOO_LARGE")
    return shares


# ---------------------------------------------------------------- arithmetic
def arithmetic(B, L, r):
    if L == 1:
        return [B]
    top = (2 * B * r) // (r + 1)
    if top > U32:
        raise Refused("PB_ERR_TOO_LARGE")
    return [(2 * B * (r * (L - 1) - k * (r - 1))) // ((r + 1) * (L - 1))
            for k in range(L)]


# ----------------------------------------------------------------- kvfactory
def kvfactory_ends(C, w, beta, q):
    p = C - w
    mn = p // beta
    mx = 2 * p - mn
    if q and mx >= q - w:
        mx = q - w
        mn = 2 * p - mx
    return mx, mn


def kvfactory_flat(C, w, L, q):
    p = C - w
    if q and q < C:
        return [q] * L
    if q and q < 2 * p:
        return [C] * L
    if L == 1:
        return [C]
    return None


def kvfactory_plan(C, w, beta, L, q):
    """(flat shares, None, None) for the flat cases, else (None, max, min)."""
    flat = kvfactory_flat(C, w, L, q)
    if flat is not None:
        return flat, None, None
    return (None,) + kvfactory_ends(C, w, beta, q)


def kvfactory(C, w, beta, L, q):
    flat, mx, mn = kvfactory_plan(C, w, beta, L, q)
    if flat is not None:
        return flat
    if mx + w > U32:
        raise Refused("PB_ERR_TOO_LARGE")
    steps = (mx - mn) // (L - 1)
    return [mx - l * steps + w for l in range(L)]


def apportion(nums, den, units):
    """floor(N_l / den), then the units left to the largest remainders,
    ties to the lower layer."""
    floors = [n // den for n in nums]
    rems = [n % den for n in nums]
    left = units - sum(floors)
    order = sorted(range(len(nums)), key=lambda l: (-rems[l], l))
    for l in order[:left]:
        floors[l] += 1
    return floors


def kvfactory_balanced(C, w, beta, L, q):
    flat, mx, mn = kvfactory_plan(C, w, beta, L, q)
    if flat is not None:
        return flat
    nums = [mx * (L - 1) - l * (mx - mn) for l in range(L)]
    return check_fits([v + w for v in apportion(nums, L - 1, L * (C - w))])


# --------------------------------------------------------------------- taper
def taper(L, B, n_sink, beta):
    f = n_sink + 1
    if L == 1:
        return [max(B, f)]
    span = (B - f) * (beta - 1)
    hi = B + span
    lo = B - span
    v = [hi + (lo - hi) * (i / (L - 1)) for i in range(L)]
    # The library's refusals: a non-finite start, or a start that rounds
    # above 2^32 - 1 (passes only lower values or raise them to f).
    if any(x != x or x in (float("inf"), float("-inf"))
           for x in (hi, lo, lo - hi)):
        raise Refused("PB_ERR_TOO_LARGE")
    if round(max(v + [f])) > U32:
        raise Refused("PB_ERR_TOO_LARGE")
    fixed = [False] * L
    adjusted = 0
    for _ in range(L):
        for i in range(L):
            if v[i] < f:
                v[i] = f
                fixed[i] = True
        total = 0
        for x in v:            # left to right, as docs/spec.md §12
            total = total + x
        excess = total - B * L
        if excess <= 1e-9:
            break
        free = [i for i in range(L) if not fixed[i]]
        slack = 0
        for i in free:
            slack = slack + (v[i] - f)
        if not free or slack <= 1e-9:
            break
        if adjusted == 256:  # the library keeps 256 passes' scalars
            raise Refused("PB_ERR_TOO_LARGE")
        for i in free:
            v[i] -= excess * (v[i] - f) / slack
        adjusted += 1
    return check_fits([max(int(round(x)), f) for x in v])


# ------------------------------------------------------- fixed-point powers
def log2_q32(n):
    k = n.bit_length() - 1
    z = n << (62 - k)
    result = k << 32
    for i in range(1, 33):
        z = (z * z) >> 62
        if z >= 1 << 63:
            z >>= 1
            result |= 1 << (32 - i)
    return result


def isqrt(n):
    x = int(n ** 0.5) if n < 1 << 52 else 1 << ((n.bit_length() + 1) // 2)
    while True:
        y = (x + n // x) // 2
        if y >= x:
            break
        x = y
    while x * x > n:
        x -= 1
    while (x + 1) * (x + 1) <= n:
        x += 1
    return x


EXP2_C = []
_prev = 1 << 63
for _i in range(32):
    _prev = isqrt(_prev << 62)
    EXP2_C.append(_prev)


def exp2_neg_q31(y):
    k, f = y >> 32, y & U32
    if f == 0:
        return 1 << (31 - k) if k <= 31 else 0
    if k >= 31:
        return 0
    g = (1 << 32) - f
    p = 1 << 62
    for i in range(1, 33):
        if (g >> (32 - i)) & 1:
            p = (p * EXP2_C[i - 1]) >> 62
    return p >> (32 + k)


def weighted(weights, units, base=0):
    wsum = sum(weights)
    return check_fits([v + base for v in
                       apportion([units * w for w in weights], wsum, units)])


def curve(B, L, r, gamma_milli):
    if L == 1:
        return [B]
    top = log2_q32(L - 1)
    ws = []
    for l in range(L):
        a = L - 1 - l
        x = 0 if a == 0 else exp2_neg_q31(
            gamma_milli * (top - log2_q32(a)) // 1000)
        ws.append(((1 << 31) + (r - 1) * x) // r)
    return weighted(ws, L * B)


def geometric(B, L, r):
    if L == 1:
        return [B]
    lr = log2_q32(r)
    return weighted([exp2_neg_q31(lr * l // (L - 1)) for l in range(L)],
                    L * B)


def profile(B, L, weights, min_share):
    return weighted(weights, L * (B - min_share), min_share)


# ------------------------------------------------------------------ the cases
def compute(c):
    k, L, B = c["schedule"], c["numLayers"], c["budget"]
    if L == 0:
        raise Refused("PB_ERR_PARAM")
    if k == "arithmetic":
        if c.get("ratio", 4) == 0:
            raise Refused("PB_ERR_PARAM")
        return arithmetic(B, L, c.get("ratio", 4))
    if k == "uniform":
        return [B] * L
    if k in ("kvfactory", "kvfactory-balanced"):
        w, beta = c.get("window", 8), c.get("beta", 20)
        if w >= B or beta < 1:
            raise Refused("PB_ERR_PARAM")
        fn = kvfactory if k == "kvfactory" else kvfactory_balanced
        return fn(B, w, beta, L, c.get("promptLen", 0))
    if k == "taper":
        beta = c.get("taperBeta", 2.0)
        if not beta >= 1.0:
            raise Refused("PB_ERR_PARAM")
        return taper(L, B, c.get("sinks", 4), beta)
    if k == "curve":
        g = c.get("gammaMilli", 750)
        if c.get("ratio", 4) < 1 or g < 1 or g > 1000000:
            raise Refused("PB_ERR_PARAM")
        return curve(B, L, c.get("ratio", 4), g)
    if k == "geometric":
        if c.get("ratio", 4) < 1:
            raise Refused("PB_ERR_PARAM")
        return geometric(B, L, c.get("ratio", 4))
    if "weights" not in c:
        raise Refused("PB_ERR_NULL")
    m = c.get("minShare", 0)
    if m > B or not any(c["weights"]):
        raise Refused("PB_ERR_PARAM")
    return profile(B, L, c["weights"], m)


def case(name, why, **kw):
    c = {"name": name, "why": why}
    c.update(kw)
    try:
        shares = compute(c)
        c["expect"] = shares
        total = sum(shares)
        c["expectTotal"] = total if total < 1 << 53 else str(total)
    except Refused as e:
        c["expectStatus"] = e.status
    return c


# The cases of every file, in order: name, why (the arithmetic by hand)
# and the inputs, as vectors_schedule_cases.json holds them; case() adds
# what this reading computes.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "vectors_schedule_cases.json")) as _f:
    FILES = {stem: [case(**c) for c in cases]
             for stem, cases in json.load(_f).items()}


def random_document(n, seed):
    """n random cases of every schedule (a cross-check of the library
    against this file: `bench/vectors_schedule.py --random 20000 1 >
    /tmp/r.json && build/dev/pyramidkv vectors /tmp/r.json`)."""
    import random
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        k = KINDS[i % len(KINDS)]
        L = rng.choice([1, 2, 3, rng.randint(1, 80)])
        B = rng.choice([rng.randint(0, 300), rng.randint(0, 1 << 20),
                        rng.randint(0, U32)])
        kw = dict(schedule=k, numLayers=L, budget=B,
                  ratio=rng.choice([1, 2, 4, rng.randint(1, 100),
                                    rng.randint(1, U32)]))
        if k.startswith("kvfactory"):
            kw.update(window=rng.randint(0, 64), beta=rng.randint(1, 40),
                      promptLen=rng.choice(
                          [0, rng.randint(1, min(4 * B + 10, U32))]))
        elif k == "taper":
            kw.update(budget=rng.randint(0, 1 << 20), sinks=rng.randint(0, 40),
                      taperBeta=rng.choice([1.0 + rng.randint(0, 36) / 4,
                                            1.0 + 9 * rng.random()]))
        elif k == "curve":
            kw.update(gammaMilli=rng.randint(1, 3000))
        elif k == "profile":
            kw.update(weights=[rng.choice([0, rng.randint(0, 9),
                                           rng.randint(0, U32)])
                               for _ in range(L)],
                      minShare=rng.choice([0, rng.randint(0, B)]))
        cases.append(case("random %d" % i, "random", **kw))
    return {"policy": "kv-cache/schedule", "version": 1,
            "description": "random cross-check", "cases": cases}


def main():
    import sys
    if len(sys.argv) == 4 and sys.argv[1] == "--random":
        json.dump(random_document(int(sys.argv[2]), int(sys.argv[3])),
                  sys.stdout)
        return
    for stem, cases in FILES.items():
        doc = {
            "policy": "kv-cache/schedule",
            "version": 1,
            "description": "pb_kvcache_schedule_shares, schedule %s: shares "
                           "and exact totals (or the refusal), computed by "
                           "bench/vectors_schedule.py from "
                           "docs/spec.md §12." % stem.replace("_", "-"),
            "cases": cases,
        }
        path = os.path.join("vectors", "schedule_%s.json" % stem)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print("%s: %d cases" % (path, len(cases)))


if __name__ == "__main__":
    main()
