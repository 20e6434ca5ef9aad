"""A estrutura de um módulo do aluno, vista só pelo que ``c.describe`` devolve.

As verificações de módulos (capítulos 3 e 4) conferem atributos — ``W_Q`` é uma
``nn.Linear(D, D)`` com viés, ``norm1`` é uma ``nn.LayerNorm(D)`` — sem tocar o objeto do aluno:
pedem a descrição dele uma vez (``c.describe(module, attrs=[...])``, os nomes com pontos) e leem
cada atributo com :func:`part`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from torch import nn

from ..feedback import Check, describe
from ..probe import Attr
from ..wire import Handle

__all__ = [
    "LAYER_NORM",
    "LINEAR",
    "MODULE",
    "is_a",
    "is_module",
    "part",
    "prepare",
    "qualname",
    "short_type",
    "shown",
    "watched",
]


def qualname(cls: type) -> str:
    """O nome qualificado de uma classe, como a descrição o escreve (``"torch.nn.modules.linear.Linear"``)."""
    return f"{cls.__module__}.{cls.__qualname__}"


MODULE, LINEAR, LAYER_NORM = qualname(nn.Module), qualname(nn.Linear), qualname(nn.LayerNorm)


def is_module(obj: Any) -> bool:
    """O que ``c.new`` devolveu é um ``nn.Module`` que ficou do lado do aluno?"""
    return isinstance(obj, Handle) and obj.is_a(MODULE)


def part(c: Check, handle: Any, desc: dict, name: str) -> dict | None:
    """O que se sabe do atributo ``name`` (com pontos: ``"self_attn.W_Q"``); ``None`` se não existe.

    Um submódulo vem de ``desc["modules"]`` (``type``, ``mro``, ``in_features``, ``bias``,
    ``normalized_shape``...); qualquer outro valor, de ``desc["attrs"]`` (``{"value": ...}``, sem
    ``mro``). ``name`` precisa estar entre os ``attrs`` pedidos. Um submódulo com dois nomes
    (``self.norm2 = self.norm1``) só aparece em ``modules`` pelo primeiro; pelo segundo, é descrito à
    parte (um pedido a mais, só nesse caso).
    """
    attr = desc.get("attrs", {}).get(name) or {"missing": True}
    if attr.get("missing"):
        return None
    entry = desc.get("modules", {}).get(name)
    if entry is None and "type" in attr:  # um objeto que não é dado: um módulo com outro nome?
        sub = c.describe(Attr(handle, name))
        entry = sub.get("modules", {}).get("") or {"type": sub.get("type", ""), "mro": sub.get("mro", [])}
    if entry is None:
        return {"type": "", "mro": [], "value": attr.get("value")}
    return {**entry, "value": attr.get("value")}


def watched(fn, *args) -> Callable[[], None]:
    """A chamada típica que ``c.refuse_reference`` vigia ao estudar: ``fn(*args)``, sem deixar escapar erros.

    A vigia só quer saber se o código da referência roda; um erro da resposta aparece nos casos
    seguintes, com o diagnóstico deles — como na correção, em que a chamada vigiada nem acontece.
    """

    def run() -> None:
        with contextlib.suppress(Exception):
            fn(*args)

    return run


def prepare(c: Check, module: Any, desc: dict, dtype, train: bool | None = None) -> None:
    """``module.to(dtype)`` e ``module.train(train)`` do lado do aluno, pedidos só quando mudam algo.

    A descrição diz o dtype de cada parâmetro e buffer e o modo do módulo recém-construído
    (``train=None``: o modo fica como está).
    """
    tensors = (*desc.get("params", {}).values(), *desc.get("buffers", {}).values())
    name = str(dtype).removeprefix("torch.")
    if any(t["dtype"].startswith(("float", "bfloat")) and t["dtype"] != name for t in tensors):
        c.method(module, "to", dtype)
    if train is not None and (not train or not desc.get("training")):
        c.method(module, "train", train)


def is_a(info: dict | None, qualname: str) -> bool:
    """``isinstance`` pela descrição: o atributo existe e tem ``qualname`` na sua MRO."""
    return info is not None and qualname in info.get("mro", [])


def short_type(info: dict | None) -> str:
    """O nome curto da classe (``"LayerNorm"``), como ``type(obj).__name__``."""
    return str((info or {}).get("type", "")).rsplit(".", 1)[-1]


def shown(info: dict | None) -> str:
    """O atributo em poucas palavras, para a mensagem (``None`` quando não existe)."""
    return describe(None if info is None else info.get("value"))
