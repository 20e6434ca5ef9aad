"""Verificações do capítulo 4: ``FeedForward``, ``EncoderLayer`` e ``DecoderLayer``.

Oráculos: ``nn.TransformerEncoderLayer``/``nn.TransformerDecoderLayer`` (``batch_first=True``,
``activation="gelu"``, ``dropout=0``) com pesos sorteados com semente e copiados para a camada do
aluno (``interop``); a FFN contra as lineares do PyTorch e ``F.gelu``. Em modo de treino, com
*dropout* > 0 (nos testes visíveis e nos ocultos), contra os mesmos módulos do PyTorch remontados
com o *dropout* onde a camada do curso o põe, sob o mesmo estado do gerador: um *dropout* fora do
lugar muda os sorteios e a saída. Nenhum oráculo usa as referências do pacote (ao estudar no hub,
elas ficam com o professor).

Os erros conhecidos são os MESMOS módulos do PyTorch montados do jeito errado (:func:`_variant`):
quando a saída coincide com um deles, e também noutro caso (outros valores, ou outro estado do
gerador), a mensagem diz qual; toda falha leva um id estável nos dados. Quando não coincide com
nenhum, ganchos (*forward hooks*) nas subcamadas (``self_attn``, ``cross_attn``, ``ffn``, as
LayerNorms; na FFN, ``linear1`` e ``linear2``) dizem em qual entrada ou saída a primeira diferença
aparece. Se ela aparece na saída de uma subcamada que recebeu a entrada certa, o erro está nela ("o
erro está em `ffn`"; uma atenção é chamada sozinha com key, value e máscara certas para saber se o
erro está nela ou no que a camada lhe passa); uma subcamada nunca chamada é dita assim.

A camada do aluno fica do lado dele: é construída, descrita (``c.describe``), recebe os pesos pelo
nome de cada parâmetro (``c.load``) e roda por pedidos (``c.run``, com ``seed``, ``grad`` e
``capture``); aqui chegam só dados. O mesmo código roda ao estudar e no juiz da correção.
"""

from __future__ import annotations

import functools
import warnings

import torch
from torch import nn
from torch.nn import functional as F

from .. import interop, wire
from .. import layers as reference
from ..exercises import Exercise, GradedCell
from ..feedback import CheckFailure, Finding, Mistake, describe, tolerances
from ..runtime import dtype_name, isolated
from .ch03 import torch_weights
from .structure import (
    LAYER_NORM,
    LINEAR,
    MODULE,
    is_a,
    is_module,
    part,
    prepare,
    qualname,
    short_type,
    shown,
    watched,
)

__all__ = ["check_decoder_layer", "check_encoder_layer", "check_feed_forward"]

CHAPTER = "04_transformer"


def _exercise(name: str, grade_id: str, points: int) -> Exercise:
    cells = (
        GradedCell(f"test_{grade_id}", points),
        GradedCell(f"test_{grade_id}_hidden", points, hidden=True),
    )
    return Exercise(CHAPTER, name, getattr(reference, name), cells=cells)


FFN_EX = _exercise("FeedForward", "ffn", 1)
ENC_EX = _exercise("EncoderLayer", "encoder_layer", 2)
DEC_EX = _exercise("DecoderLayer", "decoder_layer", 2)

# ---------------------------------------------------------------- nomes dos erros conhecidos

# a FFN
RELU, NO_ACT, TANH, ACT_AFTER = (
    'a FFN com ReLU em vez de GELU (o oráculo usa `activation="gelu"`)',
    "a FFN sem ativação entre `linear1` e `linear2` (duas lineares seguidas equivalem a uma só: sem a não "
    "linearidade, a FFN não acrescenta nada)",
    'a GELU aproximada por tanh (`approximate="tanh"`, a do GPT e do GPT-2); este exercício pede a GELU '
    'exata, com a função erro, a do `activation="gelu"` do PyTorch',
    "a FFN com a ativação também depois de `linear2` (a GELU vai só entre as duas lineares)",
)
FFN_DOUBLE_DROPOUT, FFN_DROPOUT_AT_END, FFN_NO_DROPOUT = (
    "a FFN com dois sorteios de *dropout* seguidos, um entre a GELU e `linear2` e outro no fim (não ponha "
    "outro no fim da FFN: a camada já aplica o dela na saída da subcamada)",
    "a FFN com o *dropout* no fim, depois de `linear2`, em vez de entre a GELU e `linear2`",
    "a FFN sem *dropout* em modo de treino (o `nn.Dropout` foi criado mas não é aplicado)",
)
# as LayerNorms e as conexões residuais
POST_WHEN_PRE, PRE_WHEN_POST, DOUBLE_NORM, RES_NORMED, NORM_OUT, SHARED_NORM, NO_RESIDUAL = (
    "uma camada Post-LN (LayerNorm depois da soma residual), mas `norm_first=True` pede Pre-LN: "
    "x = x + subcamada(LN(x))",
    "uma camada Pre-LN, mas `norm_first=False` pede Post-LN, o arranjo de 2017: x = LN(x + subcamada(x))",
    "a LayerNorm aplicada também DEPOIS da soma residual no Pre-LN: no Pre-LN a soma x + subcamada(LN(x)) "
    "segue sem normalizar",
    "o resíduo somado à entrada JÁ normalizada (h = LN(x); x = h + subcamada(h)); no Pre-LN o resíduo leva "
    "o x original: x = x + subcamada(LN(x))",
    "a LayerNorm aplicada só à saída da subcamada, antes da soma (x = x + LN(subcamada(x))); no Post-LN ela "
    "normaliza a soma: x = LN(x + subcamada(x))",
    "uma única LayerNorm (`norm1`) reaproveitada em todas as subcamadas; cada subcamada tem a sua (`norm1`, "
    "`norm2`, ...), com pesos próprios",
    "a camada SEM a conexão residual {}: a saída da subcamada substitui x em vez de ser somada a ele",
)
# a ordem das subcamadas, as máscaras e a memória
FFN_FIRST = "as subcamadas na ordem errada: a FFN antes da atenção"
CROSS_FIRST = "as subcamadas na ordem errada: a atenção cruzada antes da autoatenção mascarada"
MASK_IGNORED = "a atenção sem máscara: a `mask` não chegou a `self_attn`"
MASK_INVERTED = (
    "a máscara invertida (`~mask`): neste curso True = pode atender; só os módulos do PyTorch usam True = "
    "bloqueado"
)
TGT_IGNORED = "a autoatenção sem `tgt_mask` (a máscara causal não chegou a `self_attn`)"
TGT_INVERTED = "a `tgt_mask` invertida (`~tgt_mask`): neste curso True = pode atender"
MEM_IGNORED = "a atenção cruzada sem `memory_mask` (o padding da fonte não chegou a `cross_attn`)"
CROSS_ON_SELF, NORM_MEMORY = (
    "a atenção cruzada olhando para a entrada do decodificador em vez da memória: Q vem do decodificador, "
    "mas K e V vêm de `memory`",
    "a memória normalizada (LayerNorm aplicada a `memory`); só a entrada do decodificador passa pela "
    "`norm2` — a memória já vem normalizada do codificador",
)
SWAPPED_WEIGHTS = "os pesos da atenção cruzada no lugar dos da autoatenção (ou vice-versa)"
# o dropout da camada, em modo de treino
LAYER_NO_DROPOUT, ATTN_NO_DROPOUT, LAYER_FFN_NO_DROPOUT = (
    "a camada sem *dropout* na saída das subcamadas: em modo de treino, a saída de cada subcamada passa por "
    "um `nn.Dropout(dropout)` antes da soma residual",
    "a atenção sem *dropout* nos pesos: passe o `dropout` à `MultiHeadAttention(d_model, n_heads, dropout)`",
    "a FFN sem *dropout* entre a GELU e `linear2`: passe o `dropout` à `FeedForwardRef(d_model, d_ff, "
    "dropout)` (ou, na sua FFN, aplique-o)",
)
ACT_AFTER_RELU = "a FFN com ReLU também depois de `linear2`"
WHERE = {"sa": "na autoatenção", "ca": "na atenção cruzada", "ff": "na FFN"}
IDS = {  # o id estável de cada erro conhecido (o relatório da turma conta por ele)
    RELU: "ffn-relu",
    NO_ACT: "ffn-sem-ativacao",
    TANH: "gelu-tanh",
    ACT_AFTER: "ativacao-depois-de-linear2",
    ACT_AFTER_RELU: "relu-depois-de-linear2",
    FFN_DOUBLE_DROPOUT: "ffn-dropout-duplo",
    FFN_DROPOUT_AT_END: "ffn-dropout-no-fim",
    FFN_NO_DROPOUT: "ffn-sem-dropout",
    POST_WHEN_PRE: "post-ln-em-vez-de-pre-ln",
    PRE_WHEN_POST: "pre-ln-em-vez-de-post-ln",
    DOUBLE_NORM: "layernorm-depois-da-soma",
    RES_NORMED: "residuo-normalizado",
    NORM_OUT: "layernorm-so-na-subcamada",
    SHARED_NORM: "layernorm-compartilhada",
    FFN_FIRST: "ffn-antes-da-atencao",
    CROSS_FIRST: "cruzada-antes-da-autoatencao",
    MASK_IGNORED: "mascara-ignorada",
    MASK_INVERTED: "mascara-invertida",
    TGT_IGNORED: "tgt-mask-ignorada",
    TGT_INVERTED: "tgt-mask-invertida",
    MEM_IGNORED: "memory-mask-ignorada",
    CROSS_ON_SELF: "cruzada-sem-memoria",
    NORM_MEMORY: "memoria-normalizada",
    SWAPPED_WEIGHTS: "pesos-trocados",
    LAYER_NO_DROPOUT: "camada-sem-dropout",
    ATTN_NO_DROPOUT: "atencao-sem-dropout",
    LAYER_FFN_NO_DROPOUT: "ffn-da-camada-sem-dropout",
}
IDS |= {NO_RESIDUAL.format(w): f"sem-residual-{k}" for k, w in WHERE.items()}
IDS |= {NO_RESIDUAL.format(w): "sem-residual" for w in ("em todas as subcamadas", "nas duas subcamadas")}
NEVER_CALLED = {
    "cross_attn": "a atenção cruzada deve passar por `self.cross_attn(...)`, com Q vindo do decodificador "
    "e K, V de `memory` (e os pesos próprios dela; `self.self_attn` é a autoatenção).",
}


