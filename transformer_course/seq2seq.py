"""Codificador-decodificador pequeno para escrever datas por extenso (capítulo 7).

"30/11/2026" -> "trinta de novembro de 2026". A entrada inteira está disponível desde o
início (o codificador a lê nos dois sentidos); a saída tem outro comprimento e é gerada
caractere a caractere pelo decodificador, que consulta a entrada pela atenção cruzada.
O treino (*teacher forcing*) e a medida de acerto ficam em ``experiments.ch07``.

Formas: B lote, S comprimento da fonte, T comprimento do alvo, D d_model, V vocabulário.
"""

from __future__ import annotations

import torch
from torch import nn

from .layers import DecoderLayer, TransformerEncoder
from .masks import causal_mask

__all__ = [
    "DateSeq2Seq",
    "DateVocab",
    "date_in_words",
    "make_date_batch",
    "translate_dates",
]

UNITS = [
    "",
    "um",
    "dois",
    "três",
    "quatro",
    "cinco",
    "seis",
    "sete",
    "oito",
    "nove",
    "dez",
    "onze",
    "doze",
    "treze",
    "catorze",
    "quinze",
    "dezesseis",
    "dezessete",
    "dezoito",
    "dezenove",
]
TENS = {20: "vinte", 30: "trinta"}
MONTHS = [
    "janeiro",
    "fevereiro",
    "março",
    "abril",
    "maio",
    "junho",
    "julho",
    "agosto",
    "setembro",
    "outubro",
    "novembro",
    "dezembro",
]
DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


def date_in_words(day: int, month: int, year: int) -> str:
    """Data por extenso, no uso brasileiro ("primeiro" para o dia 1; o ano em algarismos)."""
    if day == 1:
        words = "primeiro"
    elif day < 20:
        words = UNITS[day]
    else:
        tens, unit = TENS[day - day % 10], day % 10
        words = tens if unit == 0 else f"{tens} e {UNITS[unit]}"
    return f"{words} de {MONTHS[month - 1]} de {year}"


class DateVocab:
    """Caracteres da entrada e da saída; 0 = padding, 1 = início (BOS), 2 = fim (EOS)."""

    PAD, BOS, EOS = 0, 1, 2

    def __init__(self):
        texts = "0123456789/" + "".join(
            date_in_words(d, m, 2000) for m in range(1, 13) for d in (1, 21, 22, 17)
        )
        texts += "".join(UNITS) + "".join(TENS.values()) + "".join(MONTHS) + " "
        self.chars = ["<pad>", "<s>", "</s>"] + sorted(set(texts))
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @property
    def size(self) -> int:
        return len(self.chars)

    def encode(self, text: str, length: int, bos: bool = False) -> list[int]:
        ids = ([self.BOS] if bos else []) + [self.stoi[c] for c in text] + [self.EOS]
        return ids + [self.PAD] * (length - len(ids))

    def decode(self, ids) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i == self.EOS:
                break
            if i > self.EOS:
                out.append(self.chars[i])
        return "".join(out)


SRC_LEN, TGT_LEN = 11, 37  # "vinte e quatro de fevereiro de 2026" tem 35 caracteres, + início e fim


def make_date_batch(vocab: DateVocab, batch_size: int, generator: torch.Generator):
    """Datas aleatórias (1950 a 2049): fonte (B, S), entrada do decodificador (B, T), alvo (B, T)."""
    src, tgt, texts = [], [], []
    months = torch.randint(1, 13, (batch_size,), generator=generator).tolist()
    fractions = torch.rand(batch_size, generator=generator).tolist()
    years = torch.randint(1950, 2050, (batch_size,), generator=generator).tolist()
    for month, frac, year in zip(months, fractions, years):
        day = 1 + int(frac * DAYS_IN_MONTH[month - 1])
        text = f"{day:02d}/{month:02d}/{year}"
        words = date_in_words(day, month, year)
        texts.append((text, words))
        src.append(vocab.encode(text, SRC_LEN))
        tgt.append(vocab.encode(words, TGT_LEN + 1, bos=True))
    tgt = torch.tensor(tgt)
    return torch.tensor(src), tgt[:, :-1], tgt[:, 1:], texts


class DateSeq2Seq(nn.Module):
    """Codificador (``TransformerEncoder``) + decodificador (``DecoderLayer`` com atenção cruzada).

    Formas:
        src (B, S), tgt_in (B, T) -> logits (B, T, V)
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 128,
        max_len: int = 64,
    ):
        super().__init__()
        self.d_model = d_model
        self.encoder = TransformerEncoder(vocab_size, d_model, n_heads, n_layers, d_ff, max_len)
        self.tgt_embedding = nn.Embedding(vocab_size, d_model)
        self.tgt_position = nn.Embedding(max_len, d_model)
        self.decoder = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, return_cross: bool = False):
        memory, _ = self.encoder(src)  # (B, S) -> (B, S, D)
        memory_mask = (src != 0)[:, None, None, :]  # (B, 1, 1, S): não olhar o padding da fonte
        T = tgt_in.size(1)
        x = self.tgt_embedding(tgt_in) + self.tgt_position(torch.arange(T, device=src.device))  # (B, T, D)
        cross = []
        for layer in self.decoder:
            x, _, cross_w = layer(x, memory, causal_mask(T, src.device), memory_mask)
            cross.append(cross_w)
        logits = self.head(self.norm(x))  # (B, T, D) -> (B, T, V)
        return (logits, cross) if return_cross else logits


@torch.no_grad()
def translate_dates(model: DateSeq2Seq, vocab: DateVocab, dates: list[str]) -> list[str]:
    """Decodificação gulosa: o decodificador gera um caractere por passo até o fim (EOS)."""
    device = next(model.parameters()).device
    src = torch.tensor([vocab.encode(d, SRC_LEN) for d in dates], device=device)
    ids = torch.full((len(dates), 1), vocab.BOS, device=device)
    for _ in range(TGT_LEN):
        nxt = model(src, ids)[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        ids = torch.cat([ids, nxt], dim=1)
        if bool((ids == vocab.EOS).any(dim=1).all()):
            break
    return [vocab.decode(row[1:]) for row in ids]
