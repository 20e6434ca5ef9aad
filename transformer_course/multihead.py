"""Atenção com múltiplas cabeças (capítulo 3).

Formas: B lote, Tq/Tk comprimentos de consultas/chaves, D d_model, H cabeças, Dk = D/H.
Máscaras booleanas, True = pode atender: 2-D (Tq, Tk), 3-D (B, Tq, Tk) ganha o eixo
das cabeças, 4-D (B, 1 ou H, Tq, Tk) é usada como está.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import scaled_dot_product_attention


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Separa as cabeças: (B, T, D) -> (B, H, T, D/H)."""
    B, T, D = x.shape
    if n_heads <= 0 or D % n_heads != 0:
        raise ValueError(f"d_model = {D} não é divisível por n_heads = {n_heads}.")
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, T, H, Dk) -> (B, H, T, Dk)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Junta as cabeças: (B, H, T, Dk) -> (B, T, H·Dk). Inversa de :func:`split_heads`."""
    B, H, T, Dk = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dk)  # (B, H, T, Dk) -> (B, T, H, Dk) -> (B, T, D)


def _head_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    if mask is None or mask.dim() in (2, 4):
        return mask
    if mask.dim() == 3:
        return mask.unsqueeze(1)  # (B, Tq, Tk) -> (B, 1, Tq, Tk)
    raise ValueError(f"a máscara deve ter 2, 3 ou 4 eixos; recebida com forma {tuple(mask.shape)}.")


class MultiHeadAttention(nn.Module):
    """Atenção com múltiplas cabeças; igual a ``nn.MultiheadAttention(batch_first=True)``.

    Formas:
        query (B, Tq, D), key e value (B, Tk, D), mask difundível para (B, H, Tq, Tk)
        devolve: output (B, Tq, D) e weights (B, H, Tq, Tk)
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads != 0:
            raise ValueError(f"d_model = {d_model} não é divisível por n_heads = {n_heads}.")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        Q = split_heads(self.W_Q(query), self.n_heads)  # (B, Tq, D) -> (B, H, Tq, Dk)
        K = split_heads(self.W_K(key), self.n_heads)  # (B, Tk, D) -> (B, H, Tk, Dk)
        V = split_heads(self.W_V(value), self.n_heads)  # (B, Tk, D) -> (B, H, Tk, Dk)
        _, weights = scaled_dot_product_attention(Q, K, V, _head_mask(mask))
        output = self.dropout(weights) @ V  # (B, H, Tq, Tk) @ (B, H, Tk, Dk) -> (B, H, Tq, Dk)
        return self.W_O(merge_heads(output)), weights  # (B, H, Tq, Dk) -> (B, Tq, D)
