"""Embeddings de tokens e codificações de posição (capítulo 1).

Quatro maneiras de dizer ao *Transformer* onde cada token está:

- senoidal (Vaswani et al., 2017): um vetor fixo somado ao embedding;
- aprendida (GPT-2, BERT): uma tabela ``max_len × d_model`` treinada, somada ao embedding;
- RoPE (Su et al., 2021): gira pares de coordenadas de q e k por um ângulo proporcional à posição;
- ALiBi (Press et al., 2022): soma aos scores de atenção um viés −m·|i − j|.

Formas: B lote, T comprimento, D ``d_model``, H cabeças, V vocabulário.
Convenção de RoPE deste curso: pares **intercalados** (x[2i], x[2i+1]), como no artigo e no
código de referência do LLaMA; a convenção "rotate_half" (pares x[i], x[i + D/2], a do
GPT-NeoX e a do LLaMA no Hugging Face) está em :func:`apply_rope_half` para comparação.
RoPE age por cabeça: o D destas funções é a largura da cabeça (Dk), não ``d_model``.

As sete funções e classes que o aluno reescreve no capítulo 1 estão aqui exatamente como na
resposta-modelo do notebook (o mesmo código). As medidas que alimentam figuras e widgets
(similaridade do cosseno, desvio de Toeplitz) ficam em ``experiments/ch01.py``.
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
    "interleaved_to_half",
    "rope_frequencies",
    "sinusoidal_encoding",
]


def sinusoidal_encoding(max_len, d_model):
    """Tabela de codificação posicional senoidal de Vaswani et al. (2017).

    PE[p, 2i] = sin(p / 10000^(2i/D)) e PE[p, 2i+1] = cos(p / 10000^(2i/D)).
    O par 0 tem a frequência mais alta (período 2π ≈ 6,3 posições); o último par,
    a mais baixa (período perto de 2π·10000).

    Formas:
        devolve: (max_len, D), em float32

    Raises:
        ValueError: ``d_model`` ímpar ou não positivo, ``max_len`` não positivo.
    """
    if max_len <= 0 or d_model <= 0 or d_model % 2 != 0:
        raise ValueError(
            "max_len e d_model devem ser positivos, e d_model par (pares seno/cosseno); "
            f"recebi max_len={max_len}, d_model={d_model}."
        )
    # Ângulos em float64, convertidos no fim: o erro absoluto de p·ω cresce com p em qualquer formato,
    # mas em float64 fica perto de p·10⁻¹⁶ (em float32, p·10⁻⁷), desprezível aqui.
    positions = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(positions * omega)  # (T, 1) * (D/2,) -> (T, D/2)
    pe[:, 1::2] = torch.cos(positions * omega)
    return pe.float()  # (T, D), float32


class TokenEmbedding(nn.Module):
    """Tabela de embeddings de tokens, multiplicada por √d_model (Vaswani et al., 2017, seção 3.4).

    A tabela é sorteada com desvio 1/√d_model, como no tensor2tensor (o código dos autores):
    depois da multiplicação cada vetor tem norma ≈ √d_model, a mesma escala da codificação
    senoidal (norma √(d_model/2)). A linha do *padding* volta a zero depois do sorteio.

    Formas:
        token_ids: (B, T) inteiros em [0, V) -> (B, T, D)
    """

    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model**-0.5)
        if padding_idx is not None:
            with torch.no_grad():
                self.embedding.weight[padding_idx].zero_()

    def forward(self, token_ids):
        return self.embedding(token_ids) * math.sqrt(self.d_model)


class SinusoidalPositionalEncoding(nn.Module):
    """Soma a codificação senoidal ao embedding e aplica dropout (uma vez só).

    A tabela fica num *buffer* ``pe`` (``max_len`` linhas, D colunas, float32): vai junto com
    ``.to(device)`` e com o ``state_dict``, mas não é um parâmetro treinável.

    Formas:
        x: (B, T, D) com T ≤ max_len -> (B, T, D)
    """

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))  # (max_len, D)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        seq_len, max_len = x.size(-2), self.pe.size(0)
        if seq_len > max_len:
            raise ValueError(f"sequência de comprimento {seq_len} maior que max_len = {max_len}.")
        return self.dropout(x + self.pe[:seq_len])  # (B, T, D) + (T, D) -> (B, T, D)


class LearnedPositionalEmbedding(nn.Module):
    """Posições aprendidas: uma linha treinável por posição, somada ao embedding (GPT-2, BERT).

    Formas:
        x: (B, T, D) com T ≤ max_len -> (B, T, D)
    """

    def __init__(self, max_len, d_model):
        super().__init__()
        self.position_embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        seq_len, max_len = x.size(-2), self.position_embedding.num_embeddings
        if seq_len > max_len:
            raise ValueError(
                f"sequência de comprimento {seq_len} maior que max_len = {max_len}: "
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


def apply_rope(x, positions=None, base=10000.0):
    """Aplica RoPE: gira cada par intercalado (x[2i], x[2i+1]) pelo ângulo p·θ_i.

    Em números complexos: z_i = x[2i] + j·x[2i+1] vira z_i·e^{j·p·θ_i}, com θ_i = base^(−2i/d).
    Os ângulos são calculados no dtype e no dispositivo de x.

    Formas:
        x: (..., T, Dk) com Dk par (a largura de uma cabeça); positions: (T,) inteiros
        (padrão 0 … T−1) -> (..., T, Dk)

    Raises:
        ValueError: Dk ímpar, ou ``positions`` que não tem forma (T,).
    """
    seq_len, d = x.size(-2), x.size(-1)
    if d % 2 != 0:
        raise ValueError(f"a última dimensão de x deve ser par para formar pares; recebi {d}.")
    if positions is None:
        positions = torch.arange(seq_len, device=x.device)
    if positions.shape != (seq_len,):
        raise ValueError(
            f"positions deve ter forma ({seq_len},), uma posição por linha de x; "
            f"recebi {tuple(positions.shape)}."
        )
    theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype, device=x.device) / d)  # (Dk/2,)
    angles = positions.to(device=x.device, dtype=x.dtype).unsqueeze(-1) * theta  # (T, 1)*(Dk/2,) -> (T, Dk/2)
    cos, sin = angles.cos(), angles.sin()
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, Dk) -> (..., T, Dk/2) cada
    rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)
    return rotated.flatten(-2)  # (..., T, Dk/2, 2) -> (..., T, Dk)


def apply_rope_half(
    x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0
) -> torch.Tensor:
    """RoPE na convenção "rotate_half" (GPT-NeoX, LLaMA no Hugging Face): pares (x[i], x[i + D/2]).

    Mesmas frequências e mesma propriedade relativa; só muda quais coordenadas formam cada par.

    Formas:
        x: (..., T, D) com D par -> (..., T, D)
    """
    seq_len, d = x.size(-2), x.size(-1)
    if d % 2:
        raise ValueError(f"a última dimensão de x deve ser par para formar pares; recebi {d}.")
    if positions is None:
        positions = torch.arange(seq_len, device=x.device)
    theta = rope_frequencies(d, base, dtype=x.dtype, device=x.device)  # (D/2,)
    angles = positions.to(device=x.device, dtype=x.dtype)[:, None] * theta  # (T, D/2)
    cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)  # (T, D)
    first, second = x.chunk(2, dim=-1)  # (..., T, D/2) cada
    rotate_half = torch.cat((-second, first), dim=-1)
    return x * cos + rotate_half * sin


def interleaved_to_half(d: int) -> torch.Tensor:
    """Permutação que leva a ordem intercalada à ordem em metades: pares primeiro, ímpares depois.

    Com ``perm = interleaved_to_half(d)``: ``apply_rope(x)[..., perm] == apply_rope_half(x[..., perm])``.
    """
    return torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))


def alibi_slopes(n_heads):
    """Inclinações de ALiBi: m_h = 2^(−8h/H), h = 1 … H (sequência geométrica).

    Para H potência de 2 é exatamente a receita do artigo. Para outros H o código oficial
    faz diferente (veja :func:`alibi_slopes_official`); este curso usa a fórmula geométrica
    para todo H.

    Formas:
        devolve: (H,), em float32
    """
    if n_heads <= 0:
        raise ValueError(f"n_heads deve ser positivo; recebi {n_heads}.")
    h = torch.arange(1, n_heads + 1, dtype=torch.float32)
    return 2.0 ** (-8.0 * h / n_heads)


def alibi_slopes_official(n_heads: int) -> torch.Tensor:
    """As inclinações do código oficial de ALiBi (``get_slopes``, Press et al.), para comparação.

    Para H potência de 2, igual a :func:`alibi_slopes`. Para outros H: as 2^⌊log₂ H⌋ inclinações
    geométricas dessa potência de 2, seguidas de uma sim, outra não das inclinações da potência
    seguinte (2·2^⌊log₂ H⌋), até completar H.

    Formas:
        devolve: (H,), em float32
    """
    if n_heads <= 0:
        raise ValueError(f"n_heads deve ser positivo; recebi {n_heads}.")

    def power_of_2(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_2(closest)
    if closest < n_heads:
        slopes += power_of_2(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(n_heads, seq_len):
    """Viés de ALiBi somado aos scores: bias[h, i, j] = −m_h·|i − j|.

    Formas:
        devolve: (H, T, T), em float32
    """
    if seq_len <= 0:
        raise ValueError(f"seq_len deve ser positivo; recebi {seq_len}.")
    positions = torch.arange(seq_len, dtype=torch.float32)
    distance = (positions[:, None] - positions[None, :]).abs()  # (T, 1) - (1, T) -> (T, T)
    return -alibi_slopes(n_heads)[:, None, None] * distance  # (H, 1, 1) * (T, T) -> (H, T, T)
