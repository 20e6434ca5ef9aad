"""O conteúdo das entregas fica inerte onde uma pessoa o vê: Formgrader e devolutiva HTML.

Uma resposta escrita (Markdown) com ``<img src=x onerror=...>``, uma saída ``text/html`` com
``<script>``, uma saída ``application/javascript`` ou um SVG com ``onload`` rodariam JavaScript na
página do professor (Formgrader, com a sessão dele no Jupyter) ou na devolutiva do aluno. Aqui
tudo isso passa pelo nh3 (o sanitizador do ammonia, em Rust) com uma lista do que é permitido:

- :func:`clean_html` — o HTML permitido: formatação de texto, tabelas, listas, links ``http(s)``/
  ``mailto``/``#`` e imagens só ``data:image/...;base64`` (nenhum pedido sai da página por uma
  imagem). Sem ``script``, ``style``, ``iframe``, ``svg``, ``form``, atributos ``on*``, ``style``,
  ``id`` ou classes (fora ``anchor-link`` e ``dataframe``).
- :class:`SanitizeNotebook` — o preprocessador: saídas das células de código (``text/html``
  limpo; SVG vira ``<img>`` com ``data:``, que o navegador nunca executa; ``text/markdown`` vira
  HTML limpo; PNG/JPEG/GIF só com base64 válido; JavaScript, widgets e outros tipos saem, com um
  aviso em pt-BR), células *raw* (HTML limpo), anexos do Markdown (só imagens, com limites de
  tamanho e de referências: acima deles, saem com um aviso em pt-BR), ``id``, ``tags`` e
  ``execution_count`` malformados, e o estado de widgets do notebook (que faria a página carregar
  scripts de uma CDN).
- :func:`markdown2html_inert` — o filtro Jinja ``markdown2html`` do nbconvert, seguido de
  :func:`clean_html`: o Markdown das células (a resposta do aluno continua como ele escreveu no
  notebook) só vira HTML limpo.

Onde roda (``nbgrader_config.py``): no fim do ``autograde`` (o notebook corrigido, que o Formgrader
mostra, já sai limpo) e em todo ``HTMLExporter`` do curso (``HTMLExporter.preprocessors`` e
``HTMLExporter.filters``): o do Formgrader e o da devolutiva. As páginas ainda têm uma
Content-Security-Policy (:mod:`.formgrader_csp` e o modelo ``feedback``); veja grading/README.md.
"""

from __future__ import annotations

import base64
import binascii
import re
from copy import deepcopy

import nh3
from jinja2 import pass_context
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from traitlets import Bool, Int

__all__ = [
    "MAX_ATTACHMENT_BYTES",
    "MAX_ATTACHMENT_INLINE_BYTES",
    "SanitizeNotebook",
    "clean_html",
    "markdown2html_inert",
    "sanitize_notebook",
]

# Anexos de células Markdown: cada referência ``attachment:nome`` vira uma cópia em base64 na página.
MAX_ATTACHMENT_BYTES = 1_000_000  # por anexo (base64)
MAX_ATTACHMENT_INLINE_BYTES = 4_000_000  # soma, no notebook, de referências × tamanho

_IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif")
_ATTACHMENT_MIMES = (*_IMAGE_MIMES, "image/webp")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
_DATA_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/=\s]*", re.IGNORECASE)
_NUMBER = re.compile(r"\d{1,5}(\.\d+)?%?")
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SAFE_TAG = re.compile(r"[\w-]{1,64}")
_ATTACHMENT_REF = re.compile(r"attachment:([^\s)\"'<>\]]*)")

_TAGS = set(nh3.ALLOWED_TAGS) - {"map", "area", "nav", "header", "footer"}
_ATTRIBUTES = deepcopy(nh3.ALLOWED_ATTRIBUTES)
_ATTRIBUTES.pop("area", None)
_ATTRIBUTES["a"] = {"href", "hreflang", "title"}
_ATTRIBUTES["img"] = {"src", "alt", "width", "height", "title"}
_CLASSES = {"a": {"anchor-link"}, "table": {"dataframe"}}
_URL_SCHEMES = {"http", "https", "mailto", "data"}


def _attribute_filter(tag: str, attr: str, value: str) -> str | None:
    """Endereços só para fora da página por um clique; imagens só embutidas (``data:``)."""
    if attr == "src":
        return value if _DATA_IMAGE.fullmatch(value.strip()) else None
    if attr in ("href", "cite"):
        low = value.strip().lower()
        return value if low.startswith(("http://", "https://", "mailto:", "#")) else None
    if attr in ("width", "height"):
        return value if _NUMBER.fullmatch(value.strip()) else None
    return value


