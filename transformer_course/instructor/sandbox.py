"""Isolamento das entregas na correção automática (bubblewrap + limites do kernel).

Na correção (``nbgrader autograde``), o código de cada entrega roda num kernel confinado:

- **bubblewrap** (``bwrap``, o isolamento do Flatpak) monta uma raiz nova, só com o sistema
  (``/usr``), o Python e o ambiente virtual, o pacote ``transformer_course`` (só leitura), a pasta
  da própria entrega em ``autograded/`` (só leitura), um ``/tmp`` privado e pequeno (tmpfs, onde
  ficam ``HOME`` e os arquivos do IPython) e a pasta privada da conexão com o kernel. Não vê
  ``source/``, ``solutions/``, ``notebooks/``, o gradebook, as outras entregas, a área de troca nem
  ``/root``/``HOME``. Sem rede (``--unshare-net``: nem ``127.0.0.1``, nem o PostgreSQL, nem
  sockets abstratos); por isso o kernel conversa com o nbgrader pelo transporte IPC do ZeroMQ
  (arquivos de socket na pasta privada). Novo espaço de PIDs: quando o kernel termina, todo
  processo que ele criou morre junto (o ``--die-with-parent`` mata o kernel se o nbgrader morrer);
- um **usuário descartável** (uid aleatório, sem privilégios nem capacidades, via ``setpriv``)
  quando o corretor roda como root, para que o limite de processos valha (o root o ignora);
- **limites** (``prlimit``): memória virtual, processos, tempo de CPU, tamanho de arquivo;
- **nada do corretor**: do ambiente, só :data:`PASS_ENV` (nomes exatos: nenhum token); stdin e stdout
  em ``/dev/null`` e stderr num pipe com limite (nunca o terminal nem um log compartilhado); a pasta
  da conexão num tmpfs pequeno (como root), apagada sem recursão; as opções do bwrap por
  ``--args FD``, fora de ``/proc/1/cmdline`` (veja "a fronteira do processo do kernel", abaixo).

O nbgrader chega a isto pelo ``nbgrader_config.py`` do curso: ``Autograde.autograde_preprocessors``
usa :class:`SandboxedExecute`, cujo gerenciador de kernels é :class:`SandboxedKernelManager`.
Vale para ``make grade-class``, ``make grade``, ``nbgrader autograde`` na raiz do repositório e
qualquer código que use a API Python do nbgrader com essa configuração.

Sem bubblewrap utilizável, a correção **recusa** rodar sem isolamento, a menos que
``TRANSFORMER_COURSE_UNCONFINED=1`` diga o contrário: veja :func:`require_sandbox` (que os scripts
chamam antes de corrigir) e :class:`SandboxedKernelManager` (que recusa iniciar o kernel).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

UNCONFINED_ENV = "TRANSFORMER_COURSE_UNCONFINED"

# Limites de cada kernel de correção (um notebook inteiro).
MEMORY_BYTES = 8 * 1024**3  # memória virtual (RLIMIT_AS); o PyTorch de CPU cabe folgado
MAX_PROCESSES = 256  # processos + threads do uid descartável (RLIMIT_NPROC)
CPU_SECONDS = 1800  # tempo de CPU do kernel (RLIMIT_CPU); as células têm ainda o Execute.timeout
FILE_BYTES = 64 * 1024**2  # maior arquivo que o kernel pode escrever (RLIMIT_FSIZE)
OPEN_FILES = 1024
SCRATCH_BYTES = 256 * 1024**2  # /tmp privado (tmpfs)
SHM_BYTES = 64 * 1024**2  # /dev/shm privado (tmpfs)
UID_RANGE = (2_000_000, 3_000_000)  # uids descartáveis (sem conta no sistema)

# Variáveis de ambiente que o kernel recebe do ambiente do corretor: esta lista exata, sem prefixos
# (nada de ``JPY_*``: num terminal do hub, ``JPY_API_TOKEN`` abre a conta do professor). O resto do
# ambiente do kernel (HOME, PATH, PYTHONPATH, pastas do IPython...) é fixo: veja :func:`sandbox_env`.
PASS_ENV = (
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "PYTHONWARNINGS",
    "PYTHONHASHSEED",
    "NBGRADER_EXECUTION",
    "NBGRADER_VALIDATING",
)
# O PATH do kernel: o Python do curso e o sistema (o PATH do corretor pode ter pastas pessoais).
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# De /etc, só o que o Python, o PyTorch e o matplotlib leem (nada de senhas nem configurações locais).
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/fonts",
    "/etc/mime.types",
    "/etc/ssl/certs",
)


class SandboxUnavailable(RuntimeError):
    """O isolamento não pode rodar aqui e ninguém autorizou a correção sem ele."""


RISK_MESSAGE = (
    "Sem isolamento, o código de cada entrega roda com os SEUS direitos, na pasta do curso: pode "
    "reescrever as notas de toda a turma no gradebook, alterar ou apagar as entregas dos outros "
    "alunos e os arquivos do curso, e imprimir o gabarito e os testes ocultos (source/, solutions/) "
    "na própria devolutiva."
)


@lru_cache(maxsize=1)
def sandbox_problem() -> str | None:
    """Por que o isolamento não roda nesta máquina (em pt-BR); ``None`` se ele roda.

    Confere o sistema (Linux), os programas (``bwrap``, ``prlimit`` e, como root, ``setpriv``) e
    roda um comando de verdade no sandbox.
    """
    if not sys.platform.startswith("linux"):
        return f"o isolamento usa o bubblewrap, que só existe no Linux (este sistema: {sys.platform})"
    missing = [tool for tool in _tools() if shutil.which(tool) is None]
    if missing:
        return (
            f"faltam os programas {', '.join(missing)} (no Debian/Ubuntu: "
            "`sudo apt-get install bubblewrap util-linux`)"
        )
    with tempfile.TemporaryDirectory(prefix="tc-sonda-") as tmp:
        uid = _sandbox_uid()
        os.chmod(tmp, 0o755)
        cmd = bwrap_command(cwd=tmp, private_dir=tmp, uid=uid) + ["/bin/sh", "-c", "exit 0"]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"o bubblewrap não rodou: {exc}"
    if run.returncode != 0:
        return f"o bubblewrap não conseguiu criar o sandbox: {run.stderr.strip()[-400:]}"
    return None


def _tools() -> list[str]:
    return ["bwrap", "prlimit"] + (["setpriv"] if os.geteuid() == 0 else [])


def _sandbox_uid() -> int | None:
    """Como root, um uid descartável para o kernel; fora do root, o próprio usuário (None)."""
    if os.geteuid() != 0:
        return None
    return UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0])


def unconfined_allowed() -> bool:
    return os.environ.get(UNCONFINED_ENV, "").strip().lower() in ("1", "true", "sim", "yes")


def require_sandbox(allow_unconfined: bool = False, self_study: bool = False) -> bool:
    """Confere, antes de corrigir, que as entregas vão rodar isoladas.

    Devolve ``True`` quando o isolamento roda. Sem ele: com ``allow_unconfined`` (por exemplo, a
    opção ``--sem-isolamento`` de um script), ``TRANSFORMER_COURSE_UNCONFINED=1`` ou ``self_study``
    (``make grade``, o próprio notebook), avisa em stderr, liga ``TRANSFORMER_COURSE_UNCONFINED=1``
    neste processo (os comandos do nbgrader herdam) e devolve ``False``; senão levanta
    :class:`SandboxUnavailable` com o motivo e o risco, em pt-BR.
    """
    problem = sandbox_problem()
    if problem is None:
        return True
    if self_study:
        print(
            f"Aviso: correção SEM isolamento ({problem}). Tudo bem para o seu próprio notebook; "
            "não corrija assim entregas de outras pessoas.",
            file=sys.stderr,
        )
    elif allow_unconfined or unconfined_allowed():
        print(f"Aviso: correção SEM isolamento, autorizada ({problem}). {RISK_MESSAGE}", file=sys.stderr)
    else:
        raise SandboxUnavailable(
            f"A correção foi recusada: o isolamento das entregas não roda nesta máquina ({problem}). "
            f"{RISK_MESSAGE} Instale o bubblewrap, ou, só se você confia em todas as entregas, rode "
            f"com {UNCONFINED_ENV}=1."
        )
    os.environ[UNCONFINED_ENV] = "1"
    return False


# ====================================================================== comando do bubblewrap


def _system_mounts() -> list[str]:
    args = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    # As pastas que o bwrap cria por conta própria ficam com 0700 (só o root entra): criadas aqui.
    args += ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/etc/ssl"]
    for path in ETC_FILES:
        args += ["--ro-bind-try", path, path]
    return args


def _matplotlib_cache() -> list[str]:
    """A lista de fontes do matplotlib do corretor, só leitura no /tmp do kernel.

    Sem ela, cada kernel refaria a lista (segundos por notebook). Não tem nada do curso.
    """
    home = os.path.expanduser("~")
    cache = os.environ.get("MPLCONFIGDIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "matplotlib"
    )
    args = ["--perms", "1777", "--dir", "/tmp/.matplotlib"]
    for path in sorted(Path(cache).glob("fontlist-v*.json")):
        args += ["--ro-bind", str(path), f"/tmp/.matplotlib/{path.name}"]
    return args


# Onde o kernel confinado vê o pacote do curso que o corretor montou (``PYTHONPATH``): o mesmo
# caminho em qualquer máquina, seja qual for a instalação (editável ou não) do corretor.
PACKAGE_MOUNT = "/opt/transformers-do-zero"


def course_package_dir() -> str:
    """A pasta ``transformer_course`` que o corretor importa (a que ele está rodando)."""
    import transformer_course

    return os.path.dirname(os.path.realpath(transformer_course.__file__))


def _python_paths(with_package: bool = True) -> list[str]:
    """O Python (instalação base e ambiente virtual) e, se pedido, o pacote do curso, só leitura."""
    paths = {
        os.path.realpath(sys.base_prefix),
        os.path.realpath(sys.prefix),
        os.path.dirname(os.path.realpath(sys.executable)),
    }
    if with_package:
        paths.add(course_package_dir())
    # Caminhos não realpath também (links simbólicos do ambiente virtual).
    for path in (sys.base_prefix, sys.prefix):
        if os.path.realpath(path) != os.path.abspath(path):
            paths.add(os.path.abspath(path))
    system = ("/usr", "/bin", "/lib", "/sbin")
    keep = sorted(p for p in paths if not any(p == s or p.startswith(s + "/") for s in system))
    # Um caminho dentro de outro já montado não precisa de montagem própria.
    return [p for p in keep if not any(p != q and p.startswith(q + "/") for q in keep)]


def bwrap_command(cwd: str, private_dir: str, uid: int | None, package: str | None = None) -> list[str]:
    """O prefixo ``bwrap ... -- [setpriv ...] prlimit ... --`` de um comando confinado.

    ``cwd`` (a pasta da entrega) entra só leitura; ``private_dir`` (conexão com o kernel),
    leitura e escrita. ``uid``: o usuário descartável (como root) ou ``None``. ``package``: a
    pasta ``transformer_course`` que o kernel importa, montada só leitura em
    ``PACKAGE_MOUNT/transformer_course`` (o pacote instalado do corretor não é montado); sem ela,
    o pacote do corretor, no caminho dele.
    """
    cmd = [
        "bwrap",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "correcao",
        *_system_mounts(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        str(SHM_BYTES),
        "--tmpfs",
        "/dev/shm",
        "--perms",
        "1777",
        "--size",
        str(SCRATCH_BYTES),
        "--tmpfs",
        "/tmp",
        *_matplotlib_cache(),
    ]
    binds = [("--ro-bind", path) for path in _python_paths(with_package=package is None)]
    binds += [("--ro-bind", cwd), ("--bind", private_dir)]
    if package is not None:
        cmd += ["--perms", "0755", "--dir", "/opt", "--perms", "0755", "--dir", PACKAGE_MOUNT]
        cmd += ["--ro-bind", package, f"{PACKAGE_MOUNT}/transformer_course"]
    # As pastas acima das montagens: o bwrap as criaria só para o root (0700).
    mounted = ("/usr", "/tmp", "/dev", "/proc", "/etc")
    parents = set()
    for _, path in binds:
        parent = os.path.dirname(path)
        while parent not in ("/", "") and parent not in mounted:
            parents.add(parent)
            parent = os.path.dirname(parent)
    for parent in sorted(parents, key=lambda p: (p.count("/"), p)):
        if not any(parent == p or parent.startswith(p + "/") for _, p in binds):
            cmd += ["--perms", "0755", "--dir", parent]
    for kind, path in binds:
        cmd += [kind, path, path]
    # O notebook na pasta da entrega já tem as células de teste restauradas do gradebook, com os
    # testes ocultos: o kernel vê um arquivo vazio no lugar dele.
    for notebook in sorted(Path(cwd).glob("*.ipynb")):
        cmd += ["--ro-bind", "/dev/null", str(notebook)]
    cmd += ["--chdir", cwd]
    cmd += ["--unsetenv", "JPY_PARENT_PID"]
    if uid is not None:
        # bwrap como root mantém as capacidades; só SETUID/SETGID ficam, para o setpriv trocar de
        # usuário (e as perder todas).
        cmd += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        cmd += ["--cap-add", "CAP_SETPCAP", "--"]
        cmd += [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
        ]
    cmd += [
        "--",
        "prlimit",
        f"--as={MEMORY_BYTES}",
        f"--nproc={MAX_PROCESSES if uid is not None else _user_processes() + MAX_PROCESSES}",
        f"--cpu={CPU_SECONDS}",
        f"--fsize={FILE_BYTES}",
        f"--nofile={OPEN_FILES}",
        "--core=0",
        "--",
    ]
    return cmd


def _user_processes() -> int:
    """Processos e threads do usuário atual (o RLIMIT_NPROC conta todos eles)."""
    me = os.getuid()
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1").split()[0]) == me:
            count += int(fields.get("Threads", "1").strip())
    return count


def sandbox_env(env: dict, package: str | None = None) -> dict:
    """O ambiente do kernel confinado: só o necessário, com HOME e o IPython no /tmp privado.

    Do ambiente do corretor, só as variáveis de :data:`PASS_ENV` (nomes exatos); o resto é fixo.

    Com ``package`` (veja :func:`bwrap_command`), o ``PYTHONPATH`` põe o pacote montado na frente
    de qualquer instalação do corretor; sem ele, a pasta do pacote do corretor.
    """
    clean = {k: v for k, v in env.items() if k in PASS_ENV}
    clean.update(
        HOME="/tmp",
        USER="aluno",
        LOGNAME="aluno",
        TMPDIR="/tmp",
        IPYTHONDIR="/tmp/.ipython",
        MPLCONFIGDIR="/tmp/.matplotlib",
        XDG_CACHE_HOME="/tmp/.cache",
        XDG_CONFIG_HOME="/tmp/.config",
        JUPYTER_CONFIG_DIR="/tmp/.jupyter",
        JUPYTER_DATA_DIR="/tmp/.local/share/jupyter",
        PYTHONDONTWRITEBYTECODE="1",
        MPLBACKEND="agg",
    )
    clean["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), SYSTEM_PATH])
    # Sem ``package``, o pacote do corretor, montado no caminho dele (uma instalação editável pode
    # apontar para outra cópia do repositório, que não está no sandbox).
    clean["PYTHONPATH"] = PACKAGE_MOUNT if package is not None else os.path.dirname(course_package_dir())
    return clean


# ====================================================================== a fronteira do processo do kernel

# A pasta da conexão (arquivo de conexão e sockets IPC): a única pasta do corretor em que o kernel
# escreve. Como root, um tmpfs pequeno montado nela; fora do root, uma pasta comum no /tmp.
CONNECTION_PREFIX = "tc-kernel-"
CONNECTION_BYTES = 8 * 1024**2
CONNECTION_INODES = 64
KERNEL_STDERR_BYTES = 16 * 1024  # do stderr do kernel, o corretor guarda só o começo (log de depuração)

_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MNT_DETACH = 2


def _libc():
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _mount_tmpfs(path: str) -> str | None:
    """Monta um tmpfs pequeno (``CONNECTION_BYTES``, 0700) em ``path``; o motivo, se não deu."""
    import ctypes

    if not sys.platform.startswith("linux"):
        return f"sem tmpfs neste sistema ({sys.platform})"
    if os.geteuid() != 0:
        return "o corretor não roda como root (só o root monta um tmpfs)"
    options = f"size={CONNECTION_BYTES},nr_inodes={CONNECTION_INODES},mode=0700".encode()
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if _libc().mount(b"tmpfs", path.encode(), b"tmpfs", flags, options) != 0:
        return f"mount do tmpfs falhou ({os.strerror(ctypes.get_errno())})"
    return None


def _unmount(path: str) -> bool:
    libc = _libc()
    if libc.umount2(path.encode(), 0) == 0:
        return True
    return libc.umount2(path.encode(), _MNT_DETACH) == 0  # ocupado: desmonta assim que liberar


def _mount_points() -> set[str]:
    points = set()
    try:
        with open("/proc/self/mountinfo") as mountinfo:
            for line in mountinfo:
                fields = line.split()
                if len(fields) > 4:
                    points.add(fields[4].encode().decode("unicode_escape"))
    except OSError:
        pass
    return points


def remove_tree(path: str) -> None:
    """Apaga ``path`` e tudo dentro, sem recursão (uma árvore de 1.500 níveis não estoura a pilha).

    O conteúdo de cada subpasta sobe para ``path`` (``rename`` relativo a descritores, sem caminhos
    longos) e entra na fila; a subpasta, vazia, sai em seguida. Uma passada por item.
    """
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path) or os.path.islink(path):
        os.unlink(path)
        return
    top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    counter = 0
    try:
        while True:  # a fila esvazia a pasta; a nova leitura só confere
            with os.scandir(top) as it:
                queue = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
            if not queue:
                break
            while queue:
                name, is_dir = queue.pop()
                if not is_dir:
                    os.unlink(name, dir_fd=top)
                    continue
                os.chmod(name, 0o700, dir_fd=top, follow_symlinks=False)
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
                try:
                    with os.scandir(sub) as it:
                        children = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
                    for child, child_is_dir in children:
                        while True:
                            counter += 1
                            lifted = f".sobe{counter}"
                            try:
                                os.rename(child, lifted, src_dir_fd=sub, dst_dir_fd=top)
                                break
                            except FileExistsError:
                                continue
                            except OSError as exc:
                                if exc.errno not in (39, 21, 20):  # ENOTEMPTY, EISDIR, ENOTDIR
                                    raise
                        queue.append((lifted, child_is_dir))
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(path)


def make_connection_dir() -> tuple[str, str | None]:
    """A pasta da conexão de um kernel: ``(caminho, motivo)``; ``motivo`` é ``None`` com o tmpfs.

    Sem tmpfs (fora do root), a pasta é comum, no /tmp do sistema, e ``motivo`` diz por quê.
    O nome leva o pid do corretor: :func:`remove_stale_connection_dirs` reconhece as que sobraram
    de um corretor morto.
    """
    remove_stale_connection_dirs()
    path = tempfile.mkdtemp(prefix=f"{CONNECTION_PREFIX}{os.getpid()}-")
    problem = _mount_tmpfs(path)
    return path, problem


def remove_connection_dir(path: str) -> bool:
    """Desmonta (se for um tmpfs) e apaga a pasta da conexão, sem recursão; ``True`` se sumiu."""
    try:
        if path in _mount_points():
            _unmount(path)
        remove_tree(path)
    except OSError:
        pass
    return not os.path.lexists(path)


def remove_stale_connection_dirs() -> list[str]:
    """Apaga as pastas de conexão de corretores que já morreram (um ``kill -9`` no meio da turma)."""
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(f"{CONNECTION_PREFIX}*-*"):
        pid = folder.name[len(CONNECTION_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        try:
            if folder.stat().st_uid != os.geteuid() and os.geteuid() != 0:
                continue
        except OSError:
            continue
        if remove_connection_dir(str(folder)):
            removed.append(str(folder))
    return removed


def hide_arguments(cmd: list[str]) -> tuple[list[str], int | None]:
    """Tira as opções do bubblewrap da linha de comando: elas vão por um descritor (``--args FD``).

    Sem isso, ``/proc/1/cmdline`` dentro do sandbox (o ``bwrap`` é o processo 1 ali) mostraria
    todas as montagens com os caminhos do corretor. Devolve o comando curto e o descritor (um
    ``memfd``, que o processo filho herda por ``pass_fds``; o bwrap o lê e o fecha antes de rodar o
    kernel). Um comando sem ``bwrap`` volta como está, com ``None``.
    """
    start = next((i for i, arg in enumerate(cmd) if os.path.basename(arg) == "bwrap"), None)
    if start is None:
        return cmd, None
    try:
        end = cmd.index("--", start)
    except ValueError:
        return cmd, None
    options = cmd[start + 1 : end]
    fd = os.memfd_create("bwrap-args", 0)
    data = b"".join(arg.encode() + b"\0" for arg in options)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return [*cmd[: start + 1], "--args", str(fd), *cmd[end:]], fd


class CappedPipe:
    """Um pipe para o stderr do kernel: uma thread o esvazia e guarda só os primeiros ``cap`` bytes.

    O kernel nunca escreve no terminal nem num log compartilhado; o que ele escreve no stderr
    (um erro ao iniciar, por exemplo) fica aqui, limitado, e só vai para o log de depuração do
    corretor com os caracteres de controle escapados.
    """

    def __init__(self, cap: int = KERNEL_STDERR_BYTES):
        import threading

        self.cap = cap
        self.head = bytearray()
        self.total = 0
        self._read, self.write_fd = os.pipe()
        os.set_inheritable(self.write_fd, False)
        self._thread = threading.Thread(target=self._drain, name="stderr-do-kernel", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while True:
                chunk = os.read(self._read, 65536)
                if not chunk:
                    break
                self.total += len(chunk)
                if len(self.head) < self.cap:
                    self.head += chunk[: self.cap - len(self.head)]
        finally:
            os.close(self._read)

    def close_writer(self) -> None:
        if self.write_fd is not None:
            os.close(self.write_fd)
            self.write_fd = None

    def wait(self, timeout: float) -> bool:
        """Espera o fim do pipe (todos os que escrevem fecharam), até ``timeout`` segundos."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def text(self) -> str:
        """O começo do que chegou, em ASCII escapado (sem sequências de terminal)."""
        shown = ascii(bytes(self.head).decode(errors="replace"))[1:-1]
        more = self.total - len(self.head)
        return shown + (f" [... mais {more} bytes descartados]" if more > 0 else "")


