"""Capítulo 3: as verificações aceitam variantes corretas e recusam cada erro conhecido com o diagnóstico."""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from transformer_course import multihead as ref
from transformer_course.checks import ch03
from transformer_course.probe import LocalStudent, judging

# ---------------------------------------------------------------- split_heads / merge_heads


def split_loops(x, n_heads):
    B, T, D = x.shape
    if D % n_heads:
        raise ValueError("d_model não é divisível por n_heads")
    d_k = D // n_heads
    return torch.stack([x[..., h * d_k : (h + 1) * d_k] for h in range(n_heads)], dim=1)


def split_einops_like(x, n_heads):
    B, T, D = x.shape
    if D % n_heads != 0:
        raise ValueError("largura incompatível com o número de cabeças")
    return x.reshape(B, T, n_heads, -1).permute(0, 2, 1, 3)


def split_unflatten(x, n_heads):
    if x.size(-1) % n_heads:
        raise ValueError("não divisível")
    return x.unflatten(-1, (n_heads, x.size(-1) // n_heads)).transpose(1, 2).contiguous()


def split_no_transpose(x, n_heads):
    B, T, D = x.shape
    if D % n_heads:
        raise ValueError("não divisível")
    return x.reshape(B, n_heads, T, D // n_heads)


def split_interleaved(x, n_heads):
    B, T, D = x.shape
    if D % n_heads:
        raise ValueError("não divisível")
    return x.reshape(B, T, D // n_heads, n_heads).permute(0, 3, 1, 2)


def split_no_check(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)


def split_forgot_transpose(x, n_heads):
    B, T, D = x.shape
    if D % n_heads:
        raise ValueError("não divisível")
    return x.view(B, T, n_heads, D // n_heads)


def split_assert(x, n_heads):
    B, T, D = x.shape
    assert D % n_heads == 0, "não divisível"
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)


def split_stub(x, n_heads):
    raise NotImplementedError()


@pytest.mark.parametrize("fn", [ref.split_heads, split_loops, split_einops_like, split_unflatten])
def test_split_correct_variants_pass(fn, capsys):
    ch03.check_split_heads(fn)
    if fn is not ref.split_heads:
        ch03.check_split_heads_hidden(fn)
    assert "verificações passaram" in capsys.readouterr().out
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (split_no_transpose, "sem `transpose`"),
        (split_interleaved, "cabeças intercaladas"),
        (split_forgot_transpose, r"faltou o `transpose\(1, 2\)`"),
        (split_no_check, "verificação de divisibilidade"),
        (split_assert, "verificação de divisibilidade"),
        (split_stub, "não implementado"),
    ],
)
def test_split_mistakes_are_named(fn, words):
    with pytest.raises(AssertionError, match=words):
        ch03.check_split_heads(fn)


def test_split_hidden_rejects_reference():
    with pytest.raises(AssertionError, match="referência"):
        ch03.check_split_heads_hidden(ref.split_heads)


def merge_cat(x):
    return torch.cat(x.unbind(1), dim=-1)


def merge_contiguous_view(x):
    B, H, T, Dk = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, H * Dk)


def merge_einsum_flatten(x):
    return torch.einsum("bhtd->bthd", x).flatten(2)


def merge_no_transpose(x):
    B, H, T, Dk = x.shape
    return x.reshape(B, T, H * Dk)


def merge_view_after_transpose(x):
    B, H, T, Dk = x.shape
    return x.transpose(1, 2).view(B, T, H * Dk)


def merge_interleaved(x):
    B, H, T, Dk = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, H * Dk)


def merge_mean(x):
    return x.mean(dim=1)


@pytest.mark.parametrize("fn", [ref.merge_heads, merge_cat, merge_contiguous_view, merge_einsum_flatten])
def test_merge_correct_variants_pass(fn, capsys):
    ch03.check_merge_heads(fn)
    if fn is not ref.merge_heads:
        ch03.check_merge_heads_hidden(fn)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (merge_no_transpose, "sem `transpose`"),
        (merge_view_after_transpose, "dois eixos que um `transpose` separou"),
        (merge_interleaved, "cabeças intercaladas"),
        (merge_mean, "média das cabeças"),
        (lambda x: (_ for _ in ()).throw(NotImplementedError()), "não implementado"),
    ],
)
def test_merge_mistakes_are_named(fn, words):
    with pytest.raises(AssertionError, match=words):
        ch03.check_merge_heads(fn)


# ---------------------------------------------------------------- MultiHeadAttention


class Base(nn.Module):
    """Uma implementação correta, escrita de outro jeito (laços de máscara, masked_fill), com ganchos."""

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


