"""Capítulo 2: as verificações aceitam respostas certas escritas de outro jeito e recusam,
com o diagnóstico certo, cada erro conhecido."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from transformer_course import attention as ref
from transformer_course.checks import ch02
from transformer_course.experiments.ch02 import scaling_statistics

CHECKS = [ch02.check_scaled_dot_product_attention, ch02.check_scaled_dot_product_attention_hidden]
ENTROPY_CHECKS = [ch02.check_attention_entropy, ch02.check_attention_entropy_hidden]


# ----------------------------------------------------------------- respostas certas


def sdpa_einsum_where(Q, K, V, mask=None):
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = torch.where(mask, s, torch.tensor(-1e9, dtype=s.dtype, device=s.device))
    w = torch.softmax(s, -1)
    return torch.einsum("...qk,...kd->...qd", w, V), w


def sdpa_masked_fill_eq0(Q, K, V, mask=None):
    s = torch.matmul(Q, K.transpose(-1, -2)) * Q.size(-1) ** -0.5
    if mask is not None:
        s = s.masked_fill(mask == 0, float("-inf"))
    w = F.softmax(s, dim=-1)
    return torch.matmul(w, V), w


def sdpa_float64_inside(Q, K, V, mask=None):
    s = (Q.double() @ K.double().transpose(-2, -1)) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    w = s.softmax(-1)
    return (w @ V.double()).to(Q.dtype), w.to(Q.dtype)


def sdpa_loops(Q, K, V, mask=None):
    """Laços explícitos sobre as consultas (lento, mas certo)."""
    rows, weights = [], []
    for i in range(Q.size(-2)):
        s = (Q[..., i : i + 1, :] @ K.transpose(-2, -1)) / math.sqrt(Q.size(-1))
        if mask is not None:
            m = mask.expand(*torch.broadcast_shapes(mask.shape, s.shape[:-2] + (Q.size(-2), K.size(-2))))
            s = s.masked_fill(~m[..., i : i + 1, :], float("-inf"))
        w = s.softmax(-1)
        weights.append(w)
        rows.append(w @ V)
    return torch.cat(rows, -2), torch.cat(weights, -2)


@pytest.mark.parametrize("fn", [sdpa_einsum_where, sdpa_masked_fill_eq0, sdpa_float64_inside, sdpa_loops])
@pytest.mark.parametrize("check", CHECKS)
def test_correct_variants_pass(fn, check, capsys):
    check(fn)
    assert "verificações passaram" in capsys.readouterr().out


# ----------------------------------------------------------------- erros conhecidos


def make_sdpa(
    scale=None,
    dim=-1,
    mask_mode="right",
    inplace=False,
    return_scores=False,
    use_bmm=False,
    use_builtin=False,
    late_scale=False,
    values_from_keys=False,
):
    def fn(Q, K, V, mask=None):
        if use_builtin:
            out = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
            _, w = ref.scaled_dot_product_attention(Q, K, V, mask)
            return out, w
        factor = scale(Q, V) if scale else 1 / math.sqrt(Q.size(-1))
        if use_bmm:
            s = torch.bmm(Q, K.transpose(1, 2)) * factor
        else:
            s = Q @ K.transpose(-2, -1) * factor
        raw = s
        if mask is not None:
            if mask_mode == "right":
                s = s.masked_fill(~mask, float("-inf"))
            elif mask_mode == "inverted":
                s = s.masked_fill(mask, float("-inf"))
            elif mask_mode == "zero":
                s = s.masked_fill(~mask, 0.0)
        w = s.softmax(dim)
        if mask is not None and mask_mode == "after":
            w = w * mask
        if late_scale:
            w = w / math.sqrt(Q.size(-1))
        if inplace:
            Q.mul_(2.0)
        return w @ (K if values_from_keys else V), (raw if return_scores else w)

    return fn


MISTAKES = [
    ("no_scaling", make_sdpa(scale=lambda Q, V: 1.0), CHECKS[0], "SEM a divisão por √d_k"),
    ("by_dk", make_sdpa(scale=lambda Q, V: 1 / Q.size(-1)), CHECKS[0], "por d_k em vez de √d_k"),
    ("by_sqrt_dv", make_sdpa(scale=lambda Q, V: 1 / math.sqrt(V.size(-1))), CHECKS[0], "√d_v"),
    ("by_dv", make_sdpa(scale=lambda Q, V: 1 / V.size(-1)), CHECKS[0], "dividida por d_v"),
    ("wrong_axis", make_sdpa(dim=-2), CHECKS[0], "eixo das consultas"),
    ("mask_inverted", make_sdpa(mask_mode="inverted"), CHECKS[0], "máscara invertida"),
    ("mask_after_softmax", make_sdpa(mask_mode="after"), CHECKS[0], "DEPOIS do softmax"),
    ("mask_zero", make_sdpa(mask_mode="zero"), CHECKS[0], "com 0 em vez de -inf"),
    ("mask_ignored", make_sdpa(mask_mode="ignored"), CHECKS[0], "máscara foi ignorada"),
    ("scores_as_weights", make_sdpa(return_scores=True), CHECKS[0], "scores escalados"),
    ("in_place", make_sdpa(inplace=True), CHECKS[0], "foi modificada"),
    ("only_3d", make_sdpa(use_bmm=True), CHECKS[0], "só com tensores 3-D"),
    ("builtin", make_sdpa(use_builtin=True), CHECKS[1], "chama `F.scaled_dot_product_attention`"),
    ("reference", ref.scaled_dot_product_attention, CHECKS[1], "implementação de referência"),
]


@pytest.mark.parametrize(("label", "fn", "check", "diagnosis"), MISTAKES, ids=[m[0] for m in MISTAKES])
def test_known_mistakes_are_named(label, fn, check, diagnosis):
    with pytest.raises(AssertionError, match=diagnosis):
        check(fn)


@pytest.mark.parametrize(("label", "fn", "check", "diagnosis"), MISTAKES, ids=[m[0] for m in MISTAKES])
def test_known_mistakes_fail_hidden_too(label, fn, check, diagnosis):
    """Nenhum erro passa pelo conjunto completo (visível + oculto)."""
    with pytest.raises(AssertionError):
        for c in CHECKS:
            c(fn)


def sdpa_by_k_size_1(Q, K, V, mask=None):
    """`math.sqrt(K.size(1))`: em 3-D, o eixo 1 de K é o das chaves (T_k), não d_k."""
    return make_sdpa(scale=lambda Q_, V_: 1 / math.sqrt(K.size(1)))(Q, K, V, mask)


NEW_MISTAKES = [
    ("by_sqrt_tk", sdpa_by_k_size_1, r"√T_k \(o número de chaves\)"),
    ("scale_after_softmax", make_sdpa(scale=lambda Q, V: 1.0, late_scale=True), "√d_k DEPOIS do softmax"),
    ("output_from_keys", make_sdpa(values_from_keys=True), "K no lugar de V"),
]


@pytest.mark.parametrize(("label", "fn", "diagnosis"), NEW_MISTAKES, ids=[m[0] for m in NEW_MISTAKES])
def test_new_mistakes_are_named(label, fn, diagnosis):
    with pytest.raises(AssertionError, match=diagnosis):
        CHECKS[0](fn)


def test_first_difference_says_where_the_error_entered():
    """Pesos certos e saída errada: a mensagem aponta a saída; pesos errados: aponta os pesos."""
    with pytest.raises(AssertionError, match="primeira diferença aparece em `output`"):
        CHECKS[0](make_sdpa(values_from_keys=True))
    with pytest.raises(AssertionError, match="primeira diferença aparece em `weights`"):
        CHECKS[0](make_sdpa(scale=lambda Q, V: 1.0))


def test_swapped_tuple_is_named():
    def swapped(Q, K, V, mask=None):
        return tuple(reversed(sdpa_einsum_where(Q, K, V, mask)))

    with pytest.raises(AssertionError, match="ordem trocada"):
        CHECKS[0](swapped)


def test_gradient_cut_before_v_is_named():
    def detached_values(Q, K, V, mask=None):
        return sdpa_einsum_where(Q, K, V.detach(), mask)

    CHECKS[0](detached_values)
    with pytest.raises(AssertionError, match=r"O gradiente não chega a `V`"):
        CHECKS[1](detached_values)


def test_float32_only_fails_hidden():
    def float32_only(Q, K, V, mask=None):
        out, w = ref.scaled_dot_product_attention(Q.float(), K.float(), V.float(), mask)
        return out, w

    CHECKS[0](float32_only)
    with pytest.raises(AssertionError, match="dtype"):
        CHECKS[1](float32_only)


def test_detached_output_fails_hidden():
    def detached(Q, K, V, mask=None):
        out, w = sdpa_einsum_where(Q, K, V, mask)
        return out.detach(), w.detach()

    with pytest.raises(AssertionError, match="grafo de gradientes"):
        CHECKS[1](detached)


def test_not_implemented_message():
    def stub(Q, K, V, mask=None):
        raise NotImplementedError()

    for check in CHECKS:
        with pytest.raises(AssertionError, match="não implementado"):
            check(stub)


def test_wrong_return_type():
    with pytest.raises(AssertionError, match="tupla"):
        CHECKS[0](lambda Q, K, V, mask=None: Q @ K.transpose(-2, -1) @ V)


def test_student_warning_does_not_reach_stderr(capsys):
    def uses_T(Q, K, V, mask=None):  # `.T` em 3-D emite um UserWarning (e quebra em 4-D)
        import warnings

        warnings.warn("aviso do aluno", UserWarning, stacklevel=1)
        return sdpa_einsum_where(Q, K, V, mask)

    CHECKS[0](uses_T)
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------- entropia


def entropy_where(w):
    return -(torch.where(w > 0, w * w.log(), torch.zeros_like(w))).sum(-1)


def entropy_clamp(w):
    return -(w * w.clamp_min(1e-30).log()).sum(dim=-1)


def entropy_special(w):
    return torch.special.entr(w).sum(-1)


@pytest.mark.parametrize("fn", [entropy_where, entropy_clamp, entropy_special])
@pytest.mark.parametrize("check", ENTROPY_CHECKS)
def test_entropy_variants_pass(fn, check):
    check(fn)


def test_entropy_reference_passes_visible_and_is_refused_hidden():
    ENTROPY_CHECKS[0](ref.attention_entropy)
    with pytest.raises(AssertionError, match="implementação de referência"):
        ENTROPY_CHECKS[1](ref.attention_entropy)


ENTROPY_MISTAKES = [
    ("log2", lambda w: entropy_where(w) / math.log(2), "bits"),
    ("no_minus", lambda w: -entropy_where(w), "sem o sinal de menos"),
    ("mean", lambda w: entropy_where(w) / w.size(-1), "média em vez da soma"),
    ("nan", lambda w: -(w * w.log()).sum(-1), "0·log 0 deu NaN"),
    ("keepdim", lambda w: entropy_where(w).unsqueeze(-1), "keepdim"),
    ("axis", lambda w: -(torch.special.xlogy(w, w)).sum(-2), "eixo das consultas"),
    ("all", lambda w: -(torch.special.xlogy(w, w)).sum(), "todos os elementos"),
    ("in_place", lambda w: entropy_where(w.clamp_(min=1e-12)), "foi modificada"),
    ("indexed_assignment", lambda w: entropy_where(w.__setitem__(w == 0, 1e-12) or w), "atribuição indexada"),
    ("normalized", lambda w: entropy_where(w) / math.log(w.size(-1)), "normalizada"),
]


@pytest.mark.parametrize(("label", "fn", "diagnosis"), ENTROPY_MISTAKES, ids=[m[0] for m in ENTROPY_MISTAKES])
def test_entropy_mistakes_are_named(label, fn, diagnosis):
    with pytest.raises(AssertionError, match=diagnosis):
        ENTROPY_CHECKS[0](fn)


# ----------------------------------------------------------------- referência e experimento


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lead", [(), (3,), (2, 4)])
def test_reference_matches_pytorch(dtype, lead):
    gen = torch.Generator().manual_seed(0)
    Q = torch.randn(*lead, 5, 8, generator=gen, dtype=dtype)
    K = torch.randn(*lead, 7, 8, generator=gen, dtype=dtype)
    V = torch.randn(*lead, 7, 3, generator=gen, dtype=dtype)
    mask = torch.rand(5, 7, generator=gen) > 0.4
    mask[:, 0] = True
    out, w = ref.scaled_dot_product_attention(Q, K, V, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(Q, K, V, attn_mask=mask))
    torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))


def test_scaling_statistics_show_the_effect():
    d_ks = [4, 64, 1024]
    stats = scaling_statistics(d_ks, n_keys=16, n_queries=256, seed=0)
    for i, d_k in enumerate(d_ks):  # sem escala, o desvio é ≈ √d_k; com escala, ≈ 1
        assert stats["std_raw"][i] == pytest.approx(math.sqrt(d_k), rel=0.15)
        assert stats["std_scaled"][i] == pytest.approx(1.0, rel=0.15)
    assert stats["entropy_raw"][-1] < 0.2 < stats["entropy_scaled"][-1]
    assert stats["grad_raw"][-1] < 0.5 * stats["grad_scaled"][-1]