def _known(name: str, value) -> Mistake:
    """Um erro conhecido com o id estável dele."""
    return Mistake(name, value, IDS.get(name, ""))


_gelu_tanh = functools.partial(F.gelu, approximate="tanh")
_no_act = nn.Identity()


# ---------------------------------------------------------------- camadas montadas (certas ou erradas)


def _mha(mha: nn.MultiheadAttention, q, kv, mask):
    attn_mask = None if mask is None else interop.to_mha_attn_mask(mask, mha.num_heads, q.size(1))
    return mha(q, kv, kv, attn_mask=attn_mask, need_weights=True, average_attn_weights=False)


def _ffn(t, x, act=F.gelu, act_after=False, p=0.0):
    """linear2(dropout(act(linear1(x)))); com ``p`` > 0, o *dropout* sorteia do gerador global."""
    h = act(t.linear1(x))
    out = t.linear2(F.dropout(h.contiguous(), p) if p else h)
    return act(out) if act_after else out


SUB_NAMES = {"sa": "self_attn", "ca": "cross_attn", "ff": "ffn"}


def _variant(t, x, memory=None, tgt_mask=None, memory_mask=None, norm_first=True, p=0.0, record=None, **bug):
    """A camada do PyTorch ``t`` remontada, certa ou com o erro ``bug``; sem ``memory``, o codificador.

    ``p`` > 0: em modo de treino, com o *dropout* onde a camada do curso o põe (nos pesos das atenções,
    entre a GELU e `linear2` e na saída de cada subcamada), sorteado do gerador global na mesma ordem
    (``bug["skip"]``: onde ele falta: ``"attn"``, ``"ffn"``, ``"layer"``). ``record``: uma lista que
    recebe, na ordem do cálculo, a entrada e as saídas de cada subcamada e LayerNorm (os rótulos de
    :func:`_student_trace`; os pesos de atenção, os de antes do *dropout*).

    Devolve (x, pesos da autoatenção, pesos da atenção cruzada ou None).
    """
    names = ("sa", "ff") if memory is None else ("sa", "ca", "ff")
    tm = {None: tgt_mask, "ignored": None, "inverted": None if tgt_mask is None else ~tgt_mask}[
        bug.get("tgt")
    ]
    mm = None if bug.get("mem") == "ignored" else memory_mask
    norms = [t.norm1, t.norm2] + ([] if memory is None else [t.norm3])
    norm_names = [f"norm{i + 1}" for i in range(len(norms))]
    # shared: "first" = a norm1 em tudo; "last" = um único módulo com vários nomes (norm1 = norm2 ...),
    # que fica com os pesos copiados por último.
    norms = {"first": [norms[0]] * len(norms), "last": [norms[-1]] * len(norms)}.get(bug.get("shared"), norms)
    kv, pre, act = bug.get("kv"), bug.get("pre"), bug.get("act", F.gelu)
    skip = bug.get("skip", ())

    def attend(mha, h, k, m):
        if not p:
            return _mha(mha, h, k, m)
        mha.dropout, was = (0.0 if "attn" in skip else p), mha.training
        mha.train(True)
        try:
            out, _ = _mha(mha, h, k, m)
            mha.train(False)
            _, w = _mha(mha, h, k, m)  # os pesos de antes do dropout (sem sortear nada)
        finally:
            mha.dropout = 0.0
            mha.train(was)
        return out, w

    def ca(h):
        k, m = (memory, mm) if kv is None else (h, tm) if kv == "self" else (norms[1](memory), mm)
        return attend(t.multihead_attn, h, k, m)

    def call(label, f, arg):
        out = f(arg)
        if record is not None:
            record.append((f"`{label}`, na entrada", arg.detach().clone()))
            outs = out if isinstance(out, tuple) else (out,)
            record.extend(
                (f"`{label}`, {w}", v.detach().clone()) for w, v in zip(("na saída", "nos pesos"), outs)
            )
        return out

    ffn_p = 0.0 if "ffn" in skip else p
    fns = {
        "sa": lambda h: attend(t.self_attn, h, h, tm),
        "ca": ca,
        "ff": lambda h: _ffn(t, h, act, p=ffn_p),
    }
    weights = {}
    for name in bug.get("order", names):
        i = names.index(name)
        norm = norms[i]
        h = call(norm_names[i], norm, x) if norm_first else x
        out = call(SUB_NAMES[name], fns[name], h)
        if isinstance(out, tuple):
            out, weights[name] = out
        if p and "layer" not in skip:  # contíguo: o sorteio segue a ordem da memória (a saída do PyTorch
            out = F.dropout(out.contiguous(), p)  # com batch_first é uma vista transposta)
        keep = name not in bug.get("no_res", ())
        if norm_first:
            x = (h if pre == "res_normed" else x) + out if keep else out
            x = norm(x) if pre == "double" else x
        elif bug.get("post"):
            x = x + norm(out)
        else:
            x = call(norm_names[i], norm, x + out if keep else out)
    return x, weights.get("sa"), weights.get("ca")


