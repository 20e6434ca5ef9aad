"""Verificações do capítulo 6: ``noam_lr``, ``make_warmup_scheduler``, ``train_epoch``, ``evaluate``.

Oráculos independentes do aluno: a fórmula de Noam por extenso, o ``LambdaLR`` do PyTorch e um laço
de treino de referência, rodado sobre uma cópia idêntica de um modelo-sonda. As sondas registram a
ordem das chamadas, o modo do modelo e o rastro de cada ``optimizer.step()`` (perda, gradiente antes
do ``backward()``, norma, taxa, parâmetros), comparado passo a passo com o da referência: a mensagem
diz em que lote e etapa ele diverge e, se os parâmetros finais coincidem com os de um erro conhecido
(cometido de propósito numa execução à parte), qual.

Diagnósticos (issue 31): um erro conhecido só é nomeado se reproduz a resposta no caso que falhou e
num segundo caso com outros hiperparâmetros (outra configuração de Noam, outros grupos do otimizador,
outra semente, outro recorte e outros lotes no laço). Sem erro confirmado, a mensagem diz um parâmetro
ajustado (o deslocamento do passo, os expoentes de d_model, do ``factor``, da queda e do aquecimento, a
escala, o limite do recorte, o passo do agendador cuja taxa foi usada) ou a propriedade que quebra (o
pico em warmup_steps, a primeira taxa 0, gradientes zerados antes do ``backward()``...), sempre medidos
na resposta. ``make_warmup_scheduler`` olha primeiro a ``noam_lr`` do aluno ("o erro está em
`noam_lr`"). Toda falha leva ``kind`` e ``mistake`` (um id estável) em ``CheckFailure.data``.

A resposta do aluno roda do lado do aluno, num roteiro (:mod:`transformer_course.scenarios.ch06`)
que monta o modelo-sonda, os dados, o SGD e o ``LambdaLR`` a partir de uma semente e devolve só o
que as sondas viram. Aqui, do lado do juiz, o mesmo :class:`~transformer_course.scenarios.ch06.Setup`
é montado com a mesma semente para o laço de referência e para os erros conhecidos.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
from torch import nn

from .. import training as reference
from .. import wire
from ..exercises import Exercise, GradedCell
from ..feedback import Check, CheckFailure, Finding, Mistake, describe
from ..numbers import br
from ..probe import Remote, Response
from ..runtime import dtype_name
from ..scenarios.ch06 import Setup

__all__ = ["check_evaluate", "check_make_warmup_scheduler", "check_noam_lr", "check_train_epoch"]

CHAPTER = "06_treino_warmup"


def _exercise(name: str, points: float) -> Exercise:
    cells = (GradedCell(f"test_{name}", points), GradedCell(f"test_{name}_hidden", points, hidden=True))
    return Exercise(CHAPTER, name, getattr(reference, name), cells=cells)


NOAM = _exercise("noam_lr", 1)
SCHED = _exercise("make_warmup_scheduler", 1)
TRAIN = _exercise("train_epoch", 2)
EVAL = _exercise("evaluate", 1)
EXERCISES = (NOAM, SCHED, TRAIN, EVAL)


# ================================================================ noam_lr


def _noam(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """A fórmula de Noam por extenso; o passo 0 usa a taxa do passo 1 (``max(step, 1)``)."""
    s = max(step, 1)
    return factor * d_model**-0.5 * min(s**-0.5, s * warmup_steps**-1.5)


def _noam_mistakes(d: int, w: int, f: float) -> list[tuple[str, str, Callable[[int], float]]]:
    """Os erros conhecidos da fórmula: (id, nome, taxa que o erro daria no passo s)."""

    def swap(s, scale=d**-0.5, pick=min, decay=-0.5, warm=w**-1.5, ramp=1.0):  # um pedaço trocado
        s = max(s, 1)
        return f * scale * pick(s**decay, ramp * s * warm)

    precedence = "em Python, `**` vem antes de `/`"
    return [
        ("sem-d_model", "a fórmula SEM o fator d_model^-0.5", lambda s: swap(s, scale=1.0)),
        ("d_model-expoente-1", "d_model^-1 no lugar de d_model^-0.5", lambda s: swap(s, scale=1 / d)),
        ("d_model-menos-1-sobre-2", f"`d_model ** -1/2`: {precedence}, e isso é d_model^-1 / 2; "
         "escreva `d_model ** -0.5`", lambda s: swap(s, scale=1 / d / 2)),
        ("max-no-lugar-de-min", "max no lugar de min (a curva nunca cai)", lambda s: swap(s, pick=max)),
        ("aquecimento-expoente-0.5", "o expoente errado no aquecimento: warmup_steps^-0.5 (é ^-1.5)",
         lambda s: swap(s, warm=w**-0.5)),
        ("aquecimento-expoente-1", "o expoente errado no aquecimento: warmup_steps^-1 (é ^-1.5)",
         lambda s: swap(s, warm=1 / w)),
        ("aquecimento-menos-3-sobre-2", f"`warmup_steps ** -3/2`: {precedence}, e isso é "
         "warmup_steps^-3 / 2; escreva `warmup_steps ** -1.5` (ou `** (-3/2)`)",
         lambda s: swap(s, warm=w**-3 / 2)),
        ("queda-expoente-1", "o expoente errado na queda: step^-1 em vez de step^-0.5",
         lambda s: swap(s, decay=-1.0)),
        ("queda-menos-1-sobre-2", f"`step ** -1/2`: {precedence}, e isso é step^-1 / 2; escreva "
         "`step ** -0.5`", lambda s: f * d**-0.5 * min(1 / max(s, 1) / 2, max(s, 1) * w**-1.5)),
        ("passo-mais-1", "a curva deslocada um passo: step + 1 (use max(step, 1))",
         lambda s: _noam(s + 1, d, w, f)),
        ("passo-menos-1", "a curva deslocada um passo: você usou step - 1", lambda s: _noam(s - 1, d, w, f)),
        ("factor-ignorado", "o `factor` ignorado", lambda s: _noam(s, d, w)),
        ("factor-dividindo", "o `factor` dividindo em vez de multiplicar", lambda s: _noam(s, d, w, 1.0 / f)),
        ("d_model-e-warmup-trocados", "d_model e warmup_steps trocados", lambda s: _noam(s, w, d, f)),
    ]  # fmt: skip


ZERO_HINT = (
    "divisão por zero no passo 0: 0^-0.5 não existe. O `LambdaLR` chama a sua função com o passo 0 "
    "logo na criação; calcule com `step = max(step, 1)` (o passo 0 usa a taxa do passo 1)."
)
STEP0 = "a fórmula sem `max(step, 1)`: no passo 0 ela dá {} (o passo 0 conta como passo 1)"

# As configurações em que um erro se confirma e os parâmetros se ajustam (d_model, warmup_steps, factor):
# outras que as dos testes, com passos na subida, no pico e bem depois dele.
PROBE_STEPS = [*range(0, 41), 100, 10**4, 4 * 10**4, 10**6, 4 * 10**6]
PROBES = {
    "base": (64, 10, 2.0, PROBE_STEPS),
    "d_model": (256, 10, 2.0, PROBE_STEPS),
    "factor": (64, 10, 4.0, PROBE_STEPS),
    "warmup": (64, 40, 2.0, [*range(0, 161), *PROBE_STEPS[41:]]),
    "warmup2": (64, 160, 2.0, [1, 2, 4, 8, *PROBE_STEPS[41:]]),
}


def _noam_values(c: Check, fn, steps, d: int, w: int, kwargs: dict) -> dict[int, float] | None:
    """Os valores da resposta nos passos dados (``None`` se algum passo levanta ou não é um número)."""
    response = c.scenario("ch06.noam_values", fn, steps=list(steps), d_model=d, warmup_steps=w, kwargs=kwargs)
    outcomes = response.value
    if response.error or not isinstance(outcomes, list) or len(outcomes) != len(steps):
        return None
    values = {}
    for s, outcome in zip(steps, outcomes):
        v = outcome.get("value") if isinstance(outcome, dict) and "error" not in outcome else None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return None
        values[s] = float(v)
    return values


class _NoamProbes:
    """As curvas da resposta nas configurações de :data:`PROBES`, pedidas uma vez só e quando preciso."""

    def __init__(self, c: Check, fn):
        self.c, self.fn, self.cache = c, fn, {}

    def __call__(self, name: str) -> dict[int, float] | None:
        if name not in self.cache:
            d, w, f, steps = PROBES[name]
            self.cache[name] = _noam_values(self.c, self.fn, steps, d, w, {"factor": f})
        return self.cache[name]


def _close(a: float, b: float, rel: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=0.0)


def _ratio(a: dict, b: dict, steps) -> float | None:
    """A razão a(s)/b(s), se é a mesma em todos os passos dados (``None`` se muda ou não existe)."""
    if any(b[s] == 0 or a[s] == 0 for s in steps):
        return None
    ratios = [a[s] / b[s] for s in steps]
    return ratios[0] if all(_close(r, ratios[0], 1e-6) for r in ratios) and ratios[0] > 0 else None


def _exponent(x: float) -> str:
    """Um expoente para a mensagem: −0,5; 1; −1,42."""
    x = 0.0 if abs(x) < 1e-9 else x
    return br(round(x, 4), ".4g").replace("-", "−")


def _noam_finders(c: Check, probes: _NoamProbes):
    """Os parâmetros da família de Noam ajustados à resposta, ou a propriedade que quebra.

    Cada um é medido em duas configurações (ou dois pares de passos) e só é dito se as duas medidas
    concordam: um fato sobre a resposta, nunca um palpite.
    """
    D, W, F = PROBES["base"][:3]
    decay = [10**4, 10**6]  # passos bem depois do pico (e 4× eles)
    ramp = [2, 4]  # passos na subida

    def shift() -> Finding | None:
        base, warm = probes("base"), probes("warmup")
        for delta in (1, -1, 2, -2, 3, -3):
            if all(
                _close(v, _noam(s + delta, d, w, f))
                for (d, w, f, _), values in ((PROBES["base"], base), (PROBES["warmup"], warm))
                for s, v in values.items()
                if s + delta >= 1 and s >= 1
            ):
                where = "a frente" if delta > 0 else "trás"
                steps = "1 passo" if abs(delta) == 1 else f"{abs(delta)} passos"
                return Finding(
                    "parametro",
                    "passo-deslocado",
                    f"sua curva está deslocada {steps} para {where}: no passo s (s ≥ 1), sua taxa "
                    f"é a do passo s {'+' if delta > 0 else '−'} {abs(delta)} (com warmup_steps = {W}, "
                    f"seu pico está no passo {W - delta}, e não no {W}). Use `max(step, 1)` e nada mais.",
                )
        return None

    def floor() -> Finding | None:
        base, warm = probes("base"), probes("warmup")
        for m in (2, 3):
            if all(
                _close(v, _noam(max(s, m), d, w, f))
                for (d, w, f, _), values in ((PROBES["base"], base), (PROBES["warmup"], warm))
                for s, v in values.items()
            ):
                return Finding(
                    "parametro",
                    "passo-minimo",
                    f"sua curva trata todo passo abaixo de {m} como o passo {m} (como `max(step, {m})`): "
                    "só o passo 0 conta como passo 1, com `max(step, 1)`.",
                )
        return None

    def d_model() -> Finding | None:
        r = _ratio(probes("d_model"), probes("base"), ramp + decay)
        if r is None or _close(r, 0.5):
            return None
        a = -math.log(r) / math.log(4)
        return Finding(
            "parametro",
            "expoente-d_model",
            f"seu expoente de d_model é {_exponent(-a)}, e não −0,5: multiplicar d_model por 4 multiplicou a "
            f"sua taxa por {br(r, '.4g')} em todos os passos, e não por 0,5.",
        )

    def whole_curve() -> Finding | None:
        """``d_model`` ou ``factor`` que multiplicam só uma das partes da curva (a subida ou a queda)."""
        for name, what, right in (
            ("d_model", "multiplicar d_model por 4", 0.5),
            ("factor", "dobrar `factor`", 2.0),
        ):
            up, down = _ratio(probes(name), probes("base"), ramp), _ratio(probes(name), probes("base"), decay)
            if up is None or down is None or _close(up, down):
                continue
            return Finding(
                "propriedade",
                f"{name}-na-curva-toda",
                f"`{name}` não multiplica a curva toda: {what} multiplicou a sua taxa por {br(up, '.4g')} "
                f"na subida e por {br(down, '.4g')} bem depois do pico (deveria ser {br(right)} nas duas "
                "partes).",
            )
        return None

    def factor() -> Finding | None:
        r = _ratio(probes("factor"), probes("base"), ramp + decay)
        if r is None or _close(r, 2.0):
            return None
        p = math.log(r) / math.log(2)
        what = {0.0: " (ignorado)", -1.0: " (dividindo)"}.get(round(p, 6), "")
        return Finding(
            "parametro",
            "expoente-factor",
            f"seu `factor` entra como factor^{_exponent(p)}{what}, e não factor^1: dobrar `factor` "
            f"multiplicou a sua taxa por {br(r, '.4g')}, e não por 2.",
        )

    def decay_exponent() -> Finding | None:
        base = probes("base")
        rates = [base[4 * s] / base[s] for s in decay if base[s] > 0 and base[4 * s] > 0]
        if len(rates) < 2 or not _close(rates[0], rates[1]) or _close(rates[0], 0.5):
            return None
        b = -math.log(rates[0]) / math.log(4)
        how = "cai" if b > 0 else ("não cai: fica constante," if _close(rates[0], 1.0) else "não cai: cresce")
        return Finding(
            "parametro",
            "expoente-da-queda",
            f"bem depois de warmup_steps, sua taxa {how} como step^({_exponent(-b)}), e não cai como "
            f"step^(−0,5): multiplicar o passo por 4 multiplicou a taxa por {br(rates[0], '.4g')}, e não "
            "por 0,5.",
        )

    def warmup_exponent() -> Finding | None:
        base, warm, warm2 = probes("base"), probes("warmup"), probes("warmup2")
        rising = all(_close(v[4], 2 * v[2]) for v in (base, warm, warm2))  # os passos 2 e 4 estão na subida
        r1, r2 = _ratio(warm, base, ramp), _ratio(warm2, warm, ramp)
        if not rising or r1 is None or r2 is None or not _close(r1, r2) or _close(r1, 4**-1.5):
            return None
        c_ = -math.log(r1) / math.log(4)
        return Finding(
            "parametro",
            "expoente-do-aquecimento",
            f"na subida, warmup_steps entra com expoente {_exponent(-c_)}, e não −1,5: multiplicar "
            f"warmup_steps por 4 multiplicou a taxa da subida por {br(r1, '.4g')}, e não por 0,125.",
        )

    def peak() -> Finding | None:
        base, warm = probes("base"), probes("warmup")
        top = max(range(0, 41), key=lambda s: base[s])
        top_w = max(range(0, 161), key=lambda s: warm[s])
        if top == W:
            return None
        other = f"; com warmup_steps = 40, no passo {top_w}" if top_w != 40 else ""
        return Finding(
            "propriedade",
            "pico-em-warmup",
            f"seu pico (o maior valor entre os passos 0 e 40) está no passo {top}, e não em warmup_steps = "
            f"{W}{other}: a curva deve subir em linha reta até warmup_steps e cair depois dele.",
        )

    def ramp_linear() -> Finding | None:
        base = probes("base")
        r = base[4] / base[2] if base[2] > 0 else None
        if r is None or _close(r, 2.0):
            return None
        return Finding(
            "propriedade",
            "subida-linear",
            f"na subida, sua taxa não cresce em linha reta com o passo: do passo 2 ao 4 ela foi multiplicada "
            f"por {br(r, '.4g')}, e não por 2 (antes de warmup_steps, lr ∝ step).",
        )

    def scale() -> Finding | None:
        base = probes("base")
        up = [s for s in range(1, W)]  # a subida (antes do pico)
        down = [s for s in base if s > W]  # a queda
        right = {s: _noam(s, D, W, F) for s in base}
        r_up, r_down = _ratio(base, right, up), _ratio(base, right, down)
        if r_up is not None and r_down is not None and _close(r_up, r_down) and not _close(r_up, 1.0):
            return Finding(
                "parametro",
                "fator-de-escala",
                f"sua curva tem a forma certa, mas é a certa multiplicada por {br(r_up, '.4g')} em todos os "
                "passos (o pico vale factor·(d_model·warmup_steps)^−0,5).",
            )
        for ok, r, here, there, key in (
            (r_up, r_down, "depois do pico", "na subida", "escala-da-queda"),
            (r_down, r_up, "na subida", "depois do pico", "escala-da-subida"),
        ):
            if ok is not None and _close(ok, 1.0) and r is not None and not _close(r, 1.0):
                return Finding(
                    "parametro",
                    key,
                    f"{here}, sua taxa é a certa multiplicada por {br(r, '.4g')} ({there}, está certa): "
                    "as duas partes da curva devem se encontrar no pico, factor·(d_model·warmup_steps)^−0,5.",
                )
        return None

    def step_zero() -> Finding | None:
        base = probes("base")  # só o passo 0 errado: o resto da curva é o certo
        if _close(base[0], base[1]) or not all(_close(v, _noam(s, D, W, F)) for s, v in base.items() if s):
            return None
        return Finding(
            "propriedade",
            "passo-0-igual-ao-1",
            f"no passo 0, sua taxa é {br(base[0], '.4g')}, e não a do passo 1 ({br(base[1], '.4g')}): "
            "o passo 0 conta como passo 1; calcule com `max(step, 1)` (não `step + 1`).",
        )

    return (
        shift,
        floor,
        d_model,
        factor,
        whole_curve,
        decay_exponent,
        warmup_exponent,
        peak,
        ramp_linear,
        scale,
        step_zero,
    )


def _expect_noam(c: Check, fn: Callable, steps, d: int, w: int, f: float | None = None) -> None:
    """Compara ``fn`` com a fórmula no passo 0 e nos passos dados, nomeando o erro da curva toda.

    Um erro conhecido só é nomeado se reproduz a curva inteira deste caso e a de outra configuração
    (:data:`PROBES`); senão, o diagnóstico é um parâmetro ajustado (o deslocamento do passo, os
    expoentes de d_model, do `factor`, da queda e do aquecimento, a escala) ou a propriedade que
    quebra (o pico em warmup_steps, a subida em linha reta, o passo 0 igual ao 1).
    """
    kwargs, fv = ({}, 1.0) if f is None else ({"factor": f}, f)
    extra = "" if f is None else f", factor={f}"
    tried = f"noam_lr(0, d_model={d}, warmup_steps={w}{extra}) — o passo 0 conta como passo 1: max(step, 1)"
    rest = f"noam_lr(step, d_model={d}, warmup_steps={w}{extra}) nos passos {[0, *steps]}"
    # Um pedido só para a curva toda: o valor (ou a exceção) de cada passo, em ordem.
    response = c.case(tried).scenario(
        "ch06.noam_values", fn, steps=[0, *steps], d_model=d, warmup_steps=w, kwargs=kwargs
    )
    c.raise_for(response)
    outcomes = response.value
    if not (isinstance(outcomes, list) and len(outcomes) == len(steps) + 1):
        c.fail("A correção recebeu do lado do aluno dados fora do esquema do roteiro (sondas adulteradas?).")
    got = {}
    for s, outcome in zip([0, *steps], outcomes):
        error = outcome.get("error") if isinstance(outcome, dict) else {}
        if s == 0 and isinstance(error, dict) and error.get("type") == "ZeroDivisionError":
            # Só a divisão por zero no passo 0 ganha a dica do `max(step, 1)`; outra exceção, não.
            c.case(tried).raise_for(Response(error=error), ZERO_HINT, mistake="divisao-por-zero-no-passo-0")
        c.case(tried if s == 0 else rest).raise_for(Response(error=error))
        got[s] = outcome.get("value")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in got.values())
    named = [
        (key, n, g)
        for key, n, g in _noam_mistakes(d, w, fv)
        if numbers and all(math.isclose(v, g(s), rel_tol=1e-6) for s, v in got.items())
    ]
    probes = _NoamProbes(c, fn)

    def confirm(mistake: Mistake) -> bool:
        """O erro reproduz também a curva de outra configuração (outros d_model, warmup_steps e factor)."""
        pd, pw, pf, _ = PROBES["base"]
        base = probes("base")
        if base is None:
            return False
        if mistake.key in ("passo-0-zero", "passo-0-infinito"):
            return base[0] == mistake.value
        g = next((g for key, _, g in _noam_mistakes(pd, pw, pf) if key == mistake.key), None)
        return g is not None and all(math.isclose(v, g(s), rel_tol=1e-6) for s, v in base.items())

    zero = [
        Mistake(STEP0.format("0 e nada se aprende no 1º passo"), 0.0, "passo-0-zero"),
        Mistake(STEP0.format("∞"), math.inf, "passo-0-infinito"),
    ]
    with c.diagnosing(*_noam_finders(c, probes)):
        for s, value in got.items():
            what = f"`noam_lr({s}, ...)`" + (" (o pico, (d_model·warmup_steps)^-0.5)" if s == w else "")
            mistakes = (zero if s == 0 else []) + [Mistake(n, g(s), key) for key, n, g in named]
            c.case(tried if s == 0 else rest).number(
                value, _noam(s, d, w, fv), what, rel=1e-6, mistakes=mistakes, confirm=confirm
            )


@NOAM.visible_check
def check_noam_lr(fn: Callable) -> None:
    """Testes visíveis de ``noam_lr``: a configuração do artigo (d_model=512, warmup_steps=4000)."""
    with NOAM.check() as c:
        _expect_noam(c, fn, [1, 2, 100, 2000, 3999, 4000, 4001, 8000, 100_000], 512, 4000)
        _expect_noam(c, fn, [1, 5, 9, 10, 11, 50], 64, 10, 2.0)


@NOAM.hidden_check
def check_noam_lr_hidden(fn: Callable) -> None:
    """Testes ocultos: outras configurações, passos grandes, ValueError e a origem da função."""
    with NOAM.check(hidden=True) as c:
        c.refuse_reference(fn, reference.noam_lr, lambda: fn(5, 64, 10))
        _expect_noam(c, fn, [1, 3, 7, 8, 9, 1000, 10**7], 16, 8, 0.5)
        _expect_noam(c, fn, [1, 2, 3], 128, 1, 1.0)  # warmup_steps = 1: só a queda
        _expect_noam(c, fn, [1, 299, 300, 301, 600], 256, 300, 3.0)
        for step, d, w in ((5, 0, 10), (5, -8, 10), (5, 64, 0), (-1, 64, 10)):
            c.case(f"noam_lr({step}, {d}, {w}): d_model e warmup_steps positivos, step ≥ 0, senão ValueError")
            c.raises(ValueError, fn, step, d, w)


# ================================================================ respostas dos roteiros


def _num(value) -> float:
    """Um número vindo do lado do aluno como ``float`` (NaN se não for um número)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        return float(value.item())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return math.nan


