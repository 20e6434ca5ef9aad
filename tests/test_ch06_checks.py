"""Verificações do capítulo 6: cada erro conhecido é recusado com o seu diagnóstico, e variantes
corretas escritas de outro jeito passam (visíveis e ocultas).

As implementações corretas "do aluno" são as soluções do próprio notebook (lidas de
``notebooks/06_treino_warmup.py``), o que também prova que elas concordam com o pacote.
"""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from transformer_course import training
from transformer_course.checks import ch06
from transformer_course.probe import LocalStudent, judging

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "06_treino_warmup.py"


# ---------------------------------------------------------------- as soluções do notebook


def _notebook_solutions() -> dict:
    """Executa só as células de solução do notebook e devolve as quatro funções."""
    import jupytext

    nb = jupytext.read(NOTEBOOK)
    namespace = {"torch": torch, "nn": nn, "LambdaLR": LambdaLR, "math": math}
    names = ("noam_lr", "make_warmup_scheduler", "train_epoch", "evaluate")
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in names:
            exec(compile(cell.source, f"<célula {cell.metadata['nbgrader']['grade_id']}>", "exec"), namespace)
    return {name: namespace[name] for name in names}


SOL = _notebook_solutions()


def _stub(*args, **kwargs):
    raise NotImplementedError()


def _reject(check, fn, match):
    with pytest.raises(AssertionError, match=match):
        check(fn)


# ================================================================ noam_lr


def noam_branches(step, d_model, warmup_steps, factor=1.0):
    if d_model <= 0 or warmup_steps <= 0 or step < 0:
        raise ValueError("tamanhos inválidos")
    step = 1 if step == 0 else step
    if step < warmup_steps:
        return factor * step * warmup_steps**-1.5 / math.sqrt(d_model)
    return factor / math.sqrt(d_model * step)


def noam_numpy(step, d_model, warmup_steps, factor=1.0):
    if min(d_model, warmup_steps) < 1 or step < 0:
        raise ValueError("d_model e warmup_steps precisam ser positivos, e step não pode ser negativo")
    s = np.float64(max(step, 1))
    return np.float64(factor) * np.minimum(s**-0.5, s * warmup_steps**-1.5) / np.sqrt(d_model)


@pytest.mark.parametrize(
    "fn", [SOL["noam_lr"], noam_branches, noam_numpy], ids=["notebook", "ramos", "numpy"]
)
def test_noam_correct_variants_pass(fn, capsys):
    ch06.check_noam_lr(fn)
    ch06.check_noam_lr_hidden(fn)
    assert capsys.readouterr().err == ""


def _noam_wrong(kind):
    def fn(step, d_model, warmup_steps, factor=1.0):
        if d_model <= 0 or warmup_steps <= 0:
            raise ValueError("inválido")
        s = step if kind == "crash0" else max(step, 1)
        if kind == "zero_at_0":
            return 0.0 if step == 0 else factor * d_model**-0.5 * min(s**-0.5, s * warmup_steps**-1.5)
        if kind == "no_dmodel":
            return factor * min(s**-0.5, s * warmup_steps**-1.5)
        if kind == "max":
            return factor * d_model**-0.5 * max(s**-0.5, s * warmup_steps**-1.5)
        if kind == "exp":
            return factor * d_model**-0.5 * min(s**-0.5, s * warmup_steps**-0.5)
        if kind == "plus1":
            s = step + 1
        if kind == "no_factor":
            factor = 1.0
        if kind == "tensor":
            return torch.tensor(factor * d_model**-0.5 * min(s**-0.5, s * warmup_steps**-1.5))
        return factor * d_model**-0.5 * min(s**-0.5, s * warmup_steps**-1.5)

    return fn


@pytest.mark.parametrize(
    ("kind", "match"),
    [
        ("crash0", "divisão por zero"),
        ("zero_at_0", "passo 0 conta como passo 1"),
        ("no_dmodel", "SEM o fator d_model"),
        ("max", "max no lugar de min"),
        ("exp", "expoente errado no aquecimento"),
        ("plus1", "deslocada um passo"),
        ("no_factor", "`factor` ignorado"),
        ("tensor", "tensor"),
    ],
)
def test_noam_mistakes_rejected(kind, match):
    _reject(ch06.check_noam_lr, _noam_wrong(kind), match)


