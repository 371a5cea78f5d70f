"""pit: dynamically sparse deep-learning operators (PIT) from Python.

The functions take arrays of any library that speaks DLPack (numpy, torch,
CuPy, JAX; lists through numpy) and return the first array's kind: torch
tensors for torch (on their device, from torch's allocator, on the current
stream), numpy arrays otherwise. Where the context's device addresses an
array's memory (CUDA tensors on CUDA, host memory on an OpenCL CPU device
such as PoCL) it is read and written in place through DLPack; elsewhere it
is copied (docs/python.md). They run on the default context: the backend
PIT_BACKEND names ("cuda", "hip", "opencl", or "name:N"), else the first
backend with a device. A failing call raises PitError, whose message is
libpit's pit_last_error() for that call.
"""
import ctypes
import logging
import sys
import threading

import numpy as np

from . import _allocator, _lib, _tensors
from ._lib import PitError
from ._tensors import Call, as_array, code_of

__all__ = ["PitError", "Context", "default_context", "info", "version", "log_to_logging", "log_to_stderr", "matmul",
           "matmul_dense", "matmul_rows", "matmul_backward", "sddmm", "sparse_softmax", "sparse_softmax_backward", "attention", "attention_backward",
           "moe_forward", "moe_ffn", "moe_ffn_backward", "relu", "relu_ffn", "prune_magnitude"]

def version():
    """libpit's version as "major.minor.patch"."""
    v = _lib.lib.pit_version()
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}"


def _text(field):
    return field.decode(errors="replace")


def _describe(info):
    return (f"{_text(info.backend)}:{info.device_index} {_text(info.name)} ({_text(info.arch)}, "
            f"{info.compute_units} compute units, {info.global_mem_bytes / 2**30:.1f} GiB, "
            f"f16 {'native' if info.has_f16 else 'storage' if info.has_f16_storage else 'no'}, "
            f"bf16 {'yes' if info.has_bf16 else 'no'}; driver {_text(info.driver_version)})")


def info():
    """What `pit info` reports: each backend's devices or why it has none,
    and the device the default context takes."""
    lines = [f"pit {version()}", "backends:"]
    for name in ("cuda", "hip", "opencl"):
        count = ctypes.c_int(0)
        status = _lib.device_count(name.encode(), ctypes.byref(count))
        if status != 0:
            lines.append(f"  {name:<7} unavailable: {(_lib.lib.pit_last_error() or b'').decode(errors='replace')}")
            continue
        for i in range(count.value):
            d = _lib.DeviceInfo()
            if _lib.device_get_info(name.encode(), i, ctypes.byref(d)) == 0:
                lines.append("  " + _describe(d))
    try:
        ctx = default_context()
        lines.append("default context: " + _describe(ctx.device_info()))
        lines.append("tile database: " + _text(ctx.device_info().tiledb_source))
    except PitError as e:
        lines.append(f"default context: none ({e})")
    return "\n".join(lines)


