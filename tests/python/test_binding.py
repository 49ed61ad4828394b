"""The pyramidkv package against the C library it binds: struct layouts
against the C compiler's, every golden vector file replayed through Python,
schedules and plans against `pyramidkv plan --json`, and the profile
accumulator's derivations. Run by ctest (test_python_binding)."""
import ctypes
import glob
import json
import os
import subprocess

import numpy as np
import pytest

import pyramidkv as pk
from pyramidkv import _lib


def test_struct_layout_matches_c(layout_bin):
    out = subprocess.run([layout_bin], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    seen = set()
    for line in out:
        name, *vals = line.split()
        if name.startswith("default."):
            cls = _lib.STRUCTS[name[len("default."):]]
            want = [float(v) if "." in v else int(v) for v in vals]
            assert list(cls.DEFAULT[:len(want)]) == want, name
            continue
        if "." in name:
            sname, field = name.split(".")
            assert getattr(_lib.STRUCTS[sname], field).offset == int(vals[0]), name
        else:
            assert ctypes.sizeof(_lib.STRUCTS[name]) == int(vals[0]), name
            seen.add(name)
    # every struct the loaded library uses was laid out by the compiler
    need = set(_lib.STRUCTS) - set(_lib.OPTIONAL_STRUCTS)
    if pk.group_available():
        need |= {"pb_kvcache_group_params", "pb_kvcache_group_plan_info"}
    if pk.runtime.available():
        need.add("pb_qk_config")
    assert need <= seen, sorted(need - seen)


def test_version_and_status_messages():
    num, s = pk.version()
    major, minor, patch = (int(x) for x in pk.__version__.split("."))
    assert num == major * 10000 + minor * 100 + patch
    assert s == pk.__version__
    for i, name in enumerate(pk.STATUS_NAMES):
        e = pk.PyramidKVError(i, "f")
        assert e.status_name == name and pk.status_str(i) in str(e)
    assert pk.status_str(999) == "unknown status"


# ------------------------------------------------------ golden vectors ---

def _snake(k):
    return "".join("_" + c.lower() if c.isupper() else c for c in k)


def _native(case):
    """The C runner's rule: the native create when the case has options,
    an exact create status or surface "native"; else the vtable."""
    return ("options" in case or isinstance(case.get("expectCreateError"), str)
            or case.get("surface") == "native")


def _create(policy, case):
    params = {_snake(k): v for k, v in case.get("params", {}).items()}
    options = {_snake(k): v for k, v in case.get("options", {}).items()}
    kind = policy.split("/")[1].replace("-", "_")
    if _native(case):
        if kind == "pyramidkv":
            return pk.KVCache.pyramidkv(params, options)
        cfg = {"budget": params.get("budget", 512),
               "recent_window": params.get("recent_window", 0),
               "sinks": params.get("sinks", 0),
               "scorer": {"h2o": "cumulative", "tova": "last",
                          "scissorhands": "votes",
                          "streaming_llm": "none",
                          "sliding_window": "none"}[kind]}
        return pk.KVCache(**cfg)
    c = pk.KVCache.from_vtable(kind, **params)
    c.vtable_name = "pb_kvcache_" + kind
    return c


def _replay_case(policy, case):
    if case.get("expectCreateError"):
        with pytest.raises(pk.PyramidKVError) as e:
            _create(policy, case)
        want = case["expectCreateError"]
        if isinstance(want, str):
            assert e.value.status_name == want
        return
    c = _create(policy, case)
    try:
        for step in case.get("steps", []):
            _replay_step(c, step, _native(case))
    finally:
        c.close()


def _replay_step(c, step, native):
    call, args = step["call"], step.get("args", [])
    want_status = step.get("expectStatus")
    compatible = not native and want_status is None

    def run():
        if call == "onDecodeStep":
            attn = args[1]
            attn = None if attn is None else np.array(attn, dtype=np.float32)
            if not compatible:
                return c.observe(args[0], attn)
            # the vtable's on_decode_step: a refused step changes nothing
            before = c.scores()
            try:
                c.observe(args[0], attn)
            except pk.PyramidKVError:
                after = c.scores()
                assert before[0].tolist() == after[0].tolist()
                assert before[1].tolist() == after[1].tolist()
            return None
        if call == "evict":
            if len(args) > 1 and compatible:
                # the compatible surface's evict, through the vtable itself
                vt = _lib.Vtable.in_dll(_lib.lib(), c.vtable_name)
                buf = np.zeros(max(args[1], 1), np.uint32)
                n = vt.evict(c._h, args[0], _lib.addr(buf), args[1])
                return buf[:n].tolist()
            return c.evict(args[0], *args[1:]).tolist()
        if call in ("windowScoreOf", "scoreOf", "votesOf", "lastAttentionOf"):
            f = c.window_score if call == "windowScoreOf" else c.score
            if want_status is None and step.get("expect") == -1:
                try:
                    return f(args[0])
                except pk.PyramidKVError as e:
                    assert e.status_name == "PB_ERR_NOT_HELD"
                    return -1
            return f(args[0])
        if call == "prefill":
            rows = np.array(args[2], dtype=np.float32).reshape(-1, args[1])
            # as the C runner: the reserved scratch when prefillMaxLen is set,
            # else a workspace of exactly the size asked
            ws = None if c._prefill_max_len else "auto"
            return c.prefill(rows, args[0], workspace=ws).tolist()
        if call == "keptPositions":
            return c.kept_positions().tolist()
        if call == "reset":
            return c.reset()
        return {"keptCount": lambda: c.kept_count,
                "effectiveBudget": lambda: c.effective_budget,
                "capacity": lambda: c.capacity,
                "sinkCount": lambda: c.sink_count}[call]()

    if want_status and want_status != "PB_OK":
        before = c.kept_positions().tolist()
        with pytest.raises(pk.PyramidKVError) as e:
            run()
        assert e.value.status_name == want_status, step
        assert c.kept_positions().tolist() == before
        return
    got = run()
    if "expect" in step:
        assert got == step["expect"], step


VECTOR_FILES = sorted(glob.glob(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
    "vectors", "*.json")))


