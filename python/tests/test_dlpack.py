"""Arrays through DLPack without copies where the device addresses them
(host memory on PoCL, an OpenCL CPU device): results written into the
caller's array in place, inputs read where they lie (strided rows too),
read-only arrays as inputs only, versioned and legacy capsules consumed as
the protocol says, torch tensors in and out (bfloat16 too), and the copy
path where the device cannot address the memory. The numpy cases are
skipped by name on a device that does not take host memory; the torch cases
run on conftest's torch_device where pit addresses it without a copy (CPU
tensors on PoCL, CUDA tensors on a CUDA context)."""
import ctypes

import numpy as np
import pytest

import pit
from pit import _tensors

from conftest import host_memory

CTX = pit.default_context()
RNG = np.random.default_rng(3)
capsule_name_is = ctypes.pythonapi.PyCapsule_IsValid
capsule_name_is.argtypes, capsule_name_is.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_int


def values(*shape, dtype=np.float32):
    return RNG.uniform(-1, 1, size=shape).astype(dtype)


@host_memory
def test_out_is_written_in_place():
    x = values(17, 33)
    out = np.full((17, 33), 7.0, dtype=np.float32)
    address = out.ctypes.data
    got = pit.relu(x, out=out)
    assert got is out and out.ctypes.data == address
    assert np.array_equal(out, np.maximum(x, 0))


@host_memory
def test_out_strided_view_only_its_elements():
    """out= a view of rows 40 floats apart: written there, nowhere else."""
    big = np.full((6, 40), 5.0, dtype=np.float32)
    a, b = values(4, 9), values(9, 11)
    view = big[1:5, 3:14]
    pit.matmul_dense(a, b, out=view)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.allclose(big[1:5, 3:14], ref, atol=1e-5)
    rest = big.copy()
    rest[1:5, 3:14] = 5.0
    assert (rest == 5.0).all()


@host_memory
def test_inputs_are_read_where_they_lie():
    """A row-strided view passes as it is (its addresses are the tensor's);
    a transposed or column-strided one is made contiguous first."""
    big = values(8, 50)
    rows = big[2:6, 5:20]
    with _tensors.Call(CTX, rows) as c:
        t = c.input(rows)
        assert t.source is rows and t.host
        assert t.span == (rows.ctypes.data, rows.ctypes.data + (3 * 50 + 15) * 4)
    for odd in (big[:15, :8].T, big[:4, ::3]):
        with _tensors.Call(CTX, odd) as c:
            assert c.input(odd).source is not odd
        assert np.array_equal(pit.relu(odd), np.maximum(odd, 0))
    assert np.array_equal(pit.relu(rows), np.maximum(rows, 0))


@host_memory
def test_out_overlapping_an_input_is_refused():
    x = values(6, 10)
    with pytest.raises(pit.PitError) as e:
        pit.relu(x[:, :5], out=x[:, 4:9])
    assert e.value.status == "PIT_ERR_ALIASING"


@host_memory
def test_read_only_arrays_are_inputs_only():
    x = values(5, 12)
    x.flags.writeable = False
    assert np.array_equal(pit.relu(x), np.maximum(x, 0))
    with pytest.raises(pit.PitError) as e:
        pit.relu(values(5, 12), out=x)
    assert e.value.status == "PIT_ERR_INVALID_ARGUMENT" and "read-only" in e.value.message


class Producer:
    """An array that hands out one kind of capsule and keeps it, to see
    what the consumer did with it."""

    def __init__(self, array, versioned):
        self.array, self.versioned, self.capsules = array, versioned, []
        self.shape, self.dtype = array.shape, array.dtype

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, stream=None, max_version=None, **kw):
        if max_version is not None and not self.versioned:
            raise TypeError("a DLPack 0.x producer takes no max_version")
        cap = self.array.__dlpack__(max_version=max_version) if self.versioned else self.array.__dlpack__()
        self.capsules.append(cap)
        return cap