# ====================================================================== nbgrader / jupyter_client


# Na correção, ``%matplotlib inline`` (a primeira linha de cada capítulo) não faz nada: ele importaria o
# pyplot e o matplotlib (1,0–1,3 s num shell IPython), e nenhuma figura é desenhada na correção (os pacotes
# ``plots`` e ``widgets`` devolvem avisos). O backend do kernel confinado já é ``agg``.
GRADING_KERNEL_SETUP = "get_ipython().register_magic_function(lambda line: None, 'line', 'matplotlib')"


_WARNED: set[str] = set()


def _warn_once(log, message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning("Aviso: %s.", message)


def _kernel_manager_class():
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import Bool, Unicode

    class SandboxedKernelManager(AsyncKernelManager):
        """Gerenciador de kernels que inicia cada kernel dentro do bubblewrap (transporte IPC)."""

        confine = Bool(True, help="Confinar o kernel (bubblewrap + limites).").tag(config=True)
        package_dir = Unicode(
            "",
            help="A pasta transformer_course que o kernel confinado importa (vazio: a do corretor).",
        ).tag(config=True)

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self._private_dir = None
            self._confined = False
            self._launch_fds: list[int] = []
            self._stderr: CappedPipe | None = None
            self.cgroup = None

        async def _async_pre_start_kernel(self, **kw):
            problem = sandbox_problem() if self.confine else "desligado na configuração"
            if problem is not None and not unconfined_allowed():
                raise SandboxUnavailable(
                    f"Kernel NÃO iniciado: o isolamento não roda aqui ({problem}). {RISK_MESSAGE} "
                    f"Para corrigir mesmo assim (só entregas em que você confia): {UNCONFINED_ENV}=1."
                )
            self._confined = problem is None
            if self._confined:
                # Pasta privada (curta: sockets Unix têm limite de ~100 caracteres) para o arquivo
                # de conexão e os sockets IPC, a única pasta com escrita do kernel fora do /tmp.
                self._uid = _sandbox_uid()
                if self._private_dir:  # um reinício: a pasta do kernel anterior sai antes
                    remove_connection_dir(self._private_dir)
                self._private_dir, why = make_connection_dir()
                if why:
                    _warn_once(
                        self.log,
                        "a pasta da conexão com o kernel fica no /tmp do sistema, sem tmpfs próprio "
                        f"({why}): o kernel pode escrever nela até o limite de tamanho de arquivo",
                    )
                self.transport = "ipc"
                self.connection_file = os.path.join(self._private_dir, "kernel.json")
                self.ip = os.path.join(self._private_dir, "ipc")
                self._package = self.package_dir or None
                kw["env"] = sandbox_env(kw.get("env") or dict(os.environ), self._package)
            kernel_cmd, kw = await super()._async_pre_start_kernel(**kw)
            kernel_cmd = [*kernel_cmd, f"--IPKernelApp.exec_lines={GRADING_KERNEL_SETUP}"]
            if self._confined:
                if self._uid is not None:
                    os.chown(self._private_dir, self._uid, self._uid)
                    os.chown(self.connection_file, self._uid, self._uid)
                cwd = os.path.realpath(kw.get("cwd") or os.getcwd())
                kernel_cmd = bwrap_command(cwd, self._private_dir, self._uid, self._package) + kernel_cmd
                kernel_cmd, args_fd = hide_arguments(kernel_cmd)
                # Nada do terminal nem dos logs do corretor: stdin e stdout em /dev/null, stderr num
                # pipe deste gerenciador, com limite. ``independent``: sem JPY_PARENT_PID no ambiente
                # (o --die-with-parent do bwrap já mata o kernel com o corretor).
                self._stderr = CappedPipe()
                self._launch_fds = [self._stderr.write_fd] + ([args_fd] if args_fd is not None else [])
                kw.update(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr.write_fd)
                kw["independent"] = True
                if args_fd is not None:
                    kw["pass_fds"] = (args_fd,)
                self.log.info("Kernel confinado (bubblewrap) em %s", cwd)
            # Memória, processos e CPU da entrega inteira num cgroup próprio (limits.py).
            from .limits import kernel_cgroup

            self.cgroup = kernel_cgroup(self) if self._confined else None
            if self.cgroup is not None:
                kernel_cmd = self.cgroup.wrap(kernel_cmd)
            return kernel_cmd, kw

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            try:
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            finally:
                # O kernel herdou as cópias dele; as do corretor fecham (o pipe acaba com o kernel).
                for fd in self._launch_fds:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                self._launch_fds = []
                if self._stderr is not None:
                    self._stderr.write_fd = None

        async def _async_interrupt_kernel(self):
            if not self._confined:
                return await super()._async_interrupt_kernel()
            # Um sinal no grupo do processo pegaria o bwrap (que morreria, levando o kernel):
            # a interrupção vai como mensagem, e o próprio kernel manda o SIGINT para si.
            if not self.has_kernel:
                raise RuntimeError("Cannot interrupt kernel. No kernel is running!")
            msg = self.session.msg("interrupt_request", content={})
            self._connect_control_socket()
            self.session.send(self._control_socket, msg)

        # No AsyncKernelManager, ``interrupt_kernel`` é um apelido do método da classe base.
        interrupt_kernel = _async_interrupt_kernel

        async def _async_cleanup_resources(self, restart=False):
            await super()._async_cleanup_resources(restart=restart)
            if self._stderr is not None and self._stderr.total:
                self.log.debug("stderr do kernel (%d bytes): %s", self._stderr.total, self._stderr.text())
            if self.cgroup is not None and not restart:
                self.cgroup.remove()  # mata o que sobrou dentro dele e apaga o cgroup
                self.cgroup = None
            if self._private_dir and not restart:
                if not remove_connection_dir(self._private_dir):
                    self.log.error("A pasta da conexão %s não pôde ser apagada.", self._private_dir)
                self._private_dir = None

        # O nbclient chama ``cleanup_resources`` (apelido do método da classe base) quando o kernel
        # já morreu.
        cleanup_resources = _async_cleanup_resources

    SandboxedKernelManager.__module__ = __name__
    return SandboxedKernelManager


def _execute_class():
    from nbgrader.preprocessors import Execute

    class SandboxedExecute(Execute):
        """O ``Execute`` do nbgrader com :class:`SandboxedKernelManager` (o nbgrader fixa a classe do
        gerenciador no construtor, por cima da configuração; por isso esta subclasse)."""

        def __init__(self, *args, **kwargs):
            kwargs["kernel_manager_class"] = __getattr__("SandboxedKernelManager")
            super().__init__(*args, **kwargs)

    SandboxedExecute.__module__ = __name__
    return SandboxedExecute


# ====================================================================== devolutivas: segunda camada

# Linhas curtas ("return out", "pass") aparecem em qualquer código: não servem de indício.
MIN_LEAK_CHARS = 16
_REGIONS = (("### BEGIN SOLUTION", "### END SOLUTION"), ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"))


def instructor_lines(source_nb) -> list[str]:
    """Linhas do material do professor num notebook de ``source/``: soluções e testes ocultos.

    Inclui as respostas modelo (células de resposta em texto) e tudo entre ``### BEGIN SOLUTION``
    / ``### BEGIN HIDDEN TESTS`` e o ``### END`` correspondente.
    """
    lines = []
    for cell in source_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        source = cell.source.splitlines()
        inside = None
        for raw in source:
            line = raw.strip()
            if inside is None:
                inside = next((end for begin, end in _REGIONS if line.startswith(begin)), None)
                if inside is None and meta.get("solution") and cell.cell_type == "markdown":
                    lines.append(line)
                continue
            if line.startswith(inside):
                inside = None
                continue
            lines.append(line)
    seen = set()
    keep = []
    for line in lines:
        if len(line) >= MIN_LEAK_CHARS and not line.startswith("#") and line not in seen:
            seen.add(line)
            keep.append(line)
    return keep


_B64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{4}(?:[A-Za-z0-9+/_\-=]|\s|\\n){20,}")
_HEX_RUN = re.compile(r"(?:[0-9a-fA-F]{2}[\s:,]?){16,}")
_CODES_RUN = re.compile(r"(?:\d{2,7}\s*,\s*){15,}\d{2,7}")
_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))")
MAX_DECODED_CHARS = 16 * 1024**2  # o total decodificado por texto (a devolutiva já tem limite)