@pytest.mark.parametrize("path", VECTOR_FILES, ids=os.path.basename)
def test_golden_vectors(path):
    d = json.load(open(path))
    policy = d["policy"]
    if policy == "kv-cache/calibrate":
        pytest.skip("calibrate's measures are the CLI's, not a library call: "
                    "`pyramidkv vectors` runs them")
    n = 0
    for case in d["cases"]:
        if policy == "kv-cache/pyramid-budget":
            b, L, r = case["budget"], case["numLayers"], case["pyramidRatio"]
            if "layer" in case:
                assert pk.pyramid_budget(b, case["layer"], L, r) == \
                    case["expect"], case["name"]
                n += 1
                continue
            got = [pk.pyramid_budget(b, k, L, r) for k in range(L)]
            assert got == case["expect"], case["name"]
            if L and r:
                assert pk.pyramid_budgets(b, L, r).tolist() == case["expect"]
            assert pk.pyramid_total(b, L, r) == sum(case["expect"])
        elif policy == "kv-cache/schedule":
            p = {_snake(k): v for k, v in case.items()
                 if k not in ("name", "why", "schedule", "numLayers",
                              "budget", "expect", "expectTotal",
                              "expectStatus", "seed")}
            args = (case["schedule"], case["numLayers"], case["budget"])
            if "expectStatus" in case:
                with pytest.raises(pk.PyramidKVError) as e:
                    pk.schedule_shares(*args, **p)
                assert e.value.status_name == case["expectStatus"], case["name"]
            else:
                shares, total = pk.schedule_shares(*args, **p)
                assert shares.tolist() == case["expect"], case["name"]
                assert total == case["expectTotal"], case["name"]
        else:
            _replay_case(policy, case)
        n += 1
    assert n == len(d["cases"]) > 0


# ---------------------------------------------------- plan against CLI ---

