"""pit: dynamically sparse deep-learning operators (PIT) from Python.

The functions take arrays (numpy arrays, or anything numpy.asarray takes)
and return numpy arrays of the same dtype. They run on the default context:
the backend PIT_BACKEND names ("cuda", "hip", "opencl", or "name:N"), else
the first backend with a device. The arrays are copied to the device and
back (docs/python.md). A failing call raises PitError, whose message is
libpit's pit_last_error() for that call.
"""
import ctypes
import logging
import threading

import numpy as np

from . import _lib
from ._lib import PitError

__all__ = ["PitError", "Context", "default_context", "info", "version", "log_to_logging", "log_to_stderr", "matmul",
           "matmul_dense", "matmul_backward", "sddmm", "sparse_softmax", "sparse_softmax_backward", "attention", "attention_backward",
           "moe_forward", "moe_ffn", "moe_ffn_backward", "relu", "prune_magnitude"]

_DTYPES = {np.dtype(np.float32): _lib.F32, np.dtype(np.float16): _lib.F16, np.dtype(np.int32): _lib.I32,
           np.dtype(np.uint8): _lib.U8, np.dtype(np.bool_): _lib.U8}


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
    PIT_BACKEND, else the first backend with a device."""

    def __init__(self, backend=None, device=-1):
        handle = ctypes.c_void_p()
        _lib.check(_lib.context_create(backend.encode() if backend else None, device, ctypes.byref(handle)))
        self._handle = handle

    @property
    def handle(self):
        if self._handle is None:
            raise PitError("PIT_ERR_INVALID_ARGUMENT", "the context was closed")
        return self._handle

    def device_info(self):
        d = _lib.DeviceInfo()
        _lib.check(_lib.context_get_info(self.handle, ctypes.byref(d)))
        return d

    def close(self):
        if self._handle is not None:
            _lib.check(_lib.context_destroy(self._handle))
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            _lib.context_destroy(self._handle)


_default = None
_default_lock = threading.Lock()


def default_context():
    """The process's context, created on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Context()
        return _default


class _Tensor:
    """A device tensor for one call: made from a host array (copied in) or
    empty, copied out with to_numpy, destroyed when the call ends."""

    def __init__(self, ctx, shape, dtype, host=None):
        self.shape, self.dtype = tuple(int(s) for s in shape), np.dtype(dtype)
        if self.dtype not in _DTYPES:
            raise PitError("PIT_ERR_UNSUPPORTED_DTYPE", f"{self.dtype} is not a pit dtype "
                           "(float32, float16, int32, uint8, bool)")
        dims = (ctypes.c_int64 * max(1, len(self.shape)))(*self.shape)
        handle = ctypes.c_void_p()
        _lib.check(_lib.tensor_create(ctx.handle, _DTYPES[self.dtype], len(self.shape), dims, ctypes.byref(handle)))
        self.handle = handle
        if host is not None:
            data = np.ascontiguousarray(host, dtype=self.dtype)
            status = _lib.tensor_upload(handle, None, data.ctypes.data, data.nbytes)
            if status != 0:
                self.close()
                _lib.check(status)

    def to_numpy(self):
        out = np.empty(self.shape, dtype=self.dtype)
        _lib.check(_lib.tensor_download(self.handle, None, out.ctypes.data, out.nbytes))
        return out

    def close(self):
        if self.handle is not None:
            _lib.tensor_destroy(self.handle)
            self.handle = None


class _Call:
    """The tensors of one call, destroyed at its end whatever happens."""

    def __init__(self, ctx):
        self.ctx, self.tensors = ctx or default_context(), []

    def input(self, x, dtype=None):
        a = np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)
        t = _Tensor(self.ctx, a.shape, a.dtype, a)
        self.tensors.append(t)
        return t

    def output(self, shape, dtype):
        t = _Tensor(self.ctx, shape, dtype)
        self.tensors.append(t)
        return t

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for t in self.tensors:
            t.close()