class Context:
    """A pit context on one device (pit_context_create). backend None follows
    PIT_BACKEND, else the first backend with a device. torch_allocator: on
    the first call with a torch CUDA tensor of this context's device, route
    pit's device memory through torch's caching allocator (set_torch_allocator)."""

    def __init__(self, backend=None, device=-1, torch_allocator=True):
        handle = ctypes.c_void_p()
        _lib.check(_lib.context_create(backend.encode() if backend else None, device, ctypes.byref(handle)))
        self._handle, self._info, self._streams, self._lock = handle, None, {}, threading.Lock()
        self.gate = _allocator.Gate()  # calls hold it; setting the allocator waits for them
        self.torch_allocator = torch_allocator
        self._allocator = None  # "torch", "unsupported: ..." once decided; None before
        self._allocators = []  # every pit_allocator set: pit may give blocks back to it until destroy

    @property
    def handle(self):
        if self._handle is None:
            raise PitError("PIT_ERR_INVALID_ARGUMENT", "the context was closed")
        return self._handle

    def device_info(self):
        d = _lib.DeviceInfo()
        _lib.check(_lib.context_get_info(self.handle, ctypes.byref(d)))
        return d

    @property
    def info(self):
        """device_info(), read once."""
        if self._info is None:
            self._info = self.device_info()
        return self._info

    def describe(self):
        return f"{_text(self.info.backend)}:{self.info.device_index} {_text(self.info.name)}"

    def _runs_torch_cuda(self, like):
        """Whether like is a torch tensor on this context's CUDA (or ROCm)
        device (a CUDA tensor's get_device() is its device.index)."""
        info = self.info
        return like.is_cuda and info.dlpack_device_type in (_tensors.DL_CUDA, _tensors.DL_ROCM) and \
            like.get_device() == info.device_index

    def stream_of(self, like, lib):
        """The stream a call whose first array is like runs on: torch's or
        CuPy's current stream where the array lies on this context's GPU,
        else None (the context's default stream)."""
        if lib == "torch":
            return self.torch_stream(like)
        here = (self.info.dlpack_device_type, self.info.device_index)
        if lib == "cupy" and tuple(int(v) for v in like.__dlpack_device__()) == here:
            import cupy
            with cupy.cuda.Device(like.device.id):
                return self._wrapped(cupy.cuda.get_current_stream().ptr)
        return None

    def torch_stream(self, like):
        """The pit stream over torch's current stream of like's device when
        this context runs there (pit_stream_wrap, one per native stream),
        else None (the context's default stream)."""
        if not self._runs_torch_cuda(like):
            return None
        return self._wrapped(_current_raw_stream(like))

    def _wrapped(self, native):
        """The pit stream over a framework's native stream; its default
        stream (handle 0) is CU_STREAM_LEGACY on CUDA, pit's default stream
        on HIP."""
        if native == 0 and self.info.dlpack_device_type == _tensors.DL_CUDA:
            native = _allocator.CU_STREAM_LEGACY
        if native == 0:
            return None
        handle = self._streams.get(native)  # the common case, without the lock
        if handle is not None:
            return handle
        with self._lock:
            if native not in self._streams:
                handle = ctypes.c_void_p()
                _lib.check(_lib.stream_wrap(self.handle, native, ctypes.byref(handle)))
                self._streams[native] = handle
            return self._streams[native]

    def adopt_torch_allocator(self, like):
        """On the first call with a torch tensor on this context's CUDA
        device, unless torch_allocator is off: set_torch_allocator(True).
        A backend that cannot route its scratch keeps its own allocation."""
        if self._allocator is None and self.torch_allocator and self._runs_torch_cuda(like):
            try:
                self.set_torch_allocator(True)
            except PitError as e:
                self._allocator = f"unsupported: {e}"

    def set_torch_allocator(self, enabled=True):
        """Routes pit's device memory for this context (tensors it creates,
        plans, workspaces, operators' scratch) through torch's CUDA caching
        allocator, so it counts in torch.cuda.memory_allocated and comes from
        a graph's pool while torch captures one; False gives it back to the
        backend (and stops the automatic routing). Waits until no call runs
        on the context."""
        with self.gate.alone():
            self.torch_allocator = enabled
            if not enabled:
                _lib.check(_lib.context_set_allocator(self.handle, None))
                self._allocator = "off"
                return
            import torch
            allocator = _allocator.torch_allocator(torch, self.info.device_index,
                                                   self.info.dlpack_device_type == _tensors.DL_CUDA)
            self._allocators.append(allocator)  # kept: pit gives blocks back through it until destroy
            _lib.check(_lib.context_set_allocator(self.handle, ctypes.byref(allocator)))
            self._allocator = "torch"

    def set_allocator(self, alloc, free):
        """Any allocator: alloc(bytes, stream) -> address (a device pointer;
        OpenCL: a cl_mem), free(address); exceptions become a NULL block
        (PIT_ERR_OUT_OF_MEMORY) or a dropped free. Waits until no call runs."""
        with self.gate.alone():
            allocator = _allocator.callbacks(alloc, free)
            self._allocators.append(allocator)
            _lib.check(_lib.context_set_allocator(self.handle, ctypes.byref(allocator)))
            self._allocator, self.torch_allocator = "custom", False

    def close(self):
        if self._handle is not None:
            for handle in self._streams.values():
                _lib.check(_lib.stream_destroy(handle))
            self._streams = {}
            _lib.check(_lib.context_destroy(self._handle))
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self, _lib=_lib):
        # _lib bound at definition: at interpreter exit the module's globals
        # may be gone before the last context is collected
        if getattr(self, "_handle", None) is not None:
            for handle in self._streams.values():
                _lib.stream_destroy(handle)
            _lib.context_destroy(self._handle)


