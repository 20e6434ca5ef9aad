"""Capítulo 7: o código de referência do pacote (geração, GPT, custos, corpus, datas, figuras, widget)."""

from __future__ import annotations

import math
import time

import pytest
import torch
from matplotlib.figure import Figure

from transformer_course import plots
from transformer_course.checks.ch07 import ToyBigramModel
from transformer_course.costs import attention_cost, count_parameters, kaplan_loss, naive_attention
from transformer_course.experiments.ch07 import loglog_slope, time_attention, train_gpt
from transformer_course.generation import GPTConfig, TinyGPT, generate, next_token_distribution
from transformer_course.seq2seq import DateSeq2Seq, DateVocab, date_in_words, make_date_batch, translate_dates
from transformer_course.text import (
    CharTokenizer,
    clean_markdown,
    course_corpus,
    get_batch,
    train_val_split,
    unigram_baseline,
)


def test_kaplan_constants_from_the_paper():
    assert kaplan_loss(8.8e13) == pytest.approx(1.0)
    assert kaplan_loss(1e9) / kaplan_loss(1e8) == pytest.approx(10**-0.076)
    with pytest.raises(ValueError, match="positivo"):
        kaplan_loss(0)


def test_attention_cost_counts_both_products():
    assert attention_cost(128, 64) == {"flops": 4 * 128 * 128 * 64, "score_bytes": 4 * 128 * 128}
    with pytest.raises(ValueError):
        attention_cost(0, 64)


def test_naive_attention_matches_torch():
    gen = torch.Generator().manual_seed(0)
    Q, K, V = (torch.randn(2, 3, 17, 8, generator=gen) for _ in range(3))
    torch.testing.assert_close(
        naive_attention(Q, K, V), torch.nn.functional.scaled_dot_product_attention(Q, K, V)
    )


def test_loglog_slope_recovers_exponent():
    xs = [2.0, 4.0, 8.0, 16.0]
    assert loglog_slope(xs, [3 * x**2 for x in xs]) == pytest.approx(2.0)


def test_time_attention_shapes():
    result = time_attention([16, 32], d_k=8, repeats=1)
    assert result["seq_len"] == [16, 32] and len(result["naive_s"]) == 2 and len(result["sdpa_s"]) == 2
    assert result["flops"][1] == 4 * result["flops"][0]


def test_next_token_distribution_limits():
    logits = torch.tensor([1.0, 3.0, 2.0])
    assert torch.equal(next_token_distribution(logits, 0.0), torch.tensor([0.0, 1.0, 0.0]))
    torch.testing.assert_close(next_token_distribution(logits, 1e-3), torch.tensor([0.0, 1.0, 0.0]))
    p = next_token_distribution(logits, 1.0, top_k=2)
    assert p[0] == 0 and p.sum() == pytest.approx(1.0)


def test_generate_reference_greedy_and_crop():
    table = torch.randn(5, 5, generator=torch.Generator().manual_seed(0))
    model = ToyBigramModel(table, max_len=3)
    prompt = torch.tensor([[0, 1, 2, 3]])
    out = generate(model, prompt, 4, temperature=0)
    ids = prompt
    for _ in range(4):
        ids = torch.cat([ids, table[ids[:, -1]].argmax(-1, keepdim=True)], 1)
    assert torch.equal(out, ids)
    assert model.longest_context == 3


def test_tiny_gpt_is_causal_and_counts_parameters():
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(vocab_size=11, max_len=12, d_model=16, n_heads=2, n_layers=2, d_ff=32)).eval()
    x = torch.randint(11, (2, 9))
    y = x.clone()
    y[:, 5] = (y[:, 5] + 1) % 11
    with torch.no_grad():
        a, b = model(x), model(y)
    assert a.shape == (2, 9, 11)
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])
    assert count_parameters(model) - count_parameters(model, exclude_embeddings=True) == (11 + 12) * 16
    # o N de Kaplan: sem os embeddings e sem a projeção de saída (que nos modelos deles é amarrada)
    n_kaplan = count_parameters(model, exclude_embeddings=True, exclude=[model.head])
    head = sum(p.numel() for p in model.head.parameters())
    assert head == 11 * 16 and count_parameters(model) - n_kaplan == (11 + 12) * 16 + head
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 13, dtype=torch.long))


