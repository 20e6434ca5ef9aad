"""Exploração do capítulo 3: o número de cabeças (mapas por cabeça e parâmetros)."""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.figure import Figure

from ..experiments.ch03 import SENTENCE, NeighborConfig, divisors, encode_words, train_neighbor_models
from ..numbers import br_formatter, br_percent
from ..plots import SEQUENTIAL
from ._view import Blit, PngRenderer, interactive_png, student_only

__all__ = ["BENCH", "HeadsExplorer", "heads_widget"]

GAP = 2  # células vazias entre os mapas de duas cabeças


def _tile(weights: np.ndarray, cols: int) -> np.ndarray:
    """Põe os mapas (H, T, T) numa grade só, separados por NaN (um único ``imshow`` é bem mais rápido)."""
    H, T, _ = weights.shape
    rows = math.ceil(H / cols)
    step = T + GAP
    canvas = np.full((rows * step - GAP, cols * step - GAP), np.nan)
    for h in range(H):
        r, c = divmod(h, cols)
        canvas[r * step : r * step + T, c * step : c * step + T] = weights[h]
    return canvas


class HeadsExplorer:
    """Para cada número de cabeças H (divisor de d_model): os mapas de cada cabeça e os parâmetros.

    Os modelos da tarefa dos vizinhos são treinados (ou recebidos prontos) e os pesos sobre a frase
    calculados na construção; ``update`` troca a imagem, os rótulos e os textos de uma figura só.
    """

    def __init__(
        self,
        sentence: str = SENTENCE,
        results: dict[int, dict] | None = None,
        cfg: NeighborConfig | None = None,
    ):
        self.cfg = cfg or NeighborConfig()
        self.heads = divisors(self.cfg.d_model)
        self.results = results if results is not None else train_neighbor_models(self.heads, self.cfg)
        self.tokens = sentence.split()
        ids = encode_words(self.tokens).view(1, -1)
        self.weights = {}
        for h in self.heads:
            with torch.no_grad():
                _, w = self.results[h]["model"](ids)  # (1, H, T, T)
            self.weights[h] = w[0].numpy()

        self.fig = Figure(figsize=(9, 6.5))
        self.ax = self.fig.add_axes((0.1, 0.1, 0.72, 0.76))
        cax = self.fig.add_axes((0.86, 0.2, 0.02, 0.56))
        cmap = colormaps[SEQUENTIAL].with_extremes(bad="white")  # NaN (entre as cabeças) em branco
        self.image = self.ax.imshow(np.zeros((1, 1)), cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
        self.fig.colorbar(self.image, cax=cax, label="peso", format=br_formatter())
        for side in ("top", "right", "bottom", "left"):
            self.ax.spines[side].set_visible(False)
        self.ax.set_xlabel("chave (palavra atendida)")
        self.ax.set_ylabel("consulta")
        # Duas linhas de título: a que muda com H e a dos parâmetros, igual para todo H (o desenho
        # dela é guardado; texto é o que mais custa redesenhar).
        self.suptitle = self.fig.suptitle("", fontsize=11, y=0.98)
        self.params = self.fig.text(0.5, 0.945, "", ha="center", va="top", fontsize=11)
        # um rótulo por cabeça possível, criados uma vez: ``update`` só os move, troca e esconde
        self._label_pool = [
            self.ax.text(0, 0, f"cabeça {h + 1}", ha="center", va="bottom", fontsize=9)
            for h in range(max(self.heads))
        ]
        self.labels: list = []
        self.update(2)
        # Cada PNG redesenha só a grade de mapas, as marcas, os rótulos e o título sobre o fundo fixo.
        self.blit = Blit(
            self.fig,
            [self.image, self.ax.xaxis, self.ax.yaxis, *self._label_pool, self.suptitle, self.params],
        )

    def update(self, n_heads: int) -> Figure:
        """Mostra os mapas das ``n_heads`` cabeças e devolve a figura (o desenho acontece ao exibi-la)."""
        if n_heads not in self.weights:
            raise ValueError(f"n_heads = {n_heads} não divide d_model = {self.cfg.d_model}.")
        T = len(self.tokens)
        cols = 2 if n_heads == 4 else min(n_heads, 4)  # grades 1×1, 1×2, 2×2, 2×4, 4×4
        rows = math.ceil(n_heads / cols)
        canvas = _tile(self.weights[n_heads], cols)
        self.image.set_data(np.ma.masked_invalid(canvas))
        self.image.set_extent((-0.5, canvas.shape[1] - 0.5, canvas.shape[0] - 0.5, -0.5))
        step = T + GAP
        font = 8 if n_heads <= 4 else 7
        # rótulos só na primeira coluna e na primeira linha da grade (são as mesmas palavras em todas)
        self.ax.set_xticks(range(T), self.tokens, rotation=70, fontsize=font)
        self.ax.set_yticks(range(T), self.tokens, fontsize=font)
        self.ax.set_xlim(-0.5, cols * step - GAP - 0.5)
        self.ax.set_ylim(rows * step - GAP - 0.5, -0.5)
        for h, label in enumerate(self._label_pool):
            r, c = divmod(h, cols)
            label.set_position((c * step + (T - 1) / 2, r * step - 0.7))
            label.set_visible(h < n_heads)
        self.labels = self._label_pool[:n_heads]
        result = self.results[n_heads]
        d = self.cfg.d_model
        self.suptitle.set_text(
            f"H = {n_heads} {'cabeça' if n_heads == 1 else 'cabeças'}, d_k = {d // n_heads}; acurácia na "
            f"tarefa dos vizinhos: {br_percent(result['accuracy'], 0)}"
        )
        self.params.set_text(
            f"{result['n_attention_params']} parâmetros na atenção (4·{d}² + 4·{d}), os mesmos para todo H"
        )
        return self.fig


@student_only
def heads_widget(
    sentence: str = SENTENCE, results: dict[int, dict] | None = None, cfg: NeighborConfig | None = None
):
    """Controle deslizante do número de cabeças (divisores de d_model) ligado a um :class:`HeadsExplorer`."""
    import ipywidgets as widgets

    explorer = HeadsExplorer(sentence, results, cfg)
    slider = widgets.SelectionSlider(
        options=explorer.heads,
        value=2,
        description="cabeças",
        continuous_update=False,
        layout=widgets.Layout(width="420px"),
    )

    image = interactive_png(PngRenderer(explorer.update), {"n_heads": slider})
    return widgets.VBox([slider, image])


BENCH = [(HeadsExplorer, [{"n_heads": h} for h in divisors(NeighborConfig().d_model)])]

# O widget inteiro, para `make bench` mover cada controle passo a passo (cache e pré-cálculo).
BENCH_WIDGET = heads_widget
