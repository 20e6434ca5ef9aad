"""Entregas hostis contra o isolamento da correção, pelo ``nbgrader autograde`` de verdade.

Numa cópia temporária do curso (só o capítulo 02_atencao), uma turma em que cada entrega é o
gabarito (7 pontos automáticos) mais uma célula de ataque logo depois dos imports. Cada ataque
tenta, de dentro do kernel da correção: escrever no gradebook; alterar ou apagar as entregas dos
outros e os arquivos do curso (inclusive o pacote ``transformer_course`` no disco); ler o gabarito e
os testes ocultos para a própria saída; deixar um processo vivo depois do kernel; abrir conexões de
rede; encher o disco e a memória; uma bomba de processos; mudar o ambiente dos notebooks seguintes
(arquivos na pasta pessoal, ``.pth``/``sitecustomize``, arquivos de início do IPython). Todas as
entregas passam por UM ``nbgrader autograde`` (rápido), e o teste confere: nada mudou fora da pasta
``autograded/`` de cada um (hashes antes/depois), nenhuma nota saiu do esperado, nenhum processo
sobrou, nenhuma conexão chegou, as entregas honestas têm a nota de sempre, e a devolutiva que
vazaria testes ocultos (um gancho do IPython que imprime cada célula) não é publicada.

Os alvos fora da cópia (o pacote, o ambiente virtual, a pasta pessoal) são arquivos NOVOS, com um
nome único, apagados no fim se o isolamento falhar; os arquivos que já existem só são abertos
para escrita, sem escrever nada.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import sys
import sysconfig
import threading
import uuid
from pathlib import Path

import nbformat
import pytest
from conftest import BIN, ROOT, copy_course, nbgrader

from transformer_course.instructor import sandbox

CHAPTER = "02_atencao"
PROBLEM = sandbox.sandbox_problem()
needs_sandbox = pytest.mark.skipif(
    PROBLEM is not None,
    reason=f"o isolamento não roda nesta máquina ({PROBLEM}); instale o bubblewrap "
    "(`apt-get install bubblewrap util-linux`, Linux com namespaces de usuário)",
)
TOKEN = f"escapou{uuid.uuid4().hex[:10]}"

# ----------------------------------------------------------------------------- as entregas

PRELUDE = """
import os, sys, subprocess, socket, time
RESULTADOS = []
def _tenta(nome, fn):
    try:
        extra = fn()
    except BaseException as exc:  # o ataque falhou: é o esperado
        print(f"bloqueado: {nome}: {type(exc).__name__}: {str(exc)[:120]}")
    else:
        print(f"ESCAPOU: {nome} {extra if extra is not None else ''}"[:2000])
"""


def _attack(body: str) -> str:
    return PRELUDE + body


def _solution():
    """O gabarito como o aluno o teria: sem os testes ocultos (que o solutions/ traz)."""
    nb = nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    for cell in nb.cells:
        cell.source = re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", cell.source, flags=re.S)
    assert "BEGIN HIDDEN" not in nbformat.writes(nb)
    return nb


def _with_cell(code: str):
    nb = _solution()
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(first + 1, nbformat.v4.new_code_cell(code))
    return nb


def _submissions(course: Path, port: int) -> dict:
    """aluno -> notebook; todos valem 7 pontos automáticos, menos ``sem_escala`` (2)."""
    db = course / "grading" / "gradebook.db"
    other = course / "grading" / "submitted" / "gabarito" / CHAPTER / f"{CHAPTER}.ipynb"
    site = sysconfig.get_paths()["purelib"]
    home = Path.home()
    subs = {"gabarito": _solution()}

    wrong = _solution()
    for cell in wrong.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "sdpa":
            cell.source = cell.source.replace(" / math.sqrt(d_k)", "")
    subs["sem_escala"] = wrong

    subs["gradebook"] = _with_cell(
        _attack(f"""
import sqlite3
def _nota():
    con = sqlite3.connect({str(db)!r})
    con.execute("UPDATE grade SET manual_score = 1000")
    con.commit()
_tenta("gradebook: UPDATE das notas", _nota)
_tenta("gradebook: leitura", lambda: sqlite3.connect("file:{db}?mode=ro", uri=True).execute(
    "select count(*) from grade").fetchall())
