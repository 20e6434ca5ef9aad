"""Verificações do capítulo 4: ``FeedForward``, ``EncoderLayer`` e ``DecoderLayer``.

Oráculos independentes do código do aluno: ``nn.TransformerEncoderLayer`` e
``nn.TransformerDecoderLayer`` do PyTorch (``batch_first=True``, ``activation="gelu"``,
``dropout=0``) com pesos sorteados por um gerador com semente e copiados para a camada do
aluno; os pesos de atenção vêm de ``nn.MultiheadAttention(need_weights=True)``. A FFN é
comparada com a fórmula escrita com ``F.linear`` e ``F.gelu``.

Os erros conhecidos são calculados com os MESMOS módulos do PyTorch, montados do jeito errado
(:func:`_encoder_variant`, :func:`_decoder_variant`): quando a saída do aluno coincide com um
deles, a mensagem diz qual.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from .. import interop
from .. import layers as reference
from ..runtime import seeded_generator
from ..feedback import (
    Mistake,
    call,
    describe,
    expect,
    expect_close,
    expect_raises,
    expect_unchanged,
    forbid_torch_functions,
    passed,
    single_threaded,
    snapshot,
)

__all__ = [
    "check_decoder_layer",
    "check_decoder_layer_hidden",
    "check_encoder_layer",
    "check_encoder_layer_hidden",
    "check_feed_forward",
    "check_feed_forward_hidden",
]

FFN, ENC, DEC = "FeedForward", "EncoderLayer", "DecoderLayer"

# ---------------------------------------------------------------- nomes dos erros conhecidos

RELU = 'a FFN com ReLU em vez de GELU (o oráculo usa `activation="gelu"`)'
NO_ACT = (
    "a FFN sem ativação entre `linear1` e `linear2` (duas lineares seguidas equivalem a uma "
    "só: sem a não linearidade, a FFN não acrescenta nada)"
)
TANH = (
    'a GELU aproximada por tanh (`approximate="tanh"`, a do BERT e do GPT-2); este exercício '
    'pede a GELU exata, com a função erro, a do `activation="gelu"` do PyTorch'
)
ACT_AFTER = "a FFN com a ativação também depois de `linear2` (a GELU vai só entre as duas lineares)"
POST_WHEN_PRE = (
    "uma camada Post-LN (LayerNorm depois da soma residual), mas `norm_first=True` "
    "pede Pre-LN: x = x + subcamada(LN(x))"
)
PRE_WHEN_POST = (
    "uma camada Pre-LN, mas `norm_first=False` pede Post-LN, o arranjo de 2017: x = LN(x + subcamada(x))"
)
DOUBLE_NORM = (
    "a LayerNorm aplicada também DEPOIS da soma residual no Pre-LN: no Pre-LN a soma "
    "x + subcamada(LN(x)) segue sem normalizar"
)
RES_NORMED = (
    "o resíduo somado à entrada JÁ normalizada (h = LN(x); x = h + subcamada(h)); "
    "no Pre-LN o resíduo leva o x original: x = x + subcamada(LN(x))"
)
NORM_OUT = (
    "a LayerNorm aplicada só à saída da subcamada, antes da soma (x = x + LN(subcamada(x))); "
    "no Post-LN ela normaliza a soma: x = LN(x + subcamada(x))"
)
SHARED_NORM = (
    "uma única LayerNorm (`norm1`) reaproveitada em todas as subcamadas; cada subcamada "
    "tem a sua (`norm1`, `norm2`, ...), com pesos próprios"
)
FFN_FIRST = "as subcamadas na ordem errada: a FFN antes da atenção"
MASK_IGNORED = "a atenção sem máscara: a `mask` não chegou a `self_attn`"
MASK_INVERTED = (
    "a máscara invertida (`~mask`): neste curso True = pode atender; só os módulos "
    "do PyTorch usam True = bloqueado"
)
CROSS_ON_SELF = (
    "a atenção cruzada olhando para a entrada do decodificador em vez da memória: "
    "Q vem do decodificador, mas K e V vêm de `memory`"
)
NORM_MEMORY = (
    "a memória normalizada (LayerNorm aplicada a `memory`); só a entrada do "
    "decodificador passa pela `norm2` — a memória já vem normalizada do codificador"
)
CROSS_FIRST = "as subcamadas na ordem errada: a atenção cruzada antes da autoatenção mascarada"
TGT_IGNORED = "a autoatenção sem `tgt_mask` (a máscara causal não chegou a `self_attn`)"
MEM_IGNORED = "a atenção cruzada sem `memory_mask` (o padding da fonte não chegou a `cross_attn`)"
TGT_INVERTED = "a `tgt_mask` invertida (`~tgt_mask`): neste curso True = pode atender"
SWAPPED_WEIGHTS = "os pesos da atenção cruzada no lugar dos da autoatenção (ou vice-versa)"


def _no_residual(where: str) -> str:
    return (
        f"a camada SEM a conexão residual {where}: a saída da subcamada substitui x em vez de "
        "ser somada a ele"
    )


_single_thread = single_threaded


def _close(actual, expected, name, tried, what, mistakes_fn=None, **tol):
    """``expect_close`` que só calcula os erros conhecidos quando a resposta está errada
    (montar cada variante errada custa uma passada da camada: caro demais para um acerto)."""
    __tracebackhide__ = True
    try:
        expect_close(actual, expected, name, tried, what, **tol)
    except AssertionError:
        if mistakes_fn is None:
            raise
        expect_close(actual, expected, name, tried, what, mistakes_fn(), **tol)


def _lazy(fn):
    """Calcula ``fn()`` uma vez, na primeira chamada."""
    cache = []

    def get():
        if not cache:
            cache.append(fn())
        return cache[0]

    return get


def _gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def _no_act(x):
    return x


# ---------------------------------------------------------------- máscaras para o PyTorch


def _torch_masks(mask, B: int, H: int):
    """Converte uma máscara do curso (True = pode atender) em ``(attn_mask, key_padding_mask)``
    do ``nn.MultiheadAttention`` (True = bloqueado)."""
    if mask is None:
        return None, None
    if mask.dim() == 2:
        return ~mask, None
    if mask.dim() == 4 and mask.size(1) == 1 and mask.size(2) == 1:
        return None, ~mask[:, 0, 0, :]  # (B, 1, 1, S) -> (B, S)
    if mask.dim() == 3:
        mask = mask.unsqueeze(1)  # (B, T, S) -> (B, 1, T, S)
    full = mask.expand(B, H, mask.size(-2), mask.size(-1))  # (B, H, T, S)
    return ~full.reshape(B * H, mask.size(-2), mask.size(-1)), None  # -> (B·H, T, S)


def _mha(mha: nn.MultiheadAttention, q, kv, mask):
    attn_mask, kpm = _torch_masks(mask, q.size(0), mha.num_heads)
    out, weights = mha(
        q, kv, kv, attn_mask=attn_mask, key_padding_mask=kpm, need_weights=True, average_attn_weights=False
    )
    return out, weights


def _ffn(t, x, act=F.gelu, act_after=False):
    out = t.linear2(act(t.linear1(x)))
    return act(out) if act_after else out


# ---------------------------------------------------------------- camadas montadas (certas ou erradas)


def _run_blocks(x, blocks, order, norm_first, pre_mode="ok", residual=None, post_mode="ok"):
    """Aplica as subcamadas ``blocks[nome] = (f, norm)`` na ordem dada, Pre-LN ou Post-LN."""
    residual = residual or {}
    weights = {}
    for name in order:
        f, norm = blocks[name]
        if norm_first:
            h = norm(x)
            out = f(h)
            if isinstance(out, tuple):
                out, weights[name] = out
            base = h if pre_mode == "res_normed" else x
            x = base + out if residual.get(name, True) else out
            if pre_mode == "double":
                x = norm(x)
        else:
            out = f(x)
            if isinstance(out, tuple):
                out, weights[name] = out
            if post_mode == "norm_out":
                x = x + norm(out)
            else:
                x = norm(x + out) if residual.get(name, True) else norm(out)
    return x, weights


def _encoder_variant(
    t,
    x,
    mask,
    norm_first,
    act=F.gelu,
    pre_mode="ok",
    residual=None,
    shared_norm=False,
    mask_mode="ok",
    order=("sa", "ff"),
    post_mode="ok",
):
    """A camada do codificador montada com os módulos de ``t`` (certa, ou com um erro)."""
    m = {"ok": mask, "ignored": None, "inverted": None if mask is None else ~mask}[mask_mode]
    # shared_norm: "first" = a norm1 em tudo; "last" = um único módulo com dois nomes
    # (norm1 = norm2), que fica com os pesos copiados por último (os da norm2).
    norm1 = t.norm2 if shared_norm == "last" else t.norm1
    norm2 = t.norm1 if shared_norm == "first" else t.norm2
    blocks = {"sa": (lambda h: _mha(t.self_attn, h, h, m), norm1), "ff": (lambda h: _ffn(t, h, act), norm2)}
    x, weights = _run_blocks(x, blocks, order, norm_first, pre_mode, residual, post_mode)
    return x, weights.get("sa")


def _decoder_variant(
    t,
    x,
    memory,
    tgt_mask,
    memory_mask,
    norm_first,
    act=F.gelu,
    pre_mode="ok",
    residual=None,
    shared_norm=False,
    tgt_mode="ok",
    mem_mode="ok",
    kv="memory",
    order=("sa", "ca", "ff"),
    post_mode="ok",
):
    """A camada do decodificador montada com os módulos de ``t`` (certa, ou com um erro)."""
    tm = {"ok": tgt_mask, "ignored": None, "inverted": None if tgt_mask is None else ~tgt_mask}[tgt_mode]
    mm = {"ok": memory_mask, "ignored": None}[mem_mode]
    n1 = t.norm3 if shared_norm == "last" else t.norm1
    n2 = {"first": t.norm1, "last": t.norm3}.get(shared_norm, t.norm2)
    n3 = t.norm1 if shared_norm == "first" else t.norm3

    def ca(h):
        if kv == "memory":
            return _mha(t.multihead_attn, h, memory, mm)
        if kv == "self":
            return _mha(t.multihead_attn, h, h, tm)
        return _mha(t.multihead_attn, h, n2(memory), mm)  # kv == "normed"

    blocks = {
        "sa": (lambda h: _mha(t.self_attn, h, h, tm), n1),
        "ca": (ca, n2),
        "ff": (lambda h: _ffn(t, h, act), n3),
    }
    x, weights = _run_blocks(x, blocks, order, norm_first, pre_mode, residual, post_mode)
    return x, weights.get("sa"), weights.get("ca")


# ---------------------------------------------------------------- pesos sorteados e cópia


@torch.no_grad()
def _randomize(module: nn.Module, gen: torch.Generator) -> None:
    """Pesos sorteados com semente; LayerNorms com ganhos e vieses diferentes entre si
    (senão reaproveitar uma LayerNorm passaria despercebido)."""
    for name, p in module.named_parameters():
        if "norm" in name and name.endswith("weight"):
            p.copy_(1.0 + 0.4 * torch.randn(p.shape, generator=gen))
        elif name.endswith("bias"):
            p.copy_(0.3 * torch.randn(p.shape, generator=gen))
        else:  # matrizes: desvio 1,5/√fan_in, para a atenção não ficar uniforme
            p.copy_(1.5 * torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)


def _torch_encoder(D, H, Fd, norm_first, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = nn.TransformerEncoderLayer(
            D, H, Fd, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first
        )
    _randomize(t, seeded_generator(seed))
    return t


def _torch_decoder(D, H, Fd, norm_first, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = nn.TransformerDecoderLayer(
            D, H, Fd, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first
        )
    _randomize(t, seeded_generator(seed))
    return t


def _linear_ok(module, attr: str, d_in: int, d_out: int, name: str, tried: str, owner: str) -> None:
    lin = getattr(module, attr, None)
    expect(
        isinstance(lin, nn.Linear),
        name,
        tried,
        f"`{owner}.{attr}` deveria ser um `nn.Linear`; encontrei {describe(lin)}.",
        "crie o atributo com esse nome exato no `__init__` (a correção copia pesos por ele).",
    )
    expect(
        (lin.in_features, lin.out_features) == (d_in, d_out) and lin.bias is not None,
        name,
        tried,
        f"`{owner}.{attr}` deveria ser `nn.Linear({d_in}, {d_out})` com viés; é "
        f"`nn.Linear({lin.in_features}, {lin.out_features}, bias={lin.bias is not None})`.",
    )


def _mha_ok(module, attr: str, D: int, name: str, tried: str, owner: str) -> None:
    mha = getattr(module, attr, None)
    expect(
        mha is not None
        and all(isinstance(getattr(mha, w, None), nn.Linear) for w in ("W_Q", "W_K", "W_V", "W_O")),
        name,
        tried,
        f"`{owner}.{attr}` deveria ser uma `MultiHeadAttention` do capítulo 3 (com `W_Q`, `W_K`, "
        f"`W_V`, `W_O`); encontrei "
        f"{describe(mha) if not isinstance(mha, nn.Module) else type(mha).__name__}.",
        "use `MultiHeadAttention(d_model, n_heads, dropout)` de `transformer_course.multihead`.",
    )
    for w in ("W_Q", "W_K", "W_V", "W_O"):
        _linear_ok(mha, w, D, D, name, tried, f"{owner}.{attr}")


def _norm_ok(module, attr: str, D: int, name: str, tried: str) -> None:
    norm = getattr(module, attr, None)
    expect(
        isinstance(norm, nn.LayerNorm) and tuple(norm.normalized_shape) == (D,),
        name,
        tried,
        f"`{attr}` deveria ser `nn.LayerNorm({D})`; encontrei "
        f"{type(norm).__name__ if isinstance(norm, nn.Module) else describe(norm)}.",
    )


def _build(cls, name: str, tried: str, *args, **kwargs):
    return call(
        cls,
        name,
        f"{tried} — construção `{name}({', '.join(map(str, args))}"
        f"{''.join(f', {k}={v}' for k, v in kwargs.items())})`",
        *args,
        **kwargs,
    )


@torch.no_grad()
def _load_ffn(ffn, t) -> None:
    for attr in ("linear1", "linear2"):
        getattr(ffn, attr).weight.copy_(getattr(t, attr).weight)
        getattr(ffn, attr).bias.copy_(getattr(t, attr).bias)


def _check_attrs(layer, name, kind, D, Fd, tried) -> None:
    """Confere os atributos que a correção usa para copiar os pesos do PyTorch."""
    __tracebackhide__ = True
    expect(
        isinstance(layer, nn.Module),
        name,
        tried,
        f"`{name}(...)` deveria criar um `nn.Module`; criou {describe(layer)}.",
    )
    _mha_ok(layer, "self_attn", D, name, tried, name)
    norms = ("norm1", "norm2") if kind == "enc" else ("norm1", "norm2", "norm3")
    if kind == "dec":
        _mha_ok(layer, "cross_attn", D, name, tried, name)
    ffn = getattr(layer, "ffn", None)
    expect(
        isinstance(ffn, nn.Module),
        name,
        tried,
        f"`{name}.ffn` deveria ser a sua `FeedForward`; encontrei {describe(ffn)}.",
    )
    _linear_ok(ffn, "linear1", D, Fd, name, tried, f"{name}.ffn")
    _linear_ok(ffn, "linear2", Fd, D, name, tried, f"{name}.ffn")
    for n in norms:
        _norm_ok(layer, n, D, name, tried)


def _prepare_layer(cls, name, kind, D, H, Fd, norm_first, seed, dtype, tried, pass_norm_first=True):
    """Constrói a camada do aluno, confere os atributos e copia os pesos do PyTorch."""
    kwargs = {"norm_first": norm_first} if pass_norm_first else {}
    layer = _build(cls, name, tried, D, H, Fd, 0.0, **kwargs)
    _check_attrs(layer, name, kind, D, Fd, tried)
    t = (_torch_encoder if kind == "enc" else _torch_decoder)(D, H, Fd, norm_first, seed)
    if kind == "enc":
        interop.load_encoder_layer_from_torch(layer, t)
    else:
        interop.load_decoder_layer_from_torch(layer, t)
    return layer.to(dtype), t.to(dtype)


# ---------------------------------------------------------------- FeedForward


def _ffn_tried(x, extra=""):
    return f"x {tuple(x.shape)} {str(x.dtype)[6:]}{extra}"


def _run_ffn(cls, D, Fd, x_shape, seed, dtype=torch.float32, extra="", dropout=None):
    gen = seeded_generator(seed)
    x = torch.randn(*x_shape, D, generator=gen, dtype=dtype)
    tried = _ffn_tried(x, f", d_model = {D}, d_ff = {Fd}{extra}")
    args = (D, Fd) if dropout is None else (D, Fd, dropout)
    ffn = _build(cls, FFN, tried, *args)
    expect(
        isinstance(ffn, nn.Module),
        FFN,
        tried,
        f"`FeedForward(...)` deveria criar um `nn.Module`; criou {describe(ffn)}.",
    )
    _linear_ok(ffn, "linear1", D, Fd, FFN, tried, "FeedForward")
    _linear_ok(ffn, "linear2", Fd, D, FFN, tried, "FeedForward")
    t = _torch_encoder(D, 1, Fd, True, seed + 100)
    _load_ffn(ffn, t)
    ffn, t = ffn.to(dtype), t.to(dtype)
    if dropout is not None:
        ffn.eval()
    before = snapshot(x)
    out = call(ffn, FFN, tried, x)
    expect_unchanged(before, [x], ["x"], FFN, tried)
    W1, b1, W2, b2 = t.linear1.weight, t.linear1.bias, t.linear2.weight, t.linear2.bias
    expected = F.linear(F.gelu(F.linear(x, W1, b1)), W2, b2)

    def mistakes():
        return [
            Mistake(label, _ffn(t, x, act, after))
            for label, act, after in (
                (RELU, F.relu, False),
                (NO_ACT, _no_act, False),
                (TANH, _gelu_tanh, False),
                (ACT_AFTER, F.gelu, True),
                ("a FFN com ReLU também depois de `linear2`", F.relu, True),
            )
        ]

    _close(out, expected, FFN, tried, "a saída", mistakes)
    return ffn, x, out


@_single_thread
def check_feed_forward(cls: Callable) -> None:
    """Testes visíveis de ``FeedForward``: atributos, valores em (B, T, D) e em outras formas."""
    __tracebackhide__ = True
    n = 0
    _run_ffn(cls, 8, 32, (2, 5), seed=0)
    n += 1
    _run_ffn(cls, 6, 10, (3,), seed=1, extra=" (2-D: posição a posição, sem eixo de lote)")
    n += 1
    ffn, x, out = _run_ffn(cls, 4, 16, (2, 3, 5), seed=2, extra=" (4-D)")
    n += 1
    # posição a posição: trocar a ordem das posições só troca a ordem das saídas
    perm = torch.tensor([4, 0, 3, 1, 2])
    permuted = call(ffn, FFN, "x com as posições permutadas", x[:, :, perm])
    expect_close(
        permuted,
        out[:, :, perm],
        FFN,
        "x com as posições permutadas (a FFN age em cada posição separadamente)",
        "a saída permutada",
    )
    n += 1
    passed(FFN, n)


FFN_DOUBLE_DROPOUT = (
    "a FFN com dois sorteios de *dropout* seguidos, um entre a GELU e `linear2` e outro no fim "
    "(não ponha outro no fim da FFN: a camada já aplica o dela na saída da subcamada)"
)
FFN_DROPOUT_AT_END = "a FFN com o *dropout* no fim, depois de `linear2`, em vez de entre a GELU e `linear2`"
FFN_NO_DROPOUT = "a FFN sem *dropout* em modo de treino (o `nn.Dropout` foi criado mas não é aplicado)"


def _check_ffn_train_dropout(cls: Callable) -> None:
    """Modo de treino, dropout = 0,5, semente fixa: um sorteio só, entre a GELU e `linear2`."""
    __tracebackhide__ = True
    D, Fd = 8, 16
    x = torch.randn(2, 3, D, generator=seeded_generator(13))
    tried = _ffn_tried(x, f", d_model = {D}, d_ff = {Fd} (dropout = 0.5, modo de treino, semente fixa)")
    with torch.random.fork_rng(devices=[]):
        ffn = _build(cls, FFN, tried, D, Fd, 0.5)
    t = _torch_encoder(D, 1, Fd, True, 113)
    _load_ffn(ffn, t)
    ffn.train()

    def seeded(fn):
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(0)  # só o gerador da CPU (fork_rng o restaura)
            return fn()

    out = seeded(lambda: call(ffn, FFN, tried, x))
    with torch.no_grad():
        h = F.gelu(t.linear1(x))
        expected = seeded(lambda: t.linear2(F.dropout(h, 0.5)))

        def mistakes():
            return [
                Mistake(FFN_DOUBLE_DROPOUT, seeded(lambda: F.dropout(t.linear2(F.dropout(h, 0.5)), 0.5))),
                Mistake(FFN_DROPOUT_AT_END, seeded(lambda: F.dropout(t.linear2(h), 0.5))),
                Mistake(FFN_NO_DROPOUT, t.linear2(h)),
            ]

        _close(out, expected, FFN, tried, "a saída", mistakes)


@_single_thread
def check_feed_forward_hidden(cls: Callable) -> None:
    """Testes ocultos: float64, gradientes, dropout desligado em eval, implementação própria."""
    __tracebackhide__ = True
    n = 0
    expect(
        cls is not reference.FeedForward,
        FFN,
        "origem da classe",
        "Sua classe é a implementação de referência do pacote `transformer_course`.",
        "escreva a sua própria classe em vez de importá-la.",
    )
    n += 1
    _run_ffn(cls, 8, 24, (2, 4), seed=10, dtype=torch.float64, extra=" (float64)")
    n += 1
    _run_ffn(cls, 5, 7, (1, 1), seed=11, extra=" (d_ff < 2·d_model, T = 1)")
    n += 1
    ffn, x, _ = _run_ffn(cls, 8, 16, (2, 3), seed=12, extra=" (dropout = 0.5, modo eval)", dropout=0.5)
    n += 1
    _check_ffn_train_dropout(cls)
    n += 1
    # gradientes chegam a x e a todos os parâmetros
    xg = x.clone().requires_grad_()
    tried = _ffn_tried(x, " (gradientes)")
    out = call(ffn, FFN, tried, xg)
    expect(
        isinstance(out, torch.Tensor) and out.requires_grad,
        FFN,
        tried,
        "A saída não está ligada ao grafo de gradientes (sem `.detach()`, `.numpy()` ou `torch.no_grad()`).",
    )
    call(lambda: out.pow(2).sum().backward(), FFN, tried)
    missing = [p for p, v in ffn.named_parameters() if v.grad is None]
    expect(not missing, FFN, tried, f"Estes parâmetros não receberam gradiente: {missing}.")
    n += 1
    passed(FFN, n, "(testes ocultos)")


# ---------------------------------------------------------------- EncoderLayer


def _enc_tried(x, mask, norm_first, extra=""):
    m = "sem máscara" if mask is None else f"máscara {tuple(mask.shape)}"
    return f"x {tuple(x.shape)} {str(x.dtype)[6:]}, {m}, norm_first={norm_first}{extra}"


def _enc_mistakes(t, x, mask, norm_first):
    cases = [
        (RELU, {"act": F.relu}),
        (NO_ACT, {"act": _no_act}),
        (TANH, {"act": _gelu_tanh}),
        (PRE_WHEN_POST if not norm_first else POST_WHEN_PRE, {"norm_first": not norm_first}),
        (_no_residual("na autoatenção"), {"residual": {"sa": False}}),
        (_no_residual("na FFN"), {"residual": {"ff": False}}),
        (_no_residual("nas duas subcamadas"), {"residual": {"sa": False, "ff": False}}),
        (SHARED_NORM, {"shared_norm": "first"}),
        (SHARED_NORM, {"shared_norm": "last"}),
        (FFN_FIRST, {"order": ("ff", "sa")}),
    ]
    if norm_first:
        cases += [(DOUBLE_NORM, {"pre_mode": "double"}), (RES_NORMED, {"pre_mode": "res_normed"})]
    else:
        cases += [(NORM_OUT, {"post_mode": "norm_out"})]
    if mask is not None:
        cases += [(MASK_IGNORED, {"mask_mode": "ignored"}), (MASK_INVERTED, {"mask_mode": "inverted"})]
    outs, weights = [], []
    for label, kw in cases:
        kw = {"norm_first": norm_first, **kw}
        try:
            out, w = _encoder_variant(t, x, mask, **kw)
        except RuntimeError:
            continue
        outs.append(Mistake(label, out))
        weights.append(Mistake(label, w))
    return outs, weights


def _run_encoder(
    cls,
    D,
    H,
    Fd,
    B,
    T,
    norm_first,
    seed,
    mask_kind=None,
    dtype=torch.float32,
    extra="",
    pass_norm_first=True,
    grad=False,
):
    gen = seeded_generator(seed)
    x = torch.randn(B, T, D, generator=gen, dtype=dtype)
    mask = _make_mask(mask_kind, gen, B, T, T)
    tried = _enc_tried(x, mask, norm_first, f", d_model = {D}, n_heads = {H}, d_ff = {Fd}{extra}")
    layer, t = _prepare_layer(cls, ENC, "enc", D, H, Fd, norm_first, seed + 1, dtype, tried, pass_norm_first)
    src_mask, kpm = _torch_masks(mask, B, H)
    xs = x.clone().requires_grad_(grad)
    xo = x.clone().requires_grad_(grad)
    expected = t(xo, src_mask=src_mask, src_key_padding_mask=kpm)
    _, expected_w = _encoder_variant(t, x, mask, norm_first)
    lazy = _lazy(lambda: _enc_mistakes(t, x, mask, norm_first))
    before = snapshot(x) + ([] if mask is None else snapshot(mask))
    result = call(
        layer,
        ENC,
        tried,
        xs,
        mask,
        hint_on_error="passe a `mask` como está para `self_attn`: ela já vem numa forma que a "
        "atenção aceita ((T, T), (B, T, T) ou (B, 1, 1, T)); um `unsqueeze` a "
        "mais cria um tensor de 5 eixos.",
    )
    expect_unchanged(
        before,
        [xs] + ([] if mask is None else [mask]),
        ["x"] + ([] if mask is None else ["mask"]),
        ENC,
        tried,
    )
    expect(
        isinstance(result, tuple) and len(result) == 2,
        ENC,
        tried,
        f"Esperava uma tupla (x, weights); veio {describe(result)}.",
    )
    out, weights = result
    _close(out, expected, ENC, tried, "a saída `x`", lambda: lazy()[0])
    _close(weights, expected_w, ENC, tried, "os pesos de atenção `weights` (B, H, T, T)", lambda: lazy()[1])
    if grad:
        expect(out.requires_grad, ENC, tried, "A saída não está ligada ao grafo de gradientes.")
        call(lambda: out.pow(2).sum().backward(), ENC, tried)
        expected.pow(2).sum().backward()
        expect_close(xs.grad, xo.grad, ENC, tried, "o gradiente em `x`")
        missing = [p for p, v in layer.named_parameters() if v.grad is None]
        expect(
            not missing,
            ENC,
            tried,
            f"Estes parâmetros não receberam gradiente: {missing}.",
            "há uma subcamada ou LayerNorm criada no `__init__` e nunca usada no `forward`.",
        )
    return layer


def _make_mask(kind, gen, B, T, S):
    """Máscaras do curso (True = pode atender), sem linhas totalmente bloqueadas."""
    if kind is None:
        return None
    if kind == "causal":
        return torch.ones(T, S, dtype=torch.bool).tril()
    lengths = torch.randint(1, S, (B,), generator=gen)
    lengths[0] = S - 1
    pad = torch.arange(S)[None, :] < lengths[:, None]  # (B, S)
    if kind == "padding":
        return pad[:, None, None, :]  # (B, 1, 1, S)
    if kind == "decoder":  # causal E padding, (B, 1, T, T)
        return pad[:, None, None, :] & torch.ones(T, S, dtype=torch.bool).tril()
    if kind == "3d":
        return pad[:, None, :] & torch.ones(T, S, dtype=torch.bool).tril()  # (B, T, S)
    raise ValueError(kind)


def _eval_and_builtins(cls, name: str, kind: str) -> None:
    """Com dropout > 0 em modo eval a camada é determinística e igual ao PyTorch; e não usa os
    módulos prontos (``nn.MultiheadAttention``, ``nn.Transformer*Layer``)."""
    __tracebackhide__ = True
    gen = seeded_generator(14)
    x, memory = torch.randn(2, 3, 8, generator=gen), torch.randn(2, 5, 8, generator=gen)
    args = (x,) if kind == "enc" else (x, memory)
    tried = (
        _enc_tried(x, None, True, " (dropout = 0.3, modo eval)")
        if kind == "enc"
        else _dec_tried(x, memory, None, None, True, " (dropout = 0.3, modo eval)")
    )
    layer = _build(cls, name, tried, 8, 2, 16, 0.3, norm_first=True)
    expect(
        isinstance(layer, nn.Module),
        name,
        tried,
        f"`{name}(...)` deveria criar um `nn.Module`; criou {describe(layer)}.",
    )
    builtin = nn.TransformerEncoderLayer if kind == "enc" else nn.TransformerDecoderLayer
    inner = sorted(
        {type(m).__name__ for m in layer.modules() if isinstance(m, (builtin, nn.MultiheadAttention))}
    )
    expect(
        not inner,
        name,
        tried,
        f"Sua camada contém {inner} do PyTorch.",
        "o exercício pede que você monte a camada com a `MultiHeadAttention` do curso.",
    )
    with forbid_torch_functions(F.multi_head_attention_forward) as mode:
        call(layer, name, tried, *args)
    expect(
        not mode.used,
        name,
        tried,
        f"Sua camada chama {mode.used} do PyTorch.",
        "o exercício pede que você monte a camada com a `MultiHeadAttention` do curso.",
    )
    _check_attrs(layer, name, kind, 8, 16, tried)
    t = (_torch_encoder if kind == "enc" else _torch_decoder)(8, 2, 16, True, 15)
    (interop.load_encoder_layer_from_torch if kind == "enc" else interop.load_decoder_layer_from_torch)(
        layer, t
    )
    layer.eval()
    out = call(layer, name, tried, *args)
    out = out[0] if isinstance(out, tuple) else out
    again = call(layer, name, tried, *args)
    again = again[0] if isinstance(again, tuple) else again
    expect(
        isinstance(out, torch.Tensor) and isinstance(again, torch.Tensor) and torch.equal(out, again),
        name,
        tried,
        "Em modo eval, duas chamadas iguais deram saídas diferentes.",
        "dropout ativo em modo eval: use `nn.Dropout` ou `F.dropout(..., training=self.training)`.",
    )
    mistakes = (
        (lambda: _enc_mistakes(t, x, None, True)[0])
        if kind == "enc"
        else (lambda: _dec_mistakes(t, x, memory, None, None, True)[0])
    )
    _close(out, t(*args), name, tried, "a saída `x`", mistakes)


@_single_thread
def check_encoder_layer(cls: Callable) -> None:
    """Testes visíveis de ``EncoderLayer``: Pre-LN e Post-LN contra ``nn.TransformerEncoderLayer``."""
    __tracebackhide__ = True
    n = 0
    _run_encoder(cls, 16, 4, 32, 2, 5, True, seed=0)
    n += 1
    _run_encoder(cls, 16, 4, 32, 2, 5, False, seed=1)
    n += 1
    _run_encoder(cls, 12, 3, 20, 3, 6, True, seed=2, mask_kind="padding")
    n += 1
    _run_encoder(cls, 8, 2, 16, 2, 4, False, seed=3, mask_kind="causal")
    n += 1
    passed(ENC, n)


@_single_thread
def check_encoder_layer_hidden(cls: Callable) -> None:
    """Testes ocultos: float64, máscaras 3-D e 4-D, gradientes, padrão norm_first=True, ValueError,
    dropout desligado em eval e atalhos proibidos."""
    __tracebackhide__ = True
    n = 0
    expect(
        cls is not reference.EncoderLayer,
        ENC,
        "origem da classe",
        "Sua classe é a implementação de referência do pacote `transformer_course`.",
        "escreva a sua própria classe em vez de importá-la.",
    )
    n += 1
    _eval_and_builtins(cls, ENC, "enc")
    n += 1
    _run_encoder(
        cls, 8, 2, 16, 2, 5, False, seed=10, mask_kind="decoder", dtype=torch.float64, extra=" (float64)"
    )
    n += 1
    _run_encoder(cls, 8, 4, 8, 2, 4, True, seed=11, mask_kind="3d", extra=" (máscara 3-D)")
    n += 1
    _run_encoder(
        cls,
        8,
        2,
        16,
        1,
        3,
        True,
        seed=12,
        extra=" (sem passar norm_first: o padrão é True)",
        pass_norm_first=False,
    )
    n += 1
    for nf in (True, False):
        _run_encoder(
            cls,
            8,
            2,
            16,
            2,
            4,
            nf,
            seed=13,
            mask_kind="padding",
            dtype=torch.float64,
            extra=" (gradientes)",
            grad=True,
        )
        n += 1
    expect_raises(
        cls, ValueError, ENC, "EncoderLayer(10, 3, 16): d_model não divisível por n_heads", 10, 3, 16
    )
    n += 1
    passed(ENC, n, "(testes ocultos)")


# ---------------------------------------------------------------- DecoderLayer


def _dec_tried(x, memory, tgt_mask, memory_mask, norm_first, extra=""):
    tm = "sem tgt_mask" if tgt_mask is None else f"tgt_mask {tuple(tgt_mask.shape)}"
    mm = "sem memory_mask" if memory_mask is None else f"memory_mask {tuple(memory_mask.shape)}"
    return (
        f"x {tuple(x.shape)}, memory {tuple(memory.shape)} {str(x.dtype)[6:]}, {tm}, {mm}, "
        f"norm_first={norm_first}{extra}"
    )


def _dec_mistakes(t, x, memory, tgt_mask, memory_mask, norm_first):
    cases = [
        (RELU, {"act": F.relu}),
        (NO_ACT, {"act": _no_act}),
        (TANH, {"act": _gelu_tanh}),
        (PRE_WHEN_POST if not norm_first else POST_WHEN_PRE, {"norm_first": not norm_first}),
        (_no_residual("na autoatenção"), {"residual": {"sa": False}}),
        (_no_residual("na atenção cruzada"), {"residual": {"ca": False}}),
        (_no_residual("na FFN"), {"residual": {"ff": False}}),
        (_no_residual("em todas as subcamadas"), {"residual": {"sa": False, "ca": False, "ff": False}}),
        (SHARED_NORM, {"shared_norm": "first"}),
        (SHARED_NORM, {"shared_norm": "last"}),
        (CROSS_ON_SELF, {"kv": "self"}),
        (NORM_MEMORY, {"kv": "normed"}),
        (CROSS_FIRST, {"order": ("ca", "sa", "ff")}),
        (FFN_FIRST, {"order": ("ff", "sa", "ca")}),
    ]
    if norm_first:
        cases += [(DOUBLE_NORM, {"pre_mode": "double"}), (RES_NORMED, {"pre_mode": "res_normed"})]
    else:
        cases += [(NORM_OUT, {"post_mode": "norm_out"})]
    if tgt_mask is not None:
        cases += [(TGT_IGNORED, {"tgt_mode": "ignored"}), (TGT_INVERTED, {"tgt_mode": "inverted"})]
    if memory_mask is not None:
        cases += [(MEM_IGNORED, {"mem_mode": "ignored"})]
    outs, self_w, cross_w = [], [], []
    for label, kw in cases:
        kw = {"norm_first": norm_first, **kw}
        try:
            out, sw, cw = _decoder_variant(t, x, memory, tgt_mask, memory_mask, **kw)
        except RuntimeError:
            continue
        outs.append(Mistake(label, out))
        self_w.append(Mistake(label, sw))
        cross_w.append(Mistake(label, cw))
    return outs, self_w, cross_w


def _run_decoder(
    cls,
    D,
    H,
    Fd,
    B,
    T,
    S,
    norm_first,
    seed,
    tgt_kind=None,
    mem_kind=None,
    dtype=torch.float32,
    extra="",
    pass_norm_first=True,
    grad=False,
):
    gen = seeded_generator(seed)
    x = torch.randn(B, T, D, generator=gen, dtype=dtype)
    memory = torch.randn(B, S, D, generator=gen, dtype=dtype)
    tgt_mask = _make_mask(tgt_kind, gen, B, T, T)
    memory_mask = _make_mask(mem_kind, gen, B, T, S)
    tried = _dec_tried(
        x, memory, tgt_mask, memory_mask, norm_first, f", d_model = {D}, n_heads = {H}, d_ff = {Fd}{extra}"
    )
    layer, t = _prepare_layer(cls, DEC, "dec", D, H, Fd, norm_first, seed + 1, dtype, tried, pass_norm_first)
    tm, tkpm = _torch_masks(tgt_mask, B, H)
    mm, mkpm = _torch_masks(memory_mask, B, H)
    xs, ms = x.clone().requires_grad_(grad), memory.clone().requires_grad_(grad)
    xo, mo = x.clone().requires_grad_(grad), memory.clone().requires_grad_(grad)
    expected = t(xo, mo, tgt_mask=tm, memory_mask=mm, tgt_key_padding_mask=tkpm, memory_key_padding_mask=mkpm)
    _, exp_sw, exp_cw = _decoder_variant(t, x, memory, tgt_mask, memory_mask, norm_first)
    lazy = _lazy(lambda: _dec_mistakes(t, x, memory, tgt_mask, memory_mask, norm_first))
    masks = [
        (m, label) for m, label in ((tgt_mask, "tgt_mask"), (memory_mask, "memory_mask")) if m is not None
    ]
    before = snapshot(x, memory, *[m for m, _ in masks])
    result = call(
        layer,
        DEC,
        tried,
        xs,
        ms,
        tgt_mask,
        memory_mask,
        hint_on_error="confira de onde vêm Q, K e V em cada atenção e qual máscara vai "
        "em cada uma: `tgt_mask` (T, T) na autoatenção, `memory_mask` "
        "(..., T, S) na atenção cruzada.",
    )
    expect_unchanged(
        before, [xs, ms, *[m for m, _ in masks]], ["x", "memory", *[label for _, label in masks]], DEC, tried
    )
    expect(
        isinstance(result, tuple) and len(result) == 3,
        DEC,
        tried,
        f"Esperava uma tupla (x, self_weights, cross_weights); veio {describe(result)}.",
    )
    out, sw, cw = result
    _close(out, expected, DEC, tried, "a saída `x`", lambda: lazy()[0])
    _close(
        sw,
        exp_sw,
        DEC,
        tried,
        "os pesos da autoatenção `self_weights` (B, H, T, T)",
        lambda: lazy()[1] + [Mistake(SWAPPED_WEIGHTS, exp_cw)],
    )
    _close(
        cw,
        exp_cw,
        DEC,
        tried,
        "os pesos da atenção cruzada `cross_weights` (B, H, T, S)",
        lambda: lazy()[2] + [Mistake(SWAPPED_WEIGHTS, exp_sw)],
    )
    if grad:
        expect(out.requires_grad, DEC, tried, "A saída não está ligada ao grafo de gradientes.")
        call(lambda: out.pow(2).sum().backward(), DEC, tried)
        expected.pow(2).sum().backward()
        expect_close(xs.grad, xo.grad, DEC, tried, "o gradiente em `x`")
        expect(
            ms.grad is not None,
            DEC,
            tried,
            "Nenhum gradiente chegou a `memory`.",
            "a atenção cruzada precisa usar `memory` como K e V (e sem `.detach()`).",
        )
        expect_close(ms.grad, mo.grad, DEC, tried, "o gradiente em `memory`")
        missing = [p for p, v in layer.named_parameters() if v.grad is None]
        expect(
            not missing,
            DEC,
            tried,
            f"Estes parâmetros não receberam gradiente: {missing}.",
            "há uma subcamada ou LayerNorm criada no `__init__` e nunca usada no `forward`.",
        )
    return layer


@_single_thread
def check_decoder_layer(cls: Callable) -> None:
    """Testes visíveis de ``DecoderLayer`` contra ``nn.TransformerDecoderLayer`` (T ≠ S)."""
    __tracebackhide__ = True
    n = 0
    _run_decoder(cls, 16, 4, 32, 2, 5, 7, True, seed=0)
    n += 1
    _run_decoder(cls, 16, 4, 32, 2, 5, 7, False, seed=1)
    n += 1
    _run_decoder(cls, 12, 3, 24, 3, 4, 6, True, seed=2, tgt_kind="causal", mem_kind="padding")
    n += 1
    _run_decoder(cls, 8, 2, 16, 2, 6, 3, False, seed=3, tgt_kind="causal", mem_kind="padding")
    n += 1
    passed(DEC, n)


@_single_thread
def check_decoder_layer_hidden(cls: Callable) -> None:
    """Testes ocultos: float64, máscara do decodificador (B, 1, T, T), gradientes até a memória,
    padrão norm_first=True, ValueError, dropout em eval e atalhos proibidos."""
    __tracebackhide__ = True
    n = 0
    expect(
        cls is not reference.DecoderLayer,
        DEC,
        "origem da classe",
        "Sua classe é a implementação de referência do pacote `transformer_course`.",
        "escreva a sua própria classe em vez de importá-la.",
    )
    n += 1
    _eval_and_builtins(cls, DEC, "dec")
    n += 1
    _run_decoder(
        cls,
        8,
        2,
        16,
        2,
        5,
        3,
        False,
        seed=10,
        tgt_kind="decoder",
        mem_kind="padding",
        dtype=torch.float64,
        extra=" (float64)",
    )
    n += 1
    _run_decoder(cls, 8, 4, 8, 2, 3, 6, True, seed=11, tgt_kind="3d", extra=" (tgt_mask 3-D)")
    n += 1
    _run_decoder(
        cls,
        8,
        2,
        16,
        1,
        2,
        4,
        True,
        seed=12,
        extra=" (sem passar norm_first: o padrão é True)",
        pass_norm_first=False,
    )
    n += 1
    for nf in (True, False):
        _run_decoder(
            cls,
            8,
            2,
            16,
            2,
            4,
            5,
            nf,
            seed=13,
            tgt_kind="causal",
            mem_kind="padding",
            dtype=torch.float64,
            extra=" (gradientes)",
            grad=True,
        )
        n += 1
    expect_raises(
        cls, ValueError, DEC, "DecoderLayer(10, 4, 16): d_model não divisível por n_heads", 10, 4, 16
    )
    n += 1
    passed(DEC, n, "(testes ocultos)")
