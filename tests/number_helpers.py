"""Acha números escritos no formato inglês ("0.19", "1,234.5", "4e-07") num texto que o aluno lê.

O formato do curso é o brasileiro (``transformer_course.numbers``): vírgula decimal, ponto só como
separador de milhar ("1.048.576"), notação científica "4 × 10⁻⁷".
"""

from __future__ import annotations

import re

# Uma sequência de algarismos com pontos ou vírgulas no meio ("0.19", "1.048.576", "1,5").
_NUMBER = re.compile(r"\d[\d.,]*\d|\d")
# O ponto de milhar brasileiro: 1 a 3 algarismos (sem zero à esquerda) e grupos de três.
_THOUSANDS = re.compile(r"[1-9]\d{0,2}(?:\.\d{3})+(?:,\d+)?")
# Notação científica do Python ("4e-07", "1.5E+03").
_EXPONENT = re.compile(r"\d[eE][-+]?\d")
# A versão do PyTorch que a célula de preparação imprime não é um número para ler.
_VERSION = re.compile(r"PyTorch \S+")


def english_numbers(text: str) -> list[str]:
    """Os trechos de ``text`` com número no formato inglês (vazio quando está tudo em pt-BR)."""
    text = _VERSION.sub("PyTorch", text)
    found = [m.group() for m in _EXPONENT.finditer(text)]
    for match in _NUMBER.finditer(text):
        token = match.group()
        if "." in token and not _THOUSANDS.fullmatch(token):
            found.append(token)
    return found
