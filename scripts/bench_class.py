"""Mede a correção de uma turma gerada: em sequência, no LocalCluster e num scheduler com 2 workers.

Gera uma turma (``--alunos`` N, ``--capitulos``), com entregas em rodízio: certa (o gabarito), em
branco (a versão do aluno), errada (o primeiro exercício volta ao esboço) e hostil (troca
``torch.testing.assert_close`` por uma função vazia, o que os testes ocultos detectam). Corrige a
mesma turma, cada vez numa cópia nova do curso, com ``scripts/grade_class.py``:

(a) ``--sequencial`` (o ``nbgrader autograde`` de sempre, um capítulo por vez);
(b) o ``LocalCluster`` embutido (um worker por núcleo);
(c) ``dask scheduler`` + 2 processos ``dask worker`` e ``--scheduler tcp://...``.

Imprime o tempo de relógio, o custo por notebook, a razão para o piso (partir um kernel +
``import torch``) e a fração da CPU da máquina ocupada em cada modo (perto de 100 %: mais workers
não adiantam; só menos trabalho por notebook), e a latência entrega → devolutiva liberada no serviço de
correção (``scripts/grading_service.py``): uma entrega com o serviço ocioso e, no fim de uma
rajada de ``--rajada`` N alunos que enviam ao mesmo tempo (padrão 30), a latência da última
devolutiva e a mediana e o p95 por entrega. Não é teste: só mede e imprime.

Com ``--comparar-com OUTRA_COPIA``, mede só o custo: a mesma turma corrigida em sequência por este
curso e pela outra cópia (com o ``.venv`` dela), em rodadas alternadas, e imprime a CPU por notebook
(usuário + sistema de todos os processos: corretor e kernels) das duas e a razão.

Uso: python scripts/bench_class.py [--alunos 4] [--capitulos 01_embeddings_posicao 02_atencao]
     [--modos sequencial local scheduler servico] [--rajada 30] [--comparar-com PASTA --rodadas 3]
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer_course.course import CHAPTERS  # noqa: E402
from transformer_course.instructor.cluster import floor_cost  # noqa: E402
from transformer_course.instructor.nbgrader_run import nbgrader_env  # noqa: E402

BIN = Path(sys.executable).parent
KINDS = ("certa", "em_branco", "errada", "hostil")
HOSTILE = "import torch.testing\n\ntorch.testing.assert_close = lambda *a, **k: None\n\n"


def concurrent_floor(n: int) -> float:
    """O piso medido em ``n`` processos ao mesmo tempo (a disputa pelos núcleos que os workers têm).

    Média dos ``n`` pisos, cada um medido dentro do seu processo (sem a partida do Python dele).
    """
    code = "from transformer_course.instructor.cluster import floor_cost; print(floor_cost())"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(n)
    ]
    values = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"a medida do piso falhou:\n{err[-2000:]}")
        values.append(float(out.split()[-1]))
    return statistics.mean(values)


def submissions(chapter: str, root: Path = ROOT) -> dict:
    import nbformat

    sol = nbformat.read(root / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)
    release = nbformat.read(root / "release" / chapter / f"{chapter}.ipynb", as_version=4)
    first = next(
        i
        for i, c in enumerate(sol.cells)
        if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
    )
    wrong = copy.deepcopy(sol)
    wrong.cells[first].source = release.cells[first].source
    hostile = copy.deepcopy(sol)
    hostile.cells[first].source = HOSTILE + hostile.cells[first].source
    return {"certa": sol, "em_branco": release, "errada": wrong, "hostil": hostile}


def make_course(target: Path, names: list[str], students: int, root: Path = ROOT) -> None:
    import nbformat

    target.mkdir(parents=True)
    shutil.copy2(root / "nbgrader_config.py", target / "nbgrader_config.py")
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for part in ("release", "solutions", "scripts"):
        shutil.copytree(root / part, target / part, ignore=ignore)
    for name in names:
        shutil.copytree(root / "source" / name, target / "source" / name, ignore=ignore)
    for name in names:
        subs = submissions(name, root)
        for i in range(students):
            kind = KINDS[i % len(KINDS)]
            path = target / "grading" / "submitted" / f"aluno{i:03d}_{kind}" / name / f"{name}.ipynb"
            path.parent.mkdir(parents=True)
            nbformat.write(subs[kind], path)


def grade(course: Path, *args: str) -> tuple[float, str]:
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, str(course / "scripts" / "grade_class.py"), *args],
        cwd=course,
        env=nbgrader_env(),
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    if run.returncode != 0:
        raise RuntimeError(
            f"grade_class.py {' '.join(args)} falhou:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        )
    return wall, run.stdout


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def _cpuacct_group() -> Path | None:
    """Um cgroup v1 ``cpuacct`` novo (como root, onde existe): conta a CPU de todos os descendentes.

    O ``RUSAGE_CHILDREN`` não serve: o kernel confinado é filho do init do espaço de PIDs do
    bubblewrap e, quando o kernel é encerrado, quem o recolhe é o init da máquina; a CPU dele some da
    conta do corretor. No cgroup, todo processo que nasce lá dentro é contado.
    """
    if os.geteuid() != 0 or not (CPUACCT / "cgroup.procs").exists():
        return None
    group = CPUACCT / f"bench-custo-{os.getpid()}-{time.time_ns()}"
    try:
        group.mkdir()
    except OSError:
        return None
    return group


def graded_cpu(course: Path, python: Path) -> tuple[float, float, str]:
    """Relógio e CPU (usuário + sistema, corretor e kernels) de ``grade_class.py --sequencial``."""
    import resource

    env = nbgrader_env()
    env["PATH"] = f"{python.parent}{os.pathsep}{env['PATH']}"
    env.setdefault("OMP_NUM_THREADS", "1")
    group = _cpuacct_group()
    cmd = [str(python), str(course / "scripts" / "grade_class.py"), "--sequencial"]
    if group is not None:
        cmd = ["sh", "-c", f'echo $$ > "{group}/cgroup.procs" && exec "$@"', "sh", *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run = subprocess.run(cmd, cwd=course, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if group is not None:
        cpu = int((group / "cpuacct.usage").read_text()) / 1e9
        for _ in range(50):  # os últimos processos do grupo (kernels encerrados) saem em instantes
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    else:
        print("(sem cgroup cpuacct: a CPU dos kernels confinados pode ficar fora da conta)", flush=True)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if run.returncode != 0:
        raise RuntimeError(f"grade_class.py ({python}) falhou:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    return wall, cpu, run.stdout


def compare_cost(other: Path, chapters: list[str], students: int, rounds: int) -> None:
    """A mesma turma corrigida por este curso e por outra cópia (``other``, com o .venv dela), alternando.

    Mede a CPU de todos os processos (corretor, kernels confinados), que sofre bem menos que o relógio
    com a máquina ocupada por outros processos, e imprime a CPU por notebook e a razão.
    """
    n = students * len(chapters)
    sides = {"este": (ROOT, Path(sys.executable)), "outro": (other, other / ".venv" / "bin" / "python")}
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
    with tempfile.TemporaryDirectory(prefix="bench-custo-") as tmp:
        for r in range(rounds):
            order = list(sides) if r % 2 == 0 else list(sides)[::-1]
            for side in order:
                root, python = sides[side]
                course = Path(tmp) / f"{side}{r}" / "curso"
                make_course(course, chapters, students, root)
                wall, cpu, out = graded_cpu(course, python)
                results[side].append((wall, cpu))
                print(
                    f"rodada {r + 1} {side:<5} ({root}): {cpu / n:5.2f} s de CPU por notebook, "
                    f"{wall / n:5.2f} s de relógio por notebook, erros: {out.count('ERRO')}, "
                    f"carga {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    mine = statistics.median(c for _, c in results["este"]) / n
    theirs = statistics.median(c for _, c in results["outro"]) / n
    print(
        f"CPU por notebook (mediana de {rounds}): este {mine:.2f} s, outro {theirs:.2f} s; "
        f"este ÷ outro = {mine / theirs:.3f} ({(mine / theirs - 1):+.1%})"
    )


def with_scheduler(course: Path, workers: int = 2) -> tuple[float, str]:
    from distributed import Client

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = nbgrader_env()
    procs = [
        subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host=127.0.0.1", f"--port={port}", "--no-dashboard"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    ]
    try:
        time.sleep(2)
        for i in range(workers):
            procs.append(
                subprocess.Popen(
                    [str(BIN / "dask"), "worker", address, "--nthreads=1", f"--name=w{i}"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        return grade(course, f"--scheduler={address}")
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_times() -> tuple[int, int]:
    """(total, ociosa) em tiques, somando todos os núcleos (``/proc/stat``; (0, 0) fora do Linux)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return sum(fields), fields[3] + fields[4]  # idle + iowait


