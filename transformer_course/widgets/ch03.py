"""Exploração do capítulo 3: o número de cabeças (mapas por cabeça e parâmetros)."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from ..multihead import NeighborConfig, divisors, train_neighbor_models
from ..plots.ch03 import head_grid

__all__ = ["HeadsExplorer", "heads_widget"]


class HeadsExplorer:
    """Para cada número de cabeças H (divisor de d_model): os mapas de cada cabeça e os parâmetros.

    Os modelos da tarefa dos vizinhos são treinados (ou recebidos prontos) e as figuras, uma
    por H, montadas na construção; ``update`` só escolhe a figura e ajusta o título.
    """

    def __init__(
        self,
        sentence_ids: torch.Tensor,
        tokens: list[str],
        results: dict[int, dict] | None = None,
        cfg: NeighborConfig | None = None,
    ):
        cfg = cfg or NeighborConfig()
        self.cfg = cfg
        self.heads = divisors(cfg.d_model)
        self.results = results if results is not None else train_neighbor_models(self.heads, cfg)
        self.figures: dict[int, Figure] = {}
        self.titles = {}
        for h in self.heads:
            model = self.results[h]["model"]
            with torch.no_grad():
                _, weights = model(sentence_ids.view(1, -1))  # (1, H, T, T)
            n_params = self.results[h]["n_attention_params"]
            title = (
                f"H = {h} {'cabeça' if h == 1 else 'cabeças'}, d_k = {cfg.d_model // h}; acurácia na "
                f"tarefa dos vizinhos: {self.results[h]['accuracy']:.0%}\n{n_params} parâmetros na "
                f"atenção (4·{cfg.d_model}² + 4·{cfg.d_model}), os mesmos para todo H"
            )
            self.figures[h] = head_grid(weights[0], tokens, title)
            self.titles[h] = title

    def update(self, n_heads: int) -> Figure:
        """Devolve a figura de ``n_heads`` cabeças (o desenho acontece ao exibi-la)."""
        if n_heads not in self.figures:
            raise ValueError(f"n_heads = {n_heads} não divide d_model = {self.cfg.d_model}.")
        return self.figures[n_heads]


def heads_widget(
    sentence_ids: torch.Tensor,
    tokens: list[str],
    results: dict[int, dict] | None = None,
    cfg: NeighborConfig | None = None,
):
    """Controle deslizante do número de cabeças ligado a um :class:`HeadsExplorer`."""
    import ipywidgets as widgets
    from IPython.display import display

    explorer = HeadsExplorer(sentence_ids, tokens, results, cfg)
    slider = widgets.SelectionSlider(
        options=explorer.heads,
        value=2,
        description="cabeças",
        continuous_update=False,
        layout=widgets.Layout(width="420px"),
    )

    def show(n_heads: int) -> None:
        display(explorer.update(n_heads))

    output = widgets.interactive_output(show, {"n_heads": slider})
    return widgets.VBox([slider, output])
