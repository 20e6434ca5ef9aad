"""O registro de exercícios (``transformer_course.exercises``) é a fonte única de cada exercício.

Para cada exercício registrado:

- a resposta-modelo do notebook (``### BEGIN SOLUTION``) e a referência do pacote são o mesmo
  código (árvore sintática igual, sem docstrings): não há duas cópias para divergir;
- as células de teste do notebook são as do registro (``grade_id``, pontos, visível/oculta) e
  chamam as verificações registradas; a oculta pega a sua por ``hidden_check``;
- a referência passa na verificação visível, e a oculta recusa a referência em qualquer disfarce
  (ela mesma, um invólucro, uma subclasse);
- o notebook distribuído (release/) não importa nenhuma verificação oculta.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import textwrap

import jupytext
import pytest
from conftest import ROOT

from transformer_course.exercises import all_exercises
from transformer_course.feedback import CheckFailure

EXERCISES = all_exercises()
GRADED = [ex for ex in EXERCISES if ex.reference is not None]


def _id(ex) -> str:
    return f"{ex.chapter}:{ex.name}"


def _notebook(chapter: str):
    return jupytext.read(ROOT / "notebooks" / f"{chapter}.py")


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


class _StripDocstrings(ast.NodeTransformer):
    def _strip(self, node):
        self.generic_visit(node)
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(getattr(body[0], "value", None), ast.Constant)
        ):
            if isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _strip


def _normalized(node: ast.AST) -> str:
    return ast.dump(_StripDocstrings().visit(node), include_attributes=False)


def _solution_definition(ex):
    for cell in _notebook(ex.chapter).cells:
        if cell.cell_type != "code" or not _meta(cell).get("solution"):
            continue
        for node in ast.parse(cell.source).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == ex.name:
                return node
    return None


def test_registry_is_complete():
    assert len(GRADED) >= 26, [_id(ex) for ex in EXERCISES]
    assert len({_id(ex) for ex in EXERCISES}) == len(EXERCISES)
    for ex in EXERCISES:
        assert ex.visible is not None and ex.hidden is not None, f"{_id(ex)}: verificação não registrada"
        assert any(not c.hidden for c in ex.cells) and any(c.hidden for c in ex.cells), _id(ex)


@pytest.mark.parametrize("ex", GRADED, ids=_id)
def test_solution_and_reference_are_the_same_code(ex):
    solution = _solution_definition(ex)
    assert solution is not None, f"{_id(ex)}: nenhuma célula de solução define `{ex.name}`"
    reference = ast.parse(textwrap.dedent(inspect.getsource(ex.reference))).body[0]
    assert _normalized(solution) == _normalized(reference), (
        f"{_id(ex)}: a resposta-modelo do notebook e a referência "
        f"`{ex.reference.__module__}.{ex.reference.__qualname__}` divergiram; "
        "escreva a mesma resposta nos dois lugares"
    )


@pytest.mark.parametrize("chapter", sorted({ex.chapter for ex in EXERCISES}))
def test_notebook_test_cells_are_the_registry(chapter):
    registered = {c.grade_id: (ex, c) for ex in EXERCISES if ex.chapter == chapter for c in ex.cells}
    seen = set()
    for cell in _notebook(chapter).cells:
        meta = _meta(cell)
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        grade_id = meta["grade_id"]
        assert grade_id in registered, f"{chapter}: célula de teste {grade_id} fora do registro"
        ex, registered_cell = registered[grade_id]
        seen.add(grade_id)
        assert meta["points"] == registered_cell.points, f"{grade_id}: pontos diferentes do registro"
        is_hidden = "### BEGIN HIDDEN TESTS" in cell.source
        assert is_hidden == registered_cell.hidden, f"{grade_id}: oculta no registro ≠ no notebook"
        if is_hidden:
            call = f'hidden_check("{chapter}", "{grade_id}", globals())('
            assert call in cell.source, f"{grade_id}: a célula oculta deve chamar {call}...)"
        else:
            assert f"{ex.visible.__name__}({ex.name}" in cell.source, (
                f"{grade_id}: a célula visível deve chamar {ex.visible.__name__}({ex.name})"
            )
    assert seen == set(registered), f"{chapter}: células do registro ausentes: {set(registered) - seen}"


@pytest.mark.parametrize("chapter", sorted({ex.chapter for ex in EXERCISES}))
def test_release_notebook_imports_no_hidden_check(chapter):
    nb = json.loads((ROOT / "release" / chapter / f"{chapter}.ipynb").read_text())
    text = "\n".join("".join(cell["source"]) for cell in nb["cells"])
    hidden_names = {ex.hidden.__name__ for ex in EXERCISES if ex.chapter == chapter}
    for name in hidden_names | {"hidden_check", "fresh_check", "transformer_course.tamper"}:
        assert name not in text, f"release/{chapter}: o notebook do aluno menciona `{name}`"


def test_package_holds_no_quiz_answers():
    """As respostas dos questionários ficam nos blocos ocultos, não no pacote que o aluno instala."""
    for path in (ROOT / "transformer_course" / "checks").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "sha256" not in text and "hashlib" not in text, f"{path.name}: respostas codificadas no pacote"


def _disguises(reference):
    """A referência como um aluno a entregaria disfarçada."""
    if isinstance(reference, type):
        return {"subclasse": type(reference.__name__, (reference,), {})}

    def wrapper(*args, **kwargs):
        return reference(*args, **kwargs)

    return {
        "apelido": reference,
        "invólucro": wrapper,
        "functools.wraps": functools.wraps(reference)(lambda *a, **k: reference(*a, **k)),
    }


@pytest.mark.parametrize("ex", GRADED, ids=_id)
def test_reference_passes_the_visible_check(ex, capsys):
    ex.visible(ex.reference)
    assert "verificações passaram" in capsys.readouterr().out


@pytest.mark.parametrize("ex", GRADED, ids=_id)
def test_hidden_check_refuses_the_reference_in_any_disguise(ex):
    for label, answer in _disguises(ex.reference).items():
        with pytest.raises(CheckFailure, match="implementação de referência") as info:
            ex.hidden(answer)
        assert "origem da resposta" in str(info.value), label
