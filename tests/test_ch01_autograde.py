"""Capítulo 1 no `nbgrader autograde` de verdade: uma resposta errada de verdade (seno e cosseno
trocados) perde pontos e a devolutiva HTML nomeia o erro em pt-BR, sem mostrar os testes ocultos."""

from __future__ import annotations

import copy
import hashlib
import re

import nbformat
import pytest
from conftest import ROOT, copy_course, nbgrader

pytestmark = pytest.mark.slow

CHAPTER = "01_embeddings_posicao"


def _swap_sin_cos(nb):
    wrong = copy.deepcopy(nb)
    for cell in wrong.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "sinusoidal_encoding":
            sin, cos = "torch.sin(positions", "torch.cos(positions"
            source = cell.source.replace(sin, "TMP(").replace(cos, sin).replace("TMP(", cos)
            assert source != cell.source
            cell.source = source
            return wrong
    raise AssertionError("célula sinusoidal_encoding não encontrada")


def test_wrong_answer_loses_points_and_feedback_names_the_mistake(tmp_path):
    from nbgrader.api import Gradebook

    course = copy_course(tmp_path / "curso", parts=("source", "release", "solutions"))
    nbgrader(course, "generate_assignment", CHAPTER, "--force")
    solution = nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    target = course / "grading" / "submitted" / "trocado" / CHAPTER / f"{CHAPTER}.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(_swap_sin_cos(solution), target)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()

    nbgrader(course, "autograde", CHAPTER, "--create")
    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        sub = gb.find_submission(CHAPTER, "trocado")
        grades = {
            g.name: (g.score, g.max_score) for nb in sub.notebooks for g in nb.grades if g.cell_type == "code"
        }
    assert grades["test_sinusoidal_encoding"][0] == 0, grades
    assert grades["test_sinusoidal_module"][0] == 0, grades  # o módulo usa a tabela do aluno
    assert grades["test_apply_rope"] == (2, 2), grades  # os outros exercícios não são afetados
    assert hashlib.sha256(target.read_bytes()).hexdigest() == digest, "a entrega foi modificada"

    nbgrader(course, "generate_feedback", CHAPTER)
    html = (course / "grading" / "feedback" / "trocado" / CHAPTER / f"{CHAPTER}.html").read_text()
    text = re.sub(r"<[^>]+>", "", html)
    assert "seno e cosseno trocados" in text
    assert "_hidden(" not in text and "BEGIN HIDDEN TESTS" not in text, (
        "a devolutiva mostra os testes ocultos"
    )
