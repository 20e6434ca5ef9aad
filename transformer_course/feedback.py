"""A voz do corretor: comparações, diagnósticos e mensagens em pt-BR.

Todas as verificações de todos os capítulos passam por aqui. Uma verificação
chama a função do aluno por meio de :func:`call`, compara com um oráculo
independente por meio de :func:`expect_close` e, quando a resposta errada
coincide com um erro conhecido, diz qual é (:class:`Mistake`).

As falhas são sempre ``AssertionError`` com uma mensagem que diz o que foi
tentado, o que era esperado, o que voltou e, se possível, o erro provável.
Nada é escrito em stderr: o nbgrader dá nota 0 a uma célula de teste que
escreve em stderr, mesmo que todas as verificações passem.
"""

from __future__ import annotations

import contextlib
import math
import traceback
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "Check",
    "CheckFailure",
    "Finding",
    "Mistake",
    "call",
    "describe",
    "expect",
    "expect_close",
    "expect_shape",
    "expect_unchanged",
    "expect_not_reference",
    "expect_raises",
    "exception_of",
    "forbid_torch_functions",
    "is_stub",
    "passed",
    "refuse_reference",
    "same_exception",
    "snapshot",
    "tolerances",
]


def _skip_dtensor_import() -> None:
    """Evita que o primeiro ``assert_close`` importe ``torch.distributed.tensor`` (≈1,2 s por kernel).

    Desde o PyTorch 2.13 (pytorch/pytorch#176895), ``assert_close`` desembrulha DTensors e, para
    isso, importa ``torch.distributed.tensor`` (que puxa o SymPy) na primeira comparação de cada
    processo. O curso nunca cria um DTensor; sem o módulo carregado, nenhum tensor pode ser um.
    Se o módulo já foi importado, ou se o PyTorch mudar o nome, nada muda.
    """
    import sys

    from torch.testing import _comparison

    if "torch.distributed.tensor" not in sys.modules and hasattr(_comparison, "_HAS_DTENSOR"):
        _comparison._HAS_DTENSOR = False


_skip_dtensor_import()
# A primeira chamada de `assert_close` num processo ainda carrega o resto da comparação; pagamos
# isso aqui, na importação, e não dentro da primeira célula corrigida.
torch.testing.assert_close(torch.zeros(1), torch.zeros(1))


class CheckFailure(AssertionError):
    """Falha de uma verificação, com a mensagem em pt-BR já pronta para o aluno.

    ``data`` é o diagnóstico como dados (o relatório da turma o conta): ``exercise``, ``case`` (o
    teste), ``kind`` (o que falhou: ``valores``, ``forma``, ``dtype``, ``excecao``,
    ``entrada_modificada``, ``nao_implementado``...), ``where`` (a etapa), ``mistake`` (o id do erro
    conhecido, quando um coincide), ``cause`` (a frase do diagnóstico) e ``id`` (estável:
    exercício/tipo/erro).
    """

    def __init__(self, message: str = "", data: dict | None = None):
        super().__init__(message)
        self.data = dict(data or {})


def _show_check_failure(shell, etype, value, tb, tb_offset=None):
    """No Jupyter, uma falha de verificação aparece só com a mensagem em pt-BR.

    É o mecanismo do IPython para exceções próprias (``set_custom_exc``): a célula continua
    marcada como erro (o nbgrader dá 0 a ela), mas sem a parede de traceback das entranhas
    do pacote — o que importa ao aluno está na mensagem.
    """
    stb = [f"\x1b[0;31m{etype.__name__}\x1b[0m: {value}"]
    # O IPython não exibe o que o manipulador devolve: publicamos a saída de erro nós mesmos.
    shell._showtraceback(etype, value, stb)
    return stb


def _install_ipython_handler() -> None:
    try:
        from IPython import get_ipython
    except ImportError:  # fora do Jupyter
        return
    shell = get_ipython()
    if shell is not None and hasattr(shell, "set_custom_exc"):
        shell.set_custom_exc((CheckFailure,), _show_check_failure)


_install_ipython_handler()


@dataclass(frozen=True)
class Mistake:
    """Um erro conhecido: o nome que o aluno lê e o resultado que esse erro produziria.

    Attributes:
        name: descrição do erro, completando a frase "sua saída coincide com ...".
        value: o que a implementação com esse erro devolveria (tensor ou número).
        id: identificador estável do erro (para o relatório da turma); padrão: tirado do nome.
    """

    name: str
    value: Any
    id: str = ""

    @property
    def key(self) -> str:
        return self.id or slug(self.name)


@dataclass(frozen=True)
class Finding:
    """Um diagnóstico achado depois de uma falha, sem uma lista de saídas previstas.

    Uma propriedade do enunciado que a resposta quebra (``kind="propriedade"``: as linhas somam 1, a
    saída não muda quando as chaves são permutadas...) ou um parâmetro da família da resposta certa
    ajustado à saída do aluno (``kind="parametro"``: o expoente da escala, o fator dos FLOPs...).

    Attributes:
        kind: ``"propriedade"`` ou ``"parametro"`` (ou outro tipo de diagnóstico).
        id: identificador estável (o relatório da turma conta por ele): ``"linhas-somam-1"``.
        cause: a frase do diagnóstico, em pt-BR, completa ("seu fator de escala é d_k^(−1), ...").
        where: a etapa onde a propriedade quebra (opcional; senão, a da falha).
    """

    kind: str
    id: str
    cause: str
    where: str | None = None


def slug(text: str, limit: int = 60) -> str:
    """Um identificador curto e estável: "a atenção SEM a divisão" -> "a-atencao-sem-a-divisao"."""
    import re
    import unicodedata

    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", plain).strip("-")[:limit].rstrip("-")


