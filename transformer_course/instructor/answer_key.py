"""O gabarito fica com o professor: o pacote que o kernel do aluno vê, sem as respostas.

As implementações de referência dos exercícios (``transformer_course.attention.scaled_dot_product_attention``
e as outras do registro) são o gabarito. Este módulo monta cópias do pacote em que elas não estão:

- **na correção** (:func:`grading_package`): o kernel confinado de um capítulo vê o pacote sem as
  referências daquele capítulo e dos seguintes (as dos anteriores são peças de construção: o
  capítulo 4 usa a ``MultiHeadAttention`` do 3), sem as verificações, o registro e o juiz. Cada
  referência retida vira uma função (ou classe) que levanta ``ReferenceWithheld``; os auxiliares
  privados que só ela usava somem junto. As células de demonstração que dependem de uma
  referência retida não rodam (:func:`cells_to_skip`, uma análise do código, sem executar nada);
- **para a turma no hub** (:func:`student_package`): o ambiente dos alunos tem as referências só
  dos capítulos cujo gabarito o professor já liberou. As outras viram substitutas que usam a
  função do próprio aluno (do notebook aberto) — a demonstração roda com o código dele — ou dizem
  com clareza que precisam dela.

``make lab`` (estudo individual) continua com o pacote inteiro: quem estuda sozinho tem o gabarito
instalado, e o README diz isso.
"""

from __future__ import annotations

import ast
import hashlib
import shutil
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "cells_to_skip",
    "graded_references",
    "grading_package",
    "package_root",
    "student_package",
    "withheld_for_grading",
    "withheld_for_students",
]

PACKAGE = "transformer_course"
# O que o kernel da correção não precisa e não deve ver (o juiz, as verificações, o registro).
GRADER_ONLY = ("instructor", "checks", "exercises.py", "feedback.py", "probe.py", "tamper.py", "templates")

WITHHELD_MODULE = '''"""Substitutas das implementações de referência retidas (gerado; não edite)."""

__all__ = ["ReferenceWithheld", "own", "withheld"]


class ReferenceWithheld(NotImplementedError):
    """A implementação de referência não está neste ambiente (o professor a guarda)."""


def withheld(name, chapter):
    def stub(*args, **kwargs):
        raise ReferenceWithheld(
            f"a implementação de referência de `{name}` ({chapter}) fica com o professor durante a "
            "correção: escreva a sua, sem importar nem chamar a do pacote"
        )

    return stub


def own(name, chapter):
    """A resposta do próprio aluno no notebook aberto, no lugar da referência ainda não liberada."""

    def stub(*args, **kwargs):
        answer = None
        try:
            from IPython import get_ipython

            shell = get_ipython()
            answer = shell.user_ns.get(name) if shell is not None else None
        except ImportError:
            pass
        if answer is None or getattr(answer, "__module__", "").startswith("transformer_course"):
            raise ReferenceWithheld(
                f"esta demonstração usa `{name}` ({chapter}). A implementação de referência ainda não "
                f"foi liberada pelo professor, e a sua `{name}` não está definida neste notebook: "
                "resolva o exercício e rode esta célula de novo"
            )
        try:
            return answer(*args, **kwargs)
        except NotImplementedError as exc:
            if str(exc).strip():
                raise
            raise ReferenceWithheld(
                f"esta demonstração usa a sua `{name}` ({chapter}), que ainda não foi implementada: "
                "resolva o exercício e rode esta célula de novo (a referência do curso é liberada "
                "pelo professor depois do prazo)"
            ) from None

    return stub
'''


def package_root() -> Path:
    """A pasta do pacote ``transformer_course`` que este processo importa."""
    import transformer_course

    return Path(transformer_course.__file__).resolve().parent


def graded_references() -> dict[str, dict[str, str]]:
    """Módulo (``"attention"``) -> {nome da referência: capítulo}, a partir do registro de exercícios."""
    from ..exercises import all_exercises

    out: dict[str, dict[str, str]] = {}
    for exercise in all_exercises():
        ref = exercise.reference
        if ref is None or not getattr(ref, "__module__", "").startswith(PACKAGE + "."):
            continue
        module = ref.__module__[len(PACKAGE) + 1 :]
        out.setdefault(module, {})[ref.__qualname__] = exercise.chapter
    return out


def _chapters_from(chapter: str) -> set[str]:
    from ..course import CHAPTERS

    if chapter not in CHAPTERS:
        return set(CHAPTERS)
    return set(CHAPTERS[CHAPTERS.index(chapter) :])