class FusedEinsumWhere(nn.Module):
    """Correta: projeções fundidas em uma matmul, einsum, `where` com -1e9."""

    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if n_heads < 1 or d_model % n_heads:
            raise ValueError("n_heads precisa dividir d_model")
        self.n_heads = n_heads
        self.W_Q, self.W_K, self.W_V, self.W_O = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
        self.p = dropout

    def forward(self, query, key, value, mask=None):
        B, Tq, D = query.shape
        H = self.n_heads
        if query is key and key is value:
            W = torch.cat([self.W_Q.weight, self.W_K.weight, self.W_V.weight])
            b = None if self.W_Q.bias is None else torch.cat([self.W_Q.bias, self.W_K.bias, self.W_V.bias])
            q, k, v = F.linear(query, W, b).chunk(3, dim=-1)
        else:
            q, k, v = self.W_Q(query), self.W_K(key), self.W_V(value)
        q, k, v = (t.unflatten(-1, (H, D // H)) for t in (q, k, v))  # (B, T, H, Dk)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(D // H)
        if mask is not None:
            if mask.dim() == 3:
                mask = mask[:, None]
            scores = torch.where(mask, scores, torch.full_like(scores, -1e9))
        weights = torch.softmax(scores, dim=-1)
        dropped = F.dropout(weights, self.p, self.training)
        out = torch.einsum("bhqk,bkhd->bqhd", dropped, v).flatten(2)
        return self.W_O(out), weights


class PerHeadLoop(Base):
    """Correta: uma cabeça por vez, fatiando as colunas, e cálculo interno em float64."""

    def forward(self, query, key, value, mask=None):
        q, k, v = self.project(query, key, value)
        mask = self.prepare_mask(mask)
        outs, ws = [], []
        for h in range(self.h):
            cols = slice(h * self.d_k, (h + 1) * self.d_k)
            s = (q[..., cols].double() @ k[..., cols].double().transpose(-2, -1)) / math.sqrt(self.d_k)
            if mask is not None:
                m = mask if mask.dim() == 2 else mask[:, min(h, mask.size(1) - 1)]
                s = s.masked_fill(~m, float("-inf"))
            w = s.softmax(-1).to(query.dtype)
            ws.append(w)
            outs.append(self.drop(w) @ v[..., cols])
        return self.W_O(torch.cat(outs, dim=-1)), torch.stack(ws, dim=1)


class ScalesQueriesInPlace(Base):
    """Correta: a escala aplicada no lugar sobre Q (uma view da saída de W_Q), depois do gancho."""

    def forward(self, query, key, value, mask=None):
        q, k, v = (self.split(t) for t in self.project(query, key, value))
        q /= math.sqrt(self.d_k)
        scores = q @ k.transpose(-2, -1)
        mask = self.prepare_mask(mask)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        return self.finish(self.merge(self.drop(weights) @ v), weights)


class SplitNoTranspose(Base):
    def split(self, x):
        B, T, D = x.shape
        return x.reshape(B, self.h, T, self.d_k)


class MergeNoTranspose(Base):
    def merge(self, x):
        B, H, T, Dk = x.shape
        return x.reshape(B, T, H * Dk)


class NoDivisibilityCheck(Base):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        nn.Module.__init__(self)
        self.h, self.d_k = n_heads, d_model // n_heads
        self.W_Q, self.W_K, self.W_V, self.W_O = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
        self.drop = nn.Dropout(dropout)


class NoOutputProjection(Base):
    def finish(self, out, weights):
        return out, weights


class ScaleByDModel(Base):
    def scale(self):
        return 1 / math.sqrt(self.h * self.d_k)


class SameProjectionKV(Base):
    def project(self, query, key, value):
        return self.W_Q(query), self.W_K(key), self.W_K(value)


class Mask3DWithoutHeadAxis(Base):
    def prepare_mask(self, mask):
        return mask


class AveragedWeights(Base):
    def finish(self, out, weights):
        return self.W_O(out), weights.mean(dim=1)


class InvertedMask(Base):
    def prepare_mask(self, mask):
        mask = super().prepare_mask(mask)
        return None if mask is None else ~mask


class SelfAttentionOnly(Base):
    def project(self, query, key, value):
        return self.W_Q(query), self.W_K(query), self.W_V(query)


class DropoutNeverApplied(Base):
    def forward(self, query, key, value, mask=None):
        self.drop.eval()  # cria o nn.Dropout mas nunca o deixa agir
        return super().forward(query, key, value, mask)


class WeightsAfterDropout(Base):
    def forward(self, query, key, value, mask=None):
        q, k, v = (self.split(t) for t in self.project(query, key, value))
        scores = q @ k.transpose(-2, -1) * self.scale()
        mask = self.prepare_mask(mask)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = self.drop(scores.softmax(-1))
        return self.finish(self.merge(weights @ v), weights)


class UsesTorchMHA(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        self.inner = nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=True)
        self.W_Q = self.W_K = self.W_V = self.W_O = nn.Linear(d_model, d_model, bias=bias)


class Stub(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        raise NotImplementedError()


class ReferenceCopy(ref.MultiHeadAttention):
    pass


@pytest.mark.parametrize(
    "cls", [ref.MultiHeadAttention, Base, FusedEinsumWhere, PerHeadLoop, ScalesQueriesInPlace]
)
def test_mha_correct_variants_pass(cls, capsys):
    ch03.check_multi_head_attention(cls)
    if cls is not ref.MultiHeadAttention:
        ch03.check_multi_head_attention_hidden(cls)
    captured = capsys.readouterr()
    assert "verificações passaram" in captured.out
    assert captured.err == ""


@pytest.mark.parametrize(
    ("cls", "words"),
    [
        (SplitNoTranspose, "separação de cabeças sem `transpose`"),
        (MergeNoTranspose, "junção de cabeças sem `transpose`"),
        (NoDivisibilityCheck, "verificação de divisibilidade"),
        (NoOutputProjection, "SEM a projeção de saída W_O"),
        (ScaleByDModel, "1/√d_model em vez de 1/√d_k"),
        (SameProjectionKV, "mesma projeção para K e V"),
        (Mask3DWithoutHeadAxis, "sem o eixo das cabeças"),
        (AveragedWeights, "médios sobre as cabeças"),
        (InvertedMask, "máscara invertida"),
        (SelfAttentionOnly, "atenção cruzada"),
        (UsesTorchMHA, "nn.MultiheadAttention"),
        (Stub, "não implementado"),
    ],
)
def test_mha_mistakes_are_named(cls, words):
    with pytest.raises(AssertionError, match=words):
        ch03.check_multi_head_attention(cls)


def test_mha_hidden_rejects_reference_and_mask3d_error_path():
    with pytest.raises(AssertionError, match="referência"):
        ch03.check_multi_head_attention_hidden(ReferenceCopy)
    with pytest.raises(AssertionError, match="sem o eixo das cabeças|eixo das cabeças"):
        ch03.check_multi_head_attention_hidden(Mask3DWithoutHeadAxis)


@pytest.mark.parametrize(
    ("cls", "words"),
    [
        (DropoutNeverApplied, "criado mas não é aplicado"),
        (WeightsAfterDropout, "pesos depois do dropout"),
    ],
)
def test_mha_hidden_names_dropout_mistakes(cls, words):
    """Issue 31: o caso em modo de treino está também nos testes visíveis (o aluno sozinho o vê)."""
    for check in (ch03.check_multi_head_attention, ch03.check_multi_head_attention_hidden):
        with pytest.raises(AssertionError, match=f"modo de treino(.|\n)*({words})"):
            check(cls)


def test_checks_leave_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    ch03.check_multi_head_attention(Base)
    assert torch.equal(torch.rand(3), expected)


# ---------------------------------------------------------------- onde aparece a primeira diferença


class SoftmaxOverQueries(Base):
    """Erro não catalogado: softmax no eixo das consultas."""

    def forward(self, query, key, value, mask=None):
        q, k, v = (self.split(t) for t in self.project(query, key, value))
        weights = (q @ k.transpose(-2, -1) * self.scale()).softmax(-2)
        return self.finish(self.merge(self.drop(weights) @ v), weights)


class KeyFromValue(Base):
    def project(self, query, key, value):
        return self.W_Q(query), self.W_K(value), self.W_V(value)


class OutputProjectionTwice(Base):
    def finish(self, out, weights):
        return self.W_O(self.W_O(out)), weights


class HeadsRolled(Base):
    """Erro não catalogado: as cabeças juntadas em outra ordem."""

    def merge(self, x):
        return super().merge(x.roll(1, dims=1))


@pytest.mark.parametrize(
    ("cls", "where"),
    [
        (SoftmaxOverQueries, "`weights`"),
        (KeyFromValue, "`W_K(key)`"),
        (HeadsRolled, "`merge_heads(...)`, a entrada de W_O"),
        (OutputProjectionTwice, "`output`"),
    ],
)
def test_mha_says_where_the_first_difference_appears(cls, where):
    with pytest.raises(AssertionError, match=re.escape(f"A primeira diferença aparece em {where}.")):
        ch03.check_multi_head_attention(cls)


class MovedDropout(Base):
    """O dropout sai dos pesos e vai para outro lugar (definido nas subclasses)."""

    def forward(self, query, key, value, mask=None):
        q, k, v = (self.split(t) for t in self.project(query, key, value))
        scores = q @ k.transpose(-2, -1) * self.scale()
        mask = self.prepare_mask(mask)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        return self.finish(self.merge(weights @ v), weights)


class DropoutOnQuery(MovedDropout):
    def project(self, query, key, value):
        return self.W_Q(self.drop(query)), self.W_K(key), self.W_V(value)


class DropoutOnScores(MovedDropout):
    def scale(self):
        return self.drop(torch.ones(())) / math.sqrt(self.d_k)


class DropoutOnMergedHeads(MovedDropout):
    def merge(self, x):
        return self.drop(super().merge(x))


class DropoutAfterOutputProjection(MovedDropout):
    def finish(self, out, weights):
        return self.drop(self.W_O(out)), weights


class DropoutFixedRate(Base):
    def forward(self, query, key, value, mask=None):
        self.drop.p = 0.1  # ignora o `dropout` pedido
        return super().forward(query, key, value, mask)


class DropoutOnValues(FusedEinsumWhere):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, F.dropout(value, self.p, self.training), mask)


@pytest.mark.parametrize(
    ("cls", "words"),
    [
        (DropoutOnQuery, r"aparece em `W_Q\(query\)`"),
        (DropoutOnScores, "aparece em `weights`"),
        (DropoutOnMergedHeads, r"aparece em `merge_heads\(\.\.\.\)`, a entrada de W_O"),
        (DropoutAfterOutputProjection, "cabeças juntadas SEM dropout"),
        (DropoutOnValues, "aparece em `W_V\\(value\\)`|aparece em `merge_heads"),
    ],
)
def test_mha_hidden_finds_dropout_in_the_wrong_place(cls, words):
    for check in (ch03.check_multi_head_attention, ch03.check_multi_head_attention_hidden):
        with pytest.raises(AssertionError, match=f"modo de treino(.|\n)*({words})"):
            check(cls)


class PerHeadDropoutOrder(Base):
    """Correta: o dropout nos pesos, sorteado cabeça por cabeça (outra ordem que a do PyTorch)."""

    def forward(self, query, key, value, mask=None):
        q, k, v = (self.split(t) for t in self.project(query, key, value))
        mask = self.prepare_mask(mask)
        scores = q @ k.transpose(-2, -1) * self.scale()
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        dropped = torch.stack([self.drop(weights[:, h]) for h in reversed(range(self.h))][::-1], dim=1)
        return self.finish(self.merge(dropped @ v), weights)


def test_mha_fixed_dropout_rate_fails_even_with_dropout_zero():
    """Ignorar o `dropout` pedido: com dropout=0 em modo de treino, a diferença já aparece nas cabeças."""
    with pytest.raises(AssertionError, match=r"aparece em `merge_heads\(\.\.\.\)`, a entrada de W_O"):
        ch03.check_multi_head_attention(DropoutFixedRate)


def test_mha_hidden_accepts_dropout_drawn_in_another_order(capsys):
    ch03.check_multi_head_attention_hidden(PerHeadDropoutOrder)
    assert "verificações passaram" in capsys.readouterr().out


def test_mha_names_value_projected_from_key():
    class ValueFromKey(Base):
        def project(self, query, key, value):
            return self.W_Q(query), self.W_K(key), self.W_V(key)

    with pytest.raises(AssertionError, match=r"aparece em `W_V\(value\)`.*\n(.*\n)*.*`W_V` aplicada a `key`"):
        ch03.check_multi_head_attention(ValueFromKey)


@pytest.mark.parametrize("offset", [1, 987_654_321])
def test_hidden_checks_accept_correct_variants_with_other_seeds(offset):
    """Na correção, os casos ocultos mudam a cada entrega (as sementes deslocadas): as respostas certas
    escritas de outro jeito passam com qualquer sorteio (o relatório da conversão rodou 20)."""
    with judging(LocalStudent(), offset, []):
        for fn in (split_loops, split_unflatten):
            ch03.check_split_heads_hidden(fn)
        for fn in (merge_cat, merge_einsum_flatten):
            ch03.check_merge_heads_hidden(fn)
        for cls in (FusedEinsumWhere, PerHeadLoop, PerHeadDropoutOrder, ScalesQueriesInPlace):
            ch03.check_multi_head_attention_hidden(cls)
