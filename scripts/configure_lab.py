"""Configura o JupyterLab do ambiente do curso para o aluno.

- Interface em português do Brasil. Duas peças, porque o JupyterLab traduz em dois lugares: o padrão
  da instalação (``<venv>/share/jupyter/lab/settings/overrides.json``) vale para o navegador, mas o
  servidor, que traduz os menus, só olha as preferências *do usuário* (sem elas, usa o idioma do
  sistema). Por isso o JupyterLab do curso guarda as preferências do aluno numa pasta própria,
  ``<venv>/share/jupyter/lab/user-settings`` (``LabApp.user_settings_dir``), que começa com o idioma
  pt_BR. O aluno ainda pode trocar o idioma em Configurações > Idioma; rodar este script de novo
  não desfaz a escolha. O ``~/.jupyter`` do aluno não é tocado.
- Sem avisos de notícias/atualizações do Jupyter (o curso funciona sem internet).
- O que o pacote de idioma pt-BR (4.5.post3) não traduz no JupyterLab 4.6 e o aluno vê (o cabeçalho
  "Modified" do navegador de arquivos, o estado do kernel...): as frases de
  ``scripts/lab/jupyterlab_pt_BR_complemento.json`` entram no pacote instalado, só as que faltam nele.
  O mecanismo do próprio JupyterLab para completar um pacote (o ponto de entrada
  ``jupyterlab.locale``, que o ``jupyterlab_server`` funde ao pacote) não serve aqui: ele compara as
  versões dos dois, e o pacote pt-BR declara a versão "jupyterlab", que não é um número de versão.
- A ferramenta de validação do nbgrader em português: a extensão do nbgrader escreve "Validate" e os
  textos do diálogo direto na página, sem o tradutor do JupyterLab; a extensão
  ``scripts/lab/transformer-course-nbgrader-pt-br`` troca esses textos (veja o comentário dela).
- Do nbgrader, só a ferramenta do aluno: o botão "Validar" na barra do notebook. Os painéis do
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
import importlib.util
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LANGUAGE_PACK_SUPPLEMENT = HERE / "lab" / "jupyterlab_pt_BR_complemento.json"
NBGRADER_PT_BR = HERE / "lab" / "transformer-course-nbgrader-pt-br"

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
    # As páginas do Formgrader com uma Content-Security-Policy estrita (só os scripts do Formgrader).
    "transformer_course.instructor.formgrader_csp",
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


def language_pack_file() -> Path:
    """O ``jupyterlab.json`` (as frases do JupyterLab) do pacote de idioma pt-BR instalado."""
    spec = importlib.util.find_spec("jupyterlab_language_pack_pt_BR")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("falta o pacote jupyterlab-language-pack-pt-BR (rode `make venv`)")
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "locale" / "pt_BR" / "LC_MESSAGES" / "jupyterlab.json"


def complete_language_pack(pack: Path, supplement: Path = LANGUAGE_PACK_SUPPLEMENT) -> list[str]:
    """Acrescenta ao pacote de idioma as frases do complemento que faltam nele; devolve quais.

    Uma frase que o pacote já traduz nunca é trocada; rodar de novo não acrescenta nada.
    """
    extra = {k: v for k, v in json.loads(supplement.read_text(encoding="utf-8")).items() if k}
    data = json.loads(pack.read_text(encoding="utf-8"))
    added = [key for key in extra if key not in data]
    if added:
        data.update({key: extra[key] for key in added})
        pack.write_text(json.dumps(data, indent=4, ensure_ascii=False) + "\n", encoding="utf-8")
    return added


def install_labextension(prefix: Path, source: Path = NBGRADER_PT_BR) -> Path:
    """Copia a extensão (já pronta, sem build) para ``<prefix>/share/jupyter/labextensions/``."""
    target = prefix / "share" / "jupyter" / "labextensions" / source.name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    return target


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
    pack = language_pack_file()
    complete_language_pack(pack)
    extension = install_labextension(prefix)
    return [overrides, locale, page_config, server_config, pack, extension]


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
