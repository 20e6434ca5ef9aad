"""Monta o livro do curso (``make book``): um site estático em pt-BR com Jupyter Book 1 (Sphinx).

Duas edições, do mesmo comando:

- ``aluno`` (padrão): os notebooks de ``release/`` (enunciado + esboço; o teste visível com a sua
  saída para o esboço). Nenhuma resposta, rubrica ou teste oculto.
- ``professor``: os mesmos notebooks e, logo abaixo de cada esboço, resposta de pergunta aberta e
  teste, blocos recolhidos com a solução de referência, a resposta-modelo com a rubrica e os testes
  ocultos (tirados de ``source/``).

Os capítulos vêm de ``release/`` e ``source/``, que ``make assignments`` gera de ``notebooks/`` (um
teste confere que estão em dia). O Jupyter Book roda num ambiente próprio (``.venv-book``); os
notebooks rodam no kernel do curso (o Python que executa este script), por um kernelspec
``python3`` temporário. A execução fica no cache (jupyter-cache) em ``build/book/.jupyter_cache``,
comum às duas edições: os blocos do professor são Markdown e não mudam a chave do cache.

Uso: python scripts/build_book.py [--edition aluno|professor] [--out PASTA]
O site fica em ``build/book/<edição>/_build/html/index.html``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import yaml

from transformer_course.course import CHAPTERS

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
BUILD = ROOT / "build" / "book"
BOOK_VENV = ROOT / ".venv-book"
MATHJAX = BOOK_VENV / "node_modules" / "mathjax" / "es5"
EDITIONS = ("aluno", "professor")

# Roda no início do kernel do livro (``--IPKernelApp.exec_files``), fora dos notebooks (o .ipynb que o
# site oferece para baixar fica igual ao do aluno): na página estática, cada exploração (controles +
# ipywidgets.Image com o PNG, ou interactive_output) vira a figura nos valores iniciais e, no lugar
# dos controles, um aviso de como explorá-la ao vivo. O estado embutido dos widgets exigiria a
# biblioteca de widgets no navegador (de um CDN) e um PNG por combinação de controles.
STATIC_WIDGETS = '''\
import ipywidgets as _widgets
from IPython.display import Image as _Image
from IPython.display import Markdown as _Markdown
from IPython.display import display as _display


def _book_parts(widget):
    """As imagens PNG e os controles (descrição = valor) de uma exploração, em ordem."""
    children = getattr(widget, "children", ())
    if children:
        return [part for child in children for part in _book_parts(child)]
    if isinstance(widget, _widgets.Image) and widget.value:
        return [("png", bytes(widget.value))]
    if isinstance(widget, _widgets.Output):
        return [("output", widget)]
    if getattr(widget, "description", "") and hasattr(widget, "value"):
        return [("control", f"{widget.description.rstrip(':')} = {widget.value!r}")]
    return []


def _book_static_widget(self):
    parts = _book_parts(self)
    for kind, value in parts:
        if kind == "png":
            _display(_Image(data=value, format="png"))
        elif kind == "output":
            for output in value.outputs:
                _display(output.get("data", {}), raw=True)
    controls = "; ".join(value for kind, value in parts if kind == "control")
    _display(
        _Markdown(
            "**Exploração interativa.** Nesta página estática, a figura acima mostra os valores iniciais"
            + (f" ({controls})" if controls else "")
            + ". Para mexer nos controles, abra o capítulo num Jupyter: `make lab` no seu computador,"
            " ou os links *abrir no Binder* / *abrir no Colab* no topo da página."
        )
    )


def _book_static_output(function, controls):
    """Como interactive_output, mas a figura dos valores iniciais vai direto para a saída da célula."""
    function(**{name: control.value for name, control in controls.items()})
    return _widgets.Output()


_widgets.interactive_output = _book_static_output
_widgets.Widget._ipython_display_ = _book_static_widget
'''


STARTUP_HASH = hashlib.sha1(STATIC_WIDGETS.encode()).hexdigest()[:10]


def chapters() -> list[str]:
    return list(CHAPTERS)


def load_config() -> dict:
    return yaml.safe_load((BOOK / "_config.yml").read_text())


def launch_links(config: dict, name: str) -> dict[str, str]:
    """Os links de um capítulo: o notebook do aluno (``release/``) no Binder e no Colab."""
    repo = config["repository"]
    path = urlparse(repo["url"]).path.strip("/")  # dono/repositório
    branch = repo.get("branch", "main")
    notebook = f"release/{name}/{name}.ipynb"
    binder = config["launch_buttons"]["binderhub_url"].rstrip("/")
    colab = config["launch_buttons"]["colab_url"].rstrip("/")
    return {
        "binder": f"{binder}/v2/gh/{path}/{branch}?urlpath=lab/tree/{notebook}",
        "colab": f"{colab}/github/{path}/blob/{branch}/{notebook}",
        "repo": repo["url"].rstrip("/"),
    }


def launch_cell(config: dict, name: str) -> nbformat.NotebookNode:
    links = launch_links(config, name)
    text = f"""\
