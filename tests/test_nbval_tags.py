"""As marcas do nbval ficam nos metadados das células (``tags``), não no código que o aluno lê.

Antes, a primeira célula de código de cada capítulo começava com o comentário
``# NBVAL_IGNORE_OUTPUT``: encanamento da CI dentro da lição. No jupytext, a marca vai no cabeçalho
da célula (``# %% tags=["nbval-ignore-output"]``) e chega assim ao notebook do aluno.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbval.plugin import find_comment_markers, find_metadata_tags

ROOT = Path(__file__).resolve().parent.parent
# Os capítulos 5 a 7 já usam as tags; os de 1 a 4 entram nesta lista quando forem convertidos.
CONVERTED = ["05_mascaras", "06_treino_warmup", "07_familias"]


def test_nbval_reads_the_tag_like_the_comment():
    assert dict(find_metadata_tags({"tags": ["nbval-ignore-output"]})) == {"check": False}
    assert dict(find_comment_markers("# NBVAL_IGNORE_OUTPUT\nx = 1")) == {"check": False}


@pytest.mark.parametrize("chapter", CONVERTED)
@pytest.mark.parametrize("folder", ["release", "source"])
def test_no_nbval_comment_and_the_tags_survive(chapter, folder):
    nb = nbformat.read(ROOT / folder / chapter / f"{chapter}.ipynb", as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert not [cell.id for cell in code if "NBVAL" in cell.source]
    tagged = [cell for cell in code if "nbval-ignore-output" in cell.metadata.get("tags", [])]
    assert tagged and "%matplotlib inline" in tagged[0].source, "a célula de preparação perdeu a tag"
    assert any("_widget(" in cell.source for cell in tagged), "a célula do widget perdeu a tag"
