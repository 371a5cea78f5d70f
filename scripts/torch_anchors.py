#!/usr/bin/env python3
"""scripts/torch_anchors.py - PyTorch's ways of two layers and pit's, in one process.

A GPU lab script (not shipped, not run by CI; needs PyTorch with CUDA), run
from the repository root, by hand or by `bash scripts/gpu_check.sh anchors`.

pit is called through ctypes on torch's current stream (pit_stream_wrap) over
the very tensors torch uses (pit_tensor_wrap of data_ptr(): no copies), and
every time is taken with CUDA events on that stream, so pit and the anchors
are measured in the same run on the same data:

  attention: 16 heads x 8192 tokens, head dim 64, bf16, random 128x128 block
      mask at sparsity 0.9, the mask changing each call; pit with the mask as
      torch.bool (u8) and as bf16, dense SDPA with the bool mask, and
      FlexAttention (create_block_mask from the same mask + the compiled
      kernel); pit's output is checked against SDPA's.
  moe: 16384 tokens, 1024 -> 4096, 64 experts, top-1 with skewed routing
      (4..1130 tokens an expert); pit_moe_forward (routing -> output), one
      dense GEMM of all tokens (the FLOP floor), torch._grouped_mm with the
      permutation and alone (tokens already in expert order), the per-expert loop and the padded batched matmul
      (capacity 1.25); pit's output is checked against the loop's.

usage: python3 scripts/torch_anchors.py [--lib build-gpu/lib/libpit.so] [--json F]
           [--only attention|moe] [--no-flex]
"""
import argparse
import ctypes
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

PIT_F32, PIT_F16, PIT_BF16, PIT_I32, PIT_U8 = 0, 1, 2, 3, 4
DTYPES = {torch.float32: PIT_F32, torch.float16: PIT_F16, torch.bfloat16: PIT_BF16,
          torch.int32: PIT_I32, torch.bool: PIT_U8, torch.uint8: PIT_U8}


