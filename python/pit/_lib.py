"""libpit through ctypes: finding the library, its prototypes, and turning a
pit_status into a Python exception that carries pit_last_error()."""
import ctypes
import glob
import os

PIT_MAX_RANK = 4

# pit_dtype
F32, F16, BF16, I32, U8 = 0, 1, 2, 3, 4
DTYPE_NAMES = {F32: "float32", F16: "float16", BF16: "bfloat16", I32: "int32", U8: "uint8"}


class DeviceInfo(ctypes.Structure):
    """pit_device_info (include/pit.h)."""

    _fields_ = [
        ("backend", ctypes.c_char * 16),
        ("vendor", ctypes.c_char * 64),
        ("name", ctypes.c_char * 128),
        ("arch", ctypes.c_char * 32),
        ("driver_version", ctypes.c_char * 64),
        ("global_mem_bytes", ctypes.c_uint64),
        ("compute_units", ctypes.c_int),
        ("device_index", ctypes.c_int),
        ("has_f16", ctypes.c_int),
        ("has_bf16", ctypes.c_int),
        ("tiledb_source", ctypes.c_char * 256),
        ("tiledb_family", ctypes.c_char * 32),
        ("dlpack_device_type", ctypes.c_int),
        ("has_f16_storage", ctypes.c_int),
        ("takes_host_memory", ctypes.c_int),
    ]


class Microtile(ctypes.Structure):
    """pit_microtile."""

    _fields_ = [("rows", ctypes.c_int32), ("cols", ctypes.c_int32), ("axis", ctypes.c_int)]


class AttentionOptions(ctypes.Structure):
    """pit_attention_options (start from attention_options_default())."""

    _fields_ = [
        ("scale", ctypes.c_float),
        ("causal", ctypes.c_int),
        ("window_left", ctypes.c_int32),
        ("window_right", ctypes.c_int32),
        ("mask", ctypes.c_void_p),
        ("block_mask", ctypes.c_void_p),
        ("block_q", ctypes.c_int32),
        ("block_k", ctypes.c_int32),
        ("microtile", Microtile),
    ]


class MoeFfnOptions(ctypes.Structure):
    """pit_moe_ffn_options."""

    _fields_ = [("activation", ctypes.c_int), ("scratch", ctypes.c_void_p), ("saved_h", ctypes.c_void_p)]


