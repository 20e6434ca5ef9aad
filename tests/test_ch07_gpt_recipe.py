"""A receita do GPT do capítulo 7: pesos amarrados, agendamento por passos ou tempo, corte honesto."""

from __future__ import annotations

import torch

from transformer_course.costs import count_parameters
from transformer_course.experiments.ch07 import train_gpt, training_report
from transformer_course.generation import GPTConfig, TinyGPT

SMALL = dict(vocab_size=13, max_len=8, d_model=16, n_heads=2, n_layers=1, d_ff=32)


def _data(n=400, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(13, (n,), generator=gen), torch.randint(13, (n // 4,), generator=gen)


def test_tied_weights_share_one_matrix():
    torch.manual_seed(0)
    tied = TinyGPT(GPTConfig(**SMALL, tie_weights=True))
    untied = TinyGPT(GPTConfig(**SMALL))
    assert tied.head.weight is tied.token_embedding.weight
    assert untied.head.weight is not untied.token_embedding.weight
    assert count_parameters(untied) - count_parameters(tied) == 13 * 16
    ids = torch.randint(13, (2, 5))
    tied(ids).sum().backward()  # um gradiente só, das duas pontas
    assert tied.token_embedding.weight.grad is not None


def test_full_budget_is_not_reported_as_cut():
    train, val = _data()
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(**SMALL))
    history = train_gpt(model, train, val, max_steps=6, max_seconds=600, batch_size=4, eval_every=3)
    assert history["step"][-1] == 6 and history["cut_by_time"] == [0.0] and history["max_steps"] == [6.0]
    report = training_report(history, {"val_loss": 1.5, "seconds": 40, "where": "ref"})
    assert report.startswith("6 passos") and "ATENÇÃO" not in report and "Referência" not in report


def test_time_cap_is_reported_with_the_reference_run():
    train, val = _data()
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(**SMALL))
    history = train_gpt(model, train, val, max_steps=10_000, max_seconds=0.0, batch_size=4, eval_every=50)
    assert history["step"][-1] == 1 and history["cut_by_time"] == [1.0]
    report = training_report(history, {"val_loss": 1.6, "seconds": 41, "where": "máquina livre"})
    assert "limite de tempo cortou o treino em 1 de 10000 passos" in report
    assert "os 10000 passos chegam a 1,60 nats/caractere em 41 s (máquina livre)" in report


def test_schedule_follows_time_when_time_runs_out_first(monkeypatch):
    """Com o tempo acabando antes dos passos, a taxa chega ao fim do cosseno (min_lr_ratio)."""
    train, val = _data()
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(**SMALL))
    clock = iter(range(10_000))
    monkeypatch.setattr("transformer_course.experiments.ch07.time.perf_counter", lambda: float(next(clock)))
    seen = []
    real_step = torch.optim.AdamW.step

    def spy(self, *args, **kwargs):
        seen.append(self.param_groups[0]["lr"])
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", spy)
    history = train_gpt(
        model, train, val, max_steps=1000, max_seconds=40, batch_size=4, lr=1.0, eval_every=500,
        warmup_fraction=0.001, min_lr_ratio=0.1,
    )  # fmt: skip
    assert history["cut_by_time"] == [1.0] and history["step"][-1] < 1000
    assert seen[0] == 1.0 and abs(seen[-1] - 0.1) < 0.05, f"a taxa terminou em {seen[-1]:.3f}"
    assert all(a >= b - 1e-9 for a, b in zip(seen[1:], seen[2:])), "o cosseno não é monótono"


def test_estimate_loss_is_the_mean_over_every_held_out_character():
    """Sem sorteio: cada caractere (depois do primeiro) é previsto uma vez, com o contexto da janela."""
    from torch.nn import functional as F

    from transformer_course.experiments.ch07 import estimate_loss

    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(**SMALL)).eval()
    data = torch.randint(13, (8 * 5 + 4,), generator=torch.Generator().manual_seed(3))  # 5 janelas e um resto
    expected, count = 0.0, 0
    for start in range(0, len(data) - 1, 8):
        x = data[start : start + 8][: len(data) - 1 - start]
        y = data[start + 1 : start + 9]
        with torch.no_grad():
            expected += F.cross_entropy(model(x[None])[0], y, reduction="sum").item()
        count += len(y)
    assert count == len(data) - 1
    got = estimate_loss(
        model, data, block_size=8, batch_size=2
    )  # lotes de 2 janelas: o lote não muda a conta
    assert abs(got - expected / count) < 1e-5, (got, expected / count)
    assert estimate_loss(model, data, block_size=8, batch_size=2) == got  # determinística: sem sorteio
    model.train()
    estimate_loss(model, data, block_size=8)
    assert model.training, "estimate_loss deve devolver o modelo no modo em que o recebeu"


def test_thread_probe_picks_a_measured_candidate_and_restores_threads():
    import os

    train, val = _data()
    before = torch.get_num_threads()
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(**SMALL))
    history = train_gpt(model, train, val, max_steps=60, max_seconds=600, batch_size=4, eval_every=30)
    assert torch.get_num_threads() == before
    if (os.cpu_count() or 1) >= 2:
        assert history["probe_threads"][:2] == [1.0, 2.0] and len(history["probe_ms"]) == len(
            history["probe_threads"]
        )
        fastest = history["probe_threads"][history["probe_ms"].index(min(history["probe_ms"]))]
        assert history["threads"] == [fastest]
        assert "a mais rápida nos primeiros passos (1 thread:" in training_report(history)
    fixed = train_gpt(
        model, train, val, max_steps=60, max_seconds=600, batch_size=4, eval_every=30, threads=1
    )
    assert fixed["threads"] == [1.0] and "probe_ms" not in fixed and "threads:" not in training_report(fixed)
    short = train_gpt(model, train, val, max_steps=5, max_seconds=600, batch_size=4, eval_every=5)
    assert "probe_ms" not in short, "um treino curto não deveria gastar passos medindo threads"
    assert torch.get_num_threads() == before