class Pit:
    """The few entry points of include/pit.h this script calls."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        vp, i64p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)
        sig = {
            "pit_context_create": [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(vp)],
            "pit_context_destroy": [vp],
            "pit_stream_wrap": [vp, vp, ctypes.POINTER(vp)],
            "pit_stream_destroy": [vp],
            "pit_tensor_wrap": [vp, ctypes.c_int, ctypes.c_int, i64p, i64p, vp, ctypes.c_size_t,
                                ctypes.POINTER(vp)],
            "pit_tensor_destroy": [vp],
            "pit_sparse_attention": [vp, vp, vp, vp, vp, vp, vp, ctypes.c_float, ctypes.c_int32, vp],
            "pit_moe_forward": [vp, vp, vp, vp, vp, vp, vp, vp],
        }
        for name, args in sig.items():
            fn = getattr(self.lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        self.lib.pit_last_error.restype = ctypes.c_char_p
        self.ctx = vp()
        self.check(self.lib.pit_context_create(b"cuda", -1, ctypes.byref(self.ctx)), "context")
        self.stream = vp()
        native = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.check(self.lib.pit_stream_wrap(self.ctx, native, ctypes.byref(self.stream)), "stream")
        self.tensors = []

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"pit {what}: status {status}: {self.lib.pit_last_error().decode()}")

    def wrap(self, t):
        """A borrowed pit tensor over torch tensor t (contiguous)."""
        assert t.is_contiguous() and t.is_cuda
        shape = (ctypes.c_int64 * t.dim())(*t.shape)
        out = ctypes.c_void_p()
        self.check(self.lib.pit_tensor_wrap(self.ctx, DTYPES[t.dtype], t.dim(), shape, None,
                                            ctypes.c_void_p(t.data_ptr()), 0, ctypes.byref(out)),
                   f"wrap {tuple(t.shape)} {t.dtype}")
        self.tensors.append(out)
        return out

    def attention(self, q, k, v, mask, o, scale, block):
        self.check(self.lib.pit_sparse_attention(self.ctx, self.stream, q, k, v, mask, o,
                                                 ctypes.c_float(scale), block, None), "attention")

    def moe(self, x, ids, gates, w, y):
        self.check(self.lib.pit_moe_forward(self.ctx, self.stream, x, ids, gates, w, y, None), "moe")

    def close(self):
        for t in self.tensors:
            self.lib.pit_tensor_destroy(t)
        self.lib.pit_stream_destroy(self.stream)
        self.lib.pit_context_destroy(self.ctx)


def time_ms(fn, warmup=3, reps=20):
    """Median of `reps` event-timed calls on the current stream."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) for a, b in ev)
    return times[len(times) // 2]


def rel_err(got, ref, rows=None):
    g, r = got.float(), ref.float()
    if rows is not None:
        g, r = g[:, rows], r[:, rows]
    return ((g - r).norm() / r.norm().clamp_min(1e-30)).item()


def bench_attention(pit, results, flex):
    BH, L, D, BLK, SPARSITY = 16, 8192, 64, 128, 0.9
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(BH, L, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    blocks = torch.rand(L // BLK, L // BLK, device="cuda", generator=g) >= SPARSITY
    mask = blocks.repeat_interleave(BLK, 0).repeat_interleave(BLK, 1).contiguous()  # torch.bool [L, L]
    mask_bf16 = mask.to(torch.bfloat16)
    scale = 1.0 / math.sqrt(D)
    density = blocks.float().mean().item()
    o_u8, o_bf16 = torch.empty_like(q), torch.empty_like(q)
    P = {n: pit.wrap(t) for n, t in dict(q=q, k=k, v=v, m8=mask, m16=mask_bf16, o8=o_u8, o16=o_bf16).items()}
    t_u8 = time_ms(lambda: pit.attention(P["q"], P["k"], P["v"], P["m8"], P["o8"], scale, BLK))
    t_bf16 = time_ms(lambda: pit.attention(P["q"], P["k"], P["v"], P["m16"], P["o16"], scale, BLK))
    q4, k4, v4 = q[None], k[None], v[None]
    sdpa = lambda: F.scaled_dot_product_attention(q4, k4, v4, attn_mask=mask, scale=scale)
    t_sdpa = time_ms(sdpa)
    ref = sdpa()[0]
    rows = mask.any(1)  # SDPA gives NaN on a row with every key masked, pit 0
    r = dict(density=density, pit_u8_mask_ms=t_u8, pit_bf16_mask_ms=t_bf16, sdpa_dense_ms=t_sdpa,
             err_u8_vs_sdpa=rel_err(o_u8, ref, rows), err_bf16_vs_sdpa=rel_err(o_bf16, ref, rows),
             zero_rows_ok=bool((o_u8[:, ~rows] == 0).all().item()))
    if flex:
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            fa = torch.compile(flex_attention)
            mask_mod = lambda b, h, qi, ki: mask[qi, ki]
            build = lambda: create_block_mask(mask_mod, None, None, L, L, device="cuda", BLOCK_SIZE=BLK)
            bm = build()
            run = lambda: fa(q4, k4, v4, block_mask=bm, scale=scale)
            out = run()
            r["flex_call_ms"] = time_ms(run)
            r["flex_mask_build_ms"] = time_ms(build, warmup=1, reps=5)
            r["err_flex_vs_sdpa"] = rel_err(out[0], ref, rows)
        except Exception as e:  # an anchor that cannot run is reported, not fatal
            r["flex_error"] = f"{type(e).__name__}: {e}"[:300]
    results["attention"] = r


def skewed_counts(T, E):
    """4..1130 tokens an expert, summing to T (tests/backends/cuda/test_cuda_ops_bench.c's skewed_counts)."""
    c = [4 + int(1126.0 * (e / (E - 1)) ** 3.46) for e in range(E)]
    s, e = sum(c), E // 2
    while s != T:
        d = 1 if s < T else -1
        if 4 <= c[e] + d <= 1130:
            c[e] += d
            s += d
        e = e + 1 if e + 1 < E - 1 else E // 2
    return c


def bench_moe(pit, results):
    T, H, N, E = 16384, 1024, 4096, 64
    g = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16, generator=g)
    w = (torch.randn(E, H, N, device="cuda", dtype=torch.bfloat16, generator=g) / math.sqrt(H)).contiguous()
    counts = skewed_counts(T, E)
    ids = torch.repeat_interleave(torch.arange(E, device="cuda"), torch.tensor(counts, device="cuda"))
    ids = ids[torch.randperm(T, device="cuda", generator=g)].to(torch.int32).reshape(T, 1).contiguous()
    gates = torch.rand(T, 1, device="cuda", generator=g).contiguous()
    y = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
    P = {n: pit.wrap(t) for n, t in dict(x=x, ids=ids, g=gates, w=w, y=y).items()}
    r = dict(tokens_per_expert_min=min(counts), tokens_per_expert_max=max(counts))
    r["pit_ms"] = time_ms(lambda: pit.moe(P["x"], P["ids"], P["g"], P["w"], P["y"]))
    r["dense_gemm_ms"] = time_ms(lambda: x @ w[0])
    flat = ids.reshape(-1).long()

    def loop():
        out = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
        for e in range(E):
            sel = (flat == e).nonzero().reshape(-1)
            out[sel] = ((x[sel] @ w[e]).float() * gates[sel]).to(torch.bfloat16)
        return out
    r["per_expert_loop_ms"] = time_ms(loop, warmup=1, reps=5)
    ref = loop()
    r["err_pit_vs_loop"] = rel_err(y, ref)
    cap = int(1.25 * T / E)

    def padded():
        order = torch.argsort(flat, stable=True)
        start = torch.cumsum(torch.bincount(flat, minlength=E), 0) - torch.bincount(flat, minlength=E)
        slot = torch.arange(T, device="cuda") - start[flat[order]]
        keep = slot < cap  # tokens past the capacity are dropped
        xp = torch.zeros(E, cap, H, device="cuda", dtype=torch.bfloat16)
        xp[flat[order][keep], slot[keep]] = x[order][keep]
        yp = torch.bmm(xp, w)
        out = torch.zeros(T, N, device="cuda", dtype=torch.bfloat16)
        out[order[keep]] = (yp[flat[order][keep], slot[keep]].float() * gates[order[keep]]).to(torch.bfloat16)
        return out
    r["padded_bmm_cap1.25_ms"] = time_ms(padded)
    try:
        offs = torch.cumsum(torch.tensor(counts, device="cuda", dtype=torch.int32), 0).to(torch.int32)

        def grouped():
            order = torch.argsort(flat, stable=True)
            yg = torch._grouped_mm(x[order], w, offs=offs)
            out = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
            out[order] = (yg.float() * gates[order]).to(torch.bfloat16)
            return out
        r["grouped_mm_ms"] = time_ms(grouped)
        # torch's grouped GEMM alone, on tokens already in expert order: no
        # permutation, no gates, no scatter (less work than pit's call does)
        xs = x[torch.argsort(flat, stable=True)].contiguous()
        r["grouped_mm_gemm_only_ms"] = time_ms(lambda: torch._grouped_mm(xs, w, offs=offs))
        r["err_grouped_vs_loop"] = rel_err(grouped(), ref)
    except Exception as e:
        r["grouped_mm_error"] = f"{type(e).__name__}: {e}"[:300]
    r["pit_over_dense"] = r["pit_ms"] / r["dense_gemm_ms"]
    results["moe"] = r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default="build-gpu/lib/libpit.so")
    ap.add_argument("--json")
    ap.add_argument("--only", choices=["attention", "moe"])
    ap.add_argument("--no-flex", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_anchors: no CUDA device", file=sys.stderr)
        return 2
    torch.cuda.init()
    # a stream of its own: the legacy default stream has no handle to wrap
    torch.cuda.set_stream(torch.cuda.Stream())
    pit = Pit(os.path.abspath(a.lib))
    results = dict(device=torch.cuda.get_device_name(), torch=torch.__version__)
    if a.only in (None, "attention"):
        bench_attention(pit, results, not a.no_flex)
    if a.only in (None, "moe"):
        bench_moe(pit, results)
    pit.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    for section in ("attention", "moe"):
        for key, val in results.get(section, {}).items():
            print(f"{section:9s} {key:28s} {val:.4g}" if isinstance(val, float) else f"{section:9s} {key:28s} {val}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
