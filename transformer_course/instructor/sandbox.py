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
- **limites** (``prlimit``): memória virtual, processos, tempo de CPU, tamanho de arquivo.

O nbgrader chega a isto pelo ``nbgrader_config.py`` do curso: ``Autograde.autograde_preprocessors``
usa :class:`SandboxedExecute`, cujo gerenciador de kernels é :class:`SandboxedKernelManager`.
Vale para ``make grade-class``, ``make grade``, ``nbgrader autograde`` na raiz do repositório e
qualquer código que use a API Python do nbgrader com essa configuração.

Sem bubblewrap utilizável, a correção **recusa** rodar sem isolamento, a menos que
``TRANSFORMER_COURSE_UNCONFINED=1`` diga o contrário: veja :func:`require_sandbox` (que os scripts
chamam antes de corrigir) e :class:`SandboxedKernelManager` (que recusa iniciar o kernel).
"""

from __future__ import annotations

import os
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

# Variáveis de ambiente que passam para o kernel; as demais (senhas, tokens...) ficam de fora.
PASS_ENV = (
    "PATH",
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
    "JPY_SESSION_NAME",
)
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

    Com ``package`` (veja :func:`bwrap_command`), o ``PYTHONPATH`` põe o pacote montado na frente
    de qualquer instalação do corretor.
    """
    clean = {k: v for k, v in env.items() if k in PASS_ENV or k.startswith("JPY_")}
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
    clean.setdefault("PATH", "/usr/bin:/bin")
    clean["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), clean["PATH"]])
    clean.pop("PYTHONPATH", None)
    if package is not None:
        clean["PYTHONPATH"] = PACKAGE_MOUNT
    return clean


# ====================================================================== nbgrader / jupyter_client


# Na correção, ``%matplotlib inline`` (a primeira linha de cada capítulo) não faz nada: ele importaria o
# pyplot e o matplotlib (1,0–1,3 s num shell IPython), e nenhuma figura é desenhada na correção (os pacotes
# ``plots`` e ``widgets`` devolvem avisos). O backend do kernel confinado já é ``agg``.
GRADING_KERNEL_SETUP = "get_ipython().register_magic_function(lambda line: None, 'line', 'matplotlib')"


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
                self._private_dir = tempfile.mkdtemp(prefix="tc-kernel-")
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
                self.log.info("Kernel confinado (bubblewrap) em %s", cwd)
            # Memória, processos e CPU da entrega inteira num cgroup próprio (limits.py).
            from .limits import kernel_cgroup

            self.cgroup = kernel_cgroup(self) if self._confined else None
            if self.cgroup is not None:
                kernel_cmd = self.cgroup.wrap(kernel_cmd)
            return kernel_cmd, kw

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
            if self.cgroup is not None and not restart:
                self.cgroup.remove()  # mata o que sobrou dentro dele e apaga o cgroup
                self.cgroup = None
            if self._private_dir and not restart:
                shutil.rmtree(self._private_dir, ignore_errors=True)
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


def find_leaks(text: str, secret_lines: list[str], allowed: str = "") -> list[str]:
    """As linhas do professor que aparecem em ``text`` e não em ``allowed`` (o que o aluno escreveu)."""
    import html

    plain = html.unescape(text)
    flat = plain.replace("\\n", "\n").replace('\\"', '"')
    return [line for line in secret_lines if (line in plain or line in flat) and line not in allowed]


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
                nbformat.writes(nb), secret, _notebook_sources(submitted / f"{notebook}.ipynb")
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