_tenta("gradebook: apagar", lambda: os.remove({str(db)!r}))
""")
    )

    subs["outras_entregas"] = _with_cell(
        _attack(f"""
_tenta("acrescentar à entrega de outro aluno", lambda: open({str(other)!r}, "a").write(" "))
_tenta("apagar a entrega de outro aluno", lambda: os.remove({str(other)!r}))
_tenta("escrever na correção de outro aluno", lambda: open(
    {str(course / "grading" / "autograded" / "gabarito" / CHAPTER / "x.txt")!r}, "w").write("x"))
_tenta("escrever nas devolutivas", lambda: os.makedirs({str(course / "grading" / "feedback" / "x")!r}))
_tenta("escrever na própria pasta corrigida", lambda: open("meu_arquivo.txt", "w").write("x"))
""")
    )

    package = ROOT / "transformer_course" / "checks"
    subs["arquivos_do_curso"] = _with_cell(
        _attack(f"""
_tenta("acrescentar ao source/", lambda: open(
    {str(course / "source" / CHAPTER / f"{CHAPTER}.ipynb")!r}, "a").write(" "))
_tenta("apagar o release/", lambda: os.remove({str(course / "release" / CHAPTER / f"{CHAPTER}.ipynb")!r}))
_tenta("trocar o nbgrader_config.py", lambda: open({str(course / "nbgrader_config.py")!r}, "a").write("#"))
_tenta("abrir o pacote do curso para escrita", lambda: os.open(
    {str(package / "ch02.py")!r}, os.O_WRONLY))
_tenta("criar um módulo no pacote do curso", lambda: open({str(package / f"{TOKEN}.py")!r}, "x").write("#"))
""")
    )

    targets = [
        course / "source" / CHAPTER / f"{CHAPTER}.ipynb",
        course / "solutions" / CHAPTER / f"{CHAPTER}.ipynb",
        ROOT / "source" / CHAPTER / f"{CHAPTER}.ipynb",
        ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb",
        ROOT / "notebooks" / f"{CHAPTER}.py",
    ]
    subs["gabarito_lido"] = _with_cell(
        _attack(f"""
def _le(caminho):
    texto = open(caminho).read()
    if not texto:
        raise EOFError("arquivo vazio")
    return texto
for _alvo in {[str(t) for t in targets]!r} + [{CHAPTER!r} + ".ipynb"]:
    _tenta("ler " + _alvo, lambda: _le(_alvo))
def _procura():
    achados = []
    for raiz, pastas, arquivos in os.walk("/"):
        if raiz.startswith(("/proc", "/sys", "/dev", "/usr")) or "/lib/python3" in raiz:
            pastas[:] = []
            continue
        for nome in arquivos:
            # Notebooks (source/, solutions/, autograded/) e os capítulos em jupytext (notebooks/NN_*.py).
            if nome.endswith(".ipynb") or (nome[:2].isdigit() and nome.endswith(".py")):
                try:
                    texto = open(os.path.join(raiz, nome), errors="replace").read()
                except OSError:
                    continue
                if "BEGIN HIDDEN" + " TESTS" in texto or "BEGIN SOL" + "UTION" in texto:
                    achados.append(os.path.join(raiz, nome))
                    print(texto)
    if not achados:
        raise FileNotFoundError("nenhum gabarito à vista")
    return achados
_tenta("procurar gabaritos no disco todo", _procura)
""")
    )

    subs["processo_orfao"] = _with_cell(
        _attack(f"""
def _orfao():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", {TOKEN!r}],
                         start_new_session=True)
    if os.fork() == 0:  # daemon de dois forks
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", {TOKEN!r}])
        os._exit(0)
    raise ProcessLookupError(f"criados (o teste confere se morreram com o kernel): {{p.pid}}")
_tenta("processo que sobrevive ao kernel", _orfao)
""")
    )

    subs["rede"] = _with_cell(
        _attack(f"""
_tenta("conectar em 127.0.0.1:{port}", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3))
_tenta("conectar na internet", lambda: socket.create_connection(("1.1.1.1", 80), timeout=3))
_tenta("socket do PostgreSQL", lambda: socket.socket(socket.AF_UNIX).connect(
    "/var/run/postgresql/.s.PGSQL.5432"))
""")
    )

    subs["disco_memoria"] = _with_cell(
        _attack("""
