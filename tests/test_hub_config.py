"""O JupyterHub da turma conferido sem subir nada: a configuração do hub carrega e escuta só em
127.0.0.1, as contas e a autenticação, os perfis de professor e aluno, e a implantação em
Kubernetes (Zero to JupyterHub) no papel: o YAML é válido e nomeia a imagem, as portas e os volumes
que ``hub/README.md`` descreve."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HUB = ROOT / "hub"
K8S = HUB / "k8s"
sys.path.insert(0, str(HUB))
sys.path.insert(0, str(ROOT / "scripts"))

contas = pytest.importorskip("contas", reason="falta o jupyterhub no ambiente (make venv)")
from configure_lab import INSTRUCTOR_PLUGINS  # noqa: E402
from traitlets.config.loader import PyFileConfigLoader  # noqa: E402

README = (HUB / "README.md").read_text()


def load_hub_config(monkeypatch, tmp_path, **env):
    for key in [k for k in os.environ if k.startswith(("TDZ_HUB_", "OAUTH_", "LTI_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("TDZ_HUB_ESTADO", str(tmp_path))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return PyFileConfigLoader("jupyterhub_config.py", path=str(HUB)).load_config()


def test_hub_escuta_so_em_127_0_0_1_por_padrao(monkeypatch, tmp_path):
    c = load_hub_config(monkeypatch, tmp_path, TDZ_HUB_MODO="local")
    assert c.JupyterHub.ip == "127.0.0.1" and c.JupyterHub.hub_ip == "127.0.0.1"
    assert c.Spawner.ip == "127.0.0.1"
    assert c.ConfigurableHTTPProxy.api_url.startswith("http://127.0.0.1:")
    assert c.JupyterHub.port == 8000
    assert c.JupyterHub.spawner_class == "localprocess"
    assert c.JupyterHub.authenticator_class is contas.ContasLocaisAuthenticator
    assert str(tmp_path) in c.JupyterHub.db_url and str(tmp_path) in c.JupyterHub.cookie_secret_file
    assert c.Spawner.cmd[0].endswith("jupyterhub-singleuser")
    c = load_hub_config(monkeypatch, tmp_path, TDZ_HUB_IP="0.0.0.0", TDZ_HUB_PORTA="9000")
    assert (c.JupyterHub.ip, c.JupyterHub.port) == ("0.0.0.0", 9000)


def test_modo_simples_usa_o_spawner_que_nao_isola(monkeypatch, tmp_path):
    c = load_hub_config(monkeypatch, tmp_path, TDZ_HUB_MODO="simples")
    assert c.JupyterHub.spawner_class == "simple"
    assert c.SimpleLocalProcessSpawner.home_dir_template.startswith(str(tmp_path))
    assert "não isola" in README.lower() or "NÃO isola" in README


def test_troca_para_oauth_e_lti(monkeypatch, tmp_path):
    oauth = {
        f"OAUTH_{k}": "x"
        for k in ("CLIENT_ID", "CLIENT_SECRET", "CALLBACK_URL", "AUTHORIZE_URL", "TOKEN_URL", "USERDATA_URL")
    }
    c = load_hub_config(monkeypatch, tmp_path, TDZ_HUB_AUTH="oauth", TDZ_HUB_PROFESSORES="prof", **oauth)
    assert c.JupyterHub.authenticator_class == "generic-oauth"
    assert c.GenericOAuthenticator.client_id == "x"
    lti = {f"LTI_{k}": "y" for k in ("ISSUER", "AUTHORIZE_URL", "CLIENT_ID", "JWKS_URL")}
    c = load_hub_config(monkeypatch, tmp_path, TDZ_HUB_AUTH="lti", **lti)
    assert c.JupyterHub.authenticator_class.startswith("ltiauthenticator.lti13")
    assert c.LTI13Authenticator.client_id == ["y"]
    with pytest.raises(SystemExit):
        load_hub_config(monkeypatch, tmp_path, TDZ_HUB_AUTH="nenhuma")


def test_contas_com_modo_600_e_senha_conferida(tmp_path):
    path = tmp_path / "hub" / "contas.json"
    made = contas.garantir_contas(path, {"prof": "professor", "ana": "aluno"})
    assert path.stat().st_mode & 0o777 == 0o600
    again = contas.garantir_contas(path, {"prof": "professor", "ana": "aluno", "beto": "aluno"})
    assert again["ana"]["senha"] == made["ana"]["senha"], "as senhas existentes não podem mudar"
    assert len({c["senha"] for c in again.values()}) == 3
    auth = contas.ContasLocaisAuthenticator(arquivo=str(path))
    right = {"username": "ana", "password": made["ana"]["senha"]}
    assert asyncio.run(auth.authenticate(None, right)) == "ana"
    for wrong in ({"username": "ana", "password": made["prof"]["senha"]}, {"username": "zé", "password": ""}):
        assert asyncio.run(auth.authenticate(None, wrong)) is None
    assert asyncio.run(auth.check_allowed("beto")) and not asyncio.run(auth.check_allowed("intruso"))
    with pytest.raises(ValueError):
        contas.garantir_contas(path, {"x": "reitor"})


def test_perfis_de_professor_e_de_aluno():
    """Aluno: só a lista de tarefas e a validação; professor: todas as ferramentas do nbgrader."""
    student = json.loads((HUB / "perfis" / "aluno" / "labconfig" / "page_config.json").read_text())
    teacher = json.loads((HUB / "perfis" / "professor" / "labconfig" / "page_config.json").read_text())
    student_tools = {"@jupyter/nbgrader:menu", "@jupyter/nbgrader:assignment-list"}
    assert set(student["disabledExtensions"]) == set(INSTRUCTOR_PLUGINS)
    assert {p for p, off in student["disabledExtensions"].items() if not off} == student_tools
    assert not any(teacher["disabledExtensions"].values())
    server = json.loads((HUB / "perfis" / "aluno" / "jupyter_server_config.json").read_text())
    enabled = server["ServerApp"]["jpserver_extensions"]
    assert not enabled["nbgrader.server_extensions.formgrader"]
    assert enabled["nbgrader.server_extensions.assignment_list"]


def test_exchange_do_nbgrader(monkeypatch):
    monkeypatch.setenv("TDZ_EXCHANGE", "/srv/teste/exchange")
    c = PyFileConfigLoader("nbgrader_config.py", path=str(HUB)).load_config()
    assert c.Exchange.root == "/srv/teste/exchange"
    assert c.CourseDirectory.course_id == "transformers-do-zero"


def test_valores_do_zero_to_jupyterhub_e_imagem():
    values = yaml.safe_load((K8S / "config.yaml").read_text())
    pvc = yaml.safe_load((K8S / "exchange-pvc.yaml").read_text())
    dockerfile = (K8S / "Dockerfile").read_text()
    image = values["singleuser"]["image"]
    assert f"{image['name']}:{image['tag']}" in README, "o README deve nomear a imagem do config.yaml"
    assert values["singleuser"]["port"] == 8888 and "EXPOSE 8888" in dockerfile
    ports = values["proxy"]["service"]["ports"]
    assert ports == {"http": 80, "https": 443}
    for port in ports.values():
        assert str(port) in README
    storage = values["singleuser"]["storage"]
    volume = next(v for v in storage["extraVolumes"] if v["name"] == "nbgrader-exchange")
    mount = next(m for m in storage["extraVolumeMounts"] if m["name"] == "nbgrader-exchange")
    assert volume["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"] == "nbgrader-exchange"
    assert pvc["kind"] == "PersistentVolumeClaim" and pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert mount["mountPath"] == values["singleuser"]["extraEnv"]["TDZ_EXCHANGE"] == "/srv/nbgrader/exchange"
    assert "TDZ_EXCHANGE=/srv/nbgrader/exchange" in dockerfile
    assert "/srv/nbgrader/exchange" in README and "ReadWriteMany" in README
    first = next(line for line in dockerfile.splitlines() if line.startswith("FROM "))
    assert first.startswith("FROM quay.io/jupyter/"), "a imagem parte de uma base docker-stacks do Jupyter"
    assert "constraints.txt" in dockerfile
    assert "Kubernetes" in README and "não roda" in README


PY_VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"
SYSTEM_PYTHON = Path("/usr/bin") / PY_VERSION
VENV_SITE = Path(sys.prefix) / "lib" / PY_VERSION / "site-packages"


@pytest.mark.skipif(
    not SYSTEM_PYTHON.exists(),
    reason=f"sem {SYSTEM_PYTHON} (o Python do Debian na versão deste): sudo apt-get install python3",
)
@pytest.mark.skipif(
    not list(VENV_SITE.glob("__editable__*transformer_course*")),
    reason="o pacote do curso não está instalado em modo editável (make venv o instala assim)",
)
def test_ambiente_sombra_de_um_repositorio_fechado_com_o_python_do_sistema(monkeypatch, tmp_path):
    """Repositório numa pasta fechada (0700) e ``.venv`` do Python do sistema (legível por todos):
    o ambiente-sombra usa o próprio interpretador (nada de copiar o ``/usr``), traz uma cópia do
    pacote do curso no lugar do atalho da instalação editável e os arquivos de ``share``/``etc``."""
    import subprocess

    import preparar

    closed = tmp_path / "fechado"
    closed.mkdir()
    closed.chmod(0o700)
    venv = closed / ".venv"
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / PY_VERSION / "site-packages"
    for path in VENV_SITE.glob("__editable__*transformer_course*"):
        (site / path.name).write_bytes(path.read_bytes())
    for part in ("share/jupyter/lab/static/index.html", "etc/jupyter/jupyter_server_config.d/x.json"):
        (venv / part).parent.mkdir(parents=True)
        (venv / part).write_text("{}")
    monkeypatch.setattr(preparar, "venv_bin", lambda: venv / "bin")
    estado = tmp_path / "estado"

    bin_dir = preparar.ambiente_dos_usuarios(estado)

    assert bin_dir == estado / "ambiente" / "bin"
    assert not (estado / "python-base").exists(), "copiou o Python do sistema, que todos já leem"
    assert (bin_dir / "python").resolve() == SYSTEM_PYTHON.resolve()
    shadow_site = estado / "ambiente" / "lib" / PY_VERSION / "site-packages"
    assert not list(shadow_site.glob("__editable__*")), "o atalho para o repositório ficou no ambiente-sombra"
    assert list((shadow_site / "transformer_course" / "__pycache__").glob("*.pyc")), "a cópia veio sem .pyc"
    code = "import importlib.util; print(importlib.util.find_spec('transformer_course').origin)"
    found = subprocess.run(
        [str(bin_dir / "python"), "-c", code], cwd="/", capture_output=True, text=True, check=True
    )
    assert Path(found.stdout.strip()) == shadow_site / "transformer_course" / "__init__.py"
    for part in ("share/jupyter/lab/static/index.html", "etc/jupyter/jupyter_server_config.d/x.json"):
        path = estado / "ambiente" / part
        assert path.is_file() and not (estado / "ambiente" / part.split("/")[0]).is_symlink(), part
    # Refeito a cada make hub: uma mudança no pacote chega à cópia.
    (shadow_site / "transformer_course" / "__init__.py").write_text("# velho\n")
    preparar.ambiente_dos_usuarios(estado)
    assert (shadow_site / "transformer_course" / "__init__.py").read_text() == (
        ROOT / "transformer_course" / "__init__.py"
    ).read_text()


def test_perfis_dos_usuarios_ficam_na_pasta_de_estado(monkeypatch, tmp_path):
    """No modo local, o JUPYTER_CONFIG_PATH dos usuários aponta para a cópia em ``<estado>/config``."""
    import preparar

    config = preparar.config_dos_usuarios(tmp_path)
    assert (config / "perfis" / "aluno" / "labconfig" / "page_config.json").is_file()
    assert (config / "nbgrader_config.py").read_text() == (HUB / "nbgrader_config.py").read_text()
    paths = preparar.jupyter_config_path(tmp_path, "local", "aluno").split(os.pathsep)
    assert paths == [str(config / "perfis" / "aluno"), str(config / "perfis" / "comum"), str(config)]
    assert preparar.jupyter_config_path(tmp_path, "simples", "aluno").split(os.pathsep)[-1] == str(HUB)
    c = load_hub_config(monkeypatch, tmp_path, TDZ_HUB_MODO="local")
    spawner = type("S", (), {"user": type("U", (), {"name": "ana"})()})()
    assert c.Spawner.environment["JUPYTER_CONFIG_PATH"](spawner).split(os.pathsep) == paths
