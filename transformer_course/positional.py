"""Embeddings de tokens e codificações de posição (capítulo 1).

Quatro maneiras de dizer ao *Transformer* onde cada token está:

- senoidal (Vaswani et al., 2017): um vetor fixo somado ao embedding;
- aprendida (GPT-2, BERT): uma tabela ``max_len × d_model`` treinada, somada ao embedding;
- RoPE (Su et al., 2021): gira pares de coordenadas de q e k por um ângulo proporcional à posição;
- ALiBi (Press et al., 2021): soma aos scores de atenção um viés −m·|i − j|.

Formas: B lote, T comprimento, D ``d_model``, H cabeças, V vocabulário.
Convenção de RoPE deste curso: pares **intercalados** (x[2i], x[2i+1]), como no artigo e no
código de referência do LLaMA; a convenção "rotate_half" (pares x[i], x[i + D/2], a do
GPT-NeoX e a do LLaMA no Hugging Face) está em :func:`apply_rope_half` para comparação.
RoPE age por cabeça: o D destas funções é a largura da cabeça (Dk), não ``d_model``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = [
    "LearnedPositionalEmbedding",
    "SinusoidalPositionalEncoding",
    "TokenEmbedding",
    "alibi_bias",
    "alibi_slopes",
    "alibi_slopes_official",
    "apply_rope",
    "apply_rope_half",
    "cosine_similarity_matrix",
    "interleaved_to_half",
    "rope_frequencies",
    "sinusoidal_encoding",
    "toeplitz_deviation",
]


def _check_positive(value: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} deve ser um inteiro positivo; recebido {value!r}.")


def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """Tabela de codificação posicional senoidal de Vaswani et al. (2017).

    PE[p, 2i] = sin(p / 10000^(2i/D)) e PE[p, 2i+1] = cos(p / 10000^(2i/D)).
    O par 0 tem a frequência mais alta (período 2π ≈ 6,3 posições); o último par,
    a mais baixa (período perto de 2π·10000).

    Formas:
        devolve: (max_len, D), no dtype padrão do PyTorch (float32)

    Raises:
        ValueError: ``d_model`` ímpar ou não positivo, ``max_len`` não positivo.
    """
    _check_positive(max_len, "max_len")
    _check_positive(d_model, "d_model")
    if d_model % 2:
        raise ValueError(f"d_model deve ser par (pares seno/cosseno); recebido {d_model}.")
    # Calculado em float64 e convertido no fim: o erro de arredondamento não cresce com p.
    positions = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    inv_freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    angles = positions * inv_freq  # (T, 1) * (D/2,) -> (T, D/2)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (T, D/2, 2)
    return pe.flatten(-2).to(torch.get_default_dtype())  # (T, D/2, 2) -> (T, D)


class TokenEmbedding(nn.Module):
    """Tabela de embeddings de tokens, multiplicada por √d_model (Vaswani et al., 2017, seção 3.4).

    A tabela é sorteada com desvio 1/√d_model, como no tensor2tensor (o código dos autores):
    depois da multiplicação cada vetor tem norma ≈ √d_model, a mesma escala da codificação
    senoidal (norma √(d_model/2)). A linha do *padding* volta a zero depois do sorteio.

    Formas:
        token_ids: (B, T) inteiros em [0, V) -> (B, T, D)
    """

    def __init__(self, vocab_size: int, d_model: int, padding_idx: int | None = None):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model**-0.5)
        if padding_idx is not None:
            with torch.no_grad():
                self.embedding.weight[padding_idx].zero_()

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(token_ids) * math.sqrt(self.d_model)


class SinusoidalPositionalEncoding(nn.Module):
    """Soma a codificação senoidal ao embedding e aplica dropout (uma vez só).

    A tabela fica num *buffer* ``pe`` (D colunas, ``max_len`` linhas): vai junto com
    ``.to(device)`` e com o ``state_dict``, mas não é um parâmetro treinável.

    Formas:
        x: (B, T, D) com T ≤ max_len -> (B, T, D)
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))  # (max_len, D)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_len, max_len = x.size(-2), self.pe.size(0)
        if seq_len > max_len:
            raise ValueError(f"Sequência de comprimento {seq_len} maior que max_len = {max_len}.")
        return self.dropout(x + self.pe[:seq_len])  # (B, T, D) + (T, D) -> (B, T, D)


