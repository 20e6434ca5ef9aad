"""source/, release/ e solutions/ são exatamente o que `make assignments` gera de notebooks/."""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys

import pytest
from conftest import CHAPTERS, ROOT, copy_course


def _tree(path):
    return sorted(p.relative_to(path) for p in path.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    course = copy_course(tmp_path_factory.mktemp("curso"), parts=("notebooks", "scripts"))
    result = subprocess.run(
        [sys.executable, "scripts/build_assignments.py"],
        cwd=course,
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return course


@pytest.mark.parametrize("stage", ["source", "release", "solutions"])
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_generated_folders_are_in_sync(regenerated, stage, chapter):
    committed, fresh = ROOT / stage / chapter, regenerated / stage / chapter
    assert _tree(committed) == _tree(fresh), f"{stage}/{chapter}: outros arquivos; rode `make assignments`"
    for rel in _tree(fresh):
        assert filecmp.cmp(committed / rel, fresh / rel, shallow=False), (
            f"{stage}/{chapter}/{rel} difere da regeneração; rode `make assignments` e versione o resultado"
        )


@pytest.mark.parametrize("stage", ["source", "release", "solutions"])
def test_every_chapter_has_every_stage(stage):
    assert sorted(p.name for p in (ROOT / stage).iterdir() if p.is_dir()) == CHAPTERS


@pytest.mark.parametrize("stage", ["source", "release", "solutions"])
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_committed_notebooks_have_no_outputs(stage, chapter):
    nb = json.loads((ROOT / stage / chapter / f"{chapter}.ipynb").read_text())
    for cell in nb["cells"]:
        assert cell.get("id"), "célula sem id estável"
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_answer_keys_show_model_answers_without_markers(chapter):
    """No gabarito, as respostas-modelo aparecem limpas; o aluno continua recebendo o esboço."""
    solution = json.loads((ROOT / "solutions" / chapter / f"{chapter}.ipynb").read_text())
    release = json.loads((ROOT / "release" / chapter / f"{chapter}.ipynb").read_text())
    open_questions = 0
    for sol, rel in zip(solution["cells"], release["cells"], strict=True):
        meta = sol.get("metadata", {}).get("nbgrader", {})
        if sol["cell_type"] != "markdown" or not meta.get("solution"):
            continue
        open_questions += 1
        text = "".join(sol["source"])
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text, f"{meta['grade_id']}: marcador"
        assert text.strip(), f"{meta['grade_id']}: resposta-modelo vazia"
        assert "".join(rel["source"]).strip() == "SUA RESPOSTA AQUI", f"{meta['grade_id']}: esboço do aluno"
    assert open_questions >= 2, "cada capítulo tem ao menos duas perguntas abertas"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_packaged_corpus_is_in_sync(regenerated, chapter):
    """A prosa do capítulo no pacote (o corpus do capítulo 7) é a que ``make assignments`` extrai."""
    rel = f"transformer_course/corpus/{chapter}.md"
    assert (ROOT / rel).read_text(encoding="utf-8") == (regenerated / rel).read_text(encoding="utf-8"), (
        f"{rel} difere da regeneração; rode `make assignments` e versione o resultado"
    )


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_answer_key_runs_the_same_code_as_source(chapter):
    """As células de código de solutions/ são as de source/, letra por letra.

    Por isso o nbval executa só source/ (executar solutions/ rodaria o mesmo código outra vez).
    """
    source = json.loads((ROOT / "source" / chapter / f"{chapter}.ipynb").read_text())
    solution = json.loads((ROOT / "solutions" / chapter / f"{chapter}.ipynb").read_text())
    code = [
        ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"] for nb in (source, solution)
    ]
    assert code[0] == code[1], f"{chapter}: o gabarito não roda o mesmo código de source/"