def _same_dtype(op, *arrays):
    dts = {np.asarray(a).dtype for a in arrays}
    if len(dts) != 1:
        raise PitError("PIT_ERR_UNSUPPORTED_DTYPE", f"{op}: dtypes differ ({', '.join(sorted(map(str, dts)))})")
    return dts.pop()


def _product(op, call, a, b, ctx):
    """c = a . b by call(ctx, a, b, c): c shaped a's rows by b's columns."""
    _same_dtype(op, a, b)
    with _Call(ctx) as c:
        ta, tb = c.input(a), c.input(b)
        tc = c.output(ta.shape[:-1] + tb.shape[-1:], ta.dtype)
        _lib.check(call(c.ctx.handle, ta.handle, tb.handle, tc.handle))
        return tc.to_numpy()


def matmul(a, b, ctx=None):
    """C = a . b with PIT: the zeros of a (its micro-tiles chosen at run time)
    are skipped. a [M,K] or [b,M,K], b [K,N] or [b,K,N]; float32 or float16."""
    return _product("matmul", lambda h, ta, tb, tc: _lib.matmul(h, None, ta, tb, tc, None, None), a, b, ctx)


def matmul_dense(a, b, ctx=None):
    """C = a . b with the backend's dense GEMM (the baseline)."""
    return _product("matmul_dense", lambda h, ta, tb, tc: _lib.matmul_dense(h, None, ta, tb, tc), a, b, ctx)


def matmul_backward(a, b, dc, ctx=None):
    """Gradients of c = a . b with a dynamically sparse: (da, db), da =
    dc . b^T on a's non-zero micro-tiles (0 elsewhere), db = a^T . dc."""
    _same_dtype("matmul_backward", a, b, dc)
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    with _Call(ctx) as c:
        ta, tb, tdc = c.input(a), c.input(b), c.input(dc)
        tda, tdb = c.output(a_arr.shape, ta.dtype), c.output(b_arr.shape, ta.dtype)
        _lib.check(_lib.matmul_backward(c.ctx.handle, None, ta.handle, tb.handle, tdc.handle, tda.handle, tdb.handle))
        return tda.to_numpy(), tdb.to_numpy()


def sddmm(a, b, mask, block=(0, 0), ctx=None):
    """C = (a . b^T) where mask is non-zero, 0 elsewhere. a [M,K] or [b,M,K],
    b [N,K] or [b,N,K], mask [M,N] or [b,M,N] (any pit dtype, non-zero = on);
    block: micro-tile rows and columns, (0, 0) chosen at run time."""
    _same_dtype("sddmm", a, b)
    a_arr, m_arr = np.asarray(a), np.asarray(mask)
    shape = (a_arr.shape[0],) + m_arr.shape[-2:] if a_arr.ndim == 3 else m_arr.shape[-2:]
    with _Call(ctx) as c:
        ta, tb, tm = c.input(a), c.input(b), c.input(mask)
        tc = c.output(shape, ta.dtype)
        _lib.check(_lib.sddmm(c.ctx.handle, None, ta.handle, tb.handle, tm.handle, tc.handle, int(block[0]),
                              int(block[1]), None))
        return tc.to_numpy()


def sparse_softmax(x, mask, scale=1.0, ctx=None):
    """Softmax of scale * x along rows over the entries where mask is
    non-zero; masked entries and fully masked rows are 0."""
    with _Call(ctx) as c:
        tx, tm = c.input(x), c.input(mask)
        ty = c.output(tx.shape, tx.dtype)
        _lib.check(_lib.sparse_softmax(c.ctx.handle, None, tx.handle, tm.handle, ty.handle, float(scale), None))
        return ty.to_numpy()


