"""O gabarito fica com o professor: os pacotes que o kernel da correção e os alunos do hub veem.

- na correção de um capítulo, o pacote montado no kernel não tem nenhuma linha das soluções daquele
  capítulo nem dos seguintes (procuradas no texto de todos os arquivos), nem as verificações;
- no hub, o pacote dos alunos tem as referências só dos capítulos liberados;
- as verificações visíveis não dependem das referências: num pacote sem nenhuma, o gabarito
  (o código de ``solutions/``) continua passando e uma resposta errada continua falhando;
- as demonstrações que usam o gabarito são puladas na correção; respostas e testes nunca.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import CHAPTERS, ROOT
from judge_helpers import solution_code

from transformer_course.instructor import answer_key


def _texts(package: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in package.rglob("*.py"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("pacotes")


def _distinctive_lines(module: str, name: str) -> list[str]:
    """As linhas do corpo de uma referência que não aparecem em mais nenhum lugar do pacote."""
    import ast

    root = answer_key.package_root()
    source = (root / f"{module}.py").read_text()
    node = next(n for n in ast.parse(source).body if getattr(n, "name", None) == name)
    body = source.splitlines()[node.lineno - 1 : node.end_lineno]
    rest = source.splitlines()[: node.lineno - 1] + source.splitlines()[node.end_lineno :]
    elsewhere = "\n".join(rest + [p.read_text() for p in root.rglob("*.py") if p.name != f"{module}.py"])
    lines = [ln.strip() for ln in body[1:]]
    return [ln for ln in lines if len(ln) >= 12 and not ln.startswith("#") and ln not in elsewhere]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_grading_package_has_no_answers_of_this_chapter_or_later(chapter, cache):
    package = answer_key.grading_package(chapter, cache)
    text = _texts(package)
    withheld = answer_key.withheld_for_grading(chapter)
    assert any(withheld.values())
    for module, names in withheld.items():
        code = (package / f"{module}.py").read_text()
        for name in names:
            assert f"{name} = _tdz_withheld.withheld(" in code or f"class {name}(" in code, (module, name)
            assert f"def {name}(" not in code, f"{chapter}: {module}.{name} ficou no pacote da correção"
            leaked = [ln for ln in _distinctive_lines(module, name) if ln in text]
            assert not leaked, f"{chapter}: linhas de {module}.{name} no pacote da correção: {leaked[:3]}"
    assert not (package / "checks" / "ch02.py").exists(), "as verificações (oráculos) não vão para o kernel"
    assert not (package / "instructor").exists(), "o juiz não vai para o kernel"
    # As peças de construção dos capítulos anteriores continuam lá (o capítulo 4 usa a do 3), e a
    # ferramenta que o enunciado do 4 entrega (a FFN do pacote) também.
    if chapter == "04_transformer":
        assert "class MultiHeadAttention" in (package / "multihead.py").read_text()
        assert "def split_heads" in (package / "multihead.py").read_text()
        assert ("layers", "FeedForward") in answer_key.tools_of(chapter)


def test_grading_package_imports_and_stubs_refuse(cache):
    package = answer_key.grading_package("02_atencao", cache)
    code = (
        "import transformer_course, transformer_course.attention as a, transformer_course.layers as L\n"
        "import transformer_course.harness, transformer_course.plots, transformer_course.widgets\n"
        "from transformer_course.checks import check_scaled_dot_product_attention\n"
        "print(transformer_course.__file__)\n"
        "try:\n    a.scaled_dot_product_attention(1, 2, 3)\n"
        "except NotImplementedError as e:\n    print(type(e).__name__, e)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(package.parent), "PATH": "/usr/bin:/bin"},
        cwd="/",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert str(package) in r.stdout
    assert "ReferenceWithheld" in r.stdout and "fica com o professor" in r.stdout


def test_student_package_keeps_only_released_answers(tmp_path):
    package = answer_key.student_package(tmp_path / "turma", released=["02_atencao"])
    text = _texts(package)
    assert "def scaled_dot_product_attention" in (package / "attention.py").read_text()
    for name in ("MultiHeadAttention", "split_heads", "merge_heads"):
        leaked = [ln for ln in _distinctive_lines("multihead", name) if ln in text]
        assert not leaked, f"o capítulo 3 não foi liberado, e {name} está no pacote: {leaked[:3]}"
    assert (package / "checks" / "ch03.py").exists(), "os alunos precisam das verificações visíveis"


CHECK_ALL = """
import sys, json, traceback
import transformer_course.feedback as fb
from transformer_course.exercises import all_exercises
ns = {}
exec(compile(open(sys.argv[1]).read(), "gabarito", "exec"), ns)
failures = {}
for ex in all_exercises():
    if ex.name not in ns or ex.visible is None:
        continue
    try:
        ex.visible(ns[ex.name])
    except BaseException as exc:
        failures[ex.name] = f"{type(exc).__name__}: {str(exc)[:300]}"
