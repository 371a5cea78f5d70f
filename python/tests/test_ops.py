"""pit's Python functions against float64 numpy references, on whatever
device the default context takes (PoCL in CI). Random non-zero data, odd
shapes, empty and full patterns; errors carry libpit's message."""
import numpy as np
import pytest

import pit

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
