"""Verificações do capítulo 6: ``noam_lr``, ``make_warmup_scheduler``, ``train_epoch``, ``evaluate``.

Oráculos independentes do código do aluno: a fórmula de Noam escrita por extenso, o
``LambdaLR`` do PyTorch e um laço de treino de referência escrito aqui mesmo, rodado sobre
uma cópia idêntica de um modelo-sonda.

Os testes do laço observam o comportamento, não o texto do código. Um modelo-sonda (uma camada
linear com uma "máscara de treino" determinística, que só age em modo de treino), um otimizador-
sonda (SGD) e um agendador-sonda (``LambdaLR``) registram a ordem das chamadas, o modo do modelo,
se os gradientes estavam ligados e a norma do gradiente em cada passo. Depois de uma época, os
parâmetros são comparados com os de uma execução de referência com a mesma semente e com os de
execuções que cometem, de propósito, cada erro conhecido: quando coincidem com uma delas, a
mensagem diz qual.
"""

from __future__ import annotations

import contextlib
import io
import math
import numbers
import warnings
from collections.abc import Callable

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, TensorDataset

from .. import training as reference
from ..runtime import seeded_generator
from ..feedback import (
    CheckFailure,
    Mistake,
    call,
    describe,
    expect,
    expect_close,
    expect_not_reference,
    one_thread,
    passed,
    single_threaded,
)

__all__ = [
    "check_evaluate",
    "check_evaluate_hidden",
    "check_make_warmup_scheduler",
    "check_make_warmup_scheduler_hidden",
    "check_noam_lr",
    "check_noam_lr_hidden",
    "check_train_epoch",
    "check_train_epoch_hidden",
]

NOAM = "noam_lr"
SCHED = "make_warmup_scheduler"
TRAIN = "train_epoch"
EVAL = "evaluate"


_one_thread = one_thread
_single_threaded = single_threaded


def _quiet_call(fn: Callable, name: str, tried: str, *args, **kwargs):
    """``feedback.call`` com o stderr desviado (uma barra de progresso do aluno zeraria a célula)."""
    __tracebackhide__ = True
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(fn, name, tried, *args, **kwargs)


_not_reference = expect_not_reference


# ================================================================ noam_lr


