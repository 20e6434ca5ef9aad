"""Quanto custa a atenção e quanto um modelo maior promete (capítulo 7).

- :func:`attention_cost`: FLOPs da atenção (todas as cabeças) e bytes dos scores de uma cabeça.
- :func:`naive_attention` e :func:`time_attention`: a atenção escrita com a matriz
  de scores explícita, cronometrada contra ``F.scaled_dot_product_attention``.
- :func:`loglog_slope`: a inclinação de uma reta ajustada em escala log-log.
- :func:`kaplan_loss`: a lei de escala de Kaplan et al. (2020) em função de N.

Formas: B lote, H cabeças, T comprimento, Dk largura de cada cabeça.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch
from torch.nn import functional as F

__all__ = [
    "KAPLAN_ALPHA_N",
    "KAPLAN_N_C",
    "attention_cost",
    "count_parameters",
    "kaplan_loss",
    "loglog_slope",
    "measure_attention_memory",
    "naive_attention",
    "time_attention",
]

KAPLAN_N_C = 8.8e13  # parâmetros (sem embeddings); Kaplan et al. 2020, tabela 5
KAPLAN_ALPHA_N = 0.076  # expoente de L(N); idem


def kaplan_loss(n_params: float) -> float:
    """Perda prevista (nats por token) pela lei L(N) = (N_c / N)^α_N de Kaplan et al. (2020).

    Vale para modelos treinados até convergir em dados suficientes (WebText2, tokens BPE);
    N conta os parâmetros sem os *embeddings*.
    """
    if n_params <= 0:
        raise ValueError(f"n_params deve ser positivo; recebido {n_params}.")
    return float((KAPLAN_N_C / n_params) ** KAPLAN_ALPHA_N)


def attention_cost(seq_len: int, d_model: int) -> dict[str, int]:
    """FLOPs de QKᵀ e pesos·V e bytes de uma matriz de scores n×n em float32.

    Com H cabeças de largura Dk = d_model / H, cada cabeça faz 2·n²·Dk FLOPs em cada produto
    (multiplicação-soma = 2 FLOPs); somadas as cabeças, 2·n²·d_model por produto, qualquer que
    seja H. Então ``flops`` = 4·n²·d_model vale para a camada inteira, e ``score_bytes`` = 4·n² é a
    matriz de **uma** cabeça (a camada guarda H delas).
    """
    if seq_len <= 0 or d_model <= 0:
        raise ValueError(f"seq_len e d_model devem ser positivos; recebidos {seq_len} e {d_model}.")
    n, d = seq_len, d_model
    return {"flops": 2 * n * n * d + 2 * n * n * d, "score_bytes": 4 * n * n}


def count_parameters(
    model: torch.nn.Module, exclude_embeddings: bool = False, exclude: Sequence[torch.nn.Module] = ()
) -> int:
    """Número de parâmetros treináveis.

    Args:
        exclude_embeddings: não conta as tabelas ``nn.Embedding`` (de tokens e de posições).
        exclude: outros módulos cujos parâmetros não contam. O N de Kaplan et al. (2020) exclui
            os *embeddings* de vocabulário e de posição; na tabela 1 deles, a projeção de saída
            para o vocabulário ("de-embed") não tem parâmetros próprios, pois é a mesma matriz do
            *embedding* de tokens. Num modelo em que ela é separada (o ``TinyGPT``, ``model.head``),
            o N comparável também a exclui: ``exclude=[model.head]``.
    """
    skip = {id(p) for m in exclude for p in m.parameters()}
    if exclude_embeddings:
        skip |= {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    return sum(p.numel() for p in model.parameters() if p.requires_grad and id(p) not in skip)


def naive_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """Atenção que materializa a matriz de scores (T, T) inteira.

    Formas:
        Q, K, V (..., T, Dk) -> (..., T, Dk)
    """
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))  # (..., T, Dk) @ (..., Dk, T) -> (..., T, T)
    return scores.softmax(dim=-1) @ V  # (..., T, T) @ (..., T, Dk) -> (..., T, Dk)


def _best_time(fn, repeats: int, sync) -> float:
    """O menor tempo de ``repeats`` execuções: o mais resistente a outros programas na mesma CPU."""
    fn()  # aquecimento
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return min(times)


def time_attention(
    seq_lens: Sequence[int],
    d_k: int = 64,
    n_heads: int = 1,
    repeats: int = 3,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> dict[str, list[float]]:
    """Mede o tempo (s, o melhor de ``repeats``) da atenção ingênua e de ``F.scaled_dot_product_attention``.

    Devolve as listas ``seq_len``, ``naive_s``, ``sdpa_s``, ``flops`` e ``score_bytes``
    (de :func:`attention_cost`, somados sobre as cabeças).
    """
    device = torch.device(device)
    gen = torch.Generator(device=device).manual_seed(seed)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    result: dict[str, list[float]] = {k: [] for k in ("seq_len", "naive_s", "sdpa_s", "flops", "score_bytes")}
    with torch.no_grad():
        for n in seq_lens:
            Q, K, V = (torch.randn(1, n_heads, n, d_k, generator=gen, device=device) for _ in range(3))
            result["seq_len"].append(n)
            naive = lambda Q=Q, K=K, V=V: naive_attention(Q, K, V)  # noqa: E731
            fused = lambda Q=Q, K=K, V=V: F.scaled_dot_product_attention(Q, K, V)  # noqa: E731
            result["naive_s"].append(_best_time(naive, repeats, sync))
            result["sdpa_s"].append(_best_time(fused, repeats, sync))
            cost = attention_cost(n, d_k)
            result["flops"].append(n_heads * cost["flops"])
            result["score_bytes"].append(n_heads * cost["score_bytes"])
    return result


def _allocated_bytes(fn, device: torch.device) -> int:
    """Bytes alocados durante ``fn()``: pico do alocador na GPU; na CPU, a soma das alocações
    registradas pelo ``torch.profiler`` (a CPU não tem contador de pico)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - base)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return int(sum(e.self_cpu_memory_usage for e in prof.key_averages() if e.self_cpu_memory_usage > 0))


def measure_attention_memory(
    seq_lens: Sequence[int], d_k: int = 64, device: torch.device | str = "cpu", seed: int = 0
) -> dict[str, list[int]]:
    """Memória alocada (bytes) pela atenção ingênua e por ``F.scaled_dot_product_attention``."""
    device = torch.device(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    result: dict[str, list[int]] = {"seq_len": [], "naive_bytes": [], "sdpa_bytes": []}
    with torch.no_grad():
        for n in seq_lens:
            Q, K, V = (torch.randn(1, 1, n, d_k, generator=gen, device=device) for _ in range(3))
            result["seq_len"].append(n)
            result["naive_bytes"].append(
                _allocated_bytes(lambda Q=Q, K=K, V=V: naive_attention(Q, K, V), device)
            )
            result["sdpa_bytes"].append(
                _allocated_bytes(lambda Q=Q, K=K, V=V: F.scaled_dot_product_attention(Q, K, V), device)
            )
    return result


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Inclinação da reta de mínimos quadrados de log y contra log x (o expoente p em y ∝ x^p)."""
    lx = torch.tensor([math.log(v) for v in x], dtype=torch.float64)
    ly = torch.tensor([math.log(v) for v in y], dtype=torch.float64)
    lx, ly = lx - lx.mean(), ly - ly.mean()
    return float((lx * ly).sum() / (lx * lx).sum())
