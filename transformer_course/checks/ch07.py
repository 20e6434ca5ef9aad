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

import torch

from .. import wire
from ..costs import attention_cost as attention_cost_ref
from ..costs import kaplan_loss as kaplan_loss_ref
from ..exercises import Exercise, GradedCell
from ..feedback import Check, Finding, Mistake, describe, exception_of, same_exception
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


def _greedy(table, prompt, n, mode="right", max_len=None, position=-1, pick="argmax"):
    """A escolha gulosa em laço; ``mode``, ``position`` e ``pick`` produzem erros (``None``: impossível)."""
    ids = prompt.clone()
    for _ in range(n):
        context = ids[:, :1] if mode == "first" else ids[:, :max_len] if mode == "crop" else ids
        if max_len is not None and mode == "right":
            context = ids[:, -max_len:]
        if not -context.size(1) <= position < context.size(1):
            return None
        logits = table[context[:, position]]
        nxt = logits.argmin(dim=-1, keepdim=True) if pick == "argmin" else logits.argmax(dim=-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
    return ids


def _greedy_mistakes(table, prompt, n, max_len) -> list[Mistake]:
    """Erros conhecidos da geração gulosa e os tokens que cada um produziria."""
    right = _greedy(table, prompt, n, max_len=max_len)
    mistakes = [
        Mistake(FIRST_POSITION, _greedy(table, prompt, n, "first"), "logits-da-primeira-posicao"),
        Mistake(ONLY_NEW, right[:, prompt.size(1) :], "so-tokens-novos"),
    ]
    if max_len is not None:
        mistakes.append(
            Mistake(CROP_FIRST, _greedy(table, prompt, n, "crop", max_len), "corte-nos-primeiros")
        )
    return mistakes


def _greedy_error(table, prompt, n, mode, max_len=None) -> tuple[str, str] | None:
    """A exceção que a geração gulosa levanta com o erro ``mode``, no modelo de brinquedo do juiz."""
    model = ToyBigramModel(table, max_len)

    def run():
        ids = prompt
        for _ in range(n):
            context = ids if max_len is None or mode == "no_crop" else ids[:, -max_len:]
            logits = model(context)[:, -1, :]
            if mode == "py_zero_div":  # 1 / temperature com números do Python
                logits = logits * (1 / 0.0)
            if mode == "zero_div":  # temperatura 0 tratada como as outras: logits / 0
                nxt = torch.multinomial((logits / 0.0).softmax(dim=-1), 1)
            elif mode == "batch_axis":
                nxt = logits.argmax(dim=0, keepdim=True)
            elif mode == "batch_axis_column":
                nxt = logits.argmax(dim=0).unsqueeze(-1)
            else:
                nxt = logits.argmax(dim=-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)

    return exception_of(run)


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
ONLY_NEW = "você devolveu só os tokens novos; a saída deve começar pelo prompt (prompt + tokens gerados)."
SHORT_CONTEXT = (
    "o modelo deve receber a sequência inteira até aqui (ou os últimos `max_len` tokens, "
    "`ids[:, -max_len:]`), e não só o último token ou um corte menor; dela, use os logits da última posição."
)
GREEDY_ERRORS = {  # modo do erro -> (id, diagnóstico)
    "no_crop": ("sem-corte", NO_CROP),
    "py_zero_div": ("temperatura-zero-dividida", ZERO_DIV),
    "zero_div": ("temperatura-zero-dividida", ZERO_DIV),
    "batch_axis": ("argmax-eixo-do-lote", ARGMAX_BATCH_AXIS),
    "batch_axis_column": ("argmax-eixo-do-lote", ARGMAX_BATCH_AXIS),
}


class _Greedy:
    """Um caso da geração gulosa (tabela, prompt, n, max_len) e um segundo, com a mesma configuração.

    O segundo caso (outra tabela, outro prompt) é pedido uma vez só, quando um diagnóstico precisa
    ser confirmado.
    """

    def __init__(self, c: Check, fn, V, B, T0, n, seed, dtype, max_len):
        self.c, self.fn, self.n, self.max_len = c, fn, n, max_len
        self.V, self.B, self.T0, self.seed, self.dtype = V, B, T0, seed, dtype
        self.table = _table(c, V, seed, dtype)
        self.prompt = torch.randint(V, (B, T0), generator=c.gen(seed + 100))
        self._second = None

    def second(self):
        """(tabela, prompt, resposta) de um segundo caso com a mesma configuração."""
        if self._second is None:
            c = self.c
            table = _table(c, self.V, self.seed + 500, self.dtype)
            prompt = torch.randint(self.V, (self.B, self.T0), generator=c.gen(self.seed + 600))
            response = c.run(
                self.fn,
                (_toy(c, table, self.max_len), prompt, self.n),
                {"temperature": 0.0},
                seed=GREEDY_SEED,
            )
            self._second = (table, prompt, response)
        return self._second

    def confirm(self, mistake: Mistake) -> bool:
        table, prompt, response = self.second()
        again = [m for m in _greedy_mistakes(table, prompt, self.n, self.max_len) if m.key == mistake.key]
        return any(_same_ids(response.value, m.value) for m in again)

    def error_hint(self, error: dict | None) -> tuple[str, str] | None:
        """(diagnóstico, id) do erro conhecido que levanta a mesma exceção do aluno, aqui e no 2º caso."""
        if error is None:
            return None
        modes = [m for m in GREEDY_ERRORS if m != "no_crop" or self.max_len is not None]
        for mode in modes:
            if same_exception(error, _greedy_error(self.table, self.prompt, self.n, mode, self.max_len)):
                table, prompt, response = self.second()
                raised = _greedy_error(table, prompt, self.n, mode, self.max_len)
                if same_exception(response.error, raised):
                    key, hint = GREEDY_ERRORS[mode]
                    return hint, key
                return None
        return None


def _same_ids(a, b) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and a.shape == b.shape
        and torch.equal(a.cpu().long(), b.cpu().long())
    )


