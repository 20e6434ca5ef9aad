"""Configuração do nbgrader para o curso "Transformers do zero".

Rode todos os comandos do nbgrader a partir desta pasta (a raiz do repositório),
com o ``bin/`` do ambiente virtual no PATH (o nbgrader chama ``alembic`` pelo PATH).
"""

import importlib.util
import os

c = get_config()  # noqa: F821 - definido pelo nbgrader ao carregar este arquivo

ROOT = os.path.dirname(os.path.abspath(__file__))
GRADING = os.path.join(ROOT, "grading")
# O SQLite falha com uma mensagem enganosa se a pasta do gradebook não existir.
os.makedirs(GRADING, exist_ok=True)

# ------------------------------------------------------------------ pastas
c.CourseDirectory.course_id = "transformers-do-zero"
c.CourseDirectory.root = ROOT
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.solution_directory = "solutions"
c.CourseDirectory.submitted_directory = "grading/submitted"
c.CourseDirectory.autograded_directory = "grading/autograded"
c.CourseDirectory.feedback_directory = "grading/feedback"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(GRADING, "gradebook.db")
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", ".jupyter"]

# ------------------------------------------------------------------ versão do aluno
c.ClearSolutions.code_stub = {"python": "# SEU CÓDIGO AQUI\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "SUA RESPOSTA AQUI"

# Gabarito determinístico: sem executar o notebook (a execução mudaria a saída a cada vez).
c.GenerateSolution.preprocessors = [
    "nbgrader.preprocessors.IncludeHeaderFooter",
    "nbgrader.preprocessors.LockCells",
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.ClearMarkScheme",
    # Respostas-modelo das perguntas abertas sem os marcadores (no Markdown eles virariam títulos).
    "transformer_course.instructor.preprocessors.StripTextSolutionMarkers",
]

# ------------------------------------------------------------------ correção
# Tempo por célula: um laço infinito é interrompido aqui.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
# Depois da última célula, o kernel da entrega é encerrado na hora (SIGKILL no bubblewrap, que leva
# junto tudo o que roda dentro dele): nada do estado do kernel é aproveitado, e o encerramento
# "gracioso" do nbclient esperava ~1 s por notebook (medido: 1,0–1,3 s contra 0,1 s).
c.Execute.shutdown_kernel = "immediate"
# Qualquer saída em stderr zera a célula de teste; avisos inofensivos não devem zerar.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"(Warning|warn\()"
# Uma célula de teste apagada pelo aluno volta do gradebook e é corrigida.
c.OverwriteCells.add_missing_cells = True
c.LimitOutput.max_lines = 1000
# Os limites de cada entrega (transformer_course/instructor/limits.py; valores e efeitos em
# grading/README.md): tempo do notebook inteiro, número de células, bytes de cada tipo de saída
# (cortados quando chegam), tamanho do notebook corrigido e da devolutiva, e memória, processos e
# CPU do kernel num cgroup. Por exemplo:
# c.SubmissionLimits.notebook_seconds = 600
# c.SubmissionLimits.memory_bytes = 4 * 1024**3

# Quem decide os pontos: o juiz, fora do kernel do aluno (transformer_course/instructor/judge.py).
# 1) Antes de rodar, a entrega é normalizada a partir do gradebook (submission.py): metadados do
#    professor de volta, tags e anexos fora, células repetidas ou desconhecidas viram células comuns,
#    células que sumiram voltam. Depois vêm os passos do próprio nbgrader.
c.Autograde.sanitize_preprocessors = [
    "transformer_course.instructor.submission.NormalizeSubmission",
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "nbgrader.preprocessors.OverwriteCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]
# 2) O notebook roda num kernel confinado pelo bubblewrap (sandbox.py: sem ver source/, solutions/, o
#    gradebook nem as outras entregas; sem rede; limites). Sem bubblewrap, o kernel não inicia, a menos
#    que TRANSFORMER_COURSE_UNCONFINED=1. As células de teste não rodam no kernel: o juiz (JudgedExecute)
#    roda cada verificação neste processo, pede ao kernel só os resultados da resposta do aluno nos casos
#    que ele escolhe (dados: .npy e JSON) e decide os pontos; SaveJudgedGrades grava esses pontos, e não
#    o que as saídas do notebook diriam. É a lista padrão do nbgrader 0.9 com o Execute e o
#    SaveAutoGrades trocados. Veja grading/README.md.
c.Autograde.autograde_preprocessors = [
    "transformer_course.instructor.judge.JudgedExecute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    # O notebook corrigido (o que o Formgrader mostra) sai sem nada que rode no navegador (sanitize.py).
    "transformer_course.instructor.sanitize.SanitizeNotebook",
    "transformer_course.instructor.judge.SaveJudgedGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Devolutiva sem os testes ocultos (nbgrader #917) e com o traceback resumido.
c.GenerateFeedback.preprocessors = [
    # O GetGrades do nbgrader, mais os pontos que esperam o professor (mostrados como "a corrigir").
    "transformer_course.instructor.preprocessors.GetGradesPending",
    "nbgrader.preprocessors.ClearHiddenTests",
    "transformer_course.instructor.preprocessors.ShortTracebacks",
    # Segunda camada: recusa a devolutiva com soluções ou testes ocultos (transformer_course/instructor/sandbox.py).
    "transformer_course.instructor.sandbox.BlockInstructorMaterial",
    # Saídas e textos enormes de uma entrega não viram uma devolutiva enorme (limits.py).
    "transformer_course.instructor.limits.CapFeedback",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# O exportador HTML do nbconvert, com os modelos Jinja compilados uma vez por processo (cada
# `generate_feedback` da API do nbgrader cria um exportador novo, que recompilaria tudo).
c.GenerateFeedback.exporter_class = "transformer_course.instructor.preprocessors.FeedbackHTMLExporter"

# Devolutiva em pt-BR: o modelo `feedback` do curso (transformer_course/templates/feedback) vem antes
# do original do nbgrader, que continua na lista (o formgrader também pede o modelo `feedback`).
_COURSE_PKG = importlib.util.find_spec("transformer_course").submodule_search_locations[0]
_NBGRADER_PKG = importlib.util.find_spec("nbgrader").submodule_search_locations[0]
c.HTMLExporter.extra_template_basedirs = [
    os.path.join(_COURSE_PKG, "templates"),
    os.path.join(_NBGRADER_PKG, "server_extensions", "formgrader", "templates"),
]
# Os pontos da devolutiva em pt-BR ("17 de 17 pontos corrigidos; 4 pontos a corrigir", "8,5"): filtros
# Jinja do modelo `feedback`.
c.HTMLExporter.filters = {
    "pontos": "transformer_course.instructor.preprocessors.points",
    "pontos_por_extenso": "transformer_course.instructor.preprocessors.points_phrase",
    # O Markdown (respostas escritas, comentários) vira HTML limpo pelo nh3 (sanitize.py).
    "markdown2html": "transformer_course.instructor.sanitize.markdown2html_inert",
}
# Toda página HTML de um notebook do curso (a devolutiva e a entrega que o Formgrader mostra) limpa
# de novo o conteúdo do aluno ao ser gerada: vale também para notebooks corrigidos antes desta versão.
c.HTMLExporter.preprocessors = ["transformer_course.instructor.sanitize.SanitizeNotebook"]

# ------------------------------------------------------------------ entregas baixadas de um AVA (zip_collect)
# `nbgrader zip_collect NN_nome` lê grading/downloaded/NN_nome/archive/ (zips ou arquivos soltos).
# O padrão abaixo é o do Moodle ("Baixar todas as submissões", com ou sem uma pasta por aluno):
#   "Maria Silva_12345_assignsubmission_file_/02_atencao.ipynb" -> aluno 12345, notebook 02_atencao.ipynb
# Para outro AVA, troque a expressão (grupos obrigatórios: student_id e file_id).
c.ZipCollectApp.downloaded_directory = "grading/downloaded"
c.FileNameCollectorPlugin.named_regexp = (
    r".*_(?P<student_id>\d+)_assignsubmission_file_/?(?P<file_id>[^/]+\.ipynb)$"
)
