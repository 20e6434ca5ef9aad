"""O juiz: os pontos de cada teste decididos fora do processo do aluno, só a partir de dados.

Na correção (``nbgrader autograde`` com o ``nbgrader_config.py`` do curso), o notebook roda no
kernel confinado (:mod:`.sandbox`) célula a célula, como sempre, com uma diferença: as células de
teste (visíveis e ocultas) **não rodam no kernel**. No lugar de cada uma, :class:`JudgedExecute`
roda neste processo — o do corretor, onde nenhum código do aluno roda — a verificação daquela
célula, com o lado do aluno remoto (:class:`transformer_course.probe.RemoteStudent`): a
verificação escolhe os casos (os ocultos com uma semente própria de cada entrega, tirada de um
segredo do professor), cada chamada à resposta do aluno vira um pedido que o kernel executa
(:mod:`transformer_course.harness`) e a resposta volta só como dados
(:mod:`transformer_course.wire`: ``.npy`` lido com ``allow_pickle=False``, JSON). A comparação com
o oráculo e o diagnóstico acontecem aqui; o resultado é um :class:`Verdict`.

O veredito vira a saída da célula de teste (a linha de sucesso, ou a falha com a mensagem em
pt-BR, que a devolutiva mostra) e os pontos que :class:`SaveJudgedGrades` grava no gradebook
do nbgrader. Nada que o kernel publique — um ``execute_result``, a falta de um erro, um gancho
do IPython, um tensor que mente — conta ponto: a nota de uma célula de teste sai só do veredito.

Uma falha do próprio juiz (um erro que não é a falha de uma verificação) não vira 0 do aluno: a
correção daquela entrega para com :class:`JudgeFault`, que diz o que houve. O mesmo vale para o
ambiente do corretor (:mod:`.faults`): antes da primeira célula do aluno, a checagem prévia confere
que o kernel partiu e importa exatamente o pacote do curso que o corretor montou (a impressão
digital dos arquivos ``.py``); se não, a entrega não é corrigida (:class:`GraderFault`).
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import hmac
import os
import secrets
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jupyter_core.utils import run_sync
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_output
from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor, SaveAutoGrades

from ..harness import MIME
from .answer_key import cells_to_skip, grading_package, package_root
from .faults import GraderFault
from .limits import (
    OutputBudget,
    SubmissionLimits,
    cap_notebook,
    kernel_setup,
    limited_client_class,
    size_text,
)
from .sandbox import PACKAGE_MOUNT, SandboxedExecute

__all__ = [
    "GraderFault",
    "JudgeFault",
    "JudgedExecute",
    "SaveJudgedGrades",
    "Verdict",
    "grading_secret",
    "judge_cell",
    "seed_offset",
    "test_cells",
]

META_KEY = "transformer_course"  # onde o veredito fica, nos metadados da célula corrigida
SECRET_FILE = ".segredo-dos-testes"


class JudgeFault(GraderFault):
    """O juiz falhou por conta própria (um erro do curso, não da entrega): nada é gravado."""


# ====================================================================== a checagem prévia do kernel

# A impressão digital de um pacote: os caminhos e o conteúdo dos ``.py`` (sem ``__pycache__``). O
# mesmo código roda no corretor e, como texto, no kernel (que não importa nada do corretor).
_DIGEST_SOURCE = """
def _package_digest(root):
    import hashlib, os
    found = []
    for base, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found += [os.path.join(base, f) for f in files if f.endswith(".py")]
    digest = hashlib.sha256()
    for path in sorted(os.path.relpath(f, root) for f in found):
        digest.update(path.encode())
        with open(os.path.join(root, path), "rb") as fh:
            digest.update(fh.read())
    return digest.hexdigest()
"""
_namespace: dict = {}
exec(_DIGEST_SOURCE, _namespace)  # noqa: S102 - código nosso, fixo
package_digest = _namespace["_package_digest"]

PREFLIGHT_MARK = "preflight-transformers-do-zero:"
PREFLIGHT_TIMEOUT = 300  # s: partir o pacote (e o torch) numa máquina ocupada

PREFLIGHT_CODE = (
    _DIGEST_SOURCE
    + f"""
