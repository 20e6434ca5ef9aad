"""Verificações do capítulo 3: ``split_heads``, ``merge_heads`` e ``MultiHeadAttention``.

Oráculos independentes do código do aluno: a separação e a junção das cabeças escritas
com fatias e laços (a cabeça h fica com as colunas h·Dk … (h+1)·Dk − 1), e
``nn.MultiheadAttention(batch_first=True)`` do PyTorch com os mesmos pesos copiados
(``in_proj_weight`` em três fatias, ``out_proj``), pesos por cabeça
(``average_attn_weights=False``) e a máscara traduzida para a convenção dele
(``attn_mask`` booleana com True = bloqueado, por isso ``~mask``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from .. import interop
from .. import multihead as reference
from ..runtime import seeded_generator
from ..feedback import (
    CheckFailure,
    Mistake,
    call,
    describe,
    expect,
    expect_close,
    expect_not_reference,
    expect_unchanged,
    forbid_torch_functions,
    passed,
    single_threaded,
    snapshot,
)

__all__ = [
    "check_merge_heads",
    "check_merge_heads_hidden",
    "check_multi_head_attention",
    "check_multi_head_attention_hidden",
    "check_split_heads",
    "check_split_heads_hidden",
]

SPLIT = "split_heads"
MERGE = "merge_heads"
MHA = "MultiHeadAttention"

VIEW_HINT = (
    "`view` só funciona quando a memória do tensor é contígua, e depois de um `transpose` ela não é: "
    "use `.reshape(...)` ou `.contiguous().view(...)`."
)
DIVISIBILITY_HINT = (
    "falta a verificação de divisibilidade: antes de separar as cabeças, teste `d_model % n_heads` e "
    "levante `ValueError` com uma mensagem que explique o problema."
)


# ---------------------------------------------------------------- utilidades


_single_threaded = single_threaded


def _call(fn: Callable, name: str, tried: str, *args, hint_on_error: str | None = None, **kwargs):
    """Como ``feedback.call``, mas reconhece o erro clássico de `view` em tensor não contíguo."""
    __tracebackhide__ = True
    try:
        return call(fn, name, tried, *args, hint_on_error=hint_on_error, **kwargs)
    except CheckFailure as failure:
        text = str(failure)
        if "view size is not compatible" in text and "Diagnóstico" not in text:
            raise CheckFailure(f"{text}\nDiagnóstico provável: {VIEW_HINT}") from None
        raise


def _expect_value_error(fn: Callable, name: str, tried: str, *args, **kwargs) -> None:
    """Exige ``ValueError`` com mensagem; qualquer outro desfecho cita a divisibilidade."""
    __tracebackhide__ = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(*args, **kwargs)
        except NotImplementedError:
            raise CheckFailure(f"Você ainda não implementou `{name}` (não implementado).") from None
        except ValueError as exc:
            expect(
                bool(str(exc).strip()),
                name,
                tried,
                "Levantou ValueError, mas sem mensagem: diga ao usuário o que está errado.",
            )
            return
        except Exception as exc:  # noqa: BLE001 - toda exceção do aluno vira mensagem
            raise CheckFailure(
                f"`{name}` falhou.\nTeste: {tried}\n"
                f"Esperava ValueError; sua função levantou {type(exc).__name__}: {str(exc)[:200]}\n"
                f"Diagnóstico provável: {DIVISIBILITY_HINT}"
            ) from None
    raise CheckFailure(
        f"`{name}` falhou.\nTeste: {tried}\nEsperava ValueError, mas nenhuma exceção foi levantada.\n"
        f"Diagnóstico provável: {DIVISIBILITY_HINT}"
    )


_not_reference = expect_not_reference


def _labeled(B: int, T: int, D: int, dtype=torch.float32) -> torch.Tensor:
    """x[b, t, d] = 100·b + 10·t + d: cada número diz de que token e coluna veio."""
    b = torch.arange(B).view(B, 1, 1) * 100
    t = torch.arange(T).view(1, T, 1) * 10
    d = torch.arange(D).view(1, 1, D)
    return (b + t + d).to(dtype)


def _randn(gen, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen, dtype=dtype)


# ---------------------------------------------------------------- split_heads


def _split_oracle(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """A cabeça h fica com as colunas h·Dk … (h+1)·Dk − 1 de cada token (fatias, sem reshape)."""
    d_k = x.size(-1) // n_heads
    return torch.stack([x[:, :, h * d_k : (h + 1) * d_k] for h in range(n_heads)], dim=1)


def _split_mistakes(x: torch.Tensor, n_heads: int) -> list[Mistake]:
    B, T, D = x.shape
    d_k = D // n_heads
    return [
        Mistake(
            "um `view`/`reshape` direto para (B, H, T, Dk), sem `transpose`: números de tokens "
            "diferentes foram parar na mesma cabeça",
            x.reshape(B, n_heads, T, d_k),
        ),
        Mistake(
            "a forma (B, T, H, Dk): faltou o `transpose(1, 2)` que põe o eixo das cabeças antes do "
            "eixo dos tokens",
            x.reshape(B, T, n_heads, d_k),
        ),
        Mistake(
            "cabeças intercaladas (reshape para (B, T, Dk, H)): a cabeça h deve ficar com o bloco "
            "contíguo de colunas h·Dk … (h+1)·Dk − 1",
            x.reshape(B, T, d_k, n_heads).permute(0, 3, 1, 2),
        ),
    ]


def _run_split(fn: Callable, x: torch.Tensor, n_heads: int, tried: str) -> torch.Tensor:
    before = snapshot(x)
    expected = _split_oracle(x, n_heads)
    result = _call(fn, SPLIT, tried, x, n_heads)
    expect_unchanged(before, [x], ["x"], SPLIT, tried)
    expect_close(result, expected, SPLIT, tried, "a saída", _split_mistakes(x, n_heads))
    return result


@_single_threaded
def check_split_heads(fn: Callable) -> None:
    """Testes visíveis de ``split_heads``."""
    __tracebackhide__ = True
    n = 0
    x = _labeled(1, 3, 4)
    _run_split(
        fn,
        x,
        2,
        "x (1, 3, 4) com x[0, t, d] = 10·t + d, n_heads = 2 "
        "(esperado: cabeça 0 = colunas 0-1, cabeça 1 = colunas 2-3, de cada token)",
    )
    n += 1
    gen = seeded_generator(30)
    _run_split(fn, _randn(gen, 2, 5, 12), 3, "x aleatório (2, 5, 12), n_heads = 3 (esperado: (2, 3, 5, 4))")
    n += 1
    _run_split(fn, _randn(gen, 2, 4, 8), 8, "x aleatório (2, 4, 8), n_heads = 8 (d_k = 1)")
    n += 1
    _expect_value_error(
        fn, SPLIT, "x (2, 3, 10), n_heads = 4 (10 não é divisível por 4)", _randn(gen, 2, 3, 10), 4
    )
    n += 1
    passed(SPLIT, n)


@_single_threaded
def check_split_heads_hidden(fn: Callable) -> None:
    """Testes ocultos de ``split_heads``: float64, uma cabeça, não contíguo, gradientes, divisibilidade."""
    __tracebackhide__ = True
    n = 0
    _not_reference(fn, reference.split_heads, SPLIT)
    n += 1
    gen = seeded_generator(31)
    _run_split(fn, _randn(gen, 3, 4, 6, dtype=torch.float64), 2, "x (3, 4, 6) float64, n_heads = 2")
    n += 1
    _run_split(fn, _randn(gen, 2, 5, 6), 1, "x (2, 5, 6), n_heads = 1 (uma cabeça só)")
    n += 1
    x = _randn(gen, 7, 2, 12).transpose(0, 1)  # (2, 7, 12), não contíguo
    _run_split(fn, x, 4, "x (2, 7, 12) não contíguo (vindo de um transpose), n_heads = 4")
    n += 1
    _run_split(fn, _randn(gen, 1, 1, 4), 2, "x (1, 1, 4): um token só, n_heads = 2")
    n += 1
    for D, H in ((12, 5), (6, 4), (7, 2)):
        _expect_value_error(
            fn, SPLIT, f"x (1, 2, {D}), n_heads = {H} ({D} não é divisível por {H})", _randn(gen, 1, 2, D), H
        )
        n += 1
    x = _randn(gen, 2, 3, 8, dtype=torch.float64).requires_grad_()
    tried = "x (2, 3, 8) float64 com requires_grad, n_heads = 2 (gradientes)"
    out = _call(fn, SPLIT, tried, x, 2)
    expect(
        isinstance(out, torch.Tensor) and out.requires_grad,
        SPLIT,
        tried,
        "A saída não está ligada ao grafo de gradientes (use só operações do PyTorch, sem `.detach()`).",
    )
    weights = torch.arange(out.numel(), dtype=torch.float64).view(out.shape)
    _call(lambda: (out * weights).sum().backward(), SPLIT, tried)
    expect_close(x.grad, _merge_oracle(weights), SPLIT, tried, "o gradiente em `x`")
    n += 1
    passed(SPLIT, n, "(testes ocultos)")


# ---------------------------------------------------------------- merge_heads


def _merge_oracle(x: torch.Tensor) -> torch.Tensor:
    """Concatena as cabeças lado a lado: [cabeça 0 | cabeça 1 | …] em cada token."""
    return torch.cat([x[:, h] for h in range(x.size(1))], dim=-1)


def _merge_mistakes(x: torch.Tensor) -> list[Mistake]:
    B, H, T, Dk = x.shape
    return [
        Mistake(
            "um `view`/`reshape` direto de (B, H, T, Dk) para (B, T, H·Dk), sem `transpose`: "
            "tokens e cabeças se misturaram",
            x.reshape(B, T, H * Dk),
        ),
        Mistake(
            "cabeças intercaladas (o eixo Dk antes do eixo H ao achatar): as colunas de cada cabeça "
            "devem ficar juntas, [cabeça 0 | cabeça 1 | …]",
            x.permute(0, 2, 3, 1).reshape(B, T, H * Dk),
        ),
        Mistake("a forma (B, T, H, Dk): faltou juntar os dois últimos eixos em H·Dk", x.transpose(1, 2)),
        Mistake("a média das cabeças em vez da concatenação", x.mean(1)),
        Mistake("a soma das cabeças em vez da concatenação", x.sum(1)),
    ]


def _run_merge(fn: Callable, x: torch.Tensor, tried: str) -> torch.Tensor:
    before = snapshot(x)
    expected = _merge_oracle(x)
    result = _call(fn, MERGE, tried, x)
    expect_unchanged(before, [x], ["x"], MERGE, tried)
    expect_close(result, expected, MERGE, tried, "a saída", _merge_mistakes(x))
    return result


@_single_threaded
def check_merge_heads(fn: Callable) -> None:
    """Testes visíveis de ``merge_heads``."""
    __tracebackhide__ = True
    n = 0
    heads = reference.split_heads(_labeled(1, 3, 4), 2)  # (1, 2, 3, 2)
    _run_merge(
        fn,
        heads,
        "x (1, 2, 3, 2): as cabeças de um x (1, 3, 4) com x[0, t, d] = 10·t + d "
        "(esperado: de volta o x original)",
    )
    n += 1
    gen = seeded_generator(32)
    x = _randn(gen, 2, 3, 5, 4)
    _run_merge(fn, x, "x aleatório (2, 3, 5, 4) (esperado: (2, 5, 12))")
    n += 1
    original = _randn(gen, 2, 6, 8)
    tried = "merge_heads(split_heads(x, 4)) para x (2, 6, 8) (deve devolver x)"
    result = _run_merge(fn, reference.split_heads(original, 4), tried)
    expect_close(result, original, MERGE, tried, "a saída")
    n += 1
    passed(MERGE, n)


@_single_threaded
def check_merge_heads_hidden(fn: Callable) -> None:
    """Testes ocultos de ``merge_heads``: float64, uma cabeça, Dk = 1, contíguo, gradientes."""
    __tracebackhide__ = True
    n = 0
    _not_reference(fn, reference.merge_heads, MERGE)
    n += 1
    gen = seeded_generator(33)
    _run_merge(fn, _randn(gen, 3, 2, 4, 5, dtype=torch.float64), "x (3, 2, 4, 5) float64")
    n += 1
    _run_merge(fn, _randn(gen, 2, 1, 3, 6), "x (2, 1, 3, 6): uma cabeça só")
    n += 1
    _run_merge(fn, _randn(gen, 2, 6, 3, 1), "x (2, 6, 3, 1): d_k = 1")
    n += 1
    _run_merge(fn, _randn(gen, 2, 4, 3, 2).contiguous(), "x (2, 4, 3, 2) contíguo (criado com randn)")
    n += 1
    x = _randn(gen, 2, 3, 4, 2, dtype=torch.float64).requires_grad_()
    tried = "x (2, 3, 4, 2) float64 com requires_grad (gradientes)"
    out = _call(fn, MERGE, tried, x)
    expect(
        isinstance(out, torch.Tensor) and out.requires_grad,
        MERGE,
        tried,
        "A saída não está ligada ao grafo de gradientes (use só operações do PyTorch, sem `.detach()`).",
    )
    weights = torch.arange(out.numel(), dtype=torch.float64).view(out.shape)
    _call(lambda: (out * weights).sum().backward(), MERGE, tried)
    expect_close(x.grad, _split_oracle(weights, 3), MERGE, tried, "o gradiente em `x`")
    n += 1
    passed(MERGE, n, "(testes ocultos)")


# ---------------------------------------------------------------- MultiHeadAttention


def _torch_mha(D: int, H: int, bias: bool, seed: int, dtype) -> nn.MultiheadAttention:
    """Um ``nn.MultiheadAttention`` com pesos sorteados por um gerador próprio (não o global)."""
    with torch.random.fork_rng(devices=[]):
        torch_mha = nn.MultiheadAttention(D, H, bias=bias, batch_first=True)
    gen = seeded_generator(seed)
    with torch.no_grad():
        for name, p in torch_mha.named_parameters():
            std = 0.1 if "bias" in name else 1.3 / math.sqrt(D)
            p.copy_(torch.randn(p.shape, generator=gen) * std)
    return torch_mha.to(dtype).eval()


def _torch_mask(mask: torch.Tensor | None, B: int, H: int, Tq: int, Tk: int) -> torch.Tensor | None:
    """Nossa máscara (True = pode atender) na convenção do ``attn_mask`` (True = bloqueado).

    O ``attn_mask`` aceita (Tq, Tk) ou (B·H, Tq, Tk); as máscaras 3-D e 4-D são expandidas.
    """
    if mask is None or mask.dim() == 2:
        return None if mask is None else ~mask.expand(Tq, Tk)
    if mask.dim() == 3:
        mask = mask.unsqueeze(1)  # (B, Tq, Tk) -> (B, 1, Tq, Tk)
    return ~mask.expand(B, H, Tq, Tk).reshape(B * H, Tq, Tk)


def _oracle(torch_mha: nn.MultiheadAttention, query, key, value, mask):
    B, H, Tq, Tk = query.size(0), torch_mha.num_heads, query.size(1), key.size(1)
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out, weights = torch_mha(
            query,
            key,
            value,
            attn_mask=_torch_mask(mask, B, H, Tq, Tk),
            need_weights=True,
            average_attn_weights=False,
        )
    return out.detach(), weights.detach()


def _params(torch_mha: nn.MultiheadAttention) -> dict[str, torch.Tensor | None]:
    Wq, Wk, Wv = torch_mha.in_proj_weight.detach().chunk(3)
    if torch_mha.in_proj_bias is None:
        bq = bk = bv = bo = None
    else:
        bq, bk, bv = torch_mha.in_proj_bias.detach().chunk(3)
        bo = torch_mha.out_proj.bias.detach()
    return {
        "Wq": Wq,
        "bq": bq,
        "Wk": Wk,
        "bk": bk,
        "Wv": Wv,
        "bv": bv,
        "Wo": torch_mha.out_proj.weight.detach(),
        "bo": bo,
    }


def _variant(
    p,
    query,
    key,
    value,
    mask,
    H,
    *,
    split="right",
    merge="right",
    out_proj=True,
    scale="d_k",
    k_proj="K",
    v_proj="V",
    kv_from="key",
    mask_mode="right",
    mask3d="right",
):
    """A atenção com múltiplas cabeças escrita com UM erro conhecido (ou nenhum)."""
    B, Tq, D = query.shape
    d_k = D // H
    if kv_from == "query":
        key = value = query
    proj = {"Q": (p["Wq"], p["bq"]), "K": (p["Wk"], p["bk"]), "V": (p["Wv"], p["bv"])}
    q = F.linear(query, *proj["Q"])
    k = F.linear(key, *proj[k_proj])
    v = F.linear(value, *proj[v_proj])

    def sep(x):
        T = x.size(1)
        if split == "no_transpose":
            return x.reshape(B, H, T, d_k)
        if split == "interleaved":
            return x.reshape(B, T, d_k, H).permute(0, 3, 1, 2)
        return x.reshape(B, T, H, d_k).transpose(1, 2)

    q, k, v = sep(q), sep(k), sep(v)
    factor = {"d_k": 1 / math.sqrt(d_k), "d_model": 1 / math.sqrt(D), "d_k_linear": 1 / d_k, "none": 1.0}
    scores = q @ k.transpose(-2, -1) * factor[scale]
    if mask is not None and mask_mode != "ignored":
        m = mask.unsqueeze(1) if (mask.dim() == 3 and mask3d == "right") else mask
        blocked = m if mask_mode == "inverted" else ~m
        scores = scores.masked_fill(blocked, float("-inf"))
    weights = scores.softmax(-1)
    out = weights @ v  # (B, H, Tq, Dk)
    if merge == "no_transpose":
        out = out.reshape(B, Tq, D)
    else:
        out = out.transpose(1, 2).reshape(B, Tq, D)
    if out_proj:
        out = F.linear(out, p["Wo"], p["bo"])
    return out, weights


MHA_MISTAKES = [
    (
        "a separação de cabeças sem `transpose` (um `view`/`reshape` direto para (B, H, T, Dk) mistura "
        "tokens e cabeças)",
        {"split": "no_transpose"},
    ),
    (
        "a junção de cabeças sem `transpose` (um `view`/`reshape` direto de (B, H, T, Dk) para (B, T, D) "
        "mistura tokens e cabeças)",
        {"merge": "no_transpose"},
    ),
    (
        "a separação com cabeças intercaladas: cada cabeça deve ficar com um bloco contíguo de Dk colunas",
        {"split": "interleaved"},
    ),
    (
        "a atenção SEM a projeção de saída W_O (faltou aplicar `self.W_O` depois de juntar as cabeças)",
        {"out_proj": False},
    ),
    (
        "a escala 1/√d_model em vez de 1/√d_k: cada cabeça tem largura d_k = d_model / n_heads",
        {"scale": "d_model"},
    ),
    ("a escala 1/d_k em vez de 1/√d_k", {"scale": "d_k_linear"}),
    ("a atenção SEM a divisão por √d_k", {"scale": "none"}),
    ("a mesma projeção para K e V: os valores passaram por W_K em vez de W_V", {"v_proj": "K"}),
    ("a mesma projeção para K e V: as chaves passaram por W_V em vez de W_K", {"k_proj": "V"}),
    (
        "K e V calculados a partir de `query`: na atenção cruzada eles vêm de `key` e `value`",
        {"kv_from": "query"},
    ),
]
MASK_MISTAKES = [
    (
        "a máscara 3-D (B, Tq, Tk) sem o eixo das cabeças: contra os scores (B, H, Tq, Tk) o PyTorch "
        "alinha o eixo do lote com o das cabeças; use `mask.unsqueeze(1)` → (B, 1, Tq, Tk)",
        {"mask3d": "raw"},
    ),
    (
        "a máscara invertida: True bloqueou (é a convenção do `attn_mask` do nn.MultiheadAttention), mas "
        "aqui True = pode atender",
        {"mask_mode": "inverted"},
    ),
    ("a atenção sem máscara (a máscara foi ignorada)", {"mask_mode": "ignored"}),
]


def _mha_mistakes(p, query, key, value, mask, H):
    cases = MHA_MISTAKES + (MASK_MISTAKES if mask is not None else [])
    outs, ws = [], []
    for label, kwargs in cases:
        try:
            out, w = _variant(p, query, key, value, mask, H, **kwargs)
        except RuntimeError:  # erro que nesta forma nem roda (ex.: difusão impossível)
            continue
        outs.append(Mistake(label, out))
        ws.append(Mistake(label, w))
    _, w = _variant(p, query, key, value, mask, H)
    B, _, Tq, Tk = w.shape
    ws += [
        Mistake(
            "os pesos médios sobre as cabeças (o `average_attn_weights=True` do PyTorch); devolva um "
            "mapa por cabeça, (B, H, Tq, Tk)",
            w.mean(1),
        ),
        Mistake(
            "os pesos com lote e cabeças fundidos em um eixo; devolva (B, H, Tq, Tk)",
            w.reshape(B * H, Tq, Tk),
        ),
    ]
    return outs, ws


def _tried(query, key, value, mask, D, H, extra=""):
    kind = "autoatenção" if (query is key and key is value) else "atenção cruzada"
    m = "sem máscara" if mask is None else f"máscara {tuple(mask.shape)}"
    return (
        f"MultiHeadAttention(d_model={D}, n_heads={H}), {kind}: query {tuple(query.shape)}, "
        f"key {tuple(key.shape)}, value {tuple(value.shape)} {str(query.dtype)[6:]}, {m}{extra}"
    )


def _build(cls, D: int, H: int, tried: str, bias: bool = True, dropout: float = 0.0):
    """Constrói o módulo do aluno (sem mexer no gerador global) e confere atributos e parâmetros."""
    __tracebackhide__ = True
    with torch.random.fork_rng(devices=[]):
        module = _call(cls, MHA, tried, D, H, dropout=dropout, bias=bias)
    expect(
        isinstance(module, nn.Module),
        MHA,
        tried,
        f"Esperava um `nn.Module`; veio {describe(module)}.",
        "a classe deve herdar de `nn.Module`.",
    )
    for attr in ("W_Q", "W_K", "W_V", "W_O"):
        lin = getattr(module, attr, None)
        expect(
            isinstance(lin, nn.Linear),
            MHA,
            tried,
            f"O atributo `{attr}` deveria ser um `nn.Linear`; encontrei {describe(lin)}.",
            "crie as quatro projeções no `__init__`: `self.W_Q = nn.Linear(d_model, d_model, bias=bias)`…",
        )
        expect(
            (lin.in_features, lin.out_features) == (D, D),
            MHA,
            tried,
            f"`{attr}` é nn.Linear({lin.in_features}, {lin.out_features}); esperado nn.Linear({D}, {D}).",
            "cada projeção leva d_model em d_model (as H cabeças juntas), não d_model em d_k.",
        )
        expect(
            (lin.bias is not None) == bias,
            MHA,
            tried,
            f"`{attr}` {'não ' if bias else ''}deveria ter viés (bias={bias}).",
            "passe `bias=bias` para as quatro `nn.Linear`.",
        )
    expect(
        not any(isinstance(m, nn.MultiheadAttention) for m in module.modules()),
        MHA,
        tried,
        "Seu módulo contém um `nn.MultiheadAttention` do PyTorch.",
        "o exercício é escrever a atenção com as quatro projeções; o PyTorch é o gabarito.",
    )
    n_params = sum(p.numel() for p in module.parameters())
    n_expected = 4 * D * D + (4 * D if bias else 0)
    expect(
        n_params == n_expected,
        MHA,
        tried,
        f"O módulo tem {n_params} parâmetros; esperado 4·d_model² {'+ 4·d_model ' if bias else ''}"
        f"= {n_expected} (as quatro projeções e nada mais).",
        "há parâmetros a mais (uma camada extra, ou projeções por cabeça além de W_Q, W_K, W_V, W_O)?",
    )
    return module


def _run_mha(
    cls,
    query,
    key,
    value,
    mask,
    H,
    *,
    seed,
    bias=True,
    dropout=0.0,
    extra="",
    hint_on_error=None,
    eval_mode=False,
):
    """Um caso completo: constrói, copia os pesos do PyTorch, roda e compara saída e pesos."""
    __tracebackhide__ = True
    D, dtype = query.size(-1), query.dtype
    tried = _tried(query, key, value, mask, D, H, extra)
    module = _build(cls, D, H, tried, bias=bias, dropout=dropout)
    torch_mha = _torch_mha(D, H, bias, seed, dtype)
    module = module.to(dtype)
    if eval_mode:
        module.eval()
    interop.load_from_torch(module, torch_mha)
    expected_out, expected_w = _oracle(torch_mha, query, key, value, mask)
    out_mistakes, w_mistakes = _mha_mistakes(_params(torch_mha), query, key, value, mask, H)
    inputs = [t for t in (query, key, value, mask) if t is not None]
    labels = ["query", "key", "value", "mask"][: len(inputs)]
    before = snapshot(*inputs)
    result = _call(module, MHA, tried, query, key, value, mask, hint_on_error=hint_on_error)
    expect_unchanged(before, inputs, labels, MHA, tried)
    expect(
        isinstance(result, tuple) and len(result) == 2,
        MHA,
        tried,
        f"Esperava uma tupla (output, weights); veio {describe(result)}.",
    )
    output, weights = result
    expect_close(weights, expected_w, MHA, tried, "`weights`", w_mistakes)
    expect_close(output, expected_out, MHA, tried, "`output`", out_mistakes)
    return module, output, weights


def _mask(gen, *shape) -> torch.Tensor:
    """Máscara aleatória em que toda linha tem ao menos uma posição liberada e uma bloqueada."""
    mask = torch.rand(*shape, generator=gen) < 0.5
    mask[..., 0] = True
    if shape[-1] > 1:
        mask[..., -1] = False
    return mask[..., torch.randperm(shape[-1], generator=gen)]


MASK3D_HINT = (
    "uma máscara 3-D (B, Tq, Tk) precisa ganhar o eixo das cabeças antes de encontrar os scores "
    "(B, H, Tq, Tk): `mask.unsqueeze(1)` → (B, 1, Tq, Tk)."
)


@_single_threaded
def check_multi_head_attention(cls) -> None:
    """Testes visíveis de ``MultiHeadAttention`` (comparada com ``nn.MultiheadAttention``)."""
    __tracebackhide__ = True
    n = 0
    gen = seeded_generator(40)
    # 1. autoatenção sem máscara
    x = _randn(gen, 2, 5, 12)
    _run_mha(cls, x, x, x, None, 3, seed=1)
    n += 1
    # 2. atenção cruzada, Tq ≠ Tk, máscara 2-D (Tq, Tk)
    q, kv = _randn(gen, 2, 3, 8), _randn(gen, 2, 6, 8)
    _run_mha(cls, q, kv, kv, _mask(gen, 3, 6), 2, seed=2)
    n += 1
    # 3. máscara 3-D (B, Tq, Tk) com B = H: sem o eixo das cabeças, o erro passaria em silêncio
    q, k, v = _randn(gen, 2, 4, 8), _randn(gen, 2, 5, 8), _randn(gen, 2, 5, 8)
    _run_mha(cls, q, k, v, _mask(gen, 2, 4, 5), 2, seed=3, hint_on_error=MASK3D_HINT)
    n += 1
    # 4. máscara 4-D de padding (B, 1, 1, Tk)
    x = _randn(gen, 2, 6, 8)
    pad = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    pad[1, ..., 4:] = False
    _run_mha(cls, x, x, x, pad, 4, seed=4, extra=" (padding)")
    n += 1
    # 5. d_model não divisível por n_heads
    _expect_value_error(cls, MHA, "MultiHeadAttention(d_model=10, n_heads=4)", 10, 4)
    n += 1
    passed(MHA, n)


def _dropped_weights_mistake(train_w, eval_w) -> list[Mistake]:
    """Os pesos de depois do dropout (p = 0,5): cada um é 0 ou o dobro do peso sem dropout."""
    if not (isinstance(train_w, torch.Tensor) and train_w.shape == eval_w.shape):
        return []
    dropped = torch.where(train_w == 0, torch.zeros_like(eval_w), 2 * eval_w)
    label = (
        "os pesos depois do dropout (zeros e o resto ×2); devolva os de antes, "
        "e use o dropout só no produto pelos valores"
    )
    return [Mistake(label, dropped)]


def _check_train_dropout(cls, x) -> None:
    """Modo de treino com dropout=0.5: os pesos devolvidos são os de antes do dropout e a saída muda."""
    __tracebackhide__ = True
    D, H = x.size(-1), 2
    tried = _tried(x, x, x, None, D, H, " (dropout=0.5, modo de treino)")
    module = _build(cls, D, H, tried, dropout=0.5)
    interop.load_from_torch(module, _torch_mha(D, H, True, 20, x.dtype))
    module.eval()
    with torch.no_grad():
        eval_out, eval_w = _call(module, MHA, tried, x, x, x, None)
    module.train()
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(0)  # só o gerador da CPU (fork_rng o restaura)
        train_out, train_w = _call(module, MHA, tried, x, x, x, None)
    expect_close(
        train_w,
        eval_w,
        MHA,
        tried,
        "`weights` (modo de treino)",
        _dropped_weights_mistake(train_w, eval_w),
    )
    expect(
        not torch.allclose(train_out, eval_out),
        MHA,
        tried,
        "Em modo de treino, com dropout=0.5, a saída saiu igual à do modo de avaliação.",
        "o `nn.Dropout` foi criado mas não é aplicado: use-o nos pesos antes do produto pelos valores, "
        "`self.dropout(weights) @ V`.",
    )


@_single_threaded
def check_multi_head_attention_hidden(cls) -> None:
    """Testes ocultos: float64, sem viés, H = 1 e H = D, máscaras 3-D/4-D, gradientes, atalhos."""
    __tracebackhide__ = True
    n = 0
    _not_reference(cls, reference.MultiHeadAttention, MHA)
    n += 1
    gen = seeded_generator(41)
    # float64, atenção cruzada com key ≠ value
    q, k, v = (_randn(gen, 2, T, 12, dtype=torch.float64) for T in (4, 7, 7))
    _run_mha(cls, q, k, v, None, 3, seed=10)
    n += 1
    # sem viés; uma cabeça; d_k = 1
    x = _randn(gen, 2, 5, 8)
    _run_mha(cls, x, x, x, None, 2, seed=11, bias=False, extra=" (bias=False)")
    _run_mha(cls, x, x, x, None, 1, seed=12, extra=" (uma cabeça)")
    _run_mha(cls, x, x, x, None, 8, seed=13, extra=" (d_k = 1)")
    n += 3
    # máscara 3-D com B ≠ H (sem o eixo das cabeças, a difusão falha) e causal 2-D em float64
    q, kv = _randn(gen, 3, 4, 8), _randn(gen, 3, 6, 8)
    _run_mha(cls, q, kv, kv, _mask(gen, 3, 4, 6), 2, seed=14, hint_on_error=MASK3D_HINT)
    x = _randn(gen, 2, 5, 8, dtype=torch.float64)
    _run_mha(cls, x, x, x, torch.ones(5, 5, dtype=torch.bool).tril(), 4, seed=15, extra=" (causal)")
    n += 2
    # máscara 4-D diferente por cabeça (B, H, Tq, Tk)
    q, kv = _randn(gen, 2, 3, 12), _randn(gen, 2, 4, 12)
    _run_mha(cls, q, kv, kv, _mask(gen, 2, 3, 3, 4), 3, seed=16, extra=" (uma máscara por cabeça)")
    n += 1
    # lote 1, entradas não contíguas; modo de avaliação com dropout declarado
    x = _randn(gen, 5, 1, 8).transpose(0, 1)
    _run_mha(cls, x, x, x, None, 2, seed=17, extra=" (entrada não contígua)")
    x = _randn(gen, 2, 4, 8)
    _run_mha(
        cls,
        x,
        x,
        x,
        None,
        2,
        seed=18,
        dropout=0.3,
        eval_mode=True,
        extra=" (dropout=0.3, modo de avaliação: o dropout não age)",
    )
    n += 2
    _check_train_dropout(cls, _randn(gen, 2, 4, 8))
    n += 1
    # divisibilidade
    for D, H in ((12, 5), (8, 3)):
        _expect_value_error(cls, MHA, f"MultiHeadAttention(d_model={D}, n_heads={H})", D, H)
        n += 1
    # gradientes iguais aos do PyTorch em todos os parâmetros e nas entradas
    q, kv = _randn(gen, 2, 3, 8, dtype=torch.float64), _randn(gen, 2, 4, 8, dtype=torch.float64)
    mask = _mask(gen, 3, 4)
    tried = _tried(q, kv, kv, mask, 8, 2, " (gradientes)")
    module = _build(cls, 8, 2, tried).to(torch.float64)
    torch_mha = _torch_mha(8, 2, True, 19, torch.float64)
    interop.load_from_torch(module, torch_mha)
    qs, kvs = q.clone().requires_grad_(), kv.clone().requires_grad_()
    qo, kvo = q.clone().requires_grad_(), kv.clone().requires_grad_()
    output, _ = _call(module, MHA, tried, qs, kvs, kvs, mask)
    expect(
        isinstance(output, torch.Tensor) and output.requires_grad,
        MHA,
        tried,
        "A saída não está ligada ao grafo de gradientes (sem `.detach()`, `.numpy()` ou `.item()`).",
    )
    _call(lambda: output.pow(2).sum().backward(), MHA, tried)
    ref_out, _ = torch_mha(qo, kvo, kvo, attn_mask=~mask, need_weights=False)
    ref_out.pow(2).sum().backward()
    Wq, Wk, Wv = torch_mha.in_proj_weight.grad.chunk(3)
    pairs = [
        ("query", qs.grad, qo.grad),
        ("key/value", kvs.grad, kvo.grad),
        ("W_Q.weight", module.W_Q.weight.grad, Wq),
        ("W_K.weight", module.W_K.weight.grad, Wk),
        ("W_V.weight", module.W_V.weight.grad, Wv),
        ("W_O.weight", module.W_O.weight.grad, torch_mha.out_proj.weight.grad),
    ]
    for label, mine, ref in pairs:
        expect(mine is not None, MHA, tried, f"Nenhum gradiente chegou a `{label}`.")
        expect_close(mine, ref, MHA, tried, f"o gradiente em `{label}`")
    n += 1
    # atalhos proibidos
    x = _randn(gen, 2, 3, 8)
    module = _build(cls, 8, 2, "chamada vigiada")
    with forbid_torch_functions(F.multi_head_attention_forward) as mode:
        _call(module, MHA, "chamada vigiada", x, x, x, None)
    expect(
        not mode.used,
        MHA,
        _tried(x, x, x, None, 8, 2),
        "Seu módulo chama `F.multi_head_attention_forward` (o que o nn.MultiheadAttention usa).",
        "o exercício é escrever a atenção com múltiplas cabeças; o PyTorch é o gabarito.",
    )
    n += 1
    passed(MHA, n, "(testes ocultos)")
