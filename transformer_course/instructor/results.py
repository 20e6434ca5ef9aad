"""Leitura dos resultados de uma correção: notas do gradebook e motivos das saídas corrigidas.

Usado por ``scripts/grade.py`` (``make grade``), ``scripts/grade_class.py`` (``make grade-class``) e
pelo serviço de correção. Os rótulos de cada célula (exercício, visível/oculta) vêm do registro de
exercícios (:mod:`transformer_course.exercises`), não do texto das células.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


def check_notebook_file(path: Path) -> str | None:
    """Motivo em pt-BR pelo qual o nbgrader não vai conseguir ler ``path``; None se ele lê."""
    import nbformat

    if not path.exists():
        return f"o notebook {path.name} não está na entrega"
    try:
        nbformat.read(path, as_version=4)
    except nbformat.reader.NotJSONError:
        return f"{path.name} não é um JSON válido (arquivo truncado ou editado fora do Jupyter)"
    except Exception as exc:  # noqa: BLE001 - qualquer falha de leitura vira motivo
        return f"{path.name} não pôde ser lido: {type(exc).__name__}: {exc}"
    return None


@dataclass
class CellResult:
    """Uma célula pontuada de um notebook corrigido."""

    grade_id: str
    label: str
    kind: str  # "visível", "oculto", "manual"
    score: float | None
    max_score: float
    reason: str = ""

    @property
    def failed(self) -> bool:
        return self.kind != "manual" and (self.score or 0) < self.max_score


@dataclass
class NotebookResult:
    chapter: str
    cells: list[CellResult] = field(default_factory=list)
    other_errors: list[str] = field(default_factory=list)

    @property
    def auto(self) -> tuple[float, float]:
        auto = [c for c in self.cells if c.kind != "manual"]
        return sum(c.score or 0 for c in auto), sum(c.max_score for c in auto)

    @property
    def manual(self) -> tuple[float | None, float]:
        cells = [c for c in self.cells if c.kind == "manual"]
        scores = [c.score for c in cells]
        got = None if any(s is None for s in scores) else sum(scores)
        return got, sum(c.max_score for c in cells)


def _short(text: str, limit: int = 400) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def explain_error(ename: str, evalue: str) -> str:
    """A mensagem de um erro de célula, em pt-BR quando o erro não é de uma verificação."""
    evalue = _short(evalue, 1200)
    if ename in ("CheckFailure", "AssertionError", "TamperingDetected") and evalue:
        return evalue
    if ename == "NameError":
        name = re.search(r"name '(\w+)'", evalue)
        what = f"`{name.group(1)}`" if name else "um nome"
        return (
            f"{what} não existe quando o teste roda (NameError): a função foi renomeada, ou a "
            "célula que a define deu erro (veja os erros em outras células)."
        )
    if ename in ("CellTimeoutError", "KeyboardInterrupt", "TimeoutError"):
        return "tempo esgotado: a célula não terminou no limite de tempo por célula (laço infinito?)."
    if ename == "SyntaxError":
        return f"erro de sintaxe (SyntaxError): {evalue}"
    return f"{ename}: {evalue}" if evalue else ename


def cell_failure(cell) -> str:
    """Por que uma célula de teste perdeu pontos (erro, stderr), a partir das saídas gravadas."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return explain_error(output.get("ename", ""), output.get("evalue", ""))
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            return (
                "a célula escreveu em stderr, e o nbgrader zera uma célula de teste que escreve em "
                f"stderr: {_short(''.join(output.get('text', '')), 200)}"
            )
    return ""


def _label(cell, registry: dict) -> tuple[str, str]:
    meta = cell.metadata.get("nbgrader", {})
    if meta.get("solution") or cell.cell_type == "markdown":
        return meta.get("grade_id", "?"), "manual"
    entry = registry.get(meta.get("grade_id"))
    if entry is None:
        return meta.get("grade_id", "?"), "oculto" if "BEGIN HIDDEN TESTS" in cell.source else "visível"
    exercise, graded = entry
    return exercise.label, "oculto" if graded.hidden else "visível"


def read_results(autograded: Path, gradebook, chapter: str, student: str) -> NotebookResult:
    """Notas (do gradebook) e motivos (das saídas do notebook corrigido) de uma entrega."""
    import nbformat

    from ..exercises import by_grade_id

    registry = by_grade_id(chapter)
    nb = nbformat.read(autograded, as_version=4)
    sub = gradebook.find_submission_notebook(chapter, chapter, student)
    grades = {g.name: g for g in sub.grades}
    result = NotebookResult(chapter)
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade"):
            if cell.cell_type == "code":
                for output in cell.get("outputs", []):
                    if output.get("output_type") == "error":
                        first = (cell.source.strip().splitlines() or [""])[0][:60]
                        where = meta.get("grade_id") or f"célula {index + 1}"
                        result.other_errors.append(
                            f"{where} (`{first}`): {explain_error(output['ename'], output['evalue'])}"
                        )
                        break
            continue
        grade_id = meta["grade_id"]
        grade = grades.get(grade_id)
        label, kind = _label(cell, registry)
        score = None if grade is None else grade.score
        if kind == "manual" and grade is not None and grade.needs_manual_grade:
            score = None
        max_score = float(meta.get("points", 0) if grade is None else grade.max_score)
        reason = cell_failure(cell) if kind != "manual" and (score or 0) < max_score else ""
        if kind != "manual" and (score or 0) < max_score and not reason:
            reason = "a célula não rodou (o notebook parou antes?)" if not cell.get("outputs") else ""
        result.cells.append(CellResult(grade_id, label, kind, score, max_score, reason))
    return result


def fmt_points(score: float | None, max_score: float) -> str:
    def num(x: float) -> str:
        return f"{x:g}".replace(".", ",")

    return f"{'?' if score is None else num(score)}/{num(max_score)}"
