"""A imagem de uma exploração: um PNG por estado dos controles, guardado e pré-calculado.

Todo controle do curso é discreto (passos fixos, listas de opções), então cada combinação de
valores tem uma figura só. :class:`PngRenderer` desenha a figura de um estado uma vez (um único
desenho Agg, sem o recorte ``bbox_inches="tight"`` que o JupyterLab faria com dois desenhos) e
guarda o PNG num cache LRU; voltar a um estado já visto não desenha nada. Depois de cada
movimento, uma thread desenha os vizinhos do controle mexido (o próximo passo na mesma direção
primeiro): quem segura a seta do teclado encontra a próxima figura pronta.

:func:`interactive_png` liga os controles (ipywidgets) a um ``ipywidgets.Image``; trocar o valor
da imagem manda só os bytes do PNG ao navegador, sem limpar e recriar uma área de saída.
"""

from __future__ import annotations

import atexit
import itertools
import math
import struct
import threading
import time
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import NamedTuple

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axis import Axis
from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from ..numbers import br
from ..runtime import grading_mode
from . import _glyphs
from ._notice import NotBuiltWhenGrading, student_only

__all__ = [
    "Blit",
    "NotBuiltWhenGrading",
    "PngRenderer",
    "br_float_slider",
    "encode_png",
    "figure_png",
    "interactive_png",
    "neighbor_values",
    "student_only",
]

DPI = 100  # a mesma resolução com que o JupyterLab mostra uma figura (figure.dpi padrão)
# Depois de um movimento, o pré-cálculo dos vizinhos espera isto antes de desenhar: a resposta do
# movimento (a imagem nova, pelo canal iopub do kernel) sai por outra thread, que disputaria o GIL
# com o desenho. No navegador (Playwright, 16 toques no deslizador do capítulo 6, em duas rodadas),
# sem espera: mediana 53–59 ms; esperando 0,05, 0,1 ou 0,2 s: 39–44 ms.
PREFETCH_DELAY_S = 0.1
# Um widget com até tantos estados (o produto dos valores de cada controle) tem todos desenhados em
# segundo plano depois de criado: qualquer salto, não só o próximo passo, encontra a figura pronta.
PREFETCH_ALL_MAX = 32


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def encode_png(rgba) -> bytes:
    """PNG RGBA de um buffer (altura, largura, 4) de uint8, com zlib nível 1 e sem filtro por linha.

    As figuras têm grandes áreas lisas: sem filtro o PNG quase não cresce, e a codificação custa
    um terço da do PIL (que escolhe um filtro por linha).
    """
    pixels = np.asarray(rgba)
    height, width = pixels.shape[:2]
    rows = np.empty((height, 1 + 4 * width), np.uint8)
    rows[:, 0] = 0  # filtro "nenhum" em cada linha
    rows[:, 1:] = pixels.reshape(height, 4 * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8 bits, RGBA
    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", zlib.compress(rows, 1)),
            _chunk(b"IEND", b""),
        )
    )


