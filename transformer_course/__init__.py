"""Pacote de apoio do curso "Transformers do zero".

Módulos (uma responsabilidade cada):

- ``device``: escolhe o dispositivo (CPU ou GPU) uma única vez.
- ``attention``: atenção por produto escalar escalado e entropia (capítulo 2).
- ``feedback``: comparações e mensagens do corretor, usadas por ``checks``.
- ``checks``: as verificações dos exercícios, um módulo por capítulo.
- ``plots``: figuras (devolvem ``Figure``; nunca mostram nem salvam).
- ``widgets``: explorações interativas, finas, construídas sobre ``plots``.
"""

__version__ = "0.1.0"
