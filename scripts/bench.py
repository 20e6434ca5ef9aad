"""Benchmarks do curso (`make bench`): imprime números, não faz asserções de tempo.

1. o piso: iniciar um kernel e importar torch + transformer_course (medido nesta mesma rodada), e
   o custo da primeira célula (as importações) de cada capítulo;
2. o tempo de execução de cada capítulo (notebook de source/, de ponta a ponta, sem NBGRADER_EXECUTION);
3. o tempo de `nbgrader autograde` por notebook (o gabarito como entrega; NBGRADER_EXECUTION é
   definido pelo próprio nbgrader), numa cópia temporária do curso, e a razão para o piso;
4. o tempo de resposta de cada exploração (mediana e p95): antes (``update`` + ``print_figure`` como
   o JupyterLab exibia a figura), na 1ª visita a um estado (``update`` + um desenho PNG) e num
   passeio pelos controles do widget de verdade (cache + pré-cálculo dos vizinhos). Cada
   ``widgets/chNN.py`` declara ``BENCH = [(fábrica, [kwargs, ...])]`` e ``BENCH_WIDGET``; a latência
   no navegador vem de ``artifacts/bench/browser_latency.json`` (gravado por tests/test_browser.py);
5. o forward do ``MultiHeadAttention`` de referência ÷ ``nn.MultiheadAttention``, lado a lado;
6. o custo de cada verificação visível, exercício por exercício, com a referência como resposta
   (a lista vem do registro de exercícios, ``transformer_course.exercises``).

Metas: capítulo ≤ 45 s, curso ≤ 3 min, correção ≤ 2× o piso por notebook, exploração com mediana
≤ 50 ms e p95 ≤ 100 ms. Numa máquina ocupada os tempos absolutos oscilam: compare as razões.

Uso: python scripts/bench.py [--skip-notebooks] [--skip-autograde] [--skip-widgets]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from transformer_course.course import CHAPTERS
from transformer_course.instructor.nbgrader_run import run_nbgrader

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run_notebook(nb, cwd: Path) -> float:
    start = time.perf_counter()
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    ).execute()
    return time.perf_counter() - start


def floor() -> float:
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import torch\n"
                "import transformer_course.checks, transformer_course.plots, transformer_course.widgets"
            )
        ]
    )
    with tempfile.TemporaryDirectory() as tmp:
        return run_notebook(nb, Path(tmp))


def first_cells() -> dict[str, tuple[float, float]]:
    """Custo da primeira célula de código de cada capítulo (as importações), num kernel novo.

    Devolve, por capítulo, (``import torch`` sozinho, o resto da primeira célula), medidos dentro
    do kernel: o que o aluno espera antes de a primeira figura aparecer, além da partida do kernel.
    """
    costs = {}
    for chapter in CHAPTERS:
        source = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
        first = next(c for c in source.cells if c.cell_type == "code")
        nb = nbformat.v4.new_notebook(
            cells=[
                nbformat.v4.new_code_cell(
                    "import time as _bench_t\n_bench_a = _bench_t.perf_counter()\nimport torch\n"
                    "_bench_b = _bench_t.perf_counter()"
                ),
                nbformat.v4.new_code_cell(first.source),
                nbformat.v4.new_code_cell("print(_bench_b - _bench_a, _bench_t.perf_counter() - _bench_b)"),
            ]
        )
        with tempfile.TemporaryDirectory() as tmp:
            run_notebook(nb, Path(tmp))
        torch_s, rest_s = map(float, nb.cells[-1].outputs[0]["text"].split())
        costs[chapter] = (torch_s, rest_s)
        print(f"  {chapter:28s} import torch {torch_s:4.1f} s + resto {rest_s:4.1f} s", flush=True)
    return costs


def notebooks() -> dict[str, float]:
    """Executa cada capítulo; do 7, mostra também o relatório do treino do GPT (passos, perda, threads)."""
    times = {}
    for chapter in CHAPTERS:
        path = ROOT / "source" / chapter / f"{chapter}.ipynb"
        nb = nbformat.read(path, as_version=4)
        with tempfile.TemporaryDirectory() as tmp:
            times[chapter] = run_notebook(nb, Path(tmp))
        print(f"  {chapter:28s} {times[chapter]:6.1f} s", flush=True)
        for line in _training_report_lines(nb):
            print(f"      {line}", flush=True)
    return times


def _training_report_lines(nb) -> list[str]:
    """As linhas do ``training_report`` do GPT (capítulo 7) nas saídas do notebook executado."""
    for cell in nb.cells:
        if cell.cell_type == "code" and "training_report(" in cell.source:
            text = "".join(
                o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream"
            )
            return [line for line in text.splitlines() if line.strip()]
    return []


FLOOR_ASSIGNMENT = "00_piso"


def autograde() -> dict[str, float]:
    """``nbgrader autograde`` de cada capítulo e, em ``FLOOR_ASSIGNMENT``, o de um notebook que só tem
    a primeira célula do capítulo 7 (as importações): o piso da correção, com a partida do próprio
    nbgrader, do isolamento e do kernel."""
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        shutil.copy2(ROOT / "nbgrader_config.py", course)
        for part in ("source", "release", "solutions"):
            shutil.copytree(ROOT / part, course / part)
        last = nbformat.read(course / "source" / CHAPTERS[-1] / f"{CHAPTERS[-1]}.ipynb", as_version=4)
        floor_nb = nbformat.v4.new_notebook(
            cells=[next(c for c in last.cells if c.cell_type == "code")], metadata=last.metadata
        )
        for folder in ("source", "solutions"):
            (course / folder / FLOOR_ASSIGNMENT).mkdir()
            nbformat.write(floor_nb, course / folder / FLOOR_ASSIGNMENT / f"{FLOOR_ASSIGNMENT}.ipynb")
        for chapter in [FLOOR_ASSIGNMENT, *CHAPTERS]:

            def nbg(*args):
                run = run_nbgrader(*args, "--log-level=ERROR", cwd=course, timeout=None)
                if run.returncode:
                    raise SystemExit(f"nbgrader {' '.join(args)} falhou:\n{run.stderr[-2000:]}")

            nbg("generate_assignment", chapter, "--force")
            sub = course / "grading" / "submitted" / "bench" / chapter
            sub.mkdir(parents=True)
            shutil.copy2(course / "solutions" / chapter / f"{chapter}.ipynb", sub)
            start = time.perf_counter()
            nbg("autograde", chapter, "--create", "--force")
            times[chapter] = time.perf_counter() - start
            print(f"  {chapter:28s} {times[chapter]:6.1f} s", flush=True)
    return times


def _ms(samples: list[float]) -> str:
    """Mediana e p95 (em ms) de uma lista de tempos em segundos."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return f"mediana {statistics.median(ordered) * 1000:5.0f} ms, p95 {p95 * 1000:5.0f} ms"


