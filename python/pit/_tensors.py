"""The tensors of one call: the caller's arrays seen by libpit through DLPack
without a copy where the context's device can address them, copied in and
out where it cannot (docs/python.md, "How data moves").

Which library the results come back in is the call's first array's: torch
for a torch.Tensor (on its device, from torch's allocator), CuPy for a
cupy.ndarray (cupy.empty on its device), JAX for a jax.Array (written where
pit can, then handed to JAX through DLPack), numpy for everything else."""
import ctypes
import sys
import threading

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


# The array type of each library pit returns in, looked up only where the
# caller has imported the library (pit imports none of them itself).
_ARRAY_TYPES = (("torch", "Tensor"), ("cupy", "ndarray"), ("jax", "Array"))


def library_of(x):
    """"torch", "cupy", "jax" or "numpy": the library a call whose first
    array is x returns its results in."""
    for name, attr in _ARRAY_TYPES:
        kind = getattr(sys.modules.get(name), attr, None)
        if kind is not None and isinstance(x, kind):
            return name
    return "numpy"


def numpy_dtype(code):
    """numpy's dtype for code; bfloat16 from ml_dtypes where it is loaded
    (JAX loads it), else PIT_ERR_UNSUPPORTED_DTYPE."""
    if code in _NUMPY:
        return np.dtype(_NUMPY[code])
    bf16 = getattr(sys.modules.get("ml_dtypes"), "bfloat16", None)
    if code == _lib.BF16 and bf16 is not None:
        return np.dtype(bf16)
    raise PitError("PIT_ERR_UNSUPPORTED_DTYPE", "numpy has no bfloat16: pass torch tensors or JAX arrays")


def as_array(x):
    """x itself when it is an array of a library (numpy, or anything with
    __dlpack__), else numpy's reading of it (lists, scalars)."""
    if isinstance(x, np.ndarray) or hasattr(x, "__dlpack__"):
        return x
    return np.asarray(x)


# dtype object -> pit code, for the dtypes code_of has named once: a dict
# lookup per call instead of the dtype's name (only pit dtypes are kept).
_codes_seen = {}


def code_of(x, op=""):
    """x's pit dtype, or PIT_ERR_UNSUPPORTED_DTYPE naming it."""
    dtype = x.dtype
    try:
        return _codes_seen[dtype]
    except (KeyError, TypeError):  # not seen yet, or a dtype that cannot be a key
        pass
    name = str(dtype).replace("torch.", "")
    if name not in _CODES:
        raise PitError("PIT_ERR_UNSUPPORTED_DTYPE", f"{op + ': ' if op else ''}{name} is not a pit dtype "
                       "(float32, float16, bfloat16, int32, uint8, bool)")
    try:
        _codes_seen[dtype] = _CODES[name]
    except TypeError:
        pass
    return _CODES[name]


class _TorchFacts:
    """What the calls look up in torch, read once per torch module: its
    dtypes of each pit code and back, the DLPack device type of its GPU
    tensors (kDLROCM under a ROCm build, as Tensor.__dlpack_device__
    says), and the tensor classes whose DLPack device torch works out
    itself (no __torch_function__ of a subclass in between)."""

    def __init__(self, torch):
        self.module = torch
        self.dtypes = {_lib.F32: torch.float32, _lib.F16: torch.float16, _lib.BF16: torch.bfloat16,
                       _lib.I32: torch.int32, _lib.U8: torch.uint8}
        self.codes = {dtype: code for code, dtype in self.dtypes.items()}
        self.codes[torch.bool] = _lib.U8
        self.gpu_kind = DL_ROCM if getattr(torch.version, "hip", None) is not None else DL_CUDA
        self.plain = (torch.Tensor, torch.nn.Parameter)


_facts = None


def _torch_facts(torch):
    global _facts
    facts = _facts
    if facts is None or facts.module is not torch:
        facts = _facts = _TorchFacts(torch)
    return facts


def _torch_dtype(code):
    return _torch_facts(_torch()).dtypes[code]