def _observed(c: Check, response) -> dict:
    """O que as sondas viram, conferido contra o esquema do roteiro (nada malformado chega às contas)."""
    data = response.value
    keys = {"result", "events", "trace", "params", "lr", "grad_norm", "grads", "modes"}
    ok = isinstance(data, dict) and keys <= set(data)
    ok = ok and all(isinstance(data[k], list) for k in ("events", "trace", "grads", "modes"))
    ok = ok and isinstance(data["params"], torch.Tensor) and data["params"].is_floating_point()
    ok = ok and all(
        isinstance(e, (tuple, list)) and e and isinstance(e[0], str)
        and all(isinstance(x, (bool, int, float)) for x in e[1:])
        for e in data["events"]
    )  # fmt: skip
    ok = ok and all(
        isinstance(row, (tuple, list)) and len(row) == 5 and isinstance(row[4], torch.Tensor)
        for row in data["trace"]
    )
    ok = ok and all(isinstance(m, bool) for m in data["modes"])
    if not ok:
        c.fail("A correção recebeu do lado do aluno dados fora do esquema do roteiro (sondas adulteradas?).")
    return data


def _fingerprint(data: dict) -> dict:
    """Parâmetros, taxa, norma do gradiente, passos e rastro: o que se compara com a referência."""
    trace = [(*(_num(v) for v in row[:4]), row[4]) for row in data["trace"]]
    steps = sum(1 for e in data["events"] if e[0] == "step")
    return dict(
        params=data["params"],
        lr=_num(data["lr"]),
        grad_norm=_num(data["grad_norm"]),
        steps=steps,
        trace=trace,
    )


