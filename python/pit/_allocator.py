"""pit's scratch from a framework's allocator: the pit_allocator callbacks
over torch's CUDA caching allocator, and the gate that keeps
pit_context_set_allocator away from calls running on the context
(docs/api.md: set it while no other call uses the context)."""
import contextlib
import threading

from . import _lib

CU_STREAM_LEGACY = 1  # what pit_stream_wrap is given for torch's default stream (cuda_stream 0)


class Gate:
    """Calls enter and leave; `alone()` waits until none is running and
    keeps new ones out while its body runs. A call waits only while the
    allocator is being set (once per context, in practice)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._calls, self._closed = 0, False

    def enter(self):
        with self._cond:
            while self._closed:
                self._cond.wait()
            self._calls += 1

    def leave(self):
        with self._cond:
            self._calls -= 1
            self._cond.notify_all()

    @contextlib.contextmanager
    def alone(self):
        with self._cond:
            while self._closed:  # another thread is setting it
                self._cond.wait()
            self._closed = True
            while self._calls:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._closed = False
                self._cond.notify_all()


def callbacks(alloc, free):
    """A pit_allocator over alloc(bytes, stream) -> address and free(address),
    Python functions. An exception in either never crosses into C: alloc
    returns NULL (pit then fails the call with PIT_ERR_OUT_OF_MEMORY),
    free drops the block (the allocator's cache keeps it)."""

    def c_alloc(_user, size, stream):
        try:
            return int(alloc(size, stream)) or None
        except Exception:  # noqa: BLE001 - reported by pit as OUT_OF_MEMORY
            return None

    def c_free(_user, block, _stream):
        try:
            free(block)
        except Exception:  # noqa: BLE001 - nothing to report it to from inside libpit
            pass

    return _lib.Allocator(_lib.ALLOC_FN(c_alloc), _lib.FREE_FN(c_free), None)


def torch_stream_arg(stream, cuda):
    """The stream torch's allocator is given for pit's: NULL (a block that
    lives across calls) as None, torch's current stream of the device;
    CU_STREAM_LEGACY as 0, the handle torch knows its default stream by."""
    if stream is None:
        return None
    return 0 if cuda and stream == CU_STREAM_LEGACY else int(stream)


def torch_allocator(torch, device, cuda):
    """pit_allocator callbacks over torch.cuda.caching_allocator_alloc /
    caching_allocator_delete on device (an index): a block used on a stream
    is cached by torch for that stream (freed stream-ordered, as pit asks),
    and a block allocated while the stream is captured comes from the
    graph's pool."""

    def alloc(size, stream):
        return torch.cuda.caching_allocator_alloc(size, device, torch_stream_arg(stream, cuda))

    return callbacks(alloc, torch.cuda.caching_allocator_delete)