def tolerances(dtype: torch.dtype) -> dict[str, float]:
    """Tolerâncias explícitas de ``assert_close`` por dtype.

    São folgadas o bastante para aceitar einsum, laços, ``where`` ou -1e9 no
    lugar de -inf, e apertadas o bastante para recusar qualquer erro de fórmula.
    """
    if dtype == torch.float64:
        return {"rtol": 1e-7, "atol": 1e-9}
    if dtype in (torch.float16, torch.bfloat16):
        return {"rtol": 1e-2, "atol": 1e-2}
    return {"rtol": 1e-4, "atol": 1e-5}


def describe(value: Any) -> str:
    """Descreve um valor em poucas palavras: forma e dtype de tensores, tipo do resto."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        return f"tensor {tuple(value.shape)} {dtype}"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(describe(v) for v in value)
        kind = "tupla" if isinstance(value, tuple) else "lista"
        return f"{kind} ({inner})"
    if value is None:
        return "None"
    from .wire import Describe, Handle

    if isinstance(value, Handle):
        return f"um objeto {value.type}"
    if isinstance(value, Describe):
        return str(value)
    return f"{type(value).__name__} {value!r}"[:120]


def _in(what: str) -> str:
    """ "em" + ``what`` com a contração do português: "em a saída" -> "na saída"."""
    for article, contracted in (("a ", "na "), ("o ", "no "), ("as ", "nas "), ("os ", "nos ")):
        if what.startswith(article):
            return contracted + what[len(article) :]
    return f"em {what}"


def _number(x: float, digits: int = 6) -> str:
    """Um número para a mensagem, em pt-BR: inteiros exatos com milhar ("1.048.576"), o resto com
    ``digits`` algarismos significativos ("0,970127", "6,35 × 10⁻⁸")."""
    from .numbers import br

    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e15):
        return br(int(x), ",d")
    return br(x, f".{digits}g")


def _fail(name: str, tried: str, body: str, hint: str | None = None, **data: Any) -> CheckFailure:
    lines = [f"`{name}` falhou.", f"Teste: {tried}", body]
    if hint:
        lines.append(f"Diagnóstico provável: {hint}")
    data.setdefault("kind", "erro")
    cause = hint or data.get("cause")
    info = {"exercise": name, "case": tried, **data, "cause": cause}
    info["id"] = "/".join(
        part
        for part in (name, info["kind"], info.get("mistake") or (slug(cause, 40) if cause else ""))
        if part
    )
    return CheckFailure("\n".join(lines), info)


def _id(name: str, kind: str, known: dict, cause: str | None) -> str:
    tail = known.get("mistake") or (slug(cause, 40) if cause else "")
    return "/".join(p for p in (name, kind, tail) if p)


def _student_line(exc: BaseException) -> str:
    """A última linha do traceback que aponta para código do aluno (célula ou arquivo)."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if "transformer_course" not in frame.filename and "torch" not in frame.filename:
            return f" (linha {frame.lineno}: `{(frame.line or '').strip()}`)"
    return ""


def is_stub(exc: BaseException) -> bool:
    """Diz se a exceção é o esboço do nbgrader (``raise NotImplementedError()``, sem mensagem).

    Só o esboço significa "não implementado". Um ``NotImplementedError`` com mensagem vem de
    outro lugar — do PyTorch, por exemplo (``"bitwise_and_cpu" not implemented for 'Float'``,
    ao combinar uma máscara float com uma booleana) — e é uma falha como qualquer outra.
    """
    return isinstance(exc, NotImplementedError) and not str(exc).strip()


def call(
    fn: Callable,
    name: str,
    tried: str,
    *args: Any,
    hint_on_error: str | None = None,
    **kwargs: Any,
) -> Any:
    """Chama a função do aluno, convertendo exceções em mensagens claras.

    O esboço (``raise NotImplementedError()``, ver :func:`is_stub`) vira "Você ainda não
    implementou"; qualquer outra
    exceção vira uma falha que diz qual teste a provocou (com ``hint_on_error``,
    o erro provável). Avisos emitidos pela
    função do aluno são capturados e não chegam ao stderr.
    """
    __tracebackhide__ = True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(*args, **kwargs)
        except NotImplementedError as exc:
            if not is_stub(exc):
                raise _fail(
                    name,
                    tried,
                    f"Sua função levantou NotImplementedError: {exc}{_student_line(exc)}",
                    hint_on_error,
                ) from None
            raise CheckFailure(
                f"Você ainda não implementou `{name}` (não implementado): "
                "substitua `raise NotImplementedError()` pelo seu código."
            ) from None
        except CheckFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - toda exceção do aluno vira mensagem
            raise _fail(
                name,
                tried,
                f"Sua função levantou {type(exc).__name__}: {exc}{_student_line(exc)}",
                hint_on_error,
            ) from None
    del caught  # avisos do aluno não vão para o stderr (o nbgrader daria nota 0)
    return result


def expect(condition: bool, name: str, tried: str, body: str, hint: str | None = None) -> None:
    """Falha com ``body`` (e a dica) quando ``condition`` é falsa."""
    __tracebackhide__ = True
    if not condition:
        raise _fail(name, tried, body, hint)


def expect_shape(
    value: Any,
    shape: Sequence[int],
    name: str,
    tried: str,
    what: str = "a saída",
    hint: str | None = None,
) -> None:
    """Exige um tensor com a forma dada."""
    __tracebackhide__ = True
    if not isinstance(value, torch.Tensor):
        raise _fail(name, tried, f"Esperava um tensor {_in(what)}; veio {describe(value)}.", hint)
    if tuple(value.shape) != tuple(shape):
        raise _fail(
            name,
            tried,
            f"Forma errada {_in(what)}: esperada {tuple(shape)}, obtida {tuple(value.shape)}.",
            hint,
        )


