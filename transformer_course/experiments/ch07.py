"""Os experimentos do capítulo 7: treinos e medidas que alimentam as figuras e as saídas impressas.

- :func:`train_gpt`, :func:`estimate_loss`, :func:`training_report`: o treino do GPT de caracteres
  (``generation.TinyGPT``) com orçamento de passos e de tempo, e uma frase honesta sobre ele.
- :func:`train_dates`, :func:`sequence_accuracy`: o treino do codificador-decodificador de datas
  (``seq2seq.DateSeq2Seq``) com *teacher forcing* e a fração de datas novas escritas sem erro.
- :func:`time_attention`, :func:`measure_attention_memory`, :func:`loglog_slope`: o tempo e a
  memória da atenção ingênua (``costs.naive_attention``) contra ``F.scaled_dot_product_attention``,
  e a inclinação das curvas em escala log-log.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from ..costs import attention_cost, naive_attention
from ..numbers import br
from ..seq2seq import DateSeq2Seq, DateVocab, make_date_batch, translate_dates
from ..text import get_batch

__all__ = [
    "estimate_loss",
    "loglog_slope",
    "measure_attention_memory",
    "sequence_accuracy",
    "time_attention",
    "train_dates",
    "train_gpt",
    "training_report",
]


# ====================================================================== o GPT de caracteres


@torch.no_grad()
def estimate_loss(model: nn.Module, data: torch.Tensor, block_size: int, batch_size: int = 256) -> float:
    """Entropia cruzada média (nats por caractere) em **todo** ``data``, sem sorteio.

    ``data`` é cortado em janelas seguidas de ``block_size`` caracteres, sem sobreposição, e cada
    caractere depois do primeiro é previsto uma vez, com o contexto que a sua janela tem. A média é
    por caractere previsto (a última janela pode ser mais curta). Poucos lotes sorteados não bastam:
    com 4 lotes de 64 janelas, o mesmo modelo media de 1,62 a 1,74 conforme a semente do sorteio.
    """
    if len(data) < 2:
        raise ValueError(f"são precisos ao menos 2 caracteres para medir a perda; recebidos {len(data)}.")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    n = (len(data) - 1) // block_size  # janelas inteiras
    x = data[: n * block_size].view(n, block_size)  # (n, T)
    y = data[1 : n * block_size + 1].view(n, block_size)  # (n, T): o caractere seguinte
    pieces = list(zip(x.split(batch_size), y.split(batch_size)))
    if n * block_size < len(data) - 1:  # o resto, uma janela mais curta
        pieces.append((data[n * block_size : -1][None], data[n * block_size + 1 :][None]))
    total = 0.0
    for xb, yb in pieces:
        logits = model(xb.to(device))  # (N, T, V)
        total += F.cross_entropy(logits.flatten(0, 1), yb.to(device).flatten(), reduction="sum").item()
    model.train(was_training)
    return total / (len(data) - 1)


def train_gpt(
    model: nn.Module,
    train_data: torch.Tensor,
    val_data: torch.Tensor,
    max_steps: int = 600,
    max_seconds: float = 60.0,
    batch_size: int = 32,
    lr: float = 3e-3,
    eval_every: int = 50,
    seed: int = 0,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.999),
    warmup_fraction: float = 0.05,
    min_lr_ratio: float = 0.1,
    threads: int | None = None,
) -> dict[str, list[float]]:
    """Treina com AdamW, aquecimento linear e decaimento cosseno, parando em ``max_steps`` ou ``max_seconds``.

    O agendamento anda com o que acabar primeiro: a fração é ``max(passo / max_steps,
    tempo / max_seconds)``. Numa máquina livre, os passos acabam antes e o agendamento é o de
    sempre; numa máquina ocupada, o tempo manda e a taxa ainda chega ao fim do cosseno (um treino
    cortado no meio, com a taxa ainda alta, termina bem pior).

    ``threads``: quantas threads do PyTorch usar na CPU. Com ``None``, mede: os primeiros passos
    de verdade se alternam entre 1, 2 (e 4, se houver núcleos) threads, e o resto do treino usa a que
    deu o passo mais rápido (a mediana de cada uma). Numa CPU livre, 2 threads fazem o passo ~1,5×
    mais rápido; com o outro núcleo ocupado, ficam mais lentas que 1 (as threads esperam umas pelas
    outras). No fim, o número de threads volta ao de antes.

    Devolve o histórico: ``step``, ``train_loss`` (média desde a última avaliação),
    ``val_loss``, ``seconds``; em ``total_seconds`` o tempo total, em ``max_steps`` o orçamento de
    passos, em ``cut_by_time`` 1.0 se o limite de tempo parou o treino antes do orçamento, em
    ``threads`` as threads usadas e, se houve medida, em ``probe_threads`` e ``probe_ms`` as
    candidatas e a mediana (ms) do passo de cada uma.
    """
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    # Sem decaimento de pesos nos vetores (vieses, LayerNorm), como no nanoGPT.
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    # Sem passos (a correção automática), sem otimizador: o primeiro de um processo importa o
    # torch._dynamo (≈2 s), mesmo sem compilar nada.
    optimizer = (
        torch.optim.AdamW(
            [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=lr,
            betas=betas,
            fused=device.type in ("cpu", "cuda"),  # um laço só sobre os parâmetros: ~5 % do passo na CPU
        )
        if max_steps > 0
        else None
    )
    warmup = max(1.0, warmup_fraction * max_steps)

    def schedule(step: int, elapsed: float) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, max(step / max_steps, elapsed / max_seconds))
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    history: dict[str, list[float]] = {"step": [], "train_loss": [], "val_loss": [], "seconds": []}
    threads_before = torch.get_num_threads()
    probe = _ThreadProbe(threads, device, max_steps)
    try:
        start, running = time.perf_counter(), []
        history["step"].append(0)
        history["train_loss"].append(float("nan"))
        history["val_loss"].append(estimate_loss(model, val_data, model.max_len))
        history["seconds"].append(0.0)
        model.train()
        step = 0
        for step in range(1, max_steps + 1):
            for group in optimizer.param_groups:
                group["lr"] = lr * schedule(step - 1, time.perf_counter() - start)
            probe.before(step)
            x, y = get_batch(train_data, model.max_len, batch_size, gen, device)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            running.append(loss.item())
            probe.after(step)
            out_of_time = time.perf_counter() - start > max_seconds
            if step % eval_every == 0 or step == max_steps or out_of_time:
                history["step"].append(step)
                history["train_loss"].append(sum(running) / len(running))
                history["val_loss"].append(estimate_loss(model, val_data, model.max_len))
                history["seconds"].append(time.perf_counter() - start)
                running = []
            if out_of_time:
                break
        model.eval()
        history["total_seconds"] = [time.perf_counter() - start]
        history["max_steps"] = [float(max_steps)]
        history["cut_by_time"] = [float(step < max_steps)]
        probe.record(history)
    finally:
        torch.set_num_threads(threads_before)
    return history


class _ThreadProbe:
    """Reveza as threads candidatas nos primeiros passos e fica com a do passo mais rápido.

    As candidatas se alternam passo a passo (1, 2, 1, 2, ...), para que uma mudança na carga da
    máquina durante a medida pese igual nas duas; a primeira vez de cada uma não conta (a primeira
    chamada com mais threads cria as threads).
    """

    WARMUP, ROUNDS = 2, 7  # passos antes de medir; rodadas de revezamento (a primeira não conta)

    def __init__(self, threads: int | None, device: torch.device, max_steps: int):
        cores = os.cpu_count() or 1
        self.candidates = [n for n in (1, 2, 4) if n <= cores] if threads is None else [threads]
        if device.type != "cpu" or max_steps < 4 * self.ROUNDS * len(self.candidates):
            # Treino curto (ou na GPU): medir custaria mais do que ganharia; fica como está.
            self.candidates = [threads or torch.get_num_threads()]
        self.plan = self.candidates * self.ROUNDS if len(self.candidates) > 1 else []
        self.samples: dict[int, list[float]] = {n: [] for n in self.candidates}
        self.chosen = self.candidates[0]
        torch.set_num_threads(self.chosen)
        self._started = 0.0

    def before(self, step: int) -> None:
        i = step - 1 - self.WARMUP
        if 0 <= i < len(self.plan):
            torch.set_num_threads(self.plan[i])
            self._started = time.perf_counter()

    def after(self, step: int) -> None:
        i = step - 1 - self.WARMUP
        if 0 <= i < len(self.plan):
            if i >= len(self.candidates):  # a primeira rodada só aquece
                self.samples[self.plan[i]].append(time.perf_counter() - self._started)
            if i == len(self.plan) - 1:
                self.chosen = min(self.candidates, key=lambda n: statistics.median(self.samples[n]))
                torch.set_num_threads(self.chosen)

    def record(self, history: dict[str, list[float]]) -> None:
        history["threads"] = [float(self.chosen)]
        if all(self.samples.values()) and len(self.candidates) > 1:
            history["probe_threads"] = [float(n) for n in self.candidates]
            history["probe_ms"] = [1000 * statistics.median(self.samples[n]) for n in self.candidates]


def training_report(history: dict[str, list[float]], reference: dict | None = None) -> str:
    """Uma frase honesta sobre o treino: passos, tempo, perda e se o limite de tempo o cortou.

    ``reference``: uma rodada de referência gravada com o orçamento inteiro, por exemplo
    ``{"val_loss": 1.6, "seconds": 40, "where": "máquina de 2 núcleos livre"}``.
    """
    steps, total = int(history["step"][-1]), history["total_seconds"][0]
    planned = int(history.get("max_steps", [steps])[0])
    loss = br(history["val_loss"][-1], ".3f")
    text = f"{steps} passos em {br(total, '.1f')} s; validação {loss} nats/caractere"
    if "probe_ms" in history:
        measured = ", ".join(
            f"{int(n)} thread{'s' if n > 1 else ''}: {br(ms, '.0f')} ms"
            for n, ms in zip(history["probe_threads"], history["probe_ms"])
        )
        chosen = int(history["threads"][0])
        text += f"\nthreads: {chosen}, a mais rápida nos primeiros passos ({measured} por passo)"
    if history.get("cut_by_time", [0.0])[0]:
        text += (
            f"\nATENÇÃO: o limite de tempo cortou o treino em {steps} de {planned} passos "
            "(máquina lenta ou ocupada); a perda fica acima da do orçamento inteiro."
        )
        if reference:
            text += (
                f"\nReferência gravada: os {planned} passos chegam a {br(reference['val_loss'], '.2f')} "
                f"nats/caractere em {br(reference['seconds'], '.0f')} s ({reference['where']})."
            )
    return text


# ====================================================================== as datas por extenso


def train_dates(
    model: DateSeq2Seq,
    vocab: DateVocab,
    steps: int = 300,
    batch_size: int = 64,
    lr: float = 3e-3,
    max_seconds: float = 15.0,
    seed: int = 0,
    threads: int | None = None,
) -> dict[str, list[float]]:
    """Treino com *teacher forcing*: o decodificador recebe o alvo deslocado e prevê o próximo caractere.

    Com ``steps=0`` (a correção automática), não treina nem cria o otimizador. ``threads`` como
    em :func:`train_gpt` (``None``: medidas nos primeiros passos).
    """
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    fused = device.type in ("cpu", "cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=fused) if steps > 0 else None
    history: dict[str, list[float]] = {"step": [], "loss": []}
    threads_before = torch.get_num_threads()
    probe = _ThreadProbe(threads, device, steps)
    try:
        start = time.perf_counter()
        model.train()
        for step in range(1, steps + 1):
            probe.before(step)
            src, tgt_in, tgt_out, _ = make_date_batch(vocab, batch_size, gen)
            logits = model(src.to(device), tgt_in.to(device))
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.to(device).flatten(), ignore_index=vocab.PAD)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            history["step"].append(step)
            history["loss"].append(loss.item())
            probe.after(step)
            if time.perf_counter() - start > max_seconds:
                break
        model.eval()
        history["seconds"] = [time.perf_counter() - start]
        probe.record(history)
    finally:
        torch.set_num_threads(threads_before)
    return history


def sequence_accuracy(model: DateSeq2Seq, vocab: DateVocab, n: int = 200, seed: int = 99) -> float:
    """Fração de datas novas escritas exatamente certas."""
    _, _, _, texts = make_date_batch(vocab, n, torch.Generator().manual_seed(seed))
    predicted = translate_dates(model, vocab, [t for t, _ in texts])
    return sum(p == w for p, (_, w) in zip(predicted, texts)) / n


# ====================================================================== o custo medido da atenção


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
    (de ``costs.attention_cost``, somados sobre as cabeças).
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