def withheld_for_grading(chapter: str, course_root: Path | None = None) -> dict[str, dict[str, str]]:
    """As referências retidas na correção de ``chapter``: as dele e as dos capítulos seguintes.

    Exceção: uma referência que o próprio enunciado entrega como ferramenta (a resposta-modelo de
    outro exercício do capítulo a usa pelo nome, como a ``FeedForwardRef`` dentro da
    ``EncoderLayer`` do capítulo 4) fica no kernel; a verificação recusa a resposta que a use.
    """
    keep = _chapters_from(chapter)
    refs = graded_references()
    tools = tools_of(chapter, course_root)
    return {
        m: {n: c for n, c in names.items() if c in keep and (m, n) not in tools}
        for m, names in refs.items()
        if names
    }


def tools_of(chapter: str, course_root: Path | None = None) -> set[tuple[str, str]]:
    """(módulo, nome) das referências que as respostas-modelo de ``chapter`` usam como ferramenta.

    Lê o ``source/`` do curso em ``course_root`` (padrão: a pasta acima do pacote, no repositório).
    """
    import nbformat

    from ..course import CHAPTERS

    root = Path(course_root) if course_root is not None else package_root().parent
    path = root / "source" / chapter / f"{chapter}.ipynb"
    if chapter not in CHAPTERS or not path.exists():
        return set()
    nb = nbformat.read(path, as_version=4)
    imports: dict[str, tuple[str, str]] = {}
    for cell in nb.cells:
        tree = _cell_tree(cell.source) if cell.cell_type == "code" else None
        if tree is not None:
            imports |= _imported_names(tree)
    found = set()
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("solution"):
            continue
        tree = _cell_tree(cell.source)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Name) and imports.get(node.id, ("", ""))[1]:
                found.add(imports[node.id])
    return found


def withheld_for_students(released: Iterable[str]) -> dict[str, dict[str, str]]:
    """As referências retidas no ambiente dos alunos: as dos capítulos ainda não liberados."""
    released = set(released)
    refs = graded_references()
    return {m: {n: c for n, c in names.items() if c not in released} for m, names in refs.items()}


# ====================================================================== reescrever um módulo


def _top_level(tree: ast.Module) -> dict[str, ast.AST]:
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }


def _names_used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _private_helpers(tree: ast.Module, withheld: set[str]) -> set[str]:
    """Os auxiliares privados (``_nome``) usados só pelas definições retidas (de modo transitivo)."""
    defs = _top_level(tree)
    users: dict[str, set[str]] = {name: set() for name in defs if name.startswith("_")}
    for name, node in defs.items():
        for used in _names_used(node) & set(users):
            if used != name:
                users[used].add(name)
    # nomes privados usados no nível do módulo (fora das definições) ficam
    module_level = set()
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            module_level |= _names_used(node)
    gone = set(withheld)
    changed = True
    while changed:
        changed = False
        for helper, who in users.items():
            if helper not in gone and helper not in module_level and who and who <= gone:
                gone.add(helper)
                changed = True
    return gone - set(withheld)


def _stub(node: ast.AST, chapter: str, mode: str) -> ast.AST:
    """A substituta de uma definição retida, com o mesmo nome (e as mesmas bases, numa classe)."""
    name = node.name
    maker = "withheld" if mode == "grading" else "own"
    if isinstance(node, ast.ClassDef):
        bases = ", ".join(ast.unparse(b) for b in node.bases) or "object"
        text = (
            f"class {name}({bases}):\n"
            f'    """Referência retida (``{chapter}``)."""\n\n'
            "    def __new__(cls, *args, **kwargs):\n"
            f"        return _tdz_withheld.{maker}({name!r}, {chapter!r})(*args, **kwargs)\n"
        )
    else:
        text = f"{name} = _tdz_withheld.{maker}({name!r}, {chapter!r})\n"
    return ast.parse(text).body[0]