def _mistakes(t, x, memory, tgt_mask, memory_mask, norm_first):
    """Os erros conhecidos: ([saídas], [pesos da autoatenção], [pesos da cruzada], receitas)."""
    dec = memory is not None
    subs = ("sa", "ca", "ff") if dec else ("sa", "ff")
    cases = [(RELU, {"act": F.relu}), (NO_ACT, {"act": _no_act}), (TANH, {"act": _gelu_tanh})]
    cases.append((POST_WHEN_PRE if norm_first else PRE_WHEN_POST, {"norm_first": not norm_first}))
    cases += [(NO_RESIDUAL.format(WHERE[s]), {"no_res": (s,)}) for s in subs]
    every = "em todas as subcamadas" if dec else "nas duas subcamadas"
    cases.append((NO_RESIDUAL.format(every), {"no_res": subs}))
    cases += [(SHARED_NORM, {"shared": "first"}), (SHARED_NORM, {"shared": "last"})]
    cases.append((FFN_FIRST, {"order": ("ff", *subs[:-1])}))
    if norm_first:
        cases += [(DOUBLE_NORM, {"pre": "double"}), (RES_NORMED, {"pre": "res_normed"})]
    else:
        cases.append((NORM_OUT, {"post": "norm_out"}))
    if tgt_mask is not None:
        cases.append((TGT_IGNORED if dec else MASK_IGNORED, {"tgt": "ignored"}))
        cases.append((TGT_INVERTED if dec else MASK_INVERTED, {"tgt": "inverted"}))
    if dec:
        cases += [(CROSS_ON_SELF, {"kv": "self"}), (NORM_MEMORY, {"kv": "normed"})]
        cases.append((CROSS_FIRST, {"order": ("ca", "sa", "ff")}))
    if memory_mask is not None:
        cases.append((MEM_IGNORED, {"mem": "ignored"}))
    found, recipes = ([], [], []), {}
    for label, kw in cases:
        try:
            values = _variant(t, x, memory, tgt_mask, memory_mask, **{"norm_first": norm_first, **kw})
        except RuntimeError:
            continue
        for i, (bucket, value) in enumerate(zip(found, values)):
            mistake = _known(label, value)
            recipes[id(mistake)] = (kw, i)
            bucket.append(mistake)
    # o 4º item: id(Mistake) -> (o erro em _variant, a saída em que ele aparece), para refazê-lo noutro caso
    return (*found, recipes)


# ---------------------------------------------------------------- pesos sorteados, ganchos e comparação


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


def _torch_layer(dec: bool, D, H, Fd, norm_first, gen: torch.Generator):
    """Uma camada do PyTorch (``dropout=0``, GELU, ``batch_first``) com pesos sorteados por ``gen``."""
    cls = nn.TransformerDecoderLayer if dec else nn.TransformerEncoderLayer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = cls(D, H, Fd, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first)
    _randomize(t, gen)
    return t


def _linear_weights(t, prefix: str = "") -> dict[str, torch.Tensor]:
    """``linear1`` e ``linear2`` de ``t`` com os nomes da FFN do curso (``ffn.linear1.weight``...)."""
    return {
        f"{prefix}{attr}.{kind}": getattr(getattr(t, attr), kind).detach().clone()
        for attr in ("linear1", "linear2")
        for kind in ("weight", "bias")
    }


def _layer_weights(t, dec: bool) -> dict[str, torch.Tensor]:
    """Os pesos da camada do PyTorch ``t`` com os nomes da camada do curso, para ``c.load``.

    ``multihead_attn`` vira ``cross_attn``; W_Q, W_K e W_V saem de ``in_proj_weight`` (como em
    ``interop.load_from_torch``).
    """
    out = torch_weights(t.self_attn, "self_attn.") | _linear_weights(t, "ffn.")
    if dec:
        out |= torch_weights(t.multihead_attn, "cross_attn.")
    for norm in ("norm1", "norm2", "norm3") if dec else ("norm1", "norm2"):
        for kind in ("weight", "bias"):
            out[f"{norm}.{kind}"] = getattr(getattr(t, norm), kind).detach().clone()
    return out


def _student_trace(c, module, args, names, seed=None):
    """As etapas da camada do aluno, do lado dele (os rótulos do ``record`` de :func:`_variant`): a
    entrada e as saídas da primeira chamada de cada submódulo ``names``, guardadas por ganchos
    (``capture``) em duas passadas iguais (as entradas, depois as saídas; ``seed``: o mesmo estado do
    gerador nas duas). Só para o diagnóstico de uma resposta que já falhou: a comparação que dá os
    pontos não depende dela.
    """
    run = {"seed": seed, "no_grad": True}
    entries = c.run(module, args, capture=dict.fromkeys(names, "input"), **run).captured
    exits = c.run(module, args, capture=dict.fromkeys(names, "output"), **run).captured
    stages = []
    for name in names:
        if name in entries:
            stages.append((f"`{name}`, na entrada", entries[name]))
        if name in exits:
            outs = exits[name] if isinstance(exits[name], tuple) else (exits[name],)
            stages += [(f"`{name}`, {where}", value) for where, value in zip(("na saída", "nos pesos"), outs)]
    return stages


def _first(result):
    """A saída ``x`` de uma camada (o 1º item da tupla) ou o que veio."""
    return result[0] if isinstance(result, tuple) and result else result


def _on_graph(value) -> bool:
    """Um tensor que, do lado do aluno, estava ligado ao grafo de gradientes?"""
    return isinstance(value, torch.Tensor) and wire.info(value).requires_grad


def _pair(mine, theirs):
    """(rótulo, do aluno, esperado) na ordem da referência: a k-ésima chamada de cada submódulo."""
    got, seen, stages = {}, {}, []
    for label, value in mine:
        got.setdefault(label, []).append(value)
    for label, value in theirs:
        k = seen[label] = seen.get(label, -1) + 1
        values = got.get(label, [])
        stages.append((label, values[k] if k < len(values) else None, value))
    return stages


def _same(actual, expected) -> bool:
    if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape:
        return False
    a, e = actual.detach().to(torch.float64), expected.detach().to(torch.float64)
    return torch.allclose(a, e, **tolerances(expected.dtype), equal_nan=True)


