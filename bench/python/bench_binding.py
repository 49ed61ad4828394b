#!/usr/bin/python3
"""The binding's cost against the C calls it makes (docs/python.md).

  PYTHONPATH=build/dev/python /usr/bin/python3 bench/python/bench_binding.py \
      --c-lib build/dev/bench/python/libpb_python_bench_c.so

In one run, medians over --reps repetitions of --steps decode steps at
@HELD (an instance holding HELD positions, observe + evict each step):
  floor    one ctypes call of a C function that does nothing (pbpy_noop);
  C        observe + evict in a C loop (pbpy_steps), per step;
  Python   KVCache.observe + KVCache.evict, per step;
and for a layer of 8 KV heads: Layer.observe + Layer.evict (one C call per
head), Group.observe + Group.evict (pb_kvcache_group, one call each for
the layer, floor_permille 1000), Group.step (pb_kvcache_group_step, one
call for both; with out=, no victims array made) and the same step in a C
loop, against the C loop over 8 instances. Prints the figures; asserts
nothing.
It owns only the timing; the instances are the library's.
"""
import argparse
import ctypes
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
import pyramidkv as pk  # noqa: E402


def make(held, n, capacity=0):
    cfg = dict(budget=held, recent_window=32, obs_window=16, pool_kernel=7,
               capacity=capacity)
    out = []
    for _ in range(n):
        c = pk.KVCache(**cfg)
        for p in range(1, held):
            c.observe(p)
        out.append(c)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--c-lib", required=True)
    ap.add_argument("--held", type=int, default=512)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--heads", type=int, default=8)
    a = ap.parse_args()
    C = ctypes.CDLL(a.c_lib)
    C.pbpy_noop.argtypes = [ctypes.c_void_p, ctypes.c_uint32,
                            ctypes.c_void_p, ctypes.c_size_t]
    C.pbpy_noop.restype = ctypes.c_int
    C.pbpy_steps.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_uint32, ctypes.c_uint32,
                             ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_size_t]
    C.pbpy_steps.restype = ctypes.c_double
    C.pbpy_observe_heads.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                     ctypes.c_uint32, ctypes.c_void_p]
    C.pbpy_observe_heads.restype = ctypes.c_double
    C.pbpy_evict_heads.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                   ctypes.c_void_p, ctypes.c_size_t]
    C.pbpy_evict_heads.restype = ctypes.c_int
    has_step = hasattr(C, "pbpy_group_steps")
    if has_step:
        C.pbpy_group_steps.argtypes = [ctypes.c_void_p, ctypes.c_uint32,
                                       ctypes.c_uint32, ctypes.c_void_p,
                                       ctypes.c_size_t, ctypes.c_void_p,
                                       ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.c_void_p, ctypes.c_size_t]
        C.pbpy_group_steps.restype = ctypes.c_double
    if hasattr(C, "pbpy_group_observe"):
        C.pbpy_group_observe.argtypes = [ctypes.c_void_p, ctypes.c_uint32,
                                         ctypes.c_void_p, ctypes.c_size_t,
                                         ctypes.c_void_p]
        C.pbpy_group_observe.restype = ctypes.c_double
    rng = np.random.default_rng(1)
    row = rng.random(a.held + 1).astype(np.float32)
    row /= row.sum()
    victims = np.empty(a.held + a.steps + 2, np.uint32)
    S = a.steps

    def c_steps(insts, first):
        arr = (ctypes.c_void_p * len(insts))(*[c._h for c in insts])
        ns = C.pbpy_steps(arr, len(insts), first, S, pk._lib.addr(row),
                          pk._lib.addr(victims), victims.size)
        if ns < 0:
            raise RuntimeError("library error in the C loop")
        return ns / S

    one = make(a.held, 1)
    layer = pk.Layer.__new__(pk.Layer)
    layer.heads = make(a.held, a.heads)
    group = None
    if pk.group_available():
        group, gstep, gstep_o, gstep_c = (
            pk.Group(num_heads=a.heads, floor_permille=1000, budget=a.held,
                     recent_window=32, obs_window=16, pool_kernel=7)
            for _ in range(4))
        for G in (group, gstep, gstep_o, gstep_c):
            for p in range(1, a.held):
                G.observe(p, None)
    # the observation-alone comparison: room for S steps between evicts
    heads8 = make(a.held, a.heads, capacity=a.held + S + 2)
    arr8 = (ctypes.c_void_p * a.heads)(*[c._h for c in heads8])
    row_long = rng.random(a.held + S + 2).astype(np.float32)
    row_long /= row_long.sum()
    # [heads, held] blocks for every held count the steps reach, made
    # before timing
    blocks = {}
    for held in range(a.held, a.held + S):
        blocks[held] = np.ascontiguousarray(
            np.broadcast_to(row_long[:held], (a.heads, held)))
    lens_long = np.empty(a.heads, dtype=np.uintp)
    gobs = gobs_c = None
    if pk.group_available():
        gobs, gobs_c = (pk.Group(num_heads=a.heads, floor_permille=1000,
                                 slack=S + 1, budget=a.held,
                                 recent_window=32, obs_window=16,
                                 pool_kernel=7) for _ in range(2))
        for G in (gobs, gobs_c):
            for p in range(1, a.held):
                G.observe(p, None)
    pos = {"one": a.held, "layer": a.held, "group": a.held, "obs": a.held}
    fl, cc, py, lc, lp, gp, oc, og, ogc = [], [], [], [], [], [], [], [], []
    pyo, gs, gso, gsc = [], [], [], []
    gout = np.empty(a.heads * (a.held + 2), np.uint32)
    glens = np.full(a.heads, a.held, dtype=np.uintp)
    gcounts = np.empty(a.heads, dtype=np.uintp)
    out = np.empty(a.held + 2, np.uint32)
    lens8 = np.full(a.heads, a.held, dtype=np.uintp)
    noop = C.pbpy_noop
    h = one[0]._h
    addr = pk._lib.addr(row)
    rows8 = np.ascontiguousarray(np.broadcast_to(row[:a.held],
                                                 (a.heads, a.held)))
    for _ in range(a.reps):
        t0 = time.perf_counter_ns()
        for i in range(S):
            noop(h, i, addr, a.held)
        fl.append((time.perf_counter_ns() - t0) / S)

        cc.append(c_steps(one, pos["one"]))
        pos["one"] += S
        c = one[0]
        r = row[:a.held]
        p = pos["one"]
        t0 = time.perf_counter_ns()
        for i in range(S):
            c.step(p + i, r)
        py.append((time.perf_counter_ns() - t0) / S)
        pos["one"] += S
        p = pos["one"]
        t0 = time.perf_counter_ns()
        for i in range(S):
            c.step(p + i, r, out=out)
        pyo.append((time.perf_counter_ns() - t0) / S)
        pos["one"] += S

        lc.append(c_steps(layer.heads, pos["layer"]))
        pos["layer"] += S
        p = pos["layer"]
        t0 = time.perf_counter_ns()
        for i in range(S):
            layer.observe(p + i, rows8)
            layer.evict()
        lp.append((time.perf_counter_ns() - t0) / S)
        pos["layer"] += S
        if group is not None:
            p = pos["group"]
            t0 = time.perf_counter_ns()
            for i in range(S):
                group.observe(p + i, rows8)
                group.evict()
            gp.append((time.perf_counter_ns() - t0) / S)
            if has_step and gstep._step is not None:
                t0 = time.perf_counter_ns()
                for i in range(S):
                    gstep.step(p + i, rows8)
                gs.append((time.perf_counter_ns() - t0) / S)
                t0 = time.perf_counter_ns()
                for i in range(S):
                    gstep_o.step(p + i, rows8, out=gout)
                gso.append((time.perf_counter_ns() - t0) / S)
                ns = C.pbpy_group_steps(gstep_c._h, p, S,
                                        pk._lib.addr(rows8), a.held,
                                        pk._lib.addr(glens),
                                        pk._lib.addr(gout), gout.size,
                                        pk._lib.addr(gcounts), a.heads)
                if ns < 0:
                    raise RuntimeError("library error in the C group loop")
                gsc.append(ns / S)
            pos["group"] += S
            # the observation alone, S steps back to back with no evict
            # in between (capacities hold them; the held count grows the
            # same on every side), then one untimed evict: one
            # Group.observe (one C call for the layer) against 8
            # pb_kvcache_observe calls timed in C and the group's own call
            # timed in C
            for G in (gobs, gobs_c):
                G.evict()
            if C.pbpy_evict_heads(arr8, a.heads, pk._lib.addr(victims),
                                  victims.size):
                raise RuntimeError("library error in the C loop")
            bases = {heads8[0].kept_count, gobs.heads[0].kept_count,
                     gobs_c.heads[0].kept_count}
            if bases != {a.held}:
                raise RuntimeError("after the evicts the heads hold %s, not "
                                   "%d" % (sorted(bases), a.held))
            tc = tg = tgc = 0.0
            p = pos["obs"]
            for i in range(S):
                held = a.held + i
                ns = C.pbpy_observe_heads(arr8, a.heads, p + i,
                                          pk._lib.addr(row_long))
                blk = blocks[held]
                t0 = time.perf_counter_ns()
                gobs.observe(p + i, blk)
                tg += time.perf_counter_ns() - t0
                lens_long.fill(held)
                ns2 = C.pbpy_group_observe(gobs_c._h, p + i,
                                           pk._lib.addr(blk), held,
                                           pk._lib.addr(lens_long))
                if ns < 0 or ns2 < 0:
                    raise RuntimeError("library error in the C loop (step "
                                       "%d: %g %g)" % (i, ns, ns2))
                tc += ns
                tgc += ns2
            pos["obs"] += S
            oc.append(tc / S)
            og.append(tg / S)
            ogc.append(tgc / S)
    m = lambda x: float(np.median(x)) / 1000.0  # noqa: E731
    print("one instance @%d, observe + evict per step, median of %d x %d "
          "steps (us):" % (a.held, a.reps, S))
    print("  ctypes call floor (no-op C function)  %.3f" % m(fl))
    print("  C loop                                %.3f" % m(cc))
    print("  Python KVCache.step (observe + evict)  %.3f" % m(py))
    print("  Python KVCache.step(..., out=)        %.3f" % m(pyo))
    print("  Python - C: %.3f, with out= %.3f (target <= 3); less the "
          "floor of its two ctypes calls: %.3f, %.3f"
          % (m(py) - m(cc), m(pyo) - m(cc), m(py) - m(cc) - 2 * m(fl),
             m(pyo) - m(cc) - 2 * m(fl)))
    print("layer of %d KV heads, observe + evict per step (us):" % a.heads)
    print("  C loop over the heads                 %.3f" % m(lc))
    print("  Python Layer (one C call per head)    %.3f  (%.2fx the C loop; "
          "target <= 1.5x)" % (m(lp), m(lp) / m(lc)))
    if group is not None:
        print("  Python Group (pb_kvcache_group: one observe and one evict "
              "call)  %.3f  (%.2fx the C loop)" % (m(gp), m(gp) / m(lc)))
        if gs:
            print("  pb_kvcache_group_step in a C loop     %.3f  (%.2fx)"
                  % (m(gsc), m(gsc) / m(lc)))
            print("  Python Group.step (one C call)        %.3f  (%.2fx the "
                  "C loop; target <= 1.5x)" % (m(gs), m(gs) / m(lc)))
            print("  Python Group.step(..., out=)          %.3f  (%.2fx)"
                  % (m(gso), m(gso) / m(lc)))
        print("layer of %d KV heads, the observation alone, held %d .. %d "
              "(us):" % (a.heads, a.held, a.held + S - 1))
        print("  %d pb_kvcache_observe calls in C       %.3f" % (a.heads, m(oc)))
        print("  pb_kvcache_group_observe, timed in C  %.3f  (%.2fx)"
              % (m(ogc), m(ogc) / m(oc)))
        print("  Python Group.observe (one C call)     %.3f  (%.2fx; target "
              "<= 1.5x)" % (m(og), m(og) / m(oc)))
        for G in (group, gstep, gstep_o, gstep_c):
            G.close()
        gobs.close()
        gobs_c.close()
    else:
        print("  (the library has no pb_kvcache_group: no one-call layer)")
    for c in one + layer.heads + heads8:
        c.close()


if __name__ == "__main__":
    main()
