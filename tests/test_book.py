"""O livro do curso (``make book``): links de abertura, edição do aluno sem gabarito e o site num navegador.

Os testes lentos montam as duas edições uma vez por sessão, com ``scripts/build_book.py`` (o mesmo
código de ``make book``), em ``build/book/`` e com o cache de execução de lá: numa máquina nova os
capítulos rodam uma vez (edição do aluno; a do professor reaproveita o cache), depois só o que mudou.
Este teste é o passo da CI que monta a edição do aluno. Capturas de tela em ``artifacts/book/``.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, urljoin, urlparse

import nbformat
import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import build_book  # noqa: E402

SHOTS = ROOT / "artifacts" / "book"
CHAPTERS = build_book.chapters()
EXTERNAL = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["'](?:https?:)?//""", re.I)


# ---------------------------------------------------------------------- links de abertura (rápido)


def test_launch_links_come_from_the_configured_repository():
    config = build_book.load_config()
    config["repository"] = {"url": "https://github.com/fulana/curso-x/", "branch": "dev"}
    for name in CHAPTERS:
        notebook = f"release/{name}/{name}.ipynb"
        assert (ROOT / notebook).exists()
        links = build_book.launch_links(config, name)
        assert links["binder"] == f"https://mybinder.org/v2/gh/fulana/curso-x/dev?urlpath=lab/tree/{notebook}"
        assert (
            links["colab"] == f"https://colab.research.google.com/github/fulana/curso-x/blob/dev/{notebook}"
        )
        cell = build_book.launch_cell(config, name).source
        assert f"[abrir no Binder]({links['binder']})" in cell
        assert f"[abrir no Colab]({links['colab']})" in cell
        assert "make lab" in cell


def test_professor_blocks_hold_source_material_and_student_pages_do_not():
    name = CHAPTERS[0]
    config = build_book.load_config()
    student = build_book.chapter_notebook(name, "aluno", config)
    professor = build_book.chapter_notebook(name, "professor", config)
    extra = [c.source for c in professor.cells if c.id.startswith("book-professor-")]
    assert extra and all(":class: dropdown" in s for s in extra)
    assert not [c for c in student.cells if c.id.startswith("book-professor-")]
    # Mesmo código nas duas edições: uma execução (e um cache) serve às duas.
    code = [[c.source for c in nb.cells if c.cell_type == "code"] for nb in (student, professor)]
    assert code[0] == code[1]


# ---------------------------------------------------------------------- o que não pode vazar


def secret_fragments(name: str) -> list[str]:
    """Trechos de ``source/`` que o aluno não pode ver: código das soluções, respostas-modelo com
    rubrica e testes ocultos — cada linha (ou, no Markdown, cada trecho de texto corrido com 20+
    caracteres) que não aparece em nenhum notebook do aluno."""
    source = nbformat.read(ROOT / "source" / name / f"{name}.ipynb", as_version=4)
    public = public_text()
    found: list[str] = []
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        text = cell.source
        if meta.get("solution") and cell.cell_type == "code":
            parts = re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", text, re.S)
        elif meta.get("solution"):
            parts = [text.replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", "")]
        elif meta.get("grade"):
            parts = re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", text, re.S)
        else:
            continue
        for part in parts:
            for line in part.splitlines():
                if cell.cell_type == "markdown":
                    line = re.sub(r"^\s*(?:[-+>]|#+|\d+\.)\s+", "", line)  # marcador de lista/título
                    pieces = [p for p in re.split(r"[$*`\[\]()_|\\]", line) if re.search(r"\w", p)]
                else:
                    pieces = [line]
                for piece in pieces:
                    piece = normalize(piece)
                    if len(piece) >= (20 if cell.cell_type == "markdown" else 12) and piece not in public:
                        found.append(piece)
    return found


def public_text() -> str:
    """Todo o texto dos notebooks do aluno (o que um trecho comum, como ``with torch.no_grad():``,
    pode mostrar sem revelar nada)."""
    cells = [
        cell.source
        for name in CHAPTERS
        for cell in nbformat.read(ROOT / "release" / name / f"{name}.ipynb", as_version=4).cells
    ]
    # Também sem a marcação do Markdown, como os trechos de texto corrido.
    text = "\n".join(cells)
    return normalize(text) + "\n" + normalize(re.sub(r"[$*`\[\]()_|\\]", " ", text))


QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "…": "..."})


def normalize(text: str) -> str:
    """Espaços colapsados e aspas retas (o Sphinx troca "x" por “x” nas páginas)."""
    return " ".join(text.translate(QUOTES).split())


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)