def _preflight():
    import json, os, sys
    out = {{"cwd": os.path.realpath(os.getcwd())}}
    try:
        import transformer_course
        from transformer_course import harness
        root = os.path.dirname(os.path.realpath(transformer_course.__file__))
        out.update(root=root, digest=_package_digest(root))
    except BaseException as exc:
        out["error"] = f"{{type(exc).__name__}}: {{exc}}"
        cwd = out["cwd"]
        out["shadow"] = sorted(
            n for n in os.listdir(cwd)
            if n.endswith(".py") or os.path.isfile(os.path.join(cwd, n, "__init__.py"))
        )
    print({PREFLIGHT_MARK!r} + json.dumps(out), flush=True)
_preflight()
del _preflight, _package_digest
"""
)


def preflight_problem(report: dict | None, expected_root: str | None, expected_digest: str) -> str | None:
    """Por que a checagem prévia do kernel acusa uma falha do corretor (em pt-BR), ou ``None``.

    ``report``: o que o kernel respondeu (``None``: nada). ``expected_root``: onde o kernel deve
    achar o pacote (``None``: qualquer lugar, kernel não confinado). Um pacote (ou módulo) trazido
    pela própria entrega, na pasta dela, é escolha do aluno, não falha do corretor.
    """
    if report is None:
        return "o kernel não respondeu à checagem prévia (o ambiente do corretor não roda o harness)"
    cwd = report.get("cwd", "")
    if "error" in report:
        if report.get("shadow"):
            return None  # a entrega traz módulos que escondem os do ambiente: culpa dela
        return (
            f"o kernel não importa o pacote do curso ({report['error'][:300]}): o ambiente Python do "
            "corretor está quebrado ou não enxerga o pacote montado"
        )
    root = report.get("root", "")
    if cwd and (root == cwd or root.startswith(cwd + "/")):
        return None  # a entrega trouxe o próprio transformer_course
    if expected_root is not None and root != expected_root:
        return (
            f"o kernel importou o pacote do curso de {root}, não o que o corretor montou em "
            f"{expected_root} (o ambiente Python põe outra cópia do curso na frente)"
        )
    if report.get("digest") != expected_digest:
        return (
            f"o pacote do curso que o kernel importou ({root}) não é o do corretor: impressão digital "
            f"{str(report.get('digest'))[:12]} no kernel, {expected_digest[:12]} no corretor (o ambiente "
            "foi instalado de outra cópia do curso, ou o pacote mudou no meio da correção)"
        )
    return None


class LimitReached(RuntimeError):
    """A entrega passou de um limite (tempo do notebook, memória, processos): o kernel foi morto."""


POLL_SECONDS = 0.5  # de quanto em quanto tempo o relógio do notebook e o cgroup são olhados


@dataclass
class Verdict:
    """A decisão sobre uma célula de teste: o que o aluno lê e os pontos que o gradebook recebe.

    ``status``: ``"passou"``, ``"falhou"``, ``"nao_implementado"`` ou ``"nao_rodou"`` (o kernel parou
    antes, ou o tempo do notebook acabou).
    """

    grade_id: str
    exercise: str
    hidden: bool
    status: str
    points: float
    max_points: float
    message: str
    checks: int = 0
    requests: int = 0
    seconds: float = 0.0
    diagnosis: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


# ====================================================================== a semente dos testes ocultos


def grading_secret(course_root: str | os.PathLike) -> bytes:
    """O segredo do professor que sorteia os testes ocultos de cada entrega (criado na 1ª vez).

    Fica em ``grading/.segredo-dos-testes`` (modo 600, fora do git). Com ele, corrigir de novo a
    mesma entrega sorteia os mesmos casos; sem ele, ninguém prevê os casos de uma entrega.
    """
    path = Path(course_root) / "grading" / SECRET_FILE
    try:
        data = path.read_bytes()
        if len(data) >= 16:
            return data
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    # Dois workers podem chegar aqui juntos: o segredo nasce completo num arquivo temporário e entra
    # no lugar com ``link`` (atômico, falha se já existe); quem perde lê o do outro.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".segredo-")
    try:
        os.write(fd, secrets.token_bytes(32))
        os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)
    return path.read_bytes()


def seed_offset(secret: bytes, student: str, assignment: str, grade_id: str) -> int:
    """O deslocamento das sementes de uma célula oculta numa entrega (determinístico, imprevisível)."""
    digest = hmac.new(secret, f"{student}\0{assignment}\0{grade_id}".encode(), hashlib.sha256).digest()
    return 1 + int.from_bytes(digest[:4], "big") % 1_000_000_000


# ====================================================================== as células de teste


def test_cells(nb: NotebookNode, chapter: str) -> dict[int, str]:
    """Índice -> ``grade_id`` das células de teste do notebook (as que o juiz corrige).

    O notebook já passou pela normalização (:mod:`.submission`): os metadados do nbgrader das
    células conhecidas vêm de ``source/``. Uma célula de teste que o registro de exercícios não
    conhece é um erro do curso (:class:`JudgeFault`).
    """
    from ..exercises import by_grade_id

    registry = by_grade_id(chapter)
    found = {}
    for index, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        grade_id = meta.get("grade_id")
        if grade_id not in registry:
            raise JudgeFault(
                f"a célula de teste {grade_id!r} de {chapter} não está no registro de exercícios "
                "(transformer_course/checks): o juiz não sabe corrigi-la"
            )
        found[index] = grade_id
    return found


def hidden_kwargs(source: str) -> dict:
    """Os argumentos nomeados, literais, da última chamada de uma célula oculta (``a="encoder"``).

    O questionário guarda a resposta certa na própria célula oculta (e não no pacote): o juiz lê
    esses valores do ``source/`` do professor, sem executar nada.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    outer = [c for c in calls if isinstance(c.func, ast.Call)]  # hidden_check(...)(resposta, a=...)
    if not outer:
        return {}
    kwargs = {}
    for keyword in outer[-1].keywords:
        if keyword.arg is None:
            continue
        try:
            kwargs[keyword.arg] = ast.literal_eval(keyword.value)
        except ValueError:
            continue
    return kwargs


