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

import math
from collections.abc import Callable

import torch

from .. import masks as reference
from .. import wire
from ..exercises import Exercise, GradedCell
from ..feedback import Check, CheckFailure, Finding, Mistake, exception_of, same_exception
from ..numbers import br
from ..probe import Import, Remote
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


def _bool(mask: torch.Tensor) -> torch.Tensor:
    return mask.detach().cpu() != 0


def _equal(actual, candidate: torch.Tensor) -> bool:
    """Mesma forma e os mesmos valores, lidos como booleanos (o dtype é conferido à parte)."""
    return (
        isinstance(actual, torch.Tensor)
        and tuple(actual.shape) == tuple(candidate.shape)
        and bool(torch.equal(_bool(actual), candidate != 0))
    )


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
ADDITIVE = (
    "a máscara ADITIVA (0 onde pode atender, -∞ ou um negativo enorme onde bloqueia), a convenção do "
    "`attn_mask` em float, que se soma aos scores; aqui a máscara é booleana, True = pode atender"
)

# Um erro conhecido de máscara: id estável -> (o nome que o aluno lê, a máscara que esse erro dá).
Mistakes = dict[str, tuple[str, torch.Tensor]]


def _additive(actual, expected: torch.Tensor) -> bool:
    """A máscara aditiva com os valores certos: 0 nas posições permitidas, ≤ -10⁴ (ou -∞) nas bloqueadas."""
    if not (isinstance(actual, torch.Tensor) and actual.is_floating_point()):
        return False
    if tuple(actual.shape) != tuple(expected.shape) or bool(expected.all()):
        return False
    a = actual.detach().cpu().double()
    return bool((a[expected] == 0).all() and (a[~expected] <= -1e4).all())


def _known(actual, expected: torch.Tensor, mistakes: Mistakes) -> str | None:
    """O id do erro conhecido que dá exatamente ``actual`` (nenhum que coincida com a resposta certa)."""
    if _additive(actual, expected):
        return "mascara-aditiva"
    for key, (_, value) in mistakes.items():
        if not _equal(expected, value) and _equal(actual, value):
            return key
    return None


class _Again:
    """O segundo caso de uma verificação (outros tamanhos e valores), pedido só quando um diagnóstico o usa.

    ``run()`` devolve ``(máscara do aluno, esperada, erros conhecidos)`` nesse caso, ou ``None`` se a
    resposta falhou lá de outro jeito (uma exceção).
    """

    def __init__(self, c: Check, fn: Callable, args: tuple, expected: torch.Tensor, mistakes: Mistakes):
        self.c, self.fn, self.args, self.expected, self.mistakes = c, fn, args, expected, mistakes
        self._done, self._value = False, None

    def run(self):
        if not self._done:
            self._done = True
            response = self.c.run(self.fn, self.args)
            if response.error is None and isinstance(response.value, torch.Tensor):
                self._value = (response.value, self.expected, self.mistakes)
        return self._value


def _named(known: str | None, mistakes: Mistakes) -> str | None:
    if known == "mascara-aditiva":
        return ADDITIVE
    return mistakes[known][0] if known else None


def _confirmed(known: str | None, again: _Again | None) -> str | None:
    """O erro conhecido, se ele reproduz a resposta também no segundo caso (senão, nenhum)."""
    if known is None or again is None:
        return known
    second = again.run()
    return known if second is not None and _known(*second) == known else None


def _expect_mask(
    c: Check,
    actual,
    expected: torch.Tensor,
    mistakes: Mistakes,
    again: _Again | None = None,
    finders: tuple[Callable[[], Finding | None], ...] = (),
) -> None:
    """Tensor, forma, valores (como booleanos), dtype bool, nesta ordem; com diagnóstico.

    Um erro conhecido só é nomeado se dá a máscara do aluno aqui e no segundo caso (``again``); sem
    ele, ``finders`` procuram um parâmetro ajustado ou a primeira propriedade que quebra.
    """
    right = _equal(actual, expected)
    known = None if right else _confirmed(_known(actual, expected, mistakes), again)
    diagnosis = f"sua máscara coincide com {_named(known, mistakes)}." if known else None
    data = {"mistake": known} if known else {}
    shape_ok = isinstance(actual, torch.Tensor) and tuple(actual.shape) == tuple(expected.shape)
    if not shape_ok and known is None and isinstance(actual, torch.Tensor):
        finding = c.find(lambda: _same_values_other_shape(actual, expected))
        if finding is not None:
            diagnosis = finding.cause
            data = {"kind": "forma", "mistake": finding.id, "cause": finding.cause}
    c.shape(actual, expected.shape, "a máscara", diagnosis, **{"where": "a máscara", **data})
    got = _bool(actual)
    if idx := _first(got != expected):
        if known is None:
            finding = c.find(*finders)
            if finding is not None:
                diagnosis = finding.cause
                data = {"kind": finding.kind, "mistake": finding.id, "cause": finding.cause}
        c.fail(
            f"Valores errados em {int((got != expected).sum())} de {got.numel()} posições. Primeira no "
            f"índice {idx}: esperado {bool(expected[idx])}, obtido {bool(got[idx])}.\n"
            f"Esperado (1 = pode atender):\n{_grid(expected)}\nObtido:\n{_grid(got)}",
            diagnosis,
            **{"kind": "valores", "where": "a máscara", **data},
        )
    c.dtype(actual, torch.bool, "a máscara", FLOAT_HINT, kind="dtype", mistake="mascara-nao-booleana")