def _compare(
    c, actual, expected, what, mistakes=list, stages=None, confirm=None, drawn=False, attention=None
):
    """``c.close``; só numa resposta errada calcula os erros conhecidos (cada um custa uma passada da
    camada) e, se nenhum coincide (e se confirma noutro caso, ``confirm``), aponta com
    :func:`_locate` a primeira etapa que difere."""
    wrong = not _same(actual, expected)
    known = mistakes() if wrong else []
    confirm = _memo(confirm)
    if wrong and stages is not None and not any(_same(actual, m.value) and confirm(m) for m in known):
        _locate(c, stages(), drawn, attention)
    c.close(actual, expected, what, known, confirm=confirm)


def _memo(confirm):
    """``confirm`` (um erro se confirma noutro caso?) calculado uma vez por erro; ``None``: sempre."""
    if confirm is None:
        return lambda mistake: True
    seen: dict[int, bool] = {}

    def once(mistake) -> bool:
        if id(mistake) not in seen:
            try:
                seen[id(mistake)] = bool(confirm(mistake))
            except Exception:  # noqa: BLE001 - uma confirmação que quebra não confirma nada
                seen[id(mistake)] = False
        return seen[id(mistake)]

    return once


def _locate(c, stages, drawn: bool = False, attention=None) -> None:
    """A primeira etapa que difere (``c.first_difference``); uma subcamada que nunca foi chamada, antes
    da primeira diferença, é dita assim (e não como "veio None")."""
    for label, mine, theirs in stages:
        if mine is None:
            sub = label.split("`")[1]
            c.fail(
                f"A primeira diferença aparece em {label}: `{sub}` nunca foi chamada no `forward` da camada.",
                NEVER_CALLED.get(sub, f"o `forward` deve passar por `self.{sub}`."),
                kind="propriedade",
                mistake=f"{sub}-nunca-chamada",
                where=label,
            )
        if not _same(mine, theirs):
            break
    try:
        c.first_difference(stages)
    except CheckFailure as failure:
        # com sorteios (modo de treino), uma subcamada certa que recebe a entrada certa pode sortear outra
        # máscara (um sorteio a mais ou a menos antes dela): aí não se diz que o erro está nela
        try:
            finding = None if drawn else _inside(stages, attention)
        except (CheckFailure, RuntimeError, TypeError, ValueError):  # um diagnóstico nunca derruba a falha
            finding = None
        if finding is None:
            raise
        raise c.diagnosed(failure, finding) from None


def _attention_alone(c, layer, t, memory, tgt_mask, memory_mask, sub: str, h) -> Finding | None:
    """A atenção ``sub`` da camada do aluno, chamada sozinha com a entrada certa ``h``, K e V certos e a
    máscara certa: se ela dá a saída do ``nn.MultiheadAttention`` com os mesmos pesos, a atenção está certa e
    a diferença vem do que a camada passa a ela; se não, o erro está nela."""
    from ..probe import Attr

    kv, mask = (h, tgt_mask) if sub == "self_attn" else (memory, memory_mask)
    response = c.run(Attr(layer, sub), (h, kv, kv, mask), no_grad=True)
    if response.error is not None or not isinstance(response.value, tuple) or not response.value:
        return None
    with torch.no_grad():
        wanted, _ = _mha(t.self_attn if sub == "self_attn" else t.multihead_attn, h, kv, mask)
    where = f"`{sub}`, na saída"
    if _same(response.value[0], wanted):
        source = "de `memory`" if sub == "cross_attn" else "da própria entrada"
        return Finding(
            "propriedade",
            f"{sub}-chamada-com-outros-argumentos",
            f"a `{sub}` está certa: chamada sozinha com a entrada certa, key e value {source} e a máscara "
            "certa, ela dá a saída certa. A diferença vem do que a camada passa a ela (a máscara, ou de onde "
            "vêm key e value).",
            where,
        )
    return Finding(
        "upstream",
        f"erro-em-{sub}",
        f"o erro está em `{sub}`, a atenção da camada: chamada sozinha com a entrada, key, value e máscara "
        "certas, ela difere do `nn.MultiheadAttention` com os mesmos pesos (confira a classe dela).",
        where,
    )


INSIDE = {  # submódulo de uma entrada só -> o que ele é na camada
    "ffn": "a FFN da camada (a classe em `self.ffn`)",
    "norm1": "a LayerNorm `norm1`",
    "norm2": "a LayerNorm `norm2`",
    "norm3": "a LayerNorm `norm3`",
}


def _inside(stages, attention=None) -> Finding | None:
    """A primeira diferença está DENTRO de um submódulo de uma entrada só: a entrada dele é a certa e a
    saída não. Então o erro está nele (a camada o chamou certo), e não no que vem antes."""
    previous = None
    for label, mine, theirs in stages:
        if not _same(mine, theirs):
            sub = label.split("`")[1]
            entry = f"`{sub}`, na entrada"
            if sub in ("self_attn", "cross_attn") and previous == entry and attention is not None:
                wanted_in = next(v for lab, _, v in stages if lab == entry)
                return attention(sub, wanted_in)
            if label.endswith("na saída") and sub in INSIDE and previous == entry:
                return Finding(
                    "upstream",
                    f"erro-em-{sub}",
                    f"o erro está em `{sub}`, {INSIDE[sub]}: ela recebe a entrada certa e devolve outra "
                    "saída (confira como ela foi criada e o que ela calcula; a camada a chamou como devia).",
                    label,
                )
            return None
        previous = label
    return None


# ---------------------------------------------------------------- construção e atributos


def _build(c, cls, *args, **kwargs):
    """Constrói o módulo do aluno, que fica do lado dele; devolve a referência a ele."""
    shown_args = ", ".join([*map(str, args), *(f"{k}={v}" for k, v in kwargs.items())])
    tried = c.tried
    c.case(f"{tried} — construção `{c.name}({shown_args})`")
    module = c.new(cls, *args, **kwargs)
    c.case(tried)
    c.expect(
        is_module(module),
        f"`{c.name}(...)` deveria criar um `nn.Module`; criou {describe(module)}.",
        kind="estrutura",
        mistake="nao-e-modulo",
    )
    return module


def _linear_ok(c, module, desc, path, d_in, d_out, owner):
    """O atributo ``path`` (``"self_attn.W_Q"``) do módulo do aluno é uma ``nn.Linear(d_in, d_out)``?"""
    lin, attr = part(c, module, desc, path), path.rsplit(".", 1)[-1]
    c.expect(
        is_a(lin, LINEAR),
        f"`{owner}.{attr}` deveria ser um `nn.Linear`; encontrei {shown(lin)}.",
        "crie o atributo com esse nome exato no `__init__` (a correção copia pesos por ele).",
        kind="estrutura",
        mistake=f"{path}-nao-e-linear",
    )
    c.expect(
        (lin["in_features"], lin["out_features"]) == (d_in, d_out) and lin["bias"],
        f"`{owner}.{attr}` deveria ser `nn.Linear({d_in}, {d_out})` com viés; é "
        f"`nn.Linear({lin['in_features']}, {lin['out_features']}, bias={lin['bias']})`.",
        kind="estrutura",
        mistake=f"{path}-largura",
    )


