"""JupyterHub de uma turma do curso "Transformers do zero" (``make hub``).

Tudo vem de variáveis de ambiente com padrões seguros (veja ``hub/README.md``):

- ``TDZ_HUB_ESTADO``: pasta de estado (banco do hub, segredo dos cookies, contas, exchange);
  padrão ``/srv/transformers-do-zero`` como root, ``~/.local/share/transformers-do-zero-hub`` senão.
- ``TDZ_HUB_IP`` / ``TDZ_HUB_PORTA``: onde o hub atende (padrão ``127.0.0.1:8000``, só esta máquina).
- ``TDZ_HUB_MODO``: ``local`` (padrão como root: usuários Unix de verdade, ``LocalProcessSpawner``,
  cada aluno isolado pelas permissões do sistema) ou ``simples`` (``SimpleLocalProcessSpawner``: todas
  as contas rodam como o usuário que iniciou o hub; **não isola os alunos**, só para demonstração).
- ``TDZ_HUB_AUTH``: ``senhas`` (padrão: contas do ``contas.json``), ``oauth`` (oauthenticator) ou
  ``lti`` (ltiauthenticator, LTI 1.3 do Moodle).
"""

import os
import sys
from pathlib import Path

HUB = Path(__file__).resolve().parent
ROOT = HUB.parent
sys.path.insert(0, str(HUB))

from contas import ContasLocaisAuthenticator, ler_contas  # noqa: E402
from preparar import COURSE_DIRNAME, STUDENT_PACKAGE, bin_dos_usuarios, estado_padrao, home_of  # noqa: E402
from preparar import jupyter_config_path as _config_path  # noqa: E402

c = get_config()  # noqa: F821 - definido pelo JupyterHub ao carregar este arquivo

ESTADO = Path(os.environ.get("TDZ_HUB_ESTADO") or estado_padrao())
MODO = os.environ.get("TDZ_HUB_MODO") or ("local" if os.geteuid() == 0 else "simples")
AUTH = os.environ.get("TDZ_HUB_AUTH", "senhas")
EXCHANGE = ESTADO / "exchange"
CONTAS = ESTADO / "hub" / "contas.json"
BIN = bin_dos_usuarios(ESTADO, MODO)

