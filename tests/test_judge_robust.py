"""O juiz não quebra com o que o kernel devolve: lixo vira falha do aluno, nunca erro do juiz.

Um kernel adulterado (o harness trocado, um gancho de importação, um tensor que mente) pode
devolver qualquer coisa que caiba no esquema. Aqui, um "aluno" que responde a todo pedido com um
valor sorteado (textos, números, tensores de forma e dtype quaisquer, tuplas, dicionários,
referências, descrições, erros inventados) passa por todas as verificações dos capítulos já
convertidos: cada uma termina em ``CheckFailure`` (0 pontos, com mensagem), nunca noutra exceção
(que pararia a correção daquela entrega como falha do juiz).
"""

from __future__ import annotations

import random

import pytest
import torch
from test_judge import CONVERTED, _source_kwargs

from transformer_course import wire
from transformer_course.exercises import all_exercises
from transformer_course.feedback import CheckFailure
from transformer_course.probe import Remote, _Base, judging

DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool, torch.float16]


class JunkStudent(_Base):
    """Responde a cada pedido com um valor sorteado (semente fixa: o teste se repete igual)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.requests = 0

    def tensor(self):
        shape = [self.rng.randint(0, 4) for _ in range(self.rng.randint(0, 4))]
        dtype = self.rng.choice(DTYPES)
        t = torch.randn(shape).mul(10) if dtype.is_floating_point else torch.randint(0, 3, shape)
        if self.rng.random() < 0.2 and t.is_floating_point() and t.numel():
            t.view(-1)[0] = float("nan")
        return t.to(dtype)

    def value(self, depth=0):
        kind = self.rng.randrange(10)
        if kind == 0:
            return None
        if kind == 1:
            return self.rng.choice([0, 1, -3, 2.5, float("nan"), True, 10**6])
        if kind == 2:
            return self.rng.choice(["", "ok", "✔ passou", "encoder"])
        if kind in (3, 4, 5):
            return self.tensor()
        if kind == 6 and depth < 3:
            return tuple(self.value(depth + 1) for _ in range(self.rng.randint(0, 3)))
        if kind == 7 and depth < 3:
            keys = ["loss", "accuracy", "a", "b", 0]
            return {self.rng.choice(keys): self.value(depth + 1) for _ in range(3)}
        if kind == 8:
            return wire.Handle(self.rng.randint(1, 5), "Coisa", ("Coisa", "torch.nn.modules.module.Module"))
        return wire.Describe("numpy.ndarray", "array([1])", (2, 2), "float64")

    def send(self, message):
        self.requests += 1
        extra = {}
        if self.rng.random() < 0.15:
            extra["error"] = {
                "type": self.rng.choice(["ValueError", "RuntimeError", "NotImplementedError"]),
                "mro": ["ValueError", "Exception"],
                "message": self.rng.choice(["", "falhou"]),
                "line": "",
                "stub": self.rng.random() < 0.3,
            }
        for name in ("after", "grads"):
            if self.rng.random() < 0.3:
                extra[name] = [self.value(2) for _ in range(self.rng.randint(0, 4))]
        if self.rng.random() < 0.2:
            extra["captured"] = {"W_Q": self.tensor(), "merged": self.value(2)}
        if self.rng.random() < 0.2:
            extra["param_grads"] = {"W_Q.weight": self.tensor()}
        if self.rng.random() < 0.2:
            extra["forbidden"] = self.rng.choice([[], ["torch.nn.functional.scaled_dot_product_attention"]])
        value = self.value()
        if message.get("value", {}).get("items") and self.rng.random() < 0.5:
            value = {"type": "Coisa", "mro": [], "params": {}, "modules": {}, "attrs": {}, "n_params": 3}
        response = wire.encode(value, extra=extra)
        response["fields"] = sorted(extra)
        return response


CELLS = [
    (exercise, cell)
    for exercise in all_exercises()
    if exercise.chapter in CONVERTED
    for cell in exercise.cells
]


@pytest.mark.parametrize(("exercise", "cell"), CELLS, ids=[f"{e.chapter}:{c.grade_id}" for e, c in CELLS])
def test_junk_from_the_kernel_is_a_failure_not_a_crash(exercise, cell):
    check = exercise.hidden if cell.hidden else exercise.visible
    kwargs = _source_kwargs(exercise.chapter).get(cell.grade_id, {})  # o questionário: a resposta certa
    for seed in range(40):
        student = JunkStudent(seed)
        with judging(student, 1234, []):
            try:
                check(Remote(exercise.name), **kwargs)
            except CheckFailure:
                continue
            except Exception as exc:  # noqa: BLE001 - o que o teste procura
                pytest.fail(f"semente {seed}: o juiz quebrou com {type(exc).__name__}: {exc}")
        # Passar com lixo só é aceitável se nenhum pedido foi feito (não acontece).
        assert student.requests == 0, f"semente {seed}: lixo passou na verificação de {cell.grade_id}"
