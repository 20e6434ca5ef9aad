"""O que atravessa a fronteira entre o kernel do aluno e o juiz: só dados, num esquema versionado.

Na correção, o kernel confinado roda a resposta do aluno nos casos que o juiz escolheu e devolve
o que ela produziu; o juiz, num processo onde nenhum código do aluno roda, compara com a
referência e decide os pontos. Entre os dois passa só isto:

- números, textos, ``None``, ``bool``, tuplas, listas e dicionários (chaves texto ou inteiro),
  escritos em JSON;
- tensores como arquivos ``.npy`` (em base64), lidos com ``allow_pickle=False``, mais a forma, o
  dtype, o dispositivo, se pedem gradiente, o nome do ``grad_fn`` e o arranjo na memória
  (contíguo, transposto, expandido), para a verificação poder falar deles;
- objetos que ficam no kernel (um módulo do aluno) como uma referência numerada, ``handle``;
- qualquer outra coisa como uma descrição (tipo e um ``repr`` curto), nunca o objeto.

O mesmo tensor passado duas vezes (``module(x, x, x)``) vira uma entrada só da tabela e volta a
ser um objeto só do outro lado: a identidade importa para gradientes e para ``query is key``.

O lado que lê (:func:`decode`) não confia no que recebe: confere tipos, tamanhos e profundidade
e levanta :class:`WireError` com o motivo em pt-BR. Nada aqui importa o PyTorch no nível do
módulo: o juiz e o kernel o importam ao converter.

Um exemplo que um teste pode montar à mão::

    {"schema": 1, "value": {"kind": "tuple", "items": [{"kind": "tensor", "ref": 0}, 3]},
     "tensors": [{"shape": [2], "dtype": "float32", "device": "cpu", "requires_grad": false,
                  "grad_fn": null, "layout": null, "data": "<npy em base64>"}]}
"""

from __future__ import annotations

import base64
import io
import json
import math
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SCHEMA",
    "Describe",
    "Handle",
    "Limits",
    "TensorInfo",
    "WireError",
    "decode",
    "encode",
    "info",
    "loads",
]

SCHEMA = 1

# dtypes que atravessam a fronteira (os do NumPy; bfloat16 vai como float32, marcado)
_DTYPES = {
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
}


class WireError(ValueError):
    """Os dados vindos do kernel não seguem o esquema (ou passam dos limites)."""


@dataclass(frozen=True)
class Limits:
    """Até onde o juiz lê o que o kernel manda (tudo além disso é recusado, com o motivo)."""

    max_bytes: int = 64 * 1024**2  # a resposta inteira, em JSON
    max_elements: int = 8 * 1024**2  # elementos de um tensor
    max_items: int = 100_000  # itens de listas, tuplas e dicionários, somados
    max_depth: int = 32
    max_text: int = 200_000  # caracteres de um texto


@dataclass(frozen=True)
class Handle:
    """Um objeto que ficou no kernel (o módulo construído pelo aluno, por exemplo)."""

    id: int
    type: str = ""
    mro: tuple[str, ...] = ()

    def is_a(self, name: str) -> bool:
        """O objeto é (ou herda de) uma classe com este nome qualificado (``torch.nn.Module``)?"""
        return name in self.mro or name == self.type


@dataclass(frozen=True)
class Describe:
    """Um valor que não atravessa a fronteira: só o tipo e um ``repr`` curto."""

    type: str
    repr: str = ""
    shape: tuple[int, ...] | None = None
    dtype: str | None = None

    def __str__(self) -> str:
        if self.shape is not None:
            return f"{self.type} {self.shape} {self.dtype or ''}".strip()
        return f"{self.type} {self.repr}".strip()[:120]


@dataclass(frozen=True)
class TensorInfo:
    """O que o lado que enviou sabia de um tensor e o lado que recebe não vê nos números."""

    requires_grad: bool = False
    grad_fn: str | None = None
    device: str = "cpu"
    contiguous: bool = True
    subclass: str | None = None  # o tensor era de uma subclasse (o nome dela)


def info(tensor) -> TensorInfo:
    """As informações com que ``tensor`` chegou (padrão: um tensor comum, sem gradiente, na CPU)."""
    found = getattr(tensor, "_wire_info", None)
    return found if isinstance(found, TensorInfo) else TensorInfo()


# ====================================================================== escrever


def _npy(array) -> str:
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.array(array, order="C", copy=True), allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _qualname(kind: type) -> str:
    module = getattr(kind, "__module__", "") or ""
    name = getattr(kind, "__qualname__", getattr(kind, "__name__", "?"))
    return name if module in ("builtins", "__main__", "") else f"{module}.{name}"


