"""A KV-cache press for torch models: the library decides, per layer and KV
head, which positions of a prompt's cache survive (prefill compression) and
which go after each decode step; this module moves the K/V tensors
accordingly. Imports torch.

    press = KVPress(num_layers=8, num_kv_heads=3, group=2, budget=128,
                    schedule="uniform", recent_window=32)
    cache = press.compress(keys, values, attentions)   # per layer lists
    ... model appends the new token's k/v to cache.keys[l] / values[l] ...
    press.step(cache, pos, step_attentions)

Shapes: keys[l], values[l] are [batch, kv_heads, seq, head_dim]; the
prompt's attentions[l] are [batch, heads, rows, seq] (the last ``rows``
query tokens, softmaxed, heads grouped as Hugging Face's repeat_kv: query
head h uses KV head h // group); a decode step's attentions[l] are
[batch, heads, held] over the cache rows held after appending the new token
(its own row last). Each query group is reduced to one row per KV head
with pb_kvcache_head_reduce (mean), as bench/model/pkm_cache.c does; this
module follows that reference integration step for step, so its kept
positions are the C runtime's for the same attention.

It owns the mapping from tensors to library calls and the gathers; every
choice of position is the library's.
"""
import numpy as np
import torch

from . import kvcache as _kv
from .kvcache import KVCache, head_reduce
from .schedule import schedule_shares

UINT32_MAX = 0xFFFFFFFF


class PressedCache:
    """The compressed cache: per layer keys/values [batch, kv_heads, n,
    head_dim] and positions [batch, kv_heads, n] (int64 tensor) of the
    rows held, ascending. Every (batch, KV head) of a layer holds the same
    count (they share the layer's share), so a layer is one tensor."""

    def __init__(self, keys, values, positions):
        self.keys, self.values, self.positions = keys, values, positions

    def append(self, layer, k, v, pos):
        """Appends one token's k/v ([batch, kv_heads, 1, head_dim]) at
        position ``pos`` to a layer, before the step's attention."""
        self.keys[layer] = torch.cat((self.keys[layer], k), dim=2)
        self.values[layer] = torch.cat((self.values[layer], v), dim=2)
        p = self.positions[layer]
        self.positions[layer] = torch.cat(
            (p, torch.full(p.shape[:2] + (1,), pos, dtype=p.dtype)), dim=2)

    def held(self, layer):
        return self.keys[layer].shape[2]