def _expect_ids(c: Check, out, expected, prompt, n, mistakes=(), confirm=None, finders=()) -> None:
    """Compara sequências de tokens exatamente, nomeando o erro conhecido quando coincide (e se confirma)."""
    B, T0 = prompt.shape
    c.expect(
        isinstance(out, torch.Tensor),
        f"Esperava um tensor de ids; veio {describe(out)}.",
        kind="tipo",
        where="a saída",
    )
    shape_ok = tuple(out.shape) == (B, T0 + n)
    hint, known = None, {}
    only_new = next((m for m in mistakes if m.key == "so-tokens-novos" and _same_ids(out, m.value)), None)
    if not shape_ok and only_new is not None and (confirm is None or confirm(only_new)):
        hint, known = ONLY_NEW, {"mistake": "so-tokens-novos"}
    elif not shape_ok and out.dim() == 2 and out.size(0) == B and out.size(1) >= T0:
        added = out.size(1) - T0
        hint = (
            f"sua saída tem {added} tokens novos, e não max_new_tokens = {n}: o laço acrescenta "
            "exatamente um token por passo, max_new_tokens vezes."
        )
        known = {"mistake": "numero-de-tokens-novos"}
    c.shape(
        out, (B, T0 + n), f"a saída (prompt de {T0} + {n} novos)", hint, **(known or {"where": "a saída"})
    )
    c.dtype(
        out,
        torch.long,
        "os ids",
        INTEGER_IDS if out.is_floating_point() else None,
        kind="dtype",
        where="os ids",
    )
    device = wire.info(out).device  # onde a saída estava, do lado do aluno
    c.expect(
        device == str(prompt.device),
        f"A saída está em {device}; o prompt, em {prompt.device}.",
        kind="dispositivo",
        where="a saída",
    )
    out, expected = out.cpu(), expected.cpu()
    c.expect(
        torch.equal(out[:, :T0], prompt.cpu()),
        NOT_PREFIX,
        kind="propriedade",
        mistake="comeca-pelo-prompt",
        where="o prompt",
    )
    same = torch.equal(out, expected)
    named = None
    if not same:
        named = next(
            (m for m in mistakes if _same_ids(out, m.value) and (confirm is None or confirm(m))), None
        )
    body = ""
    if not same:
        idx = tuple((out != expected).nonzero()[0].tolist())
        body = (
            f"Tokens diferentes do esperado.\nPrimeira diferença em {idx}: esperado {expected[idx].item()}, "
            f"obtido {out[idx].item()}.\nEsperado: {expected[0].tolist()}\nObtido:   {out[0].tolist()}"
        )
    with c.diagnosing(*finders):
        c.expect(
            same,
            body,
            named.name if named else None,
            kind="valores",
            where="os tokens",
            **({"mistake": named.key} if named else {}),
        )


def _greedy_finders(c: Check, case: _Greedy, out):
    """Sem erro conhecido: a gulosa é determinística? Outra posição dos logits, o argmin? Onde deixa de ser
    argmax?"""
    table, prompt, n, max_len = case.table, case.prompt, case.n, case.max_len

    def deterministic() -> Finding | None:
        outs = []
        for global_seed in GLOBAL_SEEDS:
            model = _toy(c, table, max_len)
            outs.append(c.run(case.fn, (model, prompt, n), {"temperature": 0.0}, seed=global_seed).value)
        if all(isinstance(o, torch.Tensor) for o in outs) and not _same_ids(outs[0], outs[1]):
            return Finding(
                "propriedade",
                "gulosa-deterministica",
                "com temperature=0 a escolha é gulosa (argmax), sem sorteio: duas chamadas iguais "
                "deveriam dar os mesmos tokens, e as suas deram tokens diferentes.",
                "os tokens",
            )
        return None

    def other_choice() -> Finding | None:
        candidates = [
            ({"position": p}, f"os logits da posição {p} ({label}), e não os da última (`logits[:, -1, :]`)")
            for p, label in ((-2, "a penúltima"), (-3, "a antepenúltima"), (1, "a segunda"))
        ]
        candidates.append(
            (
                {"pick": "argmin"},
                "o token de MENOR logit (`argmin`); a escolha gulosa é o de maior (`argmax`)",
            )
        )
        for options, text in candidates:
            if not _same_ids(out, _greedy(table, prompt, n, max_len=max_len, **options)):
                continue
            table2, prompt2, response = case.second()
            if _same_ids(response.value, _greedy(table2, prompt2, n, max_len=max_len, **options)):
                key = "escolha-argmin" if "pick" in options else "posicao-dos-logits"
                return Finding("parametro", key, f"sua função usa {text}.", "os tokens")
        return None

    def argmax_step() -> Finding | None:
        T0 = prompt.size(1)
        ids = out.cpu().long()
        for t in range(n):
            prev = ids[:, T0 + t - 1]
            if not bool(((prev >= 0) & (prev < table.size(0))).all()):
                return None
            best = table[prev].argmax(dim=-1)
            wrong = (ids[:, T0 + t] != best).nonzero()
            if wrong.numel():
                b = int(wrong[0, 0])
                return Finding(
                    "propriedade",
                    "gulosa-argmax",
                    f"no passo {t + 1} (linha {b}), depois do token {int(prev[b])}, o maior logit é o "
                    f"do token {int(best[b])}, mas sua função escolheu {int(ids[b, T0 + t])}: com "
                    "temperature=0, o próximo token é o argmax dos logits da última posição.",
                    "os tokens",
                )
        return None

    return deterministic, other_choice, argmax_step


