"""The layer group (pb_kvcache_group, pyramidkv_group.h): the KV heads of
one layer sharing one pool (Ada-KV), with one C call per decode step, per
evict and per prefill for all heads.

It owns the Python lifetime of a group and the numpy checks of its [heads,
...] blocks; the heads' read-only queries go through views of the group's
own instances (KVCache objects that do not own them). With a library that
has no group (an older libpyramidkv.so.0), Group raises
NotImplementedError; available() tells beforehand.
"""
import ctypes
import threading

import numpy as np

from . import _lib
from ._lib import PyramidKVError, check, lib
from .kvcache import (ClosedError, KVCache, _called, _make_config, _Owned,
                      _pos, _queried)

UINT64_MAX = (1 << 64) - 1


def available():
    """True if the loaded library has the layer group."""
    return hasattr(lib(), "pb_kvcache_group_create")


def _require():
    if not available():
        raise NotImplementedError("the loaded libpyramidkv has no "
                                  "pb_kvcache_group (pyramidkv_group.h)")


def _params(num_heads, floor_permille, slack, prefill_max_len,
            head_cap_permille):
    return _lib.make_struct(_lib.GroupParams, num_heads=num_heads,
                            floor_permille=floor_permille, slack=slack,
                            prefill_max_len=prefill_max_len,
                            head_cap_permille=head_cap_permille)


def group_plan(num_heads=8, floor_permille=200, slack=1, prefill_max_len=0,
               head_cap_permille=0, **head):
    """pb_kvcache_group_plan: the group's sizes as a dict (num_heads,
    head_share, floor, head_min, head_max, head_capacity, layer_total)."""
    _require()
    cfg = _make_config(head)
    info = _lib.GroupPlanInfo(*_lib.GroupPlanInfo.DEFAULT)
    check(lib().pb_kvcache_group_plan(
        ctypes.byref(cfg), ctypes.byref(_params(num_heads, floor_permille,
                                                slack, prefill_max_len,
                                                head_cap_permille)),
        ctypes.byref(info)), "pb_kvcache_group_plan")
    return {f[0]: getattr(info, f[0]) for f in info._fields_
            if f[0] not in ("struct_size", "reserved")}


def group_size(num_heads=8, floor_permille=200, slack=1, prefill_max_len=0,
               head_cap_permille=0, **head):
    """pb_kvcache_group_size: the exact bytes Group(...) allocates."""
    _require()
    cfg = _make_config(head)
    n = _lib.size_t(0)
    check(lib().pb_kvcache_group_size(
        ctypes.byref(cfg), ctypes.byref(_params(num_heads, floor_permille,
                                                slack, prefill_max_len,
                                                head_cap_permille)),
        ctypes.byref(n)), "pb_kvcache_group_size")
    return int(n.value)


class _HeadView(KVCache):
    """A group's head as a KVCache for the read-only queries; it does not
    own the instance (closing it only detaches) and refuses the calls that
    change it (change a head through its group)."""

    def __init__(self, group, handle):
        self._adopt(handle, 0)
        self._lock = group._lock  # a query never overlaps a group call
        self._group = group
        self.config = dict(group.config)

    def _handle(self):
        if self._group._h is None:
            raise ClosedError("the group is closed")
        return self._h

    def close(self):
        self._h = None

    def __del__(self):
        pass

    def _refuse(self, *a, **k):
        raise TypeError("a group's head changes only through its group")

    observe = step = evict = reset = prefill = _refuse


