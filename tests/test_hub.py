"""A turma no JupyterHub, de ponta a ponta: hub de verdade (``hub/jupyterhub_config.py``), usuários
Unix de verdade (``LocalProcessSpawner``), o exchange do nbgrader numa pasta e o Chromium do Debian.

O professor publica ``02_atencao``; Ana e Beto entram pelo navegador, veem o capítulo na lista de
tarefas do nbgrader e o buscam; Ana o resolve (a solução do curso copiada para a pasta dela,
executada no JupyterLab) e entrega pela interface, Beto entrega em branco; o professor recolhe,
corrige (``scripts/grade_class.py``, o relatório da turma) e libera as devolutivas; cada um busca a
sua e vê a própria nota. No caminho: Caio entrega depois do prazo (fica atrasado), Dora entrega o
notebook renomeado e Eva um notebook corrompido (os dois chegam ao relatório com o motivo).
Depois: isolamento entre alunos e do professor (sistema de arquivos e API do hub), o hub só em
127.0.0.1, senhas e tokens fora dos logs e do repositório.

Capturas de tela em ``artifacts/hub/``; tempos e memória em ``artifacts/hub/medidas.json``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, CHROMIUM_ARGS, ROOT, TEST_USER_SETTINGS, wait_for_notebook

pytestmark = pytest.mark.slow

if not CHROMIUM.exists():
    pytest.skip(
        "teste do JupyterHub pulado: o Chromium não está instalado em /usr/bin/chromium. "
        "Instale com `sudo apt-get install chromium` e rode de novo.",
        allow_module_level=True,
    )
if os.geteuid() != 0:
    pytest.skip(
        "teste do JupyterHub pulado: criar usuários Unix de verdade precisa de root. "
        "Rode como root (por exemplo, num contêiner) ou com sudo.",
        allow_module_level=True,
    )
if not shutil.which("configurable-http-proxy"):
    pytest.skip(
        "teste do JupyterHub pulado: falta o configurable-http-proxy. Instale com "
        "`sudo apt-get install nodejs && sudo npm install -g configurable-http-proxy`.",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="teste do JupyterHub pulado: falta o pacote playwright (make venv)"
)

import hub_helpers as hh  # noqa: E402

CHAPTER = "02_atencao"
SHOTS = ROOT / "artifacts" / "hub"
VIEWPORT = {"width": 1440, "height": 1000}
MEASURES: dict = {}


def shot(page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"))


@pytest.fixture(scope="module")
def turma():
    """Hub, usuários e estado do módulo; tudo removido no fim, mesmo quando um teste falha."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    # Fora de /tmp: o kernel confinado da correção (bubblewrap) recebe um /tmp vazio.
    base = Path(tempfile.mkdtemp(prefix="tdz-hub-", dir="/var/tmp"))
    base.chmod(0o755)
    homes = base / "homes"
    homes.mkdir(mode=0o755)
    names = hh.test_names()
    prof, ana, beto, caio, dora, eva = names
    state = {"base": base, "estado": base / "estado", "names": names}
    hub = None
    try:
        start = time.monotonic()
        info = hh.preparar.preparar(state["estado"], "local", names, caps=[CHAPTER], homes=homes)
        MEASURES["preparar_s"] = round(time.monotonic() - start, 1)
        hub = hh.Hub(state["estado"], SHOTS / "jupyterhub.log").start()
        state |= {
            "hub": hub,
            "contas": info["contas"],
            "prof": prof,
            "ana": ana,
            "beto": beto,
            "caio": caio,
            "dora": dora,
            "eva": eva,
            "curso": hh.home(prof) / hh.preparar.COURSE_DIRNAME,
            "exchange": info["exchange"] / "transformers-do-zero",
        }
        yield state
    finally:
        if hub is not None:
            hub.stop()
        hh.remove_users(names)
        shutil.rmtree(base, ignore_errors=True)
        (SHOTS / "medidas.json").write_text(json.dumps(MEASURES, indent=2, ensure_ascii=False) + "\n")


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def prof_run(turma, *args: str) -> subprocess.CompletedProcess:
    r = hh.nbgrader_as(turma["prof"], list(args), turma["curso"], turma["estado"])
    assert r.returncode == 0, f"nbgrader {' '.join(args)} como professor falhou:\n{r.stdout}\n{r.stderr}"
    return r


