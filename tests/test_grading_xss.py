"""O conteúdo de uma entrega hostil fica inerte no Formgrader e na devolutiva (issue 30, item 1).

Primeiro, o sanitizador (``transformer_course/instructor/sanitize.py``) e a política do Formgrader
(``formgrader_csp.py``) peça por peça, sem navegador. Depois, de ponta a ponta: numa cópia do curso,
uma entrega do capítulo 02_atencao com uma resposta escrita ``<img src=x onerror=...>``, ``<svg
onload>``, ``<script>``, um link ``javascript:``, iframes, saídas ``text/html`` com ``<script>``,
``application/javascript``, SVG com script, Markdown com ``onerror``, uma célula raw com
``<script>`` e uma célula com um anexo de 64 kB citado 4.000 vezes. Ela é corrigida pelo
``nbgrader autograde`` e pelo ``generate_feedback`` de verdade e aberta no Chromium:

(a) no Formgrader de verdade (um Jupyter Server com as extensões do professor, como
    ``scripts/configure_lab.py --professor`` as liga, e login por token), e
(b) no arquivo HTML da devolutiva.

Em cada página, cada payload tentaria marcar ``window.__xss_*`` (ou o título) e pedir um endereço
de fora; todos os pedidos passam por ``page.route``. Nenhum script roda, nenhum pedido sai para
fora do próprio servidor (ou do próprio arquivo), e o que é legítimo continua lá: o texto da
resposta, a figura PNG, e o Formgrader funciona (lista as entregas, mostra as notas, grava a nota
que o professor digita).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zlib

import nbformat
import pytest
from conftest import BIN, ROOT, copy_course, nbgrader

from transformer_course.instructor import formgrader_csp
from transformer_course.instructor.sanitize import (
    MAX_ATTACHMENT_INLINE_BYTES,
    SanitizeNotebook,
    clean_html,
    markdown2html_inert,
)

CHAPTER = "02_atencao"
STUDENT = "hacker"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
]
# Um endereço de fora que os payloads tentam pedir (nada escuta aqui; o teste só observa o pedido).
OUTSIDE = "http://127.0.0.1:9"
ANSWER_TEXT = "O fator 1/raiz(d_k) mantém a variância dos produtos escalares perto de 1"
ORDER_TEXT = "A atenção é equivariante a permutações das posições"
FLAGS = [
    "__xss_md",
    "__xss_link",
    "__xss_svg",
    "__xss_script",
    "__xss_html",
    "__xss_html_img",
    "__xss_js",
    "__xss_svgout",
    "__xss_svgscript",
    "__xss_mdout",
    "__xss_iframe",
    "__xss_srcdoc",
    "__xss_raw",
    "__xss_file",
    "__xss_file_img",
]
# Um arquivo a mais na entrega, que o Formgrader serve em /formgrader/submissions/<id>/pagina.html.
EXTRA_PAGE = (
    '<p>arquivo a mais</p><script>window.__xss_file=1</script><img src=x onerror="window.__xss_file_img=1">'
)


def _png(size: int = 8, rgb=(200, 30, 30)) -> bytes:
    """Um PNG de verdade (quadrado de uma cor), sem depender de bibliotecas de imagem."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\x00" + bytes(rgb) * size
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(row * size))
        + chunk(b"IEND", b"")
    )


PNG_B64 = base64.b64encode(_png()).decode()


# ---------------------------------------------------------------------- o sanitizador, peça por peça


@pytest.mark.parametrize(
    ("html", "kept", "gone"),
    [
        ('texto <img src=x onerror="window.__xss=1">', "texto", "onerror"),
        ("<svg onload=alert(1)><circle r=5></circle></svg>ok", "ok", "svg"),
        ("<b>ok</b><script>alert(1)</script>", "<b>ok</b>", "script"),
        ('<iframe src="https://exemplo.com"></iframe>ok', "ok", "iframe"),
        ('<a href="javascript:alert(1)">clique</a>', "clique", "javascript:"),
        ('<a href="https://pytorch.org">docs</a>', 'href="https://pytorch.org"', "onclick"),
        ('<img src="https://exemplo.com/pixel.png">', "<img>", "exemplo.com"),
        (f'<img src="data:image/png;base64,{PNG_B64}">', f"data:image/png;base64,{PNG_B64}", "onerror"),
        ('<div style="position:fixed" onclick="x()">t</div>', "<div>t</div>", "style"),
        ('<form action="/api/contents"><input name="x"></form>', "", "form"),
        ('<object data="x.swf"></object><embed src="x">', "", "embed"),
        (
            '<table class="dataframe"><tr><td>1</td></tr></table><style>*{}</style>',
            'class="dataframe"',
            "style",
        ),
    ],
)
def test_clean_html(html, kept, gone):
    out = clean_html(html)
    assert kept in out
    assert gone not in out.lower()


