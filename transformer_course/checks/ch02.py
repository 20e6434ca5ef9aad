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
from ..feedback import Check, Finding, Mistake, describe, exception_of, same_exception, tolerances
from ..numbers import br
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

T_ALL_AXES = (
    "`K.T` inverte a ordem de TODOS os eixos (em 3-D, (B, T, d) vira (d, T, B)); para trocar só os dois "
    "últimos, use `K.transpose(-2, -1)` (ou `K.mT`)."
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


def _run_sdpa(c: Check, fn: Callable, Q, K, V, mask=None, extra="", many_axes=False):
    """Um caso completo: entradas intactas, tupla, e a primeira diferença entre pesos e saída.

    Sem erro conhecido confirmado, o diagnóstico vem de um parâmetro ajustado (a escala, o eixo do
    softmax, o valor das posições bloqueadas) ou da primeira propriedade da atenção que quebra.
    ``many_axes``: o caso tem um número de eixos diferente de 3 (4-D ou 2-D): uma exceção só ganha
    o diagnóstico "só funciona em 3-D" se um erro desse tipo levanta exatamente a mesma exceção,
    aqui e num segundo caso.
    """
    m = "sem máscara" if mask is None else f"máscara {tuple(mask.shape)}"
    c.case(f"Q {tuple(Q.shape)}, K {tuple(K.shape)}, V {tuple(V.shape)} {dtype_name(Q.dtype)}, {m}{extra}")
    with c.untouched(Q=Q, K=K, V=V, mask=mask):
        response = c.run(fn, (Q, K, V, mask))
        if response.error is not None:
            found = _error_hint(c, fn, response.error, Q, K, V, mask, many_axes)
            c.raise_for(response, found[0] if found else None, **({"mistake": found[1]} if found else {}))
    result = response.value
    pair = isinstance(result, tuple) and len(result) == 2
    c.expect(
        pair,
        f"Esperava uma tupla (output, weights); veio {describe(result)}.",
        kind="tipo",
        where="o retorno",
    )
    expected_out, expected_w = _oracle(Q, K, V, mask)
    with c.diagnosing(*_finders(c, fn, result, Q, K, V, mask)):
        c.first_difference(
            [("`weights`", result[1], expected_w), ("`output`", result[0], expected_out)],
            _mistakes(Q, K, V, mask),
            confirm=lambda mistake: _confirm(c, fn, mistake, Q, K, V, mask),
        )
    return result


def _another(c: Check, seed: int, Q, K, V, mask, resize: bool = False):
    """Um segundo caso: outros números; com ``resize``, também outros tamanhos (todos diferentes entre si).

    A máscara nova tem o mesmo formato (eixos de tamanho 1 continuam 1), com ao menos um True e um
    False em cada linha.
    """
    gen = c.gen(seed)
    lead, (q, d_k), (k, d_v) = tuple(Q.shape[:-2]), Q.shape[-2:], V.shape[-2:]
    if resize:
        sizes = [q + 3, k + 5, 2 * d_k + 3, d_v + 2]
        for i in range(len(sizes)):
            while sizes[i] in sizes[:i]:
                sizes[i] += 1
        lead, (q, k, d_k, d_v) = tuple(n + 1 for n in lead), sizes
    sizes = ((q, d_k), (k, d_k), (k, d_v))
    Q2, K2, V2 = (torch.randn(*lead, n, d, generator=gen, dtype=Q.dtype) for n, d in sizes)
    mask2 = None
    if mask is not None:
        mask_lead = tuple(
            1 if n == 1 else lead[len(lead) - mask.dim() + 2 + i] for i, n in enumerate(mask.shape[:-2])
        )
        rows = 1 if mask.size(-2) == 1 else q
        mask2 = _random_mask(gen, rows, k, lead=mask_lead)
    return Q2, K2, V2, mask2


def _answer(c: Check, fn: Callable, Q, K, V, mask):
    """A resposta do aluno num caso extra: (output, weights) como tensores, ou ``None``."""
    response = c.run(fn, (Q, K, V, mask))
    result = response.value
    if response.error is not None or not (isinstance(result, tuple) and len(result) == 2):
        return None
    if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in result):
        return None
    return result


def _confirm(c: Check, fn: Callable, mistake: Mistake, Q, K, V, mask) -> bool:
    """O erro conhecido reproduz a resposta também num segundo caso, com outros números e outros tamanhos?

    Outros tamanhos (todos diferentes entre si): um fator fixo 1/8 não passa por "dividido por d_k" só
    porque d_k = 8 nos dois casos.
    """
    Q2, K2, V2, mask2 = _another(c, 9000 + Q.numel(), Q, K, V, mask, resize=True)
    result = _answer(c, fn, Q2, K2, V2, mask2)
    if result is None:
        return False
    again = [m for m in _mistakes(Q2, K2, V2, mask2) if m.key == mistake.key]
    return any(_same(part, m.value, Q.dtype) for part in result for m in again)