def _same_values_other_shape(actual: torch.Tensor, expected: torch.Tensor) -> Finding | None:
    """Os valores certos noutra forma: eixos de tamanho 1 a mais ou a menos, ou a máscara já difundida."""
    got, shape = _bool(actual), tuple(expected.shape)
    squeezed = got.numel() == expected.numel() and torch.equal(got.reshape(-1), expected.reshape(-1))
    try:
        spread = torch.equal(got, expected.expand(got.shape))
    except RuntimeError:
        spread = False
    if spread and got.numel() > expected.numel():
        text = (
            f"os valores estão certos, mas a máscara já foi difundida (*broadcast*) para {tuple(got.shape)}; "
            f"devolva a forma {shape} e deixe a difusão para quem a usa."
        )
        return Finding("propriedade", "forma-difundida", text)
    if squeezed and [n for n in got.shape if n != 1] == [n for n in shape if n != 1]:
        text = f"os valores estão certos, mas os eixos de tamanho 1 não: a forma pedida é {shape}."
        return Finding("propriedade", "forma-eixos-de-tamanho-1", text)
    return None


def _mask_properties(
    got: torch.Tensor, expected: torch.Tensor, ids: torch.Tensor | None, pad: int, causal: bool
) -> Finding | None:
    """A primeira propriedade do enunciado que a máscara quebra (sem dizer a causa)."""
    T = expected.size(-1)
    i, j = torch.arange(expected.size(-2))[:, None], torch.arange(T)[None, :]
    future = (j > i) if causal else torch.zeros(expected.shape[-2:], dtype=torch.bool)
    if causal and (idx := _first(got & future.expand_as(got))):
        text = (
            f"a máscara deixa uma consulta ver o futuro: no índice {idx}, a consulta {idx[-2]} vê a chave "
            f"{idx[-1]} (j > i); a parte causal é j ≤ i."
        )
        return Finding("propriedade", "causalidade", text)
    if ids is not None:
        keys = (ids == pad)[:, None, None, :].expand_as(got)
        if idx := _first(got & keys):
            text = (
                f"uma chave de padding ficou liberada: no índice {idx}, a chave {idx[-1]} do exemplo "
                f"{idx[0]} é o pad ({pad})."
            )
            return Finding("propriedade", "padding-liberado", text)
    blocked = expected & ~got
    if ids is not None and causal and bool(blocked.any()):
        pad_rows = (ids == pad)[:, None, :, None].expand_as(got)
        if bool((blocked & ~pad_rows).sum() == 0):
            text = (
                "as linhas das consultas de padding ficaram bloqueadas (só elas); aqui só as CHAVES de "
                "padding (colunas) são bloqueadas, e a consulta de um pad ainda vê os tokens reais "
                "anteriores."
            )
            return Finding("propriedade", "consultas-de-padding-bloqueadas", text)
    if idx := _first(blocked):
        on_diagonal = bool((blocked & (i == j).expand_as(blocked)).sum() == blocked.sum()) and causal
        if on_diagonal:
            text = (
                "a diagonal ficou bloqueada: cada posição também precisa ver a si mesma (j ≤ i, com j = i)."
            )
            return Finding("propriedade", "diagonal-bloqueada", text)
        text = f"uma posição permitida ficou bloqueada: no índice {idx}, esperado True."
        return Finding("propriedade", "permitida-bloqueada", text)
    return None


def _diagonal_fit(got: torch.Tensor, expected: torch.Tensor, keys: torch.Tensor | None):
    """(lado, k) com que a máscara do aluno é a causal deslocada: j ≤ i + k ("inferior") ou j ≥ i + k."""
    T = expected.size(-1)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    for k in (1, -1, 2, -2, 0):
        for side, tri in (("inferior", j <= i + k), ("superior", j >= i + k)):
            candidate = tri if keys is None else (tri & keys)
            if tuple(candidate.shape) != tuple(got.shape) and keys is None:
                continue
            try:
                candidate = candidate.expand(got.shape)
            except RuntimeError:
                continue
            if torch.equal(got, candidate) and not torch.equal(candidate, expected.expand(got.shape)):
                return side, k
    return None