def _bytes_to_text(data: bytes) -> str | None:
    """Bytes decodificados como texto (descomprimidos, se forem zlib/gzip); ``None`` se parecem lixo."""
    import zlib

    if data[:2] == b"\x1f\x8b" or data[:1] == b"\x78":
        try:
            data = zlib.decompressobj(47).decompress(data, MAX_DECODED_CHARS)  # zlib ou gzip
        except zlib.error:
            pass
    text = data.decode("utf-8", errors="ignore")
    printable = sum(ch.isprintable() or ch in "\n\t\r" for ch in text)
    return text if len(text) >= MIN_LEAK_CHARS and printable >= 0.8 * len(text) else None


def _decode_base64(run: str) -> list[str]:
    import base64
    import binascii

    # O trecho inteiro (um base64 quebrado em linhas) e cada palavra longa dele (um base64 no meio
    # de uma frase).
    pieces = [re.sub(r"\s|\\n|=", "", run)]
    pieces += [word.strip("=") for word in re.split(r"\s|\\n", run) if len(word) >= 24]
    found = []
    for compact in dict.fromkeys(pieces):
        for skip in range(4):  # o trecho pode começar no meio de um grupo de 4
            body = compact[skip:]
            body = body[: len(body) - 1] if len(body) % 4 == 1 else body
            body += "=" * (-len(body) % 4)
            for alt in (b"+/", b"-_"):
                try:
                    data = base64.b64decode(body.encode(), altchars=alt, validate=False)
                except (binascii.Error, ValueError):
                    continue
                text = _bytes_to_text(data)
                if text:
                    found.append(text)
    return found


