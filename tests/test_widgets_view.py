"""A imagem das explorações: PNG por estado em cache, vizinhos pré-calculados, ipywidgets.Image."""

from __future__ import annotations

import threading

import pytest
from matplotlib.figure import Figure

from transformer_course.widgets._view import (
    Blit,
    PngRenderer,
    _text_key,
    encode_png,
    every_state,
    figure_png,
    interactive_png,
    neighbor_values,
)


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


def test_prefetch_after_a_move_waits_before_drawing(monkeypatch):
    """Depois de um movimento, o pré-cálculo espera ``PREFETCH_DELAY_S`` (a imagem nova sai
    primeiro); um movimento nesse meio-tempo o cancela antes de qualquer desenho."""
    ipywidgets = pytest.importorskip("ipywidgets")
    from transformer_course.widgets import _view

    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # sem pré-cálculo inicial
    monkeypatch.setattr(_view, "PREFETCH_DELAY_S", 0.5)
    explorer = Counting()
    drawn_by = []  # (estado, thread que o desenhou)

    def update(x):
        drawn_by.append((x, threading.current_thread()))
        return explorer.update(x)

    slider = ipywidgets.IntSlider(value=1, min=0, max=9)
    image = interactive_png(PngRenderer(update), {"x": slider})
    slider.value = 2
    assert [x for x, _ in explorer.calls] == [1, 2], "o estado pedido não foi desenhado na hora"
    first = image.renderer.thread
    slider.value = 3  # antes de acabar a espera: os vizinhos de 2 não são mais os certos
    first.join(timeout=30)
    # Pela thread que desenhou, não pela contagem: o pré-cálculo de 3 (outra thread) pode já ter
    # desenhado os vizinhos de 3 quando esta linha roda, numa máquina ocupada.
    cancelled = [x for x, thread in drawn_by if thread is first]
    assert not cancelled, f"o pré-cálculo cancelado desenhou mesmo assim: {cancelled}"
    assert [x for x, _ in explorer.calls][:3] == [1, 2, 3], "o estado pedido não foi desenhado na hora"
    image.renderer.thread.join(timeout=30)
    assert image.renderer.cached(x=4) and image.renderer.cached(x=2)


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
    # numa lista, toda opção está a um clique: todas as outras, as mais próximas primeiro
    menu = ipywidgets.Dropdown(options=["a", "b", "c", "d"], value="b")
    assert neighbor_values(menu, "b") == ["c", "a", "d"]
    assert neighbor_values(ipywidgets.ToggleButtons(options=["x", "y"], value="y"), "y") == ["x"]
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


def test_every_option_of_a_list_is_drawn_ahead(monkeypatch):
    # Num Dropdown toda opção está a um clique: ao criar e depois de cada escolha, todas ficam
    # prontas; num deslizador, só o passo seguinte.
    ipywidgets = pytest.importorskip("ipywidgets")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    explorer = Counting()
    menu = ipywidgets.Dropdown(options=["a", "b", "c", "d"], value="a")
    slider = ipywidgets.IntSlider(value=1, min=0, max=50)  # 4 × 51 estados: não desenha todos
    image = interactive_png(PngRenderer(explorer.update), {"x": slider, "label": menu})
    image.renderer.thread.join(timeout=30)
    assert all(image.renderer.cached(x=1, label=option) for option in "bcd")
    assert image.renderer.cached(x=2, label="a") and not image.renderer.cached(x=3, label="a")
    menu.value = "d"
    image.renderer.thread.join(timeout=30)
    assert all(image.renderer.cached(x=1, label=option) for option in "abc")


def test_a_widget_with_few_states_draws_them_all_ahead(monkeypatch):
    ipywidgets = pytest.importorskip("ipywidgets")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    explorer = Counting()
    heads = ipywidgets.SelectionSlider(options=[1, 2, 4, 8, 16], value=2)
    flag = ipywidgets.Checkbox(value=True)
    assert len(every_state({"x": heads, "label": flag})) == 10
    image = interactive_png(PngRenderer(explorer.update), {"x": heads, "label": flag})
    image.renderer.thread.join(timeout=30)
    assert all(image.renderer.cached(x=x, label=f) for x in (1, 2, 4, 8, 16) for f in (True, False))
    heads.value = 16  # um salto: já estava pronto
    assert explorer.calls.count((16, True)) == 1
    # muitos estados (ou texto livre): só os vizinhos
    many = ipywidgets.FloatSlider(value=0.5, min=0.0, max=2.0, step=0.05)  # 41 valores
    assert every_state({"x": many}) == []
    assert every_state({"x": heads, "label": ipywidgets.Text(value="oi")}) == []
    assert every_state({"x": ipywidgets.FloatSlider(value=0.2, min=0.0, max=0.3, step=0.1)}) == [
        {"x": 0.0},
        {"x": 0.1},
        {"x": 0.2},
        {"x": 0.3},
    ]


def _pixels(png: bytes):
    import io

    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")).astype(int)


def _blur(pixels):
    import numpy as np

    gray = pixels[..., :3].mean(-1)
    padded = np.pad(gray, 1, mode="edge")
    rows, cols = gray.shape
    return sum(padded[i : i + rows, j : j + cols] for i in range(3) for j in range(3)) / 9


def test_encode_png_round_trips_the_pixels():
    import numpy as np

    rgba = np.random.default_rng(0).integers(0, 256, size=(7, 5, 4), dtype=np.uint8)
    assert (_pixels(encode_png(rgba)) == rgba).all()


