"""Toda entrega tem limites: tempo do notebook, células, saídas, memória, processos (issue 30, item 3).

Numa cópia temporária do curso, uma turma do capítulo 02_atencao corrigida de verdade
(``scripts/grade_class.py --sequencial``: o nbgrader, o bubblewrap e os cgroups de verdade, num
processo só, para medir a memória dele) com uma entrega de cada tipo hostil:

- ``dorminhoco``: processos-filhos girando a CPU e três células que dormem; o relógio do notebook
  (aqui, 60 s) o encerra;
- ``enxurrada``: centenas de megabytes de saída (prints, HTML, imagens, uma mensagem gigante);
- ``muitas_celulas``: mais células de código que o limite;
- ``bomba_de_memoria``: aloca sem parar; o cgroup mata o kernel;
- ``bomba_de_fork``: processos em laço; o cgroup recusa o ``fork`` e o corretor mata o kernel;
- ``gabarito``: a entrega certa, que tem de sair com a nota cheia (7) apesar dos vizinhos.

Os limites do teste vêm da configuração (``c.SubmissionLimits.*`` no ``nbgrader_config.py`` da
cópia), pequenos para o teste ser curto; as verificações são de resultado (nota, motivo, tamanho,
memória), nunca de duração. As entregas hostis não tocam em rede (o kernel nem tem rede).
"""

from __future__ import annotations

import copy
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, copy_course

from transformer_course.instructor.limits import GiB, MiB, SubmissionLimits, _layout, cgroup_problem

pytestmark = pytest.mark.slow

CHAPTER = "02_atencao"
NOTEBOOK_SECONDS = 60  # o relógio do notebook neste teste (o gabarito leva ~5 s)
CELL_TIMEOUT = 300  # maior que o relógio do notebook: quem para o dorminhoco é o relógio
MEMORY_BYTES = 1536 * MiB
MAX_PIDS = 128
# O limite declarado da memória do processo que corrige (grading/README.md): o corretor carrega o
# PyTorch e o nbgrader (~0,5 GiB); as saídas de uma entrega não podem somar mais que isso.
WORKER_RSS_BOUND = int(1.5 * GiB)
MARKER = f"tc-limites-{secrets.token_hex(4)}"  # nas linhas de comando dos processos hostis
DEFAULTS = SubmissionLimits()


def _solution():
    return nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)


