"""Geração autorregressiva e um GPT minúsculo, só decodificador (capítulo 7).

- :func:`generate`: gulosa (temperatura 0), com temperatura e com top-k.
- :class:`TinyGPT`: *embedding* de tokens e de posições, N blocos ``EncoderLayer``
  com máscara causal (um bloco de decodificador sem atenção cruzada), LayerNorm final
  e a projeção para o vocabulário.
- :func:`train_gpt`: o laço de treino, com orçamento de passos e de tempo.

Formas: B lote, T comprimento, D d_model, V vocabulário.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .layers import EncoderLayer
from .masks import causal_mask

__all__ = [
    "GPTConfig",
    "TinyGPT",
    "estimate_loss",
    "generate",
    "next_token_distribution",
    "train_gpt",
    "training_report",
]


def next_token_distribution(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None
) -> torch.Tensor:
    """Probabilidades do próximo token a partir dos logits da última posição.

    Temperatura 0 devolve o *one-hot* do argmax (a escolha gulosa).

    Formas:
        logits (..., V) -> probabilidades (..., V)
    """
    if temperature < 0:
        raise ValueError(f"temperature deve ser >= 0; recebida {temperature}.")
    if top_k is not None and top_k <= 0:
        raise ValueError(f"top_k deve ser positivo; recebido {top_k}.")
    if temperature == 0:
        return F.one_hot(logits.argmax(dim=-1), logits.size(-1)).to(logits.dtype)
    logits = logits / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1): o k-ésimo maior
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return logits.softmax(dim=-1)


@torch.no_grad()
def generate(
    model: nn.Module,
    prompt_ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Acrescenta ``max_new_tokens`` tokens ao ``prompt_ids``, um de cada vez.

    ``model(ids)`` devolve logits (B, T, V); só a última posição importa. A temperatura
    divide os logits antes do softmax; 0 é a escolha gulosa (argmax). ``top_k`` mantém os
    k maiores logits. O contexto é cortado nos últimos ``model.max_len`` tokens.

    Formas:
        prompt_ids (B, T0) -> (B, T0 + max_new_tokens), LongTensor
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens deve ser >= 0; recebido {max_new_tokens}.")
    max_len = getattr(model, "max_len", None)
    ids = prompt_ids
    for _ in range(max_new_tokens):
        context = ids if max_len is None else ids[:, -max_len:]
        logits = model(context)
        logits = logits[0] if isinstance(logits, tuple) else logits
        probs = next_token_distribution(logits[:, -1, :], temperature, top_k)  # (B, V)
        if temperature == 0:
            nxt = probs.argmax(dim=-1, keepdim=True)  # (B, 1)
        else:
            nxt = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
        ids = torch.cat([ids, nxt.to(ids.dtype)], dim=1)  # (B, T) -> (B, T + 1)
    return ids


@dataclass(frozen=True)
class GPTConfig:
    """Tamanho do GPT de caracteres."""

    vocab_size: int  # número de caracteres distintos
    max_len: int = 64  # contexto máximo (tokens que o modelo enxerga)
    d_model: int = 96  # largura do fluxo residual
    n_heads: int = 4  # cabeças de atenção (d_k = d_model / n_heads)
    n_layers: int = 2  # blocos empilhados
    d_ff: int = 384  # largura da FFN (4 × d_model)
    dropout: float = 0.0  # pouco treino, modelo pequeno: sem dropout
    tie_weights: bool = False  # a projeção de saída reusa a matriz do embedding de tokens (GPT-2)


class TinyGPT(nn.Module):
    """GPT só decodificador: cada posição vê apenas as anteriores (máscara causal).

    Formas:
        ids (B, T), T <= max_len -> logits (B, T, V)
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config, self.max_len = config, config.max_len
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embedding = nn.Embedding(config.max_len, config.d_model)
        self.blocks = nn.ModuleList(
            EncoderLayer(config.d_model, config.n_heads, config.d_ff, config.dropout, norm_first=True)
            for _ in range(config.n_layers)
        )
        self.norm = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(self._init)
        if config.tie_weights:
            self.head.weight = self.token_embedding.weight  # (V, D): a mesma matriz nos dois lugares

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        B, T = ids.shape
        if T > self.max_len:
            raise ValueError(f"sequência de comprimento {T} maior que max_len = {self.max_len}.")
        positions = torch.arange(T, device=ids.device)
        x = self.token_embedding(ids) + self.position_embedding(positions)  # (B, T) -> (B, T, D)
        mask = causal_mask(T, ids.device)  # (T, T)
        for block in self.blocks:
            x, _ = block(x, mask)
        return self.head(self.norm(x))  # (B, T, D) -> (B, T, V)


