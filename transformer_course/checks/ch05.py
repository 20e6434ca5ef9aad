"""Verificações do capítulo 5: ``causal_mask``, ``padding_mask``, ``decoder_self_mask`` e ``masked_softmax``.

Oráculos independentes do código do aluno: as máscaras escritas elemento a elemento com laços
(``j <= i``, ``token != pad_id``) e o softmax mascarado calculado linha a linha só sobre as posições
permitidas (linha sem nenhuma permitida = zeros). As máscaras são comparadas como booleanas; os erros
conhecidos (triângulo superior, diagonal excluída, OU no lugar de E, forma errada...) são calculados
nas mesmas entradas para que a mensagem diga qual é. O dispositivo pedido é conferido também sem
GPU, no dispositivo ``meta`` (só formas, sem dados).

Toda conversa com a resposta do aluno é um pedido (``c.call``, ``c.run``): o que volta são dados,
e o dispositivo em que o aluno criou cada tensor vem junto (``wire.info(t).device``); os gradientes
voltam pela opção ``grad`` de ``c.run``. A mesma verificação roda ao estudar e no juiz da correção.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import masks as reference
from .. import wire
from ..exercises import Exercise, GradedCell
from ..feedback import Check, Mistake
from ..probe import Import
from ..runtime import dtype_name

__all__ = ["check_causal_mask", "check_decoder_self_mask", "check_masked_softmax", "check_padding_mask"]

CHAPTER = "05_mascaras"


def _exercise(name: str, reference_fn, points: float) -> Exercise:
    cells = (GradedCell(f"test_{name}", points), GradedCell(f"test_{name}_hidden", points, hidden=True))
    return Exercise(CHAPTER, name, reference_fn, cells=cells)


CAUSAL = _exercise("causal_mask", reference.causal_mask, 1)
PADDING = _exercise("padding_mask", reference.padding_mask, 1)
DECODER = _exercise("decoder_self_mask", reference.decoder_self_mask, 1)
SOFTMAX = _exercise("masked_softmax", reference.masked_softmax, 2)


# ---------------------------------------------------------------- oráculos (laços, sem atalhos)


def _decoder_oracle(ids: torch.Tensor, pad_id: int, causal: bool = True) -> torch.Tensor:
    """Causal E padding (B, 1, T, T); com ``causal=False``, só o padding (B, 1, 1, T)."""
    B, T = ids.shape
    rows = T if causal else 1
    mask = torch.zeros(B, 1, rows, T, dtype=torch.bool)
    for b in range(B):
        for i in range(rows):
            for j in range(T):
                mask[b, 0, i, j] = (j <= i or not causal) and int(ids[b, j]) != pad_id
    return mask


def _causal_oracle(T: int) -> torch.Tensor:
    return _decoder_oracle(torch.ones(1, T), 0)[0, 0]  # sem padding: só j <= i


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


def _equal(actual: torch.Tensor, candidate: torch.Tensor) -> bool:
    return bool(torch.equal(actual.detach().cpu() != 0, candidate != 0))


def _first(flags: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in flags.nonzero()[0]) if flags.any() else ()


def _grid(mask: torch.Tensor) -> str:
    """Máscara em linhas de 0/1: um bloco (Tq, Tk) por exemplo do lote; no padding, uma linha por exemplo."""
    T = mask.size(-1)
    m = mask.int().reshape(-1, *mask.shape[-2:]) if mask.size(-2) > 1 else mask.int().reshape(1, -1, T)
    blocks = ["\n".join("  " + " ".join(map(str, row)) for row in block) for block in m.tolist()]
    return blocks[0] if len(blocks) == 1 else "\n".join(f" [{b}]\n{text}" for b, text in enumerate(blocks))


FLOAT_HINT = (
    "a máscara tem os valores certos, mas não é booleana: use `dtype=torch.bool` (ou `.bool()`). "
    "Com 0/1 em float, `~mask` falha e `masked_fill` recusa a máscara; com inteiros, `~1 = -2`."
)


def _expect_mask(c: Check, actual, expected: torch.Tensor, mistakes: dict[str, torch.Tensor]) -> None:
    """Tensor, forma, valores (como booleanos), dtype bool, nesta ordem; com diagnóstico."""
    tensor = isinstance(actual, torch.Tensor)
    same = [n for n, v in mistakes.items() if tensor and actual.shape == v.shape and _equal(actual, v)]
    diagnosis = f"sua máscara coincide com {same[0]}." if same else None
    c.shape(actual, expected.shape, "a máscara", diagnosis)
    got = actual.detach().cpu() != 0
    if idx := _first(got != expected):
        c.fail(
            f"Valores errados em {int((got != expected).sum())} de {got.numel()} posições. Primeira no "
            f"índice {idx}: esperado {bool(expected[idx])}, obtido {bool(got[idx])}.\n"
            f"Esperado (1 = pode atender):\n{_grid(expected)}\nObtido:\n{_grid(got)}",
            diagnosis,
        )
    c.dtype(actual, torch.bool, "a máscara", FLOAT_HINT)


def _device(out) -> str:
    """O dispositivo em que o tensor foi criado do lado do aluno (``"cuda:0"``, ``"meta"``; ``"?"``)."""
    return wire.info(out).device if isinstance(out, torch.Tensor) else "?"


def _on_device(c: Check, fn, args: tuple, kwargs: dict, device: str, hint: str) -> None:
    """Exige que ``fn(*args, **kwargs)`` devolva um tensor em ``device``.

    No ``meta`` (sem dados), só o erro de misturar dispositivos é um veredito; ler valores (``.item()``,
    ``int(...)``) ali falha sem dizer nada. O dispositivo é o que o lado do aluno informou (``wire.info``).
    """
    response = c.run(fn, args, kwargs)
    if device != "meta":
        c.raise_for(response, hint)
    elif response.error is not None:  # no meta, só o erro de dispositivo é um veredito
        message = response.error.get("message", "")
        if not any(k in message for k in ("expected device", "same device")):
            return
        c.fail(f"Sua função levantou {response.error.get('type')}: {message}", hint)
    out = response.value
    where = f"O resultado foi criado em {_device(out)}, não no dispositivo pedido ({device})."
    c.expect(isinstance(out, torch.Tensor) and _device(out).split(":")[0] == device, where, hint)


# ---------------------------------------------------------------- causal_mask


def _causal_mistakes(T: int) -> dict[str, torch.Tensor]:
    ones = torch.ones(T, T, dtype=torch.bool)
    return {
        "o triângulo SUPERIOR (cada posição veria o futuro): use o inferior, `tril`": ones.triu(),
        "a máscara SEM a diagonal: cada posição também precisa ver a si mesma": ones.tril(-1),
        "a convenção invertida (True = bloqueado, a do `attn_mask` do `nn.MultiheadAttention`); "
        "aqui True = pode atender": ones.triu(1),
        "a máscara toda True: nada foi bloqueado": ones,
        "a máscara causal com eixos extras (1, 1, T, T): aqui a forma é (T, T), e quem junta "
        "os eixos é a difusão (*broadcasting*)": ones.tril()[None, None],
        "a máscara com um eixo extra (1, T, T): a forma é (T, T)": ones.tril()[None],
    }


def _causal_case(c: Check, fn: Callable, T: int, **kwargs) -> torch.Tensor:
    c.case(f"causal_mask({', '.join([str(T), *(f'{k}={v!r}' for k, v in kwargs.items())])})")
    mask = c.call(fn, T, **kwargs)
    _expect_mask(c, mask, _causal_oracle(T), _causal_mistakes(T))
    return mask


@CAUSAL.visible_check
def check_causal_mask(fn: Callable) -> None:
    """Testes visíveis de ``causal_mask``."""
    with CAUSAL.check() as c:
        for T in (4, 1):
            _causal_case(c, fn, T)
        mask = _causal_case(c, fn, 6, device="cpu")
        where = _device(mask)
        c.expect(where.split(":")[0] == "cpu", f"A máscara está em {where}, mas foi pedido 'cpu'.")
        c.case("causal_mask(0) deve levantar ValueError").raises(ValueError, fn, 0)


@CAUSAL.hidden_check
def check_causal_mask_hidden(fn: Callable) -> None:
    """Testes ocultos: outros T, dispositivo respeitado (meta; cuda numa GPU), ValueError para T <= 0."""
    with CAUSAL.check(hidden=True) as c:
        for T in (2, 9):
            _causal_case(c, fn, T)
        _causal_case(c, fn, 5, device=torch.device("cpu"))
        hint = "o argumento `device` foi ignorado: passe `device=device` ao criar o tensor."
        # cuda só onde a resposta roda tem GPU (é lá que o tensor é criado, não aqui)
        for device in ("meta", "cuda") if c.call(Import("torch.cuda.is_available")) is True else ("meta",):
            c.case(f"causal_mask(3, device={device!r})")
            _on_device(c, fn, (3,), {"device": device}, device, hint)
        for bad in (0, -2):
            c.case(f"causal_mask({bad}) deve levantar ValueError").raises(ValueError, fn, bad)
        # por último: uma resposta errada ouve antes o diagnóstico do erro dela
        c.refuse_reference(fn, reference.causal_mask, lambda: fn(3))


# ---------------------------------------------------------------- padding_mask e decoder_self_mask


def _pad_id_ignored(mask_with_pad_0: torch.Tensor, pad_id: int) -> dict[str, torch.Tensor]:
    name = f"a máscara com o pad fixo em 0: o argumento `pad_id` (aqui {pad_id}) foi ignorado"
    return {name: mask_with_pad_0} if pad_id != 0 else {}


def _padding_mistakes(ids: torch.Tensor, pad_id: int) -> dict[str, torch.Tensor]:
    real = ids != pad_id
    keys, both = real[:, None, None, :], (real[:, :, None] & real[:, None, :])[:, None]
    return {
        **_pad_id_ignored((ids != 0)[:, None, None, :], pad_id),
        "a máscara invertida: True nos pads; aqui True = token real (pode atender)": ~keys,
        "a forma (B, T), sem os eixos das cabeças e das consultas: use (B, 1, 1, T)": real,
        "a forma (B, 1, T): falta um eixo; use (B, 1, 1, T)": real[:, None, :],
        "a forma (B, 1, T, 1): o eixo do comprimento ficou no lugar das CONSULTAS; "
        "o padding bloqueia CHAVES (o último eixo)": real[:, None, :, None],
        "a forma (B, 1, 1, 1, T) com 5 eixos (um `unsqueeze` a mais)": real[:, None, None, None, :],
        "a máscara (B, 1, T, T) que bloqueia também as consultas (linhas) de padding; "
        "aqui só as chaves são bloqueadas, forma (B, 1, 1, T)": both,
    }


def _decoder_mistakes(ids: torch.Tensor, pad_id: int) -> dict[str, torch.Tensor]:
    B, T = ids.shape
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    keys = (ids != pad_id)[:, None, None, :]  # (B, 1, 1, T)
    queries = (ids != pad_id)[:, None, :, None]  # (B, 1, T, 1)
    full = (B, 1, T, T)
    either = (causal | keys).expand(full)
    return {
        **_pad_id_ignored((causal & (ids != 0)[:, None, None, :]).expand(full), pad_id),
        "causal OU padding (`|`); as duas restrições valem juntas: use E (`&`)": either,
        "só a máscara causal: o padding foi esquecido": causal.expand(full),
        "só a máscara causal, na forma (T, T): falta o padding e o eixo do lote": causal,
        "só a máscara de padding: a causal foi esquecida": keys.expand(full),
        "causal E padding com o triângulo SUPERIOR": (causal.T & keys).expand(full),
        "causal (sem a diagonal) E padding": (causal.tril(-1) & keys).expand(full),
        "causal E padding com o padding invertido (True nos pads)": (causal & ~keys).expand(full),
        "causal E padding de chaves E de consultas: as linhas dos pads ficam todas bloqueadas; "
        "aqui só as chaves (colunas) são bloqueadas": causal & keys & queries,
        "a forma (B, T, T), sem o eixo das cabeças: use (B, 1, T, T)": (causal & keys)[:, 0],
        "a forma (B, 1, 1, T, T) com 5 eixos — o erro clássico de juntar uma máscara já (B, 1, 1, T) "
        "com `unsqueeze` a mais": (causal & keys)[:, None],
    }


def _ids_case(c: Check, fn: Callable, ids: torch.Tensor, pad_id: int | None = None, extra: str = "") -> None:
    """``padding_mask`` ou ``decoder_self_mask`` (pelo nome do ``Check``): entrada intacta e máscara."""
    pad = 0 if pad_id is None else pad_id
    c.case(f"token_ids = {ids.tolist()}, pad_id = {pad}{extra}")
    with c.untouched(token_ids=ids):
        mask = c.call(fn, ids, *(() if pad_id is None else (pad_id,)))
    causal = c.name == DECODER.name
    mistakes = (_decoder_mistakes if causal else _padding_mistakes)(ids, pad)
    _expect_mask(c, mask, _decoder_oracle(ids, pad, causal), mistakes)


@PADDING.visible_check
def check_padding_mask(fn: Callable) -> None:
    """Testes visíveis de ``padding_mask``."""
    with PADDING.check() as c:
        _ids_case(c, fn, torch.tensor([[7, 3, 9, 0, 0], [4, 0, 0, 0, 0]]), None, " (pad_id padrão)")
        ids = torch.tensor([[0, 5, 2, 1, 1, 1], [6, 0, 1, 1, 1, 1], [3, 3, 3, 3, 3, 3]])
        _ids_case(c, fn, ids, 1, " (o token 0 é real aqui)")
        c.case("token_ids 1-D (3,) deve levantar ValueError").raises(ValueError, fn, torch.tensor([7, 3, 0]))


@PADDING.hidden_check
def check_padding_mask_hidden(fn: Callable) -> None:
    """Testes ocultos: outro pad_id, lote 1, sem padding, entrada intacta, ValueError para não 2-D."""
    with PADDING.check(hidden=True) as c:
        ids = torch.randint(0, 6, (4, 7), generator=c.gen(50))
        ids[:, -2:] = 5
        _ids_case(c, fn, ids, 5, " (pad_id = 5)")
        _ids_case(c, fn, torch.tensor([[1, 2, 3]]), 0, " (lote 1, sem padding)")
        _ids_case(c, fn, torch.tensor([[2, 2, 8, 9]]), 2, " (padding à esquerda)")
        c.case("token_ids 1-D (3,) deve levantar ValueError").raises(ValueError, fn, torch.tensor([1, 2, 0]))
        # por último: uma resposta errada ouve antes o diagnóstico do erro dela
        c.refuse_reference(fn, reference.padding_mask, lambda: fn(torch.tensor([[1, 0]])))


@DECODER.visible_check
def check_decoder_self_mask(fn: Callable) -> None:
    """Testes visíveis de ``decoder_self_mask``."""
    with DECODER.check() as c:
        _ids_case(c, fn, torch.tensor([[5, 8, 2, 0, 0], [3, 9, 4, 6, 0]]), None, " (pad_id padrão)")
        _ids_case(c, fn, torch.tensor([[0, 4, 4, 7], [2, 0, 7, 7]]), 7, " (o token 0 é real aqui)")
        c.case("token_ids 1-D (3,) deve levantar ValueError").raises(ValueError, fn, torch.tensor([5, 8, 0]))


@DECODER.hidden_check
def check_decoder_self_mask_hidden(fn: Callable) -> None:
    """Testes ocultos: lote maior, padding à esquerda, T = 1, dispositivo dos ids, ValueError."""
    with DECODER.check(hidden=True) as c:
        ids = torch.randint(1, 9, (3, 6), generator=c.gen(60))
        ids[0, 4:], ids[1, 2:] = 0, 0
        _ids_case(c, fn, ids, 0, " (lote 3, comprimentos diferentes)")
        _ids_case(c, fn, torch.tensor([[3, 3, 5, 6, 1]]), 3, " (padding à esquerda)")
        _ids_case(c, fn, torch.tensor([[4]]), 0, " (T = 1)")
        c.case("token_ids (2, 4) no dispositivo 'meta' (só formas): a máscara fica no dispositivo dos ids")
        ids = torch.zeros(2, 4, dtype=torch.long, device="meta")
        hint = "a causal foi criada em outro dispositivo: passe `token_ids.device` à sua `causal_mask`."
        _on_device(c, fn, (ids,), {}, "meta", hint)
        c.case("token_ids 1-D (4,) deve levantar ValueError").raises(
            ValueError, fn, torch.tensor([1, 2, 3, 0])
        )
        # por último: uma resposta errada ouve antes o diagnóstico do erro dela
        c.refuse_reference(fn, reference.decoder_self_mask, lambda: fn(torch.tensor([[1, 0]])))


# ---------------------------------------------------------------- masked_softmax


def _softmax_mistakes(scores: torch.Tensor, mask: torch.Tensor | None) -> dict[str, torch.Tensor]:
    dim_2 = "o softmax no eixo das consultas (dim=-2) em vez do das chaves (dim=-1)"
    if mask is None:
        return {dim_2: scores.softmax(-2)}
    inf, big, blocked = scores.masked_fill(~mask, float("-inf")), scores.masked_fill(~mask, -1e9), ~mask
    return {
        "o softmax com -inf sem tratar as linhas totalmente bloqueadas (NaN nelas)": inf.softmax(-1),
        "o softmax com -1e9 (ou outro negativo grande) sem zerar as linhas totalmente "
        "bloqueadas: elas ficam uniformes (1/T em cada posição)": big.softmax(-1),
        "o softmax com a máscara ignorada": scores.softmax(-1),
        "a máscara invertida: você bloqueou as posições True, mas aqui True = pode atender": (
            _softmax_oracle(scores, blocked)
        ),
        "as posições bloqueadas preenchidas com 0 em vez de -inf (exp(0) = 1 ainda dá peso a elas)": (
            scores.masked_fill(blocked, 0.0).softmax(-1)
        ),
        "o softmax SEM máscara e só depois zerado nas posições bloqueadas "
        "(as linhas deixam de somar 1)": scores.softmax(-1).masked_fill(blocked, 0.0),
        dim_2: big.softmax(-2).masked_fill(blocked, 0.0),
    }


def _tried(scores: torch.Tensor, mask: torch.Tensor | None, extra: str = "") -> str:
    m = "sem máscara" if mask is None else f"máscara {tuple(mask.shape)}"
    return f"scores {tuple(scores.shape)} {dtype_name(scores.dtype)}, {m}{extra}"


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a.double(), b.double(), atol=1e-6, equal_nan=True)


NONE_HINT = "com `mask=None`, devolva o softmax comum (nada é bloqueado)."
KEEPDIM_HINT = (
    "se o erro fala de tamanhos que não casam (`must match the size`), confira o `keepdim=True` em "
    "`mask.any(dim=-1, keepdim=True)`: sem ele, a marca das linhas vazias perde o último eixo e se "
    "alinha com as CHAVES, não com as consultas."
)
NAN_HINTS = (
    "NaN em linhas com posições permitidas: o softmax estourou? Subtraia o máximo da linha antes de `exp`.",
    "NaN nas linhas totalmente bloqueadas: com -inf em toda a linha, o softmax calcula 0/0. Essas "
    "linhas devem sair só com zeros.",
)


def _softmax_case(c: Check, fn: Callable, scores: torch.Tensor, mask: torch.Tensor | None, extra="") -> None:
    """Chamada, entradas intactas, forma, dtype, NaN, linhas vazias, bloqueadas = 0, valores."""
    c.case(_tried(scores, mask, extra))
    expected = _softmax_oracle(scores, mask)
    with c.untouched(scores=scores, mask=mask):
        w = c.call(fn, scores, mask, hint_on_error=NONE_HINT if mask is None else KEEPDIM_HINT)
    c.shape(w, scores.shape, "os pesos")
    c.dtype(w, scores.dtype, "os pesos", "a função deve preservar o dtype de `scores` (float32 ou float64).")
    # só erros que, nestas entradas, dão um resultado diferente do certo podem ser citados
    mistakes = [Mistake(n, v) for n, v in _softmax_mistakes(scores, mask).items() if not _same(v, expected)]
    if mask is not None:
        allowed, w_, T = mask.expand(scores.shape), w.detach(), scores.size(-1)
        empty = ~allowed.any(-1)  # (..., Tq): linhas totalmente bloqueadas
        nan_rows = torch.isnan(w_).any(-1)
        c.expect(
            not nan_rows.any(),
            f"A saída tem NaN em {int(nan_rows.sum())} linha(s), a primeira na linha {_first(nan_rows)}.",
            NAN_HINTS[bool((nan_rows <= empty).all())],
        )
        c.expect(
            not (empty.any() and torch.allclose(w_[empty], torch.full_like(w_[empty], 1 / T), atol=1e-6)),
            f"As {int(empty.sum())} linha(s) totalmente bloqueadas saíram uniformes (1/{T} em cada posição).",
            "pesos uniformes nas linhas totalmente bloqueadas: é o que acontece com -1e9 no lugar de -inf. "
            "Uma consulta que não pode ver nada deve receber só zeros.",
        )
        worst = w_.masked_select(~allowed).abs().max().item() if not allowed.all() else 0.0
        known = next((f"a saída coincide com {m.name}." for m in mistakes if _same(w_, m.value)), None)
        c.expect(
            worst == 0,
            f"Posições bloqueadas receberam peso não nulo (maior: {worst:.3g}); devem ser exatamente 0.",
            (known if worst else None)
            or "o valor usado para bloquear não é negativo o bastante (exp dele não dá 0): "
            "use -inf, ou zere as posições bloqueadas depois do softmax.",
        )
    c.close(w, expected, "os pesos", mistakes)


def _scores(
    c: Check, seed: int, shape: tuple[int, ...], dtype=torch.float32, scale: float = 1.0
) -> torch.Tensor:
    return torch.randn(*shape, generator=c.gen(seed), dtype=dtype) * scale


@SOFTMAX.visible_check
def check_masked_softmax(fn: Callable) -> None:
    """Testes visíveis de ``masked_softmax``."""
    with SOFTMAX.check() as c:
        scores, mask = torch.tensor([[1.0, 2.0, 3.0, 0.5]]), torch.tensor([[True, True, False, True]])
        _softmax_case(c, fn, scores, mask, " (um exemplo pequeno)")
        _softmax_case(c, fn, _scores(c, 70, (2, 3, 5)), None)
        # 4-D (B, H, T, T) com a máscara do decodificador (B, 1, T, T) difundida sobre as cabeças
        mask = _decoder_oracle(torch.tensor([[4, 6, 2, 0, 0], [9, 9, 9, 9, 1]]), 0)
        _softmax_case(c, fn, _scores(c, 71, (2, 3, 5, 5)), mask, " (causal E padding)")
        # uma linha totalmente bloqueada: deve sair com zeros (nem NaN, nem uniforme)
        scores = torch.tensor([[0.3, -1.2, 2.0], [1.0, 0.0, -1.0]])
        mask = torch.tensor([[True, False, True], [False, False, False]])
        _softmax_case(c, fn, scores, mask, " (a segunda linha está toda bloqueada)")


BACKWARD_HINT = (
    "o `backward` falhou. Se o erro fala em 'modified by an inplace operation', você alterou no "
    "lugar a saída do softmax (`w[w.isnan()] = 0`, `masked_fill_`, `nan_to_num_`...), que o "
    "autograd guarda para calcular o gradiente; use `torch.where` ou `masked_fill` (sem `_`), "
    "que criam um tensor novo."
)


def _gradient_case(c: Check, fn: Callable) -> None:
    """Gradientes finitos e iguais aos do oráculo, mesmo com uma linha totalmente bloqueada."""
    base = _scores(c, 85, (2, 3, 4), torch.float64)
    mask = torch.tensor([[True, True, False, False], [False] * 4, [True, False, True, True]])
    c.case(_tried(base, mask, " (gradientes)"))
    mine, ref = base.clone().requires_grad_(), base.clone().requires_grad_()
    weights = c.call(fn, mine, mask)
    c.expect(
        isinstance(weights, torch.Tensor) and wire.info(weights).requires_grad,
        "A saída não está ligada ao grafo de gradientes (use só operações do PyTorch, "
        "sem `.detach()`, `.numpy()` ou `.item()`).",
    )
    c.shape(weights, base.shape, "os pesos")
    probe = torch.randn(base.shape, generator=c.gen(86), dtype=base.dtype)
    # (pesos·probe).sum().backward() do lado do aluno; a resposta já rodou nessas entradas acima, então
    # uma exceção agora vem do backward
    response = c.run(fn, (mine, mask), grad={"loss": {"kind": "dot", "weights": probe}})
    c.raise_for(response, BACKWARD_HINT)
    grad = (response.grads or [None])[0]
    (_softmax_oracle(ref, mask) * probe).sum().backward()  # o oráculo, deste lado
    c.expect(
        grad is not None,
        "Nenhum gradiente chegou a `scores`.",
        "a saída precisa ser calculada a partir de `scores` com operações do PyTorch (sem `.detach()`).",
    )
    c.expect(
        bool(torch.isfinite(grad).all()),
        "O gradiente em `scores` tem NaN ou infinitos.",
        "o NaN da linha totalmente bloqueada voltou pelo gradiente; zere essa linha com "
        "`masked_fill`/`torch.where` de modo que a conta 0/0 não entre no grafo.",
    )
    c.close(grad, ref.grad, "o gradiente em `scores`")


@SOFTMAX.hidden_check
def check_masked_softmax_hidden(fn: Callable) -> None:
    """Testes ocultos: float64, padding à esquerda, scores grandes, zeros exatos, gradientes, dispositivo."""
    with SOFTMAX.check(hidden=True) as c:
        watched, tril = _scores(c, 87, (2, 3, 3)), _causal_oracle(3)
        c.case(_tried(watched, tril, " (chamada vigiada)")).forbid(
            ["torch.nn.functional.scaled_dot_product_attention"],
            fn,
            watched,
            tril,
            body="Sua função chama `F.scaled_dot_product_attention`.",
            hint="o exercício pede o softmax mascarado escrito por você.",
        )
        _softmax_case(
            c, fn, _scores(c, 80, (2, 2, 4, 4), torch.float64), _causal_oracle(4), " (float64, (T, T))"
        )
        mask = _decoder_oracle(torch.tensor([[0, 0, 3, 4, 5], [0, 2, 2, 2, 2]]), 0)
        _softmax_case(c, fn, _scores(c, 81, (2, 1, 5, 5)), mask, " (padding à esquerda: linhas vazias)")
        mask = _decoder_oracle(torch.tensor([[1, 2, 0, 0], [0, 0, 0, 0]]), 0, causal=False)
        _softmax_case(c, fn, _scores(c, 82, (2, 2, 3, 4), torch.float64), mask, " (uma sequência só de pads)")
        # scores grandes: um softmax escrito à mão sem subtrair o máximo estoura
        mask = torch.rand(3, 6, generator=c.gen(84)) < 0.6
        mask[:, 0] = True
        _softmax_case(c, fn, _scores(c, 83, (3, 6), scale=200.0), mask, " (scores da ordem de centenas)")
        # zeros exatos: scores perto de 0, onde exp(-100) ainda não é 0 em float32
        mask = torch.tensor([[True, False, True, False, True], [False, True, True, True, True]])
        _softmax_case(c, fn, torch.zeros(2, 5), mask, " (scores nulos: as bloqueadas devem dar exatamente 0)")
        _gradient_case(c, fn)
        c.case("scores (2, 3, 4) e máscara (3, 4) no dispositivo 'meta' (só formas): os pesos ficam nele")
        scores, mask = torch.zeros(2, 3, 4, device="meta"), torch.ones(3, 4, dtype=torch.bool, device="meta")
        hint = "um tensor auxiliar ficou fora do dispositivo de `scores`: use `zeros_like`, `masked_fill`..."
        _on_device(c, fn, (scores, mask), {}, "meta", hint)
        # por último: uma resposta errada ouve antes o diagnóstico do erro dela
        c.refuse_reference(fn, reference.masked_softmax, lambda: fn(watched, tril))


EXERCISES = (CAUSAL, PADDING, DECODER, SOFTMAX)
