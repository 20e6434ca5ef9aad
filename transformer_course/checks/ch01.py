"""Verificações do capítulo 1: embeddings de tokens e codificações de posição.

Oráculos independentes do código do aluno:

- senoidal: a fórmula escrita com laços e ``math.sin``/``math.cos`` em float64;
- ``TokenEmbedding`` e ``LearnedPositionalEmbedding``: a própria tabela do ``nn.Embedding`` do
  aluno indexada à mão (``weight[ids]``), e o comportamento de ``padding_idx`` do ``nn.Embedding``;
  a inicialização N(0, 1/d_model) do ``TokenEmbedding`` pela média e pelo desvio de uma tabela
  grande (64 mil valores: o desvio medido erra menos de 1 % e a tolerância é de 10 %);
- RoPE: cada par como número complexo, multiplicado por e^{i·p·θ} (``torch.polar``);
- ALiBi: a fórmula com laços sobre as cabeças e as posições.

Cada erro conhecido é calculado nas mesmas entradas, para que a mensagem possa nomeá-lo.
Construir os módulos do aluno consome o gerador global (inicialização do ``nn.Embedding``,
dropout): fazemos isso dentro de ``torch.random.fork_rng``, com semente própria, para que a
verificação seja determinística e não mexa no estado aleatório do notebook.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from .. import positional as reference
from ..runtime import seeded_generator
from ..feedback import (
    CheckFailure,
    Mistake,
    call,
    describe,
    expect,
    expect_close,
    expect_not_reference,
    expect_raises,
    expect_unchanged,
    passed,
    snapshot,
)

__all__ = [
    "check_alibi_bias",
    "check_alibi_bias_hidden",
    "check_alibi_slopes",
    "check_alibi_slopes_hidden",
    "check_apply_rope",
    "check_apply_rope_hidden",
    "check_learned_positional_embedding",
    "check_learned_positional_embedding_hidden",
    "check_sinusoidal_encoding",
    "check_sinusoidal_encoding_hidden",
    "check_sinusoidal_positional_encoding",
    "check_sinusoidal_positional_encoding_hidden",
    "check_token_embedding",
    "check_token_embedding_hidden",
]

SIN = "sinusoidal_encoding"
TOK = "TokenEmbedding"
SPE = "SinusoidalPositionalEncoding"
LPE = "LearnedPositionalEmbedding"
ROPE = "apply_rope"
SLOPES = "alibi_slopes"
BIAS = "alibi_bias"

# A tabela senoidal do aluno pode ser calculada em float32 (o erro de arredondamento do
# ângulo cresce com p): toleramos 1e-4, muito abaixo de qualquer erro de fórmula (ordem 1).
SIN_TOL = {"rtol": 1e-4, "atol": 1e-4}

TOO_LONG = (
    "sequência mais longa que max_len não foi recusada com ValueError: compare o comprimento "
    "de x com max_len e levante `ValueError` com uma mensagem em português."
)


REZERO = (
    "a tabela foi sorteada de novo depois de criada: o `nn.init.normal_` sobrescreve a linha do "
    "padding — zere-a de novo, dentro de `with torch.no_grad():`."
)


# ---------------------------------------------------------------- utilidades


@contextmanager
def _private_rng(seed: int) -> Iterator[None]:
    """Gerador global com semente própria, restaurado na saída (não mexe no notebook)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _expect_value_error(fn: Callable, name: str, tried: str, hint: str, *args, **kwargs) -> None:
    """Como ``expect_raises(..., ValueError)``, mas com o diagnóstico do erro conhecido."""
    __tracebackhide__ = True
    try:
        expect_raises(fn, ValueError, name, tried, *args, **kwargs)
    except CheckFailure as exc:
        message = str(exc)
        if "não implementou" in message or "Diagnóstico" in message or "sem mensagem" in message:
            raise
        raise CheckFailure(f"{message}\nDiagnóstico provável: {hint}") from None


_not_reference = expect_not_reference


