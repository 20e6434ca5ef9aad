"""Experimentos do capítulo 4: Pre-LN × Post-LN na inicialização.

Pilhas de :class:`~transformer_course.layers.EncoderLayer` com pesos de Xavier, medidas sem
nenhum passo de treino: a norma do gradiente de W² (``ffn.linear2.weight``) de cada camada e a
norma do fluxo residual ao longo da pilha. As figuras (``plots.ch04``) e o widget
(``widgets.ch04``) desenham o que estas funções devolvem.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..layers import EncoderLayer
from ..runtime import one_thread, seeded_generator, single_threaded

__all__ = ["gradient_norms_at_init", "ln_gradient_experiment", "residual_norms_at_init"]


def _xavier_stack(depth, norm_first, d_model, n_heads, d_ff, gen, pool=None) -> nn.ModuleList:
    """``depth`` camadas com matrizes Xavier uniformes (sorteadas por ``gen``) e vieses 0.

    Com ``pool`` (camadas já construídas com a mesma configuração), reaproveita as primeiras
    ``depth`` em vez de construir outras: os mesmos sorteios, na mesma ordem, dão os mesmos
    pesos; só se economiza a inicialização padrão do PyTorch, que seria toda sobrescrita.
    """
    if pool is None:
        layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, 0.0, norm_first) for _ in range(depth))
    else:
        layers = pool[:depth]
    with torch.no_grad():
        for name, p in layers.named_parameters():
            p.grad = None
            if p.dim() > 1:
                bound = math.sqrt(6.0 / (p.size(0) + p.size(1)))
                p.uniform_(-bound, bound, generator=gen)
            elif "norm" in name and name.endswith("weight"):  # as LayerNorms: ganho 1 e viés 0
                p.fill_(1.0)
            else:
                p.zero_()
    return layers


def gradient_norms_at_init(
    depth: int,
    norm_first: bool,
    d_model: int = 64,
    n_heads: int = 4,
    d_ff: int = 256,
    seq_len: int = 16,
    batch: int = 4,
    vocab_size: int = 100,
    seed: int = 0,
    _pool: nn.ModuleList | None = None,
) -> torch.Tensor:
    """Norma do gradiente de W² (``ffn.linear2.weight``) de cada camada, na inicialização.

    Inspirado no experimento de Xiong et al. (2020), em escala pequena (o perfil camada a camada
    difere do da figura 3 do artigo; a última camada segue o teorema 1): uma pilha de ``depth``
    :class:`EncoderLayer` com matrizes iniciadas por Xavier, entradas N(0, 1), uma leitura linear
    para ``vocab_size`` classes e a entropia cruzada contra alvos sorteados. Pre-LN leva a
    LayerNorm final (como em todo modelo Pre-LN); Post-LN não precisa dela. Nenhum passo de
    otimização é dado.

    Formas:
        devolve: (depth,) — ‖∂L/∂W²ₗ‖_F para l = 1..depth (camada 1 = a mais perto da entrada)
    """
    gen = seeded_generator(seed)
    layers = _xavier_stack(depth, norm_first, d_model, n_heads, d_ff, gen, _pool)
    head = nn.Linear(d_model, vocab_size)
    with torch.no_grad():
        bound = math.sqrt(6.0 / (vocab_size + d_model))
        head.weight.uniform_(-bound, bound, generator=gen)
        head.bias.zero_()
    final = nn.LayerNorm(d_model) if norm_first else nn.Identity()
    x = torch.randn(batch, seq_len, d_model, generator=gen)
    target = torch.randint(0, vocab_size, (batch, seq_len), generator=gen)
    for layer in layers:
        x, _ = layer(x)
    logits = head(final(x))  # (B, T, D) -> (B, T, V)
    F.cross_entropy(logits.flatten(0, 1), target.flatten()).backward()
    return torch.stack([layer.ffn.linear2.weight.grad.norm() for layer in layers]).detach()


@single_threaded
@torch.no_grad()
def residual_norms_at_init(
    depth: int,
    norm_first: bool,
    d_model: int = 64,
    n_heads: int = 4,
    d_ff: int = 256,
    seq_len: int = 16,
    batch: int = 4,
    seed: int = 0,
) -> torch.Tensor:
    """Norma média de x por posição antes da pilha e depois de cada camada, na inicialização.

    Formas:
        devolve: (depth + 1,) — índice 0 = a entrada
    """
    gen = seeded_generator(seed)
    layers = _xavier_stack(depth, norm_first, d_model, n_heads, d_ff, gen)
    x = torch.randn(batch, seq_len, d_model, generator=gen)
    norms = [x.norm(dim=-1).mean()]
    for layer in layers:
        x, _ = layer(x)
        norms.append(x.norm(dim=-1).mean())
    return torch.stack(norms)


def ln_gradient_experiment(
    max_depth: int = 12, n_seeds: int = 3, **kwargs
) -> dict[tuple[bool, int], torch.Tensor]:
    """:func:`gradient_norms_at_init` para todas as profundidades 1..``max_depth``, Pre-LN e
    Post-LN, na média de ``n_seeds`` sementes.

    Roda com uma thread só (tensores pequenos: mais threads só disputam a CPU).

    Returns:
        dicionário ``(norm_first, depth) -> tensor (depth,)`` com a norma média por camada.
    """
    results = {}
    size = {"d_model": 64, "n_heads": 4, "d_ff": 256}  # os padrões de gradient_norms_at_init
    size |= {k: v for k, v in kwargs.items() if k in size}
    with one_thread():
        for norm_first in (False, True):
            # as camadas são construídas uma vez por arranjo e reiniciadas (com a semente) a cada medida
            pool = nn.ModuleList(EncoderLayer(**size, norm_first=norm_first) for _ in range(max_depth))
            for depth in range(1, max_depth + 1):
                runs = [
                    gradient_norms_at_init(depth, norm_first, seed=seed, _pool=pool, **kwargs)
                    for seed in range(n_seeds)
                ]
                results[(norm_first, depth)] = torch.stack(runs).mean(dim=0)
    return results
