"""Camadas do *Transformer* (capítulo 4): FFN, camadas do codificador e do decodificador,
a pilha do codificador e um classificador de sequências.

Formas: B lote, T comprimento (alvo, no decodificador), S comprimento da fonte (memória),
D d_model, H cabeças, F d_ff, V vocabulário, C classes.
Máscaras booleanas, True = pode atender (as de ``transformer_course.masks``):
2-D (T, T), 3-D (B, T, T) ou 4-D (B, 1, T, T) / (B, 1, 1, S), passadas como estão à atenção.

Com ``dropout=0``, ``EncoderLayer`` e ``DecoderLayer`` dão o mesmo resultado que
``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` (``batch_first=True``,
``activation="gelu"``, o mesmo ``norm_first``) carregando os mesmos pesos: veja
:func:`load_encoder_layer_from_torch` e :func:`load_decoder_layer_from_torch`.
O dropout fica onde o PyTorch o põe, e só uma vez: entre a GELU e ``linear2`` dentro da FFN,
sobre os pesos dentro da atenção e sobre a saída de cada subcamada antes da soma residual.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import nn
from torch.nn import functional as F

from .masks import padding_mask
from .multihead import MultiHeadAttention

__all__ = [
    "DecoderLayer",
    "EncoderLayer",
    "FeedForward",
    "TransformerClassifier",
    "TransformerEncoder",
    "gradient_norms_at_init",
    "ln_gradient_experiment",
    "residual_norms_at_init",
]


class FeedForward(nn.Module):
    """Rede *feed-forward* aplicada posição a posição: linear2(dropout(GELU(linear1(x)))).

    Formas:
        x: (..., D) -> (..., D); internamente (..., F)
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        if d_model <= 0 or d_ff <= 0:
            raise ValueError(f"d_model e d_ff devem ser positivos; recebidos {d_model} e {d_ff}.")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.linear1(x))  # (..., D) -> (..., F)
        return self.linear2(self.dropout(h))  # (..., F) -> (..., D)


class EncoderLayer(nn.Module):
    """Uma camada do codificador: autoatenção e FFN, cada uma com conexão residual e LayerNorm.

    Pre-LN (``norm_first=True``):  x = x + SA(LN₁(x));  x = x + FFN(LN₂(x))
    Post-LN (``norm_first=False``): x = LN₁(x + SA(x));  x = LN₂(x + FFN(x))

    Formas:
        x: (B, T, D); mask: booleana difundível para (B, H, T, T)
        devolve: x (B, T, D) e weights (B, H, T, T)
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _sa(self, x, mask):
        out, weights = self.self_attn(x, x, x, mask)
        return self.dropout1(out), weights

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if self.norm_first:
            out, weights = self._sa(self.norm1(x), mask)
            x = x + out
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            out, weights = self._sa(x, mask)
            x = self.norm1(x + out)
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x, weights


class DecoderLayer(nn.Module):
    """Uma camada do decodificador: autoatenção mascarada, atenção cruzada e FFN.

    Na atenção cruzada, Q vem do decodificador e K, V vêm da memória (a saída do
    codificador), que nunca é normalizada aqui.

    Pre-LN:  x = x + SA(LN₁(x));  x = x + CA(LN₂(x), mem);  x = x + FFN(LN₃(x))
    Post-LN: x = LN₁(x + SA(x));  x = LN₂(x + CA(x, mem));  x = LN₃(x + FFN(x))

    Formas:
        x: (B, T, D); memory: (B, S, D)
        tgt_mask difundível para (B, H, T, T); memory_mask difundível para (B, H, T, S) — uma
        máscara só, True = pode atender (o padding da fonte entra como (B, 1, 1, S); no
        ``nn.TransformerDecoderLayer`` ele vai em ``memory_key_padding_mask`` (B, S), True = pad)
        devolve: x (B, T, D), self_weights (B, H, T, T), cross_weights (B, H, T, S)
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        def sa(h):
            out, w = self.self_attn(h, h, h, tgt_mask)
            return self.dropout1(out), w

        def ca(h):
            out, w = self.cross_attn(h, memory, memory, memory_mask)
            return self.dropout2(out), w

        if self.norm_first:
            out, self_weights = sa(self.norm1(x))
            x = x + out
            out, cross_weights = ca(self.norm2(x))
            x = x + out
            x = x + self.dropout3(self.ffn(self.norm3(x)))
        else:
            out, self_weights = sa(x)
            x = self.norm1(x + out)
            out, cross_weights = ca(x)
            x = self.norm2(x + out)
            x = self.norm3(x + self.dropout3(self.ffn(x)))
        return x, self_weights, cross_weights


# ---------------------------------------------------------------- a pilha e o classificador


