"""A entrega normalizada antes de rodar: o que é do professor volta a ser do professor.

O primeiro passo da correção (``Autograde.sanitize_preprocessors``) é :class:`NormalizeSubmission`.
Ele refaz a estrutura do notebook entregue a partir do gradebook do nbgrader (as células que o
``generate_assignment`` registrou) e da ordem do ``source/``:

- toda célula com um ``grade_id`` conhecido recebe de volta os metadados do nbgrader do
  professor (``grade``, ``points``, ``locked``, ``solution``, ``checksum``...) e o tipo de célula;
  as trancadas (testes, enunciados) recebem também o código do professor;
- a resposta do aluno (o código ou o texto de uma célula de solução) é mantida;
- células com ``grade_id`` desconhecido, repetido ou metadados malformados viram células comuns
  do aluno (o código roda, mas não vale nada);
- células de teste e de resposta que sumiram voltam para o lugar delas (as de resposta com o
  esboço);
- metadados de execução ficam de fora em todas as células: ``tags`` (``skip-execution``,
  ``raises-exception``, ``nbval-*``, ``papermill``...), ``execution``, ``jupyter``, anexos das
  células corrigidas; no notebook, só ``kernelspec`` e ``language_info`` ficam.

Nada disso quebra a correção: o que foi consertado vai para ``resources`` e para o log, em pt-BR.
A nota continua saindo só do juiz (:mod:`.judge`).
"""

from __future__ import annotations

from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from traitlets import Bool

from .limits import SubmissionLimits

__all__ = ["NormalizeSubmission", "normalize", "too_many_cells"]

META_KEY = "transformer_course"
_CELL_TYPES = ("code", "markdown", "raw")


def _text(source) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    return ""


def _grade_id(cell) -> str | None:
    meta = cell.get("metadata")
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    grade_id = nbg.get("grade_id") if isinstance(nbg, dict) else None
    return grade_id if isinstance(grade_id, str) and grade_id else None


def _plain_cell(cell, *, keep_attachments: bool) -> NotebookNode:
    """A célula do aluno só com o conteúdo: tipo válido, texto, sem metadados de execução."""
    kind = cell.get("cell_type") if cell.get("cell_type") in _CELL_TYPES else "raw"
    out = NotebookNode({"cell_type": kind, "metadata": NotebookNode(), "source": _text(cell.get("source"))})
    if isinstance(cell.get("id"), str):
        out["id"] = cell["id"][:64]
    if kind == "code":
        out["outputs"], out["execution_count"] = [], None
    elif keep_attachments and isinstance(cell.get("attachments"), dict):
        out["attachments"] = cell["attachments"]
    return out


def _canonical(spec: dict) -> NotebookNode:
    meta = {
        "grade": spec["grade"],
        "grade_id": spec["grade_id"],
        "locked": spec["locked"],
        "schema_version": 3,
        "solution": spec["solution"],
        "task": spec["task"],
    }
    if spec["grade"] or spec["task"]:
        meta["points"] = spec["points"]
    if spec["checksum"]:
        meta["checksum"] = spec["checksum"]
    return NotebookNode(meta)


def _from_spec(spec: dict, student_source: str | None) -> NotebookNode:
    kind = spec["cell_type"]
    cell = NotebookNode({"cell_type": kind, "metadata": NotebookNode(), "source": spec["source"]})
    if student_source is not None and not spec["locked"]:
        cell["source"] = student_source
    if kind == "code":
        cell["outputs"], cell["execution_count"] = [], None
    cell.metadata["nbgrader"] = _canonical(spec)
    return cell