def _same(a: torch.Tensor, b, dtype) -> bool:
    from ..feedback import _matches

    return isinstance(a, torch.Tensor) and _matches(a, b, dtype)


def _reproduces(result, candidate, dtype) -> bool:
    """A resposta (output, weights) coincide com o candidato (output, weights), os dois?"""
    return all(_same(a, b, dtype) for a, b in zip(result, candidate, strict=True))


# ---------------------------------------------------------------- 3-D


def _error_hint(
    c: Check, fn: Callable, error: dict, Q, K, V, mask, many_axes: bool
) -> tuple[str, str] | None:
    """(diagnóstico, id) de uma exceção do aluno, se uma atenção escrita com um erro conhecido levanta
    exatamente a mesma exceção, aqui e num segundo caso com o mesmo número de eixos e outros tamanhos.

    ``K.T`` vale em qualquer caso; as operações que só servem para 3-D, nos casos 4-D e 2-D.
    """
    variants = _3d_variants(Q, K, V, mask)
    names = [n for n in variants if many_axes or n == "T"]
    match = next((n for n in names if same_exception(error, exception_of(variants[n]))), None)
    if match is None:
        return None
    Q2, K2, V2, mask2 = _another(c, 9100 + Q.numel(), Q, K, V, mask, resize=True)
    again = c.run(fn, (Q2, K2, V2, mask2)).error
    if not same_exception(again, exception_of(_3d_variants(Q2, K2, V2, mask2)[match])):
        return None
    return (T_ALL_AXES, "transposta-de-todos-os-eixos") if match == "T" else (NOT_3D, "so-3d")


def _3d_variants(Q, K, V, mask) -> dict[str, Callable[[], object]]:
    """A atenção escrita com uma operação que só serve para tensores 3-D (cada uma troca uma operação)."""
    d_k = Q.size(-1)

    def finish(scores, bmm_v=False):
        if mask is not None:
            scores = scores.masked_fill(~mask, -math.inf)
        weights = scores.softmax(-1)
        return torch.bmm(weights, V) if bmm_v else weights @ V

    return {
        "bmm": lambda: finish(torch.bmm(Q, K.transpose(1, 2)) / math.sqrt(d_k), bmm_v=True),
        "bmm-transpose": lambda: finish(torch.bmm(Q, K.transpose(-2, -1)) / math.sqrt(d_k), bmm_v=True),
        "bmm-v": lambda: finish(Q @ K.transpose(-2, -1) / math.sqrt(d_k), bmm_v=True),
        "transpose-1-2": lambda: finish(Q @ K.transpose(1, 2) / math.sqrt(d_k)),
        "matmul-transpose-1-2": lambda: finish(torch.matmul(Q, K.transpose(1, 2)) / math.sqrt(d_k)),
        "T": lambda: finish(Q @ K.T / math.sqrt(d_k)),
        "permute": lambda: finish(Q @ K.permute(0, 2, 1) / math.sqrt(d_k)),
        "einsum": lambda: finish(torch.einsum("bqd,bkd->bqk", Q, K) / math.sqrt(d_k)),
        "size-2": lambda: finish(Q @ K.transpose(-2, -1) / math.sqrt(Q.size(2))),
    }


# ---------------------------------------------------------------- diagnóstico sem lista prevista


AXIS_NAMES = {
    2: {0: "o das consultas"},
    3: {0: "o do lote", 1: "o das consultas"},
    4: {0: "o do lote", 1: "o das cabeças", 2: "o das consultas"},
}
DIMS = (
    ("d_k", "a largura de Q e K"),
    ("d_v", "a largura de V"),
    ("T_k", "o número de chaves"),
    ("T_q", "o número de consultas"),
)
# Expoentes p de um fator dim^(−p), do mais simples ao menos.
POWERS = (0.5, 1.0, 0.25, 2.0, 1.5, -0.5, -1.0, 1 / 3, 0.75, -0.25, -2.0)


def _power(p: float) -> str:
    """O expoente −p escrito como fração: 0,5 -> "−1/2", 1 -> "−1", -0,5 -> "1/2"."""
    from fractions import Fraction

    f = -Fraction(p).limit_denominator(12)
    text = str(f).replace("-", "−")
    return text if abs(float(f) + p) < 1e-9 else br(-p, ".3g").replace("-", "−")


def _dims(Q, K, V) -> dict[str, int]:
    return {"d_k": Q.size(-1), "d_v": V.size(-1), "T_k": K.size(-2), "T_q": Q.size(-2)}