def _code_cell(outputs):
    return nbformat.v4.new_code_cell("x = 1", outputs=[nbformat.from_dict(o) for o in outputs])


def test_sanitize_outputs_each_kind():
    svg = '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'
    nb = nbformat.v4.new_notebook(
        cells=[
            _code_cell(
                [
                    {
                        "output_type": "display_data",
                        "metadata": {},
                        "data": {"text/html": "<b>ok</b><script>alert(1)</script>", "text/plain": "ok"},
                    },
                    {
                        "output_type": "display_data",
                        "metadata": {},
                        "data": {"application/javascript": "alert(1)"},
                    },
                    {"output_type": "display_data", "metadata": {}, "data": {"image/svg+xml": svg}},
                    {
                        "output_type": "display_data",
                        "metadata": {},
                        "data": {"text/markdown": "**md** <img src=x onerror=alert(1)>"},
                    },
                    {
                        "output_type": "display_data",
                        "metadata": {},
                        "data": {
                            "application/vnd.jupyter.widget-view+json": {"model_id": "x"},
                            "text/plain": "w",
                        },
                    },
                    {
                        "output_type": "display_data",
                        "metadata": {"image/png": {"width": '1"onload="x'}},
                        "data": {"image/png": '" onerror="alert(1)'},
                    },
                    {
                        "output_type": "display_data",
                        "metadata": {"image/png": {"width": 8}},
                        "data": {"image/png": PNG_B64},
                    },
                ]
            ),
            nbformat.v4.new_raw_cell("<script>alert(1)</script>texto cru"),
        ],
        metadata={"widgets": {"application/vnd.jupyter.widget-state+json": {}}},
    )
    nb.cells[0]["id"] = 'x"><script>'
    nb, _ = SanitizeNotebook().preprocess(nb, {})
    outs = nb.cells[0].outputs
    assert outs[0].data["text/html"] == "<b>ok</b>"
    assert outs[1].data == {
        "text/plain": "[saída removida na correção: o tipo application/javascript não é mostrado]"
    }
    svg_img = outs[2].data["text/html"]
    assert (
        svg_img.startswith('<img alt="figura (SVG)" src="data:image/svg+xml;base64,')
        and "image/svg+xml" not in outs[2].data
    )
    assert outs[3].data["text/html"] == "<p><strong>md</strong> <img></p>\n"
    assert outs[4].data == {"text/plain": "w"}
    assert "image/png" not in outs[5].data and not outs[5].metadata
    assert outs[6].data["image/png"] == PNG_B64 and outs[6].metadata == {"image/png": {"width": 8}}
    assert nb.cells[1].source == "texto cru"
    assert "id" not in nb.cells[0] and "widgets" not in nb.metadata


def test_markdown_filter_keeps_math_and_removes_scripts():
    context = {"cell": {"attachments": {}}}
    html = markdown2html_inert(context, "$a<b$ **ok** <img src=x onerror=alert(1)> [l](javascript:x)")
    assert "$a&lt;b$" in html and "<strong>ok</strong>" in html
    assert "onerror" not in html and "javascript:" not in html


