"""Medidas do capítulo 1 que alimentam as figuras e a exploração (widget).

- :func:`cosine_similarity_matrix`: quem se parece com quem, posição contra posição;
- :func:`toeplitz_deviation`: quanto essa matriz foge de depender só de i − j.
"""

from __future__ import annotations

import torch

__all__ = ["cosine_similarity_matrix", "toeplitz_deviation"]


def cosine_similarity_matrix(vectors: torch.Tensor) -> torch.Tensor:
    """Similaridade do cosseno entre todas as linhas: (T, D) -> (T, T)."""
    unit = vectors / vectors.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return unit @ unit.T  # (T, D) @ (D, T) -> (T, T)


def toeplitz_deviation(matrix: torch.Tensor) -> float:
    """Quanto uma matriz (T, T) foge de depender só de i − j: maior |M[i+1, j+1] − M[i, j]|.

    Vale 0 exatamente quando cada diagonal é constante (matriz de Toeplitz).
    """
    if matrix.size(0) < 2:
        return 0.0
    return (matrix[1:, 1:] - matrix[:-1, :-1]).abs().max().item()
