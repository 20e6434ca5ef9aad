"""Treino de um *Transformer* (capítulo 6): o agendamento de Noam, o laço de treino e a avaliação.

Referências do pacote para os exercícios ``noam_lr``, ``make_warmup_scheduler``, ``train_epoch``
e ``evaluate`` (o mesmo código das respostas-modelo do notebook do capítulo 6), mais o que o
experimento "com e sem aquecimento (*warm-up*)" usa do agendamento: ``noam_peak``,
``no_warmup_lr`` e os hiperparâmetros do Adam do artigo. O treino de várias épocas (``fit``) e o
experimento ficam em ``transformer_course.experiments.ch06``.

O agendamento (Vaswani et al., 2017, seção 5.3)::

    lr(passo) = factor · d_model^-0.5 · min(passo^-0.5, passo · warmup_steps^-1.5)

sobe em linha reta até ``warmup_steps``, onde vale ``factor · (d_model · warmup_steps)^-0.5``,
e depois cai como 1/√passo. O passo 0 conta como passo 1 (senão 0^-0.5 divide por zero).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

__all__ = [
    "ADAM_BETAS",
    "ADAM_EPS",
    "evaluate",
    "make_warmup_scheduler",
    "noam_lr",
    "noam_peak",
    "no_warmup_lr",
    "train_epoch",
]

ADAM_BETAS = (0.9, 0.98)  # os do artigo original (seção 5.3)
ADAM_EPS = 1e-9


# ---------------------------------------------------------------- o agendamento


def _check_sizes(d_model: int, warmup_steps: int) -> None:
    if d_model <= 0 or warmup_steps <= 0:
        raise ValueError(f"d_model e warmup_steps devem ser positivos; recebidos {d_model} e {warmup_steps}.")


def noam_lr(step, d_model, warmup_steps, factor=1.0):
    """Taxa de aprendizado de Noam no passo ``step`` (o passo 0 conta como passo 1).

    Raises:
        ValueError: se ``d_model`` ou ``warmup_steps`` não forem positivos, ou ``step`` < 0.
    """
    if d_model <= 0 or warmup_steps <= 0:
        raise ValueError(f"d_model e warmup_steps devem ser positivos; recebidos {d_model} e {warmup_steps}.")
    if step < 0:
        raise ValueError(f"step não pode ser negativo; recebido {step}.")
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def noam_peak(d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """O pico do agendamento de Noam, atingido no passo ``warmup_steps``: factor·(D·w)^-0.5."""
    _check_sizes(d_model, warmup_steps)
    return factor * (d_model * warmup_steps) ** -0.5


def no_warmup_lr(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """O mesmo agendamento sem a rampa: começa no pico e segue igual ao Noam depois dele.

    lr(passo) = factor · d_model^-0.5 · min(warmup_steps^-0.5, passo^-0.5). Serve de controle
    no experimento: as duas curvas só diferem nos primeiros ``warmup_steps`` passos.
    """
    _check_sizes(d_model, warmup_steps)
    step = max(step, 1)
    return factor * d_model**-0.5 * min(warmup_steps**-0.5, step**-0.5)


def make_warmup_scheduler(optimizer, d_model, warmup_steps, factor=1.0):
    """Envolve ``optimizer`` num ``LambdaLR`` que segue ``noam_lr``.

    Põe 1.0 como taxa base de todo grupo de parâmetros, ANTES de criar o agendador: o
    ``LambdaLR`` guarda a taxa base ao ser criado e multiplica-a pelo valor da função, então,
    depois de k chamadas de ``scheduler.step()``, a taxa é exatamente ``noam_lr(k, ...)``,
    qualquer que fosse o ``lr`` com que o otimizador foi criado. Tamanhos inválidos levantam
    ``ValueError`` já na criação (o ``LambdaLR`` chama ``noam_lr`` com o passo 0).
    """
    for group in optimizer.param_groups:
        group["lr"] = 1.0
        group["initial_lr"] = 1.0  # o LambdaLR lê a taxa base daqui se o otimizador já teve um agendador
    return LambdaLR(optimizer, lambda step: noam_lr(step, d_model, warmup_steps, factor))


# ---------------------------------------------------------------- treino e avaliação


def train_epoch(model, loader, optimizer, scheduler, loss_fn, max_grad_norm=1.0):
    """Uma época de treino; devolve ``{"loss": média das perdas dos lotes, "accuracy": acertos/total}``.

    A perda da época é a média simples dos lotes: cada uma é de um passo diferente, com pesos
    diferentes, e a média só resume a curva da época (a avaliação, ``evaluate``, pondera pelo
    tamanho do lote). Em cada lote, nesta ordem: zero_grad, forward, perda, backward, recorte da
    norma do gradiente (*gradient clipping*) com ``max_grad_norm``, passo do otimizador e, por fim,
    passo do agendador. O modelo pode devolver os logits ou uma tupla cujo primeiro elemento são os logits.
    """
    model.train()
    device = next(model.parameters()).device
    total_loss, n_batches, correct, seen = 0.0, 0, 0, 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        out = model(x)
        logits = out[0] if isinstance(out, (tuple, list)) else out  # (B, C)
        loss = loss_fn(logits, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        scheduler.step()
        total_loss, n_batches = total_loss + loss.item(), n_batches + 1
        correct += (logits.argmax(dim=-1) == y).sum().item()
        seen += y.numel()
    return {"loss": total_loss / n_batches, "accuracy": correct / seen}


def evaluate(model, loader, loss_fn):
    """Perda média **por exemplo** e acurácia, em modo de avaliação e sem gradientes.

    ``loss_fn`` devolve a média de cada lote; a perda devolvida é Σ perda_b · B_b / N (a média do
    lote vezes o tamanho dele, somada sobre os lotes, dividida pelo total de exemplos). Assim o
    resultado não depende de como os lotes foram cortados: a média simples das perdas dos lotes
    daria peso maior a cada exemplo de um último lote menor. Devolve o modelo ao modo em que
    estava (treino ou avaliação).
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total_loss, correct, seen = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            out = model(x)
            logits = out[0] if isinstance(out, (tuple, list)) else out  # (B, C)
            total_loss += loss_fn(logits, y).item() * y.numel()  # a média do lote × o tamanho do lote
            correct += (logits.argmax(dim=-1) == y).sum().item()
            seen += y.numel()
    model.train(was_training)
    return {"loss": total_loss / seen, "accuracy": correct / seen}