def test_noam_without_value_error_rejected_hidden():
    def fn(step, d_model, warmup_steps, factor=1.0):
        s = max(step, 1)
        return (
            factor * abs(d_model) ** -0.5 * min(s**-0.5, s * max(warmup_steps, 1) ** -1.5) if d_model else 0.0
        )

    ch06.check_noam_lr(fn)
    _reject(ch06.check_noam_lr_hidden, fn, "ValueError")


def test_noam_negative_step_rejected_hidden():
    """O enunciado pede ValueError também para um passo negativo (como a referência)."""

    def fn(step, d_model, warmup_steps, factor=1.0):
        if d_model <= 0 or warmup_steps <= 0:
            raise ValueError("tamanhos inválidos")
        s = max(step, 1)
        return factor * d_model**-0.5 * min(s**-0.5, s * warmup_steps**-1.5)

    ch06.check_noam_lr(fn)
    _reject(ch06.check_noam_lr_hidden, fn, "noam_lr\\(-1, 64, 10\\)(.|\n)*Esperava ValueError")


def test_noam_reference_and_stub():
    _reject(ch06.check_noam_lr_hidden, training.noam_lr, "implementação de referência")
    _reject(ch06.check_noam_lr, _stub, "não implementado")


def test_noam_reference_matches_formula():
    for d, w, f in [(512, 4000, 1.0), (64, 10, 2.0)]:
        assert training.noam_lr(0, d, w, f) == training.noam_lr(1, d, w, f)
        assert math.isclose(training.noam_lr(w, d, w, f), f * (d * w) ** -0.5)
        assert math.isclose(training.noam_peak(d, w, f), training.noam_lr(w, d, w, f))
        for s in (1, w // 2, w, 2 * w):
            assert math.isclose(training.no_warmup_lr(s, d, w, f), f * d**-0.5 * min(w**-0.5, s**-0.5))


# ================================================================ make_warmup_scheduler


def sched_partial(optimizer, d_model, warmup_steps, factor=1.0):
    for g in optimizer.param_groups:
        g["lr"] = 1
        g["initial_lr"] = 1.0
    return LambdaLR(optimizer, functools.partial(_noam_for_partial, d=d_model, w=warmup_steps, f=factor))


def _noam_for_partial(step, d, w, f):
    return SOL["noam_lr"](step, d, w, f)


def sched_nested_def(optimizer, d_model, warmup_steps, factor=1.0):
    def multiplier(step):
        return SOL["noam_lr"](step, d_model, warmup_steps, factor)

    for i in range(len(optimizer.param_groups)):
        optimizer.param_groups[i]["lr"] = 1.0
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=multiplier)


@pytest.mark.parametrize(
    "fn", [SOL["make_warmup_scheduler"], sched_partial, sched_nested_def], ids=["notebook", "partial", "def"]
)
def test_scheduler_correct_variants_pass(fn, capsys):
    ch06.check_make_warmup_scheduler(fn)
    ch06.check_make_warmup_scheduler_hidden(fn)
    assert capsys.readouterr().err == ""


def _sched_wrong(kind):
    noam = training.noam_lr

    def fn(optimizer, d_model, warmup_steps, factor=1.0):
        groups = optimizer.param_groups[:1] if kind == "first_group" else optimizer.param_groups
        if kind != "keep_base":
            for g in groups:
                g["lr"] = 1.0
        if kind == "class":
            return object()
        shift = 1 if kind == "plus1" else 0
        f = 1.0 if kind == "no_factor" else factor
        if kind == "swap":
            sched = LambdaLR(optimizer, lambda s: noam(s, warmup_steps, d_model, f))
        elif kind == "crash0":
            sched = LambdaLR(optimizer, lambda s: _noam_wrong("crash0")(s, d_model, warmup_steps, f))
        elif kind == "bad_noam":
            sched = LambdaLR(optimizer, lambda s: _noam_wrong("no_dmodel")(s, d_model, warmup_steps, f))
        else:
            sched = LambdaLR(optimizer, lambda s: noam(s + shift, d_model, warmup_steps, f))
        if kind == "extra_step":
            sched.step()
        return sched

    return fn


@pytest.mark.parametrize(
    ("kind", "match"),
    [
        ("keep_base", "taxa base do otimizador mantida"),
        ("plus1", "deslocada um passo para a frente"),
        ("extra_step", "deslocada um passo para a frente"),
        ("no_factor", "`factor` ignorado"),
        ("swap", "trocados"),
        ("class", "LambdaLR"),
        ("bad_noam", "SEM o fator d_model.*na função que o `LambdaLR` recebeu"),
        ("crash0", "ZeroDivisionError(.|\n)*passo 0"),
    ],
)
def test_scheduler_mistakes_rejected(kind, match):
    _reject(ch06.check_make_warmup_scheduler, _sched_wrong(kind), match)