def decoded_views(text: str, depth: int = 2) -> list[str]:
    """O texto em outras leituras: cada trecho em base64 (padrão e de URL, comprimido ou não),
    hexadecimal, códigos de caracteres (``[105, 109, ...]``), escapes ``\\xNN``/``\\uNNNN``,
    URL (``%NN``), ao contrário e rot13; ``depth`` níveis (base64 de hexadecimal...)."""
    import codecs
    import urllib.parse

    views = [text[::-1], codecs.encode(text, "rot13")]
    if "%" in text:
        views.append(urllib.parse.unquote_plus(text))
    if "\\" in text:
        try:  # os escapes do Python (``\\\\``, ``\\n``, ``\\xNN``...) de uma vez
            views.append(text.encode("latin-1", "backslashreplace").decode("unicode_escape"))
        except UnicodeDecodeError:  # um escape inválido no meio: só os numéricos
            views.append(_ESCAPE.sub(lambda m: chr(int(next(g for g in m.groups() if g), 16)), text))
    decoded = []
    budget = MAX_DECODED_CHARS
    for match in _B64_RUN.finditer(text):
        for piece in _decode_base64(match.group()):
            budget -= len(piece)
            decoded.append(piece)
        if budget < 0:
            break
    for match in _HEX_RUN.finditer(text):
        digits = re.sub(r"[\s:,]", "", match.group())
        for skip in (0, 1):
            body = digits[skip:]
            piece = _bytes_to_text(bytes.fromhex(body[: len(body) - len(body) % 2]))
            if piece:
                decoded.append(piece)
    for match in _CODES_RUN.finditer(text):
        codes = [int(c) for c in re.findall(r"\d+", match.group())]
        if all(9 <= c <= 0x10FFFF for c in codes):
            decoded.append("".join(chr(c) for c in codes))
    views += decoded
    if depth > 1:
        for piece in decoded:
            views += decoded_views(piece, depth - 1)
    return views