def _diagonal_finder(c: Check, got, expected, again: _Again, keys_of: Callable):
    """O deslocamento da diagonal (j ≤ i + k) ajustado à máscara do aluno e conferido no segundo caso."""

    def find() -> Finding | None:
        fit = _diagonal_fit(got, expected, keys_of(expected, False))
        if fit is None:
            return None
        second = again.run()
        if second is None or _diagonal_fit(_bool(second[0]), second[1], keys_of(second[1], True)) != fit:
            return None
        side, k = fit
        rule = f"j ≤ i{k:+d}" if side == "inferior" else f"j ≥ i{k:+d}"
        rule = rule.replace("+0", "").replace("+", " + ").replace("-", " − ")
        shift = f", diagonal deslocada de {k}" if k else ""
        text = (
            f"sua parte causal libera {rule} (o triângulo {side.upper()}{shift}); "
            "a pedida é j ≤ i: cada posição vê a si mesma e as anteriores."
        )
        return Finding("parametro", "diagonal-deslocada", text)

    return find


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
    c.expect(
        isinstance(out, torch.Tensor) and _device(out).split(":")[0] == device,
        where,
        hint,
        kind="dispositivo",
        mistake="dispositivo-pedido",
    )


# ---------------------------------------------------------------- causal_mask


def _causal_mistakes(T: int) -> Mistakes:
    ones = torch.ones(T, T, dtype=torch.bool)
    return {
        "triangulo-superior": (
            "o triângulo SUPERIOR (cada posição veria o futuro): use o inferior, `tril`",
            ones.triu(),
        ),
        "sem-diagonal": (
            "a máscara SEM a diagonal: cada posição também precisa ver a si mesma",
            ones.tril(-1),
        ),
        "convencao-invertida": (
            "a convenção invertida (True = bloqueado, a do `attn_mask` do `nn.MultiheadAttention`); "
            "aqui True = pode atender",
            ones.triu(1),
        ),
        "toda-true": ("a máscara toda True: nada foi bloqueado", ones),
        "eixos-extras": (
            "a máscara causal com eixos extras (1, 1, T, T): aqui a forma é (T, T), e quem junta "
            "os eixos é a difusão (*broadcasting*)",
            ones.tril()[None, None],
        ),
        "eixo-extra": ("a máscara com um eixo extra (1, T, T): a forma é (T, T)", ones.tril()[None]),
    }


def _causal_case(c: Check, fn: Callable, T: int, **kwargs) -> torch.Tensor:
    c.case(f"causal_mask({', '.join([str(T), *(f'{k}={v!r}' for k, v in kwargs.items())])})")
    mask = c.call(fn, T, **kwargs)
    expected = _causal_oracle(T)
    T2 = T + 3
    again = _Again(c, fn, (T2,), _causal_oracle(T2), _causal_mistakes(T2))
    finders = ()
    if isinstance(mask, torch.Tensor) and tuple(mask.shape) == (T, T):
        got = _bool(mask)
        finders = (
            _diagonal_finder(c, got, expected, again, lambda e, second: None),
            lambda: _mask_properties(got, expected, None, 0, True),
        )
    _expect_mask(c, mask, expected, _causal_mistakes(T), again, finders)
    return mask


@CAUSAL.visible_check
def check_causal_mask(fn: Callable) -> None:
    """Testes visíveis de ``causal_mask``."""
    with CAUSAL.check() as c:
        for T in (4, 1):
            _causal_case(c, fn, T)
        mask = _causal_case(c, fn, 6, device="cpu")
        where = _device(mask)
        c.expect(
            where.split(":")[0] == "cpu",
            f"A máscara está em {where}, mas foi pedido 'cpu'.",
            kind="dispositivo",
            mistake="dispositivo-pedido",
        )
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


def _pad_id_ignored(mask_with_pad_0: torch.Tensor, pad_id: int) -> Mistakes:
    name = f"a máscara com o pad fixo em 0: o argumento `pad_id` (aqui {pad_id}) foi ignorado"
    return {"pad-id-ignorado": (name, mask_with_pad_0)} if pad_id != 0 else {}


def _padding_mistakes(ids: torch.Tensor, pad_id: int) -> Mistakes:
    real = ids != pad_id
    keys, both = real[:, None, None, :], (real[:, :, None] & real[:, None, :])[:, None]
    return {
        **_pad_id_ignored((ids != 0)[:, None, None, :], pad_id),
        "padding-invertido": (
            "a máscara invertida: True nos pads; aqui True = token real (pode atender)",
            ~keys,
        ),
        "forma-b-t": ("a forma (B, T), sem os eixos das cabeças e das consultas: use (B, 1, 1, T)", real),
        "forma-b-1-t": ("a forma (B, 1, T): falta um eixo; use (B, 1, 1, T)", real[:, None, :]),
        "padding-nas-consultas": (
            "a forma (B, 1, T, 1): o eixo do comprimento ficou no lugar das CONSULTAS; "
            "o padding bloqueia CHAVES (o último eixo)",
            real[:, None, :, None],
        ),
        "cinco-eixos": (
            "a forma (B, 1, 1, 1, T) com 5 eixos (um `unsqueeze` a mais)",
            real[:, None, None, None, :],
        ),
        "bloqueia-consultas": (
            "a máscara (B, 1, T, T) que bloqueia também as consultas (linhas) de padding; "
            "aqui só as chaves são bloqueadas, forma (B, 1, 1, T)",
            both,
        ),
    }


