"""Roteiros do lado do kernel na correção, um módulo por capítulo (``ch06.py``...).

Um roteiro monta, no kernel, o que uma verificação precisa e não dá para pedir em chamadas
soltas (um laço de treino com sondas no otimizador, por exemplo), roda a resposta do aluno e
devolve só dados. Como :mod:`transformer_course.harness`, nada aqui sabe a resposta certa: sem
oráculos nem implementações de referência (um contrato do import-linter impede).

Assinatura de um roteiro: ``def nome(request, namespace, objects) -> dict`` (os campos da
resposta: ``value``, ``error``...), chamado pelo verbo ``scenario`` do harness.
"""
