#!/usr/bin/env python3
"""scripts/torch_attention.py - pit_attention beside PyTorch's SDPA and FlexAttention at every point of `pit bench --suite attention`.

A GPU lab script (not shipped, not run by CI; needs PyTorch with CUDA and
the Python package), run from the repository root with the package on the
path as scripts/python_gpu.sh sets it:

  PYTHONPATH=python PIT_LIBRARY=build-gpu/lib/libpit.so \\
      python3 scripts/torch_attention.py [--quick] [--only KIND] [--targets] [--json F]

The product's attention target asks for its figures beside SDPA and
FlexAttention measured in the same run; `pit bench` alone cannot give them,
so this script takes the points of tools/bench_attention.c (its `points[]`,
and `scaled()` for --quick) and the same mask rules, in bf16:

  window  256-key sliding window (|i-j| <= 128) with 16 global tokens at
          new positions each set: an element mask [L, L] shared by the heads
  blocks  random block mask keeping round(10%) of each row's blocks per head
  causal  causal prefill (grouped-query heads where Hq != Hkv), no mask
  decode  Lq queries over a long KV cache, 10% of the 64-key blocks kept
          per KV head, shared by its query heads: [B, Hq, 1, Lk/64]

Three input sets (the same Q, K, V; each its own mask) are rotated call by
call, so no peer reuses an index built for the previous call. Everything is
timed in one process with CUDA events on torch's current stream (pit's
Python package runs on it too): warm-up 3, median of 20, as the C bench.

  pit    pit.attention with the options the C bench passes (mask= as
         torch.bool for the window, block_mask= and block= for blocks and
         decode, causal=True); its time includes turning the mask into an
         index, since the mask is new every call, and the package's Python
         call (what a torch user pays).
  SDPA   F.scaled_dot_product_attention with the dense bool mask (the block
         masks expanded to elements before the timing: a block mask is not
         an input SDPA takes), is_causal=True for causal; grouped-query heads
         by enable_gqa where this torch has it, else K/V repeated by
         repeat_interleave before the timing (the table's header says which).
  Flex   torch.compile(flex_attention) with a BlockMask from
         create_block_mask over a mask_mod reading the set's mask; the
         kernel and the BlockMask construction are timed apart, because the
         construction is the part pit's time holds and the masks change
         every call. One mask_mod per set, so the compiles happen in the
         warm-up and not in the timed calls.
  floor  as bench_attention.c: mask bytes at the copy bandwidth measured
         here (a device-to-device copy, read + write bytes) plus 4 D FLOPs
         an allowed pair at FlashAttention-3's published H100 rate (497
         TFLOP/s at D = 64, 648 at D = 128; none off sm_90: "-"); decode:
         kept K/V bytes and mask bytes at that bandwidth.

pit's output (set 0) is checked against SDPA's: relative error over the
rows with an allowed key (SDPA may give NaN on the others, where pit must
give 0). A peer that cannot run at a point (out of memory, a missing
feature) gets the reason in its cell; the run goes on.

--selftest checks the mask, pair-count and floor helpers against brute
force, then runs every kind at --quick sizes on the CPU (pit on whatever
backend PIT_BACKEND names, e.g. opencl on PoCL) against SDPA on the CPU,
and FlexAttention on the CPU where this torch runs it there.

Exits 2 with the reason when torch, CUDA or pit is missing, 1 when a check
of pit's output fails (or, with --selftest, any check).
"""
import argparse
import json
import math
import statistics
import sys
import time

WINDOW_HALF = 128  # keys i - 128 .. i + 128
GLOBAL_TOKENS = 16
KEEP = 0.1  # blocks a block mask keeps
SETS = 3
WARMUP, REPS = 3, 20
TOLERANCE = 1e-2  # bf16 outputs
KINDS = ("window", "blocks", "causal", "decode")