def sched_lr_after(optimizer, d_model, warmup_steps, factor=1.0):
    """O erro do aluno: `lr = 1.0` posto depois de criar o LambdaLR (que já guardou a taxa base)."""
    sched = LambdaLR(optimizer, lambda s: training.noam_lr(s, d_model, warmup_steps, factor))
    for g in optimizer.param_groups:
        g["lr"] = 1.0
    return sched


def test_scheduler_lr_set_after_lambdalr_is_named():
    """O LambdaLR guarda a taxa base quando é criado: `lr = 1.0` depois dele vale até o 1º step."""
    _reject(ch06.check_make_warmup_scheduler, sched_lr_after, "DEPOIS de criar o `LambdaLR`")
    _reject(ch06.check_make_warmup_scheduler_hidden, sched_lr_after, "DEPOIS de criar o `LambdaLR`")
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.123)
    sched = sched_lr_after(optimizer, 64, 5)
    assert sched.base_lrs == [0.123] and optimizer.param_groups[0]["lr"] == 1.0
    optimizer.step()
    sched.step()
    assert math.isclose(optimizer.param_groups[0]["lr"], 0.123 * training.noam_lr(1, 64, 5))


def test_scheduler_first_group_only_rejected_hidden():
    fn = _sched_wrong("first_group")
    ch06.check_make_warmup_scheduler(fn)  # um grupo só: não dá para ver
    _reject(ch06.check_make_warmup_scheduler_hidden, fn, "só no primeiro grupo")


def test_scheduler_reference_and_stub():
    _reject(
        ch06.check_make_warmup_scheduler_hidden, training.make_warmup_scheduler, "implementação de referência"
    )
    _reject(ch06.check_make_warmup_scheduler, _stub, "não implementado")


@pytest.mark.parametrize("base_lr", [1e-3, 0.5, 1.0, 7.0])
def test_reference_scheduler_is_noam_after_k_steps(base_lr):
    p = nn.Parameter(torch.zeros(2))
    opt = torch.optim.Adam([p], lr=base_lr)
    sched = training.make_warmup_scheduler(opt, 64, 10, 2.0)
    assert isinstance(sched, LambdaLR)
    for k in range(30):
        assert math.isclose(opt.param_groups[0]["lr"], training.noam_lr(k, 64, 10, 2.0), rel_tol=1e-12)
        opt.step()
        sched.step()


# ================================================================ train_epoch


def _logits(out):
    return out[0] if isinstance(out, tuple) else out


def train_variant(kind="ok"):
    """Um laço de treino com uma variação (correta ou errada), para testar as verificações."""

    def fn(model, loader, optimizer, scheduler, loss_fn, max_grad_norm=1.0):
        if kind != "no_train":
            model.train()
        losses, correct, total, accs = [], 0, 0, []
        loss_sum = None
        for x, y in loader:
            if kind == "model_zero_grad":
                model.zero_grad()
            elif kind == "zero_grad_false":
                optimizer.zero_grad(set_to_none=False)
            elif kind not in ("no_zero_grad", "zero_grad_end"):
                optimizer.zero_grad()
            out = model(x)
            logits = out if kind == "no_tuple" else _logits(out)
            loss = loss_fn(logits, y)
            loss.backward()
            if kind == "zero_grad_mid":
                optimizer.zero_grad()
            if kind == "clip_fixed":
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            elif kind == "clip_value":
                nn.utils.clip_grad_value_(model.parameters(), max_grad_norm)
            elif kind not in ("no_clip", "clip_after"):
                params = (
                    [p for g in optimizer.param_groups for p in g["params"]]
                    if kind == "opt_params"
                    else model.parameters()
                )
                nn.utils.clip_grad_norm_(params, max_grad_norm)
            if kind == "sched_first":
                scheduler.step()
            if kind != "no_step":
                optimizer.step()
            if kind == "clip_after":
                nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            if kind not in ("sched_first", "no_sched", "sched_epoch"):
                scheduler.step()
            if kind in ("zero_grad_end", "zero_grad_both"):
                optimizer.zero_grad()
            if kind == "progress":
                print("lote", file=sys.stderr)
            losses.append(loss.item())
            loss_sum = loss if loss_sum is None else loss_sum + loss
            hits = (logits.argmax(-1) == y).sum().item()
            correct, total = correct + hits, total + len(y)
            accs.append(hits / len(y))
        if kind == "sched_epoch":
            scheduler.step()
        if kind == "loss_sum":
            return {"loss": sum(losses), "accuracy": correct / total}
        if kind == "loss_weighted":
            sizes = [len(y) for _, y in loader]
            return {"loss": sum(v * n for v, n in zip(losses, sizes)) / total, "accuracy": correct / total}
        if kind == "acc_batches":
            return {"loss": sum(losses) / len(losses), "accuracy": sum(accs) / len(accs)}
        if kind == "loss_tensor":
            return {"loss": loss_sum / len(losses), "accuracy": correct / total}
        if kind == "len_loader":
            return {"loss": sum(losses) / len(loader), "accuracy": correct / len(loader.dataset)}
        return {"loss": sum(losses) / len(losses), "accuracy": correct / total}

    return fn


