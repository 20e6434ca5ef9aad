"""O experimento do capítulo 3: a tarefa dos vizinhos.

Cada posição precisa dizer qual é o *token* anterior E o seguinte; uma cabeça só não resolve
(a média dos dois vizinhos apaga a ordem), e cabeças finas demais (d_k = 1) também não. Aqui
ficam os dados (:func:`neighbor_batch`), o modelo mínimo (:class:`NeighborModel`) e o treino para
cada número de cabeças (:func:`train_neighbor_models`), que alimentam a figura
``plots.heads_tradeoff_figure`` e o widget ``widgets.heads_widget``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ..multihead import MultiHeadAttention
from ..runtime import one_thread

__all__ = [
    "IGNORE",
    "NeighborConfig",
    "NeighborModel",
    "SENTENCE",
    "VOCAB",
    "divisors",
    "encode_words",
    "neighbor_batch",
    "train_neighbor_models",
]


def divisors(n: int) -> list[int]:
    """Os divisores de ``n`` em ordem crescente (os números de cabeças possíveis)."""
    return [h for h in range(1, n + 1) if n % h == 0]


@dataclass(frozen=True)
class NeighborConfig:
    """Configuração do experimento dos vizinhos (pequeno de propósito: treina em segundos)."""

    vocab_size: int = 12  # palavras do vocabulário (len(VOCAB): as da frase de exemplo e mais algumas)
    seq_len: int = 9  # comprimento das sequências de treino
    d_model: int = 16  # largura; os números de cabeças possíveis são os divisores
    steps: int = 80  # passos de Adam por modelo
    batch_size: int = 64  # sequências por passo
    lr: float = 3e-2  # taxa de aprendizado do Adam
    seed: int = 0  # semente dos dados e da inicialização


IGNORE = -100  # alvo ignorado pela entropia cruzada (não há vizinho na borda)
VOCAB = ("a", "gata", "que", "menina", "adotou", "dormiu", "no", "sofá", "o", "cão", "viu", "casa")
SENTENCE = "a gata que a menina adotou dormiu no sofá"  # a frase dos mapas de calor


def encode_words(words: list[str]) -> torch.Tensor:
    """Os índices das palavras em :data:`VOCAB` (LongTensor (T,))."""
    unknown = [w for w in words if w not in VOCAB]
    if unknown:
        raise ValueError(f"palavras fora do vocabulário do experimento: {unknown}; use só {list(VOCAB)}.")
    return torch.tensor([VOCAB.index(w) for w in words])


def neighbor_batch(cfg: NeighborConfig, generator: torch.Generator, batch_size: int | None = None):
    """Sequências aleatórias e seus alvos: o token anterior e o seguinte de cada posição.

    Returns:
        tokens (B, T) e targets (B, T, 2) com ``IGNORE`` onde o vizinho não existe.
    """
    B = batch_size or cfg.batch_size
    tokens = torch.randint(cfg.vocab_size, (B, cfg.seq_len), generator=generator)
    prev = F.pad(tokens[:, :-1], (1, 0), value=IGNORE)  # (B, T): prev[t] = tokens[t-1]
    nxt = F.pad(tokens[:, 1:], (0, 1), value=IGNORE)  # (B, T): nxt[t] = tokens[t+1]
    return tokens, torch.stack([prev, nxt], dim=-1)  # (B, T, 2)


class NeighborModel(nn.Module):
    """*Embedding* de token + codificação posicional aprendida → uma camada de atenção → leitura linear.

    Sem conexão residual: tudo o que a posição t sabe sobre os vizinhos passa pela atenção.
    Devolve logits (B, T, 2, V) (anterior e seguinte) e os pesos (B, H, T, T).
    """

    def __init__(self, cfg: NeighborConfig, n_heads: int):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.attn = MultiHeadAttention(cfg.d_model, n_heads)
        self.readout = nn.Linear(cfg.d_model, 2 * cfg.vocab_size)

    def forward(self, tokens: torch.Tensor):
        B, T = tokens.shape
        x = self.tok(tokens) + self.pos(torch.arange(T, device=tokens.device))  # (B, T, D)
        y, weights = self.attn(x, x, x)
        return self.readout(y).view(B, T, 2, -1), weights  # (B, T, 2V) -> (B, T, 2, V)


def _accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    valid = targets != IGNORE
    return (logits.argmax(-1)[valid] == targets[valid]).float().mean().item()


def train_neighbor_models(
    head_counts: list[int], cfg: NeighborConfig = NeighborConfig(), device: torch.device | str = "cpu"
) -> dict[int, dict]:
    """Treina um :class:`NeighborModel` para cada número de cabeças, com os mesmos dados.

    Tensores minúsculos: roda com uma thread só (mais rápido, e não disputa a CPU).

    Returns:
        para cada H: ``model`` (em modo de avaliação, na CPU), ``accuracy`` (em 1024
        sequências novas), ``losses`` (lista por passo) e ``n_attention_params``.
    """
    with one_thread():
        return _train_all(head_counts, cfg, device)


def _train_all(head_counts: list[int], cfg: NeighborConfig, device) -> dict[int, dict]:
    results = {}
    for n_heads in head_counts:
        torch.manual_seed(cfg.seed)  # mesma inicialização das embeddings para todo H
        model = NeighborModel(cfg, n_heads).to(device)
        # Sem passos (a correção automática), sem otimizador: criar o primeiro num processo importa
        # o torch._dynamo (≈2 s), mesmo sem compilar nada.
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr) if cfg.steps else None
        gen = torch.Generator().manual_seed(cfg.seed)
        losses = []
        for _ in range(cfg.steps):
            tokens, targets = (t.to(device) for t in neighbor_batch(cfg, gen))
            logits, _ = model(tokens)
            loss = F.cross_entropy(logits.flatten(0, 2), targets.flatten(), ignore_index=IGNORE)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model = model.cpu().eval()
        tokens, targets = neighbor_batch(cfg, torch.Generator().manual_seed(cfg.seed + 1), 1024)
        with torch.no_grad():
            logits, _ = model(tokens)
        results[n_heads] = {
            "model": model,
            "accuracy": _accuracy(logits, targets),
            "losses": losses,
            "n_attention_params": sum(p.numel() for p in model.attn.parameters()),
        }
    return results
