"""pit's torch ops (pit.torch_ops): results and gradients against PyTorch's
dense float64 twin, torch.compile without graph breaks. Skipped by name
where torch (with torch.library.custom_op) is not installed."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not hasattr(torch.library, "custom_op"):
    pytest.skip("torch has no torch.library.custom_op (2.4 or later needed)", allow_module_level=True)

import pit.torch_ops as ops  # noqa: E402

GEN = torch.Generator().manual_seed(11)


def nonzero(*shape):
    v = torch.rand(*shape, generator=GEN) + 0.5
    return v * torch.where(torch.rand(*shape, generator=GEN) < 0.5, -1.0, 1.0)


def close(got, ref, tol=1e-4):
    got, ref = got.detach().double(), ref.detach().double()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-30)) <= tol


def test_matmul_forward_and_gradients():
    a, b = nonzero(33, 48), nonzero(48, 20)
    a = a * (torch.rand(48, generator=GEN) < 0.5)  # zero columns: PIT skips them
    a.requires_grad_(True)
    b.requires_grad_(True)
    c = ops.matmul(a, b)
    dc = nonzero(33, 20)
    c.backward(dc)
    a64, b64 = a.detach().double().requires_grad_(True), b.detach().double().requires_grad_(True)
    (a64 @ b64).backward(dc.double())
    assert close(c, a64 @ b64)
    assert close(b.grad, b64.grad)
    on = a.detach() != 0  # dA on A's pattern
    assert close(a.grad[on], a64.grad[on])


def test_sparse_softmax_gradient():
    x = nonzero(9, 30).requires_grad_(True)
    mask = torch.rand(9, 30, generator=GEN) < 0.6
    y = ops.sparse_softmax(x, mask, 0.5)
    dy = nonzero(9, 30)
    y.backward(dy)
    x64 = x.detach().double().requires_grad_(True)
    ref = torch.softmax((0.5 * x64).masked_fill(~mask, float("-inf")), dim=1).masked_fill(~mask, 0)
    ref.backward(dy.double())
    assert close(y, ref)
    assert close(x.grad, x64.grad)


def test_attention_gqa_causal_gradients():
    b, hq, hkv, l, d = 1, 4, 2, 7, 8
    q, k, v = (nonzero(*s).requires_grad_(True) for s in ((b, hq, l, d), (b, hkv, l, d), (b, hkv, l, d)))
    o, lse = ops.attention(q, k, v, True)
    do = nonzero(b, hq, l, d)
    o.backward(do)
    q64, k64, v64 = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(q64, k64.repeat_interleave(2, dim=1),
                                                           v64.repeat_interleave(2, dim=1), is_causal=True)
    ref.backward(do.double())
    assert close(o, ref)
    for got, want in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        assert close(got, want)


def test_compile_traces_without_graph_breaks():
    def block(a, b, mask):
        return ops.sparse_softmax(ops.matmul(a, b), mask, 1.0)

    a, b, mask = nonzero(16, 32), nonzero(32, 24), torch.rand(16, 24, generator=GEN) < 0.5
    compiled = torch.compile(block, fullgraph=True, backend="eager")
    assert close(compiled(a, b, mask), block(a, b, mask))


def test_bfloat16_through_dlpack():
    """bfloat16, which numpy lacks, passes through DLPack: the matmul and its
    gradients against float64 (bf16 holds 8 bits of mantissa)."""
    a, b = nonzero(20, 36).bfloat16().requires_grad_(True), nonzero(36, 12).bfloat16().requires_grad_(True)
    c = ops.matmul(a, b)
    assert c.dtype == torch.bfloat16 and c.shape == (20, 12)
    dc = nonzero(20, 12).bfloat16()
    c.backward(dc)
    a64, b64 = a.detach().double(), b.detach().double()
    assert close(c, a64 @ b64, 1e-2)
    assert close(a.grad, dc.double() @ b64.T, 1e-2) and close(b.grad, a64.T @ dc.double(), 1e-2)


def test_moe_ffn_gradients():
    t, h, f, e, k = 17, 12, 8, 4, 2
    x = nonzero(t, h).requires_grad_(True)
    wu, wd = nonzero(e, h, 2 * f).requires_grad_(True), nonzero(e, f, h).requires_grad_(True)
    ids = torch.stack([torch.randperm(e, generator=GEN)[:k] for _ in range(t)]).to(torch.int32)
    gates = torch.softmax(nonzero(t, k), dim=-1).requires_grad_(True)
    y = ops.moe_ffn(x, ids, gates, wu, wd)
    dy = nonzero(t, h)
    y.backward(dy)
    x64, wu64, wd64, g64 = (p.detach().double().requires_grad_(True) for p in (x, wu, wd, gates))
    ref = torch.zeros(t, h, dtype=torch.float64)
    for j in range(k):
        hid = torch.einsum("th,thw->tw", x64, wu64[ids[:, j].long()])
        act = torch.nn.functional.silu(hid[:, :f]) * hid[:, f:]
        ref = ref + g64[:, j:j + 1] * torch.einsum("tf,tfh->th", act, wd64[ids[:, j].long()])
    ref.backward(dy.double())
    assert close(y, ref)
    for got, want in ((x.grad, x64.grad), (wu.grad, wu64.grad), (wd.grad, wd64.grad), (gates.grad, g64.grad)):
        assert close(got, want, 1e-3)


def test_model_block_through_pit_nn_under_compile():
    """Attention (GQA, causal) and a MoE FFN through pit.nn, compiled with
    fullgraph=True, forward and backward against the same block in float64
    with PyTorch's dense operators."""
    import pit.nn as pnn

    b, t, d, heads, kv, ffn, experts = 2, 6, 32, 4, 2, 16, 4
    hd = d // heads

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k = pnn.Linear(d, d, bias=False), pnn.Linear(d, kv * hd, bias=False)
            self.v, self.o = pnn.Linear(d, kv * hd, bias=False), pnn.Linear(d, d)
            self.attn = pnn.SparseAttention(causal=True)
            self.moe = pnn.MoEFFN(d, ffn, experts, top_k=2)

        def forward(self, x):
            q = self.q(x).view(b, t, heads, hd).transpose(1, 2)
            k = self.k(x).view(b, t, kv, hd).transpose(1, 2)
            v = self.v(x).view(b, t, kv, hd).transpose(1, 2)
            h = x + self.o(self.attn(q, k, v).transpose(1, 2).reshape(b, t, d))
            return h + self.moe(h)

    def dense_twin(m, x):
        f = torch.nn.functional
        q = f.linear(x, m.q.weight).view(b, t, heads, hd).transpose(1, 2)
        k = f.linear(x, m.k.weight).view(b, t, kv, hd).transpose(1, 2).repeat_interleave(heads // kv, dim=1)
        v = f.linear(x, m.v.weight).view(b, t, kv, hd).transpose(1, 2).repeat_interleave(heads // kv, dim=1)
        a = f.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        h = x + f.linear(a, m.o.weight, m.o.bias)
        tokens = h.reshape(-1, d)
        ids, gates = m.moe.route(tokens)
        y = torch.zeros_like(tokens)
        for j in range(ids.shape[1]):
            e = ids[:, j].long()
            hid = torch.einsum("th,thw->tw", tokens, m.moe.w_gate_up[e])
            act = f.silu(hid[:, :ffn]) * hid[:, ffn:]
            y = y + gates[:, j:j + 1].to(y.dtype) * torch.einsum("tf,tfh->th", act, m.moe.w_down[e])
        return h + y.reshape(b, t, d)

    torch.manual_seed(3)
    block = Block()
    twin = Block().double()
    twin.load_state_dict(block.state_dict())
    x = nonzero(b, t, d)
    out = torch.compile(block, fullgraph=True, backend="eager")(x)
    ref = dense_twin(twin, x.double())
    assert close(out, ref, 1e-4)
    dout = nonzero(b, t, d)
    out.backward(dout)
    ref.backward(dout.double())
    for (name, p), (_, p64) in zip(block.named_parameters(), twin.named_parameters()):
        assert close(p.grad, p64.grad, 1e-3), name
