"""O juiz remoto no capítulo 6: o laço de treino, a avaliação e o agendador do aluno rodam num kernel.

Cada resposta errada (erros que alunos cometem de verdade) é definida num kernel IPython de
verdade; o juiz, aqui, monta os casos, pede ao kernel os roteiros de ``scenarios/ch06.py`` e
compara só dados. A resposta errada perde os pontos das células que ela erra, com a mesma
mensagem que a verificação local (a do notebook, ao estudar) dá, e ganha os das células que ela
acerta.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from judge_helpers import StudentKernel

from transformer_course.exercises import all_exercises
from transformer_course.feedback import CheckFailure
from transformer_course.instructor.judge import judge_cell
from transformer_course.probe import LocalStudent, judging

CHAPTER = "06_treino_warmup"
OFFSET = 4242  # o deslocamento das sementes ocultas desta "entrega"

TRAIN = """
def train_epoch(model, loader, optimizer, scheduler, loss_fn, max_grad_norm=1.0):
    {train}
    total, n, correct, seen = 0.0, 0, 0, 0
    for x, y in loader:
        {zero}
        out = model(x)
        logits = {logits}
        loss = loss_fn(logits, y)
        loss.backward()
        {before_step}
        optimizer.step()
        {after_step}
        total, n = total + loss.item(), n + 1
        correct += (logits.argmax(-1) == y).sum().item()
        seen += len(y)
    return {{"loss": total / n, "accuracy": correct / seen}}
"""
RIGHT_TRAIN = dict(
    train="model.train()",
    zero="optimizer.zero_grad()",
    logits="out[0] if isinstance(out, tuple) else out",
    before_step="nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)",
    after_step="scheduler.step()",
)


def _train(**change) -> str:
    return TRAIN.format(**{**RIGHT_TRAIN, **change})


CLIP = "nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)"
WRONG_TRAIN = {
    "agendador antes do passo": _train(before_step=f"{CLIP}; scheduler.step()", after_step="pass"),
    "sem zero_grad": _train(zero="pass"),
    "recorte depois do passo": _train(before_step="pass", after_step=f"{CLIP}; scheduler.step()"),
    "sem model.train()": _train(train="pass"),
    "recorte com norma fixa": _train(before_step="nn.utils.clip_grad_norm_(model.parameters(), 1.0)"),
    "sem tupla": _train(logits="out"),  # só o teste oculto tem um modelo que devolve uma tupla
    "perda como tensor": _train().replace("total + loss.item()", "total + loss"),
}

EVAL = """
def evaluate(model, loader, loss_fn):
    was = model.training
    {eval}
    total, correct, seen, losses = 0.0, 0, 0, []
    with {ctx}:
        for x, y in loader:
            out = model(x)
            logits = out[0] if isinstance(out, tuple) else out
            loss = loss_fn(logits, y).item()
            total, seen = total + loss * len(y), seen + len(y)
            losses.append(loss)
            correct += (logits.argmax(-1) == y).sum().item()
    {restore}
    return {{"loss": {loss}, "accuracy": correct / seen}}
"""
RIGHT_EVAL = dict(eval="model.eval()", ctx="torch.no_grad()", restore="model.train(was)", loss="total / seen")


def _eval(**change) -> str:
    return EVAL.format(**{**RIGHT_EVAL, **change})


WRONG_EVAL = {
    "sem eval()": _eval(eval="pass"),
    "sem no_grad": _eval(ctx="torch.enable_grad()"),
    "média simples das perdas dos lotes": _eval(loss="sum(losses) / len(losses)"),
    "modo não restaurado": _eval(restore="pass"),
    "sempre volta a treino": _eval(restore="model.train()"),
}

SCHED = """
from torch.optim.lr_scheduler import LambdaLR

def make_warmup_scheduler(optimizer, d_model, warmup_steps, factor=1.0):
    def noam(step):
        step = max(step, 1)
        return {factor} * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
    {before}
    scheduler = LambdaLR(optimizer, noam)
    {after}
    return {returned}