def convert(x, code):
    """x in pit dtype code, in x's own library (a copy only when it differs)."""
    if code_of(x) == code:
        return x
    if is_torch(x):
        return x.to(_torch_dtype(code))
    if library_of(x) in ("cupy", "jax"):  # converted on the array's own device
        return x.astype(numpy_dtype(code))
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
    """x's strides in elements (numpy and CuPy count bytes), None where
    they are not whole elements."""
    if is_torch(x):
        return tuple(x.stride())
    size = x.dtype.itemsize
    if any(s % size for s in x.strides):
        return None
    return tuple(s // size for s in x.strides)


def laid_out(x, any_order=False):
    """x, or a contiguous copy of it in its own library where pit would
    refuse its strides (operators other than attention need row-major).
    JAX arrays export row-major and have no strides to look at; another
    library's arrays pass as they are."""
    lib = library_of(x)
    if lib == "jax" or (lib == "numpy" and not isinstance(x, np.ndarray)):
        return x
    strides = _element_strides(x)
    if strides is not None and _layout_ok(tuple(x.shape), strides, any_order):
        return x
    if lib == "torch":
        return x.contiguous()
    return (sys.modules["cupy"] if lib == "cupy" else np).ascontiguousarray(x)


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


def _torch_span(x):
    """The device addresses a torch tensor's elements span (lo, hi)."""
    shape = x.shape
    if 0 in shape:
        return (0, 0)
    last = 0
    for n, st in zip(shape, x.stride()):
        last += (n - 1) * st
    lo = x.data_ptr()
    return (lo, lo + (last + 1) * x.element_size())


# The ctypes array type of each rank's shape and strides, made once.
_INT64S = tuple(ctypes.c_int64 * max(1, n) for n in range(_lib.PIT_MAX_RANK + 1))


def _int64s(rank):
    """The ctypes type of rank int64s (at least one), past pit's ranks too
    (libpit then refuses the rank)."""
    return _INT64S[rank] if rank < len(_INT64S) else ctypes.c_int64 * rank


class Tensor:
    """A pit tensor of the call: `source` the array it reads or writes
    without a copy (None on the copy path), `span` the addresses it covers
    (None on the copy path, `copied`); a torch tensor borrowed by pointer
    works its span out when first asked, which only out= aliasing does."""

    def __init__(self, handle, shape, code, source=None, span=None, host=False, borrowed=False):
        self.handle, self.shape, self.code = handle, tuple(map(int, shape)), code
        self.source, self._span, self.host = source, span, host
        self.copied = span is None and not borrowed  # the copy path: values go in and come back by copies
        self.result = None  # what the caller gets back (an output's)
        self.export = False  # a result pit allocated, handed over through DLPack

    @property
    def span(self):
        if self._span is None and not self.copied:
            self._span = _torch_span(self.source)
        return self._span

    def close(self):
        handle = self.handle
        if handle is not None:
            self.handle = None
            status = _lib.tensor_destroy(handle)
            if status:
                _lib.check(status)


class Call:
    """The tensors of one call, destroyed at its end whatever happens; the
    results of host memory are synchronised first (numpy has no stream).
    While it runs, the context's allocator is not changed (Context.gate)."""

    def __init__(self, ctx, like):
        self.ctx, self.tensors, self.like = ctx, [], like
        torch = sys.modules.get("torch")
        self.lib = "torch" if torch is not None and isinstance(like, torch.Tensor) else library_of(like)
        self.torch_like = like if self.lib == "torch" else None
        if self.lib == "torch":
            ctx.adopt_torch_allocator(like)  # before the call holds the gate: setting it waits for calls
        self.stream = ctx.stream_of(like, self.lib)
        # torch's facts where this call may borrow torch tensors by pointer
        # (a CUDA or HIP context whose device kind is torch's GPU tensors'),
        # else None: then every array takes the general path.
        self.facts, info = None, ctx.info
        if torch is not None and info.backend in (b"cuda", b"hip"):
            facts = _torch_facts(torch)
            if facts.gpu_kind == info.dlpack_device_type:
                self.facts, self.device_index = facts, info.device_index

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

    def _borrows(self, x):
        """Whether pit borrows x by its data pointer (pit_tensor_wrap)
        instead of through a DLPack capsule: a plain torch tensor or
        Parameter of rank 1 to 4 on a CUDA or HIP context's device, told
        from torch's own attributes (no DLPack protocol). The capsules were
        most of the Python layer's own host time: about 170 us a
        pit.attention call of four tensors on a 2-core host, libpit's work
        left out."""
        return (self.facts is not None and type(x) in self.facts.plain and x.is_cuda and
                x.get_device() == self.device_index and 1 <= x.dim() <= 4)

    def _wrap_torch(self, x, code):
        """x borrowed by pointer: the call holds x (Tensor.source) until its
        end, and runs on torch's current stream, so torch's allocator reuses
        x's memory only after the call's work."""
        have = self.facts.codes.get(x.dtype)
        if have != code:  # an out= of another dtype: its bits would be read as code's
            raise PitError("PIT_ERR_UNSUPPORTED_DTYPE", f"{str(x.dtype).replace('torch.', '')} where the result is "
                           f"{_lib.DTYPE_NAMES[code]}")
        shape = x.shape
        rank = len(shape)
        int64s = _INT64S[rank]  # rank 1 to 4 (_borrows)
        handle = ctypes.c_void_p()
        status = _lib.tensor_wrap(self.ctx.handle, code, rank, int64s(*shape), int64s(*x.stride()), x.data_ptr(), 0,
                                  ctypes.byref(handle))
        if status:
            _lib.check(status)
        t = Tensor(handle, shape, code, x, borrowed=True)
        self.tensors.append(t)
        return t

    def _import(self, x, code):
        if self._borrows(x):
            return self._wrap_torch(x, code)
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
        dims = _int64s(len(shape))(*shape)
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
        if self._borrows(x):
            # a torch tensor on the device: borrowed as it is where convert
            # and laid_out would keep it (its dtype is code's, and pit takes
            # its strides), else it takes the general path below
            have = self.facts.codes.get(x.dtype)
            if have is not None and (code is None or code == have) and (
                    x.is_contiguous() or _layout_ok(tuple(x.shape), tuple(x.stride()), any_order)):
                return self._wrap_torch(x, have)
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
        shape = tuple(map(int, shape))
        if out is not None and self._borrows(out):
            t = self._wrap_torch(out, code)
            self._check_disjoint(t)
        elif out is not None:
            if library_of(out) == "jax":
                raise PitError("PIT_ERR_INVALID_ARGUMENT", "out= cannot be a JAX array: JAX arrays are immutable")
            if not self._direct(out):
                where = out.__dlpack_device__() if hasattr(out, "__dlpack_device__") else "no DLPack device"
                raise PitError("PIT_ERR_INVALID_ARGUMENT", "out= must be memory the context's device addresses "
                               f"({self.ctx.describe()}); {type(out).__name__} on {where} is not")
            t = self._import(out, code)
            self._check_disjoint(t)
        else:
            array = self._new(shape, code, init)
            if self._borrows(array):
                t = self._wrap_torch(array, code)
            elif array is not None and self._direct(array):
                t = self._import(array, code)
            else:
                t = self._created(shape, code, host=init)
                t.source, t.export = array, array is None
        t.result = out if out is not None else t.source
        return t

    def _new(self, shape, code, init):
        """An array of the caller's library: on its device, from its
        allocator (torch, CuPy) or numpy's; for JAX, whose arrays are
        immutable, a host array JAX takes over without a copy, or None on a
        device where pit allocates the result and exports it."""
        if self.lib == "torch":
            torch = _torch()
            if init is not None:
                return torch.as_tensor(init).detach().to(self.torch_like.device, _torch_dtype(code)).clone(
                    memory_format=torch.contiguous_format)
            return torch.empty(shape, dtype=_torch_dtype(code), device=self.torch_like.device)
        if self.lib == "cupy":
            return _cupy_new(self.like, shape, code, init)
        if self.lib == "jax" and self._direct(self.like) and self.like.__dlpack_device__()[0] != DL_CPU:
            return None
        return _host_new(shape, code, init, aligned=self.lib == "jax")

    def _check_disjoint(self, out):
        """Two imports of overlapping memory are two buffers to libpit, which
        then cannot see them alias: refused here."""
        lo, hi = out.span
        for t in self.tensors:
            if t is not out and t.span and hi > lo and t.span[1] > t.span[0] and lo < t.span[1] and t.span[0] < hi:
                raise PitError("PIT_ERR_ALIASING", "out= overlaps an input")

    def finish(self, *outputs):
        """The results: arrays written in place (after the stream is
        synchronised where host memory is involved: numpy has no stream;
        and before a result goes to JAX, which gives pit no stream to queue
        on), or copied back."""
        for t in self.tensors:
            if t.host or t.export:
                _lib.check(_lib.synchronize(self.ctx.handle, self.stream))
                break
        for t in outputs:
            if t.copied and not t.export:
                _download(t, self.stream)
        if self.lib == "jax":
            for t in outputs:
                t.result = self._to_jax(t)
        if len(outputs) == 1:
            return outputs[0].result
        return tuple(t.result for t in outputs)

    def _to_jax(self, t):
        """A result as a jax.Array on the first array's device: pit's tensor
        exported (it then belongs to JAX), or the host array taken without a
        copy (64-byte aligned, as XLA's CPU client needs) or copied to the
        device."""
        jax = sys.modules["jax"]
        if t.result is not t.source:  # out= is refused for JAX; kept for safety
            return t.result
        if t.export:
            exported, t.handle = Exported(t.handle, self.ctx), None  # the exporter owns the tensor now
            return jax.dlpack.from_dlpack(exported)
        device = next(iter(self.like.devices()))
        if device.platform == "cpu" and t.code != _lib.BF16:  # numpy exports no bfloat16 through DLPack
            return jax.dlpack.from_dlpack(t.source)
        return jax.device_put(t.source, device)

    def __enter__(self):
        self.ctx.gate.enter()
        return self

    def __exit__(self, *exc):
        try:
            self._close_tensors(exc[0] is None)
        finally:
            self.ctx.gate.leave()

    def _close_tensors(self, raise_first):
        first = None
        for t in self.tensors:
            try:
                t.close()
            except PitError as e:
                first = first or e
        if first is not None and raise_first:
            raise first


def _host_values(x):
    """x's values row-major in host memory, as a numpy array (bfloat16 as
    its 16-bit words)."""
    if is_torch(x):
        h = x.detach().cpu().contiguous()
        if h.dtype == _torch().bfloat16:
            h = h.view(_torch().int16)
        return h.numpy()
    if library_of(x) == "cupy":
        return x.get(order="C")
    if hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray):
        on_host = getattr(x, "__dlpack_device__", lambda: (DL_CPU, 0))()[0] == DL_CPU
        x = np.from_dlpack(x) if on_host else np.asarray(x)  # JAX on a GPU: its own device-to-host copy
    return np.ascontiguousarray(x)


