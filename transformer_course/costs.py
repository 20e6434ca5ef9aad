"""Quanto custa a atenção e quanto um modelo maior promete (capítulo 7).

- :func:`attention_cost`: FLOPs da atenção (todas as cabeças) e bytes dos scores de uma cabeça.
- :func:`naive_attention`: a atenção escrita com a matriz de scores explícita (o tempo e a
  memória dela, contra ``F.scaled_dot_product_attention``, são medidos em ``experiments.ch07``).
- :func:`count_parameters`: parâmetros treináveis, com ou sem os *embeddings* (o N de Kaplan).
- :func:`kaplan_loss`: a lei de escala de Kaplan et al. (2020) em função de N.

Formas: B lote, H cabeças, T comprimento, Dk largura de cada cabeça.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = ["attention_cost", "count_parameters", "kaplan_loss", "naive_attention"]


def kaplan_loss(n_params):
    """Perda prevista (nats por token) pela lei L(N) = (N_c / N)^α_N de Kaplan et al. (2020).

    Vale para modelos treinados até convergir em dados suficientes (WebText2, tokens BPE);
    N conta os parâmetros sem os *embeddings*.
    """
    if n_params <= 0:
        raise ValueError(f"n_params deve ser positivo; recebido {n_params}.")
    N_c, alpha_N = 8.8e13, 0.076  # Kaplan et al. (2020), tabela 5: parâmetros sem embeddings
    return float((N_c / n_params) ** alpha_N)


def attention_cost(seq_len, d_model):
    """FLOPs de QKᵀ e pesos·V e bytes de uma matriz de scores n×n em float32.

    Com H cabeças de largura Dk = d_model / H, cada cabeça faz 2·n²·Dk FLOPs em cada produto
    (multiplicação-soma = 2 FLOPs); somadas as cabeças, 2·n²·d_model por produto, qualquer que
    seja H. Então ``flops`` = 4·n²·d_model são os dois produtos da camada inteira, e
    ``score_bytes`` = 4·n² é a matriz de **uma** cabeça (a camada guarda H delas). As projeções
    W_Q, W_K, W_V e W_O, que não entram aqui, somam mais 8·n·d_model² FLOPs: a camada de atenção
    custa 4·n²·d_model + 8·n·d_model², e os termos em n² passam os das projeções quando n > 2·d_model.
    """
    if seq_len <= 0 or d_model <= 0:
        raise ValueError(f"seq_len e d_model devem ser positivos; recebidos {seq_len} e {d_model}.")
    scores = 2 * seq_len * seq_len * d_model  # QKᵀ: n² produtos escalares de d termos
    mix = 2 * seq_len * seq_len * d_model  # pesos·V
    return {"flops": scores + mix, "score_bytes": 4 * seq_len * seq_len}


def count_parameters(
    model: torch.nn.Module, exclude_embeddings: bool = False, exclude: Sequence[torch.nn.Module] = ()
) -> int:
    """Número de parâmetros treináveis.

    Args:
        exclude_embeddings: não conta as tabelas ``nn.Embedding`` (de tokens e de posições).
        exclude: outros módulos cujos parâmetros não contam. O N de Kaplan et al. (2020) exclui
            os *embeddings* de vocabulário e de posição; na tabela 1 deles, a projeção de saída
            para o vocabulário ("de-embed") não tem parâmetros próprios, pois é a mesma matriz do
            *embedding* de tokens. Num modelo em que ela é separada (o ``TinyGPT``, ``model.head``),
            o N comparável também a exclui: ``exclude=[model.head]``.
    """
    skip = {id(p) for m in exclude for p in m.parameters()}
    if exclude_embeddings:
        skip |= {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    return sum(p.numel() for p in model.parameters() if p.requires_grad and id(p) not in skip)


def naive_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """Atenção que materializa a matriz de scores (T, T) inteira.

    Formas:
        Q, K, V (..., T, Dk) -> (..., T, Dk)
    """
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))  # (..., T, Dk) @ (..., Dk, T) -> (..., T, T)
    return scores.softmax(dim=-1) @ V  # (..., T, T) @ (..., T, Dk) -> (..., T, Dk)