def _agg_canvas(fig: Figure) -> FigureCanvasAgg:
    """O canvas Agg da figura: o que guarda os glifos (:mod:`._glyphs`), se o matplotlib permitir."""
    canvas = fig.canvas
    if _glyphs.SUPPORTED and (canvas is None or type(canvas) in (FigureCanvasBase, FigureCanvasAgg)):
        _glyphs.GlyphCacheCanvas(fig)
    elif canvas is None or not isinstance(canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    return fig.canvas


def figure_png(fig: Figure, dpi: float = DPI) -> bytes:
    """Um desenho Agg da figura inteira (fundo branco), codificado por :func:`encode_png`.

    Se a figura tem um :class:`Blit` (``fig.blit``), só as partes que mudam são desenhadas.
    """
    blit = getattr(fig, "blit", None)
    if isinstance(blit, Blit):
        return blit.png(dpi)
    canvas = _agg_canvas(fig)
    facecolor, old_dpi = fig.get_facecolor(), fig.dpi
    fig.set_facecolor("white")
    fig.dpi = dpi
    try:
        canvas.draw()
        return encode_png(canvas.buffer_rgba())
    finally:
        fig.set_facecolor(facecolor)
        fig.dpi = old_dpi


class _At(NamedTuple):
    """A chave de um texto: o que ele mostra (``look``) e onde (a âncora, em pixels da tela)."""

    look: tuple
    x: float
    y: float


def _text_key(text: Text) -> _At:
    x, y = text.get_transform().transform(text.get_unitless_position())
    color = text.get_color()
    look = (
        text.get_text(),
        color if isinstance(color, str) else tuple(np.ravel(color)),
        hash(text.get_fontproperties()),
        text.get_rotation(),
        text.get_rotation_mode(),
        text.get_horizontalalignment(),
        text.get_verticalalignment(),
        text.get_linespacing(),
        text.get_antialiased(),
        text.get_alpha(),
    )
    return _At(look, float(x), float(y))


class Blit:
    """O fundo fixo de uma figura desenhado uma vez; a cada estado, só os artistas que mudam.

    ``dynamic``: os artistas que ``update`` altera (imagens, textos, eixos cujas marcas mudam,
    colorbars...), na ordem de desenho. O fundo é a figura sem eles, guardado em pixels; cada PNG
    restaura o fundo e desenha só ``dynamic`` por cima. O layout precisa ser fixo: um motor de
    layout (constrained/tight) é executado uma vez aqui e depois desligado. Tudo o que não está em
    ``dynamic`` não pode mudar depois (ou chame :meth:`invalidate`). ``savefig`` e a exibição
    normal da figura continuam desenhando tudo.

    Texto é o desenho mais caro (glifo a glifo). Os textos de ``dynamic`` (e os rótulos das marcas
    e o rótulo de cada eixo ``Axis`` de ``dynamic``) são guardados em pixels, pela chave do que
    mostram (texto, posição, fonte, cor, rotação): um rótulo já visto ali é colado, não
    redesenhado; os traços das marcas são desenhados direto (uma chamada ao Agg cada). ``keys`` dá
    a chave de outros artistas (por exemplo, os eixos de uma colorbar: o mapa de cor, os limites e
    o rótulo). Um guardado é colado por cima do que veio antes dele em ``dynamic`` (sem
    transparência). Cada PNG desenha primeiro o que falta no cache de pixels (cada peça sozinha
    sobre o fundo) e depois monta o quadro.
    """

    def __init__(
        self,
        fig: Figure,
        dynamic: Sequence[Artist],
        keys: Mapping[Artist, Callable[[], Hashable]] | None = None,
    ):
        self.fig, self.dynamic = fig, list(dynamic)
        self.keys = dict(keys or {})
        for artist in self.dynamic:
            if artist not in self.keys and isinstance(artist, Text):
                self.keys[artist] = partial(_text_key, artist)
        self._background = None
        self._size: tuple | None = None
        self._patches: dict[tuple, tuple] = {}
        if fig.get_layout_engine() is not None:
            fig.draw_without_rendering()  # o layout de agora, calculado uma vez e congelado
            fig.set_layout_engine("none")
        fig.blit = self
        self._draw_background(DPI)  # já aqui: a primeira visita a um estado só desenha o que muda

    def invalidate(self) -> None:
        self._background = None

    def forget_pixels(self) -> None:
        """Esquece os pedaços já desenhados (textos, marcas): a próxima visita desenha tudo o que muda."""
        self._patches.clear()

    def _draw_background(self, dpi: float) -> FigureCanvasAgg:
        fig, canvas = self.fig, _agg_canvas(self.fig)
        fig.dpi = dpi
        if self._background is None or self._size != (dpi, canvas.get_width_height()):
            shown = [artist for artist in self.dynamic if artist.get_visible()]
            for artist in shown:
                artist.set_visible(False)
            try:
                canvas.draw()
            finally:
                for artist in shown:
                    artist.set_visible(True)
            self._background = canvas.copy_from_bbox(fig.bbox)
            self._pixels = np.array(canvas.buffer_rgba())
            self._size = (dpi, canvas.get_width_height())
            self._patches.clear()
        return canvas

    def _items(self, renderer) -> Iterator[tuple[Artist, Hashable]]:
        """Os artistas a desenhar agora, com a chave do desenho guardado (``None``: desenhar sempre).

        Um eixo (``Axis``) vira as suas partes, como em ``Axis.draw``: os traços das marcas são
        desenhados direto; cada rótulo de marca e o rótulo do eixo são textos guardados pela chave.
        """
        for artist in self.dynamic:
            if not artist.get_visible():
                continue
            if isinstance(artist, Axis) and artist not in self.keys:
                yield from self._axis_items(artist, renderer)
            elif artist in self.keys:
                yield artist, self.keys[artist]()
            else:
                yield artist, None

    def _axis_items(self, axis: Axis, renderer) -> Iterator[tuple[Artist, Hashable]]:
        """As partes de um eixo, como em ``Axis.draw``, cada uma com a chave do seu desenho.

        Os traços das marcas (e as linhas de grade) são desenhados direto, sem chave: um traço é uma
        chamada ao Agg, mais barata que guardá-lo (isolar o traço, comparar pixels) e quase o preço
        de colá-lo.
        """
        # onde o eixo está na tela: os limites e a caixa dos eixos (a chave da posição do rótulo)
        frame = (tuple(np.round(axis.get_view_interval(), 9)), axis.axes.bbox.bounds)
        shown = []  # as chaves dos rótulos de marca que afastam o rótulo do eixo
        for tick in axis._update_ticks():
            if not tick.get_visible():
                continue
            for name in ("gridline", "tick1line", "tick2line"):
                line = getattr(tick, name)
                if line.get_visible():
                    yield line, None
            for label in (tick.label1, tick.label2):
                if label.get_visible():
                    key = _text_key(label)
                    if label.get_in_layout():
                        shown.append(key)
                    if label.get_text():
                        yield label, key
        # o rótulo do eixo se afasta dos rótulos das marcas: posição recalculada (sem desenhar)
        if axis.label.get_visible() and axis.label.get_text():
            self._place_axis_label(axis, renderer, frame, shown)
            yield axis.label, _text_key(axis.label)
        offset = axis.major.formatter.get_offset()
        if offset and axis.offsetText.get_visible():
            axis._update_offset_text_position(*axis._get_ticklabel_bboxes(axis._update_ticks(), renderer))
            axis.offsetText.set_text(offset)
            yield axis.offsetText, _text_key(axis.offsetText)

    def _place_axis_label(self, axis: Axis, renderer, frame: tuple, shown: list) -> None:
        """Põe o rótulo do eixo onde ``Axis.draw`` o poria, lembrando a posição por rótulos de marca.

        O matplotlib mede a caixa de cada rótulo de marca (o leiaute do texto) para afastar o rótulo
        do eixo; com os mesmos rótulos, na mesma caixa dos eixos, a posição é a mesma. Eixos
        alinhados com outros (``fig.align_labels``) são sempre recalculados.
        """
        if not axis._autolabelpos:
            return
        groups = axis.get_figure(root=False)._align_label_groups.get(axis._get_axis_name())
        if groups is not None and len(list(groups.get_siblings(axis.axes))) > 1:
            axis._update_label_position(renderer)
            return
        key = ("rótulo do eixo", id(axis), frame, tuple(shown), axis.labelpad, axis.label_position)
        key += (self.fig.dpi,)
        where = self._patches.get(key)
        if where is None:
            axis._update_label_position(renderer)
            self._patches[key] = axis.label.get_position()
        else:
            axis.label.set_position(where)

    def _patch(self, canvas: FigureCanvasAgg, renderer, artist: Artist, row: int, col: int) -> tuple:
        """O artista desenhado sozinho sobre o fundo: o que mudou, relativo ao pixel (``row``, ``col``).

        Devolve (linha 0, linha 1, coluna 0, coluna 1, máscara, pixels, fundo sob a máscara).
        """
        height, width = self._pixels.shape[:2]
        empty = (0, 0, 0, 0, np.zeros((0, 0), bool), self._pixels[:0, 0].copy(), self._pixels[:0, 0].copy())
        box = artist.get_tightbbox(renderer)
        if box is None:
            top, bottom, left, right = 0, height, 0, width
        else:  # só a vizinhança do artista (3 px de folga para o antisserrilhado)
            top, bottom = max(0, int(height - box.y1) - 3), min(height, int(height - box.y0) + 4)
            left, right = max(0, int(box.x0) - 3), min(width, int(box.x1) + 4)
        if top >= bottom or left >= right:
            return empty
        # o fundo limpo na janela (aqui, com xy = canto do fundo, o retângulo vai em linhas de cima
        # para baixo), o artista por cima
        canvas.restore_region(self._background, (left, top, right, bottom), (0, 0))
        artist.draw(renderer)
        buffer = np.asarray(canvas.buffer_rgba())[top:bottom, left:right]
        under = self._pixels[top:bottom, left:right]
        changed = np.any(buffer != under, axis=-1)
        rows, cols = np.nonzero(changed.any(axis=1))[0], np.nonzero(changed.any(axis=0))[0]
        if not len(rows):
            return empty
        r0, r1, c0, c1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
        mask = changed[r0:r1, c0:c1]
        values, under = buffer[r0:r1, c0:c1][mask].copy(), under[r0:r1, c0:c1][mask].copy()
        return (top + r0 - row, top + r1 - row, left + c0 - col, left + c1 - col, mask, values, under)

    def _fits(self, patch: tuple, row: int, col: int) -> bool:
        """O desenho guardado cabe em (``row``, ``col``), sobre o mesmo fundo em que foi feito?"""
        r0, r1, c0, c1, mask, _, under = patch
        height, width = self._pixels.shape[:2]
        if r0 + row < 0 or c0 + col < 0 or r1 + row > height or c1 + col > width:
            return False
        return np.array_equal(self._pixels[r0 + row : r1 + row, c0 + col : c1 + col][mask], under)

    def _cut(self, patch: tuple, row: int, col: int) -> bool:
        """O desenho encosta na borda da figura (pode ter sido cortado)?"""
        r0, r1, c0, c1 = patch[:4]
        height, width = self._pixels.shape[:2]
        return r1 > r0 and (r0 + row <= 0 or c0 + col <= 0 or r1 + row >= height or c1 + col >= width)

    def png(self, dpi: float = DPI) -> bytes:
        canvas = self._draw_background(dpi)
        renderer = canvas.get_renderer()
        height = self._pixels.shape[0]
        for ax in {artist.axes for artist in self.dynamic if artist.axes is not None}:
            ax.apply_aspect()  # como no desenho de Axes: imshow com aspecto fixo ajusta a caixa
        items = list(self._items(renderer))
        placed = []
        for artist, key in items:
            if key is None:
                placed.append(None)
                continue
            if isinstance(key, _At):
                # um texto já desenhado em qualquer lugar é colado aqui, na âncora arredondada ao
                # pixel (no máximo meio pixel de diferença), se o fundo embaixo for o mesmo; um
                # texto cortado pela borda da figura só vale onde foi desenhado
                row, col = height - round(key.y), round(key.x)
                anywhere, here = ("texto", key.look), ("texto", key.look, row, col)
                patch = self._patches.get(anywhere)
                if patch is None or not self._fits(patch, row, col):
                    patch = self._patches.get(here)
                if patch is None:
                    patch = self._patch(canvas, renderer, artist, row, col)
                    self._patches[here if self._cut(patch, row, col) else anywhere] = patch
            else:
                row, col, key = 0, 0, (id(artist), key)
                patch = self._patches.get(key)
                if patch is None:
                    patch = self._patches[key] = self._patch(canvas, renderer, artist, row, col)
            placed.append((patch, row, col))
        canvas.restore_region(self._background)
        buffer = np.asarray(canvas.buffer_rgba())
        for (artist, _), where in zip(items, placed):  # na ordem de ``dynamic``: colados ou desenhados
            if where is None:
                artist.draw(renderer)
            else:
                (r0, r1, c0, c1, mask, values, _), row, col = where
                buffer[r0 + row : r1 + row, c0 + col : c1 + col][mask] = values
        return encode_png(canvas.buffer_rgba())


def _key(state: Mapping) -> tuple:
    # reais arredondados: 0.8 + 0.05 e o 0.85 que o navegador manda são o mesmo estado
    return tuple(sorted((k, round(v, 9) if isinstance(v, float) else v) for k, v in state.items()))


class PngRenderer:
    """PNG de ``update(**estado)``, em cache LRU, com pré-cálculo dos vizinhos numa thread.

    ``update`` altera e devolve uma figura (o ``update`` de uma exploração); a trava garante que só
    um desenho use a figura por vez. ``hits``/``misses`` contam os acertos do cache.
    """

    def __init__(self, update: Callable[..., Figure], maxsize: int = 256, dpi: float = DPI):
        self.update, self.maxsize, self.dpi = update, maxsize, dpi
        self._cache: OrderedDict[tuple, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._generation = 0  # um movimento novo cancela o pré-cálculo anterior
        self.thread: threading.Thread | None = None  # o pré-cálculo em andamento (ou o último)
        self.hits = self.misses = 0

    def cached(self, **state) -> bool:
        return _key(state) in self._cache

    def png(self, **state) -> bytes:
        """O PNG do estado: do cache, ou desenhado agora (e guardado)."""
        key = _key(state)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self.hits += 1
                return self._cache[key]
            self.misses += 1
            data = figure_png(self.update(**state), self.dpi)
            self._cache[key] = data
            while len(self._cache) > self.maxsize:
                self._cache.popitem(last=False)
            return data

    def prefetch(
        self, states: Iterable[Mapping], background: bool = True, delay: float = 0.0
    ) -> threading.Thread | None:
        """Desenha os estados que faltam no cache, na ordem dada; ``background``: numa thread.

        ``delay``: segundos de espera antes do primeiro desenho (um movimento novo nesse meio-tempo
        cancela este pré-cálculo sem que ele tenha desenhado nada).
        """
        self._generation += 1
        generation, todo = self._generation, [dict(s) for s in states]

        def work() -> None:
            if delay > 0:
                time.sleep(delay)
            for state in todo:
                if self._generation != generation:
                    return  # o aluno já mexeu de novo: os vizinhos agora são outros
                if not self.cached(**state):
                    try:
                        self.png(**state)
                    except Exception:  # noqa: BLE001 - pré-cálculo é só um atalho; o erro aparece ao pedir
                        return

        if not background:
            work()
            return None
        self.thread = threading.Thread(target=work, name="curso-prefetch", daemon=True)
        _RUNNING.add(self)
        self.thread.start()
        return self.thread

    def cancel(self, timeout: float | None = None) -> None:
        """Interrompe o pré-cálculo e espera o desenho em curso terminar (no máximo ``timeout`` s)."""
        self._generation += 1
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout)


# Os renderizadores com pré-cálculo (fracos: um widget descartado some daqui sozinho).
_RUNNING: weakref.WeakSet[PngRenderer] = weakref.WeakSet()


@atexit.register
def _stop_prefetch() -> None:
    """Na saída do Python, espera o desenho em curso de cada pré-cálculo e cancela o resto.

    Uma thread daemon morta no meio de um desenho (torch, Agg) fazia o C++ abortar com
    "terminate called without an active exception" ao fim dos testes.
    """
    for renderer in list(_RUNNING):
        renderer.cancel(timeout=10)


def _is_list(control) -> bool:
    """Uma lista de opções, toda opção a um clique (Dropdown, ToggleButtons...): não um deslizador."""
    from ipywidgets import SelectionRangeSlider, SelectionSlider

    return getattr(control, "options", None) is not None and not isinstance(
        control, (SelectionSlider, SelectionRangeSlider)
    )


def neighbor_values(control, value, previous=None) -> list:
    """Os valores a um passo de ``value`` num controle discreto; primeiro o da direção do movimento.

    Deslizadores de inteiros e de reais (``step``) e de opções: o passo seguinte e o anterior.
    Numa lista (Dropdown, botões de alternância) toda opção está a um clique: todas as outras, as
    mais próximas primeiro. Caixas de marcar dão o outro valor; texto livre não tem vizinhos.
    """
    if getattr(control, "options", None) is not None:
        values = control_values(control)
        if value not in values:
            return []
        i = values.index(value)
        if _is_list(control):
            order = sorted((j for j in range(len(values)) if j != i), key=lambda j: (abs(j - i), j < i))
            around = [values[j] for j in order]
        else:
            around = [values[j] for j in (i + 1, i - 1) if 0 <= j < len(values)]
    elif isinstance(value, bool):
        return [not value]
    elif isinstance(value, (int, float)) and hasattr(control, "step") and hasattr(control, "max"):
        step = control.step
        around = []
        for candidate in (value + step, value - step):
            if isinstance(value, float):
                candidate = round(candidate, 10)
            if control.min <= candidate <= control.max:
                around.append(candidate)
    else:
        return []
    if len(around) == 2 and _same(previous, around[0]):
        around.reverse()  # desceu: o próximo provável é o de baixo
    return around


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) < 1e-9
    return a is not None and a == b


