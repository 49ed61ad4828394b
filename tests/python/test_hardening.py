"""The bad-input matrix of tests/hardening repeated through Python: every
refusal becomes a PyramidKVError carrying the library's status and message,
the instance is left exactly as it was, and nothing a Python caller passes
(wrong shapes, dtypes, strides, out-of-range integers, a closed instance)
reaches C unchecked. Run by ctest (test_python_binding)."""
import threading

import numpy as np
import pytest

import pyramidkv as pk


def status(excinfo):
    return excinfo.value.status_name


def fresh(**kw):
    cfg = dict(budget=4, recent_window=1, obs_window=4, pool_kernel=1)
    cfg.update(kw)
    return pk.KVCache(**cfg)


def snapshot(c):
    pos, sc = c.scores()
    return pos.tolist(), sc.tolist(), c.kept_count


@pytest.mark.parametrize("field,value,want", [
    ("budget", 0, "PB_ERR_PARAM"),
    ("budget", 0xFFFFFFFF, "PB_ERR_PARAM"),
    ("recent_window", 4, "PB_ERR_PARAM"),
    ("num_layers", 0, "PB_ERR_PARAM"),
    ("pool_kernel", 2, "PB_ERR_PARAM"),
    ("obs_window", 0, "PB_ERR_PARAM"),
    ("pool", 7, "PB_ERR_PARAM"),
    ("scorer", 9, "PB_ERR_PARAM"),
    ("capacity", 2, "PB_ERR_PARAM"),
    ("row_stores", 5, "PB_ERR_PARAM"),
])
def test_refused_config(field, value, want):
    with pytest.raises(pk.PyramidKVError) as e:
        fresh(**{field: value})
    assert status(e) == want
    assert pk.status_str(e.value.status) in str(e.value)


@pytest.mark.parametrize("kw,exc", [
    ({"budget": -1}, ValueError), ({"budget": 1 << 32}, ValueError),
    ({"budget": 2.5}, TypeError), ({"budget": "8"}, TypeError),
    ({"scorer": "heavy"}, ValueError), ({"struct_size": 8}, TypeError),
    ({"no_such_field": 1}, TypeError),
])
def test_python_side_refusals(kw, exc):
    with pytest.raises(exc):
        fresh(**kw)


def test_observe_errors_leave_state():
    with fresh() as c:
        c.observe(1, np.array([1.0], np.float32))
        c.observe(2, np.array([0.5, 0.5], np.float32))
        before = snapshot(c)
        cases = [
            (2, np.array([0.2, 0.3, 0.5], np.float32), "PB_ERR_POSITION"),
            (3, np.array([0.5, 0.5], np.float32), "PB_ERR_LENGTH"),
            (3, np.array([np.nan, 0.5, 0.5], np.float32), "PB_ERR_WEIGHT"),
            (3, np.array([np.inf, 0.5, 0.5], np.float32), "PB_ERR_WEIGHT"),
            (3, np.array([-0.1, 0.5, 0.5], np.float32), "PB_ERR_WEIGHT"),
        ]
        for pos, attn, want in cases:
            with pytest.raises(pk.PyramidKVError) as e:
                c.observe(pos, attn)
            assert status(e) == want
            assert snapshot(c) == before


def test_full_instance():
    with fresh(capacity=3) as c:
        c.observe(1, np.array([1.0], np.float32))
        c.observe(2, np.array([0.5, 0.5], np.float32))
        before = snapshot(c)
        with pytest.raises(pk.PyramidKVError) as e:
            c.observe(3, np.full(3, 1 / 3, np.float32))
        assert status(e) == "PB_ERR_FULL" and snapshot(c) == before
        with pytest.raises(pk.PyramidKVError) as e:
            c.evict(1, capacity=1)
        assert status(e) == "PB_ERR_BUFFER" and snapshot(c) == before
        assert c.evict(1).tolist() == [0, 1]


@pytest.mark.parametrize("attn,exc", [
    (np.array([1.0], np.float64), TypeError),
    (np.array([1], np.int32), TypeError),
    (np.array([1.0], ">f4"), TypeError),
    (np.ones((1, 1), np.float32), ValueError),
    (np.ones(8, np.float32)[::4], ValueError),
    ("abc", TypeError),
    (object(), TypeError),
])
def test_bad_arrays(attn, exc):
    with fresh() as c:
        with pytest.raises(exc):
            c.observe(1, attn)
        assert c.kept_positions().tolist() == [0]


@pytest.mark.parametrize("pos", [-1, 1 << 32, 1.5, "1", None])
def test_bad_position(pos):
    with fresh() as c:
        with pytest.raises((TypeError, ValueError)):
            c.observe(pos, np.array([1.0], np.float32))


def test_closed_instance_refuses_everything():
    c = fresh()
    c.close()
    c.close()
    for f in (lambda: c.observe(1, np.array([1.0], np.float32)),
              lambda: c.observe(1), c.evict, c.reset, c.kept_positions,
              lambda: c.score(0), lambda: c.window_score(0), c.scores,
              lambda: c.kept_count, lambda: c.capacity,
              lambda: c.memory_bytes, lambda: c.effective_budget,
              lambda: c.sink_count, lambda: c.prefill_workspace_size(4),
              lambda: c.prefill(np.ones((1, 4), np.float32))):
        with pytest.raises(pk.ClosedError):
            f()
    assert "closed" in repr(c)