@pytest.mark.parametrize(
    "kind",
    ["ok", "model_zero_grad", "zero_grad_false", "zero_grad_both", "opt_params", "len_loader", "progress"],
)
def test_train_epoch_correct_variants_pass(kind, capsys):
    fn = train_variant(kind)
    ch06.check_train_epoch(fn)
    ch06.check_train_epoch_hidden(fn)
    assert capsys.readouterr().err == ""


def test_train_epoch_notebook_solution_passes(capsys):
    ch06.check_train_epoch(SOL["train_epoch"])
    ch06.check_train_epoch_hidden(SOL["train_epoch"])
    assert capsys.readouterr().err == ""


TRAIN_MISTAKES = [
    ("sched_first", "ANTES de `optimizer.step\\(\\)`"),
    ("no_zero_grad", "SEM `zero_grad\\(\\)`"),
    ("zero_grad_end", "só no FIM"),
    ("zero_grad_mid", "entre o `backward\\(\\)` e o `step\\(\\)`"),
    ("no_clip", "SEM o recorte da norma"),
    ("clip_after", "DEPOIS de `optimizer.step\\(\\)`"),
    ("clip_fixed", "norma 1.0 fixa"),
    ("clip_value", "recorte por valor"),
    ("no_sched", "`scheduler.step\\(\\)` nunca foi chamado"),
    ("sched_epoch", "uma vez por época"),
    ("no_step", "`optimizer.step\\(\\)` nunca foi chamado"),
    ("no_train", "modo de avaliação"),
    ("loss_sum", "SOMA das perdas"),
    ("loss_weighted", "ponderada pelo tamanho do lote"),
    ("acc_batches", "média das acurácias dos lotes"),
    ("loss_tensor", "ligado ao grafo"),
]


@pytest.mark.parametrize(("kind", "match"), TRAIN_MISTAKES)
def test_train_epoch_mistakes_rejected(kind, match, capsys):
    _reject(ch06.check_train_epoch, train_variant(kind), match)
    assert capsys.readouterr().err == ""


def test_train_epoch_tuple_output_rejected_hidden():
    fn = train_variant("no_tuple")
    ch06.check_train_epoch(fn)
    _reject(ch06.check_train_epoch_hidden, fn, "tupla")


def test_train_epoch_reference_and_stub():
    _reject(ch06.check_train_epoch_hidden, training.train_epoch, "implementação de referência")
    _reject(ch06.check_train_epoch, _stub, "não implementado")


def _loop_with(*, clip_scale=1.0, zero_every=1, scale_x=False):
    """Um laço com um erro que nenhuma execução de referência comete (para a localização)."""

    def fn(model, loader, optimizer, scheduler, loss_fn, max_grad_norm=1.0):
        model.train()
        losses, correct, total = [], 0, 0
        for i, (x, y) in enumerate(loader):
            if i % zero_every == 0:
                optimizer.zero_grad()
            logits = _logits(model(x / x.norm() if scale_x else x))
            loss = loss_fn(logits, y)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), clip_scale * max_grad_norm)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            correct, total = correct + (logits.argmax(-1) == y).sum().item(), total + len(y)
        return {"loss": sum(losses) / len(losses), "accuracy": correct / total}

    return fn


