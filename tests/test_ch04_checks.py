"""Capítulo 4: as verificações aceitam camadas certas escritas de outro jeito e recusam,
com o diagnóstico certo, cada erro conhecido."""

from __future__ import annotations

import contextlib
import inspect
import io
import textwrap

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from transformer_course import interop
from transformer_course import layers as ref
from transformer_course.checks import ch04
from transformer_course.multihead import MultiHeadAttention
from transformer_course.probe import LocalStudent, judging

FFN_CHECKS = [ch04.check_feed_forward, ch04.check_feed_forward_hidden]
ENC_CHECKS = [ch04.check_encoder_layer, ch04.check_encoder_layer_hidden]
DEC_CHECKS = [ch04.check_decoder_layer, ch04.check_decoder_layer_hidden]


def run_quiet(check, cls):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        check(cls)
    return out.getvalue()


# ----------------------------------------------------------------- uma camada configurável


class Student(nn.Module):
    """FFN, codificador e decodificador de um aluno, com um "defeito" escolhido por ``bug``."""

    bug = None

    def sub_drop(self, out):
        """O *dropout* na saída de cada subcamada, antes da soma residual."""
        return out if self.bug == "no_layer_dropout" else self.drop(out)

    def act(self, h):
        return {"relu": F.relu, "none": lambda v: v, "tanh": lambda v: F.gelu(v, approximate="tanh")}.get(
            self.bug, F.gelu
        )(h)


class StudentFFN(Student):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        h = self.act(self.linear1(x))
        if self.bug == "dropout_at_end":
            return self.dropout(self.linear2(h))
        out = self.linear2(h if self.bug == "no_dropout" else self.dropout(h))
        if self.bug == "double_dropout":
            out = self.dropout(out)
        return self.act(out) if self.bug == "act_after" else out


def make_ffn(bug):
    return type(f"FFN_{bug}", (StudentFFN,), {"bug": bug})


