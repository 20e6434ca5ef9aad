"""Atenção com múltiplas cabeças (capítulo 3).

Formas: B lote, Tq/Tk comprimentos de consultas/chaves, D d_model, H cabeças, Dk = D/H.
Máscaras booleanas, True = pode atender: 2-D (Tq, Tk), 3-D (B, Tq, Tk) ganha o eixo
das cabeças, 4-D (B, 1 ou H, Tq, Tk) é usada como está.

Além do módulo, este arquivo traz :func:`load_from_torch` (copia os pesos de um
``nn.MultiheadAttention``) e o experimento dos vizinhos do capítulo 3
(:func:`train_neighbor_models`): uma tarefa em que cada posição precisa do token
anterior E do seguinte, que uma cabeça só não resolve.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .attention import scaled_dot_product_attention

__all__ = [
    "MultiHeadAttention",
    "NeighborConfig",
    "NeighborModel",
    "SENTENCE",
    "VOCAB",
    "divisors",
    "encode_words",
    "merge_heads",
    "neighbor_batch",
    "split_heads",
    "train_neighbor_models",
]


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Separa as cabeças: (B, T, D) -> (B, H, T, D/H).

    A cabeça h fica com as colunas ``h·Dk`` a ``(h+1)·Dk − 1`` de cada token.

    Raises:
        ValueError: se ``D`` não for divisível por ``n_heads``.
    """
    B, T, D = x.shape
    if n_heads <= 0 or D % n_heads != 0:
        raise ValueError(f"d_model = {D} não é divisível por n_heads = {n_heads}.")
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, T, H, Dk) -> (B, H, T, Dk)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Junta as cabeças: (B, H, T, Dk) -> (B, T, H·Dk). Inversa de :func:`split_heads`."""
    B, H, T, Dk = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dk)  # (B, H, T, Dk) -> (B, T, H, Dk) -> (B, T, D)


def _head_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    if mask is None or mask.dim() in (2, 4):
        return mask
    if mask.dim() == 3:
        return mask.unsqueeze(1)  # (B, Tq, Tk) -> (B, 1, Tq, Tk)
    raise ValueError(f"a máscara deve ter 2, 3 ou 4 eixos; recebida com forma {tuple(mask.shape)}.")


class MultiHeadAttention(nn.Module):
    """Atenção com múltiplas cabeças; igual a ``nn.MultiheadAttention(batch_first=True)``.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_H)·W_O, com
    head_i = Attention(Q·W_i^Q, K·W_i^K, V·W_i^V); as H matrizes W_i^Q (D × Dk) são as
    fatias de colunas de uma só ``nn.Linear(D, D)`` (o mesmo para K e V).

    Args:
        d_model: largura D dos vetores de entrada e saída.
        n_heads: número de cabeças H; precisa dividir ``d_model``.
        dropout: probabilidade de *dropout* nos pesos de atenção (só no modo de treino).
        bias: se as quatro projeções têm viés.

    Formas:
        query (B, Tq, D), key e value (B, Tk, D)
        mask booleana, True = pode atender: (Tq, Tk), (B, Tq, Tk) ou (B, 1 ou H, Tq, Tk)
        devolve: output (B, Tq, D) e weights (B, H, Tq, Tk), antes do dropout
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads != 0:
            raise ValueError(f"d_model = {d_model} não é divisível por n_heads = {n_heads}.")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        Q = split_heads(self.W_Q(query), self.n_heads)  # (B, Tq, D) -> (B, H, Tq, Dk)
        K = split_heads(self.W_K(key), self.n_heads)  # (B, Tk, D) -> (B, H, Tk, Dk)
        V = split_heads(self.W_V(value), self.n_heads)  # (B, Tk, D) -> (B, H, Tk, Dk)
        output, weights = scaled_dot_product_attention(Q, K, V, _head_mask(mask))  # (B, H, Tq, Dk)
        if self.training and self.dropout.p > 0:
            output = self.dropout(weights) @ V  # (B, H, Tq, Tk) @ (B, H, Tk, Dk) -> (B, H, Tq, Dk)
        return self.W_O(merge_heads(output)), weights  # (B, H, Tq, Dk) -> (B, Tq, D)


def divisors(n: int) -> list[int]:
    """Os divisores de ``n`` em ordem crescente (os números de cabeças possíveis)."""
    return [h for h in range(1, n + 1) if n % h == 0]


# ---------------------------------------------------------------- o experimento dos vizinhos


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

    Returns:
        para cada H: ``model`` (em modo de avaliação, na CPU), ``accuracy`` (em 1024
        sequências novas), ``losses`` (lista por passo) e ``n_attention_params``.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tensores minúsculos: uma thread só é mais rápida (e não disputa a CPU)
    try:
        return _train_all(head_counts, cfg, device)
    finally:
        torch.set_num_threads(threads)


def _train_all(head_counts: list[int], cfg: NeighborConfig, device) -> dict[int, dict]:
    results = {}
    for n_heads in head_counts:
        torch.manual_seed(cfg.seed)  # mesma inicialização das embeddings para todo H
        model = NeighborModel(cfg, n_heads).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
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
