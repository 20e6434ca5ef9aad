"""Verificações do capítulo 5: ``causal_mask``, ``padding_mask``, ``decoder_self_mask`` e ``masked_softmax``.

Oráculos independentes do código do aluno: as máscaras escritas elemento a
elemento com laços (``j <= i``, ``token != pad_id``) e o softmax mascarado
calculado linha a linha com ``torch.softmax`` só sobre as posições permitidas
(linha sem nenhuma posição permitida = zeros).

As máscaras são comparadas como booleanas; os erros conhecidos (triângulo
superior, diagonal excluída, OU no lugar de E, forma errada...) são calculados
nas mesmas entradas para que a mensagem diga qual é.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.nn import functional as F

from .. import masks as reference
from ..runtime import seeded_generator
from ..feedback import (
    CheckFailure,
    Mistake,
    call,
    describe,
    expect,
    expect_close,
    expect_raises,
    expect_unchanged,
    forbid_torch_functions,
    passed,
    snapshot,
    tolerances,
)

__all__ = [
    "check_causal_mask",
    "check_causal_mask_hidden",
    "check_decoder_self_mask",
    "check_decoder_self_mask_hidden",
    "check_masked_softmax",
    "check_masked_softmax_hidden",
    "check_padding_mask",
    "check_padding_mask_hidden",
]

CAUSAL = "causal_mask"
PADDING = "padding_mask"
DECODER = "decoder_self_mask"
SOFTMAX = "masked_softmax"


# ---------------------------------------------------------------- oráculos (laços, sem atalhos)


def _causal_oracle(T: int) -> torch.Tensor:
    mask = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        for j in range(T):
            mask[i, j] = j <= i
    return mask


def _padding_oracle(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    B, T = ids.shape
    mask = torch.zeros(B, 1, 1, T, dtype=torch.bool)
    for b in range(B):
        for j in range(T):
            mask[b, 0, 0, j] = int(ids[b, j]) != pad_id
    return mask


def _decoder_oracle(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    B, T = ids.shape
    mask = torch.zeros(B, 1, T, T, dtype=torch.bool)
    for b in range(B):
        for i in range(T):
            for j in range(T):
                mask[b, 0, i, j] = j <= i and int(ids[b, j]) != pad_id
    return mask


def _softmax_oracle(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Linha a linha: softmax só sobre as posições permitidas; o resto fica 0."""
    if mask is None:
        mask = torch.ones((), dtype=torch.bool)
    m = mask.to(scores.device).expand(scores.shape).reshape(-1, scores.size(-1))
    rows = scores.reshape(-1, scores.size(-1))
    out = []
    for row, allowed in zip(rows, m):
        weights = torch.zeros_like(row)
        if allowed.any():
            idx = allowed.nonzero().squeeze(-1)
            weights = weights.index_put((idx,), torch.softmax(row[idx], dim=-1))
        out.append(weights)
    return torch.stack(out).reshape(scores.shape)


# ---------------------------------------------------------------- comparação de máscaras


def _same_mask(actual: torch.Tensor, candidate: torch.Tensor) -> bool:
    return (
        isinstance(actual, torch.Tensor)
        and tuple(actual.shape) == tuple(candidate.shape)
        and bool(torch.equal(actual.detach().cpu() != 0, candidate.cpu() != 0))
    )


def _diagnose(actual, mistakes: list[Mistake]) -> str | None:
    for mistake in mistakes:
        if _same_mask(actual, mistake.value):
            return f"sua máscara coincide com {mistake.name}."
    return None


def _grid(mask: torch.Tensor) -> str:
    """Máscara como linhas de 0/1; com lote, um bloco por exemplo."""
    m = mask.int()
    while m.dim() > 2 and any(size == 1 for size in m.shape[1:]):
        m = m.squeeze(next(i for i in range(1, m.dim()) if m.size(i) == 1))
    if m.dim() <= 1:
        return "  " + " ".join(map(str, m.reshape(-1).tolist()))
    if m.dim() == 2:
        return "\n".join("  " + " ".join(map(str, row)) for row in m.tolist())
    return "\n".join(f" [{b}]\n{_grid(block)}" for b, block in enumerate(m.reshape(-1, *m.shape[-2:])))