def control_values(control) -> list | None:
    """Todos os valores de um controle discreto, em ordem; ``None`` se não for discreto (texto livre)."""
    options = getattr(control, "options", None)
    if options is not None:
        return [o[1] if isinstance(o, tuple) else o for o in options]
    if isinstance(control.value, bool):
        return [control.value, not control.value]
    if isinstance(control.value, (int, float)) and hasattr(control, "step") and hasattr(control, "max"):
        count = int(round((control.max - control.min) / control.step)) + 1
        values = [control.min + i * control.step for i in range(count)]
        return [round(v, 10) for v in values] if isinstance(control.value, float) else values
    return None


def br_float_slider(value: float, min: float, max: float, step: float, spec: str = ".2f", **kwargs):
    """Um deslizador de números reais que mostra o valor em pt-BR ("0,80" e não "0.80").

    O ``FloatSlider`` do ipywidgets escreve o valor no navegador com o ``d3-format``, sempre com
    ponto decimal (nenhuma opção de localidade). O ``SelectionSlider`` mostra o rótulo de cada
    opção: as opções são os mesmos valores do ``FloatSlider`` (``min``, ``min + step``, ..., ``max``)
    com o rótulo de ``numbers.br(valor, spec)``, e ``.value`` continua sendo o número.
    ``kwargs`` vão para o ``SelectionSlider`` (``description``, ``continuous_update``, ``style``...).
    """
    import ipywidgets as widgets

    count = int(round((max - min) / step)) + 1
    values = [round(min + i * step, 10) for i in range(count)]
    start = values[int(np.argmin([abs(v - value) for v in values]))]
    return widgets.SelectionSlider(options=[(br(v, spec), v) for v in values], value=start, **kwargs)


