"""Capítulo 5: figuras, o explorador do widget e o teste de propriedade da causalidade."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from transformer_course import interop, masks, plots
from transformer_course.attention import scaled_dot_product_attention as attention
from transformer_course.widgets import MaskExplorer


def test_mask_panels_and_nan_heatmaps_are_figures():
    causal = masks.causal_mask(4)
    fig = plots.mask_panels([causal, ~causal], ["a", "b"], ["w", "x", "y", "z"])
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["w", "x", "y", "z"]
    weights = torch.full((3, 3), float("nan"))
    fig = plots.nan_heatmaps([weights, torch.eye(3)], ["nan", "eye"])
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("NaN") == 9


def test_mask_explorer_shows_nan_only_with_empty_rows():
    explorer = MaskExplorer()
    fig = explorer.update(6, 2, True, "direita")
    plain = np.ma.getmaskarray(fig.axes[1].images[0].get_array())
    assert not plain.any(), "padding à direita com causal não deixa linha vazia"
    fig = explorer.update(6, 2, True, "esquerda")
    plain = np.ma.getmaskarray(fig.axes[1].images[0].get_array())
    assert plain[:2].all() and not plain[2:].any(), "as duas primeiras linhas ficam vazias (NaN)"
    safe = np.asarray(fig.axes[2].images[0].get_array())
    assert np.all(safe[:2] == 0) and np.allclose(safe[2:].sum(-1), 1)
    assert "2 linha(s) totalmente bloqueada(s)" in explorer.suptitle.get_text()
    fig.canvas.draw()  # as marcas só são calculadas ao desenhar
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert labels == ["PAD", "PAD", "2", "3", "4", "5"]
    mask = np.asarray(fig.axes[0].images[0].get_array())
    assert mask.shape == (6, 6) and mask[:, :2].sum() == 0


def test_mask_explorer_update_is_fast():
    explorer = MaskExplorer()
    times = []
    for T, pads, causal, side in [
        (12, 3, True, "esquerda"),
        (5, 0, False, "direita"),
        (9, 8, True, "direita"),
    ] * 5:
        start = time.perf_counter()
        assert isinstance(explorer.update(T, pads, causal, side), Figure)
        times.append(time.perf_counter() - start)
    # Tempo: medido por `make bench`, não afirmado aqui (oscila numa máquina ocupada).


def _model(mask_kind):
    gen = torch.Generator().manual_seed(0)
    W = torch.randn(3, 8, 8, generator=gen) / 8**0.5

    def fn(x):  # (B, T, 8)
        T = x.size(1)
        mask = {"causal": masks.causal_mask(T), "none": None, "upper": masks.causal_mask(T).T}[mask_kind]
        return attention(x @ W[0], x @ W[1], x @ W[2], mask)[0]

    return fn


def test_assert_causal_and_dependency_matrix():
    x = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(1))
    masks.assert_causal(_model("causal"), x)
    for kind in ("none", "upper"):
        with pytest.raises(AssertionError, match="não é causal"):
            masks.assert_causal(_model(kind), x)
    dep = masks.dependency_matrix(_model("causal"), x)
    assert torch.equal(dep, masks.causal_mask(6))
    assert masks.dependency_matrix(_model("none"), x).all()
    assert masks.future_leak(_model("causal"), x, 2) == 0.0


def test_perturb_positions_changes_only_the_chosen_tokens():
    ids = torch.tensor([[1, 2, 3, 4]])
    out = masks.perturb_positions(ids, slice(2, None), torch.Generator().manual_seed(0), vocab_size=5)
    assert torch.equal(out[:, :2], ids[:, :2]) and (out[:, 2:] != ids[:, 2:]).all()
    assert out.max() < 5 and torch.equal(ids, torch.tensor([[1, 2, 3, 4]]))
    with pytest.raises(ValueError):
        masks.perturb_positions(ids, slice(1, None))


def test_converters_shapes():
    pad = masks.padding_mask(torch.tensor([[1, 0], [2, 3]]))
    assert interop.to_key_padding_mask(pad).tolist() == [[False, True], [False, False]]
    assert interop.to_mha_attn_mask(
        masks.decoder_self_mask(torch.tensor([[1, 0], [2, 3]])), n_heads=3
    ).shape == (
        6,
        2,
        2,
    )
    additive = interop.to_additive_mask(masks.causal_mask(2), dtype=torch.float64)
    assert additive.dtype == torch.float64 and additive[0, 1] == float("-inf") and additive[1, 0] == 0
    with pytest.raises(ValueError):
        interop.to_mha_attn_mask(pad)
    with pytest.raises(ValueError):
        interop.to_key_padding_mask(masks.causal_mask(2))


@pytest.mark.parametrize("side", ["direita", "esquerda"])
@pytest.mark.parametrize("causal", [True, False])
def test_mask_explorer_agrees_with_the_package(side, causal):
    explorer = MaskExplorer()
    T, n_pad = 7, 3
    mask = torch.from_numpy(explorer.masks(T, n_pad, causal, side).copy())
    ids = torch.ones(1, T, dtype=torch.long)
    if side == "esquerda":
        ids[0, :n_pad] = 0
    else:
        ids[0, T - n_pad :] = 0
    expected = masks.padding_mask(ids)[0, 0].expand(T, T)
    if causal:
        expected = expected & masks.causal_mask(T)
    assert torch.equal(mask, expected)
    scores = explorer.scores[:T, :T].double()
    plain, safe = explorer.weights(T, mask.numpy())
    torch.testing.assert_close(torch.from_numpy(safe), masks.masked_softmax(scores, mask))
    torch.testing.assert_close(
        torch.from_numpy(plain), scores.masked_fill(~mask, float("-inf")).softmax(-1), equal_nan=True
    )