def _layer_attrs(dec: bool) -> list[str]:
    """Os atributos da camada que a correção confere (e pelos quais copia os pesos)."""
    attns = ("self_attn", "cross_attn") if dec else ("self_attn",)
    names = [name for a in attns for name in (a, *(f"{a}.{w}" for w in ("W_Q", "W_K", "W_V", "W_O")))]
    return [
        *names,
        "ffn",
        "ffn.linear1",
        "ffn.linear2",
        *(("norm1", "norm2", "norm3") if dec else ("norm1", "norm2")),
    ]


def _kind(info) -> str:
    """O nome da classe de um submódulo, ou o valor encontrado (para as mensagens)."""
    return short_type(info) if is_a(info, MODULE) else shown(info)


def _attrs_ok(c, layer, D, Fd, dec, desc=None) -> dict:
    """Confere os atributos que a correção usa para copiar os pesos do PyTorch; devolve a descrição."""
    desc = desc if desc is not None else c.describe(layer, attrs=_layer_attrs(dec))
    name = c.name
    for attr in ("self_attn", "cross_attn") if dec else ("self_attn",):
        mha = part(c, layer, desc, attr)
        projections = [f"{attr}.{w}" for w in ("W_Q", "W_K", "W_V", "W_O")]
        c.expect(
            mha is not None and all(is_a(part(c, layer, desc, w), LINEAR) for w in projections),
            f"`{name}.{attr}` deveria ser uma `MultiHeadAttention` do capítulo 3 (com `W_Q`, `W_K`, `W_V`, "
            f"`W_O`); encontrei {_kind(mha)}.",
            "use `MultiHeadAttention(d_model, n_heads, dropout)` de `transformer_course.multihead`.",
            kind="estrutura",
            mistake=f"{attr}-nao-e-mha",
        )
        for w in projections:
            _linear_ok(c, layer, desc, w, D, D, f"{name}.{attr}")
    ffn = part(c, layer, desc, "ffn")
    c.expect(
        is_a(ffn, MODULE),
        f"`{name}.ffn` deveria ser a sua `FeedForward`; encontrei {shown(ffn)}.",
        kind="estrutura",
        mistake="ffn-ausente",
    )
    _linear_ok(c, layer, desc, "ffn.linear1", D, Fd, f"{name}.ffn")
    _linear_ok(c, layer, desc, "ffn.linear2", Fd, D, f"{name}.ffn")
    for attr in ("norm1", "norm2", "norm3") if dec else ("norm1", "norm2"):
        norm = part(c, layer, desc, attr)
        c.expect(
            is_a(norm, LAYER_NORM) and tuple(norm.get("normalized_shape") or ()) == (D,),
            f"`{attr}` deveria ser `nn.LayerNorm({D})`; encontrei {_kind(norm)}.",
            kind="estrutura",
            mistake=f"{attr}-nao-e-layernorm",
        )
    return desc


# ---------------------------------------------------------------- FeedForward


def _ffn_case(c, cls, D, Fd, lead, seed, dtype=torch.float32, extra="", dropout=None, train=False):
    """Um caso: a FFN do aluno com os pesos de ``linear1``/``linear2`` de uma camada do PyTorch contra
    a fórmula; com ``train``, em modo de treino e semente fixa (um sorteio, entre a GELU e `linear2`)."""
    x = torch.randn(*lead, D, generator=c.gen(seed), dtype=dtype)
    c.case(f"x {tuple(x.shape)} {dtype_name(dtype)}, d_model = {D}, d_ff = {Fd}{extra}")
    ffn = _build(c, cls, D, Fd, *(() if dropout is None else (dropout,)))
    desc = c.describe(ffn, attrs=["linear1", "linear2"])
    _linear_ok(c, ffn, desc, "linear1", D, Fd, "FeedForward")
    _linear_ok(c, ffn, desc, "linear2", Fd, D, "FeedForward")
    t = _torch_layer(False, D, 1, Fd, True, c.gen(seed + 100)).to(dtype)
    prepare(c, ffn, desc, dtype, train)
    c.load(ffn, _linear_weights(t))
    p, state = dropout or 0.0, c.seed_offset  # o estado do gerador global nos dois lados

    def seeded(fn):
        with torch.no_grad(), isolated(state):
            return fn()

    with c.untouched(x=x):
        response = c.run(ffn, (x,), seed=state, no_grad=True)
    c.raise_for(response)
    out = response.value
    # outro caso, para confirmar um erro conhecido: outra forma, outros valores (o mesmo estado do gerador)
    other = torch.randn(*((3, 2) if lead != (3, 2) else (2, 3)), D, generator=c.gen(seed + 200), dtype=dtype)

    def variants(xx):
        """O erro (nome -> saída) em ``xx``, com o mesmo estado do gerador."""
        h = F.gelu(t.linear1(xx))
        if train:
            return {
                FFN_DOUBLE_DROPOUT: seeded(lambda: F.dropout(t.linear2(F.dropout(h, p)), p)),
                FFN_DROPOUT_AT_END: seeded(lambda: F.dropout(t.linear2(h), p)),
                FFN_NO_DROPOUT: seeded(lambda: t.linear2(h)),
            }
        cases = [(RELU, F.relu, 0), (NO_ACT, _no_act, 0), (TANH, _gelu_tanh, 0), (ACT_AFTER, F.gelu, 1)]
        cases.append((ACT_AFTER_RELU, F.relu, 1))
        with torch.no_grad():
            return {name: _ffn(t, xx, act, after) for name, act, after in cases}

    expected = seeded(lambda: t.linear2(F.dropout(F.gelu(t.linear1(x)), p, train)))

    def mistakes():
        return [_known(name, value) for name, value in variants(x).items()]

    def confirm(mistake):
        theirs = c.run(ffn, (other,), seed=state, no_grad=True).value
        return _same(theirs, variants(other)[mistake.name])

    def stages():
        mine = _student_trace(c, ffn, (x,), ("linear1", "linear2"), seed=state)

        def theirs():
            h1 = t.linear1(x)
            dropped = F.dropout(F.gelu(h1), p, train)
            pairs = (("linear1", "entrada", x), ("linear1", "saída", h1), ("linear2", "entrada", dropped))
            return [(f"`{n}`, na {w}", v) for n, w, v in pairs] + [
                ("`linear2`, na saída", t.linear2(dropped))
            ]

        return _pair(mine, seeded(theirs))

    _compare(c, out, expected, "a saída", mistakes, stages, confirm, drawn=train and p > 0)
    return ffn, x, out


@FFN_EX.visible_check
def check_feed_forward(cls) -> None:
    """Testes visíveis de ``FeedForward``: atributos, valores em (B, T, D) e em outras formas, e o
    *dropout* em modo de treino (o mesmo estado do gerador)."""
    with FFN_EX.check() as c:
        _ffn_case(c, cls, 8, 32, (2, 5), seed=0)
        _ffn_case(c, cls, 6, 10, (3,), seed=1, extra=" (2-D: posição a posição, sem eixo de lote)")
        ffn, x, out = _ffn_case(c, cls, 4, 16, (2, 3, 5), seed=2, extra=" (4-D)")
        # posição a posição: trocar a ordem das posições só troca a ordem das saídas
        perm = torch.tensor([4, 0, 3, 1, 2])
        c.case("x com as posições permutadas (a FFN age em cada posição separadamente)")
        c.close(c.call(ffn, x[:, :, perm]), out[:, :, perm], "a saída permutada")
        train = " (dropout = 0.5, modo de treino, o mesmo estado do gerador)"
        _ffn_case(c, cls, 8, 16, (2, 3), 3, extra=train, dropout=0.5, train=True)


