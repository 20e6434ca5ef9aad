"""Capítulo 3 no juiz remoto: respostas erradas perdem os pontos com a mesma mensagem que a local.

Cada resposta é um trecho de código executado num kernel de verdade (o lado do aluno) e, igual,
neste processo. A verificação roda aqui nos dois casos: com o aluno local (como ao estudar) e com
o aluno remoto (como na correção, em que o módulo fica no kernel e só dados atravessam — pesos
copiados pelo nome, ganchos nas projeções, dropout com a mesma semente, gradientes, a função
proibida). O veredito remoto tem de ser o mesmo: falha, 0 ponto e a mesma mensagem.
"""

from __future__ import annotations

import re

import pytest
from judge_helpers import StudentKernel, local_and_remote

SETUP = """
import math
import torch
from torch import nn
from torch.nn import functional as F
"""

ANSWERS = '''
def split_no_transpose(x, n_heads):
    B, T, D = x.shape
    if D % n_heads:
        raise ValueError("não divisível")
    return x.reshape(B, n_heads, T, D // n_heads)


def split_no_check(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)


def split_detached(x, n_heads):
    B, T, D = x.shape
    if D % n_heads:
        raise ValueError("não divisível")
    return x.detach().view(B, T, n_heads, D // n_heads).transpose(1, 2)


def merge_view_after_transpose(x):
    B, H, T, Dk = x.shape
    return x.transpose(1, 2).view(B, T, H * Dk)


def merge_mean(x):
    return x.mean(dim=1)


class Base(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("d_model deve ser divisível por n_heads")
        self.h, self.d_k = n_heads, d_model // n_heads
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def split(self, x):
        B, T, D = x.shape
        return x.view(B, T, self.h, self.d_k).transpose(1, 2)

    def merge(self, x):
        B, H, T, Dk = x.shape
        return x.transpose(1, 2).reshape(B, T, H * Dk)

    def prepare_mask(self, mask):
        return mask.unsqueeze(1) if mask is not None and mask.dim() == 3 else mask

    def scale(self):
        return 1 / math.sqrt(self.d_k)

    def project(self, query, key, value):
        return self.W_Q(query), self.W_K(key), self.W_V(value)

    def finish(self, out, weights):
        return self.W_O(out), weights

    def forward(self, query, key, value, mask=None):
        q, k, v = (self.split(t) for t in self.project(query, key, value))
        scores = q @ k.transpose(-2, -1) * self.scale()
        mask = self.prepare_mask(mask)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        return self.finish(self.merge(self.drop(weights) @ v), weights)


class SplitNoTranspose(Base):
    def split(self, x):
        B, T, D = x.shape
        return x.reshape(B, self.h, T, self.d_k)


class ScaleByDModel(Base):
    def scale(self):
        return 1 / math.sqrt(self.h * self.d_k)


class Mask3DWithoutHeadAxis(Base):
    def prepare_mask(self, mask):
        return mask


class HeadsRolled(Base):
    def merge(self, x):
        return super().merge(x.roll(1, dims=1))


class ViewAfterTranspose(Base):
    def merge(self, x):
        B, H, T, Dk = x.shape
        return x.transpose(1, 2).view(B, T, H * Dk)


class DropoutAfterOutputProjection(Base):
    def forward(self, query, key, value, mask=None):
        q, k, v = (self.split(t) for t in self.project(query, key, value))
        scores = q @ k.transpose(-2, -1) * self.scale()
        mask = self.prepare_mask(mask)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        return self.drop(self.W_O(self.merge(weights @ v))), weights


class WeightsAfterDropout(Base):
    def forward(self, query, key, value, mask=None):
        q, k, v = (self.split(t) for t in self.project(query, key, value))
        scores = q @ k.transpose(-2, -1) * self.scale()
        mask = self.prepare_mask(mask)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = self.drop(scores.softmax(-1))
        return self.finish(self.merge(weights @ v), weights)


class DetachedOutput(Base):
    def finish(self, out, weights):
        return self.W_O(out).detach(), weights


class TorchFunctional(Base):
    """Sem dropout ativo, a conta inteira é a do PyTorch (`F.multi_head_attention_forward`)."""

    def forward(self, query, key, value, mask=None):
        if self.drop.p > 0:
            return super().forward(query, key, value, mask)
        B, Tq, D = query.shape
        Tk = key.size(1)
        attn_mask = None
        if mask is not None:
            m = self.prepare_mask(mask)
            if m.dim() == 4:
                m = m.expand(B, self.h, Tq, Tk).reshape(B * self.h, Tq, Tk)
            attn_mask = ~m
        has_bias = self.W_Q.bias is not None
        in_w = torch.cat([self.W_Q.weight, self.W_K.weight, self.W_V.weight])
        in_b = torch.cat([self.W_Q.bias, self.W_K.bias, self.W_V.bias]) if has_bias else None
        out, w = F.multi_head_attention_forward(
            query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), D, self.h, in_w, in_b,
            None, None, False, 0.0, self.W_O.weight, self.W_O.bias, training=self.training,
            attn_mask=attn_mask, average_attn_weights=False,
        )
        return out.transpose(0, 1), w


def split_reshape_direct(x, n_heads):
    """Sem `transpose`; como a `split_heads` do notebook, a MultiHeadAttention abaixo a usa."""
    B, T, D = x.shape
    if D % n_heads:
        raise ValueError("não divisível")
    return x.reshape(B, n_heads, T, D // n_heads)


class UsesSplitHeads(Base):
    def split(self, x):
        return split_heads(x, self.h)


class Stub(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        raise NotImplementedError()
'''

