"""Pacote de apoio do curso "Transformers do zero".

Onde mora cada coisa (``tests/test_layout.py`` mantém esta tabela verdadeira). Cada capítulo NN
tem, além dos seus modelos, ``checks/chNN.py`` (as verificações e o registro dos seus
exercícios), ``plots/chNN.py`` (figuras), ``widgets/chNN.py`` (explorações) e, quando treina ou
mede algo, ``experiments/chNN.py``.

=====================  ==========================================
capítulo               modelos (referências dos exercícios)
=====================  ==========================================
01_embeddings_posicao  ``positional``
02_atencao             ``attention``
03_multi_head          ``multihead``
04_transformer         ``layers``
05_mascaras            ``masks``
06_treino_warmup       ``training``, ``data``
07_familias            ``generation``, ``seq2seq``, ``costs``, ``text``
=====================  ==========================================

As demais peças, de baixo para cima (as camadas são contratos do import-linter, ``make lint``):

- ``runtime``: dispositivo, threads, sementes, nomes de dtype — a camada de baixo;
- ``interop``: pesos dos módulos do ``torch.nn`` e máscaras na convenção do PyTorch;
- ``course``: a lista de capítulos e este mapa capítulo → módulos, para scripts e testes;
- ``corpus``: a prosa dos capítulos (dado do pacote, gerado por ``make assignments``);
- ``experiments``, ``plots``, ``widgets``: experimentos, figuras e explorações, por capítulo;
- ``feedback``: a voz do corretor (comparações, mensagens em pt-BR, o contexto Check, a recusa da referência);
- ``exercises``: o registro dos exercícios (capítulo, referência, verificações, células, pontos);
- ``checks``: as verificações de cada capítulo, que declaram os exercícios do registro;
- ``probe``: como uma verificação toca a resposta do aluno (pedidos que devolvem só dados), aqui ou no juiz;
- ``wire``: o esquema dos dados que atravessam do kernel do aluno para o juiz (JSON e ``.npy``);
- ``harness``, ``scenarios``: o lado do kernel na correção (roda a resposta nos casos pedidos; sem gabarito);
- ``numbers``: números no formato brasileiro (vírgula decimal, ponto de milhar);
- ``tamper``: a verificação oculta de uma célula, pelo registro (fora da correção);
- ``instructor``: as ferramentas do professor (nbgrader, isolamento, Dask, resultados);
- ``templates``: o modelo da devolutiva em pt-BR.
"""

__version__ = "0.1.0"