def _fit_scale(result, Q, K, V, mask) -> float | None:
    """O fator s com que softmax(s·QKᵀ) (com a máscara) reproduz os pesos e a saída do aluno.

    Forma fechada: mínimos quadrados do log dos pesos contra os scores, centrados em cada linha (o
    softmax não muda com uma constante somada à linha). Aceito só se reproduz os pesos e a saída.
    """
    out, weights = result
    w = weights.detach().double()
    raw = (Q.double() @ K.double().transpose(-2, -1)).expand_as(w)
    allowed = torch.ones_like(w, dtype=torch.bool) if mask is None else mask.expand_as(w)
    if not bool((w[allowed] > 0).all()) or not bool(torch.isfinite(w).all()):
        return None
    log_w, raw = (torch.where(allowed, t, 0.0) for t in (w.clamp_min(1e-300).log(), raw))
    n = allowed.sum(-1, keepdim=True)
    centred = [torch.where(allowed, t - t.sum(-1, keepdim=True) / n, 0.0) for t in (log_w, raw)]
    den = float((centred[1] ** 2).sum())
    if den <= 0:
        return None
    scale = float((centred[0] * centred[1]).sum()) / den
    if not math.isfinite(scale) or scale == 0:
        return None
    fitted = _variant(Q, K, V, mask, scale)[:2]
    return scale if _reproduces(result, fitted, Q.dtype) else None


def _scale_names(scale: float, dims: dict[str, int]) -> list[tuple[str, float]]:
    """As expressões dim^(−p) que valem ``scale`` com estes tamanhos, da mais simples à menos."""
    found = []
    for p in POWERS:
        for dim, _ in DIMS:
            if abs(dims[dim] ** -p - scale) <= 1e-4 * abs(scale):
                found.append((dim, p))
    return found


def _scale_finder(c: Check, fn: Callable, result, Q, K, V, mask):
    """O fator de escala da resposta, ajustado e conferido num segundo caso com outros tamanhos."""

    def find() -> Finding | None:
        scale = _fit_scale(result, Q, K, V, mask)
        right = Q.size(-1) ** -0.5
        if scale is None or abs(scale - right) <= 1e-4 * right:
            return None
        Q2, K2, V2, mask2 = _another(c, 9200 + Q.numel(), Q, K, V, mask, resize=True)
        again = _answer(c, fn, Q2, K2, V2, mask2)
        scale2 = None if again is None else _fit_scale(again, Q2, K2, V2, mask2)
        if scale2 is None:
            return None
        dims, dims2 = _dims(Q, K, V), _dims(Q2, K2, V2)
        both = [
            (d, p) for d, p in _scale_names(scale, dims) if abs(dims2[d] ** -p - scale2) <= 1e-4 * abs(scale2)
        ]
        wanted = "não d_k^(−1/2)"
        if both:
            dim, p = both[0]
            what = dict(DIMS)[dim]
            if p == 0:
                text = (
                    f"sua atenção não tem fator de escala (os scores não são divididos por nada), {wanted}."
                )
            elif dim == "d_k":
                text = f"seu fator de escala é d_k^({_power(p)}), {wanted}."
            else:
                text = (
                    f"seu fator de escala é {dim}^({_power(p)}) ({what}), {wanted} (d_k: a largura de Q e K)."
                )
            return Finding("parametro", "fator-de-escala", text, "`weights`")
        if abs(scale2 - scale) <= 1e-4 * abs(scale):
            return Finding(
                "parametro",
                "fator-de-escala",
                f"seu fator de escala é {br(scale, '.4g')}, um número fixo (não muda com d_k); "
                f"o certo é d_k^(−1/2), aqui {br(right, '.4g')}.",
                "`weights`",
            )
        p, p2 = (-math.log(s) / math.log(d["d_k"]) for s, d in ((scale, dims), (scale2, dims2)))
        if abs(p - p2) <= 1e-3:
            return Finding(
                "parametro",
                "fator-de-escala",
                f"seu fator de escala é d_k^({_power(p)}), {wanted}.",
                "`weights`",
            )
        return None

    return find


def _softmax_on(Q, K, V, mask, axis: int):
    """A atenção com a escala certa e o softmax no eixo ``axis`` dos scores."""
    scores = (Q @ K.transpose(-2, -1)) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    lead = np.broadcast_shapes(
        tuple(scores.shape), tuple(scores.shape) if mask is None else tuple(mask.shape)
    )
    weights = scores.expand(*lead).softmax(dim=axis)
    return weights @ V, weights


def _axis_finder(c: Check, fn: Callable, result, Q, K, V, mask):
    """O eixo em que o softmax da resposta normaliza (o do lote, o das cabeças), conferido noutro caso."""

    def find() -> Finding | None:
        n_dims = result[1].dim()
        for axis in range(n_dims - 2):  # o eixo das consultas (-2) é um erro conhecido
            if not _reproduces(result, _softmax_on(Q, K, V, mask, axis), Q.dtype):
                continue
            Q2, K2, V2, mask2 = _another(c, 9300 + Q.numel(), Q, K, V, mask)
            again = _answer(c, fn, Q2, K2, V2, mask2)
            if again is not None and _reproduces(again, _softmax_on(Q2, K2, V2, mask2, axis), Q.dtype):
                name = AXIS_NAMES.get(n_dims, {}).get(axis, f"o eixo {axis}")
                return Finding(
                    "parametro",
                    "eixo-do-softmax",
                    f"seu softmax normaliza o eixo {axis} ({name.removeprefix('o ')}), e não o eixo das "
                    "chaves (`dim=-1`): cada linha dos pesos é uma distribuição sobre as chaves.",
                    "`weights`",
                )
        return None

    return find


