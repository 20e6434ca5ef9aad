"""Um kernel de verdade para os testes do juiz: a resposta do aluno roda nele, o juiz roda aqui.

``StudentKernel`` inicia um kernel IPython (sem o bubblewrap, que os testes de correção já
cobrem), executa nele o código de uma resposta e serve de transporte para
:class:`transformer_course.probe.RemoteStudent`: cada pedido da verificação vira uma célula no
kernel, e a resposta volta só como dados. Assim um teste confere, para cada exercício, que o juiz
remoto chega ao mesmo veredito que a verificação local (a que o aluno roda ao estudar).
"""

from __future__ import annotations

import queue
import time

from transformer_course.harness import MIME
from transformer_course.probe import RemoteStudent

__all__ = ["StudentKernel", "solution_code"]


class StudentKernel:
    """Um kernel IPython para as respostas de um teste (``with StudentKernel() as k: ...``)."""

    def __init__(self, timeout: float = 120.0):
        self.timeout = timeout
        self.km = self.kc = None

    def __enter__(self) -> StudentKernel:
        from jupyter_client.manager import start_new_kernel

        self.km, self.kc = start_new_kernel(kernel_name="python3", startup_timeout=300)
        self.run("import torch, math\nfrom torch import nn\nfrom torch.nn import functional as F")
        return self

    def __exit__(self, *exc) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def execute(self, code: str) -> list[dict]:
        """Executa ``code`` e devolve as mensagens de saída (iopub) dessa execução."""
        msg_id = self.kc.execute(code, store_history=False)
        outputs = []
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=max(deadline - time.monotonic(), 0.1))
            except queue.Empty:
                raise TimeoutError(f"o kernel não terminou em {self.timeout} s") from None
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status" and msg["content"]["execution_state"] == "idle":
                return outputs
            if kind in ("display_data", "execute_result", "stream", "error"):
                outputs.append({"type": kind, **msg["content"]})

    def run(self, code: str) -> None:
        """Executa ``code`` e levanta se ele der erro (para definir respostas no kernel)."""
        errors = [o for o in self.execute(code) if o["type"] == "error"]
        if errors:
            raise RuntimeError(f"{errors[0]['ename']}: {errors[0]['evalue']}")

    def transport(self, code: str) -> str | None:
        found = None
        for output in self.execute(code):
            if output["type"] == "display_data" and MIME in output.get("data", {}):
                found = output["data"][MIME]
        return found

    def student(self) -> RemoteStudent:
        return RemoteStudent(self.transport)


def solution_code(chapter: str, names: set[str] | None = None) -> str:
    """O código das células de solução (gabarito) de um capítulo, em ordem, pronto para executar."""
    import nbformat
    from conftest import ROOT

    nb = nbformat.read(ROOT / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)
    parts = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution") and not meta.get("grade"):
            if names is None or any(
                f"def {n}(" in cell.source or f"class {n}(" in cell.source for n in names
            ):
                parts.append(cell.source)
    return "\n\n".join(parts)
