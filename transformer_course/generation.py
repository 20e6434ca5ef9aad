"""Geração autorregressiva e um GPT minúsculo, só decodificador (capítulo 7).

- :func:`generate`: gulosa (temperatura 0), com temperatura e com top-k.
- :class:`TinyGPT`: *embedding* de tokens e de posições, N blocos ``EncoderLayer``
  com máscara causal (um bloco de decodificador sem atenção cruzada), LayerNorm final
  e a projeção para o vocabulário.
- :func:`next_token_distribution`: as probabilidades do próximo token (temperatura e top-k),
  para as figuras e o widget.

O treino do ``TinyGPT`` (com orçamento de passos e de tempo) fica em ``experiments.ch07``.

Formas: B lote, T comprimento, D d_model, V vocabulário.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .layers import EncoderLayer
from .masks import causal_mask

__all__ = ["GPTConfig", "TinyGPT", "generate", "next_token_distribution"]


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


def generate(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    """Acrescenta ``max_new_tokens`` tokens ao ``prompt_ids``, um de cada vez.

    ``model(ids)`` devolve logits (B, T, V); só a última posição importa. A temperatura
    divide os logits antes do softmax; 0 é a escolha gulosa (argmax). ``top_k`` mantém os
    k maiores logits (todos, se passar do vocabulário). Com ``generator`` dado, o sorteio usa só
    ele (a mesma semente dá o mesmo texto, e o gerador global não é tocado); com ``None``, o
    ``torch.multinomial`` usa o gerador global. Se o modelo tiver ``max_len``, o contexto é cortado
    nos últimos ``max_len`` tokens.

    Formas:
        prompt_ids (B, T0) -> (B, T0 + max_new_tokens), LongTensor
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens deve ser >= 0; recebido {max_new_tokens}.")
    if temperature < 0:
        raise ValueError(f"temperature deve ser >= 0; recebida {temperature}.")
    max_len = getattr(model, "max_len", None)
    ids = prompt_ids
    for _ in range(max_new_tokens):
        context = ids if max_len is None else ids[:, -max_len:]
        with torch.no_grad():
            logits = model(context)[:, -1, :]  # (B, T, V) -> (B, V)
        if temperature == 0:
            nxt = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        else:
            logits = logits / temperature
            if top_k is not None:
                kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]  # (B, 1)
                logits = logits.masked_fill(logits < kth, float("-inf"))
            nxt = torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)  # (B, 1)
        ids = torch.cat([ids, nxt], dim=1)  # (B, T) -> (B, T + 1)
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
