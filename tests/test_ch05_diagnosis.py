"""Capítulo 5 (issue 31): erros de máscara que ninguém previu recebem um diagnóstico certo, e nunca um errado.

Cada resposta errada abaixo é código de verdade (o que um aluno escreveria). Um erro conhecido só é
nomeado se reproduz a resposta também num segundo caso (outro T, outro lote com o mesmo pad, outros
scores); sem ele, a mensagem diz o parâmetro ajustado (a diagonal deslocada, o valor finito das
posições bloqueadas, o eixo, a escala dos scores) ou a primeira propriedade que quebra (vê o futuro,
pad liberado, diagonal bloqueada, linhas que não somam 1). ``decoder_self_mask`` aponta o erro em
``causal_mask``/``padding_mask`` quando a resposta é a combinação certa das máscaras erradas do aluno.
Os dados (``kind``, ``mistake``, ``id``) são estáveis; o juiz remoto dá a mesma mensagem.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from judge_helpers import StudentKernel

from transformer_course.checks import ch05
from transformer_course.exercises import all_exercises
from transformer_course.feedback import CheckFailure
from transformer_course.instructor.judge import judge_cell, seed_offset
from transformer_course.probe import LocalStudent, judging

CHAPTER = "05_mascaras"
OFFSET = 4242
EXERCISES = {ex.name: ex for ex in all_exercises() if ex.chapter == CHAPTER}


def _causal(body: str) -> str:
    return f"""
def causal_mask(seq_len, device=None):
    if seq_len <= 0:
        raise ValueError("seq_len deve ser positivo")
    m = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()
    {body}
"""


def _padding(body: str) -> str:
    return f"""
def padding_mask(token_ids, pad_id=0):
    if token_ids.dim() != 2:
        raise ValueError("token_ids deve ser (B, T)")
    {body}
"""


CAUSAL_OK = _causal("return m")
RAISES = 'if seq_len > 3:\n        raise RuntimeError("comprido demais")\n    return m'
PADDING_OK = _padding("return (token_ids != pad_id)[:, None, None, :]")
DECODER_USES = """
def decoder_self_mask(token_ids, pad_id=0):
    pad = padding_mask(token_ids, pad_id)
    causal = causal_mask(token_ids.size(1), token_ids.device)
    return COMBINE
"""
DECODER_INLINE = """
def decoder_self_mask(token_ids, pad_id=0):
    if token_ids.dim() != 2:
        raise ValueError("token_ids deve ser (B, T)")
    T = token_ids.size(1)
    pad = (token_ids != pad_id)[:, None, None, :]
    causal = torch.ones(T, T, dtype=torch.bool, device=token_ids.device).CAUSAL
    return COMBINE
"""


def _decoder(causal=CAUSAL_OK, padding=PADDING_OK, combine="pad & causal") -> str:
    """As três funções juntas (como no notebook): a decoder usa as duas anteriores do aluno."""
    return causal + padding + DECODER_USES.replace("COMBINE", combine)


def _inline(tri="tril()", combine="pad & causal") -> str:
    return CAUSAL_OK + PADDING_OK + DECODER_INLINE.replace("CAUSAL", tri).replace("COMBINE", combine)


SOFTMAX = """
def masked_softmax(scores, mask=None):
    if mask is None:
        return scores.softmax(dim=-1)
    BODY