def judge_cell(
    chapter: str,
    grade_id: str,
    student,
    offset: int,
    extra_kwargs: dict | None = None,
) -> Verdict:
    """Roda a verificação da célula ``grade_id`` contra ``student`` e decide os pontos.

    Args:
        student: o lado do aluno (:class:`probe.RemoteStudent` na correção).
        offset: o deslocamento das sementes, usado só se a célula for oculta.
        extra_kwargs: argumentos da verificação que vêm da célula do professor (o questionário).
    """
    from ..exercises import by_grade_id
    from ..feedback import CheckFailure
    from ..probe import Remote, judging

    exercise, cell = by_grade_id(chapter)[grade_id]
    check = exercise.hidden if cell.hidden else exercise.visible
    sink: list[str] = []
    started = time.perf_counter()
    base = dict(grade_id=grade_id, exercise=exercise.name, hidden=cell.hidden, max_points=float(cell.points))
    try:
        with judging(student, offset if cell.hidden else 0, sink):
            check(Remote(exercise.name), **(extra_kwargs or {}))
    except CheckFailure as failure:
        text = str(failure)
        status = "nao_implementado" if text.startswith("Você ainda não implementou") else "falhou"
        verdict = Verdict(**base, status=status, points=0.0, message=text, diagnosis=_diagnosis(failure))
    except Exception as exc:  # noqa: BLE001 - uma falha do juiz não vira 0 do aluno
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        raise JudgeFault(f"o juiz falhou na célula {grade_id} de {chapter} ({detail[:300]})") from exc
    else:
        message = "\n".join(sink) or f"✔ `{exercise.name}`: as verificações passaram."
        verdict = Verdict(**base, status="passou", points=float(cell.points), message=message)
    verdict.requests = getattr(student, "requests", 0)
    verdict.seconds = round(time.perf_counter() - started, 3)
    return verdict


def _diagnosis(failure) -> dict:
    data = getattr(failure, "data", None)
    return dict(data) if isinstance(data, dict) else {}


def render(cell: NotebookNode, verdict: Verdict) -> None:
    """O veredito como a saída da célula de teste (o que a devolutiva e o Formgrader mostram)."""
    if verdict.status == "passou":
        cell.outputs = [new_output("stream", name="stdout", text=verdict.message + "\n")]
    else:
        cell.outputs = [
            new_output(
                "error",
                ename="CheckFailure",
                evalue=verdict.message,
                traceback=[f"\x1b[0;31mCheckFailure\x1b[0m: {verdict.message}"],
            )
        ]
    cell.metadata[META_KEY] = {"verdict": verdict.to_json()}


# ====================================================================== o executor