def sparse_softmax_backward(y, dy, mask, scale=1.0, ctx=None):
    """Gradient of sparse_softmax given its output y and dy: scale y (dy -
    rowsum(dy y)) on the mask, 0 elsewhere."""
    _same_dtype("sparse_softmax_backward", y, dy)
    with _Call(ctx) as c:
        ty, tdy, tm = c.input(y), c.input(dy), c.input(mask)
        tdx = c.output(ty.shape, ty.dtype)
        _lib.check(_lib.sparse_softmax_backward(c.ctx.handle, None, ty.handle, tdy.handle, tm.handle, tdx.handle,
                                                float(scale)))
        return tdx.to_numpy()


def relu(x, ctx=None):
    """max(x, 0)."""
    with _Call(ctx) as c:
        tx = c.input(x)
        ty = c.output(tx.shape, tx.dtype)
        _lib.check(_lib.relu(c.ctx.handle, None, tx.handle, ty.handle))
        return ty.to_numpy()


def prune_magnitude(w, block=(1, 1), sparsity=0.5, ctx=None):
    """A copy of w with the block micro-tiles of smallest magnitude zeroed,
    the fraction `sparsity` of them."""
    with _Call(ctx) as c:
        tw = c.input(w)
        _lib.check(_lib.prune_magnitude(c.ctx.handle, None, tw.handle, int(block[0]), int(block[1]),
                                        float(sparsity)))
        return tw.to_numpy()


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
              return_lse=False, ctx=None):
    """softmax(scale q k^T over the allowed keys) v, per batch and query head,
    the keys and values of head h // (Hq // Hkv) (grouped-query attention).
    q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv] -> [B,Hq,Lq,Dv]. Allowed:
    causal (aligned to the end of the keys), window=(left, right) (-1: no
    bound), mask (element mask: [Lq,Lk], [Hq,Lq,Lk] or [B,Hq,Lq,Lk]),
    block_mask with block=(block_q, block_k); all combine. scale None:
    1/sqrt(D). return_lse: also the log-sum-exp [B,Hq,Lq] (float32; -inf for
    a query with no allowed key, whose output is 0)."""
    _same_dtype("attention", q, k, v)
    qa, va = np.asarray(q), np.asarray(v)
    with _Call(ctx) as c:
        tq, tk, tv = c.input(q), c.input(k), c.input(v)
        opt = _attention_options(c, causal, window, mask, block_mask, block, scale)
        to = c.output(qa.shape[:-1] + va.shape[-1:], tq.dtype)
        tl = c.output(qa.shape[:-1], np.float32) if return_lse else None
        _lib.check(_lib.attention(c.ctx.handle, None, tq.handle, tk.handle, tv.handle, to.handle, ctypes.byref(opt),
                                  tl.handle if tl else None, None))
        return (to.to_numpy(), tl.to_numpy()) if return_lse else to.to_numpy()


def attention_backward(q, k, v, o, do, lse, *, causal=False, window=None, mask=None, block_mask=None, block=None,
                       scale=None, ctx=None):
    """(dq, dk, dv) of attention given its output o, log-sum-exp lse and do;
    the same keyword arguments as the forward. dk and dv sum over the query
    heads that share a kv head."""
    _same_dtype("attention_backward", q, k, v, o, do)
    with _Call(ctx) as c:
        tq, tk, tv, to, tdo = c.input(q), c.input(k), c.input(v), c.input(o), c.input(do)
        tl = c.input(lse, np.float32)
        opt = _attention_options(c, causal, window, mask, block_mask, block, scale)
        tdq, tdk, tdv = c.output(tq.shape, tq.dtype), c.output(tk.shape, tq.dtype), c.output(tv.shape, tq.dtype)
        _lib.check(_lib.attention_backward(c.ctx.handle, None, tq.handle, tk.handle, tv.handle, to.handle, tdo.handle,
                                           tl.handle, ctypes.byref(opt), tdq.handle, tdk.handle, tdv.handle))
        return tdq.to_numpy(), tdk.to_numpy(), tdv.to_numpy()


