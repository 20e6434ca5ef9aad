"""Entregas hostis corrigidas pelo ``nbgrader autograde`` de verdade (via ``scripts/grade_class.py``).

Numa cópia temporária do curso, uma turma do capítulo 02_atencao com uma entrega de cada tipo
ruim: laço infinito, erro de sintaxe, exceção no topo, célula de teste apagada,
célula de teste editada, função renomeada, megabytes impressos, JSON inválido, notebook ausente,
arquivo a mais, chamada ao atalho do PyTorch, invólucro da implementação de referência do
pacote, resposta decorada do exemplo visível, e duas
adulterações (verificação trocada por uma função vazia; ``torch.testing.assert_close`` vazia).

Para cada uma: a nota esperada (ou o motivo claro no relatório), o resto da turma corrigido, e
as entregas idênticas byte a byte depois. As entregas são geradas aqui, a partir do gabarito;
só o JSON inválido é um arquivo (tests/fixtures/).

Pontos do capítulo 2: test_sdpa 2, test_sdpa_hidden 3, test_entropy 1, test_entropy_hidden 1 (7).
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time

import nbformat
import pytest
import torch
from conftest import ROOT, copy_course

pytestmark = pytest.mark.slow

CHAPTER = "02_atencao"
CELL_TIMEOUT = 45  # segundos por célula (e por pedido do juiz): o laço infinito custa isso; folga para a máquina ocupada
FIXTURES = ROOT / "tests" / "fixtures"


def _solution():
    return nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)


def _index(nb, grade_id):
    for i, cell in enumerate(nb.cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return i
    raise KeyError(grade_id)


def _set_sdpa(nb, source):
    nb.cells[_index(nb, "sdpa")].source = source


SDPA_HEAD = "def scaled_dot_product_attention(Q, K, V, mask=None):\n"


def _no_scale(nb):
    cell = nb.cells[_index(nb, "sdpa")]
    cell.source = cell.source.replace(" / math.sqrt(d_k)", "")
    assert "math.sqrt" not in cell.source
    return nb


def _hardcoded_source():
    """Uma função que só "sabe" as respostas dos exemplos do teste visível (decoradas)."""
    from transformer_course.attention import scaled_dot_product_attention as ref
    from transformer_course.checks.ch02 import _random_mask, _tensors
    from transformer_course.feedback import Check

    c = Check("visível")  # sementes dos testes visíveis (deslocamento 0)
    cases = []
    _, Q, K, V = _tensors(c, 0, (2,), 3, 4, 8, 5)
    cases.append((Q, K, V, None))
    gen, Q, K, V = _tensors(c, 1, (2,), 3, 6, 8, 5)
    cases.append((Q, K, V, _random_mask(gen, 3, 6)))
    gen, Q, K, V = _tensors(c, 2, (2, 3), 4, 5, 6, 7)
    cases.append((Q, K, V, _random_mask(gen, 4, 5, lead=(2, 1))))
    lines = ["RESPOSTAS = {"]
    for Q, K, V, mask in cases:
        out, w = ref(Q, K, V, mask)
        key = (tuple(Q.shape), tuple(K.shape))
        lines.append(f"    {key!r}: (torch.tensor({out.tolist()!r}), torch.tensor({w.tolist()!r})),")
    lines.append("}")
    lines.append(SDPA_HEAD.rstrip())
    lines.append("    key = (tuple(Q.shape), tuple(K.shape))")
    lines.append("    if key in RESPOSTAS:")
    lines.append("        out, w = RESPOSTAS[key]")
    lines.append("        return out.clone(), w.clone()")
    lines.append("    w = torch.zeros(*Q.shape[:-1], K.size(-2), dtype=Q.dtype)")
    lines.append("    return w @ V, w")
    return "\n".join(lines)


def _submissions():
    """nome -> (notebook | bytes | None, arquivos extras, nota esperada | motivo esperado)."""
    sol = _solution()
    subs = {}

    subs["gabarito"] = (sol, {}, 7)

    nb = copy.deepcopy(sol)
    _set_sdpa(
        nb, "while True:  # esqueci de sair do laço\n    pass\n\n" + nb.cells[_index(nb, "sdpa")].source
    )
    subs["laco_infinito"] = (nb, {}, 2)

    nb = copy.deepcopy(sol)
    cell = nb.cells[_index(nb, "sdpa")]
    cell.source = cell.source.replace("mask=None):", "mask=None)", 1)
    subs["erro_de_sintaxe"] = (nb, {}, 2)

    nb = copy.deepcopy(sol)
    nb.cells.insert(0, nbformat.v4.new_code_cell('raise RuntimeError("parei aqui")'))
    subs["excecao_no_topo"] = (nb, {}, 7)  # o nbgrader registra o erro e segue

    nb = _no_scale(copy.deepcopy(sol))
    del nb.cells[_index(nb, "test_sdpa")]  # volta do gradebook e é corrigida: 0 por não escalar
    subs["teste_apagado"] = (nb, {}, 2)

    nb = _no_scale(copy.deepcopy(sol))
    nb.cells[_index(nb, "test_sdpa")].source = "pass  # confia em mim"
    nb.cells[_index(nb, "test_sdpa_hidden")].source = "pass"
    subs["teste_editado"] = (nb, {}, 2)

    nb = copy.deepcopy(sol)
    cell = nb.cells[_index(nb, "sdpa")]
    cell.source = cell.source.replace("def scaled_dot_product_attention(", "def atencao(")
    subs["funcao_renomeada"] = (nb, {}, 2)

    nb = copy.deepcopy(sol)
    nb.cells[_index(nb, "sdpa")].source += "\n\nfor _ in range(100_000):\n    print('x' * 99)\n"
    subs["megabytes"] = (nb, {}, 7)  # ~10 MB de saída, cortada pelo LimitOutput

    subs["json_invalido"] = ((FIXTURES / "02_atencao_truncado.ipynb").read_bytes(), {}, "JSON")
    subs["sem_notebook"] = (None, {"Untitled.ipynb": b"{}", "notas.txt": b"esqueci o notebook\n"}, "não está")

    copy1 = (ROOT / "release" / CHAPTER / f"{CHAPTER}.ipynb").read_bytes()  # "Duplicate" do Jupyter
    subs["arquivo_extra"] = (
        copy.deepcopy(sol),
        {"rascunho.py": b"print('oi')\n", "dados/tabela.csv": b"a,b\n1,2\n", f"{CHAPTER}-Copy1.ipynb": copy1},
        7,
    )

    nb = copy.deepcopy(sol)
    _set_sdpa(
        nb,
        "from torch.nn import functional as F\n\n"
        + SDPA_HEAD
        + (
            "    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))\n"
            "    if mask is not None:\n"
            "        scores = scores.masked_fill(~mask, float('-inf'))\n"
            "    weights = scores.softmax(-1)\n"
            "    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask), weights\n"
        ),
    )
    subs["chama_builtin"] = (nb, {}, 4)

    nb = copy.deepcopy(sol)  # só embrulha a implementação de referência do pacote
    _set_sdpa(
        nb,
        "from transformer_course.attention import scaled_dot_product_attention as _pronta\n\n"
        + SDPA_HEAD
        + "    return _pronta(Q, K, V, mask)\n",
    )
    subs["delega_referencia"] = (nb, {}, 2)  # na correção a referência nem existe no kernel

    nb = copy.deepcopy(sol)
    _set_sdpa(nb, _hardcoded_source())
    subs["resposta_decorada"] = (nb, {}, 4)

    # Adulterações: implementação errada (sem √d_k) + o teste neutralizado antes de rodar. As células
    # de teste nem rodam no kernel (o juiz as corrige fora dele): vale só a entropia, certa (2).
    nb = _no_scale(copy.deepcopy(sol))
    nb.cells[_index(nb, "sdpa")].source += (
        "\n\nimport transformer_course.checks as _c\n"
        "import transformer_course.checks.ch02 as _c2\n"
        "check_scaled_dot_product_attention = lambda fn: None\n"
        "_c.check_scaled_dot_product_attention_hidden = lambda fn: None\n"
        "_c2.check_scaled_dot_product_attention_hidden = lambda fn: None\n"
    )
    subs["troca_verificacao"] = (nb, {}, 2)

    nb = _no_scale(copy.deepcopy(sol))
    nb.cells[_index(nb, "sdpa")].source += "\n\ntorch.testing.assert_close = lambda *a, **k: None\n"
    subs["assert_close_vazio"] = (nb, {}, 2)
    subs.update(_attacks_on_the_grade())
    return subs


BLANK_RELEASE = ROOT / "release" / CHAPTER / f"{CHAPTER}.ipynb"


def _blank():
    return nbformat.read(BLANK_RELEASE, as_version=4)


def _add_cell(nb, source, at=1):
    nb.cells.insert(at, nbformat.v4.new_code_cell(source))
    return nb


ENTROPY_IN_BITS = (
    "def attention_entropy(weights):\n"
    "    return -torch.special.xlogy(weights, weights).sum(dim=-1) / math.log(2)\n"
)


def _attacks_on_the_grade():
    """Uma entrega por classe de ataque à nota (issue 29): cada uma vale o que o código de verdade vale.

    Em branco (a versão do aluno) vale 0; o gabarito vale 7; sem a escala em √d_k, com a entropia
    certa, vale 2 (a entropia); com a atenção certa e a entropia em bits, vale 5.
    """
    subs = {}
    # Marcas e metadados.
    nb = _blank()
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata["tags"] = ["skip-execution", "raises-exception", "nbval-skip", "parameters"]
    subs["tag_skip_execution"] = (nb, {}, 0)

    nb = _solution()
    for cell in nb.cells:
        cell.metadata["tags"] = ["skip-execution", "raises-exception"]
        cell.metadata["execution"] = {"iopub.status.idle": "2020-01-01T00:00:00Z"}
    subs["tag_no_gabarito"] = (nb, {}, 7)  # nada do que é honesto muda

    nb = _blank()
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        if meta and meta.get("grade"):
            meta["points"] = 100
    bonus = nbformat.v4.new_code_cell("print('bônus')")
    bonus.metadata["nbgrader"] = {"grade": True, "grade_id": "bonus", "locked": True, "points": 50,
                                  "schema_version": 3, "solution": False, "task": False}  # fmt: skip
    nb.cells.append(bonus)
    nb.cells.append(copy.deepcopy(nb.cells[_index(nb, "test_sdpa")]))  # grade_id repetido
    subs["metadados_editados"] = (nb, {}, 0)

    nb = _solution()
    nb.cells[_index(nb, "test_entropy")].metadata["nbgrader"] = "lixo"
    nb.cells[_index(nb, "entropy")].metadata["nbgrader"]["points"] = "muitos"
    nb.cells[_index(nb, "test_sdpa")].metadata = {"nbgrader": ["não", "é", "um", "dicionário"]}
    nb.cells[0].attachments = {"x.png": {"image/png": "iVBORw0KGgo="}}
    subs["metadados_malformados"] = (nb, {}, 7)  # as células são reconhecidas pelo grade_id ou recolocadas

    # Saídas publicadas pelo kernel: um execute_result antes de cada célula, ganchos do IPython.
    subs["execute_result_antes"] = (
        _add_cell(
            _blank(),
            "ip = get_ipython()\n"
            "def _antes(info):\n"
            "    ip.displayhook(7.0)\n"
            "    ip.display_pub.publish({'text/plain': 'ok'})\n"
            "ip.events.register('pre_run_cell', _antes)\n",
        ),
        {},
        0,
    )
    subs["gancho_erro_apagado"] = (
        _add_cell(
            _blank(),
            "ip = get_ipython()\n"
            "def _depois(result):\n"
            "    result.error_in_exec = None\n"
            "    result.error_before_exec = None\n"
            "ip.events.register('post_run_cell', _depois)\n"
            "ip.set_custom_exc((BaseException,), lambda *a, **k: None)\n",
        ),
        {},
        0,
    )

    # Tensores que mentem e modos do PyTorch: a comparação acontece fora do kernel.
    nb = _no_scale(_solution())
    nb.cells[_index(nb, "sdpa")].source += (
        "\n\nclass Mentiroso(torch.Tensor):\n"
        "    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        name = getattr(func, '__name__', '')\n"
        "        if name in ('isclose', 'allclose', 'equal', 'eq', '__eq__'):\n"
        "            return True if name != 'isclose' else torch.ones((), dtype=torch.bool)\n"
        "        return super().__torch_function__(func, types, args, kwargs)\n"
        "_certa = scaled_dot_product_attention\n"
        "def scaled_dot_product_attention(Q, K, V, mask=None):\n"
        "    out, w = _certa(Q, K, V, mask)\n"
        "    return out.as_subclass(Mentiroso), w.as_subclass(Mentiroso)\n"
    )
    subs["tensor_mentiroso"] = (nb, {}, 2)

    nb = _no_scale(_solution())
    nb.cells[_index(nb, "sdpa")].source += (
        "\n\nfrom torch.overrides import TorchFunctionMode\n"
        "class Sempre(TorchFunctionMode):\n"
        "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "        if getattr(func, '__name__', '') in ('isclose', 'allclose', 'equal'):\n"
        "            return True\n"
        "        return func(*args, **(kwargs or {}))\n"
        "Sempre().__enter__()\n"
    )
    subs["modo_do_torch_mentiroso"] = (nb, {}, 2)

    # Módulos trocados e ganchos de importação: o harness falso responde o que quiser.
    subs["harness_falso"] = (
        _add_cell(
            _blank(),
            "import sys, types, json, base64\n"
            "from IPython.display import publish_display_data\n"
            "falso = types.ModuleType('transformer_course.harness')\n"
            "MIME = 'application/vnd.transformers-do-zero.probe.v1'\n"
            "def serve(payload):\n"
            "    publish_display_data({MIME: json.dumps({'schema': 1, 'value': None, 'tensors': [], "
            "'fields': []})})\n"
            "falso.serve = serve\n"
            "import transformer_course\n"
            "transformer_course.harness = falso\n"
            "sys.modules['transformer_course.harness'] = falso\n"
            "import builtins\n"
            "_imp = builtins.__import__\n"
            "builtins.__import__ = lambda name, *a, **k: transformer_course if name.startswith("
            "'transformer_course') else _imp(name, *a, **k)\n"
            "import transformer_course.tamper as _t\n"
            "_t.hidden_check = lambda *a, **k: (lambda *b, **c: None)\n",
        ),
        {},
        0,
    )

    # O oráculo envenenado: a entropia do PyTorch passa a dar bits, como a resposta errada.
    nb = _solution()
    nb.cells[_index(nb, "entropy")].source = ENTROPY_IN_BITS + (
        "\n_orig = torch.distributions.Categorical.entropy\n"
        "torch.distributions.Categorical.entropy = lambda self: _orig(self) / math.log(2)\n"
    )
    subs["oraculo_envenenado"] = (nb, {}, 5)

    # A referência do pacote: chamada dentro da resposta, ou a própria referência como resposta.
    nb = _solution()
    _set_sdpa(
        nb,
        "import transformer_course.attention as _gabarito\n\n"
        + SDPA_HEAD
        + "    return _gabarito.scaled_dot_product_attention(Q, K, V, mask)\n",
    )
    subs["chama_referencia"] = (nb, {}, 2)
    nb = _solution()
    _set_sdpa(nb, "from transformer_course.attention import scaled_dot_product_attention\n")
    subs["importa_referencia"] = (nb, {}, 2)
    return subs


def _digests(folder):
    return {
        p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    from nbgrader.api import Gradebook

    course = copy_course(
        tmp_path_factory.mktemp("turma") / "curso", parts=("source", "release", "solutions", "scripts")
    )
    for extra in [p for p in (course / "source").iterdir() if p.name != CHAPTER]:
        shutil.rmtree(extra)  # só o capítulo 2: o teste fica curto
    subs = _submissions()
    submitted = course / "grading" / "submitted"
    for student, (content, extras, _) in subs.items():
        folder = submitted / student / CHAPTER
        folder.mkdir(parents=True)
        if isinstance(content, bytes):
            (folder / f"{CHAPTER}.ipynb").write_bytes(content)
        elif content is not None:
            nbformat.write(content, folder / f"{CHAPTER}.ipynb")
        for name, data in extras.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
    before = _digests(submitted)

    started = time.perf_counter()
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        [sys.executable, str(course / "scripts" / "grade_class.py"), f"--timeout={CELL_TIMEOUT}"],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    elapsed = time.perf_counter() - started
    print(run.stdout[-6000:], f"\n[{len(subs)} entregas em {elapsed:.0f} s]")
    assert run.returncode == 0, run.stdout + run.stderr

    scores = {}
    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        for student in subs:
            try:
                sub = gb.find_submission(CHAPTER, student)
            except Exception:  # noqa: BLE001 - não corrigido
                continue
            scores[student] = {
                g.name: g.score for nb in sub.notebooks for g in nb.grades if g.cell_type == "code"
            }
    return {
        "course": course,
        "subs": subs,
        "before": before,
        "after": _digests(submitted),
        "scores": scores,
        "report": run.stdout,
    }


EXPECTED = [(name, expected) for name, (_, _, expected) in _submissions().items()]


@pytest.mark.parametrize(("student", "expected"), EXPECTED, ids=[e[0] for e in EXPECTED])
def test_hostile_submission(graded_class, student, expected):
    scores = graded_class["scores"]
    report = graded_class["report"]
    if isinstance(expected, str):
        assert student not in scores or not any(scores[student].values())
        line = next(
            (ln for ln in report.splitlines() if ln.strip().startswith(f"{student} / {CHAPTER}:")), ""
        )
        assert expected in line, f"o relatório não explica a falha de {student}:\n{report}"
        return
    got = sum(s or 0 for s in scores[student].values())
    assert got == pytest.approx(expected), f"{student}: {scores[student]}"


def test_submissions_untouched(graded_class):
    assert graded_class["after"] == graded_class["before"], "o nbgrader alterou arquivos em submitted/"


def test_reasons_in_report(graded_class):
    report = graded_class["report"]
    lines = {
        s: [ln for ln in report.splitlines() if ln.strip().startswith(f"{s} / ")]
        for s in graded_class["subs"]
    }
    assert any("tempo esgotado" in ln for ln in lines["laco_infinito"]), report
    assert any("SEM a divisão por √d_k" in ln for ln in lines["assert_close_vazio"]), report
    assert any("SEM a divisão por √d_k" in ln for ln in lines["troca_verificacao"]), report
    assert any("implementação de referência" in ln for ln in lines["chama_referencia"]), report
    assert any("F.scaled_dot_product_attention" in ln for ln in lines["chama_builtin"]), report
    assert any("SEM a divisão por √d_k" in ln for ln in lines["teste_editado"]), report
    # O quadro da turma tem uma linha por aluno.
    for student in graded_class["subs"]:
        assert re.search(rf"^{student}\s", report, re.M), student


def test_outputs_bounded_and_extra_files_kept(graded_class):
    autograded = graded_class["course"] / "grading" / "autograded"
    big = autograded / "megabytes" / CHAPTER / f"{CHAPTER}.ipynb"
    assert big.stat().st_size < 2_000_000, f"saída não foi limitada: {big.stat().st_size} bytes"
    assert (autograded / "arquivo_extra" / CHAPTER / "dados" / "tabela.csv").exists()
    feedback = graded_class["course"] / "grading" / "feedback"
    assert (feedback / "gabarito" / CHAPTER / f"{CHAPTER}.html").exists()
    assert (graded_class["course"] / "grading" / "notas.csv").exists()


def test_deleted_cell_restored_and_graded(graded_class):
    scores = graded_class["scores"]["teste_apagado"]
    assert scores["test_sdpa"] == 0  # a célula voltou e rodou (não ficou para correção manual)
    assert scores["test_entropy"] == 1


def test_torch_is_intact_here():
    # Sanidade: as adulterações acima rodaram no kernel da correção, não neste processo.
    assert torch.testing.assert_close.__module__ == "torch.testing._comparison"


NO_SCALE = ("troca_verificacao", "assert_close_vazio", "tensor_mentiroso", "modo_do_torch_mentiroso")


def test_class_report_counts(graded_class):
    """O relatório da turma (``make grade-class``): as contagens batem com as notas e os diagnósticos."""
    import csv
    import html

    grading = graded_class["course"] / "grading"
    assert "relatório da turma: grading/relatorio_da_turma.html" in graded_class["report"]
    with (grading / "diagnosticos.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    scores = graded_class["scores"]
    # Uma linha por aluno corrigido × célula de teste, com os pontos que o gradebook gravou.
    by_key = {(r["aluno"], r["celula"]): r for r in rows}
    for student, cells in scores.items():
        for grade_id, points in cells.items():
            if (student, grade_id) in by_key:
                got = float(by_key[student, grade_id]["pontos"])
                assert got == pytest.approx(points or 0), (student, grade_id)
    # Os que esqueceram a escala têm o mesmo diagnóstico (o mesmo id estável, o erro conhecido).
    ids = {by_key[s, "test_sdpa"]["diagnostico_id"] for s in NO_SCALE}
    mistakes = {by_key[s, "test_sdpa"]["erro_conhecido"] for s in NO_SCALE}
    assert len(ids) == 1 and "" not in ids, ids
    assert len(mistakes) == 1 and "" not in mistakes, mistakes
    assert by_key["gabarito", "test_sdpa"]["status"] == "passou"
    # O HTML: a fração que passa em cada teste e o diagnóstico mais frequente com quem o teve.
    page = html.unescape((grading / "relatorio_da_turma.html").read_text(encoding="utf-8"))
    sdpa = [r for r in rows if r["celula"] == "test_sdpa"]
    passed = sum(r["status"] == "passou" for r in sdpa)
    assert "test_sdpa (visível)" in page and f"({passed} de {len(sdpa)})" in page
    (diag_id,) = ids
    with_it = sorted({r["aluno"] for r in sdpa if r["diagnostico_id"] == diag_id})
    assert set(NO_SCALE) <= set(with_it)
    row = f"<code>{diag_id}</code></small></td><td class='n'>{len(with_it)}</td><td>{', '.join(with_it)}</td>"
    assert row in page
    assert "<script" not in page.lower() and "Content-Security-Policy" in page