# tools/bench_attention.c's points[]: kind, B, Hq, Hkv, Lq, Lk, D, block, target
POINTS = [
    ("window", 1, 16, 16, 8192, 8192, 64, 0, 1),
    ("window", 1, 32, 32, 4096, 4096, 128, 0, 0),
    ("blocks", 1, 32, 32, 4096, 4096, 128, 128, 1),
    ("blocks", 1, 16, 16, 8192, 8192, 64, 128, 0),
    ("blocks", 1, 32, 8, 8192, 8192, 128, 128, 0),
    ("causal", 1, 32, 8, 8192, 8192, 128, 0, 1),
    ("causal", 2, 32, 8, 4096, 4096, 128, 0, 0),
    ("causal", 4, 32, 8, 2048, 2048, 128, 0, 0),
    ("causal", 1, 28, 4, 16384, 16384, 128, 0, 0),
    ("causal", 1, 16, 16, 8192, 8192, 64, 0, 0),
    ("decode", 8, 32, 8, 1, 32768, 128, 64, 1),
    ("decode", 8, 32, 8, 4, 32768, 128, 64, 1),
    ("decode", 32, 32, 8, 1, 8192, 128, 64, 0),
    ("decode", 4, 64, 8, 1, 65536, 128, 64, 0),
]


class Point:
    def __init__(self, kind, b, hq, hkv, lq, lk, d, block, target):
        self.kind, self.b, self.hq, self.hkv, self.lq, self.lk, self.d = kind, b, hq, hkv, lq, lk, d
        self.block, self.target = block, target

    @property
    def group(self):
        return self.hq // self.hkv

    def label(self):
        return (f"{self.kind} B{self.b} H{self.hq}/{self.hkv} L{self.lq}/{self.lk} D{self.d}"
                + (" *" if self.target else ""))