def _sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(o mesmo): (max_len, D)."""
    try:  # a versão do capítulo 1, quando existir
        from .positional import sinusoidal_encoding
    except ImportError:
        sinusoidal_encoding = None
    if sinusoidal_encoding is not None:
        return sinusoidal_encoding(max_len, d_model)
    if d_model <= 0 or d_model % 2 or max_len <= 0:
        raise ValueError(
            f"precisa de d_model par e positivo e max_len positivo; "
            f"recebidos d_model = {d_model}, max_len = {max_len}."
        )
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe.float()


class TransformerEncoder(nn.Module):
    """Pilha de codificadores: *embedding* × √D + posição senoidal, N camadas e LayerNorm final.

    O dropout é aplicado uma vez só depois de somar a posição (não duas, como no texto-semente).
    A máscara de *padding* tem uma única forma, (B, 1, 1, T), e é passada como está às camadas.

    Formas:
        token_ids: (B, T) inteiros; attn_mask opcional (T, T) ou (B, 1, T, T), True = pode atender,
        combinada (E lógico) com a máscara de padding — p. ex. ``causal_mask(T)`` para um GPT
        devolve: x (B, T, D) e a lista, uma por camada, dos pesos (B, H, T, T)
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        n_heads: int,
        n_layers: int,
        d_ff: int,
        max_len: int = 512,
        dropout: float = 0.0,
        norm_first: bool = True,
        pad_id: int = 0,
    ):
        super().__init__()
        if n_layers <= 0:
            raise ValueError(f"n_layers deve ser positivo; recebido {n_layers}.")
        self.d_model, self.max_len, self.pad_id = d_model, max_len, pad_id
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        # Com desvio D^-1/2, o embedding × √D tem variância 1, a mesma escala da posição senoidal.
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)
        with torch.no_grad():
            self.embedding.weight[pad_id].zero_()
        self.register_buffer("pe", _sinusoidal_table(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model)

    def forward(
        self, token_ids: torch.Tensor, attn_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        B, T = token_ids.shape
        if T > self.max_len:
            raise ValueError(f"sequência de comprimento {T} maior que max_len = {self.max_len}.")
        real = token_ids != self.pad_id  # (B, T)
        mask = padding_mask(token_ids, self.pad_id)  # (B, 1, 1, T)
        # Uma sequência só de padding atenderia a nada (linha toda -inf, NaN): deixamos ver tudo.
        mask = mask | ~real.any(dim=-1)[:, None, None, None]
        if attn_mask is not None:
            mask = mask & attn_mask  # -> (B, 1, T, T)
        x = self.embedding(token_ids) * math.sqrt(self.d_model)  # (B, T) -> (B, T, D)
        x = self.dropout(x + self.pe[:T].to(x.dtype))
        all_weights = []
        for layer in self.layers:
            x, weights = layer(x, mask)
            all_weights.append(weights)
        return self.norm(x), all_weights


class TransformerClassifier(nn.Module):
    """Classificador de sequências: :class:`TransformerEncoder`, média dos tokens reais e uma linear.

    A média (*mean pooling*) ignora o *padding*: soma só as posições reais e divide pelo
    número delas.

    Formas:
        token_ids: (B, T) -> logits (B, C) e a lista dos pesos de atenção (B, H, T, T) por camada
    """

    def __init__(
        self,
        vocab_size: int,
        n_classes: int,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 256,
        max_len: int = 128,
        dropout: float = 0.1,
        norm_first: bool = True,
        pad_id: int = 0,
    ):
        super().__init__()
        self.pad_id = pad_id
        self.encoder = TransformerEncoder(
            vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout, norm_first, pad_id
        )
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, token_ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        x, all_weights = self.encoder(token_ids)  # (B, T) -> (B, T, D)
        real = (token_ids != self.pad_id).unsqueeze(-1).to(x.dtype)  # (B, T, 1)
        pooled = (x * real).sum(dim=1) / real.sum(dim=1).clamp(min=1.0)  # (B, T, D) -> (B, D)
        return self.head(self.dropout(pooled)), all_weights  # (B, D) -> (B, C)


# ---------------------------------------------------------------- Pre-LN × Post-LN na inicialização


@contextlib.contextmanager
def _one_thread():
    """Uma thread só durante o bloco: com tensores pequenos, mais threads só disputam a CPU."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _xavier_stack(depth, norm_first, d_model, n_heads, d_ff, gen) -> nn.ModuleList:
    """``depth`` camadas com matrizes Xavier uniformes (sorteadas por ``gen``) e vieses 0."""
    layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, 0.0, norm_first) for _ in range(depth))
    with torch.no_grad():
        for name, p in layers.named_parameters():
            if p.dim() > 1:
                bound = math.sqrt(6.0 / (p.size(0) + p.size(1)))
                p.uniform_(-bound, bound, generator=gen)
            elif "norm" not in name:  # as LayerNorms ficam com ganho 1 e viés 0
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
) -> torch.Tensor:
    """Norma do gradiente de W² (``ffn.linear2.weight``) de cada camada, na inicialização.

    Inspirado no experimento de Xiong et al. (2020), em escala pequena (o perfil camada a camada
    difere do da figura 3 do artigo; a última camada segue o teorema 1): uma pilha de ``depth``
    :class:`EncoderLayer` com
    matrizes iniciadas por Xavier, entradas N(0, 1), uma leitura linear para ``vocab_size``
    classes e a entropia cruzada contra alvos sorteados. Pre-LN leva a LayerNorm final (como
    em todo modelo Pre-LN); Post-LN não precisa dela. Nenhum passo de otimização é dado.

    Formas:
        devolve: (depth,) — ‖∂L/∂W²ₗ‖_F para l = 1..depth (camada 1 = a mais perto da entrada)
    """
    gen = torch.Generator().manual_seed(seed)
    layers = _xavier_stack(depth, norm_first, d_model, n_heads, d_ff, gen)
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


@_one_thread()
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
    gen = torch.Generator().manual_seed(seed)
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
    with _one_thread():
        for norm_first in (False, True):
            for depth in range(1, max_depth + 1):
                runs = [gradient_norms_at_init(depth, norm_first, seed=s, **kwargs) for s in range(n_seeds)]
                results[(norm_first, depth)] = torch.stack(runs).mean(dim=0)
    return results
