"""Verificações do capítulo 2: ``scaled_dot_product_attention`` e ``attention_entropy``.

Oráculos independentes do código do aluno: ``F.scaled_dot_product_attention`` do PyTorch (os
pesos saem dele também, usando V = identidade) e ``torch.distributions.Categorical(...).entropy()``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch.nn import functional as F

from .. import attention as reference
from .. import wire
from ..exercises import Exercise, GradedCell
from ..feedback import Check, Mistake, describe
from ..runtime import dtype_name

__all__ = ["check_attention_entropy", "check_scaled_dot_product_attention"]

SDPA = Exercise(
    "02_atencao",
    "scaled_dot_product_attention",
    reference.scaled_dot_product_attention,
    cells=(GradedCell("test_sdpa", 2), GradedCell("test_sdpa_hidden", 3, hidden=True)),
)
ENTROPY = Exercise(
    "02_atencao",
    "attention_entropy",
    reference.attention_entropy,
    cells=(GradedCell("test_entropy", 1), GradedCell("test_entropy_hidden", 1, hidden=True)),
)

NOT_3D = (
    "sua função parece funcionar só com tensores 3-D (`bmm`, `transpose(1, 2)` ou `.T`); "
    "use `K.transpose(-2, -1)` e `@`/`matmul`, que aceitam qualquer número de eixos de lote."
)


# ---------------------------------------------------------------- atenção: oráculo, erros, entradas


def _oracle(Q, K, V, mask):
    """Saída e pesos pelo ``F.scaled_dot_product_attention`` (pesos: V = identidade)."""
    # O NumPy, não `torch.broadcast_shapes`: este importa o SymPy (≈0,6 s) na primeira chamada.
    batch, k_len = np.broadcast_shapes(tuple(Q.shape[:-2]), tuple(K.shape[:-2])), K.size(-2)
    eye = torch.eye(k_len, dtype=Q.dtype, device=Q.device).expand(*batch, k_len, k_len)
    Qb, Kb, Vb = (t.expand(*batch, *t.shape[-2:]) for t in (Q, K, V))
    return tuple(F.scaled_dot_product_attention(Qb, Kb, v, attn_mask=mask) for v in (Vb, eye))


def _variant(Q, K, V, mask, scale, mode="right"):
    """A atenção escrita com um erro: na escala, no eixo do softmax ou no uso da máscara."""
    raw = (Q @ K.transpose(-2, -1)) * (1.0 if mode == "late" else scale)
    scores = raw
    if mask is not None and mode not in ("after", "ignored"):
        scores = raw.masked_fill(mask if mode == "inverted" else ~mask, 0.0 if mode == "zero" else -math.inf)
    weights = scores.softmax(dim=-2 if mode == "queries" else -1) * (scale if mode == "late" else 1.0)
    if mask is not None and mode == "after":
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ V, weights, raw


def _mistakes(Q, K, V, mask):
    """Erros conhecidos: os pesos e as saídas que cada um produziria (os pesos primeiro)."""
    d_k, d_v, t_k = Q.size(-1), V.size(-1), K.size(-2)
    right = 1 / math.sqrt(d_k)
    cases = [
        ("a atenção SEM a divisão por √d_k", 1.0, "right"),
        ("a atenção dividida por d_k em vez de √d_k", 1 / d_k, "right"),
        ("a atenção escalada por √d_v (largura de V) em vez de √d_k", 1 / math.sqrt(d_v), "right"),
        ("a atenção dividida por d_v em vez de √d_k", 1 / d_v, "right"),
        ("a atenção multiplicada por √d_k em vez de dividida", math.sqrt(d_k), "right"),
        ("a atenção escalada por √T_k (o número de chaves) em vez de √d_k", 1 / math.sqrt(t_k), "right"),
        ("a divisão por √d_k DEPOIS do softmax, nos pesos (as linhas não somam 1)", right, "late"),
        ("o softmax no eixo das consultas (dim=-2) em vez do eixo das chaves (dim=-1)", right, "queries"),
    ]
    if mask is not None:
        cases += [
            ("a máscara invertida: você bloqueou os True, mas aqui True = pode atender", right, "inverted"),
            ("a máscara aplicada DEPOIS do softmax (as linhas deixam de somar 1)", right, "after"),
            ("as posições bloqueadas com 0 em vez de -inf (exp(0) = 1 ainda dá peso)", right, "zero"),
            ("a atenção sem máscara (a máscara foi ignorada)", right, "ignored"),
        ]
    results = [(label, _variant(Q, K, V, mask, scale, mode)) for label, scale, mode in cases]
    right_out, right_weights, raw = _variant(Q, K, V, mask, right)
    masked = raw if mask is None else raw.masked_fill(~mask, -math.inf)
    return [
        *(Mistake(label, w) for label, (_, w, _) in results),
        Mistake("os scores escalados (antes do softmax), e não os pesos", raw),
        Mistake("os scores escalados e mascarados (antes do softmax), e não os pesos", masked),
        Mistake("os scores sem escala (Q·Kᵀ), e não os pesos", raw * math.sqrt(d_k)),
        *(Mistake(label, out) for label, (out, _, _) in results),
        Mistake("a saída calculada com K no lugar de V (pesos @ K)", right_weights @ K),
        Mistake("`output`: a tupla está na ordem trocada, devolva `(output, weights)`", right_out),
    ]


def _random_mask(gen, q_len, k_len, lead=()):
    """Máscara aleatória em que toda linha tem ao menos um True e um False."""
    mask = torch.rand(*lead, q_len, k_len, generator=gen) < 0.5
    mask[..., 0] = True
    mask[..., -1] = False
    return mask[..., torch.randperm(k_len, generator=gen)]


def _tensors(c: Check, seed, lead, q_len, k_len, d_k, d_v, dtype=torch.float32):
    gen = c.gen(seed)
    sizes = ((q_len, d_k), (k_len, d_k), (k_len, d_v))
    return gen, *(torch.randn(*lead, n, d, generator=gen, dtype=dtype) for n, d in sizes)


def _run_sdpa(c: Check, fn: Callable, Q, K, V, mask=None, extra="", hint_on_error=None):
    """Um caso completo: entradas intactas, tupla, e a primeira diferença entre pesos e saída."""
    m = "sem máscara" if mask is None else f"máscara {tuple(mask.shape)}"
    c.case(f"Q {tuple(Q.shape)}, K {tuple(K.shape)}, V {tuple(V.shape)} {dtype_name(Q.dtype)}, {m}{extra}")
    with c.untouched(Q=Q, K=K, V=V, mask=mask):
        result = c.call(fn, Q, K, V, mask, hint_on_error=hint_on_error)
    pair = isinstance(result, tuple) and len(result) == 2
    c.expect(pair, f"Esperava uma tupla (output, weights); veio {describe(result)}.")
    expected_out, expected_w = _oracle(Q, K, V, mask)
    c.first_difference(
        [("`weights`", result[1], expected_w), ("`output`", result[0], expected_out)],
        _mistakes(Q, K, V, mask),
        confirm=lambda mistake: _confirm(c, fn, mistake, Q, K, V, mask),
    )
    return result


def _confirm(c: Check, fn: Callable, mistake: Mistake, Q, K, V, mask) -> bool:
    """O erro conhecido reproduz a resposta também num segundo caso, com outros números e a mesma forma?"""
    gen = c.gen(9000 + Q.numel())
    Q2, K2, V2 = (torch.randn(t.shape, generator=gen, dtype=t.dtype) for t in (Q, K, V))
    mask2 = None if mask is None else _random_mask(gen, *mask.shape[-2:], lead=tuple(mask.shape[:-2]))
    response = c.run(fn, (Q2, K2, V2, mask2))
    result = response.value
    if response.error is not None or not (isinstance(result, tuple) and len(result) == 2):
        return False
    again = [m for m in _mistakes(Q2, K2, V2, mask2) if m.key == mistake.key]
    return any(
        isinstance(part, torch.Tensor) and _same(part, m.value, Q.dtype) for part in result for m in again
    )


def _same(a: torch.Tensor, b, dtype) -> bool:
    from ..feedback import _matches

    return _matches(a, b, dtype)


@SDPA.visible_check
def check_scaled_dot_product_attention(fn: Callable) -> None:
    """Testes visíveis de ``scaled_dot_product_attention``."""
    with SDPA.check() as c:
        # 1. Um exemplo pequeno, sem máscara; q_len ≠ k_len e d_k ≠ d_v de propósito.
        _, Q, K, V = _tensors(c, 0, (2,), 3, 4, 8, 5)
        _, weights = _run_sdpa(c, fn, Q, K, V)
        sums = weights.sum(-1)
        c.expect(
            torch.allclose(sums, torch.ones_like(sums), atol=1e-5),
            f"Cada linha dos pesos deveria somar 1; somas obtidas: {sums.flatten()[:4].tolist()}",
        )
        # 2. Máscara 2-D (Tq, Tk) que se difunde sobre o lote.
        gen, Q, K, V = _tensors(c, 1, (2,), 3, 6, 8, 5)
        mask = _random_mask(gen, 3, 6)
        _, weights = _run_sdpa(c, fn, Q, K, V, mask)
        blocked = weights.detach().masked_select(~mask.expand_as(weights))
        c.expect(
            bool((blocked == 0).all()),
            f"Posições bloqueadas receberam peso (maior: {blocked.abs().max().item():.3g}).",
        )
        # 3. Tensores 4-D (B, H, T, Dk), como no multi-head, com máscara (B, 1, Tq, Tk).
        gen, Q, K, V = _tensors(c, 2, (2, 3), 4, 5, 6, 7)
        mask = _random_mask(gen, 4, 5, lead=(2, 1))
        _run_sdpa(c, fn, Q, K, V, mask, " (4-D: lote e cabeças)", hint_on_error=NOT_3D)


@SDPA.hidden_check
def check_scaled_dot_product_attention_hidden(fn: Callable) -> None:
    """Testes ocultos: dtypes, formas, gradientes, entradas não contíguas e atalhos proibidos."""
    with SDPA.check(hidden=True) as c:
        _, Q, K, V = _tensors(c, 10, (3,), 5, 5, 4, 4, torch.float64)
        _run_sdpa(c, fn, Q, K, V, torch.ones(5, 5, dtype=torch.bool).tril(), " (float64, causal)")
        _, Q, K, V = _tensors(c, 11, (), 4, 7, 3, 2)
        _run_sdpa(c, fn, Q, K, V, extra=" (2-D, sem eixo de lote)", hint_on_error=NOT_3D)
        _, Q, K, V = _tensors(c, 12, (2, 2), 3, 6, 8, 8)
        pad = torch.arange(6) < torch.tensor([4, 2]).view(2, 1, 1, 1)  # (B, 1, 1, Tk): 4 e 2 posições
        _run_sdpa(c, fn, Q, K, V, pad, " (máscara de padding)", hint_on_error=NOT_3D)
        _, Q, K, V = _tensors(c, 13, (1,), 6, 6, 256, 3)  # d_k grande: sem escala, o softmax satura
        _run_sdpa(c, fn, Q, K, V, extra=" (d_k = 256)")
        _, Q, K, V = _tensors(c, 14, (4,), 5, 3, 6, 2)
        Qt, Kt, Vt = (t.transpose(0, 1).contiguous().transpose(0, 1) for t in (Q, K, V))
        _run_sdpa(c, fn, Qt, Kt, Vt, extra=" (tensores não contíguos)")
        # Os gradientes chegam a Q, K e V e coincidem com os do PyTorch.
        _, Q, K, V = _tensors(c, 15, (2,), 3, 4, 5, 6, torch.float64)
        mine, theirs = ([t.clone().requires_grad_() for t in (Q, K, V)] for _ in range(2))
        output, _ = _run_sdpa(c, fn, *mine, extra=" (gradientes)")
        c.expect(
            isinstance(output, torch.Tensor) and wire.info(output).requires_grad,
            "A saída não está ligada ao grafo de gradientes (use só operações do PyTorch, "
            "sem `.detach()`, `.numpy()` ou `.item()`).",
        )
        response = c.run(fn, (*mine, None), grad={"loss": {"kind": "sum_sq", "path": [0]}})
        c.raise_for(response)
        F.scaled_dot_product_attention(*theirs).pow(2).sum().backward()
        for label, grad, b in zip("QKV", response.grads or [None] * 3, theirs):
            cut = f"um `.detach()`, `.data` ou `torch.no_grad()` corta o caminho de `{label}` até a saída."
            c.expect(grad is not None, f"O gradiente não chega a `{label}` (`{label}.grad` é None).", cut)
            c.close(grad, b.grad, f"o gradiente em `{label}`")
        # Atalhos proibidos: F.scaled_dot_product_attention e a referência do pacote.
        _, Q, K, V = _tensors(c, 16, (2,), 3, 3, 4, 4)
        c.case("Q, K, V (2, 3, 4) float32, sem máscara (atalhos proibidos)")
        c.forbid(
            ["torch.nn.functional.scaled_dot_product_attention"],
            fn,
            Q,
            K,
            V,
            None,
            body="Sua função chama `F.scaled_dot_product_attention`.",
            hint="o exercício pede que você escreva a atenção com matmul e softmax.",
        )
        c.refuse_reference(fn, reference.scaled_dot_product_attention, lambda: fn(Q, K, V, None))


# ---------------------------------------------------------------- entropia


def _run_entropy(c: Check, fn: Callable, weights: torch.Tensor, tried: str) -> None:
    """Um caso: entrada intacta, forma (com o eixo provável do erro), NaN, valores e erros conhecidos."""
    c.case(tried)
    expected = torch.distributions.Categorical(probs=weights, validate_args=False).entropy()
    with c.untouched(weights=weights):
        result = c.call(fn, weights)
    hint = None
    if isinstance(result, torch.Tensor):
        if tuple(result.shape) == tuple(expected.shape) + (1,):
            hint = "a forma tem um eixo a mais no fim: some com `keepdim=False` (o padrão)."
        elif weights.dim() >= 2 and result.shape == weights.shape[:-2] + weights.shape[-1:]:
            hint = "você somou sobre o eixo das consultas (dim=-2); cada linha é uma distribuição: dim=-1."
        elif result.dim() == 0 and expected.dim() > 0:
            hint = "você somou sobre todos os elementos; a entropia é por linha (dim=-1)."
    c.shape(result, expected.shape, hint=hint)
    c.expect(
        not (torch.isnan(result).any() and (weights == 0).any()),
        f"A saída contém {int(torch.isnan(result).sum())} NaN.",
        "0·log 0 deu NaN: trate os pesos nulos (0·log 0 = 0), com `torch.where` ou `torch.xlogy`.",
    )
    n_cols = weights.size(-1)
    mistakes = [
        Mistake("a entropia em bits (log₂) em vez de nats (log natural)", expected / math.log(2)),
        Mistake("a entropia sem o sinal de menos", -expected),
        Mistake("a média em vez da soma sobre a linha", expected / n_cols),
        Mistake("a entropia normalizada (dividida por ln T_k), e não em nats", expected / math.log(n_cols)),
    ]
    c.close(result, expected, "a entropia", mistakes)


@ENTROPY.visible_check
def check_attention_entropy(fn: Callable) -> None:
    """Testes visíveis de ``attention_entropy``."""
    with ENTROPY.check() as c:
        uniform = torch.full((1, 4), 0.25)
        _run_entropy(c, fn, uniform, "uma linha uniforme [0.25, 0.25, 0.25, 0.25] (esperado: ln 4 ≈ 1.386)")
        onehot = torch.tensor([[0.0, 1.0, 0.0]])
        _run_entropy(c, fn, onehot, "uma linha one-hot [0, 1, 0] (esperado: 0, com 0·log 0 = 0)")
        weights = torch.randn(2, 3, 5, generator=c.gen(20)).softmax(-1)
        _run_entropy(c, fn, weights, "pesos aleatórios (2, 3, 5)")


@ENTROPY.hidden_check
def check_attention_entropy_hidden(fn: Callable) -> None:
    """Testes ocultos de ``attention_entropy``: 4-D, float64, zeros, uma linha só, a origem."""
    with ENTROPY.check(hidden=True) as c:
        gen = c.gen(21)
        scores = torch.randn(2, 3, 4, 6, generator=gen, dtype=torch.float64)
        weights = scores.masked_fill(~torch.ones(4, 6, dtype=torch.bool).tril(1), float("-inf")).softmax(-1)
        _run_entropy(c, fn, weights, "pesos mascarados 4-D (2, 3, 4, 6) float64, com zeros")
        _run_entropy(c, fn, torch.tensor([0.5, 0.5, 0.0]), "um vetor 1-D [0.5, 0.5, 0] (esperado: ln 2)")
        peaked = torch.randn(3, 8, generator=gen).mul(30).softmax(-1)
        _run_entropy(c, fn, peaked, "pesos quase one-hot (3, 8)")
        c.refuse_reference(fn, reference.attention_entropy, lambda: fn(peaked))


EXERCISES = (SDPA, ENTROPY)