print(json.dumps(failures))
"""


def _notebook_imports(chapter: str) -> tuple[list[str], list[str]]:
    """As importações do notebook que as respostas-modelo usam, como no pacote dos alunos sem gabarito.

    As de fora do pacote vêm como estão (``from torch.optim.lr_scheduler import LambdaLR``). Uma
    ferramenta do enunciado importada com apelido (``FeedForward as FeedForwardRef``) é, no pacote dos
    alunos sem o gabarito, a resposta do próprio aluno (``answer_key.own``): aqui, o apelido da
    resposta-modelo do mesmo nome (``FeedForwardRef = FeedForward``). Devolve (importações, apelidos).
    """
    import ast

    nb = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
    tools = answer_key.tools_of(chapter)
    lines = []
    for cell in nb.cells:
        tree = answer_key._cell_tree(cell.source) if cell.cell_type == "code" else None
        for node in tree.body if tree is not None else ():
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("transformer_course"):
                module = (node.module or "").removeprefix("transformer_course").lstrip(".")
                lines += [
                    f"{alias.asname} = {alias.name}"
                    for alias in node.names
                    if (module, alias.name) in tools and alias.asname
                ]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                if "transformer_course" not in ast.unparse(node):
                    lines.append(ast.unparse(node))
    return [ln for ln in lines if " = " not in ln], [ln for ln in lines if " = " in ln]


@pytest.mark.slow
def test_visible_checks_work_without_any_reference(tmp_path):
    """Ao estudar no hub, as verificações rodam com as referências retidas: elas não podem ser oráculos."""
    package = answer_key.student_package(tmp_path / "turma", released=[])
    imports, aliases = zip(*(_notebook_imports(chapter) for chapter in CHAPTERS), strict=True)
    setup = "\n".join(dict.fromkeys(line for lines in imports for line in lines))
    solutions = "\n\n".join(solution_code(chapter) for chapter in CHAPTERS)
    code = "\n\n".join([setup, solutions, *("\n".join(lines) for lines in aliases if lines)])
    source = tmp_path / "gabarito.py"
    source.write_text(code)
    r = subprocess.run(
        [sys.executable, "-c", CHECK_ALL, str(source)],
        env={"PYTHONPATH": str(package.parent), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    import json

    failures = json.loads(r.stdout.strip().splitlines()[-1])
    assert not failures, f"verificações que dependem das referências retidas: {failures}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_demonstrations_that_need_the_answers_are_skipped_not_the_answers(chapter):
    nb = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
    graded = {i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution")}
    graded |= {i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade")}
    skip = answer_key.cells_to_skip(nb.cells, chapter, keep=graded)
    assert not graded & set(skip)
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    assert first_code not in skip, "a célula de importações roda sempre (ela só importa)"
    assert skip, f"{chapter}: nenhuma demonstração usa o gabarito? (a análise não achou nenhuma)"
    for index in skip:
        assert nb.cells[index].cell_type == "code"
