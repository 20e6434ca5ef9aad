"""O lado do kernel na correção: roda a resposta do aluno nos casos pedidos e devolve só dados.

O juiz (fora do kernel) manda pedidos pequenos, no esquema de :mod:`transformer_course.wire`:
"chame `scaled_dot_product_attention` com estes tensores", "construa `MultiHeadAttention(8, 2)`
e guarde-o", "copie estes pesos para o objeto 3", "rode-o em modo de treino com a semente 20 e
devolva também o que entrou em `W_O`". Cada pedido é uma célula executada no kernel
(``harness.serve("...")``); a resposta sai como uma saída ``display_data`` de tipo
:data:`MIME`, que o juiz lê e o notebook corrigido não guarda.

Nada aqui sabe a resposta certa: não há oráculo nem implementação de referência neste módulo
(um contrato do import-linter impede). Fora da correção, as verificações do notebook usam as
mesmas funções no próprio processo (:func:`execute`), para que a mensagem que o aluno lê ao
estudar seja a mesma que o juiz escreve.

Tudo o que o kernel devolve é tratado pelo juiz como resposta do aluno: um aluno que adultere
este módulo só estraga os próprios dados.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import traceback
import warnings
from typing import Any

from . import wire

__all__ = [
    "MIME",
    "Objects",
    "decode_request",
    "encode_response",
    "error_data",
    "execute",
    "resolve",
    "serve",
]

MIME = "application/vnd.transformers-do-zero.probe.v1"

# As respostas do aluno ficam nestes objetos entre um pedido e outro (um por kernel).
MAX_MESSAGE = 400  # caracteres da mensagem de uma exceção do aluno


class Objects:
    """Os objetos guardados no kernel entre pedidos (módulos construídos, otimizadores...)."""

    def __init__(self):
        self.by_id: dict[int, Any] = {}
        self.ids: dict[int, int] = {}

    def keep(self, obj) -> int:
        key = id(obj)
        if key in self.ids and self.by_id.get(self.ids[key]) is obj:
            return self.ids[key]
        number = len(self.by_id) + 1
        self.by_id[number] = obj
        self.ids[key] = number
        return number

    def get(self, number: int):
        if number not in self.by_id:
            raise LookupError(f"objeto {number} não existe no kernel")
        return self.by_id[number]

    def known(self, obj) -> int | None:
        number = self.ids.get(id(obj))
        return number if number is not None and self.by_id.get(number) is obj else None


_OBJECTS = Objects()


# ====================================================================== resolver o alvo de um pedido


def resolve(target: Any, namespace: dict, objects: Objects) -> Any:
    """O objeto a que o alvo de um pedido se refere (um nome do notebook, um objeto guardado...)."""
    if not isinstance(target, dict):
        raise LookupError("alvo malformado")
    kind = target.get("kind")
    if kind == "name":
        name = target.get("name")
        if name not in namespace:
            raise NameError(f"name '{name}' is not defined")
        return namespace[name]
    if kind == "handle":
        return objects.get(target.get("id"))
    if kind == "attr":
        obj = resolve(target.get("of"), namespace, objects)
        for part in str(target.get("name", "")).split("."):
            obj = getattr(obj, part)
        return obj
    if kind == "import":
        import importlib

        module, _, attr = str(target.get("path", "")).rpartition(".")
        return getattr(importlib.import_module(module), attr)
    if kind == "value":
        return target.get("value")
    raise LookupError(f"alvo desconhecido: {kind!r}")


def error_data(exc: BaseException) -> dict:
    """A exceção do aluno como dados: tipo, a linha de código dele, a mensagem (curta)."""
    frames = traceback.extract_tb(exc.__traceback__)
    line = ""
    for frame in reversed(frames):
        name = frame.filename
        if "transformer_course" not in name and "/torch/" not in name and "site-packages" not in name:
            if (frame.line or "").strip():
                line = f"linha {frame.lineno}: `{frame.line.strip()[:160]}`"
            break
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - um __str__ do aluno pode falhar
        message = ""
    return {
        "type": type(exc).__name__,
        "mro": [k.__name__ for k in type(exc).__mro__][:20],
        "message": message[:MAX_MESSAGE] + ("…" if len(message) > MAX_MESSAGE else ""),
        "line": line,
        "stub": isinstance(exc, NotImplementedError) and not message.strip(),
    }


# ====================================================================== opções de uma chamada


class _Forbid:
    """Registra chamadas às funções proibidas do PyTorch (por nome qualificado) durante a chamada."""

    def __init__(self, names: list[str]):
        import importlib

        import torch

        self.used: list[str] = []
        self.functions = {}
        for name in names:
            module, _, attr = name.rpartition(".")
            try:
                self.functions[getattr(importlib.import_module(module), attr)] = name
            except (ImportError, AttributeError):
                continue
        harness = self

        class Mode(torch.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if func in harness.functions:
                    harness.used.append(harness.functions[func])
                return func(*args, **(kwargs or {}))

        self.mode = Mode()


def _snapshot(value):
    """Uma cópia do que passou por um submódulo, como estava naquele instante.

    Sem a cópia, uma operação no lugar feita depois pela resposta (``q /= math.sqrt(d_k)`` sobre
    a saída de ``W_Q``, uma forma correta de escrever a atenção) mudaria o valor guardado.
    """
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_snapshot(v) for v in value)
    return value


def _capture(module, stages: dict, captured: dict) -> list:
    """Ganchos nos submódulos: ``{"W_Q": "output", "W_O": "input"}`` guarda a saída ou a 1ª entrada
    da primeira chamada de cada um (uma cópia, tirada na hora)."""
    from functools import partial

    hooks = []

    def record(name, where, mod, args, kwargs, out):
        if name in captured:
            return
        inputs = (*args, *kwargs.values())
        value = (inputs[0] if inputs else None) if where == "input" else out
        captured[name] = _snapshot(value)

    for name, where in stages.items():
        try:
            sub = module.get_submodule(name)
        except AttributeError:
            continue
        if hasattr(sub, "register_forward_hook"):
            hooks.append(sub.register_forward_hook(partial(record, name, where), with_kwargs=True))
    return hooks


def _loss(value, spec: dict):
    """A perda escalar de que se tiram os gradientes: soma dos quadrados, soma, ou produto com pesos."""

    path = spec.get("path", [])
    for index in path:
        value = value[index]
    kind = spec.get("kind", "sum_sq")
    if kind == "sum_sq":
        return value.pow(2).sum()
    if kind == "sum":
        return value.sum()
    if kind == "dot":
        weights = spec["weights"]
        return (value * weights.to(value.dtype)).sum()
    raise ValueError(f"perda desconhecida: {kind}")


def _param_grads(obj, names) -> dict:
    out = {}
    if not hasattr(obj, "named_parameters"):
        return out
    params = dict(obj.named_parameters())
    for name in params if names == "all" else names:
        p = params.get(name)
        out[name] = None if p is None else p.grad
    return out


def _call(request: dict, namespace: dict, objects: Objects) -> dict:
    """O verbo ``call``: chama o alvo com os argumentos e devolve o que as opções pedirem."""
    import torch

    target = resolve(request.get("target"), namespace, objects)
    args = request.get("args", [])
    kwargs = request.get("kwargs", {})
    options = request.get("options", {})
    out: dict = {}
    captured: dict = {}
    hooks = _capture(target, options["capture"], captured) if options.get("capture") else []
    forbid = _Forbid(options["forbid"]) if options.get("forbid") else None
    grad = options.get("grad")
    if options.get("seed") is not None:
        torch.default_generator.manual_seed(int(options["seed"]))  # só a CPU: o gerador que o Check empresta
    try:
        with contextlib.ExitStack() as stack:
            if forbid is not None:
                stack.enter_context(forbid.mode)
            if options.get("no_grad"):
                stack.enter_context(torch.no_grad())
            result = target(*args, **kwargs)
            if grad is not None:
                loss = _loss(result, grad.get("loss", {}))
                loss.backward()
    except BaseException as exc:  # noqa: BLE001 - toda exceção do aluno vira dados
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        out["error"] = error_data(exc)
        result = None
    finally:
        for hook in hooks:
            hook.remove()
    out["value"] = result
    if options.get("keep") and "error" not in out:
        out["kept"] = objects.keep(result)
    if options.get("after"):
        out["after"] = list(args)
        out["after_kwargs"] = dict(kwargs)
    if grad is not None and "error" not in out:
        out["grads"] = [a.grad if isinstance(a, torch.Tensor) else None for a in args]
        if grad.get("params"):
            out["param_grads"] = _param_grads(target, grad["params"])
    if captured:
        out["captured"] = captured
    if forbid is not None:
        out["forbidden"] = forbid.used
    return out


# ====================================================================== descrever e carregar módulos


def _describe(obj, attrs: list[str]) -> dict:
    """A estrutura de um objeto do aluno: tipo, parâmetros, buffers, submódulos e atributos pedidos."""
    import torch
    from torch import nn

    desc: dict = {"type": wire._qualname(type(obj)), "mro": [wire._qualname(k) for k in type(obj).__mro__]}
    desc["callable"] = callable(obj)
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    desc["module"] = module if isinstance(module, str) else None
    desc["qualname"] = qualname if isinstance(qualname, str) else None
    if isinstance(obj, type):
        desc["class_mro"] = [wire._qualname(k) for k in obj.__mro__]
    desc["uses_package"] = _package_names_used(obj)
    if isinstance(obj, nn.Module):
        desc["training"] = bool(obj.training)
        desc["params"] = {
            name: {"shape": list(p.shape), "dtype": str(p.dtype)[6:], "requires_grad": p.requires_grad}
            for name, p in obj.named_parameters()
        }
        desc["n_params"] = sum(p.numel() for p in obj.parameters())
        desc["buffers"] = {
            name: {"shape": list(b.shape), "dtype": str(b.dtype)[6:], "persistent": name in obj.state_dict()}
            for name, b in obj.named_buffers()
        }
        modules = {}
        for name, sub in obj.named_modules():
            entry = {"type": wire._qualname(type(sub)), "mro": [wire._qualname(k) for k in type(sub).__mro__]}
            for field in ("in_features", "out_features", "num_embeddings", "embedding_dim", "padding_idx",
                          "p", "normalized_shape", "eps", "elementwise_affine", "approximate"):  # fmt: skip
                if hasattr(sub, field):
                    value = getattr(sub, field)
                    entry[field] = list(value) if isinstance(value, tuple) else value
            if isinstance(sub, nn.Linear):
                entry["bias"] = sub.bias is not None
            modules[name] = entry
        desc["modules"] = modules
    values = {}
    for attr in attrs:
        try:
            value = obj
            for part in attr.split("."):
                value = getattr(value, part)
        except Exception as exc:  # noqa: BLE001 - o atributo pode não existir
            values[attr] = {"missing": True, "error": type(exc).__name__}
            continue
        if isinstance(value, (torch.Tensor, int, float, bool, str, type(None))):
            values[attr] = {"value": value}
        else:
            values[attr] = {"value": value, "type": wire._qualname(type(value))}
    desc["attrs"] = values
    return desc


def _package_names_used(obj) -> list[str]:
    """Os objetos do pacote do curso que o código de uma função/classe do aluno cita pelo nome.

    Lê os nomes dos objetos de código (de cada método, numa classe) e os procura nos globais de onde
    o código foi definido (o notebook). Serve para a correção recusar uma resposta que usa a
    implementação de referência por dentro (uma classe que embrulha a do pacote, por exemplo).
    """
    import types

    functions = []
    if isinstance(obj, types.FunctionType):
        functions.append(obj)
    elif isinstance(obj, type):
        for value in vars(obj).values():
            value = getattr(value, "__func__", value)
            if isinstance(value, types.FunctionType):
                functions.append(value)
    found = set()
    for function in functions:
        stack, names = [function.__code__], set()
        while stack:
            code = stack.pop()
            names |= set(code.co_names)
            stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        for name in names:
            value = function.__globals__.get(name)
            module = getattr(value, "__module__", None)
            if isinstance(module, str) and module.startswith("transformer_course"):
                found.add(f"{module}.{getattr(value, '__qualname__', name)}")
    return sorted(found)[:200]


def _load(obj, params: dict) -> dict:
    """Copia os tensores dados para os parâmetros/buffers do objeto, pelo nome (``W_Q.weight``)."""
    import torch

    missing, mismatched = [], []
    state = {**dict(obj.named_parameters()), **dict(obj.named_buffers())}
    with torch.no_grad():
        for name, value in params.items():
            target = state.get(name)
            if target is None:
                missing.append(name)
            elif tuple(target.shape) != tuple(value.shape):
                mismatched.append([name, list(target.shape), list(value.shape)])
            else:
                target.copy_(value.to(target.dtype))
    return {"missing": missing, "mismatched": mismatched}


# ====================================================================== pedidos


def execute(request: dict, namespace: dict, objects: Objects | None = None) -> dict:
    """Executa um pedido já decodificado (tensores de verdade, objetos de verdade); devolve os campos.

    Usado pelo :func:`serve` (no kernel da correção) e, fora da correção, pelas verificações do
    próprio notebook (o mesmo código dos dois lados).
    """
    from .runtime import one_thread

    objects = objects or _OBJECTS
    verb = request.get("verb")
    # Uma thread, como as verificações sempre rodaram: com tensores pequenos, as threads do PyTorch
    # só disputam os núcleos com os outros kernels da turma (e uma chamada de microssegundos vira ms).
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), one_thread():
        warnings.simplefilter("ignore")
        if verb == "call":
            return _call(request, namespace, objects)
        if verb == "describe":
            try:
                obj = resolve(request.get("target"), namespace, objects)
            except Exception as exc:  # noqa: BLE001
                return {"error": error_data(exc)}
            return {"value": _describe(obj, list(request.get("attrs", [])))}
        if verb == "load":
            obj = resolve(request.get("target"), namespace, objects)
            return {"value": _load(obj, request.get("params", {}))}
        if verb == "scenario":
            return _scenario(request, namespace, objects)
    raise LookupError(f"pedido desconhecido: {verb!r}")


def _scenario(request: dict, namespace: dict, objects: Objects) -> dict:
    """Um roteiro de um capítulo (``"ch06.train_epoch"``): o que é longo demais para pedidos soltos.

    Mora em ``transformer_course/scenarios/chNN.py`` (o lado do kernel, sem oráculo) e devolve os
    campos da resposta, como :func:`_call`.
    """
    import importlib

    name = str(request.get("name", ""))
    chapter, _, function = name.partition(".")
    if not chapter.startswith("ch") or not function.isidentifier() or function.startswith("_"):
        raise LookupError(f"roteiro desconhecido: {name!r}")
    module = importlib.import_module(f"{__package__}.scenarios.{chapter}")
    return getattr(module, function)(request, namespace, objects)


def decode_request(message: dict, objects: Objects) -> dict:
    """O pedido no esquema do :mod:`wire` como objetos de verdade (os ``handle`` viram os objetos)."""
    request = wire.decode(message, handles=objects.get, restore_grad=True)
    if not isinstance(request, dict):
        raise LookupError("pedido malformado")
    return request


def encode_response(fields: dict, objects: Objects) -> dict:
    """Os campos da resposta no esquema do :mod:`wire` (objetos guardados viram ``handle``)."""
    fields = dict(fields)
    response = wire.encode(fields.pop("value", None), handles=objects.known, extra=fields)
    response["fields"] = sorted(fields)
    return response


def serve(payload: str) -> None:
    """Atende um pedido do juiz (no kernel): decodifica, executa, publica a resposta (``MIME``)."""
    from IPython.display import publish_display_data

    objects = _OBJECTS
    try:
        request = decode_request(json.loads(base64.b64decode(payload)), objects)
        fields = execute(request, _user_namespace(), objects)
        text = json.dumps(encode_response(fields, objects))
    except Exception as exc:  # noqa: BLE001 - a falha do atendimento também é dado
        text = json.dumps(
            {"schema": wire.SCHEMA, "value": None, "tensors": [], "harness_error": error_data(exc)}
        )
    publish_display_data({MIME: text}, metadata={})


def _user_namespace() -> dict:
    from IPython import get_ipython

    shell = get_ipython()
    return shell.user_ns if shell is not None else {}
