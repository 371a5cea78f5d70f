"""pit with CUDA tensors on a CUDA context: a forward of pit.nn layers
captured in a CUDA graph and replayed on new inputs, and calls queued on
torch's current stream without waiting for it. Skipped by name unless torch
has CUDA and pit's default context runs on CUDA (conftest.cuda_device)."""
import ctypes

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not hasattr(torch.library, "custom_op"):
    pytest.skip("torch has no torch.library.custom_op (2.4 or later needed)", allow_module_level=True)

import pit  # noqa: E402
import pit.nn as pnn  # noqa: E402
from pit import _lib  # noqa: E402

GEN = torch.Generator().manual_seed(23)
BF16 = torch.bfloat16
TOL = 2 * torch.finfo(BF16).eps  # replay against eager: the same kernels, a plan apart at most


def values(*shape, dtype=BF16):
    return (torch.rand(*shape, generator=GEN) * 2 - 1).to(dtype)


def rel_err(got, ref):
    got, ref = got.detach().cpu().double(), ref.detach().cpu().double()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-30))


# ---- the forwards captured: (function, static inputs, new inputs) -------------------
# bfloat16 throughout: on CUDA the 16-bit MoE FFN and attention kernels read
# nothing back to the host (docs/api.md, Reports); pit_sparse_softmax reads
# its mask's counts back on every call, so it is not among them.
def activations(zero_blocks, device):
    """[128 tokens, 128 features] with the 32-feature blocks zero_blocks
    zeroed: activation sparsity along K, which a settled plan detects on the
    device and reads nothing back for."""
    x = values(128, 128)
    for blk in zero_blocks:
        x[:, 32 * blk:32 * blk + 32] = 0
    return x.to(device)


def linear_case(device):
    layer = pnn.Linear(128, 64, dtype=BF16).to(device)
    return layer, [activations((0, 2), device)], [activations((1, 3), device)]


def qkv(device):
    return [values(1, 4, 64, 64).to(device) for _ in range(3)]


def attention_causal_case(device):
    return pnn.SparseAttention(causal=True), qkv(device), qkv(device)


def element_mask(device):
    return ((torch.rand(64, 64, generator=GEN) < 0.5) | torch.eye(64, dtype=torch.bool)).to(device)


def attention_mask_case(device):
    def forward(q, k, v, mask):
        return pit.attention(q, k, v, mask=mask)

    return forward, qkv(device) + [element_mask(device)], qkv(device) + [element_mask(device)]


def block_mask(device):
    return ((torch.rand(4, 4, generator=GEN) < 0.5) | torch.eye(4, dtype=torch.bool)).to(device)


def attention_block_mask_case(device):
    def forward(q, k, v, blocks):
        return pit.attention(q, k, v, block_mask=blocks, block=(16, 16))

    return forward, qkv(device) + [block_mask(device)], qkv(device) + [block_mask(device)]


def moe_case(device):
    """New tokens route differently: the replay's routing comes from the
    router on the device, not from the capture."""
    moe = pnn.MoEFFN(64, 32, 8, top_k=2, dtype=BF16).to(device)
    old, new = values(64, 64).to(device), values(64, 64).to(device)
    assert not torch.equal(moe.route(old)[0], moe.route(new)[0])
    return moe, [old], [new]


CASES = {"linear": linear_case, "attention_causal": attention_causal_case, "attention_mask": attention_mask_case,
         "attention_block_mask": attention_block_mask_case, "moe_ffn": moe_case}
# A matmul plan looks at every candidate (and reads their counts back) on its
# first call and on every 8th after it (docs/api.md, Reports): three warm-up
# calls settle it, and the capture is the fourth.
WARMUP = 3


def capture(name, forward, inputs, stream):
    """The graph of forward(*inputs) captured on stream after the warm-up
    there, and its static output. Fails, naming the case and libpit's
    message, where a call cannot be queued into a graph."""
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        try:
            for _ in range(WARMUP):
                forward(*inputs)
        except Exception as e:  # noqa: BLE001 - the message is the report
            pytest.fail(f"{name}: the eager forward failed before capture: {type(e).__name__}: {e}")
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=stream):
            out = forward(*inputs)
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"{name}: capturing the forward in a CUDA graph failed (a call read back to the host, "
                    f"synchronised or allocated while capturing?): {type(e).__name__}: {e}")
    return graph, out


@pytest.mark.parametrize("name", list(CASES))
def test_cuda_graph_capture_of_a_forward(cuda_device, name):
    """Captured after warm-up on a side stream; new values copied into the
    static inputs (activations, tokens and so routing, masks); the replay
    against the eager forward on the same new inputs."""
    forward, inputs, new = CASES[name](cuda_device)
    graph, out = capture(name, forward, inputs, torch.cuda.Stream(cuda_device))
    graph.replay()
    torch.cuda.synchronize()
    first = out.clone()
    check_eager(name, out, forward(*inputs), "the capture's inputs")
    for static, fresh in zip(inputs, new):
        static.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    assert not torch.equal(out, first), f"{name}: the replay on new inputs left the output as it was"
    check_eager(name, out, forward(*inputs), "new inputs")


