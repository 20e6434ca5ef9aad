"""As falhas do corretor nunca viram o 0 de um aluno (``transformer_course.instructor.faults``).

Com turmas de verdade (``make grade-class`` numa cópia do curso, kernels confinados):

- uma cópia do curso corrigida com um ambiente Python instalado de OUTRA pasta (a instalação
  editável do ambiente aponta para outra cópia, que o isolamento esconde), e com uma instalação
  comum (não editável: o pacote copiado para uma pasta de instalação, fora de qualquer curso): as
  notas saem certas, porque o kernel importa o pacote que o corretor montou;
- o ambiente quebrado de propósito (o pacote montado não importa; o isolamento desligado sem
  autorização; o kernel importando outra cópia do curso, com outra impressão digital): a turma
  para com o motivo em pt-BR e código 1, nenhuma nota gravada (nem 0), ``notas.csv`` não é
  exportado, e a próxima execução, com o ambiente consertado, corrige as entregas.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from test_grading_parallel import CHAPTER, class_submissions, make_class

from transformer_course.instructor import answer_key
from transformer_course.instructor.judge import package_digest, preflight_problem

pytestmark = pytest.mark.slow

STUDENTS = ("ana", "carla")  # certa (7 pontos) e em branco (0)


def _subs() -> dict:
    return {k: v for k, v in class_submissions().items() if k in STUDENTS}


def _grade(course: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    env = {**env, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{env.get('PATH', '')}"}
    run = subprocess.run(
        [sys.executable, str(course / "scripts" / "grade_class.py"), CHAPTER, *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    print(run.stdout[-4000:], run.stderr[-2000:])
    return run


def _auto_scores(course: Path) -> dict:
    """Aluno -> pontos automáticos gravados (None: nenhuma nota automática gravada)."""
    from nbgrader.api import Gradebook, MissingEntry

    out = {}
    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        for student in STUDENTS:
            try:
                sub = gb.find_submission(CHAPTER, student)
            except MissingEntry:
                out[student] = None
                continue
            autos = [g.auto_score for nb in sub.notebooks for g in nb.grades if g.cell_type == "code"]
            out[student] = None if all(a is None for a in autos) else sum(a or 0 for a in autos)
    return out


def _env_without_course_path() -> dict:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _package_seen_by(env: dict, cwd: Path) -> Path | None:
    run = subprocess.run(
        [sys.executable, "-c", "import os, transformer_course as t; print(os.path.realpath(t.__file__))"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Path(run.stdout.strip()).parent if run.returncode == 0 else None


# ====================================================================== o ambiente de outra pasta


@pytest.mark.parametrize("install", ["editavel", "comum"])
def test_copy_graded_with_an_environment_installed_from_another_folder(tmp_path, install):
    course = tmp_path / "curso"
    subs = _subs()
    make_class(course, subs)
    if install == "editavel":
        # A cópia traz o próprio pacote; o ambiente (a instalação editável do .venv) aponta para
        # outra pasta, que o isolamento não monta.
        shutil.copytree(
            ROOT / "transformer_course",
            course / "transformer_course",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        env = _env_without_course_path()
        seen = _package_seen_by(env, tmp_path)
        if seen is None:
            pytest.skip("o ambiente Python não tem o curso instalado (instalação editável): nada a comparar")
        assert not seen.is_relative_to(course), seen
    else:
        # Instalação comum: o pacote copiado para uma pasta de instalação, fora de qualquer curso; a
        # cópia do curso não traz pacote nenhum.
        site = tmp_path / "instalado"
        shutil.copytree(
            ROOT / "transformer_course",
            site / "transformer_course",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        env = {**_env_without_course_path(), "PYTHONPATH": str(site)}
        assert _package_seen_by(env, tmp_path) == site / "transformer_course"
    run = _grade(course, env, "--workers=1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "falha do CORRETOR" not in run.stdout
    scores = _auto_scores(course)
    assert scores == {s: pytest.approx(subs[s][1]) for s in STUDENTS}, run.stdout
    assert (course / "grading" / "notas.csv").exists()


# ====================================================================== o ambiente quebrado


def _break_package(course: Path) -> str:
    """O pacote que o kernel monta (o do cache da correção) passa a falhar ao ser importado."""
    package = answer_key.grading_package(CHAPTER, course / "grading" / ".pacote-da-correcao", course)
    init = package / "__init__.py"
    init.write_text(init.read_text() + '\nraise ImportError("pacote quebrado de propósito pelo teste")\n')
    return "pacote quebrado de propósito pelo teste"


def _disable_sandbox(course: Path) -> str:
    """O isolamento desligado na configuração, sem a autorização para corrigir sem ele."""
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write("\nc.SandboxedKernelManager.confine = False\n")
    return "o kernel não partiu (SandboxUnavailable"


def _undo_sandbox(course: Path) -> None:
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text().replace("\nc.SandboxedKernelManager.confine = False\n", "\n"))


@pytest.mark.parametrize(
    ("breakage", "undo"),
    [
        (_break_package, lambda course: shutil.rmtree(course / "grading" / ".pacote-da-correcao")),
        (_disable_sandbox, _undo_sandbox),
    ],
    ids=["pacote_nao_importa", "isolamento_desligado"],
)
def test_broken_environment_stops_the_class_without_a_zero(tmp_path, breakage, undo):
    course = tmp_path / "curso"
    subs = _subs()
    make_class(course, subs)
    env = {k: v for k, v in os.environ.items() if k != "TRANSFORMER_COURSE_UNCONFINED"}
    why = breakage(course)
    run = _grade(course, env, "--workers=1")
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "Correção interrompida por uma falha do CORRETOR, não das entregas" in out, out
    assert why in out, out
    assert "NÃO foi exportado" in out, out
    assert not (course / "grading" / "notas.csv").exists()
    assert _auto_scores(course) == {s: None for s in STUDENTS}, "uma falha do corretor gravou nota"
    assert not list((course / "grading" / "feedback").glob(f"*/{CHAPTER}/*.html"))
    for student in STUDENTS:  # nenhum 0 no quadro: as entregas não corrigidas são listadas
        assert f"{student} / {CHAPTER}" in out

    # Ambiente consertado: a mesma turma, o mesmo comando, as notas certas.
    undo(course)
    again = _grade(course, env, "--workers=1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert _auto_scores(course) == {s: pytest.approx(subs[s][1]) for s in STUDENTS}, again.stdout


def test_kernel_importing_another_copy_is_a_grader_fault(tmp_path):
    """Sem isolamento (autorizado), o kernel importa o curso do ambiente, não o do corretor: a
    impressão digital não bate e nada é gravado."""
    course = tmp_path / "curso"
    make_class(course, _subs())
    shutil.copytree(
        ROOT / "transformer_course",
        course / "transformer_course",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    harness = course / "transformer_course" / "harness.py"
    harness.write_text(harness.read_text() + "\n# esta cópia do curso difere da instalada no ambiente\n")
    env = {**_env_without_course_path(), "TRANSFORMER_COURSE_UNCONFINED": "1"}
    seen = _package_seen_by(env, tmp_path)
    if seen is None:
        pytest.skip("o ambiente Python não tem o curso instalado: não há outra cópia para o kernel importar")
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write("\nc.SandboxedKernelManager.confine = False\n")
    run = _grade(course, env, "--workers=1", "--sem-isolamento")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "não é o do corretor: impressão digital" in run.stdout, run.stdout
    assert _auto_scores(course) == {s: None for s in STUDENTS}
    assert not (course / "grading" / "notas.csv").exists()


# ====================================================================== a checagem prévia, em dados


def test_preflight_problem_names_the_cause():
    digest = package_digest(str(answer_key.package_root()))
    ok = {"cwd": "/corr/ana", "root": "/opt/transformers-do-zero/transformer_course", "digest": digest}
    mount = "/opt/transformers-do-zero/transformer_course"
    assert preflight_problem(ok, mount, digest) is None
    assert preflight_problem(ok, None, digest) is None
    assert "não respondeu" in preflight_problem(None, mount, digest)
    other = {**ok, "root": "/outra/copia/transformer_course"}
    assert "não o que o corretor montou" in preflight_problem(other, mount, digest)
    assert "impressão digital" in preflight_problem({**ok, "digest": "0" * 64}, mount, digest)
    broken = {
        "cwd": "/corr/ana",
        "error": "ModuleNotFoundError: No module named 'transformer_course'",
        "shadow": [],
    }
    assert "não importa o pacote do curso (ModuleNotFoundError" in preflight_problem(broken, mount, digest)
    # O que a própria entrega traz na pasta dela é escolha do aluno, não falha do corretor.
    assert preflight_problem({**broken, "shadow": ["torch.py"]}, mount, digest) is None
    own = {**ok, "root": "/corr/ana/transformer_course", "digest": "1" * 64}
    assert preflight_problem(own, mount, digest) is None
