"""Um renderizador Agg que guarda o bitmap de cada glifo já desenhado.

O matplotlib 3.11 desenha texto glifo a glifo, em Python: para cada letra, ajusta o tamanho e a
transformação da fonte e pede ao FreeType um bitmap novo (``_render_glyph``), cerca de 0,1 ms por
letra. Nas explorações do curso quase todo texto novo é feito das mesmas letras (rótulos de
marca, títulos com números), e o mesmo glifo, na mesma fração de pixel, dá o mesmo bitmap: o
FreeType só desloca o contorno pela parte inteira da posição. :class:`GlyphCacheRenderer` guarda
esse bitmap pela chave (fonte, tamanho, resolução, glifo, opções de hinting, transformação, fração
de pixel) e, da segunda vez, só o cola (``draw_text_image``), no mesmo lugar em que o matplotlib o
colaria: a figura sai igual, pixel a pixel (``tests/test_widgets_glyphs.py`` compara).

Se o matplotlib instalado não tiver o desenho glifo a glifo (versões antes da 3.11), o canvas usa o
renderizador de sempre.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.ft2font import RenderMode

__all__ = ["GlyphCacheCanvas", "GlyphCacheRenderer", "SUPPORTED"]

# O método que desenha uma sequência de glifos (texto comum e mathtext) existe a partir do 3.11.
SUPPORTED = hasattr(RendererAgg, "_draw_text_glyphs_and_boxes")
MAX_GLYPHS = 20_000  # bitmaps guardados (por processo); um glifo de texto de 10 pt tem ~100 bytes

_BITMAPS: OrderedDict[tuple, tuple[np.ndarray, int, int]] = OrderedDict()


def clear() -> None:
    """Esquece todos os bitmaps guardados (para medir a primeira visita de verdade)."""
    _BITMAPS.clear()


class GlyphCacheRenderer(RendererAgg):
    """O ``RendererAgg`` do matplotlib, com os bitmaps de glifos guardados entre um texto e outro."""

    def _draw_text_glyphs_and_boxes(self, gc, x, y, angle, glyphs, boxes):
        # O mesmo laço do RendererAgg (matplotlib 3.11), com a busca no cache antes do FreeType.
        cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        load_flags = get_hinting_flag()
        hinting_factor = mpl.rcParams["text.hinting_factor"]  # as fontes de get_font dependem dele
        antialiased = gc.get_antialiased()
        mode = RenderMode.NORMAL if antialiased else RenderMode.MONO
        height = self.height
        rotation = {}  # (extend, slant) -> a matriz do FreeType (a mesma para o texto todo, em geral)
        for font, size, glyph_index, slant, extend, dx, dy in glyphs:  # dy para cima
            transform = rotation.get((extend, slant))
            if transform is None:
                matrix = np.array([[cos, -sin], [sin, cos]]) @ [[extend, extend * slant], [0, 1]]
                transform = rotation[extend, slant] = (0x10000 * matrix).round().astype(int)
            # a posição da origem do glifo, em 1/64 de pixel (o y do FreeType cresce para cima)
            px = round(0x40 * (x + dx * cos - dy * sin))
            py = round(0x40 * (height - y + dx * sin + dy * cos))
            whole_x, whole_y = px >> 6, py >> 6
            key = (
                font.fname,
                font.face_index,
                size,
                self.dpi,
                glyph_index,
                load_flags,
                hinting_factor,
                antialiased,
                transform.tobytes(),
                px & 0x3F,
                py & 0x3F,
            )
            hit = _BITMAPS.get(key)
            if hit is None:
                font.set_size(size, self.dpi)
                font._set_transform(transform, [px, py])
                bitmap = font._render_glyph(glyph_index, load_flags, mode)
                buffer = np.array(bitmap.buffer, copy=True)
                if not antialiased:
                    buffer *= 0xFF
                hit = (buffer, bitmap.left - whole_x, bitmap.top - whole_y)
                _BITMAPS[key] = hit
                if len(_BITMAPS) > MAX_GLYPHS:
                    _BITMAPS.popitem(last=False)
            buffer, left, top = hit
            # o y de draw_text_image cresce para baixo e marca a base do bitmap
            self._renderer.draw_text_image(
                buffer, left + whole_x, int(height) - (top + whole_y) + buffer.shape[0], 0, gc
            )
        if boxes:
            super()._draw_text_glyphs_and_boxes(gc, x, y, angle, (), boxes)


class GlyphCacheCanvas(FigureCanvasAgg):
    """``FigureCanvasAgg`` cujo renderizador é um :class:`GlyphCacheRenderer`."""

    def get_renderer(self):
        w, h = self.get_width_height(physical=True)
        key = w, h, self.figure.dpi
        if self._lastKey != key or not isinstance(self.renderer, GlyphCacheRenderer):
            self.renderer = GlyphCacheRenderer(w, h, self.figure.dpi)
            self._lastKey = key
        return self.renderer
