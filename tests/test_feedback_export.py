"""O exportador HTML das devolutivas: os modelos compilados uma vez por processo, o HTML igual."""

from __future__ import annotations

from pathlib import Path

import jinja2
import nbformat
import nbgrader
from conftest import ROOT
from nbconvert.exporters import HTMLExporter

from transformer_course.instructor.cluster import load_course_config
from transformer_course.instructor.preprocessors import FeedbackHTMLExporter


def _export(exporter_class, monkeypatch) -> tuple[str, int]:
    """O HTML de uma devolutiva pequena e quantos modelos o Jinja compilou para fazê-la."""
    compiled = []
    original = jinja2.Environment.compile

    def counting(self, source, name=None, filename=None, raw=False, defer_init=False):
        compiled.append(name)
        return original(self, source, name, filename, raw, defer_init)

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    config = load_course_config(ROOT)
    config.HTMLExporter.template_name = "feedback"
    # O que o GenerateFeedback do nbgrader acrescenta: a pasta do CSS do Bootstrap.
    static = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "static"
    config.HTMLExporter.extra_template_paths = [str(static / "node_modules" / "bootstrap" / "dist" / "css")]
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Capítulo\n\nTexto com $x^2$.", id="texto"),
            nbformat.v4.new_code_cell(
                "print('oi')", outputs=[nbformat.v4.new_output("stream", text="oi\n")], id="codigo"
            ),
        ]
    )
    resources = {
        "nbgrader": {
            "notebook": "02_atencao",
            "score": 3.0,
            "max_score": 7.0,
            "late_penalty": 0,
            "pending_points": 2,
        }
    }
    html, _ = exporter_class(config=config).from_notebook_node(nb, resources=resources)
    monkeypatch.setattr(jinja2.Environment, "compile", original)
    return html, len(compiled)


def test_feedback_templates_compile_once_per_process_and_render_the_same(monkeypatch):
    plain, plain_compiled = _export(HTMLExporter, monkeypatch)
    first, _ = _export(FeedbackHTMLExporter, monkeypatch)  # pode compilar (primeira do processo)
    again, again_compiled = _export(FeedbackHTMLExporter, monkeypatch)
    assert plain_compiled > 0
    assert again_compiled == 0, "a segunda devolutiva do processo recompilou os modelos"
    assert plain == first == again
    assert "Nota" in again and "a corrigir" in again
