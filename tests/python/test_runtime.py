"""The runtime helpers (pyramidkv.runtime over pyramidkv_runtime.h) and
CAKE's calls (pyramidkv_preference.h) through Python: evicting to the share
and as slots agrees with evict and the held order, compact_rows equals
numpy's delete in place, the Q/K scorer's attention is the softmax of the
scaled logits reduced over the group (to float rounding), its observe and
prefill equal the attention-row calls on the rows it computes, CAKE's
preference follows its formula and head shares add up. Each test is
skipped, saying so, with a library without its header's calls. Run by
ctest (test_python_binding)."""
import math

import numpy as np
import pytest

import pyramidkv as pk
from pyramidkv import runtime as rt

runtime_only = pytest.mark.skipif(
    not rt.available(), reason="the loaded library has no pyramidkv_runtime.h")

CFG = dict(budget=12, recent_window=3, obs_window=4, pool_kernel=3)


def rows(rng, n):
    x = rng.random(n).astype(np.float32) + np.float32(1e-3)
    return (x / x.sum()).astype(np.float32)


@runtime_only
def test_evict_to_share_and_slots_agree_with_evict():
    rng = np.random.default_rng(1)
    with pk.KVCache(**CFG) as a, pk.KVCache(**CFG) as b, \
            pk.KVCache(**CFG) as c:
        for pos in range(1, 60):
            r = rows(rng, a.kept_count)
            for x in (a, b, c):
                x.observe(pos, r)
            held = c.kept_positions()
            want = a.evict()
            assert rt.evict_to_share(b).tolist() == want.tolist()
            victims, slots = rt.evict_slots(c)
            assert victims.tolist() == want.tolist()
            assert held[slots].tolist() == victims.tolist()


@runtime_only
def test_compact_rows_equals_numpy_delete():
    rng = np.random.default_rng(2)
    k = rng.random((20, 3, 4)).astype(np.float32)
    v = rng.random((20, 5)).astype(np.float16)
    slots = np.array([0, 3, 4, 19], np.uint32)
    wk, wv = np.delete(k, slots, 0), np.delete(v, slots, 0)
    n = rt.compact_rows(slots, k, v)
    assert n == 16
    assert np.array_equal(k[:n], wk) and np.array_equal(v[:n], wv)
    with pytest.raises(pk.PyramidKVError) as e:
        rt.compact_rows(np.array([3, 2], np.uint32), k)
    assert e.value.status_name == "PB_ERR_PARAM"
    with pytest.raises(ValueError):
        rt.compact_rows(slots, k[:, 0])          # not contiguous
    with pytest.raises(ValueError):
        rt.compact_rows(slots, k, v[:5])


def reference_attention(q, k, scale):
    """numpy: per query head softmax(q.k * scale) over the causal keys,
    averaged over the group, in double."""
    g, R, d = q.shape
    n = k.shape[0]
    out = np.zeros((R, n))
    for h in range(g):
        for r in range(R):
            see = n - R + r + 1 if R > 1 else n
            z = (k[:see].astype(np.float64) @ q[h, r].astype(np.float64)) * scale
            e = np.exp(z - z.max())
            out[r, :see] += e / e.sum()
    return out / g


@runtime_only
def test_qk_attention_matches_softmax():
    rng = np.random.default_rng(3)
    d, g, n, R = 16, 2, 40, 4
    q = rng.normal(size=(g, R, d)).astype(np.float32)
    k = rng.normal(size=(n, d)).astype(np.float32)
    with rt.QK(head_dim=d, group=g, max_keys=64, max_rows=8) as qk:
        got = qk.attention(q, k)
    want = reference_attention(q, k, 1 / math.sqrt(d))
    assert got.shape == (R, n)
    assert np.abs(got - want).max() < 1e-5


@runtime_only
def test_qk_observe_and_prefill_equal_the_row_calls():
    rng = np.random.default_rng(4)
    d, g, L, R = 8, 2, 30, 4
    k = rng.normal(size=(L + 10, d)).astype(np.float32)
    q = rng.normal(size=(g, R, d)).astype(np.float32)
    with rt.QK(head_dim=d, group=g, max_keys=64, max_rows=8) as qk, \
            pk.KVCache(prefill_max_len=L, **CFG) as a, \
            pk.KVCache(prefill_max_len=L, **CFG) as b:
        block = qk.attention(q, k[:L])
        assert qk.prefill(a, q, k[:L]).tolist() == b.prefill(block).tolist()
        for pos in range(L, L + 10):
            held = a.kept_positions()
            keys = np.ascontiguousarray(k[held])
            qs = rng.normal(size=(g, d)).astype(np.float32)
            r = qk.attention(qs, keys)[0]
            qk.observe(a, pos, qs, keys)
            b.observe(pos, r)
            assert a.evict().tolist() == b.evict().tolist()
        with pytest.raises(pk.PyramidKVError) as e:
            qk.observe(a, pos + 1, qs, keys[:1])
        assert e.value.status_name == "PB_ERR_LENGTH"
        with pytest.raises(TypeError):
            qk.attention(q, k.astype(np.float16))
        with pytest.raises(ValueError):
            qk.attention(q[:1], k)
    with pytest.raises(pk.PyramidKVError) as e:
        rt.QK(head_dim=0)
    assert e.value.status_name == "PB_ERR_PARAM"
    assert rt.qk_size(head_dim=d, group=g) > 0


# CAKE's preference and per-head shares (pyramidkv_preference.h)
cake = pytest.mark.skipif(
    not hasattr(pk._lib.lib(), "pb_cake_weights"),
    reason="the loaded library has no pyramidkv_preference.h")


@cake
def test_cake_preference_and_weights():
    rng = np.random.default_rng(5)
    H, R, n = 2, 4, 30
    a = rng.random((H, R, n)).astype(np.float32)
    e, v, p = pk.cake_layer_preference(a, 1.0, 1.0)
    pre = a[:, :, :n - R].astype(np.float64)
    want_e = max(0.0, -(pre * np.log(pre + 1e-10)).sum())
    want_v = pre.var(axis=1, ddof=1).sum()
    assert e == pytest.approx(want_e, rel=1e-12)
    assert v == pytest.approx(want_v, rel=1e-12)
    assert p == pytest.approx(want_e * want_v, rel=1e-12)
    w = pk.cake_weights([1.0, 0.5, 0.25])
    assert w.tolist() == [1 << 24, 1 << 23, 1 << 22]
    with pytest.raises(pk.PyramidKVError) as err:
        pk.cake_weights([0.0, 0.0])
    assert err.value.status_name == "PB_ERR_PARAM"


@cake
def test_profile_head_shares_add_up():
    rng = np.random.default_rng(6)
    with pk.Profile(num_layers=2 * 3, max_len=32) as prof:
        for layer in range(6):
            prof.add_rows(layer, rng.random((4, 32)).astype(np.float32) **
                          (1 + layer))
        s = prof.head_shares(1, 3, 20, 5)
        assert s.sum() == 60 and s.min() >= 5