def find_leaks(text: str, secret_lines: list[str], allowed: str = "") -> list[str]:
    """As linhas do professor que aparecem em ``text`` e não em ``allowed`` (o que o aluno escreveu).

    Procura no texto como está (HTML desfeito, ``\\n`` de JSON desfeito) e nas leituras de
    :func:`decoded_views`: uma entrega que imprime os testes ocultos em base64, hexadecimal, ao
    contrário... também é pega.
    """
    import html

    plain = html.unescape(text)
    flat = plain.replace("\\n", "\n").replace('\\"', '"')
    candidates = [line for line in secret_lines if line not in allowed]
    if not candidates:
        return []
    views = [plain, flat]
    leaks = [line for line in candidates if any(line in view for view in views)]
    rest = [line for line in candidates if line not in leaks]
    if rest:
        views = decoded_views(plain) + (decoded_views(flat) if flat != plain else [])
        leaks += [line for line in rest if any(line in view for view in views)]
    return [line for line in candidates if line in leaks]


def output_text(nb) -> str:
    """Os textos das saídas de um notebook, emendados (um base64 quebrado em várias linhas de saída
    do JSON volta a ser um trecho só)."""
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            for key in ("text", "evalue"):
                value = output.get(key)
                if value:
                    parts.append(value if isinstance(value, str) else "".join(value))
            parts += [str(line) for line in output.get("traceback", [])]
            for value in output.get("data", {}).values():
                if isinstance(value, list):
                    value = "".join(map(str, value))
                parts.append(value if isinstance(value, str) else json.dumps(value))
    return "\n".join(parts)


