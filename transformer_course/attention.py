"""Atenção por produto escalar escalado (capítulo 2): as respostas-modelo dos dois exercícios.

Formas: ``...`` são eixos de lote quaisquer (B, ou B e H); Tq comprimento das
consultas, Tk comprimento das chaves, Dk largura de Q e K, Dv largura de V. As duas funções
são, linha a linha, as respostas-modelo do notebook (sem anotações de tipo, como o aluno as vê).

As medidas do experimento do √d_k (jacobiano do softmax, estatísticas por d_k) ficam em
``transformer_course.experiments.ch02``.
"""

from __future__ import annotations

import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    """Calcula softmax(Q·Kᵀ/√d_k)·V e devolve a saída e os pesos de atenção.

    Formas:
        Q: (..., Tq, Dk); K: (..., Tk, Dk); V: (..., Tk, Dv)
        mask: booleana, True = pode atender, difundível para (..., Tq, Tk)
        devolve: saída (..., Tq, Dv) e pesos (..., Tq, Tk)
    """
    d_k = Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., Tq, Dk) @ (..., Dk, Tk) -> (..., Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    output = weights @ V  # (..., Tq, Tk) @ (..., Tk, Dv) -> (..., Tq, Dv)
    return output, weights


def attention_entropy(weights):
    """Entropia (em nats) de cada linha de pesos, com 0·log 0 = 0.

    Formas:
        weights: (..., Tk), cada linha uma distribuição
        devolve: (...,)
    """
    # xlogy(p, p) = p·log p, e vale 0 quando p = 0: as posições mascaradas não viram NaN.
    return -torch.special.xlogy(weights, weights).sum(dim=-1)