GRAPH = "A saída não está ligada ao grafo de gradientes (sem `.detach()`, `.numpy()` ou `torch.no_grad()`)."


@FFN_EX.hidden_check
def check_feed_forward_hidden(cls) -> None:
    """Testes ocultos: float64, dropout em eval e em treino, gradientes, implementação própria."""
    with FFN_EX.check(hidden=True) as c:
        x = torch.randn(2, 3, 8, generator=c.gen(9))
        c.case("origem da resposta")
        c.refuse_reference(cls, reference.FeedForward, watched(lambda: cls(8, 16)(x)))
        _ffn_case(c, cls, 8, 24, (2, 4), seed=10, dtype=torch.float64, extra=" (float64)")
        _ffn_case(c, cls, 5, 7, (1, 1), seed=11, extra=" (d_ff < 2·d_model, T = 1)")
        ffn, x, _ = _ffn_case(c, cls, 8, 16, (2, 3), 12, extra=" (dropout = 0.5, modo eval)", dropout=0.5)
        train = " (dropout = 0.5, modo de treino, semente fixa)"
        _ffn_case(c, cls, 8, 16, (2, 3), 13, extra=train, dropout=0.5, train=True)
        c.case(f"x {tuple(x.shape)} float32 (gradientes)")
        # do lado do aluno: a saída, (saída ** 2).sum().backward() e os gradientes, num pedido só
        response = c.run(
            ffn, (x.clone().requires_grad_(),), grad={"loss": {"kind": "sum_sq"}, "params": "all"}
        )
        if response.error is not None:  # a chamada falhou, ou a saída não está no grafo: por quê?
            c.expect(
                _on_graph(c.call(ffn, x.clone().requires_grad_())),
                GRAPH,
                kind="propriedade",
                mistake="fora-do-grafo",
            )
            c.raise_for(response)
        c.expect(_on_graph(response.value), GRAPH, kind="propriedade", mistake="fora-do-grafo")
        missing = [name for name, g in (response.param_grads or {}).items() if g is None]
        body = f"Estes parâmetros não receberam gradiente: {missing}."
        c.expect(not missing, body, kind="propriedade", mistake="parametro-sem-gradiente")


# ---------------------------------------------------------------- EncoderLayer e DecoderLayer

SUBLAYERS = ("norm1", "self_attn", "norm2", "cross_attn", "norm3", "ffn")
WEIGHTS_CROSS = "os pesos da atenção cruzada `cross_weights` (B, H, T, S)"
MASK_HINT = {
    False: "passe a `mask` como está para `self_attn`: ela já vem numa forma que a atenção aceita ((T, T), "
    "(B, T, T) ou (B, 1, 1, T)); um `unsqueeze` a mais cria um tensor de 5 eixos.",
    True: "confira de onde vêm Q, K e V em cada atenção e qual máscara vai em cada uma: `tgt_mask` (T, T) na "
    "autoatenção, `memory_mask` (..., T, S) na atenção cruzada.",
}


def _mask_hint(response, dec: bool) -> dict:
    """A dica das máscaras, só para a exceção que ela explica (não para toda exceção): no codificador, uma
    máscara de 5 eixos (a forma dela aparece na mensagem); no decodificador, formas que não se combinam."""
    import re

    message = str((response.error or {}).get("message", ""))
    if not dec and re.search(r"\((\d+, ){4}\d+\)|5-D|5 eixos|5D", message):
        return {"hint_on_error": MASK_HINT[False], "mistake": "mascara-5-eixos"}
    if dec and re.search(r"must match the size|broadcast|shape|eixos", message):
        return {"hint_on_error": MASK_HINT[True]}
    return {}


def _make_mask(kind, gen, B, T, S):
    """Máscaras do curso (True = pode atender), sem linhas totalmente bloqueadas."""
    if kind is None:
        return None
    causal = torch.ones(T, S, dtype=torch.bool).tril()
    if kind == "causal":
        return causal
    lengths = torch.randint(1, S, (B,), generator=gen)
    lengths[0] = S - 1
    pad = torch.arange(S)[None, :] < lengths[:, None]  # (B, S)
    four = pad[
        :, None, None, :
    ]  # padding (B, 1, 1, S); decoder: causal E padding (B, 1, T, T); 3d: (B, T, S)
    return {"padding": four, "decoder": four & causal, "3d": pad[:, None, :] & causal}[kind]


def _inputs(c, dec, B, T, S, D, seed, tgt, mem, dtype):
    gen = c.gen(seed)
    x = torch.randn(B, T, D, generator=gen, dtype=dtype)
    memory = torch.randn(B, S, D, generator=gen, dtype=dtype) if dec else None
    tgt_mask = _make_mask(tgt, gen, B, T, T)
    memory_mask = _make_mask(mem, gen, B, T, S) if dec else None
    return x, memory, tgt_mask, memory_mask


def _describe(x, memory, tgt_mask, memory_mask, norm_first, extra=""):
    def m(mask, label):
        return f"sem {label}" if mask is None else f"{label} {tuple(mask.shape)}"

    shapes = f"x {tuple(x.shape)}" + ("" if memory is None else f", memory {tuple(memory.shape)}")
    names = ("máscara",) if memory is None else ("tgt_mask", "memory_mask")
    masks = ", ".join(m(mask, name) for mask, name in zip((tgt_mask, memory_mask), names))
    return f"{shapes} {dtype_name(x.dtype)}, {masks}, norm_first={norm_first}{extra}"


