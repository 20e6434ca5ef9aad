"""Toda entrega tem limites: tempo do notebook, células, saídas, memória, processos (issue 30, item 3).

Numa cópia temporária do curso, uma turma do capítulo 02_atencao corrigida de verdade
(``scripts/grade_class.py --sequencial``: o nbgrader, o bubblewrap e os cgroups de verdade, num
processo só, para medir a memória dele) com uma entrega de cada tipo hostil:

- ``dorminhoco``: processos-filhos girando a CPU e três células que dormem; o relógio do notebook
  (aqui, 120 s) o encerra;
- ``enxurrada``: centenas de megabytes de saída (prints, HTML, imagens, uma mensagem gigante);
- ``muitas_celulas``: mais células de código que o limite;
- ``bomba_de_memoria``: aloca sem parar; o cgroup mata o kernel;
- ``bomba_de_fork``: processos até não poder mais; o cgroup recusa o ``fork``, a célula ganha uma
  nota, o notebook segue (nota cheia) e os processos morrem com o kernel;
- ``mensagem_gigante``: desfaz o corte das saídas no kernel e manda uma mensagem enorme; o
  ZeroMQ do corretor a recusa sem lê-la e o corretor encerra a entrega;
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
NOTEBOOK_SECONDS = 120  # o relógio do notebook neste teste (o gabarito leva ~5 s; a enxurrada, ~20 s)
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
    "import subprocess\n"
    "filhos = []\n"
    "try:\n"
    "    while True:  # processos que ficam até o fim do kernel\n"
    "        filhos.append(subprocess.Popen(['/bin/sh', '-c', 'sleep 100000; : {marker}']))\n"
    "except OSError as erro:\n"
    "    print('parou em', len(filhos), 'filhos:', erro)\n"
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

BYPASS = (
    "from jupyter_client.session import Session\n"
    "Session.send = Session.send.__wrapped__\n"
    "display({{'text/plain': 'q' * {size}}}, raw=True)\n"
)


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
    subs["bomba_de_fork"] = (_insert(copy.deepcopy(sol), FORK_BOMB.format(marker=MARKER)), 7, None)
    # Desfaz o corte das saídas dentro do kernel e manda uma mensagem só, maior que message_bytes.
    nb = _insert(copy.deepcopy(sol), BYPASS.format(size=DEFAULTS.message_bytes + 10 * MiB))
    subs["mensagem_gigante"] = (nb, 0, "numa mensagem só")
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


def test_fork_bomb_stopped_by_the_pids_limit(graded):
    if "bomba_de_fork" not in graded["subs"]:
        pytest.skip(f"sem cgroups nesta máquina ({graded['cgroup_problem']}): só o prlimit limita o kernel")
    path, _ = _graded_nb(graded, "bomba_de_fork")
    text = path.read_text()
    assert "parou em" in text and "Resource temporarily unavailable" in text
    assert f"o limite é {MAX_PIDS} processos e threads por notebook" in text


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


# ---------------------------------------------------------------------- as peças, sem kernel


def _msg(msg_type, content):
    return {"msg_type": msg_type, "header": {"msg_type": msg_type}, "parent_header": {}, "content": content}


def test_output_budget_caps_every_type_per_cell_and_notebook():
    from transformer_course.instructor.limits import OutputBudget

    limits = SubmissionLimits(stream_bytes=100, text_bytes=50, image_bytes=80, notebook_output_bytes=400)
    budget = OutputBudget(limits, probe_mime="application/x-sonda")
    cell = object()
    first = budget.admit(_msg("stream", {"name": "stdout", "text": "a" * 70}), cell)
    assert first["content"]["text"] == "a" * 70
    cut = budget.admit(_msg("stream", {"name": "stdout", "text": "b" * 70}), cell)
    assert (
        cut["content"]["text"].startswith("b" * 30) and "saída cortada na correção" in cut["content"]["text"]
    )
    assert budget.admit(_msg("stream", {"name": "stdout", "text": "c"}), cell) is None  # já avisou
    shown = budget.admit(
        _msg("display_data", {"data": {"text/plain": "p" * 60, "image/png": "i" * 90}}), cell
    )
    assert shown["content"]["data"]["text/plain"].startswith("p" * 50)
    assert "image/png" not in shown["content"]["data"]
    assert "imagens desta célula passou de 80 bytes" in shown["content"]["data"]["text/plain"]
    # A resposta a um pedido do juiz passa inteira (até probe_bytes) e não conta no notebook.
    probe = budget.admit(
        _msg("display_data", {"data": {"application/x-sonda": "z" * 1000}}), object(), real=False
    )
    assert probe["content"]["data"]["application/x-sonda"] == "z" * 1000
    # Outra célula: limites por tipo zerados, mas o total do notebook (400) continua contando.
    other = object()
    for _ in range(10):
        budget.admit(_msg("stream", {"name": "stdout", "text": "d" * 60}), other)
        other = object()
    assert budget.notebook_used <= 400
    late = budget.admit(_msg("stream", {"name": "stdout", "text": "e" * 10}), object())
    assert "as saídas do notebook passaram de 400 bytes" in late["content"]["text"]
    error = budget.admit(
        _msg("error", {"ename": "E", "evalue": "v" * 10, "traceback": ["t" * 100] * 5000}), object()
    )
    assert len(str(error["content"]["traceback"])) < 2 * limits.error_bytes


def test_cap_notebook_keeps_verdicts_and_notes_cuts():
    from transformer_course.instructor.limits import cap_notebook

    nb = nbformat.v4.new_notebook()
    big = nbformat.v4.new_code_cell("print('x')")
    big.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 200_000)]
    verdict = nbformat.v4.new_code_cell("check()")
    verdict.outputs = [nbformat.v4.new_output("stream", name="stdout", text="✔ passou\n")]
    verdict.metadata["transformer_course"] = {"verdict": {"points": 1}}
    text = nbformat.v4.new_markdown_cell("m" * 300_000)
    nb.cells = [big, verdict, text]
    cuts = cap_notebook(nb, 50_000)
    assert len(nbformat.writes(nb)) <= 50_000 + 1000, cuts
    assert "omitidas" in big.outputs[0]["text"]
    assert verdict.outputs[0]["text"] == "✔ passou\n"
    assert "texto cortado" in text.source


def test_feedback_html_has_a_hard_cap():
    from transformer_course.instructor.limits import bound_feedback_html

    limits = SubmissionLimits(feedback_bytes=20_000)
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x")
    verdict = {"exercise": "<b>soma</b>", "points": 0, "max_points": 1, "message": "falhou"}
    cell.metadata["transformer_course"] = {"verdict": verdict}
    nb.cells = [cell]
    page, _ = bound_feedback_html(lambda n, r: ("y" * 50_000, r), nb, {}, limits)
    assert len(page.encode()) <= limits.feedback_bytes
    assert "Devolutiva resumida" in page and "&lt;b&gt;soma&lt;/b&gt;" in page


def test_kernel_cgroup_limits_and_cleanup():
    problem = cgroup_problem()
    if problem is not None:
        pytest.skip(f"sem cgroups nesta máquina ({problem}): só o prlimit limita o kernel")
    from transformer_course.instructor.limits import KernelCgroup

    group = KernelCgroup.create(SubmissionLimits(max_pids=16, memory_bytes=256 * MiB))
    try:
        code = "import os\nfor _ in range(64):\n    try: os.fork()\n    except OSError: break"
        subprocess.run(group.wrap([sys.executable, "-c", code]), timeout=120, check=False)
        assert group.pids_refused() > 0
        assert "o limite é 16 processos" in group.pids_note(group.pids_refused())
        assert group.limit_hit() == ""  # processos a mais não encerram a entrega: o fork falha
        hog = "blocos = []\nwhile True:\n    blocos.append(b'x' * 10_000_000)\n"
        run = subprocess.run(group.wrap([sys.executable, "-c", hog]), timeout=120, check=False)
        assert run.returncode == -9 and group.oom_kills() > 0
        assert "memória esgotada" in group.limit_hit()
    finally:
        dirs = list(group.dirs.values())
        group.remove()
    assert dirs and not any(d.exists() for d in dirs)
