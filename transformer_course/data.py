"""Dados sintéticos de classificação de sequências (capítulo 6).

Cada classe tem a sua faixa de tokens no vocabulário. Uma sequência da classe c mistura tokens
da faixa de c (o sinal), tokens das faixas das outras classes (confusores) e tokens neutros,
com comprimento variável e *padding* no fim. Tudo é sorteado de uma vez, com operações
vetorizadas e um ``torch.Generator`` próprio: a mesma semente dá os mesmos dados em qualquer
máquina, sem tocar o gerador global.

Layout do vocabulário (``pad_id = 0``)::

    0                     <pad>
    1 .. n_neutral        neutros     (nomes "·1", "·2", ...)
    depois, n_classes faixas de band_size tokens cada  (nomes "A01", "B07", ...)

Formas: N exemplos, T comprimento máximo (``max_len``).
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

__all__ = [
    "PAD_ID",
    "TokenTaskConfig",
    "TokenClassificationData",
    "class_counts",
    "counting_accuracy",
    "make_loader",
    "make_loaders",
    "split_dataset",
    "make_token_classification",
    "trim_padding",
]

PAD_ID = 0


@dataclass(frozen=True)
class TokenTaskConfig:
    """Configuração da tarefa sintética."""

    n_classes: int = 3  # número de classes (cada uma com a sua faixa de tokens)
    band_size: int = 20  # tokens por faixa de classe
    n_neutral: int = 12  # tokens neutros, que não dizem nada sobre a classe
    min_len: int = 6  # comprimento mínimo de uma sequência (sem o padding)
    max_len: int = 32  # comprimento máximo; as sequências são completadas com <pad> até aqui
    p_signal: float = 0.25  # chance de cada posição ser um token da faixa da própria classe
    p_confuser: float = 0.15  # chance de ser um token da faixa de OUTRA classe (ruído)

    @property
    def vocab_size(self) -> int:
        """Tamanho do vocabulário: <pad>, neutros e as faixas das classes."""
        return 1 + self.n_neutral + self.n_classes * self.band_size

    @property
    def first_class_token(self) -> int:
        """Id do primeiro token da faixa da classe 0."""
        return 1 + self.n_neutral


@dataclass(frozen=True)
class TokenClassificationData:
    """Um conjunto de dados gerado: tokens com padding, rótulos e comprimentos.

    Attributes:
        token_ids: (N, T) inteiros; posições depois do comprimento valem ``PAD_ID``.
        labels: (N,) classe de cada sequência.
        lengths: (N,) número de tokens reais de cada sequência.
        config: a configuração usada.
    """

    token_ids: torch.Tensor
    labels: torch.Tensor
    lengths: torch.Tensor
    config: TokenTaskConfig

    def __len__(self) -> int:
        return self.labels.numel()

    def token_name(self, token_id: int) -> str:
        """Nome legível de um token: "<pad>", "·3" (neutro) ou "B07" (faixa da classe B)."""
        cfg = self.config
        if token_id == PAD_ID:
            return "<pad>"
        if token_id < cfg.first_class_token:
            return f"·{token_id}"
        cls, offset = divmod(token_id - cfg.first_class_token, cfg.band_size)
        return f"{string.ascii_uppercase[cls]}{offset:02d}"

    def decode(self, index: int, with_padding: bool = False) -> str:
        """A sequência ``index`` escrita com os nomes dos tokens."""
        ids = self.token_ids[index].tolist()
        if not with_padding:
            ids = ids[: int(self.lengths[index])]
        return " ".join(self.token_name(t) for t in ids)

    def band_counts(self) -> torch.Tensor:
        """(N, C): quantos tokens de cada faixa de classe há em cada sequência."""
        return band_counts(self.token_ids, self.config)

    def counting_baseline(self) -> float:
        """Acurácia de uma regra sem aprendizado: "a faixa que mais aparece" (empate: a menor)."""
        return counting_accuracy(self.token_ids, self.labels, self.config)


def band_counts(token_ids: torch.Tensor, config: TokenTaskConfig) -> torch.Tensor:
    """(N, T) -> (N, C): quantos tokens de cada faixa de classe há em cada sequência."""
    cfg = config
    band = (token_ids - cfg.first_class_token).div(cfg.band_size, rounding_mode="floor")
    in_band = token_ids >= cfg.first_class_token  # (N, T)
    one_hot = torch.nn.functional.one_hot(band.clamp(min=0), cfg.n_classes)  # (N, T, C)
    return (one_hot * in_band.unsqueeze(-1)).sum(dim=1)  # (N, T, C) -> (N, C)


def counting_accuracy(token_ids: torch.Tensor, labels: torch.Tensor, config: TokenTaskConfig) -> float:
    """Acurácia da regra "a faixa que mais aparece" (empate: a menor) em qualquer subconjunto.

    Para os dados deste módulo é a regra de Bayes: cada token da faixa da própria classe tem
    probabilidade ``p_signal`` e cada faixa de outra classe ``p_confuser / (C - 1)``, então a
    verossimilhança de uma classe só cresce com a contagem da sua faixa (se ``p_signal`` for maior).
    Nos empates, qualquer escolha entre as empatadas acerta, em média, o mesmo.
    """
    return (band_counts(token_ids, config).argmax(dim=-1) == labels).float().mean().item()


def make_token_classification(
    n_samples: int, config: TokenTaskConfig = TokenTaskConfig(), seed: int = 0
) -> TokenClassificationData:
    """Gera ``n_samples`` sequências rotuladas, de forma vetorizada e reprodutível.

    Cada posição real é, independentemente: um token da faixa da própria classe (probabilidade
    ``p_signal``), um token da faixa de uma outra classe sorteada (``p_confuser``) ou um token
    neutro (o resto). Sequências curtas podem ser ambíguas, então nem um classificador perfeito
    acerta 100 %.

    Formas:
        devolve token_ids (N, T), labels (N,), lengths (N,), com T = ``config.max_len``
    """
    cfg = config
    if n_samples <= 0:
        raise ValueError(f"n_samples deve ser positivo; recebido {n_samples}.")
    if not 1 <= cfg.min_len <= cfg.max_len:
        raise ValueError(f"precisa de 1 ≤ min_len ≤ max_len; recebidos {cfg.min_len} e {cfg.max_len}.")
    if cfg.n_classes < 2 or cfg.band_size < 1 or cfg.n_neutral < 1:
        raise ValueError("precisa de n_classes ≥ 2, band_size ≥ 1 e n_neutral ≥ 1.")
    if not (0 <= cfg.p_signal and 0 <= cfg.p_confuser and cfg.p_signal + cfg.p_confuser <= 1):
        raise ValueError("p_signal e p_confuser devem ser ≥ 0 e somar no máximo 1.")
    gen = torch.Generator().manual_seed(seed)
    N, T, C = n_samples, cfg.max_len, cfg.n_classes
    labels = torch.randint(C, (N,), generator=gen)
    lengths = torch.randint(cfg.min_len, T + 1, (N,), generator=gen)
    kind = torch.rand(N, T, generator=gen)  # sinal, confusor ou neutro, posição a posição
    shift = torch.randint(1, C, (N, T), generator=gen)  # outra classe: (c + shift) mod C ≠ c
    offset = torch.randint(cfg.band_size, (N, T), generator=gen)
    neutral = 1 + torch.randint(cfg.n_neutral, (N, T), generator=gen)

    own = labels.unsqueeze(1).expand(N, T)  # (N,) -> (N, T)
    band = torch.where(kind < cfg.p_signal, own, (own + shift) % C)
    band_token = cfg.first_class_token + band * cfg.band_size + offset
    tokens = torch.where(kind < cfg.p_signal + cfg.p_confuser, band_token, neutral)
    beyond = torch.arange(T) >= lengths.unsqueeze(1)  # (T,) vs (N, 1) -> (N, T)
    tokens = tokens.masked_fill(beyond, PAD_ID)
    return TokenClassificationData(tokens, labels, lengths, cfg)


def class_counts(labels: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Quantos exemplos há de cada classe: (C,)."""
    return torch.bincount(labels, minlength=n_classes)


