"""Prepara o JupyterHub da turma (o que ``make hub`` roda antes de iniciar o hub).

Como root (modo ``local``, o padrão):

1. pasta de estado (``/srv/transformers-do-zero``): ``hub/`` (banco, segredo dos cookies, contas;
   modo 700) e ``exchange/`` (o exchange do nbgrader, modo 1777 como a documentação do nbgrader pede);
2. contas de demonstração no ``hub/contas.json`` (modo 600; senhas aleatórias, geradas uma vez):
   ``professor``, ``aluno1`` e ``aluno2``;
3. um usuário Unix para cada conta (pasta pessoal com modo 700);
4. o curso do professor em ``~professor/transformers-do-zero`` (``source/``, ``solutions/``,
   ``notebooks/``, ``scripts/`` e o ``nbgrader_config.py``), com ``nbgrader generate_assignment`` de
   cada capítulo rodado como o professor (gradebook e ``release/`` dele);
5. fecha para "outros" as pastas do repositório que têm respostas (``source/``, ``solutions/``,
   ``notebooks/``, ``grading/``, ``.git``...).

Os usuários do hub não leem nada do repositório: o ambiente deles (quando o ``.venv`` não é
alcançável por todos), com uma cópia do pacote ``transformer_course``, e os perfis do Jupyter
(``hub/perfis/``, ``hub/nbgrader_config.py``) ficam na pasta de estado. Assim o repositório pode
estar numa pasta fechada (um ``mktemp -d``, a pasta pessoal do root).

Sem root (ou com ``--modo simples``) só os passos 1, 2 e 4 (o curso do professor vai para
``<estado>/usuarios/professor``): todas as contas rodam como você e **não há isolamento**.

Uso: python hub/preparar.py [--estado PASTA] [--modo local|simples] [--capitulos 02_atencao ...]
"""

from __future__ import annotations

import argparse
import compileall
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

HUB = Path(__file__).resolve().parent
ROOT = HUB.parent
sys.path.insert(0, str(HUB))

from contas import garantir_contas  # noqa: E402

from transformer_course.course import CHAPTERS  # noqa: E402

COURSE_DIRNAME = "transformers-do-zero"
DEMO = {"professor": "professor", "aluno1": "aluno", "aluno2": "aluno"}
# O que o professor leva do repositório para a cópia dele (release/ ele gera).
COURSE_PARTS = ["source", "solutions", "notebooks", "scripts", "nbgrader_config.py", "transformer_course"]
# Pastas do repositório fechadas para "outros" no modo local: têm respostas ou testes ocultos (o pacote
# do curso tem as implementações de referência, o gabarito; os alunos usam o pacote dos alunos).
PRIVATE_PARTS = [
    "source", "solutions", "notebooks", "grading", "tests", "artifacts", "aluno", ".git",
    "transformer_course",
]  # fmt: skip
# O pacote que os servidores dos alunos importam: sem as referências dos capítulos cujo gabarito o
# professor ainda não liberou (``--liberar-gabarito``); a lista dos liberados fica no estado.
STUDENT_PACKAGE = "pacote-dos-alunos"
RELEASED = "gabaritos_liberados.json"


def estado_padrao() -> Path:
    if os.geteuid() == 0:
        return Path("/srv/transformers-do-zero")
    return Path.home() / ".local" / "share" / "transformers-do-zero-hub"


def venv_bin() -> Path:
    """O bin/ do ambiente do curso (o ``.venv`` do repositório, ou o Python que roda isto)."""
    local = ROOT / ".venv" / "bin"
    return local if (local / "python").exists() else Path(sys.executable).parent


def _readable_by_others(path: Path) -> bool:
    """Todo usuário chega a ``path`` (o+x em cada pasta acima, pelo caminho dado e pelo caminho
    real, sem ligações simbólicas) e o lê/executa?"""
    path = Path(os.path.abspath(path))
    real = path.resolve()
    if not real.stat().st_mode & 0o005 == 0o005:
        return False
    return all(parent.stat().st_mode & 0o001 for p in {path, real} for parent in p.parents)


def _open_to_others(root: Path) -> None:
    """Dá leitura (e travessia, nas pastas) a todos em ``root`` e no que está dentro dele."""
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | (0o005 if path.is_dir() else 0o004))


def hardlink_copy(src: Path, dest: Path) -> None:
    """``cp -al`` (ligações físicas); noutro sistema de arquivos, uma cópia comum (mais lenta)."""
    if subprocess.run(["cp", "-al", str(src), str(dest)], capture_output=True).returncode != 0:
        shutil.rmtree(dest, ignore_errors=True)
        subprocess.run(["cp", "-a", str(src), str(dest)], check=True)


