"""Comum a todos no hub: as preferências do JupyterLab na pasta pessoal de cada um, em pt-BR.

O ambiente do curso guarda as preferências numa pasta do próprio ambiente (bom para ``make lab``,
um usuário só); no hub cada pessoa tem as suas, em ``~/.jupyter/lab/user-settings``, que começam
com o idioma pt_BR (quem já escolheu outro idioma fica com a escolha).
"""

import json
import os

c = get_config()  # noqa: F821 - definido pelo Jupyter ao carregar este arquivo

_SETTINGS = os.path.join(os.path.expanduser("~"), ".jupyter", "lab", "user-settings")
_LOCALE = os.path.join(_SETTINGS, "@jupyterlab", "translation-extension", "plugin.jupyterlab-settings")
if not os.path.exists(_LOCALE):
    os.makedirs(os.path.dirname(_LOCALE), exist_ok=True)
    with open(_LOCALE, "w") as fh:
        json.dump({"locale": "pt_BR"}, fh)
c.LabApp.user_settings_dir = _SETTINGS
c.LabApp.workspaces_dir = os.path.join(os.path.expanduser("~"), ".jupyter", "lab", "workspaces")
