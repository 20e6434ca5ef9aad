"""Preprocessadores do nbgrader/nbconvert usados pelas ferramentas do professor.

Só o processo do corretor importa este módulo (via ``nbgrader_config.py``); o kernel do aluno
nunca o importa, por isso ele pode depender do nbgrader e do nbconvert à vontade.

- :class:`GetGradesPending` — a devolutiva distingue pontos perdidos de pontos ainda não
  corrigidos (perguntas abertas à espera do professor: "a corrigir").
- :func:`points` e :func:`points_phrase` — os filtros Jinja da devolutiva que escrevem pontos em
  pt-BR ("8,5"; "1 ponto", "4 pontos"), registrados em ``nbgrader_config.py``
  (``HTMLExporter.filters``).
- :class:`StripTextSolutionMarkers` — no gabarito (``solutions/``), as respostas-modelo das
  perguntas abertas aparecem sem os marcadores ``### BEGIN SOLUTION``/``### END SOLUTION``,
  que o Markdown mostraria como títulos.
- :class:`ShortTracebacks` — na devolutiva, só a mensagem final de cada erro (onde está o pt-BR).
- :class:`FeedbackHTMLExporter` — o ``HTMLExporter`` da devolutiva, com os modelos Jinja compilados
  uma vez por processo (num worker do Dask, e não uma vez por aluno).
"""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import BytecodeCache
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from nbgrader import utils
from nbgrader.preprocessors import GetGrades
from traitlets import Bool

from ..numbers import br

__all__ = [
    "FeedbackHTMLExporter",
    "GetGradesPending",
    "ShortTracebacks",
    "StripTextSolutionMarkers",
    "feedback_template_dir",
    "points",
    "points_phrase",
]

_MARKER = re.compile(r"^\s*#*\s*(BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$")


class GetGradesPending(GetGrades):
    """``GetGrades`` do nbgrader, mais o que ainda espera correção manual.

    Em cada célula avaliada grava ``pending`` (verdadeiro enquanto a nota depende do professor);
    em ``resources["nbgrader"]`` grava ``pending_points`` (a soma dos pontos dessas células).
    O modelo ``feedback`` do curso mostra esses pontos como "a corrigir", e não como perdidos.
    """

    def preprocess(self, nb, resources):
        nb, resources = super().preprocess(nb, resources)
        pending = sum(
            float(cell.metadata.nbgrader.get("points") or 0)
            for cell in nb.cells
            if cell.metadata.get("nbgrader", {}).get("pending")
        )
        resources["nbgrader"]["pending_points"] = pending
        return nb, resources

    def _get_score(self, cell, resources):
        super()._get_score(cell, resources)
        grade = self.gradebook.find_grade(
            cell.metadata["nbgrader"]["grade_id"], self.notebook_id, self.assignment_id, self.student_id
        )
        cell.metadata.nbgrader["pending"] = bool(grade.needs_manual_grade)


class StripTextSolutionMarkers(Preprocessor):
    """Tira dos textos (Markdown) as linhas com os marcadores de solução do nbgrader.

    Nas células de código os marcadores são comentários e ficam; no Markdown eles virariam
    títulos ("BEGIN SOLUTION") no gabarito que o professor lê.
    """

    enabled = Bool(True, help="Os preprocessadores do nbconvert vêm desligados por padrão.").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "markdown" and utils.is_solution(cell):
            lines = [line for line in cell.source.splitlines() if not _MARKER.match(line)]
            cell.source = "\n".join(lines).strip("\n")
        return cell, resources


class ShortTracebacks(Preprocessor):
    """Na devolutiva, guarda só a mensagem final de cada erro (onde está o texto em pt-BR).

    O traceback completo mostraria o código das verificações (e dos testes ocultos),
    que não ajuda o aluno.
    """

    enabled = Bool(True, help="Os preprocessadores do nbconvert vêm desligados por padrão.").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output['ename']}: {output['evalue']}"]
        return cell, resources


def points(value) -> str:
    """Pontos em pt-BR, com até duas casas e sem zeros à toa: 17.0 → "17", 8.5 → "8,5"."""
    return br(round(float(value or 0), 2), "g")


def points_phrase(value) -> str:
    """Pontos com a palavra, no singular abaixo de 2 (como se lê): "1 ponto", "0,5 ponto", "4 pontos"."""
    return f"{points(value)} {'ponto' if abs(float(value or 0)) < 2 else 'pontos'}"


class _MemoryBytecodeCache(BytecodeCache):
    """Os modelos Jinja compilados, guardados na memória do processo (chave: nome + conteúdo)."""

    def __init__(self):
        self.compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket):
        code = self.compiled.get(bucket.key + bucket.checksum)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket):
        self.compiled[bucket.key + bucket.checksum] = bucket.bytecode_to_string()


_COMPILED = _MemoryBytecodeCache()


class FeedbackHTMLExporter(HTMLExporter):
    """O ``HTMLExporter`` das devolutivas, com os modelos compilados uma vez por processo.

    A API do nbgrader cria um exportador novo a cada ``generate_feedback`` e o Jinja recompila os
    modelos (≈0,4 s por aluno); com o cache de bytecode do próprio Jinja, só a primeira devolutiva
    de cada worker compila. O HTML sai idêntico (um teste compara).
    """

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = _COMPILED
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        # O arquivo da devolutiva nunca passa de SubmissionLimits.feedback_bytes (limits.py).
        from .limits import SubmissionLimits, bound_feedback_html

        render = lambda n, r: super(FeedbackHTMLExporter, self).from_notebook_node(n, r, **kw)  # noqa: E731
        return bound_feedback_html(render, nb, resources, SubmissionLimits(parent=self))


def feedback_template_dir() -> str:
    """A pasta com o modelo ``feedback`` em pt-BR (usada em ``nbgrader_config.py``)."""
    return str(Path(__file__).resolve().parent.parent / "templates")
