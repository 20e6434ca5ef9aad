# Transformers do zero — os comandos do curso.
#   make lab          estudar: cria o ambiente, copia os capítulos para aluno/ e abre o JupyterLab
#   make test         verificar: todos os testes (pacote, notebooks, sincronia, correção, navegador)
# Veja `make help` para os demais.

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.instalado
WORKSPACE ?= aluno
# O nbgrader chama `alembic` pelo PATH: o bin/ do ambiente vai na frente.
export PATH := $(BIN):$(PATH)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help venv lab workspace assignments test test-fast lint bench clean-grading grade grade-class grading-service hub

help:
	@echo "make lab          ambiente + pasta $(WORKSPACE)/ (sem sobrescrever nada) + JupyterLab"
	@echo "make test         todos os testes (o mesmo comando que a CI roda)"
	@echo "make assignments  regenera source/, release/ e solutions/ a partir de notebooks/ [CHAPTER=02_atencao]"
	@echo "make bench        tempos: execução de cada capítulo, correção, widgets"
	@echo "make lint         ruff check + ruff format --check + import-linter (as camadas do pacote)"
	@echo "make book         o livro: site estático dos capítulos em build/book/ [EDITION=professor]"
	@echo "make grade        corrige sua pasta $(WORKSPACE)/ com os testes ocultos (cópia temporária) [CHAPTER=02_atencao]"
	@echo "make grade-class  corrige todas as entregas de grading/submitted/ no Dask (instrutor) [CHAPTER=02_atencao SCHEDULER=tcp://HOST:8786 DB=postgresql://...]"
	@echo "make grading-service  corrige cada entrega ao chegar na área de troca e libera a devolutiva [EXCHANGE=pasta SCHEDULER=... DB=...]"
	@echo "make hub          JupyterHub local da turma (professor + alunos, exchange do nbgrader); veja hub/README.md"

# O ambiente é (re)instalado só quando falta ou quando pyproject.toml/constraints.txt mudam.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test]"
	$(BIN)/python scripts/configure_lab.py
	touch $@

venv: $(STAMP)

workspace: $(STAMP)
	$(BIN)/python scripts/make_workspace.py $(WORKSPACE)

# Como root (um contêiner, por exemplo), o JupyterLab só abre com --allow-root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: workspace
	cd $(WORKSPACE) && $(BIN)/jupyter lab $(ALLOW_ROOT)

assignments: $(STAMP)
	$(BIN)/python scripts/build_assignments.py $(CHAPTER)

# Nos testes, cada kernel usa um thread só: com 2 workers em 2 núcleos, threads a mais só disputam a CPU.
test: export OMP_NUM_THREADS := 1
test-fast: export OMP_NUM_THREADS := 1
test: $(STAMP) lint
	$(BIN)/python -m pytest -n 2 --dist loadfile --durations=15

test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "not slow" tests

lint: $(STAMP)
	$(BIN)/ruff check transformer_course tests scripts notebooks hub
	$(BIN)/ruff format --check transformer_course tests scripts hub
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python scripts/bench.py

# Apaga só o que a correção gerou (autograded/, feedback/, gradebook); nunca submitted/.
clean-grading:
	rm -rf grading/autograded grading/feedback grading/gradebook.db

# Autocorreção: testes visíveis + ocultos numa cópia temporária; devolutivas em $(WORKSPACE)/devolutivas/.
grade: $(STAMP)
	$(BIN)/python scripts/grade.py --aluno $(WORKSPACE) $(CHAPTER)

# A turma: autograde + devolutivas + notas.csv para todas as entregas de grading/submitted/, no Dask
# (LocalCluster embutido; SCHEDULER=tcp://HOST:8786 para um cluster; DB=postgresql://... para o banco).
grade-class: $(STAMP)
	$(BIN)/python scripts/grade_class.py $(CHAPTER) $(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(if $(DB),--db $(DB))

# Correção na entrega: vigia a área de troca do nbgrader (EXCHANGE, padrão grading/exchange), corrige cada
# entrega nova no Dask e libera a devolutiva (release_feedback). Ctrl-C para.
grading-service: $(STAMP)
	$(BIN)/python scripts/grading_service.py $(CHAPTER) $(if $(EXCHANGE),--exchange $(EXCHANGE)) $(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(if $(DB),--db $(DB))

# JupyterHub da turma: prepara contas/usuários/exchange (hub/preparar.py) e inicia o hub em 127.0.0.1:8000.
# Variáveis: TDZ_HUB_IP, TDZ_HUB_PORTA, TDZ_HUB_MODO=local|simples, TDZ_HUB_ESTADO (veja hub/README.md).
hub: $(STAMP)
	$(BIN)/python hub/preparar.py
	$(BIN)/jupyterhub -f hub/jupyterhub_config.py

# O livro: site estático em pt-BR dos capítulos já executados (build/book/$(EDITION)/_build/html).
# Ambiente próprio (.venv-book: Jupyter Book 1 + Sphinx, book/requirements.txt) e MathJax do npm,
# para o site funcionar offline; os notebooks rodam no kernel do curso (.venv). EDITION=professor
# acrescenta soluções, rubricas e testes ocultos em blocos recolhidos.
EDITION ?= aluno
BOOK_VENV := .venv-book
BOOK_STAMP := $(BOOK_VENV)/.instalado
MATHJAX_VERSION := 3.2.2
.PHONY: book book-env

$(BOOK_STAMP): book/requirements.txt
	test -x $(BOOK_VENV)/bin/python || $(PYTHON) -m venv $(BOOK_VENV)
	$(BOOK_VENV)/bin/python -m pip install --quiet -r book/requirements.txt
	@command -v npm >/dev/null || { echo "make book precisa do Node.js com npm (MathJax): sudo apt-get install nodejs"; exit 1; }
	npm install --prefix $(BOOK_VENV) --no-audit --no-fund --silent mathjax@$(MATHJAX_VERSION)
	touch $@

book-env: $(BOOK_STAMP)

book: $(STAMP) $(BOOK_STAMP)
	$(BIN)/python scripts/build_book.py --edition $(EDITION)
