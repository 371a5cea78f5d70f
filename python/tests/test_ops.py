"""pit's Python functions against float64 numpy references, on whatever
device the default context takes (PoCL in CI). Random non-zero data, odd
shapes, empty and full patterns; errors carry libpit's message."""
import numpy as np
import pytest

import pit
from conftest import host_memory

TOL = {np.float32: 1e-4, np.float16: 1e-2}
RNG = np.random.default_rng(7)


def nonzero(shape, dtype):
    """Random values away from zero (|v| in [0.5, 1.5)), so a zero in a test
    is always one the test put there."""
    v = RNG.uniform(0.5, 1.5, size=shape) * RNG.choice([-1.0, 1.0], size=shape)
    return v.astype(dtype)


def rel_err(got, ref):
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    assert not np.isnan(got).any(), "NaN in pit's output"
    den = np.linalg.norm(ref)
    return np.linalg.norm(got - ref) / (den if den > 0 else 1.0)


def with_zero_columns(a, s):
    """a with the fraction s of its columns zero (micro-tiles along K)."""
    a = a.copy()
    a[..., RNG.random(a.shape[-1]) < s] = 0
    return a


def test_info_names_every_backend():
    text = pit.info()
    assert text.startswith("pit " + pit.version())
    for name in ("cuda", "hip", "opencl"):
        assert name in text
    assert "default context:" in text


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(1, 7, 33), (33, 100, 65), (64, 256, 128), (3, 17, 40, 9)])
@pytest.mark.parametrize("s", [0.0, 0.6, 1.0])
def test_matmul(dtype, shape, s):
    if len(shape) == 4:
        batch, m, k, n = shape
        a, b = nonzero((batch, m, k), dtype), nonzero((batch, k, n), dtype)
    else:
        m, k, n = shape
        a, b = nonzero((m, k), dtype), nonzero((k, n), dtype)
    a = with_zero_columns(a, s)
    got = pit.matmul(a, b)
    assert got.dtype == np.dtype(dtype) and got.shape == a.shape[:-1] + b.shape[-1:]
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert rel_err(got, ref) <= TOL[dtype]
    assert rel_err(pit.matmul_dense(a, b), ref) <= TOL[dtype]


def with_zero_rows(a, s):
    """a with the fraction s of its rows zero (the rows matmul_rows skips)."""
    a = a.copy()
    a[..., RNG.random(a.shape[-2]) < s, :] = 0
    return a


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(1, 7, 33), (37, 45, 19), (3, 17, 33, 9), (2, 21, 40, 11, "shared")])
@pytest.mark.parametrize("s", [0.0, 0.5, 1.0])
def test_matmul_rows(dtype, shape, s):
    if len(shape) == 3:
        m, k, n = shape
        a, b = nonzero((m, k), dtype), nonzero((k, n), dtype)
    else:
        batch, m, k, n = shape[:4]
        a = nonzero((batch, m, k), dtype)
        b = nonzero((k, n) if len(shape) == 5 else (batch, k, n), dtype)  # a B shared by the batch
    a = with_zero_rows(a, s)
    got = pit.matmul_rows(a, b)
    assert got.dtype == np.dtype(dtype) and got.shape == a.shape[:-1] + b.shape[-1:]
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    skipped = ~a.any(axis=-1)
    assert np.all(got[skipped] == 0)  # s = 1: the empty pattern, every row zero
    assert rel_err(got, ref) <= TOL[dtype]


@host_memory
def test_matmul_rows_keeps_skipped_rows_of_out():
    m, k, n = 29, 50, 13
    a, b = with_zero_rows(nonzero((m, k), np.float32), 0.5), nonzero((k, n), np.float32)
    skipped = ~a.any(axis=-1)
    assert skipped.any() and not skipped.all()
    out = np.full((m, n), 7.0, np.float32)
    got = pit.matmul_rows(a, b, keep_skipped_rows=True, out=out)
    assert got is out
    assert np.all(out[skipped] == 7.0)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert rel_err(out[~skipped], ref[~skipped]) <= TOL[np.float32]
    pit.matmul_rows(a, b, out=out)  # without keep_skipped_rows they are zeroed
    assert np.all(out[skipped] == 0)
    with pytest.raises(pit.PitError) as e:
        pit.matmul_rows(a, b, keep_skipped_rows=True)  # no out=: nothing to keep
    assert e.value.status == "PIT_ERR_INVALID_ARGUMENT"
    with pytest.raises(pit.PitError) as e:
        pit.matmul_rows(a, nonzero((k + 1, n), np.float32))
    assert e.value.status == "PIT_ERR_SHAPE_MISMATCH" and "pit_matmul_rows" in e.value.message


