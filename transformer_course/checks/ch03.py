"""Verificações do capítulo 3: ``split_heads``, ``merge_heads`` e ``MultiHeadAttention``.

Oráculos independentes do código do aluno: as cabeças separadas e juntadas com fatias, e o
``nn.MultiheadAttention`` com os mesmos pesos (copiados pelo nome, ``c.load``), um mapa por cabeça
e, em modo de treino com dropout, o mesmo estado do gerador (``seed``). Ganchos (*forward hooks*,
``capture``) em W_Q, W_K, W_V e W_O dizem onde aparece a primeira diferença: projeções, pesos,
cabeças juntadas, saída.

Numa resposta errada, o diagnóstico (issue 31) nunca nomeia um erro que não reproduz a saída do aluno:
um erro conhecido só é nomeado se se repete num segundo caso com outros tamanhos; sem ele, a
``split_heads``/``merge_heads`` do notebook é conferida primeiro ("o erro está em `split_heads`", se a
conta com ela reproduz a saída e os pesos), depois vêm um parâmetro ajustado (o expoente da escala, um
fator constante, para onde foi cada elemento ao separar ou juntar) ou a propriedade que quebra (linhas
somam 1, bloqueados com 0, só reorganiza); senão, só onde aparece a primeira diferença. Toda falha leva
um id estável nos dados (``CheckFailure.data``).

Toda conversa com a resposta do aluno é um pedido (``c.run``, ``c.new``, ``c.describe``,
``c.load``): o módulo fica do lado do aluno, e aqui chegam só dados. O mesmo código roda ao estudar
e no juiz da correção.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from .. import interop, wire
from .. import multihead as reference
from ..exercises import Exercise, GradedCell
from ..feedback import Check, CheckFailure, Finding, Mistake, describe, expect_close
from .structure import LINEAR, is_a, is_module, part, prepare, qualname, shown, watched

__all__ = ["check_merge_heads", "check_multi_head_attention", "check_split_heads"]


def _exercise(name: str, stem: str, visible: float, hidden: float) -> Exercise:
    cells = (GradedCell(f"test_{stem}", visible), GradedCell(f"test_{stem}_hidden", hidden, hidden=True))
    return Exercise("03_multi_head", name, getattr(reference, name), cells=cells)


SPLIT = _exercise("split_heads", "split_heads", 1, 2)
MERGE = _exercise("merge_heads", "merge_heads", 1, 1)
MHA = _exercise("MultiHeadAttention", "multi_head_attention", 3, 4)

HINTS = {
    "view": "`view` não consegue juntar num eixo só dois eixos que um `transpose` separou na memória "
    "(a forma pedida não é compatível com os passos, os *strides*, do tensor): use `.reshape(...)` ou "
    "`.contiguous().view(...)`.",
    "divisibility": "falta a verificação de divisibilidade: antes de separar as cabeças, teste "
    "`d_model % n_heads` e levante `ValueError` com uma mensagem que explique o problema.",
    "mask3d": "uma máscara 3-D (B, Tq, Tk) precisa ganhar o eixo das cabeças antes de encontrar os scores "
    "(B, H, Tq, Tk): `mask.unsqueeze(1)` → (B, 1, Tq, Tk).",
    "graph": "A saída não está ligada ao grafo de gradientes (use só operações do PyTorch, sem `.detach()`, "
    "`.numpy()` ou `.item()`).",
    "module": "a classe deve herdar de `nn.Module`.",
    "linear": "crie as quatro projeções no `__init__`: `self.W_Q = nn.Linear(d_model, d_model, bias=bias)`…",
    "width": "cada projeção leva d_model em d_model (as H cabeças juntas), não d_model em d_k.",
    "bias": "passe `bias=bias` para as quatro `nn.Linear`.",
    "torch": "o exercício é escrever a atenção com as quatro projeções; o PyTorch é o gabarito.",
    "extra": "há parâmetros a mais (uma camada extra, ou projeções por cabeça além de W_Q, W_K, W_V, W_O)?",
    "not_applied": "o `nn.Dropout` foi criado mas não é aplicado: use-o nos pesos antes do produto pelos "
    "valores, `self.dropout(weights) @ V`.",
}


# ---------------------------------------------------------------- utilidades


def _checked(c: Check, response, hint: str | None = None):
    """``c.raise_for`` que reconhece o erro clássico de `view` depois de um `transpose`."""
    error = response.error or {}
    message, data = str(error.get("message", "")), {}
    if hint == HINTS["mask3d"] and not re.search(r"must match the size|broadcast", message):
        hint = None  # a dica da máscara 3-D só explica um erro de difusão, não uma exceção qualquer
    if "view size is not compatible" in message:
        hint, data = HINTS["view"], {"mistake": "view-depois-de-transpose"}
    c.raise_for(response, hint, **data)
    return response


def _call(c: Check, fn: Callable, *args, hint: str | None = None, **kwargs):
    """``c.call`` com o diagnóstico de `view` (:func:`_checked`)."""
    return _checked(c, c.run(fn, args, kwargs), hint).value


def _expect_value_error(c: Check, fn: Callable, tried: str, *args) -> None:
    c.case(tried).raises(ValueError, fn, *args, hint=HINTS["divisibility"])


def _randn(gen, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen, dtype=dtype)


def _on_graph(out) -> bool:
    """A saída (ou a primeira da tupla) estava ligada ao grafo de gradientes, do lado do aluno?"""
    first = out[0] if isinstance(out, tuple) and out else out
    return isinstance(first, torch.Tensor) and wire.info(first).requires_grad


def _gradient(c: Check, fn: Callable, tried: str, x: torch.Tensor, args: tuple, oracle: Callable, shape):
    """O gradiente que chega a ``x`` é o da operação inversa (``oracle``) aplicada aos pesos da saída.

    A perda é ``(saída · pesos).sum()``, com pesos 0, 1, 2… na forma ``shape`` da saída esperada.
    """
    c.case(tried)
    weights = torch.arange(math.prod(shape), dtype=torch.float64).view(shape)
    response = c.run(fn, (x, *args), grad={"loss": {"kind": "dot", "weights": weights}})
    if response.error is not None:  # a chamada falhou, ou a perda não pôde ser derivada: por quê?
        out = _call(c, fn, x, *args)
        c.expect(_on_graph(out), HINTS["graph"], kind="propriedade", mistake="fora-do-grafo")
        c.shape(out, shape)
        c.raise_for(response)
    c.expect(_on_graph(response.value), HINTS["graph"], kind="propriedade", mistake="fora-do-grafo")
    c.close((response.grads or [None])[0], oracle(weights), "o gradiente em `x`")


# ---------------------------------------------------------------- split_heads e merge_heads


def _split_oracle(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """A cabeça h fica com as colunas h·Dk … (h+1)·Dk − 1 de cada token (fatias, sem reshape)."""
    d_k = x.size(-1) // n_heads
    return torch.stack([x[:, :, h * d_k : (h + 1) * d_k] for h in range(n_heads)], dim=1)


def _merge_oracle(x: torch.Tensor) -> torch.Tensor:
    """Concatena as cabeças lado a lado: [cabeça 0 | cabeça 1 | …] em cada token."""
    return torch.cat([x[:, h] for h in range(x.size(1))], dim=-1)


SPLIT_MISTAKES = {  # id -> (o nome que o aluno lê, o erro aplicado a x (B, T, D) com H cabeças)
    "split-sem-transpose": (
        "um `view`/`reshape` direto para (B, H, T, Dk), sem `transpose`: números de tokens diferentes foram "
        "parar na mesma cabeça",
        lambda x, H: x.reshape(x.size(0), H, x.size(1), -1),
    ),
    "split-sem-transpose-bthd": (
        "a forma (B, T, H, Dk): faltou o `transpose(1, 2)` que põe o eixo das cabeças antes do eixo dos "
        "tokens",
        lambda x, H: x.reshape(x.size(0), x.size(1), H, -1),
    ),
    "split-cabecas-intercaladas": (
        "cabeças intercaladas (reshape para (B, T, Dk, H)): a cabeça h deve ficar com o bloco contíguo de "
        "colunas h·Dk … (h+1)·Dk − 1",
        lambda x, H: x.reshape(x.size(0), x.size(1), -1, H).permute(0, 3, 1, 2),
    ),
}
MERGE_MISTAKES = {  # id -> (o nome, o erro aplicado a x (B, H, T, Dk))
    "merge-sem-transpose": (
        "um `view`/`reshape` direto de (B, H, T, Dk) para (B, T, H·Dk), sem `transpose`: tokens e cabeças se "
        "misturaram",
        lambda x: x.reshape(x.size(0), x.size(2), -1),
    ),
    "merge-cabecas-intercaladas": (
        "cabeças intercaladas (o eixo Dk antes do eixo H ao achatar): as colunas de cada cabeça devem ficar "
        "juntas, [cabeça 0 | cabeça 1 | …]",
        lambda x: x.permute(0, 2, 3, 1).reshape(x.size(0), x.size(2), -1),
    ),
    "merge-sem-juntar": (
        "a forma (B, T, H, Dk): faltou juntar os dois últimos eixos em H·Dk",
        lambda x: x.transpose(1, 2),
    ),
    "merge-media": ("a média das cabeças em vez da concatenação", lambda x: x.mean(1)),
    "merge-soma": ("a soma das cabeças em vez da concatenação", lambda x: x.sum(1)),
}


def _arange(shape: tuple, n_heads: tuple) -> str:
    heads = f" e n_heads = {n_heads[0]}" if n_heads else ""
    return f"x {shape} = 0, 1, 2, … (valores distintos){heads}"


def _layout(c: Check, fn: Callable, shape: tuple, n_heads: tuple) -> Finding | None:
    """Para onde foi cada elemento: com x de valores distintos (0, 1, 2, ...), a saída do aluno é um
    rearranjo de x? Se não, "só reorganiza" quebra; se sim, o primeiro elemento fora do lugar diz se o
    erro está no lote, nos tokens ou nas colunas de cada cabeça (um fato deste caso, sem nome de erro)."""
    x = torch.arange(math.prod(shape), dtype=torch.float64).view(shape)
    out = c.run(fn, (x, *n_heads)).value
    what = "separar" if n_heads else "juntar"
    if not isinstance(out, torch.Tensor) or out.numel() != x.numel():
        return None
    values = out.detach().to(torch.float64).flatten()
    exact = bool(((values >= 0) & (values < x.numel()) & (values == values.round())).all())
    if not exact or values.unique().numel() != x.numel():
        return Finding(
            "propriedade",
            "so-reorganiza",
            f"{what} cabeças só reorganiza os elementos de x, sem contas; com {_arange(shape, n_heads)}, sua "
            "saída tem valores que não estão em x, ou repete algum (nenhuma soma, média ou escala).",
        )
    if n_heads:
        (H,), (B, T, D) = n_heads, shape
        Dk = D // H
        if tuple(out.shape) != (B, H, T, Dk):
            return None
        src = values.long().view(B, H, T, Dk)
        b, t, d = src // (T * D), (src // D) % T, src % D
        want_b = torch.arange(B).view(B, 1, 1, 1).expand_as(src)
        want_t = torch.arange(T).view(1, 1, T, 1).expand_as(src)
        want_d = (torch.arange(H).view(1, H, 1, 1) * Dk + torch.arange(Dk)).expand_as(src)
        where = "a posição (b, h, t, k) = {} da saída"
    else:
        B, H, T, Dk = shape
        if tuple(out.shape) != (B, T, H * Dk):
            return None
        src = values.long().view(B, T, H * Dk)
        b, h, t, k = src // (H * T * Dk), (src // (T * Dk)) % H, (src // Dk) % T, src % Dk
        want_b = torch.arange(B).view(B, 1, 1).expand_as(src)
        want_t = torch.arange(T).view(1, T, 1).expand_as(src)
        col = torch.arange(H * Dk).view(1, 1, -1).expand_as(src)
        d, want_d = h * Dk + k, col
        where = "a posição (b, t, coluna) = {} da saída"
    for found, want, mistake, cause in (
        (b, want_b, "lote-misturado", "veio do exemplo {} do lote, não do {}"),
        (
            t,
            want_t,
            "tokens-misturados",
            "veio do token {}, não do token {}: tokens diferentes se misturaram",
        ),
        (d, want_d, "colunas-da-cabeca", "{}"),
    ):
        bad = (found != want).nonzero()
        if not len(bad):
            continue
        idx = tuple(int(i) for i in bad[0])
        if mistake != "colunas-da-cabeca":
            text = cause.format(int(found[idx]), int(want[idx]))
        elif n_heads:
            h = idx[1]
            cols = sorted({int(v) for v in d[idx[0], h, idx[2]].tolist()})
            text = (
                f"veio da coluna {int(found[idx])} do token: a cabeça {h} ficou com as colunas {cols}, não "
                f"com o bloco {h * Dk}…{(h + 1) * Dk - 1} (h·Dk … (h+1)·Dk − 1)"
            )
        else:
            text = (
                f"veio do elemento {int(k[idx])} da cabeça {int(h[idx])}, que devia ir para a coluna "
                f"{int(found[idx])}: as colunas de cada cabeça ficam juntas, [cabeça 0 | cabeça 1 | …]"
            )
        return Finding("parametro", mistake, f"com {_arange(shape, n_heads)}, {where.format(idx)} {text}.")
    return None


def _compare(c: Check, fn: Callable, tried: str, x: torch.Tensor, *n_heads: int) -> torch.Tensor:
    """Compara com o oráculo de fatias (separar se vier ``n_heads``, juntar se não) e nomeia o erro.

    Um erro conhecido só é nomeado se ele reproduz também a saída do aluno num caso com outros
    tamanhos; sem erro conhecido, :func:`_layout` diz para onde foram os elementos.
    """
    c.case(tried)
    with c.untouched(x=x):
        out = _call(c, fn, x, *n_heads)
    if n_heads:
        expected = _split_oracle(x, n_heads[0])
        table = {key: (name, f(x, n_heads[0])) for key, (name, f) in SPLIT_MISTAKES.items()}
        other = (3, 4, 10) if x.shape[-1] != 10 else (3, 4, 12)
        other_args = (torch.randn(*other, generator=c.gen(77), dtype=x.dtype), 2)
        layout = (2, 3, 12), (3,)
    else:
        expected = _merge_oracle(x)
        table = {key: (name, f(x)) for key, (name, f) in MERGE_MISTAKES.items()}
        B, H, T, Dk = x.shape
        other_args = (torch.randn(3, H + 1, T + 2, Dk + 1, generator=c.gen(78), dtype=x.dtype),)
        layout = (2, 3, 4, 2), ()
    mistakes = [Mistake(name, value, key) for key, (name, value) in table.items()]
    again = []

    def confirm(mistake: Mistake) -> bool:
        if not again:
            again.append(c.run(fn, other_args).value)
        if n_heads:
            wanted = SPLIT_MISTAKES[mistake.key][1](*other_args)
        else:
            wanted = MERGE_MISTAKES[mistake.key][1](*other_args)
        return _same(again[0], wanted)

    with c.diagnosing(lambda: _layout(c, fn, *layout), kinds=("valores", "forma")):
        c.close(out, expected, "a saída", mistakes, confirm=confirm)
    return out


@SPLIT.visible_check
def check_split_heads(fn: Callable) -> None:
    """Testes visíveis de ``split_heads``."""
    with SPLIT.check() as c:
        tried = "x (1, 3, 4) com x[0, t, d] = 10·t + d, n_heads = 2 (esperado: cabeça 0 = colunas 0-1, "
        x = (torch.arange(3).view(1, 3, 1) * 10 + torch.arange(4)).float()  # x[0, t, d] = 10·t + d
        _compare(c, fn, tried + "cabeça 1 = colunas 2-3, de cada token)", x, 2)
        gen = c.gen(30)
        x = _randn(gen, 2, 5, 12)
        _compare(c, fn, "x aleatório (2, 5, 12), n_heads = 3 (esperado: (2, 3, 5, 4))", x, 3)
        _compare(c, fn, "x aleatório (2, 4, 8), n_heads = 8 (d_k = 1)", _randn(gen, 2, 4, 8), 8)
        x = _randn(gen, 2, 3, 10)
        _expect_value_error(c, fn, "x (2, 3, 10), n_heads = 4 (10 não é divisível por 4)", x, 4)


@SPLIT.hidden_check
def check_split_heads_hidden(fn: Callable) -> None:
    """Testes ocultos de ``split_heads``: float64, uma cabeça, não contíguo, gradientes, divisibilidade."""
    with SPLIT.check(hidden=True) as c:
        gen = c.gen(31)
        x = _randn(gen, 2, 3, 4)
        c.refuse_reference(fn, reference.split_heads, watched(fn, x, 2))
        _compare(c, fn, "x (3, 4, 6) float64, n_heads = 2", _randn(gen, 3, 4, 6, dtype=torch.float64), 2)
        _compare(c, fn, "x (2, 5, 6), n_heads = 1 (uma cabeça só)", _randn(gen, 2, 5, 6), 1)
        x = _randn(gen, 7, 2, 12).transpose(0, 1)  # (2, 7, 12), não contíguo
        _compare(c, fn, "x (2, 7, 12) não contíguo (vindo de um transpose), n_heads = 4", x, 4)
        _compare(c, fn, "x (1, 1, 4): um token só, n_heads = 2", _randn(gen, 1, 1, 4), 2)
        for D, H in ((12, 5), (6, 4), (7, 2)):
            tried = f"x (1, 2, {D}), n_heads = {H} ({D} não é divisível por {H})"
            _expect_value_error(c, fn, tried, _randn(gen, 1, 2, D), H)
        x = _randn(gen, 2, 3, 8, dtype=torch.float64).requires_grad_()
        tried = "x (2, 3, 8) float64 com requires_grad, n_heads = 2 (gradientes)"
        _gradient(c, fn, tried, x, (2,), _merge_oracle, (2, 2, 3, 4))


@MERGE.visible_check
def check_merge_heads(fn: Callable) -> None:
    """Testes visíveis de ``merge_heads``."""
    with MERGE.check() as c:
        tried = "x (1, 2, 3, 2): as cabeças de x (1, 3, 4), x[0, t, d] = 10·t + d (esperado: o x original)"
        x = (torch.arange(3).view(1, 3, 1) * 10 + torch.arange(4)).float()  # x[0, t, d] = 10·t + d
        _compare(c, fn, tried, _split_oracle(x, 2))
        gen = c.gen(32)
        _compare(c, fn, "x aleatório (2, 3, 5, 4) (esperado: (2, 5, 12))", _randn(gen, 2, 3, 5, 4))
        x = _randn(gen, 2, 6, 8)
        tried = "merge_heads(split_heads(x, 4)) para x (2, 6, 8) (deve devolver x)"
        c.close(_compare(c, fn, tried, _split_oracle(x, 4)), x, "a saída")


@MERGE.hidden_check
def check_merge_heads_hidden(fn: Callable) -> None:
    """Testes ocultos de ``merge_heads``: float64, uma cabeça, Dk = 1, contíguo, gradientes."""
    with MERGE.check(hidden=True) as c:
        gen = c.gen(33)
        x = _randn(gen, 2, 3, 4, 2)
        c.refuse_reference(fn, reference.merge_heads, watched(fn, x))
        _compare(c, fn, "x (3, 2, 4, 5) float64", _randn(gen, 3, 2, 4, 5, dtype=torch.float64))
        _compare(c, fn, "x (2, 1, 3, 6): uma cabeça só", _randn(gen, 2, 1, 3, 6))
        _compare(c, fn, "x (2, 6, 3, 1): d_k = 1", _randn(gen, 2, 6, 3, 1))
        _compare(c, fn, "x (2, 4, 3, 2) contíguo (criado com randn)", _randn(gen, 2, 4, 3, 2).contiguous())
        x = _randn(gen, 2, 3, 4, 2, dtype=torch.float64).requires_grad_()
        _gradient(
            c,
            fn,
            "x (2, 3, 4, 2) float64 com requires_grad (gradientes)",
            x,
            (),
            lambda w: _split_oracle(w, 3),
            (2, 4, 6),
        )


# ---------------------------------------------------------------- MultiHeadAttention: o oráculo


def _torch_mha(
    c: Check, D: int, H: int, bias: bool, seed: int, dtype, dropout: float = 0.0
) -> nn.MultiheadAttention:
    """Um ``nn.MultiheadAttention`` com pesos sorteados por um gerador próprio, em modo de avaliação."""
    torch_mha = nn.MultiheadAttention(D, H, dropout=dropout, bias=bias, batch_first=True)
    gen = c.gen(seed)
    with torch.no_grad():
        for name, p in torch_mha.named_parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * (0.1 if "bias" in name else 1.3 / math.sqrt(D)))
    return torch_mha.to(dtype).eval()


def _params(m: nn.MultiheadAttention) -> dict[str, tuple]:
    """(peso, viés) de cada projeção, fatiados de ``in_proj_weight`` e ``out_proj``."""
    biases = (None,) * 4 if m.in_proj_bias is None else (*m.in_proj_bias.chunk(3), m.out_proj.bias)
    return dict(zip("QKVO", zip((*m.in_proj_weight.chunk(3), m.out_proj.weight), biases)))


def torch_weights(m: nn.MultiheadAttention, prefix: str = "") -> dict[str, torch.Tensor]:
    """Os pesos de ``m`` com os nomes da ``MultiHeadAttention`` do curso (``W_Q.weight``, ``W_O.bias``...),
    prontos para ``c.load`` (``prefix``: onde ela mora numa camada, ``"self_attn."``)."""
    out = {}
    for letter, (weight, bias) in _params(m).items():
        out[f"{prefix}W_{letter}.weight"] = weight.detach().clone()
        if bias is not None:
            out[f"{prefix}W_{letter}.bias"] = bias.detach().clone()
    return out


@torch.no_grad()
def _variant(p, query, key, value, mask, H, *, weights=None, mistake=None):
    """As etapas da atenção com múltiplas cabeças escrita com o erro ``mistake`` (ou nenhum).

    Com ``weights`` (os do PyTorch, depois do dropout em modo de treino), as cabeças juntadas e
    a saída vêm desses pesos.
    """
    B, Tq, D = query.shape
    d_k = D // H
    if mistake == "kv_from_query":
        key = value = query
    q = F.linear(query, *p["Q"])
    k = F.linear(key, *p["V" if mistake == "k_by_W_V" else "K"])
    v = F.linear(value, *p["K" if mistake == "v_by_W_K" else "V"])

    sep = {  # (B, T, D) -> (B, H, T, Dk)
        "split_no_transpose": lambda x: x.reshape(B, H, -1, d_k),
        "split_interleaved": lambda x: x.reshape(B, -1, d_k, H).permute(0, 3, 1, 2),
    }.get(mistake, lambda x: _split_oracle(x, H))
    if weights is None:
        scale = {"scale_d_model": 1 / math.sqrt(D), "scale_d_k": 1 / d_k, "no_scale": 1.0}.get(mistake)
        scores = sep(q) @ sep(k).transpose(-2, -1) * (scale or 1 / math.sqrt(d_k))
        if mistake == "scores_transposed":  # K·Qᵀ no lugar de Q·Kᵀ (só roda com Tq = Tk)
            scores = scores.transpose(-2, -1)
        if mask is not None and mistake != "mask_ignored":
            m = mask.unsqueeze(1) if mask.dim() == 3 and mistake != "mask3d_raw" else mask
            scores = scores.masked_fill(m if mistake == "mask_inverted" else ~m, float("-inf"))
        weights = scores.softmax(-1)
    heads = weights @ sep(v)  # (B, H, Tq, Dk)
    merged = (heads if mistake == "merge_no_transpose" else heads.transpose(1, 2)).reshape(B, Tq, D)
    output = merged if mistake == "no_W_O" else F.linear(merged, *p["O"])
    return {"q": q, "k": k, "v": v, "weights": weights, "merged": merged, "output": output}


MISTAKES = {  # o erro em _variant -> o nome que o aluno lê
    "split_no_transpose": "a separação de cabeças sem `transpose` (um `view`/`reshape` direto para "
    "(B, H, T, Dk) mistura tokens e cabeças)",
    "merge_no_transpose": "a junção de cabeças sem `transpose` (um `view`/`reshape` direto de "
    "(B, H, T, Dk) para (B, T, D) mistura tokens e cabeças)",
    "split_interleaved": "a separação com cabeças intercaladas: cada cabeça deve ficar com um bloco "
    "contíguo de Dk colunas",
    "no_W_O": "a atenção SEM a projeção de saída W_O (faltou aplicar `self.W_O` depois de juntar as cabeças)",
    "scale_d_model": "a escala 1/√d_model em vez de 1/√d_k: cada cabeça tem largura d_k = d_model / n_heads",
    "scale_d_k": "a escala 1/d_k em vez de 1/√d_k",
    "no_scale": "a atenção SEM a divisão por √d_k",
    "v_by_W_K": "a mesma projeção para K e V: os valores passaram por W_K em vez de W_V",
    "k_by_W_V": "a mesma projeção para K e V: as chaves passaram por W_V em vez de W_K",
    "kv_from_query": "K e V calculados a partir de `query`: na atenção cruzada eles vêm de `key` e `value`",
    "mask3d_raw": "a máscara 3-D (B, Tq, Tk) sem o eixo das cabeças: contra os scores (B, H, Tq, Tk) o "
    "PyTorch alinha o eixo do lote com o das cabeças; use `mask.unsqueeze(1)` → (B, 1, Tq, Tk)",
    "mask_inverted": "a máscara invertida: True bloqueou (é a convenção do `attn_mask` do "
    "nn.MultiheadAttention), mas aqui True = pode atender",
    "mask_ignored": "a atenção sem máscara (a máscara foi ignorada)",
    "scores_transposed": "os scores transpostos, K·Qᵀ em vez de Q·Kᵀ (a linha i dos pesos deve ser a da "
    "consulta i)",
    # não são variantes de _variant: o valor é calculado à parte
    "value_from_key": "`W_V` aplicada a `key`: os valores vêm de `value` (ou as chaves passaram por W_V "
    "em vez de W_K, a mesma projeção para K e V)",
    "averaged": "os pesos médios sobre as cabeças (o `average_attn_weights=True` do PyTorch); devolva um "
    "mapa por cabeça, (B, H, Tq, Tk)",
    "fused": "os pesos com lote e cabeças fundidos em um eixo; devolva (B, H, Tq, Tk)",
    # modo de treino com dropout
    "dropped": "os pesos depois do dropout (zeros e o resto ×2); devolva os de antes, e use o dropout só no "
    "produto pelos valores",
    "undropped": "as cabeças juntadas SEM dropout: o dropout deve agir nos pesos, antes do produto pelos "
    "valores (`self.dropout(weights) @ V`), e não depois (nas cabeças juntadas ou na saída de W_O)",
}


def _extra(p, query, key, value, mask, H, name):
    """Os erros que não são variantes de :func:`_variant` (o valor é calculado à parte)."""
    w = _variant(p, query, key, value, mask, H)["weights"]
    return {"value_from_key": lambda: F.linear(key, *p["V"]), "averaged": lambda: w.mean(1)}.get(
        name, lambda: w.flatten(0, 1)
    )()


EXTRA_STAGE = {"value_from_key": "v", "averaged": "weights", "fused": "weights"}


@torch.no_grad()
def _mha_mistakes(p, query, key, value, mask, H) -> tuple[list[Mistake], dict]:
    """Os erros conhecidos, etapa por etapa (projeções de K e V, pesos, cabeças juntadas, saída), e de
    cada um (pelo ``id`` do objeto) o erro e a etapa, para refazê-lo noutro caso."""
    found, where = [], {}
    for name, stage in EXTRA_STAGE.items():
        mistake = Mistake(MISTAKES[name], _extra(p, query, key, value, mask, H, name), _key(name))
        found.append(mistake)
        where[id(mistake)] = (name, stage)
    for name, label in MISTAKES.items():
        if name in EXTRA_STAGE or name.endswith("dropped") or (name.startswith("mask") and mask is None):
            continue
        try:
            stages = _variant(p, query, key, value, mask, H, mistake=name)
        except RuntimeError:  # erro que nesta forma nem roda (ex.: difusão impossível)
            continue
        projections = ("k", "v") if name == "kv_from_query" else ()
        for stage in (*projections, "weights", "merged", "output"):
            mistake = Mistake(label, stages[stage], _key(name))
            found.append(mistake)
            where[id(mistake)] = (name, stage)
    return found, where


def _key(name: str) -> str:
    """O id estável de um erro de :data:`MISTAKES` ("scale_d_model" -> "escala-d-model")."""
    return {"scale_d_model": "escala-d-model", "scale_d_k": "escala-d-k", "no_scale": "sem-escala"}.get(
        name, name.replace("_", "-").lower()
    )


def _expected(torch_mha: nn.MultiheadAttention, query, key, value, mask) -> dict[str, torch.Tensor]:
    """As etapas: ``weights`` e ``output`` do PyTorch; as outras, dos pesos dele e dos seus ``weights``."""
    attn_mask = None if mask is None else interop.to_mha_attn_mask(mask, torch_mha.num_heads, query.size(1))
    with torch.enable_grad(), warnings.catch_warnings():  # com grafo: nada de caminho rápido
        warnings.simplefilter("ignore")
        out, w = torch_mha(query, key, value, attn_mask=attn_mask, average_attn_weights=False)
    stages = _variant(_params(torch_mha), query, key, value, mask, torch_mha.num_heads, weights=w.detach())
    return {**stages, "output": out.detach()}


HOOKED = {"W_Q": "q", "W_K": "k", "W_V": "v", "W_O": "merged"}  # submódulo -> etapa (W_O: a entrada)
LABELS = {"q": "`W_Q(query)`", "k": "`W_K(key)`", "v": "`W_V(value)`", "weights": "`weights`"}
LABELS |= {"merged": "`merge_heads(...)`, a entrada de W_O", "output": "`output`"}  # na ordem do cálculo


CAPTURE = {name: "input" if stage == "merged" else "output" for name, stage in HOOKED.items()}


def _run(c: Check, module, query, key, value, mask, hint=None, seed=None) -> dict:
    """Roda o módulo com ganchos em W_Q, W_K, W_V e W_O: as etapas vistas, ``weights`` e ``output``.

    ``seed``: a semente do gerador global logo antes da chamada (o dropout em modo de treino).
    """
    with c.untouched(query=query, key=key, value=value, mask=mask):
        response = _checked(c, c.run(module, (query, key, value, mask), capture=CAPTURE, seed=seed), hint)
    result = response.value
    body = f"Esperava uma tupla (output, weights); veio {describe(result)}."
    c.expect(isinstance(result, tuple) and len(result) == 2, body, kind="tipo", mistake="nao-e-tupla")
    seen = {HOOKED[name]: value for name, value in response.captured.items() if name in HOOKED}
    return {**seen, "output": result[0], "weights": result[1]}


def _same(actual, expected: torch.Tensor) -> bool:
    """A etapa passaria em ``c.close``? (a mesma comparação, sem procurar erros conhecidos)"""
    try:
        expect_close(actual, expected, "", "", "")
    except CheckFailure:
        return False
    return True


def _stages(seen: dict, expected: dict, names=tuple(LABELS)) -> list[tuple]:
    """(etapa, valor do aluno, valor esperado) na ordem do cálculo, sem as projeções não chamadas."""
    return [(LABELS[s], seen[s], expected[s]) for s in names if s in seen]


def _tried(query, key, value, mask, H, extra=""):
    kind = "autoatenção" if (query is key and key is value) else "atenção cruzada"
    m = "sem máscara" if mask is None else f"máscara {tuple(mask.shape)}"
    return (
        f"MultiHeadAttention(d_model={query.size(-1)}, n_heads={H}), {kind}: query {tuple(query.shape)}, "
        f"key {tuple(key.shape)}, value {tuple(value.shape)} {str(query.dtype)[6:]}, {m}{extra}"
    )


def _build(c: Check, cls, D: int, H: int, bias: bool = True, dropout: float = 0.0):
    """Constrói o módulo do aluno (que fica do lado dele) e confere atributos e parâmetros pela descrição.

    Devolve (a referência ao módulo, a descrição).
    """
    module = _checked(c, c.run(cls, (D, H), {"dropout": dropout, "bias": bias}, keep=True)).value
    body = f"Esperava um `nn.Module`; veio {describe(module)}."
    c.expect(is_module(module), body, HINTS["module"], kind="estrutura", mistake="nao-e-modulo")
    desc = c.describe(module, attrs=list(HOOKED))
    for attr in HOOKED:
        lin = part(c, module, desc, attr)
        body = f"O atributo `{attr}` deveria ser um `nn.Linear`; encontrei {shown(lin)}."
        c.expect(is_a(lin, LINEAR), body, HINTS["linear"], kind="estrutura", mistake=f"{attr}-nao-e-linear")
        shape = (lin["in_features"], lin["out_features"])
        c.expect(
            shape == (D, D),
            f"`{attr}` é nn.Linear{shape}; esperado nn.Linear({D}, {D}).",
            HINTS["width"],
            kind="estrutura",
            mistake=f"{attr}-largura",
        )
        body = f"`{attr}` {'não ' if bias else ''}deveria ter viés (bias={bias})."
        c.expect(lin["bias"] == bias, body, HINTS["bias"], kind="estrutura", mistake=f"{attr}-vies")
    torch_mha = qualname(nn.MultiheadAttention)
    torch_inside = any(torch_mha in m.get("mro", []) for m in desc.get("modules", {}).values())
    body = "Seu módulo contém um `nn.MultiheadAttention` do PyTorch."
    c.expect(not torch_inside, body, HINTS["torch"], kind="atalho", mistake="nn-multiheadattention")
    n_params, n_expected = desc.get("n_params"), 4 * D * D + (4 * D if bias else 0)
    body = f"O módulo tem {n_params} parâmetros; esperado 4·d_model² {'+ 4·d_model ' if bias else ''}"
    c.expect(
        n_params == n_expected,
        f"{body}= {n_expected} (as quatro projeções e nada mais).",
        HINTS["extra"],
        kind="estrutura",
        mistake="parametros-a-mais",
    )
    return module, desc


def _case(c: Check, cls, query, key, value, mask, H, *, seed, bias=True, dropout=0.0, extra="", hint=None):
    """Um caso sem dropout ativo, com os pesos do PyTorch: aponta a primeira etapa que difere.

    Numa resposta errada, nesta ordem: as peças de antes (``split_heads``/``merge_heads`` do aluno, se a
    conta com elas reproduz a saída dele: "o erro está em `split_heads`"); um erro conhecido que se
    repete num segundo caso (outros d_k, T e valores; :func:`_second`); o fator de escala ajustado aos
    pesos; e, se nada disso, a primeira etapa que difere.
    """
    c.case(_tried(query, key, value, mask, H, extra))
    module, desc = _build(c, cls, query.size(-1), H, bias, dropout)
    prepare(c, module, desc, query.dtype, train=dropout == 0)
    torch_mha = _torch_mha(c, query.size(-1), H, bias, seed, query.dtype)
    c.load(module, torch_weights(torch_mha))
    expected = _expected(torch_mha, query, key, value, mask)
    seen = _run(c, module, query, key, value, mask, hint, seed=seed + c.seed_offset)
    stages = _stages(seen, expected)
    # Os erros conhecidos custam uma passada de atenção cada: só calculados quando alguma etapa difere.
    if all(_same(actual, wanted) for _, actual, wanted in stages):
        c.first_difference(stages)
        return
    p = _params(torch_mha)
    mistakes, where = _mha_mistakes(p, query, key, value, mask, H)
    second = _lazy(lambda: _second(c, cls, query, key, value, mask, H, bias=bias, seed=seed))

    def confirm(mistake: Mistake) -> bool:
        name, stage = where[id(mistake)]
        other = second()
        if other is None or stage not in other["seen"]:
            return False
        args = (other["p"], *other["inputs"], H)
        wanted = _extra(*args, name) if name in EXTRA_STAGE else _variant(*args, mistake=name)[stage]
        return _same(other["seen"][stage], wanted)

    try:
        c.first_difference(stages, mistakes, confirm)
    except CheckFailure as failure:
        finding = c.find(
            lambda: _upstream(c, cls, p, (query, key, value, mask), H, seen),
            *(
                ()
                if failure.data.get("mistake")
                else (
                    lambda: _scale_fit(seen, expected, mask, H, second),
                    lambda: _weights_property(seen, expected, mask),
                    lambda: _scalar_fit(stages),
                )
            ),
        )
        if finding is None:
            raise
        raise c.diagnosed(failure, finding) from None


def _lazy(make):
    """``make()`` calculado uma vez, na primeira chamada (uma falha vira ``None``)."""
    box = []

    def get():
        if not box:
            try:
                box.append(make())
            except (CheckFailure, RuntimeError, ValueError, TypeError):
                box.append(None)
        return box[0]

    return get


def _second(c: Check, cls, query, key, value, mask, H, *, bias, seed) -> dict:
    """Um segundo caso para confirmar um erro: d_k + 2, um token a mais, outros valores e pesos, a mesma
    espécie de atenção (auto ou cruzada) e de máscara. Devolve os pesos, as entradas e as etapas do aluno."""
    B, Tq, D = query.shape
    Tk, D2 = key.size(1) + 1, D + 2 * H
    gen = c.gen(seed + 500)
    q = torch.randn(B, Tq + 1, D2, generator=gen, dtype=query.dtype)
    if query is key and key is value:
        k = v = q
        Tk = Tq + 1
    else:
        k = torch.randn(B, Tk, D2, generator=gen, dtype=query.dtype)
        v = k if key is value else torch.randn(B, Tk, D2, generator=gen, dtype=query.dtype)
    m = None
    if mask is not None:
        lead = {2: (), 3: (B,), 4: tuple(mask.shape[:2])}[mask.dim()]
        rows = 1 if mask.dim() == 4 and mask.size(2) == 1 else Tq + 1
        m = _mask(gen, *lead, rows, Tk)
    module, desc = _build(c, cls, D2, H, bias)
    prepare(c, module, desc, query.dtype, train=True)
    torch_mha = _torch_mha(c, D2, H, bias, seed + 500, query.dtype)
    c.load(module, torch_weights(torch_mha))
    return {"p": _params(torch_mha), "inputs": (q, k, v, m), "seen": _run(c, module, q, k, v, m)}


def _answers_nearby(c: Check, answer, names) -> dict:
    """As respostas ``names`` (``split_heads``...) definidas ao lado de ``answer``, no notebook do aluno.

    No juiz, pelo nome no kernel (:class:`probe.Remote`); ao estudar, no espaço global de onde a classe
    foi definida. Uma que não existe, ou que é a do pacote, fica de fora.
    """
    from ..probe import Remote

    if isinstance(answer, Remote):
        return {name: Remote(name) for name in names}
    own = [
        k
        for k in getattr(answer, "__mro__", (answer,))
        if not str(k.__module__).startswith(("torch", "builtins"))
    ]
    spaces = [
        f.__globals__ for k in own for f in vars(k).values() if callable(f) and hasattr(f, "__globals__")
    ]
    found = {}
    for name in names:
        for space in spaces:
            fn = space.get(name)
            if callable(fn) and not str(getattr(fn, "__module__", "")).startswith("transformer_course"):
                found[name] = fn
                break
    return found


@torch.no_grad()
def _upstream(c: Check, cls, p, inputs, H, seen) -> Finding | None:
    """O erro está numa peça de antes? Com a ``split_heads`` e a ``merge_heads`` do aluno no lugar das
    certas (e a conta certa no resto), a atenção reproduz a saída e os pesos dele, e uma delas erra."""
    query, key, value, mask = inputs
    nearby = _answers_nearby(c, cls, ("split_heads", "merge_heads"))
    if not nearby:
        return None
    B, Tq, D = query.shape
    probe_x = torch.randn(2, 3, 4 * H, generator=c.gen(990), dtype=query.dtype)
    wrong = {}
    heads = _split_oracle(probe_x, H)
    for name, args, right in (("split_heads", (probe_x, H), heads), ("merge_heads", (heads,), probe_x)):
        if name in nearby:
            try:
                out = c.run(nearby[name], args)
            except CheckFailure:  # o nome não existe no kernel (o pedido nem chega a uma função)
                out = None
            if out is None or out.error is not None:  # não existe, é um esboço ou levanta: fica de fora
                del nearby[name]
            else:
                wrong[name] = not _same(out.value, right)
    culprits = [name for name, bad in wrong.items() if bad]
    if not culprits:
        return None

    def split(t):
        if "split_heads" not in nearby:
            return _split_oracle(t, H)
        return c.call(nearby["split_heads"], t, H)

    q, k, v = (split(F.linear(t, *p[w])) for t, w in ((query, "Q"), (key, "K"), (value, "V")))
    scores = q @ k.transpose(-2, -1) / math.sqrt(D // H)
    if mask is not None:
        m = mask.unsqueeze(1) if mask.dim() == 3 else mask
        scores = scores.masked_fill(~m, float("-inf"))
    weights = scores.softmax(-1)
    heads = weights @ v
    merged = c.call(nearby["merge_heads"], heads) if "merge_heads" in nearby else _merge_oracle(heads)
    output = F.linear(merged, *p["O"])
    if not (_same(seen.get("output"), output) and _same(seen.get("weights"), weights)):
        return None
    names = " e ".join(f"`{n}`" for n in culprits)
    first = culprits[0]
    detail = _upstream_detail(c, nearby[first], first == "split_heads")
    detail = f" Em `{first}`: {detail}" if detail else ""
    return Finding(
        "upstream",
        "erro-em-" + "-e-".join(n.replace("_", "-") for n in culprits),
        f"o erro está em {names}, que a sua `MultiHeadAttention` usa: com "
        f"{'elas' if len(culprits) > 1 else 'ela'} no lugar da versão certa, e a conta certa no resto, a "
        f"atenção dá exatamente a sua saída e os seus pesos. Corrija primeiro {names}.{detail}",
    )


def _weights_property(seen, expected, mask) -> Finding | None:
    """A propriedade dos pesos que quebra (as projeções certas): ≥ 0, cada linha soma 1 e as posições
    bloqueadas com peso 0."""
    from ..numbers import br

    w = seen.get("weights")
    if not (_same(seen.get("q"), expected["q"]) and _same(seen.get("k"), expected["k"])):
        return None
    if not isinstance(w, torch.Tensor) or w.shape != expected["weights"].shape:
        return None
    w = w.detach().to(torch.float64)
    if bool((w < -1e-6).any()):
        idx = tuple(int(i) for i in (w < -1e-6).nonzero()[0])
        return Finding(
            "propriedade",
            "pesos-nao-negativos",
            f"os pesos devem ser ≥ 0 (o softmax), e o peso {idx} é negativo.",
        )
    sums = w.sum(-1)
    bad = (sums - 1).abs() > 1e-4
    if bool(bad.any()):
        idx = tuple(int(i) for i in bad.nonzero()[0])
        return Finding(
            "propriedade",
            "linhas-somam-1",
            f"cada linha dos pesos deve somar 1 (o softmax sobre as chaves, `dim=-1`), e a linha {idx} "
            f"soma {br(float(sums[idx]), '.6g')}.",
            "`weights`",
        )
    if mask is not None:
        m = (mask.unsqueeze(1) if mask.dim() == 3 else mask).expand_as(w)
        leak = (~m) & (w.abs() > 1e-6)
        if bool(leak.any()):
            idx = tuple(int(i) for i in leak.nonzero()[0])
            return Finding(
                "propriedade",
                "bloqueados-com-zero",
                f"as posições bloqueadas pela máscara (False) devem ter peso 0, e a posição {idx} tem peso "
                f"{br(float(w[idx]), '.6g')}.",
                "`weights`",
            )
    return None


def _scalar_fit(stages) -> Finding | None:
    """A primeira etapa que difere é um múltiplo constante da certa (a × esperado, com as etapas de antes
    certas)? Então o parâmetro ajustado é esse fator (−1: o sinal trocado)."""
    from ..numbers import br

    for label, actual, wanted in stages:
        if _same(actual, wanted):
            continue
        if not isinstance(actual, torch.Tensor) or actual.shape != wanted.shape:
            return None
        a, e = actual.detach().to(torch.float64), wanted.detach().to(torch.float64)
        norm = float((e * e).sum())
        if norm == 0:
            return None
        factor = float((a * e).sum()) / norm
        if (a - factor * e).abs().max() > 1e-5 * max(1.0, float(e.abs().max()) * abs(factor)):
            return None
        return Finding(
            "parametro",
            "fator-constante",
            f"{label} é {br(factor, '.6g')} × o valor certo: um fator constante a mais (as etapas de antes "
            "estão certas).",
            label,
        )
    return None


def _upstream_detail(c: Check, fn, split: bool) -> str | None:
    """O que há de errado na peça de antes: um erro conhecido dela, se ele reproduz a saída dela em dois
    casos de tamanhos diferentes; senão, para onde foram os elementos (:func:`_layout`)."""
    gen = c.gen(991)
    if split:
        cases = [(torch.randn(2, 3, 12, generator=gen), 3), (torch.randn(3, 4, 10, generator=gen), 2)]
        table = {k: v for k, v in SPLIT_MISTAKES.items()}
    else:
        cases = [(torch.randn(2, 3, 4, 2, generator=gen),), (torch.randn(3, 2, 5, 3, generator=gen),)]
        table = {k: v for k, v in MERGE_MISTAKES.items()}
    outs = [c.run(fn, args).value for args in cases]
    for name, make in table.values():
        if all(_same(out, make(*args)) for out, args in zip(outs, cases, strict=True)):
            return f"sua saída coincide com {name}."
    layout = _layout(c, fn, (2, 3, 12), (3,)) if split else _layout(c, fn, (2, 3, 4, 2), ())
    return None if layout is None else layout.cause


def _scale_fit(seen, expected, mask, H, second) -> Finding | None:
    """O fator dos scores ajustado aos pesos do aluno (as projeções certas): log w = s·(q·k) + c por linha.

    Com o fator s ajustado aqui e no segundo caso (outro d_k), o expoente p de s = d_k^(−p) é nomeado se
    coincide nos dois; senão, só o valor deste caso.
    """
    from ..numbers import br

    def fit(q, k, w, m):
        if not all(isinstance(t, torch.Tensor) for t in (q, k, w)) or w.dim() != 4:
            return None
        q, k, w = (t.detach().to(torch.float64) for t in (q, k, w))
        raw = _split_oracle(q, H) @ _split_oracle(k, H).transpose(-2, -1)
        if w.shape != raw.shape:
            return None
        ok = w > 1e-12
        if m is not None:
            ok = ok & (m.unsqueeze(1) if m.dim() == 3 else m).expand_as(ok)
        logw = torch.where(ok, w.clamp_min(1e-300).log(), 0.0)
        n = ok.sum(-1, keepdim=True).clamp_min(1)
        xc = torch.where(ok, raw - (raw * ok).sum(-1, keepdim=True) / n, 0.0)
        yc = torch.where(ok, logw - (logw * ok).sum(-1, keepdim=True) / n, 0.0)
        s = float((xc * yc).sum() / (xc * xc).sum())
        resid = (yc - s * xc).abs().max()
        return s if resid <= 1e-4 * max(1.0, float(yc.abs().max())) and s > 0 else None

    if not (_same(seen.get("q"), expected["q"]) and _same(seen.get("k"), expected["k"])):
        return None
    s1 = fit(seen.get("q"), seen.get("k"), seen.get("weights"), mask)
    if s1 is None:
        return None
    d_k = expected["q"].size(-1) // H
    right = 1 / math.sqrt(d_k)
    if abs(s1 - right) <= 1e-5 * right:
        return None
    other = second()
    s2 = None
    if other is not None:
        seen2 = other["seen"]
        s2 = fit(seen2.get("q"), seen2.get("k"), seen2.get("weights"), other["inputs"][3])
        d_k2 = other["inputs"][0].size(-1) // H
    if s2 is not None and d_k2 != d_k:
        power = math.log(s1) / -math.log(d_k)
        power2 = math.log(s2) / -math.log(d_k2)
        if abs(power - power2) <= 1e-3:
            shown = {1.0: "−1", 0.5: "−1/2", 0.25: "−1/4", 0.0: "0"}.get(round(power, 6), br(-power, ".3g"))
            return Finding(
                "parametro",
                "fator-de-escala",
                f"seu fator de escala é d_k^({shown}), não d_k^(−1/2) (ajustado aos seus pesos com "
                f"d_k = {d_k} e com d_k = {d_k2}).",
                "`weights`",
            )
        if abs(s1 - s2) <= 1e-4 * s1:
            return Finding(
                "parametro",
                "fator-de-escala",
                f"seu fator de escala é {br(s1, '.4g')}, um número fixo (não muda com d_k); o certo é "
                f"1/√d_k ({br(right, '.4g')} com d_k = {d_k}).",
                "`weights`",
            )
    return Finding(
        "parametro",
        "fator-de-escala",
        f"neste caso, seus scores foram multiplicados por {br(s1, '.4g')}, e não por 1/√d_k = "
        f"{br(right, '.4g')} (d_k = {d_k}).",
        "`weights`",
    )


def _mask(gen, *shape) -> torch.Tensor:
    """Máscara aleatória em que toda linha tem ao menos uma posição liberada e uma bloqueada."""
    mask = torch.rand(*shape, generator=gen) < 0.5
    mask[..., 0] = True
    if shape[-1] > 1:
        mask[..., -1] = False
    return mask[..., torch.randperm(shape[-1], generator=gen)]


@MHA.visible_check
def check_multi_head_attention(cls) -> None:
    """Testes visíveis de ``MultiHeadAttention`` (comparada com ``nn.MultiheadAttention``), inclusive em
    modo de treino com dropout (o mesmo estado do gerador)."""
    with MHA.check() as c:
        gen = c.gen(40)
        x = _randn(gen, 2, 5, 12)
        _case(c, cls, x, x, x, None, 3, seed=1)  # autoatenção sem máscara
        q, kv = _randn(gen, 2, 3, 8), _randn(gen, 2, 6, 8)
        _case(c, cls, q, kv, kv, _mask(gen, 3, 6), 2, seed=2)  # atenção cruzada, Tq ≠ Tk, máscara 2-D
        # máscara 3-D (B, Tq, Tk) com B = H: sem o eixo das cabeças, o erro passaria em silêncio
        q, k, v = _randn(gen, 2, 4, 8), _randn(gen, 2, 5, 8), _randn(gen, 2, 5, 8)
        _case(c, cls, q, k, v, _mask(gen, 2, 4, 5), 2, seed=3, hint=HINTS["mask3d"])
        x = _randn(gen, 2, 6, 8)
        pad = torch.arange(6) < torch.tensor([6, 4]).view(2, 1, 1, 1)  # (B, 1, 1, Tk): 2 de padding
        _case(c, cls, x, x, x, pad, 4, seed=4, extra=" (padding)")
        _expect_value_error(c, cls, "MultiHeadAttention(d_model=10, n_heads=4)", 10, 4)
        _check_train_dropout(c, cls, gen)  # modo de treino, dropout=0.5, o mesmo estado do gerador


def _weight_dropout(merged, v, weights, p: float, H: int) -> bool:
    """As cabeças juntadas são ``dropout(weights) @ V`` para ALGUMA máscara? Com Tk ≤ Dk, os pesos depois
    do dropout saem delas por mínimos quadrados, e cada um deve ser 0 ou peso/(1 − p)."""
    V, heads = _split_oracle(v, H), _split_oracle(merged, H)
    dropped = heads @ torch.linalg.pinv(V)  # (B, H, Tq, Dk) @ (B, H, Dk, Tk)
    kept = torch.minimum(dropped.abs(), (dropped - weights / (1 - p)).abs()) < 1e-7
    return torch.allclose(dropped @ V, heads, atol=1e-9) and bool(kept.all())


def _check_train_dropout(c: Check, cls, gen) -> None:
    """dropout=0.5 em modo de treino, contra o ``nn.MultiheadAttention`` com o mesmo estado do gerador."""
    p, H, seed = 0.5, 2, 20
    q, kv = _randn(gen, 2, 3, 16, dtype=torch.float64), _randn(gen, 2, 4, 16, dtype=torch.float64)
    c.case(_tried(q, kv, kv, None, H, " (dropout=0.5, modo de treino, o mesmo estado do gerador do PyTorch)"))
    module, desc = _build(c, cls, 16, H, dropout=p)
    prepare(c, module, desc, torch.float64)
    c.method(module, "train", True)
    torch_mha = _torch_mha(c, 16, H, True, seed, torch.float64, dropout=p)
    c.load(module, torch_weights(torch_mha))
    calm = _expected(torch_mha, q, kv, kv, None)  # modo de avaliação: os pesos antes do dropout
    seed += c.seed_offset
    torch.default_generator.manual_seed(seed)  # só a CPU: o Check emprestou esse gerador
    expected = _expected(torch_mha.train(), q, kv, kv, None)
    seen = _run(c, module, q, kv, kv, None, seed=seed)  # do lado do aluno, o mesmo estado do gerador
    w, output, merged = seen["weights"], seen["output"], seen.get("merged")
    like = isinstance(w, torch.Tensor) and w.shape == calm["weights"].shape
    like = like and bool((w == 0).any()) and bool((w != 0).any())  # zeros e o resto: um sorteio de verdade
    dropped = torch.where(w == 0, 0.0, 2 * calm["weights"]) if like else None
    dropped = Mistake(MISTAKES["dropped"], dropped, "pesos-depois-do-dropout")
    c.first_difference(_stages(seen, calm, ("q", "k", "v", "weights")), [dropped])
    c.shape(output, calm["output"].shape, "`output`")
    body = "Em modo de treino, com dropout=0.5, a saída saiu igual à do modo de avaliação."
    same = torch.allclose(output.detach().double(), calm["output"])
    c.expect(not same, body, HINTS["not_applied"], kind="propriedade", mistake="dropout-nao-aplicado")
    # o dropout nos pesos sorteado em outra ordem (cabeça por cabeça, outro layout) também vale
    elsewhere = isinstance(merged, torch.Tensor) and merged.shape == expected["merged"].shape
    elsewhere = elsewhere and merged.dtype == expected["merged"].dtype
    elsewhere = elsewhere and not torch.allclose(merged, expected["merged"])
    if elsewhere and _weight_dropout(merged, expected["v"], calm["weights"], p, H):
        c.first_difference([(LABELS["output"], output, F.linear(merged, *_params(torch_mha)["O"]))])
    else:
        undropped = Mistake(MISTAKES["undropped"], calm["merged"], "cabecas-sem-dropout")
        c.first_difference(_stages(seen, expected, ("merged", "output")), [undropped])


@MHA.hidden_check
def check_multi_head_attention_hidden(cls) -> None:
    """Testes ocultos: float64, sem viés, H = 1 e H = D, máscaras 3-D/4-D, dropout em treino, gradientes."""
    with MHA.check(hidden=True) as c:
        gen = c.gen(41)
        x = _randn(gen, 2, 3, 8)
        c.refuse_reference(cls, reference.MultiHeadAttention, watched(lambda: cls(8, 2)(x, x, x)))
        q, k, v = (_randn(gen, 2, T, 12, dtype=torch.float64) for T in (4, 7, 7))
        _case(c, cls, q, k, v, None, 3, seed=10)  # float64, atenção cruzada com key ≠ value
        x = _randn(gen, 2, 5, 8)
        _case(c, cls, x, x, x, None, 2, seed=11, bias=False, extra=" (bias=False)")
        _case(c, cls, x, x, x, None, 1, seed=12, extra=" (uma cabeça)")
        _case(c, cls, x, x, x, None, 8, seed=13, extra=" (d_k = 1)")
        # máscara 3-D com B ≠ H (sem o eixo das cabeças, a difusão falha) e causal 2-D em float64
        q, kv = _randn(gen, 3, 4, 8), _randn(gen, 3, 6, 8)
        _case(c, cls, q, kv, kv, _mask(gen, 3, 4, 6), 2, seed=14, hint=HINTS["mask3d"])
        x = _randn(gen, 2, 5, 8, dtype=torch.float64)
        _case(c, cls, x, x, x, torch.ones(5, 5, dtype=torch.bool).tril(), 4, seed=15, extra=" (causal)")
        q, kv = _randn(gen, 2, 3, 12), _randn(gen, 2, 4, 12)
        _case(c, cls, q, kv, kv, _mask(gen, 2, 3, 3, 4), 3, seed=16, extra=" (uma máscara por cabeça)")
        x = _randn(gen, 5, 1, 8).transpose(0, 1)
        _case(c, cls, x, x, x, None, 2, seed=17, extra=" (entrada não contígua)")
        x = _randn(gen, 2, 4, 8)
        _case(c, cls, x, x, x, None, 2, seed=18, dropout=0.3, extra=" (dropout=0.3, modo de avaliação)")
        _check_train_dropout(c, cls, gen)
        for D, H in ((12, 5), (8, 3)):
            _expect_value_error(c, cls, f"MultiHeadAttention(d_model={D}, n_heads={H})", D, H)
        _check_gradients(c, cls, gen)
        module, _ = _build(c.case(_tried(x, x, x, None, 2) + " (atalhos proibidos)"), cls, 8, 2)
        body = "Seu módulo chama `F.multi_head_attention_forward` (o que o nn.MultiheadAttention usa)."
        forbidden = ["torch.nn.functional.multi_head_attention_forward"]
        c.forbid(forbidden, module, x, x, x, None, body=body, hint=HINTS["torch"])


def _check_gradients(c: Check, cls, gen) -> None:
    """Os gradientes iguais aos do PyTorch nas entradas e nos pesos das quatro projeções."""
    q, kv = _randn(gen, 2, 3, 8, dtype=torch.float64), _randn(gen, 2, 4, 8, dtype=torch.float64)
    mask = _mask(gen, 3, 4)
    module, desc = _build(c.case(_tried(q, kv, kv, mask, 2, " (gradientes)")), cls, 8, 2)
    prepare(c, module, desc, torch.float64)
    torch_mha = _torch_mha(c, 8, 2, True, 19, torch.float64)
    c.load(module, torch_weights(torch_mha))
    qs, kvs, qo, kvo = (t.clone().requires_grad_() for t in (q, kv, q, kv))
    # do lado do aluno: a saída, (output ** 2).sum().backward() e os gradientes, num pedido só
    names = [f"{n}.weight" for n in HOOKED]
    grad = {"loss": {"kind": "sum_sq", "path": [0]}, "params": names}
    response = c.run(module, (qs, kvs, kvs, mask), grad=grad)
    if response.error is not None:  # a chamada falhou, ou a saída não está no grafo: por quê?
        graph = _on_graph(_call(c, module, qs, kvs, kvs, mask))
        c.expect(graph, HINTS["graph"], kind="propriedade", mistake="fora-do-grafo")
        c.raise_for(response)
    c.expect(_on_graph(response.value), HINTS["graph"], kind="propriedade", mistake="fora-do-grafo")
    ref_out, _ = torch_mha(qo, kvo, kvo, attn_mask=interop.to_mha_attn_mask(mask), need_weights=False)
    ref_out.pow(2).sum().backward()
    theirs = (*torch_mha.in_proj_weight.grad.chunk(3), torch_mha.out_proj.weight.grad)
    grads, param_grads = response.grads or [None, None], response.param_grads or {}
    pairs = [("query", grads[0], qo.grad), ("key/value", grads[1], kvo.grad)]
    pairs += [(name, param_grads.get(name), g) for name, g in zip(names, theirs)]
    for label, mine, ref in pairs:
        c.expect(
            mine is not None,
            f"Nenhum gradiente chegou a `{label}`.",
            kind="propriedade",
            mistake="sem-gradiente",
        )
        c.close(mine, ref, f"o gradiente em `{label}`")


EXERCISES = (SPLIT, MERGE, MHA)
