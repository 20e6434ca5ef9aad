"""Figuras do curso: cada função devolve uma ``Figure`` (nunca mostra nem salva).

``common`` tem a paleta e as peças gerais; ``chNN`` as figuras de cada capítulo.
Tudo é reexportado aqui (``plots.attention_heatmap``, ``plots.scaling_figure``...);
um módulo ``chNN`` novo é importado sozinho, sem editar este arquivo.

Na correção automática (``NBGRADER_EXECUTION``), dentro de um kernel, as funções que devolvem uma
``Figure`` devolvem um :class:`FigureNotDrawn` (uma linha de aviso): ninguém olha figuras na correção,
e montar e desenhar cada uma custaria de 0,1 a 1 s por aluno (o mapa de calor importa o seaborn, o
pandas e o SciPy). As notas não dependem de figuras. Fora da correção, nada muda.

No kernel da correção, este pacote nem importa os módulos das figuras (nem o matplotlib, ≈0,9 s por
notebook corrigido): quais nomes desenham é lido do código-fonte (``-> Figure``), e o aviso sai
sem importar nada. Um nome que não desenha (``PALETTE``...) importa tudo, como fora da correção.
"""

import ast
import importlib
import inspect
import pkgutil

from ..runtime import in_grading_kernel, notice_when_grading, stand_ins_when_grading

_MODULES = ["common"] + [
    info.name
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
    if info.name.startswith("ch")
]


class FigureNotDrawn:
    """O que uma figura mostra na correção automática: um aviso, sem desenho."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return (
            f"[{self.name}(): figura não desenhada na correção automática; "
            "rode o notebook no JupyterLab para vê-la]"
        )


_not_drawn_when_grading = notice_when_grading(FigureNotDrawn)


def _returns_figure(obj) -> bool:
    from matplotlib.figure import Figure

    if not inspect.isfunction(obj):
        return False
    return inspect.signature(obj).return_annotation in ("Figure", Figure)


def _load() -> None:
    """Importa ``common`` e cada ``chNN`` e reexporta o ``__all__`` de cada um aqui."""
    names = []
    for module_name in _MODULES:
        module = importlib.import_module(f"{__name__}.{module_name}")
        for name in module.__all__:
            obj = getattr(module, name)
            globals()[name] = _not_drawn_when_grading(obj) if _returns_figure(obj) else obj
            names.append(name)
    globals()["__all__"] = [*names, "FigureNotDrawn"]


def _draws(node) -> bool:
    """A definição diz ``-> Figure``?"""
    returns = getattr(node, "returns", None)
    return isinstance(returns, ast.Name) and returns.id == "Figure"


if in_grading_kernel():
    _names, __getattr__ = stand_ins_when_grading(globals(), _MODULES, _draws, FigureNotDrawn, _load)
    __all__ = [*_names, "FigureNotDrawn"]
else:
    _load()
