"""As falhas do corretor: o que dá errado do lado do professor nunca vira o 0 de um aluno.

Uma entrega só recebe nota quando o kernel confinado partiu, importou o pacote do curso que o
corretor montou (o mesmo, conferido pela impressão digital dos arquivos) e respondeu. Quando não
(o kernel não parte, o isolamento sumiu, o ambiente não importa o curso, o pacote do kernel é
outro), a correção daquela entrega para com :class:`GraderFault`, e:

- nada é gravado para ela (nem nota automática, nem versão corrigida, nem devolutiva);
- ``make grade-class`` para a turma cedo, com o motivo em pt-BR e código de saída 1, sem exportar
  ``grading/notas.csv``; o serviço de correção marca a entrega como "não corrigida" com o motivo;
- a marca em ``grading/.em_andamento/`` fica: a próxima execução, com o ambiente consertado,
  corrige a entrega do zero.

O nbgrader engole as exceções de cada entrega (ele só registra o *traceback* no log): o motivo
atravessa o log entre :data:`MARK` e :data:`END`, e :func:`fault_in_log` o recupera.
"""

from __future__ import annotations

import re

__all__ = ["END", "MARK", "GraderFault", "fault_in_log"]

MARK = "[FALHA DO CORRETOR] "
END = " [/FALHA DO CORRETOR]"


class GraderFault(RuntimeError):
    """Uma falha do corretor, não da entrega: nada é gravado para a entrega (motivo em pt-BR)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(f"{MARK}{reason}{END}")


def fault_in_log(text: str) -> str | None:
    """O motivo de uma :class:`GraderFault` registrada no log do nbgrader (ou ``None``)."""
    found = re.search(re.escape(MARK) + r"(.*?)" + re.escape(END), text, re.S)
    return found.group(1).strip() if found else None
