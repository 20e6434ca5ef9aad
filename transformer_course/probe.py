"""Como uma verificação toca a resposta do aluno: por pedidos que devolvem só dados.

Uma verificação nunca mexe direto no objeto do aluno: ela pede, e recebe uma
:class:`Response` com números (tensores comuns, na CPU), textos e referências (:class:`Handle`)
aos objetos que ficaram do outro lado. Há dois lados possíveis:

- :class:`LocalStudent` — ao estudar (o teste visível no notebook, ``nbval``, ``pytest``): o
  pedido roda neste processo, pelo mesmo código do kernel da correção
  (:mod:`transformer_course.harness`), e faz a mesma viagem pelo esquema de
  :mod:`transformer_course.wire`, para que a mensagem seja a mesma nos dois lugares;
- :class:`RemoteStudent` — no juiz (``instructor/judge.py``): o pedido vira uma célula executada
  no kernel confinado, e a resposta volta como dados. Neste processo nenhum código do aluno roda.

:func:`judging` escolhe o lado (e a semente dos testes ocultos) para as verificações que rodam
dentro do bloco. Fora dele, cada verificação cria o seu :class:`LocalStudent`.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import harness, wire
from .wire import Handle, WireError

__all__ = [
    "Attr",
    "Handle",
    "HarnessFailure",
    "Import",
    "LocalStudent",
    "Remote",
    "RemoteStudent",
    "Response",
    "current_seed_offset",
    "current_student",
    "judging",
    "report",
]


@dataclass(frozen=True)
class Remote:
    """O nome de uma resposta do aluno no kernel da correção (``Remote("split_heads")``)."""

    name: str

    @property
    def __name__(self) -> str:  # as mensagens dizem o nome da função
        return self.name


@dataclass(frozen=True)
class Import:
    """Um objeto importado do lado do aluno pelo nome qualificado (uma classe do pacote, do PyTorch)."""

    path: str


@dataclass(frozen=True)
class Attr:
    """Um atributo (ou método) de um objeto do aluno: ``Attr(module, "train")``."""

    of: Any
    name: str


class HarnessFailure(RuntimeError):
    """O kernel não respondeu como o esquema manda (adulterado, morto, ou o atendimento falhou)."""


_FIELDS = ("error", "after", "after_kwargs", "grads", "param_grads", "captured", "forbidden", "kept")


@dataclass
class Response:
    """O que o lado do aluno devolveu a um pedido (tudo dados)."""

    value: Any = None
    error: dict | None = None
    after: list | None = None
    after_kwargs: dict | None = None
    grads: list | None = None
    param_grads: dict | None = None
    captured: dict = field(default_factory=dict)
    forbidden: list | None = None
    kept: int | None = None

    @classmethod
    def parse(cls, message: dict) -> Response:
        if not isinstance(message, dict):
            raise WireError("resposta fora do esquema")
        if isinstance(message.get("harness_error"), dict):
            err = message["harness_error"]
            detail = f"{err.get('type', '?')}: {err.get('message', '')}"[:300]
            raise HarnessFailure(f"o atendimento do pedido falhou no kernel ({detail})")
        names = message.get("fields", [])
        if not isinstance(names, list) or not all(n in _FIELDS for n in names):
            raise WireError("campos desconhecidos na resposta")
        value, fields = wire.decode(message, fields=tuple(names))
        out = cls(value=value)
        for name, item in fields.items():
            setattr(out, name, item if item is not None or name != "captured" else {})
        if out.error is not None and not _valid_error(out.error):
            raise WireError("erro malformado na resposta")
        return out


def _valid_error(error) -> bool:
    return (
        isinstance(error, dict)
        and isinstance(error.get("type"), str)
        and isinstance(error.get("message"), str)
        and isinstance(error.get("mro", []), list)
    )


class _Base:
    """O que os dois lados têm em comum: montar o pedido a partir dos alvos da verificação."""

    def target(self, obj) -> dict:
        if obj is None:
            return {"kind": "value", "value": None}
        if isinstance(obj, Handle):
            return {"kind": "handle", "id": obj.id}
        if isinstance(obj, Attr):
            return {"kind": "attr", "of": self.target(obj.of), "name": obj.name}
        if isinstance(obj, Remote):
            return {"kind": "name", "name": obj.name}
        if isinstance(obj, Import):
            return {"kind": "import", "path": obj.path}
        return self.local_target(obj)

    def local_target(self, obj) -> dict:
        raise TypeError(f"não sei pedir a {type(obj).__name__} do lado do aluno")

    def send(self, request: dict) -> dict:
        raise NotImplementedError

    def request(self, verb: str, target, **fields) -> Response:
        message = wire.encode({"verb": verb, "target": self.target(target), **fields})
        return Response.parse(self.send(message))


class LocalStudent(_Base):
    """O lado do aluno neste mesmo processo (ao estudar): o código do kernel, chamado direto."""

    def __init__(self):
        self.objects = harness.Objects()

    def local_target(self, obj) -> dict:
        return {"kind": "handle", "id": self.objects.keep(obj)}

    def send(self, message: dict) -> dict:
        request = harness.decode_request(message, self.objects)
        fields = harness.execute(request, {}, self.objects)
        return harness.encode_response(fields, self.objects)


class RemoteStudent(_Base):
    """O lado do aluno no kernel da correção: cada pedido é uma célula que o kernel executa.

    Args:
        transport: recebe o código de uma célula e devolve o texto JSON publicado com o tipo
            :data:`harness.MIME` (ou ``None`` se nada veio). É o executor do juiz quem o dá.
        limits: até onde a resposta é lida.
    """

    def __init__(self, transport: Callable[[str], str | None], limits: wire.Limits | None = None):
        self.transport, self.limits = transport, limits or wire.Limits()
        self.requests = 0

    def send(self, message: dict) -> dict:
        payload = base64.b64encode(json.dumps(message).encode()).decode("ascii")
        code = f"__import__('transformer_course.harness').harness.serve('{payload}')"
        self.requests += 1
        text = self.transport(code)
        if text is None:
            raise HarnessFailure("o kernel não devolveu resposta ao pedido da correção")
        return wire.loads(text, self.limits)


_STUDENT: contextvars.ContextVar = contextvars.ContextVar("student", default=None)
_SEED: contextvars.ContextVar = contextvars.ContextVar("seed_offset", default=0)
_SINK: contextvars.ContextVar = contextvars.ContextVar("sink", default=None)


def current_student():
    """O lado do aluno das verificações em curso (``None``: cada verificação cria o seu, local)."""
    return _STUDENT.get()


def current_seed_offset() -> int:
    """O deslocamento das sementes dos testes ocultos (0 ao estudar; um por entrega no juiz)."""
    return _SEED.get()


def report(line: str) -> None:
    """A linha de sucesso de uma verificação: impressa ao estudar, guardada pelo juiz na correção."""
    sink = _SINK.get()
    if sink is None:
        print(line)
    else:
        sink.append(line)


@contextlib.contextmanager
def judging(student, seed_offset: int = 0, sink: list | None = None):
    """As verificações dentro do bloco falam com ``student`` e sorteiam os ocultos com ``seed_offset``.

    ``sink``: onde guardar as linhas de sucesso (em vez de imprimi-las).
    """
    tokens = (_STUDENT.set(student), _SEED.set(int(seed_offset)), _SINK.set(sink))
    try:
        yield student
    finally:
        _STUDENT.reset(tokens[0])
        _SEED.reset(tokens[1])
        _SINK.reset(tokens[2])
