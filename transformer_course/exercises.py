"""O registro dos exercícios corrigidos: uma entrada por exercício, declarada ao lado das suas
verificações (em ``checks/chNN.py``).

Cada :class:`Exercise` reúne o capítulo, o nome que o aluno escreve, a implementação de
referência, as verificações visível e oculta, as células do nbgrader (``grade_id`` e pontos) e
a política de isolamento. Do registro saem: as células de teste dos notebooks (um teste confere
cada uma), a tabela de ``make grade``, o ``make bench`` e os testes genéricos de
``tests/test_exercises.py``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Exercise", "GradedCell", "all_exercises", "by_grade_id"]


@dataclass(frozen=True)
class GradedCell:
    """Uma célula de teste do nbgrader: ``grade_id``, pontos e se é oculta."""

    grade_id: str
    points: float
    hidden: bool = False


@dataclass(eq=False)
class Exercise:
    """Um exercício corrigido automaticamente.

    Attributes:
        chapter: pasta do capítulo (``"02_atencao"``).
        name: o nome que o aluno define no notebook (função ou classe).
        label: como o exercício aparece na tabela de ``make grade``.
        reference: a implementação de referência do pacote (``None`` num questionário).
        cells: as células de teste do nbgrader, visíveis e ocultas.
        isolation: a política de isolamento das verificações (``"isolated"``: uma thread e o
            gerador global emprestado com semente fixa; ver ``runtime.isolated``).
        visible, hidden: as verificações, registradas pelos decoradores abaixo.
    """

    chapter: str
    name: str
    reference: Any
    cells: tuple[GradedCell, ...]
    label: str = ""
    isolation: str = "isolated"
    visible: Callable | None = field(default=None, repr=False)
    hidden: Callable | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.isolation != "isolated":
            raise ValueError(f"política de isolamento desconhecida: {self.isolation!r}")
        self.label = self.label or self.name

    @property
    def module(self) -> str:
        """O módulo das verificações: ``transformer_course.checks.chNN``."""
        return f"transformer_course.checks.ch{self.chapter[:2]}"

    def visible_check(self, fn: Callable) -> Callable:
        """Decorador: registra a verificação visível."""
        self.visible = fn
        return fn

    def hidden_check(self, fn: Callable) -> Callable:
        """Decorador: registra a verificação oculta (só chamada nos testes ocultos)."""
        self.hidden = fn
        return fn

    def check(self, *, hidden: bool = False):
        """O contexto de uma verificação deste exercício (:class:`feedback.Check`)."""
        from .feedback import Check

        return Check(self.name, hidden=hidden)

    def cell(self, grade_id: str) -> GradedCell:
        return next(c for c in self.cells if c.grade_id == grade_id)


def _check_modules():
    # O registro é montado pelos módulos de verificação (que importam este): importação pelo nome.
    checks = importlib.import_module(f"{__package__}.checks")
    for info in sorted(pkgutil.iter_modules(checks.__path__), key=lambda m: m.name):
        if info.name.startswith("ch"):
            yield importlib.import_module(f"{checks.__name__}.{info.name}")


def all_exercises() -> list[Exercise]:
    """Todos os exercícios, na ordem do curso (capítulo e ordem de declaração)."""
    return [ex for module in _check_modules() for ex in module.EXERCISES]


def by_grade_id(chapter: str) -> dict[str, tuple[Exercise, GradedCell]]:
    """As células de teste de um capítulo, pelo ``grade_id``."""
    return {c.grade_id: (ex, c) for ex in all_exercises() if ex.chapter == chapter for c in ex.cells}
