"""O projeto em si: dependências coerentes, Makefile, README e a pasta do aluno intocável."""

from __future__ import annotations

import re
import subprocess
import sys

import tomllib
import yaml
from conftest import CHAPTERS, ROOT


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_agrees_with_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = {_name(d) for d in env["dependencies"] if isinstance(d, str)}
    pip = {
        _name(d)
        for block in env["dependencies"]
        if isinstance(block, dict)
        for d in block["pip"]
        if not d.startswith("-e")
    }
    aliases = {"pytorch-cpu": "torch"}
    found = {aliases.get(n, n) for n in conda | pip} - {"python", "pip"}
    assert found == wanted, f"só no environment.yml: {found - wanted}; só no pyproject: {wanted - found}"


def test_constraints_pin_cpu_torch_and_cover_every_dependency():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[_name(name)] = version
    assert pins["torch"] == "2.13.0"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = {_name(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]}
    assert needed <= set(pins), f"sem versão fixa: {needed - set(pins)}"


def test_readme_starts_with_the_two_commands_and_lists_every_chapter():
    readme = (ROOT / "README.md").read_text()
    first = readme[: readme.index("## ", readme.index("make test"))]
    assert "make lab" in first and "make test" in first
    for chapter in CHAPTERS:
        assert chapter in readme, f"o README não menciona {chapter}"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M)


def test_makefile_targets_exist():
    out = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "lab", "test", "assignments", "bench"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr


def test_workspace_never_overwrites(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from make_workspace import make_workspace

    released = sorted(p.name for p in (ROOT / "release").iterdir() if p.is_dir())
    target = tmp_path / "aluno"
    first = make_workspace(target)
    assert {p.parent.name for p in first} == set(released)
    mine = target / released[0] / f"{released[0]}.ipynb"
    mine.write_text("o que o aluno escreveu")
    (target / released[-1] / f"{released[-1]}.ipynb").unlink()
    second = make_workspace(target)
    assert mine.read_text() == "o que o aluno escreveu"
    assert [p.parent.name for p in second] == [released[-1]]


def test_glossary_exists_with_core_terms():
    glossary = (ROOT / "GLOSSARIO.md").read_text()
    for term in ("autoatenção", "consulta", "chave", "valor", "cabeça", "máscara"):
        assert term in glossary.lower()


def test_gitignore_keeps_student_and_grading_files_out():
    ignored = subprocess.run(
        [
            "git",
            "check-ignore",
            "aluno/x.ipynb",
            "grading/gradebook.db",
            "grading/submitted/a/b.ipynb",
            ".venv/bin/python",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert len(ignored) == 4, ignored