def _context_finding(c: Check, case: _Greedy, seen, want) -> Finding | None:
    """O tamanho do contexto que o modelo recebeu, ajustado e conferido com outro max_len (ou outro n)."""
    if not isinstance(seen, int) or seen >= want:
        return None
    n2 = case.n + 2
    max_len2 = None if case.max_len is None else case.max_len + 2
    model = _toy(c, case.table, max_len2)
    response = c.run(case.fn, (model, case.prompt, n2), {"temperature": 0.0}, seed=GREEDY_SEED)
    if response.error is not None:
        return None
    seen2 = c.describe(model, attrs=["longest_context"])["attrs"]["longest_context"].get("value")
    T0 = case.prompt.size(1)
    want2 = T0 + n2 - 1 if max_len2 is None else min(max_len2, T0 + n2 - 1)
    if not isinstance(seen2, int):
        return None
    whole = (
        "os últimos max_len tokens (`ids[:, -max_len:]`)"
        if case.max_len is not None
        else "a sequência inteira até aqui"
    )
    if seen == seen2 == 1:
        return Finding(
            "parametro",
            "contexto-ultimo-token",
            f"o modelo recebeu só o último token em cada passo (viu 1 token, e não {want}): passe a ele "
            f"{whole} e use os logits da última posição.",
            "o contexto",
        )
    if seen == seen2:
        return Finding(
            "parametro",
            "contexto-fixo",
            f"o modelo recebeu sempre {seen} tokens (um número fixo), e não {want}: passe a ele {whole}.",
            "o contexto",
        )
    if want - seen == want2 - seen2:
        d = want - seen
        if case.max_len is not None and want == case.max_len:
            text = (
                f"seu corte guarda max_len − {d} tokens (o modelo viu {seen}, e não max_len = "
                f"{case.max_len}): use `ids[:, -max_len:]`."
            )
        else:
            text = (
                f"o modelo recebeu {d} token{'s' if d > 1 else ''} a menos do que devia no último passo (viu "
                f"{seen}, e não {want}): passe a ele {whole}."
            )
        return Finding("parametro", "contexto-curto", text, "o contexto")
    return None


def _check_greedy(c: Check, fn, V=7, B=3, T0=2, n=6, seed=0, dtype=torch.float32, max_len=None, extra=""):
    """Temperatura 0: tokens exatos, prompt intocado e o contexto inteiro (ou os últimos max_len)."""
    case = _Greedy(c, fn, V, B, T0, n, seed, dtype, max_len)
    table, prompt = case.table, case.prompt
    model = _toy(c, table, max_len)
    c.case(_tried(prompt, n, 0, extra=extra + ("" if max_len is None else f", model.max_len={max_len}")))
    with c.untouched(prompt_ids=prompt):
        # O gerador global começa numa semente conhecida: uma gulosa que sorteia (errada) dá os mesmos
        # tokens ao estudar e na correção, e a mensagem é a mesma.
        response = c.run(fn, (model, prompt, n), {"temperature": 0.0}, seed=GREEDY_SEED)
        if response.error is not None:
            found = case.error_hint(response.error)
            c.raise_for(response, found[0] if found else None, **({"mistake": found[1]} if found else {}))
    out = response.value
    _expect_ids(
        c,
        out,
        _greedy(table, prompt, n, max_len=max_len),
        prompt,
        n,
        _greedy_mistakes(table, prompt, n, max_len),
        case.confirm,
        _greedy_finders(c, case, out) if isinstance(out, torch.Tensor) else (),
    )
    seen = c.describe(model, attrs=["longest_context"])["attrs"]["longest_context"].get("value")
    want = T0 + n - 1 if max_len is None else min(max_len, T0 + n - 1)
    found = None if seen == want else c.find(lambda: _context_finding(c, case, seen, want))
    c.expect(
        seen == want,
        f"O modelo deveria ver {want} tokens no último passo; viu {seen}.",
        found.cause if found else (SHORT_CONTEXT if isinstance(seen, int) and seen < want else None),
        kind=found.kind if found else "propriedade",
        mistake=found.id if found else "contexto-inteiro",
        where="o contexto",
    )


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
        kind="propriedade",
        mistake="gerador-global-intocado",
        where="o sorteio",
    )
    c.expect(
        isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) and torch.equal(first, second),
        "A mesma semente no `generator` produziu textos diferentes.",
        "o sorteio não usa o `generator` recebido (ou usa também outra fonte de acaso).",
        kind="propriedade",
        mistake="mesma-semente-mesmo-texto",
        where="o sorteio",
    )


GLOBAL_SEEDS = (2024, 987)  # as sementes do gerador global do lado do aluno em _check_generator
GREEDY_SEED = 31  # a do gerador global na chamada gulosa


# ---------------------------------------------------------------- sorteio: frequências e diagnósticos


def _numbers(values: torch.Tensor) -> str:
    """Uma lista de números com 3 casas, no formato brasileiro: ``[0,865; 0,117; -1,000]``."""
    return "[" + "; ".join(br(v, ".3f") for v in values.tolist()) + "]"


def _dist(scaled, k=None, smallest=False):
    """softmax de ``scaled`` (..., V) restrito aos k maiores (ou menores) de cada linha."""
    scaled = scaled.clone()
    if k is not None and k < scaled.size(-1):
        keep = scaled.topk(k, dim=-1, largest=not smallest).indices
        blocked = torch.ones_like(scaled, dtype=torch.bool).scatter(-1, keep, False)
        scaled[blocked] = float("-inf")
    return scaled.softmax(-1)


FREQ_TOL = 0.035  # |frequência - probabilidade| aceita (4000 sorteios: ~5 desvios-padrão)

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


def _batch_axis(rows: torch.Tensor, temperature: float) -> torch.Tensor:
    """O que o sorteio dá com o softmax no eixo do lote: grupos de linhas iguais, do mesmo tamanho."""
    column = (rows / temperature).softmax(dim=0)  # a soma sobre o lote, com grupos do mesmo tamanho
    return column / column.sum(-1, keepdim=True)  # `multinomial` normaliza cada linha