def relu_ffn_reference(x, w1, w2):
    """(Y, H) in float64 from the inputs' values."""
    h = np.maximum(x.astype(np.float64) @ w1.astype(np.float64), 0.0)
    return h @ w2.astype(np.float64), h


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("dead", [0.0, 0.6, 1.0])
def test_relu_ffn(dtype, dead):
    """Random signs leave about half of H zero after the ReLU; dead: the
    fraction of W1's columns made negative for every (positive) token, so
    whole columns of H are zero (micro-tiles along K skipped), 1.0 the empty
    pattern."""
    t, d, f, d2 = 29, 24, 70, 13
    x, w1, w2 = nonzero((t, d), dtype), nonzero((d, f), dtype), nonzero((f, d2), dtype)
    if dead > 0:
        x = np.abs(x)
        cols = RNG.random(f) < dead
        w1[:, cols] = -np.abs(w1[:, cols])
    got, h = pit.relu_ffn(x, w1, w2, return_hidden=True)
    ref, ref_h = relu_ffn_reference(x, w1, w2)
    assert got.shape == (t, d2) and h.shape == (t, f) and got.dtype == h.dtype == np.dtype(dtype)
    assert np.all(h >= 0) and np.all(h[ref_h == 0] == 0)
    if dead == 1.0:
        assert np.all(got == 0)
    else:
        assert rel_err(got, ref) <= TOL[dtype]
        assert rel_err(h, ref_h) <= TOL[dtype]
    assert rel_err(pit.relu_ffn(x, w1, w2), ref if dead < 1.0 else got) <= TOL[dtype]  # Y alone


@host_memory
def test_relu_ffn_out_and_hidden_in_place():
    t, d, f, d2 = 17, 9, 33, 21
    x, w1, w2 = nonzero((t, d), np.float32), nonzero((d, f), np.float32), nonzero((f, d2), np.float32)
    out, hidden = np.empty((t, d2), np.float32), np.empty((t, f), np.float32)
    got, h = pit.relu_ffn(x, w1, w2, out=out, hidden=hidden, return_hidden=True)
    assert got is out and h is hidden
    ref, ref_h = relu_ffn_reference(x, w1, w2)
    assert rel_err(out, ref) <= TOL[np.float32] and rel_err(hidden, ref_h) <= TOL[np.float32]
    with pytest.raises(pit.PitError) as e:
        pit.relu_ffn(x, w1, nonzero((f + 1, d2), np.float32))
    assert e.value.status == "PIT_ERR_SHAPE_MISMATCH" and "pit_relu_ffn" in e.value.message
    with pytest.raises(pit.PitError) as e:
        pit.relu_ffn(x, w1.astype(np.float16), w2)
    assert e.value.status == "PIT_ERR_UNSUPPORTED_DTYPE"


