"""O experimento do capítulo 2: por que dividir os scores por √d_k.

Mede, com as implementações de referência de ``transformer_course.attention``, o desvio dos
scores, a entropia do softmax e o gradiente que atravessa o softmax, com e sem a divisão; a
figura do capítulo (``plots.scaling_figure``) e o controle de d_k (``widgets.dk_widget``)
desenham estes números.
"""

from __future__ import annotations

import math

import torch

from ..attention import attention_entropy, scaled_dot_product_attention
from ..runtime import seeded_generator

__all__ = ["dk_weight_maps", "scaling_statistics", "softmax_jacobian_norm"]


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
    gen = seeded_generator(seed)
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


def dk_weight_maps(
    d_ks: list[int], seq_len: int = 8, seed: int = 1
) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """Para cada d_k, os pesos de ``seq_len`` consultas sobre ``seq_len`` chaves aleatórias.

    Returns:
        ``{d_k: (sem escala, com escala)}``, cada um (T, T): softmax(q·kᵀ) e os pesos da
        atenção de referência, softmax(q·kᵀ/√d_k).
    """
    gen = seeded_generator(seed)
    maps = {}
    for d_k in d_ks:
        q = torch.randn(seq_len, d_k, generator=gen)
        k = torch.randn(seq_len, d_k, generator=gen)
        raw = (q @ k.transpose(-2, -1)).softmax(-1)  # (T, Dk) @ (Dk, T) -> (T, T)
        maps[d_k] = (raw, scaled_dot_product_attention(q, k, k)[1])
    return maps