:::{{admonition}} Fazer os exercícios e mexer nos controles
:class: tip
Esta página é o capítulo já executado, para ler. Para rodar o código, resolver os exercícios e usar
as explorações: [abrir no Binder]({links["binder"]}) · [abrir no Colab]({links["colab"]}) · no seu
computador, `make lab` (o caminho recomendado; veja o README do repositório).
No Colab, rode antes numa célula `!pip install git+{links["repo"]}` (o pacote do curso).
:::"""
    cell = nbformat.v4.new_markdown_cell(text)
    cell.id = "book-launch"
    return cell


def dropdown(title: str, body: str, css: str = "dropdown") -> nbformat.NotebookNode:
    fence = ":" * max(4, 1 + max((len(m) for m in re.findall(r"^:{3,}", body, re.M)), default=0))
    text = f"{fence}{{admonition}} {title}\n:class: {css}\n{body.strip()}\n{fence}"
    return nbformat.v4.new_markdown_cell(text)


def code_block(code: str) -> str:
    ticks = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`{3,}", code)), default=0))
    return f"{ticks}python\n{code.strip()}\n{ticks}"


def strip_markers(text: str, *markers: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.strip() not in markers)


def professor_cells(release_cell, source_cell) -> list[nbformat.NotebookNode]:
    """Os blocos recolhidos do professor para uma célula do nbgrader (vazio se nada a mostrar)."""
    meta = source_cell.metadata.get("nbgrader", {})
    if source_cell.source == release_cell.source:
        return []
    if meta.get("solution") and source_cell.cell_type == "code":
        code = strip_markers(source_cell.source, "### BEGIN SOLUTION", "### END SOLUTION")
        return [dropdown("Solução de referência (professor)", code_block(code))]
    if meta.get("solution"):
        body = strip_markers(source_cell.source, "### BEGIN SOLUTION", "### END SOLUTION")
        return [dropdown("Resposta-modelo e rubrica (professor)", body)]
    if meta.get("grade"):
        code = strip_markers(source_cell.source, "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
        return [dropdown("Testes ocultos (professor)", code_block(code))]
    return []


def chapter_notebook(name: str, edition: str, config: dict) -> nbformat.NotebookNode:
    nb = nbformat.read(ROOT / "release" / name / f"{name}.ipynb", as_version=4)
    source = nbformat.read(ROOT / "source" / name / f"{name}.ipynb", as_version=4)
    by_id = {cell.id: cell for cell in source.cells}
    cells = [nb.cells[0], launch_cell(config, name)]
    for cell in nb.cells[1:]:
        if cell.cell_type == "code":  # marcas do nbval não interessam a quem lê
            cell.source = "\n".join(
                l for l in cell.source.split("\n") if l.strip() != "# NBVAL_IGNORE_OUTPUT"
            )
        cells.append(cell)
        if edition == "professor" and cell.metadata.get("nbgrader") and cell.id in by_id:
            for k, extra in enumerate(professor_cells(cell, by_id[cell.id])):
                extra.id = f"book-professor-{cell.id}-{k}"
                cells.append(extra)
    nb.cells = cells
    # O código de início do kernel entra na chave do cache (jupyter-cache usa o kernelspec do notebook).
    nb.metadata["kernelspec"]["display_name"] = f"Python 3 (ipykernel) - livro {STARTUP_HASH}"
    nbformat.validate(nb)
    return nb


def kernelspec(folder: Path) -> Path:
    """Kernelspec ``python3`` que roda no Python do curso (precede o do .venv-book no JUPYTER_PATH),
    com as explorações estáticas carregadas no início."""
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    startup = folder / "static_widgets.py"
    startup.write_text(STATIC_WIDGETS)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [
                    sys.executable,
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    "{connection_file}",
                    f"--IPKernelApp.exec_files={startup}",
                ],
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
                "metadata": {"debugger": False},
            },
            indent=1,
        )
    )
    return folder


def copy_mathjax(static: Path) -> None:
    if not (MATHJAX / "tex-mml-chtml.js").exists():
        sys.exit(
            f"falta o MathJax em {MATHJAX}: rode `make book` (instala com "
            "`npm install --prefix .venv-book mathjax@3`; precisa do Node.js/npm)."
        )
    # Só o que a página usa: o componente tex-mml-chtml, as extensões do TeX que ele carrega sob
    # demanda, as fontes da saída CHTML e o menu/acessibilidade (sem o motor de fala, grande).
    shutil.copytree(
        MATHJAX,
        static / "mathjax",
        ignore=shutil.ignore_patterns("sre", "svg", "*-svg.js", "*-svg-full.js", "node-main.js"),
        dirs_exist_ok=True,
    )


def stage(edition: str, src: Path) -> dict:
    """Pasta de montagem: _config.yml, _toc.yml, páginas e capítulos da edição."""
    config = load_config()
    names = chapters()
    if src.exists():
        # Arquivos iguais ficam como estão (o Sphinx só relê o que mudou); capítulos que saíram, não.
        for child in src.iterdir():
            if child.is_dir() and child.name not in {"_static", *names}:
                shutil.rmtree(child)
    src.mkdir(parents=True, exist_ok=True)

    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)

    staged = json.loads(json.dumps(config))
    staged["execute"]["cache"] = str(BUILD / ".jupyter_cache")
    if edition == "professor":
        staged["title"] = f"{config['title']} (edição do professor)"
    write(src / "_config.yml", yaml.safe_dump(staged, allow_unicode=True, sort_keys=False))
    toc = {
        "format": "jb-book",
        "root": "intro",
        "parts": [
            {"caption": "Capítulos", "numbered": False, "chapters": [{"file": f"{n}/{n}"} for n in names]},
            {"caption": "Referência", "chapters": [{"file": "legenda_formas"}, {"file": "glossario"}]},
        ],
    }
    write(src / "_toc.yml", yaml.safe_dump(toc, allow_unicode=True, sort_keys=False))
    intro = (BOOK / "intro.md").read_text()
    if edition == "professor":
        intro = intro.replace(
            "\n## Como estudar",
            "\n:::{important}\nEdição do professor: abaixo de cada exercício há blocos recolhidos com a "
            "solução de referência, a resposta-modelo com a rubrica e os testes ocultos. Não a publique "
            "para a turma.\n:::\n\n## Como estudar",
            1,
        )
    write(src / "intro.md", intro)
    write(src / "legenda_formas.md", (BOOK / "legenda_formas.md").read_text())
    write(src / "glossario.md", (ROOT / "GLOSSARIO.md").read_text())
    for name in names:
        nb = chapter_notebook(name, edition, config)
        write(src / name / f"{name}.ipynb", nbformat.writes(nb) + "\n")
    if not (src / "_static" / "mathjax" / "tex-mml-chtml.js").exists():
        copy_mathjax(src / "_static")
    return config


def jupyter_book() -> Path:
    exe = BOOK_VENV / "bin" / "jupyter-book"
    if not exe.exists():
        sys.exit(f"falta o Jupyter Book em {BOOK_VENV}: rode `make book` (cria o ambiente do livro).")
    return exe


def build(edition: str = "aluno", out: Path | None = None) -> Path:
    """Monta a edição; devolve a pasta do site (``.../_build/html``)."""
    if edition not in EDITIONS:
        sys.exit(f"edição desconhecida: {edition!r}; use uma de {EDITIONS}")
    out = out or BUILD / edition
    src = out / "src"
    start = time.monotonic()
    stage(edition, src)
    env = {
        **os.environ,
        "JUPYTER_PATH": os.pathsep.join(
            [str(kernelspec(BUILD / "jupyter")), *filter(None, [os.environ.get("JUPYTER_PATH")])]
        ),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    # Sem -W: o tema avisa de coisas inofensivas; os erros de verdade (célula que não roda sem ser
    # esperado, link quebrado) são conferidos pelos testes em tests/test_book.py.
    cmd = [str(jupyter_book()), "build", str(src), "--path-output", str(out), "--builder", "html"]
    result = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    log = out / "build.log"
    log.write_text(result.stdout + "\n" + result.stderr)
    html = out / "_build" / "html"
    if result.returncode != 0 or not (html / "index.html").exists():
        sys.exit(
            f"jupyter-book build falhou (log em {log}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    print(f"livro ({edition}) em {html / 'index.html'} ({time.monotonic() - start:.0f} s)")
    return html


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edition", default=os.environ.get("EDITION") or "aluno", choices=EDITIONS)
    parser.add_argument("--out", type=Path, default=None, help="pasta de saída (padrão: build/book/<edição>)")
    args = parser.parse_args()
    build(args.edition, args.out)


if __name__ == "__main__":
    main()