def widgets() -> dict[str, dict[str, float]]:
    """Três medidas por exploração, todas em processo (o navegador é medido em tests/test_browser.py):

    - antes: ``update`` + o PNG como o JupyterLab o fazia ao exibir a figura (``print_figure`` com
      ``bbox_inches="tight"``, dois desenhos, a 100 dpi) — o caminho de antes desta versão;
    - 1ª visita: ``update`` + ``figure_png`` de um estado ainda não visto, num widget recém-criado
      num kernel novo (sem PNGs, pedaços de texto ou glifos guardados; só o fundo e o estado
      inicial já desenhados);
    - passeio: o que o aluno sente movendo um controle passo a passo, com cache e pré-cálculo dos
      vizinhos entre um movimento e outro (o pré-cálculo roda entre as medidas, como na pausa
      entre dois toques na seta).
    """
    import matplotlib

    matplotlib.use("Agg")
    from IPython.core.pylabtools import print_figure
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from transformer_course.widgets import _glyphs
    from transformer_course.widgets._view import PngRenderer

    results = {}
    for chapter in CHAPTERS:
        module_name = f"transformer_course.widgets.ch{chapter[:2]}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            continue
        for factory, cases in getattr(module, "BENCH", []):
            explorer = factory()
            before, cold, model, walk = [], [], [], []
            for _ in range(3):
                for kwargs in cases:
                    start = time.perf_counter()
                    fig = explorer.update(**kwargs)
                    FigureCanvasAgg(fig)  # o canvas de sempre, sem os glifos guardados de _glyphs
                    print_figure(fig, "png", bbox_inches="tight")
                    before.append(time.perf_counter() - start)
            for _ in range(3):
                # Cada passada começa do zero, como um widget recém-criado num kernel novo: sem PNGs,
                # sem pedaços de texto e sem glifos guardados; o fundo e o estado inicial são
                # desenhados antes (ao criar o widget), sem medir.
                renderer = PngRenderer(functools.partial(_timed, explorer.update, model))
                _glyphs.clear()
                blit = getattr(explorer.update(**cases[0]), "blit", None)
                if blit is not None:
                    blit.invalidate()
                    blit.forget_pixels()
                renderer.png(**cases[0])
                del model[-1:]  # só os estados medidos
                for kwargs in cases[1:]:
                    start = time.perf_counter()
                    renderer.png(**kwargs)
                    cold.append(time.perf_counter() - start)
            ready: dict = {}
            walk = _walk(module.BENCH_WIDGET, ready=ready) if hasattr(module, "BENCH_WIDGET") else []
            label = f"{chapter} {type(explorer).__name__}"
            results[label] = {
                "antes_ms": statistics.median(before) * 1000,
                "primeira_ms": statistics.median(cold) * 1000,
                "primeira_update_ms": statistics.median(model) * 1000,
                "passeio_ms": statistics.median(walk) * 1000,
            }
            print(f"  {label}", flush=True)
            print(f"    antes (print_figure tight): {_ms(before)}", flush=True)
            print(f"    1ª visita (cache vazio):    {_ms(cold)}", flush=True)
            print(
                f"      dos quais update():       {_ms(model)}  (o modelo e os dados; o resto é o PNG)",
                flush=True,
            )
            print(f"    passeio passo a passo:      {_ms(walk)}  ({len(walk)} movimentos)", flush=True)
            if ready.get("estados"):
                print(
                    f"    todos os {ready['estados']} estados prontos {ready['s']:.1f} s depois de criar o "
                    "widget (em segundo plano; a partir daí, qualquer salto sai do cache)",
                    flush=True,
                )
    return results