FLOAT_HINT = (
    "a máscara tem os valores certos, mas não é booleana: use `dtype=torch.bool` (ou `.bool()`). "
    "Com 0/1 em float, `~mask` falha e `masked_fill` recusa a máscara; com inteiros, `~1 = -2`."
)


def _expect_mask(actual, expected: torch.Tensor, name: str, tried: str, mistakes: list[Mistake]) -> None:
    """Tensor, forma, valores (como booleanos), dtype bool, nesta ordem; com diagnóstico."""
    __tracebackhide__ = True
    expect(
        isinstance(actual, torch.Tensor),
        name,
        tried,
        f"Esperava um tensor booleano; veio {describe(actual)}.",
    )
    expect(
        tuple(actual.shape) == tuple(expected.shape),
        name,
        tried,
        f"Forma errada: esperada {tuple(expected.shape)}, obtida {tuple(actual.shape)}.",
        _diagnose(actual, mistakes),
    )
    got = actual.detach().cpu() != 0
    wrong = got != expected
    if wrong.any():
        idx = tuple(int(i) for i in wrong.nonzero()[0])
        raise CheckFailure(
            f"`{name}` falhou.\nTeste: {tried}\n"
            f"Valores errados em {int(wrong.sum())} de {wrong.numel()} posições. "
            f"Primeira no índice {idx}: esperado {bool(expected[idx])}, obtido {bool(got[idx])}.\n"
            f"Esperado (1 = pode atender):\n{_grid(expected)}\nObtido:\n{_grid(got)}"
            + (f"\nDiagnóstico provável: {d}" if (d := _diagnose(actual, mistakes)) else "")
        )
    expect(
        actual.dtype == torch.bool,
        name,
        tried,
        f"dtype errado: esperado torch.bool, obtido {actual.dtype}.",
        FLOAT_HINT,
    )


# ---------------------------------------------------------------- causal_mask


def _causal_mistakes(T: int) -> list[Mistake]:
    ones = torch.ones(T, T, dtype=torch.bool)
    return [
        Mistake("o triângulo SUPERIOR (cada posição veria o futuro): use o inferior, `tril`", ones.triu()),
        Mistake("a máscara SEM a diagonal: cada posição também precisa ver a si mesma", ones.tril(-1)),
        Mistake(
            "a convenção invertida (True = bloqueado, a do `attn_mask` do `nn.MultiheadAttention`); "
            "aqui True = pode atender",
            ones.triu(1),
        ),
        Mistake("a máscara toda True: nada foi bloqueado", ones),
        Mistake(
            "a máscara causal com eixos extras (1, 1, T, T): aqui a forma é (T, T), e quem junta "
            "os eixos é a difusão (*broadcasting*)",
            ones.tril()[None, None],
        ),
        Mistake("a máscara com um eixo extra (1, T, T): a forma é (T, T)", ones.tril()[None]),
    ]


def _run_causal(fn: Callable, T: int, **kwargs) -> torch.Tensor:
    tried = f"{CAUSAL}({T}{', ' + ', '.join(f'{k}={v!r}' for k, v in kwargs.items()) if kwargs else ''})"
    result = call(fn, CAUSAL, tried, T, **kwargs)
    _expect_mask(result, _causal_oracle(T), CAUSAL, tried, _causal_mistakes(T))
    return result


def check_causal_mask(fn: Callable) -> None:
    """Testes visíveis de ``causal_mask``."""
    __tracebackhide__ = True
    n = 0
    for T in (4, 1):
        _run_causal(fn, T)
        n += 1
    mask = _run_causal(fn, 6, device="cpu")
    expect(
        mask.device.type == "cpu",
        CAUSAL,
        "causal_mask(6, device='cpu')",
        f"A máscara está em {mask.device}, mas foi pedido 'cpu'.",
    )
    n += 1
    expect_raises(fn, ValueError, CAUSAL, "causal_mask(0) deve levantar ValueError", 0)
    n += 1
    passed(CAUSAL, n)


