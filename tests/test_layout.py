"""O mapa do pacote é verdadeiro: a tabela capítulo → módulos, a lista de peças e os notebooks.

Um mantenedor acha qualquer coisa num passo: a docstring de ``transformer_course`` diz onde mora
cada módulo; ``transformer_course.course`` diz o mesmo em dados. Este teste falha quando um dos
dois mente (um módulo novo fora da tabela, um nome que não existe, um notebook que usa os modelos
de outro capítulo sem a tabela saber).
"""

from __future__ import annotations

import ast
import pkgutil
import re

import pytest
from conftest import ROOT

import transformer_course
from transformer_course.course import CHAPTERS, MODELS

DOC = transformer_course.__doc__
PACKAGE = ROOT / "transformer_course"


def _parts() -> set[str]:
    names = {m.name for m in pkgutil.iter_modules([str(PACKAGE)])}
    names |= {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    return names - {"__pycache__"}


def test_every_part_of_the_package_is_in_the_docstring():
    for name in _parts():
        assert f"``{name}``" in DOC, f"`{name}` não aparece no mapa da docstring de transformer_course"


def test_every_name_in_the_docstring_exists():
    for name in set(re.findall(r"``(\w+)``", DOC)):
        if name in {"checks", "plots", "widgets", "experiments"} or name in _parts():
            continue
        pytest.fail(f"a docstring cita `{name}`, que não é um módulo do pacote")


def test_table_rows_are_the_course_map():
    rows = dict(re.findall(r"^(\d\d_\w+)\s+(.+)$", DOC, re.M))
    assert list(rows) == list(CHAPTERS) == list(MODELS)
    for chapter, modules in MODELS.items():
        assert re.findall(r"``(\w+)``", rows[chapter]) == list(modules), chapter


def test_every_chapter_has_its_modules():
    for chapter in CHAPTERS:
        nn = chapter[:2]
        for folder in ("checks", "plots", "widgets"):
            assert (PACKAGE / folder / f"ch{nn}.py").exists(), f"falta {folder}/ch{nn}.py"
        assert (ROOT / "notebooks" / f"{chapter}.py").exists()


# Prévias de propósito: o capítulo 1 usa a atenção do capítulo 2 como caixa-preta (para mostrar
# que ela ignora a ordem), e o capítulo 4 usa as máscaras do capítulo 5 no decodificador.
PREVIEWS = {"01_embeddings_posicao": {"attention"}, "04_transformer": {"masks"}}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_notebook_uses_the_models_of_its_chapter_or_earlier(chapter):
    """Um notebook importa os modelos do seu capítulo e dos anteriores; de posteriores, só as prévias."""
    order = {module: i for i, modules in enumerate(MODELS.values()) for module in modules}
    here = list(CHAPTERS).index(chapter)
    tree = ast.parse((ROOT / "notebooks" / f"{chapter}.py").read_text(encoding="utf-8"))
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("transformer_course."):
            used.add(node.module.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.module == "transformer_course":
            used |= {alias.name for alias in node.names}
    models = {m for m in used if m in order}
    assert set(MODELS[chapter]) & models, f"{chapter} não importa nenhum dos seus modelos {MODELS[chapter]}"
    later = sorted(m for m in models if order[m] > here and m not in PREVIEWS.get(chapter, ()))
    assert not later, f"{chapter} importa modelos de capítulos posteriores: {later}"


def test_no_file_cites_documents_outside_the_repository():
    tracked = [
        p
        for p in ROOT.rglob("*")
        if p.is_file()
        and p.suffix in {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".ipynb"}
        and not any(
            part.startswith(".") or part in {"build", "node_modules"} for part in p.relative_to(ROOT).parts
        )
    ]
    needles = ("COURSE" + "_SPEC", "../" + "shared", "NBGRADER" + "_NOTES")
    for path in tracked:
        text = path.read_text(encoding="utf-8", errors="ignore")
        for needle in needles:
            assert needle not in text, f"{path.relative_to(ROOT)} cita {needle}, que não está no repositório"
