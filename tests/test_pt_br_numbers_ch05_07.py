"""Capítulos 5 a 7: todo número que o aluno lê sai no formato brasileiro (vírgula decimal).

Confere o texto que o matplotlib desenha nas figuras e nos widgets (títulos, rótulos e marcas dos
eixos, legendas, anotações, barras de cor), o rótulo dos deslizadores de números reais, a prosa dos
notebooks (fora de código e de fórmulas) e as saídas de texto de cada notebook executado.

Um número com ponto decimal ("0.25", "-1.5") é o erro; "65.504" (ponto de milhar), "seção 3.2",
"PyTorch 2.5" e os reprs de tensores (código que o aluno lê como código) não são.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import jupytext
import nbformat
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text
from number_helpers import english_numbers

from transformer_course import plots
from transformer_course.experiments.ch06 import History

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ["05_mascaras", "06_treino_warmup", "07_familias"]


def points(text: str) -> list[str]:
    """Os números escritos no formato inglês em ``text`` (o detector comum, ``number_helpers``)."""
    return english_numbers(text)


def test_the_detector_itself():
    assert sorted(points("perda 0.25, passo 1e-07, -1.5")) == ["0.25", "1.5", "1e-0"]
    assert points("perda 0,25; 65.504; 1.048.576; 4 × 10⁻⁷; PyTorch 2.13.0+cpu; [2; 4]") == []


# ---------------------------------------------------------------- figuras e widgets


def drawn_texts(fig) -> list[str]:
    """Todo texto visível depois de desenhar a figura (as marcas dos eixos só existem depois)."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text()]


def assert_pt_br(fig, name: str) -> list[str]:
    texts = drawn_texts(fig)
    bad = {t: points(t) for t in texts if points(t)}
    assert not bad, f"{name}: números com ponto decimal no desenho: {bad}"
    return texts


def _history() -> History:
    return History(
        train_loss=[1.05, 0.81, 0.62],
        train_accuracy=[0.41, 0.63, 0.72],
        val_loss=[0.93, 0.75, 0.71],
        val_accuracy=[0.52, 0.66, 0.70],
        step_loss=[1.1, 1.0, 0.93, 0.88, 0.7, 0.66],
        step_lr=[0.0004, 0.0008, 0.0012, 0.0011, 0.0010, 0.0009],
        best_epoch=3,
    )


def _figures():
    """Cada figura dos capítulos 5 a 7, com dados do tamanho dos do notebook."""
    from transformer_course.costs import kaplan_loss
    from transformer_course.training import noam_lr

    gen = torch.Generator().manual_seed(0)
    weights = torch.randn(6, 6, generator=gen).softmax(-1)
    weights[0] = float("nan")
    yield (
        "mask_panels",
        plots.mask_panels(
            [torch.ones(2, 6, dtype=torch.bool).tril(), torch.ones(2, 6, dtype=torch.bool).tril(4)],
            ["a", "b"],
            [f"pos. {j}" for j in range(6)],
            row_labels=["pos. 4", "pos. 5"],
        ),
    )
    yield "nan_heatmaps", plots.nan_heatmaps([weights, weights.nan_to_num()], ["NaN", "sem NaN"])
    yield "noam_curves", plots.noam_curves([(512, 4000, 1.0), (512, 4000, 2.5)], noam_lr, 20_000)
    yield "training_curves", plots.training_curves(_history())
    yield (
        "warmup_experiment_figure",
        plots.warmup_experiment_figure(
            {"com aquecimento": [_history()], "sem aquecimento": [_history()]}, 1.0986
        ),
    )
    yield (
        "training_curves_figure",
        plots.training_curves_figure(
            {"step": [0, 100, 200], "train_loss": [4.5, 2.3, 1.9], "val_loss": [4.5, 2.4, 2.0]}, 3.149, 90
        ),
    )
    cost = {
        "seq_len": [256, 512, 1024],
        "naive_s": [0.0011, 0.0045, 0.019],
        "sdpa_s": [0.0009, 0.0031, 0.012],
        "flops": [4 * n * n * 64 for n in (256, 512, 1024)],
        "score_bytes": [4 * n * n for n in (256, 512, 1024)],
    }
    memory = {"seq_len": [256, 512], "naive_bytes": [850_000, 3_270_000], "sdpa_bytes": [140_000, 280_000]}
    yield (
        "attention_cost_figure",
        plots.attention_cost_figure(cost, {"naive_s": 2.19, "sdpa_s": 1.97}, memory),
    )
    yield "kaplan_figure", plots.kaplan_figure(kaplan_loss, {"nosso": 50_112, "GPT-2 (1,5 B)": 1.5e9})
    probs = torch.randn(12, generator=gen).softmax(-1)
    yield (
        "next_char_figure",
        plots.next_char_figure(list("abcdefghijkl"), {"τ = 0,5": probs, "τ = 1": probs}, "t"),
    )
    yield (
        "cross_attention_figure",
        plots.cross_attention_figure(torch.rand(5, 4, generator=gen), list("abcde"), "1/2/", "título"),
    )


