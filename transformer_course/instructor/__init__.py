"""As ferramentas do professor: rodam no processo do nbgrader ou nos scripts, nunca no kernel do aluno.

- ``nbgrader_run``: chamar o nbgrader de linha de comando (ambiente, executável, subprocesso);
- ``preprocessors``: preprocessadores do nbgrader/nbconvert (devolutiva em pt-BR, gabarito limpo);
- ``sandbox``: o kernel confinado (bubblewrap) de toda correção e a barreira da devolutiva;
- ``limits``: os limites de cada entrega (relógio do notebook, células, saídas, cgroup do kernel);
- ``submission``: a entrega normalizada antes de rodar (metadados do professor de volta, tags fora);
- ``sanitize``: o HTML, o SVG e o Markdown das entregas limpos pelo nh3 (Formgrader e devolutiva);
- ``formgrader_csp``: extensão do Jupyter Server, as páginas do Formgrader com uma CSP estrita;
- ``judge``: o juiz — as células de teste corrigidas fora do kernel, os pontos só do veredito;
- ``answer_key``: o pacote que o kernel vê sem o gabarito, e as demonstrações que não rodam na correção;
- ``cluster``: a tarefa de uma entrega no Dask, pela API Python do nbgrader, e o banco de notas;
- ``results``: notas e motivos de uma correção, rotulados pelo registro de exercícios.

O que roda dentro do kernel do aluno (``harness``, ``wire``, ``scenarios``; ao estudar, também as
verificações) fica fora deste pacote e não o importa (contratos do import-linter no ``pyproject.toml``).
"""
