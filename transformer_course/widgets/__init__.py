"""Explorações interativas (ipywidgets), finas e construídas sobre ``plots``.

Cada exploração tem duas partes: uma classe sem ipywidgets, cujo ``update(...)``
atualiza e devolve a figura, e uma função ``*_widget()`` que a liga a controles por
``_view.interactive_png``: um ``ipywidgets.Image`` com o PNG de cada estado dos controles,
guardado em cache e com os vizinhos do último movimento pré-calculados numa thread (é o que
``make bench`` mede). O ipywidgets só é importado dentro dessas funções. Um módulo por
capítulo (``chNN``); tudo é reexportado aqui sem editar este arquivo.
"""

import importlib
import pkgutil

__all__: list[str] = []

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name.startswith("ch"):
        _module = importlib.import_module(f"{__name__}.{_info.name}")
        for _name in _module.__all__:
            globals()[_name] = getattr(_module, _name)
            __all__.append(_name)
