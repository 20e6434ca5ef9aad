"""Capítulo 5: as verificações aceitam variantes corretas e recusam cada erro conhecido, com o diagnóstico."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from transformer_course import interop
from transformer_course import masks as ref
from transformer_course.checks import ch05

# ---------------------------------------------------------------- causal_mask


def _check_len(T):
    if T <= 0:
        raise ValueError("seq_len precisa ser positivo")


def causal_tril(T, device=None):
    _check_len(T)
    return torch.tril(torch.ones(T, T, dtype=torch.bool, device=device))


def causal_arange(T, device=None):
    _check_len(T)
    i = torch.arange(T, device=device)
    return i[:, None] >= i[None, :]


def causal_loops(T, device=None):
    _check_len(T)
    mask = torch.zeros(T, T, dtype=torch.bool, device=device)
    for i in range(T):
        mask[i, : i + 1] = True
    return mask


def causal_triu_not(T, device=None):
    _check_len(T)
    return ~torch.ones(T, T, dtype=torch.bool, device=device).triu(1)


@pytest.mark.parametrize("fn", [causal_tril, causal_arange, causal_loops, causal_triu_not])
def test_causal_correct_variants_pass(fn):
    ch05.check_causal_mask(fn)
    ch05.check_causal_mask_hidden(fn)


WRONG_CAUSAL = {
    "SUPERIOR": lambda T, device=None: torch.ones(T, T, dtype=torch.bool).triu(),
    "SEM a diagonal": lambda T, device=None: torch.ones(T, T, dtype=torch.bool).tril(-1),
    "True = bloqueado": lambda T, device=None: torch.ones(T, T, dtype=torch.bool).triu(1),
    "não é booleana": lambda T, device=None: torch.ones(T, T).tril(),
    "eixos extras": lambda T, device=None: torch.ones(T, T, dtype=torch.bool).tril()[None, None],
}


@pytest.mark.parametrize("diagnosis", list(WRONG_CAUSAL))
def test_causal_mistakes_diagnosed(diagnosis):
    with pytest.raises(AssertionError, match=diagnosis):
        ch05.check_causal_mask(WRONG_CAUSAL[diagnosis])


def test_causal_int_mask_rejected():
    with pytest.raises(AssertionError, match="não é booleana"):
        ch05.check_causal_mask(lambda T, device=None: torch.ones(T, T, dtype=torch.long).tril())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="precisa de uma GPU")
def test_causal_ignoring_device_hidden():
    def ignores_device(T, device=None):
        _check_len(T)
        return torch.ones(T, T, dtype=torch.bool).tril()

    with pytest.raises(AssertionError, match="device"):
        ch05.check_causal_mask_hidden(ignores_device)


def test_causal_valueerror_hidden():

    def no_check(T, device=None):
        return torch.ones(max(T, 0), max(T, 0), dtype=torch.bool, device=device).tril()

    with pytest.raises(AssertionError, match="ValueError"):
        ch05.check_causal_mask_hidden(no_check)


# ---------------------------------------------------------------- padding_mask


def _check_ids(ids):
    if ids.dim() != 2:
        raise ValueError("token_ids deve ser (B, T)")


def padding_ne(ids, pad_id=0):
    _check_ids(ids)
    return (ids != pad_id).unsqueeze(1).unsqueeze(2)


def padding_view(ids, pad_id=0):
    _check_ids(ids)
    B, T = ids.shape
    return ids.ne(pad_id).view(B, 1, 1, T)


def padding_where(ids, pad_id=0):
    _check_ids(ids)
    return torch.where(ids == pad_id, False, True)[:, None, None]


@pytest.mark.parametrize("fn", [padding_ne, padding_view, padding_where])
def test_padding_correct_variants_pass(fn):
    ch05.check_padding_mask(fn)
    ch05.check_padding_mask_hidden(fn)


WRONG_PADDING = {
    "invertida": lambda ids, pad_id=0: (ids == pad_id)[:, None, None, :],
    r"forma \(B, T\)": lambda ids, pad_id=0: ids != pad_id,
    "CONSULTAS": lambda ids, pad_id=0: (ids != pad_id)[:, None, :, None],
    "5 eixos": lambda ids, pad_id=0: (ids != pad_id)[:, None, None, None, :],
    "pad_id": lambda ids, pad_id=0: (ids != 0)[:, None, None, :],
    "não é booleana": lambda ids, pad_id=0: (ids != pad_id).float()[:, None, None, :],
    "bloqueia também as consultas": lambda ids, pad_id=0: (
        (ids != pad_id)[:, :, None] & (ids != pad_id)[:, None, :]
    )[:, None],
}


@pytest.mark.parametrize("diagnosis", list(WRONG_PADDING))
def test_padding_mistakes_diagnosed(diagnosis):
    with pytest.raises(AssertionError, match=diagnosis):
        ch05.check_padding_mask(WRONG_PADDING[diagnosis])


def test_padding_in_place_and_valueerror_hidden():
    def in_place(ids, pad_id=0):
        _check_ids(ids)
        ids[ids == pad_id] = pad_id  # escreve na entrada (mesmo valor) e depois de verdade
        ids.add_(0)
        real = ids != pad_id
        ids.fill_(pad_id)
        return real[:, None, None, :]

    with pytest.raises(AssertionError, match="modificada"):
        ch05.check_padding_mask(in_place)
    with pytest.raises(AssertionError, match="ValueError"):
        ch05.check_padding_mask_hidden(lambda ids, pad_id=0: (ids != pad_id)[..., None, None, :])


# ---------------------------------------------------------------- decoder_self_mask


def decoder_and(ids, pad_id=0):
    return padding_ne(ids, pad_id) & causal_tril(ids.size(1), ids.device)


def decoder_arange(ids, pad_id=0):
    _check_ids(ids)
    B, T = ids.shape
    pos = torch.arange(T, device=ids.device)
    causal = pos[None, :] <= pos[:, None]  # (T, T)
    return causal[None, None] & (ids != pad_id)[:, None, None, :]


def decoder_logical(ids, pad_id=0):
    _check_ids(ids)
    T = ids.size(1)
    return torch.logical_and(causal_loops(T, ids.device), padding_where(ids, pad_id))


@pytest.mark.parametrize("fn", [decoder_and, decoder_arange, decoder_logical])
def test_decoder_correct_variants_pass(fn):
    ch05.check_decoder_self_mask(fn)
    ch05.check_decoder_self_mask_hidden(fn)


def _causal(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


WRONG_DECODER = {
    "OU padding": lambda ids, pad_id=0: padding_ne(ids, pad_id) | _causal(ids.size(1)),
    "só a máscara causal": lambda ids, pad_id=0: _causal(ids.size(1)).expand(ids.size(0), 1, -1, -1),
    r"forma \(T, T\)": lambda ids, pad_id=0: _causal(ids.size(1)),
    "só a máscara de padding": lambda ids, pad_id=0: padding_ne(ids, pad_id).expand(-1, 1, ids.size(1), -1),
    "SUPERIOR": lambda ids, pad_id=0: padding_ne(ids, pad_id) & _causal(ids.size(1)).T,
    "sem a diagonal": lambda ids, pad_id=0: padding_ne(ids, pad_id) & _causal(ids.size(1)).tril(-1),
    "padding invertido": lambda ids, pad_id=0: ~padding_ne(ids, pad_id) & _causal(ids.size(1)),
    "pad_id": lambda ids, pad_id=0: padding_ne(ids, 0) & _causal(ids.size(1)),
    "5 eixos": lambda ids, pad_id=0: (padding_ne(ids, pad_id) & _causal(ids.size(1)))[:, None],
    "sem o eixo das cabeças": lambda ids, pad_id=0: (padding_ne(ids, pad_id) & _causal(ids.size(1)))[:, 0],
    "consultas": lambda ids, pad_id=0: (
        padding_ne(ids, pad_id) & _causal(ids.size(1)) & (ids != pad_id)[:, None, :, None]
    ),
    "não é booleana": lambda ids, pad_id=0: (padding_ne(ids, pad_id) & _causal(ids.size(1))).float(),
}


@pytest.mark.parametrize("diagnosis", list(WRONG_DECODER))
def test_decoder_mistakes_diagnosed(diagnosis):
    with pytest.raises(AssertionError, match=diagnosis):
        ch05.check_decoder_self_mask(WRONG_DECODER[diagnosis])


# ---------------------------------------------------------------- masked_softmax


def softmax_inf_nan_to_num(scores, mask):
    if mask is None:
        return scores.softmax(-1)
    return scores.masked_fill(~mask, float("-inf")).softmax(-1).nan_to_num(0.0)


def softmax_big_negative_then_zero(scores, mask):
    if mask is None:
        return torch.softmax(scores, dim=-1)
    weights = scores.masked_fill(~mask, -1e9).softmax(-1)
    return weights * mask


def softmax_where(scores, mask):
    if mask is None:
        return scores.softmax(-1)
    filled = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    weights = torch.softmax(filled, dim=-1)
    return torch.where(mask.any(-1, keepdim=True), weights, torch.zeros_like(weights))


def softmax_by_hand(scores, mask):
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    s = scores.masked_fill(~mask, float("-inf"))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    total = e.sum(-1, keepdim=True)
    return e / total.clamp_min(torch.finfo(scores.dtype).tiny)


@pytest.mark.parametrize(
    "fn",
    [
        ref.masked_softmax,
        softmax_inf_nan_to_num,
        softmax_big_negative_then_zero,
        softmax_where,
        softmax_by_hand,
    ],
)
def test_softmax_correct_variants_pass_visible(fn):
    ch05.check_masked_softmax(fn)


@pytest.mark.parametrize(
    "fn",
    [softmax_inf_nan_to_num, softmax_big_negative_then_zero, softmax_where, softmax_by_hand],
)
def test_softmax_correct_variants_pass_hidden(fn):
    ch05.check_masked_softmax_hidden(fn)


def _plain(scores, mask, fill=float("-inf")):
    return scores.softmax(-1) if mask is None else scores.masked_fill(~mask, fill).softmax(-1)


WRONG_SOFTMAX = {
    "NaN nas linhas totalmente bloqueadas": _plain,
    "uniformes": lambda s, m: _plain(s, m, -1e9),
    "máscara ignorada": lambda s, m: s.softmax(-1),
    "invertida": lambda s, m: ref.masked_softmax(s, None if m is None else ~m),
    "preenchidas com 0": lambda s, m: _plain(s, m, 0.0),
    "deixam de somar 1": lambda s, m: s.softmax(-1) if m is None else s.softmax(-1) * m,
    r"dim=-2": lambda s, m: (
        ref.masked_softmax(s.transpose(-2, -1), m).transpose(-2, -1)
        if m is None
        else s.masked_fill(~m, -1e9).softmax(-2) * m
    ),
}


@pytest.mark.parametrize("diagnosis", list(WRONG_SOFTMAX))
def test_softmax_mistakes_diagnosed(diagnosis):
    with pytest.raises(AssertionError, match=diagnosis):
        ch05.check_masked_softmax(WRONG_SOFTMAX[diagnosis])


def test_softmax_small_fill_not_exactly_zero_hidden():
    def small_fill(scores, mask):
        if mask is None:
            return scores.softmax(-1)
        w = scores.masked_fill(~mask, -100.0).softmax(-1)
        return torch.where(mask.any(-1, keepdim=True), w, torch.zeros_like(w))

    for check in (ch05.check_masked_softmax, ch05.check_masked_softmax_hidden):
        with pytest.raises(AssertionError, match="exatamente 0"):
            check(small_fill)


def test_softmax_overflow_hidden():
    def no_max(scores, mask):
        e = torch.exp(scores)
        if mask is not None:
            e = e * mask
        total = e.sum(-1, keepdim=True)
        return torch.where(total > 0, e / total, torch.zeros_like(e))

    with pytest.raises(AssertionError, match="máximo"):
        ch05.check_masked_softmax_hidden(no_max)


def test_softmax_in_place_and_shortcut_hidden():
    def in_place(scores, mask):
        if mask is None:
            return scores.softmax(-1)
        return ref.masked_softmax(scores.masked_fill_(~mask, -1e9), mask)

    with pytest.raises(AssertionError, match="modificada"):
        ch05.check_masked_softmax(in_place)

    def via_sdpa(scores, mask):
        eye = torch.eye(scores.size(-1), dtype=scores.dtype)
        q = scores.new_zeros(*scores.shape[:-1], 1)
        del q
        w = F.scaled_dot_product_attention(
            scores.new_zeros(*scores.shape[:-1], 1),
            scores.new_zeros(*scores.shape[:-2], scores.size(-1), 1),
            eye.expand(*scores.shape[:-2], -1, -1),
            attn_mask=mask,
        )
        return ref.masked_softmax(scores, mask) if w is not None else w

    with pytest.raises(AssertionError, match="scaled_dot_product_attention"):
        ch05.check_masked_softmax_hidden(via_sdpa)


def test_softmax_mask_none_crash_hinted():
    with pytest.raises(AssertionError, match="mask=None"):
        ch05.check_masked_softmax(lambda s, m: ref.masked_softmax(s, m.bool()))


def test_stub_not_implemented():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check in (
        ch05.check_causal_mask,
        ch05.check_padding_mask,
        ch05.check_decoder_self_mask,
        ch05.check_masked_softmax,
    ):
        with pytest.raises(AssertionError, match="não implementado"):
            check(stub)


def test_checks_do_not_write_to_stderr(capsys):
    ch05.check_masked_softmax_hidden(softmax_inf_nan_to_num)
    ch05.check_decoder_self_mask_hidden(decoder_and)
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- referência contra o PyTorch


def test_reference_masks_agree_with_sdpa():
    gen = torch.Generator().manual_seed(0)
    ids = torch.tensor([[5, 2, 7, 0, 0], [3, 3, 1, 4, 9]])
    q, k, v = (torch.randn(2, 2, 5, 4, generator=gen) for _ in range(3))
    mask = ref.decoder_self_mask(ids)
    scores = q @ k.transpose(-2, -1) / 2.0
    ours = ref.masked_softmax(scores, mask) @ v
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    additive = interop.to_additive_mask(mask)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=additive))


def test_reference_converters_agree_with_multihead_attention():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 5, 8)
    ids = torch.tensor([[5, 2, 7, 0, 0], [3, 3, 1, 4, 9]])
    pad = ref.padding_mask(ids)
    by_kpm, _ = mha(x, x, x, key_padding_mask=interop.to_key_padding_mask(pad))
    by_attn, _ = mha(x, x, x, attn_mask=interop.to_mha_attn_mask(pad, n_heads=2, q_len=5))
    torch.testing.assert_close(by_kpm, by_attn)
    causal = ref.causal_mask(5)
    out_mask, _ = mha(x, x, x, attn_mask=interop.to_mha_attn_mask(causal))
    out_gen, _ = mha(x, x, x, attn_mask=torch.nn.Transformer.generate_square_subsequent_mask(5))
    torch.testing.assert_close(out_mask, out_gen)
    assert torch.equal(interop.from_key_padding_mask(interop.to_key_padding_mask(pad)), pad)


def test_reference_masked_softmax_no_nan_and_finite_grad():
    scores = torch.randn(2, 3, requires_grad=True)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    w = ref.masked_softmax(scores, mask)
    assert torch.equal(w[1], torch.zeros(3))
    w.sum().backward()
    assert torch.isfinite(scores.grad).all()
    with pytest.raises(ValueError):
        ref.masked_softmax(scores, mask.float())


def test_reference_validation():
    with pytest.raises(ValueError):
        ref.causal_mask(0)
    with pytest.raises(ValueError):
        ref.padding_mask(torch.tensor([1, 2]))
    with pytest.raises(ValueError):
        ref.decoder_self_mask(torch.tensor([1, 2]))


# ---------------------------------------------------------------- forma das falhas e testes visíveis


def test_wrong_values_fail_with_the_short_check_failure():
    """Máscara com valores errados e NaN no softmax: CheckFailure (a devolutiva curta), não um
    AssertionError comum com o traceback do pacote."""
    from transformer_course.feedback import CheckFailure

    with pytest.raises(CheckFailure, match="Valores errados"):
        ch05.check_causal_mask(WRONG_CAUSAL["SUPERIOR"])
    with pytest.raises(CheckFailure, match="Valores errados"):
        ch05.check_decoder_self_mask(WRONG_DECODER["OU padding"])

    def nan_rows(scores, mask=None):
        if mask is None:
            return scores.softmax(-1)
        return scores.masked_fill(~mask, float("-inf")).softmax(-1)

    with pytest.raises(CheckFailure, match="NaN"):
        ch05.check_masked_softmax(nan_rows)


def test_valueerror_requirements_have_visible_tests():
    """Os ValueError pedidos nos enunciados são conferidos já nos testes visíveis."""
    from transformer_course.feedback import CheckFailure

    def causal_no_check(T, device=None):
        return torch.ones(max(T, 0), max(T, 0), dtype=torch.bool, device=device).tril()

    def padding_no_check(ids, pad_id=0):
        return (ids != pad_id)[..., None, None, :]

    def decoder_no_check(ids, pad_id=0):
        T = ids.size(-1)
        return padding_no_check(ids, pad_id) & torch.ones(T, T, dtype=torch.bool, device=ids.device).tril()

    for check, fn in (
        (ch05.check_causal_mask, causal_no_check),
        (ch05.check_padding_mask, padding_no_check),
        (ch05.check_decoder_self_mask, decoder_no_check),
    ):
        with pytest.raises(CheckFailure, match="ValueError"):
            check(fn)


def test_error_in_backward_is_a_check_failure():
    """Um erro que só aparece na retropropagação (aqui, um `masked_fill_` sobre a saída do softmax)
    também vira CheckFailure com a mensagem em pt-BR."""
    from transformer_course.feedback import CheckFailure

    def in_place_on_output(scores, mask=None):
        if mask is None:
            return scores.softmax(-1)
        empty = ~mask.any(-1, keepdim=True)
        weights = scores.masked_fill(~mask, float("-inf")).masked_fill(empty, 0.0).softmax(-1)
        weights.masked_fill_(~mask, 0.0)
        return weights

    ch05.check_masked_softmax(in_place_on_output)
    with pytest.raises(CheckFailure, match="levantou RuntimeError"):
        ch05.check_masked_softmax_hidden(in_place_on_output)


def test_in_place_on_softmax_output_hinted_hidden():
    """Zerar o NaN no lugar (`w[w.isnan()] = 0`) passa nos visíveis e quebra o backward: a
    mensagem oculta diz que a saída do softmax foi alterada no lugar."""
    from transformer_course.feedback import CheckFailure

    def nan_zeroed_in_place(scores, mask=None):
        if mask is None:
            return scores.softmax(-1)
        weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
        weights[weights.isnan()] = 0.0
        return weights

    ch05.check_masked_softmax(nan_zeroed_in_place)
    expected = r"(?s)modified by an inplace.*alterou no\s+lugar a saída do softmax"
    with pytest.raises(CheckFailure, match=expected):
        ch05.check_masked_softmax_hidden(nan_zeroed_in_place)


# ---------------------------------------------------------------- dispositivo sem GPU (meta) e keepdim


def test_causal_ignoring_device_hidden_without_gpu():
    """Sem GPU, o dispositivo `meta` (só formas) mostra que `device` foi ignorado."""

    def ignores_device(T, device=None):
        _check_len(T)
        return torch.ones(T, T, dtype=torch.bool).tril()

    ch05.check_causal_mask(ignores_device)
    with pytest.raises(AssertionError, match=r"(?s)meta.*o argumento `device` foi ignorado"):
        ch05.check_causal_mask_hidden(ignores_device)


def test_decoder_causal_on_another_device_hidden():
    def causal_on_cpu(ids, pad_id=0):
        return padding_ne(ids, pad_id) & causal_tril(ids.size(1))  # sem ids.device

    ch05.check_decoder_self_mask(causal_on_cpu)
    with pytest.raises(AssertionError, match=r"passe `token_ids.device` à sua `causal_mask`"):
        ch05.check_decoder_self_mask_hidden(causal_on_cpu)


def test_decoder_reading_values_is_not_judged_on_meta():
    """Uma resposta certa que lê os ids um a um (`int(...)`) não roda no meta: sem veredito, passa."""

    def decoder_loops(ids, pad_id=0):
        _check_ids(ids)
        B, T = ids.shape
        mask = torch.zeros(B, 1, T, T, dtype=torch.bool, device=ids.device)
        for b in range(B):
            for i in range(T):
                for j in range(i + 1):
                    mask[b, 0, i, j] = int(ids[b, j]) != pad_id
        return mask

    ch05.check_decoder_self_mask(decoder_loops)
    ch05.check_decoder_self_mask_hidden(decoder_loops)


def test_softmax_helper_tensor_on_another_device_hidden():
    def zeros_on_cpu(scores, mask=None):
        if mask is None:
            return scores.softmax(-1)
        weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
        return torch.where(mask.any(-1, keepdim=True), weights, torch.zeros(scores.shape, dtype=scores.dtype))

    ch05.check_masked_softmax(zeros_on_cpu)
    with pytest.raises(AssertionError, match=r"(?s)meta.*fora do dispositivo de `scores`"):
        ch05.check_masked_softmax_hidden(zeros_on_cpu)


def test_softmax_without_keepdim_hinted():
    def no_keepdim(scores, mask=None):
        if mask is None:
            return scores.softmax(-1)
        empty = ~mask.any(dim=-1)  # sem keepdim=True
        return (
            scores.masked_fill(~mask, float("-inf"))
            .masked_fill(empty, 0.0)
            .softmax(-1)
            .masked_fill(~mask, 0.0)
        )

    with pytest.raises(AssertionError, match="keepdim=True"):
        ch05.check_masked_softmax(no_keepdim)


# ---------------------------------------------------------------- sementes por entrega (correção)

HIDDEN_CORRECT = [
    (ch05.check_padding_mask_hidden, padding_where),
    (ch05.check_decoder_self_mask_hidden, decoder_logical),
    (ch05.check_masked_softmax_hidden, softmax_big_negative_then_zero),
    (ch05.check_masked_softmax_hidden, softmax_by_hand),
]


@pytest.mark.parametrize("offset", [1, 48_611, 999_999_937])
def test_hidden_checks_accept_correct_variants_with_per_submission_seeds(offset):
    """Na correção, os casos ocultos mudam de entrega para entrega (as sementes são deslocadas);
    uma resposta certa passa com qualquer deslocamento."""
    from transformer_course.probe import LocalStudent, judging

    for check, answer in [*HIDDEN_CORRECT, (ch05.check_causal_mask_hidden, causal_arange)]:
        with judging(LocalStudent(), offset, []):
            check(answer)


def test_hidden_cases_change_with_the_submission_and_visible_ones_do_not():
    from judge_helpers import sent_tensors

    for check, answer in HIDDEN_CORRECT:
        assert sent_tensors(check, answer, 1) != sent_tensors(check, answer, 2), check.__name__
    assert sent_tensors(ch05.check_masked_softmax, softmax_where, 1) == sent_tensors(
        ch05.check_masked_softmax, softmax_where, 2
    )