def _enche_tmp():
    bloco = b"x" * (1 << 20)
    with open("/tmp/enche", "wb") as f:
        for _ in range(4096):  # 4 GB
            f.write(bloco)
            f.flush()
_tenta("encher o disco (/tmp)", _enche_tmp)
if os.path.exists("/tmp/enche"):
    os.remove("/tmp/enche")
def _enche_shm():
    with open("/dev/shm/enche", "wb") as f:
        for _ in range(4096):
            f.write(b"x" * (1 << 20))
            f.flush()
_tenta("encher a memória compartilhada (/dev/shm)", _enche_shm)
if os.path.exists("/dev/shm/enche"):
    os.remove("/dev/shm/enche")
_tenta("alocar 64 GB", lambda: len(bytearray(64 * 1024**3)))
""")
    )

    # Bomba contida: ao bater no limite, o próprio ataque mata os filhos (o kernel segue e mostra o limite).
    subs["bomba_de_processos"] = _with_cell(
        _attack("""
def _bomba():
    filhos = []
    try:
        for _ in range(3000):
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            filhos.append(pid)
    finally:
        for pid in filhos:
            os.kill(pid, 9)
        for pid in filhos:
            os.waitpid(pid, 0)
        print(f"FILHOS={len(filhos)}")
_tenta("bomba de processos (3000 forks)", _bomba)
""")
    )

    # Bomba de verdade: os filhos ficam até o fim do kernel. Ou o kernel segue (a bomba parou no limite
    # de processos: a resposta certa vale os 7 pontos), ou ele não consegue criar nem mais uma thread
    # e o nbgrader desiste desta entrega (nota 0, sem pasta em autograded/). Os outros alunos seguem.
    subs["bomba_sem_fim"] = _with_cell(
        _attack(
            f"NOME = {TOKEN[:15]!r}\n"
            + """
falhas = 0
while falhas < 50:
    try:
        if os.fork() == 0:
            open("/proc/self/comm", "w").write(NOME)  # o teste procura os que sobrarem
            time.sleep(600)
            os._exit(0)
    except OSError:
        falhas += 1
"""
        )
    )

    startup = home / ".ipython" / "profile_default" / "startup" / f"00-{TOKEN}.py"
    subs["ambiente"] = _with_cell(
        _attack(f"""
_CARGA = "print('ESCAPOU: {TOKEN}')\\n"
_tenta("arquivo de início do IPython na pasta pessoal", lambda: (
    os.makedirs({str(startup.parent)!r}, exist_ok=True), open({str(startup)!r}, "x").write(_CARGA)))
_tenta(".pth no ambiente virtual", lambda: open({str(Path(site) / f"{TOKEN}.pth")!r}, "x").write(
    "import sys; print('ESCAPOU: {TOKEN}')\\n"))
_tenta("sitecustomize no ambiente virtual", lambda: open({str(Path(site) / "sitecustomize.py")!r}, "x").write(
    _CARGA))
_tenta("arquivo na pasta pessoal de verdade", lambda: open({str(home / f".{TOKEN}")!r}, "x").write("x"))
open("/tmp/{TOKEN}", "x").write("x")  # o /tmp deste kernel é privado: o teste confere o de fora
os.environ["PYTHONSTARTUP"] = "/tmp/{TOKEN}"
""")
    )

    subs["oculto_pelo_gancho"] = _with_cell(
        _attack("""
def _mostra(info):
    print("CÉLULA:", info.raw_cell)
get_ipython().events.register("pre_run_cell", _mostra)
print("gancho registrado: cada célula seguinte (testes ocultos inclusive) aparece na saída")
""")
    )

    subs["zz_depois"] = _solution()  # honesto, corrigido depois de todos os ataques
    return subs


EXPECTED = {"sem_escala": 2}  # os demais: 7 (o gabarito); a bomba sem fim, 7 ou 0 (veja acima)

# ----------------------------------------------------------------------------- a correção


def _digests(*folders: Path) -> dict:
    out = {}
    for folder in folders:
        if folder.is_file():
            out[str(folder)] = hashlib.sha256(folder.read_bytes()).hexdigest()
            continue
        for p in sorted(folder.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts:
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _processes_with(token: str) -> list[str]:
    """Processos com ``token`` na linha de comando ou no nome (``/proc/PID/comm``)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            text = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            comm = (proc / "comm").read_text().strip()
        except OSError:
            continue
        if (token in text and "pytest" not in text) or comm == token[:15]:
            found.append(f"{proc.name}: {comm}: {text[:120]}")
    return found