def check_causal_mask_hidden(fn: Callable) -> None:
    """Testes ocultos: T grande, dispositivo respeitado, ValueError para T <= 0."""
    __tracebackhide__ = True
    n = 0
    expect(
        getattr(fn, "__code__", None) is not reference.causal_mask.__code__,
        CAUSAL,
        "origem da função",
        "Sua função é a implementação de referência do pacote `transformer_course`.",
        "escreva a sua própria implementação em vez de importá-la.",
    )
    n += 1
    for T in (2, 9):
        _run_causal(fn, T)
        n += 1
    _run_causal(fn, 5, device=torch.device("cpu"))
    n += 1
    if torch.cuda.is_available():  # numa GPU, verifica que o argumento device é respeitado
        tried = "causal_mask(3, device='cuda')"
        result = call(fn, CAUSAL, tried, 3, device="cuda")
        expect(
            isinstance(result, torch.Tensor) and result.device.type == "cuda",
            CAUSAL,
            tried,
            f"A máscara foi criada em {getattr(result, 'device', '?')}, não no dispositivo pedido.",
            "o argumento `device` foi ignorado: passe `device=device` ao criar o tensor.",
        )
        n += 1
    for bad in (0, -2):
        expect_raises(fn, ValueError, CAUSAL, f"causal_mask({bad}) deve levantar ValueError", bad)
        n += 1
    passed(CAUSAL, n, "(testes ocultos)")


# ---------------------------------------------------------------- padding_mask


def _padding_mistakes(ids: torch.Tensor, pad_id: int) -> list[Mistake]:
    real = ids != pad_id
    B, T = ids.shape
    mistakes = [
        Mistake(
            "a máscara invertida: True nos pads; aqui True = token real (pode atender)",
            (~real)[:, None, None, :],
        ),
        Mistake("a forma (B, T), sem os eixos das cabeças e das consultas: use (B, 1, 1, T)", real),
        Mistake("a forma (B, 1, T): falta um eixo; use (B, 1, 1, T)", real[:, None, :]),
        Mistake(
            "a forma (B, 1, T, 1): o eixo do comprimento ficou no lugar das CONSULTAS; "
            "o padding bloqueia CHAVES (o último eixo)",
            real[:, None, :, None],
        ),
        Mistake("a forma (B, 1, 1, 1, T) com 5 eixos (um `unsqueeze` a mais)", real[:, None, None, None, :]),
        Mistake(
            "a máscara (B, 1, T, T) que bloqueia também as consultas (linhas) de padding; "
            "aqui só as chaves são bloqueadas, forma (B, 1, 1, T)",
            (real[:, :, None] & real[:, None, :])[:, None],
        ),
    ]
    if pad_id != 0:
        mistakes.insert(
            0,
            Mistake(
                f"a máscara com o pad fixo em 0: o argumento `pad_id` (aqui {pad_id}) foi ignorado",
                (ids != 0)[:, None, None, :],
            ),
        )
    del B, T
    return mistakes


def _run_padding(fn: Callable, ids: torch.Tensor, pad_id: int | None, extra: str = "") -> torch.Tensor:
    args = (ids,) if pad_id is None else (ids, pad_id)
    pad = 0 if pad_id is None else pad_id
    tried = f"token_ids = {ids.tolist()}, pad_id = {pad}{extra}"
    before = snapshot(ids)
    result = call(fn, PADDING, tried, *args)
    expect_unchanged(before, [ids], ["token_ids"], PADDING, tried)
    _expect_mask(result, _padding_oracle(ids, pad), PADDING, tried, _padding_mistakes(ids, pad))
    return result