def _download(t, stream):
    """A copy-path output's values into its array (torch's and CuPy's
    through a host copy)."""
    direct = isinstance(t.source, np.ndarray)
    host = t.source if direct else np.empty(t.shape, dtype=_NUMPY.get(t.code, np.int16))
    _lib.check(_lib.tensor_download(t.handle, stream, host.ctypes.data, host.nbytes))
    if direct:
        return
    if is_torch(t.source):
        t.source.copy_(_torch().from_numpy(host).view(t.source.dtype))
    else:
        t.source.set(host)  # cupy.ndarray.set: host to device


def _host_new(shape, code, init, aligned=False):
    """A new row-major numpy array (init's values, or uninitialised);
    aligned: its data on a 64-byte boundary, which XLA's CPU client needs
    to take it without a copy."""
    dtype = numpy_dtype(code)
    count = int(np.prod(shape, dtype=np.int64))
    if not aligned:
        array = np.empty(shape, dtype=dtype)
    else:
        raw = np.empty(count * dtype.itemsize + 64, dtype=np.uint8)
        skip = -raw.ctypes.data % 64
        array = raw[skip:skip + count * dtype.itemsize].view(dtype).reshape(shape)
    if init is not None:
        array[...] = _host_values(init).view(dtype)  # init has code's dtype (bfloat16 as 16-bit words)
    return array


