"""Figuras do capítulo 4 (a camada do *Transformer*, Pre-LN × Post-LN)."""

from __future__ import annotations

import matplotlib
import numpy as np
import torch
from matplotlib.figure import Figure
from torch.nn import functional as F

from ..numbers import br
from .common import PALETTE, SEQUENTIAL, br_axes, to_numpy

__all__ = [
    "LN_COLORS",
    "activation_figure",
    "decoder_attention_figure",
    "gradient_profile_figure",
    "last_layer_gradient_figure",
    "residual_norm_figure",
]

# Post-LN em vermelhão, Pre-LN em azul (paleta colorblind): as mesmas cores no capítulo todo.
LN_COLORS = {False: PALETTE[3], True: PALETTE[0]}
LN_NAMES = {False: "Post-LN (2017)", True: "Pre-LN"}


def activation_figure() -> Figure:
    """GELU × ReLU: as funções e as derivadas."""
    x = torch.linspace(-4, 4, 401, requires_grad=True)
    fig = Figure(figsize=(10, 3.4), layout="constrained")
    ax_f, ax_d = fig.subplots(1, 2)
    for fn, label, color, style in ((F.relu, "ReLU", PALETTE[3], "--"), (F.gelu, "GELU", PALETTE[0], "-")):
        y = fn(x)
        (grad,) = torch.autograd.grad(y.sum(), x)
        ax_f.plot(to_numpy(x), to_numpy(y), style, color=color, label=label, lw=2)
        ax_d.plot(to_numpy(x), to_numpy(grad), style, color=color, label=label, lw=2)
    ax_f.set_title("A ativação entre as duas lineares")
    ax_f.set_ylabel("f(x)")
    ax_d.set_title("A derivada: degrau (ReLU) × curva suave (GELU)")
    ax_d.set_ylabel("f′(x)")
    for ax in (ax_f, ax_d):
        ax.set_xlabel("x")
        ax.axhline(0, color="gray", lw=0.8)
        ax.axvline(0, color="gray", lw=0.8)
        ax.grid(alpha=0.3)
        ax.legend()
    return br_axes(fig)


def gradient_profile_figure(results: dict[tuple[bool, int], torch.Tensor], depth: int) -> Figure:
    """Norma do gradiente de W² por camada, Pre-LN e Post-LN, para uma profundidade."""
    fig = Figure(figsize=(7.5, 3.8), layout="constrained")
    ax = fig.add_subplot()
    layers = np.arange(1, depth + 1)
    width = 0.4
    for offset, norm_first in ((-width / 2, False), (width / 2, True)):
        ax.bar(
            layers + offset,
            to_numpy(results[(norm_first, depth)]),
            width,
            color=LN_COLORS[norm_first],
            label=LN_NAMES[norm_first],
        )
    ax.set_xticks(layers)
    ax.set_xlabel("camada (1 = perto da entrada, à direita = perto da saída)")
    ax.set_ylabel("‖∂L/∂W²‖ (Frobenius)")
    ax.set_title(f"Gradiente na inicialização, pilha de {depth} camadas")
    ax.grid(alpha=0.3, axis="y")
    ax.legend()
    return br_axes(fig)


def last_layer_gradient_figure(results: dict[tuple[bool, int], torch.Tensor]) -> Figure:
    """Norma do gradiente de W² da ÚLTIMA camada em função da profundidade (teorema 1 de Xiong)."""
    depths = sorted({d for _, d in results})
    fig = Figure(figsize=(7.5, 3.8), layout="constrained")
    ax = fig.add_subplot()
    for norm_first, marker in ((False, "o-"), (True, "s-")):
        last = [results[(norm_first, d)][-1].item() for d in depths]
        ax.plot(depths, last, marker, color=LN_COLORS[norm_first], label=LN_NAMES[norm_first])
    ax.set_xticks(depths)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("profundidade L (número de camadas)")
    ax.set_ylabel("‖∂L/∂W²‖ da última camada")
    ax.set_title("A camada perto da saída: Post-LN não encolhe com L, Pre-LN encolhe")
    ax.grid(alpha=0.3)
    ax.legend()
    return br_axes(fig)


def residual_norm_figure(norms: dict[bool, torch.Tensor]) -> Figure:
    """Norma média de x (o fluxo residual) depois de cada camada, Pre-LN e Post-LN."""
    fig = Figure(figsize=(7.5, 3.6), layout="constrained")
    ax = fig.add_subplot()
    for norm_first, marker in ((False, "o-"), (True, "s-")):
        values = to_numpy(norms[norm_first])
        ax.plot(
            np.arange(len(values)), values, marker, color=LN_COLORS[norm_first], label=LN_NAMES[norm_first]
        )
    ax.set_xlabel("camadas já aplicadas (0 = entrada)")
    ax.set_ylabel("‖x‖ média por posição")
    ax.set_title("O fluxo residual: Post-LN renormaliza, Pre-LN acumula")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    return br_axes(fig)


def _weights_heatmap(ax, weights: torch.Tensor, query_labels, key_labels, title: str):
    """Mapa de calor anotado de uma matriz de pesos, no visual de ``plots.attention_heatmap``.

    Desenhado só com o matplotlib (uma imagem e um texto por célula): o seaborn custa perto de um
    segundo para importar, e esta figura não precisa de mais nada dele. Devolve a imagem (para a
    barra de cores).
    """
    values = to_numpy(weights)
    cmap = matplotlib.colormaps[SEQUENTIAL]
    image = ax.imshow(values, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    for (i, j), v in np.ndenumerate(values):
        rgb = np.asarray(cmap(float(v))[:3])
        rgb = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
        light = rgb @ [0.2126, 0.7152, 0.0722] > 0.408  # a regra do seaborn para a cor do texto
        ax.text(j, i, br(v, ".2f"), ha="center", va="center", fontsize=8, color=".15" if light else "w")
    ax.set_xticks(range(len(key_labels)), list(key_labels), rotation=45)
    ax.set_yticks(range(len(query_labels)), list(query_labels))
    ax.spines[:].set_visible(False)
    ax.set_xlabel("chave (posição atendida)")
    ax.set_ylabel("consulta (posição que atende)")
    ax.set_title(title)
    return image


def decoder_attention_figure(
    self_weights: torch.Tensor,
    cross_weights: torch.Tensor,
    target_labels: list[str],
    source_labels: list[str],
) -> Figure:
    """Os dois mapas de atenção de uma camada do decodificador (uma cabeça, um exemplo)."""
    T, S = len(target_labels), len(source_labels)
    fig = Figure(figsize=(2.2 + 0.55 * (T + S) * 1.3, 1.2 + 0.5 * T), layout="constrained")
    ax_self, ax_cross = fig.subplots(1, 2, width_ratios=[T, S])
    _weights_heatmap(
        ax_self, self_weights, target_labels, target_labels, "Autoatenção mascarada (Q, K, V: alvo)"
    )
    image = _weights_heatmap(
        ax_cross, cross_weights, target_labels, source_labels, "Atenção cruzada (Q: alvo; K, V: memória)"
    )
    ax_cross.set_ylabel("")
    # uma barra de cores só: os dois mapas usam a mesma escala, de 0 a 1
    bar = fig.colorbar(image, ax=[ax_self, ax_cross], label="peso", aspect=15, pad=0.02)
    bar.outline.set_visible(False)
    return br_axes(fig)
