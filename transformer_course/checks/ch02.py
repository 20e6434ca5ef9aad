"""Verificações do capítulo 2: ``scaled_dot_product_attention`` e ``attention_entropy``.

Oráculos independentes do código do aluno: ``F.scaled_dot_product_attention``
do PyTorch (os pesos saem dele também, usando V = identidade) e
``torch.distributions.Categorical(...).entropy()``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.nn import functional as F

from .. import attention as reference
from ..runtime import seeded_generator
from ..feedback import (
    Mistake,
    call,
    describe,
    expect,
    expect_close,
    expect_shape,
    expect_unchanged,
    forbid_torch_functions,
    passed,
    snapshot,
)

__all__ = [
    "check_attention_entropy",
    "check_attention_entropy_hidden",
    "check_scaled_dot_product_attention",
    "check_scaled_dot_product_attention_hidden",
]

SDPA = "scaled_dot_product_attention"
ENTROPY = "attention_entropy"


# ---------------------------------------------------------------- resistência a adulterações


class _reference_calls:
    """Registra, durante o bloco ``with``, chamadas a código de ``transformer_course/attention.py``.

    Pega a função do aluno que apenas delega à implementação de referência do pacote, mesmo por
    um apelido ou um invólucro (``lambda *a: attention_ref(*a)``): compara o arquivo do código
    chamado, não a identidade do objeto (que muda se o módulo for importado de novo).
    """

    def __init__(self):
        import os
        import sys

        self._sys = sys
        self._file = os.path.realpath(reference.__file__)
        self.used: list[str] = []

    def _profile(self, frame, event, arg):
        if event == "call" and frame.f_code.co_filename == self._file:
            self.used.append(frame.f_code.co_name)
        if self._previous is not None:
            self._previous(frame, event, arg)

    def __enter__(self):
        self._previous = self._sys.getprofile()
        self._sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        self._sys.setprofile(self._previous)
        return False


def _expect_own_code(fn: Callable, name: str, *args) -> None:
    """Falha se ``fn(*args)`` só chama a implementação de referência do pacote."""
    __tracebackhide__ = True
    with _reference_calls() as spy:
        call(fn, name, "chamada vigiada", *args)
    expect(
        not spy.used,
        name,
        "origem da função",
        f"Sua função chama a implementação de referência do pacote "
        f"(`transformer_course.attention.{spy.used[0] if spy.used else ''}`).",
        "escreva a sua própria implementação em vez de chamar a do pacote.",
    )


# ---------------------------------------------------------------- oráculos e erros


def _oracle(Q, K, V, mask):
    """Saída e pesos pelo ``F.scaled_dot_product_attention`` (pesos: V = identidade)."""
    batch = torch.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
    k_len = K.size(-2)
    eye = torch.eye(k_len, dtype=Q.dtype, device=Q.device).expand(*batch, k_len, k_len)
    Qb, Kb, Vb = (t.expand(*batch, *t.shape[-2:]) for t in (Q, K, V))
    output = F.scaled_dot_product_attention(Qb, Kb, Vb, attn_mask=mask)
    weights = F.scaled_dot_product_attention(Qb, Kb, eye, attn_mask=mask)
    return output, weights


def _variant(Q, K, V, mask, scale, dim=-1, mask_mode="right"):
    """A atenção escrita com um erro: escala, eixo do softmax ou uso da máscara."""
    scores = (Q @ K.transpose(-2, -1)) * scale
    raw = scores
    if mask is not None:
        if mask_mode == "right":
            scores = scores.masked_fill(~mask, float("-inf"))
        elif mask_mode == "inverted":
            scores = scores.masked_fill(mask, float("-inf"))
        elif mask_mode == "zero":
            scores = scores.masked_fill(~mask, 0.0)
    weights = scores.softmax(dim=dim)
    if mask is not None and mask_mode == "after":
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ V, weights, raw


def _mistakes(Q, K, V, mask):
    """Erros conhecidos: (saídas, pesos) que cada um produziria."""
    d_k, d_v = Q.size(-1), V.size(-1)
    right = 1 / math.sqrt(d_k)
    cases = [
        ("a atenção SEM a divisão por √d_k", {"scale": 1.0}),
        ("a atenção dividida por d_k em vez de √d_k", {"scale": 1 / d_k}),
        ("a atenção escalada por √d_v (largura de V) em vez de √d_k", {"scale": 1 / math.sqrt(d_v)}),
        ("a atenção dividida por d_v em vez de √d_k", {"scale": 1 / d_v}),
        ("a atenção multiplicada por √d_k em vez de dividida", {"scale": math.sqrt(d_k)}),
        (
            "o softmax no eixo das consultas (dim=-2) em vez do eixo das chaves (dim=-1)",
            {"scale": right, "dim": -2},
        ),
    ]
    if mask is not None:
        cases += [
            (
                "a máscara invertida: você bloqueou as posições True, mas aqui True = pode atender",
                {"scale": right, "mask_mode": "inverted"},
            ),
            (
                "a máscara aplicada DEPOIS do softmax (as linhas deixam de somar 1)",
                {"scale": right, "mask_mode": "after"},
            ),
            (
                "as posições bloqueadas preenchidas com 0 em vez de -inf (exp(0) = 1 ainda dá peso a elas)",
                {"scale": right, "mask_mode": "zero"},
            ),
            ("a atenção sem máscara (a máscara foi ignorada)", {"scale": right, "mask_mode": "ignored"}),
        ]
    outputs, weights = [], []
    for label, kwargs in cases:
        out, w, _ = _variant(Q, K, V, mask, **kwargs)
        outputs.append(Mistake(label, out))
        weights.append(Mistake(label, w))
    _, _, raw = _variant(Q, K, V, mask, right)
    masked = raw if mask is None else raw.masked_fill(~mask, float("-inf"))
    weights += [
        Mistake("os scores escalados (antes do softmax), e não os pesos", raw),
        Mistake("os scores escalados e mascarados (antes do softmax), e não os pesos", masked),
        Mistake("os scores sem escala (Q·Kᵀ), e não os pesos", raw * math.sqrt(Q.size(-1))),
    ]
    return outputs, weights


def _random_mask(gen, q_len, k_len, lead=()):
    """Máscara aleatória em que toda linha tem ao menos um True e um False."""
    mask = torch.rand(*lead, q_len, k_len, generator=gen) < 0.5
    mask[..., 0] = True
    mask[..., -1] = False
    perm = torch.randperm(k_len, generator=gen)
    return mask[..., perm]


def _tensors(seed, lead, q_len, k_len, d_k, d_v, dtype=torch.float32):
    gen = seeded_generator(seed)
    Q = torch.randn(*lead, q_len, d_k, generator=gen, dtype=dtype)
    K = torch.randn(*lead, k_len, d_k, generator=gen, dtype=dtype)
    V = torch.randn(*lead, k_len, d_v, generator=gen, dtype=dtype)
    return gen, Q, K, V


def _tried(Q, K, V, mask, extra=""):
    m = "sem máscara" if mask is None else f"máscara {tuple(mask.shape)}"
    return f"Q {tuple(Q.shape)}, K {tuple(K.shape)}, V {tuple(V.shape)} {str(Q.dtype)[6:]}, {m}{extra}"


def _run_sdpa(fn: Callable, Q, K, V, mask=None, extra="", hint_on_error=None):
    """Roda um caso completo: chamada, formas, valores, erros conhecidos, entradas intactas."""
    tried = _tried(Q, K, V, mask, extra)
    before = snapshot(Q, K, V) + ([] if mask is None else snapshot(mask))
    expected_out, expected_w = _oracle(Q, K, V, mask)
    out_mistakes, w_mistakes = _mistakes(Q, K, V, mask)
    result = call(fn, SDPA, tried, Q, K, V, mask, hint_on_error=hint_on_error)
    labels = ["Q", "K", "V"] + ([] if mask is None else ["mask"])
    after = [Q, K, V] + ([] if mask is None else [mask])
    expect_unchanged(before, after, labels, SDPA, tried)
    expect(
        isinstance(result, tuple) and len(result) == 2,
        SDPA,
        tried,
        f"Esperava uma tupla (output, weights); veio {describe(result)}.",
    )
    output, weights = result
    expect_close(output, expected_out, SDPA, tried, "`output`", out_mistakes)
    expect_close(weights, expected_w, SDPA, tried, "`weights`", w_mistakes)
    return output, weights


NOT_3D = (
    "sua função parece funcionar só com tensores 3-D (`bmm`, `transpose(1, 2)` ou `.T`); "
    "use `K.transpose(-2, -1)` e `@`/`matmul`, que aceitam qualquer número de eixos de lote."
)


def check_scaled_dot_product_attention(fn: Callable) -> None:
    """Testes visíveis de ``scaled_dot_product_attention``."""
    __tracebackhide__ = True
    n = 0
    # 1. Um exemplo pequeno, sem máscara; q_len ≠ k_len e d_k ≠ d_v de propósito.
    _, Q, K, V = _tensors(0, (2,), 3, 4, 8, 5)
    _, weights = _run_sdpa(fn, Q, K, V)
    n += 1
    sums = weights.sum(-1)
    expect(
        torch.allclose(sums, torch.ones_like(sums), atol=1e-5),
        SDPA,
        _tried(Q, K, V, None),
        f"Cada linha dos pesos deveria somar 1; somas obtidas: {sums.flatten()[:4].tolist()}",
    )
    n += 1
    # 2. Máscara 2-D (Tq, Tk) que se difunde sobre o lote.
    gen, Q, K, V = _tensors(1, (2,), 3, 6, 8, 5)
    mask = _random_mask(gen, 3, 6)
    _, weights = _run_sdpa(fn, Q, K, V, mask)
    blocked = weights.detach().masked_select(~mask.expand_as(weights))
    expect(
        bool((blocked == 0).all()),
        SDPA,
        _tried(Q, K, V, mask),
        f"Posições bloqueadas receberam peso (maior: {blocked.abs().max().item():.3g}).",
    )
    n += 1
    # 3. Tensores 4-D (B, H, T, Dk), como no multi-head, com máscara (B, 1, Tq, Tk).
    gen, Q, K, V = _tensors(2, (2, 3), 4, 5, 6, 7)
    mask = _random_mask(gen, 4, 5, lead=(2, 1))
    _run_sdpa(fn, Q, K, V, mask, " (4-D: lote e cabeças)", hint_on_error=NOT_3D)
    n += 1
    passed(SDPA, n)


def check_scaled_dot_product_attention_hidden(fn: Callable) -> None:
    """Testes ocultos: dtypes, formas, gradientes, entradas não contíguas e atalhos proibidos."""
    __tracebackhide__ = True
    n = 0
    expect(
        getattr(fn, "__code__", None) is not reference.scaled_dot_product_attention.__code__,
        SDPA,
        "origem da função",
        "Sua função é a implementação de referência do pacote `transformer_course`.",
        "escreva a sua própria implementação em vez de importá-la.",
    )
    n += 1
    # float64, causal, Tq = Tk
    gen, Q, K, V = _tensors(10, (3,), 5, 5, 4, 4, torch.float64)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    _run_sdpa(fn, Q, K, V, causal, " (float64, causal)")
    n += 1
    # 2-D, sem lote
    _, Q, K, V = _tensors(11, (), 4, 7, 3, 2)
    _run_sdpa(fn, Q, K, V, extra=" (2-D, sem eixo de lote)", hint_on_error=NOT_3D)
    n += 1
    # máscara de padding (B, 1, 1, Tk) sobre 4-D
    gen, Q, K, V = _tensors(12, (2, 2), 3, 6, 8, 8)
    pad = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    pad[0, ..., 4:] = False
    pad[1, ..., 2:] = False
    _run_sdpa(fn, Q, K, V, pad, " (máscara de padding)", hint_on_error=NOT_3D)
    n += 1
    # d_k grande: sem escala, o softmax satura
    _, Q, K, V = _tensors(13, (1,), 6, 6, 256, 3)
    _run_sdpa(fn, Q, K, V, extra=" (d_k = 256)")
    n += 1
    # entradas não contíguas (vistas transpostas)
    _, Q, K, V = _tensors(14, (4,), 5, 3, 6, 2)
    Qt, Kt, Vt = (t.transpose(0, 1).contiguous().transpose(0, 1) for t in (Q, K, V))
    _run_sdpa(fn, Qt, Kt, Vt, extra=" (tensores não contíguos)")
    n += 1
    # gradientes fluem até Q, K e V
    _, Q, K, V = _tensors(15, (2,), 3, 4, 5, 6, torch.float64)
    Qs, Ks, Vs = (t.clone().requires_grad_() for t in (Q, K, V))
    Qo, Ko, Vo = (t.clone().requires_grad_() for t in (Q, K, V))
    tried = _tried(Q, K, V, None, " (gradientes)")
    output, _ = call(fn, SDPA, tried, Qs, Ks, Vs, None)
    expect(
        isinstance(output, torch.Tensor) and output.requires_grad,
        SDPA,
        tried,
        "A saída não está ligada ao grafo de gradientes (use só operações do PyTorch, "
        "sem `.detach()`, `.numpy()` ou `.item()`).",
    )
    output.pow(2).sum().backward()
    F.scaled_dot_product_attention(Qo, Ko, Vo).pow(2).sum().backward()
    for label, mine, ref in (("Q", Qs, Qo), ("K", Ks, Ko), ("V", Vs, Vo)):
        expect_close(mine.grad, ref.grad, SDPA, tried, f"o gradiente em `{label}`")
    n += 1
    # atalho proibido: F.scaled_dot_product_attention
    _, Q, K, V = _tensors(16, (2,), 3, 3, 4, 4)
    with forbid_torch_functions(F.scaled_dot_product_attention) as mode:
        call(fn, SDPA, "chamada vigiada", Q, K, V, None)
    expect(
        not mode.used,
        SDPA,
        _tried(Q, K, V, None),
        "Sua função chama `F.scaled_dot_product_attention`.",
        "o exercício pede que você escreva a atenção com matmul e softmax.",
    )
    n += 1
    # atalho proibido: delegar à implementação de referência do pacote (mesmo por um invólucro)
    _, Q, K, V = _tensors(17, (2,), 3, 4, 5, 6)
    _expect_own_code(fn, SDPA, Q, K, V, None)
    n += 1
    passed(SDPA, n, "(testes ocultos)")


# ---------------------------------------------------------------- entropia


def _entropy_oracle(weights: torch.Tensor) -> torch.Tensor:
    dist = torch.distributions.Categorical(probs=weights, validate_args=False)
    return dist.entropy()


def _run_entropy(fn: Callable, weights: torch.Tensor, tried: str) -> torch.Tensor:
    before = snapshot(weights)
    expected = _entropy_oracle(weights)
    result = call(fn, ENTROPY, tried, weights)
    expect_unchanged(before, [weights], ["weights"], ENTROPY, tried)
    hint = None
    if isinstance(result, torch.Tensor):
        if tuple(result.shape) == tuple(expected.shape) + (1,):
            hint = "a forma tem um eixo a mais no fim: some com `keepdim=False` (o padrão)."
        elif weights.dim() >= 2 and result.shape == weights.shape[:-2] + weights.shape[-1:]:
            hint = "você somou sobre o eixo das consultas (dim=-2); cada linha é uma distribuição: dim=-1."
        elif result.dim() == 0 and expected.dim() > 0:
            hint = "você somou sobre todos os elementos; a entropia é por linha (dim=-1)."
    expect_shape(result, expected.shape, ENTROPY, tried, hint=hint)
    expect(
        not (torch.isnan(result).any() and (weights == 0).any()),
        ENTROPY,
        tried,
        f"A saída contém {int(torch.isnan(result).sum())} NaN.",
        "0·log 0 deu NaN: trate os pesos nulos (0·log 0 = 0), com `torch.where` ou `torch.xlogy`.",
    )
    n_cols = weights.size(-1)
    mistakes = [
        Mistake("a entropia em bits (log₂) em vez de nats (log natural)", expected / math.log(2)),
        Mistake("a entropia sem o sinal de menos", -expected),
        Mistake("a média em vez da soma sobre a linha", expected / n_cols),
    ]
    expect_close(result, expected, ENTROPY, tried, "a entropia", mistakes)
    return result


def check_attention_entropy(fn: Callable) -> None:
    """Testes visíveis de ``attention_entropy``."""
    __tracebackhide__ = True
    n = 0
    uniform = torch.full((1, 4), 0.25)
    _run_entropy(fn, uniform, "uma linha uniforme [0.25, 0.25, 0.25, 0.25] (esperado: ln 4 ≈ 1.386)")
    n += 1
    onehot = torch.tensor([[0.0, 1.0, 0.0]])
    _run_entropy(fn, onehot, "uma linha one-hot [0, 1, 0] (esperado: 0, com 0·log 0 = 0)")
    n += 1
    gen = seeded_generator(20)
    weights = torch.randn(2, 3, 5, generator=gen).softmax(-1)
    _run_entropy(fn, weights, "pesos aleatórios (2, 3, 5)")
    n += 1
    passed(ENTROPY, n)


def check_attention_entropy_hidden(fn: Callable) -> None:
    """Testes ocultos de ``attention_entropy``: 4-D, float64, zeros, uma linha só."""
    __tracebackhide__ = True
    n = 0
    gen = seeded_generator(21)
    scores = torch.randn(2, 3, 4, 6, generator=gen, dtype=torch.float64)
    mask = torch.ones(4, 6, dtype=torch.bool).tril(1)
    weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    _run_entropy(fn, weights, "pesos mascarados 4-D (2, 3, 4, 6) float64, com zeros")
    n += 1
    _run_entropy(fn, torch.tensor([0.5, 0.5, 0.0]), "um vetor 1-D [0.5, 0.5, 0] (esperado: ln 2)")
    n += 1
    peaked = torch.randn(3, 8, generator=gen).mul(30).softmax(-1)
    _run_entropy(fn, peaked, "pesos quase one-hot (3, 8)")
    n += 1
    passed(ENTROPY, n, "(testes ocultos)")
