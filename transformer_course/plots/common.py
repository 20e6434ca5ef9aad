"""Peças comuns das figuras: paleta, mapas de cor e o mapa de calor de atenção.

Usamos ``matplotlib.figure.Figure`` diretamente (sem ``pyplot``): a figura
aparece uma vez só, quando a célula termina com ela, e não acumula memória.
Mapas de cor seguros para daltônicos: ``viridis``/``cividis`` (sequenciais)
e ``RdBu`` (divergente); cores de linhas da paleta ``colorblind`` do seaborn.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

__all__ = ["DIVERGING", "PALETTE", "SEQUENTIAL", "attention_heatmap", "to_numpy"]

# A paleta ``colorblind`` do seaborn, escrita aqui: importar o seaborn (e o pandas que ele puxa)
# custa mais que o resto das figuras; ele só é importado quando um mapa de calor anotado é desenhado.
PALETTE = [
    to_rgb(c)
    for c in (
        "#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc",
        "#ca9161", "#fbafe4", "#949494", "#ece133", "#56b4e9",
    )
]  # fmt: skip
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
    import seaborn as sns

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
