"""Capítulo 1 (issue 31): erros de posição que ninguém previu recebem um diagnóstico certo, e nunca um errado.

Cada resposta errada abaixo é código de verdade. Um erro conhecido só é nomeado se reproduz a resposta
também num segundo caso (outros tamanhos, outras posições, outra base, outro H); sem ele, a mensagem diz
os parâmetros ajustados (o arranjo seno/cosseno, o deslocamento das posições e a base da senoidal; o
arranjo dos pares, o sentido, positions ignorado e a base efetiva do RoPE; a precisão de float32 dos
ângulos; o fator e o deslocamento das inclinações de ALiBi) ou a primeira propriedade que quebra.
``SinusoidalPositionalEncoding`` aponta o erro em ``sinusoidal_encoding`` e ``alibi_bias`` em
``alibi_slopes`` quando a resposta é a do exercício anterior errado. A receita oficial de ALiBi
(``alibi_slopes_official``) é um erro conhecido. O juiz remoto dá a mesma mensagem e o mesmo id.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from judge_helpers import StudentKernel
from torch import nn

from transformer_course.exercises import all_exercises
from transformer_course.feedback import CheckFailure
from transformer_course.instructor.judge import judge_cell, seed_offset
from transformer_course.probe import LocalStudent, judging

CHAPTER = "01_embeddings_posicao"
OFFSET = 4242
EXERCISES = {ex.name: ex for ex in all_exercises() if ex.chapter == CHAPTER}

# ---------------------------------------------------------------- respostas (código de verdade)

TOKEN = """
class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model**-0.5)
        if padding_idx is not None:
            with torch.no_grad():
                self.embedding.weight[padding_idx].zero_()

    def forward(self, token_ids):
        return self.embedding(token_ids) * SCALE
"""

SIN = """
def sinusoidal_encoding(max_len, d_model):
    if max_len <= 0 or d_model <= 0 or d_model % 2:
        raise ValueError("tamanhos inválidos")
    p = torch.arange(max_len, dtype=torch.float64)[:, None] + OFFSET
    w = BASE ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    a = p * w
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    LAYOUT
    return pe.DTYPE()
"""
INTERLEAVED = "pe[:, 0::2] = torch.sin(a)\n    pe[:, 1::2] = torch.cos(a)"


def _sin(base="10000.0", offset="0", layout=INTERLEAVED, dtype="float") -> str:
    return (
        SIN.replace("BASE", base).replace("OFFSET", offset).replace("LAYOUT", layout).replace("DTYPE", dtype)
    )


SPE = """
class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.register_buffer("pe", TABLE)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        if x.size(-2) > self.pe.size(0):
            raise ValueError("sequência mais longa que max_len")
        return self.dropout(FORWARD)