class _Listener:
    """Um servidor TCP em 127.0.0.1 que anota quem se conectou."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self.stop.set()
        self.thread.join(2)
        self.sock.close()


def _outside_targets(site: str) -> list[Path]:
    home = Path.home()
    return [
        ROOT / "transformer_course" / "checks" / f"{TOKEN}.py",
        home / ".ipython" / "profile_default" / "startup" / f"00-{TOKEN}.py",
        Path(site) / f"{TOKEN}.pth",
        home / f".{TOKEN}",
        Path("/tmp") / TOKEN,
    ]


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    from nbgrader.api import Gradebook

    if PROBLEM is not None:
        pytest.skip(f"o isolamento não roda nesta máquina ({PROBLEM})")
    course = copy_course(
        tmp_path_factory.mktemp("sandbox") / "curso", parts=("source", "release", "solutions")
    )
    for extra in [p for p in (course / "source").iterdir() if p.name != CHAPTER]:
        shutil.rmtree(extra)
    nbgrader(course, "generate_assignment", CHAPTER, "--force")
    listener = _Listener()
    site = sysconfig.get_paths()["purelib"]
    had_sitecustomize = (Path(site) / "sitecustomize.py").exists()
    subs = _submissions(course, listener.port)
    submitted = course / "grading" / "submitted"
    for student, nb in subs.items():
        target = submitted / student / CHAPTER / f"{CHAPTER}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)
    watched = [
        course / "source",
        course / "release",
        course / "solutions",
        course / "nbgrader_config.py",
        submitted,
        ROOT / "transformer_course" / "checks" / "ch02.py",  # o resto do pacote: os arquivos novos, abaixo
    ]
    before = _digests(*watched)
    site_before = sorted(os.listdir(site))
    try:
        run = nbgrader(
            course, "autograde", CHAPTER, "--create", "--Execute.timeout=60", check=False, timeout=1500
        )
        leftovers = _processes_with(TOKEN)
        feedback = nbgrader(course, "generate_feedback", CHAPTER, check=False, timeout=900)
        after = _digests(*watched)
        site_after = sorted(os.listdir(site))
        escaped_files = [str(p) for p in _outside_targets(site) if p.exists()]
        if not had_sitecustomize and (Path(site) / "sitecustomize.py").exists():
            escaped_files.append(str(Path(site) / "sitecustomize.py"))
    finally:
        listener.close()
        for path in _outside_targets(site):  # só existem se o isolamento falhou
            path.unlink(missing_ok=True)
        if not had_sitecustomize:
            (Path(site) / "sitecustomize.py").unlink(missing_ok=True)
        for pid_line in _processes_with(TOKEN):
            try:
                os.kill(int(pid_line.split(":")[0]), 9)
            except OSError:
                pass
    scores = {}
    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        for student in subs:
            try:
                sub = gb.find_submission(CHAPTER, student)
            except Exception:  # noqa: BLE001 - não corrigido
                continue
            scores[student] = sum(
                g.score or 0 for nb in sub.notebooks for g in nb.grades if g.cell_type == "code"
            )
    outputs = {}
    for student in subs:
        graded = course / "grading" / "autograded" / student / CHAPTER / f"{CHAPTER}.ipynb"
        if graded.exists():
            nb = nbformat.read(graded, as_version=4)
            outputs[student] = "\n".join(
                "".join(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                for c in nb.cells
                if c.cell_type == "code"
                for o in c.get("outputs", [])
            )
    print(run.stderr[-4000:])
    return {
        "course": course,
        "subs": subs,
        "run": run,
        "feedback": feedback,
        "before": before,
        "after": after,
        "site": (site_before, site_after),
        "escaped_files": escaped_files,
        "leftovers": leftovers,
        "connections": listener.connections,
        "scores": scores,
        "outputs": outputs,
    }


ATTACKS = [
    "gradebook",
    "outras_entregas",
    "arquivos_do_curso",
    "gabarito_lido",
    "processo_orfao",
    "rede",
    "disco_memoria",
    "bomba_de_processos",
    "ambiente",
    "oculto_pelo_gancho",
]


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("student", ["gabarito", "sem_escala", *ATTACKS, "bomba_sem_fim", "zz_depois"])
def test_scores_unchanged(hostile_class, student):
    assert student in hostile_class["scores"], hostile_class["run"].stderr[-3000:]
    if student == "bomba_sem_fim" and not _graded_notebook(hostile_class, student).exists():
        assert hostile_class["scores"][student] == 0, hostile_class["scores"]  # o nbgrader desistiu dela
        return
    assert hostile_class["scores"][student] == pytest.approx(EXPECTED.get(student, 7)), hostile_class[
        "scores"
    ]


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("student", ATTACKS)
def test_attack_blocked(hostile_class, student):
    out = hostile_class["outputs"][student]
    if student != "oculto_pelo_gancho":
        assert "bloqueado:" in out, f"o ataque de {student} não rodou:\n{out[:3000]}"
    escaped = [ln for ln in out.splitlines() if ln.startswith("ESCAPOU")]
    if student == "bomba_de_processos":
        # A bomba pára no limite de processos do uid descartável (ou do usuário, fora do root).
        assert "bloqueado: bomba de processos" in out, out[:2000]
        return
    assert not escaped, f"{student}: {escaped}"


@pytest.mark.slow
@needs_sandbox
def test_nothing_changed_outside_own_folder(hostile_class):
    before, after = hostile_class["before"], hostile_class["after"]
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"arquivos alterados fora de autograded/: {changed[:20]}"
    assert hostile_class["site"][0] == hostile_class["site"][1], "o ambiente virtual mudou"
    assert not hostile_class["escaped_files"], hostile_class["escaped_files"]
    # O aluno corrigido depois de todos os ataques não herdou nada (início do IPython, .pth...).
    assert "ESCAPOU" not in hostile_class["outputs"]["zz_depois"]
    # Na pasta corrigida de cada aluno, só o que ele entregou (a pasta é só leitura para o kernel).
    course = hostile_class["course"]
    for student in hostile_class["subs"]:
        if student == "bomba_sem_fim":  # o nbgrader desistiu dela: não há pasta corrigida
            continue
        mine = sorted(p.name for p in (course / "grading" / "submitted" / student / CHAPTER).iterdir())
        graded = sorted(p.name for p in (course / "grading" / "autograded" / student / CHAPTER).iterdir())
        assert graded == mine, (student, graded)


@pytest.mark.slow
@needs_sandbox
def test_no_process_outlives_kernel(hostile_class):
    assert "bloqueado: processo que sobrevive" in hostile_class["outputs"]["processo_orfao"]
    assert hostile_class["leftovers"] == [], hostile_class["leftovers"]


@pytest.mark.slow
@needs_sandbox
def test_no_connection_reached_host(hostile_class):
    assert "bloqueado: conectar em 127.0.0.1" in hostile_class["outputs"]["rede"]
    assert hostile_class["connections"] == 0


@pytest.mark.slow
@needs_sandbox
def test_fork_bomb_limited(hostile_class):
    out = hostile_class["outputs"]["bomba_de_processos"]
    line = next(ln for ln in out.splitlines() if "bomba de processos" in ln)
    assert "BlockingIOError" in line or "Resource temporarily unavailable" in line, line
    children = int(re.search(r"FILHOS=(\d+)", out).group(1))
    if os.geteuid() == 0:
        assert 0 < children < sandbox.MAX_PROCESSES, children
    # A bomba sem fim fica no limite de processos: no máximo derruba a própria entrega (o nbgrader
    # desiste dela); quem vem depois é corrigido, e nada sobra (test_no_process_outlives_kernel).
    endless = hostile_class["outputs"].get("bomba_sem_fim")
    if _graded_notebook(hostile_class, "bomba_sem_fim").exists():
        assert endless is not None and "ESCAPOU" not in endless
    assert hostile_class["scores"]["zz_depois"] == 7


def _graded_notebook(hostile_class, student: str) -> Path:
    return hostile_class["course"] / "grading" / "autograded" / student / CHAPTER / f"{CHAPTER}.ipynb"


@pytest.mark.slow
@needs_sandbox
def test_answer_key_not_in_outputs_nor_feedback(hostile_class):
    course = hostile_class["course"]
    secret = sandbox.instructor_lines(
        nbformat.read(course / "source" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    )
    assert len(secret) > 10
    for student in ["gabarito_lido", "ambiente", "outras_entregas"]:
        out = hostile_class["outputs"][student]
        assert not sandbox.find_leaks(out, secret), student
    feedback = course / "grading" / "feedback"
    assert (feedback / "gabarito" / CHAPTER / f"{CHAPTER}.html").exists(), hostile_class["feedback"].stderr[
        -2000:
    ]
    for html in feedback.rglob("*.html"):
        student = html.relative_to(feedback).parts[0]
        assert not sandbox.feedback_leaks(course, CHAPTER, student), html
    # Com o juiz, os testes ocultos nem entram no kernel: o gancho que imprime cada célula rodou, mas
    # não viu nenhum (só as células do aluno e os pedidos do juiz). A devolutiva que os contivesse,
    # em texto ou codificados, seria recusada: tests/test_grading_boundary.py.
    hooked = hostile_class["outputs"]["oculto_pelo_gancho"]
    assert "gancho registrado" in hooked and "CÉLULA:" in hooked
    own = "\n".join(cell.source for cell in hostile_class["subs"]["oculto_pelo_gancho"].cells)
    assert not sandbox.find_leaks(hooked, secret, allowed=own)  # as soluções que ela mesma escreveu, sim


@needs_sandbox
def test_kernel_is_unprivileged_and_limited():
    """O comando do sandbox roda sem capacidades, sem rede, com os limites."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        code = (
            "import os, resource; s = open('/proc/self/status').read();"
            "print(os.getuid(), [ln for ln in s.splitlines() if ln.startswith('CapEff')][0].split()[1],"
            " resource.getrlimit(resource.RLIMIT_NPROC)[0], resource.getrlimit(resource.RLIMIT_AS)[0],"
            " sorted(os.listdir('/')))"
        )
        uid = sandbox._sandbox_uid()
        run = subprocess.run(
            sandbox.bwrap_command(tmp, tmp, uid) + [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=sandbox.sandbox_env(dict(os.environ)),
            timeout=120,
        )
    assert run.returncode == 0, run.stderr
    got_uid, caps, nproc, mem, top = run.stdout.split(" ", 4)
    assert caps == "0000000000000000"
    assert int(mem) == sandbox.MEMORY_BYTES
    if os.geteuid() == 0:
        assert int(got_uid) == uid and int(nproc) == sandbox.MAX_PROCESSES
    assert "root" not in top or os.path.realpath(sys.base_prefix).startswith("/root"), top


# ----------------------------------------------------------------------------- sem isolamento


def _env_without_bwrap(tmp_path: Path) -> dict:
    """PATH só com o ambiente virtual (nbgrader, alembic, python): o ``bwrap`` some."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("nbgrader", "alembic", "python", "python3", "jupyter"):
        if (BIN / name).exists():
            (bindir / name).symlink_to(BIN / name)
    env = {k: v for k, v in os.environ.items() if k != sandbox.UNCONFINED_ENV}
    env["PATH"] = str(bindir)
    return env


def test_refuses_unconfined_without_flag(tmp_path):
    import subprocess

    env = _env_without_bwrap(tmp_path)
    code = "from transformer_course.instructor.sandbox import require_sandbox; require_sandbox()"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "SandboxUnavailable" in run.stderr and "recusada" in run.stderr, run.stderr
    assert "gradebook" in run.stderr and "TRANSFORMER_COURSE_UNCONFINED=1" in run.stderr

    run = subprocess.run(
        [sys.executable, "-c", code + "; print('seguiu')"],
        env={**env, sandbox.UNCONFINED_ENV: "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and "seguiu" in run.stdout
    assert "SEM isolamento" in run.stderr, run.stderr


@pytest.mark.slow
def test_plain_autograde_refuses_without_sandbox(tmp_path):
    """``nbgrader autograde`` sem bubblewrap: o kernel não inicia e nenhuma nota é gravada."""
    from nbgrader.api import Gradebook

    course = copy_course(tmp_path / "curso", parts=("source", "release", "solutions"))
    for extra in [p for p in (course / "source").iterdir() if p.name != CHAPTER]:
        shutil.rmtree(extra)
    nbgrader(course, "generate_assignment", CHAPTER, "--force")
    target = course / "grading" / "submitted" / "aluna" / CHAPTER / f"{CHAPTER}.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(_solution(), target)
    import subprocess

    run = subprocess.run(
        [str(BIN / "nbgrader"), "autograde", CHAPTER, "--create"],
        cwd=course,
        env=_env_without_bwrap(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "isolamento não roda" in run.stderr, run.stderr[-3000:]
    assert not (course / "grading" / "autograded" / "aluna" / CHAPTER).exists()
    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        assert not gb.find_assignment(CHAPTER).submissions or all(
            s.score == 0 for s in gb.find_assignment(CHAPTER).submissions
        )


def test_withhold_leaky_feedback(tmp_path):
    """Segunda camada: a devolutiva com linhas de testes ocultos sai de feedback/ com o motivo."""
    course = tmp_path / "curso"
    shutil.copytree(ROOT / "source" / CHAPTER, course / "source" / CHAPTER)
    source = nbformat.read(course / "source" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    secret = sandbox.instructor_lines(source)
    hidden = next(line for line in secret if "hidden_check" in line or "check_" in line)
    solution_line = next(line for line in secret if "math.sqrt" in line)
    submitted = course / "grading" / "submitted"
    # "copiou" escreveu a mesma linha da solução: é dela, não é vazamento.
    for student, leak in (("honesta", ""), ("vazou", hidden), ("copiou", solution_line)):
        folder = submitted / student / CHAPTER
        folder.mkdir(parents=True)
        nbformat.write(
            nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("" if student == "vazou" else leak)]),
            folder / f"{CHAPTER}.ipynb",
        )
        html = course / "grading" / "feedback" / student / CHAPTER / f"{CHAPTER}.html"
        html.parent.mkdir(parents=True)
        body = "<pre>" + leak.replace("<", "&lt;").replace('"', "&quot;") + "</pre>"
        if student == "vazou":
            body = f"<pre>CÉLULA: {hidden.replace('<', '&lt;')}</pre>"
        html.write_text(f"<html><body>{body}</body></html>")
    withheld = sandbox.withhold_leaky_feedback(course, CHAPTER)
    assert list(withheld) == ["vazou"], withheld
    assert "não foi publicada" in withheld["vazou"]
    assert not (course / "grading" / "feedback" / "vazou" / CHAPTER).exists()
    kept = course / "grading" / "feedback_retida" / "vazou" / CHAPTER
    assert (kept / "MOTIVO.txt").read_text().count(hidden[:40]) >= 1
    assert (course / "grading" / "feedback" / "honesta" / CHAPTER / f"{CHAPTER}.html").exists()
    assert (course / "grading" / "feedback" / "copiou" / CHAPTER / f"{CHAPTER}.html").exists()


def test_instructor_lines_cover_solutions_and_hidden_tests():
    source = nbformat.read(ROOT / "source" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    lines = sandbox.instructor_lines(source)
    assert any("math.sqrt" in line for line in lines)  # solução
    assert any(re.search(r"hidden_check|_hidden", line) for line in lines)  # testes ocultos
    assert any("Resposta modelo" in line for line in lines)  # resposta modelo (texto)
    release = (ROOT / "release" / CHAPTER / f"{CHAPTER}.ipynb").read_text()
    assert not sandbox.find_leaks(release, lines), "a versão do aluno não tem material do professor"


@needs_sandbox
def test_grading_kernel_imports_no_matplotlib(tmp_path, monkeypatch):
    """No kernel da correção, ``%matplotlib inline`` não faz nada e figuras e widgets viram avisos
    sem importar o matplotlib (≈0,9 s a menos por notebook corrigido)."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    os.chmod(tmp_path, 0o755)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell(
            "%matplotlib inline\nimport sys\nimport torch\n"
            "from transformer_course import plots\nfrom transformer_course.widgets import dk_widget\n"
            "print(repr(plots.scaling_figure(None)), repr(dk_widget()))\n"
            "print('matplotlib carregado:', 'matplotlib' in sys.modules)"
        )
    ]
    sandbox.SandboxedExecute(timeout=120).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    text = "".join(out.get("text", "") for out in nb.cells[0].outputs)
    assert "[scaling_figure(): figura não desenhada" in text, text
    assert "[dk_widget(): exploração interativa, não montada" in text, text
    assert "matplotlib carregado: False" in text, text