def test_attachments_capped_with_note():
    big = base64.b64encode(os.urandom(48_000)).decode()  # ~64 kB em base64
    cell = nbformat.v4.new_markdown_cell("![a](attachment:a.png)\n" * 4000)
    cell["attachments"] = {"a.png": {"image/png": big}}
    small = nbformat.v4.new_markdown_cell("![b](attachment:b.png)")
    small["attachments"] = {"b.png": {"image/png": PNG_B64}, "c.html": {"text/html": "<script>x</script>"}}
    nb = nbformat.v4.new_notebook(cells=[cell, small])
    nb, _ = SanitizeNotebook().preprocess(nb, {})
    assert "attachments" not in nb.cells[0]
    assert "Anexos removidos na correção" in nb.cells[0].source
    assert f"{MAX_ATTACHMENT_INLINE_BYTES / 1e6:.1f} MB" in nb.cells[0].source
    assert set(nb.cells[1].attachments) == {"b.png"}
    assert "'c.html': só imagens" in nb.cells[1].source


def test_formgrader_nonce_only_on_template_scripts():
    page = (
        "<!DOCTYPE html><head>"
        '<script src="/base/formgrader/static/js/formgrade.js"></script>'
        '<script src="https://cdnjs.cloudflare.com/mathjax.js"></script>'
        '<script type="text/javascript">\nvar submission_id = "abc";\n'
        'var base_url = "/base/formgrader";\n</script>'
        "<script>var x = 1; fetch('http://outro')</script>"
        '</head><body><div id="notebook"><script src="/base/formgrader/static/js/utils.js"></script></div>'
    )
    out = formgrader_csp.add_nonces(page, "N", "/base")
    assert out.count('nonce="N"') == 2
    assert "cdnjs" not in out
    assert '<script nonce="N" src="/base/formgrader/static/js/formgrade.js">' in out
    assert '<script nonce="N" type="text/javascript">\nvar submission_id' in out
    assert out.endswith(
        '<div id="notebook"><script src="/base/formgrader/static/js/utils.js"></script></div>'
    )
    policy = formgrader_csp.policy("N")
    assert (
        "script-src 'nonce-N' 'unsafe-hashes'" in policy
        and "unsafe-inline' " not in policy.split("style-src")[0]
    )
    assert "connect-src 'self'" in policy and "frame-ancestors 'self'" in policy


