"""Exploração do capítulo 1: esquema de posição, d_model e comprimento.

À esquerda, a codificação (ou o viés, no caso de ALiBi); à direita, a matriz de
similaridade posição × posição. O título diz se ela depende só de i − j.
"""

from __future__ import annotations

from functools import lru_cache, partial

import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from .. import positional
from ..experiments.ch01 import cosine_similarity_matrix, toeplitz_deviation
from ..numbers import br, br_formatter
from ..plots import DIVERGING, SEQUENTIAL
from ..runtime import one_thread
from ._view import Blit, PngRenderer, interactive_png, student_only

__all__ = ["SCHEMES", "PositionalExplorer", "positional_widget"]

SCHEMES = ("senoidal", "aprendido", "RoPE", "ALiBi")
ALIBI_HEADS = 8


@lru_cache(maxsize=64)
def scheme_matrices(scheme: str, d_model: int, length: int, seed: int = 0) -> dict:
    """Os dados de uma combinação: matriz da esquerda, da direita e os textos dos eixos."""
    if scheme == "senoidal":
        enc = positional.sinusoidal_encoding(length, d_model)
        return {
            "left": enc,
            "right": cosine_similarity_matrix(enc),
            "vmax": 1.0,
            "left_title": "PE[p, j] (fixa)",
            "xlabel": "dimensão j",
            "ylabel": "posição p",
            "right_title": "cos(PE[i], PE[j])",
        }
    if scheme == "aprendido":
        gen = torch.Generator().manual_seed(seed)
        enc = torch.randn(length, d_model, generator=gen)  # como nn.Embedding: N(0, 1), antes do treino
        return {
            "left": enc,
            "right": cosine_similarity_matrix(enc),
            "vmax": 3.0,
            "left_title": "E[p, j] sorteada (antes do treino)",
            "xlabel": "dimensão j",
            "ylabel": "posição p",
            "right_title": "cos(E[i], E[j])",
        }
    if scheme == "RoPE":
        u = torch.zeros(length, d_model)
        u[:, 0::2] = 1.0  # cada par começa em (1, 0)
        enc = positional.apply_rope(u)
        return {
            "left": enc,
            "right": cosine_similarity_matrix(enc),
            "vmax": 1.0,
            "left_title": "RoPE(u, p), u = (1, 0, 1, 0, …)",
            "xlabel": "dimensão j",
            "ylabel": "posição p",
            "right_title": "cos(RoPE(u, i), RoPE(u, j))",
        }
    if scheme == "ALiBi":
        bias = positional.alibi_bias(ALIBI_HEADS, length)  # (H, T, T)
        return {
            "left": bias[:, -1, :].flip(-1),
            "right": bias[0],
            "vmax": 0.0,
            "left_title": f"−m_h·d para as {ALIBI_HEADS} cabeças (não depende de d_model)",
            "xlabel": "distância d = |i − j|",
            "ylabel": "cabeça h (1 = a mais inclinada)",
            "right_title": f"viés da cabeça 1 (m = {br(2 ** (-8 / ALIBI_HEADS), 'g')}): −m·|i − j|",
        }
    raise ValueError(f"Esquema desconhecido: {scheme!r}; use um de {SCHEMES}.")