def _run_layer(
    c, cls, dec, dims, norm_first, seed, tgt=None, mem=None, dtype=torch.float32, extra="", **opts
):
    """Um caso: constrói a camada do aluno, copia os pesos do PyTorch e compara saída, pesos e (com
    ``grad=True``) gradientes; sem erro conhecido, aponta a primeira subcamada que difere. Com
    ``omit_nf=True``, constrói sem passar ``norm_first`` (o padrão deve ser Pre-LN)."""
    D, H, Fd, B, T, S = dims
    x, memory, tgt_mask, memory_mask = _inputs(c, dec, B, T, S, D, seed, tgt, mem, dtype)
    extra = f", d_model = {D}, n_heads = {H}, d_ff = {Fd}{extra}"
    c.case(_describe(x, memory, tgt_mask, memory_mask, norm_first, extra))
    layer = _build(c, cls, D, H, Fd, 0.0, **({} if opts.get("omit_nf") else {"norm_first": norm_first}))
    grad = opts.get("grad", False)
    desc = _attrs_ok(c, layer, D, Fd, dec)
    t = _torch_layer(dec, D, H, Fd, norm_first, c.gen(seed + 1)).to(dtype)
    prepare(c, layer, desc, dtype)
    c.load(layer, _layer_weights(t, dec))
    inputs = [v.clone().requires_grad_(grad) for v in (x, memory) if v is not None]
    theirs = [v.clone().requires_grad_(grad) for v in (x, memory) if v is not None]
    masks = (tgt_mask, memory_mask) if dec else (tgt_mask,)
    pt = [None if m is None else interop.to_mha_attn_mask(m, H, T) for m in masks]
    expected = t(*theirs, *pt)
    _, exp_sw, exp_cw = _variant(t, x, memory, tgt_mask, memory_mask, norm_first)
    watched = {"x": inputs[0], "memory": inputs[-1] if dec else None, "tgt_mask" if dec else "mask": tgt_mask}
    backward = None
    with c.untouched(**watched, memory_mask=memory_mask):
        if grad:  # a saída, (x ** 2).sum().backward() e os gradientes, num pedido só
            backward = response = c.run(
                layer, (*inputs, *masks), grad={"loss": {"kind": "sum_sq", "path": [0]}, "params": "all"}
            )
        if not grad or response.error is not None:  # sem gradientes (ou o backward falhou: por quê?)
            response = c.run(layer, (*inputs, *masks))
    c.raise_for(response, **_mask_hint(response, dec))
    result = response.value
    wanted = "(x, self_weights, cross_weights)" if dec else "(x, weights)"
    c.expect(
        isinstance(result, tuple) and len(result) == (3 if dec else 2),
        f"Esperava uma tupla {wanted}; veio {describe(result)}.",
        kind="tipo",
        mistake="nao-e-tupla",
    )
    cache = []

    def mistakes(i):
        cache or cache.append(_mistakes(t, x, memory, tgt_mask, memory_mask, norm_first))
        return cache[0][i]

    def stages():
        mine = _student_trace(c, layer, (*inputs, *masks), SUBLAYERS)
        theirs = []
        with torch.no_grad():
            _variant(t, x, memory, tgt_mask, memory_mask, norm_first, record=theirs)
        return _pair(mine, theirs)

    confirm = _layer_confirm(c, layer, t, x, memory, masks, norm_first, seed, lambda: mistakes(3))
    out = result[0]
    attention = functools.partial(_attention_alone, c, layer, t, memory, tgt_mask, memory_mask)
    _compare(c, out, expected, "a saída `x`", lambda: mistakes(0), stages, confirm, attention=attention)
    whats = ["os pesos de atenção `weights` (B, H, T, T)"]
    if dec:
        whats = ["os pesos da autoatenção `self_weights` (B, H, T, T)", WEIGHTS_CROSS]
    for i, (what, exp, other) in enumerate(zip(whats, (exp_sw, exp_cw), (exp_cw, exp_sw)), 1):
        swapped = [_known(SWAPPED_WEIGHTS, other)] if dec else []
        _compare(c, result[i], exp, what, lambda i=i, swapped=swapped: mistakes(i) + swapped, confirm=confirm)
    if grad:
        body = "A saída não está ligada ao grafo de gradientes."
        c.expect(_on_graph(out), body, kind="propriedade", mistake="fora-do-grafo")
        c.raise_for(
            backward, **_mask_hint(backward, dec)
        )  # a saída estava no grafo, e mesmo assim o backward falhou
        expected.pow(2).sum().backward()
        grads = backward.grads or [None, None]
        c.close(grads[0], theirs[0].grad, "o gradiente em `x`")
        if dec:
            c.expect(
                grads[1] is not None,
                "Nenhum gradiente chegou a `memory`.",
                "a atenção cruzada precisa usar `memory` como K e V (e sem `.detach()`).",
                kind="propriedade",
                mistake="sem-gradiente-na-memoria",
            )
            c.close(grads[1], theirs[1].grad, "o gradiente em `memory`")
        missing = [name for name, g in (backward.param_grads or {}).items() if g is None]
        c.expect(
            not missing,
            f"Estes parâmetros não receberam gradiente: {missing}.",
            "há uma subcamada ou LayerNorm criada no `__init__` e nunca usada no `forward`.",
            kind="propriedade",
            mistake="parametro-sem-gradiente",
        )


def _layer_confirm(c, layer, t, x, memory, masks, norm_first, seed, recipes):
    """``confirm(mistake)``: a camada do aluno, com outra entrada (outros valores; as mesmas máscaras e
    pesos), dá o que o erro ``mistake`` daria nela também? (``recipes()``: como refazer cada erro)"""
    dec = memory is not None
    gen = c.gen(seed + 50)
    x2 = torch.randn(x.shape, generator=gen, dtype=x.dtype)
    memory2 = torch.randn(memory.shape, generator=gen, dtype=memory.dtype) if dec else None
    mine = []

    def confirm(mistake) -> bool:
        if not mine:
            mine.append(c.run(layer, (*((x2, memory2) if dec else (x2,)), *masks), no_grad=True).value)
        theirs = mine[0]
        if mistake.key == IDS[SWAPPED_WEIGHTS]:  # os pesos devolvidos trocados: confere os dois
            right = _variant(t, x2, memory2, *masks, norm_first=norm_first)
            return isinstance(theirs, tuple) and len(theirs) == 3 and _same(theirs[1], right[2])
        recipe = recipes().get(id(mistake))
        if recipe is None or not isinstance(theirs, tuple) or len(theirs) <= recipe[1]:
            return False
        kw, i = recipe
        with torch.no_grad():
            wanted = _variant(t, x2, memory2, *masks, **{"norm_first": norm_first, **kw})[i]
        return _same(theirs[i], wanted)

    return confirm


def _eval_and_builtins(c, cls, dec):
    """Com dropout > 0 em modo eval a camada é determinística e igual ao PyTorch; e não usa os
    módulos prontos (``nn.MultiheadAttention``, ``nn.Transformer*Layer``)."""
    x, memory, _, _ = _inputs(c, dec, 2, 3, 5, 8, 14, None, None, torch.float32)
    args = (x, memory) if dec else (x,)
    c.case(_describe(x, memory, None, None, True, " (dropout = 0.3, modo eval)"))
    layer = _build(c, cls, 8, 2, 16, 0.3, norm_first=True)
    desc = c.describe(layer, attrs=_layer_attrs(dec))
    builtins = {qualname(nn.TransformerDecoderLayer if dec else nn.TransformerEncoderLayer)}
    builtins.add(qualname(nn.MultiheadAttention))
    modules = desc.get("modules", {}).values()
    inner = sorted({short_type(m) for m in modules if builtins & set(m.get("mro", []))})
    why = "o exercício pede que você monte a camada com a `MultiHeadAttention` do curso."
    c.expect(
        not inner, f"Sua camada contém {inner} do PyTorch.", why, kind="atalho", mistake="modulo-do-pytorch"
    )
    body = "Sua camada chama `multi_head_attention_forward` do PyTorch."
    c.forbid(["torch.nn.functional.multi_head_attention_forward"], layer, *args, body=body, hint=why)
    _attrs_ok(c, layer, 8, 16, dec, desc)
    t = _torch_layer(dec, 8, 2, 16, True, c.gen(15))
    c.load(layer, _layer_weights(t, dec))
    c.method(layer, "eval")
    outs = [c.call(layer, *args) for _ in range(2)]
    out, again = (_first(o) for o in outs)
    c.expect(
        isinstance(out, torch.Tensor)
        and isinstance(again, torch.Tensor)
        and out.shape == again.shape
        and out.dtype == again.dtype
        and torch.equal(out, again),
        "Em modo eval, duas chamadas iguais deram saídas diferentes.",
        "dropout ativo em modo eval: use `nn.Dropout` ou `F.dropout(..., training=self.training)`.",
        kind="propriedade",
        mistake="dropout-em-eval",
    )
    found = []

    def mistakes(i):
        found or found.append(_mistakes(t, x, memory, None, None, True))
        return found[0][i]

    masks = (None, None) if dec else (None,)
    confirm = _layer_confirm(c, layer, t, x, memory, masks, True, 14, lambda: mistakes(3))
    _compare(c, out, t(*args), "a saída `x`", lambda: mistakes(0), confirm=confirm)


