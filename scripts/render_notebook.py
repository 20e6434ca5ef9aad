"""Executa um notebook e salva suas figuras em PNG, para olhar como um aluno olharia.

Uso: python scripts/render_notebook.py source/02_atencao/02_atencao.ipynb [pasta]
     (padrão: artifacts/render/<nome>/; imprime saídas de texto e erros por célula)
"""

from __future__ import annotations

import base64
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def main(path: str, out: str | None = None) -> int:
    nb = nbformat.read(path, as_version=4)
    target = Path(out) if out else ROOT / "artifacts" / "render" / Path(path).stem
    target.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(Path(path).parent)}},
    ).execute()
    print(f"executado em {time.perf_counter() - start:.1f} s")
    errors = 0
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            kind = output.output_type
            if kind == "error":
                errors += 1
                print(f"[{i}] ERRO {output.ename}: {output.evalue[:500]}")
            elif kind == "stream":
                print(f"[{i}] {output.name}: {output.text[:500].rstrip()}")
            elif "image/png" in output.get("data", {}):
                png = target / f"cell{i:03d}.png"
                png.write_bytes(base64.b64decode(output.data["image/png"]))
                print(f"[{i}] figura -> {png}")
            elif "text/plain" in output.get("data", {}):
                print(f"[{i}] {output.data['text/plain'][:300]}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