# ================================================================ make_warmup_scheduler


def _lr_table(rows) -> torch.Tensor | None:
    """As taxas de cada grupo após k passos como uma matriz (K, G) float64; ``None`` se não forem números."""
    if not isinstance(rows, list) or not rows:
        return None
    table = [[_num(v) for v in row] if isinstance(row, (tuple, list)) else None for row in rows]
    if any(row is None or len(row) != len(table[0]) for row in table):
        return None
    return torch.tensor(table, dtype=torch.float64)


def _sibling(fn, name: str):
    """Outra resposta do aluno, do mesmo notebook (``noam_lr`` ao lado de ``make_warmup_scheduler``).

    No juiz, pelo nome no kernel; ao estudar, pelo espaço de nomes em que a função foi definida.
    ``None`` se não há como achá-la.
    """
    if isinstance(fn, Remote):
        return Remote(name)
    found = getattr(fn, "__globals__", {}).get(name)
    return found if callable(found) else None


def _schedule_mistakes(lrs, d, w, f, k_max) -> list[Mistake]:
    """Os erros conhecidos do agendador neste caso: a tabela (K, G) que cada um daria."""
    base = torch.tensor(lrs, dtype=torch.float64)

    def seq(g):  # (K,) -> (K, G): a mesma curva em todo grupo
        return torch.tensor([[g(k)] * len(lrs) for k in range(k_max + 1)], dtype=torch.float64)

    expected = seq(lambda k: _noam(k, d, w, f))
    set_after = base * expected  # lr = 1.0 depois do LambdaLR: vale só até o primeiro step()
    set_after[0] = 1.0
    mistakes = [
        Mistake(
            "o efeito de `lr = 1.0` posto DEPOIS de criar o `LambdaLR`: ele guarda a taxa base de cada grupo "
            "quando é criado (`scheduler.base_lrs`), e o primeiro `scheduler.step()` volta a usar a "
            "taxa antiga; ponha `lr = 1.0` em todo grupo ANTES de criar o agendador",
            set_after,
            "lr-1-depois-do-lambdalr",
        ),
        Mistake(
            "a taxa base do otimizador mantida: o `LambdaLR` MULTIPLICA a taxa base pela sua "
            "função; ponha `lr = 1.0` em todo grupo antes de criar o agendador",
            base * expected,
            "taxa-base-mantida",
        ),
        Mistake(
            "a taxa base trocada para 1.0 só no primeiro grupo de parâmetros",
            torch.cat([expected[:, :1], base[1:] * expected[:, 1:]], dim=1),
            "so-o-primeiro-grupo",
        ),
        Mistake(
            "a curva deslocada um passo para a frente (depois de k passos você está em k + 1; "
            "há um `scheduler.step()` a mais ou um `step + 1`)",
            seq(lambda k: _noam(k + 1, d, w, f)),
            "passo-mais-1",
        ),
        Mistake(
            "a curva deslocada um passo para trás (k - 1)",
            seq(lambda k: _noam(k - 1, d, w, f)),
            "passo-menos-1",
        ),
        Mistake("o `factor` ignorado", seq(lambda k: _noam(k, d, w)), "factor-ignorado"),
        Mistake(
            "o `factor` ignorado e a taxa base mantida",
            base * seq(lambda k: _noam(k, d, w)),
            "factor-ignorado-e-taxa-base-mantida",
        ),
        Mistake(
            "d_model e warmup_steps trocados na chamada de noam_lr",
            seq(lambda k: _noam(k, w, d, f)),
            "d_model-e-warmup-trocados",
        ),
    ]
    return mistakes + [
        Mistake(f"{label} (na função que o `LambdaLR` recebeu)", seq(g), f"funcao-{key}")
        for key, label, g in _noam_mistakes(d, w, f)
    ]


