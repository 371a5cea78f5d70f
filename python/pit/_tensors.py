"""The tensors of one call: the caller's arrays seen by libpit through DLPack
without a copy where the context's device can address them, copied in and
out where it cannot (docs/python.md, "How data moves").

Which library the results come back in is the call's first array's: torch
for a torch.Tensor (on its device, from torch's allocator), numpy for
everything else."""
import ctypes
import sys

import numpy as np

from . import _lib
from ._lib import PitError

DL_CPU, DL_CUDA, DL_ROCM = 1, 2, 10
_CODES = {"float32": _lib.F32, "float16": _lib.F16, "bfloat16": _lib.BF16, "int32": _lib.I32, "uint8": _lib.U8,
          "bool": _lib.U8}
_NUMPY = {_lib.F32: np.float32, _lib.F16: np.float16, _lib.I32: np.int32, _lib.U8: np.uint8}
_BITS = {_lib.F32: 32, _lib.F16: 16, _lib.BF16: 16, _lib.I32: 32, _lib.U8: 8}


def _torch():
    """torch when the caller has imported it (pit never imports it itself)."""
    return sys.modules.get("torch")


def is_torch(x):
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def as_array(x):
    """x itself when it is an array of a library (numpy, or anything with
    __dlpack__), else numpy's reading of it (lists, scalars)."""
    if isinstance(x, np.ndarray) or hasattr(x, "__dlpack__"):
        return x
    return np.asarray(x)


def code_of(x, op=""):
    """x's pit dtype, or PIT_ERR_UNSUPPORTED_DTYPE naming it."""
    name = str(x.dtype).replace("torch.", "")
    if name not in _CODES:
        raise PitError("PIT_ERR_UNSUPPORTED_DTYPE", f"{op + ': ' if op else ''}{name} is not a pit dtype "
                       "(float32, float16, bfloat16, int32, uint8, bool)")
    return _CODES[name]


def _torch_dtype(code):
    t = _torch()
    return {_lib.F32: t.float32, _lib.F16: t.float16, _lib.BF16: t.bfloat16, _lib.I32: t.int32,
            _lib.U8: t.uint8}[code]


def convert(x, code):
    """x in pit dtype code, in x's own library (a copy only when it differs)."""
    if code_of(x) == code:
        return x
    if is_torch(x):
        return x.to(_torch_dtype(code))
    return np.asarray(x).astype(_NUMPY[code])


def _layout_ok(shape, strides, any_order):
    """Whether pit takes these element strides as they are (tensor.c's
    check_strides, and unless any_order, pit_attention's operands, the
    row-major order every other operator asks for): the innermost stride 1,
    each stride at least the span of the dimensions inside it."""
    if not shape:
        return True
    if shape[-1] > 1 and strides[-1] != 1:
        return False
    dims = [(st, n) for st, n in zip(strides, shape) if n > 1]
    expect = 1
    for st, n in (sorted(dims) if any_order else dims[::-1]):
        if st < expect:
            return False
        expect = st * n
    return True


