#!/usr/bin/env python3
"""scripts/torch_moe.py - the MoE expert FFN (SwiGLU): PyTorch's composed layer beside pit_moe_ffn.

A GPU lab script (not shipped; needs PyTorch with CUDA and torch._grouped_mm),
run from the repository root. pit is called through its public C API with
ctypes on torch's current stream, over torch's own tensors (no copies; the
Pit class of torch_anchors.py), and every time is taken with CUDA events on
that stream, so both ways run in one process on the same data.

Each layer starts from the router's logits [T, E] (a per-expert bias makes
the load skewed, as in `pit bench --suite moe`) and ends with Y [T, H]:
  torch  top-k of the logits, softmax over the k -> argsort of the expert ids
         -> gather of X's rows -> torch._grouped_mm with W_gate_up -> SwiGLU
         -> torch._grouped_mm with W_down -> gates applied in f32 ->
         index_add_ of each token's k rows into Y
  pit    the same top-k and softmax (ids to i32) -> pit_moe_ffn
Also timed: pit_moe_ffn alone (from ids and gates) and torch's two grouped
GEMMs alone on tokens already in expert order (less work than either layer).
Before anything is timed, both layers are checked against a float64 torch
reference on a small case; then, at each shape, pit's Y against torch's.

Shapes: those of `pit bench --suite moe` (tools/bench_moe.c), by model name
(every T of it), NAME@T, or TxHxFxExk.

usage: python3 scripts/torch_moe.py [--lib build-gpu/lib/libpit.so] [--quick]
           [--shapes mixtral-8x7b@8192,qwen3-30b-a3b,...] [--dtype bf16|f16] [--json F]
exit: 0 done; 1 a result disagrees with the reference (or pit fails at a
shape); 2 no PyTorch, no CUDA device, no torch._grouped_mm, libpit not
loadable, or a bad option.
"""
import argparse
import ctypes
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # torch_anchors.py, imported after torch

# model, T, H, F, E, k: the routed experts, as tools/bench_moe.c lists them
SHAPES = [
    ("mixtral-8x7b", 8192, 4096, 14336, 8, 2),
    ("mixtral-8x7b", 512, 4096, 14336, 8, 2),
    ("qwen3-30b-a3b", 8192, 2048, 768, 128, 8),
    ("qwen3-30b-a3b", 512, 2048, 768, 128, 8),
    ("qwen1.5-moe-a2.7b", 8192, 2048, 1408, 60, 4),
    ("deepseek-v2-lite", 8192, 2048, 1408, 64, 6),
    ("deepseek-v2-lite", 512, 2048, 1408, 64, 6),
    ("deepseek-v2", 4096, 5120, 1536, 160, 6),
]
ROUTER_BIAS = 1.5  # the per-expert bias falls by this from expert 0 to E-1 (tools/bench_moe.c)
CHECK_SHAPE = ("check", 40, 64, 48, 6, 2)
TOLERANCE = 1e-2  # pit's conformance tolerance for f16 and bf16


class Failure(Exception):
    """A reason the script cannot run: exit 2 with the message."""


def parse_shapes(text):
    """--shapes: model names (every T), NAME@T, or TxHxFxExk, comma-separated."""
    if not text:
        return list(SHAPES)
    out = []
    for item in text.split(","):
        name, _, t = item.partition("@")
        parts = item.split("x")
        if len(parts) == 5 and all(p.isdigit() and int(p) > 0 for p in parts):
            T, H, F, E, k = map(int, parts)
            if k > E:
                raise Failure(f"--shapes: '{item}': top-{k} of {E} experts")
            out.append(("custom", T, H, F, E, k))
            continue
        found = [s for s in SHAPES if s[0] == name and (not t or str(s[1]) == t)]
        if not found:
            raise Failure(f"--shapes: unknown shape '{item}' (models: "
                          f"{', '.join(sorted({s[0] for s in SHAPES}))}; or TxHxFxExk)")
        out += found
    return out


def load_torch():
    try:
        import torch
    except ImportError as e:
        raise Failure(f"needs PyTorch with CUDA ({e})")
    if not torch.cuda.is_available():
        raise Failure(f"no CUDA device (PyTorch {torch.__version__})")
    if not hasattr(torch, "_grouped_mm"):
        raise Failure(f"PyTorch {torch.__version__} has no torch._grouped_mm")
    return torch


def load_pit(torch, lib):
    """torch_anchors.Pit with pit_moe_ffn; torch's current stream must be a stream of its own."""
    from torch_anchors import Pit

    class PitMoe(Pit):
        def __init__(self, path):
            super().__init__(path)
            fn = self.lib.pit_moe_ffn
            fn.argtypes, fn.restype = [ctypes.c_void_p] * 10, ctypes.c_int

        def moe_ffn(self, x, ids, gates, w1, w2, y):
            # options NULL: SwiGLU and the context's workspace; no report, so no read-back
            self.check(self.lib.pit_moe_ffn(self.ctx, self.stream, x, ids, gates, w1, w2, y, None, None),
                       "moe_ffn")

        def release(self):
            """Destroys the borrowed tensors of one shape."""
            for t in self.tensors:
                self.lib.pit_tensor_destroy(t)
            self.tensors = []

    if not os.path.exists(lib):
        raise Failure(f"no libpit at {lib} (--lib)")
    try:
        return PitMoe(lib)
    except OSError as e:
        raise Failure(f"cannot load {lib}: {e}")
    except RuntimeError as e:
        raise Failure(str(e))