@torch.no_grad()
def estimate_loss(
    model: nn.Module,
    data: torch.Tensor,
    block_size: int,
    n_batches: int = 4,
    batch_size: int = 64,
    seed: int = 1234,
) -> float:
    """Entropia cruzada média (nats por caractere) em lotes fixos de ``data``."""
    from .text import get_batch

    was_training = model.training
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    losses = []
    for _ in range(n_batches):
        x, y = get_batch(data, block_size, batch_size, gen, device)
        logits = model(x)
        losses.append(F.cross_entropy(logits.flatten(0, 1), y.flatten()).item())
    model.train(was_training)
    return sum(losses) / len(losses)


def train_gpt(
    model: nn.Module,
    train_data: torch.Tensor,
    val_data: torch.Tensor,
    max_steps: int = 600,
    max_seconds: float = 60.0,
    batch_size: int = 32,
    lr: float = 3e-3,
    eval_every: int = 50,
    seed: int = 0,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.999),
    warmup_fraction: float = 0.05,
    min_lr_ratio: float = 0.1,
) -> dict[str, list[float]]:
    """Treina com AdamW, aquecimento linear e decaimento cosseno, parando em ``max_steps`` ou ``max_seconds``.

    O agendamento anda com o que acabar primeiro: a fração é ``max(passo / max_steps,
    tempo / max_seconds)``. Numa máquina livre, os passos acabam antes e o agendamento é o de
    sempre; numa máquina ocupada, o tempo manda e a taxa ainda chega ao fim do cosseno (um treino
    cortado no meio, com a taxa ainda alta, termina bem pior).

    Devolve o histórico: ``step``, ``train_loss`` (média desde a última avaliação),
    ``val_loss``, ``seconds``; em ``total_seconds`` o tempo total, em ``max_steps`` o orçamento de
    passos e em ``cut_by_time`` 1.0 se o limite de tempo parou o treino antes do orçamento.
    """
    device = next(model.parameters()).device
    from .text import get_batch

    gen = torch.Generator().manual_seed(seed)
    # Sem decaimento de pesos nos vetores (vieses, LayerNorm), como no nanoGPT.
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=betas,
    )
    warmup = max(1.0, warmup_fraction * max_steps)

    def schedule(step: int, elapsed: float) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, max(step / max_steps, elapsed / max_seconds))
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    history: dict[str, list[float]] = {"step": [], "train_loss": [], "val_loss": [], "seconds": []}
    start, running = time.perf_counter(), []
    history["step"].append(0)
    history["train_loss"].append(float("nan"))
    history["val_loss"].append(estimate_loss(model, val_data, model.max_len))
    history["seconds"].append(0.0)
    model.train()
    step = 0
    for step in range(1, max_steps + 1):
        for group in optimizer.param_groups:
            group["lr"] = lr * schedule(step - 1, time.perf_counter() - start)
        x, y = get_batch(train_data, model.max_len, batch_size, gen, device)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        running.append(loss.item())
        out_of_time = time.perf_counter() - start > max_seconds
        if step % eval_every == 0 or step == max_steps or out_of_time:
            history["step"].append(step)
            history["train_loss"].append(sum(running) / len(running))
            history["val_loss"].append(estimate_loss(model, val_data, model.max_len))
            history["seconds"].append(time.perf_counter() - start)
            running = []
        if out_of_time:
            break
    model.eval()
    history["total_seconds"] = [time.perf_counter() - start]
    history["max_steps"] = [float(max_steps)]
    history["cut_by_time"] = [float(step < max_steps)]
    return history


def training_report(history: dict[str, list[float]], reference: dict | None = None) -> str:
    """Uma frase honesta sobre o treino: passos, tempo, perda e se o limite de tempo o cortou.

    ``reference``: uma rodada de referência gravada com o orçamento inteiro, por exemplo
    ``{"val_loss": 1.6, "seconds": 40, "where": "máquina de 2 núcleos livre"}``.
    """
    steps, total = int(history["step"][-1]), history["total_seconds"][0]
    planned = int(history.get("max_steps", [steps])[0])
    text = f"{steps} passos em {total:.1f} s; validação {history['val_loss'][-1]:.3f} nats/caractere"
    if history.get("cut_by_time", [0.0])[0]:
        text += (
            f"\nATENÇÃO: o limite de tempo cortou o treino em {steps} de {planned} passos "
            "(máquina lenta ou ocupada); a perda fica acima da do orçamento inteiro."
        )
        if reference:
            text += (
                f"\nReferência gravada: os {planned} passos chegam a {reference['val_loss']:.2f} "
                f"nats/caractere em {reference['seconds']:.0f} s ({reference['where']})."
            )
    return text