"""
ZERO_EMPTY = "\n    return torch.where(mask.any(-1, keepdim=True), w, torch.zeros_like(w))"


def _softmax(body: str) -> str:
    return SOFTMAX.replace("BODY", body)


# nome -> (exercício, código, tipo, id do diagnóstico, trecho da frase)
FOUND = {
    # ------------------------------------------------ causal_mask
    "causal: triângulo superior": (
        "causal_mask",
        _causal("return m.T"),
        "valores",
        "triangulo-superior",
        "SUPERIOR",
    ),
    "causal: sem a diagonal": (
        "causal_mask",
        _causal("return m.tril(-1)"),
        "valores",
        "sem-diagonal",
        "SEM a diagonal",
    ),
    "causal: True = bloqueado": (
        "causal_mask",
        _causal("return ~m"),
        "valores",
        "convencao-invertida",
        "invertida",
    ),
    "causal: vê um passo do futuro": (
        "causal_mask",
        _causal("return torch.ones_like(m).tril(1)"),
        "parametro",
        "diagonal-deslocada",
        r"j ≤ i \+ 1",
    ),
    "causal: triu(-1)": (
        "causal_mask",
        _causal("return torch.ones_like(m).triu(-1)"),
        "parametro",
        "diagonal-deslocada",
        r"j ≥ i − 1 \(o triângulo SUPERIOR",
    ),
    "causal: aditiva com -inf": (
        "causal_mask",
        _causal('return torch.zeros(seq_len, seq_len).masked_fill(~m, float("-inf"))'),
        "valores",
        "mascara-aditiva",
        "ADITIVA",
    ),
    "causal: aditiva com -1e9": (
        "causal_mask",
        _causal("return (~m).float() * -1e9"),
        "valores",
        "mascara-aditiva",
        "ADITIVA",
    ),
    "causal: eixos de tamanho 1 a mais": (
        "causal_mask",
        _causal("return m[None, :, None, :]"),
        "forma",
        "forma-eixos-de-tamanho-1",
        r"os eixos de tamanho 1 não",
    ),
    "causal: float 0/1": (
        "causal_mask",
        _causal("return m.float()"),
        "dtype",
        "mascara-nao-booleana",
        "booleana",
    ),
    "causal: int 0/1": (
        "causal_mask",
        _causal("return m.long()"),
        "dtype",
        "mascara-nao-booleana",
        "booleana",
    ),
    "causal: a linha 0 vê a última chave": (
        "causal_mask",
        _causal("m[0, -1] = True\n    return m"),
        "propriedade",
        "causalidade",
        r"a consulta 0 vê a chave 3",
    ),
    "causal: a diagonal da linha 2 bloqueada": (
        "causal_mask",
        _causal("if seq_len > 2:\n        m[2, 2] = False\n    return m"),
        "propriedade",
        "diagonal-bloqueada",
        "a diagonal ficou bloqueada",
    ),
    "causal: a primeira chave bloqueada na última linha": (
        "causal_mask",
        _causal("if seq_len > 1:\n        m[-1, 0] = False\n    return m"),
        "propriedade",
        "permitida-bloqueada",
        r"no índice \(3, 0\)",
    ),
    # ------------------------------------------------ padding_mask
    "padding: invertida": (
        "padding_mask",
        _padding("return (token_ids == pad_id)[:, None, None, :]"),
        "valores",
        "padding-invertido",
        "invertida",
    ),
    "padding: pad fixo em 0": (
        "padding_mask",
        _padding("return (token_ids != 0)[:, None, None, :]"),
        "valores",
        "pad-id-ignorado",
        "`pad_id`",
    ),
    "padding: já difundida (B, 1, T, T)": (
        "padding_mask",
        _padding(
            "T = token_ids.size(1)\n    return (token_ids != pad_id)[:, None, None, :].expand(-1, 1, T, -1)"
        ),
        "forma",
        "forma-difundida",
        r"difundida \(\*broadcast\*\) para \(2, 1, 5, 5\)",
    ),
    "padding: (1, B, 1, T)": (
        "padding_mask",
        _padding("return (token_ids != pad_id)[None, :, None, :]"),
        "forma",
        "forma-eixos-de-tamanho-1",
        r"a forma pedida é \(2, 1, 1, 5\)",
    ),
    "padding: > no lugar de !=": (
        "padding_mask",
        _padding("return (token_ids > pad_id)[:, None, None, :]"),
        "propriedade",
        "permitida-bloqueada",
        "uma posição permitida ficou bloqueada",
    ),
    "padding: float": (
        "padding_mask",
        _padding("return (token_ids != pad_id).float()[:, None, None, :]"),
        "dtype",
        "mascara-nao-booleana",
        "booleana",
    ),
    # ------------------------------------------------ decoder_self_mask: o erro está na anterior
    "decoder: causal_mask com o triângulo superior": (
        "decoder_self_mask",
        _decoder(causal=_causal("return m.T")),
        "anterior",
        "erro-em-causal_mask/triangulo-superior",
        r"o erro está em `causal_mask`, que a sua `decoder_self_mask` usa: ela coincide com o triângulo SUP",
    ),
    "decoder: causal_mask float": (
        "decoder_self_mask",
        _decoder(causal=_causal("return m.float()")),
        "anterior",
        "erro-em-causal_mask/mascara-nao-booleana",
        r"o erro está em `causal_mask`.*não é booleana",
    ),
    "decoder: padding_mask invertida": (
        "decoder_self_mask",
        _decoder(padding=_padding("return (token_ids == pad_id)[:, None, None, :]")),
        "anterior",
        "erro-em-padding_mask/padding-invertido",
        r"o erro está em `padding_mask`.*invertida",
    ),
    "decoder: padding_mask com o pad fixo em 0": (
        "decoder_self_mask",
        _decoder(padding=_padding("return (token_ids != 0)[:, None, None, :]")),
        "anterior",
        "erro-em-padding_mask/pad-id-ignorado",
        r"o erro está em `padding_mask`.*`pad_id`",
    ),
    "decoder: causal_mask que vê um passo do futuro": (
        "decoder_self_mask",
        _decoder(causal=_causal("return torch.ones_like(m).tril(1)")),
        "anterior",
        "erro-em-causal_mask/valores",
        r"o erro está em `causal_mask`.*diferente da pedida",
    ),
    "decoder: causal_mask que levanta": (
        "decoder_self_mask",
        _decoder(causal=_causal(RAISES)),
        "anterior",
        "erro-em-causal_mask/excecao",
        r"o erro está em `causal_mask`.*ela levanta RuntimeError: comprido demais",
    ),
    # ------------------------------------------------ decoder_self_mask: o erro é dela
    "decoder: OU": (
        "decoder_self_mask",
        _decoder(combine="pad | causal"),
        "valores",
        "ou-no-lugar-de-e",
        "OU padding",
    ),
    "decoder: diagonal deslocada": (
        "decoder_self_mask",
        _inline("tril(1)"),
        "parametro",
        "diagonal-deslocada",
        r"j ≤ i \+ 1",
    ),
    "decoder: a diagonal sempre liberada": (
        "decoder_self_mask",
        _inline(combine="(pad & causal) | torch.eye(T, dtype=torch.bool)"),
        "propriedade",
        "padding-liberado",
        r"a chave 3 do exemplo 0 é o pad",
    ),
    "decoder: só as consultas de padding bloqueadas": (
        "decoder_self_mask",
        _inline(combine="causal & pad.transpose(-1, -2)"),
        "propriedade",
        "consultas-de-padding-bloqueadas",
        "as linhas das consultas de padding ficaram bloqueadas",
    ),
    "decoder: aditiva": (
        "decoder_self_mask",
        _inline(combine='torch.zeros(pad.shape[0], 1, T, T).masked_fill(~(pad & causal), float("-inf"))'),
        "valores",
        "mascara-aditiva",
        "ADITIVA",
    ),
    # ------------------------------------------------ masked_softmax
    "softmax: bloqueadas com -5": (
        "masked_softmax",
        _softmax("w = scores.masked_fill(~mask, -5.0).softmax(-1)" + ZERO_EMPTY),
        "parametro",
        "valor-de-bloqueio",
        r"recebem o score -5, um número finito",
    ),
    "softmax: bloqueadas com -100": (
        "masked_softmax",
        _softmax("w = scores.masked_fill(~mask, -100.0).softmax(-1)" + ZERO_EMPTY),
        "parametro",
        "valor-de-bloqueio",
        r"score -100",
    ),
    "softmax: -20 somado às bloqueadas": (
        "masked_softmax",
        _softmax("w = (scores - 20.0 * (~mask)).softmax(-1)" + ZERO_EMPTY),
        "parametro",
        "valor-de-bloqueio",
        r"recebem -20 somado",
    ),
    "softmax: temperatura 2": (
        "masked_softmax",
        _softmax(
            "w = (scores / 2).masked_fill(~mask, float('-inf')).softmax(-1)\n    return w.nan_to_num(0.0)"
        ),
        "parametro",
        "escala-dos-scores",
        r"0,5·scores",
    ),
    "softmax: sem normalizar": (
        "masked_softmax",
        _softmax("return torch.exp(scores) * mask"),
        "propriedade",
        "linhas-somam-1",
        r"a linha \(0,\) soma",
    ),
    "softmax: log_softmax": (
        "masked_softmax",
        _softmax("return scores.masked_fill(~mask, float('-inf')).log_softmax(-1)"),
        "valores",
        "log-softmax",
        "log_softmax",
    ),
    "softmax: zerado depois": (
        "masked_softmax",
        _softmax("return scores.softmax(-1).masked_fill(~mask, 0.0)"),
        "valores",
        "zerado-depois",
        "só depois zerado",
    ),
    "softmax: máscara invertida": (
        "masked_softmax",
        _softmax("w = scores.masked_fill(mask, float('-inf')).softmax(-1)\n    return w.nan_to_num(0.0)"),
        "valores",
        "mascara-invertida",
        "invertida",
    ),
    "softmax: NaN nas linhas vazias": (
        "masked_softmax",
        _softmax("return scores.masked_fill(~mask, float('-inf')).softmax(-1)"),
        "nan",
        "nan-linhas-vazias",
        "0/0",
    ),
    "softmax: -1e9": (
        "masked_softmax",
        _softmax("return scores.masked_fill(~mask, -1e9).softmax(-1)"),
        "propriedade",
        "linhas-vazias-uniformes",
        "uniformes",
    ),
}

# Guardas: respostas erradas e o diagnóstico que elas NÃO podem receber (e o certo delas, quando há).
GUARDS = {
    # O erro está só a partir de T = 6: na linha 0, a chave 5 liberada (não é nenhum erro conhecido).
    "causal: vaza só com T ≥ 6": (
        "causal_mask",
        _causal("if seq_len >= 6:\n        m[0, 5] = True\n    return m"),
        "triângulo SUPERIOR",
        "causalidade",
    ),
    # As anteriores do aluno estão certas: o OU é da própria decoder, não delas.
    "decoder: OU com as anteriores certas": (
        "decoder_self_mask",
        _decoder(combine="pad | causal"),
        "o erro está em",
        "ou-no-lugar-de-e",
    ),
    # Uma causal_mask errada que a decoder NÃO usa: o erro não está nela.
    "decoder: causal_mask errada, mas não usada": (
        "decoder_self_mask",
        _causal("return m.T")
        + PADDING_OK
        + DECODER_INLINE.replace("CAUSAL", "tril()").replace("COMBINE", "pad | causal"),
        "o erro está em",
        "ou-no-lugar-de-e",
    ),
    # Um valor de bloqueio que muda com os scores não é "o score -k": só a propriedade.
    "softmax: bloqueio que muda com os scores": (
        "masked_softmax",
        _softmax("w = torch.where(mask, scores, -scores.abs().sum()).softmax(-1)" + ZERO_EMPTY),
        "um número finito",
        "bloqueadas-com-peso",
    ),
    # Multiplicar só a última linha (quando há mais de uma) não é uma escala dos scores.
    "softmax: escala só na última linha": (
        "masked_softmax",
        _softmax(
            "s = scores.clone()\n    if s.size(-2) > 1:\n        s[..., -1, :] = s[..., -1, :] * 3\n"
            "    w = s.masked_fill(~mask, float('-inf')).softmax(-1)\n    return w.nan_to_num(0.0)"
        ),
        "·scores",
        None,
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
    text = str(failure)
    return text.split("Diagnóstico provável: ", 1)[-1] if "Diagnóstico provável" in text else ""


@pytest.mark.parametrize(("name", "case"), FOUND.items(), ids=list(FOUND))
def test_each_wrong_answer_gets_its_own_diagnosis(name, case):
    exercise, code, kind, key, pattern = case
    _, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert re.search(pattern, _cause(failure)), str(failure)
    assert failure.data["kind"] == kind, failure.data
    assert failure.data["mistake"] == key, failure.data
    assert failure.data["id"] == f"{exercise}/{kind}/{key}"
    assert failure.data["exercise"] == exercise and failure.data["case"]


@pytest.mark.parametrize(("name", "case"), GUARDS.items(), ids=list(GUARDS))
def test_a_mistake_is_never_named_when_it_does_not_reproduce_the_answer(name, case):
    exercise, code, wrong, right = case
    _, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert wrong not in _cause(failure), str(failure)
    assert failure.data.get("mistake") == right, failure.data
    assert failure.data["id"].startswith(f"{exercise}/")


def test_a_mask_mistake_is_confirmed_on_a_second_batch():
    """A máscara certa em T = 4 e o triângulo superior daí em diante: no primeiro caso com erro, o segundo
    caso (T + 3) confirma o "superior"; uma resposta que só erra num T não ganha nome."""
    only_at_4 = _causal("return m.T if seq_len == 4 else m")
    _, failure = _first_failure(EXERCISES["causal_mask"], _define(only_at_4, "causal_mask"))
    assert "SUPERIOR" not in _cause(failure), str(failure)
    assert failure.data["mistake"] == "causalidade"


# ---------------------------------------------------------------- respostas certas escritas de outro jeito

CORRECT = {
    "causal_mask": [
        _causal("i = torch.arange(seq_len, device=device)\n    return i[:, None] >= i[None, :]"),
        _causal("return ~torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(diagonal=1)"),
        _causal(
            "out = torch.zeros(seq_len, seq_len, dtype=torch.bool, device=device)\n"
            "    for i in range(seq_len):\n        out[i, : i + 1] = True\n    return out"
        ),
        _causal("return torch.tril(torch.ones(seq_len, seq_len, device=device)).bool()"),
    ],
    "padding_mask": [
        _padding("B, T = token_ids.shape\n    return token_ids.ne(pad_id).reshape(B, 1, 1, T)"),
        _padding("return torch.logical_not(token_ids == pad_id).unsqueeze(1).unsqueeze(1)"),
        _padding("return (token_ids - pad_id).bool()[:, None, None]"),
    ],
    "decoder_self_mask": [
        _decoder(),
        _decoder(combine="torch.logical_and(causal, pad)"),
        _inline(combine="causal[None, None] & pad"),
        _inline(combine="pad.expand(-1, 1, T, -1) & causal.expand(pad.size(0), 1, T, T)"),
    ],
    "masked_softmax": [
        _softmax(
            "s = torch.where(mask, scores, torch.tensor(float('-inf'), dtype=scores.dtype))\n"
            "    w = s.softmax(-1)\n    return torch.where(torch.isnan(w), torch.zeros_like(w), w)"
        ),
        _softmax("w = scores.masked_fill(~mask, -1e4).softmax(-1)" + ZERO_EMPTY),
        _softmax(
            "m = scores.masked_fill(~mask, float('-inf')).amax(-1, keepdim=True)\n"
            "    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))\n"
            "    e = torch.exp(scores.masked_fill(~mask, float('-inf')) - m)\n"
            "    t = e.sum(-1, keepdim=True)\n"
            "    return e / torch.where(t > 0, t, torch.ones_like(t))"
        ),
        _softmax(
            "w = scores.double().masked_fill(~mask, float('-inf')).softmax(-1).nan_to_num(0.0)\n"
            "    return w.to(scores.dtype)"
        ),
    ],
}
CORRECT_CASES = [(name, i, code) for name, codes in CORRECT.items() for i, code in enumerate(codes)]


@pytest.mark.parametrize(("name", "i", "code"), CORRECT_CASES, ids=[f"{n}-{i}" for n, i, _ in CORRECT_CASES])
def test_correct_answers_written_differently_keep_full_marks(name, i, code):
    answer = _define(code, name)
    exercise = EXERCISES[name]
    for k in range(3):  # as sementes ocultas de três entregas
        offset = seed_offset(b"diagnostico", f"aluno-{k}", CHAPTER, "oculto")
        with judging(LocalStudent(), offset, []):
            exercise.visible(answer)
            exercise.hidden(answer)


# ---------------------------------------------------------------- no juiz: a mesma mensagem, os mesmos dados


@pytest.fixture(scope="module")
def kernel():
    with StudentKernel() as k:
        yield k


def _without_line(message: str) -> str:
    return re.sub(r" \(linha \d+: `[^`]*`\)", "", message)


REMOTE = [
    "causal: vê um passo do futuro",
    "causal: aditiva com -inf",
    "padding: já difundida (B, 1, T, T)",
    "decoder: causal_mask com o triângulo superior",
    "decoder: padding_mask invertida",
    "decoder: causal_mask float",
    "decoder: OU",
    "softmax: bloqueadas com -5",
    "softmax: temperatura 2",
    "softmax: sem normalizar",
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


def test_the_unit_checks_still_see_the_old_diagnoses():
    """As mensagens antigas continuam (os testes do capítulo e a devolutiva da correção as procuram)."""
    assert ch05.FLOAT_HINT.startswith("a máscara tem os valores certos")
