"""Capítulo 3 (issue 31): erros que ninguém previu recebem um diagnóstico certo, e nunca um errado.

Cada resposta errada abaixo é código de verdade (o que um aluno escreveria), executado aqui e, para
algumas, num kernel de verdade (o lado do aluno no juiz). Os dados do diagnóstico (``kind``,
``mistake``, ``id``) dizem o que foi achado: um erro conhecido confirmado num segundo caso com outros
tamanhos, um parâmetro ajustado (o expoente da escala, um fator constante, para onde foi cada elemento
ao separar ou juntar as cabeças), a propriedade que quebra (linhas somam 1, bloqueados com 0, só
reorganiza), ou a peça de antes que está errada ("o erro está em `split_heads`"). As "guardas" são
respostas erradas que NÃO podem receber um nome que não é o delas; as respostas certas escritas de
outro jeito ganham todos os pontos.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from judge_helpers import StudentKernel

from transformer_course.exercises import all_exercises
from transformer_course.feedback import CheckFailure
from transformer_course.instructor.judge import judge_cell, seed_offset
from transformer_course.probe import LocalStudent, judging

CHAPTER = "03_multi_head"
OFFSET = 4343
EXERCISES = {ex.name: ex for ex in all_exercises() if ex.chapter == CHAPTER}

SPLIT = """
def split_heads(x, n_heads):
    B, T, D = x.shape
    if D % n_heads:
        raise ValueError("d_model não é divisível por n_heads")
    return {body}
"""
MERGE = """
def merge_heads(x):
    B, H, T, Dk = x.shape
    return {body}
"""
RIGHT_SPLIT = SPLIT.format(body="x.view(B, T, n_heads, D // n_heads).transpose(1, 2)")
RIGHT_MERGE = MERGE.format(body="x.transpose(1, 2).reshape(B, T, H * Dk)")

MHA = """
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("d_model não é divisível por n_heads")
        self.h = n_heads
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        {proj}
        Q, K, V = split_heads(q, self.h), split_heads(k, self.h), split_heads(v, self.h)
        {scores}
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            {mask}
        {weights}
        {heads}
        {out}
