"""A imagem das explorações: PNG por estado em cache, vizinhos pré-calculados, ipywidgets.Image."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from transformer_course.widgets._view import PngRenderer, figure_png, interactive_png, neighbor_values


class Counting:
    """Uma 'exploração' mínima: a figura mostra o valor; conta quantas vezes foi desenhada."""

    def __init__(self):
        self.fig = Figure(figsize=(2, 1))
        self.text = self.fig.text(0.5, 0.5, "")
        self.calls = []

    def update(self, x, label="a"):
        self.calls.append((x, label))
        self.text.set_text(f"{label} {x}")
        return self.fig


def test_figure_png_is_a_png_of_the_figure_size():
    fig = Figure(figsize=(2, 1))
    fig.text(0.5, 0.5, "olá")
    data = figure_png(fig, dpi=50)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (100, 50)


def test_cache_draws_each_state_once_and_tells_states_apart():
    explorer = Counting()
    renderer = PngRenderer(explorer.update, maxsize=2)
    a = renderer.png(x=1)
    assert renderer.png(x=1) == a and explorer.calls == [(1, "a")]
    b = renderer.png(x=2)
    assert b != a and renderer.hits == 1 and renderer.misses == 2
    assert renderer.png(x=2, label="b") != b  # outro estado, outra figura
    assert not renderer.cached(x=1)  # LRU de tamanho 2: o mais antigo saiu
    assert renderer.cached(x=2)


def test_prefetch_fills_the_cache_in_a_thread():
    explorer = Counting()
    renderer = PngRenderer(explorer.update)
    thread = renderer.prefetch([{"x": 3}, {"x": 4}])
    thread.join(timeout=30)
    assert renderer.cached(x=3) and renderer.cached(x=4)
    before = len(explorer.calls)
    renderer.png(x=4)
    assert len(explorer.calls) == before, "o estado pré-calculado foi desenhado de novo"


def test_neighbor_values_follow_the_direction_of_the_move():
    ipywidgets = pytest.importorskip("ipywidgets")
    slider = ipywidgets.IntSlider(value=5, min=0, max=10, step=1)
    assert neighbor_values(slider, 5) == [6, 4]
    assert neighbor_values(slider, 5, previous=6) == [4, 6]  # desceu de 6: o próximo é o 4
    assert neighbor_values(slider, 10) == [9]
    floats = ipywidgets.FloatSlider(value=0.8, min=0.0, max=2.0, step=0.05)
    assert neighbor_values(floats, 0.8) == [0.85, 0.75]
    options = ipywidgets.SelectionSlider(options=[2, 4, 8, 16], value=8)
    assert neighbor_values(options, 8, previous=4) == [16, 4]
    assert neighbor_values(ipywidgets.Checkbox(value=True), True) == [False]
    assert neighbor_values(ipywidgets.Text(value="oi"), "oi") == []


def test_interactive_png_follows_the_controls(monkeypatch):
    ipywidgets = pytest.importorskip("ipywidgets")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # sem pré-cálculo inicial: contagem exata
    explorer = Counting()
    slider = ipywidgets.IntSlider(value=1, min=0, max=5)
    image = interactive_png(PngRenderer(explorer.update), {"x": slider})
    assert isinstance(image, ipywidgets.Image) and image.value == figure_png(explorer.update(1))
    first = image.value
    slider.value = 2
    assert image.value != first and explorer.calls[-1][0] in (2, 3)
    if image.renderer.thread is not None:
        image.renderer.thread.join(timeout=30)
    assert image.renderer.cached(x=3), "o próximo passo na mesma direção não foi pré-calculado"
    slider.value = 1
    assert image.value == first