class KVPress:
    """One library instance per (batch element, layer, KV head).

    budget: the average positions per layer; schedule and schedule_params
    pick the layer shares (pb_kvcache_schedule_shares: "uniform",
    "arithmetic" with ratio=..., ...); scorer, recent_window (default
    budget // 4, at least 1), obs_window, pool_kernel and sinks configure
    every instance; cadence: evict every ``cadence`` decode steps;
    max_len: the longest sequence (prompt + decode)."""

    def __init__(self, num_layers, num_kv_heads, group, budget, *,
                 schedule="uniform", schedule_params=None, scorer="window",
                 recent_window=None, obs_window=16, pool_kernel=7, sinks=0,
                 cadence=1, max_len=4096, batch=1):
        self.L, self.kv, self.group, self.batch = (int(num_layers),
                                                   int(num_kv_heads),
                                                   int(group), int(batch))
        rw = max(budget // 4, 1) if recent_window is None else recent_window
        self.recent_window, self.obs_window = rw, obs_window
        self.cadence = max(int(cadence), 1)
        self.since_evict = 0
        scorer_v = _kv._enum(scorer, _kv.SCORERS, "scorer")
        self.replay = scorer_v != _kv.SCORERS["window"] or sinks != 0
        shares, _ = schedule_shares(schedule, self.L, budget,
                                    **(schedule_params or {}))
        self.inst = []      # [batch][layer][kv]
        self.slot_cap = []  # per layer: rows a (layer, KV head) may hold
        for b in range(self.batch):
            layers = []
            for l in range(self.L):
                share = int(shares[l]) if shares[l] > rw else rw + 1
                floor_ = sinks + rw
                cap = max(share, floor_) + self.cadence
                if b == 0:
                    self.slot_cap.append(cap)
                layers.append([KVCache(
                    budget=budget, layer=l, num_layers=self.L,
                    pyramid_ratio=1, share=share, recent_window=rw,
                    obs_window=obs_window, pool_kernel=pool_kernel,
                    scorer=scorer_v, sinks=sinks,
                    capacity=max_len + self.cadence if self.replay else cap,
                    prefill_max_len=0 if self.replay else max_len)
                    for _ in range(self.kv)])
            self.inst.append(layers)
        self.shares = [self.inst[0][l][0].effective_budget
                       for l in range(self.L)]

    def close(self):
        if getattr(self, "_qk_obj", None) is not None:
            self._qk_obj.close()
        for layers in self.inst:
            for heads in layers:
                for c in heads:
                    c.close()

    def reset(self):
        for layers in self.inst:
            for heads in layers:
                for c in heads:
                    c.reset()
        self.since_evict = 0

    def _group(self, a, kv):
        return a[kv * self.group:(kv + 1) * self.group]

    def _qk(self, head_dim, rows, length, scale):
        from .runtime import QK
        key = (head_dim, rows, length, scale)
        if getattr(self, "_qk_key", None) != key:
            if getattr(self, "_qk_obj", None) is not None:
                self._qk_obj.close()
            self._qk_obj = QK(head_dim=head_dim, group=self.group,
                              scale=scale, max_keys=max(length, 1),
                              max_rows=max(rows, 1))
            self._qk_key = key
        return self._qk_obj

    def _rows_from_queries(self, queries, keys, b, l, scale):
        """[heads, rows, seq] attention from the window's queries through
        pb_qk_attention, one call per KV head (the group reduced already:
        returned as [kv, rows, seq])."""
        q = queries[l][b].detach().to("cpu", torch.float32).contiguous().numpy()
        k = keys[l][b].detach().to("cpu", torch.float32).contiguous().numpy()
        rows, n = q.shape[1], k.shape[1]
        qk = self._qk(q.shape[2], rows, n, scale)
        return np.stack([qk.attention(np.ascontiguousarray(
            self._group(q, kv)), np.ascontiguousarray(k[kv]))
            for kv in range(self.kv)])

    def kept_after_prefill(self, attentions, queries=None, keys=None,
                           scale=0.0):
        """The kept positions per [batch][layer][kv] (uint32 arrays) for a
        prompt's attention rows, or, with ``queries`` ([batch, heads, rows,
        head_dim] per layer, rotated, unscaled) and ``keys``, for the rows
        the library computes from them (pb_qk_attention; scale 0:
        1/sqrt(head_dim)); the instances must be fresh."""
        out = []
        for b in range(self.batch):
            layers = []
            for l in range(self.L):
                if queries is not None:
                    red_all = self._rows_from_queries(queries, keys, b, l,
                                                      scale)
                    rows, n = red_all.shape[1], red_all.shape[2]
                    a = None
                else:
                    a = attentions[l][b]
                    if isinstance(a, torch.Tensor):
                        a = a.detach().to("cpu", torch.float32).numpy()
                    rows, n = a.shape[1], a.shape[2]
                use = rows if self.replay or rows < self.obs_window \
                    else self.obs_window
                heads = []
                for kv in range(self.kv):
                    if a is None:
                        red = np.ascontiguousarray(red_all[kv, rows - use:])
                    else:
                        red = head_reduce(np.ascontiguousarray(
                            self._group(a, kv)[:, rows - use:, :]), "mean")
                    c = self.inst[b][l][kv]
                    if self.replay:
                        first = n - use
                        for q in range(1, n):
                            c.observe(q, None if q < first else
                                      np.ascontiguousarray(red[q - first, :q]))
                        c.evict(UINT32_MAX)
                        heads.append(c.kept_positions())
                    else:
                        heads.append(c.prefill(red, UINT32_MAX))
                layers.append(heads)
            out.append(layers)
        return out

    def compress(self, keys, values, attentions=None, queries=None,
                 scale=0.0):
        """Compresses a prompt's cache: keys/values[l] [batch, kv, seq, hd],
        and either attentions[l] [batch, heads, rows, seq] or queries[l]
        [batch, heads, rows, hd] (the window's queries after the rotary
        embedding, before the logit scale; the library scores them against
        the keys, needs pyramidkv_runtime.h). Returns a PressedCache."""
        if (attentions is None) == (queries is None):
            raise ValueError("give attentions or queries, not both")
        kept = self.kept_after_prefill(attentions, queries, keys, scale)
        self.since_evict = 0
        ks, vs, ps = [], [], []
        for l in range(self.L):
            idx = torch.from_numpy(np.stack(
                [np.stack([kept[b][l][kv] for kv in range(self.kv)])
                 for b in range(self.batch)]).astype(np.int64))
            g = idx[..., None].expand(-1, -1, -1, keys[l].shape[-1])
            ks.append(torch.gather(keys[l], 2, g))
            vs.append(torch.gather(values[l], 2, g))
            ps.append(idx)
        return PressedCache(ks, vs, ps)

    def step(self, cache, pos, attentions):
        """After a decode step at ``pos`` whose k/v the caller appended to
        every layer: attentions[l] [batch, heads, held] over the held rows,
        the new token's own last. Observes every instance (the new token's
        attention over the rows held before it, the group reduced), and
        every ``cadence`` steps (or when an instance or slot is full)
        evicts and compacts the cache in place. Returns True if it
        evicted."""
        self.since_evict += 1
        evict_now = self.since_evict >= self.cadence
        for l in range(self.L):
            a = attentions[l]
            if isinstance(a, torch.Tensor):
                a = a.detach().to("cpu", torch.float32).numpy()
            held = cache.held(l) - 1
            for b in range(self.batch):
                for kv in range(self.kv):
                    c = self.inst[b][l][kv]
                    if held:
                        red = head_reduce(np.ascontiguousarray(
                            self._group(a[b], kv)[:, :held]), "mean")
                        c.observe(pos, red)
                    else:
                        c.observe(pos, None)
                    if c.kept_count >= c.capacity or \
                            cache.held(l) >= self.slot_cap[l]:
                        evict_now = True
        if not evict_now:
            return False
        self.since_evict = 0
        for l in range(self.L):
            keep = []
            for b in range(self.batch):
                row = []
                for kv in range(self.kv):
                    c = self.inst[b][l][kv]
                    if c.kept_count > c.effective_budget:
                        c.evict(UINT32_MAX)
                    row.append(c.kept_positions())
                keep.append(row)
            n = {k.size for r in keep for k in r}
            if n == {cache.held(l)}:
                continue
            if len(n) != 1:
                raise RuntimeError("layer %d: the KV heads hold different "
                                   "counts %s" % (l, sorted(n)))
            want = torch.from_numpy(np.array(keep, dtype=np.int64))
            # rows of the survivors: positions are ascending in both
            p = cache.positions[l]
            sel = torch.searchsorted(p, want)
            g = sel[..., None].expand(-1, -1, -1, cache.keys[l].shape[-1])
            cache.keys[l] = torch.gather(cache.keys[l], 2, g)
            cache.values[l] = torch.gather(cache.values[l], 2, g)
            cache.positions[l] = want
        return True
