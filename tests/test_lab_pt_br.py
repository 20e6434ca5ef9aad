"""O JupyterLab do curso em português onde o pacote de idioma pt-BR não chega.

O pacote ``jupyterlab-language-pack-pt-BR`` 4.5.post3 (o mais novo) não traduz centenas de frases do
JupyterLab 4.6 — entre elas o cabeçalho "Modified" do navegador de arquivos —, e a extensão do
nbgrader escreve "Validate" e os textos do diálogo sem o tradutor do JupyterLab. ``scripts/configure_lab.py``
completa o pacote instalado com ``scripts/lab/jupyterlab_pt_BR_complemento.json`` e instala a
extensão ``scripts/lab/transformer-course-nbgrader-pt-br``. O teste no navegador
(``tests/test_browser.py::test_validar_e_navegador_de_arquivos_em_portugues``) mostra o resultado na
tela; aqui, as peças.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import configure_lab  # noqa: E402

SUPPLEMENT = configure_lab.LANGUAGE_PACK_SUPPLEMENT
EXTENSION = configure_lab.NBGRADER_PT_BR


def _supplement() -> dict:
    return {k: v for k, v in json.loads(SUPPLEMENT.read_text(encoding="utf-8")).items() if k}


def _lab_strings() -> set[str]:
    """As frases que o JupyterLab instalado passa ao tradutor (``trans.__("...")``)."""
    static = Path(sys.prefix) / "share" / "jupyter" / "lab" / "static"
    found = set()
    for path in static.glob("*.js"):
        text = path.read_text(encoding="utf-8", errors="replace")
        found |= {m.group(1) for m in re.finditer(r'\.__\("((?:[^"\\]|\\.)*)"', text)}
    return found


def test_every_supplement_phrase_is_a_jupyterlab_phrase_in_portuguese():
    used = _lab_strings()
    supplement = _supplement()
    assert "Modified" in supplement and len(supplement) >= 40
    unused = [key for key in supplement if key not in used]
    assert not unused, f"frases que o JupyterLab instalado não usa (erro de digitação?): {unused}"
    for key, value in supplement.items():
        assert isinstance(value, list) and value and value[0] and value[0] != key or key in (
            "Notebook", "Console", "Terminal", "Kernel: %1"
        ), (key, value)  # fmt: skip
        assert key.count("%1") == value[0].count("%1") and key.count("%2") == value[0].count("%2"), key


def test_complete_language_pack_adds_only_what_is_missing(tmp_path):
    pack = tmp_path / "jupyterlab.json"
    pack.write_text(
        json.dumps({"": {"domain": "jupyterlab"}, "Modified": ["já traduzido"], "Name": ["Nome"]})
    )
    added = configure_lab.complete_language_pack(pack)
    data = json.loads(pack.read_text(encoding="utf-8"))
    assert "Modified" not in added and data["Modified"] == ["já traduzido"], "uma tradução foi trocada"
    assert "Size" in added and data["Size"] == ["Tamanho"] and data["Name"] == ["Nome"]
    assert data[""] == {"domain": "jupyterlab"}
    assert configure_lab.complete_language_pack(pack) == [], "rodar de novo acrescentou frases"


def test_the_course_jupyterlab_serves_the_supplemented_pack():
    """O que o servidor do JupyterLab manda ao navegador (a mesma função do handler de traduções)."""
    from jupyterlab_server.translation_utils import get_language_pack

    data, message = get_language_pack("pt_BR")
    assert not message.strip(), message
    lab = data["jupyterlab"]
    missing = {k: v for k, v in _supplement().items() if lab.get(k) is None}
    assert not missing, (
        f"rode `python scripts/configure_lab.py` (ou `make venv`): faltam {sorted(missing)[:5]}"
    )
    assert lab["Modified"] == ["Modificado"] and lab["Idle"] == ["Ocioso"]


def test_nbgrader_extension_is_installed_and_valid_javascript():
    package = json.loads((EXTENSION / "package.json").read_text())
    assert package["jupyterlab"]["_build"] == {"load": "static/remoteEntry.js", "extension": "./extension"}
    installed = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / package["name"]
    assert (installed / "static" / "remoteEntry.js").read_bytes() == (
        EXTENSION / "static" / "remoteEntry.js"
    ).read_bytes(), "rode `python scripts/configure_lab.py` (ou `make venv`)"
    source = (EXTENSION / "static" / "remoteEntry.js").read_text(encoding="utf-8")
    # Os textos que ela traduz são os que o nbgrader instalado escreve na página.
    nbgrader_js = "".join(
        p.read_text(encoding="utf-8", errors="replace")
        for p in (Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader").rglob(
            "*.js"
        )
    )
    for english in re.findall(r"^\s*'([^']+)':", source, re.M):
        assert english in nbgrader_js, f"o nbgrader não escreve mais {english!r}"
    if shutil.which("node") is None:
        pytest.skip("sem o Node.js não dá para conferir a sintaxe do JavaScript (apt-get install nodejs)")
    run = subprocess.run(
        ["node", "--check", str(EXTENSION / "static" / "remoteEntry.js")], capture_output=True
    )
    assert run.returncode == 0, run.stderr.decode()
