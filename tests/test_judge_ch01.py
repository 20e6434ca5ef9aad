"""Capítulo 1 no juiz remoto: respostas erradas perdem os pontos, e com a mesma mensagem que o aluno lê
ao estudar.

Cada resposta é definida num kernel de verdade; o juiz (aqui, neste processo) constrói os módulos do
lado do aluno, pede a tabela ``pe``, os pesos do ``nn.Embedding``, as saídas em treino (dropout com a
semente do juiz) e em ``eval()``, e os gradientes — e só recebe dados. A mesma resposta, verificada
localmente, tem de falhar nas mesmas células com o mesmo texto.
"""

from __future__ import annotations

import pytest
from judge_helpers import StudentKernel, local_and_remote_code, without_line

CHAPTER = "01_embeddings_posicao"

VISIBLE, HIDDEN, BOTH = {"visível"}, {"oculto"}, {"visível", "oculto"}

TOKEN = """
class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=PADDING)
        INIT
        if padding_idx is not None and REZERO:
            with torch.no_grad():
                self.embedding.weight[padding_idx].zero_()

    def forward(self, token_ids):
        return FORWARD
"""
TOKEN_RIGHT = {
    "PADDING": "padding_idx",
    "INIT": "nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model**-0.5)",
    "REZERO": "True",
    "FORWARD": "self.embedding(token_ids) * math.sqrt(self.d_model)",
}


def token(**changes: str) -> str:
    code = TOKEN
    for key, value in {**TOKEN_RIGHT, **changes}.items():
        code = code.replace(key, value)
    return code


SPE = """
class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        if d_model % 2:
            raise ValueError("d_model deve ser par")
        position = torch.arange(max_len, dtype=torch.float64)[:, None]
        omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * omega), torch.cos(position * omega)
        STORE
        self.p = dropout

    def forward(self, x):
        if x.size(-2) > self.pe.size(0):
            raise ValueError("sequência mais longa que max_len")
        return FORWARD
"""
SPE_RIGHT = {
    "STORE": 'self.register_buffer("pe", pe.float())',
    "FORWARD": "F.dropout(x + self.pe[: x.size(-2)], self.p, self.training)",
}


def spe(**changes: str) -> str:
    code = SPE
    for key, value in {**SPE_RIGHT, **changes}.items():
        code = code.replace(key, value)
    return code


LPE = """
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.position_embedding = TABLE
        EXTRA

    def forward(self, x):
        if x.size(-2) > self.position_embedding.num_embeddings:
            raise ValueError("sequência mais longa que max_len")
        positions = torch.arange(START, x.size(-2) + START, device=x.device)
        return FORWARD
"""
LPE_RIGHT = {
    "TABLE": "nn.Embedding(max_len, d_model)",
    "EXTRA": "",
    "START": "0",
    "FORWARD": "x + self.position_embedding(positions)",
}


def lpe(**changes: str) -> str:
    code = LPE
    for key, value in {**LPE_RIGHT, **changes}.items():
        code = code.replace(key, value)
    return code


ROPE = """
def apply_rope(x, positions=None, base=10000.0):
    seq_len, d = x.size(-2), x.size(-1)
    if d % 2:
        raise ValueError("a última dimensão deve ser par")
    if positions is None:
        positions = torch.arange(seq_len)
    if positions.shape != (seq_len,):
        raise ValueError("positions deve ter uma posição por linha de x")
    theta = base ** (-torch.arange(0, d, 2, dtype=DTYPE) / d)
    angles = (positions.to(DTYPE)[:, None] * theta).to(x.dtype)
    cos, sin = angles.cos(), angles.sin()
    a, b = PAIRS
    return COMBINE
"""
ROPE_RIGHT = {
    "DTYPE": "x.dtype",
    "PAIRS": "x[..., 0::2], x[..., 1::2]",
    "COMBINE": "torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)",
}


def rope(**changes: str) -> str:
    code = ROPE
    for key, value in {**ROPE_RIGHT, **changes}.items():
        code = code.replace(key, value)
    return code


