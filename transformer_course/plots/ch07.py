"""Figuras do capítulo 7 (famílias, GPT de caracteres, custo da atenção, lei de escala)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, NullLocator

from ..numbers import br, br_formatter
from .common import PALETTE, SEQUENTIAL, to_numpy

__all__ = [
    "attention_cost_figure",
    "cross_attention_figure",
    "family_masks_figure",
    "kaplan_figure",
    "next_char_figure",
    "training_curves_figure",
]


def family_masks_figure(n_tokens: int = 6, n_source: int = 5) -> Figure:
    """Quem pode atender a quem em cada família: codificador, decodificador e atenção cruzada."""
    fig = Figure(figsize=(12, 3.9), layout="constrained")
    axes = fig.subplots(1, 3)
    cmap = ListedColormap(["#f0f0f0", PALETTE[0]])
    panels = [
        ("Só-codificador (BERT)\nautoatenção bidirecional", np.ones((n_tokens, n_tokens)), "chave (posição)"),
        (
            "Só-decodificador (GPT)\nautoatenção causal",
            np.tril(np.ones((n_tokens, n_tokens))),
            "chave (posição)",
        ),
        (
            "Codificador-decodificador (T5)\natenção cruzada",
            np.ones((n_tokens, n_source)),
            "chave (posição da FONTE)",
        ),
    ]
    for ax, (title, mask, xlabel) in zip(axes, panels):
        ax.imshow(mask, cmap=cmap, vmin=0, vmax=1)
        ax.set_xticks(range(mask.shape[1]))
        ax.set_yticks(range(mask.shape[0]))
        ax.set_xticks(np.arange(-0.5, mask.shape[1]), minor=True)
        ax.set_yticks(np.arange(-0.5, mask.shape[0]), minor=True)
        ax.grid(which="minor", color="white", lw=2)
        ax.tick_params(which="minor", length=0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("consulta (posição)")
        ax.set_title(title, fontsize=10)
    fig.suptitle("Azul: a consulta (linha) pode atender à chave (coluna); cinza: bloqueado")
    return fig


def cross_attention_figure(
    weights: torch.Tensor, output_chars: Sequence[str], source_chars: Sequence[str], title: str
) -> Figure:
    """Atenção cruzada (T, S) desenhada deitada: colunas = saída gerada, linhas = fonte."""
    fig = Figure(figsize=(max(6.0, 0.28 * len(output_chars) + 2), 3.2), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(to_numpy(weights).T, cmap=SEQUENTIAL, vmin=0, aspect="auto")
    ax.set_xticks(range(len(output_chars)), [c if c.strip() else "␣" for c in output_chars])
    ax.set_yticks(range(len(source_chars)), list(source_chars))
    ax.set_xlabel("caractere gerado pelo decodificador (consulta)")
    ax.set_ylabel("data de entrada (chave)")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label="peso (média das cabeças)", format=br_formatter())
    return fig


def training_curves_figure(
    history: dict, unigram: float, vocab_size: int, title: str = "Treino do GPT de caracteres"
) -> Figure:
    """Perda de treino e de validação por passo, com as linhas de base uniforme e de unigramas."""
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(history["step"], history["train_loss"], "o-", color=PALETTE[0], label="treino (média do trecho)")
    ax.plot(history["step"], history["val_loss"], "s-", color=PALETTE[1], label="validação")
    ax.axhline(
        math.log(vocab_size),
        ls=":",
        color=PALETTE[3],
        label=f"chute uniforme, ln V: {br(math.log(vocab_size), '.2f')}",
    )
    ax.axhline(unigram, ls="--", color="gray", label=f"unigramas (sem contexto): {br(unigram, '.2f')}")
    ax.set_xlabel("passo de otimização")
    ax.set_ylabel("entropia cruzada (nats por caractere)")
    ax.yaxis.set_major_formatter(br_formatter())
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _integer_ticks(ax, values) -> None:
    ax.set_xticks(list(values), [str(int(v)) for v in values])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_minor_locator(NullLocator())


def attention_cost_figure(result: dict, slopes: dict[str, float], memory: dict | None = None) -> Figure:
    """Tempo medido (log-log, com as inclinações ajustadas) e memória contada e medida."""
    n = np.asarray(result["seq_len"], dtype=float)
    fig = Figure(figsize=(12, 4), layout="constrained")
    ax_time, ax_count = fig.subplots(1, 2)
    ax_time.loglog(
        n,
        result["naive_s"],
        "o-",
        color=PALETTE[3],
        label=f"ingênua (matriz n×n): inclinação {br(slopes['naive_s'], '.2f')}",
    )
    ax_time.loglog(
        n,
        result["sdpa_s"],
        "s-",
        color=PALETTE[0],
        label=f"F.scaled_dot_product_attention: inclinação {br(slopes['sdpa_s'], '.2f')}",
    )
    ref = result["naive_s"][-1] * (n / n[-1]) ** 2
    ax_time.loglog(n, ref, ":", color="gray", label="referência ∝ n²")
    ax_flops = ax_time.twinx()
    ax_flops.loglog(
        n, result["flops"], "d--", color=PALETTE[2], alpha=0.8, label="FLOPs contados: 4·n²·d (eixo direito)"
    )
    ax_flops.set_ylabel("FLOPs contados", color=PALETTE[2])
    ax_time.set_xscale("log", base=2)
    _integer_ticks(ax_time, n)
    ax_time.set_xlabel("comprimento da sequência n")
    ax_time.set_ylabel("tempo (s, melhor de várias repetições)")
    ax_time.set_title("Tempo medido e FLOPs contados")
    ax_time.grid(alpha=0.3, which="both")
    lines = ax_time.get_lines() + ax_flops.get_lines()
    ax_time.legend(lines, [line.get_label() for line in lines], fontsize=8, loc="upper left")
    ax_count.loglog(
        n,
        np.asarray(result["score_bytes"]) / 2**20,
        "s--",
        color=PALETTE[4],
        label="contado: matriz de scores, 4·n² bytes",
    )
    if memory is not None:
        m = np.asarray(memory["seq_len"], dtype=float)
        ax_count.loglog(
            m, np.asarray(memory["naive_bytes"]) / 2**20, "o-", color=PALETTE[3], label="medido: ingênua"
        )
        ax_count.loglog(
            m,
            np.maximum(np.asarray(memory["sdpa_bytes"]), 1) / 2**20,
            "^-",
            color=PALETTE[0],
            label="medido: F.scaled_dot_product_attention",
        )
    ax_count.set_xscale("log", base=2)
    _integer_ticks(ax_count, n)
    ax_count.set_xlabel("comprimento da sequência n")
    ax_count.set_ylabel("memória alocada (MiB)")
    ax_count.set_title("Memória: contada e medida")
    ax_count.grid(alpha=0.3, which="both")
    ax_count.legend(fontsize=8, loc="upper left")
    return fig


def kaplan_figure(loss_fn, points: dict[str, float], n_min: float = 1e3, n_max: float = 1e12) -> Figure:
    """A curva L(N) de Kaplan et al. (2020) com alguns modelos marcados."""
    ns = np.logspace(math.log10(n_min), math.log10(n_max), 200)
    fig = Figure(figsize=(7.5, 4), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(ns, [loss_fn(v) for v in ns], color=PALETTE[0], label="L(N) = (N_c / N)^α_N")
    for i, (label, n) in enumerate(points.items()):
        ax.plot(
            [n],
            [loss_fn(n)],
            "o",
            color=PALETTE[(i + 1) % len(PALETTE)],
            ms=8,
            label=f"{label}: N ≈ {br(n, '.1e')}, L = {br(loss_fn(n), '.2f')}",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [t for t in (1, 1.5, 2, 3, 4, 5, 6, 8) if loss_fn(n_max) * 0.95 <= t <= loss_fn(n_min) * 1.05]
    ax.set_yticks(ticks, [br(t) for t in ticks])
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("N: parâmetros sem os embeddings (escala log)")
    ax.set_ylabel("perda prevista (nats por token, escala log)")
    ax.set_title("Lei de escala de Kaplan et al. (2020): uma reta em log-log")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return fig


def next_char_figure(
    chars: Sequence[str], dists: dict[str, torch.Tensor], title: str, top: int = 12
) -> Figure:
    """Barras da distribuição do próximo caractere para várias temperaturas."""
    first = next(iter(dists.values()))
    order = torch.argsort(first, descending=True)[:top].tolist()
    labels = [repr(chars[i])[1:-1] if chars[i].strip() else "␣" for i in order]
    fig = Figure(figsize=(9, 3.4), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / len(dists)
    for j, (name, p) in enumerate(dists.items()):
        ax.bar(
            np.arange(len(order)) + j * width,
            to_numpy(p)[order],
            width,
            label=name,
            color=PALETTE[j % len(PALETTE)],
        )
    ax.set_xticks(np.arange(len(order)) + 0.4 - width / 2, labels)
    ax.yaxis.set_major_formatter(br_formatter())
    ax.set_ylabel("probabilidade")
    ax.set_xlabel("próximo caractere (os mais prováveis a τ = 1)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig
