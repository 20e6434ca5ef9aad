"""Capítulo 2 (issue 31): erros que ninguém previu recebem um diagnóstico certo, e nunca um errado.

Cada resposta errada abaixo é código de verdade (o que um aluno escreveria), executado aqui e num
kernel de verdade (o lado do aluno no juiz). A verificação local e o juiz remoto dão a mesma mensagem,
e os dados do diagnóstico (``kind``, ``mistake``, ``id``) dizem o que foi achado: um parâmetro ajustado
(o expoente da escala, o eixo do softmax, o valor das posições bloqueadas, a base do logaritmo) ou a
propriedade da atenção que quebra. As "guardas" são respostas erradas que NÃO podem receber um
diagnóstico que não é o delas (um fator fixo 1/8 não é "dividido por d_k" só porque d_k = 8).
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from judge_helpers import StudentKernel

from transformer_course.checks import ch02
from transformer_course.exercises import all_exercises
from transformer_course.feedback import CheckFailure
from transformer_course.instructor.judge import judge_cell, seed_offset
from transformer_course.probe import LocalStudent, judging

CHAPTER = "02_atencao"
OFFSET = 4242
EXERCISES = {ex.name: ex for ex in all_exercises() if ex.chapter == CHAPTER}


def _sdpa(
    scores: str = "Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))", mask: str = "", rest: str = ""
) -> str:
    """Uma ``scaled_dot_product_attention`` com uma linha trocada (os scores, a máscara ou o fim)."""
    mask = mask or 'scores = scores.masked_fill(~mask, float("-inf"))'
    rest = rest or "weights = scores.softmax(dim=-1)\n    return weights @ V, weights"
    return f"""
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = {scores}
    if mask is not None:
        {mask}
    {rest}
