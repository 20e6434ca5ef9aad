"""Os experimentos dos capítulos, um módulo por capítulo (``ch03``, ``ch04``...).

Um experimento treina ou mede algo com as implementações de referência (a tarefa dos vizinhos
do capítulo 3, as normas do gradiente do capítulo 4, o aquecimento do capítulo 6, o GPT de
caracteres do capítulo 7) e devolve números que as figuras (``plots``) e os widgets desenham.
Os módulos de modelos ficam só com o que o aluno reescreve e o que o modelo precisa.
"""
