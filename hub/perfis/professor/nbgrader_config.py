"""Professor no hub: o nbgrader (formgrader, collect, autograde...) usa a cópia do curso na pasta pessoal.

O servidor do professor começa na pasta pessoal; o curso fica em ``~/transformers-do-zero``
(``hub/preparar.py`` o copia). Aqui carregamos o ``nbgrader_config.py`` do curso, o mesmo da raiz
do repositório, para que o formgrader ache ``source/``, o gradebook e as devolutivas.
"""

import os

c = get_config()  # noqa: F821 - definido pelo nbgrader ao carregar este arquivo

_COURSE = os.path.join(os.path.expanduser("~"), os.environ.get("TDZ_CURSO_DIR", "transformers-do-zero"))
if os.path.exists(os.path.join(_COURSE, "nbgrader_config.py")):
    load_subconfig(os.path.join(_COURSE, "nbgrader_config.py"))  # noqa: F821 - do traitlets
