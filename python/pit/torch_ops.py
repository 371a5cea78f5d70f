"""pit's operators as PyTorch ops: `import pit.torch_ops` registers
torch.ops.pit.* with torch.library.custom_op, each with a fake (meta)
implementation, so torch.compile traces them without graph breaks, and
autograd through libpit's backward entry points where libpit has one
(matmul, sparse_softmax, attention, moe_ffn and moe_ffn_keeping, whose
forward keeps its first product for the backward). matmul_rows, sddmm,
relu_ffn, moe_forward and prune_magnitude are forward ops: a gradient
through them raises torch's error that the op has no autograd kernel.

Tensors pass to pit's functions as they are: through DLPack without a copy
where pit's context runs on their device (CUDA tensors on CUDA, on torch's
current stream; CPU tensors on an OpenCL CPU device), copied elsewhere
(docs/python.md). Results are torch tensors from torch's allocator, on the
inputs' device. float32, float16 and bfloat16.
"""
from typing import Optional

import torch

import pit

# ---- matmul ---------------------------------------------------------------
@torch.library.custom_op("pit::matmul", mutates_args=())
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """c = a . b with the zeros of a skipped (pit.matmul)."""
    return pit.matmul(a, b)


@matmul.register_fake
def _(a, b):
    return a.new_empty(a.shape[:-1] + b.shape[-1:])