class StudentEncoder(Student):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            d_model, n_heads, 0.0 if self.bug == "attn_no_dropout" else dropout
        )
        self.ffn = make_ffn(self.bug)(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        bug = self.bug
        pre = self.norm_first != (bug == "swap_ln")
        if bug == "mask_ignored":
            mask = None
        elif bug == "mask_inverted" and mask is not None:
            mask = ~mask
        norm2 = self.norm1 if bug == "shared_norm" else self.norm2

        def sa(h):
            out, w = self.self_attn(h, h, h, mask)
            return out, w

        steps = [("sa", sa, self.norm1), ("ff", self.ffn, norm2)]
        if bug == "ffn_first":
            steps.reverse()
        weights = None
        for name, f, norm in steps:
            keep = not (bug == f"no_res_{name}")
            if pre:
                h = norm(x)
                out = f(h)
                if name == "sa":
                    out, weights = out
                if bug == "scaled_sa" and name == "sa":
                    out = 0.5 * out  # um erro que não está na lista: a primeira diferença o localiza
                base = h if bug == "res_normed" else x
                if bug == "dropout_after_sum":
                    x = self.drop(base + out)
                    continue
                x = base + self.sub_drop(out) if keep else out
                if bug == "double_norm":
                    x = norm(x)
            else:
                out = f(x)
                if name == "sa":
                    out, weights = out
                out = self.sub_drop(out)
                if bug == "norm_out":
                    x = x + norm(out)
                else:
                    x = norm(x + out) if keep else norm(out)
        return x, weights


def make_encoder(bug):
    return type(f"Enc_{bug}", (StudentEncoder,), {"bug": bug})


class StudentDecoder(Student):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        attn_dropout = 0.0 if self.bug == "attn_no_dropout" else dropout
        self.self_attn = MultiHeadAttention(d_model, n_heads, attn_dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, attn_dropout)
        self.ffn = make_ffn(self.bug)(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        bug = self.bug
        pre = self.norm_first != (bug == "swap_ln")
        if bug == "tgt_ignored":
            tgt_mask = None
        elif bug == "tgt_inverted" and tgt_mask is not None:
            tgt_mask = ~tgt_mask
        if bug == "mem_ignored":
            memory_mask = None
        n2 = self.norm1 if bug == "shared_norm" else self.norm2
        n3 = self.norm1 if bug == "shared_norm" else self.norm3

        def sa(h):
            return self.self_attn(h, h, h, tgt_mask)

        def ca(h):
            if bug == "cross_on_self":
                return self.cross_attn(h, h, h, tgt_mask)
            mem = n2(memory) if bug == "norm_memory" else memory
            mem = (
                2.0 * mem if bug == "scaled_memory" else mem
            )  # fora da lista: a primeira diferença o localiza
            return self.cross_attn(h, mem, mem, memory_mask)

        steps = [("sa", sa, self.norm1), ("ca", ca, n2), ("ff", self.ffn, n3)]
        if bug == "cross_first":
            steps[0], steps[1] = steps[1], steps[0]
        if bug == "ffn_first":
            steps = steps[2:] + steps[:2]
        weights = {}
        for name, f, norm in steps:
            keep = not (bug == f"no_res_{name}")
            h = norm(x) if pre else x
            out = f(h)
            if isinstance(out, tuple):
                out, weights[name] = out
            out = self.sub_drop(out)
            if pre:
                x = (h if bug == "res_normed" else x) + out if keep else out
                if bug == "double_norm":
                    x = norm(x)
            elif bug == "norm_out":
                x = x + norm(out)
            else:
                x = norm(x + out) if keep else norm(out)
        if bug == "swapped_weights":
            return x, weights["ca"], weights["sa"]
        return x, weights["sa"], weights["ca"]


def make_decoder(bug):
    return type(f"Dec_{bug}", (StudentDecoder,), {"bug": bug})


# ----------------------------------------------------------------- respostas certas


class FFNSequential(nn.Module):
    """FFN com `nn.Sequential` e camadas de dropout (atributos apontando para as lineares)."""

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.net = nn.Sequential(self.linear1, nn.GELU(), nn.Dropout(dropout), self.linear2)

    def forward(self, x):
        return self.net(x)


class FFNEinsum(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.p = dropout

    def forward(self, x):
        h = torch.einsum("...d,fd->...f", x, self.linear1.weight) + self.linear1.bias
        h = F.dropout(0.5 * h * (1 + torch.erf(h / 2**0.5)), self.p, self.training)
        return torch.einsum("...f,df->...d", h, self.linear2.weight) + self.linear2.bias


class EncoderBranches(nn.Module):
    """Dois métodos explícitos, um para Pre-LN e outro para Post-LN, e a FFN Sequential."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FFNSequential(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def _pre(self, x, mask):
        h = self.norm1(x)
        a, w = self.self_attn(h, h, h, mask=mask)
        x = x + self.drop(a)
        return x + self.drop(self.ffn(self.norm2(x))), w

    def _post(self, x, mask):
        a, w = self.self_attn(x, x, x, mask=mask)
        x = self.norm1(x + self.drop(a))
        return self.norm2(x + self.drop(self.ffn(x))), w

    def forward(self, x, mask=None):
        return self._pre(x, mask) if self.norm_first else self._post(x, mask)


def copy_of(cls):
    """A classe de referência reescrita pelo aluno: o mesmo código, compilado fora do pacote (a
    verificação oculta recusa a própria referência, as subclasses e os invólucros)."""
    namespace = {**vars(ref), "__name__": "aluno"}
    exec(compile(textwrap.dedent(inspect.getsource(cls)), "<aluno>", "exec"), namespace)
    return namespace[cls.__name__]


class EncoderFloat64Inside(copy_of(ref.EncoderLayer)):
    """Faz as contas em float64 e volta ao dtype da entrada."""

    def forward(self, x, mask=None):
        dtype = x.dtype
        self.double()
        out, w = super().forward(x.double(), mask)
        self.to(dtype)
        return out.to(dtype), w.to(dtype)


class DecoderBranches(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FFNEinsum(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.p = dropout

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        def drop(v):
            return F.dropout(v, self.p, self.training)

        if self.norm_first:
            h = self.norm1(x)
            a, sw = self.self_attn(h, h, h, tgt_mask)
            x = x + drop(a)
            a, cw = self.cross_attn(self.norm2(x), memory, memory, memory_mask)
            x = x + drop(a)
            return x + drop(self.ffn(self.norm3(x))), sw, cw
        a, sw = self.self_attn(x, x, x, tgt_mask)
        x = self.norm1(x + drop(a))
        a, cw = self.cross_attn(x, memory, memory, memory_mask)
        x = self.norm2(x + drop(a))
        return self.norm3(x + drop(self.ffn(x))), sw, cw


@pytest.mark.parametrize("check", FFN_CHECKS)
@pytest.mark.parametrize("cls", [copy_of(ref.FeedForward), FFNSequential, FFNEinsum, make_ffn(None)])
def test_ffn_correct_variants_pass(check, cls):
    assert "passaram" in run_quiet(check, cls)


@pytest.mark.parametrize("check", ENC_CHECKS)
@pytest.mark.parametrize(
    "cls", [copy_of(ref.EncoderLayer), EncoderBranches, EncoderFloat64Inside, make_encoder(None)]
)
def test_encoder_correct_variants_pass(check, cls):
    assert "passaram" in run_quiet(check, cls)


@pytest.mark.parametrize("check", DEC_CHECKS)
@pytest.mark.parametrize("cls", [copy_of(ref.DecoderLayer), DecoderBranches, make_decoder(None)])
def test_decoder_correct_variants_pass(check, cls):
    assert "passaram" in run_quiet(check, cls)


# ----------------------------------------------------------------- erros conhecidos

FFN_BUGS = {
    "relu": "ReLU em vez de GELU",
    "none": "sem ativação",
    "tanh": "aproximada por tanh",
    "act_after": "também depois de `linear2`",
}

ENC_BUGS = {
    "relu": "ReLU em vez de GELU",
    "none": "sem ativação",
    "tanh": "aproximada por tanh",
    "swap_ln": r"Post-LN \(LayerNorm depois da soma residual\), mas `norm_first=True`",
    "double_norm": "também DEPOIS da soma residual",
    "res_normed": "resíduo somado à entrada JÁ normalizada",
    "norm_out": r"LayerNorm aplicada só à saída da subcamada, antes da soma",
    "no_res_sa": "SEM a conexão residual na autoatenção",
    "no_res_ff": "SEM a conexão residual na FFN",
    "shared_norm": "única LayerNorm",
    "mask_ignored": "atenção sem máscara",
    "mask_inverted": "máscara invertida",
    "ffn_first": "a FFN antes da atenção",
}

DEC_BUGS = {
    **{k: v for k, v in ENC_BUGS.items() if k not in ("mask_ignored", "mask_inverted", "no_res_sa")},
    "no_res_sa": "SEM a conexão residual na autoatenção",
    "no_res_ca": "SEM a conexão residual na atenção cruzada",
    "cross_on_self": "entrada do decodificador em vez da memória",
    "norm_memory": "memória normalizada",
    "cross_first": "atenção cruzada antes da autoatenção",
    "ffn_first": "a FFN antes das atenções|a FFN antes da atenção",
    "tgt_ignored": "sem `tgt_mask`",
    "tgt_inverted": "`tgt_mask` invertida",
    "mem_ignored": "sem `memory_mask`",
    "swapped_weights": "pesos da atenção cruzada no lugar",
}


@pytest.mark.parametrize("bug", list(FFN_BUGS))
def test_ffn_mistakes_diagnosed(bug):
    with pytest.raises(AssertionError, match=FFN_BUGS[bug]):
        run_quiet(ch04.check_feed_forward, make_ffn(bug))


FFN_HIDDEN_BUGS = {
    "double_dropout": "dois sorteios de \\*dropout\\* seguidos",
    "dropout_at_end": "no fim, depois de `linear2`",
    "no_dropout": "sem \\*dropout\\* em modo de treino",
}


@pytest.mark.parametrize("check", FFN_CHECKS)
@pytest.mark.parametrize("bug", list(FFN_HIDDEN_BUGS))
def test_ffn_train_dropout_mistakes_diagnosed(bug, check):
    """Issue 31: o caso em modo de treino está também nos testes visíveis (o aluno sozinho o vê)."""
    with pytest.raises(AssertionError, match=f"modo de treino(.|\n)*{FFN_HIDDEN_BUGS[bug]}"):
        run_quiet(check, make_ffn(bug))


LAYER_TRAIN_BUGS = {
    "no_layer_dropout": "sem \\*dropout\\* na saída das subcamadas",
    "attn_no_dropout": "atenção sem \\*dropout\\* nos pesos",
    "dropout_at_end": "primeira diferença aparece em `ffn`, na saída",
    "no_dropout": "FFN sem \\*dropout\\* entre a GELU e `linear2`",
}


@pytest.mark.parametrize("make,check", [(make_encoder, ENC_CHECKS), (make_decoder, DEC_CHECKS)])
@pytest.mark.parametrize("bug", list(LAYER_TRAIN_BUGS))
def test_layer_train_dropout_mistakes_diagnosed(make, check, bug):
    """Em modo de treino, com dropout > 0 e a mesma semente, o dropout fora do lugar é acusado, já nos
    testes visíveis (issue 31) e também nos ocultos."""
    for each in check:
        with pytest.raises(
            AssertionError, match=f"dropout = 0.3, modo de treino(.|\\n)*({LAYER_TRAIN_BUGS[bug]})"
        ):
            run_quiet(each, make(bug))


def test_dropout_after_the_residual_sum_is_located():
    """Novo: `x = dropout(x + subcamada(LN(x)))` não é um erro da lista; a mensagem diz onde a saída
    da camada do aluno começa a diferir (a entrada da `norm2`, logo depois da primeira soma)."""
    for check in ENC_CHECKS:
        with pytest.raises(AssertionError, match="primeira diferença aparece em `norm2`, na entrada"):
            run_quiet(check, make_encoder("dropout_after_sum"))


@pytest.mark.parametrize(
    "make,bug,where",
    [
        (make_encoder, "scaled_sa", "`norm2`, na entrada"),
        (make_decoder, "scaled_memory", "`cross_attn`, na saída"),
    ],
)
def test_unknown_mistake_says_where_the_first_difference_is(make, bug, where):
    """Novo: um erro fora da lista é localizado pelos ganchos nas subcamadas."""
    check = ch04.check_encoder_layer if make is make_encoder else ch04.check_decoder_layer
    with pytest.raises(AssertionError, match=f"A primeira diferença aparece em {where}"):
        run_quiet(check, make(bug))


def test_ffn_unknown_mistake_located():
    """Novo: na FFN, a primeira diferença aparece na entrada de `linear2` (depois da ativação)."""

    class Scaled(StudentFFN):
        def forward(self, x):
            return self.linear2(self.dropout(2.0 * F.gelu(self.linear1(x))))

    with pytest.raises(AssertionError, match="primeira diferença aparece em `linear2`, na entrada"):
        run_quiet(ch04.check_feed_forward, Scaled)


@pytest.mark.parametrize("bug", list(ENC_BUGS))
def test_encoder_mistakes_diagnosed(bug):
    with pytest.raises(AssertionError, match=ENC_BUGS[bug]):
        run_quiet(ch04.check_encoder_layer, make_encoder(bug))


@pytest.mark.parametrize("bug", list(DEC_BUGS))
def test_decoder_mistakes_diagnosed(bug):
    with pytest.raises(AssertionError, match=DEC_BUGS[bug]):
        run_quiet(ch04.check_decoder_layer, make_decoder(bug))


@pytest.mark.parametrize(
    "make,check", [(make_encoder, ch04.check_encoder_layer), (make_decoder, ch04.check_decoder_layer)]
)
def test_one_norm_module_under_several_names(make, check):
    """`self.norm1 = self.norm2 = nn.LayerNorm(...)`: um só módulo, com os pesos copiados por último."""

    class Aliased(make(None)):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.norm2 = self.norm1
            if hasattr(self, "norm3"):
                self.norm3 = self.norm1

    with pytest.raises(AssertionError, match="única LayerNorm"):
        run_quiet(check, Aliased)


def test_pre_ln_when_post_ln_asked_is_named():
    """Com norm_first=False, uma camada que sempre faz Pre-LN recebe o diagnóstico inverso."""

    class AlwaysPre(StudentEncoder):
        def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
            super().__init__(d_model, n_heads, d_ff, dropout, True)

    with pytest.raises(AssertionError, match="`norm_first=False` pede Post-LN"):
        run_quiet(ch04.check_encoder_layer, AlwaysPre)


def test_unused_norm_caught_by_hidden_gradient_check():
    """Camada que nunca usa a norm2 em Post-LN (usa a norm1 duas vezes): erro nomeado no visível."""
    with pytest.raises(AssertionError, match="única LayerNorm"):
        run_quiet(ch04.check_encoder_layer_hidden, make_encoder("shared_norm"))


def test_dropout_in_eval_mode_rejected():
    class AlwaysDropout(StudentEncoder):
        """`F.dropout(x, p)` sem `training=self.training`: continua sorteando em modo eval."""

        def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
            super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
            self.p = dropout

        def forward(self, x, mask=None):
            out, w = super().forward(x, mask)
            return F.dropout(out, self.p), w

    with pytest.raises(AssertionError, match="dropout = 0.3, modo eval"):
        run_quiet(ch04.check_encoder_layer_hidden, AlwaysDropout)


def test_in_place_residual_rejected():
    class InPlace(ref.EncoderLayer):
        def forward(self, x, mask=None):
            h = self.norm1(x)
            out, w = self.self_attn(h, h, h, mask)
            x += out
            x += self.ffn(self.norm2(x))
            return x, w

    with pytest.raises(AssertionError, match="foi modificada"):
        run_quiet(ch04.check_encoder_layer, InPlace)


def test_extra_unsqueeze_of_the_mask_gets_a_hint():
    """O erro do texto-semente: (B, 1, 1, T) ganha mais um eixo e vira 5-D."""

    class FiveD(ref.EncoderLayer):
        def forward(self, x, mask=None):
            return super().forward(x, None if mask is None else mask.unsqueeze(1))

    with pytest.raises(AssertionError, match="5 eixos"):
        run_quiet(ch04.check_encoder_layer, FiveD)


def test_missing_attribute_named():
    class NoFFN(StudentEncoder):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.feed_forward = self.ffn
            del self.ffn

        def forward(self, x, mask=None):
            return x, None

    with pytest.raises(AssertionError, match="`EncoderLayer.ffn`"):
        run_quiet(ch04.check_encoder_layer, NoFFN)


def test_torch_builtin_forbidden_in_hidden_check():
    class UsesTorch(nn.Module):
        def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
            super().__init__()
            self.inner = copy_of(ref.EncoderLayer)(d_model, n_heads, d_ff, dropout, norm_first)
            self.self_attn, self.ffn = self.inner.self_attn, self.inner.ffn
            self.norm1, self.norm2 = self.inner.norm1, self.inner.norm2
            self.spy = nn.MultiheadAttention(d_model, n_heads, batch_first=True)

        def forward(self, x, mask=None):
            return self.inner(x, mask)

    with pytest.raises(AssertionError, match="do PyTorch"):
        run_quiet(ch04.check_encoder_layer_hidden, UsesTorch)


@pytest.mark.parametrize(
    "check,cls",
    [
        (ch04.check_feed_forward_hidden, ref.FeedForward),
        (ch04.check_encoder_layer_hidden, ref.EncoderLayer),
        (ch04.check_decoder_layer_hidden, ref.DecoderLayer),
    ],
)
def test_reference_itself_rejected_in_hidden(check, cls):
    with pytest.raises(AssertionError, match="implementação de referência"):
        run_quiet(check, cls)


@pytest.mark.parametrize("check", FFN_CHECKS + ENC_CHECKS + DEC_CHECKS)
def test_stub_says_not_implemented(check):
    class Stub(nn.Module):
        def __init__(self, *args, **kwargs):
            raise NotImplementedError()

    with pytest.raises(AssertionError, match="não implementado"):
        run_quiet(check, Stub)


def test_checks_are_silent(capfd):
    # Tempo não se testa com assert (oscila numa máquina ocupada): `make bench` mede.
    for check, cls in [
        (ch04.check_feed_forward, copy_of(ref.FeedForward)),
        (ch04.check_encoder_layer_hidden, copy_of(ref.EncoderLayer)),
        (ch04.check_decoder_layer_hidden, copy_of(ref.DecoderLayer)),
    ]:
        run_quiet(check, cls)
    assert capfd.readouterr().err == ""


# ----------------------------------------------------------------- referência = PyTorch


@pytest.mark.parametrize("norm_first", [True, False])
def test_reference_layers_equal_pytorch(norm_first):
    torch.manual_seed(0)
    enc_t = nn.TransformerEncoderLayer(16, 4, 32, 0.0, "gelu", batch_first=True, norm_first=norm_first)
    dec_t = nn.TransformerDecoderLayer(16, 4, 32, 0.0, "gelu", batch_first=True, norm_first=norm_first)
    enc = interop.load_encoder_layer_from_torch(ref.EncoderLayer(16, 4, 32, norm_first=norm_first), enc_t)
    dec = interop.load_decoder_layer_from_torch(ref.DecoderLayer(16, 4, 32, norm_first=norm_first), dec_t)
    x, mem = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    torch.testing.assert_close(enc(x, causal)[0], enc_t(x, src_mask=~causal))
    torch.testing.assert_close(dec(x, mem, causal)[0], dec_t(x, mem, tgt_mask=~causal))


def test_variant_builder_matches_pytorch():
    """O montador de variantes das verificações, sem erro, é a própria camada do PyTorch."""
    for norm_first in (True, False):
        t = ch04._torch_layer(True, 8, 2, 16, norm_first, torch.Generator().manual_seed(0))
        x, mem = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
        out, _, _ = ch04._variant(t, x, mem, None, None, norm_first)
        torch.testing.assert_close(out, t(x, mem))
        te = ch04._torch_layer(False, 8, 2, 16, norm_first, torch.Generator().manual_seed(0))
        torch.testing.assert_close(ch04._variant(te, x, None, None, None, norm_first)[0], te(x))


def test_classifier_ignores_padding():
    torch.manual_seed(0)
    model = ref.TransformerClassifier(
        50, 3, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=12, dropout=0.0
    ).eval()
    ids = torch.randint(1, 50, (2, 6))
    padded = torch.cat([ids, torch.zeros(2, 4, dtype=torch.long)], dim=1)
    logits, weights = model(ids)
    logits_p, weights_p = model(padded)
    assert logits.shape == (2, 3) and len(weights) == 2 and weights_p[0].shape == (2, 2, 10, 10)
    torch.testing.assert_close(logits, logits_p, rtol=1e-5, atol=1e-5)
    all_pad = model(torch.zeros(1, 5, dtype=torch.long))[0]
    assert torch.isfinite(all_pad).all()
    with pytest.raises(ValueError, match="max_len"):
        model(torch.ones(1, 13, dtype=torch.long))


def test_encoder_stack_shapes_and_causal_option():
    enc = ref.TransformerEncoder(30, 16, 4, 3, 32, max_len=10)
    ids = torch.randint(1, 30, (2, 7))
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    x, weights = enc(ids, causal)
    assert x.shape == (2, 7, 16) and len(weights) == 3
    assert torch.all(weights[0].masked_select(~causal) == 0)


@pytest.mark.parametrize("offset", [1, 987_654_321])
def test_hidden_checks_accept_correct_variants_with_other_seeds(offset):
    """Na correção, os casos ocultos mudam a cada entrega (as sementes deslocadas): as camadas certas
    escritas de outro jeito passam com qualquer sorteio (o relatório da conversão rodou 20)."""
    with judging(LocalStudent(), offset, []):
        for check, cls in [
            (ch04.check_feed_forward_hidden, FFNEinsum),
            (ch04.check_feed_forward_hidden, FFNSequential),
            (ch04.check_encoder_layer_hidden, EncoderBranches),
            (ch04.check_encoder_layer_hidden, EncoderFloat64Inside),
            (ch04.check_decoder_layer_hidden, DecoderBranches),
        ]:
            check(cls)