# O segundo caso em que um erro do agendador se confirma: outros grupos, taxas, d_model, warmup e factor.
SECOND_SCHEDULE = dict(lrs=[0.05, 2.0], d=32, w=6, f=1.5, k_max=14)


def _run_schedule(c: Check, fn, lrs, d, w, f, k_max, optimizer="SGD"):
    """A resposta do roteiro ``ch06.schedule`` neste caso (sem falhar: a verificação lê a resposta)."""
    gen = c.gen(60)
    params = [torch.randn(3, generator=gen) for _ in lrs]
    fields = dict(optimizer=optimizer, params=params, lrs=list(lrs), d_model=d, warmup_steps=w, factor=f)
    return c.scenario("ch06.schedule", fn, k_max=k_max, **fields)


def _second_table(c: Check, fn) -> torch.Tensor | None:
    """A tabela de taxas da resposta no segundo caso (``None`` se algo falhou lá)."""
    s = SECOND_SCHEDULE
    response = _run_schedule(c, fn, s["lrs"], s["d"], s["w"], s["f"], s["k_max"])
    data = response.value
    if response.error or not isinstance(data, dict) or data.get("step_error") is not None:
        return None
    return _lr_table(data.get("rows"))


def _upstream_noam(c: Check, fn, d, w, f, k_max, got: torch.Tensor | None, error: dict | None = None, lrs=()):
    """``make_warmup_scheduler`` ← ``noam_lr``: a falha vem da ``noam_lr`` do aluno?

    Só se ela existe, erra neste caso e o agendador reproduz o que ela dá (a mesma curva em todo grupo,
    a menos de uma constante por grupo, dita à parte, ou a mesma exceção no passo 0): então "o erro está
    em `noam_lr`".
    """

    def find() -> Finding | None:
        noam = _sibling(fn, "noam_lr")
        if noam is None:
            return None
        kwargs = {} if f is None else {"factor": f}
        fv = 1.0 if f is None else f
        steps = list(range(k_max + 1))
        if error is not None:
            response = c.scenario(
                "ch06.noam_values", noam, steps=[0], d_model=d, warmup_steps=w, kwargs=kwargs
            )
            first = response.value[0] if isinstance(response.value, list) and response.value else {}
            theirs = first.get("error") if isinstance(first, dict) else None
            if not (isinstance(theirs, dict) and (theirs.get("type"), theirs.get("message"))
                    == (error.get("type"), error.get("message"))):  # fmt: skip
                return None
            return Finding(
                "anterior",
                "erro-em-noam_lr",
                "o erro está em `noam_lr`: o `LambdaLR` chama a função com o passo 0 logo na criação, e a "
                f"sua `noam_lr(0, {d}, {w}{', factor=' + str(f) if f is not None else ''})` levanta a mesma "
                f"exceção ({theirs.get('type')}). Corrija a `noam_lr` (o passo 0 usa a taxa do passo 1: "
                "`max(step, 1)`) e este teste passa a usar a versão certa.",
            )
        values = _noam_values(c, noam, steps, d, w, kwargs)
        if values is None or got is None:
            return None
        wrong = [k for k in steps if not _close(values[k], _noam(k, d, w, fv))]
        ours = torch.tensor([[values[k]] for k in steps], dtype=torch.float64).expand_as(got)
        if not wrong or not bool((ours != 0).all()):
            return None
        ratio = got / ours  # 1 em tudo: o agendador é a `noam_lr`; uma constante por grupo: a taxa base
        if not torch.allclose(ratio, ratio[:1].expand_as(ratio), rtol=1e-6, atol=0.0):
            return None
        m, base = ratio[0], torch.tensor(lrs, dtype=torch.float64)
        also = ""
        if not torch.allclose(m, torch.ones_like(m), rtol=1e-6, atol=0.0):
            also = (
                "; além disso, a taxa base do otimizador foi mantida (o `LambdaLR` multiplica a taxa base de "
                "cada grupo pela função: ponha `lr = 1.0` em todo grupo antes de criá-lo)"
                if m.shape == base.shape and torch.allclose(m, base, rtol=1e-6, atol=0.0)
                else "; além disso, a taxa de cada grupo é a da sua `noam_lr` multiplicada por "
                + ", ".join(br(float(x), ".4g") for x in m)
            )
        k = wrong[0]
        # O erro conhecido da `noam_lr`, se reproduz a curva dela aqui e na configuração de PROBES.
        pd, pw, pf, psteps = PROBES["base"]
        known = [
            (key, name)
            for key, name, g in _noam_mistakes(d, w, fv)
            if all(_close(values[s], g(s)) for s in steps)
        ]
        probe = _noam_values(c, noam, psteps, pd, pw, {"factor": pf}) if known else None
        again = {key: g for key, _, g in _noam_mistakes(pd, pw, pf)}
        named = [
            name
            for key, name in known
            if probe is not None and all(_close(v, again[key](s)) for s, v in probe.items())
        ]
        which = f" (ela coincide com {named[0]})" if named else ""
        return Finding(
            "anterior",
            "erro-em-noam_lr",
            f"o erro está em `noam_lr`: seu agendador segue {'' if also else 'exatamente '}a sua `noam_lr`, "
            "e ela dá "
            f"{br(values[k], '.6g')} no passo {k}, e não {br(_noam(k, d, w, fv), '.6g')}{which}{also}. "
            "Corrija a `noam_lr` primeiro (o teste dela diz o que está errado).",
        )

    return find


def _schedule_finders(c: Check, got: torch.Tensor, lrs, d, w, f, k_max):
    """Sem erro conhecido confirmado: o deslocamento, a escala de cada grupo, o pico, a primeira taxa."""
    base = torch.tensor(lrs, dtype=torch.float64)
    expected = torch.tensor([[_noam(k, d, w, f)] for k in range(k_max + 1)], dtype=torch.float64)

    def first_zero() -> Finding | None:
        if not bool((got[0] == 0).all()):
            return None
        return Finding(
            "propriedade",
            "primeira-taxa-zero",
            "antes do primeiro `scheduler.step()`, sua taxa é 0: o primeiro `optimizer.step()` não aprende "
            "nada. O `LambdaLR` chama a função com o passo 0, que deve dar a taxa do passo 1 "
            "(`max(step, 1)`), não 0.",
        )

    def shift() -> Finding | None:
        for delta in (1, -1, 2, -2, 3, -3):
            curve = torch.tensor([[_noam(k + delta, d, w, f)] for k in range(k_max + 1)], dtype=torch.float64)
            if torch.allclose(got[1:], curve[1:].expand_as(got[1:]), rtol=1e-6, atol=0.0):
                steps = "1 passo" if abs(delta) == 1 else f"{abs(delta)} passos"
                return Finding(
                    "parametro",
                    "passo-deslocado",
                    f"depois de k passos (k ≥ 1), sua taxa é noam_lr(k {'+' if delta > 0 else '−'} "
                    f"{abs(delta)}), e não noam_lr(k): sua curva está deslocada {steps} (há "
                    "`scheduler.step()` a mais ou a menos, ou o passo somado na função).",
                )
        return None

    def group_scale() -> Finding | None:
        ratio = got / expected
        if not torch.allclose(ratio, ratio[:1].expand_as(ratio), rtol=1e-6, atol=0.0):
            return None
        m = ratio[0]
        if torch.allclose(m, torch.ones_like(m), rtol=1e-6, atol=0.0):
            return None
        if torch.allclose(m, m[:1].expand_as(m), rtol=1e-6, atol=0.0):
            return Finding(
                "parametro",
                "escala-da-taxa",
                f"sua curva tem a forma certa, mas depois de k passos a taxa é noam_lr(k, ...) × "
                f"{br(float(m[0]), '.4g')} em todo grupo: a função do `LambdaLR` deve devolver o "
                "multiplicador noam_lr(k, ...), com a taxa base 1.0.",
            )
        parts = "; ".join(
            f"grupo {g} (lr inicial {br(float(b), '.4g')}): × {br(float(x), '.4g')}"
            for g, (b, x) in enumerate(zip(base, m))
        )
        return Finding(
            "parametro",
            "escala-por-grupo",
            f"sua curva tem a forma certa, mas cada grupo tem a taxa multiplicada por um número ({parts}); "
            "com a taxa base 1.0 em todo grupo, a taxa é noam_lr(k, ...) em todos.",
        )

    def constant() -> Finding | None:
        if not torch.allclose(got, got[:1].expand_as(got), rtol=1e-9, atol=0.0):
            return None
        return Finding(
            "propriedade",
            "taxa-constante",
            f"sua taxa não muda com os passos (fica em {br(float(got[0, 0]), '.4g')} do passo 0 ao {k_max}): "
            "a função do `LambdaLR` recebe o número de passos e deve devolver noam_lr desse passo.",
        )

    def peak() -> Finding | None:
        if k_max < 2 * w or w < 2:
            return None
        top = int(got[:, 0].argmax())
        if top == w:
            return None
        return Finding(
            "propriedade",
            "pico-em-warmup",
            f"seu pico (a maior taxa entre os passos 0 e {k_max}) está no passo {top}, e não em "
            f"warmup_steps = {w}.",
        )

    return first_zero, shift, group_scale, constant, peak


