"""Verificações dos exercícios, um módulo por capítulo (``ch01``, ``ch02``...).

As células de teste dos notebooks fazem ``from transformer_course.checks import ...``.
Este arquivo importa sozinho todo módulo ``chNN``: um capítulo novo não precisa
editá-lo.
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