class _Encoder:
    def __init__(self, handles=None):
        self.tensors: list[dict] = []
        self.seen: dict[int, int] = {}
        self.keep: list = []  # mantém vivos os tensores já vistos (o id não pode ser reaproveitado)
        self.handles = handles  # função objeto -> número, para objetos que ficam no kernel

    def tensor(self, t) -> dict:
        import torch

        key = id(t)
        if key in self.seen:
            return {"kind": "tensor", "ref": self.seen[key]}
        self.keep.append(t)
        plain = t
        subclass = None
        if type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
            subclass = _qualname(type(t))
        with torch._C.DisableTorchFunction():  # uma subclasse não escolhe o que é escrito
            plain = torch.Tensor._make_subclass(torch.Tensor, t.detach()) if subclass else t.detach()
            entry = {
                "shape": list(plain.shape),
                "dtype": str(plain.dtype).replace("torch.", ""),
                "device": str(plain.device),
                "requires_grad": bool(t.requires_grad),
                "grad_fn": type(t.grad_fn).__name__ if t.grad_fn is not None else None,
                "contiguous": bool(plain.is_contiguous()),
                "subclass": subclass,
                "layout": None,
                "data": None,
            }
            if plain.device.type != "meta":
                cpu = plain.cpu()
                if cpu.dtype == torch.bfloat16:
                    cpu, entry["dtype"] = cpu.float(), "bfloat16"
                entry["layout"] = _layout(cpu)
                stored = cpu
                if entry["layout"] and "perm" in entry["layout"]:
                    stored = cpu.permute(entry["layout"]["perm"])
                entry["data"] = _npy(stored.contiguous().numpy())
        self.seen[key] = len(self.tensors)
        self.tensors.append(entry)
        return {"kind": "tensor", "ref": self.seen[key]}

    def value(self, v, depth: int = 0) -> Any:
        import numpy as np
        import torch

        if depth > 30:
            return {"kind": "object", "type": "profundo demais", "repr": ""}
        if v is None or isinstance(v, (bool, str)):
            return v[:200_000] if isinstance(v, str) else v
        if isinstance(v, Handle):
            return {"kind": "handle", "id": v.id, "type": v.type, "mro": list(v.mro)}
        if isinstance(v, int) and not isinstance(v, bool):
            return v if abs(v) < 2**63 else {"kind": "object", "type": "int", "repr": str(v)[:100]}
        if isinstance(v, float):
            return v if math.isfinite(v) else {"kind": "float", "repr": repr(v)}
        if isinstance(v, torch.Tensor):
            return self.tensor(v)
        if isinstance(v, (tuple, list)):
            kind = "tuple" if isinstance(v, tuple) else "list"
            return {"kind": kind, "items": [self.value(x, depth + 1) for x in list(v)[:100_000]]}
        if isinstance(v, dict):
            items = [
                [
                    k if isinstance(k, (str, int)) and not isinstance(k, bool) else repr(k)[:100],
                    self.value(x, depth + 1),
                ]
                for k, x in list(v.items())[:100_000]
            ]
            return {"kind": "dict", "items": items}
        if isinstance(v, torch.Generator):
            return {"kind": "generator", "seed": int(v.initial_seed())}
        if isinstance(v, torch.device):
            return {"kind": "device", "type": str(v)}
        if isinstance(v, torch.dtype):
            return {"kind": "dtype", "name": str(v).replace("torch.", "")}
        if isinstance(v, np.generic):
            item = v.item()
            if isinstance(item, (int, float, bool)):
                return {"kind": "npscalar", "dtype": str(v.dtype), "value": self.value(item, depth + 1)}
        if isinstance(v, np.ndarray):
            return {
                "kind": "describe",
                "type": "numpy.ndarray",
                "shape": list(v.shape),
                "dtype": str(v.dtype),
            }
        if self.handles is not None:
            number = self.handles(v)
            if number is not None:
                mro = [_qualname(k) for k in type(v).__mro__]
                return {"kind": "handle", "id": number, "type": _qualname(type(v)), "mro": mro}
        try:
            text = repr(v)
        except Exception:  # noqa: BLE001 - o repr de um objeto do aluno pode falhar
            text = ""
        return {"kind": "describe", "type": _qualname(type(v)), "repr": text[:200]}


def _layout(t) -> dict | None:
    """Como reconstruir a disposição na memória: uma permutação dos eixos, ou eixos expandidos."""
    if t.is_contiguous() or t.dim() < 2:
        return None
    strides = t.stride()
    if 0 in strides:
        return {"expand": [i for i, s in enumerate(strides) if s == 0 and t.shape[i] > 1]}
    perm = sorted(range(t.dim()), key=lambda i: (-strides[i], i))
    return {"perm": perm}