def scaled(t, quick):
    """bench_attention.c's scaled(): lengths 1/32, heads 1/8, batches at
    most 2, blocks of 32 for the block masks."""
    p = Point(*t)
    if not quick:
        return p
    p.b = min(p.b, 2)
    hkv = max(t[3] // 8, 1)
    p.hq, p.hkv = hkv * (t[2] // t[3]), hkv
    p.lk = t[5] // 32
    p.lq = t[4] if p.kind == "decode" else t[4] // 32
    if p.kind == "blocks":
        p.block = 32
    return p


def cdiv(a, b):
    return (a + b - 1) // b


def keep_count(n):
    # llround(KEEP n), at least one: Python's round() would round halves to even
    return max(int(math.floor(KEEP * n + 0.5)), 1)


def block_keys(torch, nb, blk, length, device):
    """Keys (or queries) of each of the nb blocks of a length-long axis: the
    last block may be cut."""
    start = torch.arange(nb, device=device, dtype=torch.float64) * blk
    return torch.clamp(length - start, max=blk)


def keep_blocks(torch, rows, n, gen, device):
    """rows x n bool, keep_count(n) distinct blocks on in every row."""
    pick = torch.rand(rows, n, generator=gen, device=device).argsort(dim=1)[:, :keep_count(n)]
    m = torch.zeros(rows, n, dtype=torch.bool, device=device)
    return m.scatter_(1, pick, True)


def window_mask(torch, length, gen, device):
    """The window with global tokens: (mask [L, L] bool, global [L] bool)."""
    g = torch.zeros(length, dtype=torch.bool, device=device)
    g[torch.randperm(length, generator=gen, device=device)[:min(length, GLOBAL_TOKENS)]] = True
    i = torch.arange(length, device=device)
    m = ((i[:, None] - i[None, :]).abs() <= WINDOW_HALF) | g[:, None] | g[None, :]
    return m, g


def make_set(torch, p, gen, device, elem_bytes):
    """One input set's mask as bench_attention.c's make_mask makes it: a dict
    with the mask pit takes, the allowed pairs of the call, the bytes the
    call must read (mask, kept K/V)."""
    s = dict(mask=None, mask_bytes=0.0, kv_bytes=0.0)
    if p.kind == "causal":  # key j <= i + lk - lq for query i
        i = torch.arange(p.lq, dtype=torch.float64)
        s["pairs"] = float(torch.clamp(i + p.lk - p.lq + 1, 0, p.lk).sum()) * p.b * p.hq
        return s
    if p.kind == "window":
        m, g = window_mask(torch, p.lk, gen, device)
        s.update(mask=m, glob=g, pairs=float(m.sum()) * p.b * p.hq)
    elif p.kind == "blocks":
        nq, nk = cdiv(p.lq, p.block), cdiv(p.lk, p.block)
        m = keep_blocks(torch, p.hq * nq, nk, gen, device).reshape(p.hq, nq, nk)
        area = block_keys(torch, nq, p.block, p.lq, device)[:, None] * block_keys(torch, nk, p.block, p.lk, device)
        s.update(mask=m, pairs=float((m * area).sum()) * p.b)
    else:  # decode: one row a KV head, copied to its query heads
        nk = cdiv(p.lk, p.block)
        kv = keep_blocks(torch, p.b * p.hkv, nk, gen, device).reshape(p.b, p.hkv, nk)
        m = kv.repeat_interleave(p.group, dim=1).reshape(p.b, p.hq, 1, nk).contiguous()
        kept_keys = float((kv * block_keys(torch, nk, p.block, p.lk, device)).sum())
        s.update(mask=m, pairs=kept_keys * p.group * p.lq, kv_bytes=kept_keys * 2 * p.d * elem_bytes)
    s["mask_bytes"] = float(s["mask"].numel())  # one byte an element, as the C bench's u8
    return s


def dense_mask(torch, p, s):
    """The set's mask as elements, broadcastable to [B, Hq, Lq, Lk] (None:
    causal, which SDPA takes as is_causal)."""
    if p.kind == "causal":
        return None
    if p.kind == "window":
        return s["mask"]
    m = s["mask"]
    if p.kind == "blocks":  # [Hq, nq, nk] -> [1, Hq, Lq, Lk]
        m = m.repeat_interleave(p.block, dim=1)[:, :p.lq].repeat_interleave(p.block, dim=2)[:, :, :p.lk]
        return m[None].contiguous()
    return m.repeat_interleave(p.block, dim=3)[..., :p.lk].contiguous()  # [B, Hq, 1, Lk]


def published_rate(sm90, d):
    """FlashAttention-3's published dense rate on the H100, TFLOP/s; None off sm_90."""
    return {64: 497.0, 128: 648.0}.get(d) if sm90 else None


def floor_ms(p, s, gbps, rate):
    """bench_attention.c's floor; None where it has none."""
    byte_ms = (s["mask_bytes"] + s["kv_bytes"]) / (gbps * 1e9) * 1e3 if gbps > 0 else None
    if p.kind == "decode":
        return byte_ms
    if rate is None or byte_ms is None:
        return None
    return byte_ms + 4.0 * p.d * s["pairs"] / (rate * 1e12) * 1e3


class Timer:
    """Median of calls fn(i), i = 0.. (input set i % SETS), after a warm-up:
    CUDA events on torch's current stream, or the wall clock on the CPU."""

    def __init__(self, torch, cuda, warmup=WARMUP, reps=REPS):
        self.torch, self.cuda, self.warmup, self.reps = torch, cuda, warmup, reps

    def __call__(self, fn):
        torch = self.torch
        for i in range(self.warmup):
            fn(i)
        if not self.cuda:
            ms = []
            for i in range(self.reps):
                t0 = time.perf_counter()
                fn(i)
                ms.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(ms)
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(self.reps)]
        for i, (a, b) in enumerate(ev):
            a.record()
            fn(i)
            b.record()
        torch.cuda.synchronize()
        return statistics.median(a.elapsed_time(b) for a, b in ev)


def copy_gbps(torch, device, nbytes, timer):
    """Device-to-device copy bandwidth, read + write bytes counted (as
    pit_measure_copy_bandwidth), in GB/s."""
    src = torch.ones(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = timer(lambda i: dst.copy_(src))
    return 2.0 * nbytes / (ms * 1e-3) / 1e9


def why(e):
    name = type(e).__name__
    if "OutOfMemory" in name or "out of memory" in str(e):
        return "OOM"
    return f"{name}: {str(e).splitlines()[0] if str(e) else ''}"[:160]


def rel_err(torch, got, ref):
    g, r = got.double(), ref.double()
    return float((g - r).norm() / r.norm().clamp_min(1e-30))


class Env:
    """What every point needs: torch, pit, the device, the timer and the
    peers this torch has."""

    def __init__(self, torch, pit, device, quick, flex):
        self.torch, self.pit, self.device = torch, pit, device
        self.cuda = device.type == "cuda"
        self.timer = Timer(torch, self.cuda) if self.cuda else Timer(torch, False, 1, 3)
        self.dtype = torch.bfloat16
        self.sm90 = self.cuda and torch.cuda.get_device_capability(device) == (9, 0)
        self.gqa = self._sdpa_gqa()
        self.flex, self.flex_why = (None, "off") if not flex else self._flex()
        nbytes = (8 << 20) if quick or not self.cuda else (256 << 20)
        self.gbps = copy_gbps(torch, device, nbytes, self.timer)

    def _sdpa_gqa(self):
        torch = self.torch
        q = torch.zeros(1, 2, 1, 8, device=self.device)
        k = torch.zeros(1, 1, 1, 8, device=self.device)
        try:
            torch.nn.functional.scaled_dot_product_attention(q, k, k, enable_gqa=True)
            return "enable_gqa"
        except (TypeError, RuntimeError):
            return "repeat_interleave"

    def _flex(self):
        torch = self.torch
        try:
            from torch.nn.attention import flex_attention as fa
        except ImportError as e:
            return None, f"no FlexAttention in torch {torch.__version__} ({e})"
        # one compile per mask_mod, per shape: more than dynamo's default cache holds over the points
        for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                     "accumulated_recompile_limit"):
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, 4096)
        return (torch.compile(fa.flex_attention, dynamic=False),) + self._flex_build(fa), None

    def _flex_build(self, fa):
        """create_block_mask compiled, as its docs advise for masks made
        often: torch.compile of it where this torch can (a trial on a tiny
        mask says), else its older _compile flag, else eager."""
        import inspect
        causal = lambda b, h, qi, ki: ki <= qi
        try:
            build = self.torch.compile(fa.create_block_mask, dynamic=False)
            build(causal, None, None, 256, 256, device=self.device)
            self.flex_build_how = "torch.compile(create_block_mask)"
            return build, {}
        except Exception:
            if "_compile" in inspect.signature(fa.create_block_mask).parameters:
                self.flex_build_how = "create_block_mask(_compile=True)"
                return fa.create_block_mask, {"_compile": True}
            self.flex_build_how = "create_block_mask, eager"
            return fa.create_block_mask, {}