OFFSET = 424242  # os testes ocultos de uma entrega qualquer (o mesmo deslocamento nos dois lados)

# resposta -> (exercício, palavras da falha na célula visível, na oculta); None: a célula passa,
# "": falha (com a mensagem que for, a mesma dos dois lados)
CASES = {
    "split_no_transpose": ("split_heads", "sem `transpose`", ""),
    "split_no_check": ("split_heads", "verificação de divisibilidade", ""),
    "split_detached": ("split_heads", None, "não está ligada ao grafo"),
    "merge_view_after_transpose": ("merge_heads", "dois eixos que um `transpose` separou", ""),
    "merge_mean": ("merge_heads", "média das cabeças", ""),
    "SplitNoTranspose": ("MultiHeadAttention", "separação de cabeças sem `transpose`", ""),
    "ScaleByDModel": ("MultiHeadAttention", "1/√d_model em vez de 1/√d_k", ""),
    "Mask3DWithoutHeadAxis": ("MultiHeadAttention", "sem o eixo das cabeças", "eixo das cabeças"),
    "HeadsRolled": ("MultiHeadAttention", "aparece em `merge_heads(...)`, a entrada de W_O", ""),
    "ViewAfterTranspose": ("MultiHeadAttention", *["eixos que um `transpose` separou"] * 2),
    "DropoutAfterOutputProjection": ("MultiHeadAttention", *["cabeças juntadas SEM dropout"] * 2),
    "WeightsAfterDropout": ("MultiHeadAttention", "pesos depois do dropout", "pesos depois do dropout"),
    "DetachedOutput": ("MultiHeadAttention", None, "não está ligada ao grafo"),
    "TorchFunctional": ("MultiHeadAttention", None, "`F.multi_head_attention_forward`"),
    "UsesSplitHeads": ("MultiHeadAttention", "o erro está em `split_heads`", "o erro está em `split_heads`"),
    "Stub": ("MultiHeadAttention", "não implementado", "não implementado"),
}


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
def test_wrong_answers_lose_points_remotely_with_the_local_message(answers, name):
    kernel, namespace = answers
    exercise, *words = CASES[name]
    # as respostas de split_heads e merge_heads ficam com esses nomes no kernel (local_and_remote): a MHA
    # seguinte as acharia ao lado dela, e deste lado não; cada caso começa sem elas, dos dois lados.
    kernel.run("globals().pop('split_heads', None); globals().pop('merge_heads', None)")
    namespace.pop("split_heads", None)
    namespace.pop("merge_heads", None)
    if name == "UsesSplitHeads":  # a `split_heads` do notebook, que a MHA usa: a errada, dos dois lados
        kernel.run("split_heads = split_reshape_direct")
        namespace["split_heads"] = namespace["split_reshape_direct"]
    verdicts = local_and_remote(kernel, "03_multi_head", exercise, namespace[name], name, OFFSET)
    for grade_id, (local, verdict) in verdicts.items():
        expected = words[verdict.hidden]
        if expected is None:
            assert local is None, f"{name}/{grade_id} falhou localmente: {local}"
            assert verdict.status == "passou" and verdict.points == verdict.max_points, verdict.message
            continue
        assert local is not None, f"{name}/{grade_id} passou localmente"
        assert expected in local, local
        assert verdict.status in ("falhou", "nao_implementado"), (grade_id, verdict.message)
        assert verdict.points == 0
        assert _without_line(verdict.message) == _without_line(local)
        assert verdict.requests > 0
