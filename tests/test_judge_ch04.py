"""Capítulo 4 no juiz remoto: camadas erradas perdem os pontos com a mesma mensagem que a local.

As respostas são as camadas configuráveis de ``test_ch04_checks.py`` (o mesmo código-fonte),
executadas num kernel de verdade (o lado do aluno) e, iguais, neste processo. A verificação roda
aqui nos dois casos; no remoto, a camada fica no kernel e só dados atravessam: pesos copiados
pelo nome de cada parâmetro, a descrição dos atributos (um mesmo módulo com dois nomes
incluído), dropout em modo de treino com a mesma semente, gradientes e os ganchos nas subcamadas
que dizem onde aparece a primeira diferença. O veredito remoto tem de ser o mesmo: falha, 0 ponto
e a mesma mensagem.
"""

from __future__ import annotations

import inspect
import re
import textwrap

import pytest
import test_ch04_checks as same_code
from judge_helpers import StudentKernel, local_and_remote

SETUP = """
import math
import torch
from torch import nn
from torch.nn import functional as F
from transformer_course.multihead import MultiHeadAttention
"""

SHARED = (
    same_code.Student,
    same_code.StudentFFN,
    same_code.make_ffn,
    same_code.StudentEncoder,
    same_code.make_encoder,
    same_code.StudentDecoder,
    same_code.make_decoder,
)

EXTRA = '''
class ScaledFFN(StudentFFN):
    """Erro fora da lista: a ativação dobrada."""

    def forward(self, x):
        return self.linear2(self.dropout(2.0 * F.gelu(self.linear1(x))))


class DetachedFFN(StudentFFN):
    def forward(self, x):
        return super().forward(x).detach()


class AliasedNorms(make_encoder(None)):
    """`self.norm2 = self.norm1`: um só módulo com dois nomes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.norm2 = self.norm1


class UnusedLinear(make_decoder(None)):
    """Uma camada criada no `__init__` e nunca usada: não recebe gradiente."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.extra = nn.Linear(4, 4)


class CrossBySelfAttn(make_decoder(None)):
    """A atenção cruzada pelo módulo da autoatenção (Pre-LN): `self.cross_attn` nunca é chamada."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        h = self.norm1(x)
        a, sw = self.self_attn(h, h, h, tgt_mask)
        x = x + self.drop(a)
        a, cw = self.self_attn(self.norm2(x), memory, memory, memory_mask)
        x = x + self.drop(a)
        return x + self.drop(self.ffn(self.norm3(x))), sw, cw


class FiveDMask(make_encoder(None)):
    def forward(self, x, mask=None):
        return super().forward(x, None if mask is None else mask.unsqueeze(1))
'''

ANSWERS = "\n\n".join(textwrap.dedent(inspect.getsource(obj)) for obj in SHARED) + EXTRA

OFFSET = 31337  # os testes ocultos de uma entrega qualquer (o mesmo deslocamento nos dois lados)

FIRST = "primeira diferença aparece em "
# resposta -> (exercício, palavras da falha na célula visível, na oculta); None: a célula passa,
# "": falha (com a mensagem que for, a mesma dos dois lados)
CASES = {
    'make_ffn("relu")': ("FeedForward", "ReLU em vez de GELU", ""),
    'make_ffn("dropout_at_end")': ("FeedForward", "no fim, depois de `linear2`", ""),
    "ScaledFFN": ("FeedForward", FIRST + "`linear2`, na entrada", ""),
    "DetachedFFN": ("FeedForward", None, "não está ligada ao grafo"),
    'make_encoder("swap_ln")': ("EncoderLayer", "`norm_first=True` pede Pre-LN", ""),
    'make_encoder("mask_ignored")': ("EncoderLayer", "atenção sem máscara", ""),
    'make_encoder("no_layer_dropout")': ("EncoderLayer", "sem *dropout* na saída das subcamadas", ""),
    'make_encoder("dropout_after_sum")': ("EncoderLayer", FIRST + "`norm2`, na entrada", ""),
    'make_encoder("scaled_sa")': ("EncoderLayer", FIRST + "`norm2`, na entrada", ""),
    "AliasedNorms": ("EncoderLayer", "única LayerNorm", "única LayerNorm"),
    "FiveDMask": ("EncoderLayer", "5 eixos", ""),
    'make_decoder("cross_on_self")': ("DecoderLayer", "entrada do decodificador em vez da memória", ""),
    'make_decoder("swapped_weights")': ("DecoderLayer", "pesos da atenção cruzada no lugar", ""),
    'make_decoder("scaled_memory")': ("DecoderLayer", FIRST + "`cross_attn`, na saída", ""),
    'make_decoder("attn_no_dropout")': ("DecoderLayer", "atenção sem *dropout* nos pesos", ""),
    "UnusedLinear": ("DecoderLayer", None, "não receberam gradiente"),
    "CrossBySelfAttn": ("DecoderLayer", "`cross_attn` nunca foi chamada", ""),
}  # fmt: skip


def _without_line(message: str) -> str:
    """A mensagem sem a linha do código do aluno (aqui o código vem de uma string)."""
    return re.sub(r" \(linha \d+: `[^`]*`\)", "", message)


@pytest.fixture(scope="module")
def answers():
    namespace = {"__name__": "__main__"}
    exec(SETUP + ANSWERS, namespace)  # noqa: S102 - as mesmas respostas, deste lado, para comparar
    with StudentKernel() as kernel:
        kernel.run(SETUP + ANSWERS)
        yield kernel, namespace


@pytest.mark.parametrize("name", list(CASES))
def test_wrong_layers_lose_points_remotely_with_the_local_message(answers, name):
    kernel, namespace = answers
    exercise, *words = CASES[name]
    answer = eval(name, namespace)  # noqa: S307 - a mesma expressão que o kernel avalia
    verdicts = local_and_remote(kernel, "04_transformer", exercise, answer, name, OFFSET)
    for grade_id, (local, verdict) in verdicts.items():
        expected = words[verdict.hidden]
        if expected is None:
            assert local is None, f"{name}/{grade_id} falhou localmente: {local}"
            assert verdict.status == "passou" and verdict.points == verdict.max_points, verdict.message
            continue
        assert local is not None, f"{name}/{grade_id} passou localmente"
        assert expected in local, local
        assert verdict.status == "falhou", (grade_id, verdict.message)
        assert verdict.points == 0
        assert _without_line(verdict.message) == _without_line(local)
        assert verdict.requests > 0
