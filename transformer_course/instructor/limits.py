"""Os limites de cada entrega na correção: tempo, células, saídas, memória, processos e CPU.

Uma entrega nunca segura um worker nem o enche de memória, e a turma segue. Os valores ficam em
:class:`SubmissionLimits` (configuráveis no ``nbgrader_config.py``: ``c.SubmissionLimits.<nome>``):

- **tempo do notebook inteiro** (``notebook_seconds``): além do ``Execute.timeout`` de cada
  célula, o relógio do notebook (desde a partida do kernel). Passou: o kernel é morto (com ele,
  todo processo que ele criou), as células seguintes não rodam, e cada teste ainda não corrigido
  recebe 0 com o motivo "tempo total do notebook esgotado (N s)";
- **número de células** (``max_code_cells``, ``max_cells``): acima disso, nada roda; cada teste
  recebe 0 com o motivo;
- **saídas** (:class:`OutputBudget`): bytes por tipo de saída em cada célula (``stream``,
  ``text/plain``, ``text/html``, imagens, ``application/json``, erros, o resto), contados **à medida
  que as mensagens chegam** do kernel, e um total por notebook; passou, a saída é cortada com uma
  nota em pt-BR. Nenhuma mensagem do kernel maior que ``message_bytes`` é lida (o ZeroMQ a descarta
  antes de alocá-la) e a fila de mensagens ainda não lidas é curta (``iopub_queue``): a memória do
  corretor não depende do que o aluno imprime;
- **tamanho do notebook corrigido e da devolutiva** (``notebook_bytes``, ``feedback_bytes``):
  passou, as maiores saídas (e, se preciso, os maiores códigos) são trocadas por uma nota;
- **memória, processos e CPU do kernel** (``memory_bytes``, ``max_pids``, ``cpus``) num cgroup
  próprio (:class:`KernelCgroup`; v1 ou v2, pelo sistema de arquivos do cgroup). Passou da
  memória: o kernel é morto pelo próprio cgroup, e isso vira o motivo dos testes não corrigidos;
  do número de processos: o ``fork`` falha (``BlockingIOError``) e a célula ganha uma nota; o que
  ficou rodando morre com o kernel (ou no relógio do notebook). Sem cgroups (sem root,
  sem controladores), valem só os limites do ``prlimit`` (:mod:`.sandbox`), com um aviso.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import signal
import sys
import time
from pathlib import Path

from traitlets import Float, Int, Unicode
from traitlets.config import LoggingConfigurable

__all__ = [
    "KernelCgroup",
    "OutputBudget",
    "SubmissionLimits",
    "cap_notebook",
    "cgroup_problem",
    "size_text",
]

KiB, MiB, GiB = 1024, 1024**2, 1024**3
META_KEY = "transformer_course"


class SubmissionLimits(LoggingConfigurable):
    """Os limites de uma entrega na correção (``c.SubmissionLimits.<nome>`` no ``nbgrader_config.py``)."""

    notebook_seconds = Float(600.0, help="Tempo total de um notebook, da partida do kernel ao fim.").tag(
        config=True
    )
    max_code_cells = Int(300, help="Células de código de uma entrega (o maior capítulo tem 44).").tag(
        config=True
    )
    max_cells = Int(1000, help="Células de qualquer tipo de uma entrega.").tag(config=True)

    stream_bytes = Int(256 * KiB, help="stdout + stderr de uma célula.").tag(config=True)
    text_bytes = Int(64 * KiB, help="text/plain, text/markdown, text/latex de uma célula.").tag(config=True)
    html_bytes = Int(256 * KiB, help="text/html de uma célula.").tag(config=True)
    image_bytes = Int(1 * MiB, help="Imagens (PNG, JPEG, SVG, GIF) de uma célula.").tag(config=True)
    json_bytes = Int(64 * KiB, help="application/json e outros tipos JSON de uma célula.").tag(config=True)
    error_bytes = Int(64 * KiB, help="Mensagem e traceback dos erros de uma célula.").tag(config=True)
    other_bytes = Int(64 * KiB, help="Qualquer outro tipo de saída de uma célula.").tag(config=True)
    notebook_output_bytes = Int(8 * MiB, help="Todas as saídas de um notebook.").tag(config=True)
    probe_bytes = Int(32 * MiB, help="Uma resposta do kernel a um pedido do juiz.").tag(config=True)
    kernel_output_bytes = Int(
        4 * MiB, help="Maior texto de uma mensagem de saída, cortado já no kernel (antes de sair)."
    ).tag(config=True)
    message_bytes = Int(
        48 * MiB, help="Maior parte de mensagem do kernel que o corretor lê (ZMQ_MAXMSGSIZE)."
    ).tag(config=True)
    iopub_queue = Int(8, help="Mensagens de saída ainda não lidas na fila (ZMQ_RCVHWM).").tag(config=True)

    notebook_bytes = Int(16 * MiB, help="O notebook corrigido (grading/autograded).").tag(config=True)
    feedback_bytes = Int(16 * MiB, help="A devolutiva HTML (grading/feedback).").tag(config=True)

    memory_bytes = Int(4 * GiB, help="Memória do kernel e dos seus processos (cgroup).").tag(config=True)
    max_pids = Int(256, help="Processos e threads do kernel (cgroup pids).").tag(config=True)
    cpus = Float(2.0, help="Núcleos de CPU do kernel (cota do cgroup cpu).").tag(config=True)
    cgroup_name = Unicode(
        "transformers-do-zero", help="O cgroup-pai dos kernels (um filho por kernel, apagado no fim)."
    ).tag(config=True)


def size_text(n: float) -> str:
    """Bytes em palavras, com vírgula decimal: ``256 KiB``, ``1,5 MiB``."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            value = n / size
            text = f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}".replace(".", ",")
            return f"{text} {unit}"
    return f"{int(n)} bytes"