class JudgedExecute(SandboxedExecute):
    """O ``Execute`` confinado do curso em que as células de teste são corrigidas pelo juiz.

    As demais células rodam no kernel confinado, em ordem. Ao chegar a uma célula de teste, o
    executor não manda o código dela ao kernel: roda :func:`judge_cell` numa thread deste
    processo, e cada pedido da verificação ao lado do aluno vira uma célula sintética executada
    no kernel (que não entra no notebook). Os vereditos ficam em ``resources`` (para
    :class:`SaveJudgedGrades`) e nos metadados de cada célula de teste.

    Os limites da entrega (:mod:`.limits`): o relógio do notebook inteiro e os limites do cgroup
    são olhados enquanto cada célula roda; passou de um, o kernel é morto e os testes que faltam
    recebem 0 com o motivo. Cada saída é cortada quando chega (:class:`OutputBudget`), e o notebook
    corrigido, no fim, cabe em ``notebook_bytes``.
    """

    def preprocess(self, nb, resources=None, km=None):
        from nbgrader.coursedir import CourseDirectory

        resources = resources if resources is not None else {}
        info = resources.get("nbgrader", {})
        self._chapter = info.get("notebook") or info.get("assignment") or ""
        self._student = info.get("student") or ""
        self._tests = test_cells(nb, self._chapter)
        self._verdicts: dict[str, Verdict] = {}
        self._stopped = ""
        self._limits = SubmissionLimits(parent=self)
        self._budget = OutputBudget(self._limits, probe_mime=MIME)
        self._probing = False
        # A normalização (submission.py, um passo antes, com o notebook gravado no meio) recusa uma
        # entrega com células demais: nada roda.
        refused = nb.metadata.get(META_KEY, {}).get("recusada")
        self._stopped = refused if isinstance(refused, str) else ""
        root = CourseDirectory(config=self.config).root
        self._secret = grading_secret(root)
        # O gabarito fica com o professor: o kernel importa o pacote sem as referências deste
        # capítulo e dos seguintes, e as demonstrações que dependem delas não rodam.
        cache = Path(root) / "grading" / ".pacote-da-correcao"
        self._package = grading_package(self._chapter, cache, Path(root))
        answers = {i for i, cell in enumerate(nb.cells) if _meta(cell).get("solution")}
        self._skip = cells_to_skip(
            nb.cells, self._chapter, keep=answers | set(self._tests), course_root=Path(root)
        )
        self._source_cells = _source_test_sources(
            root, info.get("assignment") or self._chapter, self._chapter
        )
        self._preflight_done = False
        try:
            # O relógio do notebook começa aqui: partida do kernel, células e pedidos do juiz.
            self._deadline = time.monotonic() + self._limits.notebook_seconds
            if not self._stopped:  # recusada antes de rodar: nem o kernel parte
                nb, resources = super().preprocess(nb, resources, km)
        finally:
            # Células de teste que não chegaram a ser corrigidas (o kernel morreu, o tempo acabou).
            for index, grade_id in self._tests.items():
                if grade_id not in self._verdicts:
                    self._record(nb.cells[index], self._not_run(grade_id))
        resources.setdefault(META_KEY, {})["verdicts"] = {k: v.to_json() for k, v in self._verdicts.items()}
        cuts = cap_notebook(nb, self._limits.notebook_bytes)
        if self._budget.truncated or cuts:
            self.log.warning(
                "Entrega de %s (%s): %d saída(s) cortada(s) ao chegar; %s",
                self._student,
                self._chapter,
                self._budget.truncated,
                "; ".join(cuts) or "o notebook coube no limite",
            )
        return nb, resources

    def _not_run(self, grade_id: str) -> Verdict:
        from ..exercises import by_grade_id

        exercise, cell = by_grade_id(self._chapter)[grade_id]
        why = self._stopped or "o notebook parou antes desta célula"
        return Verdict(
            grade_id=grade_id,
            exercise=exercise.name,
            hidden=cell.hidden,
            status="nao_rodou",
            points=0.0,
            max_points=float(cell.points),
            message=f"`{exercise.name}` não foi corrigido: {why}.",
        )

    def _record(self, cell, verdict: Verdict) -> None:
        self._verdicts[verdict.grade_id] = verdict
        render(cell, verdict)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if hasattr(km, "package_dir"):
            km.package_dir = str(self._package)
        km.client_factory = limited_client_class(self._limits)
        return km

    async def async_start_new_kernel(self, **kwargs):
        try:
            return await super().async_start_new_kernel(**kwargs)
        except GraderFault:
            raise
        except Exception as exc:  # noqa: BLE001 - nenhuma entrega chegou a rodar: falha do corretor
            raise GraderFault(f"o kernel não partiu ({type(exc).__name__}: {str(exc)[:300]})") from exc

    async def async_start_new_kernel_client(self):
        # Antes da primeira célula, o corte das saídas dentro do kernel (limits.KERNEL_SETUP).
        try:
            kc = await super().async_start_new_kernel_client()
        except Exception as exc:  # noqa: BLE001 - nenhuma entrega chegou a rodar: falha do corretor
            raise GraderFault(
                f"o kernel não partiu ou morreu antes de responder ({type(exc).__name__}: {str(exc)[:300]})"
            ) from exc
        msg_id = kc.execute(kernel_setup(self._limits, MIME), silent=True, store_history=False)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            reply = await kc.get_shell_msg(timeout=max(deadline - time.monotonic(), 0.1))
            if reply["parent_header"].get("msg_id") == msg_id:
                if reply["content"].get("status") != "ok":
                    raise JudgeFault(f"o corte das saídas não rodou no kernel: {reply['content']}")
                break
        return kc

    # O nbconvert parte o kernel pelas versões síncronas, presas às funções da classe base.
    start_new_kernel = run_sync(async_start_new_kernel)
    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    async def _preflight(self, cell_index: int) -> None:
        """A checagem prévia, antes da primeira célula: o kernel importa o pacote que o corretor montou?

        Levanta :class:`GraderFault` (nada é gravado para a entrega) se não.
        """
        import json

        from nbclient.exceptions import CellTimeoutError, DeadKernelError

        self._preflight_done = True
        original = self.nb.cells[cell_index]
        probe = new_code_cell(source=PREFLIGHT_CODE)
        timeout = self.timeout
        self.timeout = max(timeout or 0, PREFLIGHT_TIMEOUT)
        try:
            await super().async_execute_cell(probe, cell_index, store_history=False)
        except (DeadKernelError, CellTimeoutError) as exc:
            raise GraderFault(
                f"o kernel parou ou não respondeu na checagem prévia, antes de qualquer código do "
                f"aluno ({type(exc).__name__})"
            ) from exc
        finally:
            self.timeout = timeout
            self.nb.cells[cell_index] = original
            self.code_cells_executed -= 1  # a checagem não conta na numeração das células
        report = None
        for output in probe.outputs:
            for line in str(output.get("text", "")).splitlines():
                if line.startswith(PREFLIGHT_MARK):
                    try:
                        report = json.loads(line[len(PREFLIGHT_MARK) :])
                    except ValueError:
                        report = None
        # Confinado, o kernel importa o pacote montado (o ``self._package`` do corretor, em
        # PACKAGE_MOUNT); sem isolamento (autorizado), o do ambiente, que tem de ser o do corretor.
        mount = f"{PACKAGE_MOUNT}/transformer_course"
        confined = getattr(self.km, "_confined", None)
        if confined is None:  # gerenciador sem o atributo: decide pelo que o kernel respondeu
            confined = (report or {}).get("root") == mount
        if confined:
            expected_root, expected = mount, package_digest(str(self._package))
        else:
            expected_root, expected = None, package_digest(str(package_root()))
        problem = preflight_problem(report, expected_root, expected)
        if problem:
            raise GraderFault(problem)

    def process_message(self, msg, cell, cell_index):
        # Cada saída é medida e, se preciso, cortada quando chega (não depois da célula).
        msg = self._budget.admit(msg, cell, real=not self._probing)
        if msg is None:
            return None
        return super().process_message(msg, cell, cell_index)

    def _limit_hit(self) -> str:
        cgroup = getattr(self.km, "cgroup", None)
        return cgroup.limit_hit() if cgroup is not None else ""

    async def _channel_lost(self) -> str:
        """O canal de saídas caiu com o kernel vivo: uma mensagem acima de ``message_bytes``."""
        from jupyter_core.utils import ensure_async

        lost = getattr(self.kc, "iopub_lost", None)
        if lost is None or not lost():
            return ""
        # Um kernel que morre (``os._exit``, memória) também derruba a conexão: um instante para o
        # processo sair, e aí quem decide é a morte do kernel, não o tamanho da mensagem.
        await asyncio.sleep(1.0)
        if not await ensure_async(self.km.is_alive()):
            return ""
        return (
            f"o kernel mandou uma saída de mais de {size_text(self._limits.message_bytes)} numa mensagem "
            "só (desfazendo o corte da correção); as saídas deixaram de chegar e o kernel foi encerrado"
        )

    async def _run_in_kernel(self, cell, cell_index, **kwargs):
        """Executa uma célula no kernel de olho no relógio do notebook e nos limites do cgroup.

        Passou de um limite: :attr:`_stopped` recebe o motivo, o kernel é morto (com tudo o que
        ele criou) e :class:`LimitReached` é levantada.
        """
        from jupyter_core.utils import ensure_async
        from nbclient.exceptions import CellTimeoutError

        cgroup = getattr(self.km, "cgroup", None)
        refused = cgroup.pids_refused() if cgroup is not None else 0
        task = asyncio.ensure_future(super().async_execute_cell(cell, cell_index, **kwargs))
        why = ""
        while not why:
            remaining = self._deadline - time.monotonic()
            done, _ = await asyncio.wait({task}, timeout=max(0.0, min(remaining, POLL_SECONDS)))
            why = self._limit_hit() or await self._channel_lost()
            if done and not why:
                try:
                    result = task.result()
                    if cgroup is not None and cgroup.pids_refused() > refused:
                        note = cgroup.pids_note(cgroup.pids_refused() - refused)
                        cell.outputs.append(new_output("stream", name="stdout", text=note))
                    return result
                except CellTimeoutError:
                    # O "fim da célula" não chegou pelo IOPub: mensagens descartadas por serem grandes
                    # ou rápidas demais (limits.py). A célula terminou (a resposta veio); segue.
                    note = (
                        "[… saídas desta célula perdidas na correção: mensagens grandes ou rápidas demais]\n"
                    )
                    cell.outputs.append(new_output("stream", name="stdout", text=note))
                    return cell
            if not why and time.monotonic() >= self._deadline:
                why = f"tempo total do notebook esgotado ({self._limits.notebook_seconds:g} s)"
        self._stopped = why
        self.log.warning("Entrega de %s (%s): %s", self._student, self._chapter, why)
        try:
            await ensure_async(self.km.shutdown_kernel(now=True))
        except Exception as exc:  # noqa: BLE001 - o kernel já pode ter morrido
            self.log.warning("Kernel da entrega já parado: %s", exc)
        if not task.done():
            task.cancel()
        try:
            await task
        except BaseException:  # noqa: BLE001 - a célula interrompida não interessa mais
            pass
        raise LimitReached(why)

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        from nbclient.exceptions import DeadKernelError

        if not self._preflight_done:
            await self._preflight(cell_index)
        grade_id = self._tests.get(cell_index)
        if grade_id is None:
            if self._stopped:
                return cell
            if cell_index in self._skip:
                cell.outputs = [new_output("stream", name="stdout", text=_skipped(self._skip[cell_index]))]
                return cell
            try:
                return await self._run_in_kernel(
                    cell, cell_index, execution_count=execution_count, store_history=store_history
                )
            except (DeadKernelError, LimitReached) as exc:
                if isinstance(exc, DeadKernelError):
                    died = "o kernel morreu numa célula anterior (memória esgotada? `os._exit`?)"
                    self._stopped = self._limit_hit() or died
                name = type(exc).__name__
                cell.outputs.append(
                    new_output("error", ename=name, evalue=self._stopped, traceback=[self._stopped])
                )
                return cell
        if self._stopped:
            self._record(cell, self._not_run(grade_id))
            return cell
        verdict = await self._judge(grade_id, cell_index)
        if self._stopped and verdict.status != "passou":
            verdict = self._not_run(grade_id)  # o kernel parou durante esta correção
        # Cada pedido ao kernel passa pelo nbclient, que guarda a célula executada no lugar da
        # célula de índice ``cell_index``: a célula de teste volta para o lugar dela.
        self.nb.cells[cell_index] = cell
        self._record(cell, verdict)
        return cell

    # O nbconvert executa célula a célula pela versão síncrona, presa à função da classe base.
    execute_cell = run_sync(async_execute_cell)

    async def _judge(self, grade_id: str, cell_index: int) -> Verdict:
        from ..probe import RemoteStudent

        loop = asyncio.get_running_loop()

        def transport(code: str) -> str | None:
            return asyncio.run_coroutine_threadsafe(self._request(code, cell_index), loop).result()

        offset = seed_offset(self._secret, self._student, self._chapter, grade_id)
        kwargs = hidden_kwargs(self._source_cells.get(grade_id, ""))
        student = RemoteStudent(transport)
        return await loop.run_in_executor(
            None, lambda: judge_cell(self._chapter, grade_id, student, offset, kwargs)
        )

    async def _request(self, code: str, cell_index: int) -> str | None:
        """Um pedido do juiz: uma célula sintética executada no kernel; devolve o texto da resposta."""
        from nbclient.exceptions import DeadKernelError

        from ..probe import HarnessFailure

        if self._stopped:
            raise HarnessFailure(self._stopped)
        cell = new_code_cell(source=code)
        self._probing = True
        try:
            await self._run_in_kernel(cell, cell_index, store_history=False)
        except DeadKernelError:
            self._stopped = (
                self._limit_hit() or "o kernel morreu durante a correção (memória esgotada? `os._exit`?)"
            )
            raise HarnessFailure(self._stopped) from None
        except LimitReached:
            raise HarnessFailure(self._stopped) from None
        finally:
            self._probing = False
        found = None
        for output in cell.outputs:
            if output.get("output_type") == "display_data" and MIME in output.get("data", {}):
                found = output["data"][MIME]
        if found is None:
            errors = [o.get("ename", "") for o in cell.outputs if o.get("output_type") == "error"]
            if any(e in ("CellTimeoutError", "KeyboardInterrupt") for e in errors):
                raise HarnessFailure(
                    f"sua resposta não terminou no limite de {self.timeout} s por chamada (laço infinito?)"
                )
        return found if isinstance(found, str) else None


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _skipped(what: str) -> str:
    return (
        f"(Demonstração não executada na correção: depende de `{what}`, que usa o gabarito do capítulo; "
        "o gabarito fica com o professor até ser liberado.)\n"
    )


