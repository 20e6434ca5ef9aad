"""O JupyterLab do aluno num navegador de verdade (Chromium do Debian, dirigido pelo Playwright).

Um único servidor para todos os capítulos, numa cópia temporária da pasta de trabalho (versões do
aluno, como ``make lab`` copia, e as soluções em ``_solucoes/``). Para cada capítulo
(descoberto em ``release/NN_*`` e ``solutions/NN_*``):

- solução: Executar > Executar todas as células, kernel ocioso, nenhuma célula com erro; o widget
  do capítulo responde a um controle mexido pelo teclado/mouse (a figura muda);
- versão do aluno: os esboços dizem "não implementado", sem parede de tracebacks;

e a interface está em português, com o botão de validação do nbgrader e sem os painéis do professor.
A latência deslizador -> imagem de cada capítulo e a de um widget que não trabalha (o piso do
caminho navegador -> kernel -> navegador) vão para ``artifacts/bench/browser_latency.json``.
Capturas de tela em ``artifacts/screenshots/`` (fora do git).
"""

from __future__ import annotations

import os
import time

import pytest
from browser_helpers import (
    CHROMIUM,
    CHROMIUM_ARGS,
    FIND_WIDGET_JS,
    ROOT,
    SOLUTIONS_DIR,
    LabServer,
    change_widget,
    click_menu,
    close_all_tabs,
    discover_chapters,
    drag_slider,
    error_outputs,
    make_test_workspace,
    record_latency,
    run_all_and_wait,
    save_notebook,
    slider_latencies,
    wait_for_notebook,
    widget_image_src,
)

pytestmark = pytest.mark.slow

if not CHROMIUM.exists():
    pytest.skip(
        "testes de navegador pulados: o Chromium não está instalado em /usr/bin/chromium. "
        "Instale com `sudo apt-get install chromium` (Debian/Ubuntu) e rode de novo.",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="testes de navegador pulados: falta o pacote playwright (make venv)"
)

CHAPTERS = discover_chapters()
SHOTS = ROOT / "artifacts" / "screenshots"
# Deslizador -> imagem nova, medido no navegador (informativo: `make bench` o imprime; nada é afirmado).
LATENCY_JSON = ROOT / "artifacts" / "bench" / "browser_latency.json"
VIEWPORT = {"width": 1440, "height": 1000}
MENUS_PT = ["Arquivo", "Editar", "Visualizar", "Executar", "Kernel", "Configurações", "Ajuda"]
MAX_ERROR_LINES = 40  # linhas visíveis de um "não implementado", com o cabeçalho do traceback
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """O servidor do módulo inteiro; sempre desligado, mesmo quando um teste falha."""
    scratch = tmp_path_factory.mktemp("jupyterlab")
    workspace = make_test_workspace(scratch / "aluno")
    SHOTS.mkdir(parents=True, exist_ok=True)
    server = LabServer(workspace, scratch, SHOTS / "jupyterlab.log")
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def lab_page(browser, lab):
    """Uma única aba do JupyterLab para o módulo: carregar a interface custa segundos."""
    # O navegador fica em inglês de propósito: o português tem de vir da configuração do curso.
    context = browser.new_context(viewport=VIEWPORT, locale="en-US")
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        load_lab(page, lab)
        yield page
    finally:
        context.close()


def load_lab(page, lab) -> None:
    page.goto(lab.url())
    page.locator(".lm-MenuBar-itemLabel").first.wait_for(timeout=120_000)


@pytest.fixture
def page(lab_page, lab):
    """A aba do módulo; depois de cada teste, fecha os notebooks e desliga os kernels."""
    try:
        yield lab_page
    finally:
        try:
            close_all_tabs(lab_page)
        except Exception:  # noqa: BLE001 - aba num estado estranho depois de uma falha: recarrega
            load_lab(lab_page, lab)
        lab.shutdown_kernels()


