"""Figuras do curso: cada função devolve uma ``Figure`` (nunca mostra nem salva).

``common`` tem a paleta e as peças gerais; ``chNN`` as figuras de cada capítulo.
Tudo é reexportado aqui (``plots.attention_heatmap``, ``plots.scaling_figure``...);
um módulo ``chNN`` novo é importado sozinho, sem editar este arquivo.

Na correção automática (``NBGRADER_EXECUTION``), dentro de um kernel, as funções que devolvem uma
``Figure`` devolvem um :class:`FigureNotDrawn` (uma linha de aviso): ninguém olha figuras na correção,
e montar e desenhar cada uma custaria de 0,1 a 1 s por aluno (o mapa de calor importa o seaborn, o
pandas e o SciPy). As notas não dependem de figuras. Fora da correção, nada muda.
"""

import importlib
import inspect
import pkgutil

from matplotlib.figure import Figure

from ..runtime import notice_when_grading
from .common import *  # noqa: F403
from .common import __all__ as _common_all

__all__ = [*_common_all, "FigureNotDrawn"]


class FigureNotDrawn:
    """O que uma figura mostra na correção automática: um aviso, sem desenho."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return (
            f"[{self.name}(): figura não desenhada na correção automática; "
            "rode o notebook no JupyterLab para vê-la]"
        )


def _returns_figure(obj) -> bool:
    if not inspect.isfunction(obj):
        return False
    return inspect.signature(obj).return_annotation in ("Figure", Figure)


_not_drawn_when_grading = notice_when_grading(FigureNotDrawn)


for _name in list(_common_all):
    if _returns_figure(globals()[_name]):
        globals()[_name] = _not_drawn_when_grading(globals()[_name])

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):  # noqa: F405
    if _info.name.startswith("ch"):
        _module = importlib.import_module(f"{__name__}.{_info.name}")
        for _name in _module.__all__:
            _obj = getattr(_module, _name)
            globals()[_name] = _not_drawn_when_grading(_obj) if _returns_figure(_obj) else _obj
            __all__.append(_name)