def _notebook_sources(path) -> str:
    import nbformat

    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception:  # noqa: BLE001 - sem entrega legível, nada é do aluno
        return ""
    return "\n".join(cell.source for cell in nb.cells)


def feedback_leaks(course_root, assignment: str, student: str, notebook: str | None = None) -> list[str]:
    """Linhas de soluções/testes ocultos na devolutiva HTML de ``student`` (vazia: nada vazou)."""
    import nbformat

    root = Path(course_root)
    notebook = notebook or assignment
    html_path = root / "grading" / "feedback" / student / assignment / f"{notebook}.html"
    source = root / "source" / assignment / f"{notebook}.ipynb"
    if not html_path.exists() or not source.exists():
        return []
    secret = instructor_lines(nbformat.read(str(source), as_version=4))
    allowed = _notebook_sources(root / "grading" / "submitted" / student / assignment / f"{notebook}.ipynb")
    return find_leaks(html_path.read_text(errors="replace"), secret, allowed)


def withhold_leaky_feedback(course_root, assignment: str, students=None) -> dict[str, str]:
    """Retira de ``grading/feedback/`` as devolutivas que contêm material do professor.

    Cada uma vai para ``grading/feedback_retida/<aluno>/<capítulo>/`` (o ``release_feedback`` não a
    publica) com um ``MOTIVO.txt``. Devolve ``{aluno: motivo}``.
    """
    root = Path(course_root)
    feedback = root / "grading" / "feedback"
    if students is None:
        students = sorted(p.name for p in feedback.glob("*") if (p / assignment).is_dir())
    withheld = {}
    for student in students:
        folder = feedback / student / assignment
        leaks = []
        for html_path in sorted(folder.glob("*.html")):
            leaks += feedback_leaks(root, assignment, student, html_path.stem)
        if not leaks:
            continue
        reason = (
            f"a devolutiva de {student} em {assignment} contém {len(leaks)} linha(s) de soluções ou "
            f"testes ocultos (por exemplo: {leaks[0][:80]!r}); não foi publicada. Leia a entrega: ela "
            "imprimiu material do professor."
        )
        target = root / "grading" / "feedback_retida" / student / assignment
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(folder), str(target))
        (target / "MOTIVO.txt").write_text(reason + "\n\n" + "\n".join(leaks) + "\n")
        withheld[student] = reason
    return withheld