def _sampling_mistakes(temperature: float, top_k: int | None):
    """Erros conhecidos do sorteio: (id, nome, distribuição por grupo de linhas a partir dos logits)."""
    T, k = temperature, top_k
    found = [
        ("temperatura-ignorada", NO_TEMPERATURE, lambda rows: _dist(rows, k)),
        ("temperatura-multiplicada", MULTIPLIED, lambda rows: _dist(rows * T, k)),
    ]
    if k is not None:
        found += [
            ("topk-menores", K_SMALLEST, lambda rows: _dist(rows / T, k, True)),
            ("topk-ignorado", K_IGNORED, lambda rows: _dist(rows / T)),
            ("topk-mais-um", K_PLUS_ONE, lambda rows: _dist(rows / T, k + 1)),
        ]
        if k > 1:
            found.append(("topk-menos-um", K_MINUS_ONE, lambda rows: _dist(rows / T, k - 1)))
    else:
        found.append(("softmax-eixo-do-lote", BATCH_AXIS, lambda rows: _batch_axis(rows, T)))
    return found


def _consistent(counts: torch.Tensor, probs: torch.Tensor) -> bool:
    """As contagens (G, V) são compatíveis com as probabilidades (G, V)? (≈5 desvios-padrão por token)

    Um token de probabilidade 0 não pode aparecer; os outros ficam dentro de 5 desvios-padrão da
    binomial (mais uma folga de 2 sorteios).
    """
    counts, probs = counts.double().reshape(-1, counts.size(-1)), probs.double().reshape(-1, probs.size(-1))
    if counts.shape != probs.shape or not bool(torch.isfinite(probs).all()):
        return False
    n = counts.sum(-1, keepdim=True)
    expected = n * probs
    bound = 5 * (n * probs * (1 - probs)).clamp_min(0).sqrt() + 2
    zero = probs == 0
    return bool(((counts - expected).abs() <= bound)[~zero].all()) and bool((counts[zero] == 0).all())


class _Sampling:
    """Um passo sorteado muitas vezes, e o diagnóstico do que as frequências mostram.

    Um erro conhecido (ou um parâmetro ajustado: a temperatura efetiva, quantos tokens o top-k mantém)
    só é nomeado se as frequências dele são compatíveis com as do aluno, as da resposta certa não são,
    nenhum outro candidato diferente também é, e o mesmo vale num segundo sorteio com dois grupos de
    linhas de logits diferentes.
    """

    def __init__(self, c: Check, fn, logits, temperature, top_k, n_draws, seed):
        self.c, self.fn, self.logits = c, fn, logits.double()
        self.T, self.k, self.n, self.seed = temperature, top_k, n_draws, seed
        self._second = None

    def expected(self, rows: torch.Tensor) -> torch.Tensor:
        return _dist(rows / self.T, self.k)

    def second(self):
        """(logits dos dois grupos (2, V), contagens (2, V)) de um segundo sorteio (pedido uma vez)."""
        if self._second is None:
            c, V, h = self.c, self.logits.numel(), self.n // 2
            rows = (torch.randn(2, V, generator=c.gen(self.seed + 700), dtype=torch.float64) * 1.5).to(
                torch.float32
            )
            table = rows[torch.tensor([0, 1] + [0] * (V - 2))]  # o token 0 leva aos logits a; o 1, aos b
            prompt = torch.cat([torch.zeros(h, 1, dtype=torch.long), torch.ones(h, 1, dtype=torch.long)])
            kwargs = {"temperature": self.T, "top_k": self.k, "generator": c.gen(self.seed + 701)}
            response = c.run(self.fn, (_toy(c, table), prompt, 1), kwargs)
            counts = None
            out = response.value
            if response.error is None and isinstance(out, torch.Tensor) and tuple(out.shape) == (2 * h, 2):
                new = out[:, -1].long()
                if bool(((new >= 0) & (new < V)).all()):
                    counts = torch.stack(
                        [torch.bincount(new[:h], minlength=V), torch.bincount(new[h:], minlength=V)]
                    )
            self._second = (rows.double(), counts)
        return self._second

    def confirmed(self, dist_of) -> bool:
        rows, counts = self.second()
        return (
            counts is not None
            and _consistent(counts, dist_of(rows))
            and not _consistent(counts, self.expected(rows))
        )

    def find(self, counts: torch.Tensor, outside: bool = False) -> Finding | None:
        """O diagnóstico das contagens (V,) deste sorteio, ou ``None``."""
        row = self.logits[None]
        if _consistent(counts, self.expected(row)):
            return None
        matches = [
            (key, name, f)
            for key, name, f in _sampling_mistakes(self.T, self.k)
            if _consistent(counts, f(row))
        ]
        distinct = {tuple(f(row).flatten().tolist()) for _, _, f in matches}
        if len(distinct) == 1 and self.confirmed(matches[0][2]):
            key, name, _ = matches[0]
            text = (
                TOP_K_NOT_APPLIED if outside and key == "topk-ignorado" else f"sua saída coincide com {name}."
            )
            return Finding("valores", key, text, "as frequências")
        if len(distinct) > 1:  # dois erros diferentes explicam as frequências: nenhum é nomeado
            return None
        return self._fit(counts)

    def _fit(self, counts: torch.Tensor) -> Finding | None:
        """Ajusta (temperatura efetiva, quantos tokens ficam) às contagens; confere no segundo sorteio."""
        logits, V, T, k = self.logits, self.logits.numel(), self.T, self.k
        rank = torch.empty(V, dtype=torch.long)
        rank[logits.argsort(descending=True)] = torch.arange(V)
        drawn = counts > 0
        if not bool(drawn.any()):
            return None
        m_min = int(rank[drawn].max()) + 1
        many = counts >= 20
        temps = [("certa", T), ("1", 1.0), ("1/T", 1 / T), ("T²", T * T), ("√T", math.sqrt(T))]
        if int(many.sum()) >= 2:
            x, y = logits[many], counts[many].double().log()
            slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
            temps.append(("ajustada", 1 / slope if slope > 1e-9 else math.inf))
        fits = []
        for m in range(m_min, V + 1):
            for label, value in temps:
                scaled = logits[None] / value if math.isfinite(value) else logits[None] * 0
                if _consistent(counts, _dist(scaled, m)):
                    fits.append((m, label, value))
        sizes = {m for m, _, _ in fits}
        right_k = V if k is None or k >= V else k
        if right_k in sizes:  # tokens raros que não saíram não provam um corte menor
            m = right_k
        elif len(sizes) == 1:
            m = sizes.pop()
        else:
            return None
        labels = {label: value for size, label, value in fits if size == m}
        if "certa" in labels and m == right_k:
            return None
        named = [lb for lb in labels if lb not in ("certa", "ajustada")]
        if "certa" in labels:
            label = "certa"
        elif len(named) == 1:
            label = named[0]
        elif "ajustada" in labels:
            label = "ajustada"
        else:
            return None
        value = labels[label]

        def dist_of(rows):
            return _dist(rows / value if math.isfinite(value) else rows * 0, m)

        if not self.confirmed(dist_of):
            return None
        parts = []
        if m != right_k:
            if m == V:
                parts.append(f"seu top-k não restringiu nada: os {V} tokens continuaram sorteáveis (k = {k})")
            elif k is None or k >= V:
                parts.append(
                    f"seu sorteio ficou só entre os {m} maiores logits, mas nenhum top-k restringe aqui"
                )
            else:
                parts.append(f"seu top-k mantém {m} tokens, e não k = {k}")
        if math.isinf(value):
            return Finding(
                "parametro",
                "sorteio-uniforme",
                "seu sorteio ignora os logits: todo token "
                f"{'entre os ' + str(m) + ' maiores ' if m < V else ''}ficou igualmente provável.",
                "as frequências",
            )
        temperature = {
            "1": f"os logits não foram divididos pela temperatura (T = {br(T)})",
            "1/T": "os logits foram multiplicados pela temperatura em vez de divididos",
            "T²": f"os logits foram divididos duas vezes pela temperatura (por T² = {br(T * T, '.4g')})",
            "√T": f"os logits foram divididos por √T = {br(math.sqrt(T), '.4g')}, e não por T = {br(T)}",
            "ajustada": f"os logits foram divididos por ≈ {br(value, '.3g')} (estimado pelas frequências), "
            f"e não por T = {br(T)}",
        }.get(label)
        if temperature:
            parts.append(temperature)
        key = {(True, True): "temperatura-e-top-k", (True, False): "top-k", (False, True): "temperatura"}[
            (m != right_k, temperature is not None)
        ]
        return Finding("parametro", f"sorteio-{key}", "; ".join(parts) + ".", "as frequências")


def _sample(c: Check, fn, logits, temperature, top_k, n_draws, seed, extra="", error_hint=None) -> None:
    """Um passo sorteado ``n_draws`` vezes: só tokens dos k maiores, frequências de softmax(logits / T).

    ``error_hint``: (diagnóstico, id, erro conhecido) — o diagnóstico de uma exceção do aluno, dado só
    se ``erro conhecido(linhas)`` levanta exatamente a mesma exceção, aqui e no segundo sorteio.
    """
    prompt, V = torch.zeros(n_draws, 1, dtype=torch.long), logits.numel()
    c.case(_tried(prompt, 1, temperature, top_k, extra))
    model = _toy(c, _row_table(logits))
    kwargs = {"temperature": temperature, "top_k": top_k, "generator": c.gen(seed)}
    response = c.run(fn, (model, prompt, 1), kwargs)
    sampling = _Sampling(c, fn, logits, temperature, top_k, n_draws, seed)
    hint = None
    if response.error is not None and error_hint is not None:
        text, key, raise_it = error_hint
        if same_exception(response.error, exception_of(lambda: raise_it(_row_table(logits)))):
            again = dict(kwargs, generator=c.gen(seed))
            second = c.run(fn, (_toy(c, _row_table(logits.flip(0))), prompt, 1), again).error
            hint = (
                (text, key)
                if same_exception(second, exception_of(lambda: raise_it(_row_table(logits.flip(0)))))
                else None
            )
    c.raise_for(response, hint[0] if hint else None, **({"mistake": hint[1]} if hint else {}))
    out = response.value
    c.shape(out, (n_draws, 2), where="a saída")
    new = out[:, -1].long()
    c.expect(
        bool(((new >= 0) & (new < V)).all()),
        "Há ids fora do vocabulário na saída.",
        kind="propriedade",
        mistake="ids-no-vocabulario",
        where="os ids",
    )
    counts = torch.bincount(new, minlength=V)
    freq = counts.double() / n_draws
    if top_k is not None and top_k < V:
        top = {int(i) for i in logits.topk(top_k).indices}
        outside = [i for i in range(V) if freq[i] > 0 and i not in top]
        found = c.find(lambda: sampling.find(counts, outside=True)) if outside else None
        c.expect(
            not outside,
            f"Logits: {_numbers(logits)}; os {top_k} maiores são os tokens {sorted(top)}, mas sua função "
            f"sorteou também {outside}.",
            found.cause if found else None,
            kind=found.kind if found else "propriedade",
            mistake=found.id if found else "topk-so-os-k-maiores",
            where="as frequências",
        )
    scaled = logits.double() / temperature
    expected = _dist(scaled, top_k)
    ok = bool((freq - expected).abs().max() <= FREQ_TOL)
    found = None if ok else c.find(lambda: sampling.find(counts))
    c.expect(
        ok,
        f"A distribuição dos tokens sorteados não é softmax(logits / temperature)"
        f"{' restrita aos k maiores' if top_k else ''}.\nLogits: {_numbers(logits)}\n"
        f"Frequências esperadas: {_numbers(expected)}\nFrequências obtidas:   {_numbers(freq)}",
        found.cause if found else None,
        kind=found.kind if found else "valores",
        where="as frequências",
        **({"mistake": found.id} if found else {}),
    )


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
        unclamped = (TOP_K_OVER_VOCAB, "topk-maior-que-o-vocabulario", lambda rows: torch.topk(rows[:1], 50))
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
N_C, ALPHA = 8.8e13, 0.076


