"""Capítulo 1: as verificações aceitam respostas certas escritas de outro jeito e recusam,
com o diagnóstico certo, cada erro conhecido."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from transformer_course import positional as ref
from transformer_course.checks import ch01

SIN_CHECKS = [ch01.check_sinusoidal_encoding, ch01.check_sinusoidal_encoding_hidden]
TOK_CHECKS = [ch01.check_token_embedding, ch01.check_token_embedding_hidden]
SPE_CHECKS = [ch01.check_sinusoidal_positional_encoding, ch01.check_sinusoidal_positional_encoding_hidden]
LPE_CHECKS = [ch01.check_learned_positional_embedding, ch01.check_learned_positional_embedding_hidden]
ROPE_CHECKS = [ch01.check_apply_rope, ch01.check_apply_rope_hidden]
SLOPE_CHECKS = [ch01.check_alibi_slopes, ch01.check_alibi_slopes_hidden]
BIAS_CHECKS = [ch01.check_alibi_bias, ch01.check_alibi_bias_hidden]


def _passes(check, answer, capsys):
    check(answer)
    assert "verificações passaram" in capsys.readouterr().out


def _validate(max_len, d_model):
    if max_len <= 0 or d_model <= 0 or d_model % 2:
        raise ValueError("tamanhos inválidos")


# ================================================================= sinusoidal_encoding


def sin_loops(max_len, d_model):
    _validate(max_len, d_model)
    pe = torch.zeros(max_len, d_model)
    for p in range(max_len):
        for i in range(d_model // 2):
            angle = p / 10000 ** (2 * i / d_model)
            pe[p, 2 * i], pe[p, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return pe


def sin_exp_log_float32(max_len, d_model):
    """O jeito do artigo/seed, todo em float32 (o erro cresce com p, mas fica abaixo da tolerância)."""
    _validate(max_len, d_model)
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def sin_complex(max_len, d_model):
    _validate(max_len, d_model)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] / 10000 ** (
        torch.arange(d_model // 2, dtype=torch.float64) * 2 / d_model
    )
    z = torch.polar(torch.ones_like(angles), angles)  # cos + i sen
    return torch.stack((z.imag, z.real), dim=-1).flatten(1).float()


@pytest.mark.parametrize("fn", [sin_loops, sin_exp_log_float32, sin_complex, ref.sinusoidal_encoding])
@pytest.mark.parametrize("check", SIN_CHECKS)
def test_sinusoidal_correct_variants_pass(fn, check, capsys):
    if check is ch01.check_sinusoidal_encoding_hidden and fn is ref.sinusoidal_encoding:
        pytest.skip("o teste oculto recusa a própria referência do pacote (testado abaixo)")
    _passes(check, fn, capsys)


def make_sin(variant):
    def fn(max_len, d_model):
        if variant != "odd_ok":
            _validate(max_len, d_model)
        pos = torch.arange(max_len, dtype=torch.float64)[:, None] + (1 if variant == "from1" else 0)
        i = torch.arange(0, d_model, 2, dtype=torch.float64)
        exponent = (i / 2 if variant == "i_over_d" else i) / d_model
        angles = pos / 10000**exponent
        sin, cos = angles.sin(), angles.cos()
        if variant == "swap":
            sin, cos = cos, sin
        if variant == "halves":
            out = torch.cat((sin, cos), dim=-1)
        else:
            out = torch.stack((sin, cos), dim=-1).flatten(1)
        if variant == "odd_ok":
            d = 2 * ((d_model + 1) // 2)
            angles = pos / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
            out = torch.stack((angles.sin(), angles.cos()), -1).flatten(1)[:, :d_model]
        if variant == "numpy_float64":
            return out
        if variant == "transposed":
            return out.T.float()
        return out.float()

    return fn


@pytest.mark.parametrize(
    "variant, words",
    [
        ("swap", "seno e cosseno trocados"),
        ("halves", "metades concatenadas"),
        ("i_over_d", "expoente i/d_model"),
        ("from1", "começando em 1"),
        ("odd_ok", "d_model ímpar"),
        ("numpy_float64", "dtype errado"),
        ("transposed", "transposta"),
    ],
)
def test_sinusoidal_mistakes_diagnosed(variant, words):
    with pytest.raises(AssertionError, match=words):
        ch01.check_sinusoidal_encoding(make_sin(variant))


def test_sinusoidal_odd_raising_runtime_error_is_diagnosed():
    """O código do seed com d ímpar levanta RuntimeError (fatias de tamanhos diferentes), não ValueError."""
    with pytest.raises(AssertionError, match="levantou RuntimeError") as info:
        ch01.check_sinusoidal_encoding(_seed_no_validation)
    assert "d_model ímpar não foi recusado com ValueError" in str(info.value)


def _seed_no_validation(max_len, d_model):
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def test_sinusoidal_hidden_rejects_reference():
    with pytest.raises(AssertionError, match="implementação de referência"):
        ch01.check_sinusoidal_encoding_hidden(ref.sinusoidal_encoding)


def test_reference_sinusoidal_matches_loops():
    torch.testing.assert_close(ref.sinusoidal_encoding(300, 32), ch01._sin_table(300, 32).float())
    assert ref.sinusoidal_encoding(7, 4).dtype == torch.float32


# ================================================================= TokenEmbedding


class TokenPow(nn.Module):
    """Sorteio pela mão (randn · D^-1/2) e zero na linha do padding pelo fill_."""

    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
        with torch.no_grad():
            self.embedding.weight.copy_(torch.randn(vocab_size, d_model) * d_model**-0.5)
            if padding_idx is not None:
                self.embedding.weight[padding_idx].fill_(0.0)
        self.scale = d_model**0.5

    def forward(self, token_ids):
        return (
            F.embedding(token_ids, self.embedding.weight, padding_idx=self.embedding.padding_idx) * self.scale
        )


class TokenFloat64Inside(nn.Module):
    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx)
        nn.init.normal_(self.embedding.weight, std=1 / math.sqrt(d_model))
        if padding_idx is not None:
            nn.init.zeros_(self.embedding.weight.data[padding_idx])
        self.d_model = d_model

    def forward(self, token_ids):
        out = self.embedding.weight[token_ids].double() * math.sqrt(self.d_model)
        return out.to(self.embedding.weight.dtype)


@pytest.mark.parametrize("cls", [TokenPow, TokenFloat64Inside])
@pytest.mark.parametrize("check", TOK_CHECKS)
def test_token_correct_variants_pass(cls, check, capsys):
    _passes(check, cls, capsys)


def make_token(scale="sqrt", keep_padding=True, attr="embedding", std="right", rezero=True):
    class Token(nn.Module):
        def __init__(self, vocab_size, d_model, padding_idx=None):
            super().__init__()
            table = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx if keep_padding else None)
            if std != "default":
                nn.init.normal_(table.weight, std=d_model**-0.5 if std == "right" else 1.0 / d_model)
                if rezero and keep_padding and padding_idx is not None:
                    with torch.no_grad():
                        table.weight[padding_idx].zero_()
            setattr(self, attr, table)
            self.factor = {"sqrt": math.sqrt(d_model), "none": 1.0, "d": float(d_model)}[scale]

        def forward(self, token_ids):
            return getattr(self, attr)(token_ids) * self.factor

    return Token


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"scale": "none"}, "SEM a multiplicação por √d_model"),
        ({"scale": "d"}, "multiplicado por d_model em vez de √d_model"),
        ({"keep_padding": False}, "`padding_idx` ignorado"),
        ({"attr": "emb"}, "atributo `embedding`"),
        ({"std": "default"}, "inicialização padrão do `nn.Embedding`, N\\(0, 1\\)"),
        ({"std": "1/d"}, "o desvio saiu 1/d_model"),
        ({"rezero": False}, "zere-a de novo"),
    ],
)
@pytest.mark.parametrize("check", TOK_CHECKS)
def test_token_mistakes_diagnosed(kwargs, words, check):
    with pytest.raises(AssertionError, match=words):
        check(make_token(**kwargs))


def test_token_reference_matches_nn_embedding():
    torch.manual_seed(0)
    module = ref.TokenEmbedding(11, 6, padding_idx=3)
    ids = torch.tensor([[1, 3, 10], [3, 0, 2]])
    torch.testing.assert_close(module(ids), module.embedding.weight[ids] * math.sqrt(6))
    assert bool((module(ids)[ids == 3] == 0).all())
    big = ref.TokenEmbedding(2000, 64, padding_idx=0).embedding.weight.detach()[1:]
    assert abs(big.std().item() - 64**-0.5) < 0.01 * 64**-0.5  # N(0, 1/D), como o tensor2tensor


# ================================================================= SinusoidalPositionalEncoding


class SpeBatchedBuffer(nn.Module):
    """Buffer (1, max_len, D), como no seed, F.dropout explícito e x.shape[-2]."""

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.register_buffer("pe", sin_loops(max_len, d_model).unsqueeze(0))
        self.p = dropout

    def forward(self, x):
        T = x.shape[-2]
        if T > self.pe.shape[1]:
            raise ValueError("sequência maior que max_len")
        return F.dropout(x + self.pe[:, :T], self.p, self.training)


@pytest.mark.parametrize("cls", [SpeBatchedBuffer, ref.SinusoidalPositionalEncoding])
@pytest.mark.parametrize("check", SPE_CHECKS)
def test_spe_correct_variants_pass(cls, check, capsys):
    if check is ch01.check_sinusoidal_positional_encoding_hidden and cls is ref.SinusoidalPositionalEncoding:
        pytest.skip("o teste oculto recusa a referência")
    _passes(check, cls, capsys)


def make_spe(
    combine="add",
    check_len=True,
    table=sin_loops,
    as_param=False,
    plain=False,
    start=0,
    dropout_mode="once",
    inplace=False,
):
    class Spe(nn.Module):
        def __init__(self, d_model, max_len=5000, dropout=0.0):
            super().__init__()
            pe = table(max_len + start, d_model)[start:]
            if as_param:
                self.pe = nn.Parameter(pe)
            elif plain:
                self.pe = pe
            else:
                self.register_buffer("pe", pe)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            T = x.size(1)
            if check_len and T > self.pe.size(0):
                raise ValueError("longa demais")
            rows = self.pe[:T]
            if dropout_mode == "x_only":
                return self.dropout(x) + rows
            if inplace:
                x += rows
                return self.dropout(x)
            out = x * rows if combine == "mul" else x + rows
            out = self.dropout(out)
            return self.dropout(out) if dropout_mode == "twice" else out

    return Spe


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"combine": "mul"}, "MULTIPLICADO"),
        ({"check_len": False}, "mais longa que max_len não foi recusada com ValueError"),
        ({"table": make_sin("swap")}, "seno e cosseno trocados"),
        ({"start": 1}, "começando em 1"),
        ({"as_param": True}, "parâmetro treinável"),
        ({"plain": True}, "Não encontrei o buffer `pe`"),
        ({"inplace": True}, "modificada"),
    ],
)
def test_spe_mistakes_diagnosed(kwargs, words):
    with pytest.raises(AssertionError, match=words):
        ch01.check_sinusoidal_positional_encoding(make_spe(**kwargs))


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"dropout_mode": "twice"}, "DUAS vezes"),
        ({"dropout_mode": "x_only"}, "UMA vez"),
    ],
)
def test_spe_dropout_mistakes_diagnosed_by_hidden(kwargs, words):
    ch01.check_sinusoidal_positional_encoding(make_spe(**kwargs))  # o visível (dropout = 0) passa
    with pytest.raises(AssertionError, match=words):
        ch01.check_sinusoidal_positional_encoding_hidden(make_spe(**kwargs))


class SpeOwnMask(nn.Module):
    """Dropout certo no efeito, mas com a máscara sorteada à mão (não é o sorteio do PyTorch)."""

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.register_buffer("pe", sin_loops(max_len, d_model))
        self.p = dropout

    def forward(self, x):
        out = x + self.pe[: x.size(1)]
        if not self.training or self.p == 0:
            return out
        keep = torch.rand_like(out) >= self.p
        return out * keep / (1 - self.p)


class SpeDropoutAlwaysOn(SpeBatchedBuffer):
    """`F.dropout` sem `training=`: o dropout continua ligado em eval()."""

    def forward(self, x):
        return F.dropout(x + self.pe[:, : x.shape[-2]], self.p)


@pytest.mark.parametrize(
    "cls, words",
    [
        (SpeOwnMask, "sorteado por conta própria"),
        (SpeDropoutAlwaysOn, r"ligado também em `eval\(\)`"),
    ],
)
def test_spe_dropout_is_compared_with_torch_under_the_same_rng(cls, words):
    with pytest.raises(AssertionError, match=words):
        ch01.check_sinusoidal_positional_encoding_hidden(cls)


def test_spe_hidden_refuses_the_reference():
    with pytest.raises(AssertionError, match="implementação de referência"):
        ch01.check_sinusoidal_positional_encoding_hidden(ref.SinusoidalPositionalEncoding)


# ================================================================= LearnedPositionalEmbedding


class LpeWeightSlice(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.position_embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        if x.shape[1] > self.position_embedding.weight.shape[0]:
            raise ValueError("comprimento maior que max_len")
        return x + self.position_embedding.weight[: x.shape[1]].unsqueeze(0)


@pytest.mark.parametrize("check", LPE_CHECKS)
def test_lpe_correct_variant_passes(check, capsys):
    _passes(check, LpeWeightSlice, capsys)


def make_lpe(mode="add", check_len=True, swap=False, start=0):
    class Lpe(nn.Module):
        def __init__(self, max_len, d_model):
            super().__init__()
            self.position_embedding = (
                nn.Embedding(d_model, max_len) if swap else nn.Embedding(max_len, d_model)
            )

        def forward(self, x):
            T = x.size(1)
            if check_len and T > self.position_embedding.num_embeddings:
                raise ValueError("longa demais")
            e = self.position_embedding(torch.arange(start, T + start, device=x.device))
            return {"add": x + e, "mul": x * e, "only": e.expand_as(x)}[mode]

    return Lpe


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"mode": "only"}, "sem somar x"),
        ({"mode": "mul"}, "MULTIPLICADO"),
        ({"check_len": False}, "mais longa que max_len"),
        ({"swap": True}, "argumentos do `nn.Embedding` estão trocados"),
        ({"start": 1}, "começando em 1"),
    ],
)
def test_lpe_mistakes_diagnosed(kwargs, words):
    with pytest.raises(AssertionError, match=words):
        ch01.check_learned_positional_embedding(make_lpe(**kwargs))


# ================================================================= apply_rope


def _rope_checks(x, positions):
    if x.shape[-1] % 2:
        raise ValueError("d ímpar")
    if positions is not None and positions.shape != (x.shape[-2],):
        raise ValueError("positions com comprimento errado")


def rope_complex(x, positions=None, base=10000.0):
    _rope_checks(x, positions)
    T, d = x.shape[-2:]
    pos = torch.arange(T, device=x.device) if positions is None else positions
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    rot = torch.polar(torch.ones(T, d // 2, dtype=torch.float64), pos.double()[:, None] * theta)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(z * rot).flatten(-2).to(x.dtype)


def rope_loops(x, positions=None, base=10000.0):
    _rope_checks(x, positions)
    T, d = x.shape[-2:]
    pos = list(range(T)) if positions is None else positions.tolist()
    cols = []
    for i in range(d // 2):
        theta = base ** (-2 * i / d)
        ang = torch.tensor([p * theta for p in pos], dtype=x.dtype)[:, None].squeeze(-1)
        a, b = x[..., 2 * i], x[..., 2 * i + 1]
        cols += [a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()]
    return torch.stack(cols, dim=-1)


def rope_matrix(x, positions=None, base=10000.0):
    """Uma matriz de rotação D×D por posição, com einsum."""
    _rope_checks(x, positions)
    T, d = x.shape[-2:]
    pos = torch.arange(T) if positions is None else positions
    theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    ang = pos.to(x.dtype)[:, None] * theta  # (T, D/2)
    R = torch.zeros(T, d, d, dtype=x.dtype)
    R[:, 0::2, 0::2] = torch.diag_embed(ang.cos())
    R[:, 0::2, 1::2] = torch.diag_embed(-ang.sin())
    R[:, 1::2, 0::2] = torch.diag_embed(ang.sin())
    R[:, 1::2, 1::2] = torch.diag_embed(ang.cos())
    return torch.einsum("tij,...tj->...ti", R, x)


@pytest.mark.parametrize("fn", [rope_complex, rope_loops, rope_matrix])
@pytest.mark.parametrize("check", ROPE_CHECKS)
def test_rope_correct_variants_pass(fn, check, capsys):
    _passes(check, fn, capsys)


def make_rope(
    direction=1.0,
    half=False,
    ignore_positions=False,
    start=0,
    exponent=2,
    fixed_base=False,
    float32_angles=False,
    check_odd=True,
):
    def fn(x, positions=None, base=10000.0):
        if check_odd:
            _rope_checks(x, positions)
        T, d = x.shape[-2:]
        pos = torch.arange(T) if positions is None or ignore_positions else positions
        b = 10000.0 if fixed_base else base
        dtype = torch.float32 if float32_angles else x.dtype
        theta = b ** (-torch.arange(0, d // 2, dtype=dtype) * exponent / d)
        ang = direction * (pos.to(dtype) + start)[:, None] * theta
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        if half:
            a, bb = x[..., : d // 2], x[..., d // 2 :]
            return torch.cat((a * cos - bb * sin, a * sin + bb * cos), dim=-1)
        a, bb = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * cos - bb * sin, a * sin + bb * cos), dim=-1).flatten(-2)

    return fn


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"direction": -1.0}, "sentido contrário"),
        ({"half": True}, "rotate_half"),
        ({"ignore_positions": True}, "`positions` foi ignorado"),
        ({"start": 1}, "começando em 1"),
        ({"exponent": 1}, "expoente i/d"),
    ],
)
def test_rope_mistakes_diagnosed(kwargs, words):
    with pytest.raises(AssertionError, match=words):
        ch01.check_apply_rope(make_rope(**kwargs))


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"fixed_base": True}, "`base` foi ignorado"),
        ({"float32_angles": True}, "float32"),
        ({"check_odd": False}, "d ímpar"),
    ],
)
def test_rope_hidden_mistakes_diagnosed(kwargs, words):
    with pytest.raises(AssertionError, match=words):
        ch01.check_apply_rope_hidden(make_rope(**kwargs))


def test_rope_reference_matches_complex_oracle_and_half_permutation():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 6, 8, generator=gen, dtype=torch.float64)
    pos = torch.tensor([9, 0, 4, 1, 100, 7])
    torch.testing.assert_close(ref.apply_rope(x, pos), ch01._rope_oracle(x, pos))
    perm = ref.interleaved_to_half(8)
    torch.testing.assert_close(ref.apply_rope(x, pos)[..., perm], ref.apply_rope_half(x[..., perm], pos))
    assert not torch.allclose(ref.apply_rope(x, pos), ref.apply_rope_half(x, pos))


# ================================================================= ALiBi


def slopes_geometric(n_heads):
    if n_heads <= 0:
        raise ValueError("n_heads deve ser positivo")
    ratio = 2 ** (-8 / n_heads)
    return torch.tensor([ratio**h for h in range(1, n_heads + 1)])


def slopes_float64(n_heads):
    """Calculada em float64 e devolvida em float32, como o enunciado pede."""
    if n_heads <= 0:
        raise ValueError("n_heads deve ser positivo")
    return torch.pow(2.0, -8.0 * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads).float()


@pytest.mark.parametrize("fn", [slopes_geometric, slopes_float64])
@pytest.mark.parametrize("check", SLOPE_CHECKS)
def test_slopes_correct_variants_pass(fn, check, capsys):
    _passes(check, fn, capsys)


def make_slopes(off_by_one=False, factor=8.0):
    def fn(n_heads):
        if n_heads <= 0:
            raise ValueError("n_heads deve ser positivo")
        h = torch.arange(0 if off_by_one else 1, n_heads + (0 if off_by_one else 1), dtype=torch.float32)
        return 2.0 ** (-factor * h / n_heads)

    return fn


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"off_by_one": True}, "as inclinações coincidem com as inclinações com h = 0 … H−1"),
        ({"factor": 1.0}, "sem o 8"),
    ],
)
def test_slopes_mistakes_diagnosed(kwargs, words):
    with pytest.raises(AssertionError, match=words):
        ch01.check_alibi_slopes(make_slopes(**kwargs))


@pytest.mark.parametrize("check", SLOPE_CHECKS)
def test_slopes_in_float64_are_refused_because_the_prompt_asks_float32(check):
    def slopes_left_in_float64(n_heads):
        return slopes_float64(n_heads).double()

    with pytest.raises(AssertionError, match="dtype errado nas inclinações") as info:
        check(slopes_left_in_float64)
    assert "float32" in str(info.value)


def bias_loops(n_heads, seq_len):
    if seq_len <= 0:
        raise ValueError("seq_len deve ser positivo")
    slopes = slopes_geometric(n_heads)
    out = torch.empty(n_heads, seq_len, seq_len)
    for h in range(n_heads):
        for i in range(seq_len):
            for j in range(seq_len):
                out[h, i, j] = -slopes[h] * abs(i - j)
    return out


def bias_einsum(n_heads, seq_len):
    if seq_len <= 0:
        raise ValueError("seq_len deve ser positivo")
    pos = torch.arange(seq_len, dtype=torch.float64)
    dist = torch.cdist(pos[:, None], pos[:, None], p=1)  # |i - j|
    return torch.einsum("h,ij->hij", -slopes_float64(n_heads).double(), dist)


@pytest.mark.parametrize("fn", [bias_loops, bias_einsum])
@pytest.mark.parametrize("check", BIAS_CHECKS)
def test_bias_correct_variants_pass(fn, check, capsys):
    _passes(check, fn, capsys)


def make_bias(sign=-1.0, use_abs=True, slopes=None, same_slope=False):
    def fn(n_heads, seq_len):
        if seq_len <= 0:
            raise ValueError("seq_len deve ser positivo")
        m = (slopes or ref.alibi_slopes)(n_heads)
        if same_slope:
            m = torch.full_like(m, m[0].item())
        pos = torch.arange(seq_len, dtype=torch.float32)
        diff = pos[:, None] - pos[None, :]
        dist = diff.abs() if use_abs else diff
        return sign * m[:, None, None] * dist

    return fn


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"sign": 1.0}, "sinal trocado"),
        ({"use_abs": False}, "sem o valor absoluto"),
        ({"slopes": make_slopes(off_by_one=True)}, "uma cabeça fora"),
        ({"slopes": make_slopes(factor=1.0)}, "sem o 8"),
        ({"same_slope": True}, "mesma inclinação"),
    ],
)
def test_bias_mistakes_diagnosed(kwargs, words):
    with pytest.raises(AssertionError, match=words):
        ch01.check_alibi_bias(make_bias(**kwargs))


def _official_get_slopes(n):
    """O ``get_slopes`` do código oficial de ALiBi (Press et al.), transcrito."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _official_get_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("n_heads", [1, 2, 3, 5, 8, 12, 16, 20, 24])
