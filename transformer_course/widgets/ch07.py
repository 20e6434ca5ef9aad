"""Exploração do capítulo 7: temperatura, top-k e prompt regeram o texto do GPT de caracteres."""

from __future__ import annotations

import textwrap

import numpy as np
import torch
from matplotlib.figure import Figure

from ..generation import generate, next_token_distribution
from ..numbers import br, br_formatter
from ..plots import PALETTE
from ..runtime import one_thread
from ._view import Blit, PngRenderer, br_float_slider, interactive_png, student_only

__all__ = ["GenerationExplorer", "generation_widget"]


class GenerationExplorer:
    """Gera ``n_chars`` caracteres a partir do prompt e mostra a distribuição do próximo caractere.

    ``update`` roda o modelo (geração e um passo para o gráfico), troca os dados dos
    artistas e devolve a figura; o desenho acontece ao exibi-la. O layout é calculado uma vez (no
    :class:`~._view.Blit`) e o PNG de cada estado redesenha só o que muda.
    """

    def __init__(self, model, tokenizer, n_chars: int = 60, top: int = 15):
        self.model, self.tokenizer, self.n_chars, self.top = model, tokenizer, n_chars, top
        self.device = next(model.parameters()).device
        self.fig = Figure(figsize=(10, 3.8), layout="constrained")
        ax_text, self.ax_bars = self.fig.subplots(2, 1, height_ratios=[0.45, 1])
        ax_text.axis("off")
        # Título e texto como artistas de texto comuns (o título de um Axes é reposicionado a cada
        # desenho completo, o que o redesenho parcial abaixo não faz).
        self.title = ax_text.text(0.0, 1.0, "", va="top", ha="left", fontsize=10, transform=ax_text.transAxes)
        self.text = ax_text.text(
            0.0, 0.68, "", va="top", ha="left", family="monospace", fontsize=10, transform=ax_text.transAxes
        )
        self.bars = self.ax_bars.bar(np.arange(top), np.zeros(top), color=PALETTE[0])
        self.ax_bars.set_ylim(0, 1)
        self.ax_bars.yaxis.set_major_formatter(br_formatter())
        self.ax_bars.set_ylabel("probabilidade")
        self.ax_bars.set_xlabel("próximo caractere depois do prompt (os mais prováveis a τ = 1)")
        self.ax_bars.set_xticks(np.arange(top))
        # Só o texto, o título, as barras e os rótulos do eixo x mudam de um estado para outro: o
        # resto (eixos, grade, rótulo do eixo y) é desenhado uma vez e reaproveitado em pixels.
        self.ax_bars.set_xticklabels(["M"] * top)  # o layout é calculado com rótulos de verdade
        self.blit = Blit(self.fig, [self.text, self.title, *self.bars, self.ax_bars.xaxis])

    def update(
        self, temperature: float = 0.8, top_k: int = 0, prompt: str = "A atenção ", seed: int = 0
    ) -> Figure:
        """Regera o texto com a temperatura e o top-k dados (top_k = 0: sem corte).

        Roda com uma thread (``runtime.one_thread``): com um modelo deste tamanho, várias threads
        disputando núcleos ocupados deixam cada passo dezenas de vezes mais lento.
        """
        with one_thread():
            return self._update(temperature, top_k, prompt, seed)

    def _update(self, temperature: float, top_k: int, prompt: str, seed: int) -> Figure:
        prompt = prompt or " "
        ids = self.tokenizer.encode(prompt)[-self.model.max_len :][None].to(self.device)  # (1, T0)
        k = None if top_k <= 0 else int(top_k)
        gen = torch.Generator(device=self.device).manual_seed(int(seed))
        out = generate(self.model, ids, self.n_chars, temperature=temperature, top_k=k, generator=gen)
        new_text = self.tokenizer.decode(out[0, ids.size(1) :])
        shown = textwrap.fill(prompt + "▌" + new_text.replace("\n", " ¶ "), width=90)
        self.text.set_text(shown)
        with torch.no_grad():
            logits = self.model(ids)[0, -1].float().cpu()  # (V,)
        p_now = next_token_distribution(logits, temperature, k)
        order = torch.argsort(logits, descending=True)[: self.top].tolist()
        for bar, i in zip(self.bars, order):
            bar.set_height(float(p_now[i]))
        labels = [self.tokenizer.chars[i] if self.tokenizer.chars[i].strip() else "␣" for i in order]
        self.ax_bars.set_xticklabels(labels)
        modo = "gulosa (argmax)" if temperature == 0 else f"τ = {br(temperature, '.2f')}"
        corte = "sem top-k" if k is None else f"top-k = {k}"
        self.title.set_text(f"Texto gerado ({modo}, {corte}, semente {seed}); ▌ marca o fim do prompt")
        return self.fig


@student_only
def generation_widget(model, tokenizer, n_chars: int = 60):
    """Controles de temperatura, top-k, semente e prompt ligados a um :class:`GenerationExplorer`."""
    import ipywidgets as widgets

    explorer = GenerationExplorer(model, tokenizer, n_chars=n_chars)
    controls = {
        "temperature": br_float_slider(
            0.8,
            min=0.0,
            max=2.0,
            step=0.05,
            description="temperatura",
            continuous_update=False,
            style={"description_width": "initial"},
        ),
        "top_k": widgets.IntSlider(
            value=0,
            min=0,
            max=tokenizer.vocab_size,
            description="top-k (0 = sem)",
            continuous_update=False,
            style={"description_width": "initial"},
        ),
        "seed": widgets.IntSlider(value=0, min=0, max=20, description="semente", continuous_update=False),
        "prompt": widgets.Text(value="A atenção ", description="prompt", continuous_update=False),
    }

    image = interactive_png(PngRenderer(explorer.update), controls)
    return widgets.VBox(
        [
            widgets.HBox([controls["temperature"], controls["top_k"]]),
            widgets.HBox([controls["seed"], controls["prompt"]]),
            image,
        ]
    )


def _bench_explorer() -> GenerationExplorer:
    """Explorador com um TinyGPT do tamanho do notebook (sem treino: o tempo não depende dos pesos)."""
    from ..generation import GPTConfig, TinyGPT
    from ..text import CharTokenizer, course_corpus

    tokenizer = CharTokenizer(course_corpus())
    torch.manual_seed(0)
    config = GPTConfig(tokenizer.vocab_size, max_len=64, d_model=64, n_heads=4, n_layers=1, d_ff=256)
    model = TinyGPT(config).eval()  # o mesmo tamanho do GPT da seção 2 do notebook
    return GenerationExplorer(model, tokenizer)


# Casos do `make bench` (scripts/bench.py): orçamento de 300 ms por atualização.
BENCH = [
    (
        _bench_explorer,
        [
            {"temperature": 0.8, "top_k": 0, "prompt": "A atenção ", "seed": 0},
            {"temperature": 0.0, "top_k": 0, "prompt": "O modelo ", "seed": 1},
            {"temperature": 1.2, "top_k": 10, "prompt": "Capítulo ", "seed": 2},
        ],
    )
]


def _bench_widget():
    """O widget inteiro, para `make bench` mover cada controle passo a passo (cache e pré-cálculo)."""
    explorer = _bench_explorer()
    return generation_widget(explorer.model, explorer.tokenizer)


BENCH_WIDGET = _bench_widget