def site_texts(site: Path) -> dict[str, str]:
    """Todo o texto do site: o HTML cru, o texto visível das páginas, o índice de busca e os
    notebooks copiados para ``_sources`` (com as fontes das células juntadas)."""
    texts = {}
    for path in sorted(site.rglob("*")):
        if path.is_dir() or "mathjax" in path.parts:
            continue
        rel = str(path.relative_to(site))
        if path.suffix == ".html":
            raw = path.read_text(errors="replace")
            parser = _Text()
            parser.feed(raw)
            texts[rel] = normalize(html.unescape(raw)) + "\n" + normalize("".join(parser.parts))
        elif path.suffix == ".ipynb":
            nb = json.loads(path.read_text())
            texts[rel] = normalize("\n".join("".join(c["source"]) for c in nb["cells"]))
        elif path.suffix in {".js", ".txt", ".md", ".json"}:
            texts[rel] = normalize(path.read_text(errors="replace"))
    return texts


def leaks(texts: dict[str, str], fragments: list[str]) -> list[tuple[str, str]]:
    return [(frag, rel) for frag in fragments for rel, text in texts.items() if frag in text]


# ---------------------------------------------------------------------- as duas edições montadas


@pytest.fixture(scope="session")
def books():
    """Monta as duas edições (o ambiente do livro primeiro, se faltar: ``make book-env``)."""
    if not (build_book.BOOK_VENV / ".instalado").exists():
        result = subprocess.run(["make", "-C", str(ROOT), "book-env"], capture_output=True, text=True)
        assert result.returncode == 0, f"make book-env falhou:\n{result.stdout}\n{result.stderr}"
    return {edition: build_book.build(edition) for edition in build_book.EDITIONS}


@pytest.mark.slow
def test_student_edition_has_no_solution_rubric_or_hidden_test(books):
    fragments = {name: secret_fragments(name) for name in CHAPTERS}
    assert all(fragments.values()), "um capítulo sem solução, rubrica ou teste oculto para procurar?"
    every = [f for frags in fragments.values() for f in frags]
    student, professor = site_texts(books["aluno"]), site_texts(books["professor"])
    assert not leaks(student, every), (
        f"a edição do aluno mostra material do professor: {leaks(student, every)[:5]}"
    )
    # A busca enxerga o que existe: na edição do professor, cada trecho está nas páginas HTML.
    joined = "\n".join(text for rel, text in professor.items() if rel.endswith(".html"))
    missing = [f for f in every if f not in joined]
    assert not missing, f"trechos de source/ que nem a edição do professor mostra: {missing[:5]}"


@pytest.mark.slow
def test_built_site_is_offline_and_complete(books):
    site = books["aluno"]
    pages = sorted(site.rglob("*.html"))
    external = {str(p.relative_to(site)): EXTERNAL.findall(p.read_text()) for p in pages}
    assert not {k: v for k, v in external.items() if v}, f"recursos de fora do site: {external}"
    assert (site / "_static" / "mathjax" / "tex-mml-chtml.js").exists()
    for name in CHAPTERS:
        page = (site / name / f"{name}.html").read_text()
        assert "abrir no Binder" in page and "abrir no Colab" in page
        links = build_book.launch_links(build_book.load_config(), name)
        # Os links deste capítulo (os do aviso e os do botão do tema) abrem o notebook do aluno.
        launch = re.findall(r'href="(https://(?:mybinder\.org|colab\.research\.google\.com)[^"]*)"', page)
        assert {html.unescape(h) for h in launch} == {links["binder"], links["colab"]}, launch
        # A exploração: a figura nos valores iniciais na saída da célula, logo antes do aviso.
        note = page.find("Exploração interativa")
        assert note > 0, f"{name}: a exploração não virou figura + aviso"
        cell_output = page[page.rfind('class="cell_input', 0, note) : note]
        assert "<img" in cell_output, f"{name}: exploração sem figura"
        assert '<img alt="_images/' in page or "_images/" in page, f"{name}: sem figuras"
        # Os esboços avisam "não implementado" (sem parar a execução); erros, se houver, só esse aviso.
        errors = re.findall(
            r'class="output traceback[^"]*"><div class="highlight"><pre>(.*?)</pre>', page, re.S
        )
        texts = [html.unescape(re.sub(r"<[^>]+>", "", e)) for e in errors]
        unexpected = [t for t in texts if "não implementado" not in t]
        assert not unexpected, f"{name}: erro inesperado na página: {unexpected[:2]}"
        assert "não implementado" in html.unescape(re.sub(r"<[^>]+>", "", page)), f"{name}: sem o aviso"