def trim_padding(batch: Sequence[tuple[torch.Tensor, torch.Tensor]], pad_id: int = PAD_ID):
    """``collate_fn`` que empilha o lote e corta as colunas finais só de padding.

    Um lote cujas sequências têm no máximo 12 tokens vira (B, 12), e não (B, max_len):
    a atenção custa O(T²), então isso economiza tempo sem mudar o resultado (o padding
    é mascarado de qualquer jeito).

    Formas:
        lista de B pares (token_ids (T,), label ()) -> token_ids (B, T') e labels (B,), T' ≤ T
    """
    token_ids = torch.stack([x for x, _ in batch])  # B × (T,) -> (B, T)
    labels = torch.stack([y for _, y in batch])
    real = (token_ids != pad_id).any(dim=0)  # (T,)
    keep = int(real.nonzero().max()) + 1 if real.any() else 1
    return token_ids[:, :keep], labels


def split_dataset(
    data: TokenClassificationData, fractions: Iterable[float] = (0.7, 0.15, 0.15), seed: int = 0
) -> tuple[TensorDataset, TensorDataset, TensorDataset]:
    """Divide os exemplos em treino, validação e teste (frações dadas), com semente própria."""
    fractions = list(fractions)
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"fractions deve ter três frações positivas que somam 1; recebido {fractions}.")
    N = len(data)
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(seed))
    n_train, n_val = int(fractions[0] * N), int(fractions[1] * N)
    parts = (perm[:n_train], perm[n_train : n_train + n_val], perm[n_train + n_val :])
    return tuple(TensorDataset(data.token_ids[idx], data.labels[idx]) for idx in parts)


def make_loader(dataset: Dataset, batch_size: int = 64, shuffle: bool = False, seed: int = 0) -> DataLoader:
    """Um ``DataLoader`` que corta o padding de cada lote; com ``shuffle``, usa a semente ``seed``.

    Dois loaders criados com a mesma semente dão os mesmos lotes, na mesma ordem, época a época.
    """
    generator = torch.Generator().manual_seed(seed) if shuffle else None
    return DataLoader(dataset, batch_size, shuffle=shuffle, generator=generator, collate_fn=trim_padding)


def make_loaders(
    data: TokenClassificationData,
    batch_size: int = 64,
    fractions: Iterable[float] = (0.7, 0.15, 0.15),
    seed: int = 0,
) -> tuple[DataLoader, DataLoader, DataLoader]:
    """Divide em treino, validação e teste e devolve os três ``DataLoader`` (só o treino embaralha)."""
    train, val, test = split_dataset(data, fractions, seed)
    return (
        make_loader(train, batch_size, shuffle=True, seed=seed + 1),
        make_loader(val, batch_size),
        make_loader(test, batch_size),
    )