def _expect_schedule(c: Check, fn, lrs, d, w, f, k_max, optimizer="SGD") -> None:
    """A taxa de cada grupo depois de k = 0..k_max passos é ``noam_lr(k, ...)``, em todo grupo.

    Uma falha olha primeiro para a ``noam_lr`` do aluno (``make_warmup_scheduler`` ← ``noam_lr``);
    depois, um erro conhecido só é nomeado se reproduz também o segundo caso
    (:data:`SECOND_SCHEDULE`); senão, um parâmetro ajustado ou a propriedade que quebra.
    """
    fv = 1.0 if f is None else f
    tried = (
        f"{optimizer} com {len(lrs)} grupo(s) de lr {list(lrs)}; make_warmup_scheduler(opt, "
        f"d_model={d}, warmup_steps={w}{'' if f is None else f', factor={f}'}) e {k_max} passos"
    )
    c.case(tried)
    response = _run_schedule(c, fn, lrs, d, w, f, k_max, optimizer)
    if response.error is not None:
        try:
            c.raise_for(response)
        except CheckFailure as failure:
            if response.error.get("stub"):
                raise
            finding = c.find(_upstream_noam(c, fn, d, w, f, k_max, None, response.error))
            if finding is not None:
                raise c.diagnosed(failure, finding) from None
            if response.error.get("type") == "ZeroDivisionError":
                hint = "o `LambdaLR` chama a função com o passo 0 logo na criação: use `max(step, 1)`."
                c.raise_for(response, hint, mistake="divisao-por-zero-no-passo-0")
            raise
    data = response.value
    if not (isinstance(data, dict) and {"scheduler", "wraps", "rows", "step_error"} <= set(data)):
        c.fail("A correção recebeu do lado do aluno dados fora do esquema do roteiro (sondas adulteradas?).")
    scheduler = data["scheduler"]
    c.expect(
        isinstance(scheduler, wire.Handle) and scheduler.is_a("torch.optim.lr_scheduler.LambdaLR"),
        f"Esperava um `torch.optim.lr_scheduler.LambdaLR`; veio {describe(scheduler)}.",
        "o exercício pede o agendador do PyTorch (`LambdaLR(optimizer, lr_lambda)`), não uma classe "
        "própria nem uma função: é ele que o laço de treino chama com `scheduler.step()`.",
        kind="tipo",
        mistake="nao-e-lambdalr",
    )
    c.expect(
        data["wraps"] is True,
        "O `LambdaLR` devolvido não envolve o otimizador recebido.",
        kind="propriedade",
        mistake="outro-otimizador",
    )
    error = data["step_error"]
    if isinstance(error, dict):
        k, kind, message = error.get("k"), error.get("type"), error.get("message")
        c.fail(f"No passo {k}, `scheduler.step()` levantou {kind}: {message}", kind="excecao", exception=kind)
    got = _lr_table(data["rows"])
    if got is None:
        c.fail('`group["lr"]` deixou de ser um número durante os passos do agendador.', kind="tipo")
    expected = torch.tensor([[_noam(k, d, w, fv)] * len(lrs) for k in range(k_max + 1)], dtype=torch.float64)
    second = []  # a tabela do segundo caso, pedida só quando um erro conhecido coincide aqui

    def confirm(mistake: Mistake) -> bool:
        if not second:
            second.append(_second_table(c, fn))
        table, s = second[0], SECOND_SCHEDULE
        again = next(
            (
                m
                for m in _schedule_mistakes(s["lrs"], s["d"], s["w"], s["f"], s["k_max"])
                if m.key == mistake.key
            ),
            None,
        )
        return (
            table is not None
            and again is not None
            and table.shape == again.value.shape
            and torch.allclose(table, again.value, rtol=1e-6, atol=0.0)
        )

    c.case(tried + " (linha k = taxa de cada grupo após k passos)")
    what = '`group["lr"]` após k passos'
    try:
        c.close(got, expected, what, _schedule_mistakes(lrs, d, w, fv, k_max), 1e-6, 0.0, confirm)
    except CheckFailure as failure:
        if failure.data.get("kind") not in ("valores", "nan"):
            raise
        finding = c.find(_upstream_noam(c, fn, d, w, f, k_max, got, lrs=lrs))  # a `noam_lr` primeiro
        if finding is None and not failure.data.get("mistake"):
            finding = c.find(*_schedule_finders(c, got, lrs, d, w, fv, k_max))
        if finding is None:
            raise
        raise c.diagnosed(failure, finding) from None


@SCHED.visible_check
def check_make_warmup_scheduler(fn: Callable) -> None:
    """Testes visíveis de ``make_warmup_scheduler``: a taxa após k passos é ``noam_lr(k, ...)``."""
    with SCHED.check() as c:
        _expect_schedule(c, fn, [0.123], 64, 5, None, 12)
        _expect_schedule(c, fn, [3e-4], 32, 3, 2.0, 8, "Adam")


def _call_scheduler(fn: Callable):
    """Uma chamada típica (só ao estudar, na recusa da referência)."""
    return fn(torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=0.1), 64, 5)


@SCHED.hidden_check
def check_make_warmup_scheduler_hidden(fn: Callable) -> None:
    """Testes ocultos: dois grupos com taxas diferentes, taxa 1.0 e outras configurações."""
    with SCHED.check(hidden=True) as c:
        c.refuse_reference(fn, reference.make_warmup_scheduler, lambda: _call_scheduler(fn))
        _expect_schedule(c, fn, [1e-3, 5e-2], 128, 4, 0.5, 10, "Adam")
        _expect_schedule(c, fn, [1.0], 16, 1, 1.0, 4)
        _expect_schedule(c, fn, [7.0, 0.01], 512, 20, 1.5, 40, "AdamW")


# ================================================================ o laço de referência e os erros conhecidos


_Setup = Setup  # o modelo-sonda e o resto, os mesmos dos dois lados (ver scenarios/ch06.py)


def _describe_setup(dtype=torch.float64, tuple_output=False, sizes=(8, 8, 8, 3), **_) -> str:
    kind = "(logits, extra)" if tuple_output else "logits"
    return f"um modelo linear que devolve {kind} ({dtype_name(dtype)}), lotes de tamanhos {list(sizes)}"


def _loop(s: Setup, max_norm: float, variant: str = "certo") -> list:
    """O laço de treino de referência, escrito por extenso, com um erro opcional (``variant``)."""
    params = list(s.model.parameters())
    if variant != "sem_train":
        s.model.train()
    batches = []  # (perda, acertos, tamanho) de cada lote
    for x, y in s.loader:
        if variant not in ("sem_zero_grad", "zero_grad_no_fim"):
            s.optimizer.zero_grad()
        out = s.model(x)
        logits = out[0] if isinstance(out, tuple) else out
        loss = s.loss_fn(logits, y)
        if variant == "perda_vezes_tamanho":
            (loss * len(y)).backward()
        elif variant == "perda_dividida_por_lotes":
            (loss / len(s.loader)).backward()
        else:
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
        if variant != "sem_step":
            s.optimizer.step()
        if variant == "corte_depois_do_step":
            nn.utils.clip_grad_norm_(params, max_norm)
        if variant not in ("agendador_antes", "sem_agendador", "agendador_por_epoca"):
            s.scheduler.step()
        if variant == "zero_grad_no_fim":
            s.optimizer.zero_grad()
        batches.append((loss.item(), (logits.argmax(-1) == y).sum().item(), len(y)))
    if variant == "agendador_por_epoca":
        s.scheduler.step()
    return batches


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
    "passo-sem-optimizer-step": "os parâmetros atualizados à mão, sem `optimizer.step()`: use o passo do "
    "otimizador (é ele que usa a taxa do agendador e o estado do otimizador)",
    "sem_train": "a época em modo de avaliação: o modelo chegou em `eval()` e você não chamou "
    "`model.train()`",
    "perda_vezes_tamanho": "o `backward()` da perda multiplicada pelo tamanho do lote (a soma das perdas "
    "dos exemplos): a `CrossEntropyLoss` já devolve a média do lote; chame `loss.backward()` nela",
    "perda_dividida_por_lotes": "o `backward()` da perda dividida pelo número de lotes (como numa "
    "acumulação de gradientes): aqui cada lote dá o seu passo; chame `loss.backward()` na perda do lote",
}
LOOP_VARIANTS = tuple(k for k in TRAIN_MISTAKES if k != "passo-sem-optimizer-step")  # as que `_loop` comete
GENERIC_HINT = "confira a ordem: zero_grad, forward, perda, backward, clip_grad_norm_, step, scheduler.step."


def _reference_run(seed, max_norm, variant="certo", **setup) -> tuple[dict, list]:
    """Impressão digital (parâmetros, taxa, norma do gradiente, rastro) e lotes de uma execução."""
    with warnings.catch_warnings():  # a variante "agendador_antes" faz o PyTorch avisar
        warnings.simplefilter("ignore")
        batches = _loop(s := Setup(seed, **setup), max_norm, variant)
        return _fingerprint(s.observed()), batches


def _mistake_runs(seed, max_norm, **setup) -> dict[str, dict]:
    """As impressões digitais de cada erro conhecido (só calculadas quando o aluno erra)."""
    right = _reference_run(seed, max_norm, **setup)[0]["params"]
    runs = {v: _reference_run(seed, max_norm, v, **setup)[0] for v in LOOP_VARIANTS}
    # Um erro que neste caso não muda nada (o modelo já chegou em treino, nada a recortar) não é candidato.
    return {v: fp for v, fp in runs.items() if not _same(fp["params"], right)}


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    tol = {"rtol": 1e-5, "atol": 1e-6} if a.dtype == torch.float32 else {"rtol": 1e-9, "atol": 1e-11}
    return a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a, b, **tol)


