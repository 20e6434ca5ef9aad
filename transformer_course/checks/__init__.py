"""Verificações dos exercícios, um módulo por capítulo (``ch01``, ``ch02``...).

Cada ``chNN.py`` declara os exercícios do capítulo no registro (``EXERCISES``, ver
:mod:`transformer_course.exercises`) e as suas verificações. Aqui ficam só as visíveis (o
``__all__`` de cada capítulo): é o que o notebook do aluno importa, ``from
transformer_course.checks import check_x``. As ocultas não são exportadas: cada célula de testes
ocultos pega a sua por :func:`transformer_course.tamper.hidden_check`. Um capítulo novo não
precisa editar este arquivo.
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