def _source_test_sources(root, assignment: str, notebook: str) -> dict[str, str]:
    """O código das células de teste no ``source/`` do professor (a fonte confiável), por ``grade_id``."""
    import nbformat

    path = Path(root) / "source" / assignment / f"{notebook}.ipynb"
    try:
        nb = nbformat.read(path, as_version=4)
    except (OSError, ValueError):
        return {}
    return {
        cell.metadata["nbgrader"]["grade_id"]: cell.source
        for cell in nb.cells
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    }


# ====================================================================== os pontos no gradebook


class SaveJudgedGrades(SaveAutoGrades):
    """O ``SaveAutoGrades`` do nbgrader com os pontos das células de teste vindos do juiz.

    Uma célula de teste recebe os pontos do seu :class:`Verdict` (``resources``), nunca das
    saídas do notebook (o ``determine_grade`` do nbgrader daria pontos a uma célula sem erro,
    a um ``execute_result`` numérico ou a uma célula que não rodou). Sem veredito: 0. As
    perguntas abertas seguem a regra do nbgrader (esperam o professor).

    As notas de um notebook entram numa transação só: ou todas, ou nenhuma (o banco que cai no
    meio não deixa uma nota parcial com cara de final).
    """

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        self.notebook_id = info["notebook"]
        self.assignment_id = info["assignment"]
        self.student_id = info["student"]
        self.db_url = info["db_url"]
        self.verdicts = resources.get(META_KEY, {}).get("verdicts", {})
        self.gradebook = Gradebook(self.db_url)
        with self.gradebook:
            session = self.gradebook.db
            session.commit = session.flush  # as células escrevem na mesma transação
            try:
                nb, resources = NbGraderPreprocessor.preprocess(self, nb, resources)
            finally:
                del session.commit
            session.commit()
        return nb, resources

    def _add_score(self, cell, resources):
        meta = cell.metadata["nbgrader"]
        grade = self.gradebook.find_grade(
            meta["grade_id"], self.notebook_id, self.assignment_id, self.student_id
        )
        if cell.cell_type == "code" and not utils.is_solution(cell):
            verdict = self.verdicts.get(meta["grade_id"]) or {}
            grade.auto_score = float(verdict.get("points", 0.0))
        else:
            grade.auto_score, _ = utils.determine_grade(cell, self.log)
        grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
        self.gradebook.db.commit()