def _current_raw_stream(like):
    """The native handle of torch's current stream on like's device (read
    every call: torch.cuda.stream() changes it): torch's raw getter, which
    makes no torch.cuda.Stream object, where this torch has it."""
    torch = sys.modules["torch"]  # like is a torch tensor
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(like.get_device())
    return torch.cuda.current_stream(like.device).cuda_stream


_default = None
_default_lock = threading.Lock()


def default_context():
    """The process's context, created on first use."""
    global _default
    if _default is not None:  # created already: no lock to take
        return _default
    with _default_lock:
        if _default is None:
            _default = Context()
        return _default


def _call(ctx, like):
    return Call(ctx or default_context(), like)


def _same_dtype(op, *arrays):
    """The one pit dtype of arrays, or PIT_ERR_UNSUPPORTED_DTYPE naming them."""
    codes = {code_of(a, op) for a in arrays}
    if len(codes) != 1:
        names = sorted({str(a.dtype).replace("torch.", "") for a in arrays})
        raise PitError("PIT_ERR_UNSUPPORTED_DTYPE", f"{op}: dtypes differ ({', '.join(names)})")
    return codes.pop()


def _product(op, call, a, b, ctx, out):
    """c = a . b by call(ctx, stream, a, b, c): c shaped a's rows by b's columns."""
    a, b = as_array(a), as_array(b)
    code = _same_dtype(op, a, b)
    with _call(ctx, a) as c:
        ta, tb = c.input(a), c.input(b)
        tc = c.output(tuple(a.shape[:-1]) + tuple(b.shape[-1:]), code, out)
        _lib.check(call(c.ctx.handle, c.stream, ta.handle, tb.handle, tc.handle))
        return c.finish(tc)


def matmul(a, b, ctx=None, out=None):
    """C = a . b with PIT: the zeros of a (its micro-tiles chosen at run time)
    are skipped. a [M,K] or [b,M,K], b [K,N] or [b,K,N]; float32, float16 or
    bfloat16. out: the array to write C into (the context's device's memory)."""
    return _product("matmul", lambda h, s, ta, tb, tc: _lib.matmul(h, s, ta, tb, tc, None, None), a, b, ctx, out)


def matmul_dense(a, b, ctx=None, out=None):
    """C = a . b with the backend's dense GEMM (the baseline)."""
    return _product("matmul_dense", _lib.matmul_dense, a, b, ctx, out)


def matmul_rows(a, b, keep_skipped_rows=False, ctx=None, out=None):
    """C = a . b computing only the rows of a that hold a non-zero (padding of
    variable-length batches, masked tokens), found on the device every call.
    a [M,K] or [b,M,K], b [K,N] (shared by the batch) or [b,K,N]. The other
    rows of C are 0, or with keep_skipped_rows keep what out= held before
    (so it needs out=)."""
    if keep_skipped_rows and out is None:
        # A new result's skipped rows would be whatever its allocation held.
        raise PitError("PIT_ERR_INVALID_ARGUMENT", "matmul_rows: keep_skipped_rows needs out= (the rows it keeps)")
    keep = 1 if keep_skipped_rows else 0
    return _product("matmul_rows", lambda h, s, ta, tb, tc: _lib.matmul_rows(h, s, ta, tb, tc, keep, None), a, b,
                    ctx, out)


def matmul_backward(a, b, dc, ctx=None):
    """Gradients of c = a . b with a dynamically sparse: (da, db), da =
    dc . b^T on a's non-zero micro-tiles (0 elsewhere), db = a^T . dc."""
    a, b, dc = as_array(a), as_array(b), as_array(dc)
    code = _same_dtype("matmul_backward", a, b, dc)
    with _call(ctx, a) as c:
        ta, tb, tdc = c.input(a), c.input(b), c.input(dc)
        tda, tdb = c.output(a.shape, code), c.output(b.shape, code)
        _lib.check(_lib.matmul_backward(c.ctx.handle, c.stream, ta.handle, tb.handle, tdc.handle, tda.handle,
                                        tdb.handle))
        return c.finish(tda, tdb)