def _plain_kaplan(N: float, N_c: float = N_C, alpha: float = ALPHA) -> float:
    return (N_c / N) ** alpha


def _kaplan_mistakes(N: float) -> list[Mistake]:
    return [
        Mistake(
            "a lei invertida, (N / N_c)^α: a perda cresceria com o tamanho de N",
            1 / _plain_kaplan(N),
            "invertida",
        ),
        Mistake("α dez vezes maior (0,76 em vez de 0,076)", _plain_kaplan(N, alpha=0.76), "alfa-vezes-10"),
        Mistake(
            "α dez vezes menor (0,0076 em vez de 0,076)",
            _plain_kaplan(N, alpha=0.0076),
            "alfa-dividido-por-10",
        ),
        Mistake(
            "a fórmula errada do texto-semente, 10 × N^(−0,076), que não é a de Kaplan",
            10 * N**-0.076,
            "texto-semente",
        ),
        Mistake("N_c dez vezes menor (8,8·10¹²)", _plain_kaplan(N, N_c=8.8e12), "nc-dividido-por-10"),
        Mistake("N_c dez vezes maior (8,8·10¹⁴)", _plain_kaplan(N, N_c=8.8e14), "nc-vezes-10"),
        Mistake("o logaritmo da lei em vez da lei", math.log(_plain_kaplan(N)), "logaritmo"),
    ]


def _number_of(c: Check, fn, *args) -> float | None:
    """A resposta do aluno num caso extra, se for um número finito do Python (senão ``None``)."""
    value = c.run(fn, args).value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _kaplan_confirm(c: Check, fn, N: float):
    """Confere um erro conhecido da lei de Kaplan com outro N (37 vezes maior)."""

    def confirm(mistake: Mistake) -> bool:
        other = N * 37
        value = _number_of(c, fn, other)
        again = [m for m in _kaplan_mistakes(other) if m.key == mistake.key]
        return value is not None and any(math.isclose(value, m.value, rel_tol=1e-6) for m in again)

    return confirm


KAPLAN_FIT_AT = (1e6, 1e10)  # onde a lei do aluno é ajustada
KAPLAN_CONFIRM_AT = 3e8  # e onde o ajuste é conferido


def _kaplan_finders(c: Check, fn, N: float, value):
    """Sem erro conhecido: α_N e N_c ajustados a uma lei de potência; senão, as propriedades da lei."""
    cache: dict[float, float | None] = {}

    def at(n: float) -> float | None:
        if n not in cache:
            cache[n] = _number_of(c, fn, n)
        return cache[n]

    def power_law() -> Finding | None:
        (n1, n2), points = KAPLAN_FIT_AT, [at(n) for n in KAPLAN_FIT_AT]
        if any(p is None or p <= 0 for p in points) or not isinstance(value, (int, float)) or value <= 0:
            return None
        alpha = (math.log(points[0]) - math.log(points[1])) / (math.log(n2) - math.log(n1))
        if abs(alpha) < 1e-12:
            return None
        n_c = math.exp(math.log(points[0]) / alpha + math.log(n1))
        third = at(KAPLAN_CONFIRM_AT)
        if third is None or not all(
            math.isclose(got, _plain_kaplan(n, n_c, alpha), rel_tol=1e-6)
            for n, got in ((N, value), (KAPLAN_CONFIRM_AT, third))
        ):
            return None
        same_alpha, same_nc = math.isclose(alpha, ALPHA, rel_tol=1e-4), math.isclose(n_c, N_C, rel_tol=1e-3)
        a, nc = br(alpha, ".4g"), br(n_c, ".3g")
        if same_alpha and not same_nc:
            factor = br((n_c / N_C) ** alpha, ".4g")
            return Finding(
                "parametro",
                "kaplan-nc",
                f"sua lei é (N_c / N)^α_N com N_c = {nc}, e não 8,8 × 10¹³ "
                f"(o expoente α_N = 0,076 está certo): sua perda é a certa multiplicada por {factor}.",
                KAPLAN_WHAT,
            )
        if same_nc and not same_alpha:
            return Finding(
                "parametro",
                "kaplan-expoente",
                f"seu expoente α_N é {a}, e não 0,076 (N_c = 8,8 × 10¹³ está certo).",
                KAPLAN_WHAT,
            )
        if not (same_nc or same_alpha):
            return Finding(
                "parametro",
                "kaplan-expoente-e-nc",
                f"sua lei é (N_c / N)^α_N com α_N = {a} e N_c = {nc}; "
                "as do enunciado são α_N = 0,076 e N_c = 8,8 × 10¹³.",
                KAPLAN_WHAT,
            )
        return None

    def properties() -> Finding | None:
        low, high = (at(1e6), at(1e7)), (at(1e10), at(1e11))
        if any(p is None for p in (*low, *high)):
            return None
        if not (low[0] > low[1] and high[0] > high[1]):
            return Finding(
                "propriedade",
                "kaplan-decrescente",
                "a perda deveria cair quando N cresce (mais "
                f"parâmetros, perda menor); a sua vai de {br(low[0], '.4g')} em N = 10⁶ a "
                f"{br(low[1], '.4g')} em N = 10⁷.",
                KAPLAN_WHAT,
            )
        ratios = [b / a if a else math.inf for a, b in (low, high)]
        if not math.isclose(ratios[0], ratios[1], rel_tol=1e-6):
            return Finding(
                "propriedade",
                "kaplan-lei-de-potencia",
                "numa lei de potência, multiplicar N por 10 "
                "multiplica a perda sempre pelo mesmo fator (10^(−0,076) ≈ 0,839); a sua multiplica por "
                f"{br(ratios[0], '.4g')} de 10⁶ a 10⁷ e por {br(ratios[1], '.4g')} de 10¹⁰ a 10¹¹.",
                KAPLAN_WHAT,
            )
        return None

    return power_law, properties


