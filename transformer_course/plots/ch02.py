"""Figuras do capítulo 2 (atenção)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

from .common import PALETTE, br_axes, to_numpy

__all__ = ["scaling_figure", "soft_lookup_bars"]


def soft_lookup_bars(key_labels: Sequence[str], weights: torch.Tensor, title: str) -> Figure:
    """Barras com os pesos que uma consulta dá a cada chave."""
    fig = Figure(figsize=(5.5, 2.8), layout="constrained")
    ax = fig.add_subplot()
    ax.bar(list(key_labels), to_numpy(weights), color=PALETTE[0])
    ax.set_ylim(0, 1)
    ax.set_ylabel("peso de atenção")
    ax.set_xlabel("chave")
    ax.set_title(title)
    return br_axes(fig)


def scaling_figure(d_ks: Sequence[int], stats: dict[str, torch.Tensor], n_keys: int) -> Figure:
    """Três painéis do experimento do √d_k: desvio dos scores, entropia, gradiente."""
    fig = Figure(figsize=(13, 3.8), layout="constrained")
    axes = fig.subplots(1, 3)
    panels = [
        ("std", "desvio padrão dos scores", "Escala dos scores"),
        ("entropy", "entropia média (nats)", "Entropia do softmax"),
        ("grad", "‖∂softmax/∂scores‖ média", "Gradiente que atravessa o softmax"),
    ]
    for ax, (key, ylabel, title) in zip(axes, panels):
        ax.plot(d_ks, to_numpy(stats[f"{key}_raw"]), "o-", color=PALETTE[3], label="sem escala: q·k")
        ax.plot(d_ks, to_numpy(stats[f"{key}_scaled"]), "s-", color=PALETTE[0], label="com escala: q·k/√d_k")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d_k")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("log", base=2)
    axes[1].axhline(np.log(n_keys), ls="--", color="gray", label=f"máximo: ln {n_keys}")
    axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=8)
    return br_axes(fig)