@host_memory
@pytest.mark.parametrize("versioned", [True, False])
def test_capsules_are_consumed(versioned):
    x = values(7, 9)
    p = Producer(x, versioned)
    got = pit.relu(p)
    assert isinstance(got, np.ndarray) and np.array_equal(got, np.maximum(x, 0))
    used = b"used_dltensor_versioned" if versioned else b"used_dltensor"
    assert len(p.capsules) == 1 and capsule_name_is(p.capsules[0], used)


def test_copy_path_where_the_device_takes_no_host_memory():
    """The same calls with the context told that its device does not take
    host memory: the arrays are copied in and out, results the same."""
    with pit.Context() as ctx:
        ctx.info.takes_host_memory = 0
        x, a, b = values(9, 14), values(5, 7), values(7, 3)
        with _tensors.Call(ctx, x) as c:
            assert c.input(x).span is None
        assert np.array_equal(pit.relu(x, ctx=ctx), np.maximum(x, 0))
        assert np.allclose(pit.matmul(a, b, ctx=ctx), a @ b, atol=1e-5)
        with pytest.raises(pit.PitError, match="out= must be memory"):
            pit.relu(x, ctx=ctx, out=np.empty_like(x))


@host_memory
def test_attention_takes_blhd_views_as_they_are():
    b, l, h, d = 2, 9, 3, 8
    q, k, v = (values(b, l, h, d).transpose(0, 2, 1, 3) for _ in range(3))
    with _tensors.Call(CTX, q) as c:
        assert c.input(q, any_order=True).source is q
    got = pit.attention(q, k, v)
    qd, kd, vd = (x.astype(np.float64) for x in (q, k, v))
    s = qd @ kd.transpose(0, 1, 3, 2) / np.sqrt(d)
    p = np.exp(s - s.max(-1, keepdims=True))
    assert np.allclose(got, (p / p.sum(-1, keepdims=True)) @ vd, atol=1e-5)


@host_memory
def test_prune_magnitude_leaves_its_input():
    w = values(8, 8)
    before = w.copy()
    pruned = pit.prune_magnitude(w, sparsity=0.5)
    assert np.array_equal(w, before) and (pruned == 0).sum() == 32


@pytest.fixture
def direct_device(torch_device):
    """conftest's torch_device where pit addresses its memory without a copy
    (its CUDA device, or the CPU on a device that takes host memory)."""
    if torch_device.type == "cpu" and not CTX.info.takes_host_memory:
        pytest.skip("torch tensors would be copied: the default context's device takes no host memory "
                    "and is not torch's CUDA device")
    return torch_device


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="torch is not installed")


def test_torch_tensors_in_and_out(torch, direct_device):
    """Inputs read where they lie, results on the inputs' device, out=
    written in place."""
    x = torch.from_numpy(values(6, 20)).to(direct_device)
    with _tensors.Call(CTX, x) as c:
        t = c.input(x)
        assert t.source is x and t.span[0] == x.data_ptr()
    got = pit.relu(x)
    assert isinstance(got, torch.Tensor) and got.device == x.device and torch.equal(got, torch.relu(x))
    out = torch.full((6, 20), 3.0, device=direct_device)
    address = out.data_ptr()
    assert pit.relu(x, out=out) is out and out.data_ptr() == address and torch.equal(out, torch.relu(x))


def test_torch_bfloat16_and_strided(torch, direct_device):
    a = torch.from_numpy(values(12, 30)).bfloat16().to(direct_device)
    b = torch.from_numpy(values(16, 30)).bfloat16().to(direct_device).T  # [30, 16] column-major: made contiguous
    c = pit.matmul(a, b)
    assert c.dtype == torch.bfloat16 and c.device == a.device
    ref = a.cpu().double() @ b.cpu().double()
    assert float((c.cpu().double() - ref).norm() / ref.norm()) < 1e-2


def test_torch_requires_grad_inputs(torch, direct_device):
    x = torch.from_numpy(values(4, 4)).to(direct_device).requires_grad_(True)
    assert torch.equal(pit.relu(x), torch.relu(x.detach()))
