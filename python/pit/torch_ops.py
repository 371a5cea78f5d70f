"""pit's operators as PyTorch ops: `import pit.torch_ops` registers
torch.ops.pit.* with torch.library.custom_op, each with a fake (meta)
implementation, so torch.compile traces them without graph breaks, and
autograd through libpit's backward entry points.

Data moves through pit's numpy functions: a tensor is copied to the host,
to the device of pit's default context, and back (docs/python.md). float32
and float16 tensors; bfloat16 needs the DLPack path, which is to come.
"""
import numpy as np
import torch

import pit

_NUMPY = {torch.float32: np.float32, torch.float16: np.float16}


def _host(t):
    if t.dtype not in _NUMPY and t.dtype not in (torch.int32, torch.uint8, torch.bool):
        raise pit.PitError("PIT_ERR_UNSUPPORTED_DTYPE", f"{t.dtype}: pit's torch ops take float32 and float16 "
                           "tensors (bfloat16 comes with the DLPack path)")
    return t.detach().cpu().contiguous().numpy()


def _back(array, like):
    return torch.from_numpy(np.ascontiguousarray(array)).to(like.device)


# ---- matmul ---------------------------------------------------------------
@torch.library.custom_op("pit::matmul", mutates_args=())
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """c = a . b with the zeros of a skipped (pit.matmul)."""
    return _back(pit.matmul(_host(a), _host(b)), a)


@matmul.register_fake
def _(a, b):
    return a.new_empty(a.shape[:-1] + b.shape[-1:])


@torch.library.custom_op("pit::matmul_backward", mutates_args=())
def matmul_backward(a: torch.Tensor, b: torch.Tensor, dc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    da, db = pit.matmul_backward(_host(a), _host(b), _host(dc))
    return _back(da, a), _back(db, b)


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
    return _back(pit.sparse_softmax(_host(x), _host(mask), scale), x)


@sparse_softmax.register_fake
def _(x, mask, scale=1.0):
    return torch.empty_like(x)


@torch.library.custom_op("pit::sparse_softmax_backward", mutates_args=())
def sparse_softmax_backward(y: torch.Tensor, dy: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    return _back(pit.sparse_softmax_backward(_host(y), _host(dy), _host(mask), scale), y)


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
    o, lse = pit.attention(_host(q), _host(k), _host(v), causal=causal, window=(window_left, window_right),
                           scale=scale or None, return_lse=True)
    return _back(o, q), _back(lse, q)


@attention.register_fake
def _(q, k, v, causal=False, window_left=-1, window_right=-1, scale=0.0):
    return q.new_empty(q.shape[:-1] + v.shape[-1:]), q.new_empty(q.shape[:-1], dtype=torch.float32)


@torch.library.custom_op("pit::attention_backward", mutates_args=())
def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, do: torch.Tensor,
                       lse: torch.Tensor, causal: bool, window_left: int, window_right: int,
                       scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dq, dk, dv = pit.attention_backward(_host(q), _host(k), _host(v), _host(o), _host(do), _host(lse), causal=causal,
                                        window=(window_left, window_right), scale=scale or None)
    return _back(dq, q), _back(dk, k), _back(dv, v)


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
    return _back(pit.moe_ffn(_host(x), _host(expert_ids), _host(gates), _host(w_gate_up), _host(w_down),
                             activation), x)


@moe_ffn.register_fake
def _(x, expert_ids, gates, w_gate_up, w_down, activation="swiglu"):
    return torch.empty_like(x)


@torch.library.custom_op("pit::moe_ffn_backward", mutates_args=())
def moe_ffn_backward(x: torch.Tensor, expert_ids: torch.Tensor, gates: torch.Tensor, w_gate_up: torch.Tensor,
                     w_down: torch.Tensor, dy: torch.Tensor,
                     activation: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    dx, dwu, dwd, dg = pit.moe_ffn_backward(_host(x), _host(expert_ids), _host(gates), _host(w_gate_up),
                                            _host(w_down), _host(dy), activation)
    return _back(dx, x), _back(dwu, w_gate_up), _back(dwd, w_down), _back(dg, gates)


@moe_ffn_backward.register_fake
def _(x, expert_ids, gates, w_gate_up, w_down, dy, activation):
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