def _decoder_mistakes(ids: torch.Tensor, pad_id: int) -> Mistakes:
    B, T = ids.shape
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    keys = (ids != pad_id)[:, None, None, :]  # (B, 1, 1, T)
    queries = (ids != pad_id)[:, None, :, None]  # (B, 1, T, 1)
    full = (B, 1, T, T)
    return {
        **_pad_id_ignored((causal & (ids != 0)[:, None, None, :]).expand(full), pad_id),
        "ou-no-lugar-de-e": (
            "causal OU padding (`|`); as duas restrições valem juntas: use E (`&`)",
            (causal | keys).expand(full),
        ),
        "so-causal": ("só a máscara causal: o padding foi esquecido", causal.expand(full)),
        "so-causal-t-t": ("só a máscara causal, na forma (T, T): falta o padding e o eixo do lote", causal),
        "so-padding": ("só a máscara de padding: a causal foi esquecida", keys.expand(full)),
        "triangulo-superior": ("causal E padding com o triângulo SUPERIOR", (causal.T & keys).expand(full)),
        "sem-diagonal": ("causal (sem a diagonal) E padding", (causal.tril(-1) & keys).expand(full)),
        "padding-invertido": (
            "causal E padding com o padding invertido (True nos pads)",
            (causal & ~keys).expand(full),
        ),
        "bloqueia-consultas": (
            "causal E padding de chaves E de consultas: as linhas dos pads ficam todas bloqueadas; "
            "aqui só as chaves (colunas) são bloqueadas",
            causal & keys & queries,
        ),
        "forma-b-t-t": ("a forma (B, T, T), sem o eixo das cabeças: use (B, 1, T, T)", (causal & keys)[:, 0]),
        "cinco-eixos": (
            "a forma (B, 1, 1, T, T) com 5 eixos — o erro clássico de juntar uma máscara já (B, 1, 1, T) "
            "com `unsqueeze` a mais",
            (causal & keys)[:, None],
        ),
    }


def _other_ids(c: Check, ids: torch.Tensor, pad: int, seed: int) -> torch.Tensor:
    """Um segundo lote, com outros tamanhos e valores e o mesmo ``pad``: padding à direita e à esquerda."""
    B, T = ids.size(0) + 1, ids.size(1) + 2
    other = torch.randint(0, 9, (B, T), generator=c.gen(seed))
    other = torch.where(other == pad, other + 1, other)
    other[0, -2:] = pad
    other[1, :1] = pad
    return other


def _upstream(fn, name: str):
    """A resposta do aluno a um exercício anterior (``name``), vista de onde ``fn`` foi definida (ou None).

    No juiz, pelo nome no kernel; ao estudar, nos globais da função (o notebook).
    """
    if isinstance(fn, Remote):
        return Remote(name)
    scope = getattr(fn, "__globals__", None)
    found = scope.get(name) if isinstance(scope, dict) else None
    return found if callable(found) and found is not fn else None


def _upstream_parts(c: Check, fn, ids: torch.Tensor, pad: int) -> dict:
    """As máscaras anteriores do aluno neste caso: nome -> (resposta, esperada, erros conhecidos)."""
    T, parts = ids.size(1), {}
    for name, args, expected, mistakes in (
        ("causal_mask", (T,), _causal_oracle(T), _causal_mistakes(T)),
        ("padding_mask", (ids, pad), _decoder_oracle(ids, pad, False), _padding_mistakes(ids, pad)),
    ):
        upstream = _upstream(fn, name)
        if upstream is None:
            continue
        response = c.run(upstream, args)
        if response.error is not None and (
            response.error.get("stub") or response.error.get("type") == "NameError"
        ):
            continue
        parts[name] = (response, expected, mistakes)
    return parts


def _wrong(response, expected: torch.Tensor) -> bool:
    value = response.value
    if response.error is not None:
        return True
    return not (_equal(value, expected) and value.dtype == torch.bool)


