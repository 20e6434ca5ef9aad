"""Capítulo 4 (issue 31): erros que ninguém previu recebem um diagnóstico certo, e nunca um errado.

Cada resposta errada é código de verdade (o que um aluno escreveria), com a `MultiHeadAttention` e a
`FeedForwardRef` do pacote, como no notebook. O diagnóstico vem como dados (``kind``, ``mistake``,
``id``): um erro conhecido que se repete num segundo caso (outros valores, ou outro estado do gerador
no modo de treino), a subcamada em que o erro está ("o erro está em `ffn`"), a subcamada nunca chamada,
ou só onde aparece a primeira diferença, sem causa. O modo de treino com *dropout* está nos testes
visíveis. As respostas certas escritas de outro jeito ganham todos os pontos; algumas erradas vão ao
juiz remoto e recebem lá a mesma mensagem e o mesmo id.
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
from transformer_course.layers import FeedForward as FeedForwardRef
from transformer_course.multihead import MultiHeadAttention
from transformer_course.probe import LocalStudent, judging

CHAPTER = "04_transformer"
OFFSET = 4444
EXERCISES = {ex.name: ex for ex in all_exercises() if ex.chapter == CHAPTER}

FFN = """
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        {body}
"""
RIGHT_FFN = "return self.linear2(self.dropout(F.gelu(self.linear1(x))))"

ENCODER = """
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = {ffn}(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = {norm2}
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        if self.norm_first:
            {pre}
        {post}
"""
ENC = {
    "ffn": "FeedForwardRef",
    "norm2": "nn.LayerNorm(d_model)",
    "pre": "h = self.norm1(x)\n            a, w = self.self_attn(h, h, h, mask)\n"
    "            x = x + self.drop(a)\n            return x + self.drop(self.ffn(self.norm2(x))), w",
    "post": "a, w = self.self_attn(x, x, x, mask)\n        x = self.norm1(x + self.drop(a))\n"
    "        return self.norm2(x + self.drop(self.ffn(x))), w",
}

DECODER = """
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FeedForwardRef(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            h = self.norm1(x)
            a, sw = self.self_attn(h, h, h, tgt_mask)
            x = x + self.drop(a)
            {cross_pre}
            x = x + self.drop(a)
            return x + self.drop(self.ffn(self.norm3(x))), sw, cw
        a, sw = self.self_attn(x, x, x, tgt_mask)
        x = self.norm1(x + self.drop(a))
        {cross_post}
        x = self.norm2(x + self.drop(a))
        return self.norm3(x + self.drop(self.ffn(x))), sw, cw
"""
DEC = {
    "cross_pre": "a, cw = self.cross_attn(self.norm2(x), memory, memory, memory_mask)",
    "cross_post": "a, cw = self.cross_attn(x, memory, memory, memory_mask)",
}


DOUBLE_NORM = """h = self.norm1(x)
            a, w = self.self_attn(h, h, h, mask)
            x = self.norm1(x + self.drop(a))
            return self.norm2(x + self.drop(self.ffn(self.norm2(x)))), w"""


def _ffn(body: str = RIGHT_FFN) -> str:
    return FFN.format(body=body)


def _enc(**parts: str) -> str:
    return ENCODER.format(**{**ENC, **parts})


def _dec(**parts: str) -> str:
    return DECODER.format(**{**DEC, **parts})


# nome -> (exercício, código, tipo, id do diagnóstico, trecho da mensagem)
FOUND = {
    # ---------------------------------------------------------------- FeedForward
    "ffn: ReLU": (
        "FeedForward",
        _ffn("return self.linear2(self.dropout(F.relu(self.linear1(x))))"),
        "valores",
        "ffn-relu",
        r"ReLU em vez de GELU",
    ),
    "ffn: GELU por tanh": (
        "FeedForward",
        _ffn('return self.linear2(self.dropout(F.gelu(self.linear1(x), approximate="tanh")))'),
        "valores",
        "gelu-tanh",
        r"aproximada por tanh",
    ),
    "ffn: sem ativação": (
        "FeedForward",
        _ffn("return self.linear2(self.dropout(self.linear1(x)))"),
        "valores",
        "ffn-sem-ativacao",
        r"sem ativação entre",
    ),
    "ffn: GELU também no fim": (
        "FeedForward",
        _ffn("return F.gelu(self.linear2(self.dropout(F.gelu(self.linear1(x)))))"),
        "valores",
        "ativacao-depois-de-linear2",
        r"ativação também depois de `linear2`",
    ),
    "ffn: dropout no fim (modo de treino, visível)": (
        "FeedForward",
        _ffn("return self.dropout(self.linear2(F.gelu(self.linear1(x))))"),
        "valores",
        "ffn-dropout-no-fim",
        r"modo de treino(.|\n)*o \*dropout\* no fim",
    ),
    "ffn: dropout nunca aplicado (visível)": (
        "FeedForward",
        _ffn("return self.linear2(F.gelu(self.linear1(x)))"),
        "valores",
        "ffn-sem-dropout",
        r"sem \*dropout\* em modo de treino",
    ),
    "ffn: dois dropouts (visível)": (
        "FeedForward",
        _ffn("return self.dropout(self.linear2(self.dropout(F.gelu(self.linear1(x)))))"),
        "valores",
        "ffn-dropout-duplo",
        r"dois sorteios de \*dropout\*",
    ),
    # ---------------------------------------------------------------- EncoderLayer
    "enc: Post-LN quando pede Pre-LN": (
        "EncoderLayer",
        _enc(pre="pass"),
        "valores",
        "post-ln-em-vez-de-pre-ln",
        r"`norm_first=True` pede Pre-LN",
    ),
    "enc: LayerNorm depois da soma no Pre-LN": (
        "EncoderLayer",
        _enc(pre=DOUBLE_NORM),
        "valores",
        "layernorm-depois-da-soma",
        r"DEPOIS da soma residual no Pre-LN",
    ),
    "enc: uma LayerNorm só": (
        "EncoderLayer",
        _enc(
            norm2="None", pre=ENC["pre"].replace("norm2", "norm1"), post=ENC["post"].replace("norm2", "norm1")
        ),
        "estrutura",
        "norm2-nao-e-layernorm",
        r"`norm2` deveria ser `nn.LayerNorm",
    ),
    "enc: sem residual na FFN": (
        "EncoderLayer",
        _enc(pre=ENC["pre"].replace("return x + self.drop(self.ffn", "return self.drop(self.ffn")),
        "valores",
        "sem-residual-ff",
        r"SEM a conexão residual na FFN",
    ),
    "enc: máscara invertida": (
        "EncoderLayer",
        _enc().replace(
            "def forward(self, x, mask=None):",
            "def forward(self, x, mask=None):\n        mask = None if mask is None else ~mask",
        ),
        "valores",
        "mascara-invertida",
        r"a máscara invertida",
    ),
    "enc: FFN própria com o dobro": (
        "EncoderLayer",
        _ffn("return 2 * self.linear2(self.dropout(F.gelu(self.linear1(x))))") + _enc(ffn="FeedForward"),
        "upstream",
        "erro-em-ffn",
        r"o erro está em `ffn`, a FFN da camada",
    ),
    "enc: LayerNorm com eps = 0,5": (
        "EncoderLayer",
        _enc(norm2="nn.LayerNorm(d_model, eps=0.5)"),
        "upstream",
        "erro-em-norm2",
        r"o erro está em `norm2`",
    ),
    "enc: atenção sem dropout (visível)": (
        "EncoderLayer",
        _enc().replace(
            "MultiHeadAttention(d_model, n_heads, dropout)", "MultiHeadAttention(d_model, n_heads)"
        ),
        "valores",
        "atencao-sem-dropout",
        r"modo de treino(.|\n)*atenção sem \*dropout\* nos pesos",
    ),
    "enc: sem dropout nas subcamadas (visível)": (
        "EncoderLayer",
        _enc().replace("self.drop = nn.Dropout(dropout)", "self.drop = nn.Identity()"),
        "valores",
        "camada-sem-dropout",
        r"modo de treino(.|\n)*sem \*dropout\* na saída das subcamadas",
    ),
    # ---------------------------------------------------------------- DecoderLayer
    "dec: cruzada reaproveita self_attn": (
        "DecoderLayer",
        _dec(cross_pre="a, cw = self.self_attn(self.norm2(x), memory, memory, memory_mask)"),
        "propriedade",
        "cross_attn-nunca-chamada",
        r"`cross_attn` nunca foi chamada",
    ),
    "dec: cruzada olha para x": (
        "DecoderLayer",
        _dec(
            cross_pre="h = self.norm2(x)\n            a, cw = self.cross_attn(h, h, h, tgt_mask)",
            cross_post="a, cw = self.cross_attn(x, x, x, tgt_mask)",
        ),
        "valores",
        "cruzada-sem-memoria",
        r"entrada do decodificador em vez da memória",
    ),
    "dec: memória dobrada": (
        "DecoderLayer",
        _dec(cross_pre="a, cw = self.cross_attn(self.norm2(x), 2 * memory, 2 * memory, memory_mask)"),
        "propriedade",
        "cross_attn-chamada-com-outros-argumentos",
        r"a `cross_attn` está certa(.|\n)*A diferença vem do que a camada passa a ela",
    ),
    "enc: máscara transposta": (
        "EncoderLayer",
        _enc().replace(
            "def forward(self, x, mask=None):",
            "def forward(self, x, mask=None):\n        mask = mask if mask is None else mask.mT",
        ),
        "propriedade",
        "self_attn-chamada-com-outros-argumentos",
        r"a `self_attn` está certa",
    ),
    "enc: MultiHeadAttention própria sem a escala": (
        "EncoderLayer",
        "class MyMHA(MultiHeadAttention):\n"
        "    def forward(self, q, k, v, mask=None):\n"
        "        out, w = super().forward(q * math.sqrt(q.size(-1) // self.n_heads), k, v, mask)\n"
        "        return out, w\n" + _enc().replace("MultiHeadAttention(d_model", "MyMHA(d_model"),
        "upstream",
        "erro-em-self_attn",
        r"o erro está em `self_attn`",
    ),
    "dec: memória normalizada": (
        "DecoderLayer",
        _dec(
            cross_pre="h = self.norm2(x)\n            m = self.norm2(memory)\n"
            "            a, cw = self.cross_attn(h, m, m, memory_mask)"
        ),
        "valores",
        "memoria-normalizada",
        r"a memória normalizada",
    ),
}

# sem causa conhecida: só onde (a primeira diferença), nenhum nome de erro
NO_CAUSE = {
    "enc: a saída da atenção pela metade": (
        "EncoderLayer",
        _enc(pre=ENC["pre"].replace("x = x + self.drop(a)", "x = x + 0.5 * self.drop(a)")),
        "`norm2`, na entrada",
    ),
    "enc: dropout depois da soma (visível)": (
        "EncoderLayer",
        _enc(pre=ENC["pre"].replace("x = x + self.drop(a)", "x = self.drop(x + a)")),
        "`norm2`, na entrada",
    ),
}

# guardas: o nome que a resposta NÃO pode receber, e o id certo dela
GUARDS = {
    # a atenção pela metade não é "sem residual" nem outra troca de subcamadas
    "enc: atenção pela metade não é sem residual": (
        "EncoderLayer",
        _enc(pre=ENC["pre"].replace("x = x + self.drop(a)", "x = x + 0.5 * self.drop(a)")),
        "residual",
        None,
    ),
    # um sorteio a mais antes da FFN (modo de treino): a FFN recebe a entrada certa e sorteia outra máscara;
    # o erro não está nela
    "enc: sorteio de dropout jogado fora antes da FFN": (
        "EncoderLayer",
        _enc().replace(
            "return x + self.drop(self.ffn", "self.drop(x)\n            return x + self.drop(self.ffn"
        ),
        "o erro está em `ffn`",
        None,
    ),
    # ReLU só no primeiro caso (x (2, 5, 8)): o segundo caso, com outra forma, não a confirma
    "ffn: ReLU só com o lote (2, 5)": (
        "FeedForward",
        _ffn(
            "act = F.relu if x.shape[:-1] == (2, 5) else F.gelu\n        "
            "return self.linear2(self.dropout(act(self.linear1(x))))"
        ),
        "ReLU",
        None,
    ),
}


def _define(code: str, name: str):
    namespace = {
        "torch": torch, "math": math, "nn": torch.nn, "F": torch.nn.functional, "__name__": "aluno",
        "MultiHeadAttention": MultiHeadAttention, "FeedForwardRef": FeedForwardRef,
    }  # fmt: skip
    exec(code, namespace)  # noqa: S102 - a resposta (errada ou certa), local
    return namespace[name]


def _first_failure(exercise, answer, offset=OFFSET) -> tuple[str, CheckFailure]:
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


@pytest.mark.parametrize(("name", "exercise", "code", "where"), [(n, *v) for n, v in NO_CAUSE.items()])
def test_an_unknown_mistake_gets_where_and_no_cause(name, exercise, code, where):
    grade_id, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert not grade_id.endswith("_hidden"), str(failure)
    assert f"A primeira diferença aparece em {where}" in str(failure), str(failure)
    assert "Diagnóstico provável" not in str(failure), str(failure)
    assert not failure.data.get("mistake") and not failure.data.get("cause"), failure.data
    assert failure.data["id"] == f"{exercise}/valores"


@pytest.mark.parametrize(("name", "exercise", "code", "wrong", "right"), [(n, *v) for n, v in GUARDS.items()])
def test_a_mistake_is_never_named_when_it_does_not_reproduce_the_answer(name, exercise, code, wrong, right):
    _, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert wrong not in _cause(failure), str(failure)
    assert failure.data.get("mistake") == right, (failure.data, str(failure))


def test_an_exception_gets_no_unrelated_hint():
    """Uma exceção qualquer não ouve a dica das máscaras (que só explica uma máscara de 5 eixos)."""
    code = _enc().replace(
        "def forward(self, x, mask=None):", "def forward(self, x, mask=None):\n        mask = ~mask"
    )
    _, failure = _first_failure(EXERCISES["EncoderLayer"], _define(code, "EncoderLayer"))
    assert "Sua função levantou TypeError" in str(failure), str(failure)
    assert "Diagnóstico provável" not in str(failure), str(failure)
    assert failure.data["id"] == "EncoderLayer/excecao"
    extra_axis = "None if mask is None else mask.unsqueeze(1)"
    five = _enc().replace("self.self_attn(h, h, h, mask)", f"self.self_attn(h, h, h, {extra_axis})")
    _, failure = _first_failure(EXERCISES["EncoderLayer"], _define(five, "EncoderLayer"))
    assert "5 eixos" in _cause(failure), str(failure)
    assert failure.data["id"] == "EncoderLayer/excecao/mascara-5-eixos"


# -------------------------------------------------------- as respostas certas, escritas de outro jeito

CORRECT = {
    "FeedForward": [
        _ffn(
            "h = self.linear1(x)\n        h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))\n"
            "        return self.linear2(F.dropout(h, self.dropout.p, self.training))"
        ),
        _ffn("return self.linear2(self.dropout(nn.GELU()(self.linear1(x))))"),
    ],
    "EncoderLayer": [
        _enc(ffn="FeedForward") + _ffn(),
        _enc(
            pre="out, w = self.self_attn(self.norm1(x), self.norm1(x), self.norm1(x), mask=mask)\n"
            "            y = x + self.drop(out)\n            z = self.ffn(self.norm2(y))\n"
            "            return y + self.drop(z), w"
        ),
    ],
    "DecoderLayer": [
        _dec(
            cross_pre="q = self.norm2(x)\n            a, cw = self.cross_attn(q, key=memory, value=memory, "
            "mask=memory_mask)"
        ),
    ],
}
CORRECT_CASES = [(name, i, code) for name, codes in CORRECT.items() for i, code in enumerate(codes)]


@pytest.mark.parametrize(("name", "i", "code"), CORRECT_CASES, ids=[f"{n}-{i}" for n, i, _ in CORRECT_CASES])
def test_correct_answers_written_differently_keep_full_marks(name, i, code):
    exercise = EXERCISES[name]
    answer = _define(code, name)
    exercise.visible(answer)
    offset = seed_offset(b"diagnostico", f"aluno-{i}", CHAPTER, "oculto")
    with judging(LocalStudent(), offset, []):
        exercise.hidden(answer)


# ---------------------------------------------------------------- no juiz: a mesma mensagem, os mesmos dados


@pytest.fixture(scope="module")
def kernel():
    with StudentKernel() as k:
        k.run(
            "import math\nimport torch\nfrom torch import nn\nfrom torch.nn import functional as F\n"
            "from transformer_course.multihead import MultiHeadAttention\n"
            "from transformer_course.layers import FeedForward as FeedForwardRef\n"
        )
        yield k


def _without_line(message: str) -> str:
    return re.sub(r" \(linha \d+: `[^`]*`\)", "", message)


REMOTE = [
    "ffn: GELU por tanh",
    "ffn: dropout no fim (modo de treino, visível)",
    "enc: FFN própria com o dobro",
    "enc: atenção sem dropout (visível)",
    "dec: cruzada reaproveita self_attn",
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