def _fit_fill(result, Q, K, V, mask):
    """O valor finito que a resposta põe nas posições bloqueadas (fixo, ou somado ao score), se reproduz.

    Os scores das posições permitidas são conhecidos (QKᵀ/√d_k); o log dos pesos dá, por linha, o
    logsumexp, e dele os scores que as posições bloqueadas receberam.
    """
    if mask is None:
        return None
    out, weights = result
    w = weights.detach().double()
    allowed = mask.expand_as(w)
    z = ((Q.double() @ K.double().transpose(-2, -1)) / math.sqrt(Q.size(-1))).expand_as(w)
    seen = ~allowed & (w > 0)
    if not bool(seen.any()) or not bool((w[allowed] > 0).all()):
        return None
    log_w = w.clamp_min(1e-300).log()
    n = allowed.sum(-1, keepdim=True)
    lse = torch.where(allowed, z - log_w, 0.0).sum(-1, keepdim=True) / n
    logits = log_w + lse
    for mode, value in (("fixo", logits[seen].median()), ("soma", (logits - z)[seen].median())):
        value = float(value)
        if abs(value - round(value)) < 0.05:
            value = float(round(value))
        blocked = value if mode == "fixo" else z + value
        scores = torch.where(allowed, z, blocked).to(Q.dtype)
        fitted_w = scores.softmax(-1)
        if _reproduces(result, (fitted_w @ V, fitted_w), Q.dtype):
            return mode, value
    return None


def _fill_finder(c: Check, fn: Callable, result, Q, K, V, mask):
    """As posições bloqueadas com um valor finito (e não -inf), conferido num segundo caso."""

    def find() -> Finding | None:
        fit = _fit_fill(result, Q, K, V, mask)
        if fit is None:
            return None
        Q2, K2, V2, mask2 = _another(c, 9400 + Q.numel(), Q, K, V, mask)
        again = _answer(c, fn, Q2, K2, V2, mask2)
        fit2 = None if again is None else _fit_fill(again, Q2, K2, V2, mask2)
        if fit2 is None or fit2[0] != fit[0] or abs(fit2[1] - fit[1]) > 1e-3 * max(1.0, abs(fit[1])):
            return None
        mode, value = fit
        if mode == "fixo":
            text = (
                f"as posições bloqueadas recebem o score {br(value, '.4g')}, um número finito, em vez de "
                f"-inf: exp({br(value, '.4g')}) ainda dá peso a elas; use `float('-inf')`."
            )
            return Finding("parametro", "mascara-valor-finito", text, "`weights`")
        text = (
            f"você somou {br(value, '.4g')} aos scores das posições bloqueadas, pouco para zerar o peso "
            "delas; bloqueie com -inf (`masked_fill(~mask, float('-inf'))`)."
        )
        return Finding("parametro", "mascara-soma-finita", text, "`weights`")

    return find


def _index(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.nonzero(t)[0])


def _rows_finder(result, Q, mask):
    """Propriedades que se leem na própria resposta: pesos ≥ 0, linhas somando 1, bloqueados com 0."""

    def find() -> Finding | None:
        out, weights = result
        w = weights.detach().double()
        tol = tolerances(Q.dtype)["rtol"]
        if bool((w < -tol).any()):
            idx = _index(w < -tol)
            return Finding(
                "propriedade",
                "pesos-nao-negativos",
                f"há pesos negativos ({br(w[idx].item(), '.4g')} no índice {idx}); os pesos saem de "
                "um softmax, nunca são negativos.",
                "`weights`",
            )
        sums = w.sum(-1)
        bad = ~torch.isclose(sums, torch.ones_like(sums), rtol=0.0, atol=tol)
        if bool(bad.any()):
            idx = _index(bad)
            return Finding(
                "propriedade",
                "linhas-somam-1",
                f"cada linha dos pesos deve somar 1 (é uma distribuição sobre as chaves); a linha "
                f"{idx} soma {br(sums[idx].item(), '.6g')}.",
                "`weights`",
            )
        if mask is not None:
            leak = ~mask.expand_as(w) & (w != 0)
            if bool(leak.any()):
                idx = _index(leak)
                return Finding(
                    "propriedade",
                    "mascarados-com-peso-zero",
                    f"as posições bloqueadas pela máscara (False) devem ter peso exatamente 0; a "
                    f"posição {idx} tem {br(w[idx].item(), '.4g')}.",
                    "`weights`",
                )
        return None

    return find