def check_padding_mask(fn: Callable) -> None:
    """Testes visíveis de ``padding_mask``."""
    __tracebackhide__ = True
    n = 0
    ids = torch.tensor([[7, 3, 9, 0, 0], [4, 0, 0, 0, 0]])
    _run_padding(fn, ids, None, " (pad_id padrão)")
    n += 1
    ids = torch.tensor([[0, 5, 2, 1, 1, 1], [6, 0, 1, 1, 1, 1], [3, 3, 3, 3, 3, 3]])
    _run_padding(fn, ids, 1, " (o token 0 é real aqui)")
    n += 1
    bad = torch.tensor([7, 3, 0])
    expect_raises(fn, ValueError, PADDING, "token_ids 1-D (3,) deve levantar ValueError", bad)
    n += 1
    passed(PADDING, n)


def check_padding_mask_hidden(fn: Callable) -> None:
    """Testes ocultos: outro pad_id, lote 1, sem padding, entrada intacta, ValueError para não 2-D."""
    __tracebackhide__ = True
    n = 0
    expect(
        getattr(fn, "__code__", None) is not reference.padding_mask.__code__,
        PADDING,
        "origem da função",
        "Sua função é a implementação de referência do pacote `transformer_course`.",
        "escreva a sua própria implementação em vez de importá-la.",
    )
    n += 1
    gen = seeded_generator(50)
    ids = torch.randint(0, 6, (4, 7), generator=gen)
    ids[:, -2:] = 5
    _run_padding(fn, ids, 5, " (pad_id = 5)")
    n += 1
    _run_padding(fn, torch.tensor([[1, 2, 3]]), 0, " (lote 1, sem padding)")
    n += 1
    _run_padding(fn, torch.tensor([[2, 2, 8, 9]]), 2, " (padding à esquerda)")
    n += 1
    bad = torch.tensor([1, 2, 0])
    expect_raises(fn, ValueError, PADDING, "token_ids 1-D (3,) deve levantar ValueError", bad)
    n += 1
    passed(PADDING, n, "(testes ocultos)")


# ---------------------------------------------------------------- decoder_self_mask


def _decoder_mistakes(ids: torch.Tensor, pad_id: int) -> list[Mistake]:
    B, T = ids.shape
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    keys = (ids != pad_id)[:, None, None, :]  # (B, 1, 1, T)
    queries = (ids != pad_id)[:, None, :, None]  # (B, 1, T, 1)
    full = (B, 1, T, T)
    mistakes = [
        Mistake(
            "causal OU padding (`|`); as duas restrições valem juntas: use E (`&`)",
            (causal | keys).expand(full),
        ),
        Mistake("só a máscara causal: o padding foi esquecido", causal.expand(full)),
        Mistake("só a máscara causal, na forma (T, T): falta o padding e o eixo do lote", causal),
        Mistake("só a máscara de padding: a causal foi esquecida", keys.expand(full)),
        Mistake("causal E padding com o triângulo SUPERIOR", (causal.T & keys).expand(full)),
        Mistake("causal (sem a diagonal) E padding", (causal.tril(-1) & keys).expand(full)),
        Mistake(
            "causal E padding com o padding invertido (True nos pads)",
            (causal & ~keys).expand(full),
        ),
        Mistake(
            "causal E padding de chaves E de consultas: as linhas dos pads ficam todas bloqueadas; "
            "aqui só as chaves (colunas) são bloqueadas",
            causal & keys & queries,
        ),
        Mistake("a forma (B, T, T), sem o eixo das cabeças: use (B, 1, T, T)", (causal & keys)[:, 0]),
        Mistake(
            "a forma (B, 1, 1, T, T) com 5 eixos — o erro clássico de juntar uma máscara já (B, 1, 1, T) "
            "com `unsqueeze` a mais",
            (causal & keys)[:, None],
        ),
    ]
    if pad_id != 0:
        mistakes.insert(
            0,
            Mistake(
                f"a máscara com o pad fixo em 0: o argumento `pad_id` (aqui {pad_id}) foi ignorado",
                (causal & (ids != 0)[:, None, None, :]).expand(full),
            ),
        )
    return mistakes


