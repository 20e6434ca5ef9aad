"""Ataques à nota no capítulo 6 (o laço de treino), corrigidos pelo ``scripts/grade_class.py`` de verdade.

O capítulo 2 (tests/test_grading_hostile.py) cobre funções puras; aqui, as mesmas classes de ataque
contra um laço de treino, um agendador e uma avaliação: marcas e metadados, ``execute_result`` e
ganchos do IPython, tensores e modos do PyTorch que mentem, módulos trocados e ganchos de
importação, oráculo envenenado e a referência do pacote. Cada entrega tem de valer exatamente o
que o código de verdade dela vale.

Pontos automáticos do capítulo 6: noam_lr 1 + 1, make_warmup_scheduler 1 + 1, train_epoch 2 + 2,
evaluate 1 + 1 (10).
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys

import nbformat
import pytest
from conftest import ROOT, copy_course

pytestmark = pytest.mark.slow

CHAPTER = "06_treino_warmup"
CELL_TIMEOUT = 60
FULL = 10
TRAIN = 4  # test_train_epoch + test_train_epoch_hidden


def _solution():
    return nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)


def _blank():
    return nbformat.read(ROOT / "release" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)


def _index(nb, grade_id):
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if isinstance(meta, dict) and meta.get("grade_id") == grade_id:
            return i
    raise KeyError(grade_id)


def _append(nb, grade_id, code):
    nb.cells[_index(nb, grade_id)].source += "\n\n" + code
    return nb


def _no_zero_grad(nb):
    """O erro de verdade: o laço não zera os gradientes (eles se acumulam de um lote para o outro)."""
    cell = nb.cells[_index(nb, "train_epoch")]
    assert "optimizer.zero_grad()" in cell.source
    cell.source = cell.source.replace("        optimizer.zero_grad()\n", "")
    return nb


def _no_clipping(nb):
    cell = nb.cells[_index(nb, "train_epoch")]
    assert "clip_grad_norm_" in cell.source
    cell.source = "\n".join(ln for ln in cell.source.splitlines() if "clip_grad_norm_" not in ln) + "\n"
    return nb


def _submissions():
    subs = {"gabarito": (_solution(), FULL), "em_branco": (_blank(), 0)}

    # Marcas e metadados: a versão em branco com as células de teste marcadas para não rodar.
    nb = _blank()
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata["tags"] = ["skip-execution", "raises-exception", "nbval-skip"]
            cell.metadata["nbgrader"]["points"] = 100
    subs["marcas_e_pontos"] = (nb, 0)

    # execute_result e ganchos do IPython, sem código de verdade.
    nb = _blank()
    nb.cells.insert(
        1,
        nbformat.v4.new_code_cell(
            "ip = get_ipython()\n"
            "ip.events.register('pre_run_cell', lambda info: ip.displayhook(10.0))\n"
            "def _depois(result):\n"
            "    result.error_in_exec = None\n"
            "ip.events.register('post_run_cell', _depois)\n"
            "ip.set_custom_exc((BaseException,), lambda *a, **k: None)\n"
        ),
    )
    subs["ganchos_do_ipython"] = (nb, 0)

    # O laço errado (sem zero_grad) com um modo do PyTorch que diz "igual" a qualquer comparação e
    # um tensor que mente nas perdas: vale o resto do capítulo, sem o treino.
    nb = _append(
        _no_zero_grad(_solution()),
        "train_epoch",
        "from torch.overrides import TorchFunctionMode\n"
        "class _Sempre(TorchFunctionMode):\n"
        "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "        if getattr(func, '__name__', '') in ('isclose', 'allclose', 'equal'):\n"
        "            return True\n"
        "        return func(*args, **(kwargs or {}))\n"
        "_Sempre().__enter__()\n",
    )
    subs["modo_do_torch_mentiroso"] = (nb, FULL - TRAIN)

    # Módulos trocados e ganchos de importação: um harness falso responde "tudo certo".
    nb = _blank()
    nb.cells.insert(
        1,
        nbformat.v4.new_code_cell(
            "import sys, types, json, builtins\n"
            "from IPython.display import publish_display_data\n"
            "falso = types.ModuleType('transformer_course.harness')\n"
            "def serve(payload):\n"
            "    publish_display_data({'application/vnd.transformers-do-zero.probe.v1': json.dumps("
            "{'schema': 1, 'value': None, 'tensors': [], 'fields': []})})\n"
            "falso.serve = serve\n"
            "sys.modules['transformer_course.harness'] = falso\n"
            "_imp = builtins.__import__\n"
            "builtins.__import__ = lambda name, *a, **k: (\n"
            "    falso if 'harness' in name else _imp(name, *a, **k))\n"
            "import transformer_course.tamper as _t\n"
            "_t.hidden_check = lambda *a, **k: (lambda *b, **c: None)\n"
        ),
    )
    subs["harness_falso"] = (nb, 0)

    # O oráculo envenenado: o laço sem o corte dos gradientes, e o corte do PyTorch desligado para
    # quem mais o chamar (uma verificação que treinasse a referência no mesmo kernel concordaria).
    nb = _append(
        _no_clipping(_solution()),
        "train_epoch",
        "import torch.nn.utils as _u\n"
        "_u.clip_grad_norm_ = lambda parameters, max_norm, *a, **k: torch.tensor(0.0)\n"
        "torch.nn.utils.clip_grad_norm_ = _u.clip_grad_norm_\n",
    )
    subs["oraculo_envenenado"] = (nb, FULL - TRAIN)

    # A referência do pacote como resposta: na correção ela não existe no kernel (o agendador, que
    # usa a noam_lr da entrega, cai junto).
    nb = _solution()
    nb.cells[_index(nb, "noam_lr")].source = "from transformer_course.training import noam_lr\n"
    subs["importa_referencia"] = (nb, FULL - 4)

    nb = _solution()
    cell = nb.cells[_index(nb, "train_epoch")]
    cell.source = (
        "import transformer_course.training as _gabarito\n\n"
        "def train_epoch(model, loader, optimizer, scheduler, loss_fn, max_grad_norm=1.0):\n"
        "    return _gabarito.train_epoch(model, loader, optimizer, scheduler, loss_fn, max_grad_norm)\n"
    )
    subs["chama_referencia"] = (nb, FULL - TRAIN)
    return subs


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    from nbgrader.api import Gradebook

    course = copy_course(
        tmp_path_factory.mktemp("turma6") / "curso", parts=("source", "release", "solutions", "scripts")
    )
    for extra in [p for p in (course / "source").iterdir() if p.name != CHAPTER]:
        shutil.rmtree(extra)
    subs = _submissions()
    for student, (nb, _) in subs.items():
        folder = course / "grading" / "submitted" / student / CHAPTER
        folder.mkdir(parents=True)
        nbformat.write(copy.deepcopy(nb), folder / f"{CHAPTER}.ipynb")
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        [sys.executable, str(course / "scripts" / "grade_class.py"), f"--timeout={CELL_TIMEOUT}"],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    print(run.stdout[-6000:])
    assert run.returncode == 0, run.stdout + run.stderr
    scores = {}
    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        for student in subs:
            sub = gb.find_submission(CHAPTER, student)
            scores[student] = {
                g.name: g.score for nb in sub.notebooks for g in nb.grades if g.cell_type == "code"
            }
    return {"course": course, "scores": scores, "report": run.stdout}


EXPECTED = [(name, points) for name, (_, points) in _submissions().items()]


@pytest.mark.parametrize(("student", "expected"), EXPECTED, ids=[e[0] for e in EXPECTED])
def test_hostile_training_submission(graded_class, student, expected):
    scores = graded_class["scores"][student]
    got = sum(s or 0 for s in scores.values())
    assert got == pytest.approx(expected), f"{student}: {scores}"


def test_wrong_loop_loses_exactly_the_training_tests(graded_class):
    for student in ("modo_do_torch_mentiroso", "oraculo_envenenado", "chama_referencia"):
        scores = graded_class["scores"][student]
        assert scores["test_train_epoch"] == 0 and scores["test_train_epoch_hidden"] == 0, (student, scores)
        assert scores["test_evaluate"] == 1 and scores["test_noam_lr_hidden"] == 1, (student, scores)