def test_instructor_servers_enable_formgrader_csp():
    """O professor abre o Formgrader com a política: no ``make lab`` (--professor) e no hub."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from configure_lab import INSTRUCTOR_SERVER_EXTENSIONS
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert "transformer_course.instructor.formgrader_csp" in INSTRUCTOR_SERVER_EXTENSIONS
    hub = json.loads((ROOT / "hub" / "perfis" / "professor" / "jupyter_server_config.json").read_text())
    enabled = hub["ServerApp"]["jpserver_extensions"]
    assert enabled["nbgrader.server_extensions.formgrader"]
    assert enabled["transformer_course.instructor.formgrader_csp"]


# ---------------------------------------------------------------------- de ponta a ponta, no Chromium

HOSTILE_MD = (
    f"{ANSWER_TEXT}. "
    "<img src=x onerror=\"window.__xss_md=1;document.title='XSS';fetch('" + OUTSIDE + "/md')\">\n\n"
    '<a href="javascript:window.__xss_link=1">clique aqui</a>\n\n'
    '<svg onload="window.__xss_svg=1"><circle r="5"></circle></svg>\n\n'
    f'<iframe src="{OUTSIDE}/iframe"></iframe>\n'
)
CODE_CELLS = [
    "from IPython.display import HTML, SVG, Image, Javascript, Markdown, display",
    "display(HTML('<b>negrito legítimo</b><script>window.__xss_html=1;fetch(\"" + OUTSIDE + '/html")</script>'
    '<img src=x onerror="window.__xss_html_img=1">\'))',
    "display(Javascript('window.__xss_js=1; fetch(\"" + OUTSIDE + "/js\")'))",
    'display(SVG(\'<svg xmlns="http://www.w3.org/2000/svg" onload="window.__xss_svgout=1" '
    'width="10" height="10">'
    '<script>window.__xss_svgscript=1</script><rect width="10" height="10"/></svg>\'))',
    "display(Markdown('**md da saída** <img src=x onerror=\"window.__xss_mdout=1\">'))",
    'display(HTML(\'<iframe src="javascript:parent.__xss_iframe=1"></iframe>'
    '<iframe srcdoc="<script>parent.__xss_srcdoc=1</script>"></iframe>\'))',
    f"import base64\ndisplay(Image(data=base64.b64decode('{PNG_B64}'), format='png'))",
]


def _hostile_notebook():
    nb = nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    by_id["q_scaling"].source = HOSTILE_MD
    by_id["q_order"].source = f"{ORDER_TEXT}.<script>window.__xss_script=1</script>"
    nb.cells.extend(nbformat.v4.new_code_cell(src) for src in CODE_CELLS)
    nb.cells.append(nbformat.v4.new_raw_cell("<script>window.__xss_raw=1</script>célula raw"))
    attach = nbformat.v4.new_markdown_cell("Anexo: " + "![x](attachment:grande.png) " * 4000)
    attach["attachments"] = {"grande.png": {"image/png": base64.b64encode(os.urandom(48_000)).decode()}}
    nb.cells.append(attach)
    return nb


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Server:
    """O Jupyter Server do professor: as extensões que ``configure_lab.py --professor`` liga."""

    def __init__(self, course, scratch):
        sys.path.insert(0, str(ROOT / "scripts"))
        try:
            from configure_lab import INSTRUCTOR_SERVER_EXTENSIONS
        finally:
            sys.path.remove(str(ROOT / "scripts"))
        config = scratch / "config"
        config.mkdir(parents=True)
        # Pela linha de comando (--config): o que o ambiente do curso diz (no modo aluno, o Formgrader
        # desligado, em <venv>/etc/jupyter) venceria um arquivo na pasta de configuração do usuário.
        professor = scratch / "professor_config.py"
        extensions = dict.fromkeys(INSTRUCTOR_SERVER_EXTENSIONS, True)
        professor.write_text(f"c.ServerApp.jpserver_extensions = {extensions!r}\n")
        self.port = _free_port()
        self.token = secrets.token_hex(24)
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = (scratch / "server.log").open("w")
        env = {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT),
            "JUPYTER_CONFIG_DIR": str(config),
            "JUPYTER_DATA_DIR": str(scratch / "data"),
            "JUPYTER_RUNTIME_DIR": str(scratch / "runtime"),
        }
        self.process = subprocess.Popen(
            [
                str(BIN / "jupyter"),
                "server",
                "--no-browser",
                f"--config={professor}",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={course}",
                *(["--allow-root"] if os.geteuid() == 0 else []),
            ],
            cwd=course,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.log_path = scratch / "server.log"

    def wait(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"o Jupyter Server terminou ao iniciar:\n{self.log_path.read_text()[-3000:]}"
                )
            try:
                request = urllib.request.Request(
                    f"{self.base}/api/status", headers={"Authorization": f"token {self.token}"}
                )
                urllib.request.urlopen(request, timeout=5).read()
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        raise RuntimeError(f"o Jupyter Server não respondeu:\n{self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.log.close()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = copy_course(tmp_path_factory.mktemp("xss") / "curso", parts=("source", "release", "solutions"))
    for extra in [p for p in (course / "source").iterdir() if p.name != CHAPTER]:
        shutil.rmtree(extra)
    nbgrader(course, "generate_assignment", CHAPTER, "--force")
    folder = course / "grading" / "submitted" / STUDENT / CHAPTER
    folder.mkdir(parents=True)
    nbformat.write(_hostile_notebook(), folder / f"{CHAPTER}.ipynb")
    (folder / "pagina.html").write_text(EXTRA_PAGE)
    nbgrader(course, "autograde", CHAPTER, "--create")
    nbgrader(course, "generate_feedback", CHAPTER)
    return course


def _browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="falta o pacote playwright (make venv)")
    if not os.path.exists(CHROMIUM):
        pytest.skip("o Chromium não está instalado em /usr/bin/chromium (sudo apt-get install chromium)")
    return sync_api


_WATCH_VIOLATIONS = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', e => window.__violations.push(
  {directive: e.violatedDirective, blocked: e.blockedURI, sample: e.sample}));
"""


_PNG_SHOWN = """() => [...document.images]
  .filter(i => i.src.startsWith('data:image/png') && i.naturalWidth > 0).length"""
_SCORES_LOADED = """() => [...document.querySelectorAll('input.score')]
  .some(i => i.getAttribute('placeholder') !== null)"""


