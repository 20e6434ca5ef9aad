"""Peças do nbgrader específicas do curso.

Três grupos, todos sem dependências pesadas no import (o kernel das correções importa este
módulo nas células de testes ocultos, e o ``nbgrader_config.py`` o usa nas devolutivas):

- :class:`ShortTracebacks`: preprocessador da devolutiva (só a mensagem final de cada erro);
- :func:`fresh_check` e :func:`verify_grading_environment`: resistência a adulterações nas
  células de testes ocultos (a função de verificação vem de uma importação nova, do disco, e as
  peças de que as verificações dependem são conferidas antes);
- leitura dos resultados (:func:`chapters`, :func:`read_results`, :func:`explain_error`...),
  usada por ``scripts/grade.py`` (``make grade``) e ``scripts/grade_class.py`` (``make grade-class``).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

# ====================================================================== devolutiva


def _short_tracebacks_class():
    from nbconvert.preprocessors import Preprocessor
    from traitlets import Bool

    class ShortTracebacks(Preprocessor):
        """Na devolutiva, guarda só a mensagem final de cada erro (onde está o texto em pt-BR).

        O traceback completo mostraria o código das verificações (e dos testes ocultos),
        que não ajuda o aluno.
        """

        enabled = Bool(True, help="Os preprocessadores do nbconvert vêm desligados por padrão.").tag(
            config=True
        )

        def preprocess_cell(self, cell, resources, index):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output['ename']}: {output['evalue']}"]
            return cell, resources

    ShortTracebacks.__module__ = __name__
    return ShortTracebacks


def __getattr__(name: str):
    # O nbconvert só é importado quando o nbgrader pede o preprocessador: o kernel das
    # correções importa este módulo nos testes ocultos e não deve pagar esse custo.
    if name == "ShortTracebacks":
        cls = _short_tracebacks_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


def feedback_template_dir() -> str:
    """A pasta com o modelo ``feedback`` em pt-BR (usada em ``nbgrader_config.py``)."""
    return str(Path(__file__).resolve().parent / "templates")


# ====================================================================== resultados


def chapters(root: Path) -> list[str]:
    """Capítulos que existem no curso: ``source/NN_nome/NN_nome.ipynb``."""
    return sorted(
        p.parent.name for p in Path(root).glob("source/[0-9][0-9]_*/*.ipynb") if p.stem == p.parent.name
    )


def nbgrader_env() -> dict:
    """Ambiente para chamar o nbgrader: o ``bin/`` deste Python no PATH (por causa do ``alembic``)."""
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYTHONWARNINGS", "ignore")
    return env


def nbgrader_exe() -> str:
    return os.path.join(os.path.dirname(sys.executable), "nbgrader")


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


_CHECK_CALL = re.compile(r"check_(\w+?)(_hidden)?\(\s*(\w+)")
_FRESH_CALL = re.compile(r"fresh_check\(.*\)\(\s*(\w+)\s*\)")


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


def _label(cell) -> tuple[str, str]:
    meta = cell.metadata.get("nbgrader", {})
    if meta.get("solution") or cell.cell_type == "markdown":
        return meta.get("grade_id", "?"), "manual"
    hidden = "BEGIN HIDDEN TESTS" in cell.source
    match = _FRESH_CALL.search(cell.source) or _CHECK_CALL.search(cell.source)
    label = match.group(match.lastindex) if match else meta.get("grade_id", "?")
    return label, "oculto" if hidden else "visível"


def read_results(autograded: Path, gradebook, chapter: str, student: str) -> NotebookResult:
    """Notas (do gradebook) e motivos (das saídas do notebook corrigido) de uma entrega."""
    import nbformat

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
        label, kind = _label(cell)
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
