"""nbgrader no JupyterHub do curso: o exchange de arquivos que liga professor e alunos.

Todo servidor de usuário do hub lê este arquivo (a pasta ``hub/`` está no ``JUPYTER_CONFIG_PATH``
que o hub passa a cada um). O exchange é uma pasta comum a todos (``c.Exchange.root``):
``release_assignment`` publica em ``<exchange>/transformers-do-zero/outbound``, o aluno busca
(*fetch*) e entrega (*submit*) em ``inbound`` (gravável, mas não listável, por todos: cada entrega
tem um nome com sufixo aleatório), e as devolutivas voltam por ``feedback`` (também não listável;
cada arquivo tem o nome de um hash que só quem entregou sabe calcular).
"""

import os

c = get_config()  # noqa: F821 - definido pelo nbgrader ao carregar este arquivo

c.CourseDirectory.course_id = "transformers-do-zero"
c.Exchange.root = os.environ.get("TDZ_EXCHANGE", "/srv/transformers-do-zero/exchange")