def _timed(update, samples: list[float], **kwargs):
    """``update(**kwargs)``, anotando em ``samples`` quanto levou (o modelo e os dados, sem o PNG)."""
    start = time.perf_counter()
    try:
        return update(**kwargs)
    finally:
        samples.append(time.perf_counter() - start)


def _find_image(box):
    """O ``ipywidgets.Image`` de uma exploração (``interactive_png``) dentro das caixas do widget."""
    if hasattr(box, "renderer") and hasattr(box, "controls"):
        return box
    for child in getattr(box, "children", ()):
        found = _find_image(child)
        if found is not None:
            return found
    return None


def _walk(make_widget, steps: int = 6, ready: dict | None = None) -> list[float]:
    """Move cada controle do widget ``steps`` passos para um lado e depois de volta, medindo cada
    movimento (``control.value = ...``: o observe redesenha, ou pega do cache, na hora).

    Entre dois movimentos, espera o pré-cálculo terminar: a pausa de quem toca a seta e olha a figura.
    ``ready`` recebe quantos estados o widget desenha todos de antemão (``estados``; 0 se são muitos)
    e em quantos segundos depois de criado (``s``).
    """
    from transformer_course.widgets._view import _is_list, every_state, neighbor_values

    image = _find_image(make_widget())
    created = time.perf_counter()
    if image.renderer.thread is not None:
        image.renderer.thread.join()  # o pré-cálculo inicial, enquanto o aluno lê a figura
    if ready is not None:
        ready.update(estados=len(every_state(image.controls)), s=time.perf_counter() - created)
    samples, changed = [], 0
    for control in image.controls.values():
        if isinstance(control.value, bool) or (isinstance(control.value, str) and not _is_list(control)):
            continue  # caixas de marcar e texto livre: sem passos a percorrer
        path = []
        for _ in range(steps):  # ida: sempre o vizinho "de cima" (o primeiro sem direção anterior)
            around = neighbor_values(control, path[-1] if path else control.value)
            forward = [v for v in around if v not in path and v != control.value]
            if not forward:
                break
            path.append(forward[0])
        for target in [*path, *reversed([control.value, *path[:-1]])]:  # ida e volta
            before = image.value
            start = time.perf_counter()
            control.value = target
            samples.append(time.perf_counter() - start)
            changed += image.value != before
            if image.renderer.thread is not None:
                image.renderer.thread.join()
    if samples and not changed:
        raise RuntimeError("mover os controles não mudou a imagem")
    return samples