def student_cli(turma, name: str, *args: str) -> subprocess.CompletedProcess:
    r = hh.nbgrader_as(name, list(args), hh.home(name), turma["estado"])
    assert r.returncode == 0, f"nbgrader {' '.join(args)} como {name} falhou:\n{r.stdout}\n{r.stderr}"
    return r


def seed_test_settings(name: str) -> None:
    """Preferência só do teste: todas as células no DOM (como em test_browser.py)."""
    for rel, value in TEST_USER_SETTINGS.items():
        path = hh.home(name) / ".jupyter" / "lab" / "user-settings" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
        hh.preparar.chown_tree(hh.home(name) / ".jupyter", name)


def login(browser, turma, name: str):
    context = browser.new_context(viewport=VIEWPORT, locale="en-US")
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.goto(turma["hub"].base + "/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", turma["contas"][name]["senha"])
    page.click("#login_submit")
    page.locator(".lm-MenuBar-itemLabel").first.wait_for(timeout=180_000)
    return context, page


def open_assignments(page) -> None:
    """Menu Nbgrader > Assignment List (a única entrada do aluno) e espera a lista carregar."""
    page.keyboard.press("Escape")
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").first.click()
    entries = [t.strip() for t in page.locator(".lm-Menu-itemLabel").all_text_contents() if t.strip()]
    assert entries == ["Assignment List"], f"o aluno devia ver só a lista de tarefas no menu; viu {entries}"
    page.locator(".lm-Menu-itemLabel", has_text="Assignment List").first.click()
    page.locator("#released_assignments_list").wait_for(state="visible", timeout=60_000)


def row(page, list_id: str, text: str = CHAPTER):
    return page.locator(f"#{list_id} .list_item", has_text=text)


