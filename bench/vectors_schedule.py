#!/usr/bin/python3
"""vectors_schedule.py - writes vectors/schedule_*.json, the golden vectors
of pb_kvcache_schedule_shares, from an independent Python reading of
docs/spec.md §12: kvfactory's integer rules, taper in Python floats
(the reference's own arithmetic), the exact apportionment with Python's
unbounded integers, and the fixed-point log2 / 2^-y of curve and geometric.

Run from the repository root: /usr/bin/python3 bench/vectors_schedule.py
The C library is then checked against these files by `pyramidkv vectors`
(ctest label `vectors`); nothing here imports the library.
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


def kvfactory(C, w, beta, L, q):
    flat = kvfactory_flat(C, w, L, q)
    if flat is not None:
        return flat
    mx, mn = kvfactory_ends(C, w, beta, q)
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
    flat = kvfactory_flat(C, w, L, q)
    if flat is not None:
        return flat
    mx, mn = kvfactory_ends(C, w, beta, q)
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


W32 = [452, 448, 444, 440, 436, 433, 428, 425, 420, 417, 412, 407, 403, 397,
       394, 389, 384, 379, 375, 369, 364, 358, 352, 348, 341, 336, 329, 325,
       317, 311, 303, 298]

FILES = {
    "arithmetic": [
        case("llama 32 layers B=128 r=4", "pb_kvcache_pyramid_budget for "
             "every layer; 4080 <= 32 x 128", schedule="arithmetic",
             numLayers=32, budget=128, ratio=4),
        case("one layer", "L = 1: B", schedule="arithmetic", numLayers=1,
             budget=77, ratio=4),
        case("two layers", "L = 2, r = 3: floor(2*10*3/4) = 15, "
             "floor(2*10/4) = 5", schedule="arithmetic", numLayers=2,
             budget=10, ratio=3),
        case("ratio 1 is uniform", "r = 1: B everywhere", schedule="arithmetic",
             numLayers=5, budget=33, ratio=1),
        case("floors lose units", "B = 100, L = 4, r = 3: 150, 116, 83, 50 "
             "(399 <= 400)", schedule="arithmetic", numLayers=4, budget=100,
             ratio=3),
        case("largest fitting first share", "2B r/(r+1) = 4294967292 fits",
             schedule="arithmetic", numLayers=3, budget=2147483647, ratio=4),
        case("first share above 2^32 refused", "2B r/(r+1) above 2^32 - 1: "
             "refused rather than saturated", schedule="arithmetic",
             numLayers=3, budget=4294967295, ratio=4),
        case("ratio 0 refused", "r >= 1", schedule="arithmetic", numLayers=3,
             budget=64, ratio=0),
        case("zero layers refused", "L >= 1", schedule="arithmetic",
             numLayers=0, budget=64, ratio=4),
    ],
    "uniform": [
        case("llama 32 layers B=128", "B for every layer", schedule="uniform",
             numLayers=32, budget=128),
        case("one layer", "L = 1", schedule="uniform", numLayers=1, budget=5),
        case("two layers", "L = 2", schedule="uniform", numLayers=2,
             budget=9),
        case("budget 0", "0 everywhere", schedule="uniform", numLayers=3,
             budget=0),
        case("huge", "2^32 - 1 on 40 layers: total past 2^32",
             schedule="uniform", numLayers=40, budget=4294967295),
        case("80 layers", "L x B", schedule="uniform", numLayers=80,
             budget=2048),
        case("ratio ignored", "uniform reads no ratio", schedule="uniform",
             numLayers=4, budget=7, ratio=0),
        case("zero layers refused", "L >= 1", schedule="uniform",
             numLayers=0, budget=7),
    ],
    "kvfactory": [
        case("fact: C=64 overshoot", "p = 56, min = 2, max = 110, steps = "
             "108 // 31 = 3: 118 - 3l, total 2288 = 2048 + 240",
             schedule="kvfactory", numLayers=32, budget=64, window=8, beta=20),
        case("fact: C=2048 q=8192", "p = 2040, min = 102, max = 3978, steps "
             "= 3876 // 31 = 125: 3986 ... 111, total 65552",
             schedule="kvfactory", numLayers=32, budget=2048, window=8,
             beta=20, promptLen=8192),
        case("short prompt keeps q", "q = 50 < C = 64: every layer 50",
             schedule="kvfactory", numLayers=4, budget=64, window=8, beta=20,
             promptLen=50),
        case("middle branch keeps C", "C <= q = 100 < 2p = 112: every layer "
             "C", schedule="kvfactory", numLayers=4, budget=64, window=8,
             beta=20, promptLen=100),
        case("clamped by the prompt", "q = 115: max 110 >= q - w = 107, so "
             "max = 107, min = 112 - 107 = 5, steps = 102 // 3 = 34: 115, 81, "
             "47, 13",
             schedule="kvfactory", numLayers=4, budget=64, window=8, beta=20,
             promptLen=115),
        case("one layer", "L = 1: C (the reference divides by zero)",
             schedule="kvfactory", numLayers=1, budget=64, window=8, beta=20),
        case("two layers", "L = 2: steps = max - min", schedule="kvfactory",
             numLayers=2, budget=64, window=8, beta=20),
        case("beta 1", "min = p, max = p: flat at C", schedule="kvfactory",
             numLayers=6, budget=64, window=8, beta=1),
        case("window 0", "w = 0 allowed", schedule="kvfactory", numLayers=5,
             budget=100, window=0, beta=3),
        case("huge C refused", "max + w above 2^32 - 1",
             schedule="kvfactory", numLayers=32, budget=3000000000, window=8,
             beta=20),
        case("window = C refused", "w < C", schedule="kvfactory",
             numLayers=4, budget=64, window=64, beta=20),
        case("beta 0 refused", "beta >= 1", schedule="kvfactory",
             numLayers=4, budget=64, window=8, beta=0),
    ],
    "kvfactory_balanced": [
        case("fact: C=64", "the same ends 110 and 2, exact steps 108/31, "
             "largest remainders: 118, 115, 111, 108 ... 20, 17, 13, 10, "
             "total 2048", schedule="kvfactory-balanced", numLayers=32,
             budget=64, window=8, beta=20),
        case("C=2048 q=8192", "total exactly 32 x 2048",
             schedule="kvfactory-balanced", numLayers=32, budget=2048,
             window=8, beta=20, promptLen=8192),
        case("C=128", "total exactly 32 x 128", schedule="kvfactory-balanced",
             numLayers=32, budget=128, window=8, beta=20),
        case("short prompt keeps q", "q < C", schedule="kvfactory-balanced",
             numLayers=4, budget=64, window=8, beta=20, promptLen=10),
        case("one layer", "L = 1: C", schedule="kvfactory-balanced",
             numLayers=1, budget=64, window=8, beta=20),
        case("two layers", "L = 2: the ends exactly",
             schedule="kvfactory-balanced", numLayers=2, budget=64, window=8,
             beta=20),
        case("three layers tie", "raw 110, 56, 2: no remainder",
             schedule="kvfactory-balanced", numLayers=3, budget=64, window=8,
             beta=20),
        case("seven layers", "remainders spread", schedule="kvfactory-balanced",
             numLayers=7, budget=1000, window=32, beta=7),
        case("huge C refused", "max + w above 2^32 - 1",
             schedule="kvfactory-balanced", numLayers=8, budget=3000000000,
             window=8, beta=20),
        case("window > C refused", "w < C", schedule="kvfactory-balanced",
             numLayers=4, budget=64, window=65, beta=20),
    ],
    "taper": [
        case("fact: VeloxQuant L=12 B=512", "f = 5, span 507: 1019 ... 5, "
             "excess 0", schedule="taper", numLayers=12, budget=512, sinks=4,
             taperBeta=2.0),
        case("beta 10 clamps repeatedly", "span 9 x 195 = 1755: many layers "
             "floor, passes redistribute", schedule="taper", numLayers=32,
             budget=200, sinks=4, taperBeta=10.0),
        case("no sinks", "n_sink 0: floor 1", schedule="taper", numLayers=16,
             budget=64, sinks=0, taperBeta=3.5),
        case("half to even", "L = 2, B = 10, beta 1.5: 14.5 -> 14, 5.5 -> 6",
             schedule="taper", numLayers=2, budget=10, sinks=0,
             taperBeta=1.5),
        case("one layer below the floor", "L = 1: max(B, f) = 9",
             schedule="taper", numLayers=1, budget=3, sinks=8, taperBeta=2.0),
        case("budget below the floor", "B < f: the ramp rises",
             schedule="taper", numLayers=6, budget=3, sinks=4, taperBeta=2.0),
        case("beta 1 is flat", "span 0", schedule="taper", numLayers=5,
             budget=77, sinks=4, taperBeta=1.0),
        case("llama B=2048", "32 layers", schedule="taper", numLayers=32,
             budget=2048, sinks=4, taperBeta=2.0),
        case("start above 2^32 refused", "hi = 1000 + 995 x (1e7 - 1)",
             schedule="taper", numLayers=4, budget=1000, sinks=4,
             taperBeta=10000000.0),
        case("beta below 1 refused", "beta >= 1", schedule="taper",
             numLayers=4, budget=64, sinks=4, taperBeta=0.5),
    ],
    "curve": [
        case("llama B=128 gamma 0.75", "total exactly 4096, non-increasing",
             schedule="curve", numLayers=32, budget=128, ratio=4,
             gammaMilli=750),
        case("llama B=2048 gamma 0.75", "total exactly 65536",
             schedule="curve", numLayers=32, budget=2048, ratio=4,
             gammaMilli=750),
        case("gamma 1 is linear", "ratio 4 ramp", schedule="curve",
             numLayers=32, budget=128, ratio=4, gammaMilli=1000),
        case("two layers", "x = 1 and 0: 4 : 1 of 200 = 160, 40",
             schedule="curve", numLayers=2, budget=100, ratio=4,
             gammaMilli=300),
        case("one layer", "L = 1: B", schedule="curve", numLayers=1,
             budget=100, ratio=4, gammaMilli=750),
        case("ratio 1 is uniform", "r = 1", schedule="curve", numLayers=7,
             budget=50, ratio=1, gammaMilli=750),
        case("steep gamma", "gamma 1000: all but layer 0 near C_min",
             schedule="curve", numLayers=8, budget=100, ratio=4,
             gammaMilli=1000000),
        case("huge budget refused", "layer 0 above 2^32 - 1",
             schedule="curve", numLayers=8, budget=4294967295, ratio=4,
             gammaMilli=750),
        case("gamma 0 refused", "gamma > 0", schedule="curve", numLayers=4,
             budget=64, ratio=4, gammaMilli=0),
    ],
    "geometric": [
        case("llama B=128 r=4", "total exactly 4096", schedule="geometric",
             numLayers=32, budget=128, ratio=4),
        case("llama B=2048 r=4", "total exactly 65536", schedule="geometric",
             numLayers=32, budget=2048, ratio=4),
        case("two layers", "log2_q32(4) = 2^33: weights 2^31, 2^29: 160, 40",
             schedule="geometric", numLayers=2, budget=100, ratio=4),
        case("one layer", "L = 1: B", schedule="geometric", numLayers=1,
             budget=100, ratio=4),
        case("ratio 1 is uniform", "r = 1", schedule="geometric",
             numLayers=9, budget=11, ratio=1),
        case("ratio 3 of 5", "fractional exponents", schedule="geometric",
             numLayers=5, budget=100, ratio=3),
        case("huge ratio", "r = 2^32 - 1: weights reach 0 at the end",
             schedule="geometric", numLayers=6, budget=1000,
             ratio=4294967295),
        case("huge budget refused", "layer 0 above 2^32 - 1",
             schedule="geometric", numLayers=8, budget=4294967295, ratio=4),
        case("ratio 0 refused", "r >= 1", schedule="geometric", numLayers=4,
             budget=64, ratio=0),
    ],
    "profile": [
        case("funnel entropy B=128", "weights = entropy x 100",
             schedule="profile", numLayers=32, budget=128, weights=W32),
        case("with a minimum", "1, 0.5, 0.25, 0 -> 100, 50, 25, 0 above 10: "
             "216, 113, 61, 10", schedule="profile", numLayers=4, budget=100,
             weights=[100, 50, 25, 0], minShare=10),
        case("ties to the lower layer", "weights 1, 1, 1, 0, 20 units: "
             "floors 6, 6, 6, 0, the 2 left go to layers 0 and 1 (equal "
             "remainders): 7, 7, 6, 0", schedule="profile", numLayers=4,
             budget=5, weights=[1, 1, 1, 0]),
        case("one layer", "L = 1: B", schedule="profile", numLayers=1,
             budget=42, weights=[3]),
        case("min = B", "every layer B", schedule="profile", numLayers=3,
             budget=8, weights=[1, 2, 3], minShare=8),
        case("rising weights", "profile may rise", schedule="profile",
             numLayers=5, budget=20, weights=[1, 2, 3, 4, 5]),
        case("huge weights", "weights near 2^32", schedule="profile",
             numLayers=3, budget=1000000,
             weights=[4294967295, 4294967294, 1]),
        case("all zero refused", "not all weights 0", schedule="profile",
             numLayers=3, budget=8, weights=[0, 0, 0]),
        case("no weights refused", "weights NULL", schedule="profile",
             numLayers=3, budget=8),
        case("min above B refused", "min_share <= B", schedule="profile",
             numLayers=2, budget=8, weights=[1, 1], minShare=9),
    ],
}


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
        with open(path, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        print("%s: %d cases" % (path, len(cases)))


if __name__ == "__main__":
    main()
