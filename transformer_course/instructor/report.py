"""O relatório da turma: o que a classe acertou e errou, exercício por exercício.

Cada célula de teste corrigida guarda o veredito do juiz nos metadados
(``transformer_course.verdict``: status, pontos e o diagnóstico como dados, com um id estável).
Este módulo lê os notebooks de ``grading/autograded/`` e escreve, ao lado de ``notas.csv``:

- ``diagnosticos.csv`` — uma linha por aluno × célula de teste (status, pontos, tipo de falha,
  etapa, erro conhecido, causa, id do diagnóstico);
- ``relatorio_da_turma.html`` — para cada capítulo e exercício: a fração da turma que passa em
  cada teste (figura), os diagnósticos mais frequentes com a contagem e quem, e os alunos cuja
  falha não recebeu diagnóstico (o lugar de procurar um erro que ninguém previu).

O HTML é estático e inerte: sem scripts, figuras embutidas em PNG, todo texto escapado (nomes de
alunos e mensagens vêm de entregas) e uma Content-Security-Policy que não deixa nada carregar.
"""

from __future__ import annotations

import base64
import csv
import html
import io
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Row", "collect", "write_class_report"]

STATUS_LABEL = {
    "passou": "passou",
    "falhou": "falhou",
    "nao_implementado": "não implementado",
    "nao_rodou": "não rodou",
}
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


@dataclass
class Row:
    """Uma célula de teste de uma entrega, como o juiz a decidiu."""

    student: str
    chapter: str
    exercise: str
    grade_id: str
    hidden: bool
    status: str
    points: float
    max_points: float
    kind: str = ""
    where: str = ""
    mistake: str = ""
    cause: str = ""
    diagnosis_id: str = ""

    @property
    def diagnosed(self) -> bool:
        """A falha recebeu um diagnóstico (um erro conhecido ou uma causa), além de "valores diferentes"?"""
        return bool(self.mistake or self.cause) or self.status in ("nao_implementado", "nao_rodou")


def collect(course_root: str | Path) -> list[Row]:
    """Os vereditos de todas as entregas corrigidas em ``grading/autograded/``."""
    import nbformat

    rows = []
    autograded = Path(course_root) / "grading" / "autograded"
    for path in sorted(autograded.glob("*/*/*.ipynb")):
        student, chapter = path.parent.parent.name, path.parent.name
        if path.stem != chapter:
            continue
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001 - notebook corrigido ilegível: fica fora do relatório
            continue
        for cell in nb.cells:
            verdict = cell.get("metadata", {}).get("transformer_course", {}).get("verdict")
            if not isinstance(verdict, dict):
                continue
            diag = verdict.get("diagnosis") or {}
            rows.append(
                Row(
                    student=student,
                    chapter=chapter,
                    exercise=str(verdict.get("exercise", "")),
                    grade_id=str(verdict.get("grade_id", "")),
                    hidden=bool(verdict.get("hidden")),
                    status=str(verdict.get("status", "")),
                    points=float(verdict.get("points") or 0),
                    max_points=float(verdict.get("max_points") or 0),
                    kind=str(diag.get("kind") or ""),
                    where=str(diag.get("where") or ""),
                    mistake=str(diag.get("mistake") or ""),
                    cause=str(diag.get("cause") or ""),
                    diagnosis_id=str(diag.get("id") or ""),
                )
            )
    return rows


def _write_csv(rows: list[Row], path: Path) -> None:
    fields = ["aluno", "capitulo", "exercicio", "celula", "oculto", "status", "pontos", "maximo",
              "tipo", "etapa", "erro_conhecido", "causa", "diagnostico_id"]  # fmt: skip
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(fields)
        for r in rows:
            row = [r.student, r.chapter, r.exercise, r.grade_id, int(r.hidden), r.status, r.points]
            writer.writerow([*row, r.max_points, r.kind, r.where, r.mistake, r.cause, r.diagnosis_id])