# (exercício, o erro, código, onde falha, trecho do diagnóstico — ou um por célula)
WRONG = [
    (
        "TokenEmbedding",
        "sem √d_model",
        token(FORWARD="self.embedding(token_ids)"),
        BOTH,
        "SEM a multiplicação",
    ),
    ("TokenEmbedding", "padding ignorado", token(PADDING="None"), BOTH, "`padding_idx` ignorado"),
    ("TokenEmbedding", "N(0, 1)", token(INIT="pass"), BOTH, "N(0, 1)"),
    ("TokenEmbedding", "padding sorteado", token(REZERO="False"), BOTH, "zere-a de novo"),
    (
        "TokenEmbedding",
        "padding fixo em 0",  # os visíveis só usam padding_idx = 0
        token(PADDING="None if padding_idx is None else 0"),
        HIDDEN,
        "`embedding.padding_idx` deveria ser 29; é 0",
    ),
    (
        "SinusoidalPositionalEncoding",
        "multiplicado",
        spe(FORWARD="x * self.pe[: x.size(-2)]"),
        BOTH,
        "MULTIPLICADO",
    ),
    (
        "SinusoidalPositionalEncoding",
        "parâmetro",
        spe(STORE="self.pe = nn.Parameter(pe.float())"),
        BOTH,
        "parâmetro treinável",
    ),
    (
        "SinusoidalPositionalEncoding",
        "dropout duas vezes",
        spe(
            FORWARD="F.dropout(F.dropout(x + self.pe[: x.size(-2)], self.p, self.training), "
            "self.p, self.training)"
        ),
        HIDDEN,
        "DUAS vezes",
    ),
    (
        "SinusoidalPositionalEncoding",
        "dropout ligado em eval",
        spe(FORWARD="F.dropout(x + self.pe[: x.size(-2)], self.p)"),
        HIDDEN,
        "ligado também em `eval()`",
    ),
    (
        "SinusoidalPositionalEncoding",
        "máscara sorteada à mão",
        spe(
            FORWARD="(x + self.pe[: x.size(-2)]) * (torch.rand_like(x) >= self.p) / (1 - self.p) "
            "if self.training and self.p else x + self.pe[: x.size(-2)]"
        ),
        HIDDEN,
        "sorteado por conta própria",
    ),
    (
        "LearnedPositionalEmbedding",
        "só o embedding",
        lpe(FORWARD="self.position_embedding(positions).expand_as(x)"),
        BOTH,
        "sem somar x",
    ),
    (
        "LearnedPositionalEmbedding",
        "desde 1",
        lpe(START="1"),
        BOTH,
        {"visível": "começando em 1", "oculto": "IndexError"},  # com T = max_len, a posição T não existe
    ),
    (
        "LearnedPositionalEmbedding",
        "trocado",
        lpe(TABLE="nn.Embedding(d_model, max_len)"),
        BOTH,
        "estão trocados",
    ),
    (
        "LearnedPositionalEmbedding",
        "parâmetro a mais",
        lpe(EXTRA="self.scale = nn.Parameter(torch.ones(1))"),
        HIDDEN,
        "30 parâmetros",
    ),
    (
        "sinusoidal_encoding",
        "seno e cosseno trocados",
        """
def sinusoidal_encoding(max_len, d_model):
    if max_len <= 0 or d_model <= 0 or d_model % 2:
        raise ValueError("tamanhos inválidos")
    positions = torch.arange(max_len, dtype=torch.float64)[:, None]
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.cos(positions * omega), torch.sin(positions * omega)
    return pe.float()
""",
        BOTH,
        "seno e cosseno trocados",
    ),
    (
        "apply_rope",
        "rotate_half",
        rope(
            PAIRS="x[..., : d // 2], x[..., d // 2 :]",
            COMBINE="torch.cat((a * cos - b * sin, a * sin + b * cos), -1)",
        ),
        BOTH,
        "rotate_half",
    ),
    (
        "apply_rope",
        "ângulos em float32",
        rope(DTYPE="torch.float32"),
        BOTH,
        {"visível": "θ, p·θ (e cos/sin) foram calculados em float32", "oculto": "precisão de float32"},
    ),
    (
        "alibi_bias",
        "sem o valor absoluto",
        """
def alibi_bias(n_heads, seq_len):
    if seq_len <= 0:
        raise ValueError("seq_len deve ser positivo")
    slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1, dtype=torch.float32) / n_heads)
    positions = torch.arange(seq_len, dtype=torch.float32)
    return -slopes[:, None, None] * (positions[:, None] - positions[None, :])
""",
        BOTH,
        "sem o valor absoluto",
    ),
]


@pytest.fixture(scope="module")
def kernel():
    with StudentKernel() as k:
        yield k


@pytest.mark.parametrize("name, label, code, fails, words", WRONG, ids=[f"{w[0]}:{w[1]}" for w in WRONG])
def test_wrong_answer_loses_points_remotely_with_the_local_message(kernel, name, label, code, fails, words):
    for cell, local, verdict in local_and_remote_code(kernel, CHAPTER, name, code):
        where = "oculto" if cell.hidden else "visível"
        if where in fails:
            assert local is not None, f"{label}: o teste {where} local deixou passar"
            wanted = words[where] if isinstance(words, dict) else words
            assert wanted in local, f"{label}: o diagnóstico local não cita {wanted!r}:\n{local}"
            assert verdict.status == "falhou", (cell.grade_id, verdict.message)
            assert verdict.points == 0
            assert without_line(verdict.message) == without_line(local)
        else:
            assert local is None, f"{label}: o teste {where} local falhou:\n{local}"
            assert verdict.status == "passou", (cell.grade_id, verdict.message)
            assert verdict.points == cell.points