"""
PARTS = {
    "proj": "q, k, v = self.W_Q(query), self.W_K(key), self.W_V(value)",
    "scores": "scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))",
    "mask": 'scores = scores.masked_fill(~mask, float("-inf"))',
    "weights": "weights = scores.softmax(dim=-1)",
    "heads": "heads = self.dropout(weights) @ V",
    "out": "return self.W_O(merge_heads(heads)), weights",
}


def _mha(split: str = RIGHT_SPLIT, merge: str = RIGHT_MERGE, **parts: str) -> str:
    """Uma ``MultiHeadAttention`` (com as ``split_heads``/``merge_heads`` do notebook) com linhas trocadas."""
    return split + merge + MHA.format(**{**PARTS, **parts})


# nome -> (exercício, código, tipo, id do diagnóstico, trecho da frase)
FOUND = {
    # ---------------------------------------------------------------- split_heads
    "split: reshape direto (sem transpose)": (
        "split_heads",
        SPLIT.format(body="x.reshape(B, n_heads, T, D // n_heads)"),
        "valores",
        "split-sem-transpose",
        r"sem `transpose`: números de tokens diferentes",
    ),
    "split: cabeças intercaladas": (
        "split_heads",
        SPLIT.format(body="x.view(B, T, D // n_heads, n_heads).permute(0, 3, 1, 2)"),
        "valores",
        "split-cabecas-intercaladas",
        r"cabeças intercaladas",
    ),
    "split: cabeças na ordem inversa": (
        "split_heads",
        SPLIT.format(body="x.view(B, T, n_heads, D // n_heads).transpose(1, 2).flip(1)"),
        "parametro",
        "colunas-da-cabeca",
        r"a cabeça 0 ficou com as colunas \[8, 9, 10, 11\], não com o bloco 0…3",
    ),
    "split: tokens de trás para a frente": (
        "split_heads",
        SPLIT.format(body="x.flip(1).view(B, T, n_heads, D // n_heads).transpose(1, 2)"),
        "parametro",
        "tokens-misturados",
        r"veio do token 2, não do token 0",
    ),
    "split: normaliza cada cabeça": (
        "split_heads",
        SPLIT.format(
            body="torch.nn.functional.normalize(x.view(B, T, n_heads, D // n_heads), dim=-1).transpose(1, 2)"
        ),
        "propriedade",
        "so-reorganiza",
        r"separar cabeças só reorganiza os elementos de x",
    ),
    "split: lote embaralhado (roll no eixo 0)": (
        "split_heads",
        SPLIT.format(body="x.roll(1, 0).view(B, T, n_heads, D // n_heads).transpose(1, 2)"),
        "parametro",
        "lote-misturado",
        r"veio do exemplo 1 do lote, não do 0",
    ),
    # ---------------------------------------------------------------- merge_heads
    "merge: reshape direto": (
        "merge_heads",
        MERGE.format(body="x.reshape(B, T, H * Dk)"),
        "valores",
        "merge-sem-transpose",
        r"sem `transpose`: tokens e cabeças se misturaram",
    ),
    "merge: cabeças na ordem inversa": (
        "merge_heads",
        MERGE.format(body="x.flip(1).transpose(1, 2).reshape(B, T, H * Dk)"),
        "parametro",
        "colunas-da-cabeca",
        r"veio do elemento 0 da cabeça 2, que devia ir para a coluna 4",
    ),
    "merge: soma das cabeças": (
        "merge_heads",
        MERGE.format(body="x.sum(1)"),
        "forma",
        "merge-soma",
        r"a soma das cabeças em vez da concatenação",
    ),
    "merge: vezes H": (
        "merge_heads",
        MERGE.format(body="x.transpose(1, 2).reshape(B, T, H * Dk) * H"),
        "propriedade",
        "so-reorganiza",
        r"juntar cabeças só reorganiza",
    ),
    # ---------------------------------------------------------------- MultiHeadAttention
    "mha: escala 1/√d_model": (
        "MultiHeadAttention",
        _mha(scores="scores = Q @ K.transpose(-2, -1) / math.sqrt(query.size(-1))"),
        "valores",
        "escala-d-model",
        r"1/√d_model em vez de 1/√d_k",
    ),
    "mha: escala 1/d_k": (
        "MultiHeadAttention",
        _mha(scores="scores = Q @ K.transpose(-2, -1) / Q.size(-1)"),
        "valores",
        "escala-d-k",
        r"a escala 1/d_k em vez de 1/√d_k",
    ),
    "mha: escala d_k^(-1/4)": (
        "MultiHeadAttention",
        _mha(scores="scores = Q @ K.transpose(-2, -1) / Q.size(-1) ** 0.25"),
        "parametro",
        "fator-de-escala",
        r"d_k\^\(−1/4\), não d_k\^\(−1/2\)",
    ),
    "mha: escala fixa 0,3": (
        "MultiHeadAttention",
        _mha(scores="scores = Q @ K.transpose(-2, -1) * 0.3"),
        "parametro",
        "fator-de-escala",
        r"0,3, um número fixo",
    ),
    "mha: softmax nas consultas (dim=-2)": (
        "MultiHeadAttention",
        _mha(weights="weights = scores.softmax(dim=-2)"),
        "propriedade",
        "linhas-somam-1",
        r"cada linha dos pesos deve somar 1",
    ),
    "mha: softmax nas cabeças (dim=1)": (
        "MultiHeadAttention",
        _mha(weights="weights = scores.softmax(dim=1)"),
        "propriedade",
        "linhas-somam-1",
        r"cada linha dos pesos deve somar 1",
    ),
    "mha: máscara preenchida com 0": (
        "MultiHeadAttention",
        _mha(mask="scores = scores.masked_fill(~mask, 0.0)"),
        "propriedade",
        "bloqueados-com-zero",
        r"as posições bloqueadas pela máscara \(False\) devem ter peso 0",
    ),
    "mha: máscara invertida": (
        "MultiHeadAttention",
        _mha(mask='scores = scores.masked_fill(mask, float("-inf"))'),
        "valores",
        "mask-inverted",
        r"a máscara invertida",
    ),
    "mha: V por W_K": (
        "MultiHeadAttention",
        _mha(proj="q, k, v = self.W_Q(query), self.W_K(key), self.W_K(value)"),
        "valores",
        "v-by-w-k",
        r"os valores passaram por W_K em vez de W_V",
    ),
    "mha: sem W_O": (
        "MultiHeadAttention",
        _mha(out="return merge_heads(heads), weights"),
        "valores",
        "no-w-o",
        r"SEM a projeção de saída W_O",
    ),
    "mha: K·Qᵀ": (
        "MultiHeadAttention",
        _mha(scores="scores = K @ Q.transpose(-2, -1) / math.sqrt(Q.size(-1))"),
        "valores",
        "scores-transposed",
        r"os scores transpostos, K·Qᵀ",
    ),
    "mha: cabeças juntadas ×2": (
        "MultiHeadAttention",
        _mha(heads="heads = 2 * (self.dropout(weights) @ V)"),
        "parametro",
        "fator-constante",
        r"`merge_heads\(\.\.\.\)`, a entrada de W_O é 2 × o valor certo",
    ),
    "mha: sinal trocado na saída": (
        "MultiHeadAttention",
        _mha(out="return -self.W_O(merge_heads(heads)), weights"),
        "parametro",
        "fator-constante",
        r"`output` é -1 × o valor certo",
    ),
    "mha: pesos médios": (
        "MultiHeadAttention",
        _mha(out="return self.W_O(merge_heads(heads)), weights.mean(1)"),
        "forma",
        "averaged",
        r"os pesos médios sobre as cabeças",
    ),
    "mha: split_heads do notebook sem transpose": (
        "MultiHeadAttention",
        _mha(split=SPLIT.format(body="x.reshape(B, n_heads, T, D // n_heads)")),
        "upstream",
        "erro-em-split-heads",
        r"o erro está em `split_heads`(.|\n)*sua saída coincide com um `view`/`reshape` direto",
    ),
    "mha: merge_heads do notebook com as cabeças invertidas": (
        "MultiHeadAttention",
        _mha(merge=MERGE.format(body="x.flip(1).transpose(1, 2).reshape(B, T, H * Dk)")),
        "upstream",
        "erro-em-merge-heads",
        r"o erro está em `merge_heads`(.|\n)*veio do elemento 0 da cabeça 2",
    ),
    # o caso em modo de treino está nos testes visíveis (issue 31)
    "mha: pesos devolvidos depois do dropout": (
        "MultiHeadAttention",
        _mha(weights="weights = self.dropout(scores.softmax(dim=-1))", heads="heads = weights @ V"),
        "valores",
        "pesos-depois-do-dropout",
        r"os pesos depois do dropout",
    ),
    "mha: dropout na saída de W_O": (
        "MultiHeadAttention",
        _mha(heads="heads = weights @ V", out="return self.dropout(self.W_O(merge_heads(heads))), weights"),
        "valores",
        "cabecas-sem-dropout",
        r"cabeças juntadas SEM dropout",
    ),
    "mha: dropout criado e nunca aplicado": (
        "MultiHeadAttention",
        _mha(heads="heads = weights @ V"),
        "propriedade",
        "dropout-nao-aplicado",
        r"o `nn.Dropout` foi criado mas não é aplicado",
    ),
}

# Respostas erradas sem causa conhecida: a mensagem diz onde (a etapa) e nenhum nome de erro.
NO_CAUSE = {
    "mha: +1 na saída": (_mha(out="return self.W_O(merge_heads(heads)) + 1, weights"), "`output`"),
    "mha: a última consulta olha só para si": (
        _mha(
            weights="weights = scores.softmax(dim=-1)\n        weights = torch.cat([weights[..., :-1, :], "
            "torch.eye(weights.size(-1))[-1:].expand_as(weights[..., -1:, :])], dim=-2)"
        ),
        "`weights`",
    ),
}

# Guardas: respostas erradas e o nome que elas NÃO podem receber (e o id certo delas, quando há).
GUARDS = {
    # d_k = 4 no primeiro caso: 1/4 coincide com "1/d_k" ali, mas não com d_k = 6 no segundo caso.
    "mha: escala fixa 1/4": (
        _mha(scores="scores = Q @ K.transpose(-2, -1) * 0.25"),
        "1/d_k em vez de 1/√d_k",
        "fator-de-escala",
    ),
    # d_model = 12 e d_k = 4 no primeiro caso: um fator fixo 1/√12 não é "1/√d_model" com outro d_model.
    "mha: escala fixa 1/√12": (
        _mha(scores="scores = Q @ K.transpose(-2, -1) / math.sqrt(12)"),
        "1/√d_model em vez de 1/√d_k",
        "fator-de-escala",
    ),
    # a split_heads do notebook está errada, mas a MHA tem outro erro: a conta com ela não reproduz nada.
    "mha: split errada E escala 1/d_k": (
        _mha(
            split=SPLIT.format(body="x.reshape(B, n_heads, T, D // n_heads)"),
            scores="scores = Q @ K.transpose(-2, -1) / Q.size(-1)",
        ),
        "o erro está em `split_heads`",
        None,
    ),
    # a MHA não usa a split_heads do notebook (errada): o erro não está nela.
    "mha: split própria certa, a do notebook errada": (
        _mha(
            split=SPLIT.format(body="x.reshape(B, n_heads, T, D // n_heads)"),
            proj="q, k, v = self.W_Q(query), self.W_K(key), self.W_V(value)\n"
            "        split_heads = lambda t, h: t.view(t.size(0), t.size(1), h, -1).transpose(1, 2)",
            scores="scores = 0.5 * Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))",
        ),
        "o erro está em `split_heads`",
        "fator-de-escala",
    ),
}


def _define(code: str, name: str):
    namespace = {"torch": torch, "math": math, "nn": torch.nn, "F": torch.nn.functional, "__name__": "aluno"}
    exec(code, namespace)  # noqa: S102 - a resposta (errada ou certa), local
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


@pytest.mark.parametrize(
    ("name", "exercise", "code", "kind", "key", "pattern"), [(n, *v) for n, v in FOUND.items()]
)
def test_realistic_mistakes_get_the_right_diagnosis(name, exercise, code, kind, key, pattern):
    grade_id, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert not grade_id.endswith("_hidden"), f"{name}: só o teste oculto acusou ({failure})"
    assert re.search(pattern, str(failure)), str(failure)
    assert failure.data["mistake"] == key, (failure.data, str(failure))
    assert failure.data["kind"] == kind, failure.data
    assert failure.data["id"] == f"{exercise}/{kind}/{key}"


@pytest.mark.parametrize(("name", "code", "where"), [(n, *v) for n, v in NO_CAUSE.items()])
def test_an_unknown_mistake_gets_where_and_no_cause(name, code, where):
    _, failure = _first_failure(EXERCISES["MultiHeadAttention"], _define(code, "MultiHeadAttention"))
    assert f"A primeira diferença aparece em {where}" in str(failure), str(failure)
    assert "Diagnóstico provável" not in str(failure), str(failure)
    assert not failure.data.get("mistake") and not failure.data.get("cause"), failure.data
    assert failure.data["id"] == "MultiHeadAttention/valores"


@pytest.mark.parametrize(("name", "code", "wrong", "right"), [(n, *v) for n, v in GUARDS.items()])
def test_a_mistake_is_never_named_when_it_does_not_reproduce_the_answer(name, code, wrong, right):
    _, failure = _first_failure(EXERCISES["MultiHeadAttention"], _define(code, "MultiHeadAttention"))
    assert wrong not in _cause(failure), str(failure)
    assert failure.data.get("mistake") == right, (failure.data, str(failure))


def test_a_split_guard_is_confirmed_with_other_sizes():
    """Uma separação que coincide com um erro conhecido num caso e não noutro não recebe o nome dele."""
    code = SPLIT.format(
        body="(x.reshape(B, n_heads, T, D // n_heads) if D == 12 else "
        "x.view(B, T, n_heads, D // n_heads).transpose(1, 2).flip(1))"
    )
    _, failure = _first_failure(EXERCISES["split_heads"], _define(code, "split_heads"))
    assert "sem `transpose`" not in _cause(failure), str(failure)
    assert failure.data.get("mistake") != "split-sem-transpose", failure.data


# -------------------------------------------------------- as respostas certas, escritas de outro jeito

CORRECT = {
    "split_heads": [
        SPLIT.format(body="torch.stack(x.split(D // n_heads, dim=-1), dim=1)"),
        SPLIT.format(body="x.reshape(B, T, n_heads, -1).permute(0, 2, 1, 3)"),
        SPLIT.format(body="torch.einsum('bthd->bhtd', x.unflatten(-1, (n_heads, D // n_heads)))"),
    ],
    "merge_heads": [
        MERGE.format(body="torch.cat(x.unbind(1), dim=-1)"),
        MERGE.format(body="x.permute(0, 2, 1, 3).flatten(2)"),
        MERGE.format(body="x.transpose(1, 2).contiguous().view(B, T, H * Dk)"),
    ],
    "MultiHeadAttention": [
        _mha(mask="scores = scores.masked_fill(mask == 0, -1e9)"),
        _mha(
            scores="scores = torch.einsum('bhqd,bhkd->bhqk', Q, K) * Q.size(-1) ** -0.5",
            mask="scores = torch.where(mask, scores, torch.tensor(float('-inf'), dtype=scores.dtype))",
            heads="heads = torch.einsum('bhqk,bhkd->bhqd', self.dropout(weights), V)",
        ),
        _mha(
            weights="weights = torch.exp(scores - scores.amax(-1, keepdim=True))\n"
            "        weights = weights / weights.sum(-1, keepdim=True)",
            out="return self.W_O(torch.cat(heads.unbind(1), dim=-1)), weights",
        ),
    ],
}
CORRECT_CASES = [(name, i, code) for name, codes in CORRECT.items() for i, code in enumerate(codes)]


@pytest.mark.parametrize(("name", "i", "code"), CORRECT_CASES, ids=[f"{n}-{i}" for n, i, _ in CORRECT_CASES])
@pytest.mark.parametrize("student", range(2))
def test_correct_answers_written_differently_keep_full_marks(name, i, code, student):
    """Nenhum diagnóstico novo derruba uma resposta certa escrita de outro jeito, com as sementes ocultas de
    duas entregas."""
    exercise = EXERCISES[name]
    answer = _define(code, name)
    exercise.visible(answer)
    offset = seed_offset(b"diagnostico", f"aluno-{student}", CHAPTER, "oculto")
    with judging(LocalStudent(), offset, []):
        exercise.hidden(answer)


# ---------------------------------------------------------------- no juiz: a mesma mensagem, os mesmos dados


@pytest.fixture(scope="module")
def kernel():
    with StudentKernel() as k:
        k.run("import math\nimport torch\nfrom torch import nn\nfrom torch.nn import functional as F\n")
        yield k


def _without_line(message: str) -> str:
    return re.sub(r" \(linha \d+: `[^`]*`\)", "", message)


REMOTE = [
    "split: cabeças na ordem inversa",
    "merge: reshape direto",
    "mha: escala d_k^(-1/4)",
    "mha: escala 1/d_k",
    "mha: softmax nas consultas (dim=-2)",
    "mha: cabeças juntadas ×2",
    "mha: split_heads do notebook sem transpose",
    "mha: pesos devolvidos depois do dropout",
]


@pytest.mark.parametrize("name", REMOTE)
def test_the_judge_gives_the_same_diagnosis(kernel, name):
    exercise, code, kind, key, _ = FOUND[name]
    grade_id, local = _first_failure(EXERCISES[exercise], _define(code, exercise))
    kernel.run(RIGHT_SPLIT + RIGHT_MERGE + code)  # o notebook: as três respostas, a errada por último
    verdict = judge_cell(CHAPTER, grade_id, kernel.student(), OFFSET)
    assert verdict.status == "falhou" and verdict.points == 0, verdict.message
    assert _without_line(verdict.message) == _without_line(str(local))
    assert verdict.diagnosis["id"] == f"{exercise}/{kind}/{key}" == local.data["id"]
