"""Capítulo 7 (issue 31): erros que ninguém previu recebem um diagnóstico certo, e nunca um errado.

``generate``: a temperatura efetiva e quantos tokens o top-k mantém, ajustados às frequências e
conferidos num segundo sorteio com dois grupos de linhas; a posição dos logits e o argmin da gulosa;
a gulosa determinística; o tamanho do contexto que o modelo recebeu. ``kaplan_loss``: α_N e N_c
ajustados a uma lei de potência (ou a propriedade que quebra). ``attention_cost``: o fator e os
expoentes de a·n^p·d^q (ou como a conta cresce). Cada resposta errada roda aqui e num kernel de
verdade: mesma mensagem, mesmos dados (``kind``, ``mistake``, ``id``).
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from judge_helpers import StudentKernel
from test_judge_ch07 import RIGHT_SAMPLE, _generate, _indent

from transformer_course.exercises import all_exercises
from transformer_course.feedback import CheckFailure
from transformer_course.instructor.judge import judge_cell
from transformer_course.probe import LocalStudent, judging

CHAPTER = "07_familias"
OFFSET = 777
EXERCISES = {ex.name: ex for ex in all_exercises() if ex.chapter == CHAPTER}


def _sample(line: str) -> str:
    return _indent(line)


def _cost(flops: str, score_bytes: str) -> str:
    return (
        "def attention_cost(seq_len, d_model):\n"
        "    if seq_len <= 0 or d_model <= 0:\n        raise ValueError('tamanhos')\n"
        "    n, d = seq_len, d_model\n"
        f"    return {{'flops': {flops}, 'score_bytes': {score_bytes}}}"
    )


def _kaplan(expr: str) -> str:
    check = "    if n_params <= 0:\n        raise ValueError('positivo')\n"
    return f"def kaplan_loss(n_params):\n{check}    return {expr}"


# nome -> (exercício, código, tipo, id, trecho da frase)
FOUND = {
    "temperatura ao quadrado": (
        "generate",
        _generate(RIGHT_SAMPLE.replace("logits / temperature", "logits / temperature**2")),
        "parametro",
        "sorteio-temperatura",
        r"divididos duas vezes pela temperatura \(por T² = 0,25\)",
    ),
    "top-k com dois a mais": (
        "generate",
        _generate(RIGHT_SAMPLE.replace("min(top_k, logits.size(-1))", "min(top_k + 2, logits.size(-1))")),
        "parametro",
        "sorteio-top-k",
        r"seu top-k mantém 5 tokens, e não k = 3",
    ),
    "sorteio uniforme": (
        "generate",
        _generate(_sample("nxt = torch.randint(logits.size(-1), (logits.size(0), 1), generator=generator)")),
        "parametro",
        "sorteio-uniforme",
        r"seu sorteio ignora os logits",
    ),
    "penúltima posição": (
        "generate",
        _generate(RIGHT_SAMPLE).replace("model(context)[:, -1, :]", "model(context)[:, -2, :]"),
        "parametro",
        "posicao-dos-logits",
        r"os logits da posição -2 \(a penúltima\)",
    ),
    "argmin na gulosa": (
        "generate",
        _generate(RIGHT_SAMPLE, greedy="nxt = logits.argmin(dim=-1, keepdim=True)"),
        "parametro",
        "escolha-argmin",
        r"o token de MENOR logit",
    ),
    "segundo maior na gulosa": (
        "generate",
        _generate(RIGHT_SAMPLE, greedy="nxt = logits.topk(2, dim=-1).indices[:, 1:]"),
        "propriedade",
        "gulosa-argmax",
        r"no passo 1 \(linha \d\), depois do token \d+, o maior logit é o do token \d+",
    ),
    "temperatura 0 vira 1": (
        "generate",
        _generate(RIGHT_SAMPLE, greedy="nxt = torch.multinomial(logits.softmax(-1), 1)"),
        "propriedade",
        "gulosa-deterministica",
        r"duas chamadas iguais deveriam dar os mesmos tokens",
    ),
    "1 / temperatura": (
        "generate",
        _generate(RIGHT_SAMPLE, greedy="nxt = (logits * (1 / temperature)).argmax(dim=-1, keepdim=True)"),
        "excecao",
        "temperatura-zero-dividida",
        r"divididos por zero",
    ),
    "corte em max_len − 1": (
        "generate",
        _generate(RIGHT_SAMPLE).replace("ids[:, -max_len:]", "ids[:, -max_len + 1:]"),
        "parametro",
        "contexto-curto",
        r"seu corte guarda max_len − 1 tokens \(o modelo viu 3, e não max_len = 4\)",
    ),
    "contexto de 2 tokens": (
        "generate",
        _generate(RIGHT_SAMPLE).replace(
            "context = ids if max_len is None else ids[:, -max_len:]", "context = ids[:, -2:]"
        ),
        "parametro",
        "contexto-fixo",
        r"o modelo recebeu sempre 2 tokens \(um número fixo\), e não 7",
    ),
    "top-k só com temperatura 1": (  # passa nos visíveis; antes, às vezes ouvia "os k MENORES"
        "generate",
        _generate(
            _indent(
                "if temperature == 1.0 and top_k is not None:\n"
                "    kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]\n"
                '    logits = logits.masked_fill(logits < kth, float("-inf"))\n'
                "nxt = torch.multinomial((logits / temperature).softmax(-1), 1, generator=generator)"
            )
        ),
        "valores",
        "topk-ignorado",
        r"o top-k não foi aplicado",
    ),
    "α = 0,07": (
        "kaplan_loss",
        _kaplan("(8.8e13 / n_params) ** 0.07"),
        "parametro",
        "kaplan-expoente",
        r"α_N é 0,07",
    ),
    "N_c = 8·10¹³": (
        "kaplan_loss",
        _kaplan("(8e13 / n_params) ** 0.076"),
        "parametro",
        "kaplan-nc",
        r"N_c = 8 × 10¹³, e não 8,8 × 10¹³",
    ),
    "α e N_c": (
        "kaplan_loss",
        _kaplan("(8e12 / n_params) ** 0.08"),
        "parametro",
        "kaplan-expoente-e-nc",
        r"α_N = 0,08 e N_c = 8 × 10¹²",
    ),
    "o dobro da perda": (
        "kaplan_loss",
        _kaplan("2 * (8.8e13 / n_params) ** 0.076"),
        "parametro",
        "kaplan-nc",
        r"sua perda é a certa multiplicada por 2",
    ),
    "lei mais 0,1": (
        "kaplan_loss",
        _kaplan("(8.8e13 / n_params) ** 0.076 + 0.1"),
        "propriedade",
        "kaplan-lei-de-potencia",
        r"multiplicar N por 10 multiplica a perda sempre pelo mesmo fator",
    ),
    "log de N": (
        "kaplan_loss",
        _kaplan("math.log(n_params)"),
        "propriedade",
        "kaplan-decrescente",
        r"a perda deveria cair quando N cresce",
    ),
    "FLOPs 8·n²·d": (
        "attention_cost",
        _cost("8 * n * n * d", "4 * n * n"),
        "parametro",
        "flops-fator",
        r"seus FLOPs são 8·n²·d, e não 4·n²·d",
    ),
    "FLOPs sem d": (
        "attention_cost",
        _cost("4 * n * n", "4 * n * n"),
        "parametro",
        "flops-expoentes",
        r"seus FLOPs crescem como 4·n², e não como 4·n²·d",
    ),
    "16 bytes por número": (
        "attention_cost",
        _cost("4 * n * n * d", "16 * n * n"),
        "parametro",
        "bytes-por-elemento",
        r"16 bytes por número",
    ),
    "bytes com d": (
        "attention_cost",
        _cost("4 * n * n * d", "4 * n * n * d"),
        "parametro",
        "bytes-expoentes",
        r"crescem como 4·n²·d; a matriz de scores",
    ),
    "bits em vez de bytes": (
        "attention_cost",
        _cost("4 * n * n * d", "32 * n * n"),
        "valores",
        "bits",
        r"bits em vez de bytes",
    ),
    "bytes mais uma linha": (
        "attention_cost",
        _cost("4 * n * n * d", "4 * n * n + 4 * n"),
        "propriedade",
        "score_bytes-quadratico-em-n",
        r"dobrar seq_len deveria multiplicar `score_bytes` por 4",
    ),
}

# Guardas: respostas erradas e o diagnóstico que NÃO podem receber (com o que recebem, se algum).
GUARDS = {
    # Sorteio uniforme não é "softmax no eixo do lote": o segundo sorteio, com duas linhas de logits, separa.
    "sorteio uniforme": ("generate", FOUND["sorteio uniforme"][1], "LOTE", "sorteio-uniforme"),
    # O top-k que bloqueia o maior logit: nenhum erro conhecido nem parâmetro explica; só a propriedade.
    "top-k sem o maior": (
        "generate",
        _generate(
            _indent(
                "logits = logits / temperature\n"
                "if top_k is not None:\n"
                "    top = logits.topk(min(top_k + 1, logits.size(-1)), dim=-1)\n"
                '    keep = torch.full_like(logits, float("-inf")).scatter(-1, top.indices[:, 1:], 0.0)\n'
                "    logits = logits + keep\n"
                "nxt = torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)"
            )
        ),
        "coincide",
        "topk-so-os-k-maiores",
    ),
    # log₁₀ da lei não é "o logaritmo da lei" (o natural).
    "log10 da lei": (
        "kaplan_loss",
        _kaplan("math.log10((8.8e13 / n_params) ** 0.076)"),
        "logaritmo da lei",
        "kaplan-lei-de-potencia",
    ),
    # 4·n²·d + 1 não é um fator errado: não é a·n^p·d^q.
    "FLOPs mais um": (
        "attention_cost",
        _cost("4 * n * n * d + 1", "4 * n * n"),
        "FLOPs são",
        "flops-quadratico-em-n",
    ),
}


def _define(code: str, name: str):
    namespace = {"torch": torch, "math": math, "F": torch.nn.functional}
    exec(code, namespace)  # noqa: S102 - a resposta errada, local
    return namespace[name]


def _first_failure(exercise, answer) -> tuple[str, CheckFailure]:
    for cell in exercise.cells:
        check = exercise.hidden if cell.hidden else exercise.visible
        with judging(LocalStudent(), OFFSET if cell.hidden else 0, []):
            try:
                check(answer)
            except CheckFailure as failure:
                return cell.grade_id, failure
    raise AssertionError("a resposta errada passou em todas as verificações")


def _cause(failure: CheckFailure) -> str:
    text = str(failure)
    return text.split("Diagnóstico provável: ", 1)[-1] if "Diagnóstico provável" in text else ""


@pytest.mark.parametrize("name", list(FOUND))
def test_unanticipated_mistakes_get_a_confirmed_diagnosis(name):
    exercise, code, kind, key, pattern = FOUND[name]
    _, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert re.search(pattern, _cause(failure)), str(failure)
    assert (failure.data["kind"], failure.data["mistake"]) == (kind, key), failure.data
    assert failure.data["id"] == f"{exercise}/{kind}/{key}"


@pytest.mark.parametrize("name", list(GUARDS))
def test_a_mistake_is_never_named_when_it_does_not_reproduce_the_answer(name):
    exercise, code, wrong, right = GUARDS[name]
    _, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert wrong not in _cause(failure), str(failure)
    assert failure.data.get("mistake") == right, failure.data


@pytest.mark.parametrize("i", range(10))
def test_top_k_ignored_is_never_called_the_k_smallest(i):
    """Resto da issue 31: com top_k = 4 de 7 tokens, os tokens fora dos 4 maiores são todos dos 4 menores,
    e um top-k ignorado ouvia "os k MENORES" (6 de 10 entregas destas sementes). Agora só se nomeia um
    erro cujas frequências batem, aqui e num segundo sorteio."""
    from transformer_course.checks import ch07
    from transformer_course.instructor.judge import seed_offset

    exercise, code, _, _, _ = FOUND["top-k só com temperatura 1"]
    with judging(LocalStudent(), seed_offset(b"x", f"a{i}", "07", "h"), []):
        with pytest.raises(CheckFailure) as info:
            ch07.check_generate_hidden(_define(code, exercise))
    assert "MENORES" not in str(info.value)
    assert info.value.data.get("mistake") == "topk-ignorado", str(info.value)


def test_every_quiz_failure_says_which_answer():
    """O relatório da turma conta as respostas erradas do questionário pelo id: item e família dada."""
    from transformer_course.checks import ch07

    right = {"a": "encoder", "b": "encoder-decoder", "c": "decoder", "d": "encoder", "e": "encoder-decoder"}
    with pytest.raises(CheckFailure) as info:
        ch07.check_family_quiz_hidden(dict(right, c="encoder"), c="decoder")
    assert info.value.data["id"] == "respostas_quiz/resposta/c-encoder"
    with pytest.raises(CheckFailure) as info:
        ch07.check_family_quiz_hidden(dict(right, d="bert"), d="encoder")
    assert info.value.data["id"] == "respostas_quiz/resposta/d-fora-das-familias"


# ---------------------------------------------------------------- as respostas certas, com qualquer semente


@pytest.mark.parametrize("i", range(20))
def test_correct_answers_keep_full_marks_with_any_submission_seed(i):
    """Nenhum diagnóstico novo derruba uma resposta certa escrita de outro jeito (laço por linha, where,
    cumsum + rand do gerador, float64, exp/log), com as sementes ocultas de 20 entregas."""
    from test_ch07_checks import CORRECT_GENERATE, _cost, _kaplan

    from transformer_course.checks import ch07
    from transformer_course.instructor.judge import seed_offset

    offset = seed_offset(b"diagnostico", f"aluno-{i}", CHAPTER, "oculto")
    with judging(LocalStudent(), offset, []):
        for fn in CORRECT_GENERATE[1:]:
            ch07.check_generate_hidden(fn)
        ch07.check_kaplan_loss_hidden(_kaplan(lambda n: math.exp(0.076 * (math.log(8.8e13) - math.log(n)))))
        ch07.check_attention_cost_hidden(_cost(lambda n, d: 2 * n * n * d * 2, lambda n, d: n * n * 32 // 8))


# ---------------------------------------------------------------- no juiz: a mesma mensagem, os mesmos dados


@pytest.fixture(scope="module")
def kernel():
    with StudentKernel() as k:
        yield k


def _without_line(message: str) -> str:
    return re.sub(r" \(linha \d+: `[^`]*`\)", "", message)


REMOTE = [
    "temperatura ao quadrado",
    "top-k com dois a mais",
    "sorteio uniforme",
    "penúltima posição",
    "temperatura 0 vira 1",
    "corte em max_len − 1",
    "top-k só com temperatura 1",
    "α = 0,07",
    "lei mais 0,1",
    "16 bytes por número",
    "bytes mais uma linha",
]


@pytest.mark.parametrize("name", REMOTE)
def test_the_judge_gives_the_same_diagnosis(kernel, name):
    exercise, code, kind, key, _ = FOUND[name]
    grade_id, local = _first_failure(EXERCISES[exercise], _define(code, exercise))
    kernel.run(code)
    verdict = judge_cell(CHAPTER, grade_id, kernel.student(), OFFSET)
    assert verdict.status == "falhou" and verdict.points == 0, verdict.message
    assert _without_line(verdict.message) == _without_line(str(local))
    assert verdict.diagnosis["id"] == f"{exercise}/{kind}/{key}" == local.data["id"]
