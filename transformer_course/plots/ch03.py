"""Figuras do capítulo 3 (atenção com múltiplas cabeças)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from ..multihead import split_heads
from ..numbers import br_percent
from .common import PALETTE, SEQUENTIAL, br_axes, to_numpy

__all__ = ["head_grid", "head_split_figure", "heads_tradeoff_figure"]


def head_split_figure(seq_len: int = 4, d_model: int = 8, n_heads: int = 2) -> Figure:
    """Separação das cabeças feita certo (view + transpose) e errado (view direto).

    Cada célula mostra de que token (t) e coluna (d) veio o número; a cor é o token.
    """
    d_k = d_model // n_heads
    token = torch.arange(seq_len).view(1, seq_len, 1).expand(1, seq_len, d_model)  # (1, T, D)
    column = torch.arange(d_model).view(1, 1, d_model).expand(1, seq_len, d_model)
    cells = torch.stack([token, column], dim=-1)[0].numpy()  # (T, D, 2)
    # certo: a separação do pacote, aplicada ao token e à coluna de cada número
    right = torch.stack([split_heads(token, n_heads)[0], split_heads(column, n_heads)[0]], dim=-1).numpy()
    wrong = cells.reshape(n_heads, seq_len, d_k, 2)  # view direto: (H, T, Dk, 2)
    cmap = ListedColormap(PALETTE[:seq_len])

    fig = Figure(figsize=(1.5 + 1.0 * d_model, 7.8), layout="constrained")
    grid = fig.add_gridspec(3, n_heads)

    def draw(ax, block, title, head_lines=False):
        ax.imshow(block[..., 0], cmap=cmap, vmin=-0.5, vmax=seq_len - 0.5, aspect="auto")
        for (i, j), _ in np.ndenumerate(block[..., 0]):
            t, d = block[i, j]
            ax.text(j, i, f"t{t}\nd{d}", ha="center", va="center", fontsize=7, color="black")
        ax.set_xticks(range(block.shape[1]))
        ax.set_yticks(range(block.shape[0]))
        ax.set_title(title, fontsize=10)
        if head_lines:
            for h in range(1, n_heads):
                ax.axvline(h * d_k - 0.5, color="black", lw=2.5)

    ax = fig.add_subplot(grid[0, :])
    draw(
        ax,
        cells,
        f"x: {seq_len} tokens × d_model = {d_model} colunas (a linha preta separa as colunas de cada cabeça)",
        head_lines=True,
    )
    ax.set_ylabel("token")
    ax.set_xlabel("coluna (d)")
    for h in range(n_heads):
        ax = fig.add_subplot(grid[1, h])
        draw(ax, right[h], f"certo — cabeça {h}: view + transpose")
        ax.set_ylabel("posição na cabeça")
        ax = fig.add_subplot(grid[2, h])
        draw(ax, wrong[h], f"errado — cabeça {h}: view direto")
        ax.set_ylabel("posição na cabeça")
        ax.set_xlabel("coluna dentro da cabeça (0 … d_k − 1)")
    fig.suptitle(
        "Cor = token de origem. Certo: cada cabeça vê todos os tokens, com as suas colunas.\n"
        "Errado: cada cabeça vê só parte dos tokens, misturados com colunas de outra cabeça",
        fontsize=11,
    )
    return br_axes(fig)


def head_grid(
    weights: torch.Tensor,
    tokens: Sequence[str],
    title: str = "",
    fig: Figure | None = None,
    max_cols: int = 4,
) -> Figure:
    """Grade de mapas de calor, um por cabeça. ``weights``: (H, Tq, Tk), linhas = consultas."""
    w = to_numpy(weights)
    H = w.shape[0]
    cols = min(H, max_cols)
    rows = math.ceil(H / cols)
    if fig is None:
        panel = 3.2 if H <= 4 else 2.5
        fig = Figure(figsize=(max(7.0, 1.4 + panel * cols), 1.0 + panel * rows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    image = None
    for h, ax in enumerate(axes):
        if h >= H:
            ax.set_visible(False)
            continue
        image = ax.imshow(w[h], cmap=SEQUENTIAL, vmin=0, vmax=1)
        ax.set_title(f"cabeça {h + 1}", fontsize=9)
        ax.set_xticks(range(len(tokens)))
        ax.set_yticks(range(len(tokens)))
        ax.set_xticklabels(tokens if h >= H - cols else [], rotation=60, fontsize=8)
        ax.set_yticklabels(tokens if h % cols == 0 else [], fontsize=8)
    axes[H - cols].set_xlabel("chave (palavra atendida)")
    axes[(rows - 1) * cols].set_ylabel("consulta")
    fig.colorbar(image, ax=axes[:H].tolist(), label="peso", shrink=0.8)
    if title:
        fig.suptitle(title, fontsize=11)
    return br_axes(fig)


def heads_tradeoff_figure(results: dict[int, dict], d_model: int) -> Figure:
    """À esquerda, parâmetros da atenção por número de cabeças; à direita, a acurácia na tarefa."""
    heads = sorted(results)
    labels = [f"H={h}\nd_k={d_model // h}" for h in heads]
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    ax_params, ax_acc = fig.subplots(1, 2)
    bottom = np.zeros(len(heads))
    per_matrix = d_model * d_model + d_model
    for i, name in enumerate(("W_Q", "W_K", "W_V", "W_O")):
        ax_params.bar(labels, [per_matrix] * len(heads), bottom=bottom, color=PALETTE[i], label=name)
        bottom += per_matrix
    totals = [results[h]["n_attention_params"] for h in heads]
    for x, total in enumerate(totals):
        ax_params.text(x, total, f"{total}", ha="center", va="bottom", fontsize=9)
    ax_params.set_ylim(0, max(totals) * 1.3)
    ax_params.set_ylabel("parâmetros da atenção")
    ax_params.set_title(f"4·d_model² + 4·d_model = {4 * per_matrix} (d_model = {d_model}), para todo H")
    ax_params.legend(fontsize=8, ncols=4, loc="upper center")
    acc = [100 * results[h]["accuracy"] for h in heads]
    ax_acc.plot(labels, acc, "o-", color=PALETTE[0])
    for x, a in enumerate(acc):
        ax_acc.text(x, a + 2, br_percent(a / 100, 0), ha="center", fontsize=9)
    ax_acc.axhline(100, ls="--", color="gray", lw=1)
    ax_acc.set_ylim(0, 112)
    ax_acc.set_ylabel("acurácia (%): anterior e seguinte")
    ax_acc.set_title("Tarefa dos vizinhos, mesmos parâmetros")
    return br_axes(fig)