def _consistency_finder(result, V, dtype):
    """A saída é ``weights @ V`` com os pesos que a própria resposta devolveu?"""

    def find() -> Finding | None:
        out, weights = result
        mixed = (weights.double() @ V.double()).to(dtype)
        if tuple(mixed.shape) == tuple(out.shape) and not _same(out, mixed, dtype):
            return Finding(
                "propriedade",
                "saida-igual-pesos-vezes-v",
                "sua saída não é `weights @ V` com os pesos que você mesmo devolveu: a saída "
                "é a média das linhas de V ponderada pelos pesos.",
                "`output`",
            )
        return None

    return find


def _probe_finders(c: Check, fn: Callable, result, Q, K, V, mask):
    """Propriedades que pedem outra chamada: V dobrado, chaves ou consultas permutadas, o lote, Q·2 e K/2."""
    out, weights = result
    dtype = Q.dtype
    gen = c.gen(9500 + Q.numel())

    def shuffled(n: int) -> torch.Tensor:
        """Uma permutação que tira todo mundo do lugar (um ciclo, em ordem sorteada)."""
        order = torch.randperm(n, generator=gen)
        perm = torch.empty(n, dtype=torch.long)
        perm[order] = order.roll(1)
        return perm

    def doubled_v() -> Finding | None:
        again = _answer(c, fn, Q, K, 2 * V, mask)
        if again is None:
            return None
        if not _same(again[1], weights, dtype):
            return Finding(
                "propriedade",
                "pesos-independem-de-v",
                "os pesos mudaram quando só V mudou (V dobrado): eles dependem só de Q, K e da máscara.",
                "`weights`",
            )
        if not _same(again[0], 2 * out, dtype):
            return Finding(
                "propriedade",
                "saida-linear-em-v",
                "dobrar V deveria dobrar a saída (ela é uma média ponderada das linhas de V); a "
                "sua não dobrou.",
                "`output`",
            )
        return None

    def keys_permuted() -> Finding | None:
        perm = shuffled(K.size(-2))
        mask_p = None if mask is None else mask[..., perm]
        again = _answer(c, fn, Q, K[..., perm, :], V[..., perm, :], mask_p)
        if again is None:
            return None
        if not (_same(again[0], out, dtype) and _same(again[1], weights[..., perm], dtype)):
            return Finding(
                "propriedade",
                "permutar-chaves",
                "ao permutar as chaves (com os valores e as colunas da máscara juntos), a saída "
                "deveria ficar igual e as colunas dos pesos só trocar de lugar; na sua, mudaram: a "
                "atenção não pode depender da ordem das chaves.",
                "`output`",
            )
        return None

    def queries_permuted() -> Finding | None:
        perm = shuffled(Q.size(-2))
        mask_p = None if mask is None else (mask if mask.size(-2) == 1 else mask[..., perm, :])
        again = _answer(c, fn, Q[..., perm, :], K, V, mask_p)
        if again is None:
            return None
        if not (_same(again[0], out[..., perm, :], dtype) and _same(again[1], weights[..., perm, :], dtype)):
            return Finding(
                "propriedade",
                "permutar-consultas",
                "ao permutar as consultas, as linhas da saída e dos pesos deveriam só trocar de "
                "lugar; na sua, mudaram de valor: cada consulta é atendida sozinha.",
                "`output`",
            )
        return None

    def batch_isolated() -> Finding | None:
        if Q.dim() < 3 or Q.size(0) < 2:
            return None
        Q2, K2, V2 = (t.clone() for t in (Q, K, V))
        for t in (Q2, K2, V2):
            t[0] = torch.randn(t[0].shape, generator=gen, dtype=dtype)
        again = _answer(c, fn, Q2, K2, V2, mask)
        if again is None:
            return None
        if not (_same(again[0][1:], out[1:], dtype) and _same(again[1][1:], weights[1:], dtype)):
            return Finding(
                "propriedade",
                "lote-independente",
                "a saída do exemplo 1 do lote mudou quando só o exemplo 0 mudou: os exemplos do "
                "lote não podem se misturar.",
                "`output`",
            )
        return None

    def only_through_qk() -> Finding | None:
        again = _answer(c, fn, 2 * Q, K / 2, V, mask)
        if again is None:
            return None
        if not (_same(again[0], out, dtype) and _same(again[1], weights, dtype)):
            return Finding(
                "propriedade",
                "depende-so-de-qk",
                "multiplicar Q por 2 e dividir K por 2 não muda QKᵀ, então não deveria mudar os "
                "pesos nem a saída; na sua, mudaram: a atenção deve depender de Q e K só pelo "
                "produto QKᵀ (e de d_k).",
                "`weights`",
            )
        return None

    return doubled_v, keys_permuted, queries_permuted, batch_isolated, only_through_qk


