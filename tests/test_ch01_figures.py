"""Capítulo 1: as figuras e a exploração devolvem figuras com os dados certos, sem pyplot."""

from __future__ import annotations

import io

import pytest
import torch
from matplotlib.figure import Figure

from transformer_course import plots
from transformer_course import positional as ref
from transformer_course.experiments.ch01 import cosine_similarity_matrix, toeplitz_deviation
from transformer_course.widgets import ch01 as widget


def _render(fig: Figure) -> None:
    fig.savefig(io.BytesIO(), format="png", dpi=40)


def test_static_figures_are_figures():
    figures = [
        plots.sinusoidal_figure(ref.sinusoidal_encoding(60, 32), dims=(0, 1, 10)),
        plots.similarity_figure({"senoidal": cosine_similarity_matrix(ref.sinusoidal_encoding(10, 8))}),
        plots.embedding_scale_figure({"a": 1.0, "b": 20.0}, 4.0, "PE"),
        plots.rope_figure(
            {"par 0": torch.randn(8, 2)},
            torch.arange(-3, 4),
            {"n = 0": torch.randn(7), "n = 5": torch.randn(7)},
        ),
        plots.alibi_figure(ref.alibi_slopes(4), ref.alibi_bias(4, 12)),
    ]
    for fig in figures:
        assert isinstance(fig, Figure)
        _render(fig)


@pytest.mark.parametrize(
    "scheme, toeplitz", [("senoidal", True), ("aprendido", False), ("RoPE", True), ("ALiBi", True)]
)
@pytest.mark.parametrize("d_model, length", [(8, 8), (64, 40), (512, 256)])
def test_explorer_updates_every_scheme(scheme, toeplitz, d_model, length):
    explorer = widget.PositionalExplorer()
    fig = explorer.update(scheme, d_model, length)
    assert isinstance(fig, Figure)
    data = widget.scheme_matrices(scheme, d_model, length)
    assert data["right"].shape == (length, length)
    assert (toeplitz_deviation(data["right"]) < 1e-4) == toeplitz
    assert ("NÃO depende" in explorer.suptitle.get_text()) != toeplitz
    _render(fig)


def test_explorer_shapes_follow_the_sliders():
    explorer = widget.PositionalExplorer()
    explorer.update("senoidal", 32, 16)
    assert explorer.left.get_array().shape == (16, 32)
    explorer.update("ALiBi", 32, 24)
    assert explorer.left.get_array().shape == (widget.ALIBI_HEADS, 24)
    assert explorer.right.get_array().shape == (24, 24)


def test_explorer_leaves_torch_threads_alone():
    threads = torch.get_num_threads()
    widget.PositionalExplorer().update("RoPE", 64, 64)
    assert torch.get_num_threads() == threads


def test_unknown_scheme_is_refused_in_portuguese():
    with pytest.raises(ValueError, match="Esquema desconhecido"):
        widget.scheme_matrices("xpto", 8, 8)


def test_bench_cases_cover_every_scheme():
    ((factory, cases),) = widget.BENCH
    assert factory is widget.PositionalExplorer
    assert {case["scheme"] for case in cases} == set(widget.SCHEMES)


def test_positional_widget_builds():
    pytest.importorskip("ipywidgets")
    box = widget.positional_widget()
    assert len(box.children) == 2


def test_toeplitz_deviation_and_similarity_helpers():
    assert toeplitz_deviation(torch.tensor([[1.0, 2.0], [3.0, 1.0]])) == 0.0
    assert toeplitz_deviation(torch.tensor([[1.0, 2.0], [3.0, 5.0]])) == 4.0
    sim = cosine_similarity_matrix(torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]]))
    torch.testing.assert_close(sim.diagonal(), torch.ones(3))
    assert abs(sim[0, 1].item()) < 1e-7
