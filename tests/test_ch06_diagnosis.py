"""Capítulo 6 (issue 31): erros que ninguém previu recebem um diagnóstico certo, e nunca um errado.

``noam_lr``: os erros conhecidos (inclusive os de precedência, ``** -1/2`` e ``** -3/2``) só são
nomeados se reproduzem a curva também noutra configuração; sem erro confirmado, o deslocamento do
passo, os expoentes de d_model, do ``factor``, da queda e do aquecimento e a escala são ajustados, ou
a propriedade que quebra é dita (o pico em warmup_steps, a subida em linha reta).
``make_warmup_scheduler``: a ``noam_lr`` do aluno é olhada primeiro ("o erro está em `noam_lr`");
depois, os erros conhecidos confirmados num segundo caso, a primeira taxa 0, o deslocamento, a escala
de cada grupo. ``train_epoch`` e ``evaluate``: os erros conhecidos do laço e das métricas se
confirmam num segundo caso; sem erro confirmado, a etapa do rastro dá o diagnóstico (gradientes não
zerados, o limite do recorte...). Toda falha leva tipo e id; uma parte roda também num kernel de
verdade, com a mesma mensagem e os mesmos dados.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from judge_helpers import StudentKernel
from test_judge_ch06 import CLIP, _eval, _train

from transformer_course.exercises import all_exercises
from transformer_course.feedback import CheckFailure
from transformer_course.instructor.judge import judge_cell
from transformer_course.probe import LocalStudent, judging

CHAPTER = "06_treino_warmup"
OFFSET = 4243
EXERCISES = {ex.name: ex for ex in all_exercises() if ex.chapter == CHAPTER}

NOAM = """
def noam_lr(step, d_model, warmup_steps, factor=1.0):
    if d_model <= 0 or warmup_steps <= 0 or step < 0:
        raise ValueError("tamanhos inválidos")
    s = {s}
    return {lr}
"""
RIGHT_LR = "factor * d_model**-0.5 * min(s**-0.5, s * warmup_steps**-1.5)"


def _noam(s: str = "max(step, 1)", lr: str = RIGHT_LR) -> str:
    return NOAM.format(s=s, lr=lr)


SCHED = """
from torch.optim.lr_scheduler import LambdaLR

def make_warmup_scheduler(optimizer, d_model, warmup_steps, factor=1.0):
    {before}
    scheduler = LambdaLR(optimizer, lambda step: {fn})
    {after}
    return scheduler