def _matches(actual: torch.Tensor, candidate: Any, dtype: torch.dtype, scale: float | None = None) -> bool:
    """``actual`` coincide com o que um erro conhecido produziria (``candidate``)?

    A tolerância absoluta perto de zero acompanha o tamanho dos valores (``scale``: o maior |valor|
    esperado): com números de 10⁻⁷, "coincide com 0" não pode valer só porque a diferença é menor
    que a tolerância absoluta de números perto de 1.
    """
    if not isinstance(candidate, torch.Tensor) or candidate.shape != actual.shape:
        return False
    tol = tolerances(dtype)
    if scale is not None and math.isfinite(scale):
        tol["atol"] = min(tol["atol"], tol["rtol"] * scale)
    try:
        torch.testing.assert_close(
            actual.detach().to(torch.float64),
            candidate.detach().to(torch.float64),
            equal_nan=True,
            **tol,
        )
    except (AssertionError, RuntimeError, TypeError):
        return False
    return True


def _scale(expected: Any) -> float | None:
    if isinstance(expected, torch.Tensor) and expected.numel() and expected.is_floating_point():
        finite = expected.detach()[torch.isfinite(expected.detach())]
        return float(finite.abs().max()) if finite.numel() else None
    return None


def expect_close(
    actual: Any,
    expected: torch.Tensor,
    name: str,
    tried: str,
    what: str = "a saída",
    mistakes: Iterable[Mistake] = (),
    rtol: float | None = None,
    atol: float | None = None,
    confirm: Callable[[Mistake], bool] | None = None,
) -> None:
    """Compara ``actual`` com o oráculo usando ``torch.testing.assert_close``.

    ``confirm``: antes de nomear um erro conhecido que coincide neste caso, a verificação o confere
    em mais um caso (a função recebe o erro e diz se ele reproduz a resposta do aluno lá também);
    um erro que não se confirma não é nomeado (a mensagem diz só onde está a diferença).

    Verifica, nesta ordem: é tensor, forma, dtype, NaN/inf, valores. Em caso de
    diferença, procura entre ``mistakes`` um erro conhecido que produza exatamente
    ``actual`` e o cita na mensagem.
    """
    __tracebackhide__ = True
    mistakes = list(mistakes)

    found: list[Mistake] = []

    def diagnose() -> str | None:
        if isinstance(actual, torch.Tensor):
            for mistake in mistakes:
                if _matches(actual, mistake.value, expected.dtype, _scale(expected)):
                    if confirm is not None and not confirm(mistake):
                        continue
                    found.append(mistake)
                    verb = "coincidem" if what.startswith(("as ", "os ")) else "coincide"
                    return f"{what} {verb} com {mistake.name}."
        return None

    def known() -> dict:
        return {"mistake": found[-1].key} if found else {}

    # O diagnóstico só é procurado quando a comparação falha: uma resposta certa que coincide com um
    # erro conhecido (quando o erro não muda nada neste caso) não custa as chamadas de `confirm`.
    if not isinstance(actual, torch.Tensor) or tuple(actual.shape) != tuple(expected.shape):
        hint = diagnose()
        kind = "tipo" if not isinstance(actual, torch.Tensor) else "forma"
        try:
            expect_shape(actual, expected.shape, name, tried, what, hint=hint)
        except CheckFailure as failure:
            raise CheckFailure(str(failure), {**failure.data, "kind": kind, "where": what, **known(),
                                             "id": _id(name, kind, known(), hint)}) from None  # fmt: skip
    if actual.dtype != expected.dtype:
        raise _fail(
            name,
            tried,
            f"dtype errado {_in(what)}: esperado {expected.dtype}, obtido {actual.dtype} "
            "(a função deve preservar o dtype das entradas).",
            kind="dtype",
            where=what,
        )
    if actual.device != expected.device:
        raise _fail(
            name,
            tried,
            f"O resultado ({what}) está em {actual.device}, mas as entradas estavam em {expected.device} "
            "(não fixe `cpu`/`cuda` no código; use o device das entradas).",
            kind="dispositivo",
            where=what,
        )
    tol = tolerances(expected.dtype)
    if rtol is not None:
        tol["rtol"] = rtol
    if atol is not None:
        tol["atol"] = atol
    try:
        torch.testing.assert_close(actual.detach(), expected.detach(), equal_nan=False, **tol)
    except AssertionError:
        hint = diagnose()
        a, e = actual.detach().to(torch.float64), expected.detach().to(torch.float64)
        bad = ~torch.isclose(a, e, rtol=tol["rtol"], atol=tol["atol"])
        idx = tuple(int(i) for i in torch.nonzero(bad)[0]) if bad.any() else ()
        finite = torch.isfinite(a)
        delta = (a - e).abs()[finite & torch.isfinite(e)]
        max_delta = _number(delta.max().item(), 3) if delta.numel() else "—"
        body = [
            f"Valores diferentes do esperado {_in(what)} "
            f"({int(bad.sum())} de {bad.numel()} elementos; maior |Δ| = {max_delta}).",
        ]
        if not finite.all():
            body.append(f"Há {_in(what)} {int((~finite).sum())} valores NaN ou infinitos.")
        if idx:
            # algarismos bastantes para que esperado e obtido não saiam iguais (um erro de 10⁻⁸ em 0,15)
            digits = 6
            while digits < 17 and _number(e[idx].item(), digits) == _number(a[idx].item(), digits):
                digits += 1
            body.append(
                f"Primeira diferença no índice {idx}: esperado {_number(e[idx].item(), digits)}, "
                f"obtido {_number(a[idx].item(), digits)}."
            )
        kind = "nan" if not finite.all() else "valores"
        raise _fail(name, tried, "\n".join(body), hint, kind=kind, where=what, **known()) from None