def _run_decoder(fn: Callable, ids: torch.Tensor, pad_id: int | None, extra: str = "") -> torch.Tensor:
    args = (ids,) if pad_id is None else (ids, pad_id)
    pad = 0 if pad_id is None else pad_id
    tried = f"token_ids = {ids.tolist()}, pad_id = {pad}{extra}"
    before = snapshot(ids)
    result = call(fn, DECODER, tried, *args)
    expect_unchanged(before, [ids], ["token_ids"], DECODER, tried)
    _expect_mask(result, _decoder_oracle(ids, pad), DECODER, tried, _decoder_mistakes(ids, pad))
    return result


def check_decoder_self_mask(fn: Callable) -> None:
    """Testes visíveis de ``decoder_self_mask``."""
    __tracebackhide__ = True
    n = 0
    _run_decoder(fn, torch.tensor([[5, 8, 2, 0, 0], [3, 9, 4, 6, 0]]), None, " (pad_id padrão)")
    n += 1
    _run_decoder(fn, torch.tensor([[0, 4, 4, 7], [2, 0, 7, 7]]), 7, " (o token 0 é real aqui)")
    n += 1
    bad = torch.tensor([5, 8, 0])
    expect_raises(fn, ValueError, DECODER, "token_ids 1-D (3,) deve levantar ValueError", bad)
    n += 1
    passed(DECODER, n)


def check_decoder_self_mask_hidden(fn: Callable) -> None:
    """Testes ocultos: lote maior, padding à esquerda, sem padding, ValueError para não 2-D."""
    __tracebackhide__ = True
    n = 0
    expect(
        getattr(fn, "__code__", None) is not reference.decoder_self_mask.__code__,
        DECODER,
        "origem da função",
        "Sua função é a implementação de referência do pacote `transformer_course`.",
        "escreva a sua própria implementação em vez de importá-la.",
    )
    n += 1
    gen = seeded_generator(60)
    ids = torch.randint(1, 9, (3, 6), generator=gen)
    ids[0, 4:] = 0
    ids[1, 2:] = 0
    _run_decoder(fn, ids, 0, " (lote 3, comprimentos diferentes)")
    n += 1
    _run_decoder(fn, torch.tensor([[3, 3, 5, 6, 1]]), 3, " (padding à esquerda)")
    n += 1
    _run_decoder(fn, torch.tensor([[4]]), 0, " (T = 1)")
    n += 1
    expect_raises(
        fn, ValueError, DECODER, "token_ids 1-D (4,) deve levantar ValueError", torch.tensor([1, 2, 3, 0])
    )
    n += 1
    passed(DECODER, n, "(testes ocultos)")


# ---------------------------------------------------------------- masked_softmax


def _softmax_mistakes(scores: torch.Tensor, mask: torch.Tensor | None) -> list[Mistake]:
    if mask is None:
        return [
            Mistake(
                "o softmax no eixo das consultas (dim=-2) em vez do das chaves (dim=-1)", scores.softmax(-2)
            )
        ]
    inf = float("-inf")
    plain = scores.masked_fill(~mask, inf).softmax(-1)
    big = scores.masked_fill(~mask, -1e9).softmax(-1)
    return [
        Mistake("o softmax com -inf sem tratar as linhas totalmente bloqueadas (NaN nelas)", plain),
        Mistake(
            "o softmax com -1e9 (ou outro negativo grande) sem zerar as linhas totalmente "
            "bloqueadas: elas ficam uniformes (1/T em cada posição)",
            big,
        ),
        Mistake("o softmax com a máscara ignorada", scores.softmax(-1)),
        Mistake(
            "a máscara invertida: você bloqueou as posições True, mas aqui True = pode atender",
            reference.masked_softmax(scores, ~mask),
        ),
        Mistake(
            "as posições bloqueadas preenchidas com 0 em vez de -inf (exp(0) = 1 ainda dá peso a elas)",
            scores.masked_fill(~mask, 0.0).softmax(-1),
        ),
        Mistake(
            "o softmax SEM máscara e só depois zerado nas posições bloqueadas (as linhas deixam de somar 1)",
            scores.softmax(-1).masked_fill(~mask, 0.0),
        ),
        Mistake(
            "o softmax no eixo das consultas (dim=-2) em vez do das chaves (dim=-1)",
            scores.masked_fill(~mask, -1e9).softmax(-2).masked_fill(~mask, 0.0),
        ),
    ]