def _float(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# ---------------------------------------------------------------- senoidal: oráculo e erros


def _sin_table(max_len: int, d_model: int, variant: str = "certo") -> torch.Tensor:
    """A tabela senoidal com laços (float64). ``variant`` escreve um erro conhecido."""
    table = [[0.0] * d_model for _ in range(max_len)]
    half = d_model // 2
    for p in range(max_len):
        pos = p + 1 if variant == "desde 1" else p
        for j in range(d_model):
            i = j // 2
            if variant == "metades":
                i = j % half
            exponent = 2 * i / d_model
            if variant == "i/d":
                exponent = i / d_model
            elif variant == "j/d":
                exponent = j / d_model
            angle = pos / 10000.0**exponent
            use_sin = (j % 2 == 0) if variant != "metades" else (j < half)
            if variant == "trocado":
                use_sin = not use_sin
            table[p][j] = math.sin(angle) if use_sin else math.cos(angle)
    return torch.tensor(table, dtype=torch.float64).reshape(max_len, d_model)


SIN_MISTAKES = {
    "trocado": "seno e cosseno trocados (cosseno nas colunas pares, seno nas ímpares)",
    "metades": "as metades concatenadas [senos | cossenos] em vez de pares intercalados "
    "(seno na coluna 2i, cosseno na 2i+1)",
    "i/d": "o expoente i/d_model em vez de 2i/d_model",
    "j/d": "o expoente com o índice da coluna j (2i+1 no cosseno) em vez de 2i para o par todo",
    "desde 1": "as posições começando em 1 em vez de 0",
}


def _sin_mistakes(max_len: int, d_model: int, dtype: torch.dtype) -> list[Mistake]:
    mistakes = [
        Mistake(label, _sin_table(max_len, d_model, key).to(dtype)) for key, label in SIN_MISTAKES.items()
    ]
    right = _sin_table(max_len, d_model).to(dtype)
    mistakes.append(Mistake("a tabela transposta", right.T.contiguous()))
    return mistakes


def _sin_shape_hint(result, max_len: int, d_model: int) -> str | None:
    if isinstance(result, torch.Tensor):
        if tuple(result.shape) == (d_model, max_len):
            return "a tabela saiu transposta: linhas são posições, colunas são dimensões."
        if result.dim() == 3 and result.size(0) == 1:
            return "a tabela tem um eixo de lote a mais: devolva (max_len, d_model)."
    return None


def _run_sin(fn: Callable, max_len: int, d_model: int) -> torch.Tensor:
    __tracebackhide__ = True
    tried = f"{SIN}(max_len={max_len}, d_model={d_model})"
    result = call(fn, SIN, tried, max_len, d_model)
    expect(
        isinstance(result, torch.Tensor),
        SIN,
        tried,
        f"Esperava um tensor do PyTorch; veio {describe(result)}.",
        "se você usou NumPy, converta com `torch.from_numpy(...).float()` — ou use só o PyTorch.",
    )
    expect(
        tuple(result.shape) == (max_len, d_model),
        SIN,
        tried,
        f"Forma errada: esperada {(max_len, d_model)}, obtida {tuple(result.shape)}.",
        _sin_shape_hint(result, max_len, d_model),
    )
    default = torch.get_default_dtype()
    expect(
        result.dtype == default,
        SIN,
        tried,
        f"dtype errado: esperado {_float(default)} (o dtype padrão do PyTorch), "
        f"obtido {_float(result.dtype)}.",
        "crie as posições com `torch.arange(..., dtype=torch.float32)` ou converta no fim com `.float()`.",
    )
    expected = _sin_table(max_len, d_model).to(default)
    expect_close(
        result, expected, SIN, tried, "a tabela", _sin_mistakes(max_len, d_model, default), **SIN_TOL
    )
    return result


def check_sinusoidal_encoding(fn: Callable) -> None:
    """Testes visíveis de ``sinusoidal_encoding``."""
    __tracebackhide__ = True
    n = 0
    table = _run_sin(fn, 4, 6)
    n += 1
    expect(
        bool((table[0, 0::2] == 0).all() and (table[0, 1::2] == 1).all()),
        SIN,
        "posição 0",
        "Na posição 0 as colunas pares (seno) valem 0 e as ímpares (cosseno) valem 1; "
        f"veio {table[0].tolist()}.",
    )
    n += 1
    _run_sin(fn, 50, 16)
    n += 1
    _expect_value_error(
        fn,
        SIN,
        f"{SIN}(max_len=10, d_model=5)",
        "d_model ímpar não foi recusado com ValueError: os pares seno/cosseno exigem d_model par.",
        10,
        5,
    )
    n += 1
    passed(SIN, n)


def check_sinusoidal_encoding_hidden(fn: Callable) -> None:
    """Testes ocultos: tamanhos extremos, tabela longa, valores inválidos, limites [−1, 1]."""
    __tracebackhide__ = True
    n = 0
    _not_reference(fn, reference.sinusoidal_encoding, SIN)
    n += 1
    table = _run_sin(fn, 1, 2)
    n += 1
    table = _run_sin(fn, 200, 64)
    expect(
        bool(table.abs().max() <= 1.0 + 1e-6),
        SIN,
        f"{SIN}(200, 64)",
        "Os valores deveriam estar em [−1, 1] (são senos e cossenos).",
    )
    n += 1
    for args, hint in (
        ((10, 7), "d_model ímpar não foi recusado com ValueError."),
        ((10, 0), "d_model = 0 deveria levantar ValueError."),
        ((10, -4), "d_model negativo deveria levantar ValueError."),
        ((0, 8), "max_len = 0 deveria levantar ValueError."),
        ((-3, 8), "max_len negativo deveria levantar ValueError."),
    ):
        _expect_value_error(fn, SIN, f"{SIN}(max_len={args[0]}, d_model={args[1]})", hint, *args)
        n += 1
    passed(SIN, n, "(testes ocultos)")


# ---------------------------------------------------------------- TokenEmbedding


def _build(cls: Callable, name: str, tried: str, *args, seed: int = 0, **kwargs):
    __tracebackhide__ = True
    with _private_rng(seed):
        module = call(cls, name, tried, *args, **kwargs)
    expect(
        isinstance(module, nn.Module),
        name,
        tried,
        f"Esperava um `nn.Module`; veio {describe(module)}.",
        f"`{name}` deve herdar de `nn.Module` e chamar `super().__init__()`.",
    )
    return module


def _embedding_attr(module, attr: str, name: str, tried: str, num: int, dim: int) -> nn.Embedding:
    __tracebackhide__ = True
    emb = getattr(module, attr, None)
    expect(
        isinstance(emb, nn.Embedding),
        name,
        tried,
        f"O módulo deveria ter o atributo `{attr}`, um `nn.Embedding`; encontrei {describe(emb)}.",
        f"crie `self.{attr} = nn.Embedding(...)` no `__init__` (o nome do atributo é avaliado).",
    )
    if (emb.num_embeddings, emb.embedding_dim) == (dim, num) and num != dim:
        hint = (
            "os argumentos do `nn.Embedding` estão trocados: primeiro o número de linhas, depois a largura."
        )
    else:
        hint = None
    expect(
        (emb.num_embeddings, emb.embedding_dim) == (num, dim),
        name,
        tried,
        f"`{attr}` deveria ser `nn.Embedding({num}, {dim})`; é "
        f"`nn.Embedding({emb.num_embeddings}, {emb.embedding_dim})`.",
        hint,
    )
    return emb


def _token_ids(seed: int, shape: tuple[int, ...], vocab: int, pad: int | None) -> torch.Tensor:
    ids = torch.randint(0, vocab, shape, generator=seeded_generator(seed))
    if pad is not None:
        ids[..., -2:] = pad  # as duas últimas posições são padding
    return ids


def _run_token(
    cls: Callable,
    vocab: int,
    d_model: int,
    padding_idx: int | None,
    shape,
    seed: int,
    dtype: torch.dtype = torch.float32,
    pass_padding: bool = True,
) -> nn.Module:
    __tracebackhide__ = True
    kwargs = {"padding_idx": padding_idx} if pass_padding else {}
    args_txt = f"vocab_size={vocab}, d_model={d_model}" + (
        f", padding_idx={padding_idx}" if pass_padding else ""
    )
    tried = f"{TOK}({args_txt}), token_ids {tuple(shape)}" + (
        "" if dtype == torch.float32 else f", módulo {_float(dtype)}"
    )
    module = _build(cls, TOK, tried, vocab, d_model, seed=seed, **kwargs)
    emb = _embedding_attr(module, "embedding", TOK, tried, vocab, d_model)
    expect(
        emb.padding_idx == padding_idx,
        TOK,
        tried,
        f"`embedding.padding_idx` deveria ser {padding_idx}; é {emb.padding_idx}.",
        "`padding_idx` ignorado: passe-o para o `nn.Embedding` (ele zera a linha do padding e não a treina)."
        if padding_idx is not None
        else None,
    )
    module = module.to(dtype)
    ids = _token_ids(seed, shape, vocab, padding_idx)
    before = snapshot(ids)
    out = call(module, TOK, tried, ids)
    expect_unchanged(before, [ids], ["token_ids"], TOK, tried)
    table = emb.weight.detach()
    looked_up = table[ids]  # (B, T) -> (B, T, D)
    expected = looked_up * math.sqrt(d_model)
    mistakes = [
        Mistake("o embedding SEM a multiplicação por √d_model", looked_up),
        Mistake("o embedding multiplicado por d_model em vez de √d_model", looked_up * d_model),
        Mistake("o embedding DIVIDIDO por √d_model em vez de multiplicado", looked_up / math.sqrt(d_model)),
        Mistake("o embedding multiplicado por √vocab_size em vez de √d_model", looked_up * math.sqrt(vocab)),
    ]
    expect_close(out, expected, TOK, tried, "a saída", mistakes)
    if padding_idx is not None:
        pads = out.detach()[ids == padding_idx]
        expect(
            bool((pads == 0).all()),
            TOK,
            tried,
            "As posições de padding deveriam sair como vetores nulos.",
            REZERO if emb.padding_idx == padding_idx else "`padding_idx` ignorado.",
        )
    return module


def _run_token_init(cls: Callable, vocab: int, d_model: int, padding_idx: int | None, seed: int) -> None:
    """A tabela sorteada com desvio 1/√d_model (média 0) e a linha do padding nula."""
    __tracebackhide__ = True
    tried = f"{TOK}(vocab_size={vocab}, d_model={d_model}, padding_idx={padding_idx}): a tabela recém-criada"
    module = _build(cls, TOK, tried, vocab, d_model, padding_idx=padding_idx, seed=seed)
    emb = _embedding_attr(module, "embedding", TOK, tried, vocab, d_model)
    table = emb.weight.detach().to(torch.float64)
    if padding_idx is not None:
        row = table[padding_idx]
        expect(
            bool((row == 0).all()),
            TOK,
            tried,
            f"A linha {padding_idx} (a do padding) deveria começar em zero; "
            f"tem norma {row.norm().item():.3g}.",
            REZERO
            if emb.padding_idx == padding_idx
            else "`padding_idx` ignorado: passe-o para o `nn.Embedding`.",
        )
        keep = torch.ones(vocab, dtype=torch.bool)
        keep[padding_idx] = False
        table = table[keep]
    target = d_model**-0.5
    std, mean = table.std().item(), table.mean().item()
    if abs(std - 1.0) < 0.1:
        hint = (
            "é a inicialização padrão do `nn.Embedding`, N(0, 1): sorteie a tabela de novo com "
            "`nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model ** -0.5)`."
        )
    elif abs(std - 1.0 / d_model) < 0.1 / d_model:
        hint = "o desvio saiu 1/d_model; o pedido é 1/√d_model (variância 1/d_model)."
    else:
        hint = "sorteie com `nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model ** -0.5)`."
    expect(
        0.9 * target < std < 1.1 * target and abs(mean) < 0.1 * target,
        TOK,
        tried,
        f"A tabela deveria ser sorteada de N(0, 1/d_model): média 0 e desvio 1/√{d_model} = {target:.4f}; "
        f"a sua tem média {mean:.4f} e desvio {std:.4f}.",
        hint,
    )


def check_token_embedding(cls: Callable) -> None:
    """Testes visíveis de ``TokenEmbedding``."""
    __tracebackhide__ = True
    n = 0
    _run_token(cls, 10, 4, None, (2, 3), seed=0, pass_padding=False)
    n += 1
    _run_token_init(cls, 1000, 64, 0, seed=6)
    n += 1
    _run_token(cls, 20, 16, 0, (2, 6), seed=1)
    n += 1
    _run_token(cls, 20, 8, 0, (3, 5), seed=2, dtype=torch.float64)
    n += 1
    passed(TOK, n)


def check_token_embedding_hidden(cls: Callable) -> None:
    """Testes ocultos: padding_idx ≠ 0, gradiente nulo na linha de padding, d_model ímpar, inicialização."""
    __tracebackhide__ = True
    n = 0
    _not_reference(cls, reference.TokenEmbedding, TOK)
    n += 1
    module = _run_token(cls, 30, 9, 29, (2, 7), seed=3)
    n += 1
    # gradiente: a linha do padding não recebe gradiente; as usadas, sim
    ids = _token_ids(4, (2, 7), 30, 29)
    tried = f"{TOK}(30, 9, padding_idx=29): gradiente de (saída²).sum()"
    module.zero_grad()
    out = call(module, TOK, tried, ids)
    expect(
        isinstance(out, torch.Tensor) and out.requires_grad,
        TOK,
        tried,
        "A saída não está ligada ao grafo de gradientes (não use `.detach()` nem `torch.no_grad()`).",
    )
    out.pow(2).sum().backward()
    grad = module.embedding.weight.grad
    expect(
        grad is not None and bool((grad[29] == 0).all()),
        TOK,
        tried,
        "A linha do padding recebeu gradiente.",
        "`padding_idx` ignorado.",
    )
    used = torch.unique(ids[ids != 29])
    expect(
        bool((grad[used].abs().sum(-1) > 0).all()),
        TOK,
        tried,
        "Linhas de tokens usados não receberam gradiente.",
    )
    n += 1
    _run_token(cls, 5, 2, None, (1, 1), seed=5)
    n += 1
    _run_token_init(cls, 500, 36, 499, seed=7)
    n += 1
    passed(TOK, n, "(testes ocultos)")


# ---------------------------------------------------------------- SinusoidalPositionalEncoding


def _pe_buffer(module, name: str, tried: str, max_len: int, d_model: int) -> torch.Tensor:
    __tracebackhide__ = True
    buffers, params = dict(module.named_buffers()), dict(module.named_parameters())
    expect(
        "pe" not in params,
        name,
        tried,
        "`pe` é um parâmetro treinável; a tabela senoidal é fixa.",
        'registre-a com `self.register_buffer("pe", tabela)` em vez de `nn.Parameter`.',
    )
    expect(
        "pe" in buffers,
        name,
        tried,
        f"Não encontrei o buffer `pe` (buffers do módulo: {sorted(buffers) or 'nenhum'}).",
        'registre a tabela com `self.register_buffer("pe", tabela)`: ela vai junto com `.to(device)`.',
    )
    pe = buffers["pe"]
    default = torch.get_default_dtype()
    expect(
        pe.dtype == default,
        name,
        tried,
        f"O buffer `pe` deveria ter o dtype padrão ({_float(default)}); tem {_float(pe.dtype)}.",
        "construa a tabela só com o PyTorch (sem NumPy), ou converta com `.float()`.",
    )
    expect(
        pe.numel() == max_len * d_model,
        name,
        tried,
        f"O buffer `pe` deveria ter {max_len}×{d_model} elementos; tem forma {tuple(pe.shape)}.",
    )
    table = pe.detach().reshape(max_len, d_model)
    expected = _sin_table(max_len, d_model).to(table.dtype)
    expect_close(
        table, expected, name, tried, "o buffer `pe`", _sin_mistakes(max_len, d_model, table.dtype), **SIN_TOL
    )
    return table


def _positional_forward_mistakes(x: torch.Tensor, table: torch.Tensor, what: str) -> list[Mistake]:
    seq_len = x.size(-2)
    rows = table[:seq_len].to(torch.promote_types(x.dtype, table.dtype))
    mistakes = [
        Mistake(f"x MULTIPLICADO {what} em vez de somado", x * rows),
        Mistake(f"{what} sozinha, sem somar x", rows.expand_as(x)),
        Mistake(f"x sem {what} (nada foi somado)", x),
    ]
    if table.size(0) > seq_len:
        mistakes.append(
            Mistake("as posições começando em 1 em vez de 0", x + table[1 : seq_len + 1].to(rows.dtype))
        )
    return mistakes


def _run_spe_forward(module, x: torch.Tensor, table: torch.Tensor, tried: str, name: str = SPE):
    __tracebackhide__ = True
    before = snapshot(x)
    out = call(module, name, tried, x)
    expect_unchanged(before, [x], ["x"], name, tried)
    expected = x + table[: x.size(-2)].to(x.dtype)
    expect_close(
        out, expected, name, tried, "a saída", _positional_forward_mistakes(x, table, "pela codificação")
    )
    return out


def _x(seed: int, shape, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=seeded_generator(seed), dtype=dtype)


def check_sinusoidal_positional_encoding(cls: Callable) -> None:
    """Testes visíveis de ``SinusoidalPositionalEncoding``."""
    __tracebackhide__ = True
    n = 0
    tried = f"{SPE}(d_model=16, max_len=40)"
    module = _build(cls, SPE, tried, 16, max_len=40)
    table = _pe_buffer(module, SPE, tried, 40, 16)
    n += 1
    module.eval()
    _run_spe_forward(module, _x(0, (2, 10, 16)), table, f"{tried}, x (2, 10, 16)")
    n += 1
    out = _run_spe_forward(module, _x(1, (3, 7, 16), torch.float64), table, f"{tried}, x (3, 7, 16) float64")
    expect(
        out.dtype == torch.float64,
        SPE,
        tried,
        f"x float64 deveria dar saída float64; veio {_float(out.dtype)}.",
    )
    n += 1
    _expect_value_error(
        module, SPE, f"{tried}, x (1, 41, 16): mais longa que max_len", TOO_LONG, _x(2, (1, 41, 16))
    )
    n += 1
    passed(SPE, n)


def check_sinusoidal_positional_encoding_hidden(cls: Callable) -> None:
    """Testes ocultos: dropout (uma vez, depois da soma), T = max_len, .to(float64), gradiente."""
    __tracebackhide__ = True
    n = 0
    _not_reference(cls, reference.SinusoidalPositionalEncoding, SPE)
    n += 1
    tried = f"{SPE}(d_model=8, max_len=12)"
    module = _build(cls, SPE, tried, 8, max_len=12).eval()
    table = _pe_buffer(module, SPE, tried, 12, 8)
    _run_spe_forward(module, _x(10, (2, 12, 8)), table, f"{tried}, x (2, 12, 8): T = max_len")
    n += 1
    # .to(float64) converte o buffer junto
    module64 = module.to(torch.float64)
    x64 = _x(11, (1, 5, 8), torch.float64)
    out = call(module64, SPE, f"{tried}.to(torch.float64)", x64)
    expect(
        isinstance(out, torch.Tensor) and out.dtype == torch.float64,
        SPE,
        f"{tried}.to(torch.float64)",
        f"Depois de `.to(torch.float64)`, a saída deveria ser float64; veio {describe(out)}.",
        "`pe` precisa ser um buffer registrado para acompanhar `.to(...)`.",
    )
    n += 1
    # dropout: uma vez só, depois da soma; desligado em eval()
    p = 0.5
    tried = f"{SPE}(d_model=16, max_len=20, dropout={p}) em modo de treino"
    module = _build(cls, SPE, tried, 16, max_len=20, dropout=p)
    table = _pe_buffer(module, SPE, tried, 20, 16)
    x = _x(12, (4, 20, 16))
    module.train()
    with _private_rng(13):
        out = call(module, SPE, tried, x)
    expect(isinstance(out, torch.Tensor) and out.shape == x.shape, SPE, tried, f"Veio {describe(out)}.")
    kept = out.detach() != 0
    frac = kept.float().mean().item()
    expect(
        0.15 < frac < 0.85,
        SPE,
        tried,
        f"Com dropout = {p}, cerca de metade dos valores deveria ser zerada; zerados: {1 - frac:.0%}.",
        "o dropout deve ser aplicado UMA vez, à soma x + PE (não só a x); confira também se o argumento "
        "`dropout` foi usado.",
    )
    full = x + table[:20]
    expected = torch.where(kept, full / (1 - p), torch.zeros_like(full))
    expect_close(
        out,
        expected,
        SPE,
        tried,
        "a saída em modo de treino",
        [
            Mistake(
                "o dropout aplicado DUAS vezes (valores divididos por (1 − p)²)",
                torch.where(kept, full / (1 - p) ** 2, torch.zeros_like(full)),
            ),
            Mistake(
                "os valores sem a reescala 1/(1 − p) do dropout",
                torch.where(kept, full, torch.zeros_like(full)),
            ),
        ],
    )
    n += 1
    module.eval()
    _run_spe_forward(module, x, table, f"{SPE}(..., dropout={p}) em modo eval()")
    n += 1
    # gradiente chega a x; `pe` não é parâmetro
    xg = x.clone().requires_grad_()
    out = call(module, SPE, "gradiente", xg)
    expect(
        isinstance(out, torch.Tensor) and out.requires_grad,
        SPE,
        "gradiente",
        "A saída não está ligada ao grafo de gradientes de x.",
    )
    out.sum().backward()
    expect_close(xg.grad, torch.ones_like(x), SPE, "gradiente de saída.sum() em relação a x", "o gradiente")
    n += 1
    _expect_value_error(
        cls, SPE, f"{SPE}(d_model=7)", "d_model ímpar não foi recusado com ValueError.", 7, max_len=10
    )
    n += 1
    passed(SPE, n, "(testes ocultos)")


# ---------------------------------------------------------------- LearnedPositionalEmbedding


def _run_lpe(module, x: torch.Tensor, tried: str) -> torch.Tensor:
    __tracebackhide__ = True
    before = snapshot(x)
    out = call(module, LPE, tried, x)
    expect_unchanged(before, [x], ["x"], LPE, tried)
    table = module.position_embedding.weight.detach()
    expected = x + table[: x.size(-2)].to(x.dtype)
    mistakes = _positional_forward_mistakes(x, table, "pelo embedding de posição")
    mistakes[1] = Mistake("o embedding aprendido devolvido sem somar x", table[: x.size(-2)].expand_as(x))
    expect_close(out, expected, LPE, tried, "a saída", mistakes)
    return out


def check_learned_positional_embedding(cls: Callable) -> None:
    """Testes visíveis de ``LearnedPositionalEmbedding``."""
    __tracebackhide__ = True
    n = 0
    tried = f"{LPE}(max_len=12, d_model=8)"
    module = _build(cls, LPE, tried, 12, 8)
    _embedding_attr(module, "position_embedding", LPE, tried, 12, 8)
    n += 1
    _run_lpe(module, _x(20, (2, 7, 8)), f"{tried}, x (2, 7, 8)")
    n += 1
    out = _run_lpe(
        module.double(), _x(21, (3, 5, 8), torch.float64), f"{tried}.double(), x (3, 5, 8) float64"
    )
    expect(out.dtype == torch.float64, LPE, tried, f"Esperava saída float64; veio {_float(out.dtype)}.")
    n += 1
    _expect_value_error(
        module,
        LPE,
        f"{tried}, x (1, 13, 8): mais longa que max_len",
        TOO_LONG,
        _x(22, (1, 13, 8), torch.float64),
    )
    n += 1
    passed(LPE, n)


def check_learned_positional_embedding_hidden(cls: Callable) -> None:
    """Testes ocultos: T = max_len, gradientes só nas linhas usadas, número de parâmetros."""
    __tracebackhide__ = True
    n = 0
    _not_reference(cls, reference.LearnedPositionalEmbedding, LPE)
    n += 1
    tried = f"{LPE}(max_len=6, d_model=5)"
    module = _build(cls, LPE, tried, 6, 5, seed=1)
    _embedding_attr(module, "position_embedding", LPE, tried, 6, 5)
    n_params = sum(p.numel() for p in module.parameters())
    expect(n_params == 30, LPE, tried, f"O módulo deveria ter 6·5 = 30 parâmetros; tem {n_params}.")
    n += 1
    _run_lpe(module, _x(23, (2, 6, 5)), f"{tried}, x (2, 6, 5): T = max_len")
    n += 1
    x = _x(24, (3, 4, 5))
    tried_g = f"{tried}, x (3, 4, 5): gradiente de saída.sum()"
    out = call(module, LPE, tried_g, x)
    expect(
        isinstance(out, torch.Tensor) and out.requires_grad,
        LPE,
        tried_g,
        "A saída não está ligada ao grafo de gradientes da tabela de posições.",
    )
    out.sum().backward()
    expected = torch.zeros(6, 5)
    expected[:4] = 3.0  # cada posição usada recebe 1 por exemplo do lote
    expect_close(
        module.position_embedding.weight.grad, expected, LPE, tried_g, "o gradiente da tabela de posições"
    )
    n += 1
    _expect_value_error(module, LPE, f"{tried}, x (2, 9, 5)", TOO_LONG, _x(25, (2, 9, 5)))
    n += 1
    passed(LPE, n, "(testes ocultos)")


# ---------------------------------------------------------------- RoPE


def _rope_oracle(
    x: torch.Tensor, positions: torch.Tensor | None, base: float = 10000.0, variant: str = "certo"
) -> torch.Tensor:
    """RoPE com números complexos: par (a, b) ↦ (a + ib)·e^{i·p·θ}. ``variant`` escreve um erro."""
    seq_len, d = x.size(-2), x.size(-1)
    pos = torch.arange(seq_len) if positions is None or variant == "ignora" else positions.cpu()
    pos = pos.to(torch.float64) + (1.0 if variant == "desde 1" else 0.0)
    i = torch.arange(d // 2, dtype=torch.float64)
    exponent = (i if variant == "i/d" else 2 * i) / d
    theta = (10000.0 if variant == "base fixa" else base) ** (-exponent)
    if variant == "float32":
        theta = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
        angles = (pos.to(torch.float32)[:, None] * theta).to(torch.float64)
    else:
        angles = pos[:, None] * theta  # (T, D/2)
    if variant == "reverso":
        angles = -angles
    rotation = torch.polar(torch.ones_like(angles), angles)  # e^{i·ângulo}, (T, D/2)
    xd = x.detach().cpu().to(torch.float64)
    if variant == "metades":
        z = torch.complex(xd[..., : d // 2], xd[..., d // 2 :])
        w = z * rotation
        out = torch.cat((w.real, w.imag), dim=-1)
    else:
        z = torch.view_as_complex(xd.reshape(*xd.shape[:-1], d // 2, 2).contiguous())
        out = torch.view_as_real(z * rotation).flatten(-2)
    return out.to(dtype=x.dtype, device=x.device)


ROPE_MISTAKES = {
    "reverso": "a rotação no sentido contrário (ângulo −p·θ em vez de +p·θ)",
    "metades": 'a convenção das metades ("rotate_half": pares x[i], x[i + d/2]) em vez de pares '
    "intercalados (x[2i], x[2i+1])",
    "ignora": "as posições padrão 0 … T−1: o argumento `positions` foi ignorado",
    "desde 1": "as posições começando em 1 em vez de 0",
    "i/d": "o expoente i/d em vez de 2i/d nas frequências θ_i",
    "base fixa": "a base 10000 fixa: o argumento `base` foi ignorado",
    "float32": "os ângulos calculados em float32 para uma entrada float64 (calcule θ e p·θ no dtype de x)",
}


def _run_rope(
    fn: Callable,
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    base: float | None = None,
    extra: str = "",
) -> torch.Tensor:
    __tracebackhide__ = True
    pos_txt = "positions padrão" if positions is None else f"positions={positions.tolist()}"
    base_txt = "" if base is None else f", base={base}"
    tried = f"x {tuple(x.shape)} {_float(x.dtype)}, {pos_txt}{base_txt}{extra}"
    args = (x,) if positions is None and base is None else (x, positions)
    kwargs = {} if base is None else {"base": base}
    before = snapshot(x) + ([] if positions is None else snapshot(positions))
    out = call(fn, ROPE, tried, *args, **kwargs)
    expect_unchanged(
        before,
        [x] + ([] if positions is None else [positions]),
        ["x"] + ([] if positions is None else ["positions"]),
        ROPE,
        tried,
    )
    b = 10000.0 if base is None else base
    expected = _rope_oracle(x, positions, b)
    mistakes = []
    for key, label in ROPE_MISTAKES.items():
        if key == "ignora" and positions is None:
            continue
        if key == "base fixa" and b == 10000.0:
            continue
        if key == "float32":
            continue  # diagnosticado abaixo, pelo tamanho do erro
        mistakes.append(Mistake(label, _rope_oracle(x, positions, b, key)))
    if x.dtype == torch.float64 and isinstance(out, torch.Tensor) and out.shape == expected.shape:
        # Ângulos em float32 erram por ~1e-7·p: quase certo, mas longe da precisão de float64.
        delta = (out.detach().to(torch.float64) - expected).abs().max().item()
        expect(
            not 1e-6 < delta < 1e-2,
            ROPE,
            tried,
            f"Valores quase certos, mas com erro de até {delta:.2g}; em float64 o esperado é ~1e-12.",
            ROPE_MISTAKES["float32"],
        )
    tol = {"rtol": 1e-4, "atol": 1e-4} if x.dtype == torch.float32 else {}
    expect_close(out, expected, ROPE, tried, "a saída", mistakes, **tol)
    return out


def check_apply_rope(fn: Callable) -> None:
    """Testes visíveis de ``apply_rope``."""
    __tracebackhide__ = True
    n = 0
    x = torch.tensor([[[1.0, 0.0, 1.0, 0.0]] * 3])  # (1, 3, 4): cada par começa em (1, 0)
    out = _run_rope(fn, x, extra=" (pares começando em (1, 0))")
    n += 1
    norms = out.detach().reshape(1, 3, 2, 2).norm(dim=-1)
    expect(
        torch.allclose(norms, torch.ones_like(norms), atol=1e-5),
        ROPE,
        "normas dos pares",
        f"Uma rotação preserva a norma de cada par; as normas ficaram {norms.flatten().tolist()}.",
    )
    n += 1
    _run_rope(fn, _x(30, (2, 5, 8)))
    n += 1
    _run_rope(fn, _x(31, (3, 4, 6)), torch.tensor([5, 0, 2, 9]))
    n += 1
    _run_rope(
        fn, _x(32, (2, 2, 5, 8), torch.float64), torch.tensor([7, 3, 1, 0, 4]), extra=" (4-D: lote e cabeças)"
    )
    n += 1
    passed(ROPE, n)


def check_apply_rope_hidden(fn: Callable) -> None:
    """Testes ocultos: base, posições grandes em float64, 2-D, gradiente, propriedade relativa, erros."""
    __tracebackhide__ = True
    n = 0
    _not_reference(fn, reference.apply_rope, ROPE)
    _not_reference(fn, reference.apply_rope_half, ROPE)
    n += 1
    _run_rope(fn, _x(33, (2, 4, 8)), torch.tensor([0, 1, 2, 3]), base=100.0)
    n += 1
    _run_rope(
        fn,
        _x(34, (1, 6, 16), torch.float64),
        torch.tensor([4095, 0, 1000, 2048, 3, 777]),
        extra=" (posições grandes)",
    )
    n += 1
    _run_rope(fn, _x(35, (7, 2)), extra=" (2-D, d = 2)")
    n += 1
    xt = _x(36, (4, 3, 6)).transpose(0, 1)  # não contíguo: (3, 4, 6)
    _run_rope(fn, xt, extra=" (tensor não contíguo)")
    n += 1
    # gradiente: a transposta de uma rotação é a rotação inversa
    x = _x(37, (2, 5, 4), torch.float64).requires_grad_()
    g = _x(38, (2, 5, 4), torch.float64)
    tried = "x (2, 5, 4) float64: gradiente de (saída·g).sum()"
    out = call(fn, ROPE, tried, x)
    expect(
        isinstance(out, torch.Tensor) and out.requires_grad,
        ROPE,
        tried,
        "A saída não está ligada ao grafo de gradientes de x (não use `.detach()`, `.numpy()`, `.item()`).",
    )
    (out * g).sum().backward()
    expect_close(x.grad, _rope_oracle(g, None, variant="reverso"), ROPE, tried, "o gradiente em x")
    n += 1
    # propriedade relativa: ⟨RoPE(q, m), RoPE(k, n)⟩ depende só de m − n
    gen = seeded_generator(39)
    q = torch.randn(1, 8, generator=gen, dtype=torch.float64)
    k = torch.randn(1, 8, generator=gen, dtype=torch.float64)
    scores = []
    for m, n_pos in ((3, 1), (10, 8), (102, 100)):
        qm = call(fn, ROPE, "propriedade relativa", q, torch.tensor([m]))
        kn = call(fn, ROPE, "propriedade relativa", k, torch.tensor([n_pos]))
        scores.append((qm * kn).sum().item())
    expect(
        max(scores) - min(scores) < 1e-9,
        ROPE,
        "⟨RoPE(q, m), RoPE(k, n)⟩ com m − n = 2 e três valores de m",
        f"Os produtos escalares deveriam ser iguais (só dependem de m − n); vieram {scores}.",
    )
    n += 1
    _expect_value_error(
        fn,
        ROPE,
        "x (2, 3, 5): última dimensão ímpar",
        "d ímpar não foi recusado com ValueError: não dá para formar pares.",
        _x(40, (2, 3, 5)),
    )
    n += 1
    _expect_value_error(
        fn,
        ROPE,
        "x (2, 3, 4) com positions de 5 elementos",
        "`positions` com comprimento diferente de T não foi recusado com ValueError.",
        _x(41, (2, 3, 4)),
        torch.arange(5),
    )
    n += 1
    passed(ROPE, n, "(testes ocultos)")


# ---------------------------------------------------------------- ALiBi


def _slopes_table(n_heads: int, variant: str = "certo") -> torch.Tensor:
    values = []
    for h in range(1, n_heads + 1):
        hh = h - 1 if variant == "h-1" else h
        factor = 1.0 if variant == "sem 8" else 8.0
        sign = 1.0 if variant == "positivo" else -1.0
        values.append(2.0 ** (sign * factor * hh / n_heads))
    if variant == "invertido":
        values.reverse()
    return torch.tensor(values, dtype=torch.float64)


SLOPE_MISTAKES = {
    "h-1": "as inclinações com h = 0 … H−1 (uma cabeça fora: a primeira vira 1)",
    "sem 8": "as inclinações sem o 8 no expoente (2^(−h/H) em vez de 2^(−8h/H))",
    "positivo": "as inclinações com o expoente positivo (2^(8h/H))",
    "invertido": "as inclinações em ordem invertida (da menor para a maior)",
}


def _run_slopes(fn: Callable, n_heads: int) -> torch.Tensor:
    __tracebackhide__ = True
    tried = f"{SLOPES}(n_heads={n_heads})"
    out = call(fn, SLOPES, tried, n_heads)
    expect(isinstance(out, torch.Tensor), SLOPES, tried, f"Esperava um tensor; veio {describe(out)}.")
    default = torch.get_default_dtype()
    expect(
        out.is_floating_point(),
        SLOPES,
        tried,
        f"Esperava um tensor de ponto flutuante ({_float(default)}); veio {_float(out.dtype)}.",
    )
    out = out.to(default) if out.dtype != default else out
    mistakes = [
        Mistake(label, _slopes_table(n_heads, key).to(default)) for key, label in SLOPE_MISTAKES.items()
    ]
    expect_close(out, _slopes_table(n_heads).to(default), SLOPES, tried, "as inclinações", mistakes)
    return out


def check_alibi_slopes(fn: Callable) -> None:
    """Testes visíveis de ``alibi_slopes``."""
    __tracebackhide__ = True
    n = 0
    _run_slopes(fn, 8)
    n += 1
    _run_slopes(fn, 4)
    n += 1
    passed(SLOPES, n)


def check_alibi_slopes_hidden(fn: Callable) -> None:
    """Testes ocultos: H = 1, H = 16, H que não é potência de 2, H inválido."""
    __tracebackhide__ = True
    n = 0
    _not_reference(fn, reference.alibi_slopes, SLOPES)
    n += 1
    for h in (1, 16, 12):
        _run_slopes(fn, h)
        n += 1
    for h in (0, -2):
        _expect_value_error(
            fn, SLOPES, f"{SLOPES}(n_heads={h})", "n_heads ≤ 0 deveria levantar ValueError.", h
        )
        n += 1
    passed(SLOPES, n, "(testes ocultos)")


def _bias_table(n_heads: int, seq_len: int, variant: str = "certo") -> torch.Tensor:
    slopes_variant = variant if variant in ("h-1", "sem 8") else "certo"
    slopes = _slopes_table(n_heads, slopes_variant)
    bias = [[[0.0] * seq_len for _ in range(seq_len)] for _ in range(n_heads)]
    for h in range(n_heads):
        m = slopes[0].item() if variant == "uma inclinação" else slopes[h].item()
        for i in range(seq_len):
            for j in range(seq_len):
                if variant == "sem abs":
                    value = -m * (i - j)
                elif variant == "sem abs (j - i)":
                    value = -m * (j - i)
                elif variant == "causal":
                    value = -m * max(i - j, 0)
                elif variant == "sinal":
                    value = m * abs(i - j)
                else:
                    value = -m * abs(i - j)
                bias[h][i][j] = value
    return torch.tensor(bias, dtype=torch.float64).reshape(n_heads, seq_len, seq_len)


BIAS_MISTAKES = {
    "sinal": "o viés com o sinal trocado (+m·|i − j|: posições distantes ganham score)",
    "sem abs": "o viés −m·(i − j) sem o valor absoluto",
    "sem abs (j - i)": "o viés −m·(j − i) sem o valor absoluto",
    "causal": "só a parte causal (zero acima da diagonal) em vez de −m·|i − j| em toda a matriz",
    "h-1": "as inclinações com h = 0 … H−1 (uma cabeça fora)",
    "sem 8": "as inclinações sem o 8 no expoente (2^(−h/H))",
    "uma inclinação": "a mesma inclinação para todas as cabeças (cada cabeça h tem a sua, m_h)",
}


def _run_bias(fn: Callable, n_heads: int, seq_len: int) -> torch.Tensor:
    __tracebackhide__ = True
    tried = f"{BIAS}(n_heads={n_heads}, seq_len={seq_len})"
    out = call(fn, BIAS, tried, n_heads, seq_len)
    hint = None
    if (
        isinstance(out, torch.Tensor)
        and tuple(out.shape) == (seq_len, seq_len, n_heads)
        and n_heads != seq_len
    ):
        hint = "o eixo das cabeças ficou no fim: a forma é (n_heads, seq_len, seq_len)."
    expect(
        isinstance(out, torch.Tensor) and tuple(out.shape) == (n_heads, seq_len, seq_len),
        BIAS,
        tried,
        f"Esperava um tensor {(n_heads, seq_len, seq_len)}; veio {describe(out)}.",
        hint,
    )
    default = torch.get_default_dtype()
    expect(out.is_floating_point(), BIAS, tried, f"Esperava ponto flutuante; veio {_float(out.dtype)}.")
    out = out.to(default) if out.dtype != default else out
    mistakes = [
        Mistake(label, _bias_table(n_heads, seq_len, key).to(default)) for key, label in BIAS_MISTAKES.items()
    ]
    expect_close(out, _bias_table(n_heads, seq_len).to(default), BIAS, tried, "o viés", mistakes)
    return out


def check_alibi_bias(fn: Callable) -> None:
    """Testes visíveis de ``alibi_bias``."""
    __tracebackhide__ = True
    n = 0
    _run_bias(fn, 2, 4)
    n += 1
    _run_bias(fn, 8, 6)
    n += 1
    passed(BIAS, n)


def check_alibi_bias_hidden(fn: Callable) -> None:
    """Testes ocultos: H = 1 e T = 1, H que não é potência de 2, comprimentos inválidos."""
    __tracebackhide__ = True
    n = 0
    _not_reference(fn, reference.alibi_bias, BIAS)
    n += 1
    for h, t in ((1, 1), (12, 10), (16, 3)):
        _run_bias(fn, h, t)
        n += 1
    _expect_value_error(
        fn, BIAS, f"{BIAS}(n_heads=4, seq_len=0)", "seq_len ≤ 0 deveria levantar ValueError.", 4, 0
    )
    n += 1
    passed(BIAS, n, "(testes ocultos)")
