"""A célula de testes ocultos, fora da correção: a verificação oculta, pelo registro.

Toda célula de testes ocultos pega a sua verificação por aqui, numa linha::

    from transformer_course.tamper import hidden_check
    hidden_check("02_atencao", "test_sdpa_hidden", globals())(scaled_dot_product_attention)

Na correção essa célula nem roda no kernel do aluno: o juiz (``instructor/judge.py``) roda a
verificação oculta no processo do corretor, pedindo ao kernel só os resultados da resposta, com
casos sorteados para cada entrega. Nada que o notebook faça com o PyTorch, o IPython ou os
módulos do curso muda os pontos; por isso aqui não há vigilância (nem reimportação dos módulos,
que criava uma segunda classe ``CheckFailure`` e fazia as verificações visíveis deixarem de
reconhecer as suas falhas).

Fora da correção (o notebook do professor no ``nbval``, o ``pytest``), a verificação oculta roda
no próprio processo, contra a resposta de verdade, com as sementes fixas.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["hidden_check"]


def hidden_check(chapter: str, grade_id: str, namespace: dict | None = None) -> Callable:
    """A verificação oculta da célula ``grade_id`` do capítulo ``chapter``.

    Args:
        chapter: a pasta do capítulo (``"02_atencao"``).
        grade_id: o ``grade_id`` da célula de testes ocultos, como está no registro.
        namespace: os ``globals()`` do notebook (mantido na assinatura das células; não é usado).
    """
    from .exercises import by_grade_id

    found = by_grade_id(chapter).get(grade_id)
    if found is None or not found[1].hidden:
        raise LookupError(f"nenhuma célula oculta {grade_id!r} registrada no capítulo {chapter}")
    return found[0].hidden