def _explains(answer, parts: dict, ids: torch.Tensor, pad: int) -> list[str]:
    """As máscaras anteriores erradas que, combinadas como pede o enunciado, dão a resposta do aluno.

    ``answer`` é a resposta de ``decoder_self_mask`` (``Response``). A combinação usa as máscaras do
    aluno nas erradas e as certas nas outras; uma exceção conta se é a mesma (tipo e mensagem).
    """
    wrong = [n for n, (r, e, _) in parts.items() if _wrong(r, e)]
    if not wrong:
        return []
    errors = [parts[n][0].error for n in wrong if parts[n][0].error is not None]
    if errors:
        ok = answer.error is not None and any(
            (e.get("type"), e.get("message")) == (answer.error.get("type"), answer.error.get("message"))
            for e in errors
        )
        return wrong if ok else []
    T = ids.size(1)
    causal = parts["causal_mask"][0].value if "causal_mask" in wrong else _causal_oracle(T)
    pad_mask = parts["padding_mask"][0].value if "padding_mask" in wrong else _decoder_oracle(ids, pad, False)
    combined = exception_of(lambda: pad_mask & causal)
    if combined is not None:
        return wrong if same_exception(answer.error, combined) else []
    value = pad_mask & causal
    actual = answer.value
    same = answer.error is None and _equal(actual, value) and actual.dtype == value.dtype
    return wrong if same else []


def _upstream_finder(
    c: Check, fn, answer, ids: torch.Tensor, pad: int, args2: Callable[[torch.Tensor], tuple]
):
    """O erro está em `causal_mask` ou `padding_mask`: a resposta é a combinação certa das máscaras erradas
    do aluno, aqui e num segundo lote com outros tamanhos."""

    def find() -> Finding | None:
        parts = _upstream_parts(c, fn, ids, pad)
        names = _explains(answer, parts, ids, pad)
        if not names:
            return None
        ids2 = _other_ids(c, ids, pad, 6100 + ids.numel())
        answer2 = c.run(fn, args2(ids2))
        parts2 = _upstream_parts(c, fn, ids2, pad)
        if _explains(answer2, parts2, ids2, pad) != names:
            return None
        name = names[0]
        response, expected, mistakes = parts[name]
        response2, expected2, mistakes2 = parts2[name]
        if response.error is not None:
            what = f"ela levanta {response.error.get('type')}: {response.error.get('message')}"
            key = "excecao"
        else:
            key = _known(response.value, expected, mistakes)
            if key is not None and _known(response2.value, expected2, mistakes2) != key:
                key = None
            if key is not None:
                what = f"ela coincide com {_named(key, mistakes)}"
            elif _equal(response.value, expected):
                what = "os valores dela estão certos, mas ela não é booleana (`dtype=torch.bool`)"
                key = "mascara-nao-booleana"
            else:
                what = "ela devolve uma máscara diferente da pedida (o teste dela mostra onde)"
                key = "valores"
        also = f" (e também em `{names[1]}`)" if len(names) > 1 else ""
        text = (
            f"o erro está em `{name}`{also}, que a sua `decoder_self_mask` usa: {what}. "
            f"Corrija `{name}` primeiro."
        )
        return Finding("anterior", f"erro-em-{name}/{key}", text)

    return find


def _ids_case(c: Check, fn: Callable, ids: torch.Tensor, pad_id: int | None = None, extra: str = "") -> None:
    """``padding_mask`` ou ``decoder_self_mask`` (pelo nome do ``Check``): entrada intacta e máscara.

    Em ``decoder_self_mask``, uma falha procura antes o erro nas máscaras anteriores do aluno
    (``causal_mask``, ``padding_mask``): se a resposta é a combinação certa delas, o erro está lá.
    """
    pad = 0 if pad_id is None else pad_id
    c.case(f"token_ids = {ids.tolist()}, pad_id = {pad}{extra}")
    causal = c.name == DECODER.name
    build = _decoder_mistakes if causal else _padding_mistakes

    def args(t: torch.Tensor) -> tuple:
        return (t,) if pad_id is None else (t, pad_id)

    with c.untouched(token_ids=ids):
        answer = c.run(fn, args(ids))
    try:
        c.raise_for(answer)
        mask = answer.value
        expected = _decoder_oracle(ids, pad, causal)
        ids2 = _other_ids(c, ids, pad, 6000 + ids.numel())
        again = _Again(c, fn, args(ids2), _decoder_oracle(ids2, pad, causal), build(ids2, pad))
        finders = ()
        if isinstance(mask, torch.Tensor) and tuple(mask.shape) == tuple(expected.shape):
            got = _bool(mask)

            def keys_of(e: torch.Tensor, second: bool) -> torch.Tensor:
                return (ids2 if second else ids).ne(pad)[:, None, None, :]

            finders = (
                *((_diagonal_finder(c, got, expected, again, keys_of),) if causal else ()),
                lambda: _mask_properties(got, expected, ids, pad, causal),
            )
        _expect_mask(c, mask, expected, build(ids, pad), again, finders)
    except CheckFailure as failure:
        if not causal or failure.data.get("kind") in ("nao_implementado", "referencia"):
            raise
        finding = c.find(_upstream_finder(c, fn, answer, ids, pad, args))
        if finding is None:
            raise
        raise c.diagnosed(failure, finding) from None


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