def _run_kaplan(c: Check, fn, N: float) -> float:
    c.case(f"kaplan_loss({N:g})")
    value = c.call(fn, N)
    with c.diagnosing(*_kaplan_finders(c, fn, N, value)):
        c.number(
            value,
            _plain_kaplan(N),
            KAPLAN_WHAT,
            mistakes=_kaplan_mistakes(N),
            confirm=_kaplan_confirm(c, fn, N),
        )
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
            values[0] > values[1] > values[2],
            f"A perda deveria cair quando N cresce; obtidas {values}.",
            kind="propriedade",
            mistake="kaplan-decrescente",
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
COST_KEYS = ("flops", "score_bytes")


def _right_cost(n: int, d: int) -> dict:
    return {"flops": 4 * n * n * d, "score_bytes": 4 * n * n}


def _cost_mistakes(n: int, d: int) -> tuple[list[Mistake], list[Mistake]]:
    flops = [
        Mistake(ONLY_QK, 2 * n * n * d, "so-um-produto"),
        Mistake("só QKᵀ e cada multiplicação-soma como 1 FLOP", n * n * d, "so-qk-1-flop"),
        Mistake(WITH_PROJECTIONS, 4 * n * n * d + 8 * n * d * d, "com-projecoes"),
        Mistake(
            "n·d² em vez de n²·d (os papéis de seq_len e d_model trocados)", 4 * n * d * d, "n-e-d-trocados"
        ),
    ]
    score_bytes = [
        Mistake(
            "bytes contados como float64 (8 bytes); a matriz é float32, 4 bytes por número",
            8 * n * n,
            "float64",
        ),
        Mistake("o número de elementos da matriz (n²), não os bytes", n * n, "elementos"),
        Mistake("float16 (2 bytes); a matriz é float32, 4 bytes por número", 2 * n * n, "float16"),
        Mistake("a matriz n×d em vez da n×n dos scores", 4 * n * d, "matriz-n-por-d"),
        Mistake("bits em vez de bytes (um float32 tem 32 bits, 4 bytes)", 32 * n * n, "bits"),
    ]
    return flops, score_bytes