def _routing(c, expert_ids, gates):
    return c.input(expert_ids, np.int32), c.input(gates, np.float32)


def moe_forward(x, expert_ids, gates, w, ctx=None):
    """Mixture-of-Experts layer: y[t] = sum_j gates[t,j] x[t] . w[expert_ids[t,j]].
    x [T,H], expert_ids [T,k] (int32), gates [T,k] (float32), w [E,H,N] ->
    [T,N]; an id outside 0..E-1 contributes nothing."""
    _same_dtype("moe_forward", x, w)
    xa, wa = np.asarray(x), np.asarray(w)
    with _Call(ctx) as c:
        tx, tw = c.input(x), c.input(w)
        ti, tg = _routing(c, expert_ids, gates)
        ty = c.output((xa.shape[0], wa.shape[-1]), tx.dtype)
        _lib.check(_lib.moe_forward(c.ctx.handle, None, tx.handle, ti.handle, tg.handle, tw.handle, ty.handle, None))
        return ty.to_numpy()


def _moe_ffn_options(op, activation):
    if activation not in _lib.ACTIVATIONS:
        raise PitError("PIT_ERR_INVALID_ARGUMENT", f"{op}: activation {activation!r} is not one of "
                       + ", ".join(_lib.ACTIVATIONS))
    return _lib.MoeFfnOptions(_lib.ACTIVATIONS[activation], None)


def moe_ffn(x, expert_ids, gates, w_gate_up, w_down, activation="swiglu", ctx=None):
    """The expert FFN of a MoE layer in one call: y[t] = sum_j gates[t,j]
    act(x[t] . w_gate_up[e]) . w_down[e], e = expert_ids[t,j]. x [T,H],
    w_gate_up [E,H,2F] (gate columns, then up) for "swiglu" and "geglu",
    [E,H,F] for "gelu", "relu", "silu"; w_down [E,F,H] -> [T,H]."""
    opt = _moe_ffn_options("moe_ffn", activation)
    _same_dtype("moe_ffn", x, w_gate_up, w_down)
    with _Call(ctx) as c:
        tx, tu, td = c.input(x), c.input(w_gate_up), c.input(w_down)
        ti, tg = _routing(c, expert_ids, gates)
        ty = c.output(tx.shape, tx.dtype)
        _lib.check(_lib.moe_ffn(c.ctx.handle, None, tx.handle, ti.handle, tg.handle, tu.handle, td.handle, ty.handle,
                                ctypes.byref(opt), None))
        return ty.to_numpy()


def moe_ffn_backward(x, expert_ids, gates, w_gate_up, w_down, dy, activation="swiglu", ctx=None):
    """(dx, dw_gate_up, dw_down, dgates) of moe_ffn given dy [T,H]; dgates is
    float32 [T,k]. A slot with an id out of range gets zero gradients."""
    opt = _moe_ffn_options("moe_ffn_backward", activation)
    _same_dtype("moe_ffn_backward", x, w_gate_up, w_down, dy)
    with _Call(ctx) as c:
        tx, tu, td, tdy = c.input(x), c.input(w_gate_up), c.input(w_down), c.input(dy)
        ti, tg = _routing(c, expert_ids, gates)
        tdx, tdu, tdd = c.output(tx.shape, tx.dtype), c.output(tu.shape, tx.dtype), c.output(td.shape, tx.dtype)
        tdg = c.output(tg.shape, np.float32)
        _lib.check(_lib.moe_ffn_backward(c.ctx.handle, None, tx.handle, ti.handle, tg.handle, tu.handle, td.handle,
                                         tdy.handle, tdx.handle, tdu.handle, tdd.handle, tdg.handle,
                                         ctypes.byref(opt)))
        return tdx.to_numpy(), tdu.to_numpy(), tdd.to_numpy(), tdg.to_numpy()

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