def _softmax_mistakes(scores: torch.Tensor, mask: torch.Tensor | None) -> dict[str, tuple[str, torch.Tensor]]:
    """Os erros conhecidos: id estável -> (nome, os pesos que esse erro dá)."""
    dim_2 = ("o softmax no eixo das consultas (dim=-2) em vez do das chaves (dim=-1)",)
    if mask is None:
        return {"softmax-dim-2": (*dim_2, scores.softmax(-2))}
    inf, big, blocked = scores.masked_fill(~mask, float("-inf")), scores.masked_fill(~mask, -1e9), ~mask
    return {
        "nan-linhas-vazias": (
            "o softmax com -inf sem tratar as linhas totalmente bloqueadas (NaN nelas)",
            inf.softmax(-1),
        ),
        "linhas-vazias-uniformes": (
            "o softmax com -1e9 (ou outro negativo grande) sem zerar as linhas totalmente "
            "bloqueadas: elas ficam uniformes (1/T em cada posição)",
            big.softmax(-1),
        ),
        "mascara-ignorada": ("o softmax com a máscara ignorada", scores.softmax(-1)),
        "mascara-invertida": (
            "a máscara invertida: você bloqueou as posições True, mas aqui True = pode atender",
            _softmax_oracle(scores, blocked),
        ),
        "bloqueadas-com-zero": (
            "as posições bloqueadas preenchidas com 0 em vez de -inf (exp(0) = 1 ainda dá peso a elas)",
            scores.masked_fill(blocked, 0.0).softmax(-1),
        ),
        "zerado-depois": (
            "o softmax SEM máscara e só depois zerado nas posições bloqueadas (as linhas deixam de somar 1)",
            scores.softmax(-1).masked_fill(blocked, 0.0),
        ),
        "softmax-dim-2": (*dim_2, big.softmax(-2).masked_fill(blocked, 0.0)),
        "log-softmax": (
            "o log do softmax (`log_softmax`): os pesos são probabilidades (0 nas bloqueadas), "
            "não log-probabilidades (-∞ nelas)",
            inf.log_softmax(-1),
        ),
    }


def _tried(scores: torch.Tensor, mask: torch.Tensor | None, extra: str = "") -> str:
    m = "sem máscara" if mask is None else f"máscara {tuple(mask.shape)}"
    return f"scores {tuple(scores.shape)} {dtype_name(scores.dtype)}, {m}{extra}"


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and a.shape == b.shape
        and torch.allclose(a.detach().double(), b.double(), atol=1e-6, equal_nan=True)
    )


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


class _SecondScores:
    """O segundo caso do softmax: outros scores (mesma forma, mesma máscara), pedido só se preciso."""

    def __init__(self, c: Check, fn: Callable, scores: torch.Tensor, mask: torch.Tensor | None):
        self.c, self.fn, self.mask = c, fn, mask
        self.scores = torch.randn(scores.shape, generator=c.gen(7000 + scores.numel()), dtype=scores.dtype)
        self.scores = self.scores * (scores.abs().max().clamp_min(1.0) / 2)
        self._done, self._value = False, None

    def run(self) -> torch.Tensor | None:
        if not self._done:
            self._done = True
            response = self.c.run(self.fn, (self.scores, self.mask))
            if response.error is None and isinstance(response.value, torch.Tensor):
                if response.value.shape == self.scores.shape:
                    self._value = response.value.detach()
        return self._value


def _fit_fill(w: torch.Tensor, scores: torch.Tensor, mask: torch.Tensor) -> list[tuple[str, float]]:
    """Os (modo, v) que reproduzem os pesos: as bloqueadas recebem o score fixo v (``"fixo"``) ou
    score + v (``"soma"``).

    Só nas linhas com alguma posição permitida (as vazias têm regra própria). O logsumexp de cada
    linha sai das posições permitidas (scores conhecidos); dele, os scores que as bloqueadas receberam.
    """
    allowed = mask.expand(scores.shape)
    rows = allowed.any(-1)
    wd, z = w.detach().double(), scores.double()
    seen = ~allowed & (wd > 0) & rows[..., None]
    if not bool(seen.any()) or not bool((wd[allowed] > 0).all()):
        return []
    log_w = wd.clamp_min(1e-300).log()
    n = allowed.sum(-1, keepdim=True).clamp_min(1)
    lse = torch.where(allowed, z - log_w, 0.0).sum(-1, keepdim=True) / n
    logits = log_w + lse
    found = []
    for mode, raw in (("fixo", logits[seen].median()), ("soma", (logits - z)[seen].median())):
        raw = float(raw)
        if not math.isfinite(raw):
            continue
        for value in dict.fromkeys((float(round(raw)), float(f"{raw:.1g}"), raw)):
            blocked = torch.full_like(z, value) if mode == "fixo" else z + value
            fitted = torch.where(allowed, z, blocked).to(scores.dtype).softmax(-1).double()
            # os pesos pequenos das bloqueadas também relativamente (score fixo ≠ score somado)
            close = ((fitted - wd).abs() <= 1e-2 * wd + 1e3 * torch.finfo(scores.dtype).tiny)[seen]
            if _same(wd[rows], fitted[rows]) and bool(close.all()):
                found.append((mode, value))
                break
    return found


