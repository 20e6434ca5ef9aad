"""Verificações do capítulo 1: embeddings de tokens e codificações de posição.

Oráculos independentes do código do aluno: a senoidal com laços e ``math.sin``/``math.cos`` em
float64; a tabela do próprio ``nn.Embedding`` do aluno indexada à mão (``weight[ids]``) e a média e
o desvio de uma tabela grande (64 mil valores: o desvio medido erra menos de 1 %, a tolerância é de
10 %); o dropout pelo ``F.dropout`` do PyTorch sob o mesmo estado do gerador que a resposta usou (a
mesma máscara); RoPE com cada par como número complexo vezes e^{i·p·θ}; ALiBi com laços. Cada erro
conhecido é calculado nas mesmas entradas, para que a mensagem possa nomeá-lo. O isolamento é o do
contexto :class:`feedback.Check`; cada módulo do aluno é construído com semente própria.

Toda conversa com a resposta do aluno é um pedido (``c.call``, ``c.run``, ``c.describe``,
``c.method``): os módulos ficam do lado do aluno (uma referência, :class:`wire.Handle`), e o que
volta são dados — a saída, a tabela ``pe``, os pesos do ``nn.Embedding``, os gradientes. Assim a
mesma verificação roda ao estudar e no juiz da correção.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from .. import positional as reference
from .. import wire
from ..exercises import Exercise, GradedCell
from ..feedback import Check, CheckFailure, Finding, Mistake, _matches, describe, slug
from ..numbers import br
from ..probe import Remote
from ..runtime import dtype_name
from ..wire import Handle

CHAPTER = "01_embeddings_posicao"


def _exercise(ref, grade_id: str, points: float = 1, hidden_points: float = 1) -> Exercise:
    cells = (
        GradedCell(f"test_{grade_id}", points),
        GradedCell(f"test_{grade_id}_hidden", hidden_points, True),
    )
    return Exercise(CHAPTER, ref.__name__, ref, cells=cells)


TOK = _exercise(reference.TokenEmbedding, "token_embedding")
SIN = _exercise(reference.sinusoidal_encoding, "sinusoidal_encoding")
SPE = _exercise(reference.SinusoidalPositionalEncoding, "sinusoidal_module", 1, 2)
LPE = _exercise(reference.LearnedPositionalEmbedding, "learned_module")
ROPE = _exercise(reference.apply_rope, "apply_rope", 2, 2)
SLOPES = _exercise(reference.alibi_slopes, "alibi_slopes")
BIAS = _exercise(reference.alibi_bias, "alibi_bias")

# A tabela senoidal do aluno pode ser calculada em float32 (o erro de arredondamento do
# ângulo cresce com p): toleramos 1e-4, muito abaixo de qualquer erro de fórmula (ordem 1).
SIN_TOL = {"rtol": 1e-4, "atol": 1e-4}

INIT = "`nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model ** -0.5)`"
HINT = {  # os diagnósticos prováveis, pelo erro que os provoca
    "too long": "sequência mais longa que max_len não foi recusada com ValueError: compare o comprimento "
    "de x com max_len e levante `ValueError` com uma mensagem em português.",
    "odd": "d_model ímpar não foi recusado com ValueError.",
    "rezero": "a tabela foi sorteada de novo depois de criada: o `nn.init.normal_` sobrescreve a linha do "
    "padding — zere-a de novo, dentro de `with torch.no_grad():`.",
    "padding": "`padding_idx` ignorado: passe-o ao `nn.Embedding` (que zera e não treina essa linha).",
    "N(0, 1)": f"é a inicialização padrão do `nn.Embedding`, N(0, 1): sorteie a tabela de novo com {INIT}.",
    "1/d": "o desvio saiu 1/d_model; o pedido é 1/√d_model (variância 1/d_model).",
    "init": f"sorteie com {INIT}.",
    "transposed": "a tabela saiu transposta: linhas são posições, colunas são dimensões.",
    "batched": "a tabela tem um eixo de lote a mais: devolva (max_len, d_model).",
    "numpy": "se você usou NumPy, converta com `torch.from_numpy(...).float()` — ou use só o PyTorch.",
    "float32": "o enunciado pede float32: crie os tensores com `dtype=torch.float32` ou use `.float()`.",
    "module": "a classe deve herdar de `nn.Module` e chamar `super().__init__()`.",
    "swapped": "os argumentos do `nn.Embedding` estão trocados: primeiro quantas linhas, depois a largura.",
    "parameter": 'registre-a com `self.register_buffer("pe", tabela)` em vez de `nn.Parameter`.',
    "buffer": 'registre a tabela com `self.register_buffer("pe", tabela)`: ela vai junto com `.to(device)`.',
    "once": "o dropout deve ser aplicado UMA vez, à soma x + PE (não só a x); confira também se o argumento "
    "`dropout` foi usado.",
    "odd d": "d ímpar não foi recusado com ValueError: não dá para formar pares.",
    "positions": "`positions` com comprimento diferente de T não foi recusado com ValueError.",
}


# ---------------------------------------------------------------- utilidades

# Os nomes qualificados das classes que a verificação procura no objeto do aluno (``Handle.is_a``).
MODULE = f"{nn.Module.__module__}.{nn.Module.__qualname__}"
EMBEDDING = f"{nn.Embedding.__module__}.{nn.Embedding.__qualname__}"


def _oracle_seed(seed: int) -> None:
    """Semente do gerador global da CPU DESTE lado, antes de sortear o dropout do oráculo.

    O gerador é o emprestado pelo ``Check`` (o da GPU não é tocado). A resposta do aluno roda com a
    mesma semente do lado dela (``c.run(..., seed=...)``): as máscaras coincidem.
    """
    torch.default_generator.manual_seed(seed)


def _br_list(values: torch.Tensor) -> str:
    """Uma lista de números no formato do curso: [0; 1; 0,841471]."""
    return "[" + "; ".join(br(float(v), ".6g") for v in values.tolist()) + "]"


def _x(c: Check, seed: int, shape, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=c.gen(seed), dtype=dtype)


def _value_error(c: Check, tried: str, hint: str, fn: Callable, *args, **kwargs) -> None:
    c.case(tried).raises(ValueError, fn, *args, hint=hint, **kwargs)


def _on_graph(c: Check, out, what: str = "de x") -> None:
    c.expect(
        isinstance(out, torch.Tensor) and wire.info(out).requires_grad,
        f"A saída não está ligada ao grafo de gradientes {what} (não use `.detach()`, `.numpy()`, `.item()`, "
        "nem `torch.no_grad()`).",
    )


def _mistakes(labels: dict, table: Callable[[str], torch.Tensor], dtype=torch.float32) -> list[Mistake]:
    """Um :class:`Mistake` por erro conhecido: ``table(chave)`` é o resultado com esse erro."""
    return [Mistake(label, table(key).to(dtype)) for key, label in labels.items()]


def _build(c: Check, cls: Callable, *args, seed: int = 0, **kwargs) -> Handle:
    """Constrói o módulo do aluno do lado dele, com semente ``seed`` (deslocada nos testes ocultos)."""
    response = c.run(cls, args, kwargs, keep=True, seed=seed + c.seed_offset)
    c.raise_for(response)
    module = response.value
    c.expect(
        isinstance(module, Handle) and module.is_a(MODULE),
        f"Esperava um `nn.Module`; veio {describe(module)}.",
        HINT["module"],
    )
    return module


def _attr(desc: dict, name: str):
    """O valor de um atributo pedido a ``c.describe`` (``None`` se ele não existe)."""
    return desc["attrs"].get(name, {}).get("value")


def _embedding(c: Check, module: Handle, attr: str, num: int, dim: int) -> tuple[torch.Tensor, dict]:
    """Confere ``module.<attr>``, um ``nn.Embedding(num, dim)``; devolve a tabela (dados) e a descrição."""
    fields = ("weight", "num_embeddings", "embedding_dim", "padding_idx")
    desc = c.describe(module, attrs=[attr, *(f"{attr}.{f}" for f in fields)])
    found = desc["attrs"].get(attr, {})
    mro = desc.get("modules", {}).get(attr, {}).get("mro") or [found.get("type")]
    what = describe(found.get("value"))
    c.expect(
        EMBEDDING in mro,
        f"O módulo deveria ter o atributo `{attr}`, um `nn.Embedding`; encontrei {what}.",
        f"crie `self.{attr} = nn.Embedding(...)` no `__init__` (o nome do atributo é avaliado).",
    )
    size = (_attr(desc, f"{attr}.num_embeddings"), _attr(desc, f"{attr}.embedding_dim"))
    body = f"`{attr}` deveria ser `nn.Embedding({num}, {dim})`; é `nn.Embedding({size[0]}, {size[1]})`."
    c.expect(size == (num, dim), body, HINT["swapped"] if size == (dim, num) else None)
    return _attr(desc, f"{attr}.weight"), desc


# ---------------------------------------------------------------- senoidal: oráculo e erros


def _sin_table(max_len: int, d_model: int, variant: str = "certo") -> torch.Tensor:
    """A tabela senoidal com laços (float64). ``variant`` escreve um erro conhecido."""
    table = [[0.0] * d_model for _ in range(max_len)]
    half = d_model // 2
    for p in range(max_len):
        pos = p + 1 if variant == "desde 1" else p
        for j in range(d_model):
            i = j % half if variant == "metades" else j // 2
            exponent = {"i/d": i / d_model, "j/d": j / d_model}.get(variant, 2 * i / d_model)
            angle = pos / 10000.0**exponent
            use_sin = (j < half) if variant == "metades" else (j % 2 == 0)
            if variant == "trocado":
                use_sin = not use_sin
            table[p][j] = math.sin(angle) if use_sin else math.cos(angle)
    return torch.tensor(table, dtype=torch.float64).reshape(max_len, d_model)


SIN_MISTAKES = {
    "trocado": "seno e cosseno trocados (cosseno nas colunas pares, seno nas ímpares)",
    "metades": "as metades concatenadas [senos | cossenos] em vez de pares intercalados (sen 2i, cos 2i+1)",
    "i/d": "o expoente i/d_model em vez de 2i/d_model",
    "j/d": "o expoente com o índice da coluna j (2i+1 no cosseno) em vez de 2i para o par todo",
    "desde 1": "as posições começando em 1 em vez de 0",
}


SIN_IDS = {
    "trocado": "seno-cosseno-trocados",
    "metades": "metades-concatenadas",
    "i/d": "expoente-i-d",
    "j/d": "expoente-j-d",
    "desde 1": "posicoes-desde-1",
}


def _sin_mistakes(max_len: int, d_model: int) -> list[Mistake]:
    mistakes = [
        Mistake(label, _sin_table(max_len, d_model, key).float(), SIN_IDS[key])
        for key, label in SIN_MISTAKES.items()
    ]
    transposed = _sin_table(max_len, d_model).float().T.contiguous()
    return [*mistakes, Mistake("a tabela transposta", transposed, "tabela-transposta")]


def _sin_other(max_len: int, d_model: int) -> tuple[int, int]:
    """Outros tamanhos para o segundo caso (d_model par, diferente; max_len diferente)."""
    return max_len + 3, d_model + 4


def _sin_layouts(table: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """As colunas de seno e de cosseno (T, d/2) em cada arranjo possível da tabela."""
    half = table.size(-1) // 2
    even, odd = table[:, 0::2], table[:, 1::2]
    first, second = table[:, :half], table[:, half:]
    return {
        "intercalado": (even, odd),
        "trocado": (odd, even),
        "metades": (first, second),
        "metades trocadas": (second, first),
    }


def _geometric(omega: torch.Tensor) -> bool:
    """ω_i = ω_0·r^i com ω > 0 (uma escada geométrica, como base^(−2i/d)); com um par só, vale."""
    if omega.numel() < 2:
        return bool(omega[0] > 0)
    if not bool((omega > 0).all()):
        return False
    ratio = omega[1] / omega[0]
    return bool(
        torch.allclose(omega, omega[0] * ratio ** torch.arange(omega.numel(), dtype=omega.dtype), rtol=1e-3)
    )


def _fit_sin(table: torch.Tensor):
    """(arranjo, sinal do seno, deslocamento k, ω (d/2,)): a tabela é sin/cos((p + k)·ω_i) num arranjo?"""
    t = table.detach().double()
    T, d = t.shape
    p = torch.arange(T, dtype=torch.float64)
    for layout, (s, c) in _sin_layouts(t).items():
        if not torch.allclose(s * s + c * c, torch.ones_like(s), atol=1e-3):
            continue
        for sign in (1.0, -1.0):
            phi = torch.atan2(sign * s, c)
            for k in (0, 1, -1, 2):
                pp = p + k
                small = [i for i in range(T) if 0 < abs(pp[i]) <= 3]
                if not small:
                    continue
                t0 = min(small, key=lambda i: abs(pp[i]))
                omega = phi[t0] / pp[t0]
                if float(omega[0]) <= 0:
                    continue
                miss = _wrap(pp[:, None] * omega - phi).abs() > 2e-3 * (1 + T)
                if not bool(miss.any()) and _geometric(omega):
                    return layout, sign, k, omega
    # frequências maiores que 1 dão a volta já na posição 1: as bases que se escrevem sem querer
    i = torch.arange(d // 2, dtype=torch.float64)
    for layout, (s, c) in _sin_layouts(t).items():
        for sign in (1.0, -1.0):
            for k in (0, 1):
                for base in (1e-4, 1e-2):  # 10000^(+2i/d): p multiplicado pela frequência, não dividido
                    omega = base ** (-2 * i / d)
                    a = (p + k)[:, None] * omega
                    if torch.allclose(s, sign * torch.sin(a), atol=1e-3) and torch.allclose(
                        c, torch.cos(a), atol=1e-3
                    ):
                        return layout, sign, k, omega
    return None


def _sin_rule(fit) -> tuple[tuple, str]:
    layout, sign, k, omega = fit
    d = 2 * omega.numel()
    parts = []
    if layout != "intercalado":
        parts.append(
            {
                "trocado": "o cosseno nas colunas pares e o seno nas ímpares",
                "metades": "as metades [senos | cossenos] em vez de pares intercalados",
                "metades trocadas": "as metades [cossenos | senos] em vez de pares intercalados",
            }[layout]
        )
    if sign < 0:
        parts.append("o seno com o sinal trocado (−sen)")
    if k:
        parts.append(f"as posições deslocadas de {k} (p {'+' if k > 0 else '−'} {abs(k)}, começando em {k})")
    scale = float(omega[0])
    b_eff = None
    if d >= 4 and float(omega[1]) > 0:
        b_eff = float((omega[1] / scale) ** (-d / 2))
        i = torch.arange(d // 2, dtype=torch.float64)
        if not torch.allclose(omega, scale * b_eff ** (-2 * i / d), rtol=1e-3):
            b_eff = None
    if abs(scale - 1) > 1e-3:
        parts.append(f"ω_0 = {br(scale, '.4g')} (a primeira frequência é 1)")
    if b_eff is not None and abs(b_eff - 10000) > 10:
        note = " (é o que dá o expoente i/d_model em vez de 2i/d_model)" if abs(b_eff - 100) < 0.1 else ""
        if abs(b_eff * 1e4 - 1) < 1e-3:
            note = " (ω_i = 10000^(+2i/d_model): a posição foi multiplicada pela escada, não dividida)"
        parts.append(f"ω_i = {br(b_eff, '.5g')}^(−2i/d_model): a base é {br(b_eff, '.5g')}, não 10000{note}")
    rule = (layout, sign, k, round(scale, 3), None if b_eff is None else round(b_eff, 1))
    return rule, "; ".join(parts)


def _sin_fit_finder(c: Check, fn, table, max_len: int, d_model: int):
    """Os parâmetros da tabela (arranjo, sinal, deslocamento, base), conferidos com outros tamanhos."""

    def find() -> Finding | None:
        fit = _fit_sin(table)
        if fit is None:
            return None
        rule, text = _sin_rule(fit)
        if not text or (rule[-1] is None and d_model >= 4):
            return None
        L2, D2 = _sin_other(max_len, d_model)
        again = _answer_tensor(c, fn, (L2, D2))
        fit2 = None if again is None or tuple(again.shape) != (L2, D2) else _fit_sin(again)
        rule2 = None if fit2 is None else _sin_rule(fit2)[0]
        # a base só entra na comparação quando os dois casos a mostram (com d_model = 2 não há ω_1)
        if (
            rule2 is None
            or rule2[:-1] != rule[:-1]
            or None not in (rule[-1], rule2[-1])
            and rule2[-1] != rule[-1]
        ):
            return None
        return Finding(
            "parametro", "parametros-da-senoidal", f"sua tabela é senoidal, mas com {text}.", "a tabela"
        )

    return find


def _sin_properties(table: torch.Tensor):
    """A primeira propriedade que quebra: valores em [−1, 1]; sen² + cos² = 1 em cada par (2i, 2i+1)."""

    def find() -> Finding | None:
        t = table.detach().double()
        if idx := _first_index(t.abs() > 1 + 1e-6):
            value = br(float(t[idx]), ".6g")
            text = f"senos e cossenos ficam em [−1, 1]; no índice {idx} a tabela vale {value}."
            return Finding("propriedade", "valores-em-menos-1-1", text)
        pairs = t[:, 0::2] ** 2 + t[:, 1::2] ** 2
        if idx := _first_index((pairs - 1).abs() > 1e-3):
            text = (
                "em cada par de colunas (2i, 2i+1), sen² + cos² = 1 (a mesma frequência nas duas); "
                f"na posição {idx[0]}, par {idx[1]}, dá {br(float(pairs[idx]), '.6g')}."
            )
            return Finding("propriedade", "pares-sen-cos", text)
        return None

    return find


def _run_sin(c: Check, fn: Callable, max_len: int, d_model: int) -> torch.Tensor:
    c.case(f"sinusoidal_encoding(max_len={max_len}, d_model={d_model})")
    table = c.call(fn, max_len, d_model)
    c.expect(
        isinstance(table, torch.Tensor),
        f"Esperava um tensor do PyTorch; veio {describe(table)}.",
        HINT["numpy"],
        kind="tipo",
    )
    batched, transposed = table.dim() == 3 and table.size(0) == 1, tuple(table.shape) == (d_model, max_len)
    hint = HINT["batched"] if batched else HINT["transposed"] if transposed else None
    key = "eixo-de-lote" if batched else "tabela-transposta" if transposed else None
    c.shape(
        table, (max_len, d_model), "a tabela", hint, where="a tabela", **({"mistake": key} if key else {})
    )
    c.dtype(table, torch.float32, "a tabela", HINT["float32"], kind="dtype", mistake="dtype-float32")
    expected = _sin_table(max_len, d_model).float()
    L2, D2 = _sin_other(max_len, d_model)
    again = {}

    def confirm(mistake: Mistake) -> bool:
        if "out" not in again:
            again["out"] = _answer_tensor(c, fn, (L2, D2))
        candidate = next(m for m in _sin_mistakes(L2, D2) if m.key == mistake.key)
        return again["out"] is not None and _matches(again["out"].float(), candidate.value, torch.float32)

    with c.diagnosing(_sin_fit_finder(c, fn, table, max_len, d_model), _sin_properties(table)):
        c.close(table, expected, "a tabela", _sin_mistakes(max_len, d_model), confirm=confirm, **SIN_TOL)
    return table


@SIN.visible_check
def check_sinusoidal_encoding(fn: Callable) -> None:
    """Testes visíveis de ``sinusoidal_encoding``."""
    with SIN.check() as c:
        table = _run_sin(c, fn, 4, 6)
        c.case("posição 0").expect(
            bool((table[0, 0::2] == 0).all() and (table[0, 1::2] == 1).all()),
            "Na posição 0 as colunas pares (seno) valem 0 e as ímpares (cosseno) valem 1; "
            f"veio {_br_list(table[0])}.",
            kind="propriedade",
            mistake="posicao-0",
        )
        _run_sin(c, fn, 50, 16)
        odd = "d_model ímpar não foi recusado com ValueError: os pares seno/cosseno exigem d_model par."
        _value_error(c, "sinusoidal_encoding(max_len=10, d_model=5)", odd, fn, 10, 5)


@SIN.hidden_check
def check_sinusoidal_encoding_hidden(fn: Callable) -> None:
    """Testes ocultos: tamanhos extremos, tabela longa, valores inválidos, limites [−1, 1]."""
    with SIN.check(hidden=True) as c:
        table = _run_sin(c, fn, 200, 64)  # primeiro o caso grande: o diagnóstico sai dele
        _run_sin(c, fn, 1, 2)
        bounded = bool(table.abs().max() <= 1.0 + 1e-6)
        c.expect(
            bounded,
            "Os valores deveriam estar em [−1, 1] (são senos e cossenos).",
            kind="propriedade",
            mistake="valores-em-menos-1-1",
        )
        for args, hint in (
            ((10, 7), HINT["odd"]),
            ((10, 0), "d_model = 0 deveria levantar ValueError."),
            ((10, -4), "d_model negativo deveria levantar ValueError."),
            ((0, 8), "max_len = 0 deveria levantar ValueError."),
            ((-3, 8), "max_len negativo deveria levantar ValueError."),
        ):
            _value_error(c, f"sinusoidal_encoding(max_len={args[0]}, d_model={args[1]})", hint, fn, *args)
        # por último: uma resposta errada ouve antes o diagnóstico do erro dela
        c.refuse_reference(fn, reference.sinusoidal_encoding, lambda: fn(4, 6))


# ---------------------------------------------------------------- TokenEmbedding


def _token_ids(c: Check, seed: int, shape: tuple[int, ...], vocab: int, pad: int | None) -> torch.Tensor:
    ids = torch.randint(0, vocab, shape, generator=c.gen(seed))
    if pad is not None:
        ids[..., -2:] = pad  # as duas últimas posições são padding
    return ids


def _token_mistakes(looked_up: torch.Tensor, vocab: int, d_model: int) -> list[Mistake]:
    """Os erros conhecidos da escala do embedding (``looked_up`` = a tabela indexada pelos ids)."""
    return [
        Mistake("o embedding SEM a multiplicação por √d_model", looked_up, "sem-raiz-de-d-model"),
        Mistake(
            "o embedding multiplicado por d_model em vez de √d_model", looked_up * d_model, "vezes-d-model"
        ),
        Mistake(
            "o embedding DIVIDIDO por √d_model em vez de multiplicado",
            looked_up / math.sqrt(d_model),
            "dividido",
        ),
        Mistake(
            "o embedding multiplicado por √vocab_size em vez de √d_model",
            looked_up * math.sqrt(vocab),
            "raiz-do-vocab",
        ),
    ]


def _run_token(c, cls, vocab, d_model, padding_idx, shape, seed, dtype=torch.float32, pass_padding=True):
    kwargs = {"padding_idx": padding_idx} if pass_padding else {}
    args = f"vocab_size={vocab}, d_model={d_model}" + (f", padding_idx={padding_idx}" if pass_padding else "")
    module_dtype = "" if dtype == torch.float32 else f", módulo {dtype_name(dtype)}"
    c.case(f"TokenEmbedding({args}), token_ids {tuple(shape)}{module_dtype}")
    module = _build(c, cls, vocab, d_model, seed=seed, **kwargs)
    c.method(module, "to", dtype)  # a tabela lida a seguir já está no dtype do módulo
    weight, desc = _embedding(c, module, "embedding", vocab, d_model)
    emb_padding_idx = _attr(desc, "embedding.padding_idx")
    body = f"`embedding.padding_idx` deveria ser {padding_idx}; é {emb_padding_idx}."
    c.expect(
        emb_padding_idx == padding_idx,
        body,
        HINT["padding"] if padding_idx is not None else None,
        kind="valores",
        mistake="padding-idx",
    )
    ids = _token_ids(c, seed, shape, vocab, padding_idx)
    with c.untouched(token_ids=ids):
        out = c.call(module, ids)
    looked_up = weight.detach()[ids]  # (B, T) -> (B, T, D)

    def confirm(mistake: Mistake) -> bool:
        """O mesmo erro num módulo com outros tamanhos (√d_model e um fator fixo não se confundem)."""
        vocab2, d2 = vocab + 7, d_model + 5
        try:
            module2 = _build(c, cls, vocab2, d2, seed=seed + 100, **kwargs)
            weight2, _ = _embedding(c, module2, "embedding", vocab2, d2)
        except CheckFailure:
            return False
        ids2 = _token_ids(c, seed + 100, (2, 5), vocab2, padding_idx if pass_padding else None)
        response = c.run(module2, (ids2,))
        if response.error is not None or not isinstance(response.value, torch.Tensor):
            return False
        twin = next(m for m in _token_mistakes(weight2.detach()[ids2], vocab2, d2) if m.key == mistake.key)
        return _matches(response.value.to(twin.value.dtype), twin.value, twin.value.dtype)

    mistakes = _token_mistakes(looked_up, vocab, d_model)
    c.close(out, looked_up * math.sqrt(d_model), "a saída", mistakes, confirm=confirm)
    if padding_idx is not None:
        pads = out.detach()[ids == padding_idx]
        hint = HINT["rezero" if emb_padding_idx == padding_idx else "padding"]
        c.expect(
            bool((pads == 0).all()),
            "As posições de padding deveriam sair como vetores nulos.",
            hint,
            kind="propriedade",
            mistake="padding-nulo",
        )
    return module


def _run_token_init(c: Check, cls, vocab: int, d_model: int, padding_idx: int | None, seed: int) -> None:
    """A tabela sorteada com desvio 1/√d_model (média 0) e a linha do padding nula."""
    c.case(f"TokenEmbedding({vocab}, {d_model}, padding_idx={padding_idx}): a tabela recém-criada")
    module = _build(c, cls, vocab, d_model, padding_idx=padding_idx, seed=seed)
    weight, desc = _embedding(c, module, "embedding", vocab, d_model)
    table = weight.detach().to(torch.float64)
    if padding_idx is not None:
        row = table[padding_idx]
        norm = br(float(row.norm()), ".3g")
        body = f"A linha {padding_idx} (a do padding) deveria começar em zero; tem norma {norm}."
        hint = HINT["rezero" if _attr(desc, "embedding.padding_idx") == padding_idx else "padding"]
        c.expect(bool((row == 0).all()), body, hint, kind="propriedade", mistake="linha-do-padding-nula")
        table = torch.cat((table[:padding_idx], table[padding_idx + 1 :]))
    target = d_model**-0.5
    std, mean = table.std().item(), table.mean().item()
    hint = HINT["N(0, 1)" if abs(std - 1.0) < 0.1 else "1/d" if abs(std * d_model - 1.0) < 0.1 else "init"]
    body = (
        "A tabela deveria ser sorteada de N(0, 1/d_model): média 0 e desvio "
        f"1/√{d_model} = {br(target, '.4f')}; "
        f"a sua tem média {br(mean, '.4f')} e desvio {br(std, '.4f')}."
    )
    c.expect(
        0.9 * target < std < 1.1 * target and abs(mean) < 0.1 * target,
        body,
        hint,
        kind="parametro",
        mistake="desvio-da-inicializacao",
    )


@TOK.visible_check
def check_token_embedding(cls: Callable) -> None:
    """Testes visíveis de ``TokenEmbedding``."""
    with TOK.check() as c:
        _run_token(c, cls, 10, 4, None, (2, 3), seed=0, pass_padding=False)
        _run_token_init(c, cls, 1000, 64, 0, seed=6)
        _run_token(c, cls, 20, 16, 0, (2, 6), seed=1)
        _run_token(c, cls, 20, 8, 0, (3, 5), seed=2, dtype=torch.float64)


@TOK.hidden_check
def check_token_embedding_hidden(cls: Callable) -> None:
    """Testes ocultos: padding_idx ≠ 0, gradiente nulo na linha de padding, d_model ímpar, inicialização."""
    with TOK.check(hidden=True) as c:
        module = _run_token(c, cls, 30, 9, 29, (2, 7), seed=3)
        # gradiente: a linha do padding não recebe gradiente; as usadas, sim
        ids = _token_ids(c, 4, (2, 7), 30, 29)
        out = c.case("TokenEmbedding(30, 9, padding_idx=29): gradiente de (saída²).sum()").call(module, ids)
        _on_graph(c, out, "da tabela")
        c.method(module, "zero_grad")
        response = c.run(module, (ids,), grad={"loss": {"kind": "sum_sq"}, "params": ["embedding.weight"]})
        c.raise_for(response)
        grad = (response.param_grads or {}).get("embedding.weight")
        pad_ok = grad is not None and bool((grad[29] == 0).all())
        c.expect(
            pad_ok,
            "A linha do padding recebeu gradiente.",
            HINT["padding"],
            kind="propriedade",
            mistake="padding-sem-gradiente",
        )
        used = grad[torch.unique(ids[ids != 29])]
        c.expect(
            bool((used.abs().sum(-1) > 0).all()),
            "Linhas de tokens usados não receberam gradiente.",
            kind="propriedade",
            mistake="gradiente-nos-usados",
        )
        _run_token(c, cls, 5, 2, None, (1, 1), seed=5)
        _run_token_init(c, cls, 500, 36, 499, seed=7)
        # por último: uma resposta errada ouve antes o diagnóstico do erro dela
        c.refuse_reference(cls, reference.TokenEmbedding, lambda: cls(10, 4)(torch.tensor([[1, 2]])))


# ---------------------------------------------------------------- SinusoidalPositionalEncoding


def _sin_blame(c: Check, cls, table, max_len: int, d_model: int) -> tuple[str, str] | None:
    """(id, o que está errado) se o buffer `pe` é a tabela errada da `sinusoidal_encoding` do aluno."""
    fn = _upstream_of(cls, "sinusoidal_encoding")
    if fn is None:
        return None
    response = c.run(fn, (max_len, d_model))
    mine = response.value
    if response.error is not None or not isinstance(mine, torch.Tensor) or mine.numel() != max_len * d_model:
        return None
    expected = _sin_table(max_len, d_model).float()
    right_values = _matches(mine.reshape(max_len, d_model).float(), expected, torch.float32)
    if right_values and mine.dtype == torch.float32 and tuple(mine.shape) == (max_len, d_model):
        return None
    if tuple(table.shape) != tuple(mine.shape) or table.dtype != mine.dtype:
        return None
    if not torch.equal(table.detach().cpu(), mine.detach().cpu()):
        return None
    if right_values and mine.dtype != torch.float32:
        return "dtype-float32", f"ela devolve {dtype_name(mine.dtype)}, e o enunciado pede float32"
    known = next(
        (m for m in _sin_mistakes(max_len, d_model) if _matches(mine.float(), m.value, torch.float32)), None
    )
    if known is not None:
        return known.key, f"ela coincide com {known.name}"
    fit = _fit_sin(mine) if tuple(mine.shape) == (max_len, d_model) else None
    rule, text = _sin_rule(fit) if fit is not None else (None, "")
    if text:  # a regra entra no id: o segundo caso tem de mostrar a mesma
        return (
            f"parametros-da-senoidal/{slug(str(rule), 50)}",
            f"a tabela dela é senoidal, mas com {text}",
        )
    return "valores", "ela devolve outra tabela (o teste dela mostra onde)"


def _sin_upstream_finder(c: Check, cls, table, max_len: int, d_model: int):
    """O erro está em `sinusoidal_encoding`: o buffer é a tabela errada dela, aqui e noutro módulo."""

    def find() -> Finding | None:
        blame = _sin_blame(c, cls, table, max_len, d_model)
        if blame is None:
            return None
        L2, D2 = _sin_other(max_len, d_model)
        response = c.run(cls, (D2,), {"max_len": L2}, keep=True, seed=c.seed_offset)
        if response.error is not None or not isinstance(response.value, Handle):
            return None
        pe2 = _attr(c.describe(response.value, attrs=["pe"]), "pe")
        blame2 = None if not isinstance(pe2, torch.Tensor) else _sin_blame(c, cls, pe2, L2, D2)
        if blame2 is None or blame2[0] != blame[0]:
            return None
        text = (
            f"o erro está em `sinusoidal_encoding`, que o seu módulo usa para a tabela `pe`: {blame[1]}. "
            "Corrija `sinusoidal_encoding` primeiro."
        )
        return Finding("anterior", f"erro-em-sinusoidal_encoding/{blame[0]}", text, "o buffer `pe`")

    return find


def _pe_buffer(c: Check, module: Handle, max_len: int, d_model: int, cls=None) -> torch.Tensor:
    desc = c.describe(module, attrs=["pe"])
    buffers, params = desc.get("buffers", {}), desc.get("params", {})
    c.expect(
        "pe" not in params, "`pe` é um parâmetro treinável; a tabela senoidal é fixa.", HINT["parameter"]
    )
    found = sorted(buffers) or "nenhum"
    c.expect(
        "pe" in buffers,
        f"Não encontrei o buffer `pe` (buffers do módulo: {found}).",
        HINT["buffer"],
        kind="estrutura",
        mistake="buffer-pe",
    )
    pe = _attr(desc, "pe")
    # antes de tudo, o exercício anterior: com a `sinusoidal_encoding` do aluno errada, o erro está lá
    try:
        c.dtype(pe, torch.float32, "o buffer `pe`", HINT["float32"], kind="dtype", mistake="dtype-float32")
        size = f"O buffer `pe` deveria ter {max_len}×{d_model} elementos; tem forma {tuple(pe.shape)}."
        c.expect(pe.numel() == max_len * d_model, size, kind="forma", where="o buffer `pe`")
        table = pe.detach().reshape(max_len, d_model)
        expected = _sin_table(max_len, d_model).float()
        c.close(table, expected, "o buffer `pe`", _sin_mistakes(max_len, d_model), **SIN_TOL)
    except CheckFailure as failure:
        finding = None if cls is None else c.find(_sin_upstream_finder(c, cls, pe, max_len, d_model))
        if finding is None:
            raise
        raise c.diagnosed(failure, finding) from None
    return table


def _forward_mistakes(x: torch.Tensor, table: torch.Tensor, labels) -> list[Mistake]:
    """Os erros conhecidos do forward (x + table[:T]) nestas entradas."""
    seq_len, (by, alone) = x.size(-2), labels
    rows = table[:seq_len].to(x.dtype)
    mistakes = [
        Mistake(f"x MULTIPLICADO {by} em vez de somado", x * rows, "multiplicado"),
        Mistake(alone, rows.expand_as(x), "so-a-posicao"),
        Mistake("x sem nada somado (a posição foi esquecida)", x, "posicao-esquecida"),
    ]
    if table.size(0) > seq_len:
        shifted = x + table[1 : seq_len + 1].to(x.dtype)
        mistakes.append(Mistake("as posições começando em 1 em vez de 0", shifted, "posicoes-desde-1"))
    return mistakes


def _run_forward(
    c: Check, module, x: torch.Tensor, table: torch.Tensor, labels, extra=(), seed: int | None = None
) -> torch.Tensor:
    """``module(x)`` deve ser x + table[:T]; ``labels`` = (a posição com "pela", ela devolvida sozinha).

    ``seed``: a semente do gerador global do lado do aluno logo antes da chamada (dropout). Um erro
    conhecido do forward só é nomeado se reproduz a saída também com outro x (outros valores, outro T).
    """
    with c.untouched(x=x):
        response = c.run(module, (x,), seed=seed)
        c.raise_for(response)
        out = response.value
    seq_len = x.size(-2)
    second: dict = {}

    def confirm(mistake: Mistake) -> bool:
        if mistake.key not in {m.key for m in _forward_mistakes(x, table, labels)}:
            return True  # o dropout em eval(): a mesma máscara sorteada já é a confirmação
        if "out" not in second:
            T2 = seq_len - 1 if seq_len > 1 else min(2, table.size(0))  # outro T (≤ max_len)
            second["x"] = torch.randn(
                x.size(0) + 1, T2, x.size(-1), generator=c.gen(9100 + x.numel()), dtype=x.dtype
            )
            again = c.run(module, (second["x"],), seed=seed)
            ok = again.error is None and isinstance(again.value, torch.Tensor)
            second["out"] = again.value if ok and again.value.shape == second["x"].shape else None
        if second["out"] is None:
            return False
        twin = next((m for m in _forward_mistakes(second["x"], table, labels) if m.key == mistake.key), None)
        return twin is not None and _matches(second["out"], twin.value, x.dtype)

    mistakes = [*_forward_mistakes(x, table, labels), *extra]
    c.close(out, x + table[:seq_len].to(x.dtype), "a saída", mistakes, confirm=confirm)
    return out


SINUSOIDAL = ("pela codificação senoidal", "a codificação senoidal devolvida sozinha, sem somar x")


@SPE.visible_check
def check_sinusoidal_positional_encoding(cls: Callable) -> None:
    """Testes visíveis de ``SinusoidalPositionalEncoding``."""
    with SPE.check() as c:
        tried = "SinusoidalPositionalEncoding(d_model=16, max_len=40)"
        module = _build(c.case(tried), cls, 16, max_len=40)
        table = _pe_buffer(c, module, 40, 16, cls)
        c.method(module, "eval")
        _run_forward(c.case(f"{tried}, x (2, 10, 16)"), module, _x(c, 0, (2, 10, 16)), table, SINUSOIDAL)
        x64 = _x(c, 1, (3, 7, 16), torch.float64)
        out = _run_forward(c.case(f"{tried}, x (3, 7, 16) float64"), module, x64, table, SINUSOIDAL)
        c.dtype(out, torch.float64, "a saída", "x float64 deveria dar saída float64 (o dtype de x).")
        x = _x(c, 2, (1, 41, 16))
        _value_error(c, f"{tried}, x (1, 41, 16): mais longa que max_len", HINT["too long"], module, x)


def _run_dropout(c: Check, cls: Callable, p: float = 0.5) -> None:
    """Em treino: o dropout do PyTorch, uma vez, sobre x + PE (a mesma máscara sob a mesma semente).

    Em ``eval()``: nenhum dropout. Os erros conhecidos são sorteados com o mesmo estado do gerador
    com que a resposta rodou (a mesma semente, deste lado); quem sorteia a máscara por conta própria é
    reconhecido pelo efeito.
    """
    tried = f"SinusoidalPositionalEncoding(d_model=16, max_len=20, dropout={p})"
    module = _build(c.case(f"{tried} em modo de treino, x (4, 20, 16)"), cls, 16, max_len=20, dropout=p)
    x = _x(c, 12, (4, 20, 16))
    table = _pe_buffer(c, module, 20, 16, cls)
    full = x + table[:20]
    train_seed, eval_seed = 13 + c.seed_offset, 14 + c.seed_offset

    def drawn(seed: int, run: Callable[[], torch.Tensor]):
        _oracle_seed(seed)  # o estado do gerador com que a resposta rodou, do lado dela
        return run()

    c.method(module, "train", True)
    response = c.run(module, (x,), seed=train_seed)
    c.raise_for(response)
    out = response.value
    c.shape(out, x.shape)
    kept = out.detach() != 0
    zeros, frac = torch.zeros_like(full), kept.float().mean().item()
    body = (
        f"Com dropout = {br(p, 'g')}, cerca de metade dos valores deveria ser zerada; "
        f"zerados: {1 - frac:.0%}."
    )
    c.expect(0.15 < frac < 0.85, body, HINT["once"], kind="propriedade", mistake="fracao-zerada")
    twice = "o dropout aplicado DUAS vezes (valores divididos por (1 − p)²)"
    own = (
        "um dropout certo, mas sorteado por conta própria: use `nn.Dropout` (ou `F.dropout`), para que "
        "a máscara seja a do PyTorch"
    )
    mistakes = [
        Mistake(twice, drawn(train_seed, lambda: F.dropout(F.dropout(full, p), p)), "dropout-duas-vezes"),
        Mistake(twice, torch.where(kept, full / (1 - p) ** 2, zeros), "dropout-duas-vezes"),
        Mistake(
            "os valores sem a reescala 1/(1 − p) do dropout",
            torch.where(kept, full, zeros),
            "dropout-sem-reescala",
        ),
        Mistake(own, torch.where(kept, full / (1 - p), zeros), "dropout-sorteado-a-mao"),
    ]
    c.close(out, drawn(train_seed, lambda: F.dropout(full, p)), "a saída em modo de treino", mistakes)
    always = "o dropout ligado também em `eval()`: passe `training=self.training` ao `F.dropout`"
    on_in_eval = Mistake(always, drawn(eval_seed, lambda: F.dropout(full, p)), "dropout-em-eval")
    c.method(module, "eval")
    # se o dropout continuar ligado em eval(), sorteia a mesma máscara de `on_in_eval`
    tried_eval = c.case(f"{tried} em modo eval()")
    _run_forward(tried_eval, module, x, table, SINUSOIDAL, [on_in_eval], seed=eval_seed)


@SPE.hidden_check
def check_sinusoidal_positional_encoding_hidden(cls: Callable) -> None:
    """Testes ocultos: dropout em treino (o do PyTorch) e em eval, T = max_len, .to(float64), gradiente."""
    with SPE.check(hidden=True) as c:
        tried = "SinusoidalPositionalEncoding(d_model=8, max_len=12)"
        module = _build(c.case(tried), cls, 8, max_len=12)
        c.method(module, "eval")
        table = _pe_buffer(c, module, 12, 8, cls)
        x = _x(c, 10, (2, 12, 8))
        _run_forward(c.case(f"{tried}, x (2, 12, 8): T = max_len"), module, x, table, SINUSOIDAL)
        xg = _x(c, 11, (1, 5, 8), torch.float64).requires_grad_()
        c.case(f"{tried}.to(torch.float64), x (1, 5, 8) float64")
        c.method(module, "to", torch.float64)
        out = c.call(module, xg)
        c.dtype(
            out, torch.float64, "a saída", "`pe` precisa ser um buffer registrado para acompanhar `.to(...)`."
        )
        _on_graph(c, out)
        response = c.run(module, (xg,), grad={"loss": {"kind": "sum"}})
        c.raise_for(response)
        grad = (response.grads or [None])[0]
        c.close(grad, torch.ones_like(xg), "o gradiente de saída.sum() em relação a x")
        _run_dropout(c, cls)
        _value_error(c, "SinusoidalPositionalEncoding(d_model=7)", HINT["odd"], cls, 7, max_len=10)
        # por último: uma resposta errada ouve antes o diagnóstico do erro dela
        c.refuse_reference(
            cls, reference.SinusoidalPositionalEncoding, lambda: cls(8, max_len=12)(torch.zeros(1, 3, 8))
        )


# ---------------------------------------------------------------- LearnedPositionalEmbedding

LEARNED = ("pelo embedding de posição", "o embedding aprendido devolvido sem somar x")


def _run_lpe(c: Check, module: Handle, x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """``module(x)`` deve ser x + a tabela de posições (lida do módulo por ``_embedding``)."""
    return _run_forward(c, module, x, table, LEARNED)


@LPE.visible_check
def check_learned_positional_embedding(cls: Callable) -> None:
    """Testes visíveis de ``LearnedPositionalEmbedding``."""
    with LPE.check() as c:
        tried = "LearnedPositionalEmbedding(max_len=12, d_model=8)"
        module = _build(c.case(tried), cls, 12, 8)
        table, _ = _embedding(c, module, "position_embedding", 12, 8)
        _run_lpe(c.case(f"{tried}, x (2, 7, 8)"), module, _x(c, 20, (2, 7, 8)), table)
        x64 = _x(c, 21, (3, 5, 8), torch.float64)
        c.case(f"{tried}.double(), x (3, 5, 8) float64")
        c.method(module, "double")  # a tabela em float64 tem os mesmos valores (float32 -> float64 é exato)
        out = _run_lpe(c, module, x64, table)
        c.dtype(out, torch.float64)
        x = _x(c, 22, (1, 13, 8), torch.float64)
        _value_error(c, f"{tried}, x (1, 13, 8): mais longa que max_len", HINT["too long"], module, x)


@LPE.hidden_check
def check_learned_positional_embedding_hidden(cls: Callable) -> None:
    """Testes ocultos: T = max_len, gradientes só nas linhas usadas, número de parâmetros."""
    with LPE.check(hidden=True) as c:
        tried = "LearnedPositionalEmbedding(max_len=6, d_model=5)"
        module = _build(c.case(tried), cls, 6, 5, seed=1)
        table, desc = _embedding(c, module, "position_embedding", 6, 5)
        n_params = desc.get("n_params")
        c.expect(
            n_params == 30,
            f"O módulo deveria ter 6·5 = 30 parâmetros; tem {n_params}.",
            kind="estrutura",
            mistake="numero-de-parametros",
        )
        _run_lpe(c.case(f"{tried}, x (2, 6, 5): T = max_len"), module, _x(c, 23, (2, 6, 5)), table)
        x = _x(c, 24, (3, 4, 5))
        out = c.case(f"{tried}, x (3, 4, 5): gradiente de saída.sum()").call(module, x)
        _on_graph(c, out, "da tabela de posições")
        grad_of = {"loss": {"kind": "sum"}, "params": ["position_embedding.weight"]}
        response = c.run(module, (x,), grad=grad_of)
        c.raise_for(response)
        expected = torch.zeros(6, 5)
        expected[:4] = 3.0  # cada posição usada recebe 1 por exemplo do lote
        grad = (response.param_grads or {}).get("position_embedding.weight")
        c.close(grad, expected, "o gradiente da tabela de posições")
        _value_error(c, f"{tried}, x (2, 9, 5)", HINT["too long"], module, _x(c, 25, (2, 9, 5)))
        # por último: uma resposta errada ouve antes o diagnóstico do erro dela
        c.refuse_reference(cls, reference.LearnedPositionalEmbedding, lambda: cls(6, 5)(torch.zeros(1, 3, 5)))


# ---------------------------------------------------------------- RoPE


def _rope_oracle(x: torch.Tensor, positions, base: float = 10000.0, variant: str = "certo") -> torch.Tensor:
    """RoPE com números complexos: par (a, b) ↦ (a + ib)·e^{i·p·θ}. ``variant`` escreve um erro."""
    seq_len, d = x.size(-2), x.size(-1)
    pos = torch.arange(seq_len) if positions is None or variant == "ignora" else positions.cpu()
    pos = pos.to(torch.float64) + (1.0 if variant == "desde 1" else 0.0)
    i = torch.arange(d // 2, dtype=torch.float64)
    theta = (10000.0 if variant == "base fixa" else base) ** (-(i if variant == "i/d" else 2 * i) / d)
    angles = pos[:, None] * theta  # (T, D/2)
    angles = -angles if variant == "reverso" else angles
    rotation = torch.polar(torch.ones_like(angles), angles)  # e^{i·ângulo}, (T, D/2)
    xd = x.detach().cpu().to(torch.float64)
    if variant == "metades":
        w = torch.complex(xd[..., : d // 2], xd[..., d // 2 :]) * rotation
        out = torch.cat((w.real, w.imag), dim=-1)
    else:
        z = torch.view_as_complex(xd.reshape(*xd.shape[:-1], d // 2, 2).contiguous())
        out = torch.view_as_real(z * rotation).flatten(-2)
    return out.to(dtype=x.dtype, device=x.device)


ROPE_MISTAKES = {
    "reverso": "a rotação no sentido contrário (ângulo −p·θ em vez de +p·θ)",
    "metades": 'a convenção "rotate_half" (pares x[i], x[i + d/2]) em vez dos intercalados (x[2i], x[2i+1])',
    "ignora": "as posições padrão 0 … T−1: o argumento `positions` foi ignorado",
    "desde 1": "as posições começando em 1 em vez de 0",
    "i/d": "o expoente i/d em vez de 2i/d nas frequências θ_i",
    "base fixa": "a base 10000 fixa: o argumento `base` foi ignorado",
}
ROPE_IDS = {
    "reverso": "sentido-contrario",
    "metades": "rotate-half",
    "ignora": "positions-ignorado",
    "desde 1": "posicoes-desde-1",
    "i/d": "expoente-i-d",
    "base fixa": "base-ignorada",
}


class _RopeCase:
    """Um caso de RoPE (x, positions, base como foram passados) e a resposta do aluno nele."""

    def __init__(self, x: torch.Tensor, positions, base):
        self.x, self.positions, self.base = x, positions, base

    @property
    def b(self) -> float:
        return 10000.0 if self.base is None else float(self.base)

    def args(self) -> tuple[tuple, dict]:
        args = (self.x,) if self.positions is None and self.base is None else (self.x, self.positions)
        return args, ({} if self.base is None else {"base": self.base})

    def pos(self) -> torch.Tensor:
        T = self.x.size(-2)
        return (torch.arange(T) if self.positions is None else self.positions.cpu()).to(torch.float64)

    def mistakes(self) -> list[Mistake]:
        skip = {"ignora"} if self.positions is None else set()
        skip |= {"base fixa"} if self.b == 10000.0 else set()
        return [
            Mistake(label, _rope_oracle(self.x, self.positions, self.b, key), ROPE_IDS[key])
            for key, label in ROPE_MISTAKES.items()
            if key not in skip
        ]


def _rope_second(c: Check, case: _RopeCase) -> _RopeCase:
    """Outro caso: outros valores, T + 2 e d + 2, outras posições (se dadas) e outra base (se dada)."""
    gen = c.gen(5000 + case.x.numel())
    *lead, T, d = case.x.shape
    x = torch.randn(*lead, T + 2, d + 2, generator=gen, dtype=case.x.dtype)
    positions = None
    if case.positions is not None:  # com 0 e 1 (x volta exato na posição 0; θ_i se lê na posição 1)
        positions = torch.randint(2, 40, (T + 2,), generator=gen)
        positions[-1], positions[-2] = 0, 1
    return _RopeCase(x, positions, None if case.base is None else 500.0)


def _rope_answer(c: Check, fn, case: _RopeCase) -> torch.Tensor | None:
    args, kwargs = case.args()
    response = c.run(fn, args, kwargs)
    out = response.value
    if response.error is not None or not isinstance(out, torch.Tensor) or out.shape != case.x.shape:
        return None
    return out.detach()


def _wrap(angle: torch.Tensor) -> torch.Tensor:
    return torch.remainder(angle + math.pi, 2 * math.pi) - math.pi


def _pair_angles(x: torch.Tensor, out: torch.Tensor, layout: str, rtol: float):
    """(ângulos (T, d/2), válidos (T, d/2)): o ângulo com que cada par foi girado, o mesmo em todo o lote.

    ``None`` se a saída não é uma rotação de cada par (a norma muda além de ``rtol``, ou o ângulo muda
    com o exemplo do lote). Pares nulos em todo o lote não têm ângulo (``válidos`` falso).
    """
    d = x.size(-1)
    xd, od = x.detach().double(), out.detach().double()
    if layout == "intercalado":
        (a, b), (p, q) = (xd[..., 0::2], xd[..., 1::2]), (od[..., 0::2], od[..., 1::2])
    else:
        (a, b), (p, q) = (xd[..., : d // 2], xd[..., d // 2 :]), (od[..., : d // 2], od[..., d // 2 :])
    norm_in, norm_out = a * a + b * b, p * p + q * q
    if not torch.allclose(norm_in, norm_out, rtol=rtol, atol=rtol * float(norm_in.max())):
        return None
    phi = torch.atan2(a * q - b * p, a * p + b * q).reshape(-1, *a.shape[-2:])
    weight = norm_in.reshape(phi.shape)
    best = weight.argmax(0, keepdim=True)  # o par de maior norma no lote, para cada (t, i)
    angles = phi.gather(0, best)[0]
    strong = weight > 1e-3 * weight.max()
    if bool((_wrap(phi - angles).abs() > 1e-4)[strong].any()):
        return None
    return angles, strong.any(0)


def _fit_rope(case: _RopeCase, out: torch.Tensor, rtol: float):
    """Os parâmetros da rotação do aluno: (layout, sinal, posições, deslocamento, θ_i) ou None.

    θ_i é lido na linha de menor |p| ≠ 0 (sem volta de 2π) e conferido em todas as outras; um par nulo
    em todo o lote não tem ângulo (θ_i fica NaN, desconhecido).
    """
    T, d = case.x.shape[-2:]
    options = [("dadas", case.pos())]
    if case.positions is not None:
        options.append(("padrao", torch.arange(T, dtype=torch.float64)))
    for layout in ("intercalado", "metades"):
        found = _pair_angles(case.x, out, layout, rtol)
        if found is None:
            continue
        phi, valid = found
        for sign in (1.0, -1.0):
            for name, p in options:
                for k in (0, 1, -1):
                    pp = sign * (p + k)
                    theta = torch.full((d // 2,), float("nan"), dtype=torch.float64)
                    for i in range(d // 2):
                        small = [t for t in range(T) if 0 < abs(pp[t]) <= 3 and bool(valid[t, i])]
                        if small:
                            t0 = min(small, key=lambda t: abs(pp[t]))
                            theta[i] = phi[t0, i] / pp[t0]
                    if bool(torch.isnan(theta[0])) or float(theta[0]) <= 0:  # o sinal fica com `sign`
                        continue
                    usable = valid & ~torch.isnan(theta)[None, :]
                    miss = _wrap(pp[:, None] * theta.nan_to_num(0.0) - phi).abs() > 1e-5 * (
                        1 + pp.abs().max()
                    )
                    if bool(miss[usable].any()):
                        continue
                    return layout, sign, name, k, theta
    return None


def _rope_rule(fit, case: _RopeCase) -> tuple[tuple, str]:
    """A regra do ajuste (para comparar dois casos) e as frases do que difere do pedido."""
    layout, sign, name, k, theta = fit
    d = 2 * theta.numel()
    parts = []
    if layout == "metades":
        parts.append(
            'os pares (x[i], x[i + d/2]) da convenção "rotate_half", não os intercalados (x[2i], x[2i+1])'
        )
    if sign < 0:
        parts.append("o ângulo −p·θ (a rotação no sentido contrário)")
    if name == "padrao":
        parts.append("as posições 0 … T−1 no lugar de `positions`")
    if k:
        parts.append(f"as posições deslocadas de {k} (p {'+' if k > 0 else '−'} {abs(k)})")
    scale, b_eff, rule_base = float(theta[0]), None, None
    known = ~torch.isnan(theta)
    if d >= 4 and bool(known[1]) and float(theta[1]) > 0 and scale > 0:
        b_eff = float((theta[1] / scale) ** (-d / 2))
        i = torch.arange(d // 2, dtype=torch.float64)
        if not torch.allclose(theta[known], (scale * b_eff ** (-2 * i / d))[known], rtol=1e-4):
            b_eff = None
    if abs(scale - 1) > 1e-4:
        parts.append(
            f"θ_0 = {br(scale, '.4g')} (as frequências multiplicadas por {br(scale, '.4g')}; θ_0 é 1)"
        )
    if b_eff is not None and abs(b_eff - case.b) > 1e-3 * case.b:
        ratio = math.log(b_eff) / math.log(case.b)
        note = " (é o que dá o expoente i/d em vez de 2i/d)" if abs(ratio - 0.5) < 1e-3 else ""
        b_txt = br(b_eff, ".5g")
        parts.append(f"θ_i = {b_txt}^(−2i/d): a base efetiva é {b_txt}, não {br(case.b, '.5g')}{note}")
        rule_base = ("razao", round(ratio, 4))
    elif b_eff is None and d >= 4 and bool(known[1]):
        parts.append("frequências θ_i que não seguem base^(−2i/d)")
        rule_base = ("livre",)
    rule = (layout, sign, name, k, round(scale, 4), rule_base)
    return rule, "; ".join(parts)


def _effective_base(fit) -> float:
    theta = fit[-1]
    d = 2 * theta.numel()
    return float((theta[1] / theta[0]) ** (-d / 2)) if d >= 4 else float("nan")


def _rope_fit_finder(c: Check, fn, case: _RopeCase, out):
    def find() -> Finding | None:
        rtol = 1e-4 if case.x.dtype == torch.float32 else 1e-9
        fit = _fit_rope(case, out, rtol)
        if fit is None:
            return None
        rule, text = _rope_rule(fit, case)
        if not text or rule[-1] == ("livre",):
            return None
        second = _rope_second(c, case)
        out2 = _rope_answer(c, fn, second)
        fit2 = None if out2 is None else _fit_rope(second, out2, rtol)
        if fit2 is None:
            return None
        rule2, _ = _rope_rule(fit2, second)
        if rule2[:-1] != rule[:-1]:
            return None
        if rule2[-1] != rule[-1] or second.b == case.b:
            # a base efetiva não acompanha o argumento `base`: a mesma nos dois casos?
            fixed = (
                rule[-1] is not None
                and rule2[-1] is not None
                and abs(_effective_base(fit) - _effective_base(fit2)) <= 1e-3 * _effective_base(fit)
            )
            if rule2[-1] != rule[-1] and not fixed:
                return None
            if fixed and second.b != case.b:
                b_txt = br(_effective_base(fit), ".5g")
                text = text.split("; θ_i = ")[0] if "; θ_i = " in text else ""
                extra = f"θ_i = {b_txt}^(−2i/d) com qualquer `base` (o argumento `base` não muda nada)"
                text = f"{text}; {extra}" if text and not text.startswith("θ_i") else extra
        return Finding("parametro", "parametros-da-rotacao", f"sua saída gira cada par, mas com {text}.")

    return find


def _precision(case: _RopeCase, out: torch.Tensor, expected: torch.Tensor) -> str | None:
    """Em float64, uma rotação certa com a precisão de float32: ``"rotacao"`` (θ, p·θ, cos, sin em
    float32: na posição 0 a saída é x exato) ou ``"x"`` (x também passou por float32); senão None."""
    delta = (out.detach().double() - expected.double()).abs()
    if float(delta.max()) <= 1e-12 * (1 + float(case.x.abs().max())):
        return None
    found = _pair_angles(case.x, out, "intercalado", 1e-6)
    if found is None:
        return None
    phi, valid = found
    T, d = case.x.shape[-2:]
    true = case.pos()[:, None] * case.b ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    error = _wrap(phi - true).abs()
    if not bool((error <= 16 * 2.0**-24 * (true.abs() + 1))[valid].all()):
        return None
    zero = case.pos() == 0
    if not bool(zero.any()):
        return "float32"
    exact = torch.equal(out.detach().double()[..., zero, :], case.x.double()[..., zero, :])
    return "rotacao" if exact else "x"


def _precision_finder(c: Check, fn, case: _RopeCase, out, expected):
    def find() -> Finding | None:
        if case.x.dtype != torch.float64:
            return None
        kind = _precision(case, out, expected)
        if kind is None:
            return None
        second = _rope_second(c, case)
        out2 = _rope_answer(c, fn, second)
        if (
            out2 is None
            or _precision(second, out2, _rope_oracle(second.x, second.positions, second.b)) != kind
        ):
            return None
        error = br(float((out.detach().double() - expected).abs().max()), ".3g")
        if kind == "rotacao":
            text = (
                f"a rotação tem a precisão de float32 (erro de até {error}, que cresce com p·θ), "
                "com x em float64: "
                "θ, p·θ (e cos/sin) foram calculados em float32; calcule-os no dtype de x."
            )
            return Finding("parametro", "angulos-em-float32", text)
        if kind == "x":
            text = (
                f"a saída tem a precisão de float32 (erro de até {error}; mesmo na posição 0, "
                "onde nada gira, "
                "x não volta exato), com x em float64: x passou por float32; faça tudo no dtype de x."
            )
            return Finding("parametro", "x-em-float32", text)
        text = (
            f"a saída tem a precisão de float32 (erro de até {error}), com x em float64: "
            "faça tudo no dtype de x."
        )
        return Finding("parametro", "precisao-float32", text)

    return find


def _rotation_finder(case: _RopeCase, out):
    """Sem parâmetro que explique: a norma de cada par (x[2i], x[2i+1]) ou o ângulo da rotação."""

    def find() -> Finding | None:
        d = case.x.size(-1)
        xd, od = case.x.detach().double(), out.detach().double()
        norm_in = xd[..., 0::2] ** 2 + xd[..., 1::2] ** 2
        norm_out = od[..., 0::2] ** 2 + od[..., 1::2] ** 2
        rtol = 1e-4 if case.x.dtype == torch.float32 else 1e-9
        wrong = ~torch.isclose(norm_out, norm_in, rtol=rtol, atol=rtol * float(norm_in.max()))
        if idx := _first_index(wrong):
            text = (
                f"uma rotação preserva a norma de cada par (x[2i], x[2i+1]); no índice {idx} (posição "
                f"{idx[-2]}, par {idx[-1]}), |par|² passou de {br(float(norm_in[idx]), '.6g')} a "
                f"{br(float(norm_out[idx]), '.6g')}."
            )
            return Finding("propriedade", "norma-dos-pares", text)
        found = _pair_angles(case.x, out, "intercalado", rtol)
        if found is None:
            return None
        phi, valid = found
        true = _wrap(case.pos()[:, None] * case.b ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d))
        if idx := _first_index(valid & (_wrap(phi - true).abs() > 1e-4)):
            t, i = idx
            text = (
                "cada par (x[2i], x[2i+1]) foi girado (a norma se preserva), mas com outro ângulo: "
                f"na linha {t} (p = {br(float(case.pos()[t]), 'g')}), par {i}, "
                f"{br(float(phi[t, i]), '.6g')} rad, esperado "
                f"p·θ_{i} = {br(float(true[t, i]), '.6g')} rad (módulo 2π)."
            )
            return Finding("propriedade", "angulo-da-rotacao", text)
        return None

    return find


def _run_rope(c: Check, fn: Callable, x, positions=None, base=None, extra: str = "") -> torch.Tensor:
    pos_txt = "positions padrão" if positions is None else f"positions={positions.tolist()}"
    base_txt = "" if base is None else f", base={base}"
    c.case(f"x {tuple(x.shape)} {dtype_name(x.dtype)}, {pos_txt}{base_txt}{extra}")
    case = _RopeCase(x, positions, base)
    args, kwargs = case.args()
    with c.untouched(x=x, positions=positions):
        out = c.call(fn, *args, **kwargs)
    expected = _rope_oracle(x, positions, case.b)
    second: dict = {}

    def confirm(mistake: Mistake) -> bool:
        if "case" not in second:
            second["case"] = _rope_second(c, case)
            second["out"] = _rope_answer(c, fn, second["case"])
        if second["out"] is None:
            return False
        again = next((m for m in second["case"].mistakes() if m.key == mistake.key), None)
        return again is not None and _matches(second["out"], again.value, x.dtype)

    tol = {"rtol": 1e-4, "atol": 1e-4} if x.dtype == torch.float32 else {}
    finders = (
        _precision_finder(c, fn, case, out, expected),
        _rope_fit_finder(c, fn, case, out),
        _rotation_finder(case, out),
    )
    with c.diagnosing(*finders):
        c.close(out, expected, "a saída", case.mistakes(), confirm=confirm, **tol)
    return out


@ROPE.visible_check
def check_apply_rope(fn: Callable) -> None:
    """Testes visíveis de ``apply_rope``."""
    with ROPE.check() as c:
        x = torch.tensor([[[1.0, 0.0, 1.0, 0.0]] * 3])  # (1, 3, 4): cada par começa em (1, 0)
        out = _run_rope(c, fn, x, extra=" (pares começando em (1, 0))")
        norms = out.detach().reshape(1, 3, 2, 2).norm(dim=-1)
        c.case("normas dos pares").expect(
            torch.allclose(norms, torch.ones_like(norms), atol=1e-5),
            f"Uma rotação preserva a norma de cada par; as normas ficaram {_br_list(norms.flatten())}.",
            kind="propriedade",
            mistake="norma-dos-pares",
        )
        _run_rope(c, fn, _x(c, 30, (2, 5, 8)))
        _run_rope(c, fn, _x(c, 31, (3, 4, 6)), torch.tensor([5, 0, 2, 9]))
        x4 = _x(c, 32, (2, 2, 5, 8), torch.float64)
        _run_rope(c, fn, x4, torch.tensor([7, 3, 1, 0, 4]), extra=" (4-D: lote e cabeças)")


@ROPE.hidden_check
def check_apply_rope_hidden(fn: Callable) -> None:
    """Testes ocultos: base, posições grandes em float64, 2-D, gradiente, propriedade relativa, erros."""
    with ROPE.check(hidden=True) as c:
        _run_rope(c, fn, _x(c, 33, (2, 4, 8)), torch.tensor([0, 1, 2, 3]), base=100.0)
        far = torch.tensor([4095, 0, 1000, 2048, 3, 777])
        _run_rope(c, fn, _x(c, 34, (1, 6, 16), torch.float64), far, extra=" (posições grandes)")
        _run_rope(c, fn, _x(c, 35, (7, 2)), extra=" (2-D, d = 2)")
        _run_rope(c, fn, _x(c, 36, (4, 3, 6)).transpose(0, 1), extra=" (tensor não contíguo)")
        # gradiente: a transposta de uma rotação é a rotação inversa
        x = _x(c, 37, (2, 5, 4), torch.float64).requires_grad_()
        g = _x(c, 38, (2, 5, 4), torch.float64)
        out = c.case("x (2, 5, 4) float64: gradiente de (saída·g).sum()").call(fn, x)
        _on_graph(c, out)
        response = c.run(fn, (x,), grad={"loss": {"kind": "dot", "weights": g}})
        c.raise_for(response)
        grad = (response.grads or [None])[0]
        c.close(grad, _rope_oracle(g, None, variant="reverso"), "o gradiente em x")
        # propriedade relativa: ⟨RoPE(q, m), RoPE(k, n)⟩ depende só de m − n
        gen = c.gen(39)
        q, k = (torch.randn(1, 8, generator=gen, dtype=torch.float64) for _ in range(2))
        c.case("⟨RoPE(q, m), RoPE(k, n)⟩ com m − n = 2 e três valores de m")
        rotated = [
            (c.call(fn, q, torch.tensor([m])), c.call(fn, k, torch.tensor([m - 2]))) for m in (3, 10, 102)
        ]
        scores = [(qm * kn).sum().item() for qm, kn in rotated]
        body = f"Os produtos escalares deveriam ser iguais (só dependem de m − n); vieram {scores}."
        c.expect(max(scores) - min(scores) < 1e-9, body, kind="propriedade", mistake="posicao-relativa")
        _value_error(c, "x (2, 3, 5): última dimensão ímpar", HINT["odd d"], fn, _x(c, 40, (2, 3, 5)))
        x = _x(c, 41, (2, 3, 4))
        _value_error(c, "x (2, 3, 4) com positions de 5 elementos", HINT["positions"], fn, x, torch.arange(5))
        # por último: uma resposta errada ouve antes o diagnóstico do erro dela
        for ref in (reference.apply_rope, reference.apply_rope_half):
            c.refuse_reference(fn, ref, lambda: fn(torch.ones(1, 3, 4)))


# ---------------------------------------------------------------- ALiBi


def _slopes_table(n_heads: int, variant: str = "certo") -> torch.Tensor:
    if variant == "oficial":
        return reference.alibi_slopes_official(n_heads).double()
    factor = 1.0 if variant == "sem 8" else 8.0
    sign = 1.0 if variant == "positivo" else -1.0
    start = 0 if variant == "h-1" else 1
    values = [2.0 ** (sign * factor * h / n_heads) for h in range(start, n_heads + start)]
    return torch.tensor(values[::-1] if variant == "invertido" else values, dtype=torch.float64)


SLOPE_MISTAKES = {
    "h-1": "as inclinações com h = 0 … H−1 (uma cabeça fora: a primeira vira 1)",
    "sem 8": "as inclinações sem o 8 no expoente (2^(−h/H) em vez de 2^(−8h/H))",
    "positivo": "as inclinações com o expoente positivo (2^(8h/H))",
    "invertido": "as inclinações em ordem invertida (da menor para a maior)",
    "oficial": "a receita do código oficial de ALiBi (`get_slopes`, a de `alibi_slopes_official`) para H que "
    "não é potência de 2; o exercício pede a fórmula geométrica 2^(−8h/H) para todo H",
}
SLOPE_IDS = {
    "h-1": "h-desde-0",
    "sem 8": "sem-o-8",
    "positivo": "expoente-positivo",
    "invertido": "ordem-invertida",
    "oficial": "receita-oficial",
}


def _slope_mistakes(n_heads: int) -> list[Mistake]:
    return [
        Mistake(label, _slopes_table(n_heads, key).float(), SLOPE_IDS[key])
        for key, label in SLOPE_MISTAKES.items()
    ]


def _other_heads(n_heads: int) -> int:
    """Um segundo H, diferente e que não é potência de 2 (onde a receita oficial difere da geométrica)."""
    return next(h for h in (6, 10, 12, 20) if h != n_heads)


def _answer_tensor(c: Check, fn, args: tuple) -> torch.Tensor | None:
    response = c.run(fn, args)
    value = response.value
    if response.error is not None or not isinstance(value, torch.Tensor) or not value.is_floating_point():
        return None
    return value.detach()


def _same_values(a, b: torch.Tensor, dtype=torch.float32) -> bool:
    return isinstance(a, torch.Tensor) and _matches(a, b, dtype)


def _fit_slopes(out: torch.Tensor, n_heads: int):
    """(a, s): as inclinações do aluno são 2^(−a·(h + s)/H), h = 1 … H (a = 8, s = 0 é o certo)?"""
    values = out.detach().double().reshape(-1)
    if values.numel() != n_heads or not bool((values > 0).all()) or n_heads < 2:
        return None
    h = torch.arange(1, n_heads + 1, dtype=torch.float64)
    logs = values.log2()
    slope = float(((h - h.mean()) * (logs - logs.mean())).sum() / ((h - h.mean()) ** 2).sum())
    a = -slope * n_heads
    if not math.isfinite(a) or a == 0:
        return None
    s = float(-(logs.mean() * n_heads / a) - h.mean())
    for a_, s_ in ((round(a, 3) + 0.0, round(s, 3) + 0.0), (a, s)):
        fitted = 2.0 ** (-a_ * (h + s_) / n_heads)
        if _same_values(values.float(), fitted.float()):
            return a_, s_
    return None


def _slopes_finder(c: Check, fn, out, n_heads: int):
    """O fator a e o deslocamento s de 2^(−a(h+s)/H), ajustados e conferidos com outro H."""

    def find() -> Finding | None:
        fit = _fit_slopes(out, n_heads)
        if fit is None or (abs(fit[0] - 8) < 1e-3 and abs(fit[1]) < 1e-3):
            return None
        H2 = _other_heads(n_heads)
        again = _answer_tensor(c, fn, (H2,))
        fit2 = None if again is None else _fit_slopes(again, H2)
        if fit2 is None or abs(fit2[0] - fit[0]) > 1e-2 or abs(fit2[1] - fit[1]) > 1e-2:
            return None
        a, s = fit
        parts = []
        if abs(a - 8) >= 1e-3:
            parts.append(f"o fator do expoente é {br(a, '.4g')}, não 8")
        if abs(s) >= 1e-3:
            h = f"h {'+' if s > 0 else '−'} {br(abs(s), '.4g')}"
            parts.append(f"o índice das cabeças é {h} em vez de h = 1 … H")
        text = f"suas inclinações seguem 2^(−a·(h + s)/H) com a = {br(a, '.4g')} e s = {br(s, '.4g')}: " + (
            "; ".join(parts) + "."
        )
        return Finding("parametro", "expoente-das-inclinacoes", text, "as inclinações")

    return find


def _run_slopes(c: Check, fn: Callable, n_heads: int) -> torch.Tensor:
    c.case(f"alibi_slopes(n_heads={n_heads})")
    out = c.call(fn, n_heads)
    c.dtype(out, torch.float32, "as inclinações", HINT["float32"], kind="dtype", mistake="dtype-float32")
    H2 = _other_heads(n_heads)
    again = {}

    def confirm(mistake: Mistake) -> bool:
        if "out" not in again:
            again["out"] = _answer_tensor(c, fn, (H2,))
        candidate = next(m for m in _slope_mistakes(H2) if m.key == mistake.key)
        return _same_values(again["out"], candidate.value)

    with c.diagnosing(_slopes_finder(c, fn, out, n_heads)):
        c.close(
            out, _slopes_table(n_heads).float(), "as inclinações", _slope_mistakes(n_heads), confirm=confirm
        )
    return out


@SLOPES.visible_check
def check_alibi_slopes(fn: Callable) -> None:
    """Testes visíveis de ``alibi_slopes``."""
    with SLOPES.check() as c:
        _run_slopes(c, fn, 8)
        _run_slopes(c, fn, 4)


@SLOPES.hidden_check
def check_alibi_slopes_hidden(fn: Callable) -> None:
    """Testes ocultos: H = 1, H = 16, H que não é potência de 2, H inválido."""
    with SLOPES.check(hidden=True) as c:
        for h in (16, 12, 1):
            _run_slopes(c, fn, h)
        for h in (0, -2):
            _value_error(c, f"alibi_slopes(n_heads={h})", "n_heads ≤ 0 deveria levantar ValueError.", fn, h)
        # por último: uma resposta errada ouve antes o diagnóstico do erro dela
        c.refuse_reference(fn, reference.alibi_slopes, lambda: fn(4))


def _bias_table(n_heads: int, seq_len: int, variant: str = "certo") -> torch.Tensor:
    slopes = _slopes_table(n_heads, variant if variant in ("h-1", "sem 8", "oficial") else "certo")
    if variant == "uma inclinação":
        slopes = slopes[:1].expand(n_heads)
    pos = torch.arange(seq_len, dtype=torch.float64)
    diff = pos[:, None] - pos[None, :]  # i − j
    distance = {
        "sem abs": diff,
        "sem abs (j - i)": -diff,
        "causal": diff.clamp_min(0),
        "sinal": -diff.abs(),
    }.get(variant, diff.abs())
    return torch.stack([-m * distance for m in slopes.tolist()])


BIAS_MISTAKES = {
    "sinal": "o viés com o sinal trocado (+m·|i − j|: posições distantes ganham score)",
    "sem abs": "o viés −m·(i − j) sem o valor absoluto",
    "sem abs (j - i)": "o viés −m·(j − i) sem o valor absoluto",
    "causal": "só a parte causal (zero acima da diagonal) em vez de −m·|i − j| em toda a matriz",
    "h-1": "as inclinações com h = 0 … H−1 (uma cabeça fora)",
    "sem 8": "as inclinações sem o 8 no expoente (2^(−h/H))",
    "oficial": "as inclinações da receita oficial (`get_slopes`) para H que não é potência de 2; o exercício "
    "pede 2^(−8h/H) para todo H",
    "uma inclinação": "a mesma inclinação para todas as cabeças (cada cabeça h tem a sua, m_h)",
}
BIAS_IDS = {
    "sinal": "sinal-trocado",
    "sem abs": "sem-valor-absoluto",
    "sem abs (j - i)": "sem-valor-absoluto-j-i",
    "causal": "so-parte-causal",
    "h-1": "h-desde-0",
    "sem 8": "sem-o-8",
    "oficial": "receita-oficial",
    "uma inclinação": "uma-inclinacao",
}


def _bias_mistakes(n_heads: int, seq_len: int) -> list[Mistake]:
    return [
        Mistake(label, _bias_table(n_heads, seq_len, key).float(), BIAS_IDS[key])
        for key, label in BIAS_MISTAKES.items()
    ]


def _upstream_of(obj, name: str):
    """A resposta do aluno a um exercício anterior (``name``), vista de onde ``obj`` foi definido (ou None).

    No juiz, pelo nome no kernel; ao estudar, nos globais da função (ou dos métodos da classe).
    """
    if isinstance(obj, Remote):
        return Remote(name)
    functions = [obj] if not isinstance(obj, type) else [v for v in vars(obj).values() if callable(v)]
    for function in functions:
        scope = getattr(function, "__globals__", None)
        found = scope.get(name) if isinstance(scope, dict) else None
        if callable(found) and found is not obj:
            return found
    return None


def _slopes_blame(c: Check, fn, n_heads: int, seq_len: int, bias) -> tuple[str, str] | None:
    """(id, o que está errado em `alibi_slopes`) se o viés do aluno é o certo com as inclinações dele."""
    slopes_fn = _upstream_of(fn, "alibi_slopes")
    if slopes_fn is None or not isinstance(bias, torch.Tensor):
        return None
    response = c.run(slopes_fn, (n_heads,))
    slopes = response.value
    if (
        response.error is not None
        or not isinstance(slopes, torch.Tensor)
        or tuple(slopes.shape) != (n_heads,)
    ):
        return None
    right = _slopes_table(n_heads).float()
    if _same_values(slopes, right):
        return None
    distance = (torch.arange(seq_len)[:, None] - torch.arange(seq_len)[None, :]).abs().double()
    composed = -slopes.double()[:, None, None] * distance
    if not _same_values(bias.float(), composed.float()):
        return None
    known = next((m for m in _slope_mistakes(n_heads) if _same_values(slopes, m.value)), None)
    return (
        (known.key, f"ela coincide com {known.name}")
        if known
        else ("valores", "ela devolve outras inclinações")
    )


def _upstream_bias_finder(c: Check, fn, n_heads: int, seq_len: int, bias):
    def find() -> Finding | None:
        blame = _slopes_blame(c, fn, n_heads, seq_len, bias)
        if blame is None:
            return None
        H2, T2 = _other_heads(n_heads), seq_len + 2
        bias2 = _answer_tensor(c, fn, (H2, T2))
        blame2 = None if bias2 is None else _slopes_blame(c, fn, H2, T2, bias2)
        if blame2 is None or blame2[0] != blame[0]:
            return None
        text = (
            f"o erro está em `alibi_slopes`, que a sua `alibi_bias` usa: {blame[1]}. "
            "Corrija `alibi_slopes` primeiro."
        )
        return Finding("anterior", f"erro-em-alibi_slopes/{blame[0]}", text, "o viés")

    return find


def _bias_properties(bias: torch.Tensor, n_heads: int, seq_len: int):
    """A distância certa com outras inclinações, ou a primeira propriedade do viés que quebra."""

    def find() -> Finding | None:
        b = bias.detach().double()
        diag = torch.diagonal(b, dim1=-2, dim2=-1)
        if idx := _first_index(diag.abs() > 1e-6):
            text = (
                f"bias[h, i, i] deveria ser 0 (distância 0); na cabeça {idx[0]}, posição {idx[1]}, "
                f"vale {br(float(diag[idx]), '.4g')}."
            )
            return Finding("propriedade", "diagonal-nula", text)
        if idx := _first_index((b - b.transpose(-2, -1)).abs() > 1e-6):
            text = (
                f"o viés deveria ser simétrico (|i − j| = |j − i|); no índice {idx} ele difere do transposto."
            )
            return Finding("propriedade", "simetria", text)
        if idx := _first_index(b > 1e-6):
            text = f"o viés −m·|i − j| nunca é positivo; no índice {idx} vale {br(float(b[idx]), '.4g')}."
            return Finding("propriedade", "vies-nao-positivo", text)
        if seq_len > 1:
            distance = (torch.arange(seq_len)[:, None] - torch.arange(seq_len)[None, :]).abs().double()
            slopes = -b[:, 0, 1]
            if _same_values((-slopes[:, None, None] * distance).float(), b.float()):
                right = _slopes_table(n_heads)
                h = int(torch.nonzero(~torch.isclose(slopes, right, rtol=1e-4))[0][0]) if n_heads else 0
                text = (
                    f"a distância |i − j| está certa, mas as inclinações não: na cabeça {h}, "
                    f"m = {br(float(slopes[h]), '.6g')}, esperado {br(float(right[h]), '.6g')}."
                )
                return Finding("propriedade", "inclinacoes", text)
            slopes = _slopes_table(n_heads)
            used = b / -slopes[:, None, None]  # a distância que cada cabeça usa
            if bool(torch.allclose(used, used[:1].expand_as(used), rtol=1e-4, atol=1e-6)):
                wrong = ~torch.isclose(used[0], distance, rtol=1e-4, atol=1e-6)
                i, j = _first_index(wrong)
                text = (
                    f"as inclinações estão certas, mas a distância não é |i − j|: em (i, j) = ({i}, {j}) ela "
                    f"vale {br(float(used[0, i, j]), '.4g')}, e |i − j| = {abs(i - j)}."
                )
                return Finding("propriedade", "distancia", text)
        return None

    return find


def _first_index(flags: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in flags.nonzero()[0]) if flags.any() else ()


def _run_bias(c: Check, fn: Callable, n_heads: int, seq_len: int) -> torch.Tensor:
    c.case(f"alibi_bias(n_heads={n_heads}, seq_len={seq_len})")
    out = c.call(fn, n_heads, seq_len)
    heads_last = isinstance(out, torch.Tensor) and tuple(out.shape) == (seq_len, seq_len, n_heads)
    c.expect(
        isinstance(out, torch.Tensor) and tuple(out.shape) == (n_heads, seq_len, seq_len),
        f"Esperava um tensor {(n_heads, seq_len, seq_len)}; veio {describe(out)}.",
        "o eixo das cabeças ficou no fim: a forma é (n_heads, seq_len, seq_len)."
        if heads_last and n_heads != seq_len
        else None,
        kind="forma",
        **({"mistake": "cabecas-no-fim"} if heads_last and n_heads != seq_len else {}),
    )
    c.expect(
        out.is_floating_point(), f"Esperava ponto flutuante; veio {dtype_name(out.dtype)}.", kind="dtype"
    )
    H2, T2 = _other_heads(n_heads), seq_len + 2
    again = {}

    def confirm(mistake: Mistake) -> bool:
        if "out" not in again:
            again["out"] = _answer_tensor(c, fn, (H2, T2))
        candidate = next(m for m in _bias_mistakes(H2, T2) if m.key == mistake.key)
        return again["out"] is not None and _same_values(again["out"].float(), candidate.value)

    # antes de tudo, o exercício anterior: com as inclinações do aluno erradas, o erro está lá
    try:
        expected, mistakes = _bias_table(n_heads, seq_len).float(), _bias_mistakes(n_heads, seq_len)
        c.close(out.float(), expected, "o viés", mistakes, confirm=confirm)
    except CheckFailure as failure:
        finding = c.find(_upstream_bias_finder(c, fn, n_heads, seq_len, out))
        if finding is None and not failure.data.get("mistake"):
            finding = c.find(_bias_properties(out, n_heads, seq_len))
        if finding is None:
            raise
        raise c.diagnosed(failure, finding) from None
    return out


@BIAS.visible_check
def check_alibi_bias(fn: Callable) -> None:
    """Testes visíveis de ``alibi_bias``."""
    with BIAS.check() as c:
        _run_bias(c, fn, 2, 4)
        _run_bias(c, fn, 8, 6)


@BIAS.hidden_check
def check_alibi_bias_hidden(fn: Callable) -> None:
    """Testes ocultos: H = 1 e T = 1, H que não é potência de 2, comprimentos inválidos."""
    with BIAS.check(hidden=True) as c:
        for h, t in ((1, 1), (12, 10), (16, 3)):
            _run_bias(c, fn, h, t)
        _value_error(
            c, "alibi_bias(n_heads=4, seq_len=0)", "seq_len ≤ 0 deveria levantar ValueError.", fn, 4, 0
        )
        # por último: uma resposta errada ouve antes o diagnóstico do erro dela
        c.refuse_reference(fn, reference.alibi_bias, lambda: fn(4, 5))


EXERCISES = (TOK, SIN, SPE, LPE, ROPE, SLOPES, BIAS)
__all__ = [ex.visible.__name__ for ex in EXERCISES]  # só as verificações visíveis
