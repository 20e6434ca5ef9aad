"""A camada de baixo: dispositivo, threads, sementes e nomes de dtype.

Todo o resto do pacote (modelos, figuras, verificações, ferramentas do instrutor) usa estas
peças daqui e não as reescreve. Este módulo só importa o PyTorch.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import torch

__all__ = [
    "dtype_name",
    "get_device",
    "grading_mode",
    "in_grading_kernel",
    "isolated",
    "notice_when_grading",
    "one_thread",
    "seeded_generator",
    "single_threaded",
    "source_exports",
    "stand_ins_when_grading",
]


def grading_mode() -> bool:
    """O notebook roda na correção automática? (o nbgrader define ``NBGRADER_EXECUTION``)

    Nesse modo ninguém olha figuras nem move controles: os experimentos longos encolhem, as
    figuras não são desenhadas e os widgets não são montados. As notas não dependem de nada disso.
    """
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def in_grading_kernel() -> bool:
    """:func:`grading_mode` dentro de um kernel IPython (o notebook corrigido, não um teste)."""
    if not grading_mode():
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def notice_when_grading(notice: Callable[[str], object]) -> Callable[[Callable], Callable]:
    """Decorador: no kernel da correção, a função devolve ``notice(nome)`` em vez de trabalhar.

    Para o que ninguém vê numa devolutiva (figuras, widgets). Fora da correção, nada muda.
    """

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if in_grading_kernel():
                return notice(fn.__name__)
            return fn(*args, **kwargs)

        return wrapper

    return decorate


def source_exports(
    package_path: Iterable[str], modules: Iterable[str]
) -> dict[str, tuple[str, ast.stmt | None]]:
    """O ``__all__`` de cada módulo ``modules`` de um pacote, lido do código-fonte, sem importar nada.

    Devolve nome -> (módulo, a definição ``def`` desse nome no módulo, ou None). Serve aos pacotes
    de figuras e de widgets: no kernel da correção eles respondem com um aviso sem importar o
    matplotlib (≈0,9 s por notebook corrigido), sabendo pelo código quais nomes desenham.
    """
    exports: dict[str, tuple[str, ast.stmt | None]] = {}
    for module in modules:
        path = next(Path(folder) / f"{module}.py" for folder in package_path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defs = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        names = next(
            (
                ast.literal_eval(node.value)
                for node in tree.body
                if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "__all__" for t in node.targets)
            ),
            [],
        )
        for name in names:
            exports[name] = (module, defs.get(name))
    return exports


def stand_ins_when_grading(
    namespace: dict,
    modules: Iterable[str],
    stands_in: Callable[[ast.stmt | None], bool],
    notice: Callable[[str], object],
    load: Callable[[], None],
) -> tuple[list[str], Callable[[str], object]]:
    """O ``__all__`` e o ``__getattr__`` de um pacote que, no kernel da correção, não importa os módulos.

    ``namespace``: os ``globals()`` do pacote. Um nome cuja definição ``stands_in`` aceita (lida do
    código-fonte por :func:`source_exports`) vira uma função que devolve ``notice(nome)``, o mesmo
    que o decorador de :func:`notice_when_grading` devolveria; qualquer outro nome chama ``load()``
    (que importa tudo e preenche ``namespace``) e é procurado de novo.
    """
    exports = source_exports(namespace["__path__"], modules)

    def __getattr__(name: str):
        entry = exports.get(name)
        if entry is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        if stands_in(entry[1]):

            def stand_in(*args, **kwargs):
                return notice(name)

            stand_in.__name__ = stand_in.__qualname__ = name
            return stand_in
        load()
        return namespace[name]

    return list(exports), __getattr__


def get_device(prefer: str | None = None) -> torch.device:
    """Devolve o dispositivo de cálculo: ``cuda`` se houver GPU, senão ``cpu``.

    Args:
        prefer: força um dispositivo (por exemplo ``"cpu"``); ``None`` escolhe sozinho.
    """
    if prefer is not None:
        return torch.device(prefer)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def seeded_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """Um ``torch.Generator`` com semente própria (nunca o gerador global)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"`` (para mensagens e legendas)."""
    return str(dtype).removeprefix("torch.")


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Roda o bloco com uma thread do PyTorch e restaura o número anterior no fim.

    Os tensores das verificações e dos widgets são minúsculos: com várias threads numa CPU
    disputada, cada operação espera as outras e um cálculo de 0,1 s passa de 2 s.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def single_threaded(fn: Callable) -> Callable:
    """Decorador: a função inteira roda em :func:`one_thread`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True
        with one_thread():
            return fn(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def isolated(seed: int = 0) -> Iterator[None]:
    """Uma thread e o gerador global da CPU emprestado com semente ``seed``, restaurado no fim.

    É a política única de isolamento das verificações: o que elas sorteiam (dropout, pesos
    iniciais) é sempre o mesmo, e o estado aleatório do notebook do aluno fica como estava.
    """
    with one_thread(), torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        yield
