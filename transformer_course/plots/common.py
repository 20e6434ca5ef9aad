"""Peças comuns das figuras: paleta, mapas de cor e o mapa de calor de atenção.

Usamos ``matplotlib.figure.Figure`` diretamente (sem ``pyplot``): a figura
aparece uma vez só, quando a célula termina com ela, e não acumula memória.
Mapas de cor seguros para daltônicos: ``viridis``/``cividis`` (sequenciais)
e ``RdBu`` (divergente); cores de linhas da paleta ``colorblind`` do seaborn.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import seaborn as sns
import torch
from matplotlib.figure import Figure

__all__ = ["DIVERGING", "PALETTE", "SEQUENTIAL", "attention_heatmap", "to_numpy"]

PALETTE = sns.color_palette("colorblind")
SEQUENTIAL = "viridis"
DIVERGING = "RdBu_r"


def to_numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def attention_heatmap(
    weights: torch.Tensor,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    title: str = "Pesos de atenção",
    annotate: bool = True,
    ax=None,
) -> Figure:
    """Mapa de calor de uma matriz de pesos (linhas = consultas, colunas = chaves)."""
    if ax is None:
        size = (1.0 + 0.6 * len(key_labels), 0.8 + 0.5 * len(query_labels))
        fig = Figure(figsize=size, layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    sns.heatmap(
        to_numpy(weights),
        ax=ax,
        cmap=SEQUENTIAL,
        vmin=0.0,
        vmax=1.0,
        annot=annotate,
        fmt=".2f",
        xticklabels=list(key_labels),
        yticklabels=list(query_labels),
        square=False,
        cbar_kws={"label": "peso"},
        annot_kws={"fontsize": 8},
    )
    ax.set_xlabel("chave (posição atendida)")
    ax.set_ylabel("consulta (quem pergunta)")
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=45)
    ax.tick_params(axis="y", rotation=0)
    return fig