"""


# nome -> (código, tipo, id do diagnóstico, trecho da frase)
SDPA_FOUND = {
    "escala d_k^(-1/4)": (
        _sdpa("Q @ K.transpose(-2, -1) / Q.size(-1) ** 0.25"),
        "parametro",
        "fator-de-escala",
        r"d_k\^\(−1/4\), não d_k\^\(−1/2\)",
    ),
    "escala fixa 1/8 (d_k de um modelo grande)": (
        _sdpa("Q @ K.transpose(-2, -1) * 0.125"),
        "parametro",
        "fator-de-escala",
        r"0,125, um número fixo",
    ),
    "escala pelo número de consultas": (
        _sdpa("Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-2))"),
        "parametro",
        "fator-de-escala",
        r"T_q\^\(−1/2\) \(o número de consultas\)",
    ),
    "softmax no eixo do lote": (
        _sdpa(rest="weights = scores.softmax(dim=0)\n    return weights @ V, weights"),
        "parametro",
        "eixo-do-softmax",
        r"eixo 0 \(do lote\)",
    ),
    "máscara com -5": (
        _sdpa(mask="scores = scores.masked_fill(~mask, -5.0)"),
        "parametro",
        "mascara-valor-finito",
        r"recebem o score -5, um número finito",
    ),
    "máscara somada (-5)": (
        _sdpa(mask="scores = scores + (~mask) * -5.0"),
        "parametro",
        "mascara-soma-finita",
        r"você somou -5 aos scores das posições bloqueadas",
    ),
    "máscara com -100 (pesos 10⁻⁴⁴)": (
        _sdpa(mask="scores = scores.masked_fill(~mask, -100.0)"),
        "parametro",
        "mascara-valor-finito",
        r"recebem o score -100",
    ),
    "normaliza a matriz inteira": (
        _sdpa(
            rest="e = scores.exp()\n    weights = e / e.sum(dim=(-2, -1), keepdim=True)\n"
            "    return weights @ V, weights"
        ),
        "propriedade",
        "linhas-somam-1",
        r"cada linha dos pesos deve somar 1",
    ),
    "saída reescalada": (
        _sdpa(
            rest="weights = scores.softmax(dim=-1)\n    return weights @ V / math.sqrt(V.size(-1)), weights"
        ),
        "propriedade",
        "saida-igual-pesos-vezes-v",
        r"sua saída não é `weights @ V`",
    ),
    "viés de posição nas chaves": (
        _sdpa("Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1)) + 0.3 * torch.arange(K.size(-2))"),
        "propriedade",
        "permutar-chaves",
        r"ao permutar as chaves",
    ),
    "consulta pesada pela posição": (
        _sdpa("(Q * torch.arange(1, Q.size(-2) + 1)[:, None]) @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))"),
        "propriedade",
        "permutar-consultas",
        r"ao permutar as consultas",
    ),
    "chaves médias do lote": (
        _sdpa("Q @ K.mean(0, keepdim=True).transpose(-2, -1) / math.sqrt(Q.size(-1))"),
        "propriedade",
        "lote-independente",
        r"o exemplo 0 mudou",
    ),
    "atenção de cossenos": (
        _sdpa("torch.nn.functional.normalize(Q, dim=-1) @ K.transpose(-2, -1)"),
        "propriedade",
        "depende-so-de-qk",
        r"multiplicar Q por 2 e dividir K por 2",
    ),
    "K.T em 3-D": (
        _sdpa("Q @ K.T / math.sqrt(Q.size(-1))"),
        "excecao",
        "transposta-de-todos-os-eixos",
        r"`K\.T` inverte a ordem de TODOS os eixos",
    ),
    "einsum só para 3-D": (
        _sdpa('torch.einsum("bqd,bkd->bqk", Q, K) / math.sqrt(Q.size(-1))'),
        "excecao",
        "so-3d",
        r"só com tensores 3-D",
    ),
    "d_k = Q.size(2)": (
        _sdpa("Q @ K.transpose(-2, -1) / math.sqrt(Q.size(2))"),
        "parametro",
        "fator-de-escala",
        r"T_q\^\(−1/2\)",  # em 4-D, o eixo 2 de Q é o das consultas
    ),
}

ENTROPY_FOUND = {
    "log10": (
        "def attention_entropy(weights):\n"
        "    return -torch.special.xlogy(weights, weights).sum(-1) / math.log(10)",
        "parametro",
        "base-do-logaritmo",
        r"logaritmo na base 10",
    ),
    "fator 3": (
        "def attention_entropy(weights):\n    return -3 * torch.special.xlogy(weights, weights).sum(-1)",
        "parametro",
        "fator-constante",
        r"multiplicada por 3",
    ),
    "softmax de novo": (
        "def attention_entropy(weights):\n    p = weights.softmax(-1)\n    return -(p * p.log()).sum(-1)",
        "propriedade",
        "entropia-one-hot",
        r"uma linha one-hot com 3 posições tem entropia 0",
    ),
    "pesos ao quadrado": (
        "def attention_entropy(weights):\n"
        "    return -(weights * torch.special.xlogy(weights, weights)).sum(-1)",
        "propriedade",
        "entropia-uniforme",
        r"uma linha uniforme com 4 posições tem entropia 1,386",
    ),
    "mais 0,1": (
        "def attention_entropy(weights):\n    return 0.1 - torch.special.xlogy(weights, weights).sum(-1)",
        "propriedade",
        "entropia-no-maximo-ln-tk",
        r"no máximo ln 4",
    ),
}

# Guardas: respostas erradas e o diagnóstico que elas NÃO podem receber (o certo delas, quando há).
SDPA_GUARDS = {
    # d_k = 8 no primeiro caso: 1/8 coincide com "dividida por d_k" ali, mas não num caso com outro d_k.
    "escala fixa 1/8": (
        _sdpa("Q @ K.transpose(-2, -1) * 0.125"),
        "por d_k em vez de √d_k",
        "fator-de-escala",
    ),
    # Outra exceção em 4-D não é "só funciona em 3-D".
    "quebra em 4-D por outro motivo": (
        _sdpa(
            rest='if Q.dim() == 4:\n        raise RuntimeError("não sei o que fazer")\n'
            "    weights = scores.softmax(dim=-1)\n    return weights @ V, weights"
        ),
        "3-D",
        None,
    ),
    # Viés de posição: nem a escala nem o eixo explicam.
    "viés de posição": (
        _sdpa("Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1)) + 0.3 * torch.arange(K.size(-2))"),
        "fator de escala",
        "permutar-chaves",
    ),
}
ENTROPY_GUARDS = {
    # Numa linha só, "H + 10% da média das linhas" é 1,1 × H; com outras linhas, não é fator nenhum.
    "mistura as linhas": (
        "def attention_entropy(weights):\n"
        "    h = -torch.special.xlogy(weights, weights).sum(-1)\n    return h + 0.1 * h.mean()",
        "multiplicada por",
        "entropia-no-maximo-ln-tk",
    ),
}


def _define(code: str, name: str):
    namespace = {"torch": torch, "math": math, "F": torch.nn.functional}
    exec(code, namespace)  # noqa: S102 - a resposta errada, local
    return namespace[name]


def _first_failure(exercise, answer, offset=OFFSET) -> tuple[str, CheckFailure]:
    """A primeira célula (visível, depois oculta) em que a resposta falha, e a falha."""
    for cell in exercise.cells:
        check = exercise.hidden if cell.hidden else exercise.visible
        with judging(LocalStudent(), offset if cell.hidden else 0, []):
            try:
                check(answer)
            except CheckFailure as failure:
                return cell.grade_id, failure
    raise AssertionError("a resposta errada passou em todas as verificações")


def _cause(failure: CheckFailure) -> str:
    return (
        str(failure).split("Diagnóstico provável: ", 1)[-1] if "Diagnóstico provável" in str(failure) else ""
    )


FOUND = [("scaled_dot_product_attention", n, *v) for n, v in SDPA_FOUND.items()]
FOUND += [("attention_entropy", n, *v) for n, v in ENTROPY_FOUND.items()]


@pytest.mark.parametrize(
    ("exercise", "name", "code", "kind", "key", "pattern"), FOUND, ids=[f[1] for f in FOUND]
)
def test_unanticipated_mistakes_get_a_confirmed_diagnosis(exercise, name, code, kind, key, pattern):
    _, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert re.search(pattern, _cause(failure)), str(failure)
    assert failure.data["kind"] == kind, failure.data
    assert failure.data["mistake"] == key, failure.data
    assert failure.data["id"] == f"{exercise}/{kind}/{key}"
    assert failure.data["cause"] == _cause(failure)


GUARDS = [("scaled_dot_product_attention", n, *v) for n, v in SDPA_GUARDS.items()]
GUARDS += [("attention_entropy", n, *v) for n, v in ENTROPY_GUARDS.items()]


@pytest.mark.parametrize(("exercise", "name", "code", "wrong", "right"), GUARDS, ids=[g[1] for g in GUARDS])
def test_a_mistake_is_never_named_when_it_does_not_reproduce_the_answer(exercise, name, code, wrong, right):
    _, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert wrong not in _cause(failure), str(failure)
    assert failure.data.get("mistake") == right, failure.data


def test_the_scale_exponent_is_confirmed_with_other_sizes():
    """O fator é ajustado num caso e conferido noutro com outros d_k, d_v, T_q e T_k: d_k^(−0,3) tem nome,
    um fator que muda sem lei (d_k + tamanho do lote) não tem."""
    exercise = EXERCISES["scaled_dot_product_attention"]
    _, failure = _first_failure(
        exercise,
        _define(_sdpa("Q @ K.transpose(-2, -1) * Q.size(-1) ** -0.3"), "scaled_dot_product_attention"),
    )
    assert "d_k^(−0,3)" in _cause(failure)
    lawless = _sdpa("Q @ K.transpose(-2, -1) / (Q.size(-1) + Q.size(0))")
    _, failure = _first_failure(exercise, _define(lawless, "scaled_dot_product_attention"))
    assert failure.data.get("mistake") != "fator-de-escala", str(failure)


# ---------------------------------------------------------------- as respostas certas, com qualquer semente


@pytest.mark.parametrize("i", range(20))
def test_correct_answers_keep_full_marks_with_any_submission_seed(i):
    """Nenhum diagnóstico novo derruba uma resposta certa escrita de outro jeito (einsum, laços, where,
    -1e9, float64), com as sementes ocultas de 20 entregas."""
    from test_ch02_checks import (
        entropy_clamp,
        entropy_special,
        entropy_where,
        sdpa_einsum_where,
        sdpa_float64_inside,
        sdpa_loops,
        sdpa_masked_fill_eq0,
    )

    offset = seed_offset(b"diagnostico", f"aluno-{i}", CHAPTER, "oculto")
    with judging(LocalStudent(), offset, []):
        for fn in (sdpa_einsum_where, sdpa_masked_fill_eq0, sdpa_float64_inside, sdpa_loops):
            ch02.check_scaled_dot_product_attention_hidden(fn)
        for fn in (entropy_where, entropy_clamp, entropy_special):
            ch02.check_attention_entropy_hidden(fn)


# ---------------------------------------------------------------- no juiz: a mesma mensagem, os mesmos dados


@pytest.fixture(scope="module")
def kernel():
    with StudentKernel() as k:
        yield k


def _without_line(message: str) -> str:
    return re.sub(r" \(linha \d+: `[^`]*`\)", "", message)


REMOTE = [
    "escala d_k^(-1/4)",
    "escala fixa 1/8 (d_k de um modelo grande)",
    "softmax no eixo do lote",
    "máscara com -5",
    "normaliza a matriz inteira",
    "viés de posição nas chaves",
    "atenção de cossenos",
    "einsum só para 3-D",
    "log10",
    "softmax de novo",
]


@pytest.mark.parametrize("name", REMOTE)
def test_the_judge_gives_the_same_diagnosis(kernel, name):
    exercise, _, code, kind, key, _ = next(f for f in FOUND if f[1] == name)
    grade_id, local = _first_failure(EXERCISES[exercise], _define(code, exercise))
    kernel.run(code)
    verdict = judge_cell(CHAPTER, grade_id, kernel.student(), OFFSET)
    assert verdict.status == "falhou" and verdict.points == 0, verdict.message
    assert _without_line(verdict.message) == _without_line(str(local))
    assert verdict.diagnosis["id"] == f"{exercise}/{kind}/{key}" == local.data["id"]
