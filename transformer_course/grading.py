"""Peças do nbgrader específicas do curso (usadas por ``nbgrader_config.py``)."""

from __future__ import annotations

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool


class ShortTracebacks(Preprocessor):
    """Na devolutiva, guarda só a mensagem final de cada erro (onde está o texto em pt-BR).

    O traceback completo mostraria o código das verificações (e dos testes ocultos),
    que não ajuda o aluno.
    """

    enabled = Bool(True, help="Os preprocessadores do nbconvert vêm desligados por padrão.").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output['ename']}: {output['evalue']}"]
        return cell, resources
