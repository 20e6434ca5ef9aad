"""Figuras do capítulo 1 (embeddings e codificações de posição)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

from ..numbers import br
from .common import DIVERGING, PALETTE, SEQUENTIAL, br_axes, to_numpy

__all__ = [
    "alibi_figure",
    "embedding_scale_figure",
    "rope_figure",
    "similarity_figure",
    "sinusoidal_figure",
]


def _period(x: float) -> str:
    """Um período em posições: uma casa decimal abaixo de 100, inteiro acima.

    Sem ponto de milhar ("1987", não "1.987"): com quatro algarismos a norma brasileira dispensa o
    separador, e numa legenda técnica "1.987" se confunde com um decimal.
    """
    return br(x, ".1f") if x < 100 else br(x, ".0f")


def sinusoidal_figure(pe: torch.Tensor, dims: Sequence[int] = (0, 1, 10, 30), curve_len: int = 50) -> Figure:
    """Mapa de calor da tabela senoidal (posição × dimensão) e algumas colunas como curvas.

    As curvas mostram só as ``curve_len`` primeiras posições, para o par 0 ficar legível.
    """
    table = to_numpy(pe)
    max_len, d_model = table.shape
    fig = Figure(figsize=(12, 4), layout="constrained")
    ax_map, ax_curves = fig.subplots(1, 2, width_ratios=[1.1, 1])
    image = ax_map.imshow(table, cmap=DIVERGING, vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    ax_map.set_xlabel("dimensão j (par i = j // 2)")
    ax_map.set_ylabel("posição p")
    ax_map.set_title(f"Codificação senoidal: {max_len} posições × d_model = {d_model}")
    fig.colorbar(image, ax=ax_map, label="PE[p, j]", shrink=0.9)
    positions = np.arange(min(curve_len, max_len))
    for color, j in zip(PALETTE, dims):
        i = j // 2
        period = 2 * math.pi * 10000 ** (2 * i / d_model)
        kind = "sen" if j % 2 == 0 else "cos"
        ax_curves.plot(
            positions,
            table[: len(positions), j],
            "o-" if j < 2 else "-",
            ms=3,
            color=color,
            lw=1.5,
            label=f"j = {j} ({kind}, par {i}, período ≈ {_period(period)})",
        )
    ax_curves.set_xlabel("posição p")
    ax_curves.set_ylabel("PE[p, j]")
    ax_curves.set_ylim(-1.15, 1.75)
    ax_curves.set_yticks([-1, -0.5, 0, 0.5, 1])
    ax_curves.set_title("Algumas colunas: o par 0 oscila mais rápido")
    ax_curves.legend(fontsize=8, loc="upper center", ncols=2)
    ax_curves.grid(alpha=0.3)
    return br_axes(fig)


def similarity_figure(
    matrices: Mapping[str, torch.Tensor], title: str = "", label: str = "similaridade do cosseno"
) -> Figure:
    """Matrizes (T, T) lado a lado: quem se parece com quem, posição contra posição."""
    n = len(matrices)
    fig = Figure(figsize=(4.2 * n + 0.8, 4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, n))
    image = None
    for ax, (name, matrix) in zip(axes, matrices.items()):
        image = ax.imshow(to_numpy(matrix), cmap=DIVERGING, vmin=-1, vmax=1, interpolation="nearest")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("posição j")
        ax.set_ylabel("posição i")
    fig.colorbar(image, ax=list(axes), label=label, shrink=0.9)
    if title:
        fig.suptitle(title)
    return br_axes(fig)


def embedding_scale_figure(norms: Mapping[str, float], reference: float, reference_label: str) -> Figure:
    """Barras horizontais: norma média dos vetores de cada receita de embedding, contra a da PE."""
    fig = Figure(figsize=(8, 0.6 + 0.55 * len(norms)), layout="constrained")
    ax = fig.add_subplot()
    names = list(norms)
    values = [norms[k] for k in names]
    ax.barh(names, values, color=PALETTE[0])
    ax.axvline(reference, color=PALETTE[3], ls="--", label=reference_label)
    for y, v in enumerate(values):
        ax.text(v, y, f" {br(v, '.1f')}", va="center", fontsize=9)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("norma média de um vetor (escala log)")
    ax.set_title("Escala dos embeddings contra a escala da codificação posicional")
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.28), frameon=False)
    return br_axes(fig)


def rope_figure(
    pair_points: Mapping[str, torch.Tensor], offsets: torch.Tensor, scores: Mapping[str, torch.Tensor]
) -> Figure:
    """RoPE em duas vistas.

    Esquerda: um par (x[2i], x[2i+1]) girado nas posições 0, 1, 2… (um rastro por par escolhido).
    Direita: ⟨RoPE(q, m), RoPE(k, n)⟩ contra m − n, uma curva por posição absoluta n.
    """
    fig = Figure(figsize=(12, 4.2), layout="constrained")
    ax_rot, ax_score = fig.subplots(1, 2, width_ratios=[1, 1.6])
    circle = np.linspace(0, 2 * np.pi, 200)
    ax_rot.plot(np.cos(circle), np.sin(circle), color="lightgray", lw=1)
    for color, (name, points) in zip(PALETTE, pair_points.items()):
        pts = to_numpy(points)
        ax_rot.plot(pts[:, 0], pts[:, 1], "o-", color=color, ms=4, lw=1, label=name)
        labelled = range(len(pts)) if color == PALETTE[0] else (0, len(pts) - 1)
        for p in labelled:
            offset = (5, 3) if color == PALETTE[0] else (8, -10)
            ax_rot.annotate(
                f"p={p}", pts[p], fontsize=8, color=color, xytext=offset, textcoords="offset points"
            )
    ax_rot.set_aspect("equal")
    ax_rot.set_xlim(-1.3, 1.3)
    ax_rot.set_ylim(-1.3, 1.3)
    ax_rot.set_xlabel("x[2i]")
    ax_rot.set_ylabel("x[2i+1]")
    ax_rot.set_title("Um par girado nas posições p = 0 … 7")
    ax_rot.legend(fontsize=8, loc="lower left")
    styles = ["-", "--", ":", "-."]
    for k, (name, values) in enumerate(scores.items()):
        ax_score.plot(
            to_numpy(offsets), to_numpy(values), styles[k % 4], color=PALETTE[k], lw=2 - 0.3 * k, label=name
        )
    ax_score.set_xlabel("deslocamento m − n")
    ax_score.set_ylabel("⟨RoPE(q, m), RoPE(k, n)⟩")
    ax_score.set_title("O score só depende de m − n: as curvas se sobrepõem")
    ax_score.legend(fontsize=8)
    ax_score.grid(alpha=0.3)
    return br_axes(fig)


def alibi_figure(slopes: torch.Tensor, bias: torch.Tensor, heads: Sequence[int] = (0, -1)) -> Figure:
    """ALiBi: o viés de duas cabeças e, à direita, a atenção que ele sozinho produz na última consulta."""
    n_heads, seq_len, _ = bias.shape
    fig = Figure(figsize=(13, 3.9), layout="constrained")
    axes = fig.subplots(1, 3, width_ratios=[1, 1, 1.3])
    for ax, h in zip(axes[:2], heads):
        h = h % n_heads
        image = ax.imshow(to_numpy(bias[h]), cmap=SEQUENTIAL, interpolation="nearest")
        ax.set_title(f"viés da cabeça {h + 1} (m = {br(slopes[h].item(), '.3g')})", fontsize=10)
        ax.set_xlabel("chave j")
        ax.set_ylabel("consulta i")
        fig.colorbar(image, ax=ax, shrink=0.85, label="−m·|i − j|")
    last = bias[:, -1, :].softmax(-1)  # a última consulta, só com o viés: (H, T)
    keys = np.arange(seq_len)
    for h in range(n_heads):
        axes[2].plot(
            keys,
            to_numpy(last[h]),
            color=PALETTE[h % len(PALETTE)],
            lw=1.5,
            label=f"cabeça {h + 1}: m = {br(slopes[h].item(), '.3g')}",
        )
    axes[2].set_xlabel("chave j")
    axes[2].set_ylabel("peso de atenção")
    axes[2].set_title(f"softmax(viés) da consulta i = {seq_len - 1}, scores de conteúdo nulos", fontsize=10)
    axes[2].legend(fontsize=7, ncols=2)
    axes[2].grid(alpha=0.3)
    return br_axes(fig)