def mask_mods(torch, p, s):
    """The set's mask_mod and the B, H create_block_mask takes for it."""
    if p.kind == "window":
        g = s["glob"]
        return (lambda b, h, qi, ki: ((qi - ki).abs() <= WINDOW_HALF) | g[qi] | g[ki]), None, None
    if p.kind == "blocks":
        m, blk = s["mask"], p.block
        return (lambda b, h, qi, ki: m[h, qi // blk, ki // blk]), None, p.hq
    if p.kind == "causal":
        shift = p.lk - p.lq
        return (lambda b, h, qi, ki: ki <= qi + shift), None, None
    kept, blk = s["mask"][:, :, 0], p.block
    return (lambda b, h, qi, ki: kept[b, h, ki // blk]), p.b, p.hq


def pit_kwargs(p, s, scale):
    kw = dict(scale=scale)
    if p.kind == "window":
        kw["mask"] = s["mask"]
    elif p.kind == "blocks":
        kw.update(block_mask=s["mask"], block=(p.block, p.block))
    elif p.kind == "causal":
        kw["causal"] = True
    else:
        kw.update(block_mask=s["mask"], block=(p.lq, p.block))
    return kw


def measure_point(env, p, seed, checks):
    """One row of the table; checks (selftest) also compares the helpers
    with brute force and Flex's output with SDPA's."""
    torch, dev, dt = env.torch, env.device, env.dtype
    F = torch.nn.functional
    row = dict(point=p.label(), kind=p.kind, batch=p.b, hq=p.hq, hkv=p.hkv, lq=p.lq, lk=p.lk, head_dim=p.d,
               block=p.block, target=p.target)
    gen = torch.Generator(device=dev).manual_seed(seed)
    q = torch.randn(p.b, p.hq, p.lq, p.d, generator=gen, device=dev, dtype=dt)
    k = torch.randn(p.b, p.hkv, p.lk, p.d, generator=gen, device=dev, dtype=dt)
    v = torch.randn(p.b, p.hkv, p.lk, p.d, generator=gen, device=dev, dtype=dt)
    scale = 1.0 / math.sqrt(p.d)
    sets = [make_set(torch, p, gen, dev, q.element_size()) for _ in range(SETS)]
    s0 = sets[0]
    row["allowed"] = s0["pairs"] / (p.b * p.hq * p.lq * p.lk)
    fl = floor_ms(p, s0, env.gbps, published_rate(env.sm90, p.d))
    row["floor_ms"] = fl
    timer = env.timer

    # pit
    kws = [pit_kwargs(p, s, scale) for s in sets]
    out_pit = None
    try:
        out_pit = env.pit.attention(q, k, v, **kws[0])
        row["pit_ms"] = timer(lambda i: env.pit.attention(q, k, v, **kws[i % SETS]))
    except Exception as e:  # a peer that cannot run is reported in its cell
        row["pit_error"] = why(e)

    # SDPA: dense masks made before the timing
    ref, valid = None, None
    try:
        dense = [dense_mask(torch, p, s) for s in sets]
        kk, vv, extra = k, v, {}
        if p.hq != p.hkv:
            if env.gqa == "enable_gqa":
                extra["enable_gqa"] = True
            else:
                kk, vv = k.repeat_interleave(p.group, dim=1), v.repeat_interleave(p.group, dim=1)
        causal = p.kind == "causal"

        def sdpa(i):
            return F.scaled_dot_product_attention(q, kk, vv, attn_mask=dense[i % SETS], is_causal=causal,
                                                  scale=scale, **extra)
        ref = sdpa(0)
        row["sdpa_ms"] = timer(sdpa)
        if dense[0] is None:
            valid = torch.ones(p.b, p.hq, p.lq, dtype=torch.bool, device=dev)
        else:
            valid = dense[0].any(dim=-1).expand(p.b, p.hq, p.lq)
        if checks:
            full = dense[0] if dense[0] is not None else torch.ones(p.lq, p.lk, dtype=torch.bool, device=dev).tril(
                p.lk - p.lq)
            checks.append((f"{p.label()}: pairs {s0['pairs']:.0f} = dense mask's",
                           float(full.expand(p.b, p.hq, p.lq, p.lk).sum()) == s0["pairs"]))
        del dense
    except Exception as e:
        row["sdpa_error"] = why(e)

    if out_pit is not None and ref is not None:
        ok_rows = bool(valid.all())
        if not ok_rows:  # no allowed key: SDPA's NaN is not compared, pit's must be 0
            row["empty_rows_zero"] = bool((out_pit[~valid] == 0).all())
        row["rel_error"] = rel_err(torch, out_pit[valid], ref[valid])
        row["ok"] = row["rel_error"] <= TOLERANCE and row.get("empty_rows_zero", True) and \
            bool(torch.isfinite(out_pit).all())

    # FlexAttention: the kernel over prebuilt BlockMasks, and the construction
    if env.flex is None:
        row["flex_error"] = env.flex_why
    else:
        flex, build_fn, build_kw = env.flex
        try:
            mods = [mask_mods(torch, p, s) for s in sets]

            def build(i):
                mm, B, H = mods[i % SETS]
                return build_fn(mm, B, H, p.lq, p.lk, device=dev, **build_kw)
            bms = [build(i) for i in range(SETS)]
            gqa = {"enable_gqa": True} if p.hq != p.hkv else {}

            def kernel(i):
                return flex(q, k, v, block_mask=bms[i % SETS], scale=scale, **gqa)
            out_flex = kernel(0)
            row["flex_ms"] = timer(kernel)
            row["flex_build_ms"] = timer(build)
            if ref is not None:
                row["flex_rel_error"] = rel_err(torch, out_flex[valid], ref[valid])
        except Exception as e:
            row["flex_error"] = why(e)
    return row


def cell(row, key, err_key, fmt="{:.4f}"):
    if key in row and row[key] is not None:
        return fmt.format(row[key])
    return row.get(err_key, "-")


def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"


def print_table(env, rows):
    print(f"\n== attention vs PyTorch {env.torch.__version__} on {env.device_name}: bf16, masks new every call "
          f"({SETS} sets rotated), median of {env.timer.reps}; SDPA grouped-query heads by {env.gqa}; "
          f"copy bandwidth {env.gbps:.1f} GB/s (read+write); floor as pit bench --suite attention "
          f"(\"-\": no published rate for this device)")
    head = ("point", "pit ms", "SDPA ms", "Flex kern ms", "Flex build ms", "floor ms", "pit/floor", "Flex/pit",
            "rel. err")
    lines = []
    for r in rows:
        err = f"{r['rel_error']:.1e} {'ok' if r['ok'] else 'OFF'}" if "rel_error" in r else "-"
        lines.append((r["point"], cell(r, "pit_ms", "pit_error"), cell(r, "sdpa_ms", "sdpa_error"),
                      cell(r, "flex_ms", "flex_error"), cell(r, "flex_build_ms", "flex_error"),
                      cell(r, "floor_ms", "-"), ratio(r.get("pit_ms"), r.get("floor_ms")),
                      ratio(r.get("flex_ms"), r.get("pit_ms")), err))
    # reasons are cut to 40 characters in their cells (whole in the progress lines above) so the table stays readable
    widths = [max(len(h), *(min(len(ln[c]), 40) for ln in lines)) for c, h in enumerate(head)]
    fmt = lambda cols: " | ".join(str(x)[:40].ljust(w) for x, w in zip(cols, widths))
    print(fmt(head))
    for ln in lines:
        print(fmt(ln))
    print("(* a point the targets name; a cell with text: the peer could not run there, its reason above)")


def load(selftest):
    """torch, pit and the device; a reason (str) where one is missing."""
    try:
        import torch
    except ImportError as e:
        return f"no PyTorch ({e})"
    if not selftest and not torch.cuda.is_available():
        return f"no CUDA device for torch {torch.__version__}"
    try:
        import pit
        info = pit.default_context().device_info()
    except Exception as e:  # ImportError, or libpit without a device
        return f"no pit ({type(e).__name__}: {e}); PYTHONPATH=python PIT_LIBRARY=<libpit.so> as scripts/python_gpu.sh"
    backend = info.backend.decode()
    if not selftest and backend != "cuda":
        return f"pit's context runs on {backend}, not CUDA (PIT_BACKEND=cuda)"
    return torch, pit, backend


def selftest_helpers(torch, checks):
    """The helpers against brute force on small cases, and the floor against
    a hand count."""
    gen = torch.Generator().manual_seed(7)
    # the window: C's loops written out
    L = 300
    m, g = window_mask(torch, L, gen, "cpu")
    ref = torch.zeros(L, L, dtype=torch.bool)
    gl = g.nonzero().flatten().tolist()
    for i in range(L):
        ref[i, max(i - WINDOW_HALF, 0):min(i + WINDOW_HALF, L - 1) + 1] = True
        ref[i, gl] = True
    ref[gl, :] = True
    checks.append(("window mask: C's loops", bool((m == ref).all()) and len(gl) == GLOBAL_TOKENS))
    checks.append(("keep_count: llround halves up", keep_count(5) == 1 and keep_count(15) == 2 and
                   keep_count(25) == 3 and keep_count(3) == 1 and keep_count(64) == 6))
    bk = keep_blocks(torch, 7, 45, gen, "cpu")
    checks.append(("keep_blocks: 5 of 45 in each row", bool((bk.sum(1) == 5).all())))
    # blocks cut at the edge: 100 queries, 70 keys in blocks of 32
    p = Point("blocks", 2, 3, 3, 100, 70, 64, 32, 0)
    s = make_set(torch, p, gen, "cpu", 2)
    d = dense_mask(torch, p, s)
    checks.append(("blocks: cut edge blocks' pairs", float(d.expand(2, 3, 100, 70).sum()) == s["pairs"]))
    # decode: query heads of one KV head share its row; kept K/V bytes
    p = Point("decode", 2, 8, 2, 4, 1000, 128, 64, 0)
    s = make_set(torch, p, gen, "cpu", 2)
    m = s["mask"]
    shared = all(bool((m[:, h] == m[:, h - h % 4]).all()) for h in range(8))
    dm = dense_mask(torch, p, s)
    kept = float(dm[:, ::4, 0].sum())
    checks.append(("decode: shared rows, pairs, K/V bytes", shared and s["pairs"] == kept * 4 * 4 and
                   s["kv_bytes"] == kept * 2 * 128 * 2 and s["mask_bytes"] == 2 * 8 * 16))
    p = Point("causal", 1, 4, 2, 6, 10, 64, 0, 0)
    s = make_set(torch, p, gen, "cpu", 2)
    checks.append(("causal: pairs aligned to the end", s["pairs"] == 4 * sum(range(5, 11))))
    # the floor: 1 MB of mask at 1000 GB/s = 1 us; 1e9 pairs x 4 x 128 FLOPs at 648 TFLOP/s
    p = Point("blocks", 1, 1, 1, 1, 1, 128, 128, 0)
    f = floor_ms(p, dict(mask_bytes=1e6, kv_bytes=0.0, pairs=1e9), 1000.0, published_rate(True, 128))
    checks.append(("floor: bytes + FLOPs", abs(f - (1e-3 + 512e9 / 648e12 * 1e3)) < 1e-12))
    pd = Point("decode", 1, 1, 1, 1, 1, 128, 64, 0)
    f = floor_ms(pd, dict(mask_bytes=1e6, kv_bytes=3e6, pairs=1e9), 1000.0, None)
    checks.append(("floor: decode bytes alone", abs(f - 4e-3) < 1e-12))
    checks.append(("floor: none off sm_90", floor_ms(p, dict(mask_bytes=1.0, kv_bytes=0.0, pairs=1.0), 1.0,
                                                     published_rate(False, 128)) is None))
    q = [scaled(t, True) for t in POINTS]
    checks.append(("scaled: as bench_attention.c's", (q[0].hq, q[0].lq, q[2].block, q[4].hq, q[4].hkv, q[7].b,
                                                       q[7].lq, q[7].lk, q[10].hq) == (2, 256, 32, 4, 1, 2, 1, 1024,
                                                                                       8)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0].split(" - ", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[1:]))
    ap.add_argument("--json", metavar="FILE", help="write the rows (and the run's device, torch, bandwidth)")
    ap.add_argument("--quick", action="store_true", help="sizes as bench_attention.c's scaled()")
    ap.add_argument("--only", choices=KINDS, metavar="KIND", help="one kind: " + ", ".join(KINDS))
    ap.add_argument("--targets", action="store_true", help="only the points the targets name (marked *)")
    ap.add_argument("--no-flex", action="store_true", help="leave FlexAttention out")
    ap.add_argument("--selftest", action="store_true",
                    help="helpers against brute force, then every kind at --quick sizes on the CPU")
    a = ap.parse_args()
    got = load(a.selftest)
    if isinstance(got, str):
        print(f"torch_attention: {got}", file=sys.stderr)
        return 2
    torch, pit, backend = got
    checks = [] if a.selftest else None
    if a.selftest:
        a.quick = True
        selftest_helpers(torch, checks)
        device = torch.device("cpu")
    else:
        torch.cuda.init()
        device = torch.device("cuda", torch.cuda.current_device())
    env = Env(torch, pit, device, a.quick, not a.no_flex)
    env.device_name = torch.cuda.get_device_name(device) if env.cuda else f"the CPU (pit on {backend})"
    print(f"pit {pit.version()} on {backend}; torch {torch.__version__}; SDPA GQA by {env.gqa}; "
          f"FlexAttention {'compiled, masks by ' + env.flex_build_how if env.flex else env.flex_why}", flush=True)
    rows = []
    for n, t in enumerate(POINTS):
        p = scaled(t, a.quick)
        if (a.only and p.kind != a.only) or (a.targets and not p.target):
            continue
        print(f"[{n + 1}/{len(POINTS)}] {p.label()}", flush=True)
        r = measure_point(env, p, 2024 + n, checks)
        if env.cuda:  # the point's tensors are gone: give their cache back before the next shapes
            torch.cuda.empty_cache()
        for key in ("pit_error", "sdpa_error", "flex_error"):
            if key in r and r[key] != "off":
                print(f"    {key.split('_')[0]}: {r[key]}", flush=True)
        rows.append(r)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(device=env.device_name, torch=torch.__version__, pit=pit.version(), backend=backend,
                           sdpa_gqa=env.gqa, flex_build=getattr(env, "flex_build_how", None), copy_gbps=env.gbps,
                           rows=rows), f, indent=1)
    failed = [r["point"] for r in rows if not r.get("ok")]
    if a.selftest:
        for r in rows:
            checks.append((f"{r['point']}: pit vs SDPA {r.get('rel_error', float('nan')):.1e}", bool(r.get("ok"))))
            if "flex_rel_error" in r:
                checks.append((f"{r['point']}: Flex vs SDPA {r['flex_rel_error']:.1e}",
                               r["flex_rel_error"] <= TOLERANCE))
        print("\nselftest:")
        for what, ok in checks:
            print(f"  {'ok ' if ok else 'BAD'} {what}")
        if env.flex is None:
            print(f"  skipped: FlexAttention ({env.flex_why})")
        elif any("flex_error" in r for r in rows):
            print("  skipped: FlexAttention on the CPU at " + ", ".join(
                r["point"] for r in rows if "flex_error" in r))
    print_table(env, rows)
    if checks is not None:
        return 0 if all(ok for _, ok in checks) else 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