def snapshot(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """Cópias das entradas, para verificar depois que nada foi alterado no lugar."""
    return [t.detach().clone() for t in tensors]


def expect_unchanged(
    before: Sequence[torch.Tensor],
    after: Sequence[torch.Tensor],
    labels: Sequence[str],
    name: str,
    tried: str,
) -> None:
    """Exige que as entradas não tenham sido modificadas no lugar (*in place*)."""
    __tracebackhide__ = True
    for label, old, new in zip(labels, before, after, strict=True):
        same = (
            old.shape == new.shape
            and old.dtype == new.dtype
            and torch.equal(torch.nan_to_num(old), torch.nan_to_num(new.detach()))
        )
        if not same:
            raise _fail(
                name,
                tried,
                f"A entrada `{label}` foi modificada pela sua função.",
                "operação no lugar (*in place*, como `masked_fill_`, `div_`, `+=` ou uma atribuição "
                "indexada, `x[x == 0] = ...`) sobre a entrada; use a versão que devolve um tensor novo "
                "(ou trabalhe numa cópia, `.clone()`).",
                kind="entrada_modificada",
                where=label,
            )


def exception_of(run: Callable[[], object]) -> tuple[str, str] | None:
    """O tipo e a mensagem da exceção que ``run()`` levanta (``None`` se não levanta).

    Para reproduzir, do lado da verificação, a exceção que um erro conhecido provoca (e compará-la
    com a do aluno por :func:`same_exception`).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            run()
        except Exception as exc:  # noqa: BLE001 - a exceção é o resultado que se compara
            return type(exc).__name__, str(exc)
    return None


def same_exception(error: dict | None, raised: tuple[str, str] | None) -> bool:
    """A exceção do aluno (como dados, ``response.error``) é a mesma que ``raised`` (tipo e mensagem)?

    O kernel corta mensagens longas com "…": então basta o começo coincidir.
    """
    if not isinstance(error, dict) or raised is None:
        return False
    message = str(error.get("message", ""))
    if message.endswith("…"):
        return error.get("type") == raised[0] and raised[1].startswith(message[:-1])
    return (error.get("type"), message) == tuple(raised)


def expect_raises(
    fn: Callable, exc_type: type[BaseException], name: str, tried: str, *args: Any, **kwargs: Any
) -> None:
    """Exige que ``fn(*args)`` levante ``exc_type`` (com mensagem)."""
    __tracebackhide__ = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(*args, **kwargs)
        except NotImplementedError as exc:
            if not is_stub(exc):
                raise _fail(
                    name,
                    tried,
                    f"Esperava {exc_type.__name__}; sua função levantou NotImplementedError: {exc}",
                ) from None
            raise CheckFailure(f"Você ainda não implementou `{name}` (não implementado).") from None
        except exc_type as exc:
            if not str(exc).strip():
                raise _fail(
                    name,
                    tried,
                    f"Levantou {exc_type.__name__}, mas sem mensagem: explique o problema ao usuário.",
                ) from None
            return
        except Exception as exc:  # noqa: BLE001
            raise _fail(
                name,
                tried,
                f"Esperava {exc_type.__name__}; sua função levantou {type(exc).__name__}: {exc}",
            ) from None
    raise _fail(name, tried, f"Esperava {exc_type.__name__}, mas nenhuma exceção foi levantada.")


class forbid_torch_functions(torch.overrides.TorchFunctionMode):
    """Registra, durante o bloco ``with``, as chamadas às funções proibidas do PyTorch.

    Usa um ``TorchFunctionMode``, que intercepta a chamada mesmo quando o aluno
    importou a função com outro nome (``from torch.nn.functional import ...``).
    """

    def __init__(self, *functions: Callable):
        super().__init__()
        self.forbidden = {f: getattr(f, "__name__", repr(f)) for f in functions}
        self.used: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.forbidden:
            self.used.append(self.forbidden[func])
        return func(*args, **(kwargs or {}))


def expect_not_reference(obj: Any, ref: Any, name: str) -> None:
    """Recusa a implementação de referência do pacote entregue como resposta (função ou classe)."""
    __tracebackhide__ = True
    same = obj is ref or getattr(obj, "__code__", None) is getattr(ref, "__code__", 0)
    if isinstance(obj, type) and isinstance(ref, type):
        same = issubclass(obj, ref)
    expect(
        not same,
        name,
        "origem da implementação",
        "Sua resposta é a implementação de referência do pacote `transformer_course`.",
        "escreva a sua própria implementação em vez de importá-la.",
    )


def passed(name: str, n_checks: int, extra: str = "") -> None:
    """Uma linha curta de sucesso (stdout; no juiz da correção, guardada para a célula de teste)."""
    from .probe import report

    suffix = f" {extra}" if extra else ""
    report(f"✔ `{name}`: {n_checks} verificações passaram.{suffix}")


# ====================================================================== a recusa da referência


def _source_span(obj: Any) -> tuple[str, int, int] | None:
    """(arquivo real, primeira linha, última linha) do código-fonte de uma função ou classe."""
    import inspect
    import os

    obj = inspect.unwrap(obj)
    try:
        lines, start = inspect.getsourcelines(obj)
        filename = inspect.getsourcefile(obj)
    except (OSError, TypeError):
        return None
    if filename is None:
        return None
    return os.path.realpath(filename), start, start + len(lines) - 1


def _same_definition(a: Any, b: Any) -> bool:
    """Mesma função/classe, mesmo se o módulo foi importado de novo (compara módulo e nome)."""
    return a is b or (
        getattr(a, "__module__", 0) == getattr(b, "__module__", 1)
        and getattr(a, "__qualname__", 0) == getattr(b, "__qualname__", 1)
    )


class _reference_spy:
    """Registra as chamadas, durante o bloco ``with``, a código que está dentro da referência.

    Compara o arquivo e as linhas do código executado (``sys.setprofile``), não a identidade do
    objeto: pega apelidos, invólucros (``lambda *a: ref(*a)``), subclasses (``super().forward``)
    e cópias do módulo importadas de novo.
    """

    def __init__(self, span: tuple[str, int, int]):
        import os
        import sys

        self._sys, self._realpath = sys, os.path.realpath
        self.filename, self.first, self.last = span
        self._paths: dict[str, str] = {}
        self.used = False

    def _profile(self, frame, event, arg):
        if event == "call":
            code = frame.f_code
            path = self._paths.get(code.co_filename)
            if path is None:
                path = self._paths[code.co_filename] = self._realpath(code.co_filename)
            if path == self.filename and self.first <= code.co_firstlineno <= self.last:
                self.used = True
        if self._previous is not None:
            self._previous(frame, event, arg)

    def __enter__(self):
        self._previous = self._sys.getprofile()
        self._sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        self._sys.setprofile(self._previous)
        return False


def refuse_reference(answer: Any, reference: Any, run: Callable[[], Any], name: str) -> None:
    """Recusa a implementação de referência do pacote entregue como resposta, em qualquer disfarce.

    É a única recusa do curso, no nível mais forte: ``answer`` não pode ser a referência (nem
    uma cópia importada de novo), nem uma subclasse dela, e ``run()`` — uma chamada típica da
    resposta — não pode executar nenhuma linha do código da referência (invólucros, ``super()``).
    """
    __tracebackhide__ = True
    where = f"`{reference.__module__}.{reference.__qualname__}`"
    mro = answer.__mro__ if isinstance(answer, type) else (answer,)
    static = any(_same_definition(k, reference) for k in mro)
    span = _source_span(reference)
    used = False
    if not static and span is not None:
        with _reference_spy(span) as spy:
            call(run, name, "chamada vigiada (origem da resposta)")
        used = spy.used
    if static or used:
        raise _fail(
            name,
            "origem da resposta",
            f"Sua resposta {'é ou herda de' if static else 'executa'} a implementação de referência do "
            f"pacote ({where}).",
            "escreva a sua própria implementação, sem importar, chamar ou herdar a do pacote.",
            kind="referencia",  # o mesmo tipo que a recusa no juiz
        )


# ====================================================================== o contexto de uma verificação


NOT_IMPLEMENTED = "Você ainda não implementou"


def _studying(check) -> bool:
    """A verificação roda no notebook do aluno, no JupyterLab (nem no Validar, nem na correção)?"""
    import os

    if check.remote or os.environ.get("NBGRADER_EXECUTION") or os.environ.get("NBGRADER_VALIDATING"):
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


class Check:
    """O contexto de uma verificação: carrega o nome do exercício e o caso, conta as expectativas
    e formata toda mensagem por meio deste módulo.

    Uso::

        with Check("split_heads") as c:
            c.case("x (2, 5, 12), n_heads=3")
            with c.untouched(x=x):
                out = c.call(fn, x, 3)
            c.close(out, expected, "a saída", mistakes=[...])

    Toda conversa com a resposta do aluno é um pedido ao lado do aluno (:mod:`transformer_course.probe`):
    ``c.call`` e ``c.run`` chamam, ``c.new`` constrói e guarda um objeto, ``c.describe`` pergunta a
    estrutura de um objeto, ``c.load`` copia pesos para ele. A resposta volta como dados (tensores
    comuns e referências), aqui ou no juiz da correção, e a verificação só compara dados.

    Ao entrar, aplica a política de isolamento do curso (:func:`runtime.isolated`: uma thread,
    gerador global emprestado com semente fixa), desvia o stderr e cala os avisos; ao sair sem
    falha, imprime a linha de sucesso.
    """

    def __init__(self, name: str, *, hidden: bool = False, seed: int = 0):
        self.name, self.hidden, self.seed = name, hidden, seed
        self.tried = ""
        self.count = 0
        self.student = None
        self.seed_offset = 0
        self._watch: list[dict] = []
        self.last = None

    def __enter__(self) -> Check:
        import io

        from .probe import LocalStudent, current_seed_offset, current_student
        from .runtime import isolated

        self.student = current_student() or LocalStudent()
        self.seed_offset = current_seed_offset() if self.hidden else 0
        # Isolamento, e nada no stderr: o nbgrader zera a célula de teste que escreve lá (uma barra
        # de progresso ou um aviso vindo do código do aluno bastariam).
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(isolated(self.seed))
        self._stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
        self._stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        return self

    def __exit__(self, etype, exc, tb) -> bool:
        self._stack.__exit__(etype, exc, tb)
        if etype is None:
            passed(self.name, self.count, "(testes ocultos)" if self.hidden else "")
            return False
        if isinstance(exc, CheckFailure) and str(exc).startswith(NOT_IMPLEMENTED) and _studying(self):
            # No JupyterLab (Executar tudo), um exercício por fazer não para o notebook: o aviso
            # aparece e as células seguintes rodam. No Validar e na correção, ele vale 0.
            from .probe import report

            report(f"⏳ {exc} O resto do notebook continua; no Validar e na correção, este teste vale 0.")
            return True
        return False

    @property
    def remote(self) -> bool:
        """As respostas estão do outro lado (no kernel da correção)?"""
        from .probe import LocalStudent

        return not isinstance(self.student, LocalStudent)

    def gen(self, seed: int) -> torch.Generator:
        """Um gerador com semente ``seed`` (nos testes ocultos da correção, deslocada por entrega)."""
        from .runtime import seeded_generator

        return seeded_generator(seed + self.seed_offset)

    # ------------------------------------------------------------ o caso em teste

    def case(self, tried: str) -> Check:
        """Descreve o caso que as próximas expectativas testam ("Teste: ..." na mensagem)."""
        self.tried = tried
        return self

    def fail(self, body: str, hint: str | None = None, **data: Any):
        """Falha já, com ``body`` e o diagnóstico provável ``hint`` (``data``: o diagnóstico como dados)."""
        __tracebackhide__ = True
        raise _fail(self.name, self.tried, body, hint, **data)

    # ------------------------------------------------------------ pedidos ao lado do aluno

    def run(
        self,
        fn: Any,
        args: Sequence[Any] = (),
        kwargs: dict | None = None,
        *,
        keep: bool = False,
        grad: dict | None = None,
        capture: dict | None = None,
        forbid: Sequence[str] = (),
        seed: int | None = None,
        no_grad: bool = False,
    ):
        """Um pedido ``call`` ao lado do aluno; devolve a :class:`probe.Response` inteira (sem levantar).

        Args:
            keep: guardar o resultado do lado do aluno (um objeto construído) e devolver a referência.
            grad: tirar gradientes de uma perda da saída: ``{"loss": {"kind": "sum_sq", "path": [0]},
                "params": ["W_Q.weight"]}`` (``kind``: ``sum_sq``, ``sum`` ou ``dot`` com ``weights``).
            capture: guardar o que passa por submódulos: ``{"W_Q": "output", "W_O": "input"}``.
            forbid: funções do PyTorch proibidas (nomes qualificados) a registrar durante a chamada.
            seed: ``torch.manual_seed(seed)`` logo antes da chamada (dropout em modo de treino).
        """
        from .probe import HarnessFailure

        options = {"keep": keep, "after": bool(self._watch), "no_grad": no_grad}
        if grad is not None:
            options["grad"] = grad
        if capture:
            options["capture"] = dict(capture)
        if forbid:
            options["forbid"] = list(forbid)
        if seed is not None:
            options["seed"] = int(seed)
        try:
            response = self.student.request(
                "call", fn, args=list(args), kwargs=dict(kwargs or {}), options=options
            )
        except (HarnessFailure, ValueError) as exc:
            raise _fail(
                self.name,
                self.tried,
                f"A correção não recebeu a resposta da sua função: {exc}.",
                kind="sem_resposta",
            ) from None
        for watch in self._watch:
            watch["calls"].append((list(args), dict(kwargs or {}), response))
        self.last = response
        return response

    def raise_for(self, response, hint_on_error: str | None = None, **data: Any) -> None:
        """Transforma a exceção que a resposta do aluno levantou numa falha clara (ou não faz nada).

        ``data``: o diagnóstico como dados, quando ``hint_on_error`` vem de um erro conhecido
        (``mistake="..."``).
        """
        __tracebackhide__ = True
        error = response.error
        if error is None:
            return
        kind, message, line = error.get("type", "?"), error.get("message", ""), error.get("line", "")
        where = f" ({line})" if line else ""
        if error.get("stub"):
            raise CheckFailure(
                f"Você ainda não implementou `{self.name}` (não implementado): "
                "substitua `raise NotImplementedError()` pelo seu código.",
                {
                    "exercise": self.name,
                    "case": self.tried,
                    "kind": "nao_implementado",
                    "id": f"{self.name}/nao_implementado",
                },  # fmt: skip
            )
        if kind == "ReferenceWithheld":
            raise _fail(
                self.name,
                self.tried,
                f"Sua resposta chamou a implementação de referência do pacote{where}, que fica com o "
                "professor durante a correção.",
                "escreva a sua própria implementação, sem importar nem chamar a do pacote.",
                kind="referencia",
            )
        raise _fail(
            self.name,
            self.tried,
            f"Sua função levantou {kind}: {message}{where}",
            hint_on_error,
            **{"kind": "excecao", "exception": kind, **data},
        )

    def call(self, fn: Any, *args: Any, hint_on_error: str | None = None, **kwargs: Any) -> Any:
        """Chama a resposta do aluno e devolve o resultado (como dados); exceções viram falhas claras."""
        __tracebackhide__ = True
        response = self.run(fn, args, kwargs)
        self.raise_for(response, hint_on_error)
        return response.value

    def new(self, cls: Any, *args: Any, hint_on_error: str | None = None, **kwargs: Any):
        """Constrói um objeto do aluno (``cls(*args, **kwargs)``) e devolve a referência a ele."""
        __tracebackhide__ = True
        response = self.run(cls, args, kwargs, keep=True)
        self.raise_for(response, hint_on_error)
        return response.value

    def method(self, obj: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        """Chama um método de um objeto do aluno (``obj.train(False)``, ``obj.to(torch.float64)``)."""
        __tracebackhide__ = True
        from .probe import Attr

        return self.call(Attr(obj, name), *args, **kwargs)

    def describe(self, obj: Any, attrs: Sequence[str] = ()) -> dict:
        """A estrutura de um objeto do aluno: tipo, parâmetros, buffers, submódulos, atributos pedidos."""
        __tracebackhide__ = True
        from .probe import HarnessFailure

        try:
            response = self.student.request("describe", obj, attrs=list(attrs))
        except (HarnessFailure, ValueError) as exc:
            raise _fail(
                self.name, self.tried, f"A correção não recebeu a resposta da sua função: {exc}."
            ) from None
        self.raise_for(response)
        if not isinstance(response.value, dict):
            self.fail("A descrição do objeto veio malformada.")
        return response.value

    def scenario(self, name: str, target: Any = None, **fields: Any):
        """Um roteiro do capítulo do lado do aluno (``transformer_course/scenarios``); a resposta inteira.

        ``fields`` vão no pedido (tensores, números, referências). Não levanta: a verificação lê
        ``response.error`` (ou chama :meth:`raise_for`).
        """
        __tracebackhide__ = True
        from .probe import HarnessFailure

        try:
            response = self.student.request("scenario", target, name=name, **fields)
        except (HarnessFailure, ValueError) as exc:
            raise _fail(
                self.name, self.tried, f"A correção não recebeu a resposta da sua função: {exc}."
            ) from None
        self.last = response
        return response

    def load(self, obj: Any, params: dict) -> dict:
        """Copia ``params`` (nome -> tensor) para os parâmetros/buffers de um objeto do aluno."""
        __tracebackhide__ = True
        response = self.student.request("load", obj, params=dict(params))
        self.raise_for(response)
        return response.value if isinstance(response.value, dict) else {}

    # ------------------------------------------------------------ expectativas (cada uma conta)

    def expect(self, condition: bool, body: str, hint: str | None = None, **data: Any) -> None:
        """Falha com ``body`` (e a dica) quando ``condition`` é falsa; ``data``: o diagnóstico como dados
        (``kind="propriedade", mistake="linhas-somam-1"``)."""
        __tracebackhide__ = True
        self.count += 1
        if data:
            if not condition:
                self.fail(body, hint, **data)
            return
        expect(condition, self.name, self.tried, body, hint)

    def shape(
        self, value: Any, shape: Sequence[int], what: str = "a saída", hint: str | None = None, **data: Any
    ) -> None:
        """Exige um tensor com a forma dada; ``data``: o diagnóstico como dados (tipo ``forma``/``tipo``)."""
        __tracebackhide__ = True
        self.count += 1
        if not data:
            expect_shape(value, shape, self.name, self.tried, what, hint)
            return
        if not isinstance(value, torch.Tensor):
            body, kind = f"Esperava um tensor {_in(what)}; veio {describe(value)}.", "tipo"
        elif tuple(value.shape) != tuple(shape):
            body = f"Forma errada {_in(what)}: esperada {tuple(shape)}, obtida {tuple(value.shape)}."
            kind = "forma"
        else:
            return
        self.fail(body, hint, **{"kind": kind, "where": what, **data})

    def dtype(
        self, value: Any, dtype: torch.dtype, what: str = "a saída", hint: str | None = None, **data: Any
    ) -> None:
        """Exige um tensor do dtype pedido no enunciado (por exemplo "em float32")."""
        __tracebackhide__ = True
        self.count += 1
        if not isinstance(value, torch.Tensor):
            self.fail(f"Esperava um tensor {_in(what)}; veio {describe(value)}.", hint, **data)
        if value.dtype != dtype:
            self.fail(f"dtype errado {_in(what)}: esperado {dtype}, obtido {value.dtype}.", hint, **data)

    def close(
        self,
        actual: Any,
        expected: torch.Tensor,
        what: str = "a saída",
        mistakes: Iterable[Mistake] = (),
        rtol: float | None = None,
        atol: float | None = None,
        confirm: Callable[[Mistake], bool] | None = None,
    ) -> None:
        """Compara com o oráculo (ver :func:`expect_close`; ``confirm`` confere um erro noutro caso)."""
        __tracebackhide__ = True
        self.count += 1
        expect_close(actual, expected, self.name, self.tried, what, mistakes, rtol, atol, confirm)

    def number(
        self,
        value: Any,
        expected: float,
        what: str = "o resultado",
        *,
        integer: bool = False,
        rel: float = 1e-6,
        abs_tol: float = 1e-12,
        mistakes: Iterable[Mistake] = (),
        hint: str | None = None,
        confirm: Callable[[Mistake], bool] | None = None,
    ) -> None:
        """Exige um número do Python (``float``/``int``; ``int`` se ``integer``) próximo de ``expected``.

        Um tensor de um elemento, um número do NumPy ou um ``bool`` não valem: o enunciado pede
        um número do Python (use ``.item()``). ``hint`` é o diagnóstico quando nenhum erro
        conhecido (``mistakes``) coincide. ``confirm``: como em :meth:`close`, um erro conhecido que
        coincide aqui só é nomeado se reproduz a resposta também noutro caso.
        """
        __tracebackhide__ = True
        import math

        self.count += 1
        kinds = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            wanted = "um inteiro do Python (`int`)" if integer else "um número do Python (`float`)"
            why = "converta com `.item()`." if isinstance(value, torch.Tensor) else None
            self.fail(f"Esperava {wanted} {_in(what)}; veio {describe(value)}.", why, kind="tipo", where=what)
        if not math.isclose(value, expected, rel_tol=rel, abs_tol=abs_tol):
            matched = None
            # Perto de zero, a tolerância de um erro conhecido acompanha o tamanho do valor esperado.
            near_zero = min(abs_tol, max(rel, 1e-6) * abs(expected))
            for mistake in mistakes:
                if (
                    isinstance(mistake.value, (int, float))
                    and math.isclose(value, mistake.value, rel_tol=max(rel, 1e-6), abs_tol=near_zero)
                    and (confirm is None or confirm(mistake))
                ):
                    hint, matched = f"{what} coincide com {mistake.name}.", mistake
                    break
            self.fail(
                f"Valor errado {_in(what)}: esperado {_number(expected)}, obtido {_number(value)}.",
                hint,
                kind="valores",
                where=what,
                **({"mistake": matched.key} if matched else {}),
            )

    # ------------------------------------------------------------ diagnósticos sem lista prevista

    @contextlib.contextmanager
    def diagnosing(self, *finders: Callable[[], Finding | None], kinds: Sequence[str] = ("valores", "nan")):
        """Quando uma falha do bloco não tem diagnóstico, procura um com ``finders``, em ordem.

        Só falhas dos tipos ``kinds`` sem erro conhecido nem causa recebem um. Cada ``finder`` confere
        uma propriedade do enunciado ou ajusta um parâmetro (fazendo pedidos ao lado do aluno, se
        precisar) e devolve um :class:`Finding` ou ``None``; o primeiro achado entra na mensagem
        ("Diagnóstico provável: ...") e nos dados (``kind``, ``mistake`` = o id, ``cause``). Um
        ``finder`` que quebra (uma resposta estranha do aluno) conta como nada achado: a falha
        original sobe como estava.
        """
        __tracebackhide__ = True
        try:
            yield
        except CheckFailure as failure:
            data = failure.data
            if data.get("mistake") or data.get("cause") or data.get("kind") not in kinds:
                raise
            finding = self.find(*finders)
            if finding is None:
                raise
            raise self.diagnosed(failure, finding) from None

    def find(self, *finders: Callable[[], Finding | None]) -> Finding | None:
        """O primeiro :class:`Finding` que ``finders`` acham (um que quebra conta como nada achado)."""
        for finder in finders:
            try:
                found = finder()
            except Exception:  # noqa: BLE001 - um diagnóstico nunca derruba a verificação
                continue
            if isinstance(found, Finding):
                return found
        return None

    def diagnosed(self, failure: CheckFailure, finding: Finding) -> CheckFailure:
        """A mesma falha com o diagnóstico ``finding`` na mensagem e nos dados."""
        message = str(failure).split("\nDiagnóstico provável: ", 1)[0]
        data = dict(failure.data)
        data.update(
            symptom=data.get("kind"),
            kind=finding.kind,
            mistake=finding.id,
            cause=finding.cause,
            where=finding.where or data.get("where"),
        )
        data["id"] = "/".join(p for p in (data.get("exercise") or self.name, finding.kind, finding.id) if p)
        return CheckFailure(f"{message}\nDiagnóstico provável: {finding.cause}", data)

    def raises(
        self, exc_type: type[BaseException], fn: Any, *args: Any, hint: str | None = None, **kwargs: Any
    ) -> None:
        """Exige que ``fn(*args)`` levante ``exc_type`` com uma mensagem (``hint``: o erro provável)."""
        __tracebackhide__ = True
        self.count += 1
        wanted = exc_type.__name__
        response = self.run(fn, args, kwargs)
        error = response.error
        if error is None:
            self.fail(f"Esperava {wanted}, mas nenhuma exceção foi levantada.", hint, kind="sem_excecao")
        if error.get("stub"):
            self.raise_for(response)
        if wanted not in error.get("mro", [error.get("type")]):
            where = f" ({error['line']})" if error.get("line") else ""
            self.fail(
                f"Esperava {wanted}; sua função levantou {error.get('type')}: {error.get('message')}{where}",
                hint,
                kind="excecao",
                exception=error.get("type"),
            )
        if not error.get("message", "").strip():
            self.fail(
                f"Levantou {wanted}, mas sem mensagem: explique o problema ao usuário.", kind="sem_mensagem"
            )

    @contextlib.contextmanager
    def untouched(self, **inputs: Any):
        """Exige que os tensores ``inputs`` saiam do bloco como entraram (nada *in place*).

        As chamadas feitas dentro do bloco devolvem também os argumentos como ficaram depois da
        chamada; cada tensor nomeado aqui é comparado com o original (que nunca sai deste lado).
        """
        __tracebackhide__ = True
        tensors = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        watch = {"calls": []}
        self._watch.append(watch)
        try:
            yield
        finally:
            self._watch.remove(watch)
        self.count += 1
        for label, original in tensors.items():
            for args, kwargs, response in watch["calls"]:
                after = list(response.after or [])
                after_kw = response.after_kwargs or {}
                pairs = [(a, after[i] if i < len(after) else None) for i, a in enumerate(args)]
                pairs += [(v, after_kw.get(k)) for k, v in kwargs.items()]
                for sent, came_back in pairs:
                    if sent is original and isinstance(came_back, torch.Tensor):
                        expect_unchanged([original], [came_back], [label], self.name, self.tried)

    def first_difference(
        self,
        stages: Sequence[tuple[str, Any, torch.Tensor]],
        mistakes: Iterable[Mistake] = (),
        confirm: Callable[[Mistake], bool] | None = None,
    ):
        """Compara etapas intermediárias em ordem e aponta a primeira que difere.

        ``stages`` é uma lista de (nome da etapa, valor do aluno, valor esperado), na ordem em que
        o cálculo acontece (projeções, scores, pesos, saída de cada subcamada...). A mensagem diz
        onde o erro entrou, mesmo quando ele não é um erro conhecido.
        """
        __tracebackhide__ = True
        self.count += 1
        for label, actual, expected in stages:
            try:
                expect_close(actual, expected, self.name, self.tried, label, mistakes, confirm=confirm)
            except CheckFailure as failure:
                body = str(failure).split("\n", 2)[-1]
                inner = {k: v for k, v in failure.data.items() if k not in ("exercise", "case", "id")}
                self.fail(f"A primeira diferença aparece em {label}.\n{body}", **{**inner, "where": label})

    def forbid(
        self, functions: Sequence[str], fn: Any, *args: Any, body: str, hint: str, **kwargs: Any
    ) -> None:
        """Exige que ``fn(*args)`` não chame as funções do PyTorch em ``functions`` (nomes qualificados)."""
        __tracebackhide__ = True
        self.count += 1
        response = self.run(fn, args, kwargs, forbid=functions)
        self.raise_for(response)
        if response.forbidden:
            self.fail(body, hint, kind="atalho")

    def refuse_reference(self, answer: Any, reference: Any, run: Callable[[], Any]) -> None:
        """Recusa a referência do pacote em qualquer disfarce (ver :func:`refuse_reference`).

        Ao estudar, a resposta é um objeto deste processo: vale a recusa completa (identidade,
        herança e chamadas vigiadas, com ``run``). Na correção, a referência nem existe no kernel:
        uma chamada a ela falha com ``ReferenceWithheld`` em qualquer pedido; aqui só se confere de
        onde vem o objeto entregue (um nome importado do pacote).
        """
        __tracebackhide__ = True
        self.count += 1
        if not self.remote:
            refuse_reference(answer, reference, run, self.name)
            return
        desc = self.describe(answer)
        module = str(desc.get("module") or "")
        mro = [str(m) for m in desc.get("class_mro", [])]
        qualified = f"{reference.__module__}.{reference.__qualname__}"
        where = f"`{qualified}`"
        own = module.startswith("transformer_course") or any(
            m.startswith("transformer_course.") and m.rsplit(".", 1)[-1] == reference.__name__ for m in mro
        )
        uses = qualified in [str(u) for u in desc.get("uses_package", []) or []]
        if own or uses:
            raise _fail(
                self.name,
                "origem da resposta",
                f"Sua resposta {'é ou herda de' if own else 'usa por dentro'} a implementação de referência "
                f"do pacote ({where}).",
                "escreva a sua própria implementação, sem importar, chamar ou herdar a do pacote.",
                kind="referencia",
            )
