"""Capítulo 7 no juiz remoto: respostas erradas perdem os pontos com a mesma mensagem da verificação local.

Cada resposta errada é definida num kernel de verdade (o lado do aluno) com o nome que o notebook
usa; o juiz roda aqui, com ``RemoteStudent``, e o veredito de cada célula (visível e oculta, com a
semente de uma entrega) tem de ser o mesmo que a verificação local dá ao aluno ao estudar: mesma
situação, 0 ponto, mesma mensagem, com o diagnóstico esperado. O modelo de brinquedo de
``generate`` é construído do lado do aluno; o questionário volta como dados.
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

CHAPTER = "07_familias"
OFFSET = 777  # o deslocamento das sementes ocultas desta "entrega"
EXERCISES = {ex.name: ex for ex in all_exercises() if ex.chapter == CHAPTER}


GREEDY = "nxt = logits.argmax(dim=-1, keepdim=True)"


def _generate(sample: str, greedy: str = GREEDY, crop: bool = True) -> str:
    """Um ``generate`` completo com o sorteio (e a escolha gulosa) dados: um erro de cada vez."""
    context = "ids[:, -max_len:]" if crop else "ids"
    return f"""
def generate(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    if max_new_tokens < 0 or temperature < 0:
        raise ValueError("argumento inválido")
    max_len = getattr(model, "max_len", None)
    ids = prompt_ids
    for _ in range(max_new_tokens):
        context = ids if max_len is None else {context}
        logits = model(context)[:, -1, :]
        if temperature == 0:
            {greedy}
        else:
{sample}
        ids = torch.cat([ids, nxt], dim=1)
    return ids
"""


def _indent(code: str) -> str:
    return "\n".join(" " * 12 + line for line in code.strip().splitlines())


RIGHT_SAMPLE = _indent("""
logits = logits / temperature
if top_k is not None:
    kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]
    logits = logits.masked_fill(logits < kth, float("-inf"))