def _fill_finder(c: Check, w, scores, mask, second: _SecondScores):
    def find() -> Finding | None:
        fits = _fit_fill(w, scores, mask)
        again = second.run() if fits else None
        fits2 = [] if again is None else _fit_fill(again, second.scores, mask)
        both = [
            (mode, value)
            for mode, value in fits
            for mode2, value2 in fits2
            if mode2 == mode and abs(value2 - value) <= 1e-3 * max(1, abs(value))
        ]
        if not both:
            return None
        mode, value = both[0]
        v = br(value, ".4g")
        if len({m for m, _ in both}) > 1:  # pesos pequenos demais para separar "fixo" de "somado"
            text = (
                f"as posições bloqueadas recebem um score finito (cerca de {v}, fixo ou somado ao score) em "
                "vez de -∞: exp dele ainda dá peso a elas; use `float('-inf')`."
            )
        elif mode == "fixo":
            text = (
                f"as posições bloqueadas recebem o score {v}, um número finito, em vez de -∞: "
                f"exp({v}) ainda dá peso a elas; use `float('-inf')` "
                "(e zere as linhas totalmente bloqueadas)."
            )
        else:
            text = (
                f"os scores das posições bloqueadas recebem {v} somado (score {'+' if value >= 0 else '−'} "
                f"{br(abs(value), '.4g')}), e continuam com peso; preencha-as com `float('-inf')`."
            )
        return Finding("parametro", "valor-de-bloqueio", text, "os pesos")

    return find


def _fit_scale(w: torch.Tensor, scores: torch.Tensor, mask: torch.Tensor | None) -> float | None:
    """O fator s com que o softmax mascarado de s·scores reproduz os pesos (mínimos quadrados do log)."""
    allowed = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand(scores.shape)
    wd, z = w.detach().double(), scores.double()
    if not bool((wd[allowed] > 0).all()) or not bool(torch.isfinite(wd).all()):
        return None
    log_w, z = (torch.where(allowed, t, 0.0) for t in (wd.clamp_min(1e-300).log(), z))
    n = allowed.sum(-1, keepdim=True).clamp_min(1)
    centred = [torch.where(allowed, t - t.sum(-1, keepdim=True) / n, 0.0) for t in (log_w, z)]
    den = float((centred[1] ** 2).sum())
    if den <= 0:
        return None
    scale = float((centred[0] * centred[1]).sum()) / den
    if not math.isfinite(scale) or abs(scale - 1) < 1e-3:
        return None
    for value in dict.fromkeys((float(f"{scale:.3g}"), scale)):
        if _same(wd, _softmax_oracle(scores * value, mask).double()):
            return value
    return None


def _scale_finder(c: Check, w, scores, mask, second: _SecondScores):
    def find() -> Finding | None:
        scale = _fit_scale(w, scores, mask)
        again = second.run() if scale is not None else None
        scale2 = None if again is None else _fit_scale(again, second.scores, mask)
        if scale is None or scale2 is None or abs(scale2 - scale) > 1e-3 * abs(scale):
            return None
        text = (
            f"seus pesos são o softmax mascarado de {br(scale, '.4g')}·scores: os scores foram multiplicados "
            "(ou divididos) antes do softmax; aqui eles entram como vieram."
        )
        return Finding("parametro", "escala-dos-scores", text, "os pesos")

    return find


def _masked_softmax_on(scores: torch.Tensor, mask: torch.Tensor | None, axis: int) -> torch.Tensor:
    """O softmax mascarado certo, mas normalizando o eixo ``axis`` (posições bloqueadas = 0)."""
    allowed = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand(scores.shape)
    filled = scores.masked_fill(~allowed, float("-inf"))
    w = filled.softmax(axis)
    return torch.nan_to_num(w, nan=0.0).masked_fill(~allowed, 0.0)


def _axis_finder(c: Check, w, scores, mask, second: _SecondScores):
    def find() -> Finding | None:
        for axis in range(scores.dim() - 1):
            if not _same(w, _masked_softmax_on(scores, mask, axis)):
                continue
            again = second.run()
            if again is not None and _same(again, _masked_softmax_on(second.scores, mask, axis)):
                what = "o das consultas" if axis == scores.dim() - 2 else f"o eixo {axis}"
                text = (
                    f"seu softmax normaliza o eixo {axis - scores.dim()} ({what.removeprefix('o ')}), "
                    "e não o das chaves (`dim=-1`): cada linha dos pesos é uma distribuição sobre as chaves."
                )
                return Finding("parametro", "eixo-do-softmax", text, "os pesos")
        return None

    return find


