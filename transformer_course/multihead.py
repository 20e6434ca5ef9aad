"""Atenção com múltiplas cabeças (capítulo 3): as respostas-modelo dos três exercícios.

Formas: B lote, Tq/Tk comprimentos de consultas/chaves, D d_model, H cabeças, Dk = D/H.
Máscaras booleanas, True = pode atender: 2-D (Tq, Tk), 3-D (B, Tq, Tk) ganha o eixo
das cabeças, 4-D (B, 1 ou H, Tq, Tk) é usada como está.

A cópia dos pesos de um ``nn.MultiheadAttention`` e a tradução das máscaras para a convenção
do PyTorch ficam em ``transformer_course.interop``; o experimento dos vizinhos (quantas cabeças
uma tarefa precisa), em ``transformer_course.experiments.ch03``.
"""

from __future__ import annotations

from torch import nn

from .attention import scaled_dot_product_attention

__all__ = ["MultiHeadAttention", "merge_heads", "split_heads"]


def split_heads(x, n_heads):
    """Separa as cabeças: (B, T, D) -> (B, H, T, D/H).

    A cabeça h fica com as colunas ``h·Dk`` a ``(h+1)·Dk − 1`` de cada token.

    Raises:
        ValueError: se ``D`` não for divisível por ``n_heads``.
    """
    B, T, D = x.shape
    if n_heads <= 0 or D % n_heads != 0:
        raise ValueError(f"d_model = {D} não é divisível por n_heads = {n_heads}.")
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, T, H, Dk) -> (B, H, T, Dk)


def merge_heads(x):
    """Junta as cabeças: (B, H, T, Dk) -> (B, T, H·Dk). Inversa de :func:`split_heads`."""
    B, H, T, Dk = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dk)  # (B, H, T, Dk) -> (B, T, H, Dk) -> (B, T, D)


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

    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads != 0:
            raise ValueError(f"d_model = {d_model} não é divisível por n_heads = {n_heads}.")
        self.n_heads = n_heads
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        Q = split_heads(self.W_Q(query), self.n_heads)  # (B, Tq, D) -> (B, H, Tq, Dk)
        K = split_heads(self.W_K(key), self.n_heads)  # (B, Tk, D) -> (B, H, Tk, Dk)
        V = split_heads(self.W_V(value), self.n_heads)  # (B, Tk, D) -> (B, H, Tk, Dk)
        if mask is not None and mask.dim() not in (2, 3, 4):
            raise ValueError(f"a máscara deve ter 2, 3 ou 4 eixos; recebida com forma {tuple(mask.shape)}.")
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # (B, Tq, Tk) -> (B, 1, Tq, Tk): a mesma para todas as cabeças
        _, weights = scaled_dot_product_attention(Q, K, V, mask)  # (B, H, Tq, Tk)
        output = self.dropout(weights) @ V  # (B, H, Tq, Tk) @ (B, H, Tk, Dk) -> (B, H, Tq, Dk)
        return self.W_O(merge_heads(output)), weights  # (B, H, Tq, Dk) -> (B, Tq, D)