def normalize(nb: NotebookNode, specs: dict[str, dict], order: list[str]) -> tuple[NotebookNode, list[str]]:
    """O notebook normalizado e a lista (pt-BR) do que foi consertado.

    Args:
        specs: ``grade_id`` -> célula do professor (``cell_type``, ``source``, ``grade``, ``solution``,
            ``locked``, ``task``, ``points``, ``checksum``), como o gradebook do nbgrader as guarda.
        order: os ``grade_id`` na ordem do notebook do professor (para recolocar as que sumiram).
    """
    repairs: list[str] = []
    cells = nb.get("cells") if isinstance(nb.get("cells"), list) else []
    out: list[NotebookNode] = []
    placed: dict[str, int] = {}
    for index, raw in enumerate(cells):
        if not isinstance(raw, dict):
            repairs.append(f"célula {index + 1}: não é uma célula válida (removida)")
            continue
        grade_id = _grade_id(raw)
        spec = specs.get(grade_id) if grade_id else None
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        if isinstance(meta.get("tags"), list) and meta["tags"]:
            repairs.append(
                f"célula {index + 1}: marcas (tags) removidas: {', '.join(map(str, meta['tags']))[:120]}"
            )
        if spec is None or grade_id in placed:
            if grade_id and grade_id in placed:
                repairs.append(
                    f"célula {index + 1}: `grade_id` {grade_id!r} repetido "
                    "(vale a primeira; esta vira célula comum)"
                )
            elif grade_id or "nbgrader" in meta:
                repairs.append(
                    f"célula {index + 1}: metadados do nbgrader desconhecidos ou malformados (célula comum)"
                )
            out.append(_plain_cell(raw, keep_attachments=True))
            continue
        if raw.get("cell_type") != spec["cell_type"]:
            repairs.append(
                f"célula {grade_id}: tipo {raw.get('cell_type')!r} restaurado para {spec['cell_type']!r}"
            )
        if raw.get("attachments"):
            repairs.append(f"célula {grade_id}: anexos removidos")
        student = None if spec["locked"] else _text(raw.get("source"))
        cell = _from_spec(spec, student)
        if isinstance(raw.get("id"), str):
            cell["id"] = raw["id"][:64]
        placed[grade_id] = len(out)
        out.append(cell)
    for position, grade_id in enumerate(order):
        if grade_id in placed:
            continue
        spec = specs[grade_id]
        before = [g for g in order[:position] if g in placed]
        at = placed[before[-1]] + 1 if before else 0
        out.insert(at, _from_spec(spec, None))
        for key, value in placed.items():
            if value >= at:
                placed[key] = value + 1
        placed[grade_id] = at
        what = "resposta" if spec["solution"] else "teste" if spec["grade"] else "enunciado"
        repairs.append(f"célula {grade_id} ({what}) faltava e foi recolocada")
    metadata = nb.get("metadata") if isinstance(nb.get("metadata"), dict) else {}
    keep = {k: metadata[k] for k in ("kernelspec", "language_info") if isinstance(metadata.get(k), dict)}
    clean = NotebookNode(
        {
            "cells": out,
            "metadata": NotebookNode(keep),
            "nbformat": 4,
            "nbformat_minor": nb.get("nbformat_minor", 5),
        }
    )
    if not isinstance(clean["nbformat_minor"], int) or not 0 <= clean["nbformat_minor"] <= 5:
        clean["nbformat_minor"] = 5
    return clean, repairs


def _gradebook_specs(db_url: str, notebook: str, assignment: str) -> dict[str, dict]:
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        nb = gb.find_notebook(notebook, assignment)
        grade = {c.name: c for c in nb.grade_cells}
        solution = {c.name for c in nb.solution_cells}
        task = {c.name: c for c in nb.task_cells}
        specs = {}
        for cell in nb.source_cells:
            points = (
                grade[cell.name].max_score
                if cell.name in grade
                else task[cell.name].max_score
                if cell.name in task
                else 0
            )
            specs[cell.name] = {
                "grade_id": cell.name,
                "cell_type": cell.cell_type,
                "source": cell.source,
                "locked": bool(cell.locked),
                "checksum": cell.checksum,
                "grade": cell.name in grade,
                "solution": cell.name in solution,
                "task": cell.name in task,
                "points": float(points),
            }
    return specs


def _source_order(path: Path, specs: dict) -> list[str]:
    import nbformat

    try:
        source = nbformat.read(path, as_version=4)
    except (OSError, ValueError):
        return sorted(specs)
    order = [_grade_id(cell) for cell in source.cells]
    order = [g for g in order if g in specs]
    return order + sorted(set(specs) - set(order))


class NormalizeSubmission(Preprocessor):
    """Primeiro passo da correção: refaz a estrutura da entrega a partir do professor (ver o módulo)."""

    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb, resources):
        from nbgrader.coursedir import CourseDirectory

        info = resources["nbgrader"]
        notebook, assignment = info["notebook"], info["assignment"]
        specs = _gradebook_specs(info["db_url"], notebook, assignment)
        coursedir = CourseDirectory(config=self.config)
        source = (
            Path(coursedir.format_path(coursedir.source_directory, ".", assignment)) / f"{notebook}.ipynb"
        )
        stopped = too_many_cells(nb, SubmissionLimits(parent=self))
        nb, repairs = normalize(nb, specs, _source_order(source, specs))
        for line in repairs:
            self.log.warning("Entrega de %s (%s): %s", info.get("student"), notebook, line)
        nb.metadata[META_KEY] = NotebookNode({"consertos": repairs})
        resources.setdefault(META_KEY, {})["repairs"] = repairs
        if stopped:
            # O executor (judge.py) não roda nada e dá 0 com este motivo a cada teste.
            self.log.warning("Entrega de %s (%s): %s", info.get("student"), notebook, stopped)
            nb.metadata[META_KEY]["recusada"] = stopped
        return nb, resources


def too_many_cells(nb, limits) -> str:
    """O motivo (pt-BR) de recusar uma entrega com células demais, ou ``""``."""
    cells = nb.get("cells") if isinstance(nb.get("cells"), list) else []
    code = sum(1 for cell in cells if isinstance(cell, dict) and cell.get("cell_type") == "code")
    if code > limits.max_code_cells:
        return (
            f"a entrega tem {code} células de código, mais que o limite de {limits.max_code_cells} da "
            "correção; nada foi executado"
        )
    if len(cells) > limits.max_cells:
        return (
            f"a entrega tem {len(cells)} células, mais que o limite de {limits.max_cells} da correção; "
            "nada foi executado"
        )
    return ""