def _guard_class():
    from nbconvert.preprocessors import Preprocessor
    from traitlets import Bool

    class BlockInstructorMaterial(Preprocessor):
        """Preprocessador da devolutiva: recusa (erro) a que contém soluções ou testes ocultos.

        Roda depois do ``ClearHiddenTests``; compara o notebook (código e saídas) com as soluções e
        os testes ocultos de ``source/``, descontando o que o próprio aluno escreveu. Com erro, o
        nbgrader não grava a devolutiva desse aluno e registra o motivo no log.
        """

        enabled = Bool(True).tag(config=True)

        def preprocess(self, nb, resources):
            import nbformat
            from nbgrader.coursedir import CourseDirectory

            info = resources.get("nbgrader", {})
            coursedir = CourseDirectory(config=self.config)
            assignment, notebook, student = info.get("assignment"), info.get("notebook"), info.get("student")
            source = Path(coursedir.format_path(coursedir.source_directory, ".", assignment)) / (
                f"{notebook}.ipynb"
            )
            if not source.exists():
                return nb, resources
            submitted = Path(coursedir.format_path(coursedir.submitted_directory, student, assignment))
            secret = instructor_lines(nbformat.read(str(source), as_version=4))
            leaks = find_leaks(
                nbformat.writes(nb) + "\n" + output_text(nb),
                secret,
                _notebook_sources(submitted / f"{notebook}.ipynb"),
            )
            if leaks:
                raise RuntimeError(
                    f"Devolutiva de {student} recusada: contém {len(leaks)} linha(s) de soluções ou testes "
                    f"ocultos (por exemplo: {leaks[0][:80]!r}). A entrega imprimiu material do professor; "
                    "leia-a antes de devolver qualquer coisa."
                )
            return nb, resources

    BlockInstructorMaterial.__module__ = __name__
    return BlockInstructorMaterial


_LAZY = {
    "SandboxedKernelManager": _kernel_manager_class,
    "SandboxedExecute": _execute_class,
    "BlockInstructorMaterial": _guard_class,
}


def __getattr__(name: str):
    # jupyter_client e nbgrader só são importados quando o nbgrader pede as classes.
    if name in _LAZY:
        cls = _LAZY[name]()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