# ---------------------------------------------------------------------- no navegador


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("teste do livro no navegador pulado: falta o Chromium (`sudo apt-get install chromium`)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="falta o pacote playwright (make venv)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


class StaticServer:
    """``python -m http.server`` em 127.0.0.1, numa porta livre, servindo a pasta do site."""

    def __init__(self, folder: Path):
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}/"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "http.server",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--directory",
                str(folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(100):
            try:
                urllib.request.urlopen(self.base, timeout=2).close()
                return
            except (urllib.error.URLError, OSError):
                if self.process.poll() is not None:
                    raise RuntimeError("o http.server terminou ao iniciar") from None
                subprocess.run(["sleep", "0.1"])
        raise RuntimeError("o http.server não respondeu")

    def status(self, url: str) -> int:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def served(books):
    servers = {edition: StaticServer(site) for edition, site in books.items()}
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


PAGE_JS = """
() => ({
  lang: document.documentElement.lang,
  brokenImages: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src),
  images: document.images.length,
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  math: document.querySelectorAll('mjx-container').length,
  mathErrors: document.querySelectorAll('mjx-merror, .MathJax_Error').length,
})
"""


@pytest.mark.slow
def test_book_in_chromium(browser, served):
    SHOTS.mkdir(parents=True, exist_ok=True)
    server = served["aluno"]
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="pt-BR")
    outside: list[str] = []

    def only_local(route):
        if route.request.url.startswith(server.base):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_local)
    page = context.new_page()
    page.goto(server.base + "intro.html")
    page.screenshot(path=SHOTS / "inicio.png")
    nav = page.evaluate("() => [...document.querySelectorAll('nav.bd-links a[href]')].map(a => a.href)")
    targets = [urljoin(server.base, f"{name}/{name}.html") for name in CHAPTERS]
    assert set(targets) <= set(nav), f"a navegação não lista todos os capítulos: {nav}"
    for extra in ("legenda_formas.html", "glossario.html"):
        assert urljoin(server.base, extra) in nav

    checked: dict[str, int] = {}
    for url in nav:
        page.goto(url)
        page.wait_for_load_state("load")
        name = urlparse(url).path.strip("/").split("/")[-1].removesuffix(".html")
        state = page.evaluate(PAGE_JS)
        assert state["lang"].startswith("pt"), f"{url}: html lang={state['lang']!r}"
        if name in CHAPTERS:
            page.wait_for_function(
                "() => document.querySelectorAll('mjx-container').length > 0", timeout=30_000
            )
            state = page.evaluate(PAGE_JS)
            assert state["math"] > 0 and state["mathErrors"] == 0, f"{name}: matemática não renderizada"
            assert state["images"] > 0, f"{name}: sem figuras"
            page.screenshot(path=SHOTS / f"{name}.png")
            # A exploração do capítulo: a figura nos valores iniciais e o aviso logo abaixo.
            note = page.get_by_text("Exploração interativa.").first
            note.evaluate("n => n.scrollIntoView({block: 'end'})")
            page.screenshot(path=SHOTS / f"{name}_exploracao.png")
        assert not state["brokenImages"], f"{url}: imagens quebradas {state['brokenImages']}"
        for link in state["links"]:
            target = link.split("#")[0]
            if target.startswith(server.base) and target not in checked:
                checked[target] = server.status(target)
    broken = {k: v for k, v in checked.items() if v != 200}
    assert not broken, f"links internos quebrados: {broken}"
    assert len(checked) > len(CHAPTERS)

    page.goto(server.base + "search.html?q=" + quote("atenção"))
    results = page.locator("#search-results ul.search li")
    results.first.wait_for(timeout=30_000)
    assert results.count() > 0
    hits = page.evaluate(
        "() => [...document.querySelectorAll('#search-results ul.search li a')].map(a => a.href)"
    )
    assert any("02_atencao" in h for h in hits), f"a busca por 'atenção' não achou o capítulo 2: {hits[:5]}"
    page.screenshot(path=SHOTS / "busca_atencao.png")

    phone = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2, locale="pt-BR")
    phone.route("**/*", only_local)
    mobile = phone.new_page()
    mobile.goto(urljoin(server.base, f"{CHAPTERS[1]}/{CHAPTERS[1]}.html"))
    mobile.wait_for_function("() => document.querySelectorAll('mjx-container').length > 0", timeout=30_000)
    mobile.screenshot(path=SHOTS / "celular.png")
    phone.close()
    context.close()
    assert not outside, f"o site pediu recursos de fora: {sorted(set(outside))[:5]}"


@pytest.mark.slow
def test_professor_blocks_are_collapsed_until_clicked(browser, served):
    server = served["professor"]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    name = next(n for n in CHAPTERS if "atencao" in n)
    page.goto(urljoin(server.base, f"{name}/{name}.html"))
    block = page.locator("div.admonition.dropdown", has_text="Solução de referência").first
    block.wait_for()
    body = block.locator("div.highlight-python").first
    assert not body.is_visible(), "a solução deveria começar recolhida"
    block.locator("button.toggle-button").first.click()
    body.wait_for(state="visible", timeout=5000)
    block.scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "professor_solucao.png")
    page.close()