def encode(value: Any, *, handles=None, extra: dict | None = None) -> dict:
    """``value`` no esquema (um dicionário pronto para ``json.dumps``).

    ``handles``: função que devolve o número de um objeto que deve ficar no kernel (ou ``None``).
    ``extra``: campos a mais do pedido ou da resposta, codificados pela mesma tabela de tensores
    (a identidade entre ``value`` e ``extra`` se preserva).
    """
    encoder = _Encoder(handles)
    out = {"schema": SCHEMA, "value": encoder.value(value)}
    for key, item in (extra or {}).items():
        out[key] = encoder.value(item)
    out["tensors"] = encoder.tensors
    return out


# ====================================================================== ler


class _Decoder:
    def __init__(self, message: dict, limits: Limits, handles, restore_grad: bool = False):
        self.limits, self.handles, self.restore_grad = limits, handles, restore_grad
        self.items = 0
        tensors = message.get("tensors", [])
        if not isinstance(tensors, list):
            raise WireError("a tabela de tensores não é uma lista")
        self.raw = tensors
        self.cache: dict[int, Any] = {}

    def tensor(self, ref) -> Any:
        import numpy as np
        import torch

        if not isinstance(ref, int) or isinstance(ref, bool) or not 0 <= ref < len(self.raw):
            raise WireError(f"referência de tensor inválida: {ref!r}")
        if ref in self.cache:
            return self.cache[ref]
        entry = self.raw[ref]
        if not isinstance(entry, dict):
            raise WireError("entrada de tensor malformada")
        shape = entry.get("shape")
        if (
            not isinstance(shape, list)
            or len(shape) > 16
            or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n for n in shape)
        ):
            raise WireError(f"forma de tensor inválida: {shape!r}"[:200])
        if math.prod(shape) > self.limits.max_elements:
            raise WireError(f"tensor grande demais: {math.prod(shape)} elementos")
        dtype = entry.get("dtype")
        if dtype not in _DTYPES and dtype != "bfloat16":
            raise WireError(f"dtype não aceito: {dtype!r}"[:100])
        device = entry.get("device", "cpu")
        if not isinstance(device, str) or len(device) > 40:
            raise WireError("dispositivo malformado")
        data = entry.get("data")
        if data is None:
            if not device.startswith("meta"):
                raise WireError("tensor sem dados fora do dispositivo meta")
            t = torch.empty(shape, dtype=getattr(torch, dtype), device="meta")
        else:
            if not isinstance(data, str):
                raise WireError("dados de tensor malformados")
            try:
                array = np.load(io.BytesIO(base64.b64decode(data, validate=True)), allow_pickle=False)
            except Exception as exc:  # noqa: BLE001 - o motivo vai na mensagem
                raise WireError(f"o .npy de um tensor não pôde ser lido: {type(exc).__name__}") from None
            if not isinstance(array, np.ndarray):
                raise WireError("o .npy de um tensor não é um array")
            stored_dtype = "float32" if dtype == "bfloat16" else dtype
            if str(array.dtype) != stored_dtype:
                raise WireError(f"o .npy tem dtype {array.dtype}, e a tabela diz {dtype}")
            layout = entry.get("layout")
            perm = layout.get("perm") if isinstance(layout, dict) else None
            expected_shape = [shape[i] for i in perm] if _is_perm(perm, len(shape)) else shape
            if list(array.shape) != expected_shape:
                raise WireError(f"o .npy tem forma {list(array.shape)}, e a tabela diz {shape}")
            t = torch.from_numpy(array.copy())
            if dtype == "bfloat16":
                t = t.to(torch.bfloat16)
            if _is_perm(perm, len(shape)):
                inverse = sorted(range(len(perm)), key=lambda i: perm[i])
                t = t.permute(inverse)
            elif isinstance(layout, dict) and isinstance(layout.get("expand"), list):
                dims = [d for d in layout["expand"] if isinstance(d, int) and 0 <= d < len(shape)]
                if dims:
                    index = tuple(slice(0, 1) if i in dims else slice(None) for i in range(len(shape)))
                    t = t[index].expand(*shape)
            if self.restore_grad and entry.get("requires_grad") and (t.is_floating_point() or t.is_complex()):
                t = t.detach().requires_grad_()  # uma folha, com a mesma disposição na memória
        self.cache[ref] = t
        t._wire_info = TensorInfo(
            requires_grad=bool(entry.get("requires_grad")),
            grad_fn=entry.get("grad_fn") if isinstance(entry.get("grad_fn"), str) else None,
            device=device,
            contiguous=bool(entry.get("contiguous", True)),
            subclass=entry.get("subclass") if isinstance(entry.get("subclass"), str) else None,
        )
        return t

    def value(self, v, depth: int = 0) -> Any:
        import numpy as np
        import torch

        if depth > self.limits.max_depth:
            raise WireError("estrutura aninhada demais")
        self.items += 1
        if self.items > self.limits.max_items:
            raise WireError("itens demais na resposta")
        if v is None or isinstance(v, (bool, int, float)):
            return v
        if isinstance(v, str):
            if len(v) > self.limits.max_text:
                raise WireError("texto longo demais")
            return v
        if not isinstance(v, dict) or not isinstance(v.get("kind"), str):
            raise WireError(f"valor fora do esquema: {type(v).__name__}")
        kind = v["kind"]
        if kind == "tensor":
            return self.tensor(v.get("ref"))
        if kind in ("tuple", "list"):
            items = v.get("items")
            if not isinstance(items, list):
                raise WireError("lista malformada")
            out = [self.value(x, depth + 1) for x in items]
            return tuple(out) if kind == "tuple" else out
        if kind == "dict":
            items = v.get("items")
            if not isinstance(items, list) or not all(isinstance(p, list) and len(p) == 2 for p in items):
                raise WireError("dicionário malformado")
            out = {}
            for key, item in items:
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    raise WireError("chave de dicionário malformada")
                out[key] = self.value(item, depth + 1)
            return out
        if kind == "float":
            text = v.get("repr")
            if text not in ("nan", "inf", "-inf"):
                raise WireError("número especial malformado")
            return float(text)
        if kind == "npscalar":
            dtype = v.get("dtype")
            if dtype not in _DTYPES:
                raise WireError("escalar do NumPy malformado")
            return np.dtype(dtype).type(self.value(v.get("value"), depth + 1))
        if kind == "generator":
            seed = v.get("seed")
            if not isinstance(seed, int) or isinstance(seed, bool):
                raise WireError("gerador malformado")
            return torch.Generator().manual_seed(seed)
        if kind == "device":
            return torch.device(_short(v.get("type"), 40))
        if kind == "dtype":
            name = v.get("name")
            if name not in _DTYPES and name != "bfloat16":
                raise WireError("dtype malformado")
            return getattr(torch, name)
        if kind == "handle":
            number = v.get("id")
            if not isinstance(number, int) or isinstance(number, bool):
                raise WireError("referência de objeto malformada")
            if self.handles is not None:
                return self.handles(number)
            mro = v.get("mro") if isinstance(v.get("mro"), list) else []
            return Handle(number, _short(v.get("type"), 200), tuple(_short(m, 200) for m in mro[:64]))
        if kind == "describe":
            shape = v.get("shape")
            shape = tuple(n for n in shape if isinstance(n, int))[:16] if isinstance(shape, list) else None
            dtype = v.get("dtype") if isinstance(v.get("dtype"), str) else None
            return Describe(
                _short(v.get("type"), 200), _short(v.get("repr"), 200), shape, dtype and dtype[:40]
            )
        raise WireError(f"tipo de valor desconhecido: {kind[:40]!r}")