def copiar_python_base(course_prefix: Path, dest: Path) -> Path:
    """Cópia (ligações físicas) do Python base do ``.venv``, com o executável relocável."""
    lines = (course_prefix / "pyvenv.cfg").read_text().splitlines()
    cfg = dict(line.split(" = ", 1) for line in lines if " = " in line)
    base = Path(cfg["home"]).resolve().parent
    exe_name = (course_prefix / "bin" / "python").resolve().name
    if not dest.exists():
        hardlink_copy(base, dest)
        exe = dest / "bin" / exe_name
        data = exe.read_bytes()
        old = str(base / "lib").encode() + b"\0"
        if old in data:
            new = b"$ORIGIN/../lib"
            if data.count(old) != 1 or len(new) + 1 > len(old):
                raise SystemExit(f"não consegui tornar {exe} relocável (RUNPATH inesperado)")
            data = data.replace(old, new + b"\0" * (len(old) - len(new)))
        exe.unlink()  # era uma ligação física para o original: o novo é um arquivo próprio
        exe.write_bytes(data)
        exe.chmod(0o755)
    return dest / "bin" / exe_name


def ambiente_dos_usuarios(estado: Path) -> Path:
    """O ``bin/`` do ambiente com que os servidores dos usuários rodam.

    É o ``.venv`` do curso, quando ele e o interpretador dele são alcançáveis por todos. Quando não
    são (o repositório numa pasta fechada; um Python do pyenv em ``/root``), cria em
    ``<estado>/ambiente`` um ambiente-sombra com o *mesmo* interpretador e os *mesmos* pacotes:

    - ``<estado>/python-base`` (só se o interpretador estiver numa pasta fechada): o Python base do
      ``.venv`` copiado por ligações físicas (``cp -al``: segundos e nenhum byte a mais), com o
      executável copiado de verdade e o RUNPATH dele (onde ele acha a ``libpython``) trocado por
      ``$ORIGIN/../lib``, para não depender da pasta fechada;
    - ``<estado>/ambiente``: um ambiente virtual desse Python, com o ``site-packages``, ``share`` e
      ``etc`` do ``.venv`` (também por ligações físicas; o pacote do curso, copiado: veja
      :func:`copiar_pacote`) e os executáveis do ``.venv`` (``jupyterhub-singleuser``, ``nbgrader``,
      ``alembic``...) apontando para ele.

    É refeito quando o ``.venv`` é reinstalado. Ligações físicas, e não simbólicas, porque a correção
    confinada (bubblewrap) monta só os prefixos do Python em uso.
    """
    course_bin = venv_bin()
    if _readable_by_others(course_bin / "python") and _readable_by_others(course_bin.parent / "pyvenv.cfg"):
        return course_bin
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    shadow = estado / "ambiente"
    site = shadow / "lib" / version / "site-packages"
    course_prefix = course_bin.parent
    stamp = course_prefix / ".instalado"
    built = shadow / ".feito"
    if built.exists() and stamp.exists() and built.stat().st_mtime < stamp.stat().st_mtime:
        shutil.rmtree(shadow)  # o .venv mudou: refaz
    if not (shadow / "bin" / "python").exists():
        python = (course_bin / "python").resolve()
        if not _readable_by_others(python):  # o interpretador também está fechado: vai uma cópia dele
            python = copiar_python_base(course_prefix, estado / "python-base")
        subprocess.run([str(python), "-m", "venv", "--without-pip", str(shadow)], check=True)
    if not built.exists():
        shutil.rmtree(site)
        course_site = course_prefix / "lib" / version / "site-packages"
        hardlink_copy(course_site, site)
        built.touch()
    copiar_pacote(site, pacote_dos_alunos(estado) / "transformer_course")
    for part in ("share", "etc"):  # os arquivos do JupyterLab, as extensões, a configuração
        target = shadow / part
        if target.is_symlink():  # ambientes-sombra antigos: uma ligação para dentro do repositório
            target.unlink()
        if not target.exists() and (course_prefix / part).exists():
            hardlink_copy(course_prefix / part, target)
    # O .venv pode ser uma ligação simbólica (outra cópia do repositório): os scripts dele apontam
    # para o caminho verdadeiro.
    shebangs = {f"#!{b / 'python'}{v}" for b in (course_bin, course_bin.resolve()) for v in ("", "3")}
    for script in course_bin.iterdir():
        if script.is_symlink() or not script.is_file() or script.name.startswith(("python", "activate")):
            continue
        with script.open("rb") as fh:
            first = fh.readline().decode(errors="replace").rstrip()
        if first not in shebangs:
            continue
        text = script.read_text()
        target = shadow / "bin" / script.name
        target.write_text(f"#!{shadow / 'bin' / 'python'}\n" + text.split("\n", 1)[1])
        target.chmod(0o755)
    for path in [shadow, shadow / "bin", *(shadow / "bin").iterdir(), *shadow.glob("lib*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | (0o005 if path.is_dir() else 0o004))
    return shadow / "bin"


def copiar_pacote(site: Path, origem: Path | None = None) -> None:
    """Põe uma cópia do pacote do curso no ``site-packages`` do ambiente-sombra (refeita a cada vez).

    Um ``pip install -e`` deixa no ``site-packages`` só um localizador que aponta para
    ``transformer_course/`` no repositório, que os usuários não alcançam. A cópia é a do pacote dos
    alunos (``origem``: sem o gabarito dos capítulos não liberados; o professor importa o pacote
    inteiro da cópia dele do curso, pelo ``PYTHONPATH``) e leva os ``.pyc`` compilados (os usuários
    não gravam no ``site-packages``).
    """
    editable = [*site.glob("__editable__*transformer_course*")]
    marker = site / ".pacote_do_curso"
    if not editable and not marker.exists():
        return  # instalação comum (não editável): o pacote já veio com o site-packages
    for path in editable:
        path.unlink()
    target = site / "transformer_course"
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(origem or ROOT / "transformer_course", target, ignore=ignore)
    compileall.compile_dir(target, quiet=1)
    _open_to_others(target)
    marker.touch()


def gabaritos_liberados(estado: Path) -> list[str]:
    """Os capítulos cujo gabarito (as implementações de referência) o professor já liberou."""
    import json

    try:
        data = json.loads((estado / "hub" / RELEASED).read_text())
    except (OSError, ValueError):
        return []
    return [c for c in data if c in CHAPTERS] if isinstance(data, list) else []


def pacote_dos_alunos(estado: Path) -> Path:
    """Monta ``<estado>/pacote-dos-alunos/transformer_course``: o pacote sem o gabarito não liberado.

    As referências dos capítulos não liberados viram substitutas que usam a função do próprio aluno
    (a demonstração roda com o código dele) ou dizem que precisam dela. Refeito a cada ``make hub``
    e a cada ``--liberar-gabarito``.
    """
    from transformer_course.instructor.answer_key import student_package

    dest = estado / STUDENT_PACKAGE
    dest.mkdir(parents=True, exist_ok=True)
    dest.chmod(0o755)
    target = student_package(dest, gabaritos_liberados(estado))
    compileall.compile_dir(target, quiet=1)
    _open_to_others(target)
    return dest


def liberar_gabarito(estado: Path, caps: list[str]) -> list[str]:
    """Registra que o gabarito de ``caps`` foi liberado e refaz o pacote dos alunos."""
    import json

    unknown = [c for c in caps if c not in CHAPTERS]
    if unknown:
        raise SystemExit(f"capítulos desconhecidos: {unknown}; os do curso: {list(CHAPTERS)}")
    released = sorted(set(gabaritos_liberados(estado)) | set(caps), key=CHAPTERS.index)
    path = estado / "hub" / RELEASED
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(released) + "\n")
    pacote_dos_alunos(estado)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = estado / "ambiente" / "lib" / version / "site-packages"
    if (site / ".pacote_do_curso").exists():
        copiar_pacote(site, estado / STUDENT_PACKAGE / "transformer_course")
    return released


def config_dos_usuarios(estado: Path) -> Path:
    """Cópia, na pasta de estado, dos perfis do Jupyter que o hub passa aos usuários (refeita a cada vez).

    ``<estado>/config`` tem ``perfis/`` (aluno, professor, comum) e o ``nbgrader_config.py`` do
    exchange, legíveis por todos: os servidores dos usuários não leem nada do repositório.
    """
    config = estado / "config"
    fresh = estado / "config.novo"
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir()
    shutil.copytree(HUB / "perfis", fresh / "perfis", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(HUB / "nbgrader_config.py", fresh / "nbgrader_config.py")
    _open_to_others(fresh)
    shutil.rmtree(config, ignore_errors=True)
    fresh.rename(config)
    return config


def pasta_de_config(estado: Path, modo: str) -> Path:
    """Onde ficam os perfis que o hub passa aos usuários: a cópia de ``preparar`` (modo local) ou ``hub/``."""
    config = estado / "config"
    return config if modo == "local" and (config / "perfis").is_dir() else HUB


def jupyter_config_path(estado: Path, modo: str, papel: str) -> str:
    """O ``JUPYTER_CONFIG_PATH`` de um usuário: perfil do papel + comum (pt-BR) + o exchange do nbgrader."""
    base = pasta_de_config(estado, modo)
    return os.pathsep.join(str(p) for p in (base / "perfis" / papel, base / "perfis" / "comum", base))


def chapters() -> list[str]:
    return list(CHAPTERS)


def bin_dos_usuarios(estado: Path, modo: str) -> Path:
    """O bin/ que o hub dá aos usuários: o ambiente-sombra, se ``preparar`` o criou (modo local)."""
    shadow = estado / "ambiente" / "bin"
    return shadow if modo == "local" and (shadow / "python").exists() else venv_bin()


def home_of(nome: str, modo: str, estado: Path) -> Path:
    if modo == "local":
        return Path(pwd.getpwnam(nome).pw_dir)
    return estado / "usuarios" / nome


def criar_usuario(nome: str, homes: Path | None = None) -> Path:
    """Usuário Unix (idempotente), com grupo próprio e pasta pessoal 700."""
    try:
        home = Path(pwd.getpwnam(nome).pw_dir)
    except KeyError:
        cmd = ["useradd", "--create-home", "--user-group", "--shell", "/bin/bash"]
        if homes is not None:
            cmd += ["--home-dir", str(homes / nome)]
        subprocess.run([*cmd, nome], check=True)
        home = Path(pwd.getpwnam(nome).pw_dir)
    home.mkdir(parents=True, exist_ok=True)
    info = pwd.getpwnam(nome)
    os.chown(home, info.pw_uid, info.pw_gid)
    home.chmod(0o700)
    return home


def como_usuario(
    nome: str, cmd: list[str], cwd: Path, modo: str = "local", estado: Path | None = None, **kwargs
) -> subprocess.CompletedProcess:
    """Roda ``cmd`` como o usuário (no modo local, com o uid dele), com o ambiente que o hub lhe daria."""
    env = {
        "PATH": f"{bin_dos_usuarios(estado or estado_padrao(), modo)}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "JUPYTER_CONFIG_PATH": jupyter_config_path(estado or estado_padrao(), modo, papel_de(nome, estado)),
        "TDZ_EXCHANGE": str((estado or estado_padrao()) / "exchange"),
        "TDZ_CURSO_DIR": COURSE_DIRNAME,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    extra = {}
    if modo == "local" and os.geteuid() == 0:
        info = pwd.getpwnam(nome)
        env |= {"HOME": info.pw_dir, "USER": nome, "LOGNAME": nome}
        extra = {"user": info.pw_uid, "group": info.pw_gid, "extra_groups": []}
    else:
        env["HOME"] = str(home_of(nome, "simples", estado or estado_padrao()))
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    return subprocess.run(cmd, cwd=cwd, env=env, **extra, **kwargs)


_PAPEIS: dict[str, str] = {}


def papel_de(nome: str, estado: Path | None) -> str:
    if nome not in _PAPEIS and estado is not None:
        from contas import ler_contas

        for conta, dados in ler_contas(estado / "hub" / "contas.json").items():
            _PAPEIS[conta] = dados["papel"]
    return _PAPEIS.get(nome, "aluno")


def copiar_curso(dest: Path) -> Path:
    """A cópia do curso do professor (só o que falta; nada do professor é sobrescrito)."""
    dest.mkdir(parents=True, exist_ok=True)
    for part in COURSE_PARTS:
        src = ROOT / part
        if (dest / part).exists() or not src.exists():
            continue
        if src.is_dir():
            ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
            shutil.copytree(src, dest / part, ignore=ignore)
        else:
            shutil.copy2(src, dest / part)
    return dest


def chown_tree(path: Path, nome: str) -> None:
    info = pwd.getpwnam(nome)
    for dirpath, _, files in os.walk(path):
        os.chown(dirpath, info.pw_uid, info.pw_gid)
        for f in files:
            os.chown(os.path.join(dirpath, f), info.pw_uid, info.pw_gid)


def gerar_capitulos(professor: str, curso: Path, caps: list[str], modo: str, estado: Path) -> None:
    """``nbgrader generate_assignment`` de cada capítulo, como o professor, na cópia dele."""
    for cap in caps:
        if (curso / "release" / cap).exists():
            continue
        nbgrader = str(bin_dos_usuarios(estado, modo) / "nbgrader")
        r = como_usuario(professor, [nbgrader, "generate_assignment", cap], curso, modo, estado)
        if r.returncode != 0 or not (curso / "release" / cap).exists():
            raise SystemExit(f"generate_assignment {cap} falhou como {professor}:\n{r.stdout}{r.stderr}")


def proteger_repositorio() -> list[Path]:
    """Fecha para 'outros' as pastas do repositório com respostas (os alunos não as leem)."""
    closed = []
    for part in PRIVATE_PARTS:
        path = ROOT / part
        if path.exists():
            path.chmod(path.stat().st_mode & ~0o007)
            closed.append(path)
    return closed


def preparar(
    estado: Path,
    modo: str,
    papeis: dict[str, str] | None = None,
    caps: list[str] | None = None,
    homes: Path | None = None,
    proteger: bool = True,
) -> dict:
    papeis = papeis or DEMO
    caps = chapters() if caps is None else caps
    if modo == "local" and os.geteuid() != 0:
        raise SystemExit("o modo local (usuários Unix reais) precisa de root: use sudo ou --modo simples")
    estado.mkdir(parents=True, exist_ok=True)
    estado.chmod(0o755)
    (estado / "hub").mkdir(exist_ok=True)
    (estado / "hub").chmod(0o700)
    exchange = estado / "exchange"
    exchange.mkdir(exist_ok=True)
    exchange.chmod(0o1777)
    pacote_dos_alunos(estado)
    if modo == "local":
        ambiente_dos_usuarios(estado)
        config_dos_usuarios(estado)
    contas = garantir_contas(estado / "hub" / "contas.json", papeis)
    _PAPEIS.update({nome: dados["papel"] for nome, dados in contas.items()})
    for nome in papeis:
        if modo == "local":
            criar_usuario(nome, homes)
        else:
            home_of(nome, modo, estado).mkdir(parents=True, exist_ok=True)
    for nome, papel in papeis.items():
        if papel != "professor":
            continue
        curso = copiar_curso(home_of(nome, modo, estado) / COURSE_DIRNAME)
        if modo == "local":
            chown_tree(curso, nome)
        gerar_capitulos(nome, curso, caps, modo, estado)
    closed = proteger_repositorio() if (modo == "local" and proteger) else []
    return {"contas": contas, "exchange": exchange, "fechadas": closed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    estado = Path(os.environ.get("TDZ_HUB_ESTADO") or estado_padrao())
    parser.add_argument("--estado", type=Path, default=estado)
    parser.add_argument(
        "--modo",
        choices=["local", "simples"],
        default=os.environ.get("TDZ_HUB_MODO") or ("local" if os.geteuid() == 0 else "simples"),
    )
    parser.add_argument("--capitulos", nargs="*", default=None, help="padrão: todos os de source/")
    parser.add_argument(
        "--liberar-gabarito",
        nargs="+",
        metavar="CAPÍTULO",
        help="libera aos alunos as implementações de referência destes capítulos (depois do prazo) e sai",
    )
    args = parser.parse_args(argv)
    if args.liberar_gabarito:
        released = liberar_gabarito(args.estado, args.liberar_gabarito)
        print(f"Gabaritos liberados aos alunos: {', '.join(released)}. Os alunos veem as referências ao "
              "reiniciar o kernel.")  # fmt: skip
        return 0
    if not shutil.which("configurable-http-proxy"):
        print(
            "Falta o configurable-http-proxy (o proxy do JupyterHub). Instale o Node.js do Debian e ele:\n"
            "  sudo apt-get install nodejs && sudo npm install -g configurable-http-proxy",
            file=sys.stderr,
        )
        return 1
    info = preparar(args.estado, args.modo, caps=args.capitulos)
    ip = os.environ.get("TDZ_HUB_IP", "127.0.0.1")
    porta = os.environ.get("TDZ_HUB_PORTA", "8000")
    print(f"\nJupyterHub da turma: http://{ip}:{porta}/  (modo {args.modo})")
    if args.modo == "simples":
        print("ATENÇÃO: modo simples — todas as contas rodam como você; os alunos NÃO ficam isolados.")
    print("Contas de demonstração (papel):")
    for nome, dados in info["contas"].items():
        print(f"  {nome:<12} {dados['papel']}")
    print(f"Senhas em {args.estado / 'hub' / 'contas.json'} (modo 600; leia com: sudo cat ESSE_ARQUIVO)")
    print(f"Exchange do nbgrader: {info['exchange']}")
    if info["fechadas"]:
        print("Pastas do repositório fechadas para os alunos: " + ", ".join(p.name for p in info["fechadas"]))
    print("Ctrl-C encerra o hub.\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