class Heat:
    """Uma exploração com o que os widgets do curso mudam: imagem, marcas dos eixos, títulos."""

    def __init__(self):
        self.fig = Figure(figsize=(4, 3), layout="constrained")
        self.ax = self.fig.add_subplot()
        self.image = self.ax.imshow([[0.0]], vmin=0, vmax=1)
        self.fig.colorbar(self.image, ax=self.ax)
        self.title = self.fig.suptitle("")
        self.update(3)
        spines = list(self.ax.spines.values())
        Blit(self.fig, [self.image, self.ax.xaxis, self.ax.yaxis, self.ax.title, self.title, *spines])

    def update(self, n):
        import numpy as np

        self.image.set_data(np.linspace(0, 1, n * n).reshape(n, n))
        self.image.set_extent((-0.5, n - 0.5, n - 0.5, -0.5))
        self.ax.set_xlim(-0.5, n - 0.5)
        self.ax.set_ylim(n - 0.5, -0.5)
        self.ax.set_xticks(range(n), [f"k{i}" for i in range(n)])
        # rótulos de marca de largura variável: o rótulo do eixo y se afasta mais ou menos deles
        self.ax.set_yticks(range(n), [str(10**i) for i in range(n)])
        self.ax.set_xlabel("coluna")
        self.ax.set_ylabel("linha")
        self.ax.set_title(f"{n} × {n}")
        self.title.set_text(f"estado n = {n}")
        return self.fig


def test_blit_draws_the_same_figure_as_a_full_draw():
    explorer = Heat()
    first = {}
    for n in (2, 5, 3, 2, 5):  # ida e volta: nada do estado anterior pode sobrar na imagem
        png = figure_png(explorer.update(n))
        blit = explorer.fig.blit
        del explorer.fig.blit
        try:
            full = _pixels(figure_png(explorer.fig))  # a figura inteira, desenhada do zero
        finally:
            explorer.fig.blit = blit
        fast = _pixels(png)
        assert fast.shape == full.shape
        # Um texto guardado é colado com a âncora arredondada ao pixel (até meio pixel de
        # diferença no antisserrilhado): compara as imagens suavizadas em 3 × 3. Um caractere
        # trocado ou um rótulo que sobrou de outro estado dá mais de 120; o meio pixel, menos de 60.
        assert abs(_blur(fast) - _blur(full)).max() < 90, f"n = {n}: a imagem difere do desenho completo"
        assert first.setdefault(n, png) == png, "o mesmo estado deu outro PNG"
    assert blit._patches, "os textos desenhados não foram guardados"
    explorer.update(4)
    explorer.title.set_text("estado n = 3")  # um texto já visto volta colado, não redesenhado
    before = len(blit._patches)
    figure_png(explorer.fig)
    assert ("texto", _text_key(explorer.title).look) in blit._patches
    assert len(blit._patches) >= before


def test_blit_moves_the_axis_label_when_the_tick_labels_change_width():
    # Mesmos limites, rótulos de marca mais largos ou mais estreitos: o rótulo do eixo y vai para
    # onde o desenho completo o põe, e a posição lembrada só volta com os mesmos rótulos.
    explorer = Heat()
    for labels in (["1", "2", "3"], ["1000", "2000", "3000"], ["1", "2", "3"], ["1000", "2000", "3000"]):
        explorer.update(3)
        explorer.ax.set_yticks(range(3), labels)
        fast = _pixels(figure_png(explorer.fig))
        fast_at = explorer.ax.yaxis.label.get_position()
        blit = explorer.fig.blit
        del explorer.fig.blit
        try:
            full = _pixels(figure_png(explorer.fig))
        finally:
            explorer.fig.blit = blit
        where = f"rótulos {labels}"
        assert explorer.ax.yaxis.label.get_position() == fast_at, f"{where}: rótulo do eixo fora do lugar"
        assert abs(_blur(fast) - _blur(full)).max() < 90, f"{where}: a imagem difere do desenho completo"


def test_cancel_stops_the_prefetch():
    explorer = Counting()
    renderer = PngRenderer(explorer.update)
    renderer.prefetch([{"x": i} for i in range(200)])
    renderer.cancel(timeout=30)
    assert not renderer.thread.is_alive()
    assert len(explorer.calls) < 200


def test_blit_does_not_reuse_a_text_cut_by_the_border():
    fig = Figure(figsize=(3, 2))
    text = fig.text(0.5, 0.0, "cortado", ha="center", va="center", fontsize=14)
    blit = Blit(fig, [text])
    figure_png(fig)  # metade do texto fica fora da figura
    text.set_position((0.5, 0.5))
    fast = _pixels(figure_png(fig))
    del fig.blit
    full = _pixels(figure_png(fig))
    assert blit._patches and abs(_blur(fast) - _blur(full)).max() < 90, "o texto cortado foi colado no meio"


def test_grading_mode_draws_no_figure_and_builds_no_widget(monkeypatch):
    """Na correção automática (num kernel), figuras e widgets viram um aviso, sem custo de desenho."""
    import IPython
    from matplotlib.figure import Figure

    from transformer_course import plots, widgets
    from transformer_course.positional import sinusoidal_encoding

    pe = sinusoidal_encoding(50, 32)
    assert isinstance(plots.sinusoidal_figure(pe), Figure)  # fora da correção: a figura
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert isinstance(plots.sinusoidal_figure(pe), Figure)  # fora de um kernel: também
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    drawn = plots.sinusoidal_figure(pe)
    assert isinstance(drawn, plots.FigureNotDrawn)
    assert "sinusoidal_figure(): figura não desenhada na correção automática" in repr(drawn)
    box = widgets.noam_widget()
    assert "noam_widget(): exploração interativa, não montada" in repr(box)
    assert "<em>" in box._repr_html_()