nxt = torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)
""")

WRONG_GENERATE = {
    # (código, diagnóstico que a mensagem deve trazer; None: a mensagem não arrisca um diagnóstico)
    "sem temperatura": (
        _generate(RIGHT_SAMPLE.replace("logits = logits / temperature", "pass")),
        "temperatura ignorada",
    ),
    "top-k com um a mais": (
        _generate(
            RIGHT_SAMPLE.replace(
                "logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]",
                "logits.sort(dim=-1, descending=True).values[:, min(top_k, logits.size(-1) - 1), None]",
            )
        ),
        "k \\+ 1 tokens",
    ),
    "top-k com um a menos": (
        _generate(RIGHT_SAMPLE.replace("logits < kth", "logits <= kth")),
        "k − 1 tokens",
    ),
    "gerador global": (
        _generate(RIGHT_SAMPLE.replace(", generator=generator)", ")")),
        "gerador GLOBAL",
    ),
    "sem cortar o contexto": (_generate(RIGHT_SAMPLE, crop=False), "não foi cortado"),
    "argmax no eixo do lote": (
        _generate(RIGHT_SAMPLE, greedy="nxt = logits.argmax(dim=0, keepdim=True)"),
        "`argmax` no eixo do LOTE",
    ),
    "temperatura 0 dividida": (
        _generate(RIGHT_SAMPLE, greedy="nxt = torch.multinomial((logits / temperature).softmax(-1), 1)"),
        "divididos por zero",
    ),
    "outra exceção na gulosa": (
        _generate(RIGHT_SAMPLE, greedy="nxt = logits.argmax(dim=-1, keepdim=True)[:, :, 0]"),
        None,
    ),
    "stub": ("def generate(*args, **kwargs):\n    raise NotImplementedError()", "não implementado"),
}

WRONG_OTHERS = {
    "attention_cost": {
        "só QKᵀ": (
            "def attention_cost(seq_len, d_model):\n"
            "    if seq_len <= 0 or d_model <= 0:\n        raise ValueError('tamanhos')\n"
            "    return {'flops': 2 * seq_len**2 * d_model, 'score_bytes': 4 * seq_len**2}",
            "faltou o produto pesos·V",
        ),
        "bytes em float64": (
            "def attention_cost(seq_len, d_model):\n"
            "    return {'flops': 4 * seq_len**2 * d_model, 'score_bytes': 8 * seq_len**2}",
            "float64",
        ),
    },
    "kaplan_loss": {
        "invertida": (
            "def kaplan_loss(n_params):\n"
            "    if n_params <= 0:\n        raise ValueError('positivo')\n"
            "    return (n_params / 8.8e13) ** 0.076",
            "invertida",
        ),
        "tensor": (
            "def kaplan_loss(n_params):\n    return torch.tensor(8.8e13 / n_params).pow(0.076)",
            r"\.item\(\)",
        ),
    },
}

RIGHT_QUIZ = {"a": "encoder", "b": "encoder-decoder", "c": "decoder", "d": "encoder", "e": "encoder-decoder"}
WRONG_QUIZ = {
    # as respostas, e o que cada célula do questionário deve dizer
    "item c errado": (dict(RIGHT_QUIZ, c="encoder"), {"test_quiz_hidden_c": "Item 'c': a família 'encoder'"}),
    "itens sem resposta": (
        dict(RIGHT_QUIZ, a=..., e=...),
        {
            "test_quiz": "não respondeu o item 'a'",
            "test_quiz_hidden_a": "não respondeu o item 'a'",
            "test_quiz_hidden_e": "não respondeu o item 'e'",
        },
    ),
    "família inventada": (
        dict(RIGHT_QUIZ, d="bert"),
        {"test_quiz": "resposta 'bert' não é uma das famílias", "test_quiz_hidden_d": "'bert' não é uma"},
    ),
}


def _without_line(message: str) -> str:
    """A mensagem sem a linha do código do aluno (no teste local, o código vem de uma string)."""
    return re.sub(r" \(linha \d+: `[^`]*`\)", "", message)


def _local_failures(exercise, answer, kwargs_of) -> dict[str, str]:
    """As mensagens da verificação local (a do aluno ao estudar), por célula que falha."""
    failures = {}
    for cell in exercise.cells:
        check = exercise.hidden if cell.hidden else exercise.visible
        with judging(LocalStudent(), OFFSET if cell.hidden else 0, []):
            try:
                check(answer, **kwargs_of(cell.grade_id))
            except CheckFailure as failure:
                failures[cell.grade_id] = str(failure)
    return failures


def _compare(kernel, exercise, local: dict[str, str], kwargs_of) -> dict[str, str]:
    """O juiz remoto em cada célula: falha onde a local falha, com a mesma mensagem; passa onde ela passa."""
    remote = {}
    for cell in exercise.cells:
        verdict = judge_cell(CHAPTER, cell.grade_id, kernel.student(), OFFSET, kwargs_of(cell.grade_id))
        assert verdict.requests > 0
        if cell.grade_id in local:
            assert verdict.status in ("falhou", "nao_implementado"), (cell.grade_id, verdict.message)
            assert verdict.points == 0
            assert _without_line(verdict.message) == _without_line(local[cell.grade_id])
            remote[cell.grade_id] = verdict.message
        else:
            assert verdict.status == "passou", (cell.grade_id, verdict.message)
            assert verdict.points == cell.points
    return remote


def _define(code: str, name: str):
    namespace = {"torch": torch, "math": math, "F": torch.nn.functional}
    exec(code, namespace)  # noqa: S102 - a resposta errada, local, para comparar com o juiz
    return namespace[name]


@pytest.fixture(scope="module")
def kernel():
    with StudentKernel() as k:
        yield k


def _no_kwargs(grade_id: str) -> dict:
    return {}


@pytest.mark.parametrize("name", list(WRONG_GENERATE))
def test_wrong_generate_loses_points_remotely_with_the_local_message(kernel, name):
    code, diagnosis = WRONG_GENERATE[name]
    exercise = EXERCISES["generate"]
    local = _local_failures(exercise, _define(code, "generate"), _no_kwargs)
    assert local, f"{name}: a resposta errada passou em todas as verificações locais"
    kernel.run(code)
    remote = _compare(kernel, exercise, local, _no_kwargs)
    first = remote.get("test_generate") or remote["test_generate_hidden"]
    if diagnosis is None:
        assert "Diagnóstico provável" not in first, first
    else:
        assert re.search(diagnosis, first), first


@pytest.mark.parametrize("exercise_name, name", [(e, n) for e, cases in WRONG_OTHERS.items() for n in cases])
def test_wrong_formulas_lose_points_remotely_with_the_local_message(kernel, exercise_name, name):
    code, diagnosis = WRONG_OTHERS[exercise_name][name]
    exercise = EXERCISES[exercise_name]
    local = _local_failures(exercise, _define(code, exercise_name), _no_kwargs)
    kernel.run(code)
    remote = _compare(kernel, exercise, local, _no_kwargs)
    assert any(re.search(diagnosis, message) for message in remote.values()), remote


def _quiz_kwargs(grade_id: str) -> dict:
    """Como a célula oculta de cada item passa a resposta certa (``a="encoder"``)."""
    key = grade_id.rsplit("_", 1)[-1]
    return {key: RIGHT_QUIZ[key]} if grade_id.startswith("test_quiz_hidden_") else {}


@pytest.mark.parametrize("name", list(WRONG_QUIZ))
def test_wrong_quiz_loses_exactly_its_items_remotely(kernel, name):
    answers, expected = WRONG_QUIZ[name]
    exercise = EXERCISES["respostas_quiz"]
    local = _local_failures(exercise, lambda: dict(answers), _quiz_kwargs)
    assert set(local) == set(expected), local
    kernel.run(f"def respostas_quiz():\n    return {answers!r}")
    remote = _compare(kernel, exercise, local, _quiz_kwargs)
    for grade_id, fragment in expected.items():
        assert fragment in remote[grade_id], remote[grade_id]


def test_quiz_stub_and_missing_answer_remotely(kernel):
    exercise = EXERCISES["respostas_quiz"]
    kernel.run("def respostas_quiz():\n    raise NotImplementedError()")
    for cell in exercise.cells:
        verdict = judge_cell(CHAPTER, cell.grade_id, kernel.student(), OFFSET, _quiz_kwargs(cell.grade_id))
        assert verdict.status == "nao_implementado" and verdict.points == 0, verdict.message
    kernel.run("respostas_quiz = 'encoder'")
    verdict = judge_cell(CHAPTER, "test_quiz", kernel.student(), 0)
    assert verdict.status == "falhou" and "Esperava um dicionário; veio str 'encoder'" in verdict.message
