"""Exploração do capítulo 5: comprimento, padding e causal -> a máscara combinada e os pesos."""

from __future__ import annotations

import matplotlib
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..masks import causal_mask, masked_softmax
from ..plots import PALETTE, SEQUENTIAL
from ..plots.ch05 import MASK_CMAP, NAN_COLOR

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
        for ax, title in zip(axes, titles):
            ax.set_title(title)
            ax.set_xlabel("chave (posição atendida)")
            ax.set_ylabel("consulta")
        self.fig.colorbar(self.images[-1], ax=list(axes[1:]), label="peso", shrink=0.85)
        handles = [
            Patch(color=PALETTE[0], label="pode atender"),
            Patch(color="#e6e6e6", label="bloqueado"),
            Patch(color=NAN_COLOR, label="NaN"),
        ]
        self.fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)
        self.suptitle = self.fig.suptitle("")
        self.update(8, 2, True, "direita")

    def masks(self, seq_len: int, n_pad: int, causal: bool, pad_side: str = "direita") -> torch.Tensor:
        """A máscara combinada (T, T) para uma sequência com ``n_pad`` pads."""
        n_pad = min(max(n_pad, 0), seq_len)
        real = torch.ones(seq_len, dtype=torch.bool)
        if n_pad:
            if pad_side == "esquerda":
                real[:n_pad] = False
            else:
                real[seq_len - n_pad :] = False
        mask = real[None, :].expand(seq_len, seq_len)  # (1, T) -> (T, T): bloqueia colunas de pad
        if causal:
            mask = mask & causal_mask(seq_len)
        return mask

    def update(self, seq_len: int, n_pad: int, causal: bool, pad_side: str = "direita") -> Figure:
        """Atualiza a figura e a devolve (o desenho acontece ao exibi-la)."""
        seq_len = int(min(max(seq_len, 1), self.max_len))
        mask = self.masks(seq_len, n_pad, causal, pad_side)
        scores = self.scores[:seq_len, :seq_len]
        with torch.no_grad():
            plain = scores.masked_fill(~mask, float("-inf")).softmax(-1)
            safe = masked_softmax(scores, mask)
        extent = (-0.5, seq_len - 0.5, seq_len - 0.5, -0.5)
        data = (mask.float().numpy(), np.ma.masked_invalid(plain.numpy()), safe.numpy())
        ticks = np.arange(seq_len)
        for ax, image, values in zip(self.axes, self.images, data):
            image.set_data(values)
            image.set_extent(extent)
            ax.set_xticks(ticks)
            ax.set_yticks(ticks)
        empty_rows = int((~mask.any(-1)).sum())
        n_pad = min(n_pad, seq_len)
        self.suptitle.set_text(
            f"T = {seq_len}, {n_pad} pad(s) à {pad_side}, {'causal' if causal else 'sem causal'}: "
            f"{empty_rows} linha(s) totalmente bloqueada(s) → "
            + ("NaN com -inf comum, zeros com masked_softmax" if empty_rows else "nenhum NaN")
        )
        return self.fig


def mask_widget(max_len: int = MAX_LEN, seed: int = 0):
    """Controles de comprimento, padding, causal e lado do padding ligados a um :class:`MaskExplorer`."""
    import ipywidgets as widgets
    from IPython.display import display

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

    def show(seq_len: int, n_pad: int, is_causal: bool, pad_side: str) -> None:
        display(explorer.update(seq_len, n_pad, is_causal, pad_side))

    output = widgets.interactive_output(
        show, {"seq_len": length, "n_pad": pads, "is_causal": causal, "pad_side": side}
    )
    return widgets.VBox([widgets.HBox([length, pads]), widgets.HBox([causal, side]), output])
