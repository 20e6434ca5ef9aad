"""Extensão do Jupyter Server: as páginas do Formgrader com uma Content-Security-Policy estrita.

O Formgrader mostra a entrega do aluno dentro da sessão do professor no Jupyter: um script que
rodasse ali usaria a API do servidor (``/api/contents``, ``/api/terminals``) como o professor. O
conteúdo já chega limpo (:mod:`.sanitize`); esta política é a segunda camada: na página, só rodam
os scripts do próprio Formgrader.

O Jupyter Server monta o cabeçalho ``Content-Security-Policy`` de cada resposta com a propriedade
``content_security_policy`` do handler (a configuração ``ServerApp.tornado_settings["headers"]``
valeria para o servidor inteiro, e o JupyterLab precisa de scripts embutidos e de ``eval``). Esta
extensão troca essa propriedade nos handlers do Formgrader (``nbgrader.server_extensions.formgrader``)
por uma política com *nonce* (um valor aleatório por resposta):

- ``script-src 'nonce-…'``: roda só o ``<script>`` que recebeu o nonce. Ele é posto, na página que
  o handler escreve, nos scripts do próprio modelo do nbgrader, antes do notebook: os de
  ``<base_url>/formgrader/static/`` e os embutidos que só definem variáveis (``var x = "...";``) ou
  que são exatamente os do modelo. Scripts de outro endereço (o MathJax de uma CDN, que o modelo do
  nbconvert cita) saem da página: as fórmulas aparecem em LaTeX.
- ``'unsafe-hashes'`` com o hash dos dois ``onclick`` do modelo (mostrar/ocultar o nome do aluno);
  qualquer outro atributo ``on*`` é bloqueado.
- ``connect-src 'self'``, ``img-src 'self' data:``, ``default-src 'none'``, ``object-src 'none'``,
  ``base-uri 'none'``, ``form-action 'self'``, ``frame-ancestors 'self'`` (o JupyterLab abre o
  Formgrader num iframe): nenhum pedido sai para outro endereço.

Ligada pelo ``jupyter_server_config.json`` do professor (``scripts/configure_lab.py --professor`` e
``hub/perfis/professor``): ``"transformer_course.instructor.formgrader_csp": true``.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets

__all__ = ["add_nonces", "install", "policy"]

# Os scripts embutidos do modelo do nbgrader 0.9.6 que não são só ``var x = "...";``.
_TEMPLATE_SCRIPTS = (
    """function toggle_name(on) {
  $(".name-shown").tooltip('hide');
  $(".name-hidden").tooltip('hide');
  if (on) {
    $(".name-shown").show();
    $(".name-hidden").hide();
  } else {
    $(".name-hidden").show();
    $(".name-shown").hide();
  }
}

$(document).ready(function() {
  $("[data-link]").each(function() {
    $(this).map(linkTo("notebook", $(this).data("link"))).removeAttr("data-link");
  });
});""",
    "$('span.glyphicon.name-hidden').tooltip("
    '{title: "Show student name", placement: "bottom", trigger: "hover"});\n'
    "  $('span.glyphicon.name-shown').tooltip("
    '{title: "Hide student name", placement: "bottom", trigger: "hover"});',
)
_EVENT_HANDLERS = ("toggle_name(true);", "toggle_name(false);")
_VARS_ONLY = re.compile(r'(\s*var [A-Za-z_][A-Za-z0-9_]* = "[^"<>\\\n]*";)+\s*')
_SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script>", re.DOTALL | re.IGNORECASE)
_SRC = re.compile(r"""\ssrc=["']([^"']*)["']""", re.IGNORECASE)
_TYPE = re.compile(r"""\stype=["']([^"']*)["']""", re.IGNORECASE)
_NOTEBOOK_START = '<div id="notebook"'


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def policy(nonce: str) -> str:
    """A Content-Security-Policy das páginas do Formgrader, com o nonce desta resposta."""
    handlers = " ".join(_sha256(h) for h in _EVENT_HANDLERS)
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src 'nonce-{nonce}' 'unsafe-hashes' {handlers}",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "font-src 'self' data:",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'self'",
        ]
    )


def _trusted(attributes: str, body: str, static_prefix: str) -> bool:
    src = _SRC.search(attributes)
    if src:
        return src.group(1).startswith(static_prefix) and not body.strip()
    kind = _TYPE.search(attributes)
    if kind and kind.group(1).lower() not in ("text/javascript", "application/javascript"):
        return False  # não é JavaScript (a configuração do MathJax): não roda de qualquer forma
    text = body.strip()
    return bool(_VARS_ONLY.fullmatch(body)) or any(text == t for t in _TEMPLATE_SCRIPTS)


def add_nonces(html: str, nonce: str, base_url: str) -> str:
    """Põe o nonce nos scripts do modelo do Formgrader (antes do notebook do aluno, se houver)."""
    static_prefix = base_url.rstrip("/") + "/formgrader/static/"
    cut = html.find(_NOTEBOOK_START)
    head, rest = (html, "") if cut < 0 else (html[:cut], html[cut:])

    def mark(match: re.Match) -> str:
        attributes, body = match.group(1), match.group(2)
        src = _SRC.search(attributes)
        if src and re.match(r"(?i)\s*(https?:)?//", src.group(1)):
            # O MathJax da CDN que o modelo do nbconvert põe: a política o bloquearia; nem é citado.
            return "<!-- script de outro endereço removido (Content-Security-Policy) -->"
        if "nonce=" in attributes.lower() or not _trusted(attributes, body, static_prefix):
            return match.group(0)
        return f'<script nonce="{nonce}"{attributes}>{body}</script>'

    return _SCRIPT.sub(mark, head) + rest


def _nonce(handler) -> str:
    value = handler.__dict__.get("_tdz_csp_nonce")
    if value is None:
        value = handler.__dict__["_tdz_csp_nonce"] = secrets.token_urlsafe(18)
    return value


def install() -> None:
    """Troca a política e o ``write`` do ``BaseHandler`` do Formgrader (uma vez por processo)."""
    from nbgrader.server_extensions.formgrader import base

    handler = base.BaseHandler
    if getattr(handler, "_tdz_csp_installed", False):
        return
    original_write = handler.write

    def content_security_policy(self) -> str:
        return policy(_nonce(self))

    def write(self, chunk):
        if isinstance(chunk, str) and chunk.lstrip()[:9].lower() == "<!doctype":  # uma página HTML
            chunk = add_nonces(chunk, _nonce(self), self.base_url)
        return original_write(self, chunk)

    handler.content_security_policy = property(content_security_policy)
    handler.write = write
    handler._tdz_csp_installed = True


def _jupyter_server_extension_points():
    return [{"module": "transformer_course.instructor.formgrader_csp"}]


def _load_jupyter_server_extension(serverapp) -> None:
    install()
    serverapp.log.info(
        "Formgrader com Content-Security-Policy estrita (transformer_course.instructor.formgrader_csp)"
    )
