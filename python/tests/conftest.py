"""Fixtures shared by the tests: the torch device that matches pit's default
context, so torch tensors reach libpit without copies where they can (CUDA
tensors on a CUDA context, on torch's current stream) and the same tests run
on PoCL with CPU tensors."""
import pytest

import pit


# a test that passes host arrays (numpy) as out= or expects them used in
# place: only a device that addresses host memory (an OpenCL CPU device) can
host_memory = pytest.mark.skipif(not pit.default_context().info.takes_host_memory,
                                 reason="the default context's device does not take host memory (not a CPU device)")


def pit_backend():
    """The backend of pit's default context ("cuda", "hip", "opencl")."""
    return pit.default_context().info.backend.decode()


def torch_device_or_reason(torch):
    """(torch.device, None) for pit's default context, and why it is not
    CUDA where it is not (None when it is)."""
    ctx = pit.default_context()
    if pit_backend() != "cuda":
        return torch.device("cpu"), f"pit's default context runs on {pit_backend()}, not cuda (set PIT_BACKEND=cuda)"
    if not torch.cuda.is_available():
        return torch.device("cpu"), "torch has no CUDA (torch.cuda.is_available() is False)"
    return torch.device("cuda", ctx.info.device_index), None


@pytest.fixture(scope="session")
def torch_device():
    """'cuda' (pit's device index) when pit runs on the CUDA backend and torch
    sees CUDA, else 'cpu'. Skips the test where torch is not installed."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    return torch_device_or_reason(torch)[0]


@pytest.fixture(scope="session")
def cuda_device():
    """torch_device where it is CUDA; otherwise the test is skipped, the
    reason naming what is missing (torch, torch's CUDA, pit on CUDA)."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    device, missing = torch_device_or_reason(torch)
    if missing:
        pytest.skip(missing)
    return device