class LearnedPositionalEmbedding(nn.Module):
    """Posições aprendidas: uma linha treinável por posição, somada ao embedding (GPT-2, BERT).

    Formas:
        x: (B, T, D) com T ≤ max_len -> (B, T, D)
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.position_embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_len, max_len = x.size(-2), self.position_embedding.num_embeddings
        if seq_len > max_len:
            raise ValueError(
                f"Sequência de comprimento {seq_len} maior que max_len = {max_len}: "
                "não existe embedding aprendido para essas posições."
            )
        positions = torch.arange(seq_len, device=x.device)
        return x + self.position_embedding(positions)  # (B, T, D) + (T, D) -> (B, T, D)


def rope_frequencies(
    d: int,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """θ_i = base^(−2i/d) para i = 0 … d/2 − 1.

    A escada tem a forma da senoidal, mas ``d`` aqui é a largura da cabeça (Dk), não ``d_model``.

    Formas:
        devolve: (d/2,)
    """
    return base ** (-torch.arange(0, d, 2, dtype=dtype, device=device) / d)


def _rope_angles(x: torch.Tensor, positions: torch.Tensor | None, base: float) -> torch.Tensor:
    seq_len, d = x.size(-2), x.size(-1)
    if d % 2:
        raise ValueError(f"A última dimensão de x deve ser par para formar pares; recebido {d}.")
    if positions is None:
        positions = torch.arange(seq_len, device=x.device)
    elif positions.dim() != 1 or positions.numel() != seq_len:
        raise ValueError(
            f"positions deve ser 1-D com {seq_len} elementos (um por posição de x); "
            f"recebido forma {tuple(positions.shape)}."
        )
    theta = rope_frequencies(d, base, dtype=x.dtype, device=x.device)  # (D/2,)
    return positions.to(x.dtype)[:, None] * theta  # (T, 1) * (D/2,) -> (T, D/2)


def apply_rope(x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0) -> torch.Tensor:
    """Aplica RoPE: gira cada par intercalado (x[2i], x[2i+1]) pelo ângulo p·θ_i.

    Em números complexos: z_i = x[2i] + j·x[2i+1] vira z_i·e^{j·p·θ_i}, com θ_i = base^(−2i/d).

    Formas:
        x: (..., T, D) com D par; positions: (T,) inteiros (padrão 0 … T−1) -> (..., T, D)

    Raises:
        ValueError: D ímpar, ou ``positions`` que não tem T elementos.
    """
    angles = _rope_angles(x, positions, base)  # (T, D/2)
    cos, sin = angles.cos(), angles.sin()
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, D) -> (..., T, D/2) cada
    rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)
    return rotated.flatten(-2)  # (..., T, D/2, 2) -> (..., T, D)


def apply_rope_half(
    x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0
) -> torch.Tensor:
    """RoPE na convenção "rotate_half" (GPT-NeoX, LLaMA no Hugging Face): pares (x[i], x[i + D/2]).

    Mesmas frequências e mesma propriedade relativa; só muda quais coordenadas formam cada par.

    Formas:
        x: (..., T, D) com D par -> (..., T, D)
    """
    angles = _rope_angles(x, positions, base)  # (T, D/2)
    cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)  # (T, D)
    first, second = x.chunk(2, dim=-1)  # (..., T, D/2) cada
    rotate_half = torch.cat((-second, first), dim=-1)
    return x * cos + rotate_half * sin


def interleaved_to_half(d: int) -> torch.Tensor:
    """Permutação que leva a ordem intercalada à ordem em metades: pares primeiro, ímpares depois.

    Com ``perm = interleaved_to_half(d)``: ``apply_rope(x)[..., perm] == apply_rope_half(x[..., perm])``.
    """
    return torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Inclinações de ALiBi: m_h = 2^(−8h/H), h = 1 … H (sequência geométrica).

    Para H potência de 2 é exatamente a receita do artigo. Para outros H o código oficial
    faz diferente (veja :func:`alibi_slopes_official`); este curso usa a fórmula geométrica
    para todo H.

    Formas:
        devolve: (H,), no dtype padrão
    """
    _check_positive(n_heads, "n_heads")
    h = torch.arange(1, n_heads + 1, dtype=torch.float64)
    return (2.0 ** (-8.0 * h / n_heads)).to(torch.get_default_dtype())


def alibi_slopes_official(n_heads: int) -> torch.Tensor:
    """As inclinações do código oficial de ALiBi (``get_slopes``, Press et al.), para comparação.

    Para H potência de 2, igual a :func:`alibi_slopes`. Para outros H: as 2^⌊log₂ H⌋ inclinações
    geométricas dessa potência de 2, seguidas de uma sim, outra não das inclinações da potência
    seguinte (2·2^⌊log₂ H⌋), até completar H.

    Formas:
        devolve: (H,), no dtype padrão
    """
    _check_positive(n_heads, "n_heads")

    def power_of_2(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_2(closest)
    if closest < n_heads:
        slopes += power_of_2(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float64).to(torch.get_default_dtype())


def alibi_bias(n_heads: int, seq_len: int) -> torch.Tensor:
    """Viés de ALiBi somado aos scores: bias[h, i, j] = −m_h·|i − j|.

    Formas:
        devolve: (H, T, T)
    """
    _check_positive(seq_len, "seq_len")
    slopes = alibi_slopes(n_heads)  # (H,)
    pos = torch.arange(seq_len, dtype=slopes.dtype)
    distance = (pos[:, None] - pos[None, :]).abs()  # (T, 1) - (1, T) -> (T, T)
    return -slopes[:, None, None] * distance + 0.0  # (H, 1, 1) * (T, T) -> (H, T, T); + 0.0 tira o -0.0


def cosine_similarity_matrix(vectors: torch.Tensor) -> torch.Tensor:
    """Similaridade do cosseno entre todas as linhas: (T, D) -> (T, T)."""
    unit = vectors / vectors.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return unit @ unit.T  # (T, D) @ (D, T) -> (T, T)


def toeplitz_deviation(matrix: torch.Tensor) -> float:
    """Quanto uma matriz (T, T) foge de depender só de i − j: maior |M[i+1, j+1] − M[i, j]|.

    Vale 0 exatamente quando cada diagonal é constante (matriz de Toeplitz).
    """
    if matrix.size(0) < 2:
        return 0.0
    return (matrix[1:, 1:] - matrix[:-1, :-1]).abs().max().item()
