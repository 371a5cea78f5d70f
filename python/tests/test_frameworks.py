"""Results in the caller's library for JAX and CuPy, the exporter that hands
pit's own tensors over through DLPack, and the allocator plumbing
(callbacks, the gate that keeps pit_context_set_allocator away from running
calls). JAX runs on its CPU device (JAX arrays in, jax.Array out, against
float64 numpy references); the CuPy cases are skipped by name without CuPy;
the exporter and allocator cases run on any device."""
import ctypes
import threading
import time
import types

import numpy as np
import pytest

import pit
from pit import _allocator, _lib, _tensors

CTX = pit.default_context()
RNG = np.random.default_rng(11)


def values(*shape, dtype=np.float32):
    return RNG.uniform(-1, 1, size=shape).astype(dtype)


def rel_err(got, ref):
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


# ---- JAX -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def jnp():
    return pytest.importorskip("jax.numpy", reason="jax is not installed")


def jax_calls(jnp):
    """(name, call on jax arrays, the float64 reference on numpy's)."""
    a, b = values(12, 20), values(20, 9)
    a[:, 4:12] = 0  # zero micro-tiles along K for the sparse product
    x, mask = values(6, 16), RNG.random((6, 16)) < 0.5
    q, k, v = values(1, 2, 8, 16), values(1, 2, 8, 16), values(1, 2, 8, 16)

    def softmax(x64, m):
        e = np.where(m, np.exp(x64 - np.where(m, x64, -np.inf).max(-1, keepdims=True)), 0)
        return e / e.sum(-1, keepdims=True)

    def attention(q64, k64, v64):
        s = q64 @ np.swapaxes(k64, -1, -2) / np.sqrt(q64.shape[-1])
        return softmax(s, np.ones_like(s, dtype=bool)) @ v64

    j = jnp.asarray
    return [("relu", lambda: pit.relu(j(x)), lambda: np.maximum(x, 0)),
            ("matmul", lambda: pit.matmul(j(a), j(b)), lambda: a.astype(np.float64) @ b),
            ("matmul_dense", lambda: pit.matmul_dense(j(a), j(b)), lambda: a.astype(np.float64) @ b),
            ("sparse_softmax", lambda: pit.sparse_softmax(j(x), j(mask)), lambda: softmax(x.astype(np.float64), mask)),
            ("attention", lambda: pit.attention(j(q), j(k), j(v)),
             lambda: attention(*(t.astype(np.float64) for t in (q, k, v))))]


@pytest.mark.parametrize("index", range(5))
def test_jax_in_jax_out(jnp, index):
    """A jax.Array on the first argument's device, with the right values."""
    import jax
    name, call, reference = jax_calls(jnp)[index]
    got = call()
    assert isinstance(got, jax.Array), f"{name}: {type(got).__name__}, not a jax.Array"
    assert got.devices() == jnp.zeros(1).devices()
    assert got.dtype == jnp.float32
    err = rel_err(np.asarray(got), reference())
    assert err < 1e-5, f"{name}: relative error {err:.3g}"


def test_jax_several_results_and_init(jnp):
    """matmul_backward's two results, prune_magnitude's result from its
    input's values (its input is left as it was: JAX arrays are immutable)."""
    import jax
    a, b, dc = values(8, 12), values(12, 5), values(8, 5)
    da, db = pit.matmul_backward(jnp.asarray(a), jnp.asarray(b), jnp.asarray(dc))
    assert isinstance(da, jax.Array) and isinstance(db, jax.Array)
    assert rel_err(da, dc.astype(np.float64) @ b.T) < 1e-5 and rel_err(db, a.astype(np.float64).T @ dc) < 1e-5
    w = jnp.asarray(values(8, 8))
    before = np.array(w)
    pruned = pit.prune_magnitude(w, sparsity=0.5)
    assert isinstance(pruned, jax.Array) and np.array_equal(np.array(w), before)
    kept = np.asarray(pruned) != 0
    assert kept.sum() == 32 and np.array_equal(np.asarray(pruned)[kept], before[kept])


@pytest.mark.skipif(not CTX.info.takes_host_memory,
                    reason="the default context's device does not take host memory (not a CPU device)")