def test_matmul_rows_and_relu_ffn_bfloat16(torch_device):
    """bfloat16 through torch (numpy has none): torch tensors out, against
    float64 from the values already rounded to bfloat16; 2 epsilons of the
    format, as the torch ops' forward."""
    import torch
    bf16, tol = torch.bfloat16, 2 * torch.finfo(torch.bfloat16).eps

    def tensor(shape):
        return torch.from_numpy(nonzero(shape, np.float32)).to(torch_device, bf16)

    a, b = tensor((37, 45)), tensor((45, 19))
    a[torch.from_numpy(RNG.random(37) < 0.5).to(torch_device)] = 0
    got = pit.matmul_rows(a, b)
    assert isinstance(got, torch.Tensor) and got.dtype == bf16 and got.device == a.device
    ref = a.cpu().double() @ b.cpu().double()
    assert rel_err(got.cpu().double().numpy(), ref.numpy()) <= tol
    x, w1, w2 = tensor((29, 24)), tensor((24, 70)), tensor((70, 13))
    y, h = pit.relu_ffn(x, w1, w2, return_hidden=True)
    assert isinstance(y, torch.Tensor) and y.dtype == h.dtype == bf16
    ref_y, ref_h = relu_ffn_reference(*(v.cpu().double().numpy() for v in (x, w1, w2)))
    assert rel_err(h.cpu().double().numpy(), ref_h) <= tol
    assert rel_err(y.cpu().double().numpy(), ref_y) <= tol


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_sddmm(dtype, density):
    m, n, k = 45, 70, 33
    a, b = nonzero((m, k), dtype), nonzero((n, k), dtype)
    mask = (RNG.random((m, n)) < density).astype(np.uint8)
    got = pit.sddmm(a, b, mask)
    ref = (a.astype(np.float64) @ b.astype(np.float64).T) * mask
    assert got.shape == (m, n)
    assert rel_err(got, ref) <= TOL[dtype]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sparse_softmax(dtype):
    m, n, scale = 37, 90, 0.7
    x = nonzero((m, n), dtype)
    mask = RNG.random((m, n)) < 0.4
    mask[3, :] = False  # a fully masked row gives zeros
    got = pit.sparse_softmax(x, mask, scale)
    xs = np.where(mask, scale * x.astype(np.float64), 0.0)
    row_max = xs.max(axis=1, keepdims=True, initial=-np.inf, where=mask)
    e = np.where(mask, np.exp(xs - np.where(np.isfinite(row_max), row_max, 0.0)), 0.0)
    den = e.sum(axis=1, keepdims=True)
    ref = np.divide(e, den, out=np.zeros_like(e), where=den > 0)
    assert np.all(got[3] == 0)
    assert rel_err(got, ref) <= TOL[dtype]


def test_relu_and_prune():
    x = nonzero((19, 23), np.float32)
    assert np.array_equal(pit.relu(x), np.maximum(x, 0))
    w = nonzero((32, 48), np.float32)
    pruned = pit.prune_magnitude(w, block=(8, 8), sparsity=0.5)
    blocks = (pruned.reshape(4, 8, 6, 8) != 0).any(axis=(1, 3))
    assert blocks.sum() == 12  # half of the 24 blocks survive
    kept = np.repeat(np.repeat(blocks, 8, axis=0), 8, axis=1)
    assert np.array_equal(pruned[kept], w[kept])


def test_errors_carry_the_library_message():
    with pytest.raises(pit.PitError) as e:
        pit.matmul(nonzero((4, 5), np.float32), nonzero((6, 7), np.float32))
    assert e.value.status == "PIT_ERR_SHAPE_MISMATCH"
    assert "pit_matmul" in e.value.message
    with pytest.raises(pit.PitError) as e:
        pit.matmul(nonzero((4, 5), np.float32), nonzero((5, 7), np.float16))
    assert e.value.status == "PIT_ERR_UNSUPPORTED_DTYPE"
    with pytest.raises(pit.PitError):
        pit.matmul(np.zeros((2, 2), dtype=np.float64), np.zeros((2, 2), dtype=np.float64))


def test_torch_tensors_pass_through_numpy():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    a, b = torch.randn(16, 24), torch.randn(24, 8)
    got = pit.matmul(a.numpy(), b.numpy())
    assert rel_err(got, (a.double() @ b.double()).numpy()) <= TOL[np.float32]