def sddmm(a, b, mask, block=(0, 0), ctx=None, out=None):
    """C = (a . b^T) where mask is non-zero, 0 elsewhere. a [M,K] or [b,M,K],
    b [N,K] or [b,N,K], mask [M,N] or [b,M,N] (any pit dtype, non-zero = on);
    block: micro-tile rows and columns, (0, 0) chosen at run time."""
    a, b, mask = as_array(a), as_array(b), as_array(mask)
    code = _same_dtype("sddmm", a, b)
    shape = (a.shape[0],) + tuple(mask.shape[-2:]) if len(a.shape) == 3 else tuple(mask.shape[-2:])
    with _call(ctx, a) as c:
        ta, tb, tm = c.input(a), c.input(b), c.input(mask)
        tc = c.output(shape, code, out)
        _lib.check(_lib.sddmm(c.ctx.handle, c.stream, ta.handle, tb.handle, tm.handle, tc.handle, int(block[0]),
                              int(block[1]), None))
        return c.finish(tc)


def sparse_softmax(x, mask, scale=1.0, ctx=None, out=None):
    """Softmax of scale * x along rows over the entries where mask is
    non-zero; masked entries and fully masked rows are 0."""
    x, mask = as_array(x), as_array(mask)
    with _call(ctx, x) as c:
        tx, tm = c.input(x), c.input(mask)
        ty = c.output(tx.shape, tx.code, out)
        _lib.check(_lib.sparse_softmax(c.ctx.handle, c.stream, tx.handle, tm.handle, ty.handle, float(scale), None))
        return c.finish(ty)


def sparse_softmax_backward(y, dy, mask, scale=1.0, ctx=None, out=None):
    """Gradient of sparse_softmax given its output y and dy: scale y (dy -
    rowsum(dy y)) on the mask, 0 elsewhere."""
    y, dy, mask = as_array(y), as_array(dy), as_array(mask)
    code = _same_dtype("sparse_softmax_backward", y, dy)
    with _call(ctx, y) as c:
        ty, tdy, tm = c.input(y), c.input(dy), c.input(mask)
        tdx = c.output(ty.shape, code, out)
        _lib.check(_lib.sparse_softmax_backward(c.ctx.handle, c.stream, ty.handle, tdy.handle, tm.handle,
                                                tdx.handle, float(scale)))
        return c.finish(tdx)


def relu(x, ctx=None, out=None):
    """max(x, 0)."""
    x = as_array(x)
    with _call(ctx, x) as c:
        tx = c.input(x)
        ty = c.output(tx.shape, tx.code, out)
        _lib.check(_lib.relu(c.ctx.handle, c.stream, tx.handle, ty.handle))
        return c.finish(ty)


def relu_ffn(x, w1, w2, ctx=None, out=None, hidden=None, return_hidden=False):
    """The ReLU FFN of OPT-style models with activation sparsity: H =
    relu(x . w1) (dense), Y = H . w2 with H's zeros, found after the ReLU,
    skipped (PIT along K). x [T,D], w1 [D,F], w2 [F,D2] -> Y [T,D2], one
    dtype. hidden: the array to write H [T,F] into (as out= for Y);
    return_hidden: return (Y, H), H being what the backward needs."""
    x, w1, w2 = as_array(x), as_array(w1), as_array(w2)
    code = _same_dtype("relu_ffn", x, w1, w2)
    with _call(ctx, x) as c:
        tx, t1, t2 = c.input(x), c.input(w1), c.input(w2)
        # H is always written (libpit takes it as the caller's scratch), so a
        # result array holds it even when it is not returned.
        th = c.output(tuple(x.shape[:-1]) + tuple(w1.shape[-1:]), code, hidden)
        ty = c.output(tuple(x.shape[:-1]) + tuple(w2.shape[-1:]), code, out)
        _lib.check(_lib.relu_ffn(c.ctx.handle, c.stream, tx.handle, t1.handle, t2.handle, th.handle, ty.handle,
                                 None))
        return c.finish(ty, th) if return_hidden else c.finish(ty)


def prune_magnitude(w, block=(1, 1), sparsity=0.5, ctx=None):
    """A copy of w with the block micro-tiles of smallest magnitude zeroed,
    the fraction `sparsity` of them."""
    w = as_array(w)
    with _call(ctx, w) as c:
        tw = c.output(w.shape, code_of(w), init=w)
        _lib.check(_lib.prune_magnitude(c.ctx.handle, c.stream, tw.handle, int(block[0]), int(block[1]),
                                        float(sparsity)))
        return c.finish(tw)


def _attention_options(c, causal, window, mask, block_mask, block, scale):
    """pit_attention_options from the keyword arguments; masks become
    tensors of the call c."""
    opt = _lib.attention_options_default()
    if scale is not None:
        opt.scale = float(scale)
    opt.causal = 1 if causal else 0
    if window is not None:
        opt.window_left, opt.window_right = int(window[0]), int(window[1])
    if block is not None:
        opt.block_q, opt.block_k = int(block[0]), int(block[1])
    if mask is not None:
        opt.mask = c.input(mask).handle.value
    if block_mask is not None:
        opt.block_mask = c.input(block_mask).handle.value
    return opt