def _figure(chapter: str, rows: list[Row]) -> str:
    """A fração da turma em cada status, por célula de teste (barras empilhadas), em PNG base64."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    from ..numbers import br_formatter

    tests = []
    for r in rows:
        label = f"{r.exercise} ({'oculto' if r.hidden else 'visível'})"
        if label not in tests:
            tests.append(label)
    order = list(STATUS_LABEL)
    counts = {t: Counter() for t in tests}
    for r in rows:
        counts[f"{r.exercise} ({'oculto' if r.hidden else 'visível'})"][r.status] += 1
    colors = {"passou": "#029e73", "falhou": "#d55e00", "nao_implementado": "#949494", "nao_rodou": "#ece133"}
    fig = Figure(figsize=(8, 0.45 * len(tests) + 1.4), layout="constrained")
    ax = fig.add_subplot()
    left = [0.0] * len(tests)
    for status in order:
        share = [counts[t][status] / max(sum(counts[t].values()), 1) for t in tests]
        ax.barh(tests, share, left=left, color=colors[status], label=STATUS_LABEL[status])
        left = [a + b for a, b in zip(left, share)]
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(br_formatter(".0%"))
    ax.set_xlabel("fração da turma")
    ax.set_title(f"{chapter}: resultado de cada teste")
    fig.legend(loc="outside lower center", fontsize=8, ncols=4, frameon=False)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _pct(x: float) -> str:
    from ..numbers import br_percent

    return br_percent(x, 0)


def write_class_report(course_root: str | Path) -> tuple[Path, Path] | None:
    """Escreve ``grading/relatorio_da_turma.html`` e ``grading/diagnosticos.csv``; ``None`` sem vereditos."""
    root = Path(course_root)
    rows = collect(root)
    if not rows:
        return None
    grading = root / "grading"
    csv_path, html_path = grading / "diagnosticos.csv", grading / "relatorio_da_turma.html"
    _write_csv(rows, csv_path)
    e = html.escape
    parts = [
        "<!DOCTYPE html><html lang='pt-BR'><head><meta charset='utf-8'>",
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">",
        "<title>Relatório da turma</title><style>body{font-family:sans-serif;max-width:60em;margin:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;vertical-align:top}"
        "th{background:#eee}.n{text-align:right}</style></head><body>",
        "<h1>Relatório da turma</h1>",
        f"<p>{len({r.student for r in rows})} alunos, {len(rows)} células de teste corrigidas. "
        "Os números vêm dos vereditos do juiz (<code>diagnosticos.csv</code>, ao lado).</p>",
    ]
    by_chapter: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_chapter[r.chapter].append(r)
    for chapter in sorted(by_chapter):
        chapter_rows = by_chapter[chapter]
        parts.append(f"<h2>{e(chapter)}</h2>")
        parts.append(f"<img alt='resultado de cada teste de {e(chapter)}' src='data:image/png;base64,"
                     f"{_figure(chapter, chapter_rows)}'>")  # fmt: skip
        exercises: dict[str, list[Row]] = defaultdict(list)
        for r in chapter_rows:
            exercises[r.exercise].append(r)
        for exercise, ex_rows in exercises.items():
            parts.append(f"<h3><code>{e(exercise)}</code></h3><table><tr><th>teste</th><th>passam</th></tr>")
            tests: dict[tuple, list[Row]] = defaultdict(list)
            for r in ex_rows:
                tests[(r.grade_id, r.hidden)].append(r)
            for (grade_id, hidden), t_rows in tests.items():
                share = sum(r.status == "passou" for r in t_rows) / len(t_rows)
                kind = "oculto" if hidden else "visível"
                n_ok = sum(r.status == "passou" for r in t_rows)
                parts.append(f"<tr><td>{e(grade_id)} ({kind})</td><td class='n'>{_pct(share)} "
                             f"({n_ok} de {len(t_rows)})</td></tr>")  # fmt: skip
            parts.append("</table>")
            failed = [r for r in ex_rows if r.status != "passou"]
            students = defaultdict(set)
            for r in failed:
                if r.diagnosed:
                    students[r.diagnosis_id or r.status].add(r.student)
            if students:
                parts.append("<p>Diagnósticos mais frequentes:</p><table><tr><th>diagnóstico</th>"
                             "<th>alunos</th><th>quem</th></tr>")  # fmt: skip
                for key, who in sorted(students.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:8]:
                    example = next(r for r in failed if (r.diagnosis_id or r.status) == key)
                    text = example.cause or STATUS_LABEL.get(example.status, example.status)
                    names = e(", ".join(sorted(who)))
                    parts.append(f"<tr><td>{e(text)}<br><small><code>{e(key)}</code></small></td>"
                                 f"<td class='n'>{len(who)}</td><td>{names}</td></tr>")  # fmt: skip
                parts.append("</table>")
            undiagnosed = sorted({r.student for r in failed if not r.diagnosed})
            if undiagnosed:
                parts.append(f"<p><strong>Falharam sem diagnóstico</strong> (leia estas entregas): "
                             f"{e(', '.join(undiagnosed))}.</p>")  # fmt: skip
    parts.append("</body></html>")
    html_path.write_text("\n".join(parts), encoding="utf-8")
    return html_path, csv_path
