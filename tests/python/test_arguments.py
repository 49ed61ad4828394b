"""Every array argument of the binding, and its configurations, as
docs/python.md ("Arguments") states them: an integer outside its C type is
a ValueError, a non-integer (a float such as 1.7 or 2.0, a bool, a string)
a TypeError, a numpy array of another dtype a TypeError; None is an unset
field; a refused configuration names the refused fields; QK.prefill's
victims compact the prompt's rows; and docs/runtime.md's Python block
runs. Run by ctest (test_python_binding)."""
import os
import re

import numpy as np
import pytest

import pyramidkv as pk
from pyramidkv import runtime as rt

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir))

needs_runtime = pytest.mark.skipif(
    not rt.available(), reason="the loaded library has no runtime helpers")


def _cache(**kw):
    cfg = dict(budget=8, recent_window=2, obs_window=2, pool_kernel=1)
    cfg.update(kw)
    return pk.KVCache(**cfg)


def _profile_lengths(lengths):
    with pk.Profile(num_layers=1, max_len=8) as p:
        p.add_rows(0, np.full((3, 3), 1 / 3, np.float32), lengths=lengths)


def _group_lengths(lengths):
    if not pk.group_available():
        pytest.skip("the loaded library has no group")
    with pk.Group(num_heads=3, budget=8, recent_window=2, obs_window=2,
                  pool_kernel=1) as g:
        g.observe(1, np.full((3, 3), 1.0, np.float32),
                  lengths=[1, 1, 1] if lengths is GOOD else lengths)


def _slots(slots):
    if not rt.available():
        pytest.skip("the loaded library has no runtime helpers")
    rt.compact_rows(slots, np.zeros((2 ** 20, 1), np.uint8))


# The well-formed argument (for Group.observe: every head holds one).
GOOD = [1, 2, 3]

# Every integer array argument, called with a three-element sequence.
INT_ARRAYS = {
    "schedule_shares weights": lambda w: pk.schedule_shares(
        "profile", 3, 100, weights=w),
    "schedule_shares cake weights": lambda w: pk.schedule_shares(
        "cake", 3, 100, weights=w),
    "plan weights": lambda w: pk.plan("profile", 3, 100, weights=w),
    "fit_ratio weights": lambda w: pk.fit_ratio(w),
    "compact_rows slots": _slots,
    "Profile.add_rows lengths": _profile_lengths,
    "Group.observe lengths": _group_lengths,
}


@pytest.mark.parametrize("name", list(INT_ARRAYS))
@pytest.mark.parametrize("bad,exc", [
    ([-1, 2, 3], ValueError), ([2 ** 32, 2, 3], ValueError),
    ([2 ** 64, 2, 3], ValueError), ([1.7, 2, 3], TypeError),
    ([2.0, 2, 3], TypeError), ([True, 2, 3], TypeError),
    ([np.True_, 2, 3], TypeError), (["1", 2, 3], TypeError),
    ("123", TypeError), (3, TypeError),
    (np.array([1.0, 2.0, 3.0]), TypeError),
    (np.array([True, False, True]), TypeError),
])
def test_integer_array_arguments(name, bad, exc):
    f = INT_ARRAYS[name]
    if name.endswith("lengths") and isinstance(bad, list) and \
            bad[0] in (2 ** 32, 2 ** 64):
        bad = [9, 2, 3]  # lengths: above the row length is out of range
    with pytest.raises(exc):
        f(bad)
    f(GOOD)  # the same argument, well formed, is accepted


def test_integer_arrays_the_library_reads_in_place_are_uint32():
    with pytest.raises(TypeError):
        pk.schedule_shares("profile", 3, 100, weights=np.array([1, 2, 3]))
    assert pk.schedule_shares("profile", 3, 100,
                              weights=np.array([1, 2, 3], np.uint32))[1] == 300
    # The three: none converted silently.
    for w in ([-1, 2, 3], [2 ** 32, 2, 3], [1.7, 2, 3]):
        with pytest.raises((ValueError, TypeError)):
            pk.schedule_shares("profile", 3, 100, weights=w)


def test_step_out_must_be_a_writable_uint32_array():
    with _cache() as c:
        for out, exc in ((list(range(8)), TypeError),
                         (np.zeros(8, np.int64), TypeError),
                         (np.zeros(8, np.uint32)[::2], ValueError)):
            with pytest.raises(exc):
                c.step(1, np.array([1.0], np.float32), out=out)
        ro = np.zeros(8, np.uint32)
        ro.flags.writeable = False
        with pytest.raises(ValueError):
            c.step(1, np.array([1.0], np.float32), out=ro)
        assert c.kept_positions().tolist() == [0]


def _float_calls():
    """name -> (shape, call): every float array argument, its call given
    the whole argument of that shape."""
    layer = pk.Layer(1, budget=8, recent_window=2)
    calls = {
        "KVCache.observe attn": ((1,), lambda a: _cache().observe(1, a)),
        "KVCache.step attn": ((1,), lambda a: _cache().step(1, a)),
        "KVCache.prefill attn": ((1, 4), lambda a: _cache().prefill(a)),
        "head_reduce attn": ((2, 1), lambda a: pk.head_reduce(a)),
        "Layer.observe attn": ((1, 1), lambda a: layer.observe(1, a)),
        "Profile.add_row row": ((1,), lambda a: pk.Profile(1, 8)
                                .add_row(0, a)),
        "Profile.add_rows rows": ((1, 1), lambda a: pk.Profile(1, 8)
                                  .add_rows(0, a)),
        "cake_weights preference": ((2,), lambda a: pk.cake_weights(a)),
        "cake_layer_preference attn": ((1, 1, 2), lambda a:
                                       pk.cake_layer_preference(a)),
    }
    if pk.group_available():
        calls["Group.observe attn"] = ((1, 1), lambda a: pk.Group(
            num_heads=1, budget=8, recent_window=2).observe(1, a))
        calls["Group.prefill attn"] = ((1, 1, 4), lambda a: pk.Group(
            num_heads=1, budget=8, recent_window=2).prefill(a))
    if rt.available():
        qk = rt.QK(head_dim=1, group=1, max_keys=8, max_rows=4)
        k = np.ones((1, 1), np.float32)
        calls["QK.attention q"] = ((1, 1), lambda a: qk.attention(a, k))
        calls["QK.observe q"] = ((1, 1), lambda a: qk.observe(_cache(), 1,
                                                             a, k))
        calls["QK.prefill q"] = ((1, 1, 1), lambda a: qk.prefill(_cache(),
                                                                a, k))
    return calls