def browser_latency() -> None:
    """Imprime a latência deslizador -> imagem medida no navegador pelo teste do JupyterLab.

    ``make bench`` não abre o navegador (leva minutos): o teste ``tests/test_browser.py`` grava
    ``artifacts/bench/browser_latency.json`` a cada execução; aqui mostramos o último registro.
    """
    path = ROOT / "artifacts" / "bench" / "browser_latency.json"
    print(
        "navegador (Playwright; da tecla ao src da imagem mudar e, entre parênteses, à imagem nova"
        " decodificada no quadro seguinte; gravado por tests/test_browser.py):"
    )
    if not path.exists():
        print("  ainda sem medida: rode `pytest tests/test_browser.py -k 'solucao or piso' -n 0`")
        return
    for chapter, entry in sorted(json.loads(path.read_text()).items()):
        if not entry.get("amostras_ms"):
            print(f"  {chapter:28s} sem amostras ({entry.get('nota', '')})")
            continue
        screen = ""
        if entry.get("tela_mediana_ms") is not None:
            screen = f" (tela: {entry['tela_mediana_ms']:4.0f} / {entry['tela_p95_ms']:4.0f})"
        print(
            f"  {chapter:28s} mediana {entry['mediana_ms']:4.0f} ms, p95 {entry['p95_ms']:4.0f} ms{screen}"
            f"  ({len(entry['amostras_ms'])} toques; carga {entry['carga']}; {entry['quando']})"
        )


def mha_ratio() -> None:
    """Tempo do MultiHeadAttention de referência ÷ nn.MultiheadAttention, lado a lado, mesma entrada."""
    import torch
    from torch import nn

    from transformer_course.interop import load_from_torch
    from transformer_course.multihead import MultiHeadAttention

    for B, T, D, H in ((8, 64, 256, 8), (16, 128, 512, 8), (2, 16, 64, 4)):
        torch.manual_seed(0)
        theirs = nn.MultiheadAttention(D, H, batch_first=True)
        ours = load_from_torch(MultiHeadAttention(D, H), theirs)
        x = torch.randn(B, T, D)
        ratios = []
        for _ in range(7):  # medianas intercaladas: o mesmo ruído da máquina para os dois
            times = []
            for module in (ours, theirs):
                start = time.perf_counter()
                for _ in range(20):
                    module(x, x, x)
                times.append(time.perf_counter() - start)
            ratios.append(times[0] / times[1])
        print(
            f"  (B, T, D, H) = {(B, T, D, H)}: referência / nn.MultiheadAttention = "
            f"{statistics.median(ratios):.2f}×  (treino, com grafo de gradientes)",
            flush=True,
        )


def exercise_checks() -> None:
    """Mediana de 3 rodadas da verificação visível de cada exercício do registro (a referência responde)."""
    import contextlib
    import io

    from transformer_course.exercises import all_exercises

    for ex in all_exercises():
        if ex.reference is None:
            continue
        samples = []
        for _ in range(3):
            started = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                ex.visible(ex.reference)
            samples.append(time.perf_counter() - started)
        print(f"  {ex.chapter:24s} {ex.name:32s} {1000 * statistics.median(samples):7.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-notebooks", action="store_true")
    parser.add_argument("--skip-autograde", action="store_true")
    parser.add_argument("--skip-widgets", action="store_true")
    args = parser.parse_args()
    print(f"máquina: {os.cpu_count()} núcleos; carga: {os.getloadavg()[0]:.2f}")
    base = floor()
    print(f"piso (kernel + import torch + transformer_course): {base:.1f} s")
    print("primeira célula de cada capítulo (importações), medida dentro do kernel:")
    first_cells()
    if not args.skip_notebooks:
        print("execução de cada capítulo (source/, sem NBGRADER_EXECUTION):")
        times = notebooks()
        print(f"  {'total':28s} {sum(times.values()):6.1f} s")
    if not args.skip_autograde:
        print("nbgrader autograde por notebook (gabarito como entrega; inclui ~3 s de partida do nbgrader):")
        grades = autograde()
        grade_floor = grades.pop(FLOOR_ASSIGNMENT)
        print(f"  {'total':28s} {sum(grades.values()):6.1f} s")
        print(
            f"autograde ÷ piso da correção ({grade_floor:.1f} s: nbgrader + kernel + importações, notebook"
            " só com a 1ª célula; acima de 2× o capítulo encolhe com NBGRADER_EXECUTION):"
        )
        for chapter, seconds in grades.items():
            flag = "  <- acima de 2×" if seconds > 2 * grade_floor else ""
            ratio = f"{seconds / grade_floor:5.2f}×  ({seconds / base:4.1f}× o piso do kernel)"
            print(f"  {chapter:28s} {ratio}{flag}")
        import bench_sandbox  # isolamento (bubblewrap) x sem isolamento, por notebook

        bench_sandbox.main([])
    if not args.skip_widgets:
        print("explorações, em processo (meta: mediana <= 50 ms, p95 <= 100 ms):")
        widgets()
        browser_latency()
    print("atenção com múltiplas cabeças, forward:")
    mha_ratio()
    print("verificações visíveis por exercício (registro; a referência como resposta, mediana de 3):")
    exercise_checks()


if __name__ == "__main__":
    main()