"""
RIGHT_SCHED = dict(
    factor="factor",
    before='for g in optimizer.param_groups: g["lr"] = 1.0',
    after="pass",
    returned="scheduler",
)


def _sched(**change) -> str:
    return SCHED.format(**{**RIGHT_SCHED, **change})


WRONG_SCHED = {
    "taxa base mantida": _sched(before="pass"),
    "lr = 1.0 depois do LambdaLR": _sched(
        before="pass", after='for g in optimizer.param_groups: g["lr"] = 1.0'
    ),
    "factor ignorado": _sched(factor="1.0"),
    "um step a mais": _sched(after="scheduler.step()"),
    "só o primeiro grupo": _sched(before='optimizer.param_groups[0]["lr"] = 1.0'),  # só o oculto tem 2 grupos
    "a função, não o agendador": _sched(returned="noam"),
}

WRONG = {
    "train_epoch": WRONG_TRAIN,
    "evaluate": WRONG_EVAL,
    "make_warmup_scheduler": WRONG_SCHED,
}
CASES = [(name, label) for name, answers in WRONG.items() for label in sorted(answers)]


def _without_line(message: str) -> str:
    """A mensagem sem a linha do código do aluno (no teste local, o código vem de uma string)."""
    return re.sub(r" \(linha \d+: `[^`]*`\)", "", message)


def _local_failures(exercise, code: str) -> dict[str, str]:
    """As mensagens da verificação local (a do notebook) para a resposta ``code``, por célula."""
    namespace = {"__name__": "__main__", "torch": torch, "math": math, "nn": torch.nn}
    exec(code, namespace)  # noqa: S102 - a resposta errada, local, para comparar
    failures = {}
    for cell in exercise.cells:
        check = exercise.hidden if cell.hidden else exercise.visible
        with judging(LocalStudent(), OFFSET if cell.hidden else 0, []):
            try:
                check(namespace[exercise.name])
            except CheckFailure as failure:
                failures[cell.grade_id] = str(failure)
    return failures


@pytest.fixture(scope="module")
def kernel():
    with StudentKernel() as k:
        yield k


@pytest.mark.parametrize(("name", "label"), CASES, ids=[f"{n}:{lbl}" for n, lbl in CASES])
def test_wrong_answers_lose_points_with_the_local_message(kernel, name, label):
    code = WRONG[name][label]
    exercise = next(ex for ex in all_exercises() if ex.chapter == CHAPTER and ex.name == name)
    local = _local_failures(exercise, code)
    assert local, f"{name} ({label}): a resposta errada passou em todas as verificações locais"
    kernel.run(code)
    for cell in exercise.cells:
        verdict = judge_cell(CHAPTER, cell.grade_id, kernel.student(), OFFSET)
        assert verdict.requests > 0
        if cell.grade_id in local:
            assert verdict.status == "falhou", (cell.grade_id, verdict.message)
            assert verdict.points == 0
            assert _without_line(verdict.message) == _without_line(local[cell.grade_id])
        else:
            assert verdict.status == "passou", (cell.grade_id, verdict.message)
            assert verdict.points == cell.points


@pytest.mark.parametrize(
    ("name", "label", "hidden", "expected"),
    [
        ("train_epoch", "agendador antes do passo", False, "ANTES de `optimizer.step()`"),
        ("train_epoch", "sem zero_grad", False, "SEM `zero_grad()`"),
        ("train_epoch", "recorte depois do passo", False, "DEPOIS de `optimizer.step()`"),
        ("train_epoch", "sem model.train()", False, "não chamou `model.train()`"),
        ("train_epoch", "recorte com norma fixa", False, "norma 1.0 fixa"),
        ("train_epoch", "sem tupla", True, "uma tupla (logits, ...)"),
        ("train_epoch", "perda como tensor", False, "ligado ao grafo"),
        ("evaluate", "sem eval()", False, "modo de TREINO durante a avaliação"),
        ("evaluate", "sem no_grad", False, "gradientes estavam ligados"),
        ("evaluate", "média simples das perdas dos lotes", False, "a avaliação pede a média por exemplo"),
        ("evaluate", "modo não restaurado", False, "ficou em modo de avaliação"),
        ("evaluate", "sempre volta a treino", False, "saiu em modo de treino"),
        ("make_warmup_scheduler", "taxa base mantida", False, "taxa base do otimizador mantida"),
        ("make_warmup_scheduler", "lr = 1.0 depois do LambdaLR", False, "DEPOIS de criar o `LambdaLR`"),
        ("make_warmup_scheduler", "factor ignorado", False, "`factor` ignorado"),
        ("make_warmup_scheduler", "um step a mais", False, "deslocada um passo para a frente"),
        ("make_warmup_scheduler", "só o primeiro grupo", True, "só no primeiro grupo"),
        (
            "make_warmup_scheduler",
            "a função, não o agendador",
            False,
            "Esperava um `torch.optim.lr_scheduler",
        ),
    ],
)
def test_each_wrong_answer_gets_its_diagnosis(name, label, hidden, expected):
    """A mensagem (a mesma do juiz, pelo teste acima) nomeia o erro de cada resposta."""
    exercise = next(ex for ex in all_exercises() if ex.chapter == CHAPTER and ex.name == name)
    cell = next(c for c in exercise.cells if c.hidden == hidden)
    local = _local_failures(exercise, WRONG[name][label])
    assert expected in local.get(cell.grade_id, ""), local
    # Um erro que só o teste oculto vê (dois grupos, modelo que devolve tupla) passa no visível.
    assert {c.grade_id for c in exercise.cells if c.hidden or not hidden} == set(local), local


@pytest.mark.parametrize(
    "poison",
    [
        lambda d: {**d, "events": [("forward", torch.ones(3), True)] * 4},  # bool(tensor) quebraria o juiz
        lambda d: {**d, "trace": [(1.0, 2.0)]},
        lambda d: {**d, "params": "parâmetros"},
        lambda d: {k: v for k, v in d.items() if k != "grads"},
    ],
    ids=["eventos com tensores", "rastro curto", "parâmetros em texto", "sem gradientes"],
)
def test_probe_data_out_of_schema_is_a_failure_not_a_crash(monkeypatch, poison):
    """Um kernel adulterado que devolve o roteiro fora do esquema perde os pontos (nunca quebra o juiz)."""
    from transformer_course import training
    from transformer_course.checks import ch06
    from transformer_course.scenarios import ch06 as scenarios

    for name in ("train_epoch", "evaluate"):  # só o lado do aluno (o roteiro); o juiz monta o seu Setup
        scenario = getattr(scenarios, name)

        def poisoned(request, namespace, objects, scenario=scenario):
            fields = scenario(request, namespace, objects)
            return {**fields, "value": poison(fields["value"])}

        monkeypatch.setattr(scenarios, name, poisoned)
    for check, answer in (
        (ch06.check_train_epoch, training.train_epoch),
        (ch06.check_evaluate, training.evaluate),
    ):
        with pytest.raises(CheckFailure, match="fora do esquema do roteiro"):
            check(answer)