@pytest.mark.parametrize(
    ("kwargs", "where"),
    [
        ({"clip_scale": 3.0}, "norma do gradiente no `optimizer.step\\(\\)` do lote 1"),
        ({"zero_every": 2}, "gradiente acumulado antes do `backward\\(\\)` do lote 2"),
        ({"scale_x": True}, "perda do lote 1"),
    ],
)
def test_train_epoch_unknown_mistake_says_where_the_trace_first_differs(kwargs, where):
    """Um erro fora da lista: a mensagem diz em que lote e em que etapa o rastro diverge."""
    _reject(ch06.check_train_epoch, _loop_with(**kwargs), f"A primeira diferença aparece em {where}")
    _reject(ch06.check_train_epoch, _loop_with(**kwargs), "confira a ordem")


def test_train_epoch_known_mistake_is_located_and_named():
    """Um erro conhecido: o lugar no rastro e o nome do erro, na mesma mensagem."""
    _reject(
        ch06.check_train_epoch,
        train_variant("zero_grad_end"),
        "primeira diferença aparece em gradiente acumulado antes do `backward\\(\\)` do lote 1"
        "(.|\n)*só no FIM",
    )


def test_mistake_runs_are_distinguishable():
    """Cada erro conhecido muda algo observável em relação à referência."""
    ref, _ = ch06._reference_run(0, 0.5)
    runs = ch06._mistake_runs(0, 0.5)
    for variant, fp in runs.items():
        different = (
            not ch06._same(fp["params"], ref["params"])
            or fp["lr"] != ref["lr"]
            or fp["steps"] != ref["steps"]
        )
        assert different, variant


# ================================================================ evaluate


def eval_variant(kind="ok"):
    def fn(model, loader, loss_fn):
        was = model.training
        if kind != "no_eval":
            model.eval()
        losses, correct, total = [], 0, 0
        ctx = (
            torch.inference_mode()
            if kind == "inference_mode"
            else (torch.enable_grad() if kind == "grad_on" else torch.no_grad())
        )
        with ctx:
            for x, y in loader:
                logits = _logits(model(x))
                loss = loss_fn(logits, y)
                if kind == "backward":
                    loss.backward()
                if kind == "zero_grad":
                    model.zero_grad()
                losses.append(loss.item())
                correct += (logits.argmax(-1) == y).sum().item()
                total += y.numel()
        if kind == "always_train":
            model.train()
        elif kind == "attr":
            model.training = was
        elif kind == "if_was":
            if was:
                model.train()
        elif kind not in ("leave_eval",):
            model.train(was)
        sizes = [len(y) for _, y in loader]
        if kind == "loss_sum":
            loss = sum(losses)
        elif kind == "loss_batch_mean":  # a média simples das perdas dos lotes (o erro do enunciado)
            loss = sum(losses) / len(losses)
        elif kind == "loss_no_division":
            loss = sum(v * n for v, n in zip(losses, sizes))
        else:  # a média por exemplo: Σ perda_b·B_b / N
            loss = sum(v * n for v, n in zip(losses, sizes)) / total
        return {"loss": loss, "accuracy": correct / total}

    return fn


@torch.no_grad()
def eval_decorated(model, loader, loss_fn):
    mode = model.training
    try:
        model.eval()
        out = [(_logits(model(x)), y) for x, y in loader]
        losses = [loss_fn(lg, y).item() for lg, y in out]
        hits = sum(int((lg.argmax(-1) == y).sum()) for lg, y in out)
        sizes = [len(y) for _, y in out]
        return {"loss": float(np.average(losses, weights=sizes)), "accuracy": hits / sum(sizes)}
    finally:
        model.train(mode)


def eval_summed(model, loader, loss_fn):
    """A média por exemplo somada num tensor (perda do lote × tamanho) e dividida por N no fim."""
    was = model.training
    model.eval()
    total, hits, n = torch.zeros((), dtype=torch.float64), 0, 0
    with torch.no_grad():
        for x, y in loader:
            logits = _logits(model(x))
            total += loss_fn(logits, y).double() * y.numel()
            hits += (logits.argmax(-1) == y).sum().item()
            n += len(y)
    model.train(was)
    total = total.item()
    return {"loss": total / n, "accuracy": hits / n}


@pytest.mark.parametrize(
    "fn",
    [
        eval_variant("ok"),
        eval_variant("inference_mode"),
        eval_variant("if_was"),
        eval_decorated,
        eval_summed,
        SOL["evaluate"],
    ],
    ids=["ok", "inference_mode", "if_was", "decorador", "soma", "notebook"],
)
def test_evaluate_correct_variants_pass(fn, capsys):
    ch06.check_evaluate(fn)
    ch06.check_evaluate_hidden(fn)
    assert capsys.readouterr().err == ""