def test_corpus_is_clean_portuguese_prose():
    text = course_corpus()
    assert len(text) > 5000
    assert "$" not in text and "`" not in text and "BEGIN SOLUTION" not in text
    assert "atenção" in text
    assert clean_markdown("A *atenção* usa $QK^T$ e `torch.softmax` (ver [docs](http://x)) " * 3).startswith(
        "A atenção usa e"
    )
    table = "Uma frase de prosa antes da tabela, longa o bastante.\n\n| a | b |\n|---|---|\n| 1,2 | 3 |\n"
    assert clean_markdown(table) == "Uma frase de prosa antes da tabela, longa o bastante."
    assert "|" not in text


def test_tokenizer_split_and_baseline():
    text = course_corpus()
    tok = CharTokenizer(text)
    assert tok.decode(tok.encode("A atenção")) == "A atenção"
    data = tok.encode(text)
    train, val = train_val_split(data, 0.1)
    assert len(train) + len(val) == len(data) and 0.05 < len(val) / len(data) < 0.15
    base = unigram_baseline(train, val, tok.vocab_size)
    assert 2.0 < base < math.log(tok.vocab_size)
    x, y = get_batch(train, 8, 4, torch.Generator().manual_seed(0))
    assert x.shape == (4, 8) and torch.equal(x[:, 1:], y[:, :-1])


def test_gpt_learns_below_unigram_baseline_quickly():
    text = course_corpus()
    tok = CharTokenizer(text)
    train, val = train_val_split(tok.encode(text))
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(tok.vocab_size, max_len=32, d_model=48, n_heads=4, n_layers=1, d_ff=96))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # como no notebook: modelo minúsculo, uma thread
    try:
        history = train_gpt(model, train, val, max_steps=120, max_seconds=60, batch_size=32, eval_every=60)
    finally:
        torch.set_num_threads(threads)
    assert history["step"][-1] >= 60, f"só {history['step'][-1]} passos em 60 s: CPU sobrecarregada?"
    assert history["val_loss"][-1] < unigram_baseline(train, val, tok.vocab_size) - 0.3


def test_dates():
    assert date_in_words(30, 11, 2026) == "trinta de novembro de 2026"
    assert date_in_words(1, 5, 1999) == "primeiro de maio de 1999"
    assert date_in_words(21, 4, 2000) == "vinte e um de abril de 2000"
    vocab = DateVocab()
    src, tgt_in, tgt_out, texts = make_date_batch(vocab, 8, torch.Generator().manual_seed(0))
    assert torch.equal(tgt_in[:, 1:], tgt_out[:, :-1])
    assert vocab.decode(tgt_out[0]) == texts[0][1]
    model = DateSeq2Seq(vocab.size, d_model=16, n_heads=2, n_layers=1, d_ff=32)
    assert len(translate_dates(model, vocab, ["30/11/2026"])) == 1


def test_figures_are_figures():
    result = time_attention([16, 32, 64], d_k=8, repeats=1)
    figs = [
        plots.family_masks_figure(),
        plots.attention_cost_figure(result, {"naive_s": 2.0, "sdpa_s": 2.0}),
        plots.kaplan_figure(kaplan_loss, {"x": 1e6}),
        plots.training_curves_figure(
            {"step": [0, 1], "train_loss": [float("nan"), 2.0], "val_loss": [3.0, 2.5]}, 3.1, 40
        ),
        plots.next_char_figure(list("abc"), {"τ = 1": torch.tensor([0.2, 0.5, 0.3])}, "t"),
        plots.cross_attention_figure(torch.rand(4, 3), "abcd", "xyz", "t"),
    ]
    assert all(isinstance(f, Figure) for f in figs)


def test_generation_widget_update_is_fast():
    from transformer_course.widgets.ch07 import GenerationExplorer

    text = course_corpus()
    tok = CharTokenizer(text)
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(tok.vocab_size)).eval()
    explorer = GenerationExplorer(model, tok)
    times = []
    for i, (t, k) in enumerate([(0.8, 0), (0.0, 0), (1.2, 10), (0.5, 5), (2.0, 0)]):
        start = time.perf_counter()
        fig = explorer.update(t, k, "A atenção ", i)
        times.append(time.perf_counter() - start)
    assert isinstance(fig, Figure)
    # Tempo: medido por `make bench` (orçamento 0,3 s), não afirmado aqui.