def test_figures_write_numbers_in_pt_br():
    seen = []
    for name, fig in _figures():
        seen += assert_pt_br(fig, name)
    joined = " ".join(seen)
    # e os números estão lá, com vírgula: o teste não passa só porque nada foi escrito
    for expected in ("0,2", "ln C = 1,10", "inclinação 2,19", "× 10⁻⁴", "unigramas (sem contexto): 3,15"):
        assert expected in joined, f"esperava {expected!r} em algum texto das figuras"


def test_widgets_write_numbers_in_pt_br():
    from transformer_course.generation import GPTConfig, TinyGPT
    from transformer_course.text import CharTokenizer
    from transformer_course.widgets import GenerationExplorer, MaskExplorer, NoamExplorer

    mask = MaskExplorer()
    texts = assert_pt_br(mask.update(8, 2, True, "esquerda"), "MaskExplorer")
    assert "0,2" in " ".join(texts)  # a barra de cor
    noam = NoamExplorer()
    texts = assert_pt_br(noam.update(4000, 512, 2.5), "NoamExplorer")
    assert "pico = 2,5·(512·4000)^-0,5" in " ".join(texts)
    tokenizer = CharTokenizer("a atenção olha para trás. ")
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(tokenizer.vocab_size, max_len=16, d_model=16, n_heads=2, n_layers=1, d_ff=32))
    explorer = GenerationExplorer(model.eval(), tokenizer, n_chars=8, top=5)
    texts = assert_pt_br(explorer.update(0.85, 3, "a ", 1), "GenerationExplorer")
    assert "τ = 0,85" in " ".join(texts)


def _descendants(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from _descendants(child)


def test_float_sliders_show_pt_br_values():
    """O ``FloatSlider`` escreve "0.80" no navegador (d3-format, sem localidade): os widgets dos
    capítulos 5 a 7 usam ``br_float_slider``, um ``SelectionSlider`` com rótulos de ``numbers.br``."""
    import ipywidgets

    from transformer_course.generation import GPTConfig, TinyGPT
    from transformer_course.text import CharTokenizer
    from transformer_course.widgets import generation_widget, mask_widget, noam_widget
    from transformer_course.widgets._view import control_values

    tokenizer = CharTokenizer("abcdefghijklmnopqrstu ")
    model = TinyGPT(GPTConfig(tokenizer.vocab_size, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16))
    boxes = {"mask": mask_widget(), "noam": noam_widget(), "generation": generation_widget(model, tokenizer)}
    selections = []
    for name, box in boxes.items():
        for w in _descendants(box):
            assert not isinstance(
                w, (ipywidgets.FloatSlider, ipywidgets.FloatText, ipywidgets.BoundedFloatText)
            ), f"{name}: {type(w).__name__} '{w.description}' mostra o valor com ponto decimal"
            if isinstance(w, ipywidgets.SelectionSlider):
                selections.append(w)
                assert not any(points(label) for label in w._options_labels), (name, w._options_labels)
    labels = {w.description: w for w in selections}
    assert labels["factor"].label == "1,0" and labels["factor"].value == 1.0
    assert labels["temperatura"].label == "0,80" and labels["temperatura"].value == 0.8
    assert control_values(labels["temperatura"])[:3] == [0.0, 0.05, 0.1]  # o pré-cálculo vê os números


# ---------------------------------------------------------------- a prosa e as saídas dos notebooks

_NOT_DECIMALS = [
    r"\$\$.*?\$\$",  # fórmulas (o LaTeX do curso escreve 0{,}5)
    r"\$[^$\n]*\$",
    r"`[^`]*`",  # código
    r"^#+\s*[\d.]+",  # títulos numerados ("### 1.1")
    r"seç(ão|ões)\s+\d+(\.\d+)+",
    r"equação\s+\(\d+(\.\d+)+\)",
    r"arXiv:\d+\.\d+",
    r"(PyTorch|wav2vec)\s+\d+(\.\d+)+",
]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_prose_writes_decimals_with_comma(chapter):
    nb = jupytext.read(ROOT / "notebooks" / f"{chapter}.py")
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        text = cell.source
        for pattern in _NOT_DECIMALS:
            text = re.sub(pattern, " ", text, flags=re.S | re.M)
        assert not points(text), (
            f"{chapter}: número com ponto decimal na prosa: {points(text)}\n{cell.source[:300]}"
        )


def _text_outputs(nb) -> list[str]:
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream" and out.name == "stdout":
                texts.append(out.text)
            elif out.output_type == "execute_result":
                texts.append(out.data.get("text/plain", ""))
    return texts


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_executed_notebook_prints_pt_br_numbers(chapter, tmp_path, monkeypatch):
    """As saídas de texto do notebook executado (no modo da correção, que encolhe os treinos)."""
    from nbclient import NotebookClient

    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    nb = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    texts = [t for t in _text_outputs(nb) if not t.startswith("tensor(")]
    assert len(texts) > 10
    bad = {t[:200]: points(t) for t in texts if points(t)}
    assert not bad, f"{chapter}: saídas com ponto decimal: {bad}"
