"""Um corpus em português sem download: a prosa dos próprios capítulos do curso (capítulo 7).

:func:`course_corpus` lê a prosa dos capítulos, guardada no pacote (``corpus/NN_*.md``: as
células de texto de cada notebook, extraídas com o jupytext por ``make assignments``), tira
fórmulas, código e marcação e devolve prosa corrida. O corpus é o mesmo numa instalação editável
ou não, e não depende da pasta ``notebooks/``. :class:`CharTokenizer` transforma
caracteres em inteiros e volta; :func:`train_val_split`, :func:`get_batch` e
:func:`unigram_baseline` preparam o treino do GPT de caracteres.

Formas: B lote, T comprimento do bloco (contexto).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

import torch

__all__ = [
    "CharTokenizer",
    "clean_markdown",
    "course_corpus",
    "get_batch",
    "train_val_split",
    "unigram_baseline",
]

# Letras do português (com acentos), dígitos, espaço, quebra de linha e pontuação comum.
ALLOWED = set(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZáàâãéêíóôõúüçÁÀÂÃÉÊÍÓÔÕÚÇ0123456789 \n.,;:!?()-\"'%"
)


def clean_markdown(text: str) -> str:
    """Tira fórmulas ($...$), código (`...`), tabelas, links, marcação e caracteres fora de ``ALLOWED``."""
    text = re.sub(r"^\s*\|.*$", "", text, flags=re.M)  # linhas de tabela: números e células, não prosa
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\$[^$]*\$", " ", text)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"^\s*(#+|[-*]|\d+\.)\s+", "", text, flags=re.M)
    text = re.sub(r"[*_]", "", text)
    text = text.replace("—", "-").replace("–", "-").replace("“", '"').replace("”", '"')
    text = "".join(c if c in ALLOWED else " " for c in text)
    text = re.sub(r"\(\s*[,;\s]*\)", " ", text)  # parênteses que ficaram vazios
    text = re.sub(r"\s+([,.;:!?)])", r"\1", text)
    text = re.sub(r"\(\s+", "(", text)
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return "\n".join(p for p in paragraphs if len(p) > 40)


def course_corpus() -> str:
    """A prosa de todos os capítulos (em ordem), limpa e concatenada.

    Raises:
        FileNotFoundError: se o pacote foi instalado sem o corpus (``corpus/*.md``).
    """
    from importlib.resources import files

    folder = files(__package__) / "corpus"
    paths = sorted((p for p in folder.iterdir() if p.name.endswith(".md")), key=lambda p: p.name)
    if not paths:
        raise FileNotFoundError(
            "o corpus do capítulo 7 (transformer_course/corpus/*.md) não está no pacote; "
            "rode `make assignments` ou reinstale o curso"
        )
    raw = "\n\n".join(p.read_text(encoding="utf-8") for p in paths)
    return clean_markdown(raw) + "\n"


class CharTokenizer:
    """Tokenizador de caracteres: cada caractere do corpus vira um inteiro (ordem alfabética).

    Caracteres que não estão no vocabulário viram espaço ao codificar.
    """

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.unknown = self.stoi.get(" ", 0)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """Texto -> LongTensor (len(text),)."""
        return torch.tensor([self.stoi.get(c, self.unknown) for c in text], dtype=torch.long)

    def decode(self, ids: Iterable[int] | torch.Tensor) -> str:
        """Inteiros -> texto."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return "".join(self.chars[i] for i in ids)


def train_val_split(data: torch.Tensor, val_fraction: float = 0.1, chunk: int = 1000):
    """Separa blocos de ``chunk`` caracteres: cada décimo bloco vai para a validação.

    Blocos intercalados (e não os últimos 10 %) deixam os dois conjuntos com o mesmo
    estilo, já que o corpus é a concatenação de capítulos diferentes.
    """
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction deve estar entre 0 e 1; recebido {val_fraction}.")
    every = round(1 / val_fraction)
    chunk = max(1, min(chunk, len(data) // (4 * every)))  # ao menos 4 blocos de validação
    pieces = data.split(chunk)
    val = [p for i, p in enumerate(pieces) if i % every == every - 1]
    train = [p for i, p in enumerate(pieces) if i % every != every - 1]
    return torch.cat(train), torch.cat(val)


def get_batch(
    data: torch.Tensor,
    block_size: int,
    batch_size: int,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Um lote de janelas aleatórias: entradas x e alvos y = x deslocado uma posição.

    Formas:
        data (N,) -> x (B, T), y (B, T)
    """
    starts = torch.randint(len(data) - block_size - 1, (batch_size,), generator=generator)
    offsets = torch.arange(block_size)
    x = data[starts[:, None] + offsets]  # (B, 1) + (T,) -> (B, T)
    y = data[starts[:, None] + offsets + 1]
    return x.to(device), y.to(device)


def unigram_baseline(train: torch.Tensor, val: torch.Tensor, vocab_size: int) -> float:
    """Entropia cruzada (nats) na validação do melhor modelo que ignora o contexto.

    Ele prevê cada caractere com a frequência que o caractere tem no treino
    (com +1 em cada contagem, para nenhum caractere ter probabilidade 0).
    """
    counts = torch.bincount(train, minlength=vocab_size).double() + 1.0
    log_p = (counts / counts.sum()).log()
    return float(-log_p[val].mean())


def char_counts(text: str, top: int = 10) -> list[tuple[str, int]]:
    """Os ``top`` caracteres mais frequentes (para mostrar o corpus)."""
    return Counter(text).most_common(top)


def bits(nats: float) -> float:
    """Converte nats em bits."""
    return nats / math.log(2)