def attention(q, k, v, *, causal=False, window=None, mask=None, block_mask=None, block=None, scale=None,
              return_lse=False, ctx=None, out=None):
    """softmax(scale q k^T over the allowed keys) v, per batch and query head,
    the keys and values of head h // (Hq // Hkv) (grouped-query attention).
    q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv] -> [B,Hq,Lq,Dv], in any
    stride order (a [B,L,H,D] buffer seen as [B,H,L,D] passes as it is).
    Allowed: causal (aligned to the end of the keys), window=(left, right)
    (-1: no bound), mask (element mask: [Lq,Lk], [Hq,Lq,Lk] or [B,Hq,Lq,Lk]),
    block_mask with block=(block_q, block_k); all combine. scale None:
    1/sqrt(D). return_lse: also the log-sum-exp [B,Hq,Lq] (float32; -inf for
    a query with no allowed key, whose output is 0)."""
    q, k, v = as_array(q), as_array(k), as_array(v)
    code = _same_dtype("attention", q, k, v)
    with _call(ctx, q) as c:
        tq, tk, tv = (c.input(x, any_order=True) for x in (q, k, v))
        opt = _attention_options(c, causal, window, mask, block_mask, block, scale)
        to = c.output(tuple(q.shape[:-1]) + tuple(v.shape[-1:]), code, out)
        tl = c.output(q.shape[:-1], _lib.F32) if return_lse else None
        _lib.check(_lib.attention(c.ctx.handle, c.stream, tq.handle, tk.handle, tv.handle, to.handle,
                                  ctypes.byref(opt), tl.handle if tl else None, None))
        return c.finish(to, tl) if return_lse else c.finish(to)


def attention_backward(q, k, v, o, do, lse, *, causal=False, window=None, mask=None, block_mask=None, block=None,
                       scale=None, ctx=None):
    """(dq, dk, dv) of attention given its output o, log-sum-exp lse and do;
    the same keyword arguments as the forward. dk and dv sum over the query
    heads that share a kv head."""
    q, k, v, o, do = (as_array(x) for x in (q, k, v, o, do))
    code = _same_dtype("attention_backward", q, k, v, o, do)
    with _call(ctx, q) as c:
        tq, tk, tv, to, tdo = (c.input(x, any_order=True) for x in (q, k, v, o, do))
        tl = c.input(lse, _lib.F32, any_order=True)
        opt = _attention_options(c, causal, window, mask, block_mask, block, scale)
        tdq, tdk, tdv = c.output(q.shape, code), c.output(k.shape, code), c.output(v.shape, code)
        _lib.check(_lib.attention_backward(c.ctx.handle, c.stream, tq.handle, tk.handle, tv.handle, to.handle,
                                           tdo.handle, tl.handle, ctypes.byref(opt), tdq.handle, tdk.handle,
                                           tdv.handle))
        return c.finish(tdq, tdk, tdv)


def _routing(c, expert_ids, gates):
    return c.input(expert_ids, _lib.I32), c.input(gates, _lib.F32)


def moe_forward(x, expert_ids, gates, w, ctx=None, out=None):
    """Mixture-of-Experts layer: y[t] = sum_j gates[t,j] x[t] . w[expert_ids[t,j]].
    x [T,H], expert_ids [T,k] (int32), gates [T,k] (float32), w [E,H,N] ->
    [T,N]; an id outside 0..E-1 contributes nothing."""
    x, w = as_array(x), as_array(w)
    code = _same_dtype("moe_forward", x, w)
    with _call(ctx, x) as c:
        tx, tw = c.input(x), c.input(w)
        ti, tg = _routing(c, expert_ids, gates)
        ty = c.output((x.shape[0], w.shape[-1]), code, out)
        _lib.check(_lib.moe_forward(c.ctx.handle, c.stream, tx.handle, ti.handle, tg.handle, tw.handle, ty.handle,
                                    None))
        return c.finish(ty)


def _moe_ffn_options(op, activation):
    if activation not in _lib.ACTIVATIONS:
        raise PitError("PIT_ERR_INVALID_ARGUMENT", f"{op}: activation {activation!r} is not one of "
                       + ", ".join(_lib.ACTIVATIONS))
    return _lib.MoeFfnOptions(_lib.ACTIVATIONS[activation], None, None)