def _diagnose_params(student: dict, runs: dict[str, dict], max_norm: float) -> str | None:
    """O erro conhecido (a chave de ``TRAIN_MISTAKES``) cujos parâmetros finais são os do aluno."""
    for variant, fp in runs.items():
        if not _same(student["params"], fp["params"]):
            continue
        if variant in ("sem_corte", "corte_depois_do_step"):  # o gradiente final diz se houve recorte depois
            variant = "corte_depois_do_step" if student["grad_norm"] <= max_norm * (1 + 1e-6) else "sem_corte"
        elif variant in ("sem_agendador", "agendador_por_epoca"):
            same_lr = "sem_agendador" in runs and math.isclose(student["lr"], runs["sem_agendador"]["lr"])
            variant = "sem_agendador" if same_lr else "agendador_por_epoca"
        elif variant in ("zero_grad_antes_do_step", "sem_step"):
            variant = "sem_step" if student["steps"] == 0 else "zero_grad_antes_do_step"
        return variant
    return None


STAGES = (
    "perda do lote {k}",
    "gradiente acumulado antes do `backward()` do lote {k} (a norma; o esperado é zero)",
    "norma do gradiente no `optimizer.step()` do lote {k} (já recortada)",
    "taxa usada no `optimizer.step()` do lote {k}",
    "parâmetros depois do `optimizer.step()` do lote {k}",
)


def _trace_stages(student: dict, expected: dict, dtype: torch.dtype) -> list:
    """O rastro dos passos, em ordem, como etapas de ``first_difference``; no fim, o estado final."""
    pairs = [
        (label.format(k=k), a, e)
        for k, (row, ref) in enumerate(zip(student["trace"], expected["trace"]), start=1)
        for label, a, e in zip(STAGES, row, ref)
        if not (label.startswith("perda") and math.isnan(a))  # a perda não veio de `loss_fn`: pula
    ]
    pairs += [
        ("parâmetros depois da época", student["params"], expected["params"]),
        ("taxa depois da época", student["lr"], expected["lr"]),
    ]
    tensor = lambda v: v if isinstance(v, torch.Tensor) else torch.tensor([v], dtype=dtype)  # noqa: E731
    return [(label, tensor(a), tensor(e)) for label, a, e in pairs]


def _metric_mistakes(batches: list, per_example: bool) -> tuple[list[Mistake], list[Mistake]]:
    """Os erros conhecidos de ``result['loss']`` e de ``result['accuracy']`` com estes lotes."""
    losses, hits, sizes = (list(column) for column in zip(*batches))
    n, total, correct = len(batches), sum(sizes), sum(hits)
    weighted = sum(v * k for v, k in zip(losses, sizes))
    if per_example:
        loss_mistakes = [
            Mistake(
                "a média simples das perdas dos lotes; a avaliação pede a média por exemplo, "
                "Σ perda_b·B_b / N: multiplique a perda de cada lote pelo tamanho dele, some e divida "
                "pelo total de exemplos (na média simples, cada exemplo de um último lote menor pesa mais)",
                sum(losses) / n,
                "perda-media-simples",
            ),
            Mistake(
                "a SOMA das perdas dos lotes; a avaliação pede a média por exemplo (multiplique a perda "
                "de cada lote pelo tamanho dele, some e divida pelo total de exemplos)",
                sum(losses),
                "perda-soma",
            ),
            Mistake(
                "Σ perda_b·B_b sem dividir pelo total de exemplos N", weighted, "perda-sem-dividir-por-n"
            ),
            Mistake(
                "Σ perda_b·B_b dividida pelo número de lotes; divida pelo total de exemplos",
                weighted / n,
                "perda-dividida-por-lotes",
            ),
            Mistake("a perda só do último lote", losses[-1], "perda-do-ultimo-lote"),
            Mistake(
                "a soma das perdas dividida pelo número de EXEMPLOS, sem multiplicar cada perda pelo "
                "tamanho do lote",
                sum(losses) / total,
                "perda-soma-por-exemplos",
            ),
        ]
    else:
        loss_mistakes = [
            Mistake(
                "a SOMA das perdas dos lotes; o contrato pede a média (divida pelo número de lotes)",
                sum(losses),
                "perda-soma",
            ),
            Mistake(
                "a média ponderada pelo tamanho do lote; o contrato pede a média simples das perdas dos "
                "lotes",
                weighted / total,
                "perda-media-ponderada",
            ),
            Mistake("a perda só do último lote", losses[-1], "perda-do-ultimo-lote"),
            Mistake(
                "a soma das perdas dividida pelo número de EXEMPLOS",
                sum(losses) / total,
                "perda-soma-por-exemplos",
            ),
        ]
    acc_mistakes = [
        Mistake(
            "a média das acurácias dos lotes; o contrato pede acertos / total de exemplos (com "
            "um último lote menor, as duas diferem)",
            sum(h / k for h, k in zip(hits, sizes)) / n,
            "acuracia-media-dos-lotes",
        ),
        Mistake(
            "o número de acertos, sem dividir pelo total de exemplos", float(correct), "acuracia-sem-dividir"
        ),
        Mistake(
            "a acurácia em porcentagem; devolva uma fração entre 0 e 1",
            100 * correct / total,
            "acuracia-em-porcento",
        ),
        Mistake("acertos divididos pelo número de lotes", correct / n, "acuracia-por-lotes"),
    ]
    return loss_mistakes, acc_mistakes


def _expect_metrics(c: Check, result, batches: list, per_example: bool = False, again=None) -> None:
    """``result`` é um dicionário de números: a perda média e acertos / total.

    A perda é a média simples das perdas dos lotes no treino e a média por exemplo,
    Σ perda_b·B_b / N, na avaliação (``per_example``). ``again()``: o resultado e os lotes de um
    segundo caso (outros dados, outros tamanhos de lote), em que um erro conhecido tem de se repetir
    para ser nomeado.
    """
    keys = f" com as chaves {sorted(map(str, result))}" if isinstance(result, dict) else ""
    c.expect(
        isinstance(result, dict) and {"loss", "accuracy"} <= set(result),
        f"Esperava um dicionário com as chaves 'loss' e 'accuracy'; veio {describe(result)}{keys}.",
        kind="tipo",
        mistake="resultado-sem-loss-e-accuracy",
    )
    for key in ("loss", "accuracy"):
        c.expect(
            not (isinstance(result[key], torch.Tensor) and wire.info(result[key]).requires_grad),
            f"result['{key}'] é um tensor ligado ao grafo ({describe(result[key])}); esperava um número.",
            "somar `loss` (e não `loss.item()`) guarda o grafo de todos os lotes na memória; use `.item()`.",
            kind="tipo",
            mistake=f"{key}-tensor-no-grafo",
        )
    losses, hits, sizes = (list(column) for column in zip(*batches))
    total, correct = sum(sizes), sum(hits)
    expected = sum(v * k for v, k in zip(losses, sizes)) / total if per_example else sum(losses) / len(losses)
    loss_mistakes, acc_mistakes = _metric_mistakes(batches, per_example)
    second = []

    def confirm(key: str, index: int):
        def check(mistake: Mistake) -> bool:
            if again is None:
                return True
            if not second:
                second.append(again())
            if second[0] is None:
                return False
            result2, batches2 = second[0]
            value = result2.get(key) if isinstance(result2, dict) else None
            twin = next(
                (m for m in _metric_mistakes(batches2, per_example)[index] if m.key == mistake.key), None
            )
            return (
                twin is not None
                and isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isclose(value, twin.value, rel_tol=1e-5, abs_tol=1e-9)
            )

        return check

    c.number(
        result["loss"],
        expected,
        "result['loss']",
        rel=1e-5,
        abs_tol=1e-7,
        mistakes=loss_mistakes,
        confirm=confirm("loss", 0),
    )
    c.number(
        result["accuracy"],
        correct / total,
        "result['accuracy']",
        rel=1e-6,
        abs_tol=1e-9,
        mistakes=acc_mistakes,
        confirm=confirm("accuracy", 1),
    )


TUPLE_HINT = "o modelo devolve uma tupla (logits, ...): use `out[0] if isinstance(out, tuple) else out`."


def _raise_for_tuple(c: Check, response, scenario: str, fn, **fields) -> None:
    """A exceção da resposta; com um modelo que devolve tupla, a dica da tupla só se a mesma resposta
    roda sem exceção com um modelo que devolve só os logits (senão a exceção vem de outro lugar)."""
    if response.error is None:
        return
    if fields.get("tuple_output") and not response.error.get("stub"):
        plain = c.scenario(scenario, fn, **{**fields, "tuple_output": False})
        if plain.error is None:
            c.raise_for(response, TUPLE_HINT, mistake="modelo-devolve-tupla")
    c.raise_for(response)


# ================================================================ train_epoch


def _second_setup(seed: int, max_norm: float, setup: dict) -> tuple[int, float, dict]:
    """O segundo caso de uma falha: outra semente, outro recorte, outros lotes; o mesmo tipo de modelo."""
    return seed + 97, round(max_norm * 0.5, 6), {**setup, "sizes": (5, 5, 5, 2)}


