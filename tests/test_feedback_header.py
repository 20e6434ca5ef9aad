"""O cabeçalho da devolutiva separa a nota dos pontos ainda a corrigir e escreve pontos em pt-BR.

Antes, "Nota: 17.0 / 21.0" contava no total os 4 pontos das perguntas abertas que o professor ainda
não corrigiu (e com ponto decimal). Agora: "Nota: 17 de 17 pontos corrigidos; 4 pontos a corrigir
pelo professor". A devolutiva de verdade (``nbgrader generate_feedback`` depois de um ``autograde``)
é conferida em ``tests/test_autograde.py``; aqui, o modelo com o exportador e a configuração do curso.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import nbgrader
import pytest
from conftest import ROOT

from transformer_course.instructor.cluster import load_course_config
from transformer_course.instructor.preprocessors import FeedbackHTMLExporter, points, points_phrase


def _render(score: float, max_score: float, pending: float, late: float = 0) -> str:
    config = load_course_config(ROOT)
    config.HTMLExporter.template_name = "feedback"
    static = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "static"
    config.HTMLExporter.extra_template_paths = [str(static / "node_modules" / "bootstrap" / "dist" / "css")]

    def graded(cell, grade_id, points, score=None, pending=False):
        cell.metadata["nbgrader"] = {
            "grade": True,
            "grade_id": grade_id,
            "points": points,
            "score": score,
            "pending": pending,
            "solution": cell.cell_type == "markdown",
            "locked": cell.cell_type == "code",
            "schema_version": 3,
        }
        return cell

    nb = nbformat.v4.new_notebook(
        cells=[
            graded(nbformat.v4.new_code_cell("check(f)", id="teste"), "test_f", 1.5, score=1.5),
            graded(nbformat.v4.new_markdown_cell("Minha resposta.", id="aberta"), "q_1", 2, pending=True),
        ]
    )
    resources = {
        "nbgrader": {
            "notebook": "05_mascaras",
            "score": score,
            "max_score": max_score,
            "late_penalty": late,
            "pending_points": pending,
        }
    }
    html, _ = FeedbackHTMLExporter(config=config).from_notebook_node(nb, resources=resources)
    return html


def _heading(html: str) -> str:
    return re.sub(r"\s+", " ", re.search(r"<h4 class=\"grade-summary\">(.*?)</h4>", html, re.S).group(1))


@pytest.mark.parametrize(
    ("value", "text", "phrase"),
    [(17.0, "17", "17 pontos"), (8.5, "8,5", "8,5 pontos"), (1, "1", "1 ponto"), (0.5, "0,5", "0,5 ponto"),
     (2 / 3, "0,67", "0,67 ponto"), (0, "0", "0 ponto")],
)  # fmt: skip
def test_points_in_pt_br(value, text, phrase):
    assert points(value) == text and points_phrase(value) == phrase


def test_pending_points_are_shown_apart_from_the_grade():
    html = _render(score=17.0, max_score=21.0, pending=4.0)
    assert _heading(html) == (
        "05_mascaras — Nota: 17 de 17 pontos corrigidos; 4 pontos a corrigir pelo professor"
    )
    text = re.sub(r"<[^>]+>", "", html)
    assert "O capítulo vale 21 pontos ao todo" in text
    assert "Nota: 1,5 de 1,5 ponto" in text  # a célula de teste
    assert "Nota: a corrigir (vale 2 pontos)" in text  # a pergunta aberta
    assert not re.search(r"\d\.\d", _heading(html)) and "/ 21" not in text


def test_without_pending_points_the_grade_is_out_of_the_whole_chapter():
    html = _render(score=8.5, max_score=21.0, pending=0, late=1.0)
    assert _heading(html) == "05_mascaras — Nota: 8,5 de 21 pontos"
    text = re.sub(r"<[^>]+>", "", html)
    assert "a corrigir pelo professor" not in _heading(html)
    assert "Penalidade por atraso: −1 ponto" in text