class PitError(RuntimeError):
    """A pit call failed: .status is the pit_status name, the message is
    pit_last_error() of the failing call."""

    def __init__(self, status, message):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def _candidates():
    """PIT_LIBRARY, then libpit inside the package (a wheel), then the
    repository's build folder (an uninstalled checkout)."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = os.environ.get("PIT_LIBRARY")
    if env:
        yield env
    for folder in (os.path.join(here, "lib"), os.path.join(here, "..", "..", "build", "lib")):
        for name in ("libpit.so", "libpit.so.0"):
            yield os.path.join(folder, name)
        yield from sorted(glob.glob(os.path.join(folder, "libpit.so.*")))


def _load():
    tried = []
    for path in _candidates():
        if not os.path.exists(path):
            tried.append(path)
            continue
        return ctypes.CDLL(os.path.abspath(path))
    raise ImportError("pit: libpit not found; looked for " + ", ".join(tried) +
                      " (pip install ./python builds it; PIT_LIBRARY names another)")


lib = _load()
_vp, _i64p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)


def _proto(name, *args):
    fn = getattr(lib, name)
    fn.argtypes = list(args)
    fn.restype = ctypes.c_int
    return fn


lib.pit_status_string.argtypes = [ctypes.c_int]
lib.pit_status_string.restype = ctypes.c_char_p
lib.pit_last_error.argtypes = []
lib.pit_last_error.restype = ctypes.c_char_p
lib.pit_version.argtypes = []
lib.pit_version.restype = ctypes.c_int

device_count = _proto("pit_device_count", ctypes.c_char_p, ctypes.POINTER(ctypes.c_int))
device_get_info = _proto("pit_device_get_info", ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(DeviceInfo))
context_create = _proto("pit_context_create", ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_vp))
context_destroy = _proto("pit_context_destroy", _vp)
context_get_info = _proto("pit_context_get_info", _vp, ctypes.POINTER(DeviceInfo))
tensor_create = _proto("pit_tensor_create", _vp, ctypes.c_int, ctypes.c_int, _i64p, ctypes.POINTER(_vp))
tensor_destroy = _proto("pit_tensor_destroy", _vp)
tensor_from_dlpack = _proto("pit_tensor_from_dlpack", _vp, _vp, ctypes.POINTER(_vp))
tensor_wrap = _proto("pit_tensor_wrap", _vp, ctypes.c_int, ctypes.c_int, _i64p, _i64p, _vp, ctypes.c_size_t,
                     ctypes.POINTER(_vp))
tensor_from_dlpack_versioned = _proto("pit_tensor_from_dlpack_versioned", _vp, _vp, ctypes.POINTER(_vp))
stream_wrap = _proto("pit_stream_wrap", _vp, _vp, ctypes.POINTER(_vp))
stream_destroy = _proto("pit_stream_destroy", _vp)
tensor_upload = _proto("pit_tensor_upload", _vp, _vp, _vp, ctypes.c_size_t)
tensor_download = _proto("pit_tensor_download", _vp, _vp, _vp, ctypes.c_size_t)
synchronize = _proto("pit_synchronize", _vp, _vp)
matmul = _proto("pit_matmul", _vp, _vp, _vp, _vp, _vp, _vp, _vp)
matmul_dense = _proto("pit_matmul_dense", _vp, _vp, _vp, _vp, _vp)
matmul_rows = _proto("pit_matmul_rows", _vp, _vp, _vp, _vp, _vp, ctypes.c_int, _vp)
relu_ffn = _proto("pit_relu_ffn", _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp)
sddmm = _proto("pit_sddmm", _vp, _vp, _vp, _vp, _vp, _vp, ctypes.c_int32, ctypes.c_int32, _vp)
sparse_softmax = _proto("pit_sparse_softmax", _vp, _vp, _vp, _vp, _vp, ctypes.c_float, _vp)
relu = _proto("pit_relu", _vp, _vp, _vp, _vp)
attention = _proto("pit_attention", _vp, _vp, _vp, _vp, _vp, _vp, ctypes.POINTER(AttentionOptions), _vp, _vp)
attention_backward = _proto("pit_attention_backward", _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp,
                            ctypes.POINTER(AttentionOptions), _vp, _vp, _vp)
lib.pit_attention_options_default.argtypes = []
lib.pit_attention_options_default.restype = AttentionOptions
attention_options_default = lib.pit_attention_options_default
matmul_backward = _proto("pit_matmul_backward", _vp, _vp, _vp, _vp, _vp, _vp, _vp)
sparse_softmax_backward = _proto("pit_sparse_softmax_backward", _vp, _vp, _vp, _vp, _vp, _vp, ctypes.c_float)
moe_forward = _proto("pit_moe_forward", _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp)
moe_ffn = _proto("pit_moe_ffn", _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, ctypes.POINTER(MoeFfnOptions), _vp)
moe_ffn_backward = _proto("pit_moe_ffn_backward", _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp,
                          ctypes.POINTER(MoeFfnOptions))
ACTIVATIONS = {"swiglu": 0, "geglu": 1, "gelu": 2, "relu": 3, "silu": 4}
tensor_to_dlpack = _proto("pit_tensor_to_dlpack", _vp, ctypes.POINTER(_vp))
tensor_to_dlpack_versioned = _proto("pit_tensor_to_dlpack_versioned", _vp, ctypes.POINTER(_vp))
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
# pit_allocator: alloc(user, bytes, stream) -> block or NULL; free(user, block, stream)
ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


class Allocator(ctypes.Structure):
    """pit_allocator (pit copies it; the callbacks must outlive the context)."""

    _fields_ = [("alloc", ALLOC_FN), ("free", FREE_FN), ("user", ctypes.c_void_p)]


context_set_allocator = _proto("pit_context_set_allocator", _vp, ctypes.POINTER(Allocator))
set_log_callback = _proto("pit_set_log_callback", LOG_FN, _vp)
prune_magnitude = _proto("pit_prune_magnitude", _vp, _vp, _vp, ctypes.c_int32, ctypes.c_int32, ctypes.c_double)



# ---- DLPack capsules (the Python side of the protocol) ----------------------
class DLTensor(ctypes.Structure):
    _fields_ = [("data", _vp), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", _i64p), ("strides", _i64p), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", _vp), ("deleter", _vp),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


class DLManagedTensor(ctypes.Structure):
    """DLPack 0.x's managed tensor (the legacy "dltensor" capsule's)."""

    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", _vp), ("deleter", _vp)]


# A capsule's name before and after a consumer takes it. PyCapsule_SetName
# keeps the pointer, so the names live as long as the module.
CAPSULE_NAMES = {True: (b"dltensor_versioned", b"used_dltensor_versioned"), False: (b"dltensor", b"used_dltensor")}
capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
capsule_is_valid.argtypes, capsule_is_valid.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_int
capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_pointer.argtypes, capsule_pointer.restype = [ctypes.py_object, ctypes.c_char_p], _vp
capsule_rename = ctypes.pythonapi.PyCapsule_SetName
capsule_rename.argtypes, capsule_rename.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_int

# No destructor: a capsule pit exports is freed by its exporter when no
# consumer took it (pit/_tensors.py, Exported), never by Python code running
# inside a deallocation, where an exception may be in flight.
capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.argtypes, capsule_new.restype = [_vp, ctypes.c_char_p, _vp], ctypes.py_object


def managed_tensor(pointer, versioned):
    """The managed tensor at pointer, as its ctypes struct."""
    return (DLManagedTensorVersioned if versioned else DLManagedTensor).from_address(pointer)


def dl_tensor(pointer, versioned):
    """The DLTensor of a managed tensor (legacy: it comes first)."""
    if versioned:
        return DLManagedTensorVersioned.from_address(pointer).dl_tensor
    return DLTensor.from_address(pointer)


def status_name(status):
    return lib.pit_status_string(status).decode()


def check(status):
    """Raises PitError for a status other than PIT_SUCCESS, with the message
    pit_last_error() keeps for this thread (right after the call)."""
    if status != 0:
        raise PitError(status_name(status), (lib.pit_last_error() or b"").decode(errors="replace"))