"""
RIGHT_FN = "noam_lr(step, d_model, warmup_steps, factor)"
SET_ONE = 'for g in optimizer.param_groups: g["lr"] = 1.0'


def _sched(fn: str = RIGHT_FN, before: str = SET_ONE, after: str = "pass", noam: str | None = None) -> str:
    """Um agendador, sempre com a sua ``noam_lr`` ao lado (no kernel, o nome é o da resposta)."""
    return (noam or _noam()) + SCHED.format(fn=fn, before=before, after=after)


# nome -> (exercício, código, tipo, id, trecho da frase)
FOUND = {
    # -------------------------------------- noam_lr: erros conhecidos, confirmados noutra configuração
    "warmup ** -3/2 (o da issue)": (
        "noam_lr",
        _noam(lr="factor * d_model**-0.5 * min(s**-0.5, s * warmup_steps**-3/2)"),
        "valores",
        "aquecimento-menos-3-sobre-2",
        r"`warmup_steps \*\* -3/2`: em Python, `\*\*` vem antes de `/`",
    ),
    "d_model ** -1/2": (
        "noam_lr",
        _noam(lr="factor * d_model**-1/2 * min(s**-0.5, s * warmup_steps**-1.5)"),
        "valores",
        "d_model-menos-1-sobre-2",
        r"d_model\^-1 / 2",
    ),
    "step ** -1/2": (
        "noam_lr",
        _noam(lr="factor * d_model**-0.5 * min(s**-1/2, s * warmup_steps**-1.5)"),
        "valores",
        "queda-menos-1-sobre-2",
        r"step\^-1 / 2",
    ),
    "step + 1": ("noam_lr", _noam(s="step + 1"), "valores", "passo-mais-1", r"step \+ 1"),
    "0 no passo 0": (
        "noam_lr",
        _noam(lr=f"0.0 if step == 0 else {RIGHT_LR}"),
        "valores",
        "passo-0-zero",
        r"no passo 0 ela dá 0",
    ),
    "metade da taxa no passo 0": (
        "noam_lr",
        _noam(lr=f"(0.5 if step == 0 else 1.0) * {RIGHT_LR}"),
        "propriedade",
        "passo-0-igual-ao-1",
        r"no passo 0, sua taxa é .*, e não a do passo 1",
    ),
    "divisão por zero no passo 0": (
        "noam_lr",
        _noam(s="step"),
        "excecao",
        "divisao-por-zero-no-passo-0",
        r"divisão por zero no passo 0",
    ),
    "sem d_model": (
        "noam_lr",
        _noam(lr="factor * min(s**-0.5, s * warmup_steps**-1.5)"),
        "valores",
        "sem-d_model",
        r"SEM o fator d_model",
    ),
    # ------------------------------------------------ noam_lr: parâmetros ajustados e propriedades
    "warmup_steps + 1 (o pico um passo adiante)": (
        "noam_lr",
        _noam(s="max(step, 1); warmup_steps = warmup_steps + 1"),
        "propriedade",
        "pico-em-warmup",
        r"seu pico \(o maior valor entre os passos 0 e 40\) está no passo 11, e não em warmup_steps = 10; "
        r"com warmup_steps = 40, no passo 41",
    ),
    "warmup_steps − 1": (
        "noam_lr",
        _noam(s="max(step, 1); warmup_steps = max(warmup_steps - 1, 1)"),
        "propriedade",
        "pico-em-warmup",
        r"está no passo 9, e não em warmup_steps = 10",
    ),
    "max(step, 1) + 1 (contagem a partir de 1)": (
        "noam_lr",
        _noam(s="max(step, 1) + 1"),
        "parametro",
        "passo-deslocado",
        r"deslocada 1 passo para a frente: no passo s \(s ≥ 1\), sua taxa é a do passo s \+ 1",
    ),
    "d_model ** 0.5": (
        "noam_lr",
        _noam(lr="factor * d_model**0.5 * min(s**-0.5, s * warmup_steps**-1.5)"),
        "parametro",
        "expoente-d_model",
        r"seu expoente de d_model é 0,5, e não −0,5",
    ),
    "d_model ** -0.25": (
        "noam_lr",
        _noam(lr="factor * d_model**-0.25 * min(s**-0.5, s * warmup_steps**-1.5)"),
        "parametro",
        "expoente-d_model",
        r"seu expoente de d_model é −0,25, e não −0,5",
    ),
    "factor ao quadrado": (
        "noam_lr",
        _noam(lr="factor**2 * d_model**-0.5 * min(s**-0.5, s * warmup_steps**-1.5)"),
        "parametro",
        "expoente-factor",
        r"seu `factor` entra como factor\^2, e não factor\^1",
    ),
    "queda step^-0,6": (
        "noam_lr",
        _noam(lr="factor * d_model**-0.5 * min(s**-0.6, s * warmup_steps**-1.6)"),
        "parametro",
        "expoente-da-queda",
        r"cai como step\^\(−0,6\), e não cai como step\^\(−0,5\)",
    ),
    "aquecimento warmup^-1,25": (
        "noam_lr",
        _noam(lr="factor * d_model**-0.5 * min(s**-0.5, s * warmup_steps**-1.25)"),
        "parametro",
        "expoente-do-aquecimento",
        r"warmup_steps entra com expoente −1,25, e não −1,5",
    ),
    "max(step, 2)": (
        "noam_lr",
        _noam(s="max(step, 2)"),
        "parametro",
        "passo-minimo",
        r"trata todo passo abaixo de 2 como o passo 2",
    ),
    "sem o min (só a subida)": (
        "noam_lr",
        _noam(lr="factor * d_model**-0.5 * s * warmup_steps**-1.5"),
        "parametro",
        "expoente-da-queda",
        r"sua taxa não cai: cresce como step\^\(1\)",
    ),
    "só a queda (sem aquecimento)": (
        "noam_lr",
        _noam(lr="factor * d_model**-0.5 * s**-0.5"),
        "propriedade",
        "pico-em-warmup",
        r"está no passo 0, e não em warmup_steps = 10",
    ),
    "raiz do factor": (
        "noam_lr",
        _noam(lr="(factor / d_model) ** 0.5 * min(s**-0.5, s * warmup_steps**-1.5)"),
        "parametro",
        "expoente-factor",
        r"factor\^0,5, e não factor\^1",
    ),
    "(factor·d_model)^-0,5": (
        "noam_lr",
        _noam(lr="(factor * d_model) ** -0.5 * min(s**-0.5, s * warmup_steps**-1.5)"),
        "parametro",
        "expoente-factor",
        r"factor\^−0,5",
    ),
    "factor só na queda": (
        "noam_lr",
        _noam(lr="d_model**-0.5 * min(factor * s**-0.5, s * warmup_steps**-1.5)"),
        "propriedade",
        "factor-na-curva-toda",
        r"`factor` não multiplica a curva toda: dobrar `factor` multiplicou a sua taxa por 1 na subida",
    ),
    "d_model só na subida": (
        "noam_lr",
        _noam(lr="factor * min(s**-0.5, d_model**-0.5 * s * warmup_steps**-1.5)"),
        "propriedade",
        "d_model-na-curva-toda",
        r"`d_model` não multiplica a curva toda",
    ),
    "o dobro": (
        "noam_lr",
        _noam(lr=f"2 * {RIGHT_LR}"),
        "parametro",
        "fator-de-escala",
        r"multiplicada por 2",
    ),
    "queda × 0,9 (as partes não se encontram no pico)": (
        "noam_lr",
        _noam(lr="factor * d_model**-0.5 * (s * warmup_steps**-1.5 if s < warmup_steps else 0.9 * s**-0.5)"),
        "parametro",
        "escala-da-queda",
        r"depois do pico, sua taxa é a certa multiplicada por 0,9 \(na subida, está certa\)",
    ),
    # ------------------------------------------------ make_warmup_scheduler: primeiro a noam_lr
    "noam_lr errada, o agendador a segue": (
        "make_warmup_scheduler",
        _sched(noam=_noam(lr="factor * d_model**-0.5 * min(s**-0.5, s * warmup_steps**-3/2)")),
        "anterior",
        "erro-em-noam_lr",
        r"o erro está em `noam_lr`: seu agendador segue exatamente a sua `noam_lr`.*`warmup_steps \*\* -3/2`",
    ),
    "noam_lr com pico deslocado, o agendador a segue": (
        "make_warmup_scheduler",
        _sched(noam=_noam(s="max(step, 1); warmup_steps = warmup_steps + 1")),
        "anterior",
        "erro-em-noam_lr",
        r"o erro está em `noam_lr`",
    ),
    "noam_lr em dobro e a taxa base mantida": (
        "make_warmup_scheduler",
        _sched(noam=_noam(lr=f"2 * {RIGHT_LR}"), before="pass"),
        "anterior",
        "erro-em-noam_lr",
        r"o erro está em `noam_lr`: seu agendador segue a sua `noam_lr`.*além disso, a taxa base "
        r"do otimizador foi mantida",
    ),
    "noam_lr sem max, o LambdaLR levanta na criação": (
        "make_warmup_scheduler",
        _sched(noam=_noam(s="step")),
        "anterior",
        "erro-em-noam_lr",
        r"o erro está em `noam_lr`: o `LambdaLR` chama a função com o passo 0 .* levanta a mesma exceção "
        r"\(ZeroDivisionError\)",
    ),
    # ------------------------------------------------ make_warmup_scheduler: o próprio agendador
    "função própria com ** -3/2 (a noam_lr está certa)": (
        "make_warmup_scheduler",
        _sched(fn="factor * d_model**-0.5 * min(max(step, 1)**-0.5, max(step, 1) * warmup_steps**-3/2)"),
        "valores",
        "funcao-aquecimento-menos-3-sobre-2",
        r"`warmup_steps \*\* -3/2`.*\(na função que o `LambdaLR` recebeu\)",
    ),
    "taxa base mantida": (
        "make_warmup_scheduler",
        _sched(before="pass"),
        "valores",
        "taxa-base-mantida",
        r"taxa base do otimizador mantida",
    ),
    "lr = 1.0 depois do LambdaLR": (
        "make_warmup_scheduler",
        _sched(before="pass", after=SET_ONE),
        "valores",
        "lr-1-depois-do-lambdalr",
        r"DEPOIS de criar o `LambdaLR`",
    ),
    "um step a mais": (
        "make_warmup_scheduler",
        _sched(after="scheduler.step()"),
        "valores",
        "passo-mais-1",
        r"deslocada um passo para a frente",
    ),
    "factor ignorado": (
        "make_warmup_scheduler",
        _sched(fn="noam_lr(step, d_model, warmup_steps)"),
        "valores",
        "factor-ignorado",
        r"o `factor` ignorado",
    ),
    "a primeira taxa é 0": (
        "make_warmup_scheduler",
        _sched(fn=f"{RIGHT_FN} if step > 0 else 0.0"),
        "propriedade",
        "primeira-taxa-zero",
        r"antes do primeiro `scheduler.step\(\)`, sua taxa é 0",
    ),
    "dois passos adiante": (
        "make_warmup_scheduler",
        _sched(fn="noam_lr(step + 2, d_model, warmup_steps, factor)"),
        "parametro",
        "passo-deslocado",
        r"sua taxa é noam_lr\(k \+ 2\), e não noam_lr\(k\)",
    ),
    "o dobro da taxa": (
        "make_warmup_scheduler",
        _sched(fn=f"2 * {RIGHT_FN}"),
        "parametro",
        "escala-da-taxa",
        r"a taxa é noam_lr\(k, \.\.\.\) × 2 em todo grupo",
    ),
    "a função devolve a taxa dividida pela do 1º grupo": (  # certo com um grupo; só o oculto tem dois
        "make_warmup_scheduler",
        _sched(before='base = optimizer.param_groups[0]["lr"]', fn=f"{RIGHT_FN} / base"),
        "parametro",
        "escala-por-grupo",
        r"grupo 0 \(lr inicial 0,001\): × 1; grupo 1 \(lr inicial 0,05\): × 50",
    ),
    "a função ignora o passo": (
        "make_warmup_scheduler",
        _sched(fn="noam_lr(warmup_steps, d_model, warmup_steps, factor)"),
        "propriedade",
        "taxa-constante",
        r"sua taxa não muda com os passos \(fica em 0,0559 do passo 0 ao 12\)",
    ),
    "a função, não o agendador": (
        "make_warmup_scheduler",
        _noam() + "\ndef make_warmup_scheduler(optimizer, d_model, warmup_steps, factor=1.0):\n"
        "    return lambda step: noam_lr(step, d_model, warmup_steps, factor)\n",
        "tipo",
        "nao-e-lambdalr",
        r"não uma classe própria nem uma função",
    ),
    # ------------------------------------------------ train_epoch
    "agendador antes do passo": (
        "train_epoch",
        _train(before_step=f"{CLIP}; scheduler.step()", after_step="pass"),
        "propriedade",
        "agendador_antes",
        r"ANTES de `optimizer",
    ),
    "sem zero_grad": ("train_epoch", _train(zero="pass"), "valores", "sem_zero_grad", r"SEM `zero_grad\(\)`"),
    "zero_grad só no fim": (
        "train_epoch",
        _train(zero="pass", after_step="scheduler.step(); optimizer.zero_grad()"),
        "valores",
        "zero_grad_no_fim",
        r"só no FIM",
    ),
    "zero_grad entre backward e step": (
        "train_epoch",
        _train(before_step=f"optimizer.zero_grad(); {CLIP}"),
        "valores",
        "zero_grad_antes_do_step",
        r"entre o `backward\(\)` e o",
    ),
    "recorte depois do passo": (
        "train_epoch",
        _train(before_step="pass", after_step=f"{CLIP}; scheduler.step()"),
        "valores",
        "corte_depois_do_step",
        r"DEPOIS de `optimizer.step\(\)`",
    ),
    "sem recorte": ("train_epoch", _train(before_step="pass"), "valores", "sem_corte", r"SEM o recorte"),
    "recorte por valor": (
        "train_epoch",
        _train(before_step=CLIP.replace("norm_", "value_")),
        "valores",
        "corte_por_valor",
        r"recorte por valor",
    ),
    "recorte com norma 1.0": (
        "train_epoch",
        _train(before_step=CLIP.replace("max_grad_norm", "1.0")),
        "valores",
        "corte_fixo_1",
        r"norma 1.0 fixa",
    ),
    "modelo em eval()": (
        "train_epoch",
        _train(train="model.eval()"),
        "propriedade",
        "sem_train",
        r"modo de avaliação",
    ),
    "perda vezes o tamanho do lote": (
        "train_epoch",
        _train().replace("loss.backward()", "(loss * len(y)).backward()"),
        "valores",
        "perda_vezes_tamanho",
        r"perda multiplicada pelo tamanho do lote",
    ),
    "perda dividida pelo número de lotes": (
        "train_epoch",
        _train().replace("loss.backward()", "(loss / len(loader)).backward()"),
        "valores",
        "perda_dividida_por_lotes",
        r"dividida pelo número de lotes",
    ),
    "recorte com o dobro do limite": (
        "train_epoch",
        _train(before_step=CLIP.replace("max_grad_norm)", "2 * max_grad_norm)")),
        "parametro",
        "limite-do-recorte",
        r"seu recorte limita a norma do gradiente a 1, e não a max_grad_norm = 0,5",
    ),
    "recorte com metade do limite": (
        "train_epoch",
        _train(before_step=CLIP.replace("max_grad_norm)", "max_grad_norm / 2)")),
        "parametro",
        "limite-do-recorte",
        r"a 0,25, e não a max_grad_norm = 0,5",
    ),
    "recorte com limite 20 vezes maior": (
        "train_epoch",
        _train(before_step=CLIP.replace("max_grad_norm)", "20 * max_grad_norm)")),
        "propriedade",
        "norma-recortada-no-step",
        r"acima de max_grad_norm = 0,5",
    ),
    "zero_grad a cada dois lotes": (
        "train_epoch",
        _train(zero="if n % 2 == 0: optimizer.zero_grad()"),
        "propriedade",
        "gradientes-zerados-antes-do-backward",
        r"antes do `backward\(\)` do lote 2, os parâmetros já tinham gradiente",
    ),
    "agendador duas vezes por lote": (
        "train_epoch",
        _train(after_step="scheduler.step(); scheduler.step()"),
        "propriedade",
        "um-agendador-por-lote",
        "",
    ),
    "modelo chamado de novo para a acurácia": (
        "train_epoch",
        _train().replace("(logits.argmax(-1) == y)", "(model(x).argmax(-1) == y)"),
        "propriedade",
        "um-forward-por-lote",
        "",
    ),
    "passo à mão, sem optimizer.step()": (
        "train_epoch",
        _train().replace(
            "        optimizer.step()\n",
            "        with torch.no_grad():\n"
            "            for g in optimizer.param_groups:\n"
            "                for p in g['params']:\n"
            "                    p -= g['lr'] * p.grad\n",
        ),
        "propriedade",
        "passo-sem-optimizer-step",
        r"atualizados à mão",
    ),
    "só o forward, sem passo nem agendador": (
        "train_epoch",
        _train(zero="pass", before_step="pass", after_step="pass").replace("        optimizer.step()\n", ""),
        "propriedade",
        "sem_step",
        r"sem `optimizer.step\(\)`",
    ),
    "perda somada": (
        "train_epoch",
        _train().replace('"loss": total / n', '"loss": total'),
        "valores",
        "perda-soma",
        r"SOMA das perdas",
    ),
    "perda ponderada": (
        "train_epoch",
        _train().replace(
            "total, n = total + loss.item(), n + 1", "total, n = total + loss.item() * len(y), n + len(y)"
        ),
        "valores",
        "perda-media-ponderada",
        r"média ponderada pelo tamanho do lote",
    ),
    "acurácia em porcentagem": (
        "train_epoch",
        _train().replace("correct / seen", "100 * correct / seen"),
        "valores",
        "acuracia-em-porcento",
        r"porcentagem",
    ),
    # ------------------------------------------------ evaluate
    "avaliação sem eval()": (
        "evaluate",
        _eval(eval="pass"),
        "propriedade",
        "modo-de-avaliacao",
        r"model.eval\(\)",
    ),
    "avaliação sem no_grad": (
        "evaluate",
        _eval(ctx="torch.enable_grad()"),
        "propriedade",
        "sem-gradientes",
        r"no_grad",
    ),
    "modo não restaurado": (
        "evaluate",
        _eval(restore="pass"),
        "propriedade",
        "modo-restaurado",
        r"model.train",
    ),
    "sempre volta a treino": (
        "evaluate",
        _eval(restore="model.train()"),
        "propriedade",
        "modo-anterior-restaurado",
        r"modo ANTERIOR",
    ),
    "média simples na avaliação": (
        "evaluate",
        _eval(loss="sum(losses) / len(losses)"),
        "valores",
        "perda-media-simples",
        r"média por exemplo",
    ),
    "soma na avaliação": (
        "evaluate",
        _eval(loss="total"),
        "valores",
        "perda-sem-dividir-por-n",
        r"sem dividir pelo total de exemplos N",
    ),
}

# Guardas: respostas erradas que coincidem com um erro conhecido num caso, mas não noutro; o erro não
# pode ser nomeado (nome que não pode aparecer, id que a falha recebe: um fato medido, ou nenhum).
GUARDS = {
    # `step + 1` só na configuração do artigo: a curva coincide aqui, não nas outras configurações.
    "deslocada só com warmup_steps = 4000": (
        "noam_lr",
        _noam(s="step + 1 if warmup_steps == 4000 else max(step, 1)"),
        "deslocada",
        None,
    ),
    # O erro da issue: o valor minúsculo do passo 0 não é "a fórmula sem max(step, 1)".
    "warmup ** -3/2 não é 'sem max'": (
        "noam_lr",
        FOUND["warmup ** -3/2 (o da issue)"][1],
        "sem `max(step, 1)`",
        "aquecimento-menos-3-sobre-2",
    ),
    # A curva só no começo errada (depois de 3 passos, certa): nenhum erro nem parâmetro explica.
    "o passo 1 vale o dobro": (
        "noam_lr",
        _noam(lr=f"(2 if step == 1 else 1) * {RIGHT_LR}"),
        "deslocada",
        None,
    ),
    # Um step a mais só com d_model = 64: não se confirma no segundo caso (d_model = 32); o que se diz é
    # o deslocamento medido aqui, não o erro conhecido.
    "step a mais só com d_model = 64": (
        "make_warmup_scheduler",
        _sched(after="scheduler.step() if d_model == 64 else None"),
        "há um `scheduler.step()` a mais ou um `step + 1`",
        "passo-deslocado",
    ),
    # A fórmula errada está na função do LambdaLR, não na noam_lr (que está certa): nada de "noam_lr".
    "função própria errada": (
        "make_warmup_scheduler",
        _sched(fn="factor * min(max(step, 1)**-0.5, max(step, 1) * warmup_steps**-1.5)"),
        "o erro está em `noam_lr`",
        "funcao-sem-d_model",
    ),
    # Sem zero_grad só quando max_grad_norm = 0,5: o segundo caso (0,25) não o confirma.
    "sem zero_grad só com max_grad_norm = 0,5": (
        "train_epoch",
        _train(zero="optimizer.zero_grad() if max_grad_norm != 0.5 else None"),
        "SEM `zero_grad()`",
        "gradientes-zerados-antes-do-backward",
    ),
    # A perda dividida por 2: nenhum erro conhecido a reproduz; só onde o rastro diverge.
    "perda dividida por 2": (
        "train_epoch",
        _train().replace("loss.backward()", "(loss / 2).backward()"),
        "SEM",
        None,
    ),
    # O recorte pela norma L1: nenhum erro conhecido nem limite constante; só onde o rastro diverge.
    "recorte pela norma L1": (
        "train_epoch",
        _train(before_step=CLIP.replace("max_grad_norm)", "max_grad_norm, norm_type=1)")),
        "recorte",
        None,
    ),
    # A média simples só com 27 exemplos: o segundo caso (17 exemplos) não a confirma.
    "média simples só com 27 exemplos": (
        "evaluate",
        _eval(loss="sum(losses) / len(losses) if seen == 27 else total / seen"),
        "média simples",
        None,
    ),
}


def _define(code: str, name: str):
    namespace = {"__name__": "__main__", "torch": torch, "math": math, "nn": torch.nn}
    exec(code, namespace)  # noqa: S102 - a resposta errada, local
    return namespace[name]


def _first_failure(exercise, answer) -> tuple[str, CheckFailure]:
    for cell in exercise.cells:
        check = exercise.hidden if cell.hidden else exercise.visible
        with judging(LocalStudent(), OFFSET if cell.hidden else 0, []):
            try:
                check(answer)
            except CheckFailure as failure:
                return cell.grade_id, failure
    raise AssertionError("a resposta errada passou em todas as verificações")


def _cause(failure: CheckFailure) -> str:
    text = str(failure)
    return text.split("Diagnóstico provável: ", 1)[-1] if "Diagnóstico provável" in text else ""


@pytest.mark.parametrize("name", list(FOUND))
def test_each_wrong_answer_gets_its_confirmed_diagnosis(name):
    exercise, code, kind, key, pattern = FOUND[name]
    _, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert re.search(pattern, _cause(failure) or str(failure), re.S), str(failure)
    assert (failure.data["kind"], failure.data["mistake"]) == (kind, key), (failure.data, str(failure))
    assert failure.data["id"] == f"{exercise}/{kind}/{key}"


@pytest.mark.parametrize("name", list(GUARDS))
def test_a_mistake_is_never_named_when_it_does_not_reproduce_the_answer(name):
    exercise, code, wrong, right = GUARDS[name]
    _, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
    assert wrong not in _cause(failure), str(failure)
    assert failure.data.get("mistake") == right, (failure.data, str(failure))
    assert failure.data["id"].startswith(f"{exercise}/")


def test_every_failure_carries_a_stable_id():
    """O relatório da turma conta por ``id`` = exercício/tipo/erro: nunca uma frase inteira."""
    for exercise, code, *_ in list(FOUND.values()) + list(GUARDS.values()):
        _, failure = _first_failure(EXERCISES[exercise], _define(code, exercise))
        parts = failure.data["id"].split("/")
        assert parts[0] == exercise and len(parts) in (2, 3), failure.data
        assert all(len(p) <= 60 for p in parts), failure.data


# -------------------------------------------------------- as respostas certas, escritas de outro jeito


def noam_peak_form(step, d_model, warmup_steps, factor=1.0):
    if d_model <= 0 or warmup_steps <= 0 or step < 0:
        raise ValueError("d_model e warmup_steps positivos, step ≥ 0")
    s = max(step, 1)
    return factor * (d_model * warmup_steps) ** -0.5 * min(s / warmup_steps, (warmup_steps / s) ** 0.5)


def noam_pow(step, d_model, warmup_steps, factor=1.0):
    if min(d_model, warmup_steps) <= 0 or step < 0:
        raise ValueError("valores inválidos")
    s = float(step or 1)
    ramp, decay = s * math.pow(warmup_steps, -1.5), math.pow(s, -0.5)
    return factor / math.sqrt(d_model) * (ramp if ramp < decay else decay)


def noam_numpy(step, d_model, warmup_steps, factor=1.0):
    if d_model < 1 or warmup_steps < 1 or step < 0:
        raise ValueError("tamanhos inválidos")
    s = np.float64(max(step, 1))
    return float(factor * np.minimum(s**-0.5, s * warmup_steps**-1.5) / np.sqrt(d_model))


def sched_lambda_list(optimizer, d_model, warmup_steps, factor=1.0):
    from torch.optim.lr_scheduler import LambdaLR

    for group in optimizer.param_groups:
        group.update(lr=1.0, initial_lr=1.0)
    fn = lambda k: noam_pow(k, d_model, warmup_steps, factor)  # noqa: E731
    return LambdaLR(optimizer, lr_lambda=[fn] * len(optimizer.param_groups))


class _Noam:
    def __init__(self, d_model, warmup_steps, factor):
        self.args = (d_model, warmup_steps, factor)

    def __call__(self, step):
        return noam_peak_form(step, *self.args)


def sched_callable(optimizer, d_model, warmup_steps, factor=1.0):
    from torch.optim.lr_scheduler import LambdaLR

    for i in range(len(optimizer.param_groups)):
        optimizer.param_groups[i]["lr"] = 1.0
    return LambdaLR(optimizer, _Noam(d_model, warmup_steps, factor))


def train_other(model, loader, optimizer, scheduler, loss_fn, max_grad_norm=1.0):
    model.train(True)
    losses, hits, count = [], 0, 0
    optimizer.zero_grad(set_to_none=True)
    for _, (x, y) in enumerate(loader):
        out = model(x)
        logits = out[0] if isinstance(out, (tuple, list)) else out
        loss = loss_fn(logits, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(
            [p for g in optimizer.param_groups for p in g["params"]], max_grad_norm
        )
        optimizer.step()
        scheduler.step()
        model.zero_grad()
        losses.append(float(loss.detach()))
        with torch.no_grad():
            hits += int(logits.argmax(dim=1).eq(y).sum())
        count += y.shape[0]
    return {"loss": float(np.mean(losses)), "accuracy": hits / count}


def evaluate_other(model, loader, loss_fn):
    was = model.training
    model.eval()
    total, right, n = 0.0, 0, 0
    with torch.inference_mode():
        for x, y in loader:
            out = model(x)
            logits = out[0] if isinstance(out, tuple) else out
            total += torch.nn.functional.cross_entropy(logits, y, reduction="sum").item()
            right += (logits.argmax(-1) == y).sum().item()
            n += len(y)
    if was:
        model.train()
    return {"loss": total / n, "accuracy": right / n}


CORRECT = {
    "noam_lr": [noam_peak_form, noam_pow, noam_numpy],
    "make_warmup_scheduler": [sched_lambda_list, sched_callable],
    "train_epoch": [train_other],
    "evaluate": [evaluate_other],
}


@pytest.mark.parametrize("i", range(4))
def test_correct_answers_written_differently_keep_full_marks(i, capsys):
    """Nenhum diagnóstico novo derruba uma resposta certa escrita de outro jeito, nos testes visíveis e
    nos ocultos com as sementes de quatro entregas."""
    from transformer_course.instructor.judge import seed_offset

    offset = seed_offset(b"diagnostico", f"aluno-{i}", CHAPTER, "oculto")
    for name, answers in CORRECT.items():
        for fn in answers:
            EXERCISES[name].visible(fn)
            with judging(LocalStudent(), offset, []):
                EXERCISES[name].hidden(fn)
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- no juiz: a mesma mensagem, os mesmos dados


@pytest.fixture(scope="module")
def kernel():
    with StudentKernel() as k:
        yield k


def _without_line(message: str) -> str:
    return re.sub(r" \(linha \d+: `[^`]*`\)", "", message)


REMOTE = [
    "warmup ** -3/2 (o da issue)",
    "warmup_steps + 1 (o pico um passo adiante)",
    "d_model ** 0.5",
    "noam_lr errada, o agendador a segue",
    "noam_lr sem max, o LambdaLR levanta na criação",
    "função própria com ** -3/2 (a noam_lr está certa)",
    "a primeira taxa é 0",
    "a função devolve a taxa dividida pela do 1º grupo",
    "recorte com o dobro do limite",
    "zero_grad a cada dois lotes",
    "perda vezes o tamanho do lote",
    "média simples na avaliação",
]


@pytest.mark.parametrize("name", REMOTE)
def test_the_judge_gives_the_same_diagnosis(kernel, name):
    exercise, code, kind, key, _ = FOUND[name]
    grade_id, local = _first_failure(EXERCISES[exercise], _define(code, exercise))
    kernel.run(code)
    verdict = judge_cell(CHAPTER, grade_id, kernel.student(), OFFSET)
    assert verdict.status == "falhou" and verdict.points == 0, verdict.message
    assert _without_line(verdict.message) == _without_line(str(local))
    assert verdict.diagnosis["id"] == f"{exercise}/{kind}/{key}" == local.data["id"]


def test_tuple_hint_only_when_the_tuple_is_the_cause():
    """Uma exceção no caso do modelo que devolve tupla só ouve "use out[0]" se a mesma resposta roda com
    um modelo que devolve só os logits; a exceção que vem de outro lugar sai sem essa dica."""
    crash = _define(_train(train='raise ValueError("outro problema")'), "train_epoch")
    with judging(LocalStudent(), OFFSET, []), pytest.raises(CheckFailure) as info:
        EXERCISES["train_epoch"].hidden(crash)
    assert "tupla" not in str(info.value) and "mistake" not in info.value.data, str(info.value)
    no_tuple = _define(_train(logits="out"), "train_epoch")
    with judging(LocalStudent(), OFFSET, []), pytest.raises(CheckFailure) as info:
        EXERCISES["train_epoch"].hidden(no_tuple)
    assert info.value.data["id"] == "train_epoch/excecao/modelo-devolve-tupla", str(info.value)


@pytest.mark.parametrize("name", ["função própria errada", "sem zero_grad só com max_grad_norm = 0,5"])
def test_the_judge_never_names_what_the_local_check_does_not(kernel, name):
    """As guardas também no juiz: a mesma falha, sem o erro que não se confirma (nem a `noam_lr` certa)."""
    exercise, code, wrong, right = GUARDS[name]
    grade_id, local = _first_failure(EXERCISES[exercise], _define(code, exercise))
    kernel.run(code)
    verdict = judge_cell(CHAPTER, grade_id, kernel.student(), OFFSET)
    assert verdict.status == "falhou" and verdict.points == 0, verdict.message
    assert _without_line(verdict.message) == _without_line(str(local))
    assert wrong not in verdict.message
    assert verdict.diagnosis["id"] == local.data["id"] == f"{exercise}/{local.data['kind']}/{right}"
