"""Peças comuns das figuras: paleta, mapas de cor e o mapa de calor de atenção.

Usamos ``matplotlib.figure.Figure`` diretamente (sem ``pyplot``): a figura
aparece uma vez só, quando a célula termina com ela, e não acumula memória.
Mapas de cor seguros para daltônicos: ``viridis``/``cividis`` (sequenciais)
e ``RdBu`` (divergente); cores de linhas da paleta ``colorblind`` do seaborn.
Todo número que a figura escreve (marcas dos eixos, barras de cor, anotações, legendas)
sai no formato brasileiro, por ``transformer_course.numbers`` (:func:`br_axes`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

from ..numbers import br, br_formatter

__all__ = ["DIVERGING", "PALETTE", "SEQUENTIAL", "attention_heatmap", "br_axes", "to_numpy"]

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


def br_axes(fig: Figure) -> Figure:
    """Marcas numéricas de todos os eixos de ``fig`` (barras de cor incluídas) com vírgula decimal.

    Troca só o formatador padrão (``ScalarFormatter``, que escreve "0.5"): eixos com rótulos de
    texto (palavras) ou em escala log (potências, sem casas decimais) ficam como estão. Chame
    depois de montar a figura; uma barra de cor refeita do zero volta ao formatador padrão.
    """
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(axis.get_major_formatter(), ScalarFormatter):
                axis.set_major_formatter(br_formatter())
    return fig


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
    values = to_numpy(weights)
    labels = np.vectorize(lambda v: br(v, ".2f"))(values) if annotate else False
    sns.heatmap(
        values,
        ax=ax,
        cmap=SEQUENTIAL,
        vmin=0.0,
        vmax=1.0,
        annot=labels,
        fmt="",
        xticklabels=list(key_labels),
        yticklabels=list(query_labels),
        square=False,
        cbar_kws={"label": "peso"},
        annot_kws={"fontsize": 8},
    )
    ax.set_xlabel("chave (posição atendida)")
    ax.set_ylabel("consulta (posição que atende)")
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=45)
    ax.tick_params(axis="y", rotation=0)
    return br_axes(fig)
