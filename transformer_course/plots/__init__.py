"""Figuras do curso: cada função devolve uma ``Figure`` (nunca mostra nem salva).

``common`` tem a paleta e as peças gerais; ``chNN`` as figuras de cada capítulo.
Tudo é reexportado aqui (``plots.attention_heatmap``, ``plots.scaling_figure``...);
um módulo ``chNN`` novo é importado sozinho, sem editar este arquivo.
"""

import importlib
import pkgutil

from .common import *  # noqa: F403
from .common import __all__ as _common_all

__all__ = list(_common_all)

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):  # noqa: F405
    if _info.name.startswith("ch"):
        _module = importlib.import_module(f"{__name__}.{_info.name}")
        for _name in _module.__all__:
            globals()[_name] = getattr(_module, _name)
            __all__.append(_name)