def _train_dropout(c, cls, dec, norm_first, seed):
    """Modo de treino, dropout = 0,3: a mesma saída que a camada do PyTorch remontada com o *dropout* onde a
    camada do curso o põe (:func:`_variant`), sob o mesmo estado do gerador (um *dropout* a mais, a menos ou
    fora do lugar muda os sorteios). Um erro conhecido só é nomeado se ele se repete com outro estado."""
    D, H, Fd, p = 8, 2, 16, 0.3
    x, memory, tgt_mask, memory_mask = _inputs(c, dec, 2, 4, 5, D, seed, "causal", "padding", torch.float32)
    masks = (tgt_mask, memory_mask) if dec else (tgt_mask,)
    args = (x, memory, *masks) if dec else (x, *masks)
    extra = f" (dropout = {p}, modo de treino, mesma semente)"
    c.case(_describe(x, memory, tgt_mask, memory_mask, norm_first, extra))
    layer = _build(c, cls, D, H, Fd, p, norm_first=norm_first)
    _attrs_ok(c, layer, D, Fd, dec)
    t = _torch_layer(dec, D, H, Fd, norm_first, c.gen(seed + 1))
    c.load(layer, _layer_weights(t, dec))
    c.method(layer, "train", True)
    state = seed + c.seed_offset  # o estado do gerador global, o mesmo nos dois lados

    def oracle(at, record=None, **bug):
        with torch.no_grad(), isolated(at):
            return _variant(t, x, memory, *masks, norm_first=norm_first, p=p, record=record, **bug)[0]

    response = c.run(layer, args, seed=state, no_grad=True)
    c.raise_for(response)
    out = _first(response.value)
    theirs = []
    expected = oracle(state, theirs)
    skips = {LAYER_NO_DROPOUT: ("layer",), ATTN_NO_DROPOUT: ("attn",), LAYER_FFN_NO_DROPOUT: ("ffn",)}

    def mistakes():
        return [_known(name, oracle(state, skip=skip)) for name, skip in skips.items()]

    def confirm(mistake):  # outro estado do gerador: outros sorteios
        again = _first(c.run(layer, args, seed=state + 1, no_grad=True).value)
        return _same(again, oracle(state + 1, skip=skips[mistake.name]))

    def stages():
        return _pair(_student_trace(c, layer, args, SUBLAYERS, seed=state), theirs)

    _compare(c, out, expected, "a saída `x`", mistakes, stages, confirm, drawn=True)


def _hidden(ex, cls, dec):
    ref = reference.DecoderLayer if dec else reference.EncoderLayer
    with ex.check(hidden=True) as c:
        x, memory, _, _ = _inputs(c, dec, 2, 3, 4, 8, 9, None, None, torch.float32)
        c.case("origem da resposta")
        c.refuse_reference(cls, ref, watched(lambda: cls(8, 2, 16)(*((x, memory) if dec else (x,)))))
        _eval_and_builtins(c, cls, dec)
        S, f64 = ((3, 6, 4, 5) if dec else (None,) * 4), torch.float64
        _run_layer(c, cls, dec, (8, 2, 16, 2, 5, S[0]), False, 10, "decoder", "padding", f64, " (float64)")
        extra = f" ({'tgt_mask' if dec else 'máscara'} 3-D)"
        _run_layer(c, cls, dec, (8, 4, 8, 2, 3 if dec else 4, S[1]), True, 11, "3d", extra=extra)
        extra = " (sem passar norm_first: o padrão é True)"
        _run_layer(c, cls, dec, (8, 2, 16, 1, 2 if dec else 3, S[2]), True, 12, extra=extra, omit_nf=True)
        tgt = "causal" if dec else "padding"
        for nf in (True, False):
            _run_layer(
                c, cls, dec, (8, 2, 16, 2, 4, S[3]), nf, 13, tgt, "padding", f64, " (gradientes)", grad=True
            )
            _train_dropout(c, cls, dec, nf, seed=16)
        D, H = (10, 4) if dec else (10, 3)
        c.case(f"{ex.name}({D}, {H}, 16): d_model não divisível por n_heads")
        c.raises(ValueError, cls, D, H, 16)


@ENC_EX.visible_check
def check_encoder_layer(cls) -> None:
    """Testes visíveis de ``EncoderLayer``: Pre-LN e Post-LN contra ``nn.TransformerEncoderLayer``, e o
    *dropout* em modo de treino (o mesmo estado do gerador)."""
    with ENC_EX.check() as c:
        _run_layer(c, cls, False, (16, 4, 32, 2, 5, None), True, 0)
        _run_layer(c, cls, False, (16, 4, 32, 2, 5, None), False, 1)
        _run_layer(c, cls, False, (12, 3, 20, 3, 6, None), True, 2, "padding")
        _run_layer(c, cls, False, (8, 2, 16, 2, 4, None), False, 3, "causal")
        _train_dropout(c, cls, False, True, seed=5)


@ENC_EX.hidden_check
def check_encoder_layer_hidden(cls) -> None:
    """Testes ocultos: implementação própria, float64, máscaras 3-D e 4-D, gradientes, padrão
    norm_first=True, ValueError, dropout desligado em eval e no lugar certo em treino, atalhos proibidos."""
    _hidden(ENC_EX, cls, False)


@DEC_EX.visible_check
def check_decoder_layer(cls) -> None:
    """Testes visíveis de ``DecoderLayer`` contra ``nn.TransformerDecoderLayer`` (T ≠ S), e o *dropout* em
    modo de treino (o mesmo estado do gerador)."""
    with DEC_EX.check() as c:
        _run_layer(c, cls, True, (16, 4, 32, 2, 5, 7), True, 0)
        _run_layer(c, cls, True, (16, 4, 32, 2, 5, 7), False, 1)
        _run_layer(c, cls, True, (12, 3, 24, 3, 4, 6), True, 2, "causal", "padding")
        _run_layer(c, cls, True, (8, 2, 16, 2, 6, 3), False, 3, "causal", "padding")
        _train_dropout(c, cls, True, True, seed=5)


@DEC_EX.hidden_check
def check_decoder_layer_hidden(cls) -> None:
    """Testes ocultos: implementação própria, float64, máscara do decodificador (B, 1, T, T),
    gradientes até a memória, padrão norm_first=True, ValueError, dropout em eval e em treino."""
    _hidden(DEC_EX, cls, True)


EXERCISES = (FFN_EX, ENC_EX, DEC_EX)
