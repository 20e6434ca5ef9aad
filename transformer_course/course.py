"""O mapa do curso: os capítulos e, para cada um, onde mora o seu código.

É a casa única da lista de capítulos (scripts, testes, o hub e o livro a leem daqui) e da tabela
capítulo → módulos que a docstring do pacote mostra; ``tests/test_layout.py`` mantém as duas
verdadeiras (todo módulo do pacote aparece, todo módulo citado existe, os notebooks importam o
que a tabela diz). Este módulo não importa nada pesado.
"""

from __future__ import annotations

__all__ = ["CHAPTERS", "MODELS", "chapter_of"]

#: Os capítulos, na ordem do curso: ``notebooks/<capítulo>.py`` e ``source|release|solutions/<capítulo>/``.
CHAPTERS: tuple[str, ...] = (
    "01_embeddings_posicao",
    "02_atencao",
    "03_multi_head",
    "04_transformer",
    "05_mascaras",
    "06_treino_warmup",
    "07_familias",
)

#: Os módulos de modelos de cada capítulo (referências dos exercícios e o que elas usam). Além
#: deles, cada capítulo NN tem ``checks/chNN.py`` (verificações e registro dos exercícios),
#: ``plots/chNN.py`` (figuras), ``widgets/chNN.py`` (explorações) e, quando treina ou mede algo,
#: ``experiments/chNN.py``.
MODELS: dict[str, tuple[str, ...]] = {
    "01_embeddings_posicao": ("positional",),
    "02_atencao": ("attention",),
    "03_multi_head": ("multihead",),
    "04_transformer": ("layers",),
    "05_mascaras": ("masks",),
    "06_treino_warmup": ("training", "data"),
    "07_familias": ("generation", "seq2seq", "costs", "text"),
}


def chapter_of(module: str) -> str:
    """O capítulo de um módulo de modelos (``"masks"`` -> ``"05_mascaras"``)."""
    for chapter, modules in MODELS.items():
        if module in modules:
            return chapter
    raise KeyError(f"{module!r} não é um módulo de modelos de nenhum capítulo")
