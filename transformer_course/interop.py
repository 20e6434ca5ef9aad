"""Interoperação com o PyTorch: pesos dos módulos do ``torch.nn`` e máscaras na convenção dele.

O curso usa máscaras booleanas com True = pode atender e projeções ``W_Q``, ``W_K``, ``W_V``,
``W_O`` separadas; o PyTorch usa True = BLOQUEADO (ou máscaras aditivas) e ``in_proj_weight``
empilhado. As conversões moram só aqui: os modelos, as verificações e os notebooks as importam.
Este módulo só depende do PyTorch (funciona com os módulos do aluno e com os do pacote).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = [
    "from_key_padding_mask",
    "load_decoder_layer_from_torch",
    "load_encoder_layer_from_torch",
    "load_from_torch",
    "to_additive_mask",
    "to_key_padding_mask",
    "to_mha_attn_mask",
]

# ---------------------------------------------------------------- pesos do PyTorch


@torch.no_grad()
def load_from_torch(mha: nn.Module, torch_mha: nn.MultiheadAttention) -> nn.Module:
    """Copia os pesos de um ``nn.MultiheadAttention`` para ``mha`` e devolve ``mha``.

    O PyTorch guarda W_Q, W_K e W_V empilhadas em ``in_proj_weight`` (3D × D), nessa
    ordem, e W_O em ``out_proj``. Funciona com qualquer módulo que tenha os atributos
    ``W_Q``, ``W_K``, ``W_V`` e ``W_O`` (``nn.Linear``), inclusive o do aluno.

    Raises:
        ValueError: se as larguras, o número de cabeças ou a presença de viés diferem.
    """
    D = torch_mha.embed_dim
    if mha.W_Q.weight.shape != (D, D) or getattr(mha, "n_heads", torch_mha.num_heads) != torch_mha.num_heads:
        raise ValueError(
            f"formas incompatíveis: W_Q {tuple(mha.W_Q.weight.shape)} e {getattr(mha, 'n_heads', '?')} "
            f"cabeças; o nn.MultiheadAttention tem d_model = {D} e {torch_mha.num_heads} cabeças."
        )
    if (mha.W_Q.bias is None) != (torch_mha.in_proj_bias is None):
        raise ValueError("um dos módulos tem viés (bias) e o outro não.")
    if torch_mha.in_proj_weight is not None:
        weights = torch_mha.in_proj_weight.chunk(3)
    else:  # kdim/vdim diferentes de embed_dim: três matrizes separadas
        weights = (torch_mha.q_proj_weight, torch_mha.k_proj_weight, torch_mha.v_proj_weight)
    biases = (None,) * 3 if torch_mha.in_proj_bias is None else torch_mha.in_proj_bias.chunk(3)
    for linear, w, b in zip((mha.W_Q, mha.W_K, mha.W_V), weights, biases):
        linear.weight.copy_(w)
        if b is not None:
            linear.bias.copy_(b)
    mha.W_O.weight.copy_(torch_mha.out_proj.weight)
    if mha.W_O.bias is not None:
        mha.W_O.bias.copy_(torch_mha.out_proj.bias)
    return mha


@torch.no_grad()
def _load_common(ours: nn.Module, theirs: nn.Module, norms: tuple[str, ...]) -> None:
    load_from_torch(ours.self_attn, theirs.self_attn)
    for name in ("linear1", "linear2"):
        getattr(ours.ffn, name).weight.copy_(getattr(theirs, name).weight)
        getattr(ours.ffn, name).bias.copy_(getattr(theirs, name).bias)
    for name in norms:
        getattr(ours, name).weight.copy_(getattr(theirs, name).weight)
        getattr(ours, name).bias.copy_(getattr(theirs, name).bias)


def load_encoder_layer_from_torch(layer: nn.Module, torch_layer: nn.TransformerEncoderLayer) -> nn.Module:
    """Copia os pesos de um ``nn.TransformerEncoderLayer`` para uma camada com a API do curso.

    ``layer`` precisa dos atributos ``self_attn`` (com W_Q, W_K, W_V, W_O), ``ffn``
    (com ``linear1``, ``linear2``), ``norm1`` e ``norm2``. Devolve ``layer``.
    """
    _load_common(layer, torch_layer, ("norm1", "norm2"))
    return layer


def load_decoder_layer_from_torch(layer: nn.Module, torch_layer: nn.TransformerDecoderLayer) -> nn.Module:
    """Copia os pesos de um ``nn.TransformerDecoderLayer`` (``multihead_attn`` vira ``cross_attn``)."""
    _load_common(layer, torch_layer, ("norm1", "norm2", "norm3"))
    load_from_torch(layer.cross_attn, torch_layer.multihead_attn)
    return layer


# ---------------------------------------------------------------- máscaras


def to_additive_mask(
    mask: torch.Tensor, dtype: torch.dtype = torch.float32, fill: float = float("-inf")
) -> torch.Tensor:
    """Máscara booleana (True = pode atender) -> máscara aditiva: 0 onde pode, ``fill`` onde não.

    É o que ``F.scaled_dot_product_attention`` aceita como ``attn_mask`` float (somado
    aos scores) e o formato de ``nn.Transformer.generate_square_subsequent_mask``.
    """
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~mask, fill)


def to_mha_attn_mask(
    mask: torch.Tensor, n_heads: int | None = None, q_len: int | None = None
) -> torch.Tensor:
    """Máscara do curso -> ``attn_mask`` booleano de ``nn.MultiheadAttention`` (True = BLOQUEADO).

    ``nn.MultiheadAttention`` não difunde: quer (Tq, Tk) ou (B·H, Tq, Tk). Uma máscara
    de padding (B, 1, 1, Tk) precisa de ``q_len`` para virar (B·H, Tq, Tk) — ou vá por
    :func:`to_key_padding_mask`, que é o caminho natural.

    Formas:
        (Tq, Tk)              -> (Tq, Tk)
        (B, Tq, Tk)           -> (B·H, Tq, Tk)   (precisa de ``n_heads``)
        (B, 1 ou H, Tq, Tk)   -> (B·H, Tq, Tk)   (precisa de ``n_heads``; ``q_len`` se Tq = 1)
    """
    if mask.dim() == 2:
        return ~mask
    if mask.dim() not in (3, 4):
        raise ValueError(f"a máscara deve ter 2, 3 ou 4 eixos; recebida com forma {tuple(mask.shape)}.")
    if n_heads is None:
        raise ValueError("para uma máscara com eixo de lote, informe n_heads.")
    if mask.dim() == 3:
        mask = mask.unsqueeze(1)  # (B, Tq, Tk) -> (B, 1, Tq, Tk)
    B, _, Tq, Tk = mask.shape
    Tq = q_len if q_len is not None else Tq
    mask = mask.expand(B, n_heads, Tq, Tk)
    return ~mask.reshape(B * n_heads, Tq, Tk)  # (B, H, Tq, Tk) -> (B·H, Tq, Tk)


def to_key_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Máscara de padding do curso (B, 1, 1, T) -> ``key_padding_mask`` (B, T), True = padding."""
    if mask.dim() != 4 or mask.shape[1:3] != (1, 1):
        raise ValueError(f"esperava uma máscara de padding (B, 1, 1, T); recebida {tuple(mask.shape)}.")
    return ~mask[:, 0, 0, :]  # (B, 1, 1, T) -> (B, T)


def from_key_padding_mask(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """``key_padding_mask`` (B, T), True = padding -> máscara do curso (B, 1, 1, T), True = real."""
    if key_padding_mask.dim() != 2:
        raise ValueError(f"esperava (B, T); recebida {tuple(key_padding_mask.shape)}.")
    return ~key_padding_mask[:, None, None, :]  # (B, T) -> (B, 1, 1, T)