def rewrite_module(source: str, names: dict[str, str], mode: str) -> tuple[str, set[str]]:
    """O código de um módulo com as definições ``names`` (nome -> capítulo) retidas.

    Devolve o código novo e o conjunto de nomes que sumiram (as referências e seus auxiliares).
    ``mode``: ``"grading"`` (a substituta levanta) ou ``"students"`` (usa a função do aluno).
    """
    tree = ast.parse(source)
    defs = _top_level(tree)
    present = {n: c for n, c in names.items() if n in defs}
    if not present:
        return source, set()
    helpers = _private_helpers(tree, set(present))
    body = []
    for node in tree.body:
        name = getattr(node, "name", None)
        if name in present:
            body.append(_stub(node, present[name], mode))
        elif name in helpers:
            continue
        else:
            body.append(node)
    # A importação das substitutas entra depois de ``from __future__`` (que precisa vir primeiro).
    at = next((i for i, n in enumerate(body) if not _is_docstring_or_future(n)), len(body))
    body.insert(at, ast.parse(f"from {PACKAGE} import _withheld as _tdz_withheld").body[0])
    tree.body = body
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n", set(present) | helpers


def _is_docstring_or_future(node: ast.AST) -> bool:
    if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant):
        return isinstance(node.value.value, str)
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


# ====================================================================== montar o pacote


def _fingerprint(root: Path, withheld: dict, mode: str) -> str:
    names = sorted((m, sorted(n.items())) for m, n in withheld.items())
    digest = hashlib.sha256(repr((names, mode)).encode())
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _build(dest: Path, withheld: dict[str, dict[str, str]], mode: str, drop: tuple[str, ...]) -> Path:
    """Copia o pacote para ``dest/transformer_course`` com as referências ``withheld`` retidas."""
    src = package_root()
    target = dest / PACKAGE
    tmp = dest / f".{PACKAGE}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", *drop))
    (tmp / "_withheld.py").write_text(WITHHELD_MODULE)
    for module, names in withheld.items():
        if not names:
            continue
        path = tmp / (module.replace(".", "/") + ".py")
        if path.exists():
            code, _ = rewrite_module(path.read_text(), names, mode)
            path.write_text(code)
    if mode == "grading":
        _grading_stubs(tmp)
    # O kernel confinado roda com outro uid: tudo legível, a própria pasta também (o copytree copia
    # o modo da origem, que pode ser 0750 com um umask 027).
    for path in [tmp, *tmp.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    return target


def _grading_stubs(tmp: Path) -> None:
    """Na correção, ``checks`` e ``tamper`` existem (o notebook os importa) mas não fazem nada."""
    from ..checks import __all__ as visible

    checks = tmp / "checks"
    checks.mkdir(exist_ok=True)
    lines = [
        '"""Na correção, as verificações rodam fora do kernel, no juiz (gerado; não edite)."""',
        "",
        f"__all__ = {sorted(visible)!r}",
        "",
        "",
        "def _judged(*args, **kwargs):",
        '    print("(Na correção, esta verificação roda fora do notebook: quem decide os pontos é o juiz.)")',
        "",
        "",
    ]
    lines += [f"{name} = _judged" for name in sorted(visible)]
    (checks / "__init__.py").write_text("\n".join(lines) + "\n")
    (tmp / "tamper.py").write_text(
        '"""Na correção, os testes ocultos rodam fora do kernel, no juiz (gerado; não edite)."""\n\n\n'
        "def hidden_check(*args, **kwargs):\n"
        "    return lambda *a, **k: None\n"
    )


def grading_package(chapter: str, cache: Path, course_root: Path | None = None) -> Path:
    """O pacote que o kernel confinado importa ao corrigir ``chapter`` (montado uma vez, guardado).

    ``cache``: uma pasta do corretor. Devolve a pasta ``.../transformer_course`` a montar.
    """
    import fcntl

    withheld = withheld_for_grading(chapter, course_root)
    key = _fingerprint(package_root(), withheld, "grading")
    dest = Path(cache) / f"{chapter}-{key}"
    target = dest / PACKAGE
    if (target / "_withheld.py").exists():
        return target
    dest.mkdir(parents=True, exist_ok=True)
    # Os workers do Dask corrigem ao mesmo tempo: um só monta a cópia, os outros esperam por ela (sem
    # o trinco, um apagava a pasta temporária do outro no meio da cópia e a entrega dava erro).
    with open(dest / ".trinco", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "_withheld.py").exists():
            _build(dest, withheld, "grading", GRADER_ONLY)
    return target


def student_package(dest: Path, released: Iterable[str]) -> Path:
    """O pacote dos alunos no hub: as referências só dos capítulos ``released`` (o resto usa as deles)."""
    withheld = withheld_for_students(released)
    return _build(Path(dest), withheld, "students", ("instructor",))


# ====================================================================== células que não rodam na correção


def _dependents(withheld: dict[str, dict[str, str]]) -> set[tuple[str, str]]:
    """(módulo, nome) do pacote que usam, direta ou indiretamente, uma referência retida."""
    root = package_root()
    tainted = {(m, n) for m, names in withheld.items() for n in names}
    modules: dict[str, tuple[dict, dict]] = {}
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        if module.split(".")[0] in ("instructor", "checks", "exercises", "feedback", "probe", "tamper"):
            continue
        try:
            tree = ast.parse(path.read_text())
        except SyntaxError:
            continue
        imports = _imported_names(tree, module)
        modules[module] = (imports, _top_level(tree))
    changed = True
    while changed:
        changed = False
        for module, (imports, defs) in modules.items():
            for name, node in defs.items():
                if (module, name) in tainted:
                    continue
                used = _names_used(node)
                dotted = _dotted(tainted)
                hit = any((module, u) in tainted or imports.get(u) in tainted for u in used) or any(
                    isinstance(a, ast.Attribute)
                    and isinstance(a.value, ast.Name)
                    and imports.get(a.value.id, ("", "?"))[1] == ""
                    and f"{imports[a.value.id][0]}.{a.attr}" in dotted
                    for a in ast.walk(node)
                )
                if hit:
                    tainted.add((module, name))
                    changed = True
    return tainted


def _dotted(pairs: set[tuple[str, str]]) -> set[str]:
    return {f"{m}.{n}" for m, n in pairs}


def _imported_names(tree: ast.AST, module: str = "") -> dict[str, tuple[str, str]]:
    """Nome local -> (módulo do pacote, nome) das importações do pacote; módulos inteiros -> (mod, "")."""
    out: dict[str, tuple[str, str]] = {}
    package = module.rpartition(".")[0] if "." in module else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, base] if base else parts)
            elif base == PACKAGE or base.startswith(PACKAGE + "."):
                base = base[len(PACKAGE) + 1 :] if base != PACKAGE else ""
            else:
                continue
            for alias in node.names:
                local = alias.asname or alias.name
                if base == "":
                    out[local] = (alias.name, "")  # from transformer_course import positional
                else:
                    out[local] = (base, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + ".") and alias.asname:
                    out[alias.asname] = (alias.name[len(PACKAGE) + 1 :], "")
    return out


