"""Ferramentas do teste de navegador: um JupyterLab isolado e as ações de um aluno na interface.

O servidor é o ``jupyter lab`` do ambiente do curso (com a configuração que ``make lab`` instala:
interface em pt-BR e só as ferramentas do nbgrader de aluno), mas com pastas de usuário
temporárias, para que nada do ``~/.jupyter`` de quem roda os testes interfira.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
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
SOLUTIONS_DIR = "_solucoes"  # onde as soluções ficam dentro da pasta de trabalho temporária


def discover_chapters() -> list[str]:
    """Os capítulos do curso (``transformer_course.course.CHAPTERS``)."""
    from transformer_course.course import CHAPTERS

    return list(CHAPTERS)


def _script(name: str):
    """Importa um módulo de ``scripts/`` (o mesmo código que ``make lab`` roda)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def make_test_workspace(target: Path) -> Path:
    """Pasta de trabalho como a do aluno (``scripts/make_workspace.py``), mais as soluções ao lado."""
    _script("make_workspace").make_workspace(target)
    for folder in sorted((ROOT / "solutions").glob("[0-9][0-9]_*")):
        shutil.copytree(
            folder,
            target / SOLUTIONS_DIR / folder.name,
            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"),
        )
    return target


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Preferência só do teste (pasta de usuário temporária): todas as células ficam no DOM.
TEST_USER_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