@torch.library.custom_op("pit::matmul_backward", mutates_args=())
def matmul_backward(a: torch.Tensor, b: torch.Tensor, dc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return pit.matmul_backward(a, b, dc)


@matmul_backward.register_fake
def _(a, b, dc):
    return torch.empty_like(a), torch.empty_like(b)


def _matmul_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _matmul_grad(ctx, dc):
    a, b = ctx.saved_tensors
    return matmul_backward(a, b, dc.contiguous())


matmul.register_autograd(_matmul_grad, setup_context=_matmul_setup)


# ---- sparse softmax -------------------------------------------------------
@torch.library.custom_op("pit::sparse_softmax", mutates_args=())
def sparse_softmax(x: torch.Tensor, mask: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """softmax(scale x) along rows over the mask; masked entries 0."""
    return pit.sparse_softmax(x, mask, scale)


@sparse_softmax.register_fake
def _(x, mask, scale=1.0):
    return torch.empty_like(x)


@torch.library.custom_op("pit::sparse_softmax_backward", mutates_args=())
def sparse_softmax_backward(y: torch.Tensor, dy: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    return pit.sparse_softmax_backward(y, dy, mask, scale)


@sparse_softmax_backward.register_fake
def _(y, dy, mask, scale):
    return torch.empty_like(y)


def _softmax_setup(ctx, inputs, output):
    _, mask, scale = inputs
    ctx.save_for_backward(output, mask)
    ctx.scale = scale


def _softmax_grad(ctx, dy):
    y, mask = ctx.saved_tensors
    return sparse_softmax_backward(y, dy.contiguous(), mask, ctx.scale), None, None


sparse_softmax.register_autograd(_softmax_grad, setup_context=_softmax_setup)


# ---- attention ------------------------------------------------------------
@torch.library.custom_op("pit::attention", mutates_args=())
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, window_left: int = -1,
              window_right: int = -1, scale: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) of pit.attention (scale 0: 1/sqrt(D); GQA when q has more heads)."""
    return pit.attention(q, k, v, causal=causal, window=(window_left, window_right), scale=scale or None,
                         return_lse=True)


@attention.register_fake
def _(q, k, v, causal=False, window_left=-1, window_right=-1, scale=0.0):
    return q.new_empty(q.shape[:-1] + v.shape[-1:]), q.new_empty(q.shape[:-1], dtype=torch.float32)


@torch.library.custom_op("pit::attention_backward", mutates_args=())
def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, do: torch.Tensor,
                       lse: torch.Tensor, causal: bool, window_left: int, window_right: int,
                       scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return pit.attention_backward(q, k, v, o, do, lse, causal=causal, window=(window_left, window_right),
                                  scale=scale or None)


@attention_backward.register_fake
def _(q, k, v, o, do, lse, causal, window_left, window_right, scale):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _attention_setup(ctx, inputs, output):
    q, k, v, causal, window_left, window_right, scale = inputs
    ctx.save_for_backward(q, k, v, *output)
    ctx.options = (causal, window_left, window_right, scale)


def _attention_grad(ctx, do, _dlse):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = attention_backward(q, k, v, o, do.contiguous(), lse, *ctx.options)
    return dq, dk, dv, None, None, None, None


attention.register_autograd(_attention_grad, setup_context=_attention_setup)


# ---- MoE expert FFN ---------------------------------------------------------
@torch.library.custom_op("pit::moe_ffn", mutates_args=())
def moe_ffn(x: torch.Tensor, expert_ids: torch.Tensor, gates: torch.Tensor, w_gate_up: torch.Tensor,
            w_down: torch.Tensor, activation: str = "swiglu") -> torch.Tensor:
    """sum_j gates[t,j] act(x[t] . w_gate_up[e]) . w_down[e] (pit.moe_ffn)."""
    return pit.moe_ffn(x, expert_ids, gates, w_gate_up, w_down, activation)


@moe_ffn.register_fake
def _(x, expert_ids, gates, w_gate_up, w_down, activation="swiglu"):
    return torch.empty_like(x)


@torch.library.custom_op("pit::moe_ffn_keeping", mutates_args=())
def moe_ffn_keeping(x: torch.Tensor, expert_ids: torch.Tensor, gates: torch.Tensor, w_gate_up: torch.Tensor,
                    w_down: torch.Tensor, activation: str = "swiglu") -> tuple[torch.Tensor, torch.Tensor]:
    """moe_ffn for training: (y, h), h [T*k, W] every token-slot's first
    product, which the backward reads instead of recomputing it (12 T k H F
    FLOPs instead of 16; h lives as long as the graph does)."""
    y, h = pit.moe_ffn(x, expert_ids, gates, w_gate_up, w_down, activation, return_hidden=True)
    return y, h


@moe_ffn_keeping.register_fake
def _(x, expert_ids, gates, w_gate_up, w_down, activation="swiglu"):
    return torch.empty_like(x), x.new_empty((expert_ids.shape[0] * expert_ids.shape[1], w_gate_up.shape[-1]))


@torch.library.custom_op("pit::moe_ffn_backward", mutates_args=())
def moe_ffn_backward(x: torch.Tensor, expert_ids: torch.Tensor, gates: torch.Tensor, w_gate_up: torch.Tensor,
                     w_down: torch.Tensor, dy: torch.Tensor, activation: str,
                     hidden: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                     torch.Tensor]:
    dx, dwu, dwd, dg = pit.moe_ffn_backward(x, expert_ids, gates, w_gate_up, w_down, dy, activation, hidden=hidden)
    return dx, dwu, dwd, dg


@moe_ffn_backward.register_fake
def _(x, expert_ids, gates, w_gate_up, w_down, dy, activation, hidden=None):
    return torch.empty_like(x), torch.empty_like(w_gate_up), torch.empty_like(w_down), torch.empty_like(gates)


def _moe_setup(ctx, inputs, output):
    x, expert_ids, gates, w_gate_up, w_down, activation = inputs
    ctx.save_for_backward(x, expert_ids, gates, w_gate_up, w_down)
    ctx.activation = activation


def _moe_grad(ctx, dy):
    x, expert_ids, gates, w_gate_up, w_down = ctx.saved_tensors
    dx, dwu, dwd, dg = moe_ffn_backward(x, expert_ids, gates, w_gate_up, w_down, dy.contiguous(), ctx.activation)
    return dx, None, dg, dwu, dwd, None


moe_ffn.register_autograd(_moe_grad, setup_context=_moe_setup)


def _moe_keeping_setup(ctx, inputs, output):
    x, expert_ids, gates, w_gate_up, w_down, activation = inputs
    ctx.save_for_backward(x, expert_ids, gates, w_gate_up, w_down, output[1])
    ctx.mark_non_differentiable(output[1])
    ctx.activation = activation


def _moe_keeping_grad(ctx, dy, _dh):
    x, expert_ids, gates, w_gate_up, w_down, h = ctx.saved_tensors
    dx, dwu, dwd, dg = moe_ffn_backward(x, expert_ids, gates, w_gate_up, w_down, dy.contiguous(), ctx.activation,
                                        h)
    return dx, None, dg, dwu, dwd, None


moe_ffn_keeping.register_autograd(_moe_keeping_grad, setup_context=_moe_keeping_setup)


# ---- forward ops (no backward entry point in libpit) ------------------------
@torch.library.custom_op("pit::matmul_rows", mutates_args=())
def matmul_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """c = a . b computing only the rows of a that hold a non-zero; the other
    rows are 0 (pit.matmul_rows)."""
    return pit.matmul_rows(a, b)


@matmul_rows.register_fake
def _(a, b):
    return a.new_empty(a.shape[:-1] + b.shape[-1:])


@torch.library.custom_op("pit::sddmm", mutates_args=())
def sddmm(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor, block_rows: int = 0,
          block_cols: int = 0) -> torch.Tensor:
    """(a . b^T) where mask is non-zero, 0 elsewhere (pit.sddmm)."""
    return pit.sddmm(a, b, mask, (block_rows, block_cols))


@sddmm.register_fake
def _(a, b, mask, block_rows=0, block_cols=0):
    return a.new_empty(a.shape[:-2] + mask.shape[-2:])


@torch.library.custom_op("pit::relu_ffn", mutates_args=())
def relu_ffn(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """relu(x . w1) . w2 with the zeros after the ReLU skipped (pit.relu_ffn)."""
    return pit.relu_ffn(x, w1, w2)


@relu_ffn.register_fake
def _(x, w1, w2):
    return x.new_empty(x.shape[:-1] + w2.shape[-1:])


@torch.library.custom_op("pit::moe_forward", mutates_args=())
def moe_forward(x: torch.Tensor, expert_ids: torch.Tensor, gates: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """y[t] = sum_j gates[t, j] x[t] . w[expert_ids[t, j]] (pit.moe_forward)."""
    return pit.moe_forward(x, expert_ids, gates, w)


@moe_forward.register_fake
def _(x, expert_ids, gates, w):
    return x.new_empty((x.shape[0], w.shape[-1]))


@torch.library.custom_op("pit::prune_magnitude", mutates_args=())
def prune_magnitude(w: torch.Tensor, block_rows: int = 1, block_cols: int = 1, sparsity: float = 0.5) -> torch.Tensor:
    """A copy of w with the fraction `sparsity` of its block micro-tiles of
    smallest magnitude zeroed (pit.prune_magnitude)."""
    return pit.prune_magnitude(w, (block_rows, block_cols), sparsity)


@prune_magnitude.register_fake
def _(w, block_rows=1, block_cols=1, sparsity=0.5):
    return torch.empty_like(w)
