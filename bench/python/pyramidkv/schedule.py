"""Budgets and schedules: the per-layer shares of every schedule the library
offers (pb_kvcache_pyramid_budget/_budgets/_total, pb_kvcache_schedule_shares)
and a plan that sizes K/V buffers from them the way `pyramidkv plan` does.

It owns the Python face of the allocation functions; the rules are the
library's (docs/spec.md §12). Shares come back as numpy uint32 arrays filled
by one C call.
"""
import ctypes
from dataclasses import dataclass

import numpy as np

from . import _lib
from ._lib import check, check_u32, lib

KINDS = ("arithmetic", "uniform", "kvfactory", "kvfactory-balanced", "taper",
         "curve", "geometric", "profile", "cake")


def pyramid_budget(budget, layer, num_layers, pyramid_ratio):
    """pb_kvcache_pyramid_budget: the positions layer ``layer`` keeps (0
    where no share is defined)."""
    return int(lib().pb_kvcache_pyramid_budget(
        check_u32(budget, "budget"), check_u32(layer, "layer"),
        check_u32(num_layers, "num_layers"),
        check_u32(pyramid_ratio, "pyramid_ratio")))


def pyramid_budgets(budget, num_layers, pyramid_ratio):
    """pb_kvcache_pyramid_budgets: every layer's share, a uint32 array."""
    n = check_u32(num_layers, "num_layers")
    out = np.zeros(max(n, 1), dtype=np.uint32)
    check(lib().pb_kvcache_pyramid_budgets(
        check_u32(budget, "budget"), n, check_u32(pyramid_ratio,
                                                  "pyramid_ratio"),
        _lib.addr(out), out.size), "pb_kvcache_pyramid_budgets")
    return out[:n]


def pyramid_total(budget, num_layers, pyramid_ratio):
    """pb_kvcache_pyramid_total: the exact sum of the shares."""
    return int(lib().pb_kvcache_pyramid_total(
        check_u32(budget, "budget"), check_u32(num_layers, "num_layers"),
        check_u32(pyramid_ratio, "pyramid_ratio")))


def kind_value(kind):
    """A schedule kind given by name ("arithmetic", ...) or number, as the
    pb_schedule_kind value (pb_schedule_kind_from_name)."""
    if isinstance(kind, str):
        v = _lib.u32(0)
        check(lib().pb_schedule_kind_from_name(kind.encode(), ctypes.byref(v)),
              "pb_schedule_kind_from_name(%r)" % kind)
        return v.value
    return check_u32(kind, "kind")


def kinds():
    """Every schedule kind the loaded library knows, by name, value order
    (KINDS is those of 0.2.0; a newer library may know more)."""
    out = []
    while len(out) < 1024:
        name = lib().pb_schedule_kind_name(len(out))
        if name is None:
            break
        out.append(name.decode())
    return tuple(out)


def kind_name(kind):
    """pb_schedule_kind_name; None for a value that is not a kind."""
    s = lib().pb_schedule_kind_name(check_u32(kind, "kind"))
    return s.decode() if s is not None else None


def schedule_shares(kind="arithmetic", num_layers=1, budget=512, **params):
    """pb_kvcache_schedule_shares: (shares, total) for a schedule.

    ``params`` are the pb_schedule fields the kind reads: ratio, window,
    beta, prompt_len, sinks, gamma_milli, min_share, taper_beta, and
    weights (profile, cake: num_layers integers 0 .. 2^32-1). Unset (or
    None) fields take PB_SCHEDULE_DEFAULT's values. A refused schedule
    raises PyramidKVError with the library's status, naming the refused
    fields for PB_ERR_PARAM."""
    k = kind_value(kind)
    fields = dict(params, num_layers=num_layers, budget=budget)
    st, out, total = _shares(k, fields)
    if st:
        raise _lib.refused_fields(
            st, "pb_kvcache_schedule_shares",
            {f: v for f, v in fields.items() if v is not None},
            lambda rest: _shares(k, rest)[0] == 0)
    return out, total


def _shares(kind, fields):
    """(status, shares, total) of one pb_kvcache_schedule_shares call."""
    fields = dict(fields)
    weights = fields.pop("weights", None)
    s = _lib.make_struct(_lib.Schedule, kind=kind, **fields)
    keep = None
    if weights is not None:
        keep = _lib.u32_array(weights, "weights")
        if keep.size != s.num_layers:
            raise ValueError("weights: %d values for %d layers"
                             % (keep.size, s.num_layers))
        s.weights = ctypes.cast(_lib.addr(keep), _lib.P_u32)
    n = s.num_layers
    out = np.zeros(max(n, 1), dtype=np.uint32)
    total = _lib.u64(0)
    st = lib().pb_kvcache_schedule_shares(ctypes.byref(s), _lib.addr(out),
                                          out.size, ctypes.byref(total))
    del keep
    return st, out[:n], int(total.value)


@dataclass
class Plan:
    """Buffers sized from a schedule, as `pyramidkv plan --json` reports
    them: per layer the share, the positions held (max(share,
    recent_window + 1): an instance never holds fewer), their K+V bytes
    (2 x kv_heads x head_dim x dtype_bytes x held) and paged blocks
    (ceil(held / block_size)), and floor_binds where the share is below
    recent_window + 1. total is the sum of the shares; held_total,
    total_bytes and total_blocks are of the held positions, and the uniform
    figures of max(budget, recent_window + 1) per layer."""
    schedule: str
    shares: np.ndarray
    total: int
    held: np.ndarray
    held_total: int
    bytes: np.ndarray
    blocks: np.ndarray
    floor_binds: np.ndarray
    bytes_per_position: int
    floor: int
    total_bytes: int
    total_blocks: int
    uniform_positions: int
    uniform_bytes: int
    uniform_blocks: int


def plan(kind="arithmetic", num_layers=1, budget=512, *, recent_window=32,
         kv_heads=8, head_dim=128, dtype_bytes=2, block_size=16, **params):
    """Sizes every layer's K/V buffer under a schedule (see Plan)."""
    for name, v in (("kv_heads", kv_heads), ("head_dim", head_dim),
                    ("dtype_bytes", dtype_bytes), ("block_size", block_size)):
        if check_u32(v, name) < 1:
            raise ValueError("%s must be >= 1" % name)
    shares, total = schedule_shares(kind, num_layers, budget, **params)
    bpp = 2 * int(kv_heads) * int(head_dim) * int(dtype_bytes)
    floor = check_u32(recent_window, "recent_window") + 1
    held = np.maximum(shares.astype(np.uint64), np.uint64(floor))
    by = held * np.uint64(bpp)
    bl = (held + np.uint64(block_size - 1)) // np.uint64(block_size)
    b = max(int(budget), floor)
    ub = (b + int(block_size) - 1) // int(block_size)
    return Plan(schedule=kind if isinstance(kind, str) else kind_name(kind),
                shares=shares, total=total, held=held,
                held_total=int(held.sum()), bytes=by, blocks=bl,
                floor_binds=shares < floor, bytes_per_position=bpp,
                floor=floor, total_bytes=int(by.sum()),
                total_blocks=int(bl.sum()),
                uniform_positions=b * int(num_layers),
                uniform_bytes=b * int(num_layers) * bpp,
                uniform_blocks=ub * int(num_layers))
