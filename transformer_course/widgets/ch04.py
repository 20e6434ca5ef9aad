"""Exploração do capítulo 4: Pre-LN/Post-LN e a profundidade → gradiente por camada na inicialização."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from ..experiments.ch04 import ln_gradient_experiment
from ..numbers import br, br_formatter
from ..plots.ch04 import LN_COLORS, LN_NAMES
from ._view import Blit, PngRenderer, interactive_png, student_only

__all__ = ["LNGradientExplorer", "ln_gradient_widget"]

MODES = {"Pre-LN": True, "Post-LN (2017)": False}


class LNGradientExplorer:
    """Barras ‖∂L/∂W²‖ por camada para a profundidade e o arranjo escolhidos.

    Todas as combinações (profundidade 1..``max_depth`` × Pre/Post-LN) são calculadas uma vez,
    na construção (ou recebidas prontas em ``results``); ``update`` só troca alturas, cores e
    limites dos artistas da figura.
    """

    def __init__(
        self,
        results: dict[tuple[bool, int], torch.Tensor] | None = None,
        max_depth: int = 12,
        n_seeds: int = 3,
    ):
        self.results = results if results is not None else ln_gradient_experiment(max_depth, n_seeds)
        self.max_depth = max(d for _, d in self.results)
        top = max(v.max().item() for v in self.results.values()) * 1.1
        depths = np.arange(1, self.max_depth + 1)

        self.fig = Figure(figsize=(12, 3.9), layout="constrained")
        self.ax_bars, ax_last = self.fig.subplots(1, 2, width_ratios=[1.3, 1])
        self.bars = self.ax_bars.bar(depths, np.zeros(self.max_depth), 0.6)
        (self.other,) = self.ax_bars.plot([], [], "_", ms=22, mew=2.5, color="gray", label="o outro arranjo")
        self.ax_bars.set_ylim(0, top)
        self.ax_bars.set_xticks(depths)  # fixos; update só muda os limites
        self.ax_bars.set_xlabel("camada (1 = perto da entrada)")
        self.ax_bars.set_ylabel("‖∂L/∂W²‖ (Frobenius)")
        self.ax_bars.grid(alpha=0.3, axis="y")
        self.legend = self.ax_bars.legend(loc="upper right", fontsize=8)

        for norm_first, marker in ((False, "o-"), (True, "s-")):
            last = [self.results[(norm_first, d)][-1].item() for d in depths]
            ax_last.plot(depths, last, marker, color=LN_COLORS[norm_first], label=LN_NAMES[norm_first])
        self.marker = ax_last.axvline(1, color="black", lw=1)
        ax_last.set_ylim(0, top)
        ax_last.set_xticks(depths)
        ax_last.set_xlabel("profundidade L")
        ax_last.set_ylabel("‖∂L/∂W²‖ da última camada")
        ax_last.set_title("Última camada × profundidade")
        ax_last.grid(alpha=0.3)
        last_legend = ax_last.legend(fontsize=8)
        for ax in (self.ax_bars, ax_last):
            ax.yaxis.set_major_formatter(br_formatter())
        self.title = self.ax_bars.set_title(" ")
        self.update("Pre-LN", min(6, self.max_depth))
        # Layout calculado uma vez e congelado; cada PNG redesenha, sobre o fundo fixo, só o que muda:
        # as marcas do eixo x da esquerda (os limites mudam com a profundidade), as barras, os traços
        # do outro arranjo, o título e o marcador da direita. As legendas vêm por cima, guardadas em
        # pixels: a da esquerda pelo texto (nenhuma barra chega à altura dela), a da direita pela
        # profundidade (ela escolhe o canto livre conforme o marcador).
        keys = {
            self.legend: lambda: self.legend.get_texts()[0].get_text(),
            last_legend: lambda: float(self.marker.get_xdata()[0]),
        }
        dynamic = [
            self.ax_bars.xaxis,
            *self.bars,
            self.other,
            self.title,
            self.marker,
            self.legend,
            last_legend,
        ]
        Blit(self.fig, dynamic, keys=keys)

    def update(self, mode: str, depth: int) -> Figure:
        """Redesenha para ``mode`` ("Pre-LN" ou "Post-LN (2017)") e ``depth`` camadas."""
        norm_first = MODES[mode]
        values = self.results[(norm_first, depth)].tolist()
        other = self.results[(not norm_first, depth)].tolist()
        for i, bar in enumerate(self.bars):
            visible = i < depth
            bar.set_visible(visible)
            if visible:
                bar.set_height(values[i])
                bar.set_color(LN_COLORS[norm_first])
        self.other.set_data(np.arange(1, depth + 1), other)
        self.legend.get_texts()[0].set_text(f"{LN_NAMES[not norm_first]} (o outro arranjo)")
        self.ax_bars.set_xlim(0.4, depth + 0.6)
        self.marker.set_xdata([depth, depth])
        ratio = values[0] / values[-1]
        self.ax_bars.set_title(
            f"{LN_NAMES[norm_first]}, {depth} camada(s): primeira/última = {br(ratio, '.1f')}×; "
            f"última = {br(values[-1], '.2f')}"
        )
        return self.fig


@student_only
def ln_gradient_widget(results: dict[tuple[bool, int], torch.Tensor] | None = None):
    """Botões Pre-LN/Post-LN e controle de profundidade ligados a um :class:`LNGradientExplorer`."""
    import ipywidgets as widgets

    explorer = LNGradientExplorer(results)
    mode = widgets.ToggleButtons(options=list(MODES), value="Pre-LN", description="arranjo")
    depth = widgets.IntSlider(
        value=min(6, explorer.max_depth),
        min=1,
        max=explorer.max_depth,
        description="camadas",
        continuous_update=False,
        layout=widgets.Layout(width="420px"),
    )

    image = interactive_png(PngRenderer(explorer.update), {"mode": mode, "depth": depth})
    return widgets.VBox([widgets.HBox([mode, depth]), image])


# Casos medidos por `make bench`: (fábrica, [argumentos de update]).
BENCH = [(LNGradientExplorer, [{"mode": m, "depth": d} for m in MODES for d in (1, 6, 12)])]

# O widget inteiro, para `make bench` mover cada controle passo a passo (cache e pré-cálculo).
BENCH_WIDGET = ln_gradient_widget