def _tried_softmax(scores, mask, extra=""):
    m = "sem máscara" if mask is None else f"máscara {tuple(mask.shape)}"
    return f"scores {tuple(scores.shape)} {str(scores.dtype)[6:]}, {m}{extra}"


def _run_softmax(
    fn: Callable,
    scores: torch.Tensor,
    mask: torch.Tensor | None,
    extra: str = "",
) -> torch.Tensor:
    """Caso completo: chamada, entradas intactas, NaN, linhas vazias, bloqueadas = 0, valores."""
    __tracebackhide__ = True
    tried = _tried_softmax(scores, mask, extra)
    before = snapshot(scores) + ([] if mask is None else snapshot(mask))
    expected = _softmax_oracle(scores, mask)
    cache: list[list[Mistake]] = []

    def mistakes() -> list[Mistake]:
        # calculados só quando algo falha; só erros que, nestas entradas, dão um resultado
        # diferente do certo podem ser citados
        if not cache:
            cache.append(
                [
                    m
                    for m in _softmax_mistakes(scores, mask)
                    if not torch.allclose(m.value.double(), expected.double(), atol=1e-6, equal_nan=True)
                ]
            )
        return cache[0]

    hint = "com `mask=None`, devolva o softmax comum (nada é bloqueado)." if mask is None else None
    result = call(fn, SOFTMAX, tried, scores, mask, hint_on_error=hint)
    labels = ["scores"] + ([] if mask is None else ["mask"])
    expect_unchanged(before, [scores] + ([] if mask is None else [mask]), labels, SOFTMAX, tried)
    expect(
        isinstance(result, torch.Tensor) and tuple(result.shape) == tuple(scores.shape),
        SOFTMAX,
        tried,
        f"Esperava um tensor da forma de `scores`, {tuple(scores.shape)}; veio {describe(result)}.",
    )
    expect(
        result.dtype == scores.dtype,
        SOFTMAX,
        tried,
        f"dtype errado nos pesos: esperado {scores.dtype}, obtido {result.dtype} "
        "(a função deve preservar o dtype de `scores`).",
    )
    if mask is not None:
        full_mask = mask.expand(scores.shape)
        empty = ~full_mask.any(-1)  # (..., Tq): linhas totalmente bloqueadas
        w = result.detach()
        nan_rows = torch.isnan(w).any(-1)
        if nan_rows.any():
            only_empty = bool((nan_rows <= empty).all())
            raise CheckFailure(
                f"`{SOFTMAX}` falhou.\nTeste: {tried}\n"
                f"A saída tem NaN em {int(nan_rows.sum())} linha(s), a primeira na linha "
                f"{tuple(int(i) for i in nan_rows.nonzero()[0])}.\nDiagnóstico provável: "
                + (
                    "NaN nas linhas totalmente bloqueadas: com -inf em toda a linha, o softmax calcula "
                    "0/0. Essas linhas devem sair só com zeros."
                    if only_empty
                    else "NaN em linhas com posições permitidas: o softmax estourou? Subtraia o máximo "
                    "da linha antes de `exp`."
                )
            )
        if empty.any():
            rows = w[empty]
            uniform = torch.full_like(rows, 1.0 / scores.size(-1))
            expect(
                not torch.allclose(rows, uniform, atol=1e-6),
                SOFTMAX,
                tried,
                f"As {int(empty.sum())} linha(s) totalmente bloqueadas saíram uniformes "
                f"(1/{scores.size(-1)} em cada posição).",
                "pesos uniformes nas linhas totalmente bloqueadas: é o que acontece com -1e9 no lugar "
                "de -inf. Uma consulta que não pode ver nada deve receber só zeros.",
            )
        blocked = w.masked_select(~full_mask)
        if blocked.numel():
            worst = blocked.abs().max().item()
            diag = None
            if worst != 0:
                diag = next(
                    (
                        f"a saída coincide com {m.name}."
                        for m in mistakes()
                        if torch.allclose(w.double(), m.value.double(), atol=1e-6, equal_nan=True)
                    ),
                    None,
                )
            expect(
                worst == 0,
                SOFTMAX,
                tried,
                f"Posições bloqueadas receberam peso não nulo (maior: {worst:.3g}); devem ser exatamente 0.",
                diag
                or "o valor usado para bloquear não é negativo o bastante (exp dele não dá 0): "
                "use -inf, ou zere as posições bloqueadas depois do softmax.",
            )
    try:
        torch.testing.assert_close(result.detach(), expected, **tolerances(expected.dtype))
    except AssertionError:
        expect_close(result, expected, SOFTMAX, tried, "os pesos", mistakes())
    return result


