"""Figuras do capítulo 6 (treino e aquecimento da taxa de aprendizado).

Números escritos em pt-BR (``numbers.br``): rótulos, legendas e as marcas dos eixos com casas decimais.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..numbers import br, br_formatter
from .common import PALETTE, to_numpy

__all__ = [
    "dataset_overview",
    "noam_curves",
    "training_curves",
    "warmup_experiment_figure",
]

CONDITION_COLORS = {"com aquecimento": PALETTE[0], "sem aquecimento": PALETTE[3]}


def dataset_overview(labels, lengths, n_classes: int, class_names: Sequence[str] | None = None) -> Figure:
    """Dois painéis: quantos exemplos há de cada classe e a distribuição dos comprimentos."""
    labels, lengths = to_numpy(labels), to_numpy(lengths)
    names = list(class_names) if class_names else [str(c) for c in range(n_classes)]
    fig = Figure(figsize=(10, 3.2), layout="constrained")
    ax_cls, ax_len = fig.subplots(1, 2)
    counts = np.bincount(labels, minlength=n_classes)
    bars = ax_cls.bar(names, counts, color=[PALETTE[i % len(PALETTE)] for i in range(n_classes)])
    ax_cls.bar_label(bars, fontsize=8)
    ax_cls.set_xlabel("classe")
    ax_cls.set_ylabel("exemplos")
    ax_cls.set_title("Equilíbrio das classes")
    edges = np.arange(lengths.min(), lengths.max() + 2) - 0.5
    ax_len.hist(lengths, bins=edges, color="0.55", edgecolor="white")
    ax_len.set_xlabel("comprimento (tokens reais, sem padding)")
    ax_len.set_ylabel("exemplos")
    ax_len.set_title("Comprimentos das sequências")
    return fig


def noam_curves(
    settings: Sequence[tuple[int, int, float]],
    lr_fn: Callable[[int, int, int, float], float],
    n_steps: int,
    title: str = "Agendamento de Noam",
) -> Figure:
    """Curvas lr × passo para várias configurações (d_model, warmup_steps, factor), com o pico marcado.

    Cada curva é calculada em ~500 passos igualmente espaçados, mais o passo do pico (a curva é
    suave, linear até o pico e 1/√passo depois): a figura sai igual à de todos os passos.
    """
    grid = np.unique(np.linspace(0, n_steps, 501).round().astype(int))
    fig = Figure(figsize=(8, 3.6), layout="constrained")
    ax = fig.add_subplot()
    top = 0.0
    for i, (d_model, warmup, factor) in enumerate(settings):
        color = PALETTE[i % len(PALETTE)]
        steps = np.union1d(grid, [warmup, warmup + 1])  # o bico do pico entra exatamente na curva
        lrs = [lr_fn(int(s), d_model, warmup, factor) for s in steps]
        label = f"d_model={d_model}, warmup={warmup}" + (f", factor={br(factor)}" if factor != 1 else "")
        ax.plot(steps, lrs, color=color, label=label)
        peak = lr_fn(warmup, d_model, warmup, factor)
        top = max(top, peak)
        ax.plot([warmup], [peak], "o", color=color, ms=6)
        ax.annotate(
            br(peak, ".1e"),
            (warmup, peak),
            textcoords="offset points",
            xytext=(4, 5),
            fontsize=8,
            color=color,
        )
    ax.set_ylim(0, 1.15 * top)
    ax.set_xlabel("passo de otimização")
    ax.set_ylabel("taxa de aprendizado")
    ax.set_title(title)
    ax.xaxis.set_major_formatter(br_formatter(",.0f"))  # "20.000"
    ax.yaxis.set_major_formatter(br_formatter())
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def training_curves(history, title: str = "Treino") -> Figure:
    """Três painéis de um ``History``: perdas por época, acurácias por época e a taxa por passo."""
    epochs = np.arange(1, len(history.train_loss) + 1)
    fig = Figure(figsize=(13, 3.6), layout="constrained")
    ax_loss, ax_acc, ax_lr = fig.subplots(1, 3)
    ax_loss.plot(epochs, history.train_loss, "o-", color=PALETTE[0], label="treino")
    ax_loss.plot(epochs, history.val_loss, "s--", color=PALETTE[1], label="validação")
    ax_acc.plot(epochs, history.train_accuracy, "o-", color=PALETTE[0], label="treino")
    ax_acc.plot(epochs, history.val_accuracy, "s--", color=PALETTE[1], label="validação")
    if history.best_epoch:
        for ax in (ax_loss, ax_acc):
            ax.axvline(history.best_epoch, color="gray", ls=":", label=f"melhor época ({history.best_epoch})")
    ax_loss.set_ylabel("perda (entropia cruzada)")
    ax_acc.set_ylabel("acurácia")
    ax_acc.set_ylim(0, 1)
    for ax, name in ((ax_loss, "Perda"), (ax_acc, "Acurácia")):
        ax.yaxis.set_major_formatter(br_formatter())
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("época")
        ax.set_title(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax_lr.plot(np.arange(1, len(history.step_lr) + 1), history.step_lr, color=PALETTE[2])
    ax_lr.set_xlabel("passo de otimização")
    ax_lr.set_ylabel("taxa de aprendizado usada")
    ax_lr.set_title("Taxa de aprendizado")
    ax_lr.yaxis.set_major_formatter(br_formatter())
    ax_lr.grid(alpha=0.3)
    fig.suptitle(title)
    return fig


def _smooth(values: Sequence[float], window: int) -> np.ndarray:
    """Média móvel simples (as primeiras posições usam a janela que existe)."""
    x = np.asarray(values, dtype=float)
    if window <= 1 or x.size == 0:
        return x
    csum = np.cumsum(np.insert(x, 0, 0.0))
    idx = np.arange(1, x.size + 1)
    start = np.maximum(idx - window, 0)
    return (csum[idx] - csum[start]) / (idx - start)


def warmup_experiment_figure(
    results: dict, chance_loss: float, title: str = "Com e sem aquecimento", window: int = 5
) -> Figure:
    """Três painéis do experimento: as duas taxas, a perda de treino por passo e a acurácia de validação.

    Cada linha fina é uma semente; a cor é a condição.
    """
    fig = Figure(figsize=(13, 3.8), layout="constrained")
    ax_lr, ax_loss, ax_acc = fig.subplots(1, 3)
    for name, histories in results.items():
        color = CONDITION_COLORS.get(name, PALETTE[4])
        for i, h in enumerate(histories):
            label = name if i == 0 else None
            steps = np.arange(1, len(h.step_loss) + 1)
            if i == 0:
                ax_lr.plot(steps, h.step_lr, color=color, label=name)
            ax_loss.plot(steps, _smooth(h.step_loss, window), color=color, alpha=0.8, lw=1.2, label=label)
            epochs = np.arange(1, len(h.val_accuracy) + 1)
            ax_acc.plot(epochs, h.val_accuracy, "o-", color=color, alpha=0.8, lw=1.2, label=label)
    ax_loss.axhline(
        chance_loss, color="gray", ls="--", lw=1, label=f"chute uniforme: ln C = {br(chance_loss, '.2f')}"
    )
    ax_lr.set_xlabel("passo de otimização")
    ax_lr.set_ylabel("taxa de aprendizado")
    ax_lr.set_title("As duas taxas (mesmo pico)")
    ax_loss.set_xlabel("passo de otimização")
    ax_loss.set_ylabel(f"perda de treino (média móvel de {window} lotes)")
    ax_loss.set_title("Perda de treino, uma linha por semente")
    ax_acc.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_acc.set_xlabel("época")
    ax_acc.set_ylabel("acurácia de validação")
    ax_acc.set_ylim(0, 1)
    ax_acc.set_title("Acurácia de validação")
    for ax in (ax_lr, ax_loss, ax_acc):
        ax.yaxis.set_major_formatter(br_formatter())
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    return fig
