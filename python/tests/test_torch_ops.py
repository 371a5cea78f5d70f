"""pit's torch ops (pit.torch_ops) on the torch device of pit's default
context (conftest.torch_device: CUDA tensors on a CUDA context, CPU tensors
on PoCL): results and gradients in float32, float16 and bfloat16 against
PyTorch's dense twin in float64 on the CPU (so TF32 or any other shortcut of
PyTorch on the GPU never enters a reference), gradcheck and opcheck,
torch.compile(fullgraph=True), and a model block through pit.nn. Skipped by
name where torch (with torch.library.custom_op) is not installed."""
import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not hasattr(torch.library, "custom_op"):
    pytest.skip("torch has no torch.library.custom_op (2.4 or later needed)", allow_module_level=True)

import pit.torch_ops as ops  # noqa: E402
from test_ops import moe_forward_reference  # noqa: E402

GEN = torch.Generator().manual_seed(11)
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Relative (norm) error allowed of a result and of a gradient. Inputs are
# rounded to the dtype before the reference sees them, so what is left is the
# rounding of the result and of 16-bit intermediates (P before P.V, the MoE
# activation between its two products) over float32 accumulation: 2 and 4
# epsilons of a 16-bit format (float16 2^-10, bfloat16 2^-7; PoCL measures a
# fifth of that), and for float32 about a hundred times its rounding over
# these sums (PoCL: 1e-7).
TOL = {torch.float32: (1e-5, 1e-4),
       **{dt: (2 * torch.finfo(dt).eps, 4 * torch.finfo(dt).eps) for dt in (torch.float16, torch.bfloat16)}}


def nonzero(*shape):
    """Values in +-[0.5, 1.5) from the CPU generator (the same on every device)."""
    v = torch.rand(*shape, generator=GEN) + 0.5
    return v * torch.where(torch.rand(*shape, generator=GEN) < 0.5, -1.0, 1.0)


def leaf(t, device, dtype=torch.float32):
    """t on the device in dtype, requiring grad."""
    return t.to(device, dtype).requires_grad_(True)


def twin(t):
    """t's values (already rounded to its dtype) in float64 on the CPU,
    requiring grad: the reference's leaf."""
    return t.detach().cpu().double().requires_grad_(True)


def rel_err(got, ref):
    got, ref = got.detach().cpu().double(), ref.detach().cpu().double()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-30))


def check(got, ref, tol, what):
    err = rel_err(got, ref)
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol:.3g}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_forward_and_gradients(torch_device, dtype):
    fwd, grad = TOL[dtype]
    a0 = nonzero(33, 48) * (torch.rand(48, generator=GEN) < 0.5)  # zero columns: PIT skips them
    a, b = leaf(a0, torch_device, dtype), leaf(nonzero(48, 20), torch_device, dtype)
    c = ops.matmul(a, b)
    assert c.device == a.device and c.dtype == dtype
    dc = nonzero(33, 20).to(torch_device, dtype)
    c.backward(dc)
    a64, b64 = twin(a), twin(b)
    (a64 @ b64).backward(dc.cpu().double())
    check(c, a64 @ b64, fwd, "c")
    check(b.grad, b64.grad, grad, "dB")
    on = a.detach().cpu() != 0  # dA on A's pattern
    check(a.grad.cpu()[on], a64.grad[on], grad, "dA")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sparse_softmax_gradient(torch_device, dtype):
    fwd, grad = TOL[dtype]
    x = leaf(nonzero(9, 30), torch_device, dtype)
    mask = torch.rand(9, 30, generator=GEN) < 0.6
    y = ops.sparse_softmax(x, mask.to(torch_device), 0.5)
    dy = nonzero(9, 30).to(torch_device, dtype)
    y.backward(dy)
    x64 = twin(x)
    ref = torch.softmax((0.5 * x64).masked_fill(~mask, float("-inf")), dim=1).masked_fill(~mask, 0)
    ref.backward(dy.cpu().double())
    check(y, ref, fwd, "y")
    check(x.grad, x64.grad, grad, "dx")


