"""Capítulo 7: cada erro conhecido é recusado com o seu diagnóstico; variantes corretas passam."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from transformer_course.checks import ch07 as checks
from transformer_course.costs import attention_cost, kaplan_loss
from transformer_course.generation import generate
from transformer_course.instructor.judge import seed_offset
from transformer_course.probe import LocalStudent, judging

# ---------------------------------------------------------------- generate: variantes


def _gen(
    logit_fn=None,
    *,
    temp="div",
    topk="largest",
    rng="gen",
    crop="last",
    zero="argmax",
    position=-1,
    keep_prompt=True,
    axis=-1,
    context="all",
):
    """Fábrica de implementações de ``generate`` com um erro escolhido."""

    def fn(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
        if max_new_tokens < 0 or temperature < 0:
            raise ValueError("argumento inválido")
        ids = prompt_ids
        max_len = getattr(model, "max_len", None)
        for _ in range(max_new_tokens):
            ctx = ids if context == "all" else ids[:, -1:]
            if max_len is not None and crop == "last":
                ctx = ids[:, -max_len:]
            elif max_len is not None and crop == "first":
                ctx = ids[:, :max_len]
            logits = model(ctx)[:, position, :]
            if temperature == 0 and zero == "argmax":
                nxt = logits.argmax(-1, keepdim=True)
            elif temperature == 0 and zero == "batch_axis":
                nxt = logits.argmax(0, keepdim=True)
            elif temperature == 0 and zero == "broken":
                nxt = logits.argmax(-1, keepdim=True)[:, :, 0]
            else:
                if temp == "div":
                    logits = logits / temperature
                elif temp == "mul":
                    logits = logits * temperature
                if top_k is not None:
                    k = min(top_k, logits.size(-1))
                    kth = logits.topk(k, largest=(topk != "smallest")).values[:, -1:]
                    if topk == "plus_one":  # o índice do k-ésimo num tensor ordenado, contado a partir de 1
                        kth = logits.sort(-1, descending=True).values[
                            :, min(top_k, logits.size(-1) - 1), None
                        ]
                    if topk in ("largest", "plus_one"):
                        logits = logits.masked_fill(logits < kth, float("-inf"))
                    elif topk == "smallest":
                        logits = logits.masked_fill(logits > kth, float("-inf"))
                    elif topk == "minus_one":
                        logits = logits.masked_fill(logits <= kth, float("-inf"))
                probs = logits.softmax(axis)
                if temp == "after":
                    probs = probs / temperature
                g = generator if rng == "gen" else None
                nxt = torch.multinomial(probs, 1, generator=g)
            ids = torch.cat([ids, nxt], 1)
        return ids if keep_prompt else ids[:, prompt_ids.size(1) :]

    return fn


def _gen_categorical(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    """Variante correta escrita de outro jeito: laço por linha, where, cumsum + rand do gerador."""
    if max_new_tokens < 0 or temperature < 0:
        raise ValueError("argumento inválido")
    out = prompt_ids.clone()
    limit = getattr(model, "max_len", out.size(1) + max_new_tokens)
    for _ in range(max_new_tokens):
        logits = model(out[:, -limit:])[:, -1].double()
        if temperature == 0:
            nxt = torch.argmax(logits, dim=-1)
        else:
            scaled = logits / temperature
            if top_k:
                vals, _ = torch.sort(scaled, descending=True)
                cut = vals[:, min(top_k, vals.size(1)) - 1 : min(top_k, vals.size(1))]
                scaled = torch.where(scaled >= cut, scaled, torch.full_like(scaled, -1e30))
            cdf = F.softmax(scaled, -1).cumsum(-1)
            u = torch.rand(out.size(0), 1, generator=generator, dtype=cdf.dtype)
            nxt = (cdf < u).sum(-1).clamp(max=cdf.size(1) - 1)
        out = torch.cat([out, nxt[:, None]], 1)
    return out


def _gen_divzero(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    ids = prompt_ids
    for _ in range(max_new_tokens):
        probs = (model(ids)[:, -1] / temperature).softmax(-1)
        ids = torch.cat([ids, torch.multinomial(probs, 1, generator=generator)], 1)
    return ids


def _not_implemented(*args, **kwargs):
    raise NotImplementedError()


CORRECT_GENERATE = [generate, _gen(), _gen_categorical]


@pytest.mark.parametrize("fn", CORRECT_GENERATE)
def test_generate_correct_variants_pass(fn, capsys):
    checks.check_generate(fn)
    checks.check_generate_hidden(fn) if fn is not generate else None
    assert "verificações passaram" in capsys.readouterr().out


def test_generate_hidden_rejects_reference():
    with pytest.raises(AssertionError, match="implementação de referência"):
        checks.check_generate_hidden(generate)


@pytest.mark.parametrize(
    "fn, diagnosis",
    [
        (_gen(temp="ignored"), "temperatura ignorada"),
        (_gen(temp="after"), "DEPOIS do softmax"),
        (_gen(temp="mul"), "MULTIPLICADOS"),
        (_gen(topk="smallest"), "k MENORES"),
        (_gen(topk="ignored"), "top-k não foi aplicado"),
        (_gen(rng="global"), "gerador GLOBAL"),
        (_gen(crop="none"), "não foi cortado"),
        (_gen(crop="first"), "PRIMEIROS max_len"),
        (_gen(position=0), "PRIMEIRA posição"),
        (_gen(keep_prompt=False), "sem o prompt|só os tokens novos"),
        (_gen_divzero, "divididos por zero"),
        (_not_implemented, "não implementado"),
    ],
)
def test_generate_mistakes_are_named(fn, diagnosis):
    with pytest.raises(AssertionError, match=diagnosis):
        checks.check_generate(fn)


def test_generate_names_softmax_over_the_batch_axis():
    """`softmax(dim=0)` (o eixo do lote) deixa todo token igualmente provável: a mensagem diz o eixo."""
    with pytest.raises(AssertionError, match=r"eixo do LOTE \(`dim=0`\)"):
        checks.check_generate(_gen(axis=0))


def test_generate_names_a_context_shorter_than_the_sequence():
    """Passar ao modelo só o último token engana um modelo de bigramas (os tokens saem certos), mas não
    um GPT: a verificação conta o contexto que o modelo recebeu."""
    with pytest.raises(
        AssertionError, match=r"(?s)deveria ver 7 tokens no último passo; viu 1.*sequência inteira"
    ):
        checks.check_generate(_gen(context="last_token"))


def test_generate_hidden_checks_value_errors():
    def no_validation(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
        return _gen()(model, prompt_ids, max(max_new_tokens, 0), abs(temperature), top_k, generator)

    checks.check_generate(no_validation)
    with pytest.raises(AssertionError, match="ValueError"):
        checks.check_generate_hidden(no_validation)


def test_generate_hidden_names_top_k_over_vocabulary():
    """`torch.topk(logits, top_k)` sem `min(top_k, V)` passa nos visíveis e quebra com top_k > V:
    a mensagem oculta diz por quê."""

    def topk_unclamped(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
        if max_new_tokens < 0 or temperature < 0:
            raise ValueError("argumento inválido")
        ids = prompt_ids
        max_len = getattr(model, "max_len", None)
        for _ in range(max_new_tokens):
            logits = model(ids if max_len is None else ids[:, -max_len:])[:, -1, :]
            if temperature == 0:
                nxt = logits.argmax(-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = torch.topk(logits, top_k).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                nxt = torch.multinomial(logits.softmax(-1), 1, generator=generator)
            ids = torch.cat([ids, nxt], 1)
        return ids

    checks.check_generate(topk_unclamped)
    with pytest.raises(AssertionError, match=r"(?s)top_k > vocabulário.*min\(top_k, logits.size\(-1\)\)"):
        checks.check_generate_hidden(topk_unclamped)


def test_generate_names_top_k_off_by_one():
    """Um top-k com um token a mais (limiar no (k+1)-ésimo) ou a menos (`<=`) é nomeado pelo que as
    frequências mostram, e não como "top-k não aplicado" (issue 31)."""
    with pytest.raises(AssertionError, match=r"(?s)sorteou também.*k \+ 1 tokens \(um a mais\)") as info:
        checks.check_generate(_gen(topk="plus_one"))
    assert "não foi aplicado" not in str(info.value)
    with pytest.raises(AssertionError, match=r"(?s)restrita aos k maiores.*k − 1 tokens \(um a menos\)"):
        checks.check_generate(_gen(topk="minus_one"))


def test_generate_error_hints_only_when_the_mistake_reproduces_the_error():
    """Uma exceção na geração gulosa só ganha diagnóstico quando o erro conhecido levanta a mesma
    exceção: logits / 0, o contexto sem corte, o argmax no eixo do lote; qualquer outra, nenhum."""
    with pytest.raises(AssertionError, match=r"(?s)Sizes of tensors.*`argmax` no eixo do LOTE"):
        checks.check_generate(_gen(zero="batch_axis"))
    with pytest.raises(AssertionError, match="IndexError") as info:
        checks.check_generate(_gen(zero="broken"))
    assert "Diagnóstico provável" not in str(info.value)

    def crop_then_fail(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
        if getattr(model, "max_len", None) is not None:
            raise RuntimeError("falhei por outro motivo")
        return _gen()(model, prompt_ids, max_new_tokens, temperature, top_k, generator)

    with pytest.raises(AssertionError, match="falhei por outro motivo") as info:
        checks.check_generate(crop_then_fail)
    assert "Diagnóstico provável" not in str(info.value)


def test_generate_hidden_top_k_hint_only_for_the_topk_error():
    """`top_k` > V com outro erro (um índice fora do tensor ordenado) não recebe a dica do `torch.topk`."""

    def sort_unclamped(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
        if top_k is not None and top_k > 8:
            logits = model(prompt_ids)[:, -1]
            logits.sort(-1, descending=True).values[:, top_k - 1]
        return _gen()(model, prompt_ids, max_new_tokens, temperature, top_k, generator)

    checks.check_generate(sort_unclamped)
    with pytest.raises(AssertionError, match=r"(?s)top_k > vocabulário.*IndexError") as info:
        checks.check_generate_hidden(sort_unclamped)
    assert "Diagnóstico provável" not in str(info.value)


@pytest.mark.parametrize(
    "offset", [seed_offset(b"robustez", f"aluno-{i}", "07_familias", "oculto") for i in range(8)]
)
def test_hidden_checks_accept_correct_variants_with_any_submission_seed(offset):
    """Nos ocultos, as sementes mudam por entrega: as variantes corretas passam com qualquer uma."""
    variants = [(checks.check_generate_hidden, fn) for fn in CORRECT_GENERATE[1:]]
    variants += [(checks.check_kaplan_loss_hidden, _kaplan(lambda n: (8.8e13 / n) ** 0.076))]
    variants += [
        (checks.check_attention_cost_hidden, _cost(lambda n, d: 4 * n * n * d, lambda n, d: 4 * n * n))
    ]
    with judging(LocalStudent(), offset, []) as _:
        for check, fn in variants:
            check(fn)
        for key in RIGHT:
            checks.check_family_quiz_hidden(RIGHT, **{key: RIGHT[key]})


def test_generate_restores_global_rng():
    state = torch.get_rng_state()
    with pytest.raises(AssertionError):
        checks.check_generate(_gen(rng="global"))
    assert torch.equal(state, torch.get_rng_state())


# ---------------------------------------------------------------- kaplan_loss


def _kaplan(expr):
    def fn(n_params):
        if n_params <= 0:
            raise ValueError("n_params deve ser positivo")
        return expr(n_params)

    return fn


def test_kaplan_reference_matches_plain_formula():
    for n in (1e3, 1e6, 1.5e8, 1e12):
        assert math.isclose(kaplan_loss(n), (8.8e13 / n) ** 0.076, rel_tol=1e-12)


@pytest.mark.parametrize(
    "fn",
    [
        _kaplan(lambda n: (8.8e13 / n) ** 0.076),
        _kaplan(lambda n: math.exp(0.076 * (math.log(8.8e13) - math.log(n)))),
        _kaplan(lambda n: torch.tensor(8.8e13 / n, dtype=torch.float64).pow(0.076).item()),
    ],
)
def test_kaplan_correct_variants_pass(fn):
    checks.check_kaplan_loss(fn)
    checks.check_kaplan_loss_hidden(fn)


@pytest.mark.parametrize(
    "fn, diagnosis",
    [
        (_kaplan(lambda n: (n / 8.8e13) ** 0.076), "invertida"),
        (_kaplan(lambda n: (8.8e13 / n) ** 0.76), "dez vezes maior"),
        (_kaplan(lambda n: (8.8e13 / n) ** 0.0076), "dez vezes menor"),
        (_kaplan(lambda n: 10 * n**-0.076), "texto-semente"),
        (_kaplan(lambda n: (8.8e12 / n) ** 0.076), "N_c dez vezes menor"),
        (_not_implemented, "não implementado"),
    ],
)
def test_kaplan_mistakes_are_named(fn, diagnosis):
    with pytest.raises(AssertionError, match=diagnosis):
        checks.check_kaplan_loss(fn)


def test_kaplan_tensor_is_not_a_python_number():
    """O enunciado pede um `float`: um tensor de um elemento é recusado, com a dica do `.item()`."""
    tensor_answer = _kaplan(lambda n: torch.tensor(8.8e13 / n, dtype=torch.float64).pow(0.076))
    with pytest.raises(AssertionError, match=r"(?s)número do Python.*veio tensor.*\.item\(\)"):
        checks.check_kaplan_loss(tensor_answer)


def test_attention_cost_tensor_is_not_a_python_number():
    fn = _cost(lambda n, d: torch.tensor(4 * n * n * d), lambda n, d: 4 * n * n)
    with pytest.raises(AssertionError, match=r"(?s)`flops`.*\.item\(\)"):
        checks.check_attention_cost(fn)


def test_kaplan_hidden_refuses_the_reference_in_disguise():
    with pytest.raises(AssertionError, match="origem da resposta"):
        checks.check_kaplan_loss_hidden(lambda n: kaplan_loss(n))


def test_quiz_hidden_answers_come_from_the_cell():
    """O pacote não guarda as respostas: a célula oculta as passa; uma resposta esperada inválida é erro
    do instrutor (ValueError), não do aluno."""
    checks.check_family_quiz_hidden(RIGHT, c="decoder")
    with pytest.raises(AssertionError, match=r"Item 'c': a família 'decoder' não é"):
        checks.check_family_quiz_hidden(RIGHT, c="encoder")
    with pytest.raises(ValueError):
        checks.check_family_quiz_hidden(RIGHT, z="encoder")
    with pytest.raises(ValueError):
        checks.check_family_quiz_hidden(RIGHT)


def test_kaplan_hidden_requires_value_error():
    with pytest.raises(AssertionError, match="ValueError"):
        checks.check_kaplan_loss_hidden(lambda n: (8.8e13 / abs(n or 1)) ** 0.076)


# ---------------------------------------------------------------- attention_cost


def _cost(flops, nbytes):
    def fn(seq_len, d_model):
        if seq_len <= 0 or d_model <= 0:
            raise ValueError("tamanhos devem ser positivos")
        return {"flops": flops(seq_len, d_model), "score_bytes": nbytes(seq_len, d_model)}

    return fn


def test_attention_cost_reference():
    assert attention_cost(10, 8) == {"flops": 4 * 100 * 8, "score_bytes": 400}


@pytest.mark.parametrize(
    "fn",
    [
        _cost(lambda n, d: 2 * n * n * d * 2, lambda n, d: n * n * torch.finfo(torch.float32).bits // 8),
        _cost(lambda n, d: float(4 * n**2 * d), lambda n, d: torch.zeros(n, n).element_size() * n * n),
    ],
)
def test_attention_cost_correct_variants_pass(fn):
    checks.check_attention_cost(fn)
    checks.check_attention_cost_hidden(fn)


@pytest.mark.parametrize(
    "fn, diagnosis",
    [
        (_cost(lambda n, d: 2 * n * n * d, lambda n, d: 4 * n * n), "faltou o produto pesos·V"),
        (_cost(lambda n, d: n * n * d, lambda n, d: 4 * n * n), "1 FLOP"),
        (_cost(lambda n, d: 4 * n * n * d, lambda n, d: 8 * n * n), "float64"),
        (_cost(lambda n, d: 4 * n * n * d, lambda n, d: n * n), "número de elementos"),
        (_cost(lambda n, d: 4 * n * d * d, lambda n, d: 4 * n * n), "trocados"),
        (_not_implemented, "não implementado"),
    ],
)
def test_attention_cost_mistakes_are_named(fn, diagnosis):
    with pytest.raises(AssertionError, match=diagnosis):
        checks.check_attention_cost(fn)


# ---------------------------------------------------------------- questionário

RIGHT = {"a": "encoder", "b": "encoder-decoder", "c": "decoder", "d": "encoder", "e": "encoder-decoder"}


def test_quiz_right_answers_and_aliases_pass():
    checks.check_family_quiz(RIGHT)
    checks.check_family_quiz_hidden(RIGHT, **RIGHT)
    aliases = {
        "a": "Encoder-only",
        "b": "codificador-decodificador",
        "c": "decoder only",
        "d": "ENCODER",
        "e": "encoder_decoder",
    }
    checks.check_family_quiz_hidden(aliases, **RIGHT)


def test_quiz_wrong_answer_named_without_revealing():
    wrong = dict(RIGHT, c="encoder")
    checks.check_family_quiz(wrong)  # o teste visível só olha o formato
    with pytest.raises(AssertionError, match=r"\['c'\]"):
        checks.check_family_quiz_hidden(wrong, **RIGHT)


def test_quiz_gives_credit_per_item():
    """Cada item tem a sua célula oculta: um item errado (ou em branco) não derruba os outros."""
    wrong = dict(RIGHT, e="encoder", c=...)
    for key in "abd":
        checks.check_family_quiz_hidden(wrong, **{key: RIGHT[key]})
        checks.check_family_quiz_hidden(lambda: dict(wrong), **{key: RIGHT[key]})
    with pytest.raises(AssertionError, match=r"Item 'e': a família 'encoder' não é"):
        checks.check_family_quiz_hidden(wrong, e=RIGHT["e"])
    with pytest.raises(AssertionError, match=r"não respondeu o item 'c'"):
        checks.check_family_quiz_hidden(wrong, c=RIGHT["c"])
    with pytest.raises(AssertionError, match="não é uma das famílias"):
        checks.check_family_quiz_hidden(dict(RIGHT, a="bert"), a=RIGHT["a"])
    for key in RIGHT:
        checks.check_family_quiz_hidden(RIGHT, **{key: RIGHT[key]})


@pytest.mark.parametrize(
    "answers, diagnosis",
    [
        ({"a": ..., "b": ..., "c": ..., "d": ..., "e": ...}, "não respondeu"),
        ({"a": "encoder"}, "Faltam"),
        (dict(RIGHT, a="bert"), "não é uma das famílias"),
    ],
)
def test_quiz_format(answers, diagnosis):
    with pytest.raises(AssertionError, match=diagnosis):
        checks.check_family_quiz(answers)


def test_checks_run_on_the_reference():
    # Tempo não se testa com assert (oscila numa máquina ocupada): `make bench` mede.
    for fn, check in ((_gen(), checks.check_generate), (_gen(), checks.check_generate_hidden)):
        check(fn)