PLANS = [
    ("arithmetic", 32, 512, {"ratio": 4}),
    ("uniform", 8, 100, {}),
    ("kvfactory", 32, 2048, {"window": 32, "beta": 20}),
    ("kvfactory-balanced", 16, 300, {"window": 8}),
    ("taper", 12, 512, {"sinks": 4, "taper_beta": 2.0}),
    ("curve", 24, 256, {"ratio": 6, "gamma_milli": 800}),
    ("geometric", 10, 64, {"ratio": 8}),
    ("profile", 4, 100, {"weights": [5, 3, 2, 1], "min_share": 10}),
    ("cake", 6, 200, {"weights": [16777216, 9000000, 5, 0, 300, 12],
                      "window": 16, "prompt_len": 900}),
]


def _cli_args(kind, L, B, p):
    a = ["plan", "--schedule", kind, "--layers", str(L), "--budget", str(B),
         "--kv-heads", "4", "--head-dim", "64", "--dtype-bytes", "2",
         "--block-size", "16", "--recent-window", "40", "--json"]
    names = {"ratio": "--ratio", "window": "--window", "beta": "--beta",
             "sinks": "--sinks", "min_share": "--min-share",
             "prompt_len": "--prompt-len"}
    for k, v in p.items():
        if k == "taper_beta":
            a += ["--beta", repr(v)]
        elif k == "gamma_milli":
            a += ["--gamma", "%g" % (v / 1000)]
        elif k == "weights":
            a += ["--weights", ",".join(map(str, v))]
        else:
            a += [names[k], str(v)]
    return a


@pytest.mark.parametrize("kind,L,B,p", PLANS, ids=[x[0] for x in PLANS])
def test_plan_matches_cli_json(cli, kind, L, B, p):
    j = json.loads(subprocess.run([cli] + _cli_args(kind, L, B, p),
                                  capture_output=True, text=True,
                                  check=True).stdout)
    pl = pk.plan(kind, L, B, recent_window=40, kv_heads=4, head_dim=64,
                 dtype_bytes=2, block_size=16, **p)
    assert pl.shares.tolist() == j["shares"]
    assert pl.total == j["total"]
    assert pl.held_total == j["held"]
    assert pl.bytes_per_position == j["bytesPerPosition"]
    assert pl.floor == j["floor"]
    for k, row in enumerate(j["perLayer"]):
        assert (int(pl.bytes[k]), int(pl.blocks[k]), bool(pl.floor_binds[k])) \
            == (row["bytes"], row["blocks"], row["floorBinds"]), k
    assert (pl.held_total, pl.total_bytes, pl.total_blocks) == (
        j["totals"]["positions"], j["totals"]["bytes"], j["totals"]["blocks"])
    assert (pl.uniform_positions, pl.uniform_bytes, pl.uniform_blocks) == (
        j["uniform"]["positions"], j["uniform"]["bytes"],
        j["uniform"]["blocks"])


def test_schedule_kind_names():
    known = pk.kinds()
    assert known[:len(pk.KINDS)] == pk.KINDS
    for i, name in enumerate(known):
        assert pk.kind_name(i) == name and pk.kind_value(name) == i
    assert pk.kind_name(len(known)) is None
    with pytest.raises(pk.PyramidKVError) as e:
        pk.kind_value("pyramid")
    assert e.value.status_name == "PB_ERR_PARAM"


# -------------------------------------------------- instances, scorers ---

def _softmax_rows(rng, n):
    x = rng.random(n).astype(np.float32) + np.float32(1e-3)
    return (x / x.sum()).astype(np.float32)


@pytest.mark.parametrize("scorer", list(pk.SCORERS))
def test_every_scorer_runs_and_sizes_exactly(scorer):
    cfg = dict(budget=24, recent_window=4, scorer=scorer,
               sinks=2 if scorer != "window" else 0, capacity=40)
    rng = np.random.default_rng(3)
    with pk.KVCache(**cfg) as c:
        assert c.memory_bytes == pk.config_size(**cfg)
        for pos in range(1, 200):
            c.observe(pos, _softmax_rows(rng, c.kept_count))
            if c.kept_count >= c.capacity:
                v = c.evict()
                assert np.all(np.diff(v.astype(np.int64)) > 0)
                assert c.kept_count == 24
        pos, sc = c.scores()
        assert pos.tolist() == c.kept_positions().tolist()
        assert sc.dtype == np.float64 and sc.size == pos.size