def _finders(c: Check, fn: Callable, result, Q, K, V, mask):
    """Os diagnósticos, em ordem: parâmetros ajustados, depois as propriedades (as sem pedido primeiro)."""
    if not (isinstance(result, tuple) and len(result) == 2):
        return ()
    if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in result):
        return ()
    return (
        _scale_finder(c, fn, result, Q, K, V, mask),
        _axis_finder(c, fn, result, Q, K, V, mask),
        _fill_finder(c, fn, result, Q, K, V, mask),
        _rows_finder(result, Q, mask),
        _consistency_finder(result, V, Q.dtype),
        *_probe_finders(c, fn, result, Q, K, V, mask),
    )


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
            f"Cada linha dos pesos deveria somar 1; somas obtidas: {_numbers(sums.flatten()[:4])}",
            kind="propriedade",
            mistake="linhas-somam-1",
            where="`weights`",
        )
        # 2. Máscara 2-D (Tq, Tk) que se difunde sobre o lote.
        gen, Q, K, V = _tensors(c, 1, (2,), 3, 6, 8, 5)
        mask = _random_mask(gen, 3, 6)
        result = _run_sdpa(c, fn, Q, K, V, mask)
        blocked = result[1].detach().masked_select(~mask.expand_as(result[1]))
        ok = bool((blocked == 0).all())
        # Um valor finito no lugar de -inf: os pesos quase 0 passam na comparação, mas não são 0.
        fill = None if ok else c.find(_fill_finder(c, fn, result, Q, K, V, mask))
        c.expect(
            ok,
            f"Posições bloqueadas receberam peso (maior: {br(blocked.abs().max().item(), '.3g')}); "
            "o peso delas deve ser exatamente 0.",
            fill.cause if fill else None,
            kind=fill.kind if fill else "propriedade",
            mistake=fill.id if fill else "mascarados-com-peso-zero",
            where="`weights`",
        )
        # 3. Tensores 4-D (B, H, T, Dk), como no multi-head, com máscara (B, 1, Tq, Tk).
        gen, Q, K, V = _tensors(c, 2, (2, 3), 4, 5, 6, 7)
        mask = _random_mask(gen, 4, 5, lead=(2, 1))
        _run_sdpa(c, fn, Q, K, V, mask, " (4-D: lote e cabeças)", many_axes=True)


@SDPA.hidden_check
def check_scaled_dot_product_attention_hidden(fn: Callable) -> None:
    """Testes ocultos: dtypes, formas, gradientes, entradas não contíguas e atalhos proibidos."""
    with SDPA.check(hidden=True) as c:
        _, Q, K, V = _tensors(c, 10, (3,), 5, 5, 4, 4, torch.float64)
        _run_sdpa(c, fn, Q, K, V, torch.ones(5, 5, dtype=torch.bool).tril(), " (float64, causal)")
        _, Q, K, V = _tensors(c, 11, (), 4, 7, 3, 2)
        _run_sdpa(c, fn, Q, K, V, extra=" (2-D, sem eixo de lote)", many_axes=True)
        _, Q, K, V = _tensors(c, 12, (2, 2), 3, 6, 8, 8)
        pad = torch.arange(6) < torch.tensor([4, 2]).view(2, 1, 1, 1)  # (B, 1, 1, Tk): 4 e 2 posições
        _run_sdpa(c, fn, Q, K, V, pad, " (máscara de padding)", many_axes=True)
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
            kind="propriedade",
            mistake="saida-no-grafo",
        )
        response = c.run(fn, (*mine, None), grad={"loss": {"kind": "sum_sq", "path": [0]}})
        c.raise_for(response)
        F.scaled_dot_product_attention(*theirs).pow(2).sum().backward()
        for label, grad, b in zip("QKV", response.grads or [None] * 3, theirs):
            cut = f"um `.detach()`, `.data` ou `torch.no_grad()` corta o caminho de `{label}` até a saída."
            c.expect(
                grad is not None,
                f"O gradiente não chega a `{label}` (`{label}.grad` é None).",
                cut,
                kind="propriedade",
                mistake=f"gradiente-chega-a-{label}",
            )
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


def _entropy(weights: torch.Tensor) -> torch.Tensor:
    return torch.distributions.Categorical(probs=weights, validate_args=False).entropy()