def attention_reference(q, k, v, allowed, scale):
    """float64 attention over the allowed (query, key) pairs; a query with
    none gives 0 and lse -inf."""
    b, hq, lq, _ = q.shape
    group = hq // k.shape[1]
    kk = np.repeat(k.astype(np.float64), group, axis=1)
    vv = np.repeat(v.astype(np.float64), group, axis=1)
    s = scale * np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), kk)
    s = np.where(allowed, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.where(allowed, np.exp(s - m), 0.0)
    den = p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhqk,bhkd->bhqd", np.divide(p, den, out=np.zeros_like(p), where=den > 0), vv)
    with np.errstate(divide="ignore"):
        lse = np.where(den[..., 0] > 0, np.log(den[..., 0]) + m[..., 0], -np.inf)
    return o, lse


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_attention_gqa_causal_window_mask(dtype):
    b, hq, hkv, lq, lk, d, dv = 2, 4, 2, 5, 9, 16, 8
    q, k, v = nonzero((b, hq, lq, d), dtype), nonzero((b, hkv, lk, d), dtype), nonzero((b, hkv, lk, dv), dtype)
    mask = RNG.random((lq, lk)) < 0.7
    mask[2, :] = False  # a query with no allowed key
    i, j = np.arange(lq)[:, None], np.arange(lk)[None, :]
    diag = i + (lk - lq)  # the causal diagonal is aligned to the end of the keys
    allowed = mask & (j <= diag) & (j >= diag - 3)
    got, lse = pit.attention(q, k, v, causal=True, window=(3, -1), mask=mask, return_lse=True)
    ref, ref_lse = attention_reference(q, k, v, allowed[None, None], 1.0 / np.sqrt(d))
    assert got.shape == (b, hq, lq, dv) and got.dtype == np.dtype(dtype)
    assert np.all(got[:, :, 2] == 0) and np.all(np.isneginf(lse[:, :, 2]))
    assert rel_err(got, ref) <= TOL[dtype]
    finite = np.isfinite(ref_lse)
    assert np.allclose(lse[finite], ref_lse[finite], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_block_mask(dtype, causal):
    """A block mask per query head ([Hq, ceil(Lq/bq), ceil(Lk/bk)], edge
    blocks cut at Lq and Lk), grouped-query heads, with and without the
    causal bound; a query block with no allowed key gives 0 and lse -inf."""
    b, hq, hkv, lq, lk, d, dv, bq, bk = 2, 4, 1, 13, 29, 16, 8, 4, 8
    q, k, v = nonzero((b, hq, lq, d), dtype), nonzero((b, hkv, lk, d), dtype), nonzero((b, hkv, lk, dv), dtype)
    blocks = RNG.random((hq, -(-lq // bq), -(-lk // bk))) < 0.5
    blocks[0, 0, :] = False  # head 0's first query block sees no key
    blocks[1, :, -1] = True  # the cut edge block of keys is on somewhere
    allowed = np.repeat(np.repeat(blocks, bq, axis=1), bk, axis=2)[:, :lq, :lk]
    if causal:
        allowed = allowed & (np.arange(lk)[None, :] <= np.arange(lq)[:, None] + (lk - lq))
    got, lse = pit.attention(q, k, v, causal=causal, block_mask=blocks.astype(np.uint8), block=(bq, bk),
                             return_lse=True)
    ref, ref_lse = attention_reference(q, k, v, allowed[None], 1.0 / np.sqrt(d))
    assert got.shape == (b, hq, lq, dv) and got.dtype == np.dtype(dtype)
    assert np.all(got[:, 0, :bq] == 0) and np.all(np.isneginf(lse[:, 0, :bq]))
    assert np.array_equal(np.isneginf(lse), np.isneginf(ref_lse))
    assert rel_err(got, ref) <= TOL[dtype]
    finite = np.isfinite(ref_lse)
    assert np.allclose(lse[finite], ref_lse[finite], rtol=1e-3, atol=1e-3)


def test_log_lines_reach_python_logging():
    """PIT_LOG is read once per process: a child process with debug lines."""
    import os
    import subprocess
    import sys
    code = ("import logging, sys, numpy as np, pit\n"
            "logging.basicConfig(stream=sys.stdout, level=logging.DEBUG, format='%(name)s %(levelname)s %(message)s')\n"
            "pit.log_to_logging()\n"
            "a = np.ones((8, 16), np.float32); pit.matmul(a, np.ones((16, 4), np.float32))\n"
            "pit.log_to_stderr()\n")
    env = dict(os.environ, PIT_LOG="debug")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pit DEBUG" in out.stdout


def routing(t, k, e):
    """Top-k of random logits (ids in 0..e-1, one out of range), softmax gates."""
    logits = RNG.normal(size=(t, e))
    ids = np.argsort(-logits, axis=1)[:, :k].astype(np.int32)
    ids[0, 0] = e  # an id out of range contributes nothing
    g = np.exp(np.take_along_axis(logits, ids.clip(0, e - 1), axis=1))
    return ids, (g / g.sum(axis=1, keepdims=True)).astype(np.float32)


def moe_forward_reference(x, ids, gates, w):
    """y[t] = sum_j gates[t, j] x[t] . w[ids[t, j]] in float64 (numpy
    arrays); an id outside 0..E-1 contributes nothing."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    ref = np.zeros((x.shape[0], w.shape[-1]))
    for i in range(x.shape[0]):
        for j in range(ids.shape[1]):
            if 0 <= ids[i, j] < w.shape[0]:
                ref[i] += float(gates[i, j]) * (x[i] @ w[ids[i, j]])
    return ref


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_moe_forward(dtype):
    t, h, n, e, k = 37, 24, 16, 5, 2
    x, w = nonzero((t, h), dtype), nonzero((e, h, n), dtype)
    ids, gates = routing(t, k, e)
    got = pit.moe_forward(x, ids, gates, w)
    assert rel_err(got, moe_forward_reference(x, ids, gates, w)) <= TOL[dtype]


@pytest.mark.parametrize("activation", ["swiglu", "relu"])
def test_moe_ffn(activation):
    t, h, f, e, k = 29, 16, 12, 4, 2
    gated = activation == "swiglu"
    x = nonzero((t, h), np.float32)
    wu, wd = nonzero((e, h, 2 * f if gated else f), np.float32), nonzero((e, f, h), np.float32)
    ids, gates = routing(t, k, e)
    got = pit.moe_ffn(x, ids, gates, wu, wd, activation=activation)
    ref = np.zeros((t, h))
    for i in range(t):
        for j in range(k):
            if ids[i, j] >= e:
                continue
            hid = x[i].astype(np.float64) @ wu[ids[i, j]].astype(np.float64)
            act = hid[:f] / (1 + np.exp(-hid[:f])) * hid[f:] if gated else np.maximum(hid, 0)
            ref[i] += gates[i, j] * (act @ wd[ids[i, j]].astype(np.float64))
    assert rel_err(got, ref) <= TOL[np.float32]
    with pytest.raises(pit.PitError):
        pit.moe_ffn(x, ids, gates, wu, wd, activation="tanh")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_matmul_backward(dtype):
    m, k, n = 40, 96, 24
    a, b, dc = with_zero_columns(nonzero((m, k), dtype), 0.5), nonzero((k, n), dtype), nonzero((m, n), dtype)
    da, db = pit.matmul_backward(a, b, dc)
    ref_da = dc.astype(np.float64) @ b.astype(np.float64).T
    ref_db = a.astype(np.float64).T @ dc.astype(np.float64)
    assert rel_err(db, ref_db) <= TOL[dtype]
    on = a != 0  # on A's non-zero elements dA is the dense gradient (elsewhere: the micro-tiles' choice)
    assert rel_err(da[on], ref_da[on]) <= TOL[dtype]


def test_sparse_softmax_backward():
    m, n, scale = 21, 50, 0.5
    x, dy = nonzero((m, n), np.float32), nonzero((m, n), np.float32)
    mask = RNG.random((m, n)) < 0.5
    y = pit.sparse_softmax(x, mask, scale)
    got = pit.sparse_softmax_backward(y, dy, mask, scale)
    y64, dy64 = y.astype(np.float64), dy.astype(np.float64)
    ref = np.where(mask, scale * y64 * (dy64 - (dy64 * y64).sum(axis=1, keepdims=True)), 0.0)
    assert rel_err(got, ref) <= TOL[np.float32]


def test_attention_backward():
    b, hq, hkv, lq, lk, d = 1, 4, 2, 6, 11, 8
    dt = np.float32
    q, k, v = nonzero((b, hq, lq, d), dt), nonzero((b, hkv, lk, d), dt), nonzero((b, hkv, lk, d), dt)
    do = nonzero((b, hq, lq, d), dt)
    i, j = np.arange(lq)[:, None], np.arange(lk)[None, :]
    allowed = (j <= i + (lk - lq))[None, None]
    o, lse = pit.attention(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = pit.attention_backward(q, k, v, o, do, lse, causal=True)
    scale, g = 1.0 / np.sqrt(d), hq // hkv
    q64, do64 = q.astype(np.float64), do.astype(np.float64)
    k64, v64 = np.repeat(k.astype(np.float64), g, axis=1), np.repeat(v.astype(np.float64), g, axis=1)
    s = np.where(allowed, scale * np.einsum("bhqd,bhkd->bhqk", q64, k64), -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    o64 = np.einsum("bhqk,bhkd->bhqd", p, v64)
    dp = np.einsum("bhqd,bhkd->bhqk", do64, v64)
    ds = p * (dp - (do64 * o64).sum(axis=-1, keepdims=True))
    ref_dq = scale * np.einsum("bhqk,bhkd->bhqd", ds, k64)
    ref_dk = (scale * np.einsum("bhqk,bhqd->bhkd", ds, q64)).reshape(b, hkv, g, lk, d).sum(axis=2)
    ref_dv = np.einsum("bhqk,bhqd->bhkd", p, do64).reshape(b, hkv, g, lk, d).sum(axis=2)
    for got, ref in ((dq, ref_dq), (dk, ref_dk), (dv, ref_dv)):
        assert rel_err(got, ref) <= TOL[dt]


def test_moe_ffn_backward_relu():
    t, h, f, e, k = 13, 8, 6, 3, 2
    x, wu, wd, dy = (nonzero(s, np.float32) for s in ((t, h), (e, h, f), (e, f, h), (t, h)))
    ids, gates = routing(t, k, e)
    dx, dwu, dwd, dg = pit.moe_ffn_backward(x, ids, gates, wu, wd, dy, activation="relu")
    rdx, rdwu, rdwd, rdg = np.zeros((t, h)), np.zeros((e, h, f)), np.zeros((e, f, h)), np.zeros((t, k))
    for i in range(t):
        for j in range(k):
            ex = ids[i, j]
            if ex >= e:
                continue
            x64, g = x[i].astype(np.float64), float(gates[i, j])
            hid = x64 @ wu[ex].astype(np.float64)
            act = np.maximum(hid, 0)
            da = dy[i].astype(np.float64) @ wd[ex].astype(np.float64).T
            rdg[i, j] = act @ da
            dh = g * da * (hid > 0)
            rdwd[ex] += g * np.outer(act, dy[i])
            rdwu[ex] += np.outer(x64, dh)
            rdx[i] += dh @ wu[ex].astype(np.float64).T
    for got, ref in ((dx, rdx), (dwu, rdwu), (dwd, rdwd), (dg, rdg)):
        assert rel_err(got, ref) <= TOL[np.float32]
    assert np.all(dg[0, 0] == 0)  # the slot whose id is out of range
    # the first product kept by the forward: h's rows, and the same gradients from it
    y, hid = pit.moe_ffn(x, ids, gates, wu, wd, activation="relu", return_hidden=True)
    assert hid.shape == (t * k, f)
    assert rel_err(y, pit.moe_ffn(x, ids, gates, wu, wd, activation="relu")) <= TOL[np.float32]
    for i in range(t):
        for j in range(k):
            ref_h = x[i].astype(np.float64) @ wu[ids[i, j]].astype(np.float64) if ids[i, j] < e else np.zeros(f)
            assert rel_err(hid[i * k + j], ref_h) <= TOL[np.float32]
    kept = hid.copy()
    again = pit.moe_ffn_backward(x, ids, gates, wu, wd, dy, activation="relu", hidden=hid)
    for got, ref in zip(again, (rdx, rdwu, rdwd, rdg)):
        assert rel_err(got, ref) <= TOL[np.float32]
    assert np.array_equal(hid, kept)  # read, not changed


def test_calls_from_many_threads():
    """The default context from 4 threads at once, each checking its results."""
    import concurrent.futures

    def work(seed):
        rng = np.random.default_rng(seed)
        a = (rng.uniform(0.5, 1.5, (24, 40)) * (rng.random(40) < 0.5)).astype(np.float32)
        b = rng.uniform(-1, 1, (40, 12)).astype(np.float32)
        for _ in range(5):
            assert rel_err(pit.matmul(a, b), a.astype(np.float64) @ b) <= TOL[np.float32]
        return True

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(8)))