def _flags(page) -> dict:
    return page.evaluate(
        "(names) => Object.fromEntries(names.filter(n => n in window).map(n => [n, window[n]]))", FLAGS
    )


@pytest.mark.slow
def test_graded_files_are_inert(graded):
    autograded = graded / "grading" / "autograded" / STUDENT / CHAPTER / f"{CHAPTER}.ipynb"
    nb = nbformat.read(autograded, as_version=4)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            for mime, value in output.get("data", {}).items():
                assert mime in {"text/plain", "text/html", "image/png", "text/latex"}, mime
                text = value if isinstance(value, str) else json.dumps(value)
                assert "<script" not in text and "onerror" not in text and "onload" not in text
    feedback = graded / "grading" / "feedback" / STUDENT / CHAPTER / f"{CHAPTER}.html"
    html = feedback.read_text()
    assert "<script" not in html.lower()
    assert "Content-Security-Policy" in html
    # 4.000 referências a um anexo de 64 kB não viram 256 MB: o anexo sai, com o aviso.
    assert len(html) < 5_000_000, len(html)
    assert "Anexos removidos na correção" in html


@pytest.mark.slow
def test_feedback_in_chromium(graded):
    sync_api = _browser()
    feedback = graded / "grading" / "feedback" / STUDENT / CHAPTER / f"{CHAPTER}.html"
    url = feedback.as_uri()
    requests = []
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = chromium.new_page()
            page.add_init_script(_WATCH_VIOLATIONS)

            def route(r):
                requests.append(r.request.url)
                if r.request.url == url:
                    r.continue_()
                else:
                    r.abort()

            page.route("**/*", route)
            page.goto(url, wait_until="load")
            flags = _flags(page)
            title = page.title()
            body = page.inner_text("body")
            images = page.evaluate(_PNG_SHOWN)
        finally:
            chromium.close()
    assert flags == {}
    assert title != "XSS"
    assert [u for u in requests if u != url] == []
    assert ANSWER_TEXT in body and ORDER_TEXT in body and "negrito legítimo" in body
    assert images >= 1  # a figura PNG legítima aparece


def _formgrader_session(course, scratch, *, give_grade: bool) -> dict:
    """O professor entra, vê a lista de entregas e abre a do aluno no Formgrader (e dá uma nota)."""
    from nbgrader.api import Gradebook

    sync_api = _browser()
    db = f"sqlite:///{course / 'grading' / 'gradebook.db'}"
    with Gradebook(db) as gb:
        submission_id = gb.find_submission_notebook(CHAPTER, CHAPTER, STUDENT).id
    server = _Server(course, scratch)
    result = {"outside": [], "saved": None}
    try:
        server.wait()
        with sync_api.sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                context = chromium.new_context()
                context.set_default_timeout(60_000)
                context.add_init_script(_WATCH_VIOLATIONS)

                def route(r):
                    if r.request.url.startswith(server.base + "/"):
                        r.continue_()
                    else:
                        result["outside"].append(r.request.url)
                        r.abort()

                context.route("**/*", route)
                page = context.new_page()
                # O professor entra pela página de login do Jupyter (o token como senha); a lista de
                # entregas vem da API do Formgrader, pelo JavaScript da página.
                page.goto(f"{server.base}/login?next=/formgrader/manage_submissions/{CHAPTER}")
                page.fill("input[name=password]", server.token)
                page.click("#login_submit")
                page.wait_for_selector(f"text={STUDENT}")
                response = page.goto(f"{server.base}/formgrader/submissions/{submission_id}/")
                result["csp"] = response.headers.get("content-security-policy", "")
                # O JavaScript do Formgrader rodou: as notas automáticas viram o placeholder dos campos.
                page.wait_for_function(_SCORES_LOADED)
                result["flags"] = _flags(page)
                # Os scripts embutidos do modelo do Formgrader rodaram (receberam o nonce).
                result["template_js"] = page.evaluate(
                    "() => [typeof window.toggle_name, typeof window.submission_id,"
                    " typeof $('span.glyphicon.name-hidden').data('bs.tooltip')]"
                )
                result["title"] = page.title()
                result["body"] = page.inner_text("body")
                result["images"] = page.evaluate(_PNG_SHOWN)
                if give_grade:
                    # O professor dá a nota da pergunta aberta: o Formgrader a grava pela API.
                    page.fill("input.score#q_scaling", "1")
                    page.press("input.score#q_scaling", "Tab")
                    deadline = time.monotonic() + 60
                    while result["saved"] is None and time.monotonic() < deadline:
                        page.wait_for_timeout(250)
                        with Gradebook(db) as gb:
                            result["saved"] = gb.find_grade(
                                "q_scaling", CHAPTER, CHAPTER, STUDENT
                            ).manual_score
                result["violations"] = page.evaluate("() => window.__violations")
                # O arquivo a mais da entrega, servido pelo próprio Formgrader, com a mesma política.
                page.goto(f"{server.base}/formgrader/submissions/{submission_id}/pagina.html")
                result["extra_flags"] = _flags(page)
                result["extra_body"] = page.inner_text("body")
            finally:
                chromium.close()
    finally:
        server.stop()
    return result


