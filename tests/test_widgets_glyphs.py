"""O renderizador que guarda glifos desenha exatamente o que o RendererAgg do matplotlib desenha."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from transformer_course.widgets import _glyphs

pytestmark = pytest.mark.skipif(
    not _glyphs.SUPPORTED, reason="este matplotlib não desenha glifo a glifo (antes do 3.11): nada a guardar"
)


def _draw(fig: Figure, canvas_class) -> np.ndarray:
    canvas_class(fig)
    fig.canvas.draw()
    return np.array(fig.canvas.buffer_rgba())


def _texts() -> Figure:
    """Texto de todo tipo: posições em frações de pixel, girado, mathtext (com traços), mono, itálico."""
    fig = Figure(figsize=(5, 3), dpi=100)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1])
    ax.set_xticks([0, 0.33, 0.5, 1], ["zero", "um terço", "½", "um"], rotation=30)
    ax.set_ylabel("probabilidade (girado 90°)")
    ax.set_title(r"atenção: $\mathrm{softmax}(\frac{QK^\top}{\sqrt{d_k}})V$")
    for i in range(6):  # a mesma palavra em seis frações de pixel diferentes
        fig.text(0.05 + i * 0.0123, 0.1 + i * 0.05, "Ação ▌ ¶", family="monospace", fontsize=9 + i / 3)
    fig.text(0.6, 0.8, "itálico", style="italic", fontsize=12)
    fig.text(0.6, 0.7, "serrilhado", antialiased=False)
    fig.text(0.6, 0.6, "cinza e grande", color="0.4", fontsize=16, alpha=0.7)
    return fig


def test_same_pixels_as_matplotlib_first_time_and_from_the_cache():
    _glyphs.clear()
    fig = _texts()
    expected = _draw(fig, FigureCanvasAgg)
    first = _draw(fig, _glyphs.GlyphCacheCanvas)
    stored = len(_glyphs._BITMAPS)
    assert stored > 0, "nenhum glifo foi guardado"
    again = _draw(fig, _glyphs.GlyphCacheCanvas)
    assert len(_glyphs._BITMAPS) == stored, "o segundo desenho pediu glifos novos ao FreeType"
    for name, got in (("primeiro desenho", first), ("desenho do cache", again)):
        differ = np.argwhere((got != expected).any(axis=-1))
        assert not len(differ), f"{name}: {len(differ)} pixels diferem do RendererAgg, o 1º em {differ[0]}"


def test_the_cache_does_not_call_freetype_for_a_glyph_already_seen(monkeypatch):
    _glyphs.clear()
    fig = Figure(figsize=(3, 1), dpi=100)
    text = fig.text(0.1, 0.5, "abc")
    _draw(fig, _glyphs.GlyphCacheCanvas)
    calls = []
    from matplotlib.ft2font import FT2Font

    original = FT2Font._render_glyph
    monkeypatch.setattr(FT2Font, "_render_glyph", lambda self, *a: calls.append(a) or original(self, *a))
    text.set_text("xyz")
    fig.canvas.draw()
    assert calls, "um texto novo não foi desenhado pelo FreeType"
    calls.clear()
    text.set_text("abc")  # o texto do primeiro desenho, no mesmo lugar
    fig.canvas.draw()
    assert not calls, f"o texto já desenhado pediu {len(calls)} glifos ao FreeType"


@pytest.mark.parametrize("chapter", ["ch01", "ch02", "ch03", "ch04", "ch05", "ch06", "ch07"])
def test_every_widget_figure_is_drawn_the_same(chapter):
    module = importlib.import_module(f"transformer_course.widgets.{chapter}")
    for factory, cases in module.BENCH:
        explorer = factory()
        for kwargs in cases:
            fig = explorer.update(**kwargs)
            blit = fig.__dict__.pop("blit", None)
            try:
                expected = _draw(fig, FigureCanvasAgg)
                got = _draw(fig, _glyphs.GlyphCacheCanvas)
            finally:
                if blit is not None:
                    fig.blit = blit
            differ = np.argwhere((got != expected).any(axis=-1))
            assert not len(differ), f"{chapter} {kwargs}: {len(differ)} pixels diferem do RendererAgg"
