"""Roteiros do capítulo 6 no kernel: o agendador e os laços de treino e de avaliação com sondas.

Cada roteiro monta, a partir de uma semente, o que a verificação precisa, roda a resposta do
aluno e devolve só o que as sondas viram. Nada aqui sabe o que é certo: o juiz remonta o mesmo
:class:`Setup` (esta mesma classe, com a mesma semente) no processo dele, roda ali o laço de
referência e os erros conhecidos, e compara.

As sondas de :class:`Setup`:

- o modelo (:class:`ProbeModel`) registra cada *forward* (modo de treino? gradientes ligados?) e,
  com um gancho nos logits, o momento do ``backward()`` e a norma do gradiente que já estava
  acumulada nos parâmetros;
- a perda (:meth:`Log.loss_fn`, a entropia cruzada) guarda a do último lote com gradientes;
- o SGD tem ganchos antes e depois do ``step()``: a norma do gradiente e a taxa usadas, e os
  parâmetros depois do passo;
- a função do ``LambdaLR`` registra cada ``scheduler.step()``.

Os dados que voltam (:meth:`Setup.observed`)::

    {"events": [("forward", treino: bool, gradientes: bool) | ("backward",)
                | ("step", norma: float, taxa: float) | ("sched",), ...],   # em ordem
     "trace": [(perda, norma antes do backward, norma no step, taxa, parâmetros (P,)), ...],
     "params": tensor (P,),          # os parâmetros no fim, achatados (P = 21: peso 3×6 e viés 3)
     "lr": float,                    # a taxa do 1º grupo no fim
     "grad_norm": float,             # a norma do gradiente que ficou nos parâmetros
     "grads": [tensor | None, ...],  # o .grad de cada parâmetro no fim
     "modes": [bool, ...]}           # model.training de cada submódulo (modules()), no fim
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, TensorDataset

from .. import harness
from ..runtime import seeded_generator

__all__ = ["Log", "ProbeModel", "Setup", "evaluate", "noam_values", "schedule", "train_epoch"]

N_FEATURES, N_CLASSES = 6, 3


def grad_norm(params) -> float:
    """A norma (L2) de todos os gradientes juntos; 0 se nenhum parâmetro tem gradiente."""
    grads = [torch.linalg.vector_norm(p.grad) for p in params if p.grad is not None]
    return torch.linalg.vector_norm(torch.stack(grads)).item() if grads else 0.0


class Log:
    """As sondas: os eventos em ordem e o rastro de cada ``optimizer.step()``."""

    def __init__(self):
        self.events, self.trace, self.params = [], [], []
        self.loss = self.grad_before = self.norm = self.lr = math.nan

    def loss_fn(self, logits, targets):  # a entropia cruzada, guardando a do último lote com gradientes
        loss = nn.functional.cross_entropy(logits, targets)
        if torch.is_grad_enabled():
            self.loss = loss.item()
        return loss

    def backward(self, grad):  # gancho nos logits: roda antes de o backward() chegar aos parâmetros
        self.events.append(("backward",))
        self.grad_before = grad_norm(self.params)

    def before_step(self, optimizer, args, kwargs):
        self.norm, self.lr = grad_norm(self.params), optimizer.param_groups[0]["lr"]
        self.events.append(("step", self.norm, self.lr))

    def after_step(self, optimizer, args, kwargs):
        after = torch.cat([p.detach().flatten() for p in self.params])
        self.trace.append((self.loss, self.grad_before, self.norm, self.lr, after))

    def schedule(self, k: int) -> float:  # a função do LambdaLR: uma chamada a cada scheduler.step()
        self.events.append(("sched",))
        return 1.0 / (1.0 + k)


class ProbeModel(nn.Module):
    """logits = linear(x · máscara), máscara fixa só em treino (dropout sem sorteio); registra o forward."""

    def __init__(self, seed: int, dtype: torch.dtype, tuple_output: bool, log: Log):
        super().__init__()
        gen = seeded_generator(seed)
        self.linear = nn.Linear(N_FEATURES, N_CLASSES, dtype=dtype)
        with torch.no_grad():
            self.linear.weight.copy_(torch.randn(N_CLASSES, N_FEATURES, generator=gen, dtype=dtype))
            self.linear.bias.copy_(torch.randn(N_CLASSES, generator=gen, dtype=dtype))
        self.register_buffer("mask", (torch.rand(N_FEATURES, generator=gen) > 0.4).to(dtype) / 0.6)
        self.tuple_output, self.log = tuple_output, log

    def forward(self, x):
        self.log.events.append(("forward", self.training, torch.is_grad_enabled()))
        logits = self.linear(x * self.mask if self.training else x)  # (B, F) -> (B, C)
        if logits.requires_grad:
            logits.register_hook(self.log.backward)
        return (logits, x.sum(-1)) if self.tuple_output else logits


class Setup:
    """Modelo, dados, perda, SGD e ``LambdaLR`` com sondas, refeitos iguais a partir de uma semente.

    Args:
        seed: a semente do modelo (os dados usam ``seed + 1000``).
        sizes: os tamanhos dos lotes (todos iguais ao primeiro, menos talvez o último).
        stale_grads: gradientes "velhos" (0,7) já em ``.grad``, deixados por um cálculo anterior.
        mode: o modo em que o modelo chega (``"train"`` ou ``"eval"``).
    """

    def __init__(self, seed: int, dtype=torch.float64, tuple_output=False, sizes=(8, 8, 8, 3),
                 stale_grads=True, mode="eval"):  # fmt: skip
        self.log = log = Log()
        gen = seeded_generator(seed + 1000)
        X = 3.0 * torch.randn(sum(sizes), N_FEATURES, generator=gen, dtype=dtype)
        y = torch.randint(N_CLASSES, (sum(sizes),), generator=gen)
        self.batch_sizes, self.events, self.loss_fn = list(sizes), log.events, log.loss_fn
        self.loader = DataLoader(TensorDataset(X, y), batch_size=sizes[0])
        self.model = ProbeModel(seed, dtype, tuple_output, log).train(mode == "train")
        log.params = list(self.model.parameters())
        self.optimizer = torch.optim.SGD(log.params, lr=0.3)
        self.optimizer.register_step_pre_hook(log.before_step)
        self.optimizer.register_step_post_hook(log.after_step)
        self.scheduler = LambdaLR(self.optimizer, log.schedule)
        for p in log.params if stale_grads else ():
            p.grad = torch.full_like(p, 0.7)
        self.events.clear()

    @classmethod
    def from_request(cls, request: dict) -> Setup:
        """O mesmo ``Setup`` que o juiz montou, a partir dos campos do pedido."""
        dtype = request.get("dtype", torch.float64)
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype não previsto: {dtype!r}")
        sizes = tuple(int(n) for n in request.get("sizes", (8, 8, 8, 3)))
        if not sizes or len(sizes) > 64 or not all(0 < n <= 1024 for n in sizes):
            raise ValueError(f"tamanhos de lote não previstos: {sizes!r}")
        return cls(
            int(request["seed"]),
            dtype=dtype,
            tuple_output=bool(request.get("tuple_output", False)),
            sizes=sizes,
            stale_grads=bool(request.get("stale_grads", True)),
            mode="train" if request.get("mode") == "train" else "eval",
        )

    def params(self) -> torch.Tensor:
        return torch.cat([p.detach().flatten() for p in self.log.params])

    def count(self, kind: str) -> int:
        return sum(1 for e in self.events if e[0] == kind)

    def observed(self) -> dict:
        """O que as sondas viram (o esquema no começo do módulo)."""
        return {
            "events": list(self.events),
            "trace": list(self.log.trace),
            "params": self.params(),
            "lr": self.optimizer.param_groups[0]["lr"],
            "grad_norm": grad_norm(self.log.params),
            "grads": [None if p.grad is None else p.grad.detach().clone() for p in self.log.params],
            "modes": [bool(m.training) for m in self.model.modules()],
        }


def noam_values(request: dict, namespace: dict, objects) -> dict:
    """``noam_lr(step, d_model, warmup_steps, **kwargs)`` em cada passo de ``steps``, num pedido só.

    Devolve, em ordem, ``{"value": o que voltou}`` ou ``{"error": a exceção}`` de cada chamada.
    """
    fn = harness.resolve(request.get("target"), namespace, objects)
    d_model, warmup_steps, kwargs = (
        request["d_model"],
        request["warmup_steps"],
        dict(request.get("kwargs") or {}),
    )
    outcomes = []
    for step in request["steps"]:
        try:
            outcomes.append({"value": fn(step, d_model, warmup_steps, **kwargs)})
        except BaseException as exc:  # noqa: BLE001 - toda exceção do aluno vira dados
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            outcomes.append({"error": harness.error_data(exc)})
    return {"value": outcomes}


def _run(request: dict, namespace: dict, objects, setup: Setup, args: tuple) -> dict:
    """Chama a resposta do aluno com ``args`` e devolve o que ela devolveu e o que as sondas viram."""
    fn = harness.resolve(request.get("target"), namespace, objects)
    try:
        result = fn(*args)
        return {"value": {"result": result, **setup.observed()}}
    except BaseException as exc:  # noqa: BLE001 - toda exceção do aluno vira dados
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return {"error": harness.error_data(exc)}


def train_epoch(request: dict, namespace: dict, objects) -> dict:
    """``train_epoch(model, loader, optimizer, scheduler, loss_fn, max_norm)`` no :class:`Setup` pedido.

    Campos do pedido: os de :meth:`Setup.from_request` (``seed``, ``dtype``, ``tuple_output``,
    ``sizes``, ``stale_grads``, ``mode``) e ``max_norm``. Devolve ``{"result": o que a função
    devolveu, **Setup.observed()}``.
    """
    s = Setup.from_request(request)
    args = (s.model, s.loader, s.optimizer, s.scheduler, s.loss_fn, float(request["max_norm"]))
    return _run(request, namespace, objects, s, args)


def evaluate(request: dict, namespace: dict, objects) -> dict:
    """``evaluate(model, loader, loss_fn)`` no :class:`Setup` pedido (os mesmos campos, sem ``max_norm``)."""
    s = Setup.from_request(request)
    return _run(request, namespace, objects, s, (s.model, s.loader, s.loss_fn))


OPTIMIZERS = {"SGD": torch.optim.SGD, "Adam": torch.optim.Adam, "AdamW": torch.optim.AdamW}


def schedule(request: dict, namespace: dict, objects) -> dict:
    """``make_warmup_scheduler(optimizer, d_model, warmup_steps[, factor])`` e ``k_max`` passos.

    Campos do pedido: ``optimizer`` (``"SGD"``, ``"Adam"`` ou ``"AdamW"``), ``params`` (um tensor por
    grupo), ``lrs`` (a taxa de cada grupo), ``d_model``, ``warmup_steps``, ``factor`` (``None``: não
    passado) e ``k_max``. Cria o otimizador, chama a função e dá ``k_max`` passos (``optimizer.step()``
    sem gradientes, depois ``scheduler.step()``). Devolve::

        {"scheduler": o que a função devolveu (um objeto fica no kernel: volta como referência),
         "wraps": bool,              # scheduler.optimizer é o otimizador criado aqui?
         "rows": [[lr de cada grupo] depois de k passos, k = 0, 1, ...],
         "step_error": None | {"k": passo, "type": ..., "message": ...}}   # scheduler.step() levantou
    """
    fn = harness.resolve(request.get("target"), namespace, objects)
    params = [nn.Parameter(t.detach().clone()) for t in request["params"]]
    optimizer = OPTIMIZERS[request["optimizer"]](
        [{"params": [p], "lr": float(lr)} for p, lr in zip(params, request["lrs"], strict=True)]
    )
    factor = request.get("factor")
    kwargs = {} if factor is None else {"factor": factor}
    try:
        scheduler = fn(optimizer, request["d_model"], request["warmup_steps"], **kwargs)
    except BaseException as exc:  # noqa: BLE001 - toda exceção do aluno vira dados
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return {"error": harness.error_data(exc)}
    if not isinstance(scheduler, (type(None), bool, int, float, str, tuple, list, dict, torch.Tensor)):
        objects.keep(scheduler)  # volta como referência (tipo e classes-base), não como texto
    out = {"scheduler": scheduler, "wraps": getattr(scheduler, "optimizer", None) is optimizer}
    rows, step_error = [[group["lr"] for group in optimizer.param_groups]], None
    for k in range(1, int(request["k_max"]) + 1):
        try:
            optimizer.step()  # sem gradientes: não muda nada, mas respeita a ordem do PyTorch
            scheduler.step()
        except Exception as exc:  # noqa: BLE001 - a falha do agendador também é dado
            error = harness.error_data(exc)
            step_error = {"k": k, "type": error["type"], "message": error["message"]}
            break
        rows.append([group["lr"] for group in optimizer.param_groups])
    return {"value": {**out, "rows": rows, "step_error": step_error}}