def _cell_tree(source: str) -> ast.Module | None:
    """A árvore de uma célula, com as mágicas do IPython transformadas (``%matplotlib``)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - sem IPython ou célula estranha: tenta como está
        pass
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def _bound(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return names


def cells_to_skip(
    cells: list, chapter: str, keep: set[int] = frozenset(), course_root: Path | None = None
) -> dict[int, str]:
    """Índice -> motivo (pt-BR) das células de código que não rodam na correção de ``chapter``.

    Uma célula é pulada quando usa (não só importa) um nome ligado a uma referência retida, a algo
    do pacote que depende dela, ou a um nome definido por uma célula já pulada. As células em
    ``keep`` (as respostas e os testes) sempre rodam. Nada é executado: é uma análise do código.
    """
    withheld = withheld_for_grading(chapter, course_root)
    tainted_pkg = _dependents(withheld)
    dotted = _dotted(tainted_pkg)
    tainted: dict[str, str] = {}  # nome no notebook -> o que ele carrega de retido
    modules: dict[str, str] = {}  # apelido -> módulo do pacote
    skip: dict[int, str] = {}
    for index, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        tree = _cell_tree(cell.get("source", "") if isinstance(cell.get("source"), str) else "")
        if tree is None:
            continue
        imports = _imported_names(tree)
        for local, (module, name) in imports.items():
            if name == "":
                modules[local] = module
            elif (module, name) in tainted_pkg:
                tainted[local] = f"{module}.{name}"
            elif local in tainted:
                del tainted[local]
        import_nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        imported_ids = {id(a) for n in import_nodes for a in ast.walk(n)}
        used = [
            n
            for n in ast.walk(tree)
            if id(n) not in imported_ids and isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        ]
        reason = next((tainted[n.id] for n in used if n.id in tainted), None)
        if reason is None:
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    module = modules.get(node.value.id)
                    if module is not None and f"{module}.{node.attr}" in dotted:
                        reason = f"{module}.{node.attr}"
                        break
        if reason is None or index in keep:
            continue
        skip[index] = reason
        for name in _bound(tree):
            tainted.setdefault(name, reason)
    return skip