def _cupy_new(like, shape, code, init):
    """cupy.empty on like's device (init: a copy of it there)."""
    cp = sys.modules["cupy"]
    with cp.cuda.Device(like.device.id):
        if init is not None:
            return cp.array(init, dtype=numpy_dtype(code), order="C", copy=True)
        return cp.empty(shape, dtype=numpy_dtype(code))


# ---- results pit allocates, handed over through DLPack -----------------------
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# managed tensor address -> (pit's own deleter, the pit tensor, its Context):
# the first deleter call pops its entry, so a tensor is destroyed once.
_exports = {}
_exports_lock = threading.Lock()


def _delete_export(managed):
    """What a consumer calls when it is done with an export: pit's deleter
    (which frees the managed struct), then the pit tensor. A second call
    finds no entry and does nothing; nothing raises into C."""
    with _exports_lock:
        entry = _exports.pop(managed, None)
    if entry is None:
        return
    own, handle, _ctx = entry
    try:
        _DELETER(own)(managed)
        _lib.tensor_destroy(handle)
    except Exception:  # noqa: BLE001 - a deleter has no way to report; the tensor is as good as gone
        pass


_DELETE_EXPORT = _DELETER(_delete_export)  # one C function pointer for every export, alive with the module


class Exported:
    """A pit tensor offered to another library through DLPack (__dlpack__,
    __dlpack_device__), without a copy: pit_tensor_to_dlpack_versioned for a
    consumer that asks for DLPack 1.x (capsule "dltensor_versioned"), else
    pit_tensor_to_dlpack ("dltensor"). The exporter owns the tensor until a
    capsule is made, the capsule's managed tensor after: its deleter
    destroys the tensor. A capsule no consumer took (still "dltensor*" when
    the exporter goes) is deleted by the exporter, so take it while the
    exporter lives, as from_dlpack does."""

    def __init__(self, handle, ctx):
        self._handle, self._ctx, self._capsule = handle, ctx, None

    def __dlpack_device__(self):
        return (int(self._ctx.info.dlpack_device_type), int(self._ctx.info.device_index))

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """One capsule per exporter. stream is not waited on: the call that
        wrote the tensor has finished (Call.finish synchronises)."""
        if self._handle is None:
            raise BufferError("pit: this tensor was exported already (one capsule per exporter)")
        if copy or (dl_device is not None and tuple(dl_device) != self.__dlpack_device__()):
            raise BufferError("pit: an export is the tensor itself, on its own device (no copy)")
        versioned = max_version is not None and max_version[0] >= 1
        managed = ctypes.c_void_p()
        entry = _lib.tensor_to_dlpack_versioned if versioned else _lib.tensor_to_dlpack
        _lib.check(entry(self._handle, ctypes.byref(managed)))
        self._capsule = _capsule_of(managed.value, versioned, self._handle, self._ctx)
        self._handle = None
        return self._capsule

    def __del__(self):
        try:
            if self._handle is not None:
                _lib.tensor_destroy(self._handle)
            elif self._capsule is not None:
                _delete_untaken(self._capsule)
        except Exception:  # noqa: BLE001 - at interpreter exit the modules may be gone
            pass


def _capsule_of(managed, versioned, handle, ctx):
    """A capsule over pit's managed tensor whose deleter is _delete_export,
    pit's own kept to be called from there."""
    struct = _lib.managed_tensor(managed, versioned)
    with _exports_lock:
        _exports[managed] = (struct.deleter, handle, ctx)
    struct.deleter = ctypes.cast(_DELETE_EXPORT, ctypes.c_void_p).value
    return _lib.capsule_new(managed, _lib.CAPSULE_NAMES[versioned][0], None)


def _delete_untaken(capsule):
    """The managed tensor of a capsule no consumer renamed."""
    for versioned in (True, False):
        name = _lib.CAPSULE_NAMES[versioned][0]
        if _lib.capsule_is_valid(capsule, name):
            _delete_export(_lib.capsule_pointer(capsule, name))