def moe_ffn(x, expert_ids, gates, w_gate_up, w_down, activation="swiglu", ctx=None, out=None, hidden=None,
            return_hidden=False):
    """The expert FFN of a MoE layer in one call: y[t] = sum_j gates[t,j]
    act(x[t] . w_gate_up[e]) . w_down[e], e = expert_ids[t,j]. x [T,H],
    w_gate_up [E,H,2F] (gate columns, then up) for "swiglu" and "geglu",
    [E,H,F] for "gelu", "relu", "silu"; w_down [E,F,H] -> [T,H].
    return_hidden: return (y, h), h [T*k, W] the first product of every
    token-slot (row t*k + j), which moe_ffn_backward(hidden=h) reads instead
    of recomputing; hidden: the array to write h into (as out= for y)."""
    opt = _moe_ffn_options("moe_ffn", activation)
    x, w_gate_up, w_down = as_array(x), as_array(w_gate_up), as_array(w_down)
    code = _same_dtype("moe_ffn", x, w_gate_up, w_down)
    keep = return_hidden or hidden is not None
    with _call(ctx, x) as c:
        tx, tu, td = c.input(x), c.input(w_gate_up), c.input(w_down)
        ti, tg = _routing(c, expert_ids, gates)
        ty = c.output(x.shape, code, out)
        th = c.output((tg.shape[0] * tg.shape[1], w_gate_up.shape[-1]), code, hidden) if keep else None
        opt.saved_h = th.handle if keep else None
        _lib.check(_lib.moe_ffn(c.ctx.handle, c.stream, tx.handle, ti.handle, tg.handle, tu.handle, td.handle,
                                ty.handle, ctypes.byref(opt), None))
        return c.finish(ty, th) if return_hidden else c.finish(ty)


def moe_ffn_backward(x, expert_ids, gates, w_gate_up, w_down, dy, activation="swiglu", ctx=None, hidden=None):
    """(dx, dw_gate_up, dw_down, dgates) of moe_ffn given dy [T,H]; dgates is
    float32 [T,k]. A slot with an id out of range gets zero gradients.
    hidden: the h that moe_ffn(return_hidden=True) gave, read (not changed)
    instead of recomputing the first product."""
    opt = _moe_ffn_options("moe_ffn_backward", activation)
    x, w_gate_up, w_down, dy = (as_array(a) for a in (x, w_gate_up, w_down, dy))
    code = _same_dtype("moe_ffn_backward", x, w_gate_up, w_down, dy)
    with _call(ctx, x) as c:
        tx, tu, td, tdy = c.input(x), c.input(w_gate_up), c.input(w_down), c.input(dy)
        if hidden is not None:
            opt.saved_h = c.input(as_array(hidden)).handle
        ti, tg = _routing(c, expert_ids, gates)
        tdx, tdu, tdd = c.output(x.shape, code), c.output(w_gate_up.shape, code), c.output(w_down.shape, code)
        tdg = c.output(tg.shape, _lib.F32)
        _lib.check(_lib.moe_ffn_backward(c.ctx.handle, c.stream, tx.handle, ti.handle, tg.handle, tu.handle,
                                         td.handle, tdy.handle, tdx.handle, tdu.handle, tdd.handle, tdg.handle,
                                         ctypes.byref(opt)))
        return c.finish(tdx, tdu, tdd, tdg)

_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING}
_log_sink = None  # the ctypes callback libpit holds: kept alive here


def log_to_logging(logger=None):
    """Sends libpit's log lines to a logging.Logger ("pit" by default) at
    DEBUG, INFO or WARNING. Which lines libpit produces: PIT_LOG (debug,
    info, warn; unset: warnings only), read once per process."""
    global _log_sink
    target = logger or logging.getLogger("pit")

    def forward(_user, level, message):
        target.log(_LEVELS.get(level, logging.WARNING), "%s", message.decode(errors="replace"))

    sink = _lib.LOG_FN(forward)
    _lib.check(_lib.set_log_callback(sink, None))
    _log_sink = sink


def log_to_stderr():
    """Back to libpit's own sink (stderr, where PIT_LOG asks for lines)."""
    global _log_sink
    _lib.check(_lib.set_log_callback(_lib.LOG_FN(), None))  # a NULL fn: stderr again
    _log_sink = None
