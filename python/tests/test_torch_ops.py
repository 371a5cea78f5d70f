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


def test_bfloat16_is_refused_by_name():
    with pytest.raises(Exception, match="bfloat16"):
        ops.matmul(nonzero(4, 4).bfloat16(), nonzero(4, 4).bfloat16())