def check_eager(name, replayed, eager, which):
    torch.cuda.synchronize()
    err = rel_err(replayed, eager)
    assert err <= TOL, f"{name}: replay on {which} against eager: relative error {err:.3g} > {TOL:.3g}"


# ---- torch's current stream, never waited for -----------------------------------------
SLEEP_CYCLES = 200_000_000  # torch.cuda._sleep: about 0.1 s at 2 GHz, far longer than the calls take to queue


def stream_calls(device):
    """(calls(x), reference(x)): pit calls that read nothing back on CUDA
    (relu, the dense GEMM, the 16-bit MoE FFN), and their float64 results
    on the CPU."""
    b, wu, wd = values(64, 48).to(device), values(8, 64, 64).to(device), values(8, 32, 64).to(device)
    ids = torch.stack([torch.randperm(8, generator=GEN)[:2] for _ in range(32)]).to(torch.int32)
    gates = torch.softmax(torch.rand(32, 2, generator=GEN), dim=-1)
    d_ids, d_gates = ids.to(device), gates.to(device)

    def calls(x):
        return pit.relu(x), pit.matmul_dense(x, b), pit.moe_ffn(x, d_ids, d_gates, wu, wd)

    def reference(x):
        x64, w64, u64, dn64 = (t.cpu().double() for t in (x, b, wu, wd))
        y = torch.zeros_like(x64)
        for j in range(2):
            e = ids[:, j].long()
            hid = torch.einsum("th,thw->tw", x64, u64[e])
            act = torch.nn.functional.silu(hid[:, :32]) * hid[:, 32:]
            y = y + gates[:, j:j + 1].double() * torch.einsum("tf,tfh->th", act, dn64[e])
        return torch.relu(x64), x64 @ w64, y

    return calls, reference


@pytest.mark.parametrize("which", ["side", "default"])
def test_calls_queue_on_the_current_stream_without_waiting(cuda_device, which):
    """On torch's current stream (a side stream, or the default one): the
    input is written there after a long sleep, so a call on any other stream
    would read stale values, and one that waited for the stream would return
    only after the sleep. Results are torch CUDA tensors on the inputs'
    device."""
    calls, reference = stream_calls(cuda_device)
    fresh = values(32, 64).to(cuda_device)
    stream = torch.cuda.Stream(cuda_device) if which == "side" else torch.cuda.default_stream(cuda_device)
    x = torch.zeros_like(fresh)
    with torch.cuda.stream(stream):
        calls(fresh)  # kernels compiled and plans made before the timed part
    torch.cuda.synchronize()  # x's zeros and the warm-up done before the sleep
    with torch.cuda.stream(stream):
        torch.cuda._sleep(SLEEP_CYCLES)
        x.copy_(fresh)
        got = calls(x)
        pending = not stream.query()
    stream.synchronize()
    assert pending, f"{which} stream: its work was done when the pit calls returned: a call waited for it"
    for name, g, want in zip(("relu", "matmul_dense", "moe_ffn"), got, reference(fresh)):
        assert g.is_cuda and g.device == x.device and g.dtype == BF16, name
        err = rel_err(g, want)
        assert err <= 2 * torch.finfo(BF16).eps, f"{which} stream, {name}: relative error {err:.3g}"


# ---- pit's device memory from torch's caching allocator ------------------------------
def test_pit_memory_comes_from_torchs_allocator(cuda_device, monkeypatch):
    """A context of its own adopts torch's allocator on its first call with
    CUDA tensors: the plan and scratch of a sparse product are torch blocks
    (counted in torch.cuda.memory_allocated while the call runs), on the
    call's stream or torch's current one; a tensor pit creates is one too."""
    asked = []
    real = torch.cuda.caching_allocator_alloc

    def spy(size, device=None, stream=None):
        block = real(size, device, stream)
        asked.append((size, stream, torch.cuda.memory_allocated(cuda_device)))
        return block

    monkeypatch.setattr(torch.cuda, "caching_allocator_alloc", spy)
    ctx = pit.Context("cuda", cuda_device.index or 0)
    a, b = values(512, 1024).to(cuda_device), values(1024, 512).to(cuda_device)
    a[:, 256:768] = 0
    before = torch.cuda.memory_allocated(cuda_device)
    got = pit.matmul(a, b, ctx=ctx)
    torch.cuda.synchronize()
    assert ctx._allocator == "torch", ctx._allocator
    assert asked, "pit allocated nothing through torch's allocator during a sparse product on a fresh context"
    current = torch.cuda.current_stream(cuda_device).cuda_stream
    assert all(stream in (None, 0, current) for _, stream, _ in asked), asked
    assert max(seen for _, _, seen in asked) >= before + asked[0][0]
    assert rel_err(got, a.double() @ b.double()) <= TOL * 4
    dims = (ctypes.c_int64 * 1)(64 << 20)
    handle = ctypes.c_void_p()
    held = torch.cuda.memory_allocated(cuda_device)
    _lib.check(_lib.tensor_create(ctx.handle, _lib.U8, 1, dims, ctypes.byref(handle)))
    assert torch.cuda.memory_allocated(cuda_device) >= held + (64 << 20)
    _lib.check(_lib.tensor_destroy(handle))
    ctx.set_torch_allocator(False)
    assert ctx._allocator == "off"
    del got
    ctx.close()