def _utf8_len(text: str, limit: int) -> int:
    """O tamanho em bytes (UTF-8) de ``text``; exato quando pode passar de ``limit``."""
    if len(text) * 4 <= limit:
        return len(text)  # nem no pior caso passa: o número de caracteres basta para a conta
    return len(text.encode("utf-8", "surrogatepass"))


def _cut(text: str, nbytes: int) -> str:
    return text.encode("utf-8", "surrogatepass")[: max(nbytes, 0)].decode("utf-8", "ignore")


# ====================================================================== saídas, à medida que chegam

_OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error", "update_display_data")
_TEXT_KINDS = ("stream", "text", "html", "error")


def _kind(mime: str) -> str:
    if mime in ("text/plain", "text/markdown", "text/latex"):
        return "text"
    if mime == "text/html":
        return "html"
    if mime.startswith("image/"):
        return "image"
    if mime == "application/json" or mime.endswith("+json"):
        return "json"
    return "other"


_KIND_LABEL = {
    "stream": "texto impresso (stdout/stderr)",
    "text": "texto",
    "html": "HTML",
    "image": "imagens",
    "json": "JSON",
    "error": "erro",
    "other": "saídas",
}


class OutputBudget:
    """O orçamento de saídas de um notebook, aplicado a cada mensagem do kernel quando ela chega.

    :meth:`admit` recebe a mensagem (do IOPub) e devolve a mensagem a guardar (talvez cortada, com
    uma nota em pt-BR) ou ``None`` (descartada). Os limites por tipo valem por célula; o total,
    pelo notebook (só as células do notebook contam: as células sintéticas dos pedidos do juiz
    não entram nele).
    """

    def __init__(self, limits: SubmissionLimits, probe_mime: str = ""):
        self.limits = limits
        self.probe_mime = probe_mime
        self.notebook_used = 0
        self.truncated = 0  # quantas saídas foram cortadas ou descartadas
        self._cell = None
        self._used: dict[str, int] = {}
        self._noted: set[str] = set()

    def cap(self, kind: str) -> int:
        limits = self.limits
        return {
            "stream": limits.stream_bytes,
            "text": limits.text_bytes,
            "html": limits.html_bytes,
            "image": limits.image_bytes,
            "json": limits.json_bytes,
            "error": limits.error_bytes,
        }.get(kind, limits.other_bytes)

    def _start(self, cell) -> None:
        if cell is not self._cell:
            self._cell, self._used, self._noted = cell, {}, set()

    def _note(self, kind: str, reason: str = "") -> str:
        self.truncated += 1
        if reason:
            return f"\n[… saída cortada na correção: {reason}]\n"
        return (
            f"\n[… saída cortada na correção: {_KIND_LABEL[kind]} desta célula passou de "
            f"{size_text(self.cap(kind))}]\n"
        )

    def _notebook_full(self, real: bool) -> bool:
        return real and self.notebook_used >= self.limits.notebook_output_bytes

    def _take(self, kind: str, size: int, real: bool) -> int:
        """Quantos bytes de uma saída de ``size`` bytes cabem (e os desconta)."""
        room = self.cap(kind) - self._used.get(kind, 0)
        if real:
            room = min(room, self.limits.notebook_output_bytes - self.notebook_used)
        take = max(0, min(size, room))
        self._used[kind] = self._used.get(kind, 0) + take
        if real:
            self.notebook_used += take
        return take

    def _full_reason(self, real: bool) -> str:
        if self._notebook_full(real):
            return f"as saídas do notebook passaram de {size_text(self.limits.notebook_output_bytes)}"
        return ""

    def admit(self, msg: dict, cell, real: bool = True) -> dict | None:
        """A mensagem a entregar ao nbclient (cortada se preciso) ou ``None``."""
        msg_type = msg.get("msg_type") or msg.get("header", {}).get("msg_type", "")
        content = msg.get("content")
        if not isinstance(content, dict):
            return msg
        if msg_type.startswith("comm"):
            # Estado de widgets: substitui o anterior; só o tamanho de cada mensagem conta.
            size = len(json.dumps(content.get("data", {}), default=str))
            return msg if size <= self.limits.other_bytes else None
        if msg_type not in _OUTPUT_TYPES:
            return msg
        self._start(cell)
        if msg_type == "stream":
            return self._admit_stream(msg, content, real)
        if msg_type == "error":
            return self._admit_error(msg, content, real)
        return self._admit_data(msg, content, real, update=msg_type == "update_display_data")

    def _admit_stream(self, msg, content, real):
        text = content.get("text")
        if not isinstance(text, str):
            return None
        size = _utf8_len(text, self.cap("stream"))
        take = self._take("stream", size, real)
        if take >= size:
            return msg
        if "stream" in self._noted:
            return None
        self._noted.add("stream")
        content["text"] = _cut(text, take) + self._note("stream", self._full_reason(real))
        return msg

    def _admit_error(self, msg, content, real):
        parts = [str(content.get("ename", ""))[:200], str(content.get("evalue", ""))]
        traceback = content.get("traceback")
        lines = [str(line) for line in traceback] if isinstance(traceback, list) else []
        size = sum(len(p) for p in parts) + sum(len(line) for line in lines)
        take = self._take("error", size, real)
        if take >= size:
            return msg
        note = self._note("error", self._full_reason(real)).strip()
        evalue = _cut(parts[1], max(take // 2, 200))
        kept, room = [], max(take - len(evalue), 0)
        for line in reversed(lines):  # o fim do traceback é o que explica o erro
            if len(line) > room:
                break
            kept.insert(0, line)
            room -= len(line)
        content.update(ename=parts[0], evalue=evalue + " " + note, traceback=[note, *kept])
        return msg

    def _admit_data(self, msg, content, real, update: bool):
        data = content.get("data")
        if not isinstance(data, dict):
            return None
        if self.probe_mime and self.probe_mime in data:
            # A resposta a um pedido do juiz: dados, lidos inteiros ou descartados.
            value = data[self.probe_mime]
            ok = isinstance(value, str) and len(value) <= self.limits.probe_bytes
            return msg if ok else None
        if update:
            # Troca uma saída que já existe: cada tipo só precisa caber sozinho no limite dele.
            for mime, value in list(data.items()):
                text = value if isinstance(value, str) else json.dumps(value, default=str)
                if len(text) > self.cap(_kind(mime)):
                    del data[mime]
                    data["text/plain"] = self._note(_kind(mime)).strip()
            content["metadata"] = {}
            return msg
        kept: dict = {}
        notes = []
        for mime, value in data.items():
            kind = _kind(mime)
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            size = _utf8_len(text, self.cap(kind))
            take = self._take(kind, size, real)
            if take >= size:
                kept[mime] = value
            elif kind in ("text", "html") and take > 0:
                kept[mime] = _cut(text, take) + self._note(kind, self._full_reason(real))
                self._noted.add(kind)
            elif kind not in self._noted:
                self._noted.add(kind)
                notes.append(self._note(kind, self._full_reason(real)).strip())
            else:
                self.truncated += 1
        if not kept and not notes:
            return None
        if notes:
            plain = kept.get("text/plain")
            kept["text/plain"] = "\n".join(([plain] if isinstance(plain, str) else []) + notes)
        content["data"] = kept
        metadata = content.get("metadata")
        if not isinstance(metadata, dict) or len(json.dumps(metadata, default=str)) > 4 * KiB:
            content["metadata"] = {}
        return msg


# Roda no kernel da correção antes da primeira célula: toda saída que o kernel publica passa por um
# corte (``Session.send``), para que um print ou um display enorme chegue ao corretor já pequeno e o
# canal de saídas continue vivo. Quem desfaz o corte e manda mais que ``message_bytes`` numa mensagem
# só perde o canal: o corretor percebe e encerra a entrega com o motivo.
KERNEL_SETUP = r"""
def _tc_limit_outputs(cap, probe_mime, probe_cap):
    import functools, json
    from jupyter_client.session import Session
    original = Session.send
    kinds = ("stream", "display_data", "execute_result", "error", "update_display_data")

    def note(size):
        return "\n[… saída cortada na correção: uma mensagem de %d bytes; o limite é %d]\n" % (size, cap)

    def shrink(content):
        text = content.get("text")
        if isinstance(text, str) and len(text) > cap:
            content["text"] = text[:cap] + note(len(text))
        data = content.get("data")
        if isinstance(data, dict):
            for mime, value in list(data.items()):
                limit = probe_cap if mime == probe_mime else cap
                size = len(value) if isinstance(value, str) else len(json.dumps(value, default=str))
                if size <= limit:
                    continue
                if mime == probe_mime or not isinstance(value, str) or not mime.startswith("text/"):
                    del data[mime]
                    data.setdefault("text/plain", note(size))
                else:
                    data[mime] = value[:cap] + note(size)
        if isinstance(content.get("metadata"), dict) and len(str(content["metadata"])) > 4096:
            content["metadata"] = {}
        for key in ("ename", "evalue"):
            value = content.get(key)
            if isinstance(value, str) and len(value) > cap:
                content[key] = value[:cap] + note(len(value))
        trace = content.get("traceback")
        if isinstance(trace, list) and sum(len(str(x)) for x in trace) > cap:
            kept, room = [], cap
            for line in reversed([str(x) for x in trace]):
                if len(line) > room:
                    break
                kept.insert(0, line)
                room -= len(line)
            content["traceback"] = [note(sum(len(str(x)) for x in trace)).strip(), *kept]

    @functools.wraps(original)
    def send(self, stream, msg_or_type, content=None, *args, **kwargs):
        msg_type = msg_or_type
        if isinstance(msg_or_type, dict):
            msg_type = msg_or_type.get("msg_type") or msg_or_type.get("header", {}).get("msg_type")
            if content is None and isinstance(msg_or_type.get("content"), dict):
                shrink(msg_or_type["content"])
        if msg_type in kinds:
            if isinstance(content, dict):
                shrink(content)
            if kwargs.get("buffers") and sum(len(b) for b in kwargs["buffers"]) > cap:
                kwargs["buffers"] = None
        return original(self, stream, msg_or_type, content, *args, **kwargs)

    Session.send = send

_tc_limit_outputs(__CAP__, __PROBE_MIME__, __PROBE_CAP__)
del _tc_limit_outputs
"""


def kernel_setup(limits: SubmissionLimits, probe_mime: str) -> str:
    """O código que o corretor roda no kernel antes da primeira célula (:data:`KERNEL_SETUP`)."""
    cap = min(limits.kernel_output_bytes, limits.message_bytes // 2)
    probe_cap = min(limits.probe_bytes, limits.message_bytes // 2)
    return (
        KERNEL_SETUP.replace("__CAP__", str(int(cap)))
        .replace("__PROBE_MIME__", repr(probe_mime))
        .replace("__PROBE_CAP__", str(int(probe_cap)))
    )


def limited_client_class(limits: SubmissionLimits):
    """O cliente de kernel assíncrono cujas conexões não leem mensagens grandes demais.

    ``ZMQ_MAXMSGSIZE``: o ZeroMQ recusa (sem alocar) uma parte de mensagem maior que
    ``message_bytes`` e reconecta; ``ZMQ_RCVHWM`` no IOPub: no máximo ``iopub_queue`` mensagens
    esperando leitura (as demais são descartadas pelo kernel).
    """
    import zmq
    from jupyter_client.asynchronous import AsyncKernelClient

    max_bytes, queue = int(limits.message_bytes), int(limits.iopub_queue)

    class LimitedKernelClient(AsyncKernelClient):
        _monitor = None
        _lost = False

        def _context_default(self):
            context = super()._context_default()
            # Opções de todo socket criado neste contexto (o contexto é só deste cliente).
            context.setsockopt(zmq.MAXMSGSIZE, max_bytes)
            context.setsockopt(zmq.RCVHWM, queue)
            return context

        def start_channels(self, *args, **kwargs):
            super().start_channels(*args, **kwargs)
            # Uma mensagem acima de ZMQ_MAXMSGSIZE derruba a conexão do IOPub (que não volta): o
            # monitor do socket avisa (:meth:`iopub_lost`).
            address = f"inproc://tc-iopub-{secrets.token_hex(8)}"
            self.iopub_channel.socket.monitor(address, zmq.EVENT_DISCONNECTED)
            self._monitor = zmq.Context.shadow(self.context.underlying).socket(zmq.PAIR)
            self._monitor.linger = 0
            self._monitor.connect(address)

        def iopub_lost(self) -> bool:
            """A conexão das saídas caiu (mensagem grande demais, ou o kernel morreu)?"""
            from zmq.utils.monitor import parse_monitor_message

            while self._monitor is not None and not self._lost:
                try:
                    event = parse_monitor_message(self._monitor.recv_multipart(zmq.NOBLOCK))
                except zmq.Again:
                    break
                self._lost = event["event"] == zmq.EVENT_DISCONNECTED
            return self._lost

        def stop_channels(self):
            if self._monitor is not None:
                self._monitor.close()
                self._monitor = None
            super().stop_channels()

    LimitedKernelClient.__module__ = __name__
    return LimitedKernelClient


# ====================================================================== o notebook corrigido e a devolutiva


def _cell_bytes(cell) -> int:
    return len(json.dumps(cell, default=str))


def _outputs_bytes(cell) -> int:
    return len(json.dumps(cell.get("outputs", []), default=str))


def _is_test(cell) -> bool:
    return bool(cell.get("metadata", {}).get(META_KEY, {}).get("verdict"))


def cap_notebook(nb, max_bytes: int, what: str = "o notebook corrigido") -> list[str]:
    """Corta ``nb`` (no lugar) até caber em ``max_bytes`` de JSON; devolve o que foi cortado (pt-BR).

    Primeiro as maiores saídas das células que não são de teste (o veredito do juiz fica), depois os
    anexos e os maiores códigos/textos. Cada corte deixa uma nota em pt-BR na célula.
    """
    from nbformat.v4 import new_output

    total = len(json.dumps(nb, default=str))
    if total <= max_bytes:
        return []
    cuts = []
    limit = size_text(max_bytes)
    cells = [c for c in nb.cells if c.get("cell_type") == "code" and not _is_test(c) and c.get("outputs")]
    for cell in sorted(cells, key=_outputs_bytes, reverse=True):
        if total <= max_bytes:
            break
        before = _outputs_bytes(cell)
        note = f"[saídas desta célula ({size_text(before)}) omitidas: {what} passou de {limit}]\n"
        cell.outputs = [new_output("stream", name="stdout", text=note)]
        total -= before - _outputs_bytes(cell)
        cuts.append(f"saídas de {size_text(before)} omitidas")
    for cell in sorted(nb.cells, key=_cell_bytes, reverse=True):
        if total <= max_bytes:
            break
        before = _cell_bytes(cell)
        cell.pop("attachments", None)
        source = cell.get("source", "")
        room = max(0, len(source) - (total - max_bytes) - 200)
        if len(source) > room:
            cell["source"] = source[:room] + f"\n[… texto cortado: {what} passou de {limit}]"
        total -= before - _cell_bytes(cell)
        cuts.append(f"célula de {size_text(before)} cortada")
    return cuts


def _cap_feedback_class():
    from nbconvert.preprocessors import Preprocessor

    class CapFeedback(Preprocessor):
        """Preprocessador da devolutiva: o notebook que vira HTML cabe numa fração de ``feedback_bytes``.

        O HTML escapa o texto (``<`` vira ``&lt;``) e acrescenta o modelo; o limite rígido do arquivo
        é conferido depois, no exportador (:func:`bound_feedback_html`).
        """

        def preprocess(self, nb, resources):
            limits = SubmissionLimits(parent=self)
            cap_notebook(nb, limits.feedback_bytes // 4, "a devolutiva")
            return nb, resources

    CapFeedback.__module__ = __name__
    return CapFeedback


def bound_feedback_html(render, nb, resources, limits: SubmissionLimits):
    """Roda ``render(nb, resources)`` e garante que o HTML caiba em ``feedback_bytes``.

    Passou: de novo sem as saídas das células comuns e com os textos curtos; se ainda assim não
    couber, uma página curta que diz o que houve e lista os vereditos.
    """
    import copy
    import html as html_lib

    output, resources = render(nb, resources)
    if len(output.encode("utf-8", "surrogatepass")) <= limits.feedback_bytes:
        return output, resources
    small = copy.deepcopy(nb)
    cap_notebook(small, limits.feedback_bytes // 16, "a devolutiva")
    output, resources = render(small, resources)
    if len(output.encode("utf-8", "surrogatepass")) <= limits.feedback_bytes:
        return output, resources
    items = []
    for cell in nb.cells:
        verdict = cell.get("metadata", {}).get(META_KEY, {}).get("verdict")
        if isinstance(verdict, dict):
            items.append(
                f"<li>{html_lib.escape(str(verdict.get('exercise', '')))}: "
                f"{html_lib.escape(str(verdict.get('points', 0)))} de "
                f"{html_lib.escape(str(verdict.get('max_points', 0)))} — "
                f"{html_lib.escape(str(verdict.get('message', ''))[:2000])}</li>"
            )
    page = (
        '<!DOCTYPE html><html lang="pt-BR"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
        "<title>Devolutiva</title></head><body><h1>Devolutiva resumida</h1>"
        f"<p>A devolutiva completa passou de {size_text(limits.feedback_bytes)} (a entrega gerou saídas "
        "ou textos grandes demais) e foi trocada por este resumo dos testes.</p>"
        f"<ul>{''.join(items)}</ul></body></html>"
    )
    return page, resources


# ====================================================================== cgroups: memória, processos, CPU

CGROUP_ROOT = Path("/sys/fs/cgroup")
_V1_CONTROLLERS = ("memory", "pids", "cpu")
_WARNED = False


def _own_cgroups() -> dict[str, str]:
    """Controlador -> caminho do cgroup deste processo (``""`` para o v2)."""
    own = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return own
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def _layout() -> tuple[int, dict[str, Path]] | None:
    """A versão dos cgroups e a pasta-pai de cada controlador (onde criar os cgroups dos kernels)."""
    own = _own_cgroups()
    if all((CGROUP_ROOT / c / "cgroup.procs").exists() for c in _V1_CONTROLLERS):
        # cgroup v1: uma hierarquia por controlador, abaixo do cgroup deste processo.
        return 1, {c: CGROUP_ROOT / c / own.get(c, "/").lstrip("/") for c in _V1_CONTROLLERS}
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return 2, {"": CGROUP_ROOT / own.get("", "/").lstrip("/")}
    return None


def _write(path: Path, value) -> None:
    path.write_text(f"{value}\n")


class KernelCgroup:
    """O cgroup de um kernel: limites de memória, processos e CPU; apagado quando o kernel termina.

    Criado dentro do cgroup do corretor (``<cgroup do corretor>/<cgroup_name>/k<pid>-<aleatório>``),
    em cada controlador (v1) ou numa pasta só (v2). :meth:`wrap` põe o comando do kernel dentro
    dele antes de executá-lo (um ``sh`` que escreve o próprio pid em ``cgroup.procs`` e faz ``exec``):
    tudo o que o kernel criar nasce lá dentro.
    """

    def __init__(self, version: int, dirs: dict[str, Path], limits: SubmissionLimits):
        self.version, self.dirs, self.limits = version, dirs, limits

    @classmethod
    def create(cls, limits: SubmissionLimits) -> KernelCgroup:
        layout = _layout()
        if layout is None:
            raise OSError("o sistema de arquivos dos cgroups (/sys/fs/cgroup) não tem memory, pids e cpu")
        version, parents = layout
        name = f"k{os.getpid()}-{secrets.token_hex(4)}"
        dirs: dict[str, Path] = {}
        group = cls(version, dirs, limits)
        try:
            for controller, parent in parents.items():
                base = parent / limits.cgroup_name
                if not base.is_dir():
                    base.mkdir(exist_ok=True)
                if version == 2:
                    _enable_v2(parent)
                    _enable_v2(base)
                _remove_stale(base)
                dirs[controller] = base / name
                dirs[controller].mkdir()
            group._set_limits()
        except BaseException:
            group.remove()
            raise
        return group

    def _file(self, controller: str, name: str) -> Path:
        return self.dirs["" if self.version == 2 else controller] / name

    def _set_limits(self) -> None:
        limits = self.limits
        period = 100_000
        quota = max(int(limits.cpus * period), 1000)
        if self.version == 2:
            _write(self._file("", "memory.max"), limits.memory_bytes)
            swap = self._file("", "memory.swap.max")
            if swap.exists():
                _write(swap, 0)
            _write(self._file("", "pids.max"), limits.max_pids)
            _write(self._file("", "cpu.max"), f"{quota} {period}")
            return
        _write(self._file("memory", "memory.limit_in_bytes"), limits.memory_bytes)
        memsw = self._file("memory", "memory.memsw.limit_in_bytes")
        if memsw.exists():
            try:
                _write(memsw, limits.memory_bytes)
            except OSError:
                pass  # sem contabilidade de swap: o limite acima já vale para tudo
        _write(self._file("pids", "pids.max"), limits.max_pids)
        _write(self._file("cpu", "cpu.cfs_period_us"), period)
        _write(self._file("cpu", "cpu.cfs_quota_us"), quota)

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def wrap(self, cmd: list[str]) -> list[str]:
        """``cmd`` precedido do ``sh`` que entra no cgroup e faz ``exec`` (falha alto se não entrar)."""
        enter = " && ".join(f"echo $$ > {shlex.quote(path)}" for path in self.procs_files())
        return ["/bin/sh", "-c", f'{enter} || exit 111; exec "$@"', "tc-cgroup", *cmd]

    def _read(self, controller: str, name: str) -> str:
        try:
            return self._file(controller, name).read_text()
        except OSError:
            return ""

    @staticmethod
    def _field(text: str, key: str) -> int:
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return int(parts[1])
        return 0

    def oom_kills(self) -> int:
        if self.version == 2:
            return self._field(self._read("", "memory.events"), "oom_kill")
        return self._field(self._read("memory", "memory.oom_control"), "oom_kill")

    def pids_refused(self) -> int:
        return self._field(self._read("pids", "pids.events"), "max")

    def peak(self) -> dict[str, int]:
        """O pico de memória (bytes) e de processos do kernel, quando o sistema os informa."""
        memory = (
            self._read("", "memory.peak")
            if self.version == 2
            else self._read("memory", "memory.max_usage_in_bytes")
        )
        pids = self._read("pids", "pids.peak")
        return {
            "memoria": int(memory) if memory.strip().isdigit() else 0,
            "processos": int(pids) if pids.strip().isdigit() else 0,
        }

    def limit_hit(self) -> str:
        """O limite que encerra a entrega, em pt-BR (vazio: nenhum): a memória (o cgroup já matou)."""
        if self.oom_kills():
            return (
                f"memória esgotada: o notebook passou do limite de {size_text(self.limits.memory_bytes)} "
                "e o kernel foi encerrado"
            )
        return ""

    def pids_note(self, refused: int) -> str:
        """A nota (pt-BR) de uma célula em que o cgroup recusou ``refused`` processos ou threads."""
        return (
            f"[… a correção recusou {refused} criação(ões) de processo ou thread nesta célula: o limite é "
            f"{self.limits.max_pids} processos e threads por notebook]\n"
        )

    def pids(self) -> list[int]:
        found = set()
        for path in self.procs_files():
            try:
                found.update(int(x) for x in Path(path).read_text().split())
            except (OSError, ValueError):
                pass
        return sorted(found)

    def remove(self) -> None:
        """Mata o que sobrou dentro do cgroup e apaga as pastas (pode ser chamado mais de uma vez)."""
        for controller, folder in list(self.dirs.items()):
            _kill_and_remove(folder)
            if not folder.exists():
                del self.dirs[controller]


def _enable_v2(folder: Path) -> None:
    control = folder / "cgroup.subtree_control"
    enabled = control.read_text().split() if control.exists() else []
    for controller in ("memory", "pids", "cpu"):
        if controller not in enabled:
            _write(control, f"+{controller}")


def _kill_and_remove(folder: Path) -> None:
    kill = folder / "cgroup.kill"
    for _ in range(1000):  # até ~10 s com a máquina carregada
        if not folder.exists():
            return
        try:
            pids = [int(x) for x in (folder / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        if pids:
            if kill.exists():
                try:
                    _write(kill, 1)
                except OSError:
                    pass
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)  # os processos mortos ainda saindo do cgroup


def _remove_stale(base: Path) -> None:
    """Apaga os cgroups de kernels cujo corretor já morreu (um worker morto no meio de uma tarefa)."""
    try:
        children = list(base.iterdir())
    except OSError:
        return
    for child in children:
        owner = child.name[1:].split("-", 1)[0]
        if not child.is_dir() or not child.name.startswith("k") or not owner.isdigit():
            continue
        if not Path(f"/proc/{owner}").exists():
            _kill_and_remove(child)


def cgroup_problem() -> str | None:
    """Por que os kernels não podem ter cgroups aqui (pt-BR); ``None`` se podem."""
    if not sys.platform.startswith("linux"):
        return "cgroups só existem no Linux"
    try:
        KernelCgroup.create(SubmissionLimits()).remove()
    except OSError as exc:
        return f"não foi possível criar um cgroup ({exc})"
    return None


def kernel_cgroup(manager) -> KernelCgroup | None:
    """O cgroup do próximo kernel de ``manager``, ou ``None`` com um aviso (só os rlimits valem)."""
    global _WARNED
    limits = SubmissionLimits(parent=manager)
    try:
        return KernelCgroup.create(limits)
    except OSError as exc:
        if not _WARNED:
            _WARNED = True
            print(
                f"Aviso: kernels da correção SEM cgroup ({exc}); memória, processos e CPU limitados só "
                "pelo prlimit (por processo), não por entrega.",
                file=sys.stderr,
            )
        manager.log.warning("Kernel sem cgroup: %s", exc)
        return None


def __getattr__(name: str):
    # A classe do nbconvert só é importada quando o nbgrader a pede pelo nome.
    if name == "CapFeedback":
        cls = _cap_feedback_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
