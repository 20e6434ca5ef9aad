"""Números como um leitor brasileiro os lê: vírgula decimal, ponto de milhar.

Tudo o que o aluno lê — textos impressos pelos notebooks, rótulos de figuras, widgets, mensagens
da correção, devolutivas — passa por aqui, para o formato ser um só no curso inteiro::

    >>> br(1.9871, ".3f")
    '1,987'
    >>> br(1048576, ",d")
    '1.048.576'
    >>> br(4e-07)
    '4 × 10⁻⁷'
    >>> br(0.6)
    '0,6'

Módulo sem dependências (nem PyTorch, nem matplotlib): o kernel da correção, os gráficos e os
scripts do professor o importam.
"""

from __future__ import annotations

import math
import re

__all__ = ["br", "br_formatter", "br_percent"]

_SUPERSCRIPT = str.maketrans("0123456789-+", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺")
_EXPONENT = re.compile(r"^(?P<mantissa>[-+]?[\d.,]+)e(?P<exp>[-+]\d+)$")


def _swap(text: str) -> str:
    """Troca os separadores do Python ("1,234.5") pelos brasileiros ("1.234,5")."""
    return text.translate(str.maketrans({",": ".", ".": ","}))


def br(x: float | int, spec: str = ".6g", *, scientific: str = "×10") -> str:
    """``x`` formatado com a especificação ``spec`` do Python, no formato brasileiro.

    Args:
        x: o número (``int``, ``float``, um escalar do NumPy ou um tensor de um elemento).
        spec: a especificação do ``format`` do Python (``".3f"``, ``",d"``, ``".2%"``, ``".3g"``).
            Com ``,`` na especificação, o milhar sai com ponto ("1.048.576").
        scientific: como escrever a notação científica: ``"×10"`` dá "4 × 10⁻⁷" (para ler);
            ``"e"`` dá "4e-07" com vírgula na mantissa ("1,5e-05", para tabelas estreitas).
    """
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("∞" if x > 0 else "-∞")
    text = format(x, spec)
    match = _EXPONENT.match(text)
    if match and scientific == "×10":
        mantissa, exp = match["mantissa"], int(match["exp"])
        power = "10" + str(exp).translate(_SUPERSCRIPT)
        return power if mantissa in ("1", "1.0") else f"{_swap(mantissa)} × {power}"
    return _swap(text)


def br_percent(fraction: float, digits: int = 1) -> str:
    """Uma fração como porcentagem em pt-BR: ``br_percent(0.1234)`` → ``'12,3%'``."""
    return f"{br(100 * float(fraction), f'.{digits}f')}%"


def br_formatter(spec: str = "g"):
    """Um ``FuncFormatter`` do matplotlib que escreve os rótulos dos eixos no formato brasileiro.

    Uso: ``ax.xaxis.set_major_formatter(br_formatter())`` (importa o matplotlib só aqui).
    """
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: br(value, spec))
