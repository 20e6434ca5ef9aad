"""O lado do kernel das verificações do capítulo 7: o modelo de brinquedo de ``generate`` e o questionário.

- :class:`ToyBigramModel`: um "modelo de linguagem" de logits conhecidos (uma tabela de bigramas)
  que a verificação de ``generate`` constrói do lado do aluno e passa à função dele. Guarda o maior
  contexto que recebeu, para a verificação perguntar depois (como dados);
- :func:`quiz_answers`: o valor da resposta do questionário (a função ``respostas_quiz`` chamada,
  ou o próprio dicionário), para voltar como dados.

Nada aqui sabe a resposta certa: o juiz monta a sua própria cópia do modelo, com a mesma tabela, e
compara os tokens devolvidos com o seu oráculo.
"""

from __future__ import annotations

import torch
from torch import nn

from .. import harness

__all__ = ["ToyBigramModel", "quiz_answers"]


class ToyBigramModel(nn.Module):
    """Modelo de brinquedo: os logits da posição t são ``table[ids[:, t]]``.

    Com ``max_len``, recusa contextos mais longos (como um GPT de verdade, cuja tabela
    de posições acaba em ``max_len``). ``longest_context`` guarda o maior contexto recebido.

    Formas:
        ids (B, T) -> logits (B, T, V)
    """

    def __init__(self, table: torch.Tensor, max_len: int | None = None):
        super().__init__()
        self.register_buffer("table", table.clone())
        if max_len is not None:
            self.max_len = max_len
        self.longest_context = 0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        T = ids.size(1)
        self.longest_context = max(self.longest_context, T)
        if hasattr(self, "max_len") and T > self.max_len:
            raise RuntimeError(f"contexto de {T} tokens, mas o modelo só enxerga max_len = {self.max_len}")
        return self.table[ids]  # (B, T) -> (B, T, V)


def quiz_answers(request: dict, namespace: dict, objects: harness.Objects) -> dict:
    """O valor da resposta do questionário: a função do aluno chamada (ou o valor, se não for função)."""
    try:
        answers = harness.resolve(request.get("target"), namespace, objects)
        value = answers() if callable(answers) else answers
    except Exception as exc:  # noqa: BLE001 - toda exceção do aluno vira dados
        return {"error": harness.error_data(exc)}
    return {"value": value}
