"""Atenção por produto escalar escalado (capítulo 2).

Formas: ``...`` são eixos de lote quaisquer (B, ou B e H); Tq comprimento das
consultas, Tk comprimento das chaves, Dk largura de Q e K, Dv largura de V.
"""

from __future__ import annotations

import math

import torch


def scaled_dot_product_attention(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
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
    weights = scores.softmax(dim=-1)
    return weights @ V, weights  # (..., Tq, Tk) @ (..., Tk, Dv) -> (..., Tq, Dv)


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropia (em nats) de cada linha de pesos, com 0·log 0 = 0.

    Formas:
        weights: (..., Tk), cada linha uma distribuição
        devolve: (...,)
    """
    logs = torch.where(weights > 0, weights.log(), torch.zeros_like(weights))
    return -(weights * logs).sum(dim=-1)


def softmax_jacobian_norm(scores: torch.Tensor) -> torch.Tensor:
    """Norma de Frobenius do jacobiano do softmax, ∂p/∂s = diag(p) − p·pᵀ, por linha.

    Mede quanto gradiente passa pelo softmax: perto de 0 quando ele satura.

    Formas:
        scores: (..., Tk); devolve: (...,)
    """
    p = scores.softmax(dim=-1)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., Tk, Tk)
    return jac.flatten(-2).norm(dim=-1)


def scaling_statistics(
    d_ks: list[int], n_keys: int = 16, n_queries: int = 512, seed: int = 0
) -> dict[str, torch.Tensor]:
    """O experimento do √d_k: scores, entropia e gradiente, com e sem a divisão.

    Para cada d_k, sorteia q e k com componentes N(0, 1) e mede, sobre ``n_queries``
    consultas contra ``n_keys`` chaves: o desvio padrão dos scores, a entropia média
    do softmax e a norma média do jacobiano do softmax.

    Returns:
        dicionário de tensores (len(d_ks),): ``std_raw``, ``std_scaled``,
        ``entropy_raw``, ``entropy_scaled``, ``grad_raw``, ``grad_scaled``.
    """
    gen = torch.Generator().manual_seed(seed)
    stats: dict[str, list[float]] = {
        k: [] for k in ("std_raw", "std_scaled", "entropy_raw", "entropy_scaled", "grad_raw", "grad_scaled")
    }
    for d_k in d_ks:
        q = torch.randn(n_queries, 1, d_k, generator=gen)
        k = torch.randn(n_queries, n_keys, d_k, generator=gen)
        raw = (q @ k.transpose(-2, -1)).squeeze(-2)  # (N, 1, Dk) @ (N, Dk, Tk) -> (N, Tk)
        for tag, s in (("raw", raw), ("scaled", raw / math.sqrt(d_k))):
            stats[f"std_{tag}"].append(s.std().item())
            stats[f"entropy_{tag}"].append(attention_entropy(s.softmax(-1)).mean().item())
            stats[f"grad_{tag}"].append(softmax_jacobian_norm(s).mean().item())
    return {key: torch.tensor(values) for key, values in stats.items()}
