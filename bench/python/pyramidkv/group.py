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
                      _F32, _pos, _queried)

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
        # step's state: the C door (None with an older library), the stride
        # the lengths were last filled for (-1: filled by hand)
        self._step = getattr(lib(), "pb_kvcache_group_step", None)
        self._lens_for = None
        self._attn_last = self._attn_addr = None
        self._out_last = self._out_addr = None
        self._counts_addr = self._counts.ctypes.data
        self._victims_addr = self._victims.ctypes.data

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
            self._fill_lens(stride, lengths)
            with self._lock:
                st = self._observe(self._handle(), pos, a.ctypes.data, stride,
                                   self._lens_addr)
        if st:
            raise PyramidKVError(st, "pb_kvcache_group_observe")

    def _fill_lens(self, stride, lengths):
        """The lengths array the C call reads: every head ``stride``
        (refilled only when the stride changes), or ``lengths``."""
        if lengths is None:
            if self._lens_for != stride:
                self._lens.fill(stride)
                self._lens_for = stride
            return
        ln = _lib.int_array(lengths, "lengths", stride)
        if ln.shape != (self.num_heads,):
            raise ValueError("lengths: one integer 0 .. %d per head" % stride)
        self._lens[:] = ln
        self._lens_for = None

    def step(self, pos, attn, budget=UINT64_MAX, lengths=None, out=None):
        """pb_kvcache_group_step: observe(pos, attn, lengths) then
        evict(budget) in one C call, one decode step of the layer; if the
        library refuses, nothing changed. attn as for observe (None admits
        pos without observing). Returns (victims, counts): the victims
        head by head (head 0's ascending, then head 1's, ...) as a uint32
        array, new, or a view of ``out`` (a writable C-contiguous uint32
        ndarray) when given, and counts[h], head h's number of victims.
        The library checks the position, the lengths, the weights and the
        sizes; the group keeps a reference to the last attn and out, whose
        addresses it reuses when the same arrays come again."""
        if not (budget.__class__ is int and 0 <= budget <= UINT64_MAX):
            b = int(budget)
            if b != budget or not 0 <= b <= UINT64_MAX:
                raise ValueError("budget must be an integer in 0 .. 2^64-1")
            budget = b
        if self._step is None:  # an older library: the two calls
            self.observe(pos, attn, lengths)
            v = self.evict(budget)
            counts = [len(x) for x in v]
            v = np.concatenate(v) if v else np.empty(0, np.uint32)
            if out is not None:
                out = _lib.u32_array(out, "out", out=True)
                if v.size > out.size:
                    raise PyramidKVError(_lib.PB_ERR_BUFFER, "Group.step")
                out[:v.size] = v
                v = out[:v.size]
            return v, counts
        if not (pos.__class__ is int and 0 <= pos <= 0xFFFFFFFF):
            pos = _pos(pos)
        a = attn
        if a is None:
            a_addr = lens = None
            stride = 0
        else:
            if a is not self._attn_last:
                if not (a.__class__ is np.ndarray and a.dtype is _F32
                        and a.ndim == 2 and a.flags.c_contiguous):
                    a = _lib.f32_array(attn, "attn", (2,))
                # the array stays referenced, so its data cannot move
                self._attn_last, self._attn_addr = a, a.ctypes.data
            rows, stride = a.shape  # read again: a shape can change in place
            if rows != self.num_heads:
                raise ValueError("attn: %d rows for %d heads"
                                 % (rows, self.num_heads))
            if lengths is not None or self._lens_for != stride:
                self._fill_lens(stride, lengths)
            a_addr, lens = self._attn_addr, self._lens_addr
        if out is None:
            v_addr, v_cap = self._victims_addr, self._victims.size
        else:
            if out is not self._out_last:
                o = _lib.u32_array(out, "out", out=True)
                self._out_last, self._out_addr = o, o.ctypes.data
            v_addr, v_cap = self._out_addr, out.size
        with self._lock:
            h = self._h
            if h is None:
                raise ClosedError("%s is closed" % self._what)
            st = self._step(h, pos, a_addr, stride, lens, budget, v_addr,
                            v_cap, self._counts_addr, self.num_heads,
                            self._n_ref)
            if st:
                raise PyramidKVError(st, "pb_kvcache_group_step")
            n = self._n.value
            counts = self._counts.tolist()
            v = out[:n] if out is not None else self._victims[:n].copy()
        return v, counts

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