def _short(v, n: int) -> str:
    return v[:n] if isinstance(v, str) else ""


def _is_perm(perm, n: int) -> bool:
    return (
        isinstance(perm, list)
        and sorted(p for p in perm if isinstance(p, int)) == list(range(n))
        and len(perm) == n
    )


def decode(
    message: Any,
    *,
    limits: Limits | None = None,
    handles=None,
    fields: tuple[str, ...] | None = None,
    restore_grad: bool = False,
) -> Any:
    """O valor de uma mensagem do esquema (e os ``fields`` pedidos, na mesma tabela de tensores).

    ``handles``: função número -> objeto, para o lado que guarda os objetos (o kernel); sem ela,
    uma referência vira :class:`Handle`. ``restore_grad``: os tensores que pediam gradiente voltam a
    pedir (no lado que vai rodar o código do aluno). Levanta :class:`WireError` se a mensagem não
    segue o esquema.
    """
    limits = limits or Limits()
    if not isinstance(message, dict) or message.get("schema") != SCHEMA:
        raise WireError(f"mensagem fora do esquema (esperado schema {SCHEMA})")
    decoder = _Decoder(message, limits, handles, restore_grad)
    value = decoder.value(message.get("value"))
    if fields is None:
        return value
    return value, {key: decoder.value(message.get(key)) for key in fields}


def loads(text: str | bytes, limits: Limits | None = None) -> dict:
    """Lê o JSON de uma mensagem vinda do kernel, recusando o que passa do limite de tamanho."""
    limits = limits or Limits()
    if len(text) > limits.max_bytes:
        raise WireError(f"resposta grande demais ({len(text)} bytes; limite {limits.max_bytes})")
    try:
        message = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"a resposta não é um JSON válido: {type(exc).__name__}") from None
    if not isinstance(message, dict):
        raise WireError("a resposta não é um objeto JSON")
    return message