def _noam(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """A fórmula de Noam por extenso; o passo 0 usa a taxa do passo 1 (``max(step, 1)``)."""
    s = max(step, 1)
    return factor * d_model**-0.5 * min(s**-0.5, s * warmup**-1.5)


def _noam_mistakes(steps, d, w, f) -> list[tuple[str, Callable[[int], float]]]:
    def safe(s):
        return max(s, 1)

    return [
        ("a fórmula SEM o fator d_model^-0.5", lambda s: f * min(safe(s) ** -0.5, safe(s) * w**-1.5)),
        ("d_model^-1 no lugar de d_model^-0.5", lambda s: f / d * min(safe(s) ** -0.5, safe(s) * w**-1.5)),
        (
            "max no lugar de min (a curva nunca cai)",
            lambda s: f * d**-0.5 * max(safe(s) ** -0.5, safe(s) * w**-1.5),
        ),
        (
            "o expoente errado no aquecimento: step·warmup_steps^-0.5 em vez de step·warmup_steps^-1.5",
            lambda s: f * d**-0.5 * min(safe(s) ** -0.5, safe(s) * w**-0.5),
        ),
        (
            "o expoente errado no aquecimento: step·warmup_steps^-1 em vez de step·warmup_steps^-1.5",
            lambda s: f * d**-0.5 * min(safe(s) ** -0.5, safe(s) / w),
        ),
        (
            "o expoente errado na queda: step^-1 em vez de step^-0.5",
            lambda s: f * d**-0.5 * min(safe(s) ** -1.0, safe(s) * w**-1.5),
        ),
        (
            "a curva deslocada um passo: você usou step + 1 (use max(step, 1): só o passo 0 muda)",
            lambda s: _noam(s + 1, d, w, f),
        ),
        ("a curva deslocada um passo: você usou step - 1", lambda s: _noam(s - 1, d, w, f)),
        ("o `factor` ignorado", lambda s: _noam(s, d, w, 1.0)),
        ("o `factor` dividindo em vez de multiplicar", lambda s: _noam(s, d, w, 1.0 / f)),
        ("d_model e warmup_steps trocados", lambda s: _noam(s, w, d, f)),
    ]


def _as_number(value, name: str, tried: str) -> float:
    __tracebackhide__ = True
    if isinstance(value, torch.Tensor):
        raise CheckFailure(
            f"`{name}` falhou.\nTeste: {tried}\nSua função devolveu um tensor ({describe(value)}); "
            "o contrato pede um número do Python (float).\n"
            "Diagnóstico provável: use `math`/`**` com números, ou converta com `float(...)`."
        )
    expect(
        isinstance(value, numbers.Real) and not isinstance(value, bool),
        name,
        tried,
        f"Esperava um número (float); veio {describe(value)}.",
        "a função deve terminar com `return` do valor da taxa." if value is None else None,
    )
    return float(value)


def _run_noam(fn: Callable, steps, d: int, w: int, f: float | None) -> None:
    """Compara ``fn`` com a fórmula nos passos dados (o passo 0 é tratado antes, à parte)."""
    __tracebackhide__ = True
    kwargs = {} if f is None else {"factor": f}
    f_val = 1.0 if f is None else f
    extra = "" if f is None else f", factor={f}"
    tried0 = f"noam_lr(0, d_model={d}, warmup_steps={w}{extra}) — o passo 0 conta como passo 1: max(step, 1)"
    zero_hint = (
        "divisão por zero no passo 0: 0^-0.5 não existe. O `LambdaLR` chama a sua função com o "
        "passo 0 logo na criação; calcule com `step = max(step, 1)` (o passo 0 usa a taxa do passo 1)."
    )
    value0 = _as_number(
        _quiet_call(fn, NOAM, tried0, 0, d, w, hint_on_error=zero_hint, **kwargs), NOAM, tried0
    )
    expected0 = _noam(0, d, w, f_val)
    if not math.isfinite(value0) or value0 == 0.0:
        raise CheckFailure(
            f"`{NOAM}` falhou.\nTeste: {tried0}\nEsperado {expected0:.6g}, obtido {value0!r}.\n"
            "Diagnóstico provável: no passo 0 a fórmula dá 0 (ou infinito): a rede não aprenderia "
            "nada no primeiro passo. O passo 0 conta como passo 1: `step = max(step, 1)`."
        )
    all_steps = [0, *steps]
    tried = f"noam_lr(step, d_model={d}, warmup_steps={w}{extra}) nos passos {all_steps}"
    values = []
    for s in steps:
        values.append(_as_number(_quiet_call(fn, NOAM, tried, s, d, w, **kwargs), NOAM, tried))
    got = torch.tensor([value0, *values], dtype=torch.float64)
    expected = torch.tensor([_noam(s, d, w, f_val) for s in all_steps], dtype=torch.float64)
    mistakes = [
        Mistake(label, torch.tensor([g(s) for s in all_steps], dtype=torch.float64))
        for label, g in _noam_mistakes(all_steps, d, w, f_val)
    ]
    expect_close(
        got,
        expected,
        NOAM,
        tried,
        "`noam_lr(step)`",
        mistakes,
        rtol=1e-6,
        atol=0.0,
    )


@_single_threaded
def check_noam_lr(fn: Callable) -> None:
    """Testes visíveis de ``noam_lr``: a configuração do artigo (d_model=512, warmup_steps=4000)."""
    __tracebackhide__ = True
    n = 0
    _run_noam(fn, [1, 2, 100, 2000, 3999, 4000, 4001, 8000, 100_000], 512, 4000, None)
    n += 1
    peak = _as_number(_quiet_call(fn, NOAM, "noam_lr(4000, 512, 4000)", 4000, 512, 4000), NOAM, "pico")
    expect(
        math.isclose(peak, (512 * 4000) ** -0.5, rel_tol=1e-6),
        NOAM,
        "noam_lr(4000, 512, 4000)",
        f"O pico deveria ser (d_model·warmup_steps)^-0.5 ≈ {(512 * 4000) ** -0.5:.4g}; veio {peak:.4g}.",
    )
    n += 1
    _run_noam(fn, [1, 5, 9, 10, 11, 50], 64, 10, 2.0)
    n += 1
    passed(NOAM, n)


@_single_threaded
def check_noam_lr_hidden(fn: Callable) -> None:
    """Testes ocultos: outras configurações, passos grandes, ValueError e a origem da função."""
    __tracebackhide__ = True
    n = 0
    _not_reference(fn, reference.noam_lr, NOAM)
    n += 1
    _run_noam(fn, [1, 3, 7, 8, 9, 1000, 10**7], 16, 8, 0.5)
    n += 1
    _run_noam(fn, [1, 2, 3], 128, 1, 1.0)  # warmup_steps = 1: só a queda
    n += 1
    _run_noam(fn, [1, 299, 300, 301, 600], 256, 300, 3.0)
    n += 1
    for bad in (
        {"d_model": 0, "warmup_steps": 10},
        {"d_model": -8, "warmup_steps": 10},
        {"d_model": 64, "warmup_steps": 0},
    ):
        tried = f"noam_lr(step=5, {bad['d_model']=}, {bad['warmup_steps']=})".replace("bad['", "").replace(
            "']", ""
        )
        with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fn(5, bad["d_model"], bad["warmup_steps"])
            except NotImplementedError:
                raise CheckFailure(f"Você ainda não implementou `{NOAM}` (não implementado).") from None
            except ValueError as exc:
                expect(bool(str(exc).strip()), NOAM, tried, "Levantou ValueError, mas sem mensagem.")
                continue
            except Exception as exc:  # noqa: BLE001
                raise CheckFailure(
                    f"`{NOAM}` falhou.\nTeste: {tried}\nEsperava ValueError (tamanho inválido); "
                    f"veio {type(exc).__name__}: {exc}"
                ) from None
        raise CheckFailure(
            f"`{NOAM}` falhou.\nTeste: {tried}\nEsperava ValueError com uma mensagem em português: "
            "d_model e warmup_steps precisam ser positivos."
        )
    n += 1
    passed(NOAM, n, "(testes ocultos)")


# ================================================================ make_warmup_scheduler


def _param_groups(lrs, optimizer_cls=torch.optim.SGD):
    gen = seeded_generator(60)
    groups = [{"params": [nn.Parameter(torch.randn(3, generator=gen))], "lr": lr} for lr in lrs]
    return optimizer_cls(groups)


def _lr_sequence(fn: Callable, lrs, d, w, f, k_max, optimizer_cls=torch.optim.SGD):
    """(taxas obtidas após k = 0..k_max passos, por grupo) e o agendador devolvido."""
    __tracebackhide__ = True
    optimizer = _param_groups(lrs, optimizer_cls)
    kwargs = {} if f is None else {"factor": f}
    extra = "" if f is None else f", factor={f}"
    tried = (
        f"{optimizer_cls.__name__} com {len(lrs)} grupo(s) de lr {list(lrs)}; "
        f"make_warmup_scheduler(opt, d_model={d}, warmup_steps={w}{extra}) e {k_max} passos"
    )
    scheduler = _quiet_call(
        fn,
        SCHED,
        tried,
        optimizer,
        d,
        w,
        **kwargs,
        hint_on_error="o `LambdaLR` chama a função com o passo 0 logo na criação: a sua `noam_lr` "
        "precisa aceitar o passo 0 (com `max(step, 1)`, ele usa a taxa do passo 1).",
    )
    expect(
        isinstance(scheduler, LambdaLR),
        SCHED,
        tried,
        f"Esperava um `torch.optim.lr_scheduler.LambdaLR`; veio {describe(scheduler)}.",
        "o exercício pede o agendador do PyTorch (`LambdaLR(optimizer, lr_lambda)`), não uma classe "
        "própria nem uma função: é ele que o laço de treino chama com `scheduler.step()`.",
    )
    expect(
        scheduler.optimizer is optimizer,
        SCHED,
        tried,
        "O `LambdaLR` devolvido não envolve o otimizador recebido (foi criado outro otimizador?).",
    )
    rows = []
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(k_max + 1):
            if k:
                optimizer.step()  # sem gradientes: não muda nada, mas respeita a ordem do PyTorch
                try:
                    scheduler.step()
                except Exception as exc:  # noqa: BLE001
                    raise CheckFailure(
                        f"`{SCHED}` falhou.\nTeste: {tried}\nNo passo {k}, `scheduler.step()` levantou "
                        f"{type(exc).__name__}: {exc}"
                    ) from None
            rows.append([group["lr"] for group in optimizer.param_groups])
    return torch.tensor(rows, dtype=torch.float64), tried


def _run_scheduler(fn: Callable, lrs, d, w, f, k_max, optimizer_cls=torch.optim.SGD) -> None:
    __tracebackhide__ = True
    got, tried = _lr_sequence(fn, lrs, d, w, f, k_max, optimizer_cls)
    f_val = 1.0 if f is None else f
    ks = range(k_max + 1)
    base = torch.tensor(lrs, dtype=torch.float64)

    def seq(g):
        col = torch.tensor([g(k) for k in ks], dtype=torch.float64)  # (K,)
        return col[:, None].expand(len(ks), len(lrs)).clone()  # (K,) -> (K, G)

    expected = seq(lambda k: _noam(k, d, w, f_val))
    first_only = expected.clone()
    first_only[:, 1:] = base[1:] * expected[:, 1:]
    set_after = base * expected  # lr = 1.0 depois do LambdaLR: vale só até o primeiro step()
    set_after[0] = 1.0
    mistakes = [
        Mistake(
            "o efeito de `lr = 1.0` posto DEPOIS de criar o `LambdaLR`: ele guarda a taxa base de cada grupo "
            "quando é criado (`scheduler.base_lrs`), e o primeiro `scheduler.step()` volta a usar a "
            "taxa antiga; ponha `lr = 1.0` em todo grupo ANTES de criar o agendador",
            set_after,
        ),
        Mistake(
            "a taxa base do otimizador mantida: o `LambdaLR` MULTIPLICA a taxa base pela sua "
            "função; ponha `lr = 1.0` em todo grupo antes de criar o agendador",
            base * expected,
        ),
        Mistake("a taxa base trocada para 1.0 só no primeiro grupo de parâmetros", first_only),
        Mistake(
            "a curva deslocada um passo para a frente (depois de k passos você está em k + 1; "
            "há um `scheduler.step()` a mais ou um `step + 1`)",
            seq(lambda k: _noam(k + 1, d, w, f_val)),
        ),
        Mistake("a curva deslocada um passo para trás (k - 1)", seq(lambda k: _noam(k - 1, d, w, f_val))),
        Mistake("o `factor` ignorado", seq(lambda k: _noam(k, d, w, 1.0))),
        Mistake("o `factor` ignorado e a taxa base mantida", base * seq(lambda k: _noam(k, d, w, 1.0))),
        Mistake(
            "d_model e warmup_steps trocados na chamada de noam_lr", seq(lambda k: _noam(k, w, d, f_val))
        ),
    ]
    mistakes += [
        Mistake(f"{label} (na sua `noam_lr`)", seq(g)) for label, g in _noam_mistakes(ks, d, w, f_val)
    ]
    expect_close(
        got,
        expected,
        SCHED,
        tried + " (linha k = taxa de cada grupo após k passos)",
        '`group["lr"]` após k passos',
        mistakes,
        rtol=1e-6,
        atol=0.0,
    )


@_single_threaded
def check_make_warmup_scheduler(fn: Callable) -> None:
    """Testes visíveis de ``make_warmup_scheduler``: a taxa após k passos é ``noam_lr(k, ...)``."""
    __tracebackhide__ = True
    n = 0
    _run_scheduler(fn, [0.123], 64, 5, None, 12)
    n += 1
    _run_scheduler(fn, [3e-4], 32, 3, 2.0, 8, torch.optim.Adam)
    n += 1
    passed(SCHED, n)


@_single_threaded
def check_make_warmup_scheduler_hidden(fn: Callable) -> None:
    """Testes ocultos: dois grupos com taxas diferentes, taxa 1.0 e outras configurações."""
    __tracebackhide__ = True
    n = 0
    _not_reference(fn, reference.make_warmup_scheduler, SCHED)
    n += 1
    _run_scheduler(fn, [1e-3, 5e-2], 128, 4, 0.5, 10, torch.optim.Adam)
    n += 1
    _run_scheduler(fn, [1.0], 16, 1, 1.0, 4)
    n += 1
    _run_scheduler(fn, [7.0, 0.01], 512, 20, 1.5, 40, torch.optim.AdamW)
    n += 1
    passed(SCHED, n, "(testes ocultos)")


# ================================================================ sondas para o laço de treino


class _TrainMask(nn.Module):
    """Uma "máscara de treino" fixa: em modo de treino multiplica a entrada; em avaliação, nada.

    Faz o papel do dropout, sem sorteio: treino e avaliação dão resultados diferentes, mas
    sempre os mesmos, o que permite comparar com uma execução de referência.
    """

    def __init__(self, mask: torch.Tensor):
        super().__init__()
        self.register_buffer("mask", mask)

    def forward(self, x):
        return x * self.mask if self.training else x


class _ProbeModel(nn.Module):
    """Modelo-sonda: logits = linear(máscara de treino(x)); registra cada forward e backward."""

    def __init__(self, n_features, n_classes, seed, dtype, tuple_output, events):
        super().__init__()
        gen = seeded_generator(seed)
        self.linear = nn.Linear(n_features, n_classes, dtype=dtype)
        with torch.no_grad():
            self.linear.weight.copy_(torch.randn(n_classes, n_features, generator=gen, dtype=dtype))
            self.linear.bias.copy_(torch.randn(n_classes, generator=gen, dtype=dtype))
        keep = (torch.rand(n_features, generator=gen) > 0.4).to(dtype) / 0.6
        self.train_mask = _TrainMask(keep)
        self.tuple_output = tuple_output
        self.events = events

    def forward(self, x):
        self.events.append(("forward", self.training, torch.is_grad_enabled()))
        logits = self.linear(self.train_mask(x))  # (B, F) -> (B, C)
        if logits.requires_grad:
            logits.register_hook(lambda grad: self.events.append(("backward",)))
        return (logits, x.sum(-1)) if self.tuple_output else logits


def _grad_norm(params) -> float:
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()


class _ProbeSGD(torch.optim.SGD):
    """SGD que registra cada ``step`` (com a norma do gradiente e a taxa usada)."""

    def __init__(self, params, lr, events):
        super().__init__(params, lr=lr)
        self.events = events

    def step(self, closure=None):
        params = [p for g in self.param_groups for p in g["params"]]
        self.events.append(("step", _grad_norm(params), self.param_groups[0]["lr"]))
        return super().step(closure)


class _ProbeScheduler(LambdaLR):
    """``LambdaLR`` que registra cada ``step`` feito depois da criação."""

    def __init__(self, optimizer, lr_lambda, events):
        self.events, self.armed = events, False
        super().__init__(optimizer, lr_lambda)
        self.armed = True

    def step(self, epoch=None):
        if self.armed:
            self.events.append(("sched",))
        return super().step() if epoch is None else super().step(epoch)


def _lr_lambda(k: int) -> float:
    return 1.0 / (1.0 + k)


class _Setup:
    """Modelo, dados, otimizador e agendador-sonda, todos refeitos iguais a partir de uma semente."""

    def __init__(
        self,
        seed,
        dtype=torch.float64,
        tuple_output=False,
        sizes=(8, 8, 8, 3),
        n_features=6,
        n_classes=3,
        lr=0.3,
        stale_grads=True,
        mode="eval",
    ):
        self.events: list = []
        gen = seeded_generator(seed + 1000)
        N = sum(sizes)
        X = 3.0 * torch.randn(N, n_features, generator=gen, dtype=dtype)
        y = torch.randint(n_classes, (N,), generator=gen)
        self.batch_sizes = list(sizes)
        self.loader = DataLoader(TensorDataset(X, y), batch_size=sizes[0], shuffle=False)
        assert [len(b) for b, _ in self.loader] == self.batch_sizes
        self.model = _ProbeModel(n_features, n_classes, seed, dtype, tuple_output, self.events)
        self.model.train(mode == "train")
        self.optimizer = _ProbeSGD(self.model.parameters(), lr, self.events)
        self.scheduler = _ProbeScheduler(self.optimizer, _lr_lambda, self.events)
        self.loss_fn = nn.CrossEntropyLoss()
        if stale_grads:  # gradientes "velhos", deixados por um cálculo anterior
            for p in self.model.parameters():
                p.grad = torch.full_like(p, 0.7)
        self.events.clear()

    def params(self) -> torch.Tensor:
        return torch.cat([p.detach().flatten() for p in self.model.parameters()])

    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def count(self, kind: str) -> int:
        return sum(1 for e in self.events if e[0] == kind)


def _loop(s: _Setup, max_norm: float, variant: str = "certo") -> dict:
    """O laço de treino de referência, escrito por extenso, com um erro opcional (``variant``)."""
    params = list(s.model.parameters())
    if variant != "sem_train":
        s.model.train()
    losses, correct, sizes, accs = [], 0, [], []
    for x, y in s.loader:
        if variant not in ("sem_zero_grad", "zero_grad_no_fim"):
            s.optimizer.zero_grad()
        out = s.model(x)
        logits = out[0] if isinstance(out, tuple) else out
        loss = s.loss_fn(logits, y)
        loss.backward()
        if variant == "zero_grad_antes_do_step":
            s.optimizer.zero_grad()
        if variant == "corte_fixo_1":
            nn.utils.clip_grad_norm_(params, 1.0)
        elif variant == "corte_por_valor":
            nn.utils.clip_grad_value_(params, max_norm)
        elif variant not in ("sem_corte", "corte_depois_do_step"):
            nn.utils.clip_grad_norm_(params, max_norm)
        if variant == "agendador_antes":
            s.scheduler.step()
            s.optimizer.step()
        elif variant == "sem_step":
            s.scheduler.step()
        else:
            s.optimizer.step()
            if variant == "corte_depois_do_step":
                nn.utils.clip_grad_norm_(params, max_norm)
            if variant not in ("sem_agendador", "agendador_por_epoca"):
                s.scheduler.step()
        if variant == "zero_grad_no_fim":
            s.optimizer.zero_grad()
        losses.append(loss.item())
        hits = (logits.argmax(-1) == y).sum().item()
        correct += hits
        sizes.append(len(y))
        accs.append(hits / len(y))
    if variant == "agendador_por_epoca":
        s.scheduler.step()
    return {"losses": losses, "correct": correct, "sizes": sizes, "accs": accs}


TRAIN_MISTAKES = {
    "sem_zero_grad": "a época SEM `zero_grad()`: os gradientes se acumulam de um lote para o outro "
    "(e o primeiro lote ainda soma os gradientes velhos que já estavam lá)",
    "zero_grad_no_fim": "`zero_grad()` só no FIM de cada lote: o primeiro passo usou os gradientes "
    "velhos que já estavam nos parâmetros; zere no começo de cada lote",
    "zero_grad_antes_do_step": "`zero_grad()` entre o `backward()` e o `step()`: ele apaga os "
    "gradientes que acabaram de ser calculados e nada é aprendido",
    "sem_corte": "a época SEM o recorte da norma do gradiente (`clip_grad_norm_`)",
    "corte_depois_do_step": "o recorte da norma do gradiente DEPOIS de `optimizer.step()`: o passo "
    "já foi dado com o gradiente inteiro; recorte antes do passo",
    "corte_fixo_1": "o recorte com norma 1.0 fixa: use o argumento `max_grad_norm`",
    "corte_por_valor": "o recorte por valor (`clip_grad_value_`) no lugar do recorte pela norma "
    "(`clip_grad_norm_`)",
    "agendador_antes": "`scheduler.step()` ANTES de `optimizer.step()`: cada passo usou a taxa do "
    "passo seguinte; no PyTorch, o agendador vem depois do otimizador",
    "sem_agendador": "a época sem `scheduler.step()`: a taxa de aprendizado nunca mudou",
    "agendador_por_epoca": "`scheduler.step()` uma vez por época: o agendamento de Noam conta passos "
    "de otimização, então ele vai dentro do laço, uma vez por lote",
    "sem_step": "a época sem `optimizer.step()`: os parâmetros nunca mudaram",
    "sem_train": "a época em modo de avaliação: o modelo chegou em `eval()` e você não chamou "
    "`model.train()`",
}


def _fingerprint(s: _Setup) -> dict:
    return {
        "params": s.params(),
        "lr": s.lr(),
        "grad_norm": _grad_norm(list(s.model.parameters())),
        "steps": s.count("step"),
    }


def _reference_run(seed, max_norm, variant="certo", **setup) -> tuple[dict, dict]:
    """Impressão digital (parâmetros, taxa, norma do gradiente) e métricas de uma execução."""
    with warnings.catch_warnings():  # a variante "agendador_antes" faz o PyTorch avisar
        warnings.simplefilter("ignore")
        s = _Setup(seed, **setup)
        out = _loop(s, max_norm, variant)
    return _fingerprint(s), out


def _mistake_runs(seed, max_norm, **setup) -> dict[str, dict]:
    """As impressões digitais de cada erro conhecido (só calculadas quando o aluno erra)."""
    return {v: _reference_run(seed, max_norm, v, **setup)[0] for v in TRAIN_MISTAKES}


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    tol = {"rtol": 1e-5, "atol": 1e-6} if a.dtype == torch.float32 else {"rtol": 1e-9, "atol": 1e-11}
    return a.shape == b.shape and torch.allclose(a, b, **tol)


def _diagnose_params(student: dict, runs: dict[str, dict], max_norm: float) -> str | None:
    for variant, fp in runs.items():
        if not _same(student["params"], fp["params"]):
            continue
        if variant in ("sem_corte", "corte_depois_do_step"):
            clipped_after = student["grad_norm"] <= max_norm * (1 + 1e-6)
            variant = "corte_depois_do_step" if clipped_after else "sem_corte"
        elif variant in ("sem_agendador", "agendador_por_epoca"):
            variant = (
                "agendador_por_epoca"
                if not math.isclose(student["lr"], runs["sem_agendador"]["lr"])
                else "sem_agendador"
            )
        elif variant in ("zero_grad_antes_do_step", "sem_step"):
            variant = "sem_step" if student["steps"] == 0 else "zero_grad_antes_do_step"
        return TRAIN_MISTAKES[variant]
    return None


def _expect_metrics(result, name: str, tried: str) -> tuple[float, float]:
    __tracebackhide__ = True
    expect(
        isinstance(result, dict) and {"loss", "accuracy"} <= set(result),
        name,
        tried,
        f"Esperava um dicionário com as chaves 'loss' e 'accuracy'; veio {describe(result)}"
        + (f" com as chaves {sorted(result)}" if isinstance(result, dict) else "")
        + ".",
    )
    values = []
    for key in ("loss", "accuracy"):
        value = result[key]
        if isinstance(value, torch.Tensor):
            hint = (
                (
                    "`loss` é um tensor ligado ao grafo: somar `loss` (e não `loss.item()`) guarda o "
                    "grafo de todos os lotes na memória"
                )
                if value.requires_grad
                else "use `.item()` para transformar o tensor em número"
            )
            raise CheckFailure(
                f"`{name}` falhou.\nTeste: {tried}\nresult['{key}'] é um tensor ({describe(value)}); "
                f"esperava um número do Python (float).\nDiagnóstico provável: {hint}."
            )
        expect(
            isinstance(value, numbers.Real) and not isinstance(value, bool),
            name,
            tried,
            f"result['{key}'] deveria ser um número; veio {describe(value)}.",
        )
        values.append(float(value))
    return values[0], values[1]


def _check_metrics(name, tried, loss, acc, out) -> None:
    """Compara a perda média e a acurácia com as de referência, nomeando os erros de média."""
    __tracebackhide__ = True
    losses = torch.tensor(out["losses"], dtype=torch.float64)
    sizes = torch.tensor(out["sizes"], dtype=torch.float64)
    total = sizes.sum()
    loss_mistakes = [
        Mistake(
            "a SOMA das perdas dos lotes; o contrato pede a média (divida pelo número de lotes)", losses.sum()
        ),
        Mistake(
            "a média ponderada pelo tamanho do lote; o contrato pede a média simples das perdas dos lotes",
            (losses * sizes).sum() / total,
        ),
        Mistake("a perda só do último lote", losses[-1]),
        Mistake("a soma das perdas dividida pelo número de EXEMPLOS", losses.sum() / total),
    ]
    expect_close(
        torch.tensor(loss, dtype=torch.float64),
        losses.mean(),
        name,
        tried,
        "result['loss']",
        loss_mistakes,
        rtol=1e-5,
        atol=1e-7,
    )
    accs = torch.tensor(out["accs"], dtype=torch.float64)
    acc_expected = torch.tensor(out["correct"] / total.item(), dtype=torch.float64)
    acc_mistakes = [
        Mistake(
            "a média das acurácias dos lotes; o contrato pede acertos / total de exemplos (com "
            "um último lote menor, as duas diferem)",
            accs.mean(),
        ),
        Mistake(
            "o número de acertos, sem dividir pelo total de exemplos",
            torch.tensor(float(out["correct"]), dtype=torch.float64),
        ),
        Mistake("a acurácia em porcentagem; devolva uma fração entre 0 e 1", acc_expected * 100),
        Mistake("acertos divididos pelo número de lotes", torch.tensor(out["correct"] / len(accs))),
    ]
    expect_close(
        torch.tensor(acc, dtype=torch.float64),
        acc_expected,
        name,
        tried,
        "result['accuracy']",
        acc_mistakes,
        rtol=1e-6,
        atol=1e-9,
    )


def _tried_train(s: _Setup, max_norm: float, extra: str = "") -> str:
    dtype = str(next(s.model.parameters()).dtype).replace("torch.", "")
    kind = "que devolve (logits, extra)" if s.model.tuple_output else "que devolve logits"
    return (
        f"uma época de um modelo linear {kind} ({dtype}), lotes de tamanhos {s.batch_sizes}, SGD "
        f"com um LambdaLR, CrossEntropyLoss, max_grad_norm={max_norm}, modelo recebido em modo de "
        f"{'treino' if s.model.training else 'avaliação'} e com gradientes velhos{extra}"
    )


TUPLE_HINT = (
    "o modelo devolve uma tupla (logits, ...): use o primeiro elemento como logits "
    "(por exemplo `out = model(x); logits = out[0] if isinstance(out, tuple) else out`)."
)


def _run_train(fn: Callable, seed: int, max_norm: float, extra: str = "", **setup) -> None:
    __tracebackhide__ = True
    ref_fp, ref_out = _reference_run(seed, max_norm, **setup)
    s = _Setup(seed, **setup)
    tried = _tried_train(s, max_norm, extra)
    hint = TUPLE_HINT if s.model.tuple_output else None
    result = _quiet_call(
        fn, TRAIN, tried, s.model, s.loader, s.optimizer, s.scheduler, s.loss_fn, max_norm, hint_on_error=hint
    )
    n_batches = len(s.batch_sizes)

    # 1. O que as sondas viram: passos do otimizador e do agendador, e em que ordem.
    order = [e[0] for e in s.events if e[0] in ("step", "sched")]
    steps, scheds = order.count("step"), order.count("sched")
    expect(
        steps > 0,
        TRAIN,
        tried,
        "`optimizer.step()` nunca foi chamado: os parâmetros não mudaram.",
        TRAIN_MISTAKES["sem_step"],
    )
    expect(
        steps == n_batches,
        TRAIN,
        tried,
        f"`optimizer.step()` foi chamado {steps} vez(es) para {n_batches} lotes; esperava um por lote.",
    )
    expect(scheds > 0, TRAIN, tried, "`scheduler.step()` nunca foi chamado.", TRAIN_MISTAKES["sem_agendador"])
    expect(
        scheds == n_batches,
        TRAIN,
        tried,
        f"`scheduler.step()` foi chamado {scheds} vez(es) para {n_batches} lotes; esperava um por lote.",
        TRAIN_MISTAKES["agendador_por_epoca"] if scheds == 1 else None,
    )
    expect(
        order == ["step", "sched"] * n_batches,
        TRAIN,
        tried,
        f"A ordem das chamadas foi {order[:6]}...; esperava step, sched, step, sched, ...",
        TRAIN_MISTAKES["agendador_antes"] if order[0] == "sched" else None,
    )
    forwards = [e for e in s.events if e[0] == "forward"]
    expect(
        all(e[1] for e in forwards),
        TRAIN,
        tried,
        "O modelo estava em modo de avaliação durante o forward do treino.",
        TRAIN_MISTAKES["sem_train"],
    )
    expect(
        len(forwards) == n_batches,
        TRAIN,
        tried,
        f"O modelo foi chamado {len(forwards)} vez(es) para {n_batches} lotes; esperava uma por lote "
        "(chame o modelo uma vez e reaproveite os logits para a perda e a acurácia).",
    )

    # 2. Os parâmetros depois da época, comparados com a referência e com cada erro conhecido.
    student = _fingerprint(s)
    if not _same(student["params"], ref_fp["params"]):
        delta = (student["params"] - ref_fp["params"]).abs().max().item()
        expect(
            False,
            TRAIN,
            tried,
            "Os parâmetros depois da época diferem dos do laço de referência, que partiu da mesma "
            f"semente (maior |Δ| = {delta:.3g}).",
            _diagnose_params(student, _mistake_runs(seed, max_norm, **setup), max_norm)
            or "confira a ordem: zero_grad, forward, perda, backward, clip_grad_norm_, "
            "optimizer.step, scheduler.step.",
        )
    # 3. A taxa depois da época.
    expect(
        math.isclose(student["lr"], ref_fp["lr"], rel_tol=1e-9),
        TRAIN,
        tried,
        f"A taxa de aprendizado depois da época é {student['lr']:.6g}; esperava {ref_fp['lr']:.6g}.",
    )
    # 4. As métricas devolvidas.
    loss, acc = _expect_metrics(result, TRAIN, tried)
    _check_metrics(TRAIN, tried, loss, acc, ref_out)


@_single_threaded
def check_train_epoch(fn: Callable) -> None:
    """Testes visíveis de ``train_epoch``: ordem das chamadas, parâmetros após a época, métricas."""
    __tracebackhide__ = True
    n = 0
    _run_train(fn, seed=0, max_norm=0.5)
    n += 1
    _run_train(fn, seed=1, max_norm=0.8, sizes=(5, 5, 5, 5, 2))
    n += 1
    passed(TRAIN, n)


@_single_threaded
def check_train_epoch_hidden(fn: Callable) -> None:
    """Testes ocultos: modelo que devolve tupla, float32, modelo já em modo de treino, outro recorte."""
    __tracebackhide__ = True
    n = 0
    _not_reference(fn, reference.train_epoch, TRAIN)
    n += 1
    _run_train(fn, seed=2, max_norm=0.5, tuple_output=True)
    n += 1
    _run_train(fn, seed=3, max_norm=0.3, dtype=torch.float32, sizes=(4, 4, 1), mode="train")
    n += 1
    _run_train(fn, seed=4, max_norm=0.6, sizes=(6,), stale_grads=False)
    n += 1
    passed(TRAIN, n, "(testes ocultos)")


# ================================================================ evaluate


def _reference_eval(s: _Setup) -> dict:
    """Perdas e acertos de referência, em modo de avaliação e sem gradientes."""
    was = s.model.training
    s.model.eval()
    losses, correct, sizes, accs = [], 0, [], []
    with torch.no_grad():
        for x, y in s.loader:
            out = s.model(x)
            logits = out[0] if isinstance(out, tuple) else out
            losses.append(s.loss_fn(logits, y).item())
            hits = (logits.argmax(-1) == y).sum().item()
            correct += hits
            sizes.append(len(y))
            accs.append(hits / len(y))
    s.model.train(was)
    s.events.clear()
    return {"losses": losses, "correct": correct, "sizes": sizes, "accs": accs}


def _run_eval(fn: Callable, seed: int, mode: str, extra: str = "", **setup) -> None:
    __tracebackhide__ = True
    s = _Setup(seed, mode=mode, **setup)
    out = _reference_eval(s)
    before = s.params()
    grads_before = [p.grad.clone() for p in s.model.parameters()]
    dtype = str(next(s.model.parameters()).dtype).replace("torch.", "")
    kind = "que devolve (logits, extra)" if s.model.tuple_output else "que devolve logits"
    was_training = mode == "train"
    tried = (
        f"evaluate com um modelo linear {kind} ({dtype}), lotes de tamanhos {s.batch_sizes}, "
        f"CrossEntropyLoss, modelo recebido em modo de {'treino' if was_training else 'avaliação'}{extra}"
    )
    hint = TUPLE_HINT if s.model.tuple_output else None
    result = _quiet_call(fn, EVAL, tried, s.model, s.loader, s.loss_fn, hint_on_error=hint)

    forwards = [e for e in s.events if e[0] == "forward"]
    expect(len(forwards) > 0, EVAL, tried, "O modelo nunca foi chamado.")
    expect(
        not any(e[1] for e in forwards),
        EVAL,
        tried,
        "O modelo estava em modo de TREINO durante a avaliação (o dropout continuaria ligado).",
        "chame `model.eval()` antes do laço de avaliação.",
    )
    expect(
        not any(e[2] for e in forwards),
        EVAL,
        tried,
        "Os gradientes estavam ligados durante o forward da avaliação: o PyTorch guardou o grafo "
        "de cada lote à toa (memória e tempo).",
        "envolva o laço em `with torch.no_grad():` (ou `torch.inference_mode()`).",
    )
    expect(
        s.count("backward") == 0 and s.count("step") == 0,
        EVAL,
        tried,
        "A avaliação chamou `backward()` ou `optimizer.step()`: avaliar não pode treinar.",
    )
    expect(_same(s.params(), before), EVAL, tried, "Os parâmetros mudaram durante a avaliação.")
    expect(
        all(
            p.grad is not None and torch.equal(p.grad, g) for p, g in zip(s.model.parameters(), grads_before)
        ),
        EVAL,
        tried,
        "Os gradientes dos parâmetros mudaram durante a avaliação (houve `zero_grad` ou `backward`); "
        "a avaliação não deve mexer neles.",
    )
    modes = {m.training for m in s.model.modules()}
    if was_training:
        expect(
            modes == {True},
            EVAL,
            tried,
            "Depois da avaliação, o modelo ficou em modo de avaliação; ele tinha chegado em modo de treino."
            if modes == {False}
            else "Depois da avaliação, só parte do modelo voltou ao modo de treino.",
            "guarde `modo = model.training` no começo e chame `model.train(modo)` no fim"
            + (
                ""
                if modes == {False}
                else " (atribuir `model.training = ...` muda só o módulo de fora, não os submódulos)"
            )
            + ".",
        )
    else:
        expect(
            modes == {False},
            EVAL,
            tried,
            "O modelo tinha chegado em modo de avaliação e saiu em modo de treino.",
            "restaure o modo ANTERIOR (`model.train(modo)`, com `modo = model.training` guardado no "
            "começo), em vez de chamar sempre `model.train()`.",
        )
    loss, acc = _expect_metrics(result, EVAL, tried)
    _check_metrics(EVAL, tried, loss, acc, out)


@_single_threaded
def check_evaluate(fn: Callable) -> None:
    """Testes visíveis de ``evaluate``: modo de avaliação, sem gradientes, modo restaurado, métricas."""
    __tracebackhide__ = True
    n = 0
    _run_eval(fn, seed=10, mode="train")
    n += 1
    _run_eval(fn, seed=11, mode="eval", sizes=(5, 5, 5, 5, 2))
    n += 1
    passed(EVAL, n)


@_single_threaded
def check_evaluate_hidden(fn: Callable) -> None:
    """Testes ocultos: modelo que devolve tupla, float32, um lote só."""
    __tracebackhide__ = True
    n = 0
    _not_reference(fn, reference.evaluate, EVAL)
    n += 1
    _run_eval(fn, seed=12, mode="train", tuple_output=True)
    n += 1
    _run_eval(fn, seed=13, mode="eval", dtype=torch.float32, sizes=(7, 7, 3))
    n += 1
    _run_eval(fn, seed=14, mode="train", sizes=(9,))
    n += 1
    passed(EVAL, n, "(testes ocultos)")