def test_jax_result_is_pits_host_array_without_a_copy(jnp, monkeypatch):
    """On a device that takes host memory, pit writes a 64-byte aligned
    numpy array in place and JAX takes that memory as it is."""
    made = []

    def recording(*args, **kw):
        made.append(real(*args, **kw))
        return made[-1]

    real = _tensors._host_new
    monkeypatch.setattr(_tensors, "_host_new", recording)
    got = pit.relu(jnp.asarray(values(33, 17)))
    assert len(made) == 1 and made[0].ctypes.data % 64 == 0
    assert got.unsafe_buffer_pointer() == made[0].ctypes.data


def test_jax_out_is_refused(jnp):
    x = jnp.asarray(values(4, 4))
    with pytest.raises(pit.PitError, match="JAX arrays are immutable"):
        pit.relu(x, out=jnp.zeros((4, 4), jnp.float32))


# ---- CuPy --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cp():
    cupy = pytest.importorskip("cupy", reason="cupy is not installed")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - the reason is the report
        pytest.skip(f"cupy has no CUDA device ({e})")
    return cupy


def test_cupy_in_cupy_out(cp):
    """cupy.ndarray results on the input's device (written in place where
    pit runs on that device, copied elsewhere), values against float64."""
    a, b, x = values(16, 24), values(24, 8), values(9, 13)
    with cp.cuda.Device(0):
        da, db, dx = cp.asarray(a), cp.asarray(b), cp.asarray(x)
        got = pit.matmul(da, db)
        y = pit.relu(dx.T)  # transposed: made contiguous in CuPy first
    assert isinstance(got, cp.ndarray) and got.device.id == 0 and isinstance(y, cp.ndarray)
    assert rel_err(got.get(), a.astype(np.float64) @ b) < 1e-5
    assert np.array_equal(y.get(), np.maximum(x.T, 0))


# ---- the exporter: pit's tensors handed over through DLPack --------------------------------
def created(ctx, shape=(3, 5)):
    dims = (ctypes.c_int64 * len(shape))(*shape)
    handle = ctypes.c_void_p()
    _lib.check(_lib.tensor_create(ctx.handle, _lib.F32, len(shape), dims, ctypes.byref(handle)))
    return handle


@pytest.fixture
def destroys(monkeypatch):
    """The pit tensors destroyed (their handles' values), counted."""
    seen = []
    real = _lib.tensor_destroy

    def counting(handle):
        seen.append(getattr(handle, "value", handle))
        return real(handle)

    monkeypatch.setattr(_lib, "tensor_destroy", counting)
    return seen


def assert_tensors_alive(ctx, alive):
    """pit_context_destroy refuses while a tensor of the context lives."""
    status = _lib.context_destroy(ctx.handle)
    if alive:
        assert _lib.status_name(status) == "PIT_ERR_INVALID_ARGUMENT"
    else:
        assert status == 0
        ctx._handle = None


@pytest.mark.parametrize("versioned", [True, False])
def test_export_taken_by_a_consumer_is_freed_once(destroys, versioned):
    """A consumer (played here with ctypes) takes the capsule, reads the
    tensor and calls the deleter: the pit tensor is destroyed then, once,
    and a second deleter call does nothing."""
    ctx = pit.Context()
    handle = created(ctx)
    exporter = _tensors.Exported(handle, ctx)
    assert exporter.__dlpack_device__() == (ctx.info.dlpack_device_type, ctx.info.device_index)
    cap = exporter.__dlpack__(max_version=(1, 0)) if versioned else exporter.__dlpack__()
    name, used = _lib.CAPSULE_NAMES[versioned]
    assert _lib.capsule_is_valid(cap, name)
    with pytest.raises(BufferError, match="exported already"):
        exporter.__dlpack__()
    pointer = _lib.capsule_pointer(cap, name)
    managed = _lib.managed_tensor(pointer, versioned)
    dl = managed.dl_tensor
    assert (dl.ndim, dl.shape[0], dl.shape[1], dl.code, dl.bits, dl.lanes) == (2, 3, 5, 2, 32, 1)
    if versioned:
        assert (managed.major, managed.minor, managed.flags) == (1, 0, 0)
    _lib.capsule_rename(cap, used)  # the consumer owns it now
    del exporter, cap
    assert destroys == [] and _tensors._exports
    assert_tensors_alive(ctx, True)
    deleter = _tensors._DELETER(managed.deleter)
    deleter(pointer)
    assert destroys == [handle.value]
    _tensors._delete_export(pointer)  # a second call: nothing left to free
    assert destroys == [handle.value] and pointer not in _tensors._exports
    assert_tensors_alive(ctx, False)


