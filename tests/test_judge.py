"""O juiz remoto: a verificação roda aqui, a resposta roda num kernel, só dados atravessam.

Para cada célula de teste do curso, o gabarito (``solutions/``) definido num kernel de verdade
ganha todos os pontos com o juiz remoto, visível e oculto, com sementes de uma entrega qualquer;
e respostas erradas perdem os pontos com a mesma mensagem que a verificação local dá ao aluno.
"""

from __future__ import annotations

import math
import re

import nbformat
import pytest
import torch
from conftest import CHAPTERS, ROOT
from judge_helpers import StudentKernel, solution_code

from transformer_course.exercises import all_exercises
from transformer_course.feedback import CheckFailure
from transformer_course.instructor.judge import hidden_kwargs, judge_cell, seed_offset
from transformer_course.probe import LocalStudent, judging

# capítulos cujas verificações já falam com o aluno só por pedidos
CONVERTED = set(CHAPTERS)  # todos os capítulos já falam com o aluno só por pedidos


def _source_kwargs(chapter: str) -> dict[str, dict]:
    """Os argumentos que cada célula de teste do ``source/`` passa à verificação (o questionário)."""
    nb = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
    cells = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")]
    return {c.metadata["nbgrader"]["grade_id"]: hidden_kwargs(c.source) for c in cells}


def _setup_code(chapter: str) -> str:
    """A primeira célula de código do capítulo (importações, dispositivo)."""
    nb = nbformat.read(ROOT / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)
    return next(cell.source for cell in nb.cells if cell.cell_type == "code")


@pytest.fixture(scope="module", params=[c for c in CHAPTERS if c in CONVERTED])
def chapter_kernel(request):
    chapter = request.param
    with StudentKernel() as kernel:
        kernel.run(_setup_code(chapter))
        kernel.run(solution_code(chapter))
        yield chapter, kernel


def test_reference_answers_get_full_marks_remotely(chapter_kernel):
    chapter, kernel = chapter_kernel
    cells = [(ex, cell) for ex in all_exercises() if ex.chapter == chapter for cell in ex.cells]
    assert cells
    secret = b"segredo de teste"
    kwargs = _source_kwargs(chapter)  # como o JudgedExecute: lidos do source/ do professor
    for _exercise, cell in cells:
        offset = seed_offset(secret, "aluno-qualquer", chapter, cell.grade_id)
        verdict = judge_cell(chapter, cell.grade_id, kernel.student(), offset, kwargs.get(cell.grade_id))
        assert verdict.status == "passou", f"{cell.grade_id}: {verdict.message}"
        assert verdict.points == cell.points
        assert verdict.requests > 0, "o juiz não pediu nada ao kernel"


WRONG_SDPA = {
    "sem escala": """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    return weights @ V, weights
""",
    "in place": """
def scaled_dot_product_attention(Q, K, V, mask=None):
    Q /= math.sqrt(Q.size(-1))
    scores = Q @ K.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    return weights @ V, weights
""",
    "chama o PyTorch": """
def scaled_dot_product_attention(Q, K, V, mask=None):
    out = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
    scores = (Q @ K.transpose(-2, -1)) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return out, scores.softmax(-1)
""",
    "levanta": """
def scaled_dot_product_attention(Q, K, V, mask=None):
    raise ValueError("não sei")
""",
}


def _without_line(message: str) -> str:
    """A mensagem sem a linha do código do aluno (no teste local, o código vem de uma string)."""
    return re.sub(r" \(linha \d+: `[^`]*`\)", "", message)


@pytest.mark.parametrize("name", sorted(WRONG_SDPA))
def test_wrong_answers_lose_points_with_the_local_message(name):
    namespace = {"torch": torch, "math": math, "F": torch.nn.functional}
    exec(WRONG_SDPA[name], namespace)  # noqa: S102 - a resposta errada, local, para comparar
    exercise = next(ex for ex in all_exercises() if ex.name == "scaled_dot_product_attention")
    local = {}
    for cell in exercise.cells:
        check = exercise.hidden if cell.hidden else exercise.visible
        with judging(LocalStudent(), 0 if not cell.hidden else 777, []):
            try:
                check(namespace["scaled_dot_product_attention"])
            except CheckFailure as failure:
                local[cell.grade_id] = str(failure)
    assert local, f"{name}: a resposta errada passou em todas as verificações locais"
    with StudentKernel() as kernel:
        kernel.run(WRONG_SDPA[name])
        for cell in exercise.cells:
            verdict = judge_cell("02_atencao", cell.grade_id, kernel.student(), 777)
            if cell.grade_id in local:
                assert verdict.status == "falhou", (cell.grade_id, verdict.message)
                assert verdict.points == 0
                assert _without_line(verdict.message) == _without_line(local[cell.grade_id])
            else:
                assert verdict.status == "passou", (cell.grade_id, verdict.message)
