"""Exploração do capítulo 6: a curva de Noam para warmup_steps, d_model e factor escolhidos."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..numbers import br, br_formatter, br_percent
from ..plots import PALETTE
from ..training import noam_lr
from ._view import Blit, PngRenderer, br_float_slider, interactive_png, student_only

__all__ = ["D_MODEL_OPTIONS", "NoamExplorer", "noam_widget"]

D_MODEL_OPTIONS = [32, 64, 128, 256, 512, 1024]


class NoamExplorer:
    """A curva lr × passo do agendamento de Noam, com o pico marcado.

    A curva de referência (cinza) é a do artigo: d_model = 512, warmup_steps = 4000.
    ``update`` recalcula a curva com a referência do pacote (``training.noam_lr``, passo a passo)
    e só troca os dados dos artistas (rápido).
    """

    def __init__(self, n_steps: int = 20_000, n_points: int = 400):
        self.n_steps = n_steps
        self.grid = np.linspace(1, n_steps, n_points)  # a curva é suave: 400 pontos bastam
        self.steps = self.grid
        self.fig = Figure(figsize=(8, 4.1))
        self.fig.subplots_adjust(left=0.11, right=0.95, bottom=0.22, top=0.91)
        self.ax = self.fig.add_subplot()
        ref = self._curve(4000, 512, 1.0)
        (ref_line,) = self.ax.plot(
            self.steps, ref, color="gray", lw=1, ls="--", label="artigo: d_model=512, warmup=4000"
        )
        (self.line,) = self.ax.plot([], [], color=PALETTE[0], lw=2, label="sua escolha")
        (self.peak,) = self.ax.plot([], [], "o", color=PALETTE[3], ms=8, label="pico")
        self.vline = self.ax.axvline(0, color=PALETTE[3], lw=1, ls=":")
        self.text = self.ax.text(
            0.98, 0.95, "", transform=self.ax.transAxes, ha="right", va="top", fontsize=9
        )
        self.ax.set_xlim(0, n_steps)
        # Poucos rótulos nos eixos: desenhar texto é o que mais custa a cada atualização.
        self.ax.xaxis.set_major_locator(MaxNLocator(5))
        self.ax.yaxis.set_major_locator(MaxNLocator(5))
        self.ax.set_xlabel("passo de otimização")
        self.ax.set_ylabel("taxa de aprendizado")
        self.ax.set_title("Agendamento de Noam")
        self.ax.xaxis.set_major_formatter(br_formatter(",.0f"))  # "20.000"
        self.ax.yaxis.set_major_formatter(br_formatter())  # "0,0004": vírgula decimal, sem multiplicador
        self.ax.grid(alpha=0.3)
        # a legenda fica embaixo, fora do caminho das curvas: assim ela é parte do fundo fixo
        self.fig.legend(loc="lower center", ncols=3, fontsize=8, frameon=False)
        self.ref_peak = float(ref.max())
        self.update(4000, 512, 1.0)
        # Layout fixo; cada PNG redesenha, sobre o fundo (eixo x, títulos, legenda, grade vertical), só
        # o que muda com a escala vertical: o eixo y (marcas, grade horizontal), as curvas, o pico e o
        # texto.
        Blit(self.fig, [self.ax.yaxis, ref_line, self.line, self.peak, self.vline, self.text])

    def _curve(self, warmup_steps: int, d_model: int, factor: float) -> np.ndarray:
        lrs = (noam_lr(float(s), d_model, warmup_steps, factor) for s in self.steps)
        return np.fromiter(lrs, dtype=np.float64, count=len(self.steps))

    def update(self, warmup_steps: int, d_model: int, factor: float) -> Figure:
        """Redesenha a curva para a configuração dada e devolve a figura."""
        self.steps = np.union1d(self.grid, [warmup_steps])  # o pico entra exatamente na curva
        lrs = self._curve(warmup_steps, d_model, factor)
        peak = noam_lr(warmup_steps, d_model, warmup_steps, factor)
        self.line.set_data(self.steps, lrs)
        self.peak.set_data([warmup_steps], [peak])
        self.vline.set_xdata([warmup_steps, warmup_steps])
        self.ax.set_ylim(0, 1.15 * max(peak, self.ref_peak))
        final = lrs[-1]
        formula = f"{br(factor)}·({d_model}·{warmup_steps})^-0,5"
        self.text.set_text(
            f"pico = {formula} = {br(peak, '.2e')} no passo {br(warmup_steps, ',d')}\n"
            f"no passo {br(self.n_steps, ',d')}: {br(final, '.2e')} ({br_percent(final / peak, 0)} do pico)"
        )
        return self.fig


@student_only
def noam_widget(n_steps: int = 20_000):
    """Controles de warmup_steps, d_model e factor ligados a um :class:`NoamExplorer`."""
    import ipywidgets as widgets

    explorer = NoamExplorer(n_steps)
    style = {"description_width": "110px"}
    layout = widgets.Layout(width="460px")
    warmup = widgets.IntSlider(
        value=4000,
        min=100,
        max=10_000,
        step=100,
        description="warmup_steps",
        continuous_update=False,
        style=style,
        layout=layout,
    )
    d_model = widgets.SelectionSlider(
        options=D_MODEL_OPTIONS,
        value=512,
        description="d_model",
        continuous_update=False,
        style=style,
        layout=layout,
    )
    factor = br_float_slider(
        1.0, min=0.1, max=4.0, step=0.1, spec=".1f", description="factor", continuous_update=False,
        style=style, layout=layout,
    )  # fmt: skip

    controls = {"warmup_steps": warmup, "d_model": d_model, "factor": factor}
    image = interactive_png(PngRenderer(explorer.update), controls)
    return widgets.VBox([warmup, d_model, factor, image])


# Casos medidos por ``make bench`` (update + PNG, mediana).
BENCH = [
    (
        NoamExplorer,
        [
            {"warmup_steps": w, "d_model": d, "factor": f}
            for w, d, f in ((100, 32, 0.5), (4000, 512, 1.0), (8000, 1024, 2.0), (2500, 128, 4.0))
        ],
    )
]

# O widget inteiro, para `make bench` mover cada controle passo a passo (cache e pré-cálculo).
BENCH_WIDGET = noam_widget
