"""Capítulo 5 pelo `nbgrader autograde` de verdade: entregas com erros clássicos de máscara perdem
pontos, e a devolutiva HTML traz o diagnóstico em pt-BR (sem os testes ocultos)."""

from __future__ import annotations

import copy
import re

import nbformat
import pytest
from conftest import ROOT, copy_course, nbgrader

pytestmark = pytest.mark.slow

CHAPTER = "05_mascaras"

# (aluno, grade_id da célula de solução, trecho certo, trecho errado, diagnóstico esperado na devolutiva)
WRONG = [
    ("ou_no_lugar_de_e", "decoder_self_mask", "return pad & causal", "return pad | causal", "OU padding"),
    (
        "menos_1e9",
        "masked_softmax",
        'scores = scores.masked_fill(~mask, float("-inf")).masked_fill(empty_row, 0.0)\n'
        "    return scores.softmax(dim=-1).masked_fill(~mask, 0.0)",
        "return scores.masked_fill(~mask, -1e9).softmax(dim=-1)",
        "uniformes",
    ),
    ("triangulo_superior", "causal_mask", ".tril()", ".triu()", "SUPERIOR"),
]
# Os exercícios que cada entrega errada erra: as células deles valem 0, e as dos outros, tudo. A
# `decoder_self_mask` do gabarito usa a `causal_mask` do aluno: o triângulo superior derruba as duas.
# (Uma entrega com 0 em tudo é o kernel confinado que não importou o pacote, não um erro de máscara.)
FAILS = {
    "ou_no_lugar_de_e": {"decoder_self_mask"},
    "menos_1e9": {"masked_softmax"},
    "triangulo_superior": {"causal_mask", "decoder_self_mask"},
}


def _wrong_submission(solution, grade_id, right, wrong):
    nb = copy.deepcopy(solution)
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    assert len(cells) == 1 and right in cells[0].source, grade_id
    cells[0].source = cells[0].source.replace(right, wrong)
    return nb


def test_mask_mistakes_lose_points_with_diagnosis(tmp_path):
    from nbgrader.api import Gradebook

    course = copy_course(tmp_path / "curso", parts=("source", "release", "solutions"))
    nbgrader(course, "generate_assignment", CHAPTER, "--force")
    solution = nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    for student, grade_id, right, wrong, _ in WRONG:
        target = course / "grading" / "submitted" / student / CHAPTER / f"{CHAPTER}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(_wrong_submission(solution, grade_id, right, wrong), target)

    nbgrader(course, "autograde", CHAPTER, "--create")
    nbgrader(course, "generate_feedback", CHAPTER)

    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        for student, *_ in WRONG:
            sub = gb.find_submission(CHAPTER, student)
            auto = [g for nb in sub.notebooks for g in nb.grades if g.cell_type == "code"]
            score, total = sum(g.score or 0 for g in auto), sum(g.max_score for g in auto)
            assert 0 < score < total, (student, score, total)
            for g in auto:
                exercise = g.name.removeprefix("test_").removesuffix("_hidden")
                wanted = 0 if exercise in FAILS[student] else g.max_score
                assert (g.score or 0) == wanted, (student, g.name, g.score, g.max_score)

    for student, _, _, _, diagnosis in WRONG:
        html = (course / "grading" / "feedback" / student / CHAPTER / f"{CHAPTER}.html").read_text()
        text = re.sub(r"<[^>]+>", "", html)
        assert diagnosis in text, f"{student}: a devolutiva não cita {diagnosis!r}"
        assert "_hidden(" not in text and "BEGIN HIDDEN TESTS" not in text
