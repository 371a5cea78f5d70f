"""scripts/python_overhead.py - a GPU lab script (not shipped): the host time
the Python package adds to a pit.attention call with torch CUDA tensors, at
the decode and blocks points of `pit bench --suite attention`.

For each point: the GPU time of the call (CUDA events around a loop), the
host time a call takes (perf_counter over a loop, the queue kept short by a
synchronize every 50 calls), both with pit's scratch memory from torch's
caching allocator (the package's default) and from pit's own; then a
cProfile of the host path, its most expensive functions by own time.

  PYTHONPATH=python PIT_LIBRARY=build-gpu/lib/libpit.so \\
      python3 scripts/python_overhead.py [--calls N] [--profile FILE]
"""
import argparse
import cProfile
import io
import pstats
import time

import torch

import pit

POINTS = {  # name: (B, Hq, Hkv, Lq, Lk, D, block_q, block_k) as the C bench
    "decode": (8, 32, 8, 1, 32768, 128, 1, 64),
    "blocks": (1, 32, 32, 4096, 4096, 128, 128, 128),
}


def inputs(p, gen):
    b, hq, hkv, lq, lk, d, bq, bk = p
    q = torch.randn(b, hq, lq, d, generator=gen, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, hkv, lk, d, generator=gen, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, hkv, lk, d, generator=gen, device="cuda", dtype=torch.bfloat16)
    nq, nk = (lq + bq - 1) // bq, (lk + bk - 1) // bk
    bm = (torch.rand(b, hq, nq, nk, generator=gen, device="cuda") < 0.1).to(torch.uint8)
    return q, k, v, dict(block_mask=bm, block=(bq, bk))


def gpu_ms(fn, n):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n


def host_us(fn, n):
    fn()
    torch.cuda.synchronize()
    total = 0.0
    for i in range(n):
        t0 = time.perf_counter()
        fn()
        total += time.perf_counter() - t0
        if i % 50 == 49:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return total / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--profile", default=None, help="write the cProfile table here")
    args = ap.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(1)
    ctx = pit.default_context()
    report = io.StringIO()
    rows = []
    for name, p in POINTS.items():
        q, k, v, kw = inputs(p, gen)
        call = lambda: pit.attention(q, k, v, **kw)  # noqa: E731
        for alloc in (True, False):
            ctx.set_torch_allocator(alloc)
            rows.append((name, "torch" if alloc else "pit", gpu_ms(call, args.calls), host_us(call, args.calls)))
        ctx.set_torch_allocator(True)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            call()
        prof.disable()
        torch.cuda.synchronize()
        report.write(f"== {name}: {args.calls} calls\n")
        pstats.Stats(prof, stream=report).sort_stats("tottime").print_stats(25)
    if args.profile:
        with open(args.profile, "w") as f:
            f.write(report.getvalue())
    print(f"{'point':8} {'scratch':8} {'GPU ms/call':>12} {'host us/call':>13}")
    for name, alloc, g, h in rows:
        print(f"{name:8} {alloc:8} {g:12.4f} {h:13.1f}")


if __name__ == "__main__":
    main()