def every_state(controls: Mapping[str, object], limit: int = PREFETCH_ALL_MAX) -> list[dict]:
    """Todos os estados dos controles, se forem no máximo ``limit`` (senão, nenhum)."""
    names, choices = list(controls), []
    for name in names:
        values = control_values(controls[name])
        if values is None:
            return []
        choices.append(values)
    if math.prod(len(values) for values in choices) > limit:
        return []
    return [dict(zip(names, combination)) for combination in itertools.product(*choices)]


def interactive_png(renderer: PngRenderer, controls: Mapping[str, object], prefetch: bool = True):
    """Um ``ipywidgets.Image`` que mostra ``renderer.png(**valores dos controles)`` e acompanha cada mudança.

    ``prefetch``: depois de cada movimento (passados ``PREFETCH_DELAY_S``, quando a imagem nova já
    saiu para o navegador), e logo ao criar (fora da correção automática), desenha numa thread os
    vizinhos de um passo; ao criar, um por deslizador, na direção "para cima", e todas as opções de
    cada lista. Com até ``PREFETCH_ALL_MAX`` estados no total, desenha em seguida todos os outros.
    """
    import ipywidgets as widgets

    def state() -> dict:
        return {name: control.value for name, control in controls.items()}

    image = widgets.Image(value=renderer.png(**state()), format="png")
    everything = every_state(controls)  # poucos estados: todos, depois dos vizinhos

    def moved(name: str, change: dict) -> None:
        current = state()
        image.value = renderer.png(**current)
        if prefetch:
            around = neighbor_values(controls[name], change["new"], change["old"])
            todo = [{**current, name: value} for value in around] + everything
            renderer.prefetch(todo, delay=PREFETCH_DELAY_S)

    for name, control in controls.items():
        control.observe(lambda change, name=name: moved(name, change), names="value")
    image.renderer, image.controls = renderer, dict(controls)  # para `make bench` mover os controles
    if prefetch and not grading_mode():
        start = state()
        first_moves = []
        for name, control in controls.items():
            around = neighbor_values(control, start[name])
            first_moves += [{**start, name: value} for value in (around if _is_list(control) else around[:1])]
        renderer.prefetch(first_moves + everything)
    return image
