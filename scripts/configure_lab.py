"""Configura o JupyterLab do ambiente do curso para o aluno.

- Interface em português do Brasil. Duas peças, porque o JupyterLab traduz em dois lugares: o padrão
  da instalação (``<venv>/share/jupyter/lab/settings/overrides.json``) vale para o navegador, mas o
  servidor, que traduz os menus, só olha as preferências *do usuário* (sem elas, usa o idioma do
  sistema). Por isso o JupyterLab do curso guarda as preferências do aluno numa pasta própria,
  ``<venv>/share/jupyter/lab/user-settings`` (``LabApp.user_settings_dir``), que começa com o idioma
  pt_BR. O aluno ainda pode trocar o idioma em Configurações > Idioma; rodar este script de novo
  não desfaz a escolha. O ``~/.jupyter`` do aluno não é tocado.
- Sem avisos de notícias/atualizações do Jupyter (o curso funciona sem internet).
- Do nbgrader, só a ferramenta do aluno: o botão "Validate" na barra do notebook. Os painéis do
  professor (formgrader, "Create Assignment", listas de cursos e de tarefas, que precisam de um
  *exchange*) e o menu "Nbgrader" ficam desligados, no JupyterLab
  (``<venv>/etc/jupyter/labconfig/page_config.json``) e no servidor
  (``<venv>/etc/jupyter/jupyter_server_config.json``).

Uso:
    python scripts/configure_lab.py              # aluno (o que ``make venv``/``make lab`` roda)
    python scripts/configure_lab.py --professor  # religa as ferramentas do professor

Rode com o Python do ambiente (``.venv/bin/python``): os arquivos vão para ``sys.prefix``.
Só as chaves abaixo são tocadas; o resto desses arquivos fica como está.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

LOCALE_PLUGIN = Path("@jupyterlab") / "translation-extension" / "plugin.jupyterlab-settings"
# O pacote de idioma pt-BR (4.5.post3, o mais novo) não traduz os nomes dos menus principais, que
# vêm dos esquemas de configuração; os rótulos abaixo completam a tradução.
MENU_LABELS = {
    "jp-mainmenu-file": "Arquivo",
    "jp-mainmenu-edit": "Editar",
    "jp-mainmenu-view": "Visualizar",
    "jp-mainmenu-run": "Executar",
    "jp-mainmenu-kernel": "Kernel",
    "jp-mainmenu-tabs": "Abas",
    "jp-mainmenu-settings": "Configurações",
    "jp-mainmenu-help": "Ajuda",
}
LAB_OVERRIDES = {
    "@jupyterlab/translation-extension:plugin": {"locale": "pt_BR"},
    "@jupyterlab/mainmenu-extension:plugin": {
        "menus": [{"id": menu, "label": label} for menu, label in MENU_LABELS.items()]
    },
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}
# Plugins do JupyterLab (``@jupyter/nbgrader``) que só servem ao professor.
INSTRUCTOR_PLUGINS = [
    "@jupyter/nbgrader:menu",
    "@jupyter/nbgrader:formgrader",
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:course-list",
    "@jupyter/nbgrader:assignment-list",
]
# Extensões de servidor correspondentes (a de validação, ``validate_assignment``, fica ligada).
INSTRUCTOR_SERVER_EXTENSIONS = [
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.course_list",
    "nbgrader.server_extensions.assignment_list",
]


def _update_json(path: Path, change) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    change(data)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def user_settings_dir(prefix: Path) -> Path:
    """A pasta de preferências do JupyterLab do curso (uma por ambiente virtual)."""
    return prefix / "share" / "jupyter" / "lab" / "user-settings"


def seed_user_settings(settings_dir: Path) -> Path:
    """Escreve o idioma pt_BR nas preferências do usuário, se ele ainda não escolheu um."""
    path = settings_dir / LOCALE_PLUGIN
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"locale": "pt_BR"}, indent=2) + "\n")
    return path


def configure(prefix: Path, instructor: bool = False) -> list[Path]:
    overrides = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    page_config = prefix / "etc" / "jupyter" / "labconfig" / "page_config.json"
    server_config = prefix / "etc" / "jupyter" / "jupyter_server_config.json"

    _update_json(overrides, lambda data: data.update(LAB_OVERRIDES))

    def plugins(data: dict) -> None:
        # Desligados e travados (o aluno não os religa pela interface), como o JupyterLab faz
        # com ``jupyter labextension disable``; no modo professor, nem uma coisa nem outra.
        for key in ("disabledExtensions", "lockedExtensions"):
            entries = data.setdefault(key, {})
            for plugin in INSTRUCTOR_PLUGINS:
                if instructor:
                    entries.pop(plugin, None)
                else:
                    entries[plugin] = True

    def server(data: dict) -> None:
        data.setdefault("LabApp", {})["user_settings_dir"] = str(user_settings_dir(prefix))
        extensions = data.setdefault("ServerApp", {}).setdefault("jpserver_extensions", {})
        for name in INSTRUCTOR_SERVER_EXTENSIONS:
            extensions[name] = instructor

    _update_json(page_config, plugins)
    _update_json(server_config, server)
    locale = seed_user_settings(user_settings_dir(prefix))
    return [overrides, locale, page_config, server_config]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--professor",
        action="store_true",
        help="religa o formgrader, o 'Create Assignment' e as listas do nbgrader",
    )
    args = parser.parse_args()
    paths = configure(Path(sys.prefix), instructor=args.professor)
    quem = "professor (ferramentas do nbgrader ligadas)" if args.professor else "aluno"
    print(f"JupyterLab em pt-BR, modo {quem}:")
    for path in paths:
        print(f"  {path}")


if __name__ == "__main__":
    main()