def _entropy_mistakes(weights: torch.Tensor) -> list[Mistake]:
    """Erros conhecidos e o que cada um devolveria com estes pesos."""
    expected, n_cols = _entropy(weights), weights.size(-1)
    terms = -torch.special.xlogy(weights, weights)
    mistakes = [
        Mistake("a entropia em bits (log₂) em vez de nats (log natural)", expected / math.log(2), "bits"),
        Mistake("a entropia sem o sinal de menos", -expected, "sem-sinal-de-menos"),
        Mistake("a média em vez da soma sobre a linha", expected / n_cols, "media-na-linha"),
        Mistake(
            "a entropia normalizada (dividida por ln T_k), e não em nats",
            expected / math.log(n_cols) if n_cols > 1 else expected * math.nan,
            "normalizada",
        ),
        Mistake("a conta sem tratar 0·log 0 (que dá NaN)", -(weights * weights.log()).sum(-1), "0-log-0"),
        Mistake("keepdim", expected.unsqueeze(-1), "keepdim"),
        Mistake(
            "a soma no eixo das consultas",
            terms.sum(-2) if weights.dim() >= 2 else None,
            "eixo-das-consultas",
        ),
        Mistake("a soma de tudo", terms.sum(), "soma-de-tudo"),
    ]
    return mistakes


SHAPE_HINTS = {
    "keepdim": "a forma tem um eixo a mais no fim: some com `keepdim=False` (o padrão).",
    "eixo-das-consultas": (
        "você somou sobre o eixo das consultas (dim=-2); cada linha é uma distribuição: dim=-1."
    ),
    "soma-de-tudo": "você somou sobre todos os elementos; a entropia é por linha (dim=-1).",
}
NAN_HINT = "0·log 0 deu NaN: trate os pesos nulos (0·log 0 = 0), com `torch.where` ou `torch.xlogy`."


def _other_weights(c: Check, weights: torch.Tensor, seed: int) -> torch.Tensor:
    """Outros pesos, o mesmo dtype e (com zeros, se os originais tinham), com um eixo de 3 a mais na frente:
    um erro que só vale para uma linha (ou um lote) não se confirma."""
    gen = c.gen(seed)
    shape = (3, *weights.shape)
    other = torch.randn(shape, generator=gen, dtype=torch.float64)
    if bool((weights == 0).any()) and weights.size(-1) > 1:
        zeros = torch.rand(shape, generator=gen) < 0.3
        zeros[..., 0] = False  # toda linha fica com algum peso
        other = other.masked_fill(zeros[..., torch.randperm(weights.size(-1), generator=gen)], -math.inf)
    return other.softmax(-1).to(weights.dtype)


def _entropy_confirm(c: Check, fn: Callable, weights: torch.Tensor):
    """A função que confere um erro conhecido da entropia em outros pesos, com a mesma forma."""

    def confirm(mistake: Mistake) -> bool:
        other = _other_weights(c, weights, 9600 + weights.numel())
        response = c.run(fn, (other,))
        if response.error is not None or not isinstance(response.value, torch.Tensor):
            return False
        again = [m for m in _entropy_mistakes(other) if m.key == mistake.key]
        return any(_same(response.value, m.value, weights.dtype) for m in again)

    return confirm


def _known(result, weights, keys, confirm) -> Mistake | None:
    """O erro conhecido (entre ``keys``) que reproduz ``result`` aqui e, por ``confirm``, noutros pesos."""
    for mistake in _entropy_mistakes(weights):
        if mistake.key in keys and _same(result, mistake.value, weights.dtype) and confirm(mistake):
            return mistake
    return None


def _run_entropy(c: Check, fn: Callable, weights: torch.Tensor, tried: str) -> None:
    """Um caso: entrada intacta, forma, NaN, valores; diagnósticos só quando se confirmam noutros pesos."""
    c.case(tried)
    expected = _entropy(weights)
    with c.untouched(weights=weights):
        result = c.call(fn, weights)
    confirm = _entropy_confirm(c, fn, weights)
    shape_wrong = isinstance(result, torch.Tensor) and tuple(result.shape) != tuple(expected.shape)
    known = _known(result, weights, SHAPE_HINTS, confirm) if shape_wrong else None
    c.shape(
        result,
        expected.shape,
        hint=SHAPE_HINTS[known.key] if known else None,
        **({"mistake": known.key} if known else {"where": "a saída"}),
    )
    nan_at_zeros = bool(torch.isnan(result).any()) and bool((weights == 0).any())
    known = _known(result, weights, {"0-log-0"}, confirm) if nan_at_zeros else None
    c.expect(
        not nan_at_zeros,
        f"A saída contém {int(torch.isnan(result).sum())} NaN.",
        NAN_HINT if known else None,
        kind="nan",
        where="a entropia",
        **({"mistake": known.key} if known else {}),
    )
    values = [m for m in _entropy_mistakes(weights) if m.key not in SHAPE_HINTS and m.key != "0-log-0"]
    with c.diagnosing(*_entropy_finders(c, fn, weights, result)):
        c.close(result, expected, "a entropia", values, confirm=confirm)


