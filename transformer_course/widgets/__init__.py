"""Explorações interativas (ipywidgets), finas e construídas sobre ``plots``.

Cada exploração tem duas partes: uma classe sem ipywidgets, cujo ``update(...)``
atualiza e devolve a figura, e uma função ``*_widget()`` que a liga a controles por
``_view.interactive_png``: um ``ipywidgets.Image`` com o PNG de cada estado dos controles,
guardado em cache e com os vizinhos do último movimento pré-calculados numa thread (é o que
``make bench`` mede). O ipywidgets só é importado dentro dessas funções. Um módulo por
capítulo (``chNN``); tudo é reexportado aqui sem editar este arquivo.

No kernel da correção automática, as funções ``@student_only`` devolvem um aviso
(:class:`~._notice.NotBuiltWhenGrading`), e este pacote nem importa os módulos dos capítulos (nem
o matplotlib): quais nomes são widgets é lido do código-fonte. Qualquer outro nome importa tudo.
"""

import importlib
import pkgutil

from ..runtime import in_grading_kernel, stand_ins_when_grading
from ._notice import NotBuiltWhenGrading

_MODULES = [
    info.name
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
    if info.name.startswith("ch")
]


def _load() -> None:
    """Importa cada ``chNN`` e reexporta o seu ``__all__`` aqui."""
    names = []
    for module_name in _MODULES:
        module = importlib.import_module(f"{__name__}.{module_name}")
        for name in module.__all__:
            globals()[name] = getattr(module, name)
            names.append(name)
    globals()["__all__"] = names


def _student_only(node) -> bool:
    """A definição tem o decorador ``@student_only``?"""
    return any(getattr(d, "id", None) == "student_only" for d in getattr(node, "decorator_list", ()))


if in_grading_kernel():
    __all__, __getattr__ = stand_ins_when_grading(
        globals(), _MODULES, _student_only, NotBuiltWhenGrading, _load
    )
else:
    _load()
