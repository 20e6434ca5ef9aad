"""Capítulos 1 a 4: todo número que uma figura ou uma exploração escreve está no formato brasileiro.

Desenha cada figura dos capítulos (e o mapa de calor comum) e cada exploração em todos os casos que
``make bench`` mede, e lê todos os textos desenhados: marcas dos eixos e das barras de cor,
anotações das células, legendas, títulos. Os textos impressos pelos notebooks são conferidos em
``tests/test_release.py``, que já executa cada capítulo.
"""

from __future__ import annotations

import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from number_helpers import english_numbers

from transformer_course import plots
from transformer_course import positional as ref
from transformer_course.experiments.ch01 import cosine_similarity_matrix
from transformer_course.experiments.ch02 import scaling_statistics
from transformer_course.experiments.ch03 import NeighborConfig, divisors, train_neighbor_models
from transformer_course.experiments.ch04 import ln_gradient_experiment, residual_norms_at_init
from transformer_course.widgets import ch01, ch02, ch03, ch04


def drawn_texts(fig: Figure) -> list[str]:
    """Os textos de ``fig`` depois de desenhada (as marcas dos eixos só existem depois do desenho)."""
    FigureCanvasAgg(fig).draw()
    return [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text()]


def assert_pt_br(fig: Figure, what: str) -> None:
    texts = drawn_texts(fig)
    assert any(any(c.isdigit() for c in t) for t in texts), f"{what}: nenhum número desenhado"
    wrong = {t: english_numbers(t) for t in texts if english_numbers(t)}
    assert not wrong, f"{what}: números no formato inglês: {wrong}"


@pytest.fixture(scope="module")
def ln_results():
    return ln_gradient_experiment(max_depth=4, n_seeds=1)


@pytest.fixture(scope="module")
def neighbor_results():
    cfg = NeighborConfig(steps=3)  # o formato dos textos não depende do treino
    return cfg, train_neighbor_models(divisors(cfg.d_model), cfg)


def _figures(ln_results, neighbor_results):
    gen = torch.Generator().manual_seed(0)
    d_ks = [2, 8, 64]
    cfg, results = neighbor_results
    pe = ref.sinusoidal_encoding(100, 64)
    yield "sinusoidal_figure", plots.sinusoidal_figure(pe, dims=(0, 1, 10, 40))
    yield "similarity_figure", plots.similarity_figure({"senoidal": cosine_similarity_matrix(pe[:48])})
    yield "embedding_scale_figure", plots.embedding_scale_figure({"a": 1.03, "b": 22.6}, 16.0, "PE: 16")
    yield (
        "rope_figure",
        plots.rope_figure(
            {"par 0": ref.apply_rope(torch.tensor([[1.0, 0.0]] * 8))},
            torch.arange(-4, 5),
            {"n = 30": torch.randn(9, generator=gen)},
        ),
    )
    yield "alibi_figure", plots.alibi_figure(ref.alibi_slopes(8), ref.alibi_bias(8, 32))
    yield (
        "attention_heatmap",
        plots.attention_heatmap(torch.rand(3, 4, generator=gen).softmax(-1), "abc", "wxyz"),
    )
    yield "soft_lookup_bars", plots.soft_lookup_bars(["a", "b"], torch.tensor([0.25, 0.75]), "t")
    yield "scaling_figure", plots.scaling_figure(d_ks, scaling_statistics(d_ks, n_queries=32), n_keys=16)
    yield "head_split_figure", plots.head_split_figure(4, 8, 2)
    yield "head_grid", plots.head_grid(torch.rand(2, 4, 4, generator=gen).softmax(-1), list("abcd"))
    yield "heads_tradeoff_figure", plots.heads_tradeoff_figure(results, cfg.d_model)
    yield "activation_figure", plots.activation_figure()
    yield "gradient_profile_figure", plots.gradient_profile_figure(ln_results, 4)
    yield "last_layer_gradient_figure", plots.last_layer_gradient_figure(ln_results)
    yield (
        "residual_norm_figure",
        plots.residual_norm_figure({nf: residual_norms_at_init(4, nf) for nf in (True, False)}),
    )
    yield (
        "decoder_attention_figure",
        plots.decoder_attention_figure(
            torch.rand(3, 3, generator=gen).softmax(-1).tril(),
            torch.rand(3, 4, generator=gen).softmax(-1),
            list("abc"),
            list("wxyz"),
        ),
    )


def test_every_figure_of_chapters_1_to_4_writes_numbers_in_pt_br(ln_results, neighbor_results):
    names = []
    for name, fig in _figures(ln_results, neighbor_results):
        assert_pt_br(fig, name)
        names.append(name)
    drawing = {
        name
        for module in ("ch01", "ch02", "ch03", "ch04")
        for name in getattr(plots, module).__all__
        if callable(getattr(plots, name)) and name != "LN_COLORS"
    }
    assert drawing <= set(names), f"figuras sem conferência: {drawing - set(names)}"


@pytest.mark.parametrize("module", [ch01, ch02, ch03, ch04], ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_exploration_state_writes_numbers_in_pt_br(module, ln_results, neighbor_results):
    ((factory, cases),) = module.BENCH
    if module is ch03:
        cfg, results = neighbor_results
        explorer = factory(results=results, cfg=cfg)
    elif module is ch04:
        explorer = factory(ln_results)
        cases = [c for c in cases if c["depth"] <= 4]
    else:
        explorer = factory()
    for case in cases:
        assert_pt_br(explorer.update(**case), f"{module.__name__}.update({case})")


def test_the_detector_flags_english_numbers_and_accepts_pt_br():
    for english in ("0.19", "período ≈ 1.9", "4e-07", "1,234.5", "97.3%", "1.06 0.93", "0.123"):
        assert english_numbers(english), english
    for pt_br in (
        "0,19",
        "período ≈ 1987",
        "4 × 10⁻⁷",
        "1.234,5",
        "97,3%",
        "1.048.576",
        "(2, 5, 64)",
        "PyTorch 2.13.0",
    ):
        assert not english_numbers(pt_br), pt_br