def _entropy_finders(c: Check, fn: Callable, weights: torch.Tensor, result):
    """Sem erro conhecido: um fator constante (a base do logaritmo), depois as propriedades da entropia."""
    if not (isinstance(result, torch.Tensor) and result.is_floating_point()):
        return ()
    expected = _entropy(weights).double()
    got = result.detach().double()
    n_cols = weights.size(-1)
    dtype = weights.dtype
    gen = c.gen(9700 + weights.numel())

    def factor() -> Finding | None:
        big = expected.abs() > 1e-3
        if not bool(big.any()):
            return None
        ratio = float((got[big] / expected[big]).median())
        if not math.isfinite(ratio) or ratio == 0 or not _same(result, (expected * ratio).to(dtype), dtype):
            return None
        other = _other_weights(c, weights, 9650 + weights.numel())
        response = c.run(fn, (other,))
        if response.error is not None or not _same(response.value, (_entropy(other) * ratio), dtype):
            return None
        base = math.exp(1 / abs(ratio))
        sign = "" if ratio > 0 else ", e com o sinal trocado (falta o sinal de menos)"
        if abs(base - round(base)) < 1e-3 * base and round(base) > 1:
            b = round(base)
            return Finding(
                "parametro",
                "base-do-logaritmo",
                f"sua entropia usa o logaritmo na base {b}, e não o logaritmo natural (nats){sign}: "
                f"ela é a certa dividida por {'' if ratio > 0 else '−'}ln {b}.",
                "a entropia",
            )
        return Finding(
            "parametro",
            "fator-constante",
            f"sua entropia é a certa multiplicada por {br(ratio, '.4g')} (um fator constante"
            f"{sign}): confira a base do logaritmo e as divisões.",
            "a entropia",
        )

    def bounds() -> Finding | None:
        tol = 10 * tolerances(dtype)["rtol"]
        if bool((got < -tol).any()):
            idx = _index(got < -tol)
            return Finding(
                "propriedade",
                "entropia-nao-negativa",
                f"a entropia nunca é negativa (−Σ p·ln p, com 0 ≤ p ≤ 1); a linha {idx} dá "
                f"{br(got[idx].item(), '.4g')}.",
                "a entropia",
            )
        top = math.log(n_cols) if n_cols > 0 else 0.0
        if bool((got > top + tol).any()):
            idx = _index(got > top + tol)
            return Finding(
                "propriedade",
                "entropia-no-maximo-ln-tk",
                f"com {n_cols} posições, a entropia é no máximo ln {n_cols} = {br(top, '.4g')} (a "
                f"linha uniforme); a linha {idx} dá {br(got[idx].item(), '.4g')}.",
                "a entropia",
            )
        return None

    def columns_permuted() -> Finding | None:
        order = torch.randperm(n_cols, generator=gen)
        perm = torch.empty(n_cols, dtype=torch.long)
        perm[order] = order.roll(1)  # ninguém fica no lugar
        again = c.run(fn, (weights[..., perm],)).value
        if isinstance(again, torch.Tensor) and not _same(again, result, dtype):
            return Finding(
                "propriedade",
                "entropia-permutar-colunas",
                "a entropia de uma linha não depende da ordem das posições; permutar as colunas mudou a sua.",
                "a entropia",
            )
        return None

    def rows_isolated() -> Finding | None:
        if weights.dim() < 2 or weights[..., 0].numel() < 2:
            return None
        other = weights.clone().reshape(-1, n_cols)
        other[0] = torch.randn(n_cols, generator=gen, dtype=torch.float64).softmax(-1).to(dtype)
        again = c.run(fn, (other.reshape(weights.shape),)).value
        if not isinstance(again, torch.Tensor) or again.shape != result.shape:
            return None
        if not _same(again.reshape(-1)[1:], result.reshape(-1)[1:], dtype):
            return Finding(
                "propriedade",
                "entropia-por-linha",
                "a entropia de cada linha depende só daquela linha; mudar só a primeira linha "
                "mudou a entropia de outras.",
                "a entropia",
            )
        return None

    def uniform_and_onehot() -> Finding | None:
        for row, right, label, key in (
            (
                torch.full((1, n_cols), 1 / n_cols, dtype=dtype),
                math.log(n_cols),
                "uniforme",
                "entropia-uniforme",
            ),
            (torch.eye(n_cols, dtype=dtype)[:1], 0.0, "one-hot", "entropia-one-hot"),
        ):
            again = c.run(fn, (row,)).value
            if (
                isinstance(again, torch.Tensor)
                and again.numel() == 1
                and not _same(again.reshape(1), torch.tensor([right], dtype=dtype), dtype)
            ):
                return Finding(
                    "propriedade",
                    key,
                    f"uma linha {label} com {n_cols} posições tem entropia {br(right, '.4g')}; a "
                    f"sua dá {br(again.reshape(-1)[0].item(), '.4g')}.",
                    "a entropia",
                )
        return None

    return factor, bounds, columns_permuted, rows_isolated, uniform_and_onehot


def _numbers(values: torch.Tensor) -> str:
    """Uma lista de números no formato brasileiro: ``[1; 0,9999; 1,2]``."""
    return "[" + "; ".join(br(v, ".6g") for v in values.tolist()) + "]"


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