def open_notebook(page, lab, path: str) -> None:
    """Arquivo > Abrir do Caminho…, como o aluno faria, sem recarregar a interface."""
    page.keyboard.press("Escape")
    click_menu(page, "Arquivo", "Abrir do Caminho")
    field = page.locator(".jp-Dialog input").first
    field.fill(path)
    field.press("Enter")
    page.locator(".jp-Dialog").first.wait_for(state="detached")
    wait_for_notebook(page)


def shot(page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def test_interface_em_portugues(page, lab):
    chapter = CHAPTERS[0]
    open_notebook(page, lab, f"{chapter}/{chapter}.ipynb")
    labels = [t.strip() for t in page.locator(".lm-MenuBar-itemLabel").all_text_contents()]
    missing = [m for m in MENUS_PT if m not in labels]
    assert not missing, f"menus que não estão em português: faltam {missing}; a barra mostra {labels}"
    assert "Nbgrader" not in labels, "o menu do nbgrader (ferramentas do professor) não devia aparecer"
    # Ferramenta do aluno: o botão de validação do nbgrader na barra do notebook.
    assert page.locator(".jp-NotebookPanel-toolbar .validate-button").count() == 1, (
        "falta o botão de validação do nbgrader na barra do notebook"
    )
    # Nada do professor: nem o painel "Create Assignment" nem os comandos do formgrader.
    assert page.locator("#nbgrader-create_assignemnt").count() == 0
    log = lab.log_path.read_text(errors="replace")
    assert "validate_assignment | extension was successfully loaded" in log, "falta a validação do nbgrader"
    for extension in ("formgrader", "course_list", "assignment_list"):
        assert f"server_extensions.{extension} | extension was successfully loaded" not in log, (
            f"a extensão de servidor {extension} (do professor) está ligada"
        )
    palette = page.locator(".lm-CommandPalette-input")
    for attempt in range(3):  # o atalho alterna a paleta; logo após abrir um notebook ela pode fechar sozinha
        page.keyboard.press("Control+Shift+c")
        try:
            palette.wait_for(state="visible", timeout=5000)
            palette.fill("nbgrader", timeout=5000)
            break
        except sync_api.TimeoutError:
            if attempt == 2:
                raise
            page.keyboard.press("Escape")
            page.wait_for_timeout(1000)
    page.wait_for_timeout(500)
    commands = page.locator(".lm-CommandPalette-itemLabel").all_text_contents()
    instructor = [
        c
        for c in commands
        if c in {"Formgrader", "Create assignment", "Course List", "Assignment List", "Local Formgrader"}
    ]
    assert not instructor, f"comandos do professor na paleta: {instructor}"
    page.keyboard.press("Escape")
    page.locator(".lm-MenuBar-itemLabel", has_text="Arquivo").first.click()
    page.locator(".lm-Menu").first.wait_for(state="visible")
    shot(page, "00_menu_arquivo")
    page.keyboard.press("Escape")


def test_validar_e_navegador_de_arquivos_em_portugues(page, lab):
    """O que o pacote de idioma pt-BR (4.5.post3) deixa em inglês no JupyterLab 4.6 e o aluno vê: o
    cabeçalho do navegador de arquivos ("Modified"), o estado do kernel ("Idle") e a ferramenta de
    validação do nbgrader ("Validate", que escreve os textos sem o tradutor do JupyterLab).
    ``scripts/configure_lab.py`` completa o pacote e instala a extensão que traduz o nbgrader."""
    chapter = "05_mascaras"
    open_notebook(page, lab, f"{SOLUTIONS_DIR}/{chapter}/{chapter}.ipynb")
    header = page.locator(".jp-DirListing-header").first.inner_text()
    assert "Modified" not in header and ("Modificado" in header or "Última modificação" in header), header
    status = page.locator(".jp-StatusBar-Widget", has_text="Ocioso").first
    status.wait_for(timeout=120_000)  # o kernel iniciou e está ocioso: "Ocioso", não "Idle"
    button = page.locator(".jp-NotebookPanel-toolbar .validate-button").first
    label = button.locator(".jp-ToolbarButtonComponent-label")
    assert label.inner_text().strip() == "Validar", label.inner_text()
    assert "Validar a tarefa" in (button.get_attribute("title") or ""), button.get_attribute("title")
    assert button.get_attribute("aria-label") == "Validar", button.get_attribute("aria-label")
    button.click()
    dialog = page.locator(".jp-Dialog").first
    dialog.wait_for(state="visible", timeout=300_000)  # o nbgrader roda o notebook inteiro
    page.locator(".jp-Dialog-header", has_text="Resultado da validação").first.wait_for(timeout=10_000)
    body = page.locator(".jp-Dialog-body").first.inner_text()
    assert "Tudo certo! O seu notebook passa em todos os testes." in body, body
    assert "Validate" not in label.inner_text() and "Success" not in body
    shot(page, "01_validar_em_portugues")
    page.locator(".jp-Dialog-footer button").last.click()
    dialog.wait_for(state="detached")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_solucao_executa_e_widget_responde(page, lab, chapter):
    if not (ROOT / "solutions" / chapter / f"{chapter}.ipynb").exists():
        pytest.skip(f"{chapter}: ainda sem solutions/")
    path = f"{SOLUTIONS_DIR}/{chapter}/{chapter}.ipynb"
    lap = Laps(f"{chapter} solução")
    open_notebook(page, lab, path)
    lap("abrir")
    run_all_and_wait(page, lab, timeout_s=300)
    lap("executar tudo")
    save_notebook(page)
    nb = lab.notebook_json(path)
    lap("salvar")
    errors = error_outputs(nb)
    assert not errors, "\n".join(
        f"célula {i} de {chapter}: {out['ename']}: {out['evalue'][:300]}" for i, out in errors
    )
    not_run = [
        i
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and c["source"].strip() and c.get("execution_count") is None
    ]
    assert not not_run, f"{chapter}: células que não rodaram: {not_run}"
    assert page.get_by_text("Error displaying widget").count() == 0, f"{chapter}: o widget não carregou"

    assert page.evaluate(FIND_WIDGET_JS), (
        f"{chapter}: nenhum widget com figura (interactive_output com imagem) na página"
    )
    area = page.locator("[data-curso-widget]").first
    area.scroll_into_view_if_needed()
    before = widget_image_src(area)
    assert before, f"{chapter}: o widget não mostra figura"
    actions = [change_widget(page, area)]
    changed = wait_for_new_image(page, area, before)
    if not changed and area.locator(".widget-slider").count():
        actions.append(drag_slider(page, area))
        changed = wait_for_new_image(page, area, before)
    lap("widget")
    area.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    shot(page, f"{chapter}_solucao_widget")
    assert changed, f"{chapter}: a figura do widget não mudou depois de: {'; '.join(actions)}"
    try:  # só mede: uma falha da medida não reprova o capítulo
        record_latency(LATENCY_JSON, chapter, slider_latencies(page, area))
    except Exception as error:  # noqa: BLE001
        record_latency(LATENCY_JSON, chapter, [], note=f"medida falhou: {error}"[:300])


# Um widget que não trabalha: o deslizador só troca a imagem por um PNG já pronto, do mesmo
# tamanho das figuras do curso. O que ele leva da tecla à imagem nova é o piso do caminho
# navegador -> servidor -> kernel -> navegador nesta máquina; o de um capítulo, comparado a este,
# mostra quanto o próprio widget acrescenta.
FLOOR_WIDGET = """\
import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from transformer_course.widgets._view import figure_png

fig = Figure(figsize=(9.5, 3.7))
ax = fig.add_subplot()
(line,) = ax.plot(np.arange(100), np.zeros(100))
ax.set_ylim(-1, 1)
pngs = []
for i in range(31):
    line.set_ydata(np.sin(np.arange(100) / 10 + i / 3))
    ax.set_title(f"estado {i}")
    pngs.append(figure_png(fig))
slider = widgets.IntSlider(value=0, min=0, max=30, continuous_update=False)
image = widgets.Image(value=pngs[0], format="png")
slider.observe(lambda change: setattr(image, "value", pngs[change["new"]]), names="value")
widgets.VBox([slider, image])
"""


def test_piso_da_latencia_no_navegador(page, lab):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(FLOOR_WIDGET)]
    nbformat.write(nb, lab.root_dir / "piso_widget.ipynb")
    open_notebook(page, lab, "piso_widget.ipynb")
    run_all_and_wait(page, lab, timeout_s=120)
    assert page.evaluate(FIND_WIDGET_JS), "o widget sem trabalho não apareceu"
    area = page.locator("[data-curso-widget]").first
    area.scroll_into_view_if_needed()
    samples = slider_latencies(page, area, presses=12)
    record_latency(LATENCY_JSON, "piso (widget que só troca um PNG pronto)", samples)
    assert samples, "o deslizador do widget sem trabalho não mudou a imagem"


