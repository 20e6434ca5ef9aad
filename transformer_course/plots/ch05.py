"""Figuras do capítulo 5 (máscaras)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..numbers import br, br_formatter
from .common import PALETTE, SEQUENTIAL, to_numpy

__all__ = ["MASK_CMAP", "NAN_COLOR", "draw_mask", "mask_panels", "nan_heatmaps"]

# bloqueado = cinza claro, pode atender = azul (paleta colorblind)
MASK_CMAP = ListedColormap(["#e6e6e6", PALETTE[0]])
NAN_COLOR = PALETTE[3]  # vermelhão: células NaN


def draw_mask(
    ax,
    mask: torch.Tensor,
    labels: Sequence[str] | None = None,
    title: str = "",
    xlabel: str = "chave (posição atendida)",
    ylabel: str = "consulta (quem pergunta)",
    row_labels: Sequence[str] | None = None,
) -> None:
    """Desenha uma máscara booleana 2-D: azul = pode atender, cinza = bloqueado.

    ``labels`` nomeia as colunas (chaves) e, se ``row_labels`` faltar, também as linhas (as
    primeiras T_q); numa máscara não quadrada, ``row_labels`` nomeia as consultas.
    """
    m = to_numpy(mask).astype(float)
    T_q, T_k = m.shape
    ax.imshow(m, cmap=MASK_CMAP, vmin=0, vmax=1, interpolation="nearest")
    if row_labels is None:
        row_labels = list(labels)[:T_q] if labels is not None else np.arange(T_q)
    ax.set_xticks(np.arange(T_k), labels=list(labels) if labels is not None else np.arange(T_k))
    ax.set_yticks(np.arange(T_q), labels=list(row_labels))
    ax.set_xticks(np.arange(-0.5, T_k), minor=True)
    ax.set_yticks(np.arange(-0.5, T_q), minor=True)
    ax.grid(which="minor", color="white", lw=1.5)
    ax.tick_params(which="minor", length=0)
    ax.tick_params(axis="x", rotation=45 if labels is not None else 0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def mask_panels(
    masks: Sequence[torch.Tensor],
    titles: Sequence[str],
    labels: Sequence[str] | None = None,
    xlabel: str = "chave (posição atendida)",
    ylabel: str = "consulta (quem pergunta)",
    legend: tuple[str, str] = ("pode atender (True)", "bloqueado (False)"),
    suptitle: str = "",
    row_labels: Sequence[str] | None = None,
) -> Figure:
    """Várias máscaras 2-D lado a lado, com a mesma legenda de cores.

    Máscaras mais largas que altas (menos consultas que chaves) ganham uma figura mais baixa.
    """
    n = len(masks)
    rows, cols = max(m.shape[0] for m in masks), max(m.shape[1] for m in masks)
    fig = Figure(figsize=(3.6 * n + 0.4, 1.9 + 2.0 * min(rows / cols, 1.0)), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, n))
    for ax, mask, title in zip(axes, masks, titles):
        draw_mask(ax, mask, labels, title, xlabel, ylabel, row_labels)
    handles = [Patch(color=PALETTE[0], label=legend[0]), Patch(color="#e6e6e6", label=legend[1])]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def nan_heatmaps(
    weights: Sequence[torch.Tensor],
    titles: Sequence[str],
    labels: Sequence[str] | None = None,
) -> Figure:
    """Mapas de calor de pesos lado a lado; células NaN em vermelhão, com o texto "NaN"."""
    n = len(weights)
    fig = Figure(figsize=(3.7 * n + 0.8, 3.8), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, n))
    cmap = matplotlib.colormaps[SEQUENTIAL].with_extremes(bad=NAN_COLOR)
    image = None
    for ax, w, title in zip(axes, weights, titles):
        a = to_numpy(w).astype(float)
        image = ax.imshow(np.ma.masked_invalid(a), cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
        T_q, T_k = a.shape
        for i in range(T_q):
            for j in range(T_k):
                v = a[i, j]
                text = br(v, ".2f")  # "0,25"; uma célula NaN sai "NaN"
                color = "white" if np.isnan(v) or v < 0.6 else "black"
                ax.text(j, i, text, ha="center", va="center", fontsize=7, color=color)
        ticks = list(labels) if labels is not None else list(range(T_k))
        ax.set_xticks(np.arange(T_k), labels=ticks[:T_k])
        ax.set_yticks(np.arange(T_q), labels=ticks[:T_q])
        ax.tick_params(axis="x", rotation=45 if labels is not None else 0)
        ax.set_xlabel("chave")
        ax.set_ylabel("consulta")
        ax.set_title(title)
    fig.colorbar(image, ax=list(axes), label="peso", shrink=0.85, format=br_formatter())
    return fig