def test_alibi_official_slopes_match_get_slopes(n_heads):
    expected = torch.tensor(_official_get_slopes(n_heads))
    torch.testing.assert_close(ref.alibi_slopes_official(n_heads), expected)
    if math.log2(n_heads).is_integer():  # potência de 2: a fórmula do curso é a oficial
        torch.testing.assert_close(ref.alibi_slopes(n_heads), expected)
    else:
        assert not torch.allclose(ref.alibi_slopes(n_heads), expected)


def test_alibi_reference_matches_loops():
    torch.testing.assert_close(ref.alibi_bias(12, 9), bias_loops(12, 9))
    torch.testing.assert_close(ref.alibi_slopes(8), torch.tensor([2.0**-h for h in range(1, 9)]))


# ================================================================= esboços e referência


def _stub(*args, **kwargs):
    raise NotImplementedError()


class StubModule(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        raise NotImplementedError()


@pytest.mark.parametrize(
    "check, stub",
    [
        (ch01.check_sinusoidal_encoding, _stub),
        (ch01.check_token_embedding, StubModule),
        (ch01.check_sinusoidal_positional_encoding, StubModule),
        (ch01.check_learned_positional_embedding, StubModule),
        (ch01.check_apply_rope, _stub),
        (ch01.check_alibi_slopes, _stub),
        (ch01.check_alibi_bias, _stub),
    ],
)
def test_stub_reports_not_implemented(check, stub):
    with pytest.raises(AssertionError, match="não implementado"):
        check(stub)


@pytest.mark.parametrize(
    "check, answer",
    [
        (ch01.check_token_embedding_hidden, ref.TokenEmbedding),
        (ch01.check_learned_positional_embedding_hidden, ref.LearnedPositionalEmbedding),
        (ch01.check_apply_rope_hidden, ref.apply_rope),
        (ch01.check_alibi_slopes_hidden, ref.alibi_slopes),
        (ch01.check_alibi_bias_hidden, ref.alibi_bias),
    ],
)
def test_hidden_checks_reject_the_reference(check, answer):
    with pytest.raises(AssertionError, match="implementação de referência"):
        check(answer)


@pytest.mark.parametrize(
    "check, answer",
    [
        (ch01.check_token_embedding, ref.TokenEmbedding),
        (ch01.check_sinusoidal_positional_encoding, ref.SinusoidalPositionalEncoding),
        (ch01.check_learned_positional_embedding, ref.LearnedPositionalEmbedding),
        (ch01.check_apply_rope, ref.apply_rope),
        (ch01.check_alibi_slopes, ref.alibi_slopes),
        (ch01.check_alibi_bias, ref.alibi_bias),
    ],
)
def test_visible_checks_accept_the_reference(check, answer, capsys):
    _passes(check, answer, capsys)


def test_checks_leave_global_rng_untouched():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    ch01.check_token_embedding(TokenPow)
    ch01.check_sinusoidal_positional_encoding_hidden(SpeBatchedBuffer)
    torch.testing.assert_close(torch.rand(3), expected)


def test_checks_write_nothing_to_stderr(capsys):
    for check, answer in ((ch01.check_apply_rope, rope_loops), (ch01.check_token_embedding, TokenPow)):
        check(answer)
    assert capsys.readouterr().err == ""


# ================================================================= sementes por entrega (correção)

HIDDEN_CORRECT = [
    (ch01.check_sinusoidal_encoding_hidden, sin_exp_log_float32),
    (ch01.check_token_embedding_hidden, TokenPow),
    (ch01.check_token_embedding_hidden, TokenFloat64Inside),
    (ch01.check_sinusoidal_positional_encoding_hidden, SpeBatchedBuffer),
    (ch01.check_learned_positional_embedding_hidden, LpeWeightSlice),
    (ch01.check_apply_rope_hidden, rope_loops),
    (ch01.check_apply_rope_hidden, rope_matrix),
    (ch01.check_alibi_slopes_hidden, slopes_geometric),
    (ch01.check_alibi_bias_hidden, bias_einsum),
]


@pytest.mark.parametrize("offset", [1, 48_611, 999_999_937])
def test_hidden_checks_accept_correct_variants_with_per_submission_seeds(offset):
    """Na correção, os casos ocultos mudam de entrega para entrega (as sementes são deslocadas);
    uma resposta certa passa com qualquer deslocamento."""
    from transformer_course.probe import LocalStudent, judging

    for check, answer in HIDDEN_CORRECT:
        with judging(LocalStudent(), offset, []):
            check(answer)


def test_hidden_cases_change_with_the_submission_and_visible_ones_do_not():
    from judge_helpers import sent_tensors

    deterministic = {  # casos só de tamanhos, sem nada sorteado
        ch01.check_sinusoidal_encoding_hidden,
        ch01.check_alibi_slopes_hidden,
        ch01.check_alibi_bias_hidden,
    }
    for check, answer in HIDDEN_CORRECT:
        if check not in deterministic:
            assert sent_tensors(check, answer, 1) != sent_tensors(check, answer, 2), check.__name__
    for check, answer in [(ch01.check_token_embedding, TokenPow), (ch01.check_apply_rope, rope_loops)]:
        assert sent_tensors(check, answer, 1) == sent_tensors(check, answer, 2), check.__name__
