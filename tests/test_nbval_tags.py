"""As marcas do nbval ficam nos metadados das células (tags), não no código que o aluno lê.

Um comentário ``# NBVAL_IGNORE_OUTPUT`` na primeira célula de um capítulo é encanamento de CI no
meio da lição. A tag ``nbval-ignore-output`` (em jupytext: ``# %% tags=["nbval-ignore-output"]``)
faz o mesmo e não aparece no código. Aqui: nenhum notebook distribuído tem o comentário, as células
que mostram versões e widgets têm a tag, e o nbval desta instalação obedece à tag de verdade.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import nbformat
import pytest
from conftest import CHAPTERS, ROOT

NBVAL_COMMENT = re.compile(r"^\s*#\s*(NBVAL_[A-Z_]+|PYTEST_VALIDATE_[A-Z_]+)\s*$", re.MULTILINE)
TAG = "nbval-ignore-output"


def _code_cells(stage: str, chapter: str):
    nb = nbformat.read(ROOT / stage / chapter / f"{chapter}.ipynb", as_version=4)
    return [c for c in nb.cells if c.cell_type == "code"]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_release_notebook_has_no_nbval_comment(chapter):
    found = [m.group(1) for c in _code_cells("release", chapter) for m in NBVAL_COMMENT.finditer(c.source)]
    assert not found, (
        f"release/{chapter}: comentários do nbval no código do aluno: {found}; use a tag {TAG!r}"
    )


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_version_and_widget_cells_carry_the_tag(chapter):
    """As saídas que mudam de máquina para máquina (versões, widgets) não são comparadas pelo nbval."""
    varying = [
        c
        for c in _code_cells("release", chapter)
        if "torch.__version__" in c.source or re.search(r"\b\w+_widget\(", c.source)
    ]
    assert varying, f"{chapter}: nenhuma célula de versão ou de widget encontrada"
    untagged = [c.source.splitlines()[0] for c in varying if TAG not in c.metadata.get("tags", [])]
    assert not untagged, f"{chapter}: células sem a tag {TAG!r}: {untagged}"


def _nbval(tmp_path, tags: list[str]) -> subprocess.CompletedProcess:
    """Roda o nbval em modo estrito num notebook cuja saída gravada nunca se repete."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("import uuid\nprint(uuid.uuid4())", metadata={"tags": tags})
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="saída de outra execução\n")]
    cell.execution_count = 1
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / f"marca_{'_'.join(tags) or 'nenhuma'}.ipynb"
    nbformat.write(nb, path)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--nbval",
         "--nbval-current-env", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip


def test_nbval_honours_the_ignore_output_tag(tmp_path):
    """Sem a tag, o nbval estrito acusa a saída diferente; com ela, a célula passa."""
    untagged = _nbval(tmp_path, [])
    assert untagged.returncode != 0, untagged.stdout[-2000:]
    tagged = _nbval(tmp_path, [TAG])
    assert tagged.returncode == 0, tagged.stdout[-2000:] + tagged.stderr[-2000:]
