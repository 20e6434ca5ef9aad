"""Máscaras de atenção (capítulo 5). Convenção do curso: booleanas, True = pode atender.

Formas documentadas (uma só convenção, para não repetir o erro de máscaras com 5 eixos):
    causal:  (T, T)
    padding: (B, 1, 1, T)   — difunde sobre cabeças e consultas
    decoder: (B, 1, T, T)   — causal E padding
"""

from __future__ import annotations

import torch


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Máscara causal (T, T): True na diagonal e abaixo dela (cada posição vê o passado e a si)."""
    if seq_len <= 0:
        raise ValueError(f"seq_len deve ser positivo; recebido {seq_len}.")
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def padding_mask(token_ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """Máscara de padding (B, 1, 1, T): True nos tokens reais.

    Formas:
        token_ids: (B, T) -> (B, 1, 1, T)
    """
    return (token_ids != pad_id)[:, None, None, :]


def decoder_self_mask(token_ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """Máscara da autoatenção do decodificador (B, 1, T, T): causal E padding das chaves.

    Formas:
        token_ids: (B, T) -> (B, 1, T, T)
    """
    seq_len = token_ids.size(-1)
    return padding_mask(token_ids, pad_id) & causal_mask(seq_len, token_ids.device)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax no último eixo com posições bloqueadas = 0 e linhas todas bloqueadas = 0 (nunca NaN)."""
    if mask is None:
        return scores.softmax(dim=-1)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights.nan_to_num(nan=0.0).masked_fill(~mask, 0.0)