def test_prefill_refusals():
    rows = np.full((2, 8), 0.125, np.float32)
    with fresh(prefill_max_len=8) as c:
        with pytest.raises(ValueError):
            c.prefill(np.ones(8, np.float32))
        with pytest.raises(TypeError):
            c.prefill(rows.astype(np.float64))
        with pytest.raises(ValueError):
            c.prefill(np.asfortranarray(np.ones((2, 8), np.float32)))
        with pytest.raises(pk.PyramidKVError) as e:
            c.prefill(np.zeros((9, 8), np.float32))
        assert status(e) == "PB_ERR_PARAM"
        bad = rows.copy()
        bad[0, 7] = np.nan
        with pytest.raises(pk.PyramidKVError) as e:
            c.prefill(bad)
        assert status(e) == "PB_ERR_WEIGHT"
        with pytest.raises(pk.PyramidKVError) as e:
            c.prefill(np.ones((2, 9), np.float32), workspace=None)
        assert status(e) == "PB_ERR_WORKSPACE"
        with pytest.raises(pk.PyramidKVError) as e:
            c.prefill(rows, workspace=np.empty(1, np.uint64))
        assert status(e) == "PB_ERR_WORKSPACE"
        c.prefill(rows)
        with pytest.raises(pk.PyramidKVError) as e:
            c.prefill(rows)
        assert status(e) == "PB_ERR_NOT_FRESH"
        c.reset()
        assert c.prefill(rows).size == 4
    with fresh(scorer="cumulative") as c:
        with pytest.raises(pk.PyramidKVError) as e:
            c.prefill(rows)
        assert status(e) == "PB_ERR_PARAM"


def test_score_not_held_and_wrong_scorer():
    with fresh() as c:
        with pytest.raises(pk.PyramidKVError) as e:
            c.score(5)
        assert status(e) == "PB_ERR_NOT_HELD"
    with fresh(scorer="votes") as c:
        with pytest.raises(pk.PyramidKVError) as e:
            c.window_score(0)
        assert status(e) == "PB_ERR_PARAM"


def test_schedule_and_profile_refusals():
    with pytest.raises(pk.PyramidKVError) as e:
        pk.schedule_shares("arithmetic", 0, 512)
    assert status(e) == "PB_ERR_PARAM"
    with pytest.raises(pk.PyramidKVError) as e:
        pk.schedule_shares("profile", 2, 10, weights=[0, 0])
    assert status(e) == "PB_ERR_PARAM"
    with pytest.raises(ValueError):
        pk.schedule_shares("profile", 3, 10, weights=[1, 2])
    with pytest.raises(pk.PyramidKVError) as e:
        pk.schedule_shares("profile", 2, 10)
    assert status(e) == "PB_ERR_NULL"
    with pytest.raises(pk.PyramidKVError) as e:
        pk.pyramid_budgets(8, 0, 4)
    assert status(e) == "PB_ERR_PARAM"
    with pytest.raises(pk.PyramidKVError) as e:
        pk.head_reduce(np.array([[1.0], [-1.0]], np.float32))
    assert status(e) == "PB_ERR_WEIGHT"
    with pytest.raises(pk.PyramidKVError) as e:
        pk.Profile(num_layers=0)
    assert status(e) == "PB_ERR_PARAM"
    with pk.Profile(num_layers=1, max_len=4) as p:
        with pytest.raises(pk.PyramidKVError) as e:
            p.add_row(0, np.ones(5, np.float32))
        assert status(e) == "PB_ERR_LENGTH"
        with pytest.raises(pk.PyramidKVError) as e:
            p.add_row(1, np.ones(4, np.float32))
        assert status(e) == "PB_ERR_PARAM"
        with pytest.raises(pk.PyramidKVError) as e:
            p.add_row(0, np.zeros(4, np.float32))
        assert status(e) == "PB_ERR_WEIGHT"
        with pytest.raises(pk.PyramidKVError) as e:
            p.entropy(0)
        assert status(e) == "PB_ERR_PARAM"
        with pytest.raises(ValueError):
            p.add_rows(0, np.ones((2, 4), np.float32), lengths=[5, 1])
    with pytest.raises(pk.PyramidKVError) as e:
        pk.fit_ratio(np.zeros(3, np.uint32))
    assert status(e) == "PB_ERR_PARAM"


def test_vtable_refusal():
    with pytest.raises(pk.PyramidKVError) as e:
        pk.KVCache.from_vtable("tova", budget=0)
    assert status(e) == "PB_ERR_PARAM"
    with pytest.raises(ValueError):
        pk.KVCache.from_vtable("nope")


def test_close_while_other_threads_call():
    """Closing an instance that other threads are using: each call either
    completes or raises ClosedError; the lock keeps C from seeing a freed
    instance."""
    c = fresh(capacity=64)
    stop = threading.Event()
    errors = []

    def worker():
        pos = 1000
        while not stop.is_set():
            try:
                c.observe(pos)
                pos += 1
                if c.kept_count >= 60:
                    c.evict()
            except pk.ClosedError:
                return
            except Exception as e:  # pragma: no cover - a failure
                errors.append(e)
                return

    ts = [threading.Thread(target=worker) for _ in range(3)]
    for t in ts:
        t.start()
    c.close()
    stop.set()
    for t in ts:
        t.join()
    assert not [e for e in errors if not isinstance(e, pk.PyramidKVError)]