class Group(_Owned):
    """pb_kvcache_group: ``num_heads`` instances of one head configuration
    (the KVCache fields: budget, share, scorer, recent_window, ...; capacity
    and prefill_max_len are the group's), sharing the layer's pool.
    floor_permille: Ada-KV's safeguard (1000 is uniform); slack: decode
    steps between evicts; prefill_max_len: scratch reserved for prefill;
    head_cap_permille: 0, or the most one head keeps, in thousandths of its
    share (at least 1000)."""
    _destroy = "pb_kvcache_group_destroy"
    _what = "the pb_kvcache_group"

    def __init__(self, num_heads=8, floor_permille=200, slack=1,
                 prefill_max_len=0, head_cap_permille=0, **head):
        _require()
        cfg = _make_config(head)
        p = _params(num_heads, floor_permille, slack, prefill_max_len,
                    head_cap_permille)
        h = ctypes.c_void_p()
        check(lib().pb_kvcache_group_create(ctypes.byref(cfg),
                                            ctypes.byref(p), None,
                                            ctypes.byref(h)),
              "pb_kvcache_group_create")
        self._h = h.value
        self._lock = threading.Lock()
        self.config = {n: getattr(cfg, n) for n in _lib.CONFIG_FIELDS}
        self.num_heads = p.num_heads
        self._prefill_max_len = p.prefill_max_len
        self.info = self._info()
        cap = int(self.info["head_capacity"]) * self.num_heads
        self._victims = np.empty(max(cap, 1), dtype=np.uint32)
        self._counts = np.empty(self.num_heads, dtype=np.uintp)
        self._lens = np.empty(self.num_heads, dtype=np.uintp)
        self._lens_addr = self._lens.ctypes.data
        self._observe = lib().pb_kvcache_group_observe
        self._evict = lib().pb_kvcache_group_evict
        self._n = _lib.size_t(0)
        self._n_ref = ctypes.byref(self._n)
        # evict's fixed arguments, resolved once
        self._evict_args = (self._victims.ctypes.data, self._victims.size,
                            self._counts.ctypes.data, self._counts.size,
                            self._n_ref)
        self.heads = [_HeadView(self, lib().pb_kvcache_group_head(self._h, i))
                      for i in range(self.num_heads)]

    def _info(self):
        info = _lib.GroupPlanInfo(*_lib.GroupPlanInfo.DEFAULT)
        check(lib().pb_kvcache_group_info(self._h, ctypes.byref(info)),
              "pb_kvcache_group_info")
        return {f[0]: getattr(info, f[0]) for f in info._fields_
                if f[0] not in ("struct_size", "reserved")}

    kept_total = _queried("pb_kvcache_group_kept_total")

    memory_bytes = _queried("pb_kvcache_group_memory_bytes")

    reset = _called("pb_kvcache_group_reset")

    def kept_positions(self):
        return [h.kept_positions() for h in self.heads]

    def observe(self, pos, attn, lengths=None):
        """pb_kvcache_group_observe, one call for every head. attn:
        [heads, stride] float32, C-contiguous; head h's weights are its
        first lengths[h] entries (default: every head holds ``stride``).
        None admits pos everywhere without observing."""
        pos = _pos(pos)
        if attn is None:
            with self._lock:
                st = lib().pb_kvcache_group_observe(self._handle(), pos, None,
                                                    0, None)
        else:
            a = attn
            if not (a.__class__ is np.ndarray and a.dtype == np.float32
                    and a.ndim == 2 and a.flags.c_contiguous):
                a = _lib.f32_array(attn, "attn", (2,))
            if a.shape[0] != self.num_heads:
                raise ValueError("attn: %d rows for %d heads"
                                 % (a.shape[0], self.num_heads))
            stride = a.shape[1]
            lens = self._lens
            if lengths is None:
                lens.fill(stride)
            else:
                ln = _lib.int_array(lengths, "lengths", stride)
                if ln.shape != (self.num_heads,):
                    raise ValueError("lengths: one integer 0 .. %d per head"
                                     % stride)
                lens[:] = ln
            with self._lock:
                st = self._observe(self._handle(), pos, a.ctypes.data, stride,
                                   self._lens_addr)
        if st:
            raise PyramidKVError(st, "pb_kvcache_group_observe")

    def evict(self, budget=UINT64_MAX):
        """pb_kvcache_group_evict: the layer down to min(budget,
        layer_total) held together; returns each head's victims (a list of
        uint32 arrays, ascending)."""
        b = budget if budget.__class__ is int else int(budget)
        if b != budget or not 0 <= b <= UINT64_MAX:
            raise ValueError("budget must be an integer in 0 .. 2^64-1")
        with self._lock:
            st = self._evict(self._handle(), b, *self._evict_args)
            if st:
                raise PyramidKVError(st, "pb_kvcache_group_evict")
            n = self._n.value
            v = self._victims[:n].copy()
            counts = self._counts.tolist()
        # one view per head (a Python loop over H ints is cheaper than
        # cumsum + split for a layer's few heads)
        out = []
        at = 0
        for c in counts:
            out.append(v[at:at + c])
            at += c
        return out

    def prefill_workspace_size(self, length):
        n = _lib.size_t(0)
        with self._lock:
            check(lib().pb_kvcache_group_prefill_workspace_size(
                self._handle(), _lib.check_size(length, "length"),
                ctypes.byref(n)), "pb_kvcache_group_prefill_workspace_size")
        return int(n.value)

    def prefill(self, attn, budget=UINT64_MAX, workspace="auto"):
        """pb_kvcache_group_prefill: attn [heads, rows, len] float32,
        C-contiguous. Returns each head's kept positions (a list)."""
        a = _lib.f32_array(attn, "attn", (3,))
        H, rows, length = a.shape
        if H != self.num_heads:
            raise ValueError("attn: %d heads for a group of %d"
                             % (H, self.num_heads))
        b = int(budget)
        if b != budget or not 0 <= b <= UINT64_MAX:
            raise ValueError("budget must be an integer in 0 .. 2^64-1")
        ws_addr, ws_bytes = None, 0
        if isinstance(workspace, str):
            if workspace != "auto":
                raise ValueError("workspace must be 'auto', None or an array")
            workspace = None
            if length > self._prefill_max_len:
                nb = self.prefill_workspace_size(length)
                workspace = np.empty((nb + 7) // 8 or 1, dtype=np.uint64)
        if workspace is not None:
            if not (isinstance(workspace, np.ndarray)
                    and workspace.flags.c_contiguous
                    and workspace.flags.writeable):
                raise TypeError("workspace must be a writable C-contiguous "
                                "ndarray")
            ws_addr, ws_bytes = workspace.ctypes.data, workspace.nbytes
        kept = np.empty(max(H * length, 1), dtype=np.uint32)
        counts = np.empty(H, dtype=np.uintp)
        n = _lib.size_t(0)
        with self._lock:
            check(lib().pb_kvcache_group_prefill(
                self._handle(), a.ctypes.data, rows * length, rows, length, b,
                ws_addr, ws_bytes, kept.ctypes.data, kept.size,
                counts.ctypes.data, H, ctypes.byref(n)),
                "pb_kvcache_group_prefill")
        ends = np.cumsum(counts)
        return np.split(kept[:int(n.value)].copy(), ends[:-1].astype(np.intp))
