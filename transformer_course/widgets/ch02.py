"""Exploração do capítulo 2: o controle de d_k (entropia e pesos, com e sem escala)."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from ..attention import attention_entropy
from ..experiments.ch02 import dk_weight_maps, scaling_statistics
from ..numbers import br, br_formatter
from ..plots import PALETTE, SEQUENTIAL
from ._view import Blit, PngRenderer, interactive_png, student_only

__all__ = ["DK_OPTIONS", "DkExplorer", "dk_widget"]

DK_OPTIONS = [2**k for k in range(1, 11)]  # 2 ... 1024


class DkExplorer:
    """Para cada d_k: entropia com e sem escala, e os pesos de atenção das duas versões.

    Os dados de todos os valores de d_k são sorteados uma vez, na construção;
    ``update`` só troca os dados dos artistas da figura (rápido).
    """

    def __init__(self, seq_len: int = 8, seed: int = 0, d_ks: list[int] = DK_OPTIONS):
        self.d_ks = list(d_ks)
        self.stats = scaling_statistics(self.d_ks, n_keys=seq_len, n_queries=256, seed=seed)
        self.weights = dk_weight_maps(self.d_ks, seq_len=seq_len, seed=seed + 1)

        self.fig = Figure(figsize=(13, 3.8), layout="constrained")
        ax_curve, ax_raw, ax_scaled = self.fig.subplots(1, 3)
        # Eixo x em log2(d_k) com rótulos de texto simples: rótulos em notação matemática
        # custam caro a cada redesenho.
        xs = np.log2(self.d_ks)
        ax_curve.plot(xs, self.stats["entropy_raw"], "o-", color=PALETTE[3], label="sem escala")
        ax_curve.plot(xs, self.stats["entropy_scaled"], "s-", color=PALETTE[0], label="com escala")
        ax_curve.axhline(math.log(seq_len), ls="--", color="gray", label=f"máximo: ln {seq_len}")
        ax_curve.set_xticks(xs[::3], [str(d) for d in self.d_ks[::3]])
        ax_curve.set_xlabel("d_k (escala log)")
        ax_curve.set_ylabel("entropia média (nats)")
        legend = ax_curve.legend(fontsize=8, loc="lower left")
        self.marker = ax_curve.axvline(xs[0], color="black", lw=1)
        ax_curve.set_title("Entropia do softmax")
        empty = np.zeros((seq_len, seq_len))
        self.images = []
        for ax, title in ((ax_raw, "sem escala: softmax(q·k)"), (ax_scaled, "com escala: softmax(q·k/√d_k)")):
            image = ax.imshow(empty, cmap=SEQUENTIAL, vmin=0, vmax=1)
            ax.set_xlabel("chave")
            ax.set_ylabel("consulta")
            ax.set_xticks(range(0, seq_len, 2))
            ax.set_yticks(range(0, seq_len, 2))
            ax.set_title(title)
            self.images.append(image)
        self.fig.colorbar(
            self.images[-1], ax=[ax_raw, ax_scaled], label="peso", shrink=0.9, format=br_formatter()
        )
        ax_curve.yaxis.set_major_formatter(br_formatter())
        self.suptitle = self.fig.suptitle("")
        self.update(64)
        # Layout calculado uma vez e congelado; cada PNG redesenha só o que muda sobre o fundo fixo
        # (os dois mapas, as bordas deles, o marcador de d_k, a legenda por cima dele e o título).
        spines = [spine for ax in (ax_raw, ax_scaled) for spine in ax.spines.values()]
        Blit(self.fig, [*self.images, *spines, self.marker, legend, self.suptitle], keys={legend: tuple})

    def update(self, d_k: int) -> Figure:
        """Atualiza a figura para ``d_k`` e a devolve (o desenho acontece ao exibi-la)."""
        i = self.d_ks.index(d_k)
        raw, scaled = self.weights[d_k]
        for image, weights in zip(self.images, (raw, scaled)):
            image.set_data(weights.numpy())
        self.marker.set_xdata([math.log2(d_k)] * 2)
        h_raw, h_scaled = attention_entropy(raw).mean().item(), attention_entropy(scaled).mean().item()
        self.suptitle.set_text(
            f"d_k = {d_k}: desvio dos scores {br(self.stats['std_raw'][i], '.1f')} sem escala, "
            f"{br(self.stats['std_scaled'][i], '.2f')} com escala; "
            f"entropia {br(h_raw, '.2f')} contra {br(h_scaled, '.2f')} nats"
        )
        return self.fig


@student_only
def dk_widget(seq_len: int = 8, seed: int = 0):
    """Controle deslizante de d_k ligado a um :class:`DkExplorer`."""
    import ipywidgets as widgets

    explorer = DkExplorer(seq_len=seq_len, seed=seed)
    slider = widgets.SelectionSlider(
        options=DK_OPTIONS,
        value=64,
        description="d_k",
        continuous_update=False,
        layout=widgets.Layout(width="420px"),
    )

    image = interactive_png(PngRenderer(explorer.update), {"d_k": slider})
    return widgets.VBox([slider, image])


# Casos medidos por `make bench`: (fábrica, [argumentos de update]).
BENCH = [(DkExplorer, [{"d_k": d_k} for d_k in DK_OPTIONS])]

# O widget inteiro, para `make bench` mover cada controle passo a passo (cache e pré-cálculo).
BENCH_WIDGET = dk_widget