def test_export_no_consumer_took_is_freed_by_the_exporter(destroys):
    ctx = pit.Context()
    handle = created(ctx)
    exporter = _tensors.Exported(handle, ctx)
    cap = exporter.__dlpack__(max_version=(1, 0))
    del exporter  # the capsule was never renamed: the exporter deletes it
    assert destroys == [handle.value]
    assert not _lib.capsule_is_valid(cap, b"used_dltensor_versioned")
    assert_tensors_alive(ctx, False)


def test_export_never_asked_for_is_freed_by_the_exporter(destroys):
    ctx = pit.Context()
    handle = created(ctx)
    exporter = _tensors.Exported(handle, ctx)
    with pytest.raises(BufferError, match="no copy"):
        exporter.__dlpack__(copy=True)
    del exporter
    assert destroys == [handle.value]
    assert_tensors_alive(ctx, False)


# ---- allocator plumbing ----------------------------------------------------------------------
def test_allocator_callbacks_never_raise_into_c():
    """alloc's address comes back through the C callback, an exception as
    NULL; free passes the block, an exception is dropped."""
    freed = []
    allocator = _allocator.callbacks(lambda size, stream: 4096 + size, freed.append)
    assert allocator.alloc(None, 64, None) == 4096 + 64
    allocator.free(None, 4160, None)
    assert freed == [4160]

    def failing(*_):
        raise RuntimeError("CUDA out of memory")

    broken = _allocator.callbacks(failing, failing)
    assert broken.alloc(None, 64, 7) is None  # NULL
    broken.free(None, 4160, 7)  # returns, nothing raised


def test_torch_allocator_callbacks_pass_device_and_stream():
    """With a stand-in for torch.cuda: the context's device index, torch's
    current stream (None) for a block of no stream, 0 for CU_STREAM_LEGACY
    on CUDA, any other stream as it is."""
    calls, freed = [], []
    cuda = types.SimpleNamespace(caching_allocator_alloc=lambda *a: calls.append(a) or 1 << 20,
                                 caching_allocator_delete=freed.append)
    allocator = _allocator.torch_allocator(types.SimpleNamespace(cuda=cuda), 3, cuda=True)
    for stream in (None, _allocator.CU_STREAM_LEGACY, 0x5000):
        assert allocator.alloc(None, 256, stream) == 1 << 20
    allocator.free(None, 1 << 20, 0x5000)
    assert calls == [(256, 3, None), (256, 3, 0), (256, 3, 0x5000)] and freed == [1 << 20]
    assert _allocator.torch_stream_arg(_allocator.CU_STREAM_LEGACY, cuda=False) == 1  # HIP: a stream as it is


def test_allocator_reaches_libpit():
    """Set on a context of its own: pit_tensor_create asks it for the block;
    a NULL block (or an allocator that raised) fails the call with
    PIT_ERR_OUT_OF_MEMORY, and the backend's allocation is back once the
    allocator is removed."""
    asked = []
    with pit.Context() as ctx:
        ctx.set_allocator(lambda size, stream: asked.append(size) or 0, lambda block: None)
        with pytest.raises(pit.PitError) as err:
            created(ctx, (64, 64))
        assert err.value.status == "PIT_ERR_OUT_OF_MEMORY" and asked and asked[0] >= 64 * 64 * 4
        _lib.check(_lib.context_set_allocator(ctx.handle, None))
        _lib.check(_lib.tensor_destroy(created(ctx)))


def test_setting_the_allocator_waits_for_running_calls():
    """The gate: set_allocator returns only once the call in flight has
    left, and a call starting meanwhile waits for it."""
    with pit.Context() as ctx:
        done = threading.Event()
        with _tensors.Call(ctx, np.zeros(1, np.float32)):
            setter = threading.Thread(target=lambda: (ctx.set_allocator(lambda *_: 0, lambda _: None), done.set()))
            setter.start()
            time.sleep(0.2)
            assert not done.is_set(), "the allocator was set while a call ran"
        setter.join(5)
        assert done.is_set()
        _lib.check(_lib.context_set_allocator(ctx.handle, None))