# ------------------------------------------------------------------ rede: só esta máquina, salvo pedido
c.JupyterHub.ip = os.environ.get("TDZ_HUB_IP", "127.0.0.1")
c.JupyterHub.port = int(os.environ.get("TDZ_HUB_PORTA", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(os.environ.get("TDZ_HUB_PORTA_API", "8081"))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ.get('TDZ_HUB_PORTA_PROXY', '8001')}"
c.Spawner.ip = "127.0.0.1"

# ------------------------------------------------------------------ estado (fora do git)
c.JupyterHub.db_url = f"sqlite:///{ESTADO / 'hub' / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(ESTADO / "hub" / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(ESTADO / "hub" / "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = str(ESTADO / "hub" / "jupyterhub-proxy.pid")
c.JupyterHub.shutdown_on_logout = False
c.JupyterHub.cleanup_servers = True

# ------------------------------------------------------------------ autenticação
if AUTH == "senhas":
    c.JupyterHub.authenticator_class = ContasLocaisAuthenticator
    c.ContasLocaisAuthenticator.arquivo = str(CONTAS)
    c.ContasLocaisAuthenticator.any_allow_config = True  # check_allowed: quem está no contas.json
    PROFESSORES = {nome for nome, conta in ler_contas(CONTAS).items() if conta["papel"] == "professor"}
elif AUTH == "oauth":
    # Login da universidade (pip install oauthenticator); a conta Unix de cada pessoa tem de existir
    # (ou use o modo simples só para testar). Veja hub/README.md.
    c.JupyterHub.authenticator_class = "generic-oauth"
    c.GenericOAuthenticator.client_id = os.environ["OAUTH_CLIENT_ID"]
    c.GenericOAuthenticator.client_secret = os.environ["OAUTH_CLIENT_SECRET"]
    c.GenericOAuthenticator.oauth_callback_url = os.environ["OAUTH_CALLBACK_URL"]
    c.GenericOAuthenticator.authorize_url = os.environ["OAUTH_AUTHORIZE_URL"]
    c.GenericOAuthenticator.token_url = os.environ["OAUTH_TOKEN_URL"]
    c.GenericOAuthenticator.userdata_url = os.environ["OAUTH_USERDATA_URL"]
    c.GenericOAuthenticator.username_claim = os.environ.get("OAUTH_USERNAME_CLAIM", "preferred_username")
    c.GenericOAuthenticator.allow_all = True
    PROFESSORES = set(filter(None, os.environ.get("TDZ_HUB_PROFESSORES", "").split(",")))
elif AUTH == "lti":
    # LTI 1.3 (Moodle, Canvas...): pip install jupyterhub-ltiauthenticator. Veja hub/README.md.
    c.JupyterHub.authenticator_class = "ltiauthenticator.lti13.authenticator.LTI13Authenticator"
    c.LTI13Authenticator.issuer = os.environ["LTI_ISSUER"]
    c.LTI13Authenticator.authorize_url = os.environ["LTI_AUTHORIZE_URL"]
    c.LTI13Authenticator.client_id = [os.environ["LTI_CLIENT_ID"]]
    c.LTI13Authenticator.jwks_endpoint = os.environ["LTI_JWKS_URL"]
    c.LTI13Authenticator.username_key = os.environ.get("LTI_USERNAME_KEY", "sub")
    c.LTI13Authenticator.allow_all = True
    PROFESSORES = set(filter(None, os.environ.get("TDZ_HUB_PROFESSORES", "").split(",")))
else:
    raise SystemExit(f"TDZ_HUB_AUTH={AUTH!r} desconhecido: use senhas, oauth ou lti")

# ------------------------------------------------------------------ servidores de cada usuário
if MODO == "local":
    # Cada pessoa é um usuário Unix: o servidor roda com o uid dela, na pasta pessoal dela (modo 700).
    c.JupyterHub.spawner_class = "localprocess"
elif MODO == "simples":
    # NÃO ISOLA: todas as contas rodam como o usuário que iniciou o hub e leem as pastas umas das outras.
    c.JupyterHub.spawner_class = "simple"
    c.SimpleLocalProcessSpawner.home_dir_template = str(ESTADO / "usuarios" / "{username}")
else:
    raise SystemExit(f"TDZ_HUB_MODO={MODO!r} desconhecido: use local ou simples")

c.Spawner.cmd = [str(BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 120


def papel(spawner) -> str:
    return "professor" if spawner.user.name in PROFESSORES else "aluno"


def jupyter_config_path(spawner) -> str:
    """Perfil do papel (ferramentas do nbgrader) + comum (pt-BR) + o exchange do nbgrader.

    No modo local, a cópia que ``preparar.py`` deixa em ``<estado>/config`` (os usuários não leem o
    repositório); no simples, ``hub/``.
    """
    return _config_path(ESTADO, MODO, papel(spawner))


def pythonpath(spawner) -> str:
    """De onde vem ``transformer_course``: o aluno importa o pacote dos alunos (sem o gabarito dos
    capítulos não liberados); o professor, o pacote inteiro da cópia dele do curso."""
    if papel(spawner) == "professor":
        return str(home_of(spawner.user.name, MODO, ESTADO) / COURSE_DIRNAME)
    return str(ESTADO / STUDENT_PACKAGE)


c.Spawner.environment = {
    "PYTHONPATH": pythonpath,
    # O bin/ do ambiente do curso na frente: o nbgrader chama `alembic` pelo PATH.
    "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
    "JUPYTER_CONFIG_PATH": jupyter_config_path,
    "TDZ_EXCHANGE": str(EXCHANGE),
    "TDZ_CURSO_DIR": COURSE_DIRNAME,
    "TDZ_PAPEL": papel,
}
