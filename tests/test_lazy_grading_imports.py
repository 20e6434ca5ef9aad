"""No kernel da correção, ``plots`` e ``widgets`` respondem com avisos sem importar o matplotlib.

Quais nomes desenham (``-> Figure``) e quais são widgets (``@student_only``) é lido do código-fonte;
estes testes conferem essa leitura contra os objetos de verdade, e o caminho sem importação num
processo à parte (um ``InteractiveShell`` faz as vezes do kernel).
"""

from __future__ import annotations

import inspect
import subprocess
import sys

from transformer_course import plots, widgets
from transformer_course.runtime import source_exports


def test_source_reading_matches_the_real_plot_functions():
    exports = source_exports(plots.__path__, plots._MODULES)
    assert set(exports) | {"FigureNotDrawn"} == set(plots.__all__)
    for name, (_, node) in exports.items():
        real = getattr(plots, name)
        draws = plots._draws(node)
        # as figuras são embrulhadas pelo aviso da correção (functools.wraps guarda o original)
        assert draws == hasattr(real, "__wrapped__"), name
        if draws:
            assert inspect.signature(real.__wrapped__).return_annotation in ("Figure",), name


def test_source_reading_matches_the_real_widgets():
    exports = source_exports(widgets.__path__, widgets._MODULES)
    assert set(exports) == set(widgets.__all__)
    found = {name for name, (_, node) in exports.items() if widgets._student_only(node)}
    assert found == {name for name in widgets.__all__ if name.endswith("_widget")}
    for name in exports:
        assert (name in found) == hasattr(getattr(widgets, name), "__wrapped__"), name


LAZY = r"""
import os, sys
os.environ["NBGRADER_EXECUTION"] = "autograde"
from IPython.core.interactiveshell import InteractiveShell
InteractiveShell.instance()
from transformer_course import plots
from transformer_course.widgets import mask_widget, positional_widget
assert "matplotlib" not in sys.modules, "o matplotlib foi importado"
figure = plots.attention_heatmap("qualquer", coisa=1)
assert isinstance(figure, plots.FigureNotDrawn) and figure.name == "attention_heatmap", figure
widget = positional_widget(seed=3)
assert type(widget).__name__ == "NotBuiltWhenGrading" and widget.name == "positional_widget", widget
assert "matplotlib" not in sys.modules
try:
    plots.nao_existe
except AttributeError:
    pass
else:
    raise AssertionError("um nome inexistente não deu AttributeError")
assert len(plots.PALETTE) >= 6 and "matplotlib" in sys.modules  # um nome que não desenha: tudo
assert isinstance(plots.attention_heatmap(None), plots.FigureNotDrawn)
from transformer_course.widgets import DK_OPTIONS
print("ok")
"""


def test_grading_kernel_path_imports_no_matplotlib():
    run = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]
