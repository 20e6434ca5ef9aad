"""A fronteira entre o kernel da correção e o corretor: o kernel não recebe nada do corretor.

- **Ambiente**: só as variáveis de ``sandbox.PASS_ENV`` (nomes exatos), nada de ``JPY_*`` nem de
  ``JUPYTERHUB_*`` (num terminal do hub, ``JPY_API_TOKEN`` abre a conta do professor).
- **Terminal e logs**: stdin e stdout do kernel (e do bwrap) em ``/dev/null``, stderr num pipe do
  gerenciador com limite; ``make grade-class`` num pseudoterminal de verdade, com uma entrega que
  escreve nos descritores 1 e 2, em ``/dev/tty``, em ``/proc/self/fd/*`` e lê o stdin: nada dela
  chega ao terminal nem a ``grading/dask-workers.log``, e o que se digita não chega ao kernel.
- **Pasta da conexão**: um tmpfs de ``CONNECTION_BYTES`` (como root), apagado sem recursão e
  conferido; nada sobra no /tmp.
- **/proc**: ``/proc/1/cmdline`` (o bwrap) não mostra as montagens (elas vão por ``--args FD``).
- **Devolutiva**: a segunda camada acha os testes ocultos também em base64, hexadecimal, URL...

Os ataques rodam no kernel de verdade (bubblewrap); nada aqui espera um tempo fixo: cada espera
tem um prazo e termina quando o que se espera acontece.
"""

from __future__ import annotations

import base64
import codecs
import errno
import fcntl
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import time
import urllib.parse
import uuid
import zlib
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, copy_course

from transformer_course.instructor import sandbox

