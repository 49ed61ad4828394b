"""The layer group (pyramidkv.Group over pb_kvcache_group) through Python:
layouts are checked in test_binding.py; here, with floor_permille 1000 (every
head keeps its share) a group decides as independent instances do, a
group prefill equals each head's own prefill, the sizes are the library's,
and bad input raises with the group unchanged. Run by ctest
(test_python_binding)."""
import numpy as np
import pytest

import pyramidkv as pk

pytestmark = pytest.mark.skipif(
    not pk.group_available(), reason="the loaded library has no group")

HEAD = dict(budget=16, recent_window=4, obs_window=4, pool_kernel=3)


def rows_for(rng, lens, stride):
    a = np.zeros((len(lens), stride), np.float32)
    for h, n in enumerate(lens):
        x = rng.random(n).astype(np.float32) + np.float32(1e-3)
        a[h, :n] = x / x.sum()
    return a


def test_uniform_group_equals_independent_heads():
    rng = np.random.default_rng(2)
    H = 4
    with pk.Group(num_heads=H, floor_permille=1000, **HEAD) as g:
        assert g.memory_bytes == pk.group_size(num_heads=H,
                                               floor_permille=1000, **HEAD)
        assert g.info == pk.group_plan(num_heads=H, floor_permille=1000,
                                       **HEAD)
        singles = [pk.KVCache(capacity=g.info["head_capacity"], **HEAD)
                   for _ in range(H)]
        for pos in range(1, 60):
            lens = [s.kept_count for s in singles]
            a = rows_for(rng, lens, max(lens))
            g.observe(pos, a, lengths=lens)
            for s, row, n in zip(singles, a, lens):
                s.observe(pos, np.ascontiguousarray(row[:n]))
            got = g.evict()
            want = [s.evict() for s in singles]
            assert [x.tolist() for x in got] == [w.tolist() for w in want]
            assert [k.tolist() for k in g.kept_positions()] == \
                [s.kept_positions().tolist() for s in singles]
        assert g.kept_total == sum(s.kept_count for s in singles)
        for s in singles:
            s.close()


def test_group_prefill_uniform_equals_each_head():
    rng = np.random.default_rng(4)
    H, R, L = 3, 4, 40
    a = np.zeros((H, R, L), np.float32)
    for h in range(H):
        for j in range(R):
            q = L - R + j
            x = rng.random(q + 1).astype(np.float32) + np.float32(1e-3)
            a[h, j, :q + 1] = x / x.sum()
    with pk.Group(num_heads=H, floor_permille=1000, **HEAD) as g:
        kept = g.prefill(a)
        for h in range(H):
            with pk.KVCache(**HEAD) as c:
                assert kept[h].tolist() == c.prefill(
                    np.ascontiguousarray(a[h])).tolist()
        with pytest.raises(pk.PyramidKVError) as e:
            g.prefill(a)
        assert e.value.status_name == "PB_ERR_NOT_FRESH"
        g.reset()
        assert [k.tolist() for k in g.prefill(a)] == \
            [k.tolist() for k in kept]


def test_adaptive_group_keeps_the_layer_total():
    rng = np.random.default_rng(6)
    with pk.Group(num_heads=4, floor_permille=200, **HEAD) as g:
        for pos in range(1, 80):
            lens = [h.kept_count for h in g.heads]
            g.observe(pos, rows_for(rng, lens, max(lens)), lengths=lens)
            g.evict()
            assert g.kept_total <= g.info["layer_total"]


