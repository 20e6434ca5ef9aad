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

__all__ = [
    "StudentKernel",
    "local_and_remote",
    "local_and_remote_code",
    "sent_tensors",
    "solution_code",
    "without_line",
]


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


def local_and_remote(
    kernel: StudentKernel, chapter: str, exercise_name: str, answer, answer_name: str, offset: int
):
    """O veredito de cada célula de um exercício para a mesma resposta, dado aqui e pelo juiz remoto.

    ``answer`` é a resposta definida neste processo; ``answer_name``, o nome com que o mesmo código
    está definido no ``kernel`` (ligado ao nome do exercício antes de corrigir). Devolve
    ``{grade_id: (mensagem local ou None se passou, Verdict remoto)}``; as células ocultas com o
    deslocamento de sementes ``offset``, nos dois lados.
    """
    from transformer_course.exercises import all_exercises
    from transformer_course.feedback import CheckFailure
    from transformer_course.instructor.judge import judge_cell
    from transformer_course.probe import LocalStudent, judging

    exercise = next(ex for ex in all_exercises() if ex.chapter == chapter and ex.name == exercise_name)
    kernel.run(f"{exercise_name} = {answer_name}")
    out = {}
    for cell in exercise.cells:
        check = exercise.hidden if cell.hidden else exercise.visible
        local = None
        with judging(LocalStudent(), offset if cell.hidden else 0, []):
            try:
                check(answer)
            except CheckFailure as failure:
                local = str(failure)
        out[cell.grade_id] = (local, judge_cell(chapter, cell.grade_id, kernel.student(), offset))
    return out


def without_line(message: str) -> str:
    """A mensagem sem a linha do código do aluno (no lado local, o código vem de uma string sem fonte)."""
    import re

    return re.sub(r" \(linha \d+: `[^`]*`\)", "", message)


def local_and_remote_code(
    kernel: StudentKernel, chapter: str, name: str, code: str, offset: int = 777
) -> list:
    """A resposta ``code`` (que define ``name``) julgada nos dois lados, célula a célula.

    Localmente, como o aluno a vê ao estudar (:class:`LocalStudent`); no juiz, com a resposta definida
    no ``kernel`` e :func:`judge_cell`. As células ocultas usam o mesmo deslocamento ``offset`` dos dois
    lados. Devolve ``[(célula, mensagem local ou None se passou, veredito remoto), ...]``.
    """
    import math

    import torch
    from torch import nn
    from torch.nn import functional as F

    from transformer_course.exercises import all_exercises
    from transformer_course.feedback import CheckFailure
    from transformer_course.instructor.judge import judge_cell
    from transformer_course.probe import LocalStudent, judging

    exercise = next(ex for ex in all_exercises() if ex.chapter == chapter and ex.name == name)
    namespace = {"torch": torch, "math": math, "nn": nn, "F": F}
    exec(code, namespace)  # noqa: S102 - a resposta errada, local, para comparar
    local = {}
    for cell in exercise.cells:
        check = exercise.hidden if cell.hidden else exercise.visible
        with judging(LocalStudent(), offset if cell.hidden else 0, []):
            try:
                check(namespace[name])
                local[cell.grade_id] = None
            except CheckFailure as failure:
                local[cell.grade_id] = str(failure)
    kernel.run(code)
    return [
        (cell, local[cell.grade_id], judge_cell(chapter, cell.grade_id, kernel.student(), offset))
        for cell in exercise.cells
    ]


def sent_tensors(check, answer, offset: int) -> list[str]:
    """Os tensores (``.npy`` em base64) que ``check`` mandou ao lado do aluno, julgando com ``offset``.

    Serve para conferir que os casos ocultos mudam com o deslocamento de cada entrega (e os visíveis,
    não): a verificação roda localmente, mas cada pedido é registrado como sai para o kernel.
    """
    from transformer_course.probe import LocalStudent, judging

    class Recording(LocalStudent):
        def __init__(self):
            super().__init__()
            self.sent: list[str] = []

        def send(self, message: dict) -> dict:
            self.sent += [t["data"] or "" for t in message.get("tensors", [])]
            return super().send(message)

    student = Recording()
    with judging(student, offset, []):
        check(answer)
    return student.sent