CHAPTER = "02_atencao"
PROBLEM = sandbox.sandbox_problem()
TMP = Path(tempfile.gettempdir())  # onde ficam as pastas da conexão
needs_sandbox = pytest.mark.skipif(
    PROBLEM is not None,
    reason=f"o isolamento não roda nesta máquina ({PROBLEM}); instale o bubblewrap "
    "(`apt-get install bubblewrap util-linux`, Linux com namespaces de usuário)",
)
TOKEN = uuid.uuid4().hex[:12]  # marcas das entregas
SECRET = uuid.uuid4().hex[:12]  # nos valores do ambiente do corretor: não pode aparecer em lugar nenhum
# O ambiente de um terminal do hub (os valores são marcas únicas deste teste).
HUB_ENV = {
    "JPY_API_TOKEN": f"jpy-{SECRET}",
    "JUPYTERHUB_API_TOKEN": f"hubapi-{SECRET}",
    "JPY_SESSION_NAME": f"/home/prof/sessao-{SECRET}.ipynb",
    "JUPYTERHUB_API_URL": f"http://127.0.0.1:1/hub/api/{SECRET}",
    "JUPYTERHUB_USER": f"prof{SECRET}",
    "AWS_SECRET_ACCESS_KEY": f"aws-{SECRET}",
    "PGPASSWORD": f"pg-{SECRET}",
    "PYTHONPATH": f"/home/prof/{SECRET}",
}
# O que o próprio ipykernel ou o bwrap põem no ambiente do kernel (não vem do corretor).
KERNEL_OWN_ENV = {"PWD", "TERM", "CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "PAGER", "GIT_PAGER"}
KERNEL_OWN_ENV |= {"PYDEVD_USE_FRAME_EVAL", "JPY_PARENT_PID"}


def _notebook(*sources: str):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    return nb


def _text(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        out.append(o.get("text", "") if isinstance(o.get("text", ""), str) else "".join(o["text"]))
        out.append(str(o.get("data", {}).get("text/plain", "")))
        out.append(o.get("evalue", ""))
    return "".join(out)


def _our_connection_dirs() -> list[str]:
    return sorted(str(p) for p in TMP.glob(f"{sandbox.CONNECTION_PREFIX}{os.getpid()}-*"))


# ----------------------------------------------------------------------------- ambiente


def test_env_allowlist_is_exact():
    grader = {
        **HUB_ENV,
        "PATH": f"/home/prof/{SECRET}/bin:/usr/bin",
        "LANG": "pt_BR.UTF-8",
        "OMP_NUM_THREADS": "1",
    }
    env = sandbox.sandbox_env(grader, package="/x")
    assert not [k for k in env if k.startswith(("JPY_", "JUPYTERHUB_"))], env
    assert SECRET not in json.dumps(env), env
    assert env["LANG"] == "pt_BR.UTF-8" and env["OMP_NUM_THREADS"] == "1"
    assert env["PATH"] == f"{os.path.dirname(sys.executable)}:{sandbox.SYSTEM_PATH}"
    assert env["PYTHONPATH"] == sandbox.PACKAGE_MOUNT and env["HOME"] == "/tmp"
    passed = {k for k in grader if k in env and env[k] == grader[k]}
    assert passed <= set(sandbox.PASS_ENV), passed
    assert not any(name.endswith("*") or name.endswith("_") for name in sandbox.PASS_ENV)


# ----------------------------------------------------------------------------- um kernel de verdade

KERNEL_PROBE = r"""
import glob, json, os, select, sys
from ipykernel import get_connection_file
R = {"env": dict(os.environ), "cmdline": {}, "environ": {}, "fds": {}}
for p in glob.glob("/proc/[0-9]*"):
    try:
        R["cmdline"][p] = open(p + "/cmdline", "rb").read().decode(errors="replace")
    except OSError as e:
        R["cmdline"][p] = "ERRO " + type(e).__name__
    try:
        R["environ"][p] = open(p + "/environ", "rb").read().decode(errors="replace")
    except OSError as e:
        R["environ"][p] = "ERRO " + type(e).__name__
R["mountinfo"] = open("/proc/self/mountinfo").read()
for fd in os.listdir("/proc/self/fd"):
    try:
        R["fds"][fd] = os.readlink("/proc/self/fd/" + fd)
    except OSError:
        pass
R["stdin_pronto"] = bool(select.select([0], [], [], 0)[0])
R["stdin"] = os.read(0, 100).decode(errors="replace")
try:
    open("/dev/tty", "w")
    R["tty"] = "ABRIU"
except OSError as e:
    R["tty"] = e.errno
pasta = os.path.dirname(get_connection_file())
R["pasta"] = pasta
st = os.statvfs(pasta)
R["pasta_bytes"] = st.f_blocks * st.f_frsize
escritos = 0
try:
    with open(pasta + "/enche", "wb") as f:
        for _ in range(256):  # 256 MB
            f.write(b"x" * (1 << 20))
            f.flush()
            escritos += 1 << 20
except OSError as e:
    R["enche"] = [e.errno, escritos]
else:
    R["enche"] = ["ESCREVEU TUDO", escritos]
os.remove(pasta + "/enche")
p = pasta
niveis = 0
try:
    for _ in range(1500):
        p += "/a"
        os.mkdir(p)
        niveis += 1
except OSError as e:
    R["arvore"] = [e.errno, niveis]
else:
    R["arvore"] = ["CRIOU TUDO", niveis]
print("RESULTADO" + json.dumps(R))
"""


@pytest.fixture(scope="module")
def probed_kernel(tmp_path_factory):
    """Um kernel confinado de verdade (SandboxedExecute), com o ambiente de um terminal do hub."""
    if PROBLEM is not None:
        pytest.skip(f"o isolamento não roda nesta máquina ({PROBLEM})")
    folder = tmp_path_factory.mktemp("kernel")
    os.chmod(folder, 0o755)
    saved = {k: os.environ.get(k) for k in HUB_ENV}
    os.environ.update(HUB_ENV)
    try:
        nb = _notebook(KERNEL_PROBE)
        sandbox.SandboxedExecute(timeout=120).preprocess(nb, {"metadata": {"path": str(folder)}})
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    text = _text(nb.cells[0])
    assert "RESULTADO" in text, text[-3000:]
    result = json.loads(text.split("RESULTADO", 1)[1].strip().splitlines()[0])
    result["nb"] = nbformat.writes(nb)
    result["tmp_left"] = _our_connection_dirs()
    return result


@needs_sandbox
def test_kernel_env_has_nothing_of_the_grader(probed_kernel):
    env = probed_kernel["env"]
    assert SECRET not in probed_kernel["nb"]  # nem no ambiente, nem no /proc, nem em lugar nenhum
    assert not [k for k in env if k.startswith(("JPY_", "JUPYTERHUB_"))], sorted(env)
    fixed = set(sandbox.sandbox_env({}, package="/x")) | set(sandbox.PASS_ENV)
    assert set(env) <= fixed | KERNEL_OWN_ENV, sorted(set(env) - fixed - KERNEL_OWN_ENV)


@needs_sandbox
def test_no_bwrap_options_in_proc(probed_kernel):
    cmdlines = probed_kernel["cmdline"]
    bwrap = cmdlines["/proc/1"].split("\0")
    assert bwrap[0] == "bwrap" and bwrap[1] == "--args", bwrap[:4]
    everything = "\n".join(cmdlines.values())
    for option in ("--ro-bind", "--bind", "--tmpfs", "--unshare-net", "--chdir", "--setenv"):
        assert option not in everything, option
    # O caminho do Python fica visível (o kernel precisa dele); nenhum outro caminho do curso.
    for venv in {sys.prefix, os.path.realpath(sys.prefix)}:
        everything = everything.replace(venv, "<ambiente>")
    assert str(ROOT) not in everything
    # O ambiente do bwrap (o do corretor, filtrado) não é legível pelo uid descartável.
    if os.geteuid() == 0:
        assert probed_kernel["environ"]["/proc/1"].startswith("ERRO"), probed_kernel["environ"]["/proc/1"]
    for text in probed_kernel["environ"].values():
        assert "JPY_" not in text and SECRET not in text


@needs_sandbox
def test_kernel_stdio_is_not_the_grader(probed_kernel):
    fds = probed_kernel["fds"]
    assert fds["0"] == "/dev/null", fds
    # Só o kernel e o IPython: nenhum descritor do corretor (o memfd das opções do bwrap fechou).
    assert not [t for t in fds.values() if "memfd" in t or "/dev/pts" in t or t.startswith("/dev/tty")], fds
    assert probed_kernel["stdin"] == ""
    assert probed_kernel["tty"] == errno.ENXIO  # sem terminal de controle


@needs_sandbox
def test_connection_folder_is_small_and_removed(probed_kernel):
    folder = probed_kernel["pasta"]
    assert Path(folder).name.startswith(f"{sandbox.CONNECTION_PREFIX}{os.getpid()}-")
    assert not os.path.lexists(folder), "a pasta da conexão ficou"
    assert not [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if folder in line]
    assert probed_kernel["tmp_left"] == [], probed_kernel["tmp_left"]
    if os.geteuid() == 0:
        # tmpfs pequeno: encher e uma árvore funda param no limite.
        assert probed_kernel["pasta_bytes"] <= sandbox.CONNECTION_BYTES, probed_kernel["pasta_bytes"]
        code, written = probed_kernel["enche"]
        assert code == errno.ENOSPC and written <= sandbox.CONNECTION_BYTES, probed_kernel["enche"]
        code, depth = probed_kernel["arvore"]
        assert code == errno.ENOSPC and depth < sandbox.CONNECTION_INODES, probed_kernel["arvore"]


# ----------------------------------------------------------------------------- a pasta da conexão


def test_remove_tree_without_recursion(tmp_path):
    """Uma árvore de 1.500 níveis (o ``shutil.rmtree`` do Python 3.11 estoura a pilha nela)."""
    outside = tmp_path / "fora.txt"
    outside.write_text("fica")
    top = tmp_path / "arvore"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(1500):  # caminhos relativos: o caminho inteiro passaria do PATH_MAX
            os.mkdir("a", dir_fd=fd)
            sub = os.open("a", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = sub
            with open(os.open("x", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as f:
                f.write("x")
        os.symlink(str(outside), "link", dir_fd=fd)
        os.mkdir("trancada", 0o000, dir_fd=fd)
    finally:
        os.close(fd)
    (top / "a" / "b").mkdir()
    (top / "a" / "b" / "a").mkdir()  # um nome repetido em outro nível
    sandbox.remove_tree(str(top))
    assert not top.exists()
    assert outside.read_text() == "fica"  # o link não foi seguido


def test_connection_dir_tmpfs_and_stale_cleanup():
    path, why = sandbox.make_connection_dir()
    try:
        assert Path(path).name.startswith(f"{sandbox.CONNECTION_PREFIX}{os.getpid()}-")
        if os.geteuid() == 0:
            assert why is None, why
            assert path in sandbox._mount_points()
            st = os.statvfs(path)
            assert st.f_blocks * st.f_frsize <= sandbox.CONNECTION_BYTES
            assert os.stat(path).st_mode & 0o777 == 0o700
        else:
            assert why and "root" in why
        Path(path, "x").write_text("x")
    finally:
        assert sandbox.remove_connection_dir(path)
    assert not os.path.lexists(path)
    if path in sandbox._mount_points():
        pytest.fail("o tmpfs ficou montado")

    # A pasta de um corretor morto (kill -9 no meio da turma) é apagada pelo próximo.
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # nenhum processo tem este pid
    stale = TMP / f"{sandbox.CONNECTION_PREFIX}{dead}-{TOKEN}"
    stale.mkdir()
    mounted = sandbox._mount_tmpfs(str(stale)) is None
    (stale / "sobra").write_text("x")
    removed = sandbox.remove_stale_connection_dirs()
    assert str(stale) in removed and not stale.exists()
    if mounted:
        assert str(stale) not in sandbox._mount_points()


def test_hide_arguments():
    cmd = ["bwrap", "--ro-bind", "/usr", "/usr", "--chdir", "/x", "--", "prlimit", "--", "python", "-c", "1"]
    short, fd = sandbox.hide_arguments(cmd)
    try:
        assert short == ["bwrap", "--args", str(fd), "--", "prlimit", "--", "python", "-c", "1"]
        data = os.pread(fd, 4096, 0)
        assert data.split(b"\0")[:-1] == [a.encode() for a in cmd[1:6]]
    finally:
        os.close(fd)
    assert sandbox.hide_arguments(["python", "-c", "1"]) == (["python", "-c", "1"], None)
    short, fd = sandbox.hide_arguments(["/usr/bin/bwrap", "--unshare-pid", "--", "x"])
    os.close(fd)
    assert short == ["/usr/bin/bwrap", "--args", str(fd), "--", "x"]


def test_kernel_stderr_is_capped():
    """O stderr do kernel: um pipe do corretor que guarda só o começo (e conta o resto)."""
    pipe = sandbox.CappedPipe(cap=1000)
    code = "import os\nos.write(2, b'\\x1b[2J' + b'e' * 2_000_000)"
    run = subprocess.run([sys.executable, "-c", code], stderr=pipe.write_fd, timeout=60)
    pipe.close_writer()
    assert run.returncode == 0
    assert pipe.wait(60), "o pipe não terminou"
    assert pipe.total == 2_000_004 and len(pipe.head) == 1000
    text = pipe.text()
    assert "\x1b" not in text and "\\x1b[2J" in text and "mais 1999004 bytes descartados" in text


@needs_sandbox
def test_bwrap_reads_and_closes_the_args_fd(tmp_path):
    os.chmod(tmp_path, 0o755)
    cmd = sandbox.bwrap_command(str(tmp_path), str(tmp_path), sandbox._sandbox_uid())
    code = "import os; print(sorted(os.listdir('/proc/self/fd'))); print(open('/proc/1/cmdline').read())"
    short, fd = sandbox.hide_arguments([*cmd, sys.executable, "-c", code])
    try:
        run = subprocess.run(
            short,
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=sandbox.sandbox_env(dict(os.environ)),
            timeout=120,
        )
    finally:
        os.close(fd)
    assert run.returncode == 0, run.stderr
    fds, cmdline = run.stdout.splitlines()[:2]
    assert fds == "['0', '1', '2', '3']", fds  # 3: o próprio listdir
    assert "--ro-bind" not in cmdline and str(tmp_path) not in cmdline.split("--", 1)[0]


# ----------------------------------------------------------------------------- devolutiva codificada


def _secret_lines():
    source = nbformat.read(ROOT / "source" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    lines = sandbox.instructor_lines(source)
    hidden = [line for line in lines if "hidden_check" in line or "_hidden" in line]
    assert hidden
    return lines, hidden


ENCODINGS = {
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
    "base64_em_linhas": lambda s: base64.encodebytes(s.encode()).decode(),
    "base64_url_no_meio_do_texto": lambda s: (
        "dados: xyz" + base64.urlsafe_b64encode(s.encode()).decode() + " fim"
    ),
    "base64_de_zlib": lambda s: base64.b64encode(zlib.compress(s.encode())).decode(),
    "base64_duplo": lambda s: base64.b64encode(base64.b64encode(s.encode())).decode(),
    "hexadecimal": lambda s: s.encode().hex(),
    "hexadecimal_espacado": lambda s: s.encode().hex(" "),
    "url": lambda s: urllib.parse.quote(s),
    "ao_contrario": lambda s: s[::-1],
    "rot13": lambda s: codecs.encode(s, "rot13"),
    "codigos": lambda s: str([ord(c) for c in s]),
    "escapes_unicode": lambda s: "".join(f"\\u{ord(c):04x}" for c in s),
    "escapes_python": lambda s: s.encode("unicode_escape").decode(),
}


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_find_leaks_decodes(encoding):
    lines, hidden = _secret_lines()
    secret = "\n".join(hidden)
    text = f"<pre>saída da célula:\n{ENCODINGS[encoding](secret)}\n</pre>"
    assert set(sandbox.find_leaks(text, lines)) >= set(hidden), encoding
    # O que o aluno escreveu (a própria linha, em texto) não conta.
    assert not sandbox.find_leaks(text, hidden, allowed=secret)


def test_find_leaks_no_false_alarm():
    lines, _ = _secret_lines()
    release = (ROOT / "release" / CHAPTER / f"{CHAPTER}.ipynb").read_text()
    assert not sandbox.find_leaks(release, lines)
    noise = base64.b64encode(os.urandom(200_000)).decode() + os.urandom(50_000).hex()
    assert not sandbox.find_leaks(noise, lines)


def test_block_feedback_base64_split_over_outputs(tmp_path):
    """Na devolutiva: o base64 quebrado em várias linhas de saída (o JSON do notebook as separa)."""
    from traitlets.config import Config

    lines, hidden = _secret_lines()
    course = tmp_path / "curso"
    shutil.copytree(ROOT / "source" / CHAPTER, course / "source" / CHAPTER)
    (course / "grading" / "submitted" / "aluna" / CHAPTER).mkdir(parents=True)
    nbformat.write(
        _notebook("print('oi')"), course / "grading" / "submitted" / "aluna" / CHAPTER / f"{CHAPTER}.ipynb"
    )
    encoded = base64.encodebytes("\n".join(hidden).encode()).decode()
    nb = _notebook("import base64")
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text=encoded)]
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    config = Config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.source_directory = "source"
    config.CourseDirectory.submitted_directory = "grading/submitted"
    guard = sandbox.BlockInstructorMaterial(config=config)
    resources = {"nbgrader": {"assignment": CHAPTER, "notebook": CHAPTER, "student": "aluna"}}
    with pytest.raises(RuntimeError, match="recusada"):
        guard.preprocess(nb, resources)
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="tudo certo\n")]
    guard.preprocess(nb, resources)


# ----------------------------------------------------------------------------- num pseudoterminal

TYPED = f"senha-digitada-{TOKEN}"
MARK = f"KERNEL-ESCREVEU-{TOKEN}"

TERMINAL_ATTACK = """
import glob, os, select
MARCA = "KERNEL-" + "ESCREVEU-" + "MARCA_DO_TESTE"
texto = (MARCA + "\\x1b[2J\\x1b[H aluno  02_atencao\\n fulano  7/7\\n").encode()
for fd in (0, 1, 2):
    try:
        os.write(fd, texto)
    except OSError:
        pass
alvos = ["/dev/tty", "/dev/console", "/proc/1/fd/0", "/proc/1/fd/1", "/proc/1/fd/2"] + glob.glob("/dev/pts/*")
alvos += ["/proc/self/fd/" + n for n in os.listdir("/proc/self/fd")]
for alvo in alvos:
    try:
        destino = os.readlink(alvo) if alvo.startswith("/proc/") else alvo
    except OSError:
        destino = alvo
    if "socket:" in destino or "anon_inode:" in destino:
        continue  # os sockets do próprio kernel
    try:
        fd = os.open(alvo, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
        os.write(fd, texto)
        os.close(fd)
    except OSError:
        pass
lido = b""
for alvo in [0, "/dev/tty", "/proc/self/fd/0", "/proc/1/fd/0"]:
    try:
        fd = alvo if isinstance(alvo, int) else os.open(alvo, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        if select.select([fd], [], [], 3)[0]:
            lido += os.read(fd, 4096)
    except OSError:
        pass
print("LIDO DO TERMINAL:", lido)
""".replace("MARCA_DO_TESTE", TOKEN)


def _run_in_pty(cmd, cwd, env, typed: str, timeout: float) -> tuple[int, bytes, int]:
    """Roda ``cmd`` com um pseudoterminal como terminal de controle; devolve (código, o que o
    terminal recebeu, bytes digitados que ninguém leu)."""
    master, slave = os.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~termios.ECHO  # sem eco: o que aparece no terminal foi escrito por alguém
    termios.tcsetattr(slave, termios.TCSANOW, attrs)

    def controlling_tty():
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=controlling_tty,  # noqa: PLW1509 - só no teste
    )
    os.write(master, (typed + "\n").encode())  # o instrutor digita enquanto a turma é corrigida
    received = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready = select.select([master], [], [], 1.0)[0]
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    chunk = b""
                received += chunk
            if proc.poll() is not None and not ready:
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise AssertionError(
                    f"a correção passou de {timeout} s:\n{received.decode(errors='replace')[-3000:]}"
                )
        unread = int.from_bytes(fcntl.ioctl(slave, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)
    finally:
        os.close(slave)
        os.close(master)
    return proc.returncode, bytes(received), unread


@pytest.mark.slow
@needs_sandbox
def test_grade_class_in_a_terminal(tmp_path):
    """``make grade-class`` (``scripts/grade_class.py`` no Dask) num pseudoterminal, como o instrutor o
    roda, com o ambiente de um terminal do hub: a entrega hostil não escreve no terminal nem no log dos
    workers, não lê o que se digita, e nenhum token chega a ela."""
    course = copy_course(tmp_path / "curso", parts=("source", "release", "solutions", "scripts"))
    for extra in [p for p in (course / "source").iterdir() if p.name != CHAPTER]:
        shutil.rmtree(extra)
    sol = nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    for cell in sol.cells:
        cell.source = re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", cell.source, flags=re.S)
    hostile = nbformat.from_dict(json.loads(nbformat.writes(sol)))
    first = next(i for i, c in enumerate(hostile.cells) if c.cell_type == "code")
    hostile.cells.insert(first + 1, nbformat.v4.new_code_cell(TERMINAL_ATTACK))
    hostile.cells.insert(first + 2, nbformat.v4.new_code_cell("import os\nprint(dict(os.environ))"))
    for student, nb in (("hostil", hostile), ("honesta", sol)):
        target = course / "grading" / "submitted" / student / CHAPTER / f"{CHAPTER}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)
    env = {**os.environ, **HUB_ENV, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
    env["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"
    before = set(os.listdir(TMP))
    code, received, unread = _run_in_pty(
        [sys.executable, str(course / "scripts" / "grade_class.py"), "--workers=1"],
        course,
        env,
        TYPED,
        timeout=1200,
    )
    screen = received.decode(errors="replace")
    print(screen[-3000:])
    assert code == 0, screen[-3000:]
    assert re.search(r"hostil\s+7/7", screen) and re.search(r"honesta\s+7/7", screen), screen[-2000:]
    assert MARK not in screen  # nada do kernel no terminal
    assert "\x1b[2J" not in screen
    assert unread == len(TYPED) + 1, f"alguém leu o que o instrutor digitou ({unread} bytes ficaram)"
    graded = (course / "grading" / "autograded" / "hostil" / CHAPTER / f"{CHAPTER}.ipynb").read_text()
    assert MARK in graded, (
        "o ataque não rodou"
    )  # o ipykernel pôs na saída da célula o que foi para os fds 1 e 2
    assert "LIDO DO TERMINAL: b''" in graded, graded[-2000:]
    logs = [course / "grading" / "dask-workers.log", course / "grading" / "autograde.log"]
    feedback = list((course / "grading" / "feedback").rglob("*.html"))
    assert feedback, "nenhuma devolutiva"
    for path in [
        *logs,
        *feedback,
        course / "grading" / "autograded" / "hostil" / CHAPTER / f"{CHAPTER}.ipynb",
    ]:
        if path.exists():
            text = path.read_text(errors="replace")
            assert TYPED not in text, path
            assert SECRET not in text, path  # nenhum token do terminal do hub
            if path in logs:
                assert MARK not in text, path
    # Pastas de conexão novas de processos que já terminaram (os da correção): nenhuma.
    pattern = re.compile(rf"{sandbox.CONNECTION_PREFIX}(\d+)-")
    left = [
        n
        for n in set(os.listdir(TMP)) - before
        if (m := pattern.match(n)) and not Path(f"/proc/{m.group(1)}").exists()
    ]
    assert not left, left


def test_grading_package_readable_by_the_kernel_uid(tmp_path, monkeypatch):
    """O ``make hub`` fecha ``transformer_course/`` para "outros" (0750); o pacote que o kernel
    confinado importa (outro uid) tem de ser legível assim mesmo, senão toda entrega tira 0."""
    import stat

    from transformer_course.instructor import answer_key

    closed = tmp_path / "repo" / "transformer_course"
    shutil.copytree(answer_key.package_root(), closed, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    closed.chmod(0o750)
    monkeypatch.setattr(answer_key, "package_root", lambda: closed)
    target = answer_key.grading_package(CHAPTER, tmp_path / "cache", ROOT)
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in [target, *target.rglob("*")]}
    wrong = {str(p): oct(m) for p, m in modes.items() if m != (0o755 if p.is_dir() else 0o644)}
    assert not wrong, wrong


@needs_sandbox
def test_kernel_restart_leaves_no_connection_folder(tmp_path):
    """Um reinício do kernel troca a pasta da conexão; nenhuma das duas fica."""
    import asyncio

    os.chmod(tmp_path, 0o755)
    km = sandbox.SandboxedKernelManager(kernel_name="python3")

    async def start_restart_stop():
        await km.start_kernel(cwd=str(tmp_path))
        first = km._private_dir
        await km.restart_kernel(now=True)
        second = km._private_dir
        await km.shutdown_kernel(now=True)
        return first, second

    first, second = asyncio.run(asyncio.wait_for(start_restart_stop(), timeout=300))
    assert first and second and first != second
    assert not os.path.lexists(first) and not os.path.lexists(second)
    assert _our_connection_dirs() == []