class PositionalExplorer:
    """Figura de dois painéis que ``update(scheme, d_model, length)`` atualiza e devolve."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        # Posições fixas dos eixos (sem layout automático): o desenho fica bem mais barato.
        self.fig = Figure(figsize=(9.5, 3.7))
        self.ax_left = self.fig.add_axes((0.07, 0.13, 0.37, 0.68))
        self.ax_right = self.fig.add_axes((0.61, 0.13, 0.27, 0.68))
        empty = torch.zeros(2, 2).numpy()
        self.left = self.ax_left.imshow(empty, aspect="auto", interpolation="nearest")
        self.right = self.ax_right.imshow(empty, interpolation="nearest")
        self.cbar_left = self.fig.colorbar(self.left, cax=self.fig.add_axes((0.45, 0.13, 0.012, 0.68)))
        self.cbar_right = self.fig.colorbar(self.right, cax=self.fig.add_axes((0.89, 0.13, 0.012, 0.68)))
        # Poucos rótulos: o texto é o que mais custa a cada redesenho.
        for axis in (self.ax_left.xaxis, self.ax_right.xaxis, self.ax_right.yaxis):
            axis.set_major_locator(MaxNLocator(4, integer=True))
        for cbar in (self.cbar_left, self.cbar_right):
            cbar.locator = MaxNLocator(4)
            cbar.formatter = br_formatter()  # vírgula decimal nas marcas da barra de cor
        self.ax_right.set_xlabel("posição j")
        self.ax_right.set_ylabel("posição i")
        # O veredito (poucas variantes: o desenho dele é guardado) e, numa linha menor, os números
        # deste estado: o texto é o que mais custa redesenhar a cada movimento.
        self.suptitle = self.fig.suptitle("", fontsize=10, y=0.99)
        self.details = self.fig.text(0.5, 0.925, "", ha="center", va="top", fontsize=8.5, color="0.3")
        self.update("senoidal", 64, 64)
        spines = [spine for ax in (self.ax_left, self.ax_right) for spine in ax.spines.values()]
        self.blit = Blit(
            self.fig,
            [
                self.left,
                self.right,
                self.ax_left.xaxis,
                self.ax_left.yaxis,
                self.ax_right.xaxis,
                self.ax_right.yaxis,
                self.ax_left.title,
                self.ax_right.title,
                self.cbar_left.ax,
                self.cbar_right.ax,
                self.suptitle,
                self.details,
                *spines,  # por último: as bordas cobrem a ponta dos traços das marcas, como antes
            ],
            keys={cbar.ax: partial(self._colorbar_key, cbar) for cbar in (self.cbar_left, self.cbar_right)},
        )

    @staticmethod
    def _colorbar_key(cbar) -> tuple:
        """O que a colorbar mostra: mapa de cor, limites e rótulo (a chave do seu desenho guardado)."""
        return (cbar.mappable.get_cmap().name, cbar.mappable.get_clim(), cbar.ax.get_ylabel())

    @staticmethod
    def _show(image, ax, data: torch.Tensor, cmap: str, vmin: float, vmax: float) -> None:
        rows, cols = data.shape
        image.set_data(data.numpy())
        image.set_extent((-0.5, cols - 0.5, rows - 0.5, -0.5))
        # só quando mudam: cada troca redesenha a colorbar ligada à imagem
        if image.get_cmap().name != cmap:
            image.set_cmap(cmap)
        if image.get_clim() != (vmin, vmax):
            image.set_clim(vmin, vmax)
        ax.set_xlim(-0.5, cols - 0.5)
        ax.set_ylim(rows - 0.5, -0.5)

    def update(self, scheme: str, d_model: int, length: int) -> Figure:
        """Recalcula os dois painéis para a combinação escolhida e devolve a figura."""
        with one_thread():
            data = scheme_matrices(scheme, d_model, length, self.seed)
            deviation = toeplitz_deviation(data["right"])
        left, right = data["left"], data["right"]
        if scheme == "ALiBi":
            low_left, low_right = left.min().item(), right.min().item()
            self._show(self.left, self.ax_left, left, SEQUENTIAL, low_left, 0.0)
            self._show(self.right, self.ax_right, right, SEQUENTIAL, low_right, 0.0)
            self.cbar_left.set_label("viés somado ao score")
            self.cbar_right.set_label("viés somado ao score")
        else:
            vmax = data["vmax"]
            self._show(self.left, self.ax_left, left, DIVERGING, -vmax, vmax)
            self._show(self.right, self.ax_right, right, DIVERGING, -1.0, 1.0)
            self.cbar_left.set_label("valor")
            self.cbar_right.set_label("similaridade do cosseno")
        if scheme == "ALiBi":
            self.ax_left.set_yticks(range(ALIBI_HEADS), labels=[str(h + 1) for h in range(ALIBI_HEADS)])
        else:
            self.ax_left.yaxis.set_major_locator(MaxNLocator(4, integer=True))
            self.ax_left.yaxis.set_major_formatter(br_formatter())
        self.ax_left.set_title(data["left_title"], fontsize=10)
        self.ax_left.set_xlabel(data["xlabel"])
        self.ax_left.set_ylabel(data["ylabel"])
        self.ax_right.set_title(data["right_title"], fontsize=10)
        verdict = "depende só de i − j" if deviation < 1e-4 else "NÃO depende só de i − j"
        self.suptitle.set_text(f"{scheme}: a matriz da direita {verdict}")
        self.details.set_text(
            f"d_model = {d_model}, T = {length}; desvio nas diagonais {br(deviation, '.1g')}"
        )
        return self.fig


@student_only
def positional_widget(seed: int = 0):
    """Lista de esquemas e controles de d_model e comprimento ligados a um :class:`PositionalExplorer`."""
    import ipywidgets as widgets

    explorer = PositionalExplorer(seed=seed)
    scheme = widgets.Dropdown(options=list(SCHEMES), value="senoidal", description="esquema")
    d_model = widgets.IntSlider(
        value=64, min=8, max=512, step=8, description="d_model", continuous_update=False
    )
    length = widgets.IntSlider(
        value=64,
        min=8,
        max=256,
        step=8,
        description="comprimento",
        continuous_update=False,
        style={"description_width": "initial"},
    )

    renderer = PngRenderer(explorer.update)
    image = interactive_png(renderer, {"scheme": scheme, "d_model": d_model, "length": length})
    return widgets.VBox([widgets.HBox([scheme, d_model, length]), image])


# Casos medidos por `make bench` (update + PNG): os quatro esquemas, tamanhos pequenos e grandes.
BENCH = [
    (
        PositionalExplorer,
        [
            {"scheme": scheme, "d_model": d_model, "length": length}
            for scheme in SCHEMES
            for d_model, length in ((64, 64), (512, 256), (128, 32))
        ],
    )
]

# O widget inteiro, para `make bench` mover cada controle passo a passo (cache e pré-cálculo).
BENCH_WIDGET = positional_widget
