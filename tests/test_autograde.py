"""Correção de ponta a ponta com o `nbgrader autograde` de verdade, numa cópia temporária do curso.

Para cada capítulo: o gabarito tira a nota máxima (nas células automáticas), a versão em
branco tira 0, e uma entrega com um exercício sem fazer fica no meio. Para o capítulo 2,
uma resposta errada de verdade (sem a divisão por √d_k) perde pontos e a devolutiva HTML
mostra o diagnóstico em pt-BR, sem os testes ocultos. Nenhuma entrega é modificada.
"""

from __future__ import annotations

import copy
import hashlib
import re

import nbformat
import pytest
from conftest import CHAPTERS, ROOT, copy_course, nbgrader

pytestmark = pytest.mark.slow


def _first_solution_cell(nb):
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            return i
    raise AssertionError("o capítulo não tem exercício de código")


def _submissions(chapter):
    solution = nbformat.read(ROOT / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)
    release = nbformat.read(ROOT / "release" / chapter / f"{chapter}.ipynb", as_version=4)
    partial = copy.deepcopy(solution)
    i = _first_solution_cell(partial)
    partial.cells[i].source = release.cells[i].source  # um exercício volta a ser o esboço
    subs = {"gabarito": solution, "em_branco": release, "parcial": partial}
    if chapter == "02_atencao":
        wrong = copy.deepcopy(solution)
        for cell in wrong.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "sdpa":
                cell.source = cell.source.replace(" / math.sqrt(d_k)", "")
                assert "math.sqrt" not in cell.source
        subs["sem_escala"] = wrong
    return subs


def _score(gb, chapter, student):
    sub = gb.find_submission(chapter, student)
    auto = [g for nb in sub.notebooks for g in nb.grades if g.auto_score is not None or g.cell_type == "code"]
    return sum(g.score or 0 for g in auto), sum(g.max_score for g in auto)


# Capítulos em que toda figura depende do gabarito (a demonstração inteira é pulada na correção).
SKIPPED_FIGURES = {"01_embeddings_posicao", "05_mascaras"}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_autograde_end_to_end(chapter, tmp_path):
    from nbgrader.api import Gradebook

    course = copy_course(tmp_path / "curso", parts=("source", "release", "solutions"))
    nbgrader(course, "generate_assignment", chapter, "--force")  # registra no gradebook novo
    subs = _submissions(chapter)
    hashes = {}
    for student, nb in subs.items():
        target = course / "grading" / "submitted" / student / chapter / f"{chapter}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)
        hashes[target] = hashlib.sha256(target.read_bytes()).hexdigest()

    nbgrader(course, "autograde", chapter, "--create")

    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        scores = {s: _score(gb, chapter, s) for s in subs}
    full, max_auto = scores["gabarito"]
    assert max_auto > 0
    assert full == pytest.approx(max_auto), f"gabarito: {scores}"
    assert scores["em_branco"][0] == 0, f"em branco: {scores}"
    assert 0 < scores["parcial"][0] < max_auto, f"parcial: {scores}"
    if "sem_escala" in scores:
        assert 0 < scores["sem_escala"][0] < max_auto, scores
    for path, digest in hashes.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} foi modificado"

    # Na correção, nenhuma figura é desenhada nem widget montado: no lugar, um aviso em pt-BR (o da
    # figura, ou o da demonstração que nem roda porque depende do gabarito, que fica com o professor).
    graded = nbformat.read(
        course / "grading" / "autograded" / "gabarito" / chapter / f"{chapter}.ipynb", as_version=4
    )
    outputs = [o for c in graded.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    shown = "\n".join(str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", "")) for o in outputs)
    assert not [o for o in outputs if "image/png" in o.get("data", {})], "figura desenhada na correção"
    assert "Demonstração não executada na correção" in shown
    assert "figura não desenhada na correção automática" in shown or chapter in SKIPPED_FIGURES, shown[-2000:]

    if chapter == "02_atencao":
        nbgrader(course, "generate_feedback", chapter)
        html = (course / "grading" / "feedback" / "sem_escala" / chapter / f"{chapter}.html").read_text()
        text = re.sub(r"<[^>]+>", "", html)
        assert "SEM a divisão por √d_k" in text
        hidden_call = "check_scaled_dot_product_attention_hidden("
        assert hidden_call not in text, "a devolutiva mostra os testes ocultos"
        assert "BEGIN HIDDEN TESTS" not in text
        # As perguntas abertas ainda sem nota aparecem "a corrigir", não como pontos perdidos: o
        # cabeçalho separa a nota (sobre os pontos já corrigidos) dos pontos a corrigir, em pt-BR.
        assert "a corrigir" in text
        heading = re.sub(
            r"\s+", " ", re.search(r"<h4 class=\"grade-summary\">(.*?)</h4>", html, re.S).group(1)
        )
        shown = re.search(
            r"Nota: ([\d,]+) de ([\d,]+) pontos? corrigidos; ([\d,]+) pontos? a corrigir", heading
        )
        assert shown and not re.search(r"\d\.\d", heading), heading
        number = lambda s: float(s.replace(",", "."))  # noqa: E731
        graded = nbformat.read(
            course / "grading" / "autograded" / "sem_escala" / chapter / f"{chapter}.ipynb", as_version=4
        )
        manual = sum(
            c.metadata["nbgrader"]["points"]
            for c in graded.cells
            if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("grade")
        )
        assert number(shown[1]) == pytest.approx(scores["sem_escala"][0]), (heading, scores)
        assert number(shown[2]) == pytest.approx(max_auto), (heading, max_auto)
        assert number(shown[3]) == pytest.approx(manual) and manual > 0, (heading, manual)