FLOAT_ARRAYS = _float_calls()


def _filled(shape, value):
    """Nested lists of ``shape`` holding ``value``."""
    out = value
    for n in reversed(shape):
        out = [out] * n
    return out


@pytest.mark.parametrize("name", list(FLOAT_ARRAYS))
@pytest.mark.parametrize("bad", ["a", True, object(), None])
def test_float_array_arguments(name, bad):
    shape, call = FLOAT_ARRAYS[name]
    with pytest.raises(TypeError):
        call(_filled(shape, bad))
    with pytest.raises(TypeError):
        call("abc")


@pytest.mark.parametrize("name", list(FLOAT_ARRAYS))
def test_float_arrays_of_another_dtype(name):
    shape, call = FLOAT_ARRAYS[name]
    own = np.float64 if name.startswith("cake_weights") else np.float32
    other = np.float32 if own is np.float64 else np.float64
    with pytest.raises(TypeError):
        call(np.ones(shape, other))
    try:  # the right dtype reaches the library (which may refuse it)
        call(np.full(shape, 0.5, own))
    except pk.PyramidKVError:
        pass


def test_integer_scalars_refuse_bools_and_floats():
    for bad in (True, np.True_, 2.0, 1.7):
        with pytest.raises(TypeError):
            _cache(budget=bad)
        with pytest.raises(TypeError):
            pk.pyramid_budget(bad, 0, 4, 4)


def test_none_is_an_unset_field():
    with _cache(budget=None, recent_window=4) as a, \
            pk.KVCache(recent_window=4, obs_window=2, pool_kernel=1) as b:
        assert a.config == b.config and a.config["budget"] == 512
    assert (pk.schedule_shares("arithmetic", 8, 64, ratio=None)[0].tolist()
            == pk.schedule_shares("arithmetic", 8, 64)[0].tolist())
    assert pk.config_size(budget=None) == pk.config_size()


@pytest.mark.parametrize("call,fields", [
    (lambda: _cache(budget=64, pool_kernel=2), ("pool_kernel",)),
    (lambda: _cache(budget=64, obs_window=0), ("obs_window",)),
    (lambda: pk.config_size(budget=0), ("budget",)),
    (lambda: pk.schedule_shares("arithmetic", 0, 512), ("num_layers",)),
    (lambda: pk.schedule_shares("kvfactory", 4, 64, window=64),
     ("window", "budget")),
    (lambda: pk.Profile(num_layers=0), ("num_layers",)),
    (lambda: pk.profile_size(max_len=0), ("max_len",)),
])
def test_refused_configuration_names_the_field(call, fields):
    with pytest.raises(pk.PyramidKVError) as e:
        call()
    assert e.value.status_name == "PB_ERR_PARAM"
    assert e.value.fields == fields
    assert "refused: %s=" % fields[0] in str(e.value)


@needs_runtime
def test_qk_refused_configuration_names_the_field():
    with pytest.raises(pk.PyramidKVError) as e:
        rt.QK(head_dim=0, group=2)
    assert e.value.fields == ("head_dim",)


@needs_runtime
def test_qk_prefill_victims_compact_the_prompt_rows():
    rng = np.random.default_rng(5)
    d, n = 8, 40
    k = rng.standard_normal((n, d)).astype(np.float32)
    v = rng.standard_normal((n, d)).astype(np.float32)
    k0, v0 = k.copy(), v.copy()
    q = rng.standard_normal((2, 4, d)).astype(np.float32)
    qk = rt.QK(head_dim=d, group=2, max_keys=n, max_rows=4)
    with _cache(budget=12, obs_window=4) as a, _cache(budget=12,
                                                      obs_window=4) as b:
        kept, victims = qk.prefill(a, q, k, victims=True)
        assert kept.tolist() == qk.prefill(b, q, k).tolist()
        assert sorted(kept.tolist() + victims.tolist()) == list(range(n))
        assert kept.tolist() == a.kept_positions().tolist()
        rows = rt.compact_rows(victims, k, v)
        assert rows == kept.size == 12
        assert np.array_equal(k[:rows], k0[kept])
        assert np.array_equal(v[:rows], v0[kept])


@needs_runtime
def test_qk_observe_names_its_shape():
    qk = rt.QK(head_dim=4, group=2, max_keys=8, max_rows=4)
    with _cache() as c:
        with pytest.raises(ValueError) as e:
            qk.observe(c, 1, np.ones((2, 2, 4), np.float32),
                       np.ones((1, 4), np.float32))
        assert "[group=2, head_dim=4]" in str(e.value)
        qk.observe(c, 1, np.ones((2, 4), np.float32),
                   np.ones((1, 4), np.float32))
        assert c.kept_count == 2


@needs_runtime
def test_runtime_md_python_block_runs():
    with open(os.path.join(ROOT, "docs", "runtime.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert blocks
    for b in blocks:
        exec(compile(b, "docs/runtime.md", "exec"), {})