def refresh_until(page, list_id: str, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if row(page, list_id).count():
            return row(page, list_id).first
        page.locator("#refresh_assignments_list").click()
        page.wait_for_timeout(1500)
    raise AssertionError(f"{CHAPTER} não apareceu em #{list_id} em {timeout_s:.0f} s")


def user_rss_kib(name: str) -> dict:
    """RSS (KiB) dos processos do usuário: o servidor (jupyterhub-singleuser) e os kernels."""
    out = {"servidor": 0, "kernel": 0}
    uid = hh.pwd.getpwnam(name).pw_uid
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if proc.stat().st_uid != uid:
                continue
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            rss = next(
                int(line.split()[1])
                for line in (proc / "status").read_text().splitlines()
                if line.startswith("VmRSS")
            )
        except (OSError, StopIteration):
            continue
        out["kernel" if "ipykernel" in cmd else "servidor"] += rss
    return out


def test_ciclo_completo_da_turma(turma, browser):
    ana, beto, caio = (turma[k] for k in ("ana", "beto", "caio"))
    hub = turma["hub"]

    # 1. O professor publica o capítulo no exchange.
    prof_run(turma, "release_assignment", CHAPTER)
    assert (turma["exchange"] / "outbound" / CHAPTER / f"{CHAPTER}.ipynb").exists()
    for name in (ana, beto):
        seed_test_settings(name)

    # 2. Ana e Beto entram, veem o capítulo na lista de tarefas e o buscam.
    pages = {}
    for name, tag in ((ana, "ana"), (beto, "beto")):
        start = time.monotonic()
        context, page = login(browser, turma, name)
        labels = [t.strip() for t in page.locator(".lm-MenuBar-itemLabel").all_text_contents()]
        assert {"Arquivo", "Executar", "Configurações", "Ajuda"} <= set(labels), (
            f"menus fora do pt-BR: {labels}"
        )
        shot(page, f"01_{tag}_entrou")
        open_assignments(page)
        released = refresh_until(page, "released_assignments_list")
        shot(page, f"02_{tag}_tarefa_publicada")
        released.locator("button", has_text="Fetch").click()
        refresh_until(page, "fetched_assignments_list")
        MEASURES[f"login_ate_buscar_{tag}_s"] = round(time.monotonic() - start, 1)
        shot(page, f"03_{tag}_tarefa_buscada")
        assert (hh.home(name) / CHAPTER / f"{CHAPTER}.ipynb").exists()
        pages[tag] = (context, page)

    # 3. Ana resolve: a solução do curso na pasta dela, executada no JupyterLab do hub, salva e entregue.
    _, page = pages["ana"]
    target = hh.home(ana) / CHAPTER / f"{CHAPTER}.ipynb"
    hh.copy_as_owner(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", target, ana)
    page.goto(f"{hub.base}/user/{ana}/lab/tree/{CHAPTER}/{CHAPTER}.ipynb")
    wait_for_notebook(page, timeout_ms=120_000)
    run_all(page, hub, ana)
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !document.querySelector('.jp-mod-current.jp-mod-dirty')", timeout=30_000)
    MEASURES["rss_kib_ana_com_kernel_do_capitulo"] = user_rss_kib(ana)
    shot(page, "04_ana_notebook_executado")
    page.goto(f"{hub.base}/user/{ana}/lab")
    page.locator(".lm-MenuBar-itemLabel").first.wait_for(timeout=60_000)
    for tag in ("ana", "beto"):
        _, page = pages[tag]
        if tag == "beto":
            page.bring_to_front()
        else:
            open_assignments(page)
        fetched = refresh_until(page, "fetched_assignments_list")
        fetched.locator("button", has_text="Submit").first.click()
        refresh_until(page, "submitted_assignments_list")
        shot(page, f"05_{tag}_entregou")

    # 4. O prazo acaba agora; Caio busca e entrega (pela linha de comando) depois dele.
    deadline = datetime.now(timezone.utc)
    time.sleep(1.1)
    prof_run(turma, "db", "assignment", "add", CHAPTER, f"--duedate={deadline:%Y-%m-%d %H:%M:%S} UTC")
    student_cli(turma, caio, "fetch_assignment", CHAPTER)
    student_cli(turma, caio, "submit", CHAPTER)

    # 5. O professor recolhe, corrige e libera as devolutivas (comandos do nbgrader, como ele).
    prof_run(turma, "collect", CHAPTER)
    prof_run(turma, "autograde", CHAPTER)
    prof_run(turma, "generate_feedback", CHAPTER)
    prof_run(turma, "release_feedback", CHAPTER)
    scores = gradebook_scores(turma)
    turma["scores"] = scores
    assert set(scores) == {ana, beto, caio}, scores
    assert scores[ana]["score"] == scores[ana]["max_score"] - scores[ana]["manual"] > 0, scores
    assert scores[beto]["score"] == 0, scores
    assert scores[caio]["late"] > 0, f"a entrega de Caio, depois do prazo, devia estar atrasada: {scores}"
    assert scores[ana]["late"] == scores[beto]["late"] == 0, scores

    # 6. Cada um busca a devolutiva e vê a própria nota.
    for name, tag in ((ana, "ana"), (beto, "beto")):
        _, page = pages[tag]
        page.bring_to_front()
        open_assignments(page)
        submitted = refresh_until(page, "submitted_assignments_list")
        submitted.locator("button", has_text="Fetch Feedback").first.click()
        link = page.locator("#submitted_assignments_list a", has_text="view feedback").first
        link.wait_for(state="visible", timeout=60_000)
        shot(page, f"06_{tag}_devolutiva_buscada")
        feedback = sorted((hh.home(name) / CHAPTER / "feedback").glob(f"*/{CHAPTER}.html"))
        assert feedback, f"a devolutiva de {name} não chegou à pasta dele"
        rel = feedback[-1].relative_to(hh.home(name))
        page.goto(f"{hub.base}/user/{name}/files/{rel}")
        heading = page.locator("h4", has_text="Nota:").first.text_content()
        shot(page, f"07_{tag}_nota")
        expected = scores[name]
        # "Nota: 7 de 7 pontos corrigidos; 4 pontos a corrigir pelo professor" (pt-BR; os pontos das
        # perguntas abertas ainda sem nota ficam fora do total) ou "Nota: 11 de 11 pontos".
        shown = re.search(
            r"Nota: ([\d,]+) de ([\d,]+) pontos?(?: corrigidos; ([\d,]+) pontos? a corrigir)?", heading
        )
        assert shown, f"a devolutiva de {name} não mostra a nota: {heading!r}"
        number = lambda s: float((s or "0").replace(",", "."))  # noqa: E731
        assert number(shown.group(1)) == pytest.approx(expected["score"]), (heading, expected)
        assert number(shown.group(2)) == pytest.approx(expected["max_score"] - expected["manual"]), (
            heading,
            expected,
        )
        assert number(shown.group(3)) == pytest.approx(expected["manual"]), (heading, expected)
        turma[f"page_{tag}"] = page
    turma["pages"] = pages


def test_entregas_renomeada_e_corrompida_chegam_ao_relatorio_com_motivo(turma):
    """Dora entrega o notebook renomeado e Eva um notebook corrompido: o relatório da turma
    (``scripts/grade_class.py``, na cópia do professor) mostra as duas com o motivo, sem quebrar."""
    dora, eva = turma["dora"], turma["eva"]
    for name in (dora, eva):
        student_cli(turma, name, "fetch_assignment", CHAPTER)
    (hh.home(dora) / CHAPTER / f"{CHAPTER}.ipynb").rename(hh.home(dora) / CHAPTER / "meu_rascunho.ipynb")
    (hh.home(eva) / CHAPTER / f"{CHAPTER}.ipynb").write_text('{"cells": [ isto não é JSON')
    for name in (dora, eva):
        student_cli(turma, name, "submit", CHAPTER)
    prof_run(turma, "collect", CHAPTER)
    python = hh.preparar.bin_dos_usuarios(turma["estado"], "local") / "python"
    report = hh.as_user(
        turma["prof"], [str(python), "scripts/grade_class.py", CHAPTER], turma["curso"], turma["estado"]
    )
    (SHOTS / "relatorio_da_turma.txt").write_text(report.stdout + report.stderr)
    assert report.returncode == 0, f"grade_class.py quebrou:\n{report.stdout}\n{report.stderr}"
    lines = report.stdout.splitlines()
    for name, reason in ((dora, "não está na entrega"), (eva, "não é um JSON válido")):
        mine = [line for line in lines if name in line]
        assert any(reason in line for line in mine), (
            f"o relatório devia dizer por que a entrega de {name} não foi corrigida ({reason!r}):\n"
            + report.stdout
        )


def run_all(page, hub, name: str, timeout_s: float = 300) -> None:
    """Executar > Executar todas as células; espera o kernel do usuário ficar ocioso."""
    deadline = time.monotonic() + 120
    while not page.request.get(f"{hub.base}/user/{name}/api/kernels").json():
        # Diálogo "Selecionar Kernel" (o notebook veio de fora): aceita o kernel do curso.
        dialog = page.locator(".jp-Dialog .jp-mod-accept")
        if dialog.count():
            dialog.first.click()
        assert time.monotonic() < deadline, "o kernel do notebook não começou"
        page.wait_for_timeout(500)
    wait_for_notebook(page, timeout_ms=120_000)
    page.keyboard.press("Escape")
    page.locator(".lm-MenuBar-itemLabel", has_text="Executar").first.click()
    page.locator(".lm-Menu-itemLabel").filter(
        has_text=re.compile(r"^Executar todas as células$")
    ).first.click()
    deadline = time.monotonic() + timeout_s
    quiet = 0
    page.wait_for_timeout(2000)
    while time.monotonic() < deadline:
        kernels = page.request.get(f"{hub.base}/user/{name}/api/kernels").json()
        busy = any(k["execution_state"] != "idle" for k in kernels)
        running = page.locator(".jp-InputArea-prompt", has_text="[*]").count()
        quiet = quiet + 1 if kernels and not busy and not running else 0
        if quiet >= 3:
            return
        page.wait_for_timeout(500)
    raise AssertionError(f"o notebook não terminou em {timeout_s:.0f} s")


def gradebook_scores(turma) -> dict:
    """Notas e atraso de cada aluno, lidos do gradebook do professor (como o professor)."""
    code = (
        "import json, sys\n"
        "from nbgrader.api import Gradebook\n"
        "from nbgrader.apps.baseapp import NbGrader\n"
        "app = NbGrader(); app.load_config_file()\n"
        "from nbgrader.coursedir import CourseDirectory\n"
        "cd = CourseDirectory(config=app.config)\n"
        "out = {}\n"
        "with Gradebook(cd.db_url) as gb:\n"
        "    for s in gb.find_assignment(sys.argv[1]).submissions:\n"
        "        manual = sum(g.max_score for nb in s.notebooks for g in nb.grades if g.needs_manual_grade)\n"
        "        out[s.student.id] = {'score': s.score, 'max_score': s.max_score, 'manual': manual,\n"
        "                             'late': s.total_seconds_late}\n"
        "print(json.dumps(out))\n"
    )
    python = hh.preparar.bin_dos_usuarios(turma["estado"], "local") / "python"
    r = hh.as_user(turma["prof"], [str(python), "-c", code, CHAPTER], turma["curso"], turma["estado"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_professor_tem_o_formgrader_e_o_curso(turma, browser):
    context, page = login(browser, turma, turma["prof"])
    try:
        page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").first.click()
        entries = [t.strip() for t in page.locator(".lm-Menu-itemLabel").all_text_contents() if t.strip()]
        assert "Formgrader" in entries, f"o professor devia ter o formgrader no menu; viu {entries}"
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Formgrader$")).first.click()
        # O formgrader lê o gradebook do professor: o capítulo publicado e as entregas corrigidas.
        api = page.request.get(f"{turma['hub'].base}/user/{turma['prof']}/formgrader/api/assignments")
        assert api.status == 200, f"formgrader: HTTP {api.status}"
        assignments = {a["name"]: a for a in api.json()}
        assert CHAPTER in assignments, f"o formgrader não mostra {CHAPTER}: {list(assignments)}"
        # A página do formgrader, aberta direto (na aba do JupyterLab, o iframe dele aparece em
        # branco neste Chromium sem tela: "127.0.0.1 refused to connect").
        page.goto(f"{turma['hub'].base}/user/{turma['prof']}/formgrader")
        page.locator("text=" + CHAPTER).first.wait_for(timeout=60_000)
        shot(page, "08_professor_formgrader")
        listing = page.request.get(
            f"{turma['hub'].base}/user/{turma['prof']}/api/contents/transformers-do-zero"
        )
        names = {item["name"] for item in listing.json()["content"]}
        assert {"source", "solutions", "release", "nbgrader_config.py"} <= names, names
    finally:
        context.close()


def test_aluno_nao_le_arquivos_dos_outros_nem_do_professor(turma):
    ana, beto, estado = turma["ana"], turma["beto"], turma["estado"]
    course, exchange = turma["curso"], turma["exchange"]
    own = hh.home(ana) / CHAPTER / f"{CHAPTER}.ipynb"
    assert hh.user_can_read(ana, own, estado), "controle: Ana devia ler o próprio notebook"
    assert hh.user_can_read(ana, exchange / "outbound" / CHAPTER, estado), (
        "controle: Ana lê o que foi publicado"
    )
    forbidden = {
        "entregas no exchange (inbound)": exchange / "inbound",
        "devolutivas no exchange": exchange / "feedback",
        "pasta pessoal de Beto": hh.home(beto),
        "notebook de Beto": hh.home(beto) / CHAPTER / f"{CHAPTER}.ipynb",
        "devolutiva de Beto": next((hh.home(beto) / CHAPTER / "feedback").glob(f"*/{CHAPTER}.html")),
        "source/ do professor": course / "source" / CHAPTER / f"{CHAPTER}.ipynb",
        "solutions/ do professor": course / "solutions" / CHAPTER / f"{CHAPTER}.ipynb",
        "gradebook do professor": course / "grading" / "gradebook.db",
        "entregas recolhidas": course / "grading" / "submitted",
        "solutions/ do repositório": ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb",
        "source/ do repositório": ROOT / "source" / CHAPTER / f"{CHAPTER}.ipynb",
        "contas e senhas do hub": estado / "hub" / "contas.json",
    }
    readable = [what for what, path in forbidden.items() if hh.user_can_read(ana, path, estado)]
    assert not readable, f"Ana consegue ler: {readable}"


def user_server_process(name: str) -> Path:
    """O /proc do ``jupyterhub-singleuser`` do usuário (o servidor que o hub iniciou para ele)."""
    uid = hh.pwd.getpwnam(name).pw_uid
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and proc.stat().st_uid == uid:
                if b"jupyterhub-singleuser" in (proc / "cmdline").read_bytes():
                    return proc
        except OSError:
            continue
    raise AssertionError(f"o servidor de {name} não está rodando")


def test_servidores_dos_usuarios_nao_leem_o_repositorio(turma):
    """O repositório pode estar numa pasta fechada (um ``mktemp -d``): o servidor de um aluno acha os
    perfis, o JupyterLab e o pacote do curso fora dele (quando o hub usa o ambiente-sombra)."""
    ana, estado = turma["ana"], turma["estado"]
    proc = user_server_process(ana)
    env = dict(item.split("=", 1) for item in (proc / "environ").read_text().split("\0") if "=" in item)
    config = env["JUPYTER_CONFIG_PATH"].split(os.pathsep)
    inside = [p for p in config if Path(p).resolve().is_relative_to(ROOT)]
    assert not inside, f"o JUPYTER_CONFIG_PATH de {ana} aponta para dentro do repositório: {inside}"
    bin_dir = Path(env["PATH"].split(os.pathsep)[0])
    if not bin_dir.is_relative_to(estado):
        return  # o .venv do curso é alcançável por todos: o hub não criou o ambiente-sombra
    python = bin_dir / "python"
    code = (
        "import jupyterlab, transformer_course\n"
        "from jupyterlab.commands import get_app_dir\n"
        "print(transformer_course.__file__); print(get_app_dir())"
    )
    r = hh.as_user(ana, [str(python), "-c", code], Path("/"), estado)
    assert r.returncode == 0, r.stderr[-2000:]
    package, app_dir = r.stdout.split()
    for what, path in (("pacote do curso", package), ("JupyterLab (share/jupyter/lab)", app_dir)):
        assert Path(path).resolve().is_relative_to(estado), (
            f"{what} de {ana} vem de {path}, fora da pasta de estado {estado}"
        )


def test_aluno_nao_entra_no_servidor_de_outro_pela_api(turma):
    hub, ana, beto, prof = turma["hub"], turma["ana"], turma["beto"], turma["prof"]
    context, _ = turma["pages"]["ana"]
    mine = context.request.get(f"{hub.base}/user/{ana}/api/contents/{CHAPTER}")
    assert mine.status == 200 and mine.json()["type"] == "directory", "controle: Ana lista a própria pasta"
    for url in (
        f"{hub.base}/user/{beto}/api/contents/{CHAPTER}",
        f"{hub.base}/user/{beto}/files/{CHAPTER}/{CHAPTER}.ipynb",
        f"{hub.base}/user/{prof}/api/contents/transformers-do-zero/solutions",
        f"{hub.base}/user/{prof}/formgrader",
        f"{hub.base}/hub/api/users/{beto}",
        f"{hub.base}/hub/api/users",
    ):
        response = context.request.get(url, max_redirects=5)
        body = response.text()
        assert response.status in (403, 404) or (response.status == 200 and '"content"' not in body), (
            f"Ana acessou {url}: HTTP {response.status}\n{body[:300]}"
        )
        # A página de erro pode repetir o endereço pedido; fora dele, nada do conteúdo de outro.
        echo = body.replace(url, "").replace(url.removeprefix(hub.base), "")
        assert '"type": "notebook"' not in echo and '"cells"' not in echo, (url, echo[:300])


def hub_pids(turma) -> set[int]:
    """O hub, seus descendentes (proxy, servidores, kernels) e todo processo dos usuários do teste."""
    uids = {hh.pwd.getpwnam(n).pw_uid for n in turma["names"]}
    pids, parent = {turma["hub"].process.pid}, {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                parent[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if proc.stat().st_uid in uids:
                    pids.add(int(proc.name))
            except (OSError, ValueError, IndexError):
                continue
    grew = True
    while grew:
        new = {pid for pid, ppid in parent.items() if ppid in pids} - pids
        pids |= new
        grew = bool(new)
    return pids


def test_hub_so_escuta_em_127_0_0_1(turma):
    """Todo socket em escuta do hub, do proxy e dos servidores dos usuários está em 127.0.0.1."""
    hub = turma["hub"]
    pids = hub_pids(turma)
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A = LISTEN
                listening.append(fields[1])
    assert len(listening) >= 3, f"esperava hub, proxy e servidores em escuta; achei {listening}"
    loopback = {"0100007F", "00000000000000000000000001000000"}
    exposed = [addr for addr in listening if addr.split(":")[0] not in loopback]
    assert not exposed, f"sockets em escuta fora de 127.0.0.1: {exposed}"
    assert any(addr.endswith(f":{hub.port:04X}") for addr in listening), (
        "o proxy do hub não está na porta pedida"
    )


def test_senhas_e_tokens_fora_dos_logs_e_do_repositorio(turma):
    secrets_found = {f"senha de {n}": c["senha"] for n, c in turma["contas"].items()}
    for pid in hub_pids(turma):
        proc = Path(f"/proc/{pid}")
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in environ:
            key, _, value = item.decode(errors="replace").partition("=")
            if key in ("JUPYTERHUB_API_TOKEN", "CONFIGPROXY_AUTH_TOKEN") and len(value) >= 16:
                secrets_found[f"{key} (pid {proc.name})"] = value
    assert any(k.startswith("JUPYTERHUB_API_TOKEN") for k in secrets_found), (
        "não achei o token de nenhum servidor"
    )
    assert any(k.startswith("CONFIGPROXY_AUTH_TOKEN") for k in secrets_found), "não achei o token do proxy"
    logs = {p.name: p.read_text(errors="replace") for p in SHOTS.glob("*.log")}
    logs["relatorio"] = (SHOTS / "relatorio_da_turma.txt").read_text(errors="replace")
    leaks = [
        f"{what} em {log}"
        for what, value in secrets_found.items()
        for log, text in logs.items()
        if value in text
    ]
    assert not leaks, f"segredos nos logs: {leaks}"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    assert b"contas.json" not in tracked and b"jupyterhub_cookie_secret" not in tracked
    for what, value in secrets_found.items():
        # -e: uma senha pode começar com "-" (token_urlsafe) e viraria uma opção do git grep
        grep = subprocess.run(["git", "grep", "-q", "-F", "-e", value], cwd=ROOT, capture_output=True)
        assert grep.returncode != 0, f"{what} aparece num arquivo do repositório"
        assert grep.returncode == 1, f"git grep falhou ({grep.returncode}): {grep.stderr.decode()}"
    assert (turma["estado"] / "hub" / "contas.json").stat().st_mode & 0o777 == 0o600


# Num terminal do JupyterLab do professor: o que o kernel da correção mostraria do ambiente e do /proc.
HUB_ATTACK = """
import glob, os
MARCA = "KERNEL-" + "NO-TERMINAL"
os.write(1, (MARCA + "\\x1b[2J\\n").encode())
os.write(2, (MARCA + "\\n").encode())
print("AMBIENTE:", dict(os.environ))
for caminho in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
    try:
        print(caminho, open(caminho, "rb").read())
    except OSError as exc:
        print(caminho, type(exc).__name__)
"""

TERMINAL_JS = """
async ([base, cmd, limitMs]) => {
  const cookie = document.cookie.split('; ').find(c => c.startsWith('_xsrf=')) || '_xsrf=';
  const xsrf = decodeURIComponent(cookie.slice(6));
  const r = await fetch(base + 'api/terminals', {method: 'POST', headers: {'X-XSRFToken': xsrf}});
  if (!r.ok) return 'POST api/terminals: ' + r.status;
  const term = await r.json();
  const ws = new WebSocket(`ws://${location.host}${base}terminals/websocket/${term.name}`);
  let out = '';
  return await new Promise((resolve) => {
    const timer = setTimeout(() => { ws.close(); resolve(out + '\\n[PRAZO ESGOTADO]'); }, limitMs);
    ws.onopen = () => ws.send(JSON.stringify(['stdin', cmd + '\\r']));
    ws.onerror = () => { clearTimeout(timer); resolve(out + '\\n[ERRO NO WEBSOCKET]'); };
    ws.onmessage = (ev) => {
      const msg = JSON.parse(ev.data);
      if (msg[0] !== 'stdout') return;
      out += msg[1];
      if (/FIM-DA-CORRECAO:\\d+/.test(out)) { clearTimeout(timer); ws.close(); resolve(out); }
    };
  });
}
"""


def test_correcao_num_terminal_do_hub_nao_vaza_o_token(turma, browser):
    """O professor corrige a turma num terminal do JupyterLab do hub (o ambiente dele tem
    ``JPY_API_TOKEN``/``JUPYTERHUB_API_TOKEN``, que abrem a conta dele no hub): uma entrega que
    imprime ``os.environ`` e o ``/proc`` não recebe o token, nem o põe na versão corrigida, na
    devolutiva ou no terminal."""
    import nbformat

    prof, hub = turma["prof"], turma["hub"]
    context, page = login(browser, turma, prof)
    try:
        environ = dict(
            item.split("=", 1)
            for item in (user_server_process(prof) / "environ").read_bytes().decode().split("\0")
            if "=" in item
        )
        token = environ.get("JPY_API_TOKEN") or environ.get("JUPYTERHUB_API_TOKEN")
        assert token and len(token) >= 16, sorted(environ)
        # O token é de verdade: abre a conta do professor na API do hub.
        request = hh.urllib.request.Request(
            f"{hub.base}/hub/api/user", headers={"Authorization": f"token {token}"}
        )
        with hh.urllib.request.urlopen(request, timeout=30) as response:
            assert json.loads(response.read())["name"] == prof

        curso = turma["curso"]
        solution = nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
        for cell in solution.cells:
            cell.source = re.sub(
                r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", cell.source, flags=re.S
            )
        first = next(i for i, c in enumerate(solution.cells) if c.cell_type == "code")
        solution.cells.insert(first + 1, nbformat.v4.new_code_cell(HUB_ATTACK))
        student = "tdzhostil"
        target = curso / "grading" / "submitted" / student / CHAPTER / f"{CHAPTER}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(solution, target)
        hh.preparar.chown_tree(curso / "grading", prof)

        # O shell de login do terminal refaz o PATH (/etc/profile): o Python do hub, pelo caminho.
        python = hh.preparar.bin_dos_usuarios(turma["estado"], "local") / "python"
        command = (
            "cd ~/" + hh.preparar.COURSE_DIRNAME + " && echo TEM-TOKEN:${JPY_API_TOKEN:+sim} && "
            f"{python} scripts/grade_class.py {CHAPTER} --workers=1; echo FIM-DA-CORRECAO:$?"
        )
        start = time.monotonic()
        screen = page.evaluate(TERMINAL_JS, [f"/user/{prof}/", command, 900_000])
        MEASURES["correcao_no_terminal_do_hub_s"] = round(time.monotonic() - start, 1)
        (SHOTS / "terminal_do_professor.txt").write_text(screen)
    finally:
        context.close()
    assert "TEM-TOKEN:sim" in screen, screen[-3000:]  # a correção rodou com o token no ambiente
    assert "FIM-DA-CORRECAO:0" in screen, screen[-3000:]
    assert re.search(rf"{student}\s+7/7", screen), screen[-3000:]
    assert "KERNEL-NO-TERMINAL" not in screen  # o que o kernel escreve nos fds 1 e 2 não chega ao terminal
    graded = curso / "grading" / "autograded" / student / CHAPTER / f"{CHAPTER}.ipynb"
    feedback = curso / "grading" / "feedback" / student / CHAPTER / f"{CHAPTER}.html"
    texts = {p.name: p.read_text(errors="replace") for p in (graded, feedback)}
    assert "AMBIENTE:" in texts[graded.name], "o ataque não rodou"
    for name, text in {**texts, "terminal": screen}.items():
        assert token not in text, f"o token do hub apareceu em {name}"
    for name, text in texts.items():  # nem as variáveis (o terminal mostra o comando digitado)
        assert "JPY_" not in text and "JUPYTERHUB_" not in text, name


def _reference_as(name: str, estado: Path) -> subprocess.CompletedProcess:
    """O que o kernel de ``name`` vê da referência de ``scaled_dot_product_attention``: o ambiente do
    servidor dele (o PATH e o PYTHONPATH que o hub deu), perguntado como ele."""
    proc = user_server_process(name)
    env = dict(item.split("=", 1) for item in (proc / "environ").read_text().split("\0") if "=" in item)
    python = Path(env["PATH"].split(os.pathsep)[0]) / "python"
    code = (
        "import inspect, transformer_course.attention as a\n"
        "print(inspect.getsource(a.scaled_dot_product_attention))\n"
        "print('ARQUIVO', a.__file__)\n"
    )
    cmd = ["env", f"PYTHONPATH={env.get('PYTHONPATH', '')}", str(python), "-c", code]
    return hh.as_user(name, cmd, Path("/"), estado)


def test_gabarito_fica_com_o_professor_ate_ser_liberado(turma):
    """Roda por último (libera o gabarito do capítulo 2): antes, a conta de Ana não lê a referência
    de ``scaled_dot_product_attention`` nem pelo pacote instalado; depois de ``--liberar-gabarito``, lê."""
    ana, estado = turma["ana"], turma["estado"]
    before = _reference_as(ana, estado)
    assert before.returncode == 0, before.stderr[-2000:]
    assert "math.sqrt" not in before.stdout and "softmax" not in before.stdout, before.stdout
    package = Path(before.stdout.split("ARQUIVO", 1)[1].strip()).parent
    leaks = []
    for path in package.rglob("*.py"):
        if hh.user_can_read(ana, path, estado) and "def scaled_dot_product_attention" in path.read_text():
            text = path.read_text()
            body = text.split("def scaled_dot_product_attention", 1)[1][:1500]
            if "softmax" in body:
                leaks.append(str(path))
    assert not leaks, f"Ana lê a referência em {leaks}"
    r = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "python"),
            str(ROOT / "hub" / "preparar.py"),
            "--estado",
            str(estado),
            "--liberar-gabarito",
            CHAPTER,
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    after = _reference_as(ana, estado)
    assert after.returncode == 0, after.stderr[-2000:]
    assert "softmax" in after.stdout, after.stdout