class LabServer:
    """Um ``jupyter lab`` em 127.0.0.1, porta livre, token aleatório, pastas de usuário temporárias."""

    def __init__(self, root_dir: Path, scratch: Path, log_path: Path):
        self.root_dir = root_dir
        self.port = free_port()
        self.token = secrets.token_hex(24)
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.scratch = scratch
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> LabServer:
        # As preferências do aluno como ``scripts/configure_lab.py`` as semeia (idioma pt_BR), numa
        # cópia temporária; o resto da configuração é a do ambiente (``<venv>/etc/jupyter``).
        settings = self.scratch / "user-settings"
        _script("configure_lab").seed_user_settings(settings)
        for name, value in TEST_USER_SETTINGS.items():
            path = settings / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))
        env = {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "JUPYTER_CONFIG_DIR": str(self.scratch / "config"),
            "JUPYTER_DATA_DIR": str(self.scratch / "data"),
            "JUPYTER_RUNTIME_DIR": str(self.scratch / "runtime"),
            "IPYTHONDIR": str(self.scratch / "ipython"),
        }
        env.pop("JUPYTERLAB_SETTINGS_DIR", None)
        env.pop("JUPYTERLAB_WORKSPACES_DIR", None)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [
                str(BIN / "jupyter"),
                "lab",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root_dir}",
                f"--LabApp.user_settings_dir={settings}",
                f"--LabApp.workspaces_dir={self.scratch / 'workspaces'}",
                *(["--allow-root"] if os.geteuid() == 0 else []),
            ],
            cwd=self.root_dir,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"o JupyterLab terminou ao iniciar; veja {self.log_path}:\n{self.log_tail()}"
                )
            try:
                self.api("GET", "/api/status")
                return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        raise RuntimeError(f"o JupyterLab não respondeu em {timeout:.0f} s; veja {self.log_path}")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def api(self, method: str, path: str, timeout: float = 10):
        request = urllib.request.Request(
            self.base + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def url(self, path: str = "") -> str:
        return f"{self.base}/lab/tree/{path}?reset&token={self.token}"

    def notebook_json(self, path: str) -> dict:
        return self.api("GET", f"/api/contents/{path}?content=1")["content"]

    def kernels_busy(self) -> bool:
        return any(k["execution_state"] != "idle" for k in self.api("GET", "/api/kernels"))

    def shutdown_kernels(self) -> None:
        """Encerra todas as sessões (e kernels): cada capítulo começa com a máquina livre."""
        try:
            for session in self.api("GET", "/api/sessions"):
                self.api("DELETE", f"/api/sessions/{session['id']}", timeout=30)
            for kernel in self.api("GET", "/api/kernels"):
                self.api("DELETE", f"/api/kernels/{kernel['id']}", timeout=30)
        except (urllib.error.URLError, OSError):
            pass

    def stop(self) -> None:
        """Desliga o servidor e seus kernels (SIGTERM ao grupo, depois SIGKILL)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.shutdown_kernels()
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=10)
        finally:
            self._log.close()


# ---------------------------------------------------------------------- ações na interface


def error_outputs(nb: dict) -> list[tuple[int, dict]]:
    return [
        (i, out)
        for i, cell in enumerate(nb["cells"])
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]


DIALOG_LOG = ROOT / "artifacts" / "screenshots" / "dialogos.txt"


def dismiss_dialogs(page, where: str) -> list[str]:
    """Fecha (aceitando) os diálogos do JupyterLab abertos agora; devolve os textos deles.

    Um diálogo que aparece sozinho (escolha de kernel, kernel reiniciado...) bloqueia todo clique na
    página. Cada um fica registrado em ``artifacts/screenshots/dialogos.txt``, com ``where``.
    """
    seen = []
    for _ in range(5):
        dialog = page.locator(".jp-Dialog")
        if not dialog.count():
            break
        try:
            text = " ".join(dialog.first.inner_text(timeout=2000).split())[:300]
            accept = dialog.first.locator(".jp-mod-accept")
            (accept.first if accept.count() else dialog.first.locator(".jp-Dialog-button").last).click(
                timeout=5000
            )
        except Exception as error:  # noqa: BLE001 - o diálogo fechou sozinho no meio
            text = f"(sumiu: {type(error).__name__})"
        seen.append(text)
        page.wait_for_timeout(300)
    if seen:
        DIALOG_LOG.parent.mkdir(parents=True, exist_ok=True)
        with DIALOG_LOG.open("a") as fh:
            stamp = time.strftime("%H:%M:%S")
            fh.writelines(f"{stamp} {where}: {text}\n" for text in seen)
    return seen


NOTEBOOK_STATUS_JS = """
() => {
  // O notebook da aba atual: o estado do kernel dele (não o de uma aba que ainda está fechando).
  const panels = [...document.querySelectorAll('.jp-NotebookPanel')];
  const panel = panels.find(p => !p.classList.contains('lm-mod-hidden'));
  const selector = '.jp-Notebook-ExecutionIndicator';
  const n = (panel && panel.querySelector(selector)) || document.querySelector(selector);
  return n ? n.getAttribute('data-status') : null;
}
"""


def wait_for_notebook(page, timeout_ms: int = 60_000) -> None:
    """Espera o notebook abrir com o kernel conectado e ocioso (fecha os diálogos que aparecerem).

    Ocioso duas vezes seguidas, 0,5 s uma da outra: logo ao abrir, o indicador pode dizer "idle"
    antes de o kernel existir.
    """
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=timeout_ms)
    deadline = time.monotonic() + timeout_ms / 1000
    idle = 0
    while time.monotonic() < deadline:
        dismiss_dialogs(page, "esperando o notebook abrir")
        idle = idle + 1 if page.evaluate(NOTEBOOK_STATUS_JS) == "idle" else 0
        if idle >= 2:
            return
        page.wait_for_timeout(500)


def click_menu(page, menu: str, item, timeout_s: float = 30) -> None:
    """Abre um menu da barra principal pelo nome e clica num item (texto exato ou regex).

    Um diálogo aberto no caminho (ele intercepta os cliques) é fechado e o clique, repetido.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        dismiss_dialogs(page, f"antes do menu {menu}")
        try:
            page.locator(".lm-MenuBar-itemLabel", has_text=menu).first.click(timeout=5000)
            entry = page.locator(".lm-Menu-itemLabel").filter(has_text=item).first
            entry.wait_for(state="visible", timeout=5000)
            entry.click(timeout=5000)
            return
        except Exception:
            if time.monotonic() > deadline or not page.locator(".jp-Dialog").count():
                raise
            page.keyboard.press("Escape")  # o menu que ficou aberto atrás do diálogo


def close_all_tabs(page) -> None:
    """Arquivo > Fechar todas as abas (descartando o que não foi salvo, se perguntar)."""
    page.keyboard.press("Escape")
    click_menu(page, "Arquivo", re.compile(r"^Fechar todas as abas$"))
    page.wait_for_timeout(300)
    for _ in range(10):
        dialog = page.locator(".jp-Dialog")
        if not dialog.count():
            break
        buttons = dialog.locator(".jp-Dialog-button")
        # "Descartar"/"Discard" é o botão de aviso; senão, o de aceitar.
        warn = dialog.locator(".jp-Dialog-button.jp-mod-warn")
        (warn.first if warn.count() else buttons.last).click()
        page.wait_for_timeout(300)
    page.wait_for_function("() => !document.querySelector('.jp-NotebookPanel')", timeout=10_000)


PROMPTS_JS = """
() => {
  const texts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent);
  return {running: texts.some(t => t.includes('[*]')), done: texts.filter(t => /\\[\\d+\\]/.test(t)).length};
}
"""


def run_all_and_wait(page, server: LabServer, timeout_s: float = 240) -> float:
    """Executar > Executar todas as células; espera o kernel ficar ocioso. Devolve os segundos.

    Se nada começou a rodar (o clique chegou antes de o kernel ficar pronto), clica de novo.
    """
    start = time.monotonic()
    deadline = start + timeout_s
    for attempt in range(3):
        page.keyboard.press("Escape")
        click_menu(page, "Executar", re.compile(r"^Executar (todos|todas as células)$"))
        try:
            page.wait_for_function(f"({PROMPTS_JS})().running || ({PROMPTS_JS})().done > 0", timeout=20_000)
            break
        except Exception:  # noqa: BLE001 - nada começou: tenta de novo
            if attempt == 2:
                raise AssertionError("Executar todas as células não começou a execução") from None
    quiet = 0
    while time.monotonic() < deadline:
        state = page.evaluate(PROMPTS_JS)
        quiet = quiet + 1 if not state["running"] and not server.kernels_busy() else 0
        if quiet >= 3:
            return time.monotonic() - start
        page.wait_for_timeout(500)
    raise AssertionError(f"o notebook não terminou de executar em {timeout_s:.0f} s")


def save_notebook(page, timeout_ms: int = 30_000) -> None:
    """Arquivo > Salvar; espera a aba perder a marca de modificado."""
    page.keyboard.press("Control+s")
    page.wait_for_function(
        "() => !document.querySelector('.jp-mod-current.jp-mod-dirty')", timeout=timeout_ms
    )
    page.wait_for_timeout(500)


# A imagem de uma exploração: um ipywidgets.Image (``widgets/_view.py``) ou, em widgets antigos,
# a figura dentro de um interactive_output.
WIDGET_IMAGE = "img.widget-image, .widget-output img"

FIND_WIDGET_JS = """
() => {
  // O bloco de saída da célula que tem controles e uma imagem de widget já com figura.
  for (const img of document.querySelectorAll('.jp-OutputArea-output img.widget-image,'
                                              + ' .jp-OutputArea-output .widget-output img')) {
    if (!img.getAttribute('src')) continue;
    const area = img.closest('.jp-OutputArea-output');
    area.setAttribute('data-curso-widget', '1');
    return true;
  }
  return false;
}
"""


def widget_image_src(area) -> str:
    images = area.locator(WIDGET_IMAGE)
    return images.first.get_attribute("src") or "" if images.count() else ""


# Cronômetro dentro do navegador, do keydown (o aluno aperta a seta) até:
# - "src": o atributo src da imagem mudar (um MutationObserver anota o instante exato);
# - "tela": a imagem nova decodificada (img.decode()) e o quadro seguinte (requestAnimationFrame),
#   quando ela pode estar na tela.
# A promessa fica em window.__cursoLatency e resolve com {src, tela} em ms, ou null.
LATENCY_JS = """
([area, selector, timeoutMs]) => { window.__cursoLatency = new Promise(resolve => {
  const img = area.querySelector(selector);
  if (!img) { resolve(null); return; }
  const before = img.getAttribute('src');
  let t0 = null, done = false, timer = null;
  const onKey = () => { if (t0 === null) t0 = performance.now(); };
  const observer = new MutationObserver(() => {
    const now = performance.now();
    if (t0 === null || done || img.getAttribute('src') === before) return;
    const src = now - t0;
    observer.disconnect();
    img.decode().catch(() => null).then(() => requestAnimationFrame(() => {
      finish({src: src, tela: performance.now() - t0});
    }));
  });
  const finish = value => {
    if (done) return;
    done = true;
    observer.disconnect();
    clearTimeout(timer);
    document.removeEventListener('keydown', onKey, {capture: true});
    resolve(value);
  };
  document.addEventListener('keydown', onKey, {capture: true, once: true});
  observer.observe(img, {attributes: true, attributeFilter: ['src']});
  timer = setTimeout(() => finish(null), timeoutMs);
}); }
"""


def slider_latencies(page, area, presses: int = 6, timeout_s: float = 20) -> list[dict]:
    """Aperta a seta para a direita ``presses`` vezes no primeiro deslizador do widget e devolve, por
    toque, ``{"src": ms, "tela": ms}``: o tempo até o src da imagem mudar e até a imagem nova,
    decodificada, poder estar na tela (medidos no navegador). Só mede; não afirma nada."""
    handle = area.locator(".widget-slider .noUi-handle").first
    if not area.locator(".widget-slider .noUi-handle").count():
        return []
    handle.scroll_into_view_if_needed()
    handle.focus()
    page.wait_for_timeout(1500)  # a pausa de quem olha a figura (o pré-cálculo termina)
    samples = []
    element = area.element_handle()
    for _ in range(presses):
        page.evaluate(LATENCY_JS, [element, WIDGET_IMAGE, timeout_s * 1000])
        handle.focus()
        page.keyboard.press("ArrowRight")
        value = page.evaluate("() => window.__cursoLatency")
        if value is None:
            break  # fim do deslizador ou a imagem não mudou
        samples.append({name: round(float(value[name]), 1) for name in ("src", "tela")})
        page.wait_for_timeout(800)
    return samples


def _stats(values: list[float]) -> tuple[float | None, float | None]:
    """Mediana e p95 de uma lista de ms (``None`` sem amostras)."""
    ordered = sorted(values)
    if not ordered:
        return None, None
    return statistics.median(ordered), ordered[min(len(ordered) - 1, -(-95 * len(ordered) // 100) - 1)]


def record_latency(path: Path, chapter: str, samples: list[dict], note: str = "") -> dict:
    """Acrescenta as latências de um capítulo ao JSON de ``path``: mediana e p95 até o src mudar
    (``mediana_ms``, ``p95_ms``) e até a imagem poder estar na tela (``tela_*``), com a carga."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    src = [sample["src"] for sample in samples]
    screen = [sample["tela"] for sample in samples]
    median, p95 = _stats(src)
    screen_median, screen_p95 = _stats(screen)
    entry = {
        "amostras_ms": src,
        "mediana_ms": median,
        "p95_ms": p95,
        "tela_amostras_ms": screen,
        "tela_mediana_ms": screen_median,
        "tela_p95_ms": screen_p95,
        "carga": round(os.getloadavg()[0], 2),
        "quando": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    if note:
        entry["nota"] = note
    data[chapter] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
    return entry


def change_widget(page, area) -> str:
    """Muda o primeiro controle do widget como uma pessoa: teclado no deslizador (seta para a
    direita), ou a próxima opção da lista. Devolve a descrição do que foi feito."""
    sliders = area.locator(".widget-slider .noUi-handle")
    if sliders.count():
        handle = sliders.first
        handle.scroll_into_view_if_needed()
        handle.click()
        handle.focus()
        page.keyboard.press("ArrowRight")
        label = area.locator(".widget-slider .widget-label").first.text_content() or "deslizador"
        return f"deslizador {label.strip()!r}: seta para a direita"
    selects = area.locator(".widget-dropdown select")
    if selects.count():
        select = selects.first
        options = select.locator("option").all_text_contents()
        current = select.input_value()
        values = select.locator("option").evaluate_all("os => os.map(o => o.value)")
        target = values[(values.index(current) + 1) % len(values)]
        select.select_option(target)
        return f"lista: {options[values.index(target)]!r}"
    buttons = area.locator(".widget-toggle-buttons button:not(.mod-active)")
    if buttons.count():
        text = buttons.first.text_content()
        buttons.first.click()
        return f"botão {text!r}"
    raise AssertionError("o widget não tem deslizador, lista nem botões de alternância")


def drag_slider(page, area) -> str:
    """Plano B: clica no trilho do primeiro deslizador, a 80% do comprimento."""
    track = area.locator(".widget-slider .noUi-target").first
    box = track.bounding_box()
    page.mouse.click(box["x"] + 0.8 * box["width"], box["y"] + box["height"] / 2)
    return "deslizador: clique no trilho"