def _index(nb, grade_id):
    for i, cell in enumerate(nb.cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return i
    raise KeyError(grade_id)


def _insert(nb, *sources, at=1):
    for offset, source in enumerate(sources):
        nb.cells.insert(at + offset, nbformat.v4.new_code_cell(source))
    return nb


SPINNER = (
    "import subprocess, sys\n"
    "giros = [subprocess.Popen([sys.executable, '-c', '# {marker}\\nwhile True: pass']) for _ in range(3)]\n"
)
FORK_BOMB = (
    "import subprocess, sys, time\n"
    "codigo = '# {marker}\\nimport os\\nwhile True:\\n    try:\\n        os.fork()\\n    except OSError:\\n"
    "        pass'\n"
    "bomba = subprocess.Popen([sys.executable, '-c', codigo])\n"
    "time.sleep(10_000)\n"
)
FLOOD = [
    # ~60 MB de prints, em muitas mensagens.
    "for i in range(600_000):\n    print(f'{i:08d} ' + 'x' * 90)\n",
    # 4 000 blocos de HTML de 10 KB e 200 "imagens" de 1 MB.
    "from IPython.display import HTML, display\n"
    "for i in range(4_000):\n    display(HTML('<b>' + 'y' * 10_000 + '</b>'))\n"
    "import base64\n"
    "png = base64.b64encode(b'\\x89PNG' + bytes(750_000)).decode()\n"
    "for i in range(200):\n    display({'image/png': png, 'text/plain': 'img'}, raw=True)\n",
    # Uma mensagem só, de 100 MB (o ZeroMQ do corretor nem a lê) e um erro com traceback enorme.
    "from IPython.display import display\n"
    "display({'text/plain': 'z' * 100_000_000}, raw=True)\n"
    "raise ValueError('w' * 5_000_000)\n",
]


def _submissions():
    """nome -> (notebook, nota esperada, trecho do motivo esperado nos testes que não rodaram)."""
    sol = _solution()
    subs = {"gabarito": (sol, 7, None)}
    nb = _insert(
        copy.deepcopy(sol),
        SPINNER.format(marker=MARKER),
        "import time\ntime.sleep(10_000)",
        "import time\ntime.sleep(10_000)",
        "import time\ntime.sleep(10_000)",
    )
    subs["dorminhoco"] = (nb, 0, f"tempo total do notebook esgotado ({NOTEBOOK_SECONDS} s)")
    subs["enxurrada"] = (_insert(copy.deepcopy(sol), *FLOOD, at=_index(sol, "sdpa") + 1), 7, None)
    nb = _insert(copy.deepcopy(sol), *(["pass"] * (DEFAULTS.max_code_cells + 1)))
    subs["muitas_celulas"] = (nb, 0, "células de código, mais que o limite")
    nb = _insert(copy.deepcopy(sol), "blocos = []\nwhile True:\n    blocos.append(b'x' * 20_000_000)\n")
    subs["bomba_de_memoria"] = (nb, 0, "memória esgotada")
    subs["bomba_de_fork"] = (_insert(copy.deepcopy(sol), FORK_BOMB.format(marker=MARKER)), 0, "processos")
    return subs


NEEDS_CGROUP = {"bomba_de_memoria", "bomba_de_fork"}


def _marked_processes() -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if MARKER in text and "pytest" not in text:
            found.append(f"{cmdline.parent.name}: {text[:120]}")
    return found


def _kernel_cgroups(owner: int) -> list[Path]:
    """Os cgroups de kernel que o processo ``owner`` criou e que ainda existem."""
    layout = _layout()
    if layout is None:
        return []
    parents = [parent / DEFAULTS.cgroup_name for parent in layout[1].values()]
    return [p for parent in parents if parent.is_dir() for p in parent.glob(f"k{owner}-*")]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from nbgrader.api import Gradebook

    course = copy_course(
        tmp_path_factory.mktemp("limites") / "curso", parts=("source", "release", "solutions", "scripts")
    )
    for extra in [p for p in (course / "source").iterdir() if p.name != CHAPTER]:
        shutil.rmtree(extra)
    with (course / "nbgrader_config.py").open("a") as fh:
        fh.write(
            f"\nc.SubmissionLimits.notebook_seconds = {NOTEBOOK_SECONDS}\n"
            f"c.SubmissionLimits.memory_bytes = {MEMORY_BYTES}\n"
            f"c.SubmissionLimits.max_pids = {MAX_PIDS}\n"
            "c.SubmissionLimits.cpus = 1.0\n"
        )
    problem = cgroup_problem()
    subs = {k: v for k, v in _submissions().items() if problem is None or k not in NEEDS_CGROUP}
    for student, (nb, _, _) in subs.items():
        folder = course / "grading" / "submitted" / student / CHAPTER
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{CHAPTER}.ipynb")

    # O processo que corrige mede a própria memória (RUSAGE_SELF: sem os kernels, que são filhos).
    runner = (
        "import resource, runpy, sys\n"
        f"sys.argv = ['grade_class.py', '--sequencial', '--timeout={CELL_TIMEOUT}']\n"
        "try:\n"
        f"    runpy.run_path({str(course / 'scripts' / 'grade_class.py')!r}, run_name='__main__')\n"
        "finally:\n"
        "    print('PICO_DE_MEMORIA_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)\n"
    )
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", runner], cwd=course, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    out, err = proc.communicate(timeout=1800)
    print(out[-6000:])
    assert proc.returncode == 0, out + err
    peak = re.search(r"PICO_DE_MEMORIA_KB (\d+)", out)
    scores = {}
    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        for student in subs:
            sub = gb.find_submission(CHAPTER, student)
            grades = [g for n in sub.notebooks for g in n.grades if g.cell_type == "code"]
            scores[student] = {g.name: g.score for g in grades}
    return {
        "course": course,
        "subs": subs,
        "scores": scores,
        "report": out,
        "peak_bytes": int(peak.group(1)) * 1024 if peak else None,
        "grader_pid": proc.pid,
        "cgroup_problem": problem,
        "leftover_processes": _marked_processes(),
        "leftover_cgroups": _kernel_cgroups(proc.pid),
    }


def _graded_nb(graded, student):
    path = graded["course"] / "grading" / "autograded" / student / CHAPTER / f"{CHAPTER}.ipynb"
    return path, nbformat.read(path, as_version=4)


def _verdicts(nb):
    meta = [c.metadata.get("transformer_course", {}) for c in nb.cells]
    return [m["verdict"] for m in meta if "verdict" in m]


EXPECTED = [(name, points, reason) for name, (_, points, reason) in _submissions().items()]


@pytest.mark.parametrize(("student", "points", "reason"), EXPECTED, ids=[e[0] for e in EXPECTED])
def test_submission_bounded(graded, student, points, reason):
    if student not in graded["subs"]:
        pytest.skip(f"sem cgroups nesta máquina ({graded['cgroup_problem']}): só o prlimit limita o kernel")
    got = sum(s or 0 for s in graded["scores"][student].values())
    assert got == pytest.approx(points), f"{student}: {graded['scores'][student]}"
    if reason is None:
        return
    _, nb = _graded_nb(graded, student)
    verdicts = _verdicts(nb)
    assert len(verdicts) == 4
    for verdict in verdicts:
        assert verdict["status"] == "nao_rodou", verdict
        assert reason in verdict["message"], verdict
    # O motivo chega ao relatório da correção, em pt-BR, na linha do aluno.
    lines = [ln for ln in graded["report"].splitlines() if ln.strip().startswith(f"{student} / {CHAPTER}:")]
    assert any(reason in ln for ln in lines), graded["report"]


def test_huge_output_truncated_when_it_arrives(graded):
    path, nb = _graded_nb(graded, "enxurrada")
    assert path.stat().st_size < DEFAULTS.notebook_bytes, path.stat().st_size
    text = path.read_text()
    assert "saída cortada na correção" in text
    feedback = graded["course"] / "grading" / "feedback" / "enxurrada" / CHAPTER / f"{CHAPTER}.html"
    assert feedback.exists()
    assert feedback.stat().st_size < DEFAULTS.feedback_bytes, feedback.stat().st_size
    assert "saída cortada na correção" in feedback.read_text()


def test_grader_memory_under_bound(graded):
    peak = graded["peak_bytes"]
    assert peak is not None, graded["report"]
    print(f"pico de memória do processo que corrigiu a turma: {peak / MiB:.0f} MiB")
    assert peak < WORKER_RSS_BOUND, f"{peak / MiB:.0f} MiB"


def test_nothing_left_behind(graded):
    assert graded["leftover_processes"] == []
    assert graded["leftover_cgroups"] == []
    assert not (graded["course"] / "grading" / ".em_andamento").exists() or not any(
        (graded["course"] / "grading" / ".em_andamento").iterdir()
    )