def _rows_finder(w, mask, scores):
    """As propriedades dos pesos: ≥ 0, e cada linha com alguma posição permitida soma 1."""

    def find() -> Finding | None:
        wd = w.detach().double()
        if idx := _first(wd < 0):
            return Finding(
                "propriedade", "pesos-nao-negativos", f"há pesos negativos (o primeiro no índice {idx})."
            )
        rows = (
            torch.ones(wd.shape[:-1], dtype=torch.bool) if mask is None else mask.expand(scores.shape).any(-1)
        )
        sums = wd.sum(-1)
        off = rows & ~torch.isclose(sums, torch.ones_like(sums), rtol=1e-4, atol=1e-5)
        if idx := _first(off):
            text = (
                f"as linhas com alguma posição permitida devem somar 1; a linha {idx} soma "
                f"{br(float(sums[idx]), '.6g')}."
            )
            return Finding("propriedade", "linhas-somam-1", text)
        return None

    return find


def _softmax_case(c: Check, fn: Callable, scores: torch.Tensor, mask: torch.Tensor | None, extra="") -> None:
    """Chamada, entradas intactas, forma, dtype, NaN, linhas vazias, bloqueadas = 0, valores.

    Um erro conhecido só é nomeado se dá os pesos do aluno aqui e com outros scores; sem ele, o
    diagnóstico vem do valor finito ajustado às posições bloqueadas, do eixo do softmax ou da primeira
    propriedade dos pesos que quebra.
    """
    c.case(_tried(scores, mask, extra))
    expected = _softmax_oracle(scores, mask)
    with c.untouched(scores=scores, mask=mask):
        w = c.call(fn, scores, mask, hint_on_error=NONE_HINT if mask is None else KEEPDIM_HINT)
    c.shape(w, scores.shape, "os pesos", where="os pesos")
    hint = "a função deve preservar o dtype de `scores` (float32 ou float64)."
    c.dtype(w, scores.dtype, "os pesos", hint, kind="dtype", mistake="dtype-dos-scores")
    # só erros que, nestas entradas, dão um resultado diferente do certo podem ser citados
    mistakes = [
        Mistake(name, value, key)
        for key, (name, value) in _softmax_mistakes(scores, mask).items()
        if not _same(value, expected)
    ]
    second = _SecondScores(c, fn, scores, mask)

    def confirm(mistake: Mistake) -> bool:
        again = second.run()
        if again is None:
            return False
        value = _softmax_mistakes(second.scores, mask)[mistake.key][1]
        return _same(again, value) and not _same(value, _softmax_oracle(second.scores, mask))

    if mask is not None:
        allowed, w_, T = mask.expand(scores.shape), w.detach(), scores.size(-1)
        empty = ~allowed.any(-1)  # (..., Tq): linhas totalmente bloqueadas
        nan_rows = torch.isnan(w_).any(-1)
        c.expect(
            not nan_rows.any(),
            f"A saída tem NaN em {int(nan_rows.sum())} linha(s), a primeira na linha {_first(nan_rows)}.",
            NAN_HINTS[bool((nan_rows <= empty).all())],
            kind="nan",
            mistake="nan-linhas-vazias" if bool((nan_rows <= empty).all()) else "nan-linhas-com-permitidas",
        )
        c.expect(
            not (empty.any() and torch.allclose(w_[empty], torch.full_like(w_[empty], 1 / T), atol=1e-6)),
            f"As {int(empty.sum())} linha(s) totalmente bloqueadas saíram uniformes (1/{T} em cada posição).",
            "pesos uniformes nas linhas totalmente bloqueadas: é o que acontece com -1e9 no lugar de -inf. "
            "Uma consulta que não pode ver nada deve receber só zeros.",
            kind="propriedade",
            mistake="linhas-vazias-uniformes",
        )
        worst = w_.masked_select(~allowed).abs().max().item() if not allowed.all() else 0.0
        if worst:
            known = next((m for m in mistakes if _same(w_, m.value) and confirm(m)), None)
            finding = None if known else c.find(_fill_finder(c, w, scores, mask, second))
            data = (
                {"mistake": known.key}
                if known
                else {"mistake": finding.id, "cause": finding.cause}
                if finding
                else {"mistake": "bloqueadas-com-peso"}
            )
            c.expect(
                False,
                f"Posições bloqueadas receberam peso não nulo (maior: {br(worst, '.3g')}); "
                "devem ser exatamente 0.",
                f"a saída coincide com {known.name}." if known else finding.cause if finding else None,
                kind="valores" if known else finding.kind if finding else "propriedade",
                where="os pesos",
                **data,
            )
    with c.diagnosing(
        _axis_finder(c, w, scores, mask, second),
        _scale_finder(c, w, scores, mask, second),
        _rows_finder(w, mask, scores),
    ):
        c.close(w, expected, "os pesos", mistakes, confirm=confirm)


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