def test_group_refusals_leave_it_unchanged():
    with pk.Group(num_heads=2, **HEAD) as g:
        g.observe(1, np.ones((2, 1), np.float32))
        before = [k.tolist() for k in g.kept_positions()]
        for attn, lens, exc, status in [
            (np.ones((3, 2), np.float32), None, ValueError, None),
            (np.ones((2, 2), np.float64), None, TypeError, None),
            (np.ones((2, 4), np.float32)[:, ::2], None, ValueError, None),
            (np.ones((2, 2), np.float32), [2, 3], ValueError, None),
            (np.ones((2, 2), np.float32), [2, 1], pk.PyramidKVError,
             "PB_ERR_LENGTH"),
            (np.full((2, 2), np.nan, np.float32), None, pk.PyramidKVError,
             "PB_ERR_WEIGHT"),
        ]:
            with pytest.raises(exc) as e:
                g.observe(2, attn, lengths=lens)
            if status:
                assert e.value.status_name == status
            assert [k.tolist() for k in g.kept_positions()] == before
        with pytest.raises(pk.PyramidKVError) as e:
            g.observe(1, np.ones((2, 2), np.float32))
        assert e.value.status_name == "PB_ERR_POSITION"
        with pytest.raises(TypeError):
            g.heads[0].evict()
        with pytest.raises(pk.PyramidKVError) as e:
            g.prefill(np.ones((2, 1, 4), np.float32))
        assert e.value.status_name == "PB_ERR_NOT_FRESH"
    with pytest.raises(pk.ClosedError):
        g.observe(3, None)
    with pytest.raises(pk.ClosedError):
        g.heads[0].kept_positions()
    with pytest.raises(pk.PyramidKVError) as e:
        pk.Group(num_heads=0, **HEAD)
    assert e.value.status_name == "PB_ERR_PARAM"
    with pytest.raises(pk.PyramidKVError) as e:
        pk.Group(num_heads=2, capacity=40, **HEAD)
    assert e.value.status_name == "PB_ERR_PARAM"


def test_group_step_equals_observe_then_evict():
    """Group.step (pb_kvcache_group_step) against observe + evict on a twin
    group: the same victims, counts and held positions, with a new array,
    the same array refilled in place (its address reused), out= and
    lengths=."""
    rng = np.random.default_rng(8)
    kw = dict(num_heads=3, floor_permille=200, head_cap_permille=1500, **HEAD)
    with pk.Group(**kw) as a, pk.Group(**kw) as b:
        out = np.empty(3 * (a.info["head_capacity"] + 1), np.uint32)
        same = np.zeros((3, 64), np.float32)
        for pos in range(1, 90):
            lens = [h.kept_count for h in a.heads]
            budget = 20 if pos % 7 == 0 else pk.group.UINT64_MAX
            if pos % 5 == 0:
                attn = rows_for(rng, lens, max(lens))
            else:  # the same array each time, rewritten in place
                same[:] = 0
                same[:, :max(lens)] = rows_for(rng, lens, max(lens))
                attn = same
            kwargs = dict(out=out) if pos % 2 else {}
            v, counts = a.step(pos, attn, budget, lengths=lens, **kwargs)
            b.observe(pos, attn, lengths=lens)
            want = b.evict(budget)
            assert counts == [len(w) for w in want]
            assert v.tolist() == [int(x) for w in want for x in w]
            if pos % 2:
                assert v.base is out
            assert [k.tolist() for k in a.kept_positions()] == \
                [k.tolist() for k in b.kept_positions()]
        v, counts = a.step(90, None)
        b.observe(90, None)
        assert counts == [len(w) for w in b.evict()]


def test_group_step_refusals_leave_it_unchanged():
    with pk.Group(num_heads=2, **HEAD) as g:
        g.step(1, np.ones((2, 1), np.float32))
        before = [k.tolist() for k in g.kept_positions()]
        small = np.empty(1, np.uint32)
        for pos, attn, lens, kw, exc, status in [
            (2, np.ones((3, 2), np.float32), None, {}, ValueError, None),
            (2, np.ones((2, 2), np.float64), None, {}, TypeError, None),
            (2, np.ones((2, 2), np.float32), [2, 1], {}, pk.PyramidKVError,
             "PB_ERR_LENGTH"),
            (2, np.full((2, 2), np.nan, np.float32), None, {},
             pk.PyramidKVError, "PB_ERR_WEIGHT"),
            (1, np.ones((2, 2), np.float32), None, {}, pk.PyramidKVError,
             "PB_ERR_POSITION"),
            (2, np.ones((2, 2), np.float32), None, dict(out=small, budget=0),
             pk.PyramidKVError, "PB_ERR_BUFFER"),
            (2, np.ones((2, 2), np.float32), None,
             dict(out=np.empty(4, np.int32)), TypeError, None),
            (2, np.ones((2, 2), np.float32), None, dict(budget=-1),
             ValueError, None),
        ]:
            with pytest.raises(exc) as e:
                g.step(pos, attn, lengths=lens, **kw)
            if status:
                assert e.value.status_name == status
            assert [k.tolist() for k in g.kept_positions()] == before
    with pytest.raises(pk.ClosedError):
        g.step(3, None)
