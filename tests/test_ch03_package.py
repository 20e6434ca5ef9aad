"""Capítulo 3: a referência é igual ao nn.MultiheadAttention; parâmetros; experimento; figuras; widget."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from torch import nn

from transformer_course import interop, plots
from transformer_course import multihead as mh
from transformer_course.experiments import ch03 as exp
from transformer_course.widgets import HeadsExplorer
from transformer_course.widgets.ch03 import BENCH


def _pair(d_model, n_heads, bias=True, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    torch_mha = nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=True).to(dtype).eval()
    ours = interop.load_from_torch(mh.MultiHeadAttention(d_model, n_heads, bias=bias).to(dtype), torch_mha)
    return ours, torch_mha


def _torch_mask(mask, B, H, Tq, Tk):
    return None if mask is None else interop.to_mha_attn_mask(mask, H, Tq)


MASKS = {
    "nenhuma": lambda B, H, Tq, Tk: None,
    "2-D causal": lambda B, H, Tq, Tk: torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq),
    "3-D": lambda B, H, Tq, Tk: torch.rand(B, Tq, Tk, generator=torch.Generator().manual_seed(1)) < 0.6,
    "4-D padding": lambda B, H, Tq, Tk: (
        torch.arange(Tk).view(1, 1, 1, Tk) < torch.tensor([Tk, 2]).view(B, 1, 1, 1)
    ),
    "4-D por cabeça": lambda B, H, Tq, Tk: (
        torch.rand(B, H, Tq, Tk, generator=torch.Generator().manual_seed(2)) < 0.6
    ),
}


@pytest.mark.parametrize("mask_name", list(MASKS))
@pytest.mark.parametrize(("Tq", "Tk", "H"), [(5, 5, 4), (3, 7, 2), (6, 4, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_reference_equals_torch(mask_name, Tq, Tk, H, dtype):
    B, D = 2, 8
    ours, torch_mha = _pair(D, H, dtype=dtype)
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(B, Tq, D, generator=gen, dtype=dtype)
    kv = torch.randn(B, Tk, D, generator=gen, dtype=dtype)
    mask = MASKS[mask_name](B, H, Tq, Tk)
    if mask is not None:
        mask = mask.clone()
        mask[..., 0] = True  # nenhuma linha toda bloqueada (capítulo 5)
    out, w = ours(q, kv, kv, mask)
    ref_out, ref_w = torch_mha(
        q, kv, kv, attn_mask=_torch_mask(mask, B, H, Tq, Tk), average_attn_weights=False
    )
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-10, "atol": 1e-12}
    torch.testing.assert_close(out, ref_out, **tol)
    torch.testing.assert_close(w, ref_w, **tol)
    assert w.shape == (B, H, Tq, Tk)


def test_reference_without_bias_and_dropout_in_eval():
    ours, torch_mha = _pair(12, 3, bias=False)
    x = torch.randn(2, 4, 12)
    torch.testing.assert_close(ours(x, x, x)[0], torch_mha(x, x, x)[0])
    dropped = interop.load_from_torch(mh.MultiHeadAttention(12, 3, dropout=0.5, bias=False), torch_mha).eval()
    torch.testing.assert_close(dropped(x, x, x)[0], torch_mha(x, x, x)[0])
    dropped.train()
    assert not torch.allclose(dropped(x, x, x)[0], torch_mha(x, x, x)[0])


def test_load_from_torch_refuses_mismatches():
    torch_mha = nn.MultiheadAttention(8, 2, batch_first=True)
    with pytest.raises(ValueError, match="formas incompatíveis"):
        interop.load_from_torch(mh.MultiHeadAttention(8, 4), torch_mha)
    with pytest.raises(ValueError, match="viés"):
        interop.load_from_torch(mh.MultiHeadAttention(8, 2, bias=False), torch_mha)


@pytest.mark.parametrize("n_heads", [1, 2, 4, 8, 16, 64])
def test_parameter_count_does_not_depend_on_heads(n_heads):
    D = 64
    count = sum(p.numel() for p in mh.MultiHeadAttention(D, n_heads).parameters())
    assert (
        count == 4 * D * D + 4 * D == sum(p.numel() for p in nn.MultiheadAttention(D, n_heads).parameters())
    )


def test_split_merge_roundtrip_and_errors():
    x = torch.randn(2, 5, 12)
    assert torch.equal(mh.merge_heads(mh.split_heads(x, 3)), x)
    for bad in (5, 0, -3):
        with pytest.raises(ValueError, match="divisível"):
            mh.split_heads(x, bad)
    with pytest.raises(ValueError, match="divisível"):
        mh.MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="eixos"):
        mh.MultiHeadAttention(12, 3)(x, x, x, torch.ones(1, 1, 1, 5, 5, dtype=torch.bool))


def test_divisors_and_vocabulary():
    assert exp.divisors(16) == [1, 2, 4, 8, 16]
    assert len(exp.VOCAB) == exp.NeighborConfig().vocab_size
    assert exp.encode_words(exp.SENTENCE.split()).tolist()[:3] == [0, 1, 2]
    with pytest.raises(ValueError, match="vocabulário"):
        exp.encode_words(["tigre"])


def test_neighbor_batch_targets_are_the_neighbours():
    cfg = exp.NeighborConfig()
    tokens, targets = exp.neighbor_batch(cfg, torch.Generator().manual_seed(0), batch_size=4)
    assert torch.equal(targets[:, 1:, 0], tokens[:, :-1]) and torch.equal(targets[:, :-1, 1], tokens[:, 1:])
    assert (targets[:, 0, 0] == exp.IGNORE).all() and (targets[:, -1, 1] == exp.IGNORE).all()


@pytest.fixture(scope="module")
def neighbor_results():
    return exp.train_neighbor_models([1, 2, 4, 8, 16])


def test_one_head_cannot_look_both_ways(neighbor_results):
    """O resultado que o notebook conta: H = 1 e H = 16 (d_k = 1) erram, H = 2 a 8 acertam."""
    acc = {h: r["accuracy"] for h, r in neighbor_results.items()}
    assert acc[2] > 0.97 and acc[4] > 0.95 and acc[8] > 0.95
    assert acc[1] < 0.8 and acc[16] < 0.8
    assert len({r["n_attention_params"] for r in neighbor_results.values()}) == 1
    ids = exp.encode_words(exp.SENTENCE.split()).view(1, -1)
    with torch.no_grad():
        _, w = neighbor_results[2]["model"](ids)
    T = ids.size(1)
    prev = w[0, :, torch.arange(1, T), torch.arange(T - 1)].mean(-1)  # peso médio no vizinho anterior
    nxt = w[0, :, torch.arange(T - 1), torch.arange(1, T)].mean(-1)  # ... e no seguinte
    assert max(prev) > 0.9 and max(nxt) > 0.9 and prev.argmax() != nxt.argmax()


def test_train_restores_threads():
    before = torch.get_num_threads()
    exp.train_neighbor_models([1], exp.NeighborConfig(steps=1))
    assert torch.get_num_threads() == before


def test_figures():
    fig = plots.head_split_figure(4, 8, 2)
    assert isinstance(fig, Figure) and len(fig.axes) == 5
    grid = plots.head_grid(torch.full((3, 4, 4), 0.25), list("abcd"), "t")
    assert sum(ax.get_visible() for ax in grid.axes) == 3 + 1  # 3 cabeças + barra de cores


def test_tradeoff_figure(neighbor_results):
    fig = plots.heads_tradeoff_figure(neighbor_results, 16)
    assert len(fig.axes) == 2 and "1088" in fig.axes[0].get_title()


def test_explorer_changes_with_the_slider(neighbor_results):
    results = {**neighbor_results, 4: neighbor_results[2], 8: neighbor_results[16]}  # só para a forma
    explorer = HeadsExplorer(results=results)
    one = np.ma.getdata(explorer.update(1).axes[0].images[0].get_array()).copy()
    title_one = explorer.suptitle.get_text()
    sixteen = explorer.update(16).axes[0].images[0].get_array()
    assert one.shape == (9, 9) and sixteen.shape == (4 * 11 - 2, 4 * 11 - 2)
    assert len(explorer.labels) == 16 and explorer.suptitle.get_text() != title_one
    assert "1088 parâmetros" in explorer.params.get_text()
    with pytest.raises(ValueError, match="não divide"):
        explorer.update(3)


def test_bench_declares_every_divisor():
    factory, cases = BENCH[0]
    assert factory is HeadsExplorer and [c["n_heads"] for c in cases] == exp.divisors(16)


def test_split_figure_right_panels_come_from_split_heads():
    fig = plots.head_split_figure(4, 8, 2)
    tokens = np.asarray(fig.axes[1].images[0].get_array())  # cabeça 0, certo: o token de cada posição
    assert (tokens == np.arange(4)[:, None]).all()
    wrong = np.asarray(fig.axes[2].images[0].get_array())  # cabeça 0, view direto: tokens misturados
    assert not (wrong == np.arange(4)[:, None]).all()
