"""Configura o JupyterLab do ambiente do curso: interface em português do Brasil.

Escreve ``overrides.json`` em ``<venv>/share/jupyter/lab/settings/`` (o lugar
que o JupyterLab lê para os padrões de uma instalação). O aluno ainda pode trocar
o idioma pelo menu Configurações > Idioma.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OVERRIDES = {"@jupyterlab/translation-extension:plugin": {"locale": "pt_BR"}}


def main() -> None:
    settings = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    path = settings / "overrides.json"
    current = json.loads(path.read_text()) if path.exists() else {}
    current.update(OVERRIDES)
    path.write_text(json.dumps(current, indent=2, ensure_ascii=False) + "\n")
    print(f"JupyterLab em pt-BR: {path}")


if __name__ == "__main__":
    main()