_CLEANER = nh3.Cleaner(
    tags=_TAGS,
    attributes=_ATTRIBUTES,
    allowed_classes=_CLASSES,
    url_schemes=_URL_SCHEMES,
    attribute_filter=_attribute_filter,
    link_rel="noopener noreferrer nofollow",
    strip_comments=True,
)


def clean_html(html: str) -> str:
    """O HTML de uma entrega sem nada que rode ou busque algo (ver o módulo)."""
    return _CLEANER.clean(html if isinstance(html, str) else "")


def _render_markdown(source: str, attachments: dict | None = None) -> str:
    """Markdown -> HTML como o ``HTMLExporter.markdown2html`` do nbconvert (com as fórmulas)."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    renderer = IPythonRenderer(escape=False, attachments=attachments or {}, anchor_link_text="¶")
    return MarkdownWithMath(renderer=renderer).render(source)


@pass_context
def markdown2html_inert(context, source):
    """O filtro ``markdown2html`` dos modelos do nbconvert, com o HTML resultante limpo."""
    cell = context.get("cell") or {}
    attachments = cell.get("attachments") if isinstance(cell, dict) else None
    return clean_html(_render_markdown(source or "", attachments if isinstance(attachments, dict) else None))


def _text(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return ""


def _valid_base64(data: str) -> bool:
    if not _BASE64.fullmatch(data):
        return False
    try:
        base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _svg_as_img(svg: str) -> str:
    encoded = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img alt="figura (SVG)" src="data:image/svg+xml;base64,{encoded}">'


def _removed_note(kinds: list[str]) -> str:
    return f"[saída removida na correção: o tipo {', '.join(sorted(set(kinds)))} não é mostrado]"


def _clean_output(output) -> NotebookNode | None:
    kind = output.get("output_type")
    if kind == "stream":
        return NotebookNode(
            {
                "output_type": "stream",
                "name": "stderr" if output.get("name") == "stderr" else "stdout",
                "text": _text(output.get("text")),
            }
        )
    if kind == "error":
        return NotebookNode(
            {
                "output_type": "error",
                "ename": str(output.get("ename", ""))[:200],
                "evalue": output["evalue"] if isinstance(output.get("evalue"), str) else "",
                "traceback": [t for t in output.get("traceback", []) if isinstance(t, str)],
            }
        )
    if kind not in ("display_data", "execute_result"):
        return None
    data = output.get("data") if isinstance(output.get("data"), dict) else {}
    meta = output.get("metadata") if isinstance(output.get("metadata"), dict) else {}
    clean: dict[str, str] = {}
    clean_meta: dict[str, dict] = {}
    removed: list[str] = []
    for mime, value in data.items():
        text = _text(value)
        if mime == "text/plain":
            clean[mime] = text
        elif mime == "text/latex":
            clean[mime] = text  # os modelos do nbconvert escapam este tipo
        elif mime == "text/html":
            clean[mime] = clean_html(text)
        elif mime in _IMAGE_MIMES:
            if _valid_base64(text):
                clean[mime] = text
                size = meta.get(mime) if isinstance(meta.get(mime), dict) else {}
                dims = {
                    k: v for k, v in size.items() if k in ("width", "height") and isinstance(v, int | float)
                }
                if dims:
                    clean_meta[mime] = dims
            else:
                removed.append(mime)
        elif mime == "image/svg+xml":
            clean.setdefault("text/html", _svg_as_img(text))
        elif mime == "text/markdown":
            clean.setdefault("text/html", clean_html(_render_markdown(text)))
        else:
            removed.append(mime)  # application/javascript, widgets, text/vnd.mermaid, ...
    if removed and not clean:
        clean["text/plain"] = _removed_note(removed)
    out = NotebookNode(
        {"output_type": kind, "data": NotebookNode(clean), "metadata": NotebookNode(clean_meta)}
    )
    if kind == "execute_result":
        count = output.get("execution_count")
        out["execution_count"] = count if isinstance(count, int) and not isinstance(count, bool) else None
    return out


def _attachment_cost(source: str, name: str) -> int:
    return source.count(f"attachment:{name}")


class SanitizeNotebook(Preprocessor):
    """Deixa inerte o que a entrega mostra (ver o módulo); anexos acima dos limites saem com aviso."""

    enabled = Bool(True, help="Os preprocessadores do nbconvert vêm desligados por padrão.").tag(config=True)
    max_attachment_bytes = Int(MAX_ATTACHMENT_BYTES, help="Tamanho máximo de um anexo (base64).").tag(
        config=True
    )
    max_attachment_inline_bytes = Int(
        MAX_ATTACHMENT_INLINE_BYTES,
        help="Soma máxima, no notebook, de referências a anexos × tamanho do anexo (o que a página embute).",
    ).tag(config=True)

    def preprocess(self, nb, resources):
        budget = [self.max_attachment_inline_bytes]
        metadata = nb.get("metadata")
        if isinstance(metadata, dict):
            metadata.pop("widgets", None)
        for index, cell in enumerate(nb.cells):
            nb.cells[index] = self._clean_cell(cell, budget)
        return nb, resources

    def _clean_attachments(self, cell, budget: list[int]) -> None:
        attachments = cell.get("attachments")
        if not attachments:
            cell.pop("attachments", None)
            return
        if cell.cell_type != "markdown" or not isinstance(attachments, dict):
            cell.pop("attachments", None)
            return
        source = cell.source
        kept: dict = {}
        problems: list[str] = []
        for name, bundle in attachments.items():
            if not isinstance(bundle, dict) or not isinstance(name, str):
                problems.append("anexo malformado")
                continue
            images = {
                mime: _text(data)
                for mime, data in bundle.items()
                if mime in _ATTACHMENT_MIMES and _valid_base64(_text(data))
            }
            if not images:
                problems.append(f"{name!r}: só imagens PNG, JPEG, GIF ou WebP")
                continue
            mime, data = next(iter(images.items()))
            if len(data) > self.max_attachment_bytes:
                problems.append(
                    f"{name!r}: {len(data) // 1000} kB (limite: {self.max_attachment_bytes // 1000} kB)"
                )
                continue
            kept[name] = NotebookNode({mime: data})
        cost = sum(len(next(iter(b.values()))) * _attachment_cost(source, n) for n, b in kept.items())
        if cost > budget[0]:
            problems.append(
                f"as referências aos anexos somariam {cost / 1e6:.1f} MB na página "
                f"(limite: {self.max_attachment_inline_bytes / 1e6:.1f} MB por notebook)"
            )
            kept = {}
        else:
            budget[0] -= cost
        if problems:
            cell.source = source + "\n\n*[Anexos removidos na correção: " + "; ".join(problems)[:500] + ".]*"
        if kept:
            cell["attachments"] = NotebookNode(kept)
        else:
            cell.pop("attachments", None)

    def _clean_cell(self, cell, budget: list[int]):
        if not isinstance(cell.get("id"), str) or not _SAFE_ID.fullmatch(cell["id"]):
            cell.pop("id", None)
        meta = cell.get("metadata")
        if isinstance(meta, dict) and "tags" in meta:
            tags = meta["tags"] if isinstance(meta["tags"], list) else []
            meta["tags"] = [t for t in tags if isinstance(t, str) and _SAFE_TAG.fullmatch(t)]
        cell["source"] = _text(cell.get("source"))
        if cell.get("cell_type") == "code":
            outputs = [_clean_output(o) for o in cell.get("outputs", []) if isinstance(o, dict)]
            cell["outputs"] = [o for o in outputs if o is not None]
            count = cell.get("execution_count")
            if not (isinstance(count, int) and not isinstance(count, bool)):
                cell["execution_count"] = None
            cell.pop("attachments", None)
        elif cell.get("cell_type") == "raw":
            # Os modelos HTML do nbconvert copiam a célula raw para a página como está.
            cell["source"] = clean_html(cell["source"])
            cell.pop("attachments", None)
        else:
            self._clean_attachments(cell, budget)
            # Uma referência a um anexo que não existe (removido aqui ou nunca entregue) faria o
            # nbconvert recusar a página inteira ("missing attachment"): vira um endereço sem efeito.
            names = set(cell.get("attachments") or {})
            cell["source"] = _ATTACHMENT_REF.sub(
                lambda m: m.group(0) if m.group(1) in names else f"anexo-removido:{m.group(1)}",
                cell["source"],
            )
        return cell


def sanitize_notebook(nb: NotebookNode) -> NotebookNode:
    """Atalho: :class:`SanitizeNotebook` com os limites padrão, no próprio notebook."""
    nb, _ = SanitizeNotebook().preprocess(nb, {})
    return nb