class Laps:
    """Cronômetro das etapas de um teste (vai para artifacts/screenshots/tempos.txt)."""

    def __init__(self, name: str):
        self.name, self.last = name, time.monotonic()

    def __call__(self, step: str) -> None:
        now = time.monotonic()
        TIMINGS[f"{self.name}: {step}"] = now - self.last
        self.last = now


def wait_for_new_image(page, area, before: str, timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = widget_image_src(area)
        if now and now != before:
            return True
        page.wait_for_timeout(250)
    return False


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_versao_do_aluno_diz_nao_implementado(page, lab, chapter):
    if not (ROOT / "release" / chapter / f"{chapter}.ipynb").exists():
        pytest.skip(f"{chapter}: ainda sem release/")
    path = f"{chapter}/{chapter}.ipynb"
    lap = Laps(f"{chapter} aluno")
    open_notebook(page, lab, path)
    lap("abrir")
    run_all_and_wait(page, lab, timeout_s=300)
    lap("executar tudo")
    save_notebook(page)
    nb = lab.notebook_json(path)
    errors = error_outputs(nb)
    lap("salvar")
    # Um esboço avisa "não implementado" na saída da célula (sem parar o "Executar tudo"); um erro,
    # se houver, também tem de ser esse aviso, curto.
    notices = [
        i
        for i, cell in enumerate(nb["cells"])
        for out in cell.get("outputs", [])
        if "não implementado" in (_text(out.get("text")) + out.get("evalue", ""))
    ]
    assert notices, f"{chapter}: a versão do aluno rodou sem nenhum 'não implementado'"
    for i, out in errors:
        assert "não implementado" in out["evalue"], (
            f"célula {i} de {chapter}: {out['ename']}: {out['evalue'][:300]}"
        )
        assert len(out["traceback"]) <= 12, f"célula {i} de {chapter}: parede de traceback"
    # O que o aluno vê: a mensagem em português na saída da célula.
    message = page.locator(".jp-OutputArea-output", has_text="não implementado").first
    message.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    shot(page, f"{chapter}_versao_aluno")
    assert message.is_visible()
    shown = (message.inner_text() or "").splitlines()
    assert len(shown) <= MAX_ERROR_LINES, (
        f"{chapter}: o erro do esboço ocupa {len(shown)} linhas na tela (parede de traceback)"
    )


def test_zz_tempos():
    """Registra os tempos de execução vistos no navegador (informativo)."""
    lines = [f"{k}: {v:.1f} s" for k, v in TIMINGS.items()]
    if lines:
        (SHOTS / "tempos.txt").write_text("\n".join(lines) + f"\ncarga: {os.getloadavg()}\n")