"""


def _spe(sin=None, table="sinusoidal_encoding(max_len, d_model)", forward="x + self.pe[: x.size(-2)]") -> str:
    return (sin if sin is not None else _sin()) + SPE.replace("TABLE", table).replace("FORWARD", forward)


ROPE = """
def apply_rope(x, positions=None, base=10000.0):
    T, d = x.shape[-2:]
    if d % 2:
        raise ValueError("d ímpar")
    if positions is not None and positions.shape != (T,):
        raise ValueError("positions com comprimento errado")
    pos = torch.arange(T, device=x.device) if positions is None else positions
    theta = THETA
    ang = SIGN (pos.to(ANGLE_DTYPE)[:, None] + OFFSET) * theta
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    LAYOUT
"""
ROPE_INTERLEAVED = (
    "a, b = x[..., 0::2], x[..., 1::2]\n"
    "    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)"
)
ROPE_HALVES = (
    "a, b = x[..., : d // 2], x[..., d // 2 :]\n"
    "    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)"
)


def _rope(
    theta="base ** (-torch.arange(0, d, 2, dtype=ANGLE_DTYPE) / d)",
    sign="",
    offset="0",
    layout=ROPE_INTERLEAVED,
    angle_dtype="x.dtype",
) -> str:
    code = (
        ROPE.replace("THETA", theta).replace("SIGN", sign).replace("OFFSET", offset).replace("LAYOUT", layout)
    )
    return code.replace("ANGLE_DTYPE", angle_dtype)


ROPE_X32 = """
def apply_rope(x, positions=None, base=10000.0):
    T, d = x.shape[-2:]
    if d % 2:
        raise ValueError("d ímpar")
    if positions is not None and positions.shape != (T,):
        raise ValueError("positions com comprimento errado")
    pos = torch.arange(T) if positions is None else positions
    xf = x.float()
    ang = pos.float()[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    a, b = xf[..., 0::2], xf[..., 1::2]
    out = torch.stack((a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()), dim=-1).flatten(-2)
    return out.to(x.dtype)
"""

SLOPES = """
def alibi_slopes(n_heads):
    if n_heads <= 0:
        raise ValueError("n_heads deve ser positivo")
    BODY
"""
OFFICIAL = """
def alibi_slopes(n_heads):
    if n_heads <= 0:
        raise ValueError("n_heads deve ser positivo")

    def power_of_2(n):
        return [2 ** (-8 * h / n) for h in range(1, n + 1)]

    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_2(closest)
    if closest < n_heads:
        slopes += power_of_2(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes)
"""


def _slopes(body: str) -> str:
    return SLOPES.replace("BODY", body)


SLOPES_OK = _slopes(
    "h = torch.arange(1, n_heads + 1, dtype=torch.float32)\n    return 2.0 ** (-8.0 * h / n_heads)"
)
BIAS = """
def alibi_bias(n_heads, seq_len):
    if seq_len <= 0:
        raise ValueError("seq_len deve ser positivo")
    pos = torch.arange(seq_len, dtype=torch.float32)
    diff = pos[:, None] - pos[None, :]
    m = SLOPES_EXPR
    return BODY
"""


def _bias(
    slopes_code=SLOPES_OK, slopes="alibi_slopes(n_heads)", body="-m[:, None, None] * diff.abs()"
) -> str:
    return slopes_code + BIAS.replace("SLOPES_EXPR", slopes).replace("BODY", body)


INLINE_SLOPES = "2.0 ** (-8.0 * torch.arange(1, n_heads + 1, dtype=torch.float32) / n_heads)"

# nome -> (exercício, código, tipo, id do diagnóstico (ou o começo dele, terminado em "/"), trecho da frase)
FOUND = {
    # ------------------------------------------------ TokenEmbedding
    "token: sem √d_model": (
        "TokenEmbedding",
        TOKEN.replace("SCALE", "1.0"),
        "valores",
        "sem-raiz-de-d-model",
        "SEM a multiplicação",
    ),
    "token: dividido": (
        "TokenEmbedding",
        TOKEN.replace("* SCALE", "/ math.sqrt(self.d_model)"),
        "valores",
        "dividido",
        "DIVIDIDO",
    ),
    # ------------------------------------------------ sinusoidal_encoding
    "sin: seno e cosseno trocados": (
        "sinusoidal_encoding",
        _sin(layout="pe[:, 1::2] = torch.sin(a)\n    pe[:, 0::2] = torch.cos(a)"),
        "valores",
        "seno-cosseno-trocados",
        "trocados",
    ),
    "sin: metades": (
        "sinusoidal_encoding",
        _sin(layout="pe = torch.cat((torch.sin(a), torch.cos(a)), dim=-1)"),
        "valores",
        "metades-concatenadas",
        "metades",
    ),
    "sin: desde 1": (
        "sinusoidal_encoding",
        _sin(offset="1"),
        "valores",
        "posicoes-desde-1",
        "começando em 1",
    ),
    "sin: float64": ("sinusoidal_encoding", _sin(dtype="double"), "dtype", "dtype-float32", "float32"),
    "sin: base 1000": (
        "sinusoidal_encoding",
        _sin(base="1000.0"),
        "parametro",
        "parametros-da-senoidal",
        r"a base é 1000, não 10000",
    ),
    "sin: trocados e desde 1": (
        "sinusoidal_encoding",
        _sin(offset="1", layout="pe[:, 1::2] = torch.sin(a)\n    pe[:, 0::2] = torch.cos(a)"),
        "parametro",
        "parametros-da-senoidal",
        r"o cosseno nas colunas pares.*deslocadas de 1",
    ),
    "sin: metades e base 100": (
        "sinusoidal_encoding",
        _sin(base="100.0", layout="pe = torch.cat((torch.sin(a), torch.cos(a)), dim=-1)"),
        "parametro",
        "parametros-da-senoidal",
        r"metades \[senos \| cossenos\].*a base é 100, não 10000 \(é o que dá o expoente i/d_model",
    ),
    "sin: posição multiplicada pela escada": (
        "sinusoidal_encoding",
        _sin(base="(1 / 10000.0)"),
        "parametro",
        "parametros-da-senoidal",
        r"ω_i = 10000\^\(\+2i/d_model\): a posição foi multiplicada",
    ),
    "sin: -sen": (
        "sinusoidal_encoding",
        _sin(layout="pe[:, 0::2] = -torch.sin(a)\n    pe[:, 1::2] = torch.cos(a)"),
        "parametro",
        "parametros-da-senoidal",
        r"o seno com o sinal trocado",
    ),
    "sin: metades [cos | sen]": (
        "sinusoidal_encoding",
        _sin(layout="pe = torch.cat((torch.cos(a), torch.sin(a)), dim=-1)"),
        "parametro",
        "parametros-da-senoidal",
        r"as metades \[cossenos \| senos\]",
    ),
    "sin: seno nas duas colunas": (
        "sinusoidal_encoding",
        _sin(layout="pe[:, 0::2] = torch.sin(a)\n    pe[:, 1::2] = torch.sin(a)"),
        "propriedade",
        "pares-sen-cos",
        r"sen² \+ cos² = 1",
    ),
    "sin: amplitude 2": (
        "sinusoidal_encoding",
        _sin(layout="pe[:, 0::2] = 2 * torch.sin(a)\n    pe[:, 1::2] = 2 * torch.cos(a)"),
        "propriedade",
        "valores-em-menos-1-1",
        r"ficam em \[−1, 1\]",
    ),
    # ------------------------------------------------ SinusoidalPositionalEncoding
    "spe: a sinusoidal_encoding com base 1000": (
        "SinusoidalPositionalEncoding",
        _spe(_sin(base="1000.0")),
        "anterior",
        "erro-em-sinusoidal_encoding/parametros-da-senoidal/",
        r"o erro está em `sinusoidal_encoding`.*a base é 1000",
    ),
    "spe: a sinusoidal_encoding em float64": (
        "SinusoidalPositionalEncoding",
        _spe(_sin(dtype="double")),
        "anterior",
        "erro-em-sinusoidal_encoding/dtype-float32",
        r"o erro está em `sinusoidal_encoding`.*float64",
    ),
    "spe: a sinusoidal_encoding trocada": (
        "SinusoidalPositionalEncoding",
        _spe(_sin(layout="pe[:, 1::2] = torch.sin(a)\n    pe[:, 0::2] = torch.cos(a)")),
        "anterior",
        "erro-em-sinusoidal_encoding/seno-cosseno-trocados",
        r"o erro está em `sinusoidal_encoding`.*trocados",
    ),
    "spe: x multiplicado": (
        "SinusoidalPositionalEncoding",
        _spe(forward="x * self.pe[: x.size(-2)]"),
        "valores",
        "multiplicado",
        "MULTIPLICADO",
    ),
    "spe: só a posição": (
        "SinusoidalPositionalEncoding",
        _spe(forward="self.pe[: x.size(-2)].expand_as(x)"),
        "valores",
        "so-a-posicao",
        "sozinha",
    ),
    # ------------------------------------------------ apply_rope
    "rope: sentido contrário": (
        "apply_rope",
        _rope(sign="-"),
        "valores",
        "sentido-contrario",
        "sentido contrário",
    ),
    "rope: rotate_half": ("apply_rope", _rope(layout=ROPE_HALVES), "valores", "rotate-half", "rotate_half"),
    "rope: desde 1": ("apply_rope", _rope(offset="1"), "valores", "posicoes-desde-1", "começando em 1"),
    "rope: i/d": (
        "apply_rope",
        _rope(theta="base ** (-torch.arange(0, d // 2, dtype=x.dtype) / d)"),
        "valores",
        "expoente-i-d",
        "i/d",
    ),
    "rope: rotate_half ao contrário": (
        "apply_rope",
        _rope(sign="-", layout=ROPE_HALVES),
        "parametro",
        "parametros-da-rotacao",
        r"rotate_half.*sentido contrário",
    ),
    "rope: rotate_half desde 1": (
        "apply_rope",
        _rope(offset="1", layout=ROPE_HALVES),
        "parametro",
        "parametros-da-rotacao",
        r"rotate_half.*deslocadas de 1",
    ),
    "rope: i/d ao contrário": (
        "apply_rope",
        _rope(sign="-", theta="base ** (-torch.arange(0, d // 2, dtype=x.dtype) / d)"),
        "parametro",
        "parametros-da-rotacao",
        r"sentido contrário.*a base efetiva é 100, não 10000 \(é o que dá o expoente i/d",
    ),
    "rope: base 1000 fixa": (
        "apply_rope",
        _rope(theta="1000.0 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)"),
        "parametro",
        "parametros-da-rotacao",
        r"a base efetiva é 1000, não 10000",
    ),
    "rope: ângulos em graus": (
        "apply_rope",
        _rope(theta="base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d) * math.pi / 180"),
        "parametro",
        "parametros-da-rotacao",
        r"θ_0 = 0,01745",
    ),
    "rope: ângulos em float32": (
        "apply_rope",
        _rope(angle_dtype="torch.float32"),
        "parametro",
        "angulos-em-float32",
        r"precisão de float32 \(erro de até 6,\d+ × 10⁻⁸.*θ, p·θ \(e cos/sin\) foram calculados em float32",
    ),
    "rope: x em float32": (
        "apply_rope",
        ROPE_X32,
        "parametro",
        "x-em-float32",
        r"x passou por float32",
    ),
    "rope: sen e cos trocados": (
        "apply_rope",
        _rope()
        .replace("cos, sin = ang.cos()", "sin, cos = ang.cos()")
        .replace("ang.sin().to", "ang.sin().to"),
        "propriedade",
        "angulo-da-rotacao",
        r"foi girado \(a norma se preserva\), mas com outro ângulo",
    ),
    "rope: saída dobrada": (
        "apply_rope",
        _rope(layout=ROPE_INTERLEAVED.replace("return torch", "return 2 * torch")),
        "propriedade",
        "norma-dos-pares",
        r"preserva a norma de cada par",
    ),
    # ------------------------------------------------ alibi_slopes
    "slopes: h = 0 … H−1": (
        "alibi_slopes",
        _slopes("h = torch.arange(0, n_heads, dtype=torch.float32)\n    return 2.0 ** (-8.0 * h / n_heads)"),
        "valores",
        "h-desde-0",
        "uma cabeça fora",
    ),
    "slopes: sem o 8": (
        "alibi_slopes",
        _slopes("h = torch.arange(1, n_heads + 1, dtype=torch.float32)\n    return 2.0 ** (-h / n_heads)"),
        "valores",
        "sem-o-8",
        "sem o 8",
    ),
    "slopes: ordem invertida": (
        "alibi_slopes",
        _slopes(
            "h = torch.arange(n_heads, 0, -1, dtype=torch.float32)\n    return 2.0 ** (-8.0 * h / n_heads)"
        ),
        "valores",
        "ordem-invertida",
        "ordem invertida",
    ),
    "slopes: receita oficial": (
        "alibi_slopes",
        OFFICIAL,
        "valores",
        "receita-oficial",
        "alibi_slopes_official",
    ),
    "slopes: fator 4": (
        "alibi_slopes",
        _slopes(
            "h = torch.arange(1, n_heads + 1, dtype=torch.float32)\n    return 2.0 ** (-4.0 * h / n_heads)"
        ),
        "parametro",
        "expoente-das-inclinacoes",
        r"a = 4 e s = 0: o fator do expoente é 4, não 8",
    ),
    "slopes: h + 1": (
        "alibi_slopes",
        _slopes(
            "h = torch.arange(2, n_heads + 2, dtype=torch.float32)\n    return 2.0 ** (-8.0 * h / n_heads)"
        ),
        "parametro",
        "expoente-das-inclinacoes",
        r"o índice das cabeças é h \+ 1",
    ),
    "slopes: base e": (
        "alibi_slopes",
        _slopes(
            "h = torch.arange(1, n_heads + 1, dtype=torch.float32)\n    return torch.exp(-8.0 * h / n_heads)"
        ),
        "parametro",
        "expoente-das-inclinacoes",
        r"o fator do expoente é 11,54, não 8",
    ),
    # ------------------------------------------------ alibi_bias
    "bias: alibi_slopes com h = 0 … H−1": (
        "alibi_bias",
        _bias(
            _slopes(
                "h = torch.arange(0, n_heads, dtype=torch.float32)\n    return 2.0 ** (-8.0 * h / n_heads)"
            )
        ),
        "anterior",
        "erro-em-alibi_slopes/h-desde-0",
        r"o erro está em `alibi_slopes`, que a sua `alibi_bias` usa: ela coincide com .* h = 0",
    ),
    "bias: alibi_slopes com a receita oficial": (
        "alibi_bias",
        _bias(OFFICIAL),
        "anterior",
        "erro-em-alibi_slopes/receita-oficial",
        r"o erro está em `alibi_slopes`.*receita do código oficial",
    ),
    "bias: alibi_slopes com fator 4": (
        "alibi_bias",
        _bias(
            _slopes(
                "h = torch.arange(1, n_heads + 1, dtype=torch.float32)\n"
                "    return 2.0 ** (-4.0 * h / n_heads)"
            )
        ),
        "anterior",
        "erro-em-alibi_slopes/valores",
        r"o erro está em `alibi_slopes`.*outras inclinações",
    ),
    "bias: sinal trocado": (
        "alibi_bias",
        _bias(body="m[:, None, None] * diff.abs()"),
        "valores",
        "sinal-trocado",
        "sinal",
    ),
    "bias: sem abs": (
        "alibi_bias",
        _bias(body="-m[:, None, None] * diff"),
        "valores",
        "sem-valor-absoluto",
        "sem o valor",
    ),
    "bias: sem abs pela metade": (
        "alibi_bias",
        _bias(body="-0.5 * m[:, None, None] * diff"),
        "propriedade",
        "simetria",
        "simétrico",
    ),
    "bias: distância ao quadrado": (
        "alibi_bias",
        _bias(body="-m[:, None, None] * diff ** 2"),
        "propriedade",
        "distancia",
        r"a distância não é \|i − j\|: em \(i, j\) = \(0, 2\) ela vale 4",
    ),
    "bias: inclinações dobradas": (
        "alibi_bias",
        _bias(body="-2 * m[:, None, None] * diff.abs()"),
        "propriedade",
        "inclinacoes",
        r"a distância \|i − j\| está certa, mas as inclinações não",
    ),
    "bias: diagonal −1": (
        "alibi_bias",
        _bias(body="-m[:, None, None] * diff.abs() - 1"),
        "propriedade",
        "diagonal-nula",
        r"bias\[h, i, i\] deveria ser 0",
    ),
}

# Guardas: respostas erradas e o diagnóstico que elas NÃO podem receber (e o certo delas, quando há).
GUARDS = {
    # × 4 fixo: com d_model = 4 no 1º caso coincide com "× d_model", mas não num módulo de outro tamanho.
    "token: fator fixo 4": ("TokenEmbedding", TOKEN.replace("SCALE", "4.0"), "por d_model", None),
    # A base muda com d_model: nenhuma "base" fixa a descreve nos dois casos.
    "sin: base que muda com d_model": (
        "sinusoidal_encoding",
        _sin(base="(100.0 * d_model)"),
        "a base é",
        None,
    ),
    # A tabela da senoidal do aluno está errada, mas o módulo calcula a sua própria (errada de outro jeito).
    "spe: não usa a sinusoidal_encoding": (
        "SinusoidalPositionalEncoding",
        _sin(base="1000.0")
        + _sin(offset="1").replace("def sinusoidal_encoding", "def minha_tabela")
        + SPE.replace("TABLE", "minha_tabela(max_len, d_model)").replace(
            "FORWARD", "x + self.pe[: x.size(-2)]"
        ),
        "o erro está em",
        "posicoes-desde-1",
    ),
    # 2^(−h): certo com H = 8, um fator que muda com H depois; nem "sem o 8", nem um fator fixo.
    "slopes: 2^(−h)": (
        "alibi_slopes",
        _slopes("h = torch.arange(1, n_heads + 1, dtype=torch.float32)\n    return 2.0 ** (-h)"),
        "o fator do expoente",
        None,
    ),
    # Inclinações erradas definidas, mas o viés usa as suas próprias (e erra o sinal).
    "bias: não usa a alibi_slopes": (
        "alibi_bias",
        _bias(OFFICIAL, slopes=INLINE_SLOPES, body="m[:, None, None] * diff.abs()"),
        "o erro está em",
        "sinal-trocado",
    ),
    # As posições ordenadas: não é "positions ignorado" nem um deslocamento.
    "rope: positions ordenado": (
        "apply_rope",
        _rope().replace("else positions\n", "else positions.sort().values\n"),
        "ignorado",
        "angulo-da-rotacao",
    ),
}


def _define(code: str, name: str):
    namespace = {"torch": torch, "math": math, "nn": nn, "F": torch.nn.functional}
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


def _key_matches(found: str, key: str) -> bool:
    return found.startswith(key) if key.endswith("/") else found == key


@pytest.mark.parametrize(("name", "case"), FOUND.items(), ids=list(FOUND))
def test_each_wrong_answer_gets_its_own_diagnosis(name, case):
    exercise, code, kind, key, pattern = case
    _, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert re.search(pattern, _cause(failure)), str(failure)
    assert failure.data["kind"] == kind, failure.data
    assert _key_matches(failure.data["mistake"], key), failure.data
    assert failure.data["id"] == f"{exercise}/{kind}/{failure.data['mistake']}"
    assert failure.data["exercise"] == exercise and failure.data["case"]


@pytest.mark.parametrize(("name", "case"), GUARDS.items(), ids=list(GUARDS))
def test_a_mistake_is_never_named_when_it_does_not_reproduce_the_answer(name, case):
    exercise, code, wrong, right = case
    _, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert wrong not in _cause(failure), str(failure)
    assert failure.data.get("mistake") == right, failure.data


def test_the_float32_rope_case_prints_digits_that_differ():
    """O caso do issue: maior |Δ| ≈ 6,35 × 10⁻⁸ em float64; esperado e obtido não podem sair iguais."""
    _, failure = _first_failure(
        EXERCISES["apply_rope"], _define(_rope(angle_dtype="torch.float32"), "apply_rope")
    )
    line = next(li for li in str(failure).splitlines() if li.startswith("Primeira diferença"))
    expected, obtained = re.search(r"esperado (\S+), obtido (\S+)\.$", line).groups()
    assert expected != obtained, line


# ---------------------------------------------------------------- respostas certas escritas de outro jeito

CORRECT = {
    "sinusoidal_encoding": [
        _sin(layout="pe = torch.stack((torch.sin(a), torch.cos(a)), dim=-1).flatten(1)"),
        _sin().replace(
            "w = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)",
            "w = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)",
        ),
    ],
    "SinusoidalPositionalEncoding": [
        _spe(),
        _spe(forward="x + self.pe[: x.size(-2)].to(x.dtype)"),
        _spe(forward="torch.add(x, self.pe.narrow(0, 0, x.size(-2)))"),
    ],
    "apply_rope": [
        _rope(),
        _rope(angle_dtype="torch.float64"),
        # pela convenção das metades, com a permutação que leva os intercalados às metades
        _rope(layout=ROPE_HALVES).replace("def apply_rope(", "def _halves(").replace("    LAYOUT", "")
        + """
def apply_rope(x, positions=None, base=10000.0):
    d = x.size(-1)
    if d % 2:
        raise ValueError("d ímpar")
    perm = torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))
    inverse = torch.argsort(perm)
    return _halves(x[..., perm], positions, base)[..., inverse]
