"""Exploração do capítulo 5: comprimento, padding e causal -> a máscara combinada e os pesos.

As máscaras e o softmax mascarado são os do pacote (``transformer_course.masks``); o widget só
escolhe os ids, recorta os scores e desenha.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MultipleLocator

from ..masks import causal_mask, masked_softmax, padding_mask
from ..numbers import br_formatter
from ..plots import PALETTE, SEQUENTIAL
from ..plots.ch05 import MASK_CMAP, NAN_COLOR
from ..runtime import one_thread
from ._view import Blit, PngRenderer, interactive_png, student_only

__all__ = ["MaskExplorer", "mask_widget"]

MAX_LEN = 12


class MaskExplorer:
    """Para (T, número de pads, causal, lado do padding): a máscara e os pesos com -inf e com masked_softmax.

    Os scores (MAX_LEN x MAX_LEN) são sorteados uma vez, na construção; ``update``
    recorta, mascara e só troca os dados dos artistas da figura (rápido).
    """

    def __init__(self, max_len: int = MAX_LEN, seed: int = 0):
        self.max_len = max_len
        gen = torch.Generator().manual_seed(seed)
        self.scores = torch.randn(max_len, max_len, generator=gen) * 1.5
        self.fig = Figure(figsize=(13, 4.4), layout="constrained")
        axes = self.fig.subplots(1, 3)
        empty = np.zeros((max_len, max_len))
        nan_cmap = matplotlib.colormaps[SEQUENTIAL].with_extremes(bad=NAN_COLOR)
        titles = ("máscara combinada", "softmax com -inf comum", "masked_softmax")
        self.axes = axes
        self.images = [axes[0].imshow(empty, cmap=MASK_CMAP, vmin=0, vmax=1, interpolation="nearest")]
        for ax in axes[1:]:
            self.images.append(ax.imshow(empty, cmap=nan_cmap, vmin=0, vmax=1, interpolation="nearest"))
        self.labels: list[str] = []
        position_label = FuncFormatter(
            lambda v, _: self.labels[int(round(v))] if 0 <= round(v) < len(self.labels) else ""
        )
        for ax, title in zip(axes, titles):
            # marcas de 1 em 1, com "PAD" nas posições de padding: calculadas só ao desenhar
            for axis in (ax.xaxis, ax.yaxis):
                axis.set_major_locator(MultipleLocator(1))
                axis.set_major_formatter(position_label)
            ax.tick_params(axis="x", rotation=90)
            ax.set_title(title)
            ax.set_xlabel("chave (posição atendida)")
        # as consultas são as mesmas linhas nos três painéis: rótulos só no primeiro (menos texto a
        # redesenhar a cada movimento)
        axes[0].set_ylabel("consulta")
        for ax in axes[1:]:
            ax.tick_params(axis="y", labelleft=False)
        self.fig.colorbar(
            self.images[-1], ax=list(axes[1:]), label="peso", shrink=0.85, format=br_formatter()
        )
        handles = [
            Patch(color=PALETTE[0], label="pode atender"),
            Patch(color="#e6e6e6", label="bloqueado"),
            Patch(color=NAN_COLOR, label="NaN"),
        ]
        self.fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)
        self.suptitle = self.fig.suptitle("")
        self.update(8, 2, True, "direita")
        # Layout calculado uma vez e congelado; cada PNG redesenha só os mapas, as bordas, as marcas
        # (guardadas em pixels: voltam iguais quando só a causal muda) e o título, sobre o fundo fixo.
        spines = [spine for ax in axes for spine in ax.spines.values()]
        ticks = [axis for ax in axes for axis in (ax.xaxis, ax.yaxis)]
        self.blit = Blit(self.fig, [*self.images, *ticks, *spines, self.suptitle])

    def masks(self, seq_len: int, n_pad: int, causal: bool, pad_side: str = "direita") -> np.ndarray:
        """A máscara combinada (T, T), booleana, para uma sequência com ``n_pad`` pads."""
        n_pad = min(max(n_pad, 0), seq_len)
        ids = torch.ones(1, seq_len, dtype=torch.long)  # 0 = <pad>
        ids[0, slice(0, n_pad) if pad_side == "esquerda" else slice(seq_len - n_pad, seq_len)] = 0
        with one_thread():
            # (1, 1, 1, T) -> (T, T): a mesma linha para toda consulta, bloqueia colunas
            mask = padding_mask(ids)[0, 0].expand(seq_len, seq_len)
            if causal:
                mask = mask & causal_mask(seq_len)
        return mask.contiguous().numpy()

    def weights(self, seq_len: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pesos com o softmax comum e -inf (NaN nas linhas vazias) e com ``masked_softmax``, em float64."""
        scores = self.scores[:seq_len, :seq_len].double()
        allowed = torch.from_numpy(np.ascontiguousarray(mask))
        with one_thread():
            plain = scores.masked_fill(~allowed, float("-inf")).softmax(-1)  # 0/0 = NaN nas linhas vazias
            safe = masked_softmax(scores, allowed)
        return plain.numpy(), safe.numpy()

    def update(self, seq_len: int, n_pad: int, causal: bool, pad_side: str = "direita") -> Figure:
        """Atualiza a figura e a devolve (o desenho acontece ao exibi-la)."""
        seq_len = int(min(max(seq_len, 1), self.max_len))
        mask = self.masks(seq_len, n_pad, causal, pad_side)
        plain, safe = self.weights(seq_len, mask)
        extent = (-0.5, seq_len - 0.5, seq_len - 0.5, -0.5)
        data = (mask.astype(float), np.ma.masked_invalid(plain), safe)
        n_pad = min(max(n_pad, 0), seq_len)
        is_pad = [i < n_pad if pad_side == "esquerda" else i >= seq_len - n_pad for i in range(seq_len)]
        self.labels = ["PAD" if p else str(i) for i, p in enumerate(is_pad)]
        for ax, image, values in zip(self.axes, self.images, data):
            image.set_data(values)
            image.set_extent(extent)
            ax.set_xlim(extent[0], extent[1])
            ax.set_ylim(extent[2], extent[3])
        empty_rows = int((~mask.any(-1)).sum())
        self.suptitle.set_text(
            f"T = {seq_len}, {n_pad} pad(s) à {pad_side}, {'causal' if causal else 'sem causal'}: "
            f"{empty_rows} linha(s) totalmente bloqueada(s) → "
            + ("NaN com -inf comum, zeros com masked_softmax" if empty_rows else "nenhum NaN")
        )
        return self.fig


