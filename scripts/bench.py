"""Benchmarks do curso (`make bench`): imprime números, não faz asserções de tempo.

1. o piso: iniciar um kernel e importar torch + transformer_course (medido nesta mesma rodada);
2. o tempo de execução de cada capítulo (notebook de source/, de ponta a ponta, sem NBGRADER_EXECUTION);
3. o tempo de `nbgrader autograde` por notebook (o gabarito como entrega; NBGRADER_EXECUTION é
   definido pelo próprio nbgrader), numa cópia temporária do curso;
4. a mediana do tempo de resposta de cada exploração: ``update(...)`` + desenho do PNG, como o
   JupyterLab o recebe. Cada ``widgets/chNN.py`` declara ``BENCH = [(fábrica, [kwargs, ...])]``;
5. o forward do ``MultiHeadAttention`` de referência ÷ ``nn.MultiheadAttention``, lado a lado.

Orçamentos (COURSE_SPEC §6): capítulo ≤ 60 s (cap. 7: 90 s), curso ≤ 5 min, correção ≤ 20 s por
notebook, exploração ≤ 100 ms (texto do cap. 7: 300 ms).

Uso: python scripts/bench.py [--skip-notebooks] [--skip-autograde] [--skip-widgets]
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


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


def notebooks() -> dict[str, float]:
    times = {}
    for chapter in CHAPTERS:
        path = ROOT / "source" / chapter / f"{chapter}.ipynb"
        with tempfile.TemporaryDirectory() as tmp:
            times[chapter] = run_notebook(nbformat.read(path, as_version=4), Path(tmp))
        print(f"  {chapter:28s} {times[chapter]:6.1f} s", flush=True)
    return times


def autograde() -> dict[str, float]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        shutil.copy2(ROOT / "nbgrader_config.py", course)
        for part in ("source", "release", "solutions"):
            shutil.copytree(ROOT / part, course / part)
        for chapter in CHAPTERS:

            def nbg(*args):
                subprocess.run(
                    [str(BIN / "nbgrader"), *args, "--log-level=ERROR"],
                    cwd=course,
                    env=env,
                    check=True,
                    capture_output=True,
                )

            nbg("generate_assignment", chapter, "--force")
            sub = course / "grading" / "submitted" / "bench" / chapter
            sub.mkdir(parents=True)
            shutil.copy2(course / "solutions" / chapter / f"{chapter}.ipynb", sub)
            start = time.perf_counter()
            nbg("autograde", chapter, "--create", "--force")
            times[chapter] = time.perf_counter() - start
            print(f"  {chapter:28s} {times[chapter]:6.1f} s", flush=True)
    return times


def widgets() -> dict[str, float]:
    import matplotlib

    matplotlib.use("Agg")
    medians = {}
    for chapter in CHAPTERS:
        module_name = f"transformer_course.widgets.ch{chapter[:2]}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            continue
        for factory, cases in getattr(module, "BENCH", []):
            explorer = factory()
            samples = []
            for _ in range(3):
                for kwargs in cases:
                    start = time.perf_counter()
                    fig = explorer.update(**kwargs)
                    if fig is not None and hasattr(fig, "savefig"):
                        fig.savefig(io.BytesIO(), format="png", dpi=72)
                    samples.append(time.perf_counter() - start)
            label = f"{chapter} {type(explorer).__name__}"
            medians[label] = statistics.median(samples) * 1000
            print(
                f"  {label:40s} mediana {medians[label]:6.1f} ms  (máx {max(samples) * 1000:.0f} ms,"
                f" {len(samples)} atualizações)",
                flush=True,
            )
    return medians


def mha_ratio() -> None:
    """Tempo do MultiHeadAttention de referência ÷ nn.MultiheadAttention, lado a lado, mesma entrada."""
    import torch
    from torch import nn

    from transformer_course.multihead import MultiHeadAttention, load_from_torch

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
        print(f"  (B, T, D, H) = {(B, T, D, H)}: referência / nn.MultiheadAttention = "
              f"{statistics.median(ratios):.2f}×  (treino, com grafo de gradientes)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-notebooks", action="store_true")
    parser.add_argument("--skip-autograde", action="store_true")
    parser.add_argument("--skip-widgets", action="store_true")
    args = parser.parse_args()
    print(f"máquina: {os.cpu_count()} núcleos; carga: {os.getloadavg()[0]:.2f}")
    base = floor()
    print(f"piso (kernel + import torch + transformer_course): {base:.1f} s")
    if not args.skip_notebooks:
        print("execução de cada capítulo (source/, sem NBGRADER_EXECUTION):")
        times = notebooks()
        print(f"  {'total':28s} {sum(times.values()):6.1f} s")
    if not args.skip_autograde:
        print("nbgrader autograde por notebook (gabarito como entrega; inclui ~3 s de partida do nbgrader):")
        grades = autograde()
        print(f"  {'total':28s} {sum(grades.values()):6.1f} s")
    if not args.skip_widgets:
        print("explorações: update + PNG (72 dpi):")
        widgets()
    print("atenção com múltiplas cabeças, forward:")
    mha_ratio()


if __name__ == "__main__":
    main()