""",
    ],
    "alibi_slopes": [
        _slopes("return torch.logspace(-8 / n_heads, -8, n_heads, base=2.0)"),
        _slopes(
            "r = 2 ** (-8 / n_heads)\n"
            "    return torch.tensor([r**h for h in range(1, n_heads + 1)], dtype=torch.float32)"
        ),
    ],
    "alibi_bias": [
        _bias(),
        _bias(slopes=INLINE_SLOPES, body="-torch.einsum('h,ij->hij', m, diff.abs())"),
        _bias(body="(-m.double()[:, None, None] * diff.double().abs()).float()"),
    ],
}
CORRECT_CASES = [(name, i, code) for name, codes in CORRECT.items() for i, code in enumerate(codes)]


@pytest.mark.parametrize(("name", "i", "code"), CORRECT_CASES, ids=[f"{n}-{i}" for n, i, _ in CORRECT_CASES])
def test_correct_answers_written_differently_keep_full_marks(name, i, code):
    answer = _define(code, name)
    exercise = EXERCISES[name]
    for k in range(2):  # as sementes ocultas de duas entregas
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
    "sin: base 1000",
    "spe: a sinusoidal_encoding com base 1000",
    "rope: rotate_half desde 1",
    "rope: ângulos em float32",
    "slopes: receita oficial",
    "slopes: fator 4",
    "bias: alibi_slopes com h = 0 … H−1",
    "bias: distância ao quadrado",
]


@pytest.mark.parametrize("name", REMOTE)
def test_the_judge_gives_the_same_diagnosis(kernel, name):
    exercise, code, kind, _, _ = FOUND[name]
    grade_id, local = _first_failure(EXERCISES[exercise], _define(code, exercise))
    kernel.run(code)
    verdict = judge_cell(CHAPTER, grade_id, kernel.student(), OFFSET)
    assert verdict.status == "falhou" and verdict.points == 0, verdict.message
    assert _without_line(verdict.message) == _without_line(str(local))
    assert verdict.diagnosis["id"] == local.data["id"] and local.data["kind"] == kind