@student_only
def mask_widget(max_len: int = MAX_LEN, seed: int = 0):
    """Controles de comprimento, padding, causal e lado do padding ligados a um :class:`MaskExplorer`."""
    import ipywidgets as widgets

    explorer = MaskExplorer(max_len=max_len, seed=seed)
    style = {"description_width": "150px"}
    length = widgets.IntSlider(
        8, min=2, max=max_len, description="comprimento T", style=style, continuous_update=False
    )
    pads = widgets.IntSlider(
        2, min=0, max=7, description="tokens de padding", style=style, continuous_update=False
    )
    causal = widgets.Checkbox(True, description="máscara causal")
    side = widgets.ToggleButtons(
        options=["direita", "esquerda"], value="direita", description="padding à", style=style
    )

    def follow_length(change) -> None:
        pads.max = change["new"] - 1

    length.observe(follow_length, names="value")

    controls = {"seq_len": length, "n_pad": pads, "causal": causal, "pad_side": side}
    image = interactive_png(PngRenderer(explorer.update), controls)
    return widgets.VBox([widgets.HBox([length, pads]), widgets.HBox([causal, side]), image])


# Casos medidos por `make bench`: (fábrica, [argumentos de update]).
_CASES = [(t, p, c) for t in (6, 10) for p in (0, 2) for c in (False, True)]
BENCH = [(MaskExplorer, [{"seq_len": t, "n_pad": p, "causal": c} for t, p, c in _CASES])]

# O widget inteiro, para `make bench` mover cada controle passo a passo (cache e pré-cálculo).
BENCH_WIDGET = mask_widget
