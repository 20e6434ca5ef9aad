"""O que um widget mostra na correção automática (sem matplotlib nem ipywidgets: é leve)."""

from __future__ import annotations

import html

from ..runtime import notice_when_grading

__all__ = ["NotBuiltWhenGrading", "student_only"]


class NotBuiltWhenGrading:
    """O que a célula de um widget mostra na correção automática: um aviso, não os controles."""

    def __init__(self, name: str):
        self.name = name
        self.text = (
            f"[{name}(): exploração interativa, não montada na correção automática "
            "(ninguém move os controles numa devolutiva). Rode a célula no JupyterLab para usá-la.]"
        )

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return f"<p><em>{html.escape(self.text)}</em></p>"


# Na correção automática, num kernel, o widget não é montado: montar desenha a figura inicial e
# pré-calcula vizinhos numa thread, CPU gasta numa devolutiva que não tem controles.
student_only = notice_when_grading(NotBuiltWhenGrading)