def _scores(seed: int, shape: tuple[int, ...], dtype=torch.float32, scale: float = 1.0):
    gen = seeded_generator(seed)
    return gen, torch.randn(*shape, generator=gen, dtype=dtype) * scale


def check_masked_softmax(fn: Callable) -> None:
    """Testes visíveis de ``masked_softmax``."""
    __tracebackhide__ = True
    n = 0
    # 1. Uma linha pequena com uma posição bloqueada.
    scores = torch.tensor([[1.0, 2.0, 3.0, 0.5]])
    mask = torch.tensor([[True, True, False, True]])
    _run_softmax(fn, scores, mask, " (um exemplo pequeno)")
    n += 1
    # 2. Sem máscara: o softmax comum.
    _, scores = _scores(70, (2, 3, 5))
    _run_softmax(fn, scores, None)
    n += 1
    # 3. 4-D (B, H, T, T) com a máscara do decodificador (B, 1, T, T) difundida sobre as cabeças.
    _, scores = _scores(71, (2, 3, 5, 5))
    mask = _decoder_oracle(torch.tensor([[4, 6, 2, 0, 0], [9, 9, 9, 9, 1]]), 0)
    _run_softmax(fn, scores, mask, " (causal E padding)")
    n += 1
    # 4. Uma linha totalmente bloqueada: deve sair com zeros (nem NaN, nem uniforme).
    scores = torch.tensor([[0.3, -1.2, 2.0], [1.0, 0.0, -1.0]])
    mask = torch.tensor([[True, False, True], [False, False, False]])
    _run_softmax(fn, scores, mask, " (a segunda linha está toda bloqueada)")
    n += 1
    passed(SOFTMAX, n)