def _element_strides(x):
    if is_torch(x):
        return tuple(x.stride())
    a = np.asarray(x)
    if any(s % a.itemsize for s in a.strides):
        return None
    return tuple(s // a.itemsize for s in a.strides)


def laid_out(x, any_order=False):
    """x, or a contiguous copy of it in its own library where pit would
    refuse its strides (operators other than attention need row-major)."""
    if not (isinstance(x, np.ndarray) or is_torch(x)):
        return x
    strides = _element_strides(x)
    if strides is not None and _layout_ok(tuple(x.shape), strides, any_order):
        return x
    return x.contiguous() if is_torch(x) else np.ascontiguousarray(x)


def _capsule(x):
    """x's DLPack capsule, versioned where the producer offers it, and
    whether it is."""
    try:
        cap = x.__dlpack__(max_version=(1, 0))
    except TypeError:  # a producer from before DLPack 1.0 takes no max_version
        cap = x.__dlpack__()
    for versioned in (True, False):
        if _lib.capsule_is_valid(cap, _lib.CAPSULE_NAMES[versioned][0]):
            return cap, versioned
    raise PitError("PIT_ERR_INVALID_ARGUMENT", f"{type(x).__name__}.__dlpack__ gave no unused DLPack capsule")


def _span(dl):
    """The host or device addresses a DLTensor's elements span (lo, hi)."""
    shape = [dl.shape[i] for i in range(dl.ndim)]
    if 0 in shape:
        return (0, 0)
    strides = [dl.strides[i] for i in range(dl.ndim)] if dl.strides else None
    if strides is None:
        last = int(np.prod(shape)) - 1
    else:
        last = sum((n - 1) * s for n, s in zip(shape, strides))
    lo = (dl.data or 0) + dl.byte_offset
    return (lo, lo + (last + 1) * dl.bits // 8)


class Tensor:
    """A pit tensor of the call: `source` the array it reads or writes
    without a copy (None on the copy path), `span` the addresses it covers."""

    def __init__(self, handle, shape, code, source=None, span=None, host=False):
        self.handle, self.shape, self.code = handle, tuple(int(s) for s in shape), code
        self.source, self.span, self.host = source, span, host
        self.result = None  # what the caller gets back (an output's)

    def close(self):
        if self.handle is not None:
            status = _lib.tensor_destroy(self.handle)
            self.handle = None
            _lib.check(status)


class Call:
    """The tensors of one call, destroyed at its end whatever happens; the
    results of host memory are synchronised first (numpy has no stream)."""

    def __init__(self, ctx, like):
        self.ctx, self.tensors = ctx, []
        self.torch_like = like if is_torch(like) else None
        self.stream = ctx.torch_stream(like) if self.torch_like is not None else None

    # ---- where an array can go without a copy -----------------------------
    def _direct(self, x):
        """Whether the context's device addresses x's memory."""
        dev = getattr(x, "__dlpack_device__", None)
        if dev is None:
            return False
        kind, index = (int(v) for v in dev())
        info = self.ctx.info
        if kind == DL_CPU:
            return bool(info.takes_host_memory)
        return kind == info.dlpack_device_type and index == info.device_index

    def _import(self, x, code):
        if getattr(x, "requires_grad", False):
            x = x.detach()  # torch exports no tensor that requires grad
        cap, versioned = _capsule(x)
        name, used = _lib.CAPSULE_NAMES[versioned]
        pointer = _lib.capsule_pointer(cap, name)
        dl = _lib.dl_tensor(pointer, versioned)
        span, host = _span(dl), dl.device_type == DL_CPU
        handle = ctypes.c_void_p()
        entry = _lib.tensor_from_dlpack_versioned if versioned else _lib.tensor_from_dlpack
        _lib.check(entry(self.ctx.handle, pointer, ctypes.byref(handle)))
        _lib.capsule_rename(cap, used)  # pit owns it now and calls its deleter at destroy
        t = Tensor(handle, x.shape, code, x, span, host)
        self.tensors.append(t)
        return t

    # ---- the copy path -------------------------------------------------------
    def _created(self, shape, code, host=None):
        dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        handle = ctypes.c_void_p()
        _lib.check(_lib.tensor_create(self.ctx.handle, code, len(shape), dims, ctypes.byref(handle)))
        t = Tensor(handle, shape, code)
        self.tensors.append(t)
        if host is not None:
            values = _host_values(host)
            _lib.check(_lib.tensor_upload(handle, self.stream, values.ctypes.data, values.nbytes))
        return t

    # ---- what the operator functions call ------------------------------------
    def input(self, x, code=None, any_order=False):
        """x (any array) as a pit tensor; code: the dtype pit must see (ids
        int32, gates float32), converted in x's library."""
        x = as_array(x)
        code = code_of(x) if code is None else code
        x = laid_out(convert(x, code), any_order)
        if self._direct(x):
            try:
                return self._import(x, code)
            except BufferError:  # numpy before 2.1 exports no read-only array (no 1.0 capsule to flag it)
                pass
        return self._created(tuple(x.shape), code, host=x)

    def output(self, shape, code, out=None, init=None):
        """A result of shape and code in the caller's library: out (written in
        place, on the context's device), or a new array; init: its first
        values (an operator that works in place)."""
        shape = tuple(int(s) for s in shape)
        if out is not None:
            if not self._direct(out):
                where = out.__dlpack_device__() if hasattr(out, "__dlpack_device__") else "no DLPack device"
                raise PitError("PIT_ERR_INVALID_ARGUMENT", "out= must be memory the context's device addresses "
                               f"({self.ctx.describe()}); {type(out).__name__} on {where} is not")
            t = self._import(out, code)
            self._check_disjoint(t)
        else:
            array = self._new(shape, code, init)
            if self._direct(array):
                t = self._import(array, code)
            else:
                t = self._created(shape, code, host=init)
                t.source = array
        t.result = out if out is not None else t.source
        return t

    def _new(self, shape, code, init):
        """An array of the caller's library: on its device, from its
        allocator (torch) or numpy's."""
        if self.torch_like is not None:
            torch = _torch()
            if init is not None:
                return torch.as_tensor(init).detach().to(self.torch_like.device, _torch_dtype(code)).clone(
                    memory_format=torch.contiguous_format)
            return torch.empty(shape, dtype=_torch_dtype(code), device=self.torch_like.device)
        if code not in _NUMPY:
            raise PitError("PIT_ERR_UNSUPPORTED_DTYPE", "numpy has no bfloat16: pass torch tensors")
        if init is not None:
            return np.array(init, dtype=_NUMPY[code], order="C", copy=True)
        return np.empty(shape, dtype=_NUMPY[code])

    def _check_disjoint(self, out):
        """Two imports of overlapping memory are two buffers to libpit, which
        then cannot see them alias: refused here."""
        lo, hi = out.span
        for t in self.tensors:
            if t is not out and t.span and hi > lo and t.span[1] > t.span[0] and lo < t.span[1] and t.span[0] < hi:
                raise PitError("PIT_ERR_ALIASING", "out= overlaps an input")

    def finish(self, *outputs):
        """The results: arrays written in place (after the stream is
        synchronised where host memory is involved: numpy has no stream),
        or copied back."""
        if any(t.host for t in self.tensors):
            _lib.check(_lib.synchronize(self.ctx.handle, self.stream))
        for t in outputs:
            if t.span is None:  # the copy path
                _download(t, self.stream)
        results = tuple(t.result for t in outputs)
        return results[0] if len(results) == 1 else results

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        first = None
        for t in self.tensors:
            try:
                t.close()
            except PitError as e:
                first = first or e
        if first is not None and exc[0] is None:
            raise first


def _host_values(x):
    """x's values row-major in host memory, as a numpy array (bfloat16 as
    its 16-bit words)."""
    if is_torch(x):
        h = x.detach().cpu().contiguous()
        if h.dtype == _torch().bfloat16:
            h = h.view(_torch().int16)
        return h.numpy()
    if hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray):
        x = np.from_dlpack(x)
    return np.ascontiguousarray(x)


def _download(t, stream):
    """A copy-path output's values into its array (torch's through a host
    copy)."""
    direct = isinstance(t.source, np.ndarray)
    host = t.source if direct else np.empty(t.shape, dtype=_NUMPY.get(t.code, np.int16))
    _lib.check(_lib.tensor_download(t.handle, stream, host.ctypes.data, host.nbytes))
    if not direct:
        t.source.copy_(_torch().from_numpy(host).view(t.source.dtype))