def test_torch_allocator_can_be_turned_off(cuda_device):
    """Context(torch_allocator=False) keeps the backend's own allocation."""
    ctx = pit.Context("cuda", cuda_device.index or 0, torch_allocator=False)
    pit.relu(values(8, 8).to(cuda_device), ctx=ctx)
    assert ctx._allocator is None
    torch.cuda.synchronize()
    ctx.close()


# ---- torch tensors borrowed by pointer -------------------------------------------------
def test_cuda_tensors_pass_without_dlpack_capsules(cuda_device, monkeypatch):
    """On a CUDA context torch tensors reach libpit by pointer
    (pit_tensor_wrap): no capsule is made, strided views (attention's
    [B, L, H, D] order) and outputs included, and the results are right."""
    from pit import _tensors

    def no_capsule(x):
        raise AssertionError(f"a DLPack capsule was made for a {type(x).__name__}")

    monkeypatch.setattr(_tensors, "_capsule", no_capsule)
    a, b = values(64, 96).to(cuda_device), values(96, 32).to(cuda_device)
    a[:, 16:48] = 0
    assert rel_err(pit.matmul(a, b), a.double() @ b.double()) <= TOL * 4
    q, k, v = (values(2, 40, 4, 64).to(cuda_device, BF16).transpose(1, 2) for _ in range(3))
    got = pit.attention(q, k, v, causal=True)
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    assert rel_err(got, want) <= 4 * torch.finfo(BF16).eps


def test_tensors_on_the_device_skip_the_general_path(cuda_device, monkeypatch):
    """A torch tensor on the context's device whose dtype is the one asked
    for and whose strides pit takes is borrowed as it is, inputs, results
    and out= alike, without the DLPack protocol (_direct); the rest keeps
    the general path's decisions: a dtype converted (uint8 ids), a layout
    made contiguous (a transposed operand, a [B, L, H, D] view outside
    attention), and out= overlapping an input refused, its span worked out
    when asked."""
    from pit import _tensors

    def no_protocol(self, x):
        raise AssertionError(f"a {type(x).__name__} took the general path")

    x = values(16, 24, dtype=torch.float32).to(cuda_device)
    mask = (torch.rand(16, 24, generator=GEN) < 0.5).to(cuda_device)
    weight = torch.nn.Parameter(values(24, 8, dtype=torch.float32).to(cuda_device))
    bhld = values(2, 5, 3, 8).to(cuda_device).transpose(1, 2)  # attention's [B, L, H, D] order
    ctx = pit.default_context()
    with monkeypatch.context() as m:
        m.setattr(_tensors.Call, "_direct", no_protocol)
        with _tensors.Call(ctx, x) as c:
            t = c.input(x)
            assert t.source is x and not t.copied and t.span == (x.data_ptr(), x.data_ptr() + x.numel() * 4)
            assert c.input(mask, _lib.U8).source is mask  # bool is pit's uint8 as it is
            assert c.input(weight).source is weight
            assert c.input(bhld, any_order=True).source is bhld
        got = pit.relu(x)
        assert got.is_cuda and torch.equal(got, torch.relu(x))
        out = torch.full_like(x, 3.0)
        assert pit.relu(x, out=out) is out and torch.equal(out, torch.relu(x))
        assert rel_err(pit.matmul_dense(x, weight), x.double() @ weight.double()) <= 1e-5
        with pytest.raises(pit.PitError) as e:
            pit.relu(x[:, :5], out=x[:, 4:9])
        assert e.value.status == "PIT_ERR_ALIASING"
        pit.relu(x[:8], out=x[8:])  # rows apart: the addresses do not overlap
        assert torch.equal(x[8:], torch.relu(x[:8]))
        with pytest.raises(pit.PitError) as e:  # its bits are never read as another dtype's
            pit.relu(x, out=torch.empty_like(x, dtype=torch.float16))
        assert e.value.status == "PIT_ERR_UNSUPPORTED_DTYPE"
    with _tensors.Call(ctx, x) as c:
        ids = torch.arange(16, dtype=torch.uint8, device=cuda_device)  # converted to int32
        t = c.input(ids, _lib.I32)
        assert t.source is not ids and t.source.dtype == torch.int32 and t.source.is_cuda
        t = c.input(x.T)  # column-major: made contiguous for relu
        assert t.source is not x and t.source.is_contiguous() and torch.equal(t.source, x.T)
        t = c.input(bhld)  # row-major only outside attention: made contiguous
        assert t.source is not bhld and t.source.is_contiguous() and torch.equal(t.source, bhld)
    assert torch.equal(pit.relu(x.T), torch.relu(x.T))
