"""Drop-in layers on pit's PyTorch ops (pit.torch_ops): a model changes one
import. Each layer's parameters are ordinary torch parameters."""
import math

import torch

from . import torch_ops


class Linear(torch.nn.Module):
    """torch.nn.Linear whose input's zeros are skipped (activation sparsity:
    PIT along K). weight [out, in] as in torch.nn.Linear."""

    def __init__(self, in_features, out_features, bias=True, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features, dtype=dtype))
        self.bias = torch.nn.Parameter(torch.empty(out_features, dtype=dtype)) if bias else None
        torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias, -1 / math.sqrt(in_features), 1 / math.sqrt(in_features))

    def forward(self, x):
        y = torch_ops.matmul(x.reshape(-1, self.in_features).contiguous(), self.weight.t().contiguous())
        y = y.reshape(*x.shape[:-1], self.out_features)
        return y + self.bias if self.bias is not None else y


class SparseAttention(torch.nn.Module):
    """Attention over [B, H, L, D] queries, keys and values (GQA when the
    queries have more heads), causal and/or a window (left, right)."""

    def __init__(self, causal=False, window=(-1, -1), scale=None):
        super().__init__()
        self.causal, self.window, self.scale = causal, tuple(window), scale

    def forward(self, q, k, v):
        o, _ = torch_ops.attention(q.contiguous(), k.contiguous(), v.contiguous(), self.causal, self.window[0],
                                   self.window[1], self.scale or 0.0)
        return o


class MoEFFN(torch.nn.Module):
    """A Mixture-of-Experts FFN: a softmax router's top-k (gates renormalised
    over the k), then every token's experts in one pit_moe_ffn call.
    activation "swiglu" (w_gate_up [E, H, 2F]) or "geglu", "gelu", "relu",
    "silu". keep_hidden: where a gradient will be taken, the forward keeps
    every token-slot's first product ([T*k, W], alive while the graph is)
    and the backward reads it instead of recomputing it; False trades that
    time for the memory."""

    def __init__(self, hidden, ffn, experts, top_k=2, activation="swiglu", dtype=None, keep_hidden=True):
        super().__init__()
        self.top_k, self.activation, self.keep_hidden = top_k, activation, keep_hidden
        width = 2 * ffn if activation in ("swiglu", "geglu") else ffn
        self.router = torch.nn.Linear(hidden, experts, bias=False, dtype=dtype)
        self.w_gate_up = torch.nn.Parameter(torch.randn(experts, hidden, width, dtype=dtype) / math.sqrt(hidden))
        self.w_down = torch.nn.Parameter(torch.randn(experts, ffn, hidden, dtype=dtype) / math.sqrt(ffn))

    def route(self, x):
        """(expert ids [T, k] int32, gates [T, k] float32) of tokens x [T, H]."""
        logits = self.router(x).float()
        top, ids = logits.topk(self.top_k, dim=-1)
        return ids.to(torch.int32), torch.softmax(top, dim=-1)

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1]).contiguous()
        ids, gates = self.route(tokens)
        args = (tokens, ids, gates, self.w_gate_up, self.w_down, self.activation)
        grads = torch.is_grad_enabled() and any(t.requires_grad for t in (tokens, gates, self.w_gate_up, self.w_down))
        y = torch_ops.moe_ffn_keeping(*args)[0] if self.keep_hidden and grads else torch_ops.moe_ffn(*args)
        return y.reshape(x.shape)
