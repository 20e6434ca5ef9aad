"""Contas locais do JupyterHub do curso: uma lista fixa de usuários com senhas num arquivo.

O arquivo (``<estado>/hub/contas.json``, modo 600, fora do git) é gerado por ``hub/preparar.py``::

    {"professor": {"papel": "professor", "senha": "..."},
     "aluno1": {"papel": "aluno", "senha": "..."}}

O hub só lê o arquivo; as senhas nunca vão para o log (o JupyterHub registra só o nome de quem
entrou ou falhou). Para a universidade, troque este autenticador pelo OAuth ou pelo LTI 1.3
(veja ``hub/README.md``).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from pathlib import Path

from jupyterhub.auth import Authenticator
from traitlets import Unicode

PAPEIS = ("professor", "aluno")


def ler_contas(path: str | os.PathLike) -> dict[str, dict]:
    """As contas do arquivo; ``{}`` se ele não existe."""
    path = Path(path)
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def gravar_contas(path: str | os.PathLike, contas: dict[str, dict]) -> Path:
    """Grava o arquivo com modo 600 desde a criação (a senha nunca fica legível por outros)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(contas, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    os.chmod(path, 0o600)
    return path


def garantir_contas(path: str | os.PathLike, papeis: dict[str, str]) -> dict[str, dict]:
    """Acrescenta ao arquivo as contas que faltam (senha aleatória); as existentes ficam como estão."""
    contas = ler_contas(path)
    for nome, papel in papeis.items():
        if papel not in PAPEIS:
            raise ValueError(f"papel desconhecido para {nome}: {papel!r} (use {' ou '.join(PAPEIS)})")
        if nome not in contas:
            contas[nome] = {"papel": papel, "senha": secrets.token_urlsafe(12)}
        contas[nome]["papel"] = papel
    gravar_contas(path, contas)
    return contas


class ContasLocaisAuthenticator(Authenticator):
    """Entra quem está no arquivo de contas com a senha certa (comparação em tempo constante)."""

    arquivo = Unicode("", help="caminho do contas.json (modo 600)").tag(config=True)

    async def authenticate(self, handler, data):
        nome = (data or {}).get("username", "").strip()
        senha = (data or {}).get("password", "")
        conta = ler_contas(self.arquivo).get(nome)
        if conta and hmac.compare_digest(conta["senha"].encode(), senha.encode()):
            return nome
        self.log.warning("Entrada recusada para %r", nome)
        return None

    async def check_allowed(self, username, authentication=None):
        return username in ler_contas(self.arquivo)
