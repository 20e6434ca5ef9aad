"""Verificações do capítulo 7: o questionário, ``generate``, ``attention_cost`` e ``kaplan_loss``.

Oráculos independentes do aluno: para ``generate``, um modelo de brinquedo de logits conhecidos
(bigramas), a escolha gulosa num laço simples e as frequências de milhares de sorteios contra
``softmax(logits / temperature)``; para as fórmulas, a fórmula escrita de novo aqui. As respostas do
questionário não ficam no pacote: cada célula oculta passa a resposta certa do seu item.

Tudo passa por pedidos ao lado do aluno (:class:`feedback.Check`): o modelo de brinquedo é
construído lá (``transformer_course.scenarios.ch07``) e passado à função por referência; o gerador
vai pela semente; voltam os tokens, o maior contexto que o modelo viu e o estado do gerador global.
Um erro conhecido só é nomeado quando reproduz o que voltou: as mesmas frequências, os mesmos tokens
ou a mesma exceção (o juiz roda o erro na sua cópia do modelo).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .. import wire
from ..costs import attention_cost as attention_cost_ref
from ..costs import kaplan_loss as kaplan_loss_ref
from ..exercises import Exercise, GradedCell
from ..feedback import Check, Mistake, describe
from ..generation import generate as generate_ref
from ..numbers import br
from ..probe import Import, report
from ..scenarios.ch07 import ToyBigramModel

__all__ = ["check_attention_cost", "check_family_quiz", "check_generate", "check_kaplan_loss"]

CHAPTER = "07_familias"
QUIZ_KEYS = ("a", "b", "c", "d", "e")


def _exercise(name, reference, points, hidden_points):
    cells = GradedCell(f"test_{name}", points), GradedCell(f"test_{name}_hidden", hidden_points, True)
    return Exercise(CHAPTER, name, reference, cells)


QUIZ_HIDDEN = tuple(GradedCell(f"test_quiz_hidden_{key}", 0.5, True) for key in QUIZ_KEYS)
QUIZ = Exercise(CHAPTER, "respostas_quiz", None, (GradedCell("test_quiz", 0.5), *QUIZ_HIDDEN), "questionário")
GENERATE = _exercise("generate", generate_ref, 3, 3)
COST = _exercise("attention_cost", attention_cost_ref, 2, 1)
KAPLAN = _exercise("kaplan_loss", kaplan_loss_ref, 1, 1)


# ---------------------------------------------------------------- o modelo de brinquedo

# O modelo de brinquedo é construído do lado do aluno (uma classe do pacote sem oráculo, que o kernel
# da correção importa) e passado à função dele por referência; o juiz monta a sua cópia, com a mesma
# tabela, para reproduzir os erros conhecidos.
TOY = Import("transformer_course.scenarios.ch07.ToyBigramModel")


def _table(c: Check, V: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    """Logits de bigramas com máximo único em cada linha (nos testes ocultos, sorteados por entrega)."""
    return (torch.randn(V, V, generator=c.gen(seed), dtype=torch.float64) * 2).to(dtype)


def _toy(c: Check, table: torch.Tensor, max_len: int | None = None):
    """O modelo de brinquedo do lado do aluno (a referência a ele)."""
    return c.new(TOY, table) if max_len is None else c.new(TOY, table, max_len)


def _row_table(logits: torch.Tensor) -> torch.Tensor:
    """Todo token leva à mesma linha de logits: o próximo token tem sempre a mesma distribuição."""
    return logits.expand(logits.numel(), -1).clone()


def _greedy(table, prompt, n, mode="right", max_len=None) -> torch.Tensor:
    """A escolha gulosa em laço; ``mode`` produz os erros conhecidos."""
    ids = prompt.clone()
    for _ in range(n):
        context = ids[:, :1] if mode == "first" else ids[:, :max_len] if mode == "crop" else ids
        ids = torch.cat([ids, table[context[:, -1]].argmax(dim=-1, keepdim=True)], dim=1)
    return ids


def _raised(run: Callable[[], object]) -> tuple[str, str] | None:
    """O tipo e a mensagem da exceção que ``run()`` levanta (``None`` se não levanta)."""
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - a exceção é o resultado que se compara
        return type(exc).__name__, str(exc)
    return None


def _same_error(error: dict | None, raised: tuple[str, str] | None) -> bool:
    """A exceção do aluno (como dados) é a mesma que o erro conhecido levanta (tipo e mensagem)?"""
    if error is None or raised is None:
        return False
    message = str(error.get("message", ""))
    if message.endswith("…"):  # o kernel corta mensagens longas
        return error.get("type") == raised[0] and raised[1].startswith(message[:-1])
    return (error.get("type"), message) == raised


def _greedy_error(table, prompt, n, mode, max_len=None) -> tuple[str, str] | None:
    """A exceção que a geração gulosa levanta com o erro ``mode``, no modelo de brinquedo do juiz."""
    model = ToyBigramModel(table, max_len)

    def run():
        ids = prompt
        for _ in range(n):
            context = ids if max_len is None or mode == "no_crop" else ids[:, -max_len:]
            logits = model(context)[:, -1, :]
            if mode == "zero_div":  # temperatura 0 tratada como as outras: logits / 0
                nxt = torch.multinomial((logits / 0.0).softmax(dim=-1), 1)
            elif mode == "batch_axis":
                nxt = logits.argmax(dim=0, keepdim=True)
            elif mode == "batch_axis_column":
                nxt = logits.argmax(dim=0).unsqueeze(-1)
            else:
                nxt = logits.argmax(dim=-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)

    return _raised(run)


def _tried(prompt, n, temperature, top_k=None, extra="") -> str:
    k = "" if top_k is None else f", top_k={top_k}"
    toy = "(modelo de brinquedo: tabela de bigramas)"
    return f"prompt_ids {tuple(prompt.shape)}, max_new_tokens={n}, temperature={temperature}{k} {toy}{extra}"


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
ARGMAX_BATCH_AXIS = (
    "o `argmax` no eixo do LOTE (`dim=0`) em vez do eixo do vocabulário (`dim=-1`): os logits da última "
    "posição têm forma (B, V), e o próximo token de cada linha é `logits.argmax(dim=-1, keepdim=True)`."
)
FIRST_POSITION = "os logits da PRIMEIRA posição em vez da última (use `logits[:, -1, :]`)."
CROP_FIRST = (
    "o contexto cortado nos PRIMEIROS max_len tokens; o modelo deve ver os ÚLTIMOS (`ids[:, -max_len:]`)."
)
INTEGER_IDS = "use `torch.multinomial`/`argmax`, que já devolvem inteiros, e não converta para float."
NOT_PREFIX = "A saída não começa pelo prompt: as primeiras posições foram alteradas."
ONE_PER_STEP = "o laço deve acrescentar exatamente um token por passo, max_new_tokens vezes."
ONLY_NEW = "você devolveu só os tokens novos; a saída deve começar pelo prompt (prompt + tokens gerados)."
SHORT_CONTEXT = (
    "o modelo deve receber a sequência inteira até aqui (ou os últimos `max_len` tokens, "
    "`ids[:, -max_len:]`), e não só o último token ou um corte menor; dela, use os logits da última posição."
)


def _greedy_hint(error: dict | None, table, prompt, n, max_len) -> str | None:
    """O erro conhecido que levanta exatamente a exceção do aluno na geração gulosa (ou nenhum)."""
    if error is None:
        return None
    if error.get("type") == "ZeroDivisionError":  # 1 / temperature com números do Python
        return ZERO_DIV
    known = [("no_crop", NO_CROP)] if max_len is not None else []
    known += [
        ("zero_div", ZERO_DIV),
        ("batch_axis", ARGMAX_BATCH_AXIS),
        ("batch_axis_column", ARGMAX_BATCH_AXIS),
    ]
    return next(
        (hint for mode, hint in known if _same_error(error, _greedy_error(table, prompt, n, mode, max_len))),
        None,
    )


def _expect_ids(c: Check, out, expected, prompt, n, mistakes=()) -> None:
    """Compara sequências de tokens exatamente, nomeando o erro conhecido quando coincide."""
    B, T0 = prompt.shape
    c.expect(isinstance(out, torch.Tensor), f"Esperava um tensor de ids; veio {describe(out)}.")
    hint = ONLY_NEW if tuple(out.shape) == (B, n) and n > 0 else ONE_PER_STEP
    c.shape(out, (B, T0 + n), f"a saída (prompt de {T0} + {n} novos)", hint)
    c.dtype(out, torch.long, "os ids", INTEGER_IDS)
    device = wire.info(out).device  # onde a saída estava, do lado do aluno
    c.expect(device == str(prompt.device), f"A saída está em {device}; o prompt, em {prompt.device}.")
    out, expected = out.cpu(), expected.cpu()
    c.expect(torch.equal(out[:, :T0], prompt.cpu()), NOT_PREFIX)
    same = torch.equal(out, expected)
    hint = next((m.name for m in mistakes if torch.equal(out, m.value)), None)
    body = ""
    if not same:
        idx = tuple((out != expected).nonzero()[0].tolist())
        body = (
            f"Tokens diferentes do esperado.\nPrimeira diferença em {idx}: esperado {expected[idx].item()}, "
            f"obtido {out[idx].item()}.\nEsperado: {expected[0].tolist()}\nObtido:   {out[0].tolist()}"
        )
    c.expect(same, body, hint)


def _sample(c: Check, fn, logits, temperature, top_k, n_draws, seed, extra="", error_hint=None) -> None:
    """Um passo sorteado ``n_draws`` vezes: só tokens dos k maiores, frequências de softmax(logits / T).

    ``error_hint``: (diagnóstico, erro conhecido) — o diagnóstico de uma exceção do aluno, dado só se
    ``erro conhecido()`` levanta exatamente a mesma exceção.
    """
    prompt, V = torch.zeros(n_draws, 1, dtype=torch.long), logits.numel()
    c.case(_tried(prompt, 1, temperature, top_k, extra))
    model = _toy(c, _row_table(logits))
    kwargs = {"temperature": temperature, "top_k": top_k, "generator": c.gen(seed)}
    response = c.run(fn, (model, prompt, 1), kwargs)
    hint = None
    if response.error is not None and error_hint is not None:
        hint = error_hint[0] if _same_error(response.error, _raised(error_hint[1])) else None
    c.raise_for(response, hint)
    out = response.value
    c.shape(out, (n_draws, 2))
    new = out[:, -1].long()
    c.expect(bool(((new >= 0) & (new < V)).all()), "Há ids fora do vocabulário na saída.")
    freq = torch.bincount(new, minlength=V).double() / n_draws
    if top_k is not None and top_k < V:
        top, bottom = ({int(i) for i in logits.topk(top_k, largest=big).indices} for big in (True, False))
        outside = [i for i in range(V) if freq[i] > 0 and i not in top]
        smallest = set(outside) <= bottom and all(freq[i] > 0 for i in bottom)
        hint = f"sua saída coincide com {K_SMALLEST}." if smallest else None
        if outside and not smallest:
            # Só com um erro conhecido que reproduz as frequências: o top-k ausente ou com k + 1 tokens.
            scaled = logits.double() / temperature
            known = [
                (TOP_K_NOT_APPLIED, _dist(scaled)),
                (f"sua saída coincide com {K_PLUS_ONE}.", _dist(scaled, top_k + 1)),
            ]
            hint = _only_match(freq, known, _dist(scaled, top_k))
        c.expect(
            not outside,
            f"Logits: {_numbers(logits)}; os {top_k} maiores são os tokens {sorted(top)}, mas sua função "
            f"sorteou também {outside}.",
            hint,
        )
    _expect_distribution(c, freq, logits, temperature, top_k)


def _numbers(values: torch.Tensor) -> str:
    """Uma lista de números com 3 casas, no formato brasileiro: ``[0,865; 0,117; -1,000]``."""
    return "[" + "; ".join(br(v, ".3f") for v in values.tolist()) + "]"


def _dist(scaled, k=None, smallest=False):
    scaled = scaled.clone()
    if k is not None and k < scaled.numel():
        blocked = torch.ones_like(scaled, dtype=torch.bool)
        blocked[scaled.topk(k, largest=not smallest).indices] = False
        scaled[blocked] = float("-inf")
    return scaled.softmax(-1)


FREQ_TOL = 0.035  # |frequência - probabilidade| aceita (4000 sorteios: ~5 desvios-padrão)


def _only_match(freq, candidates, expected, tol=FREQ_TOL) -> str | None:
    """O nome do erro conhecido cujas probabilidades reproduzem as frequências, se for o único.

    Um erro que daria a distribuição certa não é candidato; se dois erros reproduzem as frequências
    (por exemplo, k + 1 tokens quando k + 1 é o vocabulário inteiro), nenhum é nomeado.
    """
    found = {
        name for name, p in candidates if (p - expected).abs().max() > tol and (freq - p).abs().max() <= tol
    }
    return found.pop() if len(found) == 1 else None


NO_TEMPERATURE = (
    "a temperatura ignorada, ou aplicada DEPOIS do softmax (dividir as probabilidades por T "
    "não muda a distribuição sorteada): divida os LOGITS por T antes do softmax"
)
MULTIPLIED = "os logits MULTIPLICADOS pela temperatura em vez de divididos"
K_SMALLEST = "o top-k mantendo os k MENORES logits em vez dos k maiores"
K_IGNORED = "o top-k ignorado (todos os tokens continuaram sorteáveis)"
TOP_K_NOT_APPLIED = "o top-k não foi aplicado aos logits antes do sorteio."
K_PLUS_ONE = (
    "o top-k mantendo k + 1 tokens (um a mais): o limiar é o k-ésimo maior logit, "
    "`torch.topk(logits, k).values[..., -1:]` (num tensor ordenado, o índice `k - 1`)"
)
K_MINUS_ONE = (
    "o top-k mantendo k − 1 tokens (um a menos): o k-ésimo maior logit também foi bloqueado; "
    "bloqueie só os menores que ele (`logits < kth`, não `<=`)"
)
BATCH_AXIS = (
    "o softmax no eixo do LOTE (`dim=0`) em vez do eixo do vocabulário (`dim=-1`): com linhas iguais, "
    "todo token fica igualmente provável"
)


def _expect_distribution(c: Check, freq, logits, temperature, top_k, tol=FREQ_TOL) -> None:
    """Compara frequências com softmax(logits / temperature) (e top-k), nomeando erros conhecidos."""
    logits = logits.double()
    scaled = logits / temperature
    expected = _dist(scaled, top_k)
    candidates = [(NO_TEMPERATURE, _dist(logits, top_k)), (MULTIPLIED, _dist(logits * temperature, top_k))]
    if top_k is not None:
        candidates += [(K_SMALLEST, _dist(scaled, top_k, True)), (K_IGNORED, _dist(scaled))]
        candidates.append((K_PLUS_ONE, _dist(scaled, top_k + 1)))
        if top_k > 1:
            candidates.append((K_MINUS_ONE, _dist(scaled, top_k - 1)))
    else:
        candidates.append((BATCH_AXIS, torch.full_like(logits, 1 / logits.numel())))
    ok = bool((freq - expected).abs().max() <= tol)
    hint = None if ok else _only_match(freq, candidates, expected, tol)
    c.expect(
        ok,
        f"A distribuição dos tokens sorteados não é softmax(logits / temperature)"
        f"{' restrita aos k maiores' if top_k else ''}.\nLogits: {_numbers(logits)}\n"
        f"Frequências esperadas: {_numbers(expected)}\nFrequências obtidas:   {_numbers(freq)}",
        f"sua saída coincide com {hint}." if hint else None,
    )


def _check_greedy(c: Check, fn, V=7, B=3, T0=2, n=6, seed=0, dtype=torch.float32, max_len=None, extra=""):
    """Temperatura 0: tokens exatos, prompt intocado e o contexto inteiro (ou os últimos max_len)."""
    table = _table(c, V, seed, dtype)
    prompt = torch.randint(V, (B, T0), generator=c.gen(seed + 100))
    model = _toy(c, table, max_len)
    c.case(_tried(prompt, n, 0, extra=extra + ("" if max_len is None else f", model.max_len={max_len}")))
    with c.untouched(prompt_ids=prompt):
        response = c.run(fn, (model, prompt, n), {"temperature": 0.0})
        c.raise_for(response, _greedy_hint(response.error, table, prompt, n, max_len))
    mistakes = [Mistake(FIRST_POSITION, _greedy(table, prompt, n, "first"))]
    if max_len is not None:
        mistakes.append(Mistake(CROP_FIRST, _greedy(table, prompt, n, "crop", max_len)))
    _expect_ids(c, response.value, _greedy(table, prompt, n), prompt, n, mistakes)
    seen = c.describe(model, attrs=["longest_context"])["attrs"]["longest_context"].get("value")
    want = T0 + n - 1 if max_len is None else min(max_len, T0 + n - 1)
    c.expect(seen == want, f"O modelo deveria ver {want} tokens no último passo; viu {seen}.", SHORT_CONTEXT)


def _check_generator(c: Check, fn, extra="") -> None:
    """O mesmo gerador dá o mesmo texto, e o gerador global não é tocado."""
    model, prompt = _toy(c, _table(c, 9, 5)), torch.tensor([[1, 2], [3, 4]])
    seed = c.gen(123).initial_seed()
    c.case(_tried(prompt, 12, 1.0, extra=f", generator com semente {seed}, duas vezes" + extra))
    # O gerador global do lado do aluno começa cada chamada numa semente conhecida (uma diferente em
    # cada uma): se a função usar o global em vez do `generator`, o estado dele muda e os textos diferem.

    def sampled(global_seed: int):
        kwargs = {"temperature": 1.0, "generator": c.gen(123)}
        response = c.run(fn, (model, prompt, 12), kwargs, seed=global_seed)
        c.raise_for(response)
        return response.value

    first = sampled(GLOBAL_SEEDS[0])
    state = c.call(Import("torch.get_rng_state"))  # o estado do gerador global depois da 1ª chamada
    untouched = torch.Generator().manual_seed(GLOBAL_SEEDS[0]).get_state()
    touched = not (isinstance(state, torch.Tensor) and torch.equal(state, untouched))
    second = sampled(GLOBAL_SEEDS[1])
    c.expect(
        not touched,
        "Ao sortear com `generator=...`, sua função consumiu números do gerador GLOBAL do PyTorch.",
        "o gerador global foi usado: passe `generator=generator` a `torch.multinomial`.",
    )
    c.expect(
        isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) and torch.equal(first, second),
        "A mesma semente no `generator` produziu textos diferentes.",
        "o sorteio não usa o `generator` recebido (ou usa também outra fonte de acaso).",
    )


GLOBAL_SEEDS = (2024, 987)  # as sementes do gerador global do lado do aluno em _check_generator


@GENERATE.visible_check
def check_generate(fn) -> None:
    """Testes visíveis de ``generate``: gulosa, temperaturas, top-k, gerador próprio e corte em max_len."""
    with GENERATE.check() as c:
        _check_greedy(c, fn)
        for i, temperature in enumerate((0.5, 2.0)):
            _sample(c, fn, torch.tensor([2.0, 1.0, 0.0, -1.0, -2.0]), temperature, None, 4000, seed=10 + i)
        _sample(c, fn, torch.tensor([0.5, -1.0, 2.0, 0.0, 1.5, -0.5, 1.0, -2.0]), 1.0, 3, 4000, seed=20)
        _check_generator(c, fn)
        _check_greedy(c, fn, V=6, B=2, T0=3, n=6, seed=3, max_len=4)


@GENERATE.hidden_check
def check_generate_hidden(fn) -> None:
    """Testes ocultos: float64, prompt maior que max_len, top-k nos extremos, temperatura e top-k juntos,
    max_new_tokens = 0, gerador e ValueError."""
    with GENERATE.check(hidden=True) as c:
        model, prompt = ToyBigramModel(_table(c, 6, 2)), torch.tensor([[1, 2]])
        run = lambda: fn(model, prompt, 3, temperature=1.0, top_k=2, generator=c.gen(0))  # noqa: E731
        c.refuse_reference(fn, generate_ref, run)
        _check_greedy(c, fn, V=11, B=4, T0=1, n=9, seed=40, dtype=torch.float64, extra=" (logits float64)")
        _check_greedy(c, fn, V=5, B=1, T0=6, n=5, seed=41, max_len=2, extra=" (prompt maior que max_len)")
        # top-k = 1 com temperatura 1 é a escolha gulosa; top-k maior que o vocabulário não quebra nada.
        logits = torch.tensor([0.3, 1.7, -0.2, 1.1, 0.0, 0.9])
        _sample(c, fn, logits, 1.0, 1, 500, 42, " (top_k=1)")
        unclamped = (TOP_K_OVER_VOCAB, lambda: torch.topk(_row_table(logits)[:1], 50))
        _sample(c, fn, logits, 1.0, 50, 4000, 43, " (top_k > vocabulário)", unclamped)
        logits = torch.tensor([1.0, 3.0, -1.0, 2.0, 0.0, 2.5, -3.0])
        _sample(c, fn, logits, 0.7, 4, 4000, 44, " (temperatura e top-k juntos)")
        prompt = torch.tensor([[3, 1, 2]])  # max_new_tokens = 0 devolve o próprio prompt
        c.case(_tried(prompt, 0, 1.0))
        out = c.call(fn, _toy(c, _table(c, 4, 7)), prompt, 0, generator=c.gen(0))
        _expect_ids(c, out, prompt, prompt, 0)
        _check_generator(c, fn, extra=" (oculto)")
        model = _toy(c, _table(c, 4, 8))
        c.case("max_new_tokens=-1").raises(ValueError, fn, model, prompt, -1)
        c.case("temperature=-0.5").raises(ValueError, fn, model, prompt, 2, temperature=-0.5)


# ---------------------------------------------------------------- Kaplan

KAPLAN_WHAT = "a perda L(N) = (N_c / N)^α_N (N_c = 8,8·10¹³, α_N = 0,076)"


def _plain_kaplan(N: float, N_c: float = 8.8e13, alpha: float = 0.076) -> float:
    return (N_c / N) ** alpha


def _kaplan_mistakes(N: float) -> list[Mistake]:
    return [
        Mistake("a lei invertida, (N / N_c)^α: a perda cresceria com o tamanho de N", 1 / _plain_kaplan(N)),
        Mistake("α dez vezes maior (0,76 em vez de 0,076)", _plain_kaplan(N, alpha=0.76)),
        Mistake("α dez vezes menor (0,0076 em vez de 0,076)", _plain_kaplan(N, alpha=0.0076)),
        Mistake("a fórmula errada do texto-semente, 10 × N^(−0,076), que não é a de Kaplan", 10 * N**-0.076),
        Mistake("N_c dez vezes menor (8,8·10¹²)", _plain_kaplan(N, N_c=8.8e12)),
        Mistake("N_c dez vezes maior (8,8·10¹⁴)", _plain_kaplan(N, N_c=8.8e14)),
        Mistake("o logaritmo da lei em vez da lei", math.log(_plain_kaplan(N))),
    ]


def _run_kaplan(c: Check, fn, N: float) -> float:
    c.case(f"kaplan_loss({N:g})")
    value = c.call(fn, N)
    c.number(value, _plain_kaplan(N), KAPLAN_WHAT, mistakes=_kaplan_mistakes(N))
    return value


@KAPLAN.visible_check
def check_kaplan_loss(fn) -> None:
    """Testes visíveis de ``kaplan_loss``."""
    with KAPLAN.check() as c:
        for N in (1e6, 1e9, 1.5e8):
            _run_kaplan(c, fn, N)


@KAPLAN.hidden_check
def check_kaplan_loss_hidden(fn) -> None:
    """Testes ocultos: outros tamanhos, inteiros, monotonia e ValueError."""
    with KAPLAN.check(hidden=True) as c:
        c.refuse_reference(fn, kaplan_loss_ref, lambda: fn(1e9))
        drawn = float(f"{10 ** (4 + 9 * torch.rand(1, generator=c.gen(60)).item()):.4g}")  # um N por entrega
        for N in (123_456, 7.3e4, 2e11, 8.8e13, drawn):
            _run_kaplan(c, fn, N)
        values = [_run_kaplan(c, fn, N) for N in (1e5, 1e7, 1e9)]
        c.case("N = 1e5, 1e7, 1e9").expect(
            values[0] > values[1] > values[2], f"A perda deveria cair quando N cresce; obtidas {values}."
        )
        for bad in (0, -5.0):
            c.case(f"kaplan_loss({bad})").raises(ValueError, fn, bad)


# ---------------------------------------------------------------- custo da atenção


ONLY_QK = (
    "só o produto QKᵀ (faltou o produto pesos·V), ou cada multiplicação-soma contada como 1 FLOP em vez de 2"
)
WITH_PROJECTIONS = (
    "a conta com as projeções W_Q, W_K, W_V e W_O incluídas; aqui contamos só os dois produtos da atenção"
)


def _cost_mistakes(n: int, d: int) -> tuple[list[Mistake], list[Mistake]]:
    flops = [
        Mistake(ONLY_QK, 2 * n * n * d),
        Mistake("só QKᵀ e cada multiplicação-soma como 1 FLOP", n * n * d),
        Mistake(WITH_PROJECTIONS, 4 * n * n * d + 8 * n * d * d),
        Mistake("n·d² em vez de n²·d (os papéis de seq_len e d_model trocados)", 4 * n * d * d),
    ]
    score_bytes = [
        Mistake("bytes contados como float64 (8 bytes); a matriz é float32, 4 bytes por número", 8 * n * n),
        Mistake("o número de elementos da matriz (n²), não os bytes", n * n),
        Mistake("float16 (2 bytes); a matriz é float32, 4 bytes por número", 2 * n * n),
        Mistake("a matriz n×d em vez da n×n dos scores", 4 * n * d),
    ]
    return flops, score_bytes


def _run_cost(c: Check, fn, n: int, d: int) -> dict:
    c.case(f"attention_cost(seq_len={n}, d_model={d})")
    result = c.call(fn, n, d)
    c.expect(isinstance(result, dict), f"Esperava um dicionário; veio {describe(result)}.")
    missing = sorted({"flops", "score_bytes"} - set(result))
    c.expect(not missing, f"Faltam as chaves {missing} no dicionário.")
    flop_mistakes, byte_mistakes = _cost_mistakes(n, d)
    c.number(result["flops"], 4 * n * n * d, "`flops`", rel=0.0, abs_tol=0.5, mistakes=flop_mistakes)
    c.number(result["score_bytes"], 4 * n * n, "`score_bytes`", rel=0.0, abs_tol=0.5, mistakes=byte_mistakes)
    return result


@COST.visible_check
def check_attention_cost(fn) -> None:
    """Testes visíveis de ``attention_cost``."""
    with COST.check() as c:
        for seq_len, d_model in ((6, 4), (100, 64), (1024, 64)):
            _run_cost(c, fn, seq_len, d_model)


@COST.hidden_check
def check_attention_cost_hidden(fn) -> None:
    """Testes ocultos: outros tamanhos, crescimento quadrático e ValueError."""
    with COST.check(hidden=True) as c:
        c.refuse_reference(fn, attention_cost_ref, lambda: fn(16, 8))
        drawn = tuple(int(v) for v in torch.randint(1, 2049, (2,), generator=c.gen(61)))  # um por entrega
        for seq_len, d_model in ((1, 1), (3, 5), (4096, 128), (257, 96), drawn):
            _run_cost(c, fn, seq_len, d_model)
        a, b = _run_cost(c, fn, 512, 64)["flops"], _run_cost(c, fn, 1024, 64)["flops"]
        c.case("seq_len 512 -> 1024").expect(b == 4 * a, "Dobrar seq_len deveria quadruplicar os FLOPs.")
        for bad in ((0, 64), (16, 0), (-3, 8)):
            c.case(f"attention_cost{bad}").raises(ValueError, fn, *bad)


# ---------------------------------------------------------------- questionário

FAMILIES = ("encoder", "decoder", "encoder-decoder")
_ALIASES = {
    **dict.fromkeys(("encoder-only", "codificador", "so-codificador"), "encoder"),
    **dict.fromkeys(("decoder-only", "decodificador", "so-decodificador"), "decoder"),
    **dict.fromkeys(("codificador-decodificador", "seq2seq"), "encoder-decoder"),
}
REREAD = (
    "Releia a seção 1: quem precisa ver a frase inteira, quem gera da esquerda para a direita e quem "
    "transforma uma entrada completa em outra sequência?"
)


def _normalize(value) -> str | None:
    if not isinstance(value, str):
        return None
    v = value.strip().lower().replace("_", "-").replace(" ", "-").replace("ó", "o")
    v = _ALIASES.get(v, v)
    return v if v in FAMILIES else None


def _quiz_answers(c: Check, answers) -> dict:
    """As respostas do questionário como dados (a função do aluno é chamada do lado dele)."""
    c.case("formato das respostas")
    response = c.scenario("ch07.quiz_answers", answers)
    c.raise_for(response)
    answers = response.value
    c.expect(isinstance(answers, dict), f"Esperava um dicionário; veio {describe(answers)}.")
    return answers


def _unanswered(value) -> bool:
    """O ``...`` do esboço (do outro lado, chega como a descrição de um objeto ``ellipsis``)."""
    return value is ... or (isinstance(value, wire.Describe) and value.type == "ellipsis")


def _family(c: Check, answers: dict, key: str) -> str:
    c.expect(key in answers, f"Falta a resposta do item {key!r}.")
    value, family = answers[key], _normalize(answers[key])
    c.expect(
        not _unanswered(value), f"Você ainda não respondeu o item {key!r} do questionário (não implementado)."
    )
    shown = value if isinstance(value, wire.Describe) else repr(value)
    c.expect(family is not None, f"Item {key!r}: resposta {shown} não é uma das famílias {list(FAMILIES)}.")
    return family


@QUIZ.visible_check
def check_family_quiz(answers) -> None:
    """Teste visível do questionário: só o formato (a correção é oculta)."""
    with QUIZ.check() as c:
        answers = _quiz_answers(c, answers)
        missing = [k for k in QUIZ_KEYS if k not in answers]
        c.expect(not missing, f"Faltam as respostas dos itens {missing}.")
        for key in QUIZ_KEYS:
            _family(c, answers, key)
    report("O teste visível confere só o formato; as respostas são corrigidas pelos testes ocultos.")


@QUIZ.hidden_check
def check_family_quiz_hidden(answers, **expected: str) -> None:
    """Testes ocultos do questionário: cada item nomeado contra a resposta certa, que vem da célula
    oculta (``check(respostas_quiz, a="encoder")``) e não do pacote; um item por célula dá crédito
    por item."""
    if not expected or any(k not in QUIZ_KEYS or _normalize(v) is None for k, v in expected.items()):
        raise ValueError(
            f"respostas esperadas inválidas: {expected!r}; itens {QUIZ_KEYS}, famílias {FAMILIES}"
        )
    with QUIZ.check(hidden=True) as c:
        answers = _quiz_answers(c, answers)
        c.case("item " + ", ".join(repr(k) for k in expected) + " do questionário")
        given = {key: _family(c, answers, key) for key in expected}
        wrong = [key for key in expected if given[key] != _normalize(expected[key])]
        items = [f"Item {k!r}: a família {given[k]!r} não é a mais natural para esta tarefa." for k in wrong]
        c.expect(not wrong, "\n".join([f"Itens com a família errada: {wrong}.", *items, REREAD]))


EXERCISES = (QUIZ, GENERATE, COST, KAPLAN)