def sdpa_gqa(q, k, v, causal):
    """PyTorch's attention with the kv heads repeated for grouped queries."""
    rep = q.shape[1] // k.shape[1]
    return torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(rep, dim=1),
                                                           v.repeat_interleave(rep, dim=1), is_causal=causal)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_attention_gqa_causal_gradients(torch_device, dtype):
    fwd, grad = TOL[dtype]
    b, hq, hkv, l, d = 1, 4, 2, 7, 8
    q, k, v = (leaf(nonzero(*s), torch_device, dtype) for s in ((b, hq, l, d), (b, hkv, l, d), (b, hkv, l, d)))
    o, lse = ops.attention(q, k, v, True)
    assert o.device == q.device and lse.dtype == torch.float32
    do = nonzero(b, hq, l, d).to(torch_device, dtype)
    o.backward(do)
    q64, k64, v64 = twin(q), twin(k), twin(v)
    ref = sdpa_gqa(q64, k64, v64, True)
    ref.backward(do.cpu().double())
    check(o, ref, fwd, "o")
    for name, got, want in (("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad), ("dv", v.grad, v64.grad)):
        check(got, want, grad, name)


def routing(t, e, k):
    """k distinct experts a token (int32) and float32 gates summing to 1."""
    ids = torch.stack([torch.randperm(e, generator=GEN)[:k] for _ in range(t)]).to(torch.int32)
    return ids, torch.softmax(nonzero(t, k), dim=-1)


def moe_ffn_twin(x, ids, gates, wu, wd):
    """The SwiGLU expert FFN as a loop over the k slots (PyTorch, any dtype)."""
    f = wd.shape[1]
    y = torch.zeros_like(x)
    for j in range(ids.shape[1]):
        e = ids[:, j].long()
        hid = torch.einsum("th,thw->tw", x, wu[e])
        act = torch.nn.functional.silu(hid[:, :f]) * hid[:, f:]
        y = y + gates[:, j:j + 1].to(y.dtype) * torch.einsum("tf,tfh->th", act, wd[e])
    return y


@pytest.mark.parametrize("keeping", [False, True], ids=["recomputing", "keeping"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_moe_ffn_gradients(torch_device, dtype, keeping):
    """moe_ffn, and moe_ffn_keeping whose backward reads the first product
    its forward kept (checked too: each slot's x . w_gate_up)."""
    fwd, grad = TOL[dtype]
    t, h, f, e, k = 17, 16, 8, 4, 2
    x = leaf(nonzero(t, h), torch_device, dtype)
    wu, wd = leaf(nonzero(e, h, 2 * f), torch_device, dtype), leaf(nonzero(e, f, h), torch_device, dtype)
    ids, gates = routing(t, e, k)
    gates = leaf(gates, torch_device)  # float32 whatever the operands' dtype
    if keeping:
        y, kept = ops.moe_ffn_keeping(x, ids.to(torch_device), gates, wu, wd)
        first = torch.einsum("th,tkhw->tkw", twin(x), twin(wu)[ids.long()]).reshape(t * k, 2 * f)
        check(kept, first, fwd, "kept first product")
    else:
        y = ops.moe_ffn(x, ids.to(torch_device), gates, wu, wd)
    dy = nonzero(t, h).to(torch_device, dtype)
    y.backward(dy)
    x64, wu64, wd64, g64 = (twin(p) for p in (x, wu, wd, gates))
    ref = moe_ffn_twin(x64, ids, g64, wu64, wd64)
    ref.backward(dy.cpu().double())
    check(y, ref, fwd, "y")
    for name, got, want in (("dx", x.grad, x64.grad), ("dw_gate_up", wu.grad, wu64.grad),
                            ("dw_down", wd.grad, wd64.grad), ("dgates", gates.grad, g64.grad)):
        check(got, want, grad, name)


# ---- gradcheck and opcheck: small float32 cases -----------------------------------
def op_cases(device):
    """(name, op, args) of each op, small, in float32 on the device. matmul's
    A has no zeros: gradcheck perturbs every entry, and dA is 0 on A's zero
    micro-tiles by definition."""
    ids, gates = routing(5, 3, 2)
    d = {"device": device}
    return {
        "matmul": (ops.matmul, (nonzero(6, 5).to(**d), nonzero(5, 4).to(**d))),
        "sparse_softmax": (ops.sparse_softmax, (nonzero(4, 9).to(**d),
                                                (torch.rand(4, 9, generator=GEN) < 0.6).to(**d), 0.7)),
        "attention": (lambda q, k, v: ops.attention(q, k, v, True)[0],
                      (nonzero(1, 2, 5, 4).to(**d), nonzero(1, 1, 5, 4).to(**d), nonzero(1, 1, 5, 4).to(**d))),
        "moe_ffn": (ops.moe_ffn, (nonzero(5, 4).to(**d), ids.to(**d), gates.to(**d), nonzero(3, 4, 6).to(**d),
                                  nonzero(3, 3, 4).to(**d))),
        "moe_ffn_keeping": (ops.moe_ffn_keeping, (nonzero(5, 4).to(**d), ids.to(**d), gates.to(**d),
                                                  nonzero(3, 4, 6).to(**d), nonzero(3, 3, 4).to(**d))),
    }


OPS = ["matmul", "sparse_softmax", "attention", "moe_ffn", "moe_ffn_keeping"]


@pytest.mark.parametrize("name", OPS)
def test_gradcheck(torch_device, name):
    """torch.autograd.gradcheck in float32 (pit has no float64): central
    differences of step 1e-3 against the backward, to 1e-2."""
    fn, args = op_cases(torch_device)[name]
    if name == "moe_ffn_keeping":  # y alone: the kept product is not differentiable
        fn = (lambda op: lambda *a: op(*a)[0])(fn)
    args = tuple(a.requires_grad_(True) if torch.is_tensor(a) and a.is_floating_point() else a for a in args)
    with warnings.catch_warnings():  # its warning that float32 inputs are not float64: known, and why the bounds
        warnings.filterwarnings("ignore", message=".*double precision")
        assert torch.autograd.gradcheck(fn, args, eps=1e-3, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("name", ["matmul", "sparse_softmax", "moe_ffn", "moe_ffn_keeping"])
def test_opcheck(torch_device, name):
    """torch.library.opcheck: schema, autograd registration, the fake against
    the real result, and AOT dispatch (forward and backward)."""
    fn, args = op_cases(torch_device)[name]
    args = tuple(a.requires_grad_(True) if torch.is_tensor(a) and a.is_floating_point() else a for a in args)
    torch.library.opcheck(fn, args)


def forward_cases(device):
    """The forward ops (no autograd), float32, each with the float64 dense
    result its output must match."""
    d = dict(device=device)
    a = nonzero(7, 9)
    a[torch.rand(7, generator=GEN) < 0.4] = 0.0  # whole rows of zeros: what matmul_rows skips
    b = nonzero(9, 5)
    sa, sb, smask = nonzero(6, 8), nonzero(7, 8), (torch.rand(6, 7, generator=GEN) < 0.5).float()
    x, w1, w2 = nonzero(5, 6), nonzero(6, 10), nonzero(10, 4)
    mx, mw = nonzero(6, 4), nonzero(3, 4, 5)
    ids = torch.tensor([[0, 2], [1, 1], [2, 0], [0, 1], [5, 2], [1, 0]], dtype=torch.int32)
    gates = torch.rand(6, 2, generator=GEN) + 0.1
    pw = nonzero(8, 8)
    f = torch.nn.functional

    def prune_ref(w):
        keep = w.abs() > w.abs().flatten().kthvalue(w.numel() // 2).values
        return torch.where(keep, w, torch.zeros_like(w)).double()

    return {
        "matmul_rows": (ops.matmul_rows, (a.to(**d), b.to(**d)), a.double() @ b.double()),
        "sddmm": (ops.sddmm, (sa.to(**d), sb.to(**d), smask.to(**d)), (sa.double() @ sb.double().T) * smask.double()),
        "relu_ffn": (ops.relu_ffn, (x.to(**d), w1.to(**d), w2.to(**d)),
                     f.relu(x.double() @ w1.double()) @ w2.double()),
        "moe_forward": (ops.moe_forward, (mx.to(**d), ids.to(device), gates.to(**d), mw.to(**d)),
                        torch.from_numpy(moe_forward_reference(mx.numpy(), ids.numpy(), gates.numpy(), mw.numpy()))),
        "prune_magnitude": (lambda w: ops.prune_magnitude(w, 1, 1, 0.5), (pw.to(**d),), prune_ref(pw)),
    }


FORWARD_OPS = ["matmul_rows", "sddmm", "relu_ffn", "moe_forward", "prune_magnitude"]


@pytest.mark.parametrize("name", FORWARD_OPS)
def test_forward_ops_against_dense(torch_device, name):
    """Each forward op's result against PyTorch's dense float64 result, then
    torch.library.opcheck (schema, the fake against the real result, AOT
    dispatch) on its op."""
    fn, args, ref = forward_cases(torch_device)[name]
    check(fn(*args), ref, TOL[torch.float32][0], name)
    op = getattr(torch.ops.pit, name).default
    extra = {"prune_magnitude": (1, 1, 0.5)}.get(name, ())
    torch.library.opcheck(op, args + extra, test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


def test_forward_ops_refuse_a_gradient(torch_device):
    a = nonzero(4, 3).to(torch_device).requires_grad_(True)
    b = nonzero(3, 2).to(torch_device)
    with pytest.raises(RuntimeError, match="autograd"):
        ops.matmul_rows(a, b).sum().backward()


def test_opcheck_attention(torch_device):
    q, k, v = (nonzero(1, 2, 5, 4).to(torch_device).requires_grad_(True) for _ in range(3))
    torch.library.opcheck(ops.attention, (q, k, v, True, -1, -1, 0.0))


# ---- torch.compile -------------------------------------------------------------------
def compile_backend(device):
    """inductor on CUDA (what a model runs), eager on the CPU: the trace
    (fullgraph, the fakes) is the same, and PoCL runs need no compiler."""
    return "inductor" if device.type == "cuda" else "eager"


def test_compile_traces_without_graph_breaks(torch_device):
    def block(a, b, mask):
        return ops.sparse_softmax(ops.matmul(a, b), mask, 1.0)

    a, b = nonzero(16, 32).to(torch_device), nonzero(32, 24).to(torch_device)
    mask = (torch.rand(16, 24, generator=GEN) < 0.5).to(torch_device)
    compiled = torch.compile(block, fullgraph=True, backend=compile_backend(torch_device))
    check(compiled(a, b, mask), block(a, b, mask), 1e-6, "compiled against eager")


def test_compile_traces_forward_ops_without_graph_breaks(torch_device):
    def block(x, w1, w2, k, mask):
        h = ops.relu_ffn(x, w1, w2)
        return ops.sddmm(ops.matmul_rows(h, w2.T.contiguous()), k, mask)

    x, w1, w2 = nonzero(8, 16).to(torch_device), nonzero(16, 32).to(torch_device), nonzero(32, 16).to(torch_device)
    k, mask = nonzero(12, 32).to(torch_device), (torch.rand(8, 12, generator=GEN) < 0.5).float().to(torch_device)
    compiled = torch.compile(block, fullgraph=True, backend=compile_backend(torch_device))
    check(compiled(x, w1, w2, k, mask), block(x, w1, w2, k, mask), 1e-6, "compiled against eager")


class Block(torch.nn.Module):
    """GQA causal attention with pit.nn.Linear projections, then pit.nn.MoEFFN."""

    def __init__(self, b, t, d, heads, kv, ffn, experts):
        import pit.nn as pnn

        super().__init__()
        self.shape = (b, t, d, heads, kv, d // heads)
        self.q, self.k = pnn.Linear(d, d, bias=False), pnn.Linear(d, kv * (d // heads), bias=False)
        self.v, self.o = pnn.Linear(d, kv * (d // heads), bias=False), pnn.Linear(d, d)
        self.attn = pnn.SparseAttention(causal=True)
        self.moe = pnn.MoEFFN(d, ffn, experts, top_k=2)

    def forward(self, x):
        b, t, d, heads, kv, hd = self.shape
        q = self.q(x).view(b, t, heads, hd).transpose(1, 2)
        k = self.k(x).view(b, t, kv, hd).transpose(1, 2)
        v = self.v(x).view(b, t, kv, hd).transpose(1, 2)
        h = x + self.o(self.attn(q, k, v).transpose(1, 2).reshape(b, t, d))
        return h + self.moe(h)


def dense_twin(m, x):
    """Block's forward with PyTorch's dense operators (m in float64)."""
    b, t, d, heads, kv, hd = m.shape
    f = torch.nn.functional
    q = f.linear(x, m.q.weight).view(b, t, heads, hd).transpose(1, 2)
    k = f.linear(x, m.k.weight).view(b, t, kv, hd).transpose(1, 2)
    v = f.linear(x, m.v.weight).view(b, t, kv, hd).transpose(1, 2)
    a = sdpa_gqa(q, k, v, True).transpose(1, 2).reshape(b, t, d)
    h = x + f.linear(a, m.o.weight, m.o.bias)
    tokens = h.reshape(-1, d)
    ids, gates = m.moe.route(tokens)
    return h + moe_ffn_twin(tokens, ids, gates, m.moe.w_gate_up, m.moe.w_down).reshape(b, t, d)


def test_model_block_through_pit_nn_under_compile(torch_device):
    """The block on the device, compiled with fullgraph=True, forward and
    every parameter's gradient against its float64 twin on the CPU (the
    router too: the twin routes in float64 from the same weights)."""
    dims = (2, 6, 32, 4, 2, 16, 4)
    torch.manual_seed(3)
    block = Block(*dims)
    ref_block = Block(*dims).double()
    ref_block.load_state_dict(block.state_dict())
    block = block.to(torch_device)
    x = nonzero(2, 6, 32)
    out = torch.compile(block, fullgraph=True, backend=compile_backend(torch_device))(x.to(torch_device))
    assert out.device.type == torch_device.type
    ref = dense_twin(ref_block, x.double())
    check(out, ref, TOL[torch.float32][0], "block output")
    dout = nonzero(2, 6, 32)
    out.backward(dout.to(torch_device))
    ref.backward(dout.double())
    for (name, p), (_, p64) in zip(block.named_parameters(), ref_block.named_parameters()):
        check(p.grad, p64.grad, TOL[torch.float32][1], f"d{name}")