def _cost_of(c: Check, fn, n: int, d: int, key: str) -> float | None:
    result = c.run(fn, (n, d)).value
    value = result.get(key) if isinstance(result, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _cost_confirm(c: Check, fn, n: int, d: int, key: str):
    """Confere um erro conhecido de ``attention_cost`` noutro tamanho (n + 7, d + 3)."""

    def confirm(mistake: Mistake) -> bool:
        n2, d2 = n + 7, d + 3
        value = _cost_of(c, fn, n2, d2, key)
        again = [m for m in _cost_mistakes(n2, d2)[COST_KEYS.index(key)] if m.key == mistake.key]
        return value is not None and any(abs(value - m.value) <= 0.5 for m in again)

    return confirm


COST_FIT_AT = ((16, 8), (32, 8), (16, 32))  # n dobra; d quadruplica
COST_CONFIRM_AT = (24, 40)


def _monomial(points: list[float]) -> tuple[float, float, float] | None:
    """(a, p, q) de a·n^p·d^q pelos três pontos de ``COST_FIT_AT`` (p, q múltiplos de 1/2)."""
    v1, v2, v3 = points
    if min(points) <= 0:
        return None
    p, q = math.log2(v2 / v1), math.log2(v3 / v1) / 2
    if abs(2 * p - round(2 * p)) > 1e-9 or abs(2 * q - round(2 * q)) > 1e-9:
        return None
    p, q = round(2 * p) / 2, round(2 * q) / 2
    n, d = COST_FIT_AT[0]
    return v1 / (n**p * d**q), p, q


def _power_of(var: str, p: float) -> str:
    """``var`` elevado a ``p``, para ler: n² , d, n^0,5 (expoente 0: nada)."""
    if p == 0:
        return ""
    if p == 1:
        return var
    if p == int(p) and 0 < p < 10:
        return var + "⁰¹²³⁴⁵⁶⁷⁸⁹"[int(p)]
    return f"{var}^{br(p)}"


def _cost_finders(c: Check, fn, n: int, d: int, key: str, value):
    """Sem erro conhecido: o fator e os expoentes de a·n^p·d^q ajustados; senão, como a conta cresce."""
    cache: dict[tuple[int, int], float | None] = {}

    def at(point: tuple[int, int]) -> float | None:
        if point not in cache:
            cache[point] = _cost_of(c, fn, *point, key)
        return cache[point]

    def monomial() -> Finding | None:
        points = [at(p) for p in COST_FIT_AT]
        if any(p is None for p in points):
            return None
        fit = _monomial(points)
        confirm = at(COST_CONFIRM_AT)
        if fit is None or confirm is None:
            return None
        a, p, q = fit
        model = lambda n_, d_: a * n_**p * d_**q  # noqa: E731
        if not all(
            abs(got - model(*pt)) <= max(0.5, 1e-9 * abs(got))
            for pt, got in (((n, d), value), (COST_CONFIRM_AT, confirm))
        ):
            return None
        factor = br(a, ".4g")
        law = "·".join(part for part in (factor, _power_of("n", p), _power_of("d", q)) if part)
        if key == "flops":
            if (p, q) == (2, 1):
                return Finding(
                    "parametro",
                    "flops-fator",
                    f"seus FLOPs são {factor}·n²·d, e não 4·n²·d: cada um dos "
                    "dois produtos (QKᵀ e pesos·V) custa 2·n²·d (2 FLOPs por multiplicação-soma).",
                    "`flops`",
                )
            return Finding(
                "parametro",
                "flops-expoentes",
                f"seus FLOPs crescem como {law}, e não como 4·n²·d (n = seq_len, d = d_model).",
                "`flops`",
            )
        if (p, q) == (2, 0):
            return Finding(
                "parametro",
                "bytes-por-elemento",
                f"seus `score_bytes` são {factor}·n²: {factor} bytes "
                "por número, e a matriz de scores é float32 (4 bytes por número).",
                "`score_bytes`",
            )
        return Finding(
            "parametro",
            "bytes-expoentes",
            f"seus `score_bytes` crescem como {law}; a matriz de scores "
            "de uma cabeça tem n×n números (não depende de d_model), 4 bytes cada.",
            "`score_bytes`",
        )

    def growth() -> Finding | None:
        base, double_n, four_d = (at(p) for p in COST_FIT_AT)
        if base is None or double_n is None or four_d is None or base == 0:
            return None
        r_n, r_d = double_n / base, four_d / base
        name = f"`{key}`"
        if not math.isclose(r_n, 4, rel_tol=1e-9):
            return Finding(
                "propriedade",
                f"{key}-quadratico-em-n",
                f"dobrar seq_len deveria multiplicar {name} por 4 "
                f"(a matriz de scores é n×n); a sua multiplica por {br(r_n, '.6g')}.",
                name,
            )
        want, what = (
            (4, "multiplicar `flops` por 4 (a conta é linear em d_model)")
            if key == "flops"
            else (1, "deixar `score_bytes` igual (a matriz n×n não depende de d_model)")
        )
        if not math.isclose(r_d, want, rel_tol=1e-9):
            return Finding(
                "propriedade",
                f"{key}-em-d",
                f"multiplicar d_model por 4 deveria {what}; a sua multiplica por {br(r_d, '.6g')}.",
                name,
            )
        return None

    return monomial, growth


def _run_cost(c: Check, fn, n: int, d: int) -> dict:
    c.case(f"attention_cost(seq_len={n}, d_model={d})")
    result = c.call(fn, n, d)
    c.expect(
        isinstance(result, dict),
        f"Esperava um dicionário; veio {describe(result)}.",
        kind="tipo",
        where="o retorno",
    )
    missing = sorted(set(COST_KEYS) - set(result))
    c.expect(
        not missing,
        f"Faltam as chaves {missing} no dicionário.",
        kind="forma",
        mistake="chaves-faltando",
        where="o retorno",
    )
    right = _right_cost(n, d)
    for key, mistakes in zip(COST_KEYS, _cost_mistakes(n, d), strict=True):
        with c.diagnosing(*_cost_finders(c, fn, n, d, key, result[key])):
            c.number(
                result[key],
                right[key],
                f"`{key}`",
                rel=0.0,
                abs_tol=0.5,
                mistakes=mistakes,
                confirm=_cost_confirm(c, fn, n, d, key),
            )
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
        c.case("seq_len 512 -> 1024").expect(
            b == 4 * a,
            "Dobrar seq_len deveria quadruplicar os FLOPs.",
            kind="propriedade",
            mistake="flops-quadratico-em-n",
        )
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
    c.expect(
        isinstance(answers, dict),
        f"Esperava um dicionário; veio {describe(answers)}.",
        kind="tipo",
        where="as respostas",
    )
    return answers


def _unanswered(value) -> bool:
    """O ``...`` do esboço (do outro lado, chega como a descrição de um objeto ``ellipsis``)."""
    return value is ... or (isinstance(value, wire.Describe) and value.type == "ellipsis")


def _family(c: Check, answers: dict, key: str) -> str:
    c.expect(
        key in answers,
        f"Falta a resposta do item {key!r}.",
        kind="forma",
        mistake=f"falta-{key}",
        where=f"o item {key!r}",
    )
    value, family = answers[key], _normalize(answers[key])
    c.expect(
        not _unanswered(value),
        f"Você ainda não respondeu o item {key!r} do questionário (não implementado).",
        kind="nao_implementado",
        mistake=f"sem-resposta-{key}",
        where=f"o item {key!r}",
    )
    shown = value if isinstance(value, wire.Describe) else repr(value)
    c.expect(
        family is not None,
        f"Item {key!r}: resposta {shown} não é uma das famílias {list(FAMILIES)}.",
        kind="resposta",
        mistake=f"{key}-fora-das-familias",
        where=f"o item {key!r}",
    )
    return family


@QUIZ.visible_check
def check_family_quiz(answers) -> None:
    """Teste visível do questionário: só o formato (a correção é oculta)."""
    with QUIZ.check() as c:
        answers = _quiz_answers(c, answers)
        missing = [k for k in QUIZ_KEYS if k not in answers]
        c.expect(
            not missing,
            f"Faltam as respostas dos itens {missing}.",
            kind="forma",
            mistake="itens-faltando",
            where="as respostas",
        )
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
        c.expect(
            not wrong,
            "\n".join([f"Itens com a família errada: {wrong}.", *items, REREAD]),
            kind="resposta",
            mistake="+".join(f"{k}-{given[k]}" for k in wrong),  # o que a turma respondeu: "c-encoder"
            where="o questionário",
        )


EXERCISES = (QUIZ, GENERATE, COST, KAPLAN)