def test_layer_observes_every_head():
    rng = np.random.default_rng(5)
    with pk.Layer(3, budget=8, recent_window=2, obs_window=4) as layer:
        singles = [pk.KVCache(budget=8, recent_window=2, obs_window=4)
                   for _ in range(3)]
        for pos in range(1, 30):
            n = layer.heads[0].kept_count
            a = np.stack([_softmax_rows(rng, n) for _ in range(3)])
            layer.observe(pos, a)
            for s, row in zip(singles, a):
                s.observe(pos, row.copy())
            got = layer.evict()
            want = [s.evict() for s in singles]
            assert [g.tolist() for g in got] == [w.tolist() for w in want]
        for s in singles:
            s.close()


def test_head_reduce_matches_numpy():
    rng = np.random.default_rng(1)
    a = rng.random((4, 3, 17)).astype(np.float32)
    m = pk.head_reduce(a, "mean")
    want = (a.astype(np.float64).sum(axis=0) / 4).astype(np.float32)
    assert np.array_equal(m, want)
    assert np.array_equal(pk.head_reduce(a, "max"), a.max(axis=0))


def test_prefill_equals_feeding_the_rows():
    """The consistent scope is defined as the rows fed as decode steps and
    one evict: the binding's prefill and its observe/evict agree."""
    rng = np.random.default_rng(7)
    L, R = 300, 16
    rows = np.zeros((R, L), dtype=np.float32)
    for j in range(R):
        q = L - R + j
        rows[j, :q + 1] = _softmax_rows(rng, q + 1)
    cfg = dict(budget=64, recent_window=8, obs_window=R, pool_kernel=7)
    with pk.KVCache(prefill_max_len=L, **cfg) as a, \
            pk.KVCache(capacity=L + 1, **cfg) as b:
        kept, victims = a.prefill(rows, victims=True)
        for q in range(1, L):
            j = q - (L - R)
            b.observe(q, None if j < 0 else np.ascontiguousarray(rows[j, :q]))
        b.evict()
        assert kept.tolist() == b.kept_positions().tolist()
        assert sorted(kept.tolist() + victims.tolist()) == list(range(L))
    # without reserved scratch the binding passes a workspace of its own
    with pk.KVCache(**cfg) as c:
        assert c.prefill(rows).tolist() == kept.tolist()


def test_profile_matches_definitions():
    rng = np.random.default_rng(11)
    with pk.Profile(num_layers=2, max_len=64) as p:
        assert p.memory_bytes == pk.profile_size(2, 64)
        rows = rng.random((5, 64)).astype(np.float32)
        p.add_rows(0, rows)
        p.add_row(1, np.ones(16, np.float32))
        bits, support = p.entropy(1)
        assert bits == pytest.approx(4.0) and support == pytest.approx(16.0)
        assert p.layer_rows(0) == 5
        curve = p.mass_curve(0)
        assert curve[-1] == 1.0 and np.all(np.diff(curve) >= 0)
        assert p.mass(0, 10) == curve[9]
        w = p.weights(900000, 1)
        assert w.dtype == np.uint32 and w[0] == p.mass_k(0, 900000)
        r, d = pk.fit_ratio(np.array([8, 6, 4, 2], np.uint32), 8)
        assert 1 <= r <= 8 and d >= 0


def test_step_equals_observe_then_evict():
    rng = np.random.default_rng(9)
    cfg = dict(budget=16, recent_window=4, obs_window=4, pool_kernel=3)
    with pk.KVCache(**cfg) as a, pk.KVCache(**cfg) as b:
        out = np.empty(a.capacity, np.uint32)
        for pos in range(1, 80):
            row = _softmax_rows(rng, a.kept_count)
            if pos % 2:
                got = a.step(pos, row).tolist()
            else:
                got = out[:a.step(pos, row, out=out)].tolist()
            b.observe(pos, row)
            assert got == b.evict().tolist()
        with pytest.raises(pk.PyramidKVError) as e:
            a.step(79, _softmax_rows(rng, a.kept_count))
        assert e.value.status_name == "PB_ERR_POSITION"
        assert a.kept_positions().tolist() == b.kept_positions().tolist()
