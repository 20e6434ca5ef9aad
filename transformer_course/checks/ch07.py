"""Verificações do capítulo 7: ``generate``, ``kaplan_loss``, ``attention_cost`` e o questionário.

Oráculos independentes do código do aluno: para ``generate``, um modelo de brinquedo
cujos logits são conhecidos (uma tabela de bigramas: os logits de cada posição só
dependem do token daquela posição), a escolha gulosa escrita como um laço simples e as
frequências de milhares de sorteios comparadas com ``softmax(logits / temperature)``; para as
fórmulas, a fórmula escrita de novo aqui.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import torch
from torch import nn

from .. import costs as reference_costs
from .. import generation as reference_generation
from ..runtime import seeded_generator
from ..feedback import (
    CheckFailure,
    call,
    describe,
    expect,
    expect_raises,
    expect_unchanged,
    one_thread,
    passed,
    snapshot,
)

__all__ = [
    "ToyBigramModel",
    "check_attention_cost",
    "check_attention_cost_hidden",
    "check_family_quiz",
    "check_family_quiz_hidden",
    "check_family_quiz_item",
    "check_generate",
    "check_generate_hidden",
    "check_kaplan_loss",
    "check_kaplan_loss_hidden",
]

GENERATE = "generate"
KAPLAN = "kaplan_loss"
COST = "attention_cost"
QUIZ = "respostas_quiz"


# ---------------------------------------------------------------- o modelo de brinquedo


class ToyBigramModel(nn.Module):
    """Modelo de brinquedo: os logits da posição t são ``table[ids[:, t]]``.

    Com ``max_len``, recusa contextos mais longos (como um GPT de verdade, cuja tabela
    de posições acaba em ``max_len``).

    Formas:
        ids (B, T) -> logits (B, T, V)
    """

    def __init__(self, table: torch.Tensor, max_len: int | None = None):
        super().__init__()
        self.register_buffer("table", table)
        if max_len is not None:
            self.max_len = max_len
        self.longest_context = 0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        T = ids.size(1)
        self.longest_context = max(self.longest_context, T)
        if hasattr(self, "max_len") and T > self.max_len:
            raise RuntimeError(
                f"o modelo recebeu um contexto de {T} tokens, mas só enxerga max_len = {self.max_len}"
            )
        return self.table[ids]  # (B, T) -> (B, T, V)


def _table(V: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    """Logits de bigramas com máximo único em cada linha."""
    gen = seeded_generator(seed)
    return (torch.randn(V, V, generator=gen, dtype=torch.float64) * 2).to(dtype)


def _row_model(logits: torch.Tensor, max_len: int | None = None) -> ToyBigramModel:
    """Todo token leva à mesma linha de logits: o próximo token tem sempre a mesma distribuição."""
    return ToyBigramModel(logits.expand(logits.numel(), -1).clone(), max_len)


def _greedy(
    table: torch.Tensor, prompt: torch.Tensor, n: int, mode: str = "right", max_len: int | None = None
) -> torch.Tensor:
    """A escolha gulosa em laço; ``mode`` produz os erros conhecidos."""
    ids = prompt.clone()
    for _ in range(n):
        if mode == "first_position":
            last = ids[:, 0]
        elif mode == "crop_first" and max_len is not None:
            last = ids[:, :max_len][:, -1]
        else:
            last = ids[:, -1]
        nxt = table[last].argmax(dim=-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
    return ids


def _ids_tried(prompt, n, temperature, top_k=None, extra=""):
    k = "" if top_k is None else f", top_k={top_k}"
    return (
        f"prompt_ids {tuple(prompt.shape)}, max_new_tokens={n}, temperature={temperature}{k}"
        f" (modelo de brinquedo: tabela de bigramas){extra}"
    )


def _expect_ids(actual, expected, prompt, n, tried, mistakes=()) -> None:
    """Compara sequências de tokens exatamente, nomeando o erro conhecido quando coincide."""
    __tracebackhide__ = True
    B, T0 = prompt.shape
    expect(
        isinstance(actual, torch.Tensor),
        GENERATE,
        tried,
        f"Esperava um tensor de ids; veio {describe(actual)}.",
    )
    if tuple(actual.shape) == (B, n) and n > 0:
        raise CheckFailure(
            f"`{GENERATE}` falhou.\nTeste: {tried}\nForma errada: esperada {(B, T0 + n)}, "
            f"obtida {tuple(actual.shape)}.\nDiagnóstico provável: você devolveu só os tokens novos; "
            "a saída deve começar pelo prompt (prompt + tokens gerados)."
        )
    expect(
        tuple(actual.shape) == (B, T0 + n),
        GENERATE,
        tried,
        f"Forma errada: esperada {(B, T0 + n)} (prompt de {T0} + {n} novos), obtida {tuple(actual.shape)}.",
        "o laço deve acrescentar exatamente um token por passo, max_new_tokens vezes.",
    )
    expect(
        actual.dtype == torch.long,
        GENERATE,
        tried,
        f"dtype errado: esperado torch.int64 (ids de tokens), obtido {actual.dtype}.",
        "use `torch.multinomial`/`argmax`, que já devolvem inteiros, e não converta para float.",
    )
    expect(
        actual.device == prompt.device,
        GENERATE,
        tried,
        f"A saída está em {actual.device}, mas o prompt estava em {prompt.device}.",
    )
    expect(
        torch.equal(actual[:, :T0].cpu(), prompt.cpu()),
        GENERATE,
        tried,
        "A saída não começa pelo prompt: as primeiras posições foram alteradas.",
    )
    if torch.equal(actual.cpu(), expected.cpu()):
        return
    hint = next((name for name, value in mistakes if torch.equal(actual.cpu(), value.cpu())), None)
    diff = (actual.cpu() != expected.cpu()).nonzero()[0].tolist()
    raise CheckFailure(
        f"`{GENERATE}` falhou.\nTeste: {tried}\nTokens diferentes do esperado.\n"
        f"Primeira diferença em {tuple(diff)}: esperado {expected[tuple(diff)].item()}, "
        f"obtido {actual[tuple(diff)].item()}.\nEsperado: {expected[0].tolist()}\n"
        f"Obtido:   {actual[0].tolist()}" + (f"\nDiagnóstico provável: {hint}" if hint else "")
    )


ZERO_DIV = (
    "com temperature=0 os logits foram divididos por zero (inf/NaN no softmax); "
    "temperatura 0 significa escolha gulosa: trate esse caso à parte com `argmax`."
)
TOP_K_OVER_VOCAB = (
    "`top_k` maior que o vocabulário: `torch.topk(logits, top_k)` recusa um k maior que o último eixo; "
    "use `min(top_k, logits.size(-1))` (assim todos os tokens ficam)."
)
NO_CROP = (
    "o contexto não foi cortado: passe ao modelo só os últimos `model.max_len` tokens "
    "(`ids[:, -max_len:]`), quando o modelo tiver o atributo `max_len`."
)


def _frequencies(fn, logits, temperature, top_k, n_draws, seed, extra="", hint_on_error=None):
    """Frequência empírica de cada token em ``n_draws`` sorteios de um passo."""
    model = _row_model(logits)
    prompt = torch.zeros(n_draws, 1, dtype=torch.long)
    tried = _ids_tried(prompt, 1, temperature, top_k, extra)
    out = call(
        fn,
        GENERATE,
        tried,
        model,
        prompt,
        1,
        temperature=temperature,
        top_k=top_k,
        generator=seeded_generator(seed),
        hint_on_error=hint_on_error,
    )
    expect(
        isinstance(out, torch.Tensor) and tuple(out.shape) == (n_draws, 2),
        GENERATE,
        tried,
        f"Esperava um tensor ({n_draws}, 2); veio {describe(out)}.",
    )
    new = out[:, -1].long()
    expect(
        bool(((new >= 0) & (new < logits.numel())).all()),
        GENERATE,
        tried,
        "Há ids fora do vocabulário na saída.",
    )
    return torch.bincount(new, minlength=logits.numel()).double() / n_draws, tried


def _expect_distribution(freq, logits, temperature, top_k, tried, tol=0.035) -> None:
    """Compara frequências com softmax(logits / temperature) (e top-k), nomeando erros conhecidos."""
    __tracebackhide__ = True
    logits = logits.double()

    def dist(scaled, k=None, smallest=False):
        scaled = scaled.clone()
        if k is not None and k < scaled.numel():
            keep = scaled.topk(k, largest=not smallest).indices
            blocked = torch.ones_like(scaled, dtype=torch.bool)
            blocked[keep] = False
            scaled[blocked] = float("-inf")
        return scaled.softmax(-1)

    expected = dist(logits / temperature, top_k)
    if (freq - expected).abs().max() <= tol:
        return
    candidates = [
        (
            "a temperatura ignorada, ou aplicada DEPOIS do softmax (dividir as probabilidades por T "
            "não muda a distribuição sorteada): divida os LOGITS por T antes do softmax",
            dist(logits, top_k),
        ),
        ("os logits MULTIPLICADOS pela temperatura em vez de divididos", dist(logits * temperature, top_k)),
    ]
    if top_k is not None:
        candidates += [
            (
                "o top-k mantendo os k MENORES logits em vez dos k maiores",
                dist(logits / temperature, top_k, smallest=True),
            ),
            ("o top-k ignorado (todos os tokens continuaram sorteáveis)", dist(logits / temperature)),
        ]
    hint = next((name for name, p in candidates if (freq - p).abs().max() <= tol), None)
    fmt = lambda p: "[" + ", ".join(f"{v:.3f}" for v in p.tolist()) + "]"  # noqa: E731
    raise CheckFailure(
        f"`{GENERATE}` falhou.\nTeste: {tried}\nA distribuição dos tokens sorteados não é "
        f"softmax(logits / temperature){' restrita aos k maiores' if top_k else ''}.\n"
        f"Logits: {fmt(logits)}\nFrequências esperadas: {fmt(expected)}\nFrequências obtidas:   {fmt(freq)}"
        + (f"\nDiagnóstico provável: sua saída coincide com {hint}." if hint else "")
    )


def _check_greedy(fn, V=7, B=3, T0=2, n=6, seed=0, dtype=torch.float32, max_len=None, extra=""):
    table = _table(V, seed, dtype)
    gen = seeded_generator(seed + 100)
    prompt = torch.randint(V, (B, T0), generator=gen)
    model = ToyBigramModel(table, max_len)
    tried = _ids_tried(prompt, n, 0, extra=extra + ("" if max_len is None else f", model.max_len={max_len}"))
    before = snapshot(prompt)
    out = call(
        fn,
        GENERATE,
        tried,
        model,
        prompt,
        n,
        temperature=0.0,
        hint_on_error=NO_CROP if max_len is not None else ZERO_DIV,
    )
    expect_unchanged(before, [prompt], ["prompt_ids"], GENERATE, tried)
    mistakes = [
        (
            "os logits da PRIMEIRA posição em vez da última (use `logits[:, -1, :]`).",
            _greedy(table, prompt, n, "first_position"),
        )
    ]
    if max_len is not None:
        mistakes.append(
            (
                "o contexto cortado nos PRIMEIROS max_len tokens; o modelo deve ver os "
                "ÚLTIMOS (`ids[:, -max_len:]`).",
                _greedy(table, prompt, n, "crop_first", max_len),
            )
        )
    _expect_ids(out, _greedy(table, prompt, n), prompt, n, tried, mistakes)
    return model


def _check_generator(fn, extra=""):
    """O mesmo gerador dá o mesmo texto, e o gerador global não é tocado."""
    table = _table(9, 5)
    prompt = torch.tensor([[1, 2], [3, 4]])
    model = ToyBigramModel(table)
    tried = _ids_tried(prompt, 12, 1.0, extra=", generator com semente 123, duas vezes" + extra)
    state = torch.get_rng_state()
    try:
        first = call(fn, GENERATE, tried, model, prompt, 12, temperature=1.0, generator=seeded_generator(123))
        touched = not torch.equal(state, torch.get_rng_state())
        torch.manual_seed(987)
        second = call(
            fn, GENERATE, tried, model, prompt, 12, temperature=1.0, generator=seeded_generator(123)
        )
    finally:
        torch.set_rng_state(state)
    expect(
        not touched,
        GENERATE,
        tried,
        "Ao sortear com `generator=...`, sua função consumiu números do gerador GLOBAL do PyTorch.",
        "o gerador global foi usado no lugar de `generator`: passe `generator=generator` a "
        "`torch.multinomial`.",
    )
    expect(
        isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) and torch.equal(first, second),
        GENERATE,
        tried,
        "A mesma semente no `generator` produziu textos diferentes.",
        "o sorteio não usa o `generator` recebido (ou usa também outra fonte de acaso).",
    )


_one_thread = one_thread


def check_generate(fn: Callable) -> None:
    """Testes visíveis de ``generate`` (o estado do gerador global é restaurado no fim)."""
    __tracebackhide__ = True
    with torch.random.fork_rng(devices=[]), _one_thread():
        _check_generate(fn)


def check_generate_hidden(fn: Callable) -> None:
    """Testes ocultos de ``generate`` (o estado do gerador global é restaurado no fim)."""
    __tracebackhide__ = True
    with torch.random.fork_rng(devices=[]), _one_thread():
        _check_generate_hidden(fn)


def _check_generate(fn: Callable) -> None:
    __tracebackhide__ = True
    n = 0
    # 1. Gulosa (temperatura 0): resultado exato, lote de 3 prompts diferentes.
    _check_greedy(fn)
    n += 1
    # 2. Temperaturas 0,5 e 2: as frequências de 4000 sorteios seguem softmax(logits / temperature).
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, -2.0])
    for i, temperature in enumerate((0.5, 2.0)):
        freq, tried = _frequencies(fn, logits, temperature, None, 4000, seed=10 + i)
        _expect_distribution(freq, logits, temperature, None, tried)
        n += 1
    # 3. top-k: nunca sai um token fora dos k maiores.
    logits = torch.tensor([0.5, -1.0, 2.0, 0.0, 1.5, -0.5, 1.0, -2.0])
    freq, tried = _frequencies(fn, logits, 1.0, 3, 4000, seed=20)
    top = set(logits.topk(3).indices.tolist())
    outside = [i for i in range(logits.numel()) if freq[i] > 0 and i not in top]
    if outside:
        bottom = set(logits.topk(3, largest=False).indices.tolist())
        smallest = set(outside) <= bottom and all(freq[i] > 0 for i in bottom)
        raise CheckFailure(
            f"`{GENERATE}` falhou.\nTeste: {tried}\nLogits: {logits.tolist()}; os 3 maiores são os "
            f"tokens {sorted(top)}, mas sua função sorteou também {outside}."
            + (
                "\nDiagnóstico provável: sua saída coincide com o top-k mantendo os k MENORES logits "
                "em vez dos k maiores."
                if smallest
                else "\nDiagnóstico provável: o top-k não foi aplicado aos logits antes do sorteio."
            )
        )
    _expect_distribution(freq, logits, 1.0, 3, tried)
    n += 1
    # 4. Mesmo gerador, mesmo texto; o gerador global fica intocado.
    _check_generator(fn)
    n += 1
    # 5. Contexto cortado em model.max_len.
    _check_greedy(fn, V=6, B=2, T0=3, n=6, seed=3, max_len=4)
    n += 1
    passed(GENERATE, n)


def _check_generate_hidden(fn: Callable) -> None:
    """Testes ocultos: float64, top-k com temperatura, casos de borda, erros de argumento."""
    __tracebackhide__ = True
    n = 0
    expect(
        getattr(fn, "__code__", None) is not reference_generation.generate.__code__,
        GENERATE,
        "origem da função",
        "Sua função é a implementação de referência do pacote `transformer_course`.",
        "escreva a sua própria implementação em vez de importá-la.",
    )
    n += 1
    _check_greedy(fn, V=11, B=4, T0=1, n=9, seed=40, dtype=torch.float64, extra=" (logits float64)")
    n += 1
    _check_greedy(fn, V=5, B=1, T0=6, n=5, seed=41, max_len=2, extra=" (prompt maior que max_len)")
    n += 1
    # top-k = 1 com temperatura 1 é a escolha gulosa; top-k maior que o vocabulário não quebra nada.
    logits = torch.tensor([0.3, 1.7, -0.2, 1.1, 0.0, 0.9])
    freq, tried = _frequencies(fn, logits, 1.0, 1, 500, seed=42, extra=" (top_k=1)")
    _expect_distribution(freq, logits, 1.0, 1, tried)
    freq, tried = _frequencies(
        fn, logits, 1.0, 50, 4000, seed=43, extra=" (top_k > vocabulário)", hint_on_error=TOP_K_OVER_VOCAB
    )
    _expect_distribution(freq, logits, 1.0, None, tried)
    n += 2
    # temperatura e top-k juntos
    logits = torch.tensor([1.0, 3.0, -1.0, 2.0, 0.0, 2.5, -3.0])
    freq, tried = _frequencies(fn, logits, 0.7, 4, 4000, seed=44, extra=" (temperatura e top-k juntos)")
    _expect_distribution(freq, logits, 0.7, 4, tried)
    n += 1
    # max_new_tokens = 0 devolve o próprio prompt
    prompt = torch.tensor([[3, 1, 2]])
    tried = _ids_tried(prompt, 0, 1.0)
    out = call(fn, GENERATE, tried, ToyBigramModel(_table(4, 7)), prompt, 0, generator=seeded_generator(0))
    _expect_ids(out, prompt, prompt, 0, tried)
    n += 1
    _check_generator(fn, extra=" (oculto)")
    n += 1
    # argumentos inválidos
    model = ToyBigramModel(_table(4, 8))
    expect_raises(fn, ValueError, GENERATE, "max_new_tokens=-1", model, prompt, -1)
    expect_raises(fn, ValueError, GENERATE, "temperature=-0.5", model, prompt, 2, temperature=-0.5)
    n += 2
    passed(GENERATE, n)


# ---------------------------------------------------------------- Kaplan


def _plain_kaplan(N: float, N_c: float = 8.8e13, alpha: float = 0.076) -> float:
    return (N_c / N) ** alpha


def _kaplan_mistakes(N: float) -> list[tuple[str, float]]:
    return [
        ("a lei invertida, (N / N_c)^α: a perda cresceria com o tamanho do modelo", (N / 8.8e13) ** 0.076),
        ("α dez vezes maior (0,76 em vez de 0,076)", _plain_kaplan(N, alpha=0.76)),
        ("α dez vezes menor (0,0076 em vez de 0,076)", _plain_kaplan(N, alpha=0.0076)),
        ("a fórmula errada do texto-semente, 10 × N^(−0,076), que não é a de Kaplan", 10 * N**-0.076),
        ("N_c dez vezes menor (8,8·10¹²)", _plain_kaplan(N, N_c=8.8e12)),
        ("N_c dez vezes maior (8,8·10¹⁴)", _plain_kaplan(N, N_c=8.8e14)),
        ("o logaritmo da lei em vez da lei", math.log(_plain_kaplan(N))),
    ]


def _run_kaplan(fn: Callable, N: float) -> None:
    __tracebackhide__ = True
    tried = f"kaplan_loss({N:g})"
    result = call(fn, KAPLAN, tried, N)
    if isinstance(result, torch.Tensor) and result.numel() == 1:
        result = result.item()
    expect(
        isinstance(result, (int, float)) and not isinstance(result, bool),
        KAPLAN,
        tried,
        f"Esperava um número (float); veio {describe(result)}.",
    )
    expected = _plain_kaplan(N)
    if math.isclose(result, expected, rel_tol=1e-6):
        return
    hint = next(
        (name for name, value in _kaplan_mistakes(N) if math.isclose(result, value, rel_tol=1e-6)), None
    )
    expect(
        False,
        KAPLAN,
        tried,
        f"Esperado {expected:.6g}, obtido {result:.6g}.",
        f"sua saída coincide com {hint}."
        if hint
        else "confira L(N) = (N_c / N)^α_N com N_c = 8,8·10¹³ e α_N = 0,076.",
    )


def check_kaplan_loss(fn: Callable) -> None:
    """Testes visíveis de ``kaplan_loss``."""
    __tracebackhide__ = True
    n = 0
    for N in (1e6, 1e9, 1.5e8):
        _run_kaplan(fn, N)
        n += 1
    passed(KAPLAN, n)


def check_kaplan_loss_hidden(fn: Callable) -> None:
    """Testes ocultos: outros tamanhos, inteiros, monotonia e ValueError."""
    __tracebackhide__ = True
    n = 0
    for N in (123_456, 7.3e4, 2e11, 8.8e13):
        _run_kaplan(fn, N)
        n += 1
    values = [float(call(fn, KAPLAN, f"kaplan_loss({N:g})", N)) for N in (1e5, 1e7, 1e9)]
    expect(
        values[0] > values[1] > values[2],
        KAPLAN,
        "N = 1e5, 1e7, 1e9",
        f"A perda deveria cair quando N cresce; obtidas {values}.",
    )
    n += 1
    for bad in (0, -5.0):
        expect_raises(fn, ValueError, KAPLAN, f"kaplan_loss({bad})", bad)
        n += 1
    passed(KAPLAN, n)


# ---------------------------------------------------------------- custo da atenção


def _cost_mistakes(n: int, d: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    flops = [
        (
            "só o produto QKᵀ (faltou o produto pesos·V), ou cada multiplicação-soma contada como "
            "1 FLOP em vez de 2",
            2 * n * n * d,
        ),
        ("só QKᵀ e cada multiplicação-soma como 1 FLOP", n * n * d),
        (
            "a conta com as projeções W_Q, W_K, W_V e W_O incluídas; aqui contamos só os dois "
            "produtos da atenção",
            4 * n * n * d + 8 * n * d * d,
        ),
        ("n·d² em vez de n²·d (os papéis de seq_len e d_model trocados)", 4 * n * d * d),
    ]
    score_bytes = [
        ("bytes contados como float64 (8 bytes); a matriz é float32, 4 bytes por número", 8 * n * n),
        ("o número de elementos da matriz (n²), não os bytes", n * n),
        ("float16 (2 bytes); a matriz é float32, 4 bytes por número", 2 * n * n),
        ("a matriz n×d em vez da n×n dos scores", 4 * n * d),
    ]
    return flops, score_bytes


def _num(value) -> str:
    """12345678 -> '12.345.678' (separador de milhar do português)."""
    return f"{value:,}".replace(",", "\u2009").replace(".", ",").replace("\u2009", ".")


def _run_cost(fn: Callable, n: int, d: int) -> None:
    __tracebackhide__ = True
    tried = f"attention_cost(seq_len={n}, d_model={d})"
    result = call(fn, COST, tried, n, d)
    expect(isinstance(result, dict), COST, tried, f"Esperava um dicionário; veio {describe(result)}.")
    missing = {"flops", "score_bytes"} - set(result)
    expect(not missing, COST, tried, f"Faltam as chaves {sorted(missing)} no dicionário.")
    expected = {"flops": 4 * n * n * d, "score_bytes": 4 * n * n}
    flop_mistakes, byte_mistakes = _cost_mistakes(n, d)
    for key, mistakes in (("flops", flop_mistakes), ("score_bytes", byte_mistakes)):
        value = result[key]
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        expect(
            isinstance(value, (int, float)) and not isinstance(value, bool),
            COST,
            tried,
            f"`{key}` deveria ser um número; veio {describe(value)}.",
        )
        if value == expected[key]:
            continue
        hint = next((name for name, v in mistakes if value == v), None)
        expect(
            False,
            COST,
            tried,
            f"`{key}`: esperado {_num(expected[key])}, obtido {_num(value)}.",
            f"sua conta coincide com {hint}." if hint else None,
        )


def check_attention_cost(fn: Callable) -> None:
    """Testes visíveis de ``attention_cost``."""
    __tracebackhide__ = True
    n = 0
    for seq_len, d_model in ((6, 4), (100, 64), (1024, 64)):
        _run_cost(fn, seq_len, d_model)
        n += 1
    passed(COST, n)


def check_attention_cost_hidden(fn: Callable) -> None:
    """Testes ocultos: outros tamanhos, crescimento quadrático e ValueError."""
    __tracebackhide__ = True
    n = 0
    for seq_len, d_model in ((1, 1), (3, 5), (4096, 128), (257, 96)):
        _run_cost(fn, seq_len, d_model)
        n += 1
    a = call(fn, COST, "seq_len=512", 512, 64)["flops"]
    b = call(fn, COST, "seq_len=1024", 1024, 64)["flops"]
    expect(b == 4 * a, COST, "seq_len 512 -> 1024", "Dobrar o comprimento deveria quadruplicar os FLOPs.")
    n += 1
    for bad in ((0, 64), (16, 0), (-3, 8)):
        expect_raises(fn, ValueError, COST, f"attention_cost{bad}", *bad)
        n += 1
    expect(
        reference_costs.attention_cost is not fn,
        COST,
        "origem da função",
        "Sua função é a implementação de referência do pacote.",
    )
    n += 1
    passed(COST, n)


# ---------------------------------------------------------------- questionário

FAMILIES = ("encoder", "decoder", "encoder-decoder")
_ALIASES = {
    "encoder-only": "encoder",
    "codificador": "encoder",
    "so-codificador": "encoder",
    "decoder-only": "decoder",
    "decodificador": "decoder",
    "so-decodificador": "decoder",
    "codificador-decodificador": "encoder-decoder",
    "seq2seq": "encoder-decoder",
}
QUIZ_KEYS = ("a", "b", "c", "d", "e")
# sha256("chave:família") das respostas certas (para a resposta não ficar legível aqui).
_ANSWERS = {
    "a": "362062b4daa3db556feff3a0ae99713396611ad154517b0902f8687e16fd14c4",
    "b": "cdb0521fbe920fcfc2caca3af4246c2f5072f2001a9e07455508a687917df857",
    "c": "10a30e0fd5cfbfca564d40fdd067fe057f45e3254782c515b32a1edce4ff0dc3",
    "d": "eefb9e453bd602033e58025fb8c20773f0b6e577b4b61a7329820fda7dbb3a40",
    "e": "3329f5c46605ad1506b32830f551c45a4cb608569326ddeb5695b41fcc06fc2f",
}


def _normalize(value) -> str | None:
    if not isinstance(value, str):
        return None
    v = value.strip().lower().replace("_", "-").replace(" ", "-").replace("ó", "o")
    v = _ALIASES.get(v, v)
    return v if v in FAMILIES else None


def _digest(key: str, family: str) -> str:
    return hashlib.sha256(f"{key}:{family}".encode()).hexdigest()


def _check_quiz_format(answers) -> dict[str, str]:
    __tracebackhide__ = True
    tried = "formato das respostas"
    if callable(answers):
        answers = call(answers, QUIZ, "respostas_quiz()")
    expect(isinstance(answers, dict), QUIZ, tried, f"Esperava um dicionário; veio {describe(answers)}.")
    missing = [k for k in QUIZ_KEYS if k not in answers]
    expect(not missing, QUIZ, tried, f"Faltam as respostas dos itens {missing}.")
    normalized = {}
    for key in QUIZ_KEYS:
        if answers[key] is ...:
            raise CheckFailure(f"Você ainda não respondeu o item {key!r} do questionário (não implementado).")
        family = _normalize(answers[key])
        expect(
            family is not None,
            QUIZ,
            tried,
            f"Item {key!r}: resposta {answers[key]!r} não é uma das famílias {list(FAMILIES)}.",
        )
        normalized[key] = family
    return normalized


def check_family_quiz(answers) -> None:
    """Teste visível do questionário: só o formato (a correção é oculta)."""
    __tracebackhide__ = True
    _check_quiz_format(answers)
    print(
        f"✔ `{QUIZ}`: formato correto (5 itens, cada um uma de {list(FAMILIES)}). "
        "A correção das respostas é feita pelos testes ocultos."
    )


def check_family_quiz_item(answers, key: str) -> None:
    """Teste oculto de UM item do questionário: cada item vale os seus pontos, numa célula própria."""
    __tracebackhide__ = True
    if key not in QUIZ_KEYS:
        raise ValueError(f"item desconhecido: {key!r}; os itens são {list(QUIZ_KEYS)}.")
    tried = f"item {key!r} do questionário"
    if callable(answers):
        answers = call(answers, QUIZ, "respostas_quiz()")
    expect(isinstance(answers, dict), QUIZ, tried, f"Esperava um dicionário; veio {describe(answers)}.")
    expect(key in answers, QUIZ, tried, f"Falta a resposta do item {key!r}.")
    if answers[key] is ...:
        raise CheckFailure(f"Você ainda não respondeu o item {key!r} do questionário (não implementado).")
    family = _normalize(answers[key])
    expect(
        family is not None,
        QUIZ,
        tried,
        f"Item {key!r}: resposta {answers[key]!r} não é uma das famílias {list(FAMILIES)}.",
    )
    expect(
        _digest(key, family) == _ANSWERS[key],
        QUIZ,
        tried,
        f"Item {key!r}: a família {family!r} não é a mais natural para esta tarefa. Releia a "
        "seção 1: quem precisa ver a frase inteira, quem gera da esquerda para a direita e quem "
        "transforma uma entrada completa em outra sequência?",
    )
    print(f"✔ `{QUIZ}`: item {key!r} certo.")


def check_family_quiz_hidden(answers) -> None:
    """Teste oculto do questionário inteiro: cada item contra a resposta certa."""
    __tracebackhide__ = True
    normalized = _check_quiz_format(answers)
    wrong = [k for k, family in normalized.items() if _digest(k, family) != _ANSWERS[k]]
    expect(
        not wrong,
        QUIZ,
        "respostas do questionário",
        f"Itens com a família errada: {wrong}. Releia a seção 1: quem precisa ver a frase inteira, "
        "quem gera da esquerda para a direita e quem transforma uma entrada completa em outra sequência?",
    )
    passed(QUIZ, len(QUIZ_KEYS))