EVAL_MISTAKES = [
    ("no_eval", "modo de TREINO durante a avaliação"),
    ("grad_on", "gradientes estavam ligados"),
    ("leave_eval", "ficou em modo de avaliação"),
    ("always_train", "saiu em modo de treino"),
    ("attr", "só parte do modelo"),
    ("loss_sum", "SOMA das perdas"),
    ("loss_batch_mean", "média simples das perdas dos lotes; a avaliação pede a média por exemplo"),
    ("loss_no_division", "sem dividir pelo total de exemplos"),
    ("backward", "backward"),
    ("zero_grad", "gradientes dos parâmetros mudaram"),
]


@pytest.mark.parametrize(("kind", "match"), EVAL_MISTAKES)
def test_evaluate_mistakes_rejected(kind, match):
    _reject(ch06.check_evaluate, eval_variant(kind), match)


def test_evaluate_reference_and_stub():
    _reject(ch06.check_evaluate_hidden, training.evaluate, "implementação de referência")
    _reject(ch06.check_evaluate, _stub, "não implementado")


# ================================================================ o notebook concorda com o pacote


def test_notebook_solutions_agree_with_package():
    for step in (0, 1, 7, 50, 4000, 10**6):
        assert SOL["noam_lr"](step, 512, 4000, 1.5) == pytest.approx(
            training.noam_lr(step, 512, 4000, 1.5), rel=1e-12
        )
    setup_a, setup_b = ch06._Setup(5), ch06._Setup(5)
    out_a = SOL["train_epoch"](
        setup_a.model, setup_a.loader, setup_a.optimizer, setup_a.scheduler, setup_a.loss_fn, 0.5
    )
    out_b = training.train_epoch(
        setup_b.model, setup_b.loader, setup_b.optimizer, setup_b.scheduler, setup_b.loss_fn, 0.5
    )
    assert out_a == pytest.approx(out_b)
    torch.testing.assert_close(setup_a.params(), setup_b.params())
    assert SOL["evaluate"](setup_a.model, setup_a.loader, setup_a.loss_fn) == pytest.approx(
        training.evaluate(setup_b.model, setup_b.loader, setup_b.loss_fn)
    )


def test_checks_are_fast():
    import time

    for name in ("noam_lr", "make_warmup_scheduler", "train_epoch", "evaluate"):
        check = getattr(ch06, f"check_{name}")
        check(SOL[name])  # aquece importações feitas uma vez só
        start = time.process_time()
        check(SOL[name])
        assert time.process_time() - start < 1.0, name


# ================================================================ sementes de cada entrega


OFFSETS = [162134788, 34818343, 958937325]  # deslocamentos das sementes ocultas de três "entregas"
CORRECT = {
    "noam_lr": [SOL["noam_lr"], noam_branches, noam_numpy],
    "make_warmup_scheduler": [SOL["make_warmup_scheduler"], sched_partial, sched_nested_def],
    "train_epoch": [SOL["train_epoch"]]
    + [train_variant(k) for k in ("ok", "model_zero_grad", "zero_grad_false", "opt_params", "len_loader")],
    "evaluate": [SOL["evaluate"], eval_variant("inference_mode"), eval_variant("if_was"), eval_decorated,
                 eval_summed],
}  # fmt: skip


@pytest.mark.parametrize("offset", OFFSETS)
def test_hidden_checks_accept_correct_variants_with_any_seed_offset(offset, capsys):
    """Na correção, os casos ocultos mudam a cada entrega: nenhuma resposta certa pode cair com isso."""
    for name, answers in CORRECT.items():
        for fn in answers:
            with judging(LocalStudent(), offset, []):
                getattr(ch06, f"check_{name}_hidden")(fn)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("offset", OFFSETS)
def test_hidden_checks_reject_mistakes_with_any_seed_offset(offset):
    """E nenhum erro conhecido passa por sorte (o recorte, por exemplo, precisa de gradientes grandes)."""
    for kind, match in TRAIN_MISTAKES:
        with judging(LocalStudent(), offset, []), pytest.raises(AssertionError, match=match):
            ch06.check_train_epoch_hidden(train_variant(kind))
    for kind, match in EVAL_MISTAKES:
        with judging(LocalStudent(), offset, []), pytest.raises(AssertionError, match=match):
            ch06.check_evaluate_hidden(eval_variant(kind))
