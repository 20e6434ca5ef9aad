"""Os testes ocultos, do lado do kernel: a verificação vem de uma importação nova e vigiada.

Toda célula de testes ocultos pega a sua verificação por aqui, numa linha::

    from transformer_course.tamper import hidden_check
    hidden_check("02_atencao", "test_sdpa_hidden", globals())(scaled_dot_product_attention)

:func:`hidden_check` tira de ``sys.modules`` o corretor (``feedback``, ``exercises``, ``runtime``
e ``checks.chNN``), importa-o de novo a partir dos arquivos, confere o ambiente
(:func:`verify_grading_environment`) e devolve a verificação registrada para aquela célula.
Assim, trocar uma verificação ou uma função de ``feedback`` por outra que não faz nada, antes
dos testes, não tem efeito. O notebook distribuído aos alunos não importa nenhuma verificação
oculta.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable

__all__ = ["TamperingDetected", "hidden_check", "verify_grading_environment"]


class TamperingDetected(AssertionError):
    """As peças da correção foram substituídas pelo código do notebook."""


def _tampered(what: str) -> TamperingDetected:
    return TamperingDetected(
        f"Adulteração detectada: {what}. Os testes ocultos não podem confiar neste notebook; "
        "desfaça a alteração (não substitua funções do PyTorch nem as verificações do curso) "
        "e rode de novo."
    )


def _inside(obj, package_dir: str) -> bool:
    code = getattr(obj, "__code__", None)
    filename = getattr(code, "co_filename", "")
    return bool(filename) and os.path.realpath(filename).startswith(os.path.realpath(package_dir))


def verify_grading_environment(namespace: dict | None = None, checks_module=None) -> None:
    """Confere as peças de que as verificações dependem; levanta :class:`TamperingDetected`.

    - ``torch.testing.assert_close`` é a do PyTorch e ainda recusa tensores diferentes;
    - ``torch.allclose``/``isclose``/``equal`` e ``F.scaled_dot_product_attention`` (oráculo)
      são as funções nativas do PyTorch;
    - ``isinstance``, ``len``, ``getattr`` e ``AssertionError`` são os do Python;
    - no ``namespace`` do notebook (``globals()``), toda verificação de ``checks_module`` (o
      ``__all__`` do capítulo) ainda aponta para uma função do pacote, e não para uma função
      escrita no notebook.

    Limite conhecido: o código do aluno roda no mesmo processo e pode, com esforço, enganar
    qualquer verificação feita dentro dele (veja ``grading/README.md``).
    """
    import builtins

    import torch
    import torch.testing
    from torch.nn import functional as F

    torch_dir = os.path.dirname(torch.__file__)
    assert_close = torch.testing.assert_close
    if not _inside(assert_close, torch_dir) or getattr(assert_close, "__name__", "") != "assert_close":
        raise _tampered("`torch.testing.assert_close` foi substituída")
    try:
        assert_close(torch.zeros(2), torch.ones(2))
    except AssertionError:
        pass
    else:
        raise _tampered("`torch.testing.assert_close` aceita tensores diferentes")
    natives = {
        "torch.allclose": torch.allclose,
        "torch.isclose": torch.isclose,
        "torch.equal": torch.equal,
        "F.scaled_dot_product_attention": F.scaled_dot_product_attention,
        "torch.softmax": torch.softmax,
        "torch.matmul": torch.matmul,
    }
    for name, fn in natives.items():
        if type(fn).__name__ != "builtin_function_or_method" or _inside(fn, "/"):
            raise _tampered(f"`{name}` foi substituída")
    if not torch.allclose(torch.zeros(1), torch.zeros(1)) or torch.allclose(torch.zeros(1), torch.ones(1)):
        raise _tampered("`torch.allclose` responde errado")
    if torch.equal(torch.zeros(1), torch.ones(1)):
        raise _tampered("`torch.equal` responde errado")
    for name in ("isinstance", "len", "getattr", "callable"):
        if type(getattr(builtins, name)).__name__ != "builtin_function_or_method":
            raise _tampered(f"a função `{name}` do Python foi substituída")
    if builtins.AssertionError is not AssertionError or AssertionError.__module__ != "builtins":
        raise _tampered("`AssertionError` foi substituída")
    if namespace is not None and checks_module is not None:
        package_dir = os.path.dirname(os.path.abspath(__file__))
        for name in getattr(checks_module, "__all__", []):
            value = namespace.get(name)
            if value is not None and not _inside(value, package_dir):
                raise _tampered(f"a verificação `{name}` foi trocada por outra função no notebook")


_GRADER_MODULES = (
    "transformer_course.feedback",
    "transformer_course.exercises",
    "transformer_course.runtime",
)


def hidden_check(chapter: str, grade_id: str, namespace: dict | None = None) -> Callable:
    """A verificação oculta da célula ``grade_id`` do capítulo ``chapter``, recém-importada do disco.

    Args:
        chapter: a pasta do capítulo (``"02_atencao"``).
        grade_id: o ``grade_id`` da célula de testes ocultos, como está no registro.
        namespace: os ``globals()`` do notebook, para conferir que as verificações visíveis
            ainda são as do pacote.
    """
    module_name = f"transformer_course.checks.ch{chapter[:2]}"
    for name in (*_GRADER_MODULES, module_name):
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    module = importlib.import_module(module_name)
    verify_grading_environment(namespace, module)
    for exercise in module.EXERCISES:
        for cell in exercise.cells:
            if cell.grade_id == grade_id and cell.hidden and exercise.chapter == chapter:
                return exercise.hidden
    raise LookupError(f"nenhuma célula oculta {grade_id!r} registrada no capítulo {chapter}")