@pytest.mark.slow
def test_formgrader_in_chromium(graded, tmp_path):
    r = _formgrader_session(graded, tmp_path, give_grade=True)
    assert "script-src 'nonce-" in r["csp"] and "unsafe-inline" not in r["csp"].split("style-src")[0], r[
        "csp"
    ]
    assert r["flags"] == {}, r
    assert r["title"] != "XSS"
    assert r["outside"] == [], r["outside"]
    assert ANSWER_TEXT in r["body"] and ORDER_TEXT in r["body"] and "negrito legítimo" in r["body"]
    assert r["images"] >= 1
    assert r["saved"] == 1, r["violations"]
    assert r["template_js"] == ["function", "string", "object"], r["template_js"]
    assert r["extra_flags"] == {} and "arquivo a mais" in r["extra_body"]
    # O que a política bloqueou (se algo do aluno escapasse do nh3) nunca é do próprio Formgrader.
    assert not [v for v in r["violations"] if "/formgrader/static/" in (v.get("blocked") or "")], r[
        "violations"
    ]


HOSTILE_OUTPUTS = [
    {
        "text/html": "<b>negrito legítimo</b><script>window.__xss_html=1;fetch('"
        + OUTSIDE
        + "/html')</script>"
        '<img src=x onerror="window.__xss_html_img=1">'
    },
    {"application/javascript": "window.__xss_js=1"},
    {"text/markdown": '**md** <img src=x onerror="window.__xss_mdout=1">'},
    {"text/html": '<iframe srcdoc="<script>parent.__xss_srcdoc=1</script>"></iframe>'},
]


@pytest.mark.slow
def test_formgrader_csp_alone_stops_scripts(graded, tmp_path):
    """Segunda camada: sem o sanitizador (configuração e notebook corrigido sujos), só a política barra."""
    course = tmp_path / "sem_sanitizador"
    shutil.copytree(graded, course)
    config = course / "nbgrader_config.py"
    text = config.read_text()
    for line in (
        '    "markdown2html": "transformer_course.instructor.sanitize.markdown2html_inert",\n',
        'c.HTMLExporter.preprocessors = ["transformer_course.instructor.sanitize.SanitizeNotebook"]\n',
    ):
        assert line in text
        text = text.replace(line, "")
    config.write_text(text)
    autograded = course / "grading" / "autograded" / STUDENT / CHAPTER / f"{CHAPTER}.ipynb"
    nb = nbformat.read(autograded, as_version=4)
    last = [c for c in nb.cells if c.cell_type == "code"][-1]
    last.outputs = [nbformat.v4.new_output("display_data", data=data) for data in HOSTILE_OUTPUTS]
    nbformat.write(nb, autograded)

    r = _formgrader_session(course, tmp_path / "servidor", give_grade=False)
    assert r["flags"] == {}, r
    assert r["title"] != "XSS"
    assert r["outside"] == [], r["outside"]
    blocked = {v["directive"] for v in r["violations"]}
    assert blocked & {"script-src-elem", "script-src-attr", "script-src"}, r["violations"]
    assert "negrito legítimo" in r["body"]
