"""A versão do aluno roda de ponta a ponta: os únicos erros são os "não implementado" das
verificações (e não uma parede de tracebacks), e ela não contém as soluções."""

from __future__ import annotations

import json

import nbformat
import pytest
from conftest import CHAPTERS, ROOT
from nbclient import NotebookClient
from number_helpers import english_numbers

# Os capítulos cujos textos impressos passam por ``transformer_course.numbers`` (vírgula decimal).
PRINTS_IN_PT_BR = ["01_embeddings_posicao", "02_atencao", "03_multi_head", "04_transformer"]

_executed: dict[str, nbformat.NotebookNode] = {}


def executed_release(chapter: str, tmp_path_factory) -> nbformat.NotebookNode:
    """O notebook do aluno executado de ponta a ponta (uma vez por capítulo neste módulo)."""
    if chapter not in _executed:
        nb = nbformat.read(ROOT / "release" / chapter / f"{chapter}.ipynb", as_version=4)
        # Como no "Validar" do nbgrader: os experimentos longos encolhem (o assunto aqui são os esboços).
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("NBGRADER_EXECUTION", "validate")
            NotebookClient(
                nb,
                timeout=300,
                kernel_name="python3",
                allow_errors=True,
                resources={"metadata": {"path": str(tmp_path_factory.mktemp(chapter))}},
            ).execute()
        _executed[chapter] = nb
    return _executed[chapter]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_release_runs_up_to_its_stubs(chapter, tmp_path_factory):
    nb = executed_release(chapter, tmp_path_factory)
    errors = [
        (i, out)
        for i, cell in enumerate(nb.cells)
        for out in cell.get("outputs", [])
        if out.output_type == "error"
    ]
    assert errors, "a versão do aluno deveria ter exercícios não implementados"
    for i, out in errors:
        assert out.ename in {"CheckFailure", "AssertionError"} and "não implementado" in out.evalue, (
            f"célula {i} de {chapter}: {out.ename}: {out.evalue[:300]}"
        )
        assert len(out.traceback) <= 12, f"célula {i}: traceback longo demais ({len(out.traceback)} linhas)"

    def has_code(cell):
        return any(line.strip() and not line.lstrip().startswith("#") for line in cell.source.splitlines())

    visible_tests = {
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and has_code(c) and c.metadata.get("nbgrader", {}).get("grade")
    }
    failed = {i for i, _ in errors}
    assert visible_tests <= failed, "toda célula de teste visível deve dizer 'não implementado'"


@pytest.mark.parametrize("chapter", PRINTS_IN_PT_BR)
def test_release_prints_numbers_in_pt_br(chapter, tmp_path_factory):
    """O que o notebook imprime (``print``) usa vírgula decimal: "0,19", não "0.19"."""
    nb = executed_release(chapter, tmp_path_factory)
    printed = [
        (i, line)
        for i, cell in enumerate(nb.cells)
        for out in cell.get("outputs", [])
        if out.output_type == "stream"
        for line in out.text.splitlines()
    ]
    assert any(any(ch.isdigit() for ch in line) for _, line in printed), f"{chapter}: nenhum número impresso"
    wrong = [(i, line) for i, line in printed if english_numbers(line)]
    assert not wrong, f"{chapter}: números no formato inglês impressos: {wrong[:5]}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_release_hides_solutions_and_hidden_tests(chapter):
    text = (ROOT / "release" / chapter / f"{chapter}.ipynb").read_text()
    for marker in (
        "BEGIN SOLUTION",
        "END SOLUTION",
        "BEGIN HIDDEN TESTS",
        "_hidden(",
        "Rubrica",
        "BEGIN MARK SCHEME",
    ):
        assert marker not in text, f"{chapter}: a versão do aluno contém {marker!r}"
    nb = json.loads(text)
    assert any("SEU CÓDIGO AQUI" in "".join(c["source"]) for c in nb["cells"])
    assert any("SUA RESPOSTA AQUI" in "".join(c["source"]) for c in nb["cells"])


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_structure(chapter):
    """Cada capítulo tem o que a especificação pede: testes visíveis e ocultos, perguntas abertas,
    resumo e referências."""
    nb = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
    meta = [c.metadata.get("nbgrader", {}) for c in nb.cells]
    tests = [c for c, m in zip(nb.cells, meta) if m.get("grade") and c.cell_type == "code"]
    manual = [c for c, m in zip(nb.cells, meta) if m.get("grade") and c.cell_type == "markdown"]
    assert any("BEGIN HIDDEN TESTS" in c.source for c in tests), "faltam testes ocultos"
    assert any("BEGIN HIDDEN TESTS" not in c.source for c in tests), "faltam testes visíveis"
    assert len(manual) >= 2, "pelo menos duas perguntas abertas corrigidas à mão"
    assert all("Rubrica" in c.source for c in manual), "toda pergunta aberta tem rubrica"
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for heading in ("Objetivos", "Resumo", "Para ir além"):
        assert heading in markdown, f"falta a seção {heading!r}"
    for m in meta:
        if m:
            assert m.get("schema_version") == 3 and m.get("grade_id"), m


@pytest.mark.parametrize("chapter", ["01_embeddings_posicao", "02_atencao", "04_transformer"])
def test_run_all_goes_past_unfinished_exercises(chapter, tmp_path, monkeypatch):
    """No JupyterLab (Executar tudo, sem o nbgrader), um exercício por fazer não para o notebook.

    A célula de teste mostra o aviso de "não implementado" como texto, sem erro, e as células
    seguintes rodam; no Validar e na correção (o teste acima), o mesmo teste é um erro e vale 0.
    """
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("NBGRADER_VALIDATING", raising=False)
    nb = nbformat.read(ROOT / "release" / chapter / f"{chapter}.ipynb", as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        allow_errors=False,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # sem allow_errors: qualquer erro para aqui, como o Executar tudo do JupyterLab
    notices = [
        cell
        for cell in nb.cells
        if cell.metadata.get("nbgrader", {}).get("grade")
        and cell.cell_type == "code"
        and cell.source.strip()
        and not cell.source.lstrip().startswith("#")
    ]
    assert notices, f"{chapter}: nenhuma célula de teste visível"
    for cell in notices:
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        assert "ainda não implementou" in text and "vale 0" in text, (cell.source[:80], cell.outputs)