def busy_fraction(before: tuple[int, int], after: tuple[int, int]) -> float:
    """Fração do tempo de CPU da máquina (todos os núcleos) ocupada entre duas leituras."""
    total, idle = after[0] - before[0], after[1] - before[1]
    return 1 - idle / total if total > 0 else float("nan")


def percentile(values: list[float], q: float) -> float:
    """Percentil pelo posto mais próximo (p95 de 3 valores = o maior)."""
    ordered = sorted(values)
    return ordered[max(math.ceil(q / 100 * len(ordered)) - 1, 0)]


class Student:
    """Um aluno na área de troca: a sua casa (cache do nbgrader) e os comandos do nbgrader."""

    def __init__(self, name: str, exchange: Path, homes: Path):
        self.name = name
        self.home = homes / name
        self.home.mkdir(parents=True)
        self.flags = [
            f"--Exchange.root={exchange}",
            f"--Exchange.cache={self.home / 'cache'}",
            "--CourseDirectory.course_id=transformers-do-zero",
            f"--student={name}",
        ]
        self.env = {**nbgrader_env(), "HOME": str(self.home)}

    def fetch(self, chapter: str) -> None:
        import nbformat

        subprocess.run(
            [str(BIN / "nbgrader"), "fetch_assignment", chapter, *self.flags],
            cwd=self.home,
            env=self.env,
            check=True,
            capture_output=True,
        )
        sol = nbformat.read(ROOT / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)
        nbformat.write(sol, self.home / chapter / f"{chapter}.ipynb")

    def submit(self, chapter: str) -> subprocess.Popen:
        return subprocess.Popen(
            [str(BIN / "nbgrader"), "submit", chapter, *self.flags],
            cwd=self.home,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def submit_and_wait(service: subprocess.Popen, students: list[Student], chapter: str) -> dict[str, float]:
    """Todos os alunos enviam ao mesmo tempo; segundos de cada envio até a devolutiva liberada."""
    started = time.perf_counter()
    submits = [student.submit(chapter) for student in students]
    pending = {student.name for student in students}
    latency: dict[str, float] = {}
    failed = []
    for line in service.stdout:
        match = re.match(r"\[[\d:]+\] (\S+) / " + re.escape(chapter) + r": (.*)", line)
        if not match or match.group(1) not in pending:
            continue
        name, what = match.groups()
        if "devolutiva liberada" in what or "NÃO corrigida" in what or "retida" in what:
            latency[name] = time.perf_counter() - started
            pending.discard(name)
            if "devolutiva liberada" not in what:
                failed.append(f"{name}: {what.strip()}")
            if not pending:
                break
    for proc in submits:
        if proc.wait(timeout=300) != 0:
            raise RuntimeError("nbgrader submit falhou")
    if pending:
        raise RuntimeError(f"o serviço saiu antes de liberar a devolutiva de {sorted(pending)}")
    if failed:
        print("  entregas não corrigidas na medida: " + "; ".join(failed), flush=True)
    return latency


def service_latency(course: Path, chapter: str, burst: int = 30) -> tuple[float, dict[str, float]]:
    """Latência entrega → devolutiva liberada: uma entrega com o serviço ocioso e uma rajada.

    Devolve os segundos da entrega isolada e, para a rajada de ``burst`` alunos enviando ao mesmo
    tempo (0: sem rajada), os segundos de cada um (do envio de todos até a sua devolutiva).
    """
    exchange = course.parent / "troca"
    homes = course.parent / "casas"
    service = subprocess.Popen(
        [
            sys.executable,
            str(course / "scripts" / "grading_service.py"),
            chapter,
            f"--exchange={exchange}",
            "--intervalo=0.5",
        ],
        cwd=course,
        env=nbgrader_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        for line in service.stdout:
            if "serviço de correção no ar" in line:
                break
        idle = Student("ocioso", exchange, homes)
        idle.fetch(chapter)
        single = submit_and_wait(service, [idle], chapter)["ocioso"]
        crowd = [Student(f"rajada{i:03d}", exchange, homes) for i in range(burst)]
        for student in crowd:
            student.fetch(chapter)  # antes de medir: só o envio entra na conta
        return single, submit_and_wait(service, crowd, chapter) if crowd else {}
    finally:
        os.killpg(service.pid, signal.SIGINT)
        try:
            service.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(service.pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alunos", type=int, default=4)
    parser.add_argument("--capitulos", nargs="+", default=["01_embeddings_posicao", "02_atencao"])
    parser.add_argument(
        "--modos",
        nargs="+",
        default=["sequencial", "local", "scheduler", "servico"],
        choices=["sequencial", "local", "scheduler", "servico"],
    )
    parser.add_argument(
        "--rajada",
        type=int,
        default=30,
        help="alunos que enviam ao mesmo tempo na medida do serviço (padrão: 30; 0: só a entrega isolada)",
    )
    parser.add_argument(
        "--comparar-com",
        type=Path,
        default=None,
        help="outra cópia do curso (com o .venv dela): mede só a CPU por notebook das duas, lado a lado",
    )
    parser.add_argument("--rodadas", type=int, default=3, help="rodadas alternadas de --comparar-com")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.capitulos) - set(CHAPTERS))
    if unknown:
        print(f"capítulos desconhecidos: {', '.join(unknown)}")
        return 2
    if args.comparar_com:
        compare_cost(args.comparar_com.resolve(), args.capitulos, args.alunos, args.rodadas)
        return 0
    n = args.alunos * len(args.capitulos)
    load = os.getloadavg()[0]
    print(
        f"Turma gerada: {args.alunos} alunos × {len(args.capitulos)} capítulo(s) = {n} notebooks "
        f"({', '.join(args.capitulos)}); {os.cpu_count()} núcleos; carga no início {load:.1f}",
        flush=True,
    )
    floors = [floor_cost() for _ in range(3)]
    floor = statistics.median(floors)
    print(f"piso (partir um kernel + import torch, sem isolamento): {floor:.1f} s (mediana de 3)", flush=True)
    workers = os.cpu_count() or 1
    busy_floor = statistics.median(concurrent_floor(workers) for _ in range(3))
    print(
        f"piso com {workers} ao mesmo tempo (como os {workers} workers do LocalCluster): "
        f"{busy_floor:.1f} s cada (mediana de 3 rodadas; {busy_floor / floor:.2f}× o piso sozinho)",
        flush=True,
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-turma-") as tmp:
        for mode in [m for m in args.modos if m != "servico"]:
            course = Path(tmp) / mode / "curso"
            make_course(course, args.capitulos, args.alunos)
            cpu_before = cpu_times()
            if mode == "sequencial":
                wall, out = grade(course, "--sequencial")
            elif mode == "local":
                wall, out = grade(course)
            else:
                wall, out = with_scheduler(course)
            busy = busy_fraction(cpu_before, cpu_times())
            inside = re.search(r"([\d.]+) s por entrega dentro dos workers", out)
            registering = re.search(r"(\d+) s do relógio registrando", out)
            errors = out.count("ERRO")
            rows.append((mode, wall, wall / n, float(inside.group(1)) if inside else float("nan"), errors))
            print(
                f"{mode:<11} {wall:7.0f} s de relógio  {wall / n:6.1f} s/notebook de relógio "
                f"({wall / n / floor:.1f}× o piso)  {rows[-1][3]:6.1f} s/notebook dentro do worker "
                f"({rows[-1][3] / floor:.1f}× o piso)  erros: {errors}  carga {os.getloadavg()[0]:.1f}  "
                f"CPU ocupada {busy:.0%} (todos os núcleos)",
                flush=True,
            )
            if registering:
                print(
                    f"{'':<11} dos quais {registering.group(1)} s registrando os capítulos (gradebook novo) "
                    f"(num curso de verdade, já feito): {wall - int(registering.group(1)):.0f} s corrigindo",
                    flush=True,
                )
        if "servico" in args.modos:
            course = Path(tmp) / "servico" / "curso"
            make_course(course, args.capitulos[-1:], 0)
            chapter = args.capitulos[-1]
            single, burst = service_latency(course, chapter, args.rajada)
            print(f"serviço ocioso: entrega → devolutiva liberada em {single:.0f} s ({chapter}, 1 entrega)")
            if burst:
                values = list(burst.values())
                print(
                    f"serviço, rajada de {len(values)} entregas ao mesmo tempo ({chapter}): "
                    f"última devolutiva liberada {max(values):.0f} s após o envio; por entrega: "
                    f"mediana {statistics.median(values):.0f} s, p95 {percentile(values, 95):.0f} s, "
                    f"mínimo {min(values):.0f} s  carga {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    if rows:
        base = {m: w for m, w, *_ in rows}
        print(f"Custo por notebook ÷ piso ({floor:.1f} s), por modo:")
        for mode, _wall, per_nb, inside, _ in rows:
            print(
                f"  {mode:<11} relógio/notebook {per_nb / floor:4.1f}×  "
                f"dentro do worker {inside / floor:4.1f}× (meta: ≤ 2×)"
                + (
                    ""
                    if mode == "sequencial"
                    else f"; dentro do worker ÷ piso com {workers} ao mesmo tempo "
                    f"({busy_floor:.1f} s): {inside / busy_floor:4.1f}×"
                )
            )
        if "sequencial" in base:
            for mode, wall, *_ in rows:
                print(f"  {mode}: {base['sequencial'] / wall:.2f}× mais rápido que em sequência")
        per = min(r[2] for r in rows)
        print(
            f"Extrapolação (linear, no melhor modo, {per:.1f} s/notebook nesta máquina): 30 × 7 = 210 "
            f"notebooks ≈ {210 * per / 60:.0f} min; 300 × 7 = 2100 ≈ {2100 * per / 3600:.1f} h"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