def _train_run(c: Check, fn, seed, max_norm, setup) -> dict | None:
    """A resposta do aluno num caso, como dados (``None`` se levantou ou veio fora do esquema)."""
    response = c.scenario("ch06.train_epoch", fn, seed=seed, max_norm=max_norm, **setup)
    if response.error is not None:
        return None
    try:
        return _observed(c, response)
    except CheckFailure:
        return None


def _confirm_variant(c: Check, fn, variant: str, seed, max_norm, setup, second: list) -> bool:
    """O erro conhecido ``variant`` reproduz também os parâmetros finais de um segundo caso."""
    if not second:
        second.append(_train_run(c, fn, *_second_setup(seed, max_norm, setup)))
    if second[0] is None:
        return False
    seed2, norm2, setup2 = _second_setup(seed, max_norm, setup)
    # Os parâmetros finais do segundo caso são os do erro (o par que só o gradiente final separa já foi
    # desempatado no primeiro caso).
    return _same(
        _fingerprint(second[0])["params"], _reference_run(seed2, norm2, variant, **setup2)[0]["params"]
    )


SCHEDULE_LR = 0.3  # a taxa base do SGD do modelo-sonda; o LambdaLR dá 1/(1 + j) depois de j passos


def _trace_finders(student: dict, ref: dict, max_norm: float):
    """Sem erro conhecido confirmado: o que a primeira etapa que difere mostra, medido no rastro."""
    dtype = ref["params"].dtype
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-7, "atol": 1e-9}

    def same(a, b) -> bool:
        a, b = (torch.as_tensor(v, dtype=torch.float64) for v in (a, b))
        return a.shape == b.shape and bool(torch.allclose(a, b, **tol))

    def first() -> tuple[int, int] | None:
        """(lote, etapa) da primeira diferença do rastro (etapas na ordem de ``STAGES``)."""
        for k, (row, expected) in enumerate(zip(student["trace"], ref["trace"]), start=1):
            for i, (a, e) in enumerate(zip(row, expected)):
                if i == 0 and math.isnan(a):
                    continue
                if not same(a, e):
                    return k, i
        return None

    def schedule_index(lr: float) -> int | None:
        """O passo j do agendador-sonda cuja taxa é ``lr`` (``None`` se nenhum)."""
        if not (isinstance(lr, float) and lr > 0 and math.isfinite(lr)):
            return None
        j = round(SCHEDULE_LR / lr - 1)
        return j if j >= 0 and math.isclose(lr, SCHEDULE_LR / (1 + j), rel_tol=1e-9) else None

    def stale() -> Finding | None:
        where = first()
        if where is None or where[1] != 1:
            return None
        k, norm = where[0], student["trace"][where[0] - 1][1]
        return Finding(
            "propriedade",
            "gradientes-zerados-antes-do-backward",
            f"antes do `backward()` do lote {k}, os parâmetros já tinham gradiente (norma {br(norm, '.4g')}; "
            "o esperado é 0): zere os gradientes no começo de cada lote (`optimizer.zero_grad()`), antes do "
            "`backward()`, senão o gradiente de um lote se soma ao do anterior.",
        )

    def clipping() -> Finding | None:
        where = first()
        if where is None or where[1] != 2:
            return None
        k = where[0]
        norm, right = student["trace"][k - 1][2], ref["trace"][k - 1][2]
        # Um recorte com outro limite: nos lotes em que a sua norma mudou, ela é sempre a mesma (≠ max).
        changed = [row[2] for row, e in zip(student["trace"], ref["trace"]) if not same(row[2], e[2])]
        limit = changed[0] if changed else math.nan
        if (
            len(changed) >= 2
            and all(math.isclose(x, limit, rel_tol=1e-6) for x in changed)
            and not math.isclose(limit, max_norm, rel_tol=1e-5)
        ):
            return Finding(
                "parametro",
                "limite-do-recorte",
                f"seu recorte limita a norma do gradiente a {br(limit, '.4g')}, e não a max_grad_norm = "
                f"{br(max_norm)}: passe o argumento `max_grad_norm` ao `clip_grad_norm_`.",
            )
        if norm > max_norm * (1 + 1e-6):
            return Finding(
                "propriedade",
                "norma-recortada-no-step",
                f"no `optimizer.step()` do lote {k}, a norma do gradiente é {br(norm, '.4g')}, acima de "
                f"max_grad_norm = {br(max_norm)}: na hora do passo, o gradiente não estava recortado em "
                "max_grad_norm (`clip_grad_norm_` vem depois do `backward()` e antes do "
                "`optimizer.step()`).",
            )
        if math.isclose(norm, max_norm, rel_tol=1e-5) and right < max_norm * (1 - 1e-5):
            return Finding(
                "propriedade",
                "gradiente-antes-do-recorte",
                f"no `optimizer.step()` do lote {k}, seu gradiente foi recortado em max_grad_norm = "
                f"{br(max_norm)}, e o certo nem chegava a esse limite (norma {br(right, '.4g')}): com a "
                "perda do lote certa, o gradiente que o `backward()` deixou já era maior que o certo.",
            )
        return None

    def learning_rate() -> Finding | None:
        where = first()
        if where is None or where[1] != 3:
            return None
        k = where[0]
        j = schedule_index(student["trace"][k - 1][3])
        if j is None:
            return None
        return Finding(
            "parametro",
            "taxa-do-passo",
            f"no `optimizer.step()` do lote {k}, a taxa usada foi a do passo {j} do agendador, e não a do "
            f"passo {k - 1}: o otimizador dá o passo com a taxa atual, e só depois `scheduler.step()` "
            "prepara a do lote seguinte (uma vez por lote).",
        )

    def update() -> Finding | None:
        where = first()
        if where is None or where[1] != 4:
            return None
        k = where[0]
        before = ref["trace"][k - 2][4] if k > 1 else None
        if before is None:
            return None
        mine = student["trace"][k - 1][4].double() - before.double()
        right = ref["trace"][k - 1][4].double() - before.double()
        mask = right.abs() > 1e-12
        if not mask.any():
            return None
        ratio = mine[mask] / right[mask]
        r = float(ratio[0])
        if not torch.allclose(ratio, torch.full_like(ratio, r), rtol=1e-6, atol=0.0) or math.isclose(r, 1.0):
            return None
        return Finding(
            "parametro",
            "tamanho-do-passo",
            f"no lote {k}, com a perda, o gradiente e a taxa certos, o passo mudou os parâmetros "
            f"{br(r, '.4g')} vezes o que um `optimizer.step()` mudaria.",
        )

    def final_lr() -> Finding | None:
        if first() is not None or same(student["lr"], ref["lr"]):
            return None
        j = schedule_index(student["lr"])
        n = len(ref["trace"])
        if j is None:
            return None
        return Finding(
            "parametro",
            "taxa-no-fim",
            f"no fim da época, o agendador está no passo {j}, e não no passo {n} (um `scheduler.step()` por "
            "lote, depois do `optimizer.step()`).",
        )

    return stale, clipping, learning_rate, update, final_lr


def _expect_train(c: Check, fn: Callable, seed: int, max_norm: float, **setup) -> None:
    ref, ref_out = _reference_run(seed, max_norm, **setup)
    n = len(setup.get("sizes", (8, 8, 8, 3)))
    c.case(
        f"uma época de {_describe_setup(**setup)}, SGD com um LambdaLR, CrossEntropyLoss, "
        f"max_grad_norm={max_norm}, modelo recebido em modo de "
        f"{'treino' if setup.get('mode') == 'train' else 'avaliação'}"
        f"{' e com gradientes velhos' if setup.get('stale_grads', True) else ''}"
    )
    response = c.scenario("ch06.train_epoch", fn, seed=seed, max_norm=max_norm, **setup)
    _raise_for_tuple(c, response, "ch06.train_epoch", fn, seed=seed, max_norm=max_norm, **setup)
    data = _observed(c, response)

    # 1. O que as sondas viram: passos do otimizador e do agendador, em que ordem, e o modo do modelo.
    events = data["events"]
    order = [e[0] for e in events if e[0] in ("step", "sched")]
    steps, scheds = order.count("step"), order.count("sched")
    forwards = [e for e in events if e[0] == "forward"]
    still = _same(data["params"], Setup(seed, **setup).params())  # os parâmetros não mudaram?
    for ok, body, key in (
        (steps > 0, "`optimizer.step()` nunca foi chamado: os parâmetros não mudaram." if still else
         "`optimizer.step()` nunca foi chamado, mas os parâmetros mudaram: o passo foi dado à mão.",
         "sem_step" if still else "passo-sem-optimizer-step"),
        (steps == n, f"`optimizer.step()` chamado {steps} vez(es) para {n} lotes; esperava 1 por lote.",
         "um-step-por-lote"),
        (scheds > 0, "`scheduler.step()` nunca foi chamado.", "sem_agendador"),
        (scheds == n, f"`scheduler.step()` chamado {scheds} vez(es) para {n} lotes; esperava 1 por lote.",
         "agendador_por_epoca" if scheds == 1 else "um-agendador-por-lote"),
        (order == ["step", "sched"] * n, f"A ordem das chamadas foi {order[:6]}...; esperava step, sched, "
         "step, sched, ...", "agendador_antes" if order[:1] == ["sched"] else "ordem-step-agendador"),
        (all(len(e) > 1 and e[1] for e in forwards), "O modelo estava em modo de avaliação durante o forward "
         "do treino.", "sem_train"),
        (len(forwards) == n, f"O modelo foi chamado {len(forwards)} vez(es) para {n} lotes; esperava uma por "
         "lote (chame o modelo uma vez e reaproveite os logits para a perda e a acurácia).",
         "um-forward-por-lote"),
    ):  # fmt: skip
        c.expect(ok, body, TRAIN_MISTAKES.get(key), kind="propriedade", mistake=key)
    # 2. O rastro, passo a passo, contra o da referência; o erro conhecido, pelos parâmetros finais,
    # só se ele também reproduz um segundo caso (outra semente, outro recorte, outros lotes).
    student = _fingerprint(data)
    second: list = []
    try:
        c.first_difference(_trace_stages(student, ref, ref["params"].dtype))
    except CheckFailure as failure:  # o núcleo não aceita um diagnóstico provável em first_difference
        runs = _mistake_runs(seed, max_norm, **setup)  # só calculadas quando o aluno erra
        variant = _diagnose_params(student, runs, max_norm)
        if variant and not _confirm_variant(c, fn, variant, seed, max_norm, setup, second):
            variant = None
        if variant:
            found = {"mistake": variant, "cause": TRAIN_MISTAKES[variant]}
            hint = TRAIN_MISTAKES[variant]
        else:
            finding = c.find(*_trace_finders(student, ref, max_norm))
            found = {"kind": finding.kind, "mistake": finding.id} if finding else {}
            hint = finding.cause if finding else None
        info = {k: v for k, v in failure.data.items() if k not in ("exercise", "case", "id", "cause")}
        body = str(failure).split("\n", 2)[-1]
        if not variant:  # sem erro conhecido: a ordem certa, como lembrete (não é um diagnóstico)
            body += f"\nSem um erro conhecido que reproduza o seu laço aqui e noutro caso; {GENERIC_HINT}"
        c.fail(body, hint, **(info | found))

    # 3. As métricas devolvidas (um erro conhecido se confirma nas métricas de um segundo caso).
    def again():
        seed2, norm2, setup2 = _second_setup(seed, max_norm, setup)
        if not second:
            second.append(_train_run(c, fn, seed2, norm2, setup2))
        if second[0] is None:
            return None
        return second[0]["result"], _reference_run(seed2, norm2, **setup2)[1]

    _expect_metrics(c, data["result"], ref_out, again=again)


