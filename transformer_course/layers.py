"""Camadas do *Transformer* (capítulo 4): FFN, camadas do codificador e do decodificador,
a pilha do codificador e um classificador de sequências.

Formas: B lote, T comprimento (alvo, no decodificador), S comprimento da fonte (memória),
D d_model, H cabeças, F d_ff, V vocabulário, C classes.
Máscaras booleanas, True = pode atender (as mesmas de ``transformer_course.masks``, capítulo 5):
2-D (T, T), 3-D (B, T, T) ou 4-D (B, 1, T, T) / (B, 1, 1, S), passadas como estão à atenção.

Com ``dropout=0``, ``EncoderLayer`` e ``DecoderLayer`` dão o mesmo resultado que
``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` (``batch_first=True``,
``activation="gelu"``, o mesmo ``norm_first``) carregando os mesmos pesos: veja
``interop.load_encoder_layer_from_torch`` e ``interop.load_decoder_layer_from_torch``.
O dropout fica onde o PyTorch o põe, e só uma vez: entre a GELU e ``linear2`` dentro da FFN,
sobre os pesos dentro da atenção e sobre a saída de cada subcamada antes da soma residual.

``FeedForward``, ``EncoderLayer`` e ``DecoderLayer`` são as respostas-modelo dos exercícios do
notebook, o mesmo código. Os experimentos Pre-LN × Post-LN moram em ``experiments.ch04``.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from .multihead import MultiHeadAttention
from .positional import sinusoidal_encoding

__all__ = ["DecoderLayer", "EncoderLayer", "FeedForward", "TransformerClassifier", "TransformerEncoder"]


class FeedForward(nn.Module):
    """Rede *feed-forward* aplicada posição a posição: linear2(dropout(GELU(linear1(x)))).

    Formas:
        x: (..., D) -> (..., D); internamente (..., F)
    """

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        h = F.gelu(self.linear1(x))  # (..., D) -> (..., F)
        return self.linear2(self.dropout(h))  # (..., F) -> (..., D)


# O notebook importa esta FFN com este nome, para que os exercícios 2 e 3 não dependam do 1; as
# camadas abaixo usam o mesmo nome para serem o mesmo código das respostas-modelo.
FeedForwardRef = FeedForward


class EncoderLayer(nn.Module):
    """Uma camada do codificador: autoatenção e FFN, cada uma com conexão residual e LayerNorm.

    Pre-LN (``norm_first=True``):  x = x + SA(LN₁(x));  x = x + FFN(LN₂(x))
    Post-LN (``norm_first=False``): x = LN₁(x + SA(x));  x = LN₂(x + FFN(x))

    Formas:
        x: (B, T, D); mask: booleana difundível para (B, H, T, T)
        devolve: x (B, T, D) e weights (B, H, T, T)
    """

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FeedForwardRef(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        if self.norm_first:  # Pre-LN: x + f(LN(x))
            h = self.norm1(x)
            out, weights = self.self_attn(h, h, h, mask)
            x = x + self.dropout1(out)
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:  # Post-LN: LN(x + f(x))
            out, weights = self.self_attn(x, x, x, mask)
            x = self.norm1(x + self.dropout1(out))
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

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FeedForwardRef(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:  # Pre-LN
            h = self.norm1(x)
            out, self_w = self.self_attn(h, h, h, tgt_mask)
            x = x + self.dropout1(out)
            out, cross_w = self.cross_attn(self.norm2(x), memory, memory, memory_mask)  # K, V: memória
            x = x + self.dropout2(out)
            x = x + self.dropout3(self.ffn(self.norm3(x)))
        else:  # Post-LN
            out, self_w = self.self_attn(x, x, x, tgt_mask)
            x = self.norm1(x + self.dropout1(out))
            out, cross_w = self.cross_attn(x, memory, memory, memory_mask)  # K, V: memória
            x = self.norm2(x + self.dropout2(out))
            x = self.norm3(x + self.dropout3(self.ffn(x)))
        return x, self_w, cross_w


# ---------------------------------------------------------------- a pilha e o classificador


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
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
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
        mask = real[:, None, None, :]  # a máscara de padding: (B, T) -> (B, 1, 1, T)
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