class Layer:
    """One shape's tensors: X, the router's logits, the weights, and both ways' outputs."""

    def __init__(self, torch, pit, shape, dtype, seed):
        _, T, H, F, E, k = shape
        self.torch, self.pit, self.T, self.H, self.F, self.E, self.k = torch, pit, T, H, F, E, k
        g = torch.Generator(device="cuda").manual_seed(seed)
        uni = lambda *s: torch.rand(*s, device="cuda", generator=g) * 2 - 1
        self.x = uni(T, H).to(dtype)
        self.w1 = (uni(E, H, 2 * F) / math.sqrt(H)).to(dtype)  # gate columns, then up
        self.w2 = (uni(E, F, H) / math.sqrt(F)).to(dtype)
        bias = ROUTER_BIAS * torch.arange(E, device="cuda") / max(E - 1, 1)
        self.logits = uni(T, E) + uni(T, E) + uni(T, E) - bias
        self.vals = torch.empty(T, k, device="cuda")
        self.idx = torch.empty(T, k, device="cuda", dtype=torch.int64)
        self.ids = torch.empty(T, k, device="cuda", dtype=torch.int32)
        self.gates = torch.empty(T, k, device="cuda")
        self.y_pit = torch.empty(T, H, device="cuda", dtype=dtype)
        self.route()
        self.P = {n: pit.wrap(t) for n, t in dict(x=self.x, ids=self.ids, g=self.gates, w1=self.w1, w2=self.w2,
                                                  y=self.y_pit).items()}

    def route(self):
        """The router: top-k of the logits, gates a softmax over the k (into the tensors pit reads)."""
        torch = self.torch
        torch.topk(self.logits, self.k, dim=1, out=(self.vals, self.idx))
        self.ids.copy_(self.idx)
        self.gates.copy_(torch.softmax(self.vals, dim=1))

    def torch_layer(self):
        torch, F, E = self.torch, self.F, self.E
        vals, idx = torch.topk(self.logits, self.k, dim=1)
        gates = torch.softmax(vals, dim=1)
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        offs = torch.cumsum(torch.bincount(flat, minlength=E), 0).to(torch.int32)
        token = order // self.k
        h = torch._grouped_mm(self.x[token], self.w1, offs=offs)
        a = torch.nn.functional.silu(h[:, :F]) * h[:, F:]
        z = torch._grouped_mm(a, self.w2, offs=offs)
        z = (z.float() * gates.reshape(-1)[order, None]).to(self.x.dtype)
        return torch.zeros_like(self.x).index_add_(0, token, z)

    def pit_call(self):
        P = self.P
        self.pit.moe_ffn(P["x"], P["ids"], P["g"], P["w1"], P["w2"], P["y"])

    def pit_layer(self):
        self.route()
        self.pit_call()
        return self.y_pit

    def grouped_gemms(self):
        """torch's two grouped GEMMs alone, on tokens already in expert order; returns the timed function."""
        torch, F = self.torch, self.F
        flat = self.ids.reshape(-1).long()
        order = torch.argsort(flat, stable=True)
        offs = torch.cumsum(torch.bincount(flat, minlength=self.E), 0).to(torch.int32)
        xs = self.x[order // self.k].contiguous()
        a = torch.empty(xs.shape[0], F, device="cuda", dtype=self.x.dtype).uniform_(-1, 1)
        return lambda: (torch._grouped_mm(xs, self.w1, offs=offs), torch._grouped_mm(a, self.w2, offs=offs))

    def reference(self):
        """Y in float64 from the routing in self.ids and self.gates."""
        torch, F = self.torch, self.F
        x, w1, w2 = self.x.double(), self.w1.double(), self.w2.double()
        y = torch.zeros(self.T, self.H, device="cuda", dtype=torch.float64)
        for e in range(self.E):
            t, j = (self.ids == e).nonzero(as_tuple=True)
            if t.numel() == 0:
                continue
            h = x[t] @ w1[e]
            a = torch.nn.functional.silu(h[:, :F]) * h[:, F:]
            y.index_add_(0, t, (a @ w2[e]) * self.gates[t, j].double()[:, None])
        return y


def rel_err(got, ref):
    g, r = got.double(), ref.double()
    return ((g - r).norm() / r.norm().clamp_min(1e-30)).item()


def check_small(torch, pit, dtype):
    """Both layers against the float64 reference on a small skewed case; returns the two errors."""
    layer = Layer(torch, pit, CHECK_SHAPE, dtype, seed=7)
    layer.y_pit.fill_(float("nan"))  # a row pit leaves unwritten shows
    got_pit = layer.pit_layer().clone()
    got_torch = layer.torch_layer()
    ref = layer.reference()
    pit.release()
    return rel_err(got_pit, ref), rel_err(got_torch, ref)


def measure(torch, pit, shape, dtype, reps, time_ms):
    layer = Layer(torch, pit, shape, dtype, seed=shape[1] + shape[4])
    load = torch.bincount(layer.ids.reshape(-1).long(), minlength=layer.E)
    r = dict(model=shape[0], t=layer.T, h=layer.H, f=layer.F, e=layer.E, k=layer.k,
             busiest_over_mean=load.max().item() * layer.E / (layer.T * layer.k),
             flops=2.0 * layer.T * layer.k * 3 * layer.H * layer.F)
    try:
        r["pit_layer_ms"] = time_ms(layer.pit_layer, reps=reps)
        r["pit_moe_ffn_ms"] = time_ms(layer.pit_call, reps=reps)
    except RuntimeError as e:  # a point pit fails is reported; the run goes on and exits 1
        r["pit_error"] = str(e)[:300]
    try:
        r["torch_layer_ms"] = time_ms(layer.torch_layer, reps=reps)
        r["torch_grouped_gemms_ms"] = time_ms(layer.grouped_gemms(), reps=reps)
    except RuntimeError as e:  # a shape torch._grouped_mm refuses is reported, not fatal
        r["torch_error"] = f"{type(e).__name__}: {e}"[:300]
    if "pit_error" not in r and "torch_error" not in r:
        r["pit_vs_torch_rel_err"] = rel_err(layer.pit_layer(), layer.torch_layer())
        r["torch_over_pit"] = r["torch_layer_ms"] / r["pit_layer_ms"]
    pit.release()
    del layer
    torch.cuda.empty_cache()
    return r


def print_row(r):
    line = (f"{r['model']:<17} {r['t']:5d} {r['h']:5d} {r['f']:5d} {r['e']:3d} {r['k']} "
            f"{r['busiest_over_mean']:5.2f} |")
    if "pit_error" in r:
        line += f" pit: {r['pit_error']} |"
    else:
        line += (f" {r['pit_layer_ms']:8.4f} {r['pit_moe_ffn_ms']:8.4f}"
                 f" {r['flops'] / r['pit_moe_ffn_ms'] / 1e9:6.1f} |")
    if "torch_error" in r:
        line += f" torch: {r['torch_error']}"
    else:
        line += f" {r['torch_layer_ms']:8.4f} {r['torch_grouped_gemms_ms']:8.4f} |"
    if "torch_over_pit" in r:
        err = r["pit_vs_torch_rel_err"]
        line += f" {r['torch_over_pit']:6.2f}x | {err:.1e}" + ("" if err <= TOLERANCE else "  [DISAGREE]")
    print(line)


def run(a):
    shapes = parse_shapes(a.shapes)
    torch = load_torch()
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
    torch.cuda.init()
    # a stream of its own: the legacy default stream has no handle to wrap
    torch.cuda.set_stream(torch.cuda.Stream())
    pit = load_pit(torch, os.path.abspath(a.lib))
    from torch_anchors import time_ms
    results = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, dtype=a.dtype, points=[])
    err_pit, err_torch = check_small(torch, pit, dtype)
    results.update(check_pit_rel_err=err_pit, check_torch_rel_err=err_torch)
    print(f"check {CHECK_SHAPE[1:]} against float64: pit {err_pit:.2e}, torch {err_torch:.2e} "
          f"(tolerance {TOLERANCE:g})")
    if not (err_pit <= TOLERANCE and err_torch <= TOLERANCE):
        print("torch_moe: a layer disagrees with the float64 reference; nothing timed", file=sys.stderr)
        pit.close()
        return 1
    reps = 5 if a.quick else 20
    print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, {a.dtype}, median of {reps}; "
          "layers from the router's logits to Y; skew: the busiest expert's load over the mean")
    print(f"{'model':<17} {'T':>5} {'H':>5} {'F':>5} {'E':>3} k {'skew':>5} | {'pit ms':>8} {'ffn ms':>8} "
          f"{'TF/s':>6} | {'torch ms':>8} {'gemms ms':>8} | {'trc/pit':>7} | pit vs torch")
    failed = False
    for shape in shapes:
        if a.quick:
            shape = (shape[0], max(shape[1] // 16, 64)) + shape[2:]
        r = measure(torch, pit, shape, dtype, reps, time_ms)
        results["points"].append(r)
        print_row(r)
        sys.stdout.flush()
        failed |= "pit_error" in r or r.get("pit_vs_torch_rel_err", 0) > TOLERANCE
    pit.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default="build-gpu/lib/libpit.so")
    ap.add_argument("--quick", action="store_true", help="T / 16 (64 at least), 5 repeats")
    ap.add_argument("--shapes", help="model names, NAME@T or TxHxFxExk, comma-separated (default: all)")
    ap.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        return run(a)
    except Failure as e:
        print(f"torch_moe: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
