"""Capítulo 2: as figuras e a exploração de d_k (o que o widget mostra muda com o controle)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from transformer_course import plots
from transformer_course.experiments.ch02 import scaling_statistics
from transformer_course.widgets import DK_OPTIONS, DkExplorer


def test_scaling_figure_has_three_labelled_panels():
    d_ks = [2, 8, 32]
    fig = plots.scaling_figure(d_ks, scaling_statistics(d_ks, n_queries=32), n_keys=16)
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    assert all(ax.get_xlabel() == "d_k" and ax.get_title() for ax in fig.axes)


def test_heatmap_labels_tokens():
    import torch

    fig = plots.attention_heatmap(torch.full((2, 3), 1 / 3), ["a", "b"], ["x", "y", "z"], "t")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]


def test_dk_explorer_changes_with_the_slider():
    explorer = DkExplorer()
    small = np.array(explorer.update(DK_OPTIONS[0]).axes[1].images[0].get_array())
    title_small = explorer.suptitle.get_text()
    large = np.array(explorer.update(DK_OPTIONS[-1]).axes[1].images[0].get_array())
    assert not np.allclose(small, large)
    assert explorer.suptitle.get_text() != title_small
    # sem escala e com d_k grande, cada linha é quase one-hot; com escala, não
    scaled = np.array(explorer.fig.axes[2].images[0].get_array())
    assert large.max(axis=1).mean() > 0.9 > scaled.max(axis=1).mean()