def check_masked_softmax_hidden(fn: Callable) -> None:
    """Testes ocultos: float64, padding à esquerda, scores grandes, gradientes, zeros exatos, atalhos."""
    __tracebackhide__ = True
    n = 0
    expect(
        getattr(fn, "__code__", None) is not reference.masked_softmax.__code__,
        SOFTMAX,
        "origem da função",
        "Sua função é a implementação de referência do pacote `transformer_course`.",
        "escreva a sua própria implementação em vez de importá-la.",
    )
    n += 1
    # float64, causal (T, T) difundida sobre (B, H, T, T)
    _, scores = _scores(80, (2, 2, 4, 4), torch.float64)
    _run_softmax(fn, scores, _causal_oracle(4), " (float64, causal (T, T))")
    n += 1
    # padding à esquerda + causal: as primeiras linhas ficam totalmente bloqueadas
    _, scores = _scores(81, (2, 1, 5, 5))
    mask = _decoder_oracle(torch.tensor([[0, 0, 3, 4, 5], [0, 2, 2, 2, 2]]), 0)
    _run_softmax(fn, scores, mask, " (padding à esquerda: linhas totalmente bloqueadas)")
    n += 1
    # padding (B, 1, 1, T) com uma sequência só de pads
    _, scores = _scores(82, (2, 2, 3, 4), torch.float64)
    mask = _padding_oracle(torch.tensor([[1, 2, 0, 0], [0, 0, 0, 0]]), 0)
    _run_softmax(fn, scores, mask, " (uma sequência só de pads)")
    n += 1
    # scores grandes: um softmax escrito à mão sem subtrair o máximo estoura
    _, scores = _scores(83, (3, 6), scale=200.0)
    mask = torch.rand(3, 6, generator=seeded_generator(84)) < 0.6
    mask[:, 0] = True
    _run_softmax(fn, scores, mask, " (scores da ordem de centenas)")
    n += 1
    # zeros exatos: scores perto de 0, onde exp(-100) ainda não é 0 em float32
    scores = torch.zeros(2, 5)
    mask = torch.tensor([[True, False, True, False, True], [False, True, True, True, True]])
    _run_softmax(fn, scores, mask, " (scores nulos: as bloqueadas devem dar exatamente 0)")
    n += 1
    # gradientes finitos e iguais aos do oráculo, mesmo com uma linha totalmente bloqueada
    _, base = _scores(85, (2, 3, 4), torch.float64)
    mask = torch.tensor([[True, True, False, False], [False, False, False, False], [True, False, True, True]])
    tried = _tried_softmax(base, mask, " (gradientes)")
    mine, ref = base.clone().requires_grad_(), base.clone().requires_grad_()
    weights = call(fn, SOFTMAX, tried, mine, mask)
    expect(
        isinstance(weights, torch.Tensor) and weights.requires_grad,
        SOFTMAX,
        tried,
        "A saída não está ligada ao grafo de gradientes (use só operações do PyTorch, "
        "sem `.detach()`, `.numpy()` ou `.item()`).",
    )
    expect(
        tuple(weights.shape) == tuple(base.shape),
        SOFTMAX,
        tried,
        f"Esperava um tensor da forma de `scores`, {tuple(base.shape)}; veio {describe(weights)}.",
    )
    probe = torch.randn(base.shape, generator=seeded_generator(86), dtype=base.dtype)
    call(
        lambda: (weights * probe).sum().backward(),
        SOFTMAX,
        tried,
        hint_on_error=(
            "o `backward` falhou. Se o erro fala em 'modified by an inplace operation', você alterou no "
            "lugar a saída do softmax (`w[w.isnan()] = 0`, `masked_fill_`, `nan_to_num_`...), que o "
            "autograd guarda para calcular o gradiente; use `torch.where` ou `masked_fill` (sem `_`), "
            "que criam um tensor novo."
        ),
    )
    (_softmax_oracle(ref, mask) * probe).sum().backward()
    expect(
        mine.grad is not None,
        SOFTMAX,
        tried,
        "Nenhum gradiente chegou a `scores`.",
        "a saída precisa ser calculada a partir de `scores` com operações do PyTorch (sem `.detach()`).",
    )
    expect(
        bool(torch.isfinite(mine.grad).all()),
        SOFTMAX,
        tried,
        "O gradiente em `scores` tem NaN ou infinitos.",
        "o NaN da linha totalmente bloqueada voltou pelo gradiente; zere essa linha com "
        "`masked_fill`/`torch.where` de modo que a conta 0/0 não entre no grafo.",
    )
    expect_close(mine.grad, ref.grad, SOFTMAX, tried, "o gradiente em `scores`")
    n += 1
    # atalho proibido: pesos tirados de F.scaled_dot_product_attention
    _, scores = _scores(87, (2, 3, 3))
    with forbid_torch_functions(F.scaled_dot_product_attention) as mode:
        call(fn, SOFTMAX, "chamada vigiada", scores, torch.ones(3, 3, dtype=torch.bool).tril())
    expect(
        not mode.used,
        SOFTMAX,
        _tried_softmax(scores, None),
        "Sua função chama `F.scaled_dot_product_attention`.",
        "o exercício pede o softmax mascarado escrito por você.",
    )
    n += 1
    passed(SOFTMAX, n, "(testes ocultos)")