@TRAIN.visible_check
def check_train_epoch(fn: Callable) -> None:
    """Testes visíveis de ``train_epoch``: ordem das chamadas, rastro dos passos, métricas."""
    with TRAIN.check() as c:
        _expect_train(c, fn, seed=0, max_norm=0.5)
        _expect_train(c, fn, seed=1, max_norm=0.8, sizes=(5, 5, 5, 5, 2))


def _call_train(fn: Callable):
    """Uma chamada típica (só ao estudar, na recusa da referência)."""
    s = Setup(2)
    return fn(s.model, s.loader, s.optimizer, s.scheduler, s.loss_fn)


@TRAIN.hidden_check
def check_train_epoch_hidden(fn: Callable) -> None:
    """Testes ocultos: modelo que devolve tupla, float32, modelo já em modo de treino, outro recorte."""
    with TRAIN.check(hidden=True) as c:
        c.refuse_reference(fn, reference.train_epoch, lambda: _call_train(fn))
        k = c.seed_offset  # na correção, outros dados e outro modelo em cada entrega
        _expect_train(c, fn, seed=2 + k, max_norm=0.5, tuple_output=True)
        _expect_train(c, fn, seed=3 + k, max_norm=0.3, dtype=torch.float32, sizes=(4, 4, 1), mode="train")
        _expect_train(c, fn, seed=4 + k, max_norm=0.6, sizes=(6,), stale_grads=False)


# ================================================================ evaluate


def _reference_eval(s: Setup) -> list:
    """(perda, acertos, tamanho) de cada lote, em modo de avaliação e sem gradientes."""
    was, batches = s.model.training, []
    with torch.no_grad():
        for x, y in s.loader:
            out = s.model.eval()(x)
            logits = out[0] if isinstance(out, tuple) else out
            batches.append((s.loss_fn(logits, y).item(), (logits.argmax(-1) == y).sum().item(), len(y)))
    s.model.train(was)
    s.events.clear()
    return batches


def _same_grads(got: list, expected: list) -> bool:
    """Os gradientes que voltaram são, um a um, os que já estavam lá (nenhum apagado ou mudado)."""
    return len(got) == len(expected) and all(
        isinstance(g, torch.Tensor) and g.shape == e.shape and g.dtype == e.dtype and torch.equal(g, e)
        for g, e in zip(got, expected)
    )


def _expect_eval(c: Check, fn: Callable, seed: int, mode: str, **setup) -> None:
    s = Setup(seed, mode=mode, **setup)
    out = _reference_eval(s)
    before = s.params()
    grads_before = [p.grad.clone() for p in s.model.parameters()]
    c.case(
        f"evaluate com {_describe_setup(**setup)}, CrossEntropyLoss, modelo recebido em modo de "
        f"{'treino' if mode == 'train' else 'avaliação'}"
    )
    response = c.scenario("ch06.evaluate", fn, seed=seed, mode=mode, **setup)
    _raise_for_tuple(c, response, "ch06.evaluate", fn, seed=seed, mode=mode, **setup)
    data = _observed(c, response)

    events = data["events"]
    forwards, modes = [e for e in events if e[0] == "forward"], set(data["modes"])
    count = lambda kind: sum(1 for e in events if e[0] == kind)  # noqa: E731
    restore = "guarde `modo = model.training` no começo e chame `model.train(modo)` no fim"
    for ok, body, hint, key in (
        (len(forwards) > 0, "O modelo nunca foi chamado.", None, "modelo-chamado"),
        (not any(len(e) > 1 and e[1] for e in forwards), "O modelo estava em modo de TREINO durante a "
         "avaliação (o dropout continuaria ligado).", "chame `model.eval()` antes do laço de avaliação.",
         "modo-de-avaliacao"),
        (not any(len(e) > 2 and e[2] for e in forwards), "Os gradientes estavam ligados durante o forward da "
         "avaliação: o PyTorch guardou o grafo de cada lote à toa (memória e tempo).",
         "envolva o laço em `with torch.no_grad():` (ou `torch.inference_mode()`).",
         "sem-gradientes"),
        (count("backward") == 0 and count("step") == 0,
         "A avaliação chamou `backward()` ou `optimizer.step()`: avaliar não pode treinar.", None,
         "sem-treino"),
        (_same(data["params"], before), "Os parâmetros mudaram durante a avaliação.", None,
         "parametros-intactos"),
        (_same_grads(data["grads"], grads_before), "Os gradientes dos parâmetros mudaram durante a avaliação "
         "(houve `zero_grad` ou `backward`); a avaliação não deve mexer neles.", None, "gradientes-intactos"),
        (mode == "eval" or modes != {False}, "Depois da avaliação, o modelo ficou em modo de avaliação; ele "
         "tinha chegado em modo de treino.", f"{restore}.", "modo-restaurado"),
        (mode == "eval" or modes == {True}, "Depois da avaliação, só parte do modelo voltou ao modo de "
         "treino.",
         f"{restore} (atribuir `model.training = ...` muda só o módulo de fora, não os submódulos).",
         "modo-restaurado-em-todo-submodulo"),
        (mode == "train" or modes == {False}, "O modelo tinha chegado em modo de avaliação e saiu em modo de "
         "treino.", "restaure o modo ANTERIOR (`model.train(modo)`, com `modo = model.training` guardado no "
         "começo), em vez de chamar sempre `model.train()`.", "modo-anterior-restaurado"),
    ):  # fmt: skip
        c.expect(ok, body, hint, kind="propriedade", mistake=key)

    def again():
        """O resultado e os lotes de um segundo caso: outra semente e outros lotes, o mesmo modo."""
        setup2 = {**setup, "sizes": (5, 5, 5, 2)}
        s2 = Setup(seed + 97, mode=mode, **setup2)
        batches2 = _reference_eval(s2)
        response2 = c.scenario("ch06.evaluate", fn, seed=seed + 97, mode=mode, **setup2)
        value = response2.value
        if response2.error is not None or not isinstance(value, dict):
            return None
        return value.get("result"), batches2

    _expect_metrics(c, data["result"], out, per_example=True, again=again)


@EVAL.visible_check
def check_evaluate(fn: Callable) -> None:
    """Testes visíveis de ``evaluate``: modo de avaliação, sem gradientes, modo restaurado, métricas."""
    with EVAL.check() as c:
        _expect_eval(c, fn, seed=10, mode="train")
        _expect_eval(c, fn, seed=11, mode="eval", sizes=(5, 5, 5, 5, 2))


def _call_eval(fn: Callable):
    """Uma chamada típica (só ao estudar, na recusa da referência)."""
    s = Setup(12)
    return fn(s.model, s.loader, s.loss_fn)


@EVAL.hidden_check
def check_evaluate_hidden(fn: Callable) -> None:
    """Testes ocultos: modelo que devolve tupla, float32, um lote só."""
    with EVAL.check(hidden=True) as c:
        c.refuse_reference(fn, reference.evaluate, lambda: _call_eval(fn))
        k = c.seed_offset  # na correção, outros dados e outro modelo em cada entrega
        _expect_eval(c, fn, seed=12 + k, mode="train", tuple_output=True)
        _expect_eval(c, fn, seed=13 + k, mode="eval", dtype=torch.float32, sizes=(7, 7, 3))
        _expect_eval(c, fn, seed=14 + k, mode="train", sizes=(9,))
