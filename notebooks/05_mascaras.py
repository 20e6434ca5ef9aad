# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Capítulo 5 — Máscaras: o que cada posição pode ver
#
# **Objetivos.** Ao fim deste capítulo você vai saber:
#
# 1. explicar por que o decodificador não pode ver o futuro e por que ninguém deve atender ao
#    *padding* (preenchimento);
# 2. construir a máscara causal, a de *padding* e a combinação das duas, com **uma** convenção de
#    formas que se difunde (*broadcasting*) sem surpresas;
# 3. traduzir entre as convenções do PyTorch, que discordam entre si sobre o que `True` quer dizer;
# 4. entender o que acontece com uma linha totalmente mascarada — NaN num *softmax* escrito à mão com
#    $-\infty$ e no `nn.MultiheadAttention` com `need_weights=True` (o padrão), zeros no
#    `F.scaled_dot_product_attention` e no `nn.MultiheadAttention` com `need_weights=False`, pesos
#    uniformes (um vazamento) com $-10^9$ — e o que muda em float16; e escrever um softmax
#    mascarado que devolve zeros;
# 5. **testar** a causalidade de um modelo com um teste de propriedade que você pode reutilizar, e
#    saber o que esse teste mostra (um vazamento, quando acha um) e o que ele não prova.
#
# **Pré-requisitos.** Capítulo 2 (atenção por produto escalar escalado, com máscara booleana).
# O capítulo 3 ajuda a entender o eixo das cabeças.
#
# **Tempo estimado.** 60 a 90 minutos.
#
# **Legenda de formas** (a mesma em todo o curso): B lote (*batch*), T comprimento da sequência,
# D `d_model`, H cabeças, Dk = D/H, F `d_ff`, V vocabulário, S comprimento da fonte (atenção cruzada).
#
# **Convenção do curso:** máscaras booleanas com **True = pode atender**, a de
# `F.scaled_dot_product_attention`.

# %% tags=["nbval-ignore-output"]
# %matplotlib inline
from contextlib import nullcontext

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

from transformer_course import plots
from transformer_course.attention import scaled_dot_product_attention as attention_ref
from transformer_course.checks import (
    check_causal_mask,
    check_decoder_self_mask,
    check_masked_softmax,
    check_padding_mask,
)
from transformer_course.interop import to_additive_mask, to_key_padding_mask, to_mha_attn_mask
from transformer_course.masks import assert_causal, dependency_matrix, future_leak
from transformer_course.masks import causal_mask as causal_mask_ref
from transformer_course.masks import decoder_self_mask as decoder_self_mask_ref
from transformer_course.masks import masked_softmax as masked_softmax_ref
from transformer_course.masks import padding_mask as padding_mask_ref
from transformer_course.numbers import br
from transformer_course.runtime import get_device, seeded_generator

torch.manual_seed(0)
torch.set_num_threads(1)  # os tensores deste capítulo são minúsculos: uma thread basta e é mais rápida
device = get_device()
print(f"PyTorch {torch.__version__} | dispositivo: {device}")

# %% [markdown]
# ## 1. Por que mascarar?
#
# Uma máscara diz, para cada consulta, quais chaves ela **não** pode usar. Há dois motivos para
# proibir uma chave.
#
# **O futuro.** Um modelo de linguagem aprende a prever o próximo *token*. No treino, damos a frase
# inteira de uma vez (*teacher forcing*: a entrada é a resposta certa deslocada de uma posição) e
# pedimos, em cada posição $t$, uma previsão de $x_{t+1}$. Se a posição $t$ pudesse atender à posição
# $t+1$, bastaria copiar a resposta: a perda cairia a quase zero sem o modelo aprender nada. E na hora
# de gerar texto o futuro nem existe. A **máscara causal** (*causal mask*) proíbe as chaves $j > t$.
#
# **O *padding*.** Frases de tamanhos diferentes viram um lote retangular completando as curtas com
# um *token* especial, o `<pad>`. Ele não é conteúdo. Se alguém atender a ele, a representação de uma
# frase passa a depender de **quanto** *padding* ela recebeu — isto é, de quem mais estava no lote.
# A **máscara de *padding*** proíbe as chaves que são `<pad>`.
#
# Vamos ver o segundo problema acontecer. A mesma frase, com e sem três `<pad>` no fim:

# %%
gen = seeded_generator(0)
tabela = torch.randn(10, 8, generator=gen)  # embeddings de um vocabulário de 10 tokens; o 0 é <pad>
curta = torch.tensor([[3, 7, 5, 2]])
longa = torch.tensor([[3, 7, 5, 2, 0, 0, 0]])
x_curta, x_longa = tabela[curta], tabela[longa]  # (1, 4, 8) e (1, 7, 8)

sem_mascara, _ = attention_ref(x_longa, x_longa, x_longa)
com_mascara, _ = attention_ref(x_longa, x_longa, x_longa, padding_mask_ref(longa)[:, 0])
referencia, _ = attention_ref(x_curta, x_curta, x_curta)
{
    "sem máscara: max |Δ| nas posições reais": br((sem_mascara[:, :4] - referencia).abs().max(), ".3f"),
    "com máscara de padding": br((com_mascara[:, :4] - referencia).abs().max()),
}

# %% [markdown]
# Sem máscara, as quatro posições reais mudam só porque o lote tinha uma frase mais longa. Com a
# máscara, a diferença é **exatamente zero**: o peso de cada `<pad>` é $e^{-\infty} = 0$.
#
# As duas máscaras desenhadas como matrizes (linha = consulta, coluna = chave), para a frase
# "`<s>` o gato dormiu `<pad>` `<pad>`":

# %%
rotulos = ["<s>", "o", "gato", "dormiu", "<pad>", "<pad>"]
ids_exemplo = torch.tensor([[1, 4, 7, 9, 0, 0]])
causal_6 = causal_mask_ref(6)
padding_6 = padding_mask_ref(ids_exemplo)[0, 0].expand(6, 6)  # (1, 6) -> (6, 6), só para desenhar
plots.mask_panels(
    [causal_6, padding_6, causal_6 & padding_6],
    ["causal: j ≤ i", "padding: chave real", "causal E padding"],
    rotulos,
)

# %% [markdown]
# **Leitura.** À esquerda, o triângulo inferior: a linha $i$ vê as colunas $0..i$ (a diagonal
# inclusive — cada posição vê a si mesma). No meio, colunas inteiras de `<pad>` bloqueadas, para
# **toda** consulta. À direita, o que o decodificador usa: as duas restrições ao mesmo tempo (E).
#
# Repare que as **linhas** dos `<pad>` continuam com posições permitidas: ninguém bloqueia a
# consulta de um `<pad>`; a saída dele é só ignorada pela perda. Isso importa na seção 5.

# %% [markdown]
# ## 2. Formas e difusão: uma convenção só
#
# Os scores da atenção com várias cabeças têm forma $(B, H, T, T)$. As máscaras não precisam ter
# essa forma: basta que se **difundam** para ela. A convenção do curso:
#
# | máscara | forma | o que os eixos de tamanho 1 querem dizer |
# |---|---|---|
# | causal | $(T, T)$ | igual para todo o lote e toda cabeça |
# | *padding* | $(B, 1, 1, T)$ | igual para toda cabeça e **toda consulta**: bloqueia colunas |
# | decodificador | $(B, 1, T, T)$ | causal E *padding*; igual para toda cabeça |
#
# A difusão alinha os eixos **pela direita**: $(T, T)$ com $(B, 1, 1, T)$ dá $(B, 1, T, T)$, que com
# $(B, H, T, T)$ dá $(B, H, T, T)$.

# %%
ids = torch.tensor([[5, 8, 2, 0, 0], [3, 9, 4, 6, 0]])  # (B, T) = (2, 5)
scores = torch.randn(2, 4, 5, 5, generator=gen)  # (B, H, T, T)
pad = padding_mask_ref(ids)  # (2, 1, 1, 5)
causal = causal_mask_ref(5)  # (5, 5)
combinada = pad & causal  # (2, 1, 1, 5) & (5, 5) -> (2, 1, 5, 5)
pad.shape, causal.shape, combinada.shape, scores.masked_fill(~combinada, float("-inf")).shape

# %% [markdown]
# **Um erro clássico: a máscara de 5 eixos.** Num texto que serviu de fonte para este curso, o
# codificador cria a máscara de *padding* já com forma $(B, 1, 1, T)$, e a atenção com várias cabeças
# faz mais um `mask.unsqueeze(1)` "para o eixo das cabeças". O resultado tem 5 eixos, e o PyTorch
# **não reclama**: difunde $(B, 1, 1, 1, T)$ com $(B, H, T, T)$ e cria um tensor $(B, B, H, T, T)$ —
# cada exemplo do lote mascarado com a máscara de **todos** os exemplos.

# %%
mascara_5d = pad.unsqueeze(1)  # (2, 1, 1, 5) -> (2, 1, 1, 1, 5): um unsqueeze a mais
scores.masked_fill(~mascara_5d, float("-inf")).shape

# %% [markdown]
# Nenhum erro, e uma forma que não devia existir: o bug aparece (se aparecer) muitas linhas depois,
# num `view` que falha ou numa média que esconde tudo. O remédio é o desta seção: **uma** forma
# documentada para cada máscara, e a atenção usa a máscara como está (4-D) sem acrescentar eixos.
# (`F.scaled_dot_product_attention`, mais rígido, recusa a máscara de 5 eixos com um erro.)

# %% [markdown]
# ## 3. Exercícios: as três máscaras
#
# ### Exercício 1 — `causal_mask` (2 pontos)
#
# Escreva `causal_mask(seq_len, device=None)` que devolve um tensor **booleano** $(T, T)$ com `True`
# na diagonal e abaixo dela ($j \le i$):
#
# $$M^{\text{causal}}_{ij} = [\, j \le i \,]$$
#
# - crie o tensor no dispositivo `device` (não fixe `cpu`/`cuda`);
# - `seq_len <= 0` deve levantar `ValueError` com uma mensagem em português.

# %% nbgrader={"grade": false, "grade_id": "causal_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Máscara causal (T, T), booleana: True na diagonal e abaixo dela."""
    ### BEGIN SOLUTION
    if seq_len <= 0:
        raise ValueError(f"seq_len deve ser positivo; recebido {seq_len}.")
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_causal_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_causal_mask(causal_mask)

# %% nbgrader={"grade": true, "grade_id": "test_causal_mask_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (outros T, o dispositivo pedido, ValueError).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("05_mascaras", "test_causal_mask_hidden", globals())(causal_mask)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercício 2 — `padding_mask` (2 pontos)
#
# Escreva `padding_mask(token_ids, pad_id=0)`: recebe os ids $(B, T)$ e devolve uma máscara
# booleana $(B, 1, 1, T)$, `True` nos *tokens* reais:
#
# $$M^{\text{pad}}_{b,0,0,j} = [\, \text{token\_ids}_{b,j} \ne \text{pad\_id} \,]$$
#
# - use o argumento `pad_id` (o *token* de *padding* nem sempre é o 0);
# - `token_ids` que não seja 2-D deve levantar `ValueError`;
# - não modifique `token_ids`.

# %% nbgrader={"grade": false, "grade_id": "padding_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def padding_mask(token_ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """Máscara de padding (B, 1, 1, T), booleana: True nos tokens reais."""
    ### BEGIN SOLUTION
    if token_ids.dim() != 2:
        raise ValueError(f"token_ids deve ter forma (B, T); recebido com forma {tuple(token_ids.shape)}.")
    return (token_ids != pad_id)[:, None, None, :]  # (B, T) -> (B, 1, 1, T)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_padding_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_padding_mask(padding_mask)

# %% nbgrader={"grade": true, "grade_id": "test_padding_mask_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (outro pad_id, padding à esquerda, ValueError, entrada intacta).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("05_mascaras", "test_padding_mask_hidden", globals())(padding_mask)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercício 3 — `decoder_self_mask` (2 pontos)
#
# Escreva `decoder_self_mask(token_ids, pad_id=0)`: a máscara da autoatenção (*self-attention*) do
# decodificador, $(B, 1, T, T)$, que permite a chave $j$ para a consulta $i$ quando **as duas**
# condições valem:
#
# $$M^{\text{dec}}_{b,0,i,j} = [\, j \le i \,] \;\wedge\; [\, \text{token\_ids}_{b,j} \ne \text{pad\_id} \,]$$
#
# Você pode (e deve) usar as suas duas funções anteriores; a difusão faz o resto.
#
# - a máscara fica no mesmo dispositivo de `token_ids` (passe `token_ids.device` à sua
#   `causal_mask`, como no exercício 1);
# - `token_ids` que não seja 2-D deve levantar `ValueError` (os testes visíveis conferem);
# - use o argumento `pad_id` e não modifique `token_ids`, como no exercício 2.

# %% nbgrader={"grade": false, "grade_id": "decoder_self_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decoder_self_mask(token_ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """Máscara do decodificador (B, 1, T, T): causal E padding das chaves."""
    ### BEGIN SOLUTION
    pad = padding_mask(token_ids, pad_id)  # (B, 1, 1, T); levanta ValueError se não for 2-D
    causal = causal_mask(token_ids.size(1), token_ids.device)  # (T, T), no dispositivo dos ids
    return pad & causal  # (B, 1, 1, T) & (T, T) -> (B, 1, T, T)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_decoder_self_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_decoder_self_mask(decoder_self_mask)

# %% nbgrader={"grade": true, "grade_id": "test_decoder_self_mask_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (lote maior, padding à esquerda, T = 1, o dispositivo dos ids,
# ValueError).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("05_mascaras", "test_decoder_self_mask_hidden", globals())(decoder_self_mask)
### END HIDDEN TESTS

# %% [markdown]
# Daqui em diante, as demonstrações usam as versões do pacote (`causal_mask_ref`,
# `padding_mask_ref`, `decoder_self_mask_ref`, de `transformer_course.masks`), para que o notebook
# rode mesmo antes de você terminar os exercícios. Um lote com duas frases de tamanhos diferentes:

# %%
ids_lote = torch.tensor([[1, 4, 7, 9, 0, 0], [1, 5, 3, 8, 2, 6]])
mascara_lote = decoder_self_mask_ref(ids_lote)  # (2, 1, 6, 6)
plots.mask_panels(
    [mascara_lote[0, 0], mascara_lote[1, 0]],
    ["exemplo 0: 4 tokens + 2 <pad>", "exemplo 1: 6 tokens, sem <pad>"],
    suptitle="decoder_self_mask: uma matriz (T, T) por exemplo do lote",
)

# %% [markdown]
# ## 4. As convenções do PyTorch discordam
#
# A mesma ideia — "a consulta $i$ pode usar a chave $j$?" — aparece no PyTorch com **três
# convenções** diferentes. Trocar uma pela outra sem converter não dá erro: dá um modelo errado.
#
# | API | argumento | tipo | `True` (ou o valor) quer dizer | forma |
# |---|---|---|---|---|
# | `F.scaled_dot_product_attention` | `attn_mask` | bool | **pode atender** (a do curso) | difundível para $(\ldots, T_q, T_k)$ |
# | `F.scaled_dot_product_attention` | `attn_mask` | float | valor **somado** aos scores ($0$ ou $-\infty$) | difundível |
# | `F.scaled_dot_product_attention` | `is_causal=True` | — | máscara causal implícita, alinhada no canto **superior esquerdo** (veja a demonstração 2) | — |
# | `nn.MultiheadAttention` (e `nn.Transformer*Layer`) | `attn_mask` | bool | **bloqueado** | $(T_q, T_k)$ ou $(B \cdot H, T_q, T_k)$ |
# | `nn.MultiheadAttention` | `key_padding_mask` | bool | **é padding** (bloqueado) | $(B, T_k)$ |
# | `nn.Transformer.generate_square_subsequent_mask` | — | float | $-\infty$ acima da diagonal, $0$ no resto | $(T, T)$ |
#
# As APIs discordam também sobre uma linha em que **tudo** foi bloqueado: a seção 5 mede o que
# cada uma devolve.
#
# O pacote traz conversores para sair da convenção do curso: `to_additive_mask`,
# `to_mha_attn_mask` e `to_key_padding_mask` (em `transformer_course.interop`).
#
# **Demonstração 1 — a forma funcional.** Com a mesma máscara do decodificador, três chamadas
# de `F.scaled_dot_product_attention` comparadas com a nossa atenção (capítulo 2):

# %%
Q, K, V = (torch.randn(2, 2, 6, 8, generator=gen) for _ in range(3))  # (B, H, T, Dk)
nossa, _ = attention_ref(Q, K, V, mascara_lote)
variantes = {
    "bool, True = pode atender": F.scaled_dot_product_attention(Q, K, V, attn_mask=mascara_lote),
    "float aditiva (0 / -inf)": F.scaled_dot_product_attention(
        Q, K, V, attn_mask=to_additive_mask(mascara_lote)
    ),
    "bool INVERTIDA (erro!)": F.scaled_dot_product_attention(Q, K, V, attn_mask=~mascara_lote),
}
{nome: br((saida - nossa).abs().max(), ".2g") for nome, saida in variantes.items()}

# %% [markdown]
# As duas primeiras coincidem com a nossa (diferença 0 ou da ordem de $10^{-7}$, arredondamento);
# passar a máscara invertida não gera erro nenhum, só uma resposta errada.
#
# **Demonstração 2 — `is_causal` e a máscara que o `nn.Transformer` fabrica.** Com tantas consultas
# quantas chaves ($T_q = T_k$), `is_causal=True` é a nossa máscara causal:

# %%
Qc, Kc, Vc = (torch.randn(1, 1, 4, 8, generator=gen) for _ in range(3))
por_flag = F.scaled_dot_product_attention(Qc, Kc, Vc, is_causal=True)
por_mascara = F.scaled_dot_product_attention(Qc, Kc, Vc, attn_mask=causal_mask_ref(4))
print("is_causal = máscara causal?", torch.allclose(por_flag, por_mascara))
nn.Transformer.generate_square_subsequent_mask(4)

# %% [markdown]
# **Quando $T_q \ne T_k$, `is_causal=True` erra o alinhamento.** Na geração com cache de chaves e
# valores (*KV cache*, capítulo 7), só as consultas dos *tokens* novos passam pela atenção, mas as
# chaves e os valores são os da sequência inteira: $T_q < T_k$, e as consultas são as **últimas**
# posições. A documentação de `F.scaled_dot_product_attention` diz que, com uma máscara não quadrada,
# `is_causal=True` usa a máscara alinhada no canto **superior esquerdo**: a consulta $i$ vê as chaves
# $0..i$, como se as consultas fossem as **primeiras** posições. Para as últimas, o alinhamento certo é
# o do canto **inferior direito** — a consulta $i$ vê as chaves $0..i + (T_k - T_q)$ —, que o PyTorch
# oferece em `torch.nn.attention.bias.causal_lower_right`.
#
# Medimos numa sequência de 6 posições: primeiro a atenção causal inteira; depois só as 2 últimas
# consultas contra as 6 chaves, como na geração com cache. As saídas dessas 2 posições têm de ser as
# mesmas nos dois cálculos:

# %%
Qs, Ks, Vs = (torch.randn(1, 1, 6, 8, generator=gen) for _ in range(3))  # (B, H, T, Dk), T = 6
inteira = F.scaled_dot_product_attention(Qs, Ks, Vs, is_causal=True)[:, :, 4:]  # as posições 4 e 5
Q_novas = Qs[:, :, 4:]  # (1, 1, 6, 8) -> (1, 1, 2, 8): só as consultas novas; chaves e valores: as 6
superior_esquerda = torch.ones(2, 6, dtype=torch.bool).tril()  # a consulta i vê as chaves 0..i
inferior_direita = torch.ones(2, 6, dtype=torch.bool).tril(diagonal=6 - 2)  # vê as chaves 0..i + 4
com_flag = F.scaled_dot_product_attention(Q_novas, Ks, Vs, is_causal=True)
com_lower_right = F.scaled_dot_product_attention(Q_novas, Ks, Vs, attn_mask=causal_lower_right(2, 6))
{
    "is_causal=True usa a máscara superior esquerda?": torch.allclose(
        com_flag, F.scaled_dot_product_attention(Q_novas, Ks, Vs, attn_mask=superior_esquerda)
    ),
    "causal_lower_right = máscara inferior direita?": torch.allclose(
        com_lower_right, F.scaled_dot_product_attention(Q_novas, Ks, Vs, attn_mask=inferior_direita)
    ),
    "is_causal=True: max |Δ| para a atenção inteira": br((com_flag - inteira).abs().max(), ".3f"),
    "causal_lower_right: max |Δ| para a atenção inteira": br((com_lower_right - inteira).abs().max(), ".2g"),
}

# %%
plots.mask_panels(
    [superior_esquerda, inferior_direita],
    ["is_causal=True (superior esquerda)", "causal_lower_right (inferior direita)"],
    [f"pos. {j}" for j in range(6)],
    ylabel="consulta nova",
    suptitle="2 consultas novas (as posições 4 e 5) contra 6 chaves",
    row_labels=["pos. 4", "pos. 5"],
)

# %% [markdown]
# Com `is_causal=True`, a consulta da posição 4 só vê a chave 0, e a da posição 5, as chaves 0 e 1:
# as saídas mudam, sem erro nenhum. Com `causal_lower_right`, elas são as da atenção inteira (a
# diferença é 0 ou arredondamento).
#
# **E `is_causal=True` junto com `attn_mask`?** A documentação diz que passar os dois é um erro. O que
# acontece de fato depende do núcleo (*kernel*) que o PyTorch escolhe para a conta. Com a causal e
# uma máscara de *padding* que bloqueia a chave 5:

# %%
so_padding = torch.tensor([[True, True, True, True, True, False]])  # (1, Tk): a chave 5 é <pad>
as_duas = causal_mask_ref(6) & so_padding  # (6, 6) & (1, 6) -> (6, 6): a combinação feita por nós
por_nucleo = {}
for nome, contexto in (("escolha automática", nullcontext()), ("só o núcleo MATH", sdpa_kernel(SDPBackend.MATH))):
    with contexto:
        try:
            saida = F.scaled_dot_product_attention(Qs, Ks, Vs, attn_mask=so_padding, is_causal=True)
            iguais = torch.allclose(saida, F.scaled_dot_product_attention(Qs, Ks, Vs, attn_mask=as_duas))
            por_nucleo[nome] = f"aceitou; igual à combinação das duas máscaras: {iguais}"
        except RuntimeError as erro:
            por_nucleo[nome] = f"RuntimeError: {erro}"
por_nucleo

# %% [markdown]
# A saída acima mostra o que cada núcleo fez com a versão do PyTorch impressa no início: um pode
# aceitar (e aplicar as duas máscaras) enquanto outro recusa, e numa GPU os núcleos são outros. Um
# programa que dependa do comportamento de um deles quebra no outro. O caminho seguro é o deste
# capítulo: combine as máscaras num tensor só (é o que `decoder_self_mask` faz) e passe apenas
# `attn_mask`.

# %% [markdown]
# **Demonstração 3 — `nn.MultiheadAttention`, onde `True` quer dizer bloqueado.** O mesmo módulo,
# chamado com a máscara de *padding* de três jeitos:

# %%
mha = nn.MultiheadAttention(embed_dim=8, num_heads=2, batch_first=True)  # modo de treino, dropout 0
x = torch.randn(2, 6, 8, generator=gen)
pad_lote = padding_mask_ref(ids_lote)  # (2, 1, 1, 6), True = token real
with torch.no_grad():
    por_kpm, _ = mha(x, x, x, key_padding_mask=to_key_padding_mask(pad_lote))  # (2, 6): True = pad
    por_attn, _ = mha(x, x, x, attn_mask=to_mha_attn_mask(pad_lote, n_heads=2, q_len=6))  # (4, 6, 6)
    esquecida, _ = mha(x, x, x, key_padding_mask=pad_lote[:, 0, 0])  # a NOSSA convenção, sem converter
{
    "key_padding_mask convertida vs attn_mask convertida": br((por_kpm - por_attn).abs().max(), ".2g"),
    "sem converter: posições com NaN": int(esquecida.isnan().any(-1).sum()),
}

# %% [markdown]
# Sem converter, o `nn.MultiheadAttention` bloqueia os *tokens* **reais** e deixa só os `<pad>`; no
# exemplo 1, que não tem `<pad>`, **toda** a linha fica bloqueada e a saída vira NaN (com
# `need_weights=True`, o padrão; a seção 5 volta a isso). Repare também
# que `attn_mask` desse módulo não difunde: ele quer $(T_q, T_k)$ ou $(B \cdot H, T_q, T_k)$, por isso
# o conversor precisa de `n_heads` e `q_len`.

# %% [markdown]
# ## 5. $-\infty$ ou $-10^9$? Linhas totalmente mascaradas
#
# Até aqui, com as máscaras certas, toda consulta tinha pelo menos uma chave permitida. Nem sempre
# é assim:
#
# - ***padding* à esquerda** (comum na geração em lote) com máscara causal: a consulta na posição 0
#   é um `<pad>` e só pode ver a si mesma — que é `<pad>`. Linha inteira bloqueada;
# - mascarar também as **consultas** de *padding* ($M_{ij} = \text{real}_i \wedge \text{real}_j$, como
#   numa figura de um dos textos que serviram de base a este curso): toda linha de `<pad>` fica
#   inteira bloqueada;
# - atenção cruzada com uma fonte vazia, janelas deslizantes, sequências empacotadas.
#
# O que o softmax faz com uma linha em que **tudo** foi bloqueado?
#
# $$\mathrm{softmax}(-\infty, -\infty, -\infty)
# = \frac{e^{-\infty}}{\sum e^{-\infty}} = \frac{0}{0} = \mathrm{NaN},
# \qquad
# \mathrm{softmax}(-10^9, -10^9, -10^9) = \left(\tfrac13, \tfrac13, \tfrac13\right).$$
#
# Com $-10^9$ (preenchendo, não somando), todas as posições ficam iguais, e o softmax de valores
# iguais é **uniforme**: a consulta atende igualmente a **todas** as chaves — inclusive as que a
# máscara proibia.
#
# Essa é a conta. O que cada implementação devolve para essa linha, porém, varia. Medimos todas
# numa atenção com 3 consultas e 3 chaves em que a consulta 1 não pode ver nada (a saída da
# linha 1, resumida):

# %%
q3, k3, v3 = (torch.randn(1, 3, 4, generator=gen) for _ in range(3))  # (B, T, D) = (1, 3, 4)
pode3 = torch.ones(3, 3, dtype=torch.bool)
pode3[1] = False  # a consulta 1 não pode ver nenhuma chave
scores3 = q3 @ k3.transpose(-2, -1) / 4**0.5  # (1, 3, 3)
mha_3 = nn.MultiheadAttention(embed_dim=4, num_heads=1, batch_first=True)
with torch.no_grad():
    saidas_3 = {
        "softmax à mão, -inf (o do capítulo 2)": scores3.masked_fill(~pode3, float("-inf")).softmax(-1) @ v3,
        "softmax à mão, -10⁹": scores3.masked_fill(~pode3, -1e9).softmax(-1) @ v3,
        "F.scaled_dot_product_attention": F.scaled_dot_product_attention(q3, k3, v3, attn_mask=pode3),
        "nn.MultiheadAttention (need_weights=True, o padrão)": mha_3(q3, k3, v3, attn_mask=~pode3)[0],
        "nn.MultiheadAttention (need_weights=False)": mha_3(
            q3, k3, v3, attn_mask=~pode3, need_weights=False
        )[0],
        "masked_softmax (exercício 4)": masked_softmax_ref(scores3, pode3) @ v3,
    }


def resumo(linha, valores):
    """Diz em palavras o que saiu numa linha de saída da atenção."""
    if linha.isnan().any():
        return "NaN"
    if (linha == 0).all():
        return "zeros"
    if torch.allclose(linha, valores.mean(dim=0)):
        return "média de TODOS os valores (1/T em cada chave)"
    return f"outra coisa: {linha.tolist()}"


{nome: resumo(saida[0, 1], v3[0]) for nome, saida in saidas_3.items()}

# %% [markdown]
# Três respostas diferentes para a mesma pergunta, medidas aqui com a versão do PyTorch impressa
# no início do notebook:
#
# | implementação | linha toda bloqueada |
# |---|---|
# | softmax escrito à mão com $-\infty$ (como o do capítulo 2) | NaN ($0/0$) |
# | `nn.MultiheadAttention` com `need_weights=True` (o padrão) | NaN: calcula os pesos com um softmax comum |
# | `nn.MultiheadAttention` com `need_weights=False` | zeros (antes de $W^O$): passa por `F.scaled_dot_product_attention` |
# | `F.scaled_dot_product_attention` | zeros: desde o PyTorch 2.5, um softmax "seguro" (`_safe_softmax`) zera as linhas em que tudo é $-\infty$ |
# | $-10^9$ no lugar de $-\infty$ (qualquer implementação) | pesos uniformes: a média de todos os valores |
#
# O `masked_softmax` do exercício 4 segue a convenção do `F.scaled_dot_product_attention`: zeros.
# Por que a linha do `nn.MultiheadAttention` com `need_weights=False` sai com zeros exatos? O
# módulo inicia o viés de $W^O$ com zeros; depois de treinado, essa linha seria o viés.

# %% [markdown]
# Três desses comportamentos no caso realista, *padding* à esquerda com máscara causal:

# %%
ids_esq = torch.tensor([[0, 0, 3, 8, 5, 2]])  # dois <pad> à esquerda
mascara_esq = decoder_self_mask_ref(ids_esq)[0, 0]  # (6, 6); as linhas 0 e 1 ficam vazias
s = torch.randn(6, 6, generator=gen)
rot_esq = ["<pad>", "<pad>", "o", "gato", "dormiu", "."]
plots.nan_heatmaps(
    [
        s.masked_fill(~mascara_esq, float("-inf")).softmax(-1),
        s.masked_fill(~mascara_esq, -1e9).softmax(-1),
        masked_softmax_ref(s, mascara_esq),
    ],
    ["softmax à mão, -inf: NaN", "-10⁹: uniformes, futuro incluído", "masked_softmax: zeros"],
    rot_esq,
)

# %% [markdown]
# **O NaN se espalha.** Com a atenção do capítulo 2, que usa um softmax comum, um NaN numa linha
# não fica lá: na camada seguinte, as outras posições multiplicam os pesos pelos valores $V$, e $0 \times \mathrm{NaN} = \mathrm{NaN}$ — mesmo com peso
# zero, a posição contaminada envenena todas as outras. Duas camadas de atenção bastam:

# %%
x0 = tabela[ids_esq]  # (1, 6, 8)
mascara_4d = decoder_self_mask_ref(ids_esq)  # (1, 1, 6, 6)
x1, _ = attention_ref(x0, x0, x0, mascara_4d[:, 0])
x2, _ = attention_ref(x1, x1, x1, mascara_4d[:, 0])
{
    "posições com NaN após a camada 1": int(x1.isnan().any(-1).sum()),
    "após a camada 2": int(x2.isnan().any(-1).sum()),
    "uma perda que use qualquer posição": br(x2.sum()),
}

# %% [markdown]
# Com $-10^9$ o NaN some, mas olhe a figura do meio: as linhas vazias (as consultas dos dois
# `<pad>`) dão peso $1/T$ a **todas** as chaves — inclusive "o", "gato", "dormiu" e ".", *tokens*
# reais que estão no **futuro** dessas posições. A saída é a média de todos os valores, não dos
# `<pad>`: um vazamento causal. Quanto peso as duas linhas vazias põem no futuro:

# %%
pesos_1e9 = s.masked_fill(~mascara_esq, -1e9).softmax(-1)  # (6, 6)
{"peso das linhas 0 e 1 nas chaves 2 a 5 (o futuro)": [br(p, ".4f") for p in pesos_1e9[:2, 2:].sum(-1)]}

# %% [markdown]
# Nessas posições a saída costuma ser descartada (a perda ignora os `<pad>`, e nenhuma consulta
# real atende a elas), então o dano costuma ser pequeno; mas é informação do futuro circulando pela
# rede, e nada avisa se um dia ela importar. A saída honesta para "não há nada a ver" é **zero**:
# a escolha do `F.scaled_dot_product_attention`, e o que o seu `masked_softmax` vai fazer.
#
# **E em float16?** Treinar em precisão mista (*mixed precision*), com os scores em float16, é comum
# em GPU. O maior número finito do float16 é 65.504, então $-10^9$ **não cabe**:

# %%
s16 = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16)
bloqueia_2 = torch.tensor([False, True, True])
try:
    s16.masked_fill(bloqueia_2, -1e9)
except RuntimeError as erro:
    print("masked_fill com -10⁹ em float16:", erro)
print("-10⁹ convertido para float16:", br(torch.tensor(-1e9).half()))
minimo = torch.finfo(torch.float16).min
print("finfo(float16).min:", br(minimo, ",.0f"))
scores16 = torch.tensor([-20.0, -16.0, -15.0, 0.0, 3.0, 15.0, 20.0], dtype=torch.float16)
print("score → score + min:", ", ".join(f"{br(a)} → {br(b, ',.0f')}" for a, b in zip(scores16, scores16 + minimo)))
linha16 = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float16)  # uma linha toda bloqueada
print("softmax(linha + min), máscara aditiva:", [br(p, ".4f") for p in (linha16 + minimo).softmax(-1)])

# %% [markdown]
# Três armadilhas numa célula. `masked_fill` com $-10^9$ recusa. Converter $-10^9$ para float16 dá
# $-\infty$ (e o NaN volta). E a receita "use `torch.finfo(dtype).min`" numa máscara **aditiva**
# tem duas faces: perto de $65.504$ os números do float16 vêm de 32 em 32, então
# $\text{score} + \text{min}$ transborda para $-\infty$ só quando o score é $\le -16$; para os
# scores usuais, estritamente entre $-16$ e $16$, a soma arredonda **sempre** para $-65.504$. As
# posições bloqueadas ficam iguais, e uma linha toda bloqueada sai **uniforme**, como com $-10^9$ —
# o mesmo vazamento. Preencher com `min` (`masked_fill`), em vez de somar, dá o mesmo numa linha
# toda bloqueada. (O bfloat16 tem o alcance do float32, e $-10^9$ cabe nele.) A saída robusta, em
# qualquer dtype: preencher com $-\infty$ e tratar explicitamente as linhas vazias.

# %% [markdown]
# ### Exercício 4 — `masked_softmax` (4 pontos)
#
# Escreva `masked_softmax(scores, mask=None)`:
#
# - softmax no último eixo (`dim=-1`), com `mask` booleana (True = pode atender) difundível para a
#   forma de `scores`; com `mask=None` (o padrão), é o softmax comum;
# - posições bloqueadas recebem peso **exatamente** 0 (não $10^{-40}$);
# - uma linha sem nenhuma posição permitida sai **só com zeros**: nem NaN, nem uniforme (a
#   convenção do `F.scaled_dot_product_attention`);
# - funciona em float32 e float64, preserva a forma, o dtype e o dispositivo, não modifica as
#   entradas e deixa o gradiente passar (sem NaN);
# - aguenta scores grandes (da ordem de centenas): se escrever o softmax à mão, subtraia o máximo
#   da linha antes de `exp`;
# - não use `F.scaled_dot_product_attention` (a correção verifica);
# - opcional: recusar uma `mask` que não seja booleana com `ValueError` (com 0/1 em float, `~mask`
#   falha; em inteiros, `~1 = -2`). A resposta-modelo faz isso; a correção não cobra.
#
# Dica: `mask.any(dim=-1, keepdim=True)` diz quais linhas têm ao menos uma posição permitida.

# %% nbgrader={"grade": false, "grade_id": "masked_softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax no último eixo; bloqueadas = 0; linhas todas bloqueadas = 0 (nunca NaN)."""
    ### BEGIN SOLUTION
    if mask is None:
        return scores.softmax(dim=-1)
    if mask.dtype != torch.bool:
        raise ValueError(
            f"a máscara deve ser booleana (True = pode atender); recebida com dtype {mask.dtype}."
        )
    empty_row = ~mask.any(dim=-1, keepdim=True)  # (..., Tq, 1): True se a linha toda é bloqueada
    scores = scores.masked_fill(~mask, float("-inf")).masked_fill(empty_row, 0.0)
    return scores.softmax(dim=-1).masked_fill(~mask, 0.0)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_masked_softmax", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_masked_softmax(masked_softmax)

# %% nbgrader={"grade": true, "grade_id": "test_masked_softmax_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (float64, padding à esquerda, scores grandes, zeros exatos,
# gradientes, o dispositivo de `scores`, atalhos proibidos).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("05_mascaras", "test_masked_softmax_hidden", globals())(masked_softmax)
### END HIDDEN TESTS

# %% [markdown]
# Com ele, a atenção de duas camadas da seção 5 fica livre de NaN (usando a versão do pacote):

# %%
def atencao_segura(Q, K, V, mask):
    """A atenção do capítulo 2, com o softmax mascarado no lugar do softmax comum."""
    pesos = masked_softmax_ref(Q @ K.transpose(-2, -1) / Q.size(-1) ** 0.5, mask)  # (..., Tq, Tk)
    return pesos @ V  # (..., Tq, Tk) @ (..., Tk, Dv) -> (..., Tq, Dv)


y1 = atencao_segura(x0, x0, x0, mascara_4d[:, 0])
y2 = atencao_segura(y1, y1, y1, mascara_4d[:, 0])
{"NaN na saída": int(y2.isnan().sum()), "max |saída| nos dois <pad>": br(y2[0, :2].abs().max())}

# %% [markdown]
# Nenhum NaN, e as duas posições de `<pad>` saem com zeros.

# %% [markdown]
# ## 6. Testando a causalidade
#
# "Pus a máscara causal" não garante nada: ela pode estar transposta, invertida, esquecida numa das
# camadas, ou a informação pode vazar por outro caminho (uma normalização sobre a sequência, um
# `mean(dim=1)`...). A definição dá um teste:
#
# > Um modelo é causal se, para **toda** entrada e todo corte $t$, trocar as entradas nas posições
# > $> t$ **não muda** as saídas nas posições $\le t$.
#
# Um teste só experimenta **algumas** entradas e algumas trocas. Se uma troca muda o passado, o
# modelo **não** é causal: um contraexemplo basta, e o teste diz onde o encontrou. Se nenhuma muda,
# ganhamos evidência, não uma prova: o vazamento pode depender de entradas que não experimentamos
# (o fim desta seção mostra um caso). Vamos testar num decodificador mínimo de duas camadas, com a
# máscara ligada e desligada.

# %%
class MiniDecodificador(nn.Module):
    """Embeddings + codificação posicional aprendida + camadas de (autoatenção + FFN), com conexões residuais."""

    def __init__(self, vocab_size=20, d_model=16, max_len=16, n_layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.qkv = nn.ModuleList(nn.Linear(d_model, 3 * d_model) for _ in range(n_layers))
        self.ffn = nn.ModuleList(
            nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
            for _ in range(n_layers)
        )

    def forward(self, ids, causal=True):
        T = ids.size(1)
        x = self.emb(ids) + self.pos(torch.arange(T, device=ids.device))  # (B, T, D)
        mask = causal_mask_ref(T, ids.device) if causal else None
        for qkv, ffn in zip(self.qkv, self.ffn):
            Q, K, V = qkv(x).chunk(3, dim=-1)  # (B, T, 3D) -> 3 × (B, T, D)
            x = x + attention_ref(Q, K, V, mask)[0]
            x = x + ffn(x)
        return x


torch.manual_seed(0)
modelo = MiniDecodificador().to(device)
frase = torch.randint(1, 20, (2, 8), generator=seeded_generator(5)).to(device)  # (B, T) = (2, 8)

# %% [markdown]
# Primeiro, a experiência à mão: trocamos as palavras das posições 5, 6 e 7 e medimos quanto as
# saídas das posições 0 a 4 mudaram. `future_leak` (do pacote) faz exatamente isso.

# %%
{
    "com máscara: max |Δ| no passado": br(future_leak(lambda ids: modelo(ids, causal=True), frase, 4,
                                                      seeded_generator(6), vocab_size=20)),
    "sem máscara": br(future_leak(lambda ids: modelo(ids, causal=False), frase, 4,
                                  seeded_generator(6), vocab_size=20), ".4f"),
}

# %% [markdown]
# Com a máscara, a diferença é **zero** — não pequena: zero. Sem ela, o passado muda.
#
# Para enxergar tudo de uma vez, `dependency_matrix` troca **uma** posição de entrada $s$ por vez e
# marca quais saídas $t$ mudaram. Um modelo causal tem de dar um triângulo inferior:

# %%
dep_com = dependency_matrix(lambda ids: modelo(ids, causal=True), frase, seeded_generator(7), vocab_size=20)
dep_sem = dependency_matrix(lambda ids: modelo(ids, causal=False), frase, seeded_generator(7), vocab_size=20)
plots.mask_panels(
    [dep_com, dep_sem],
    ["com a máscara causal", "sem máscara"],
    xlabel="entrada alterada (posição s)",
    ylabel="saída (posição t)",
    legend=("a saída t mudou", "a saída t não mudou"),
    suptitle="Quem influencia quem: trocamos uma entrada por vez",
)

# %% [markdown]
# **Um teste que você pode reutilizar.** `assert_causal(fn, x, ...)` percorre todos os cortes e
# levanta `AssertionError` (com a posição do vazamento) se algum futuro influencia o passado.

# %%
assert_causal(lambda ids: modelo(ids, causal=True), frase, seeded_generator(8), vocab_size=20)
print("com a máscara: causal ✔")
try:
    assert_causal(lambda ids: modelo(ids, causal=False), frase, seeded_generator(8), vocab_size=20)
except AssertionError as erro:
    print("sem a máscara:", erro)

# %% [markdown]
# **Passar no teste não é uma prova.** O teste só vê as entradas que você dá a ele. Um defeito comum
# é um caminho do código que só algumas entradas percorrem. Abaixo, o mesmo modelo com um "atalho"
# que, em sequências com mais de 8 posições, soma a cada saída a média de **todas** as posições —
# futuro incluído. Com a frase de 8 posições usada até aqui, o teste passa; com uma de 12, ele acha o
# vazamento:

# %%
def com_defeito(ids):
    """O decodificador causal, mais a média da sequência inteira quando T > 8: um vazamento."""
    saida = modelo(ids, causal=True)  # (B, T, D)
    if ids.size(1) > 8:
        saida = saida + saida.mean(dim=1, keepdim=True)  # (B, T, D) + (B, 1, D): o futuro entra
    return saida


frase_longa = torch.randint(1, 20, (2, 12), generator=seeded_generator(9)).to(device)  # (B, T) = (2, 12)
for nome, entrada in (("T = 8", frase), ("T = 12", frase_longa)):
    try:
        assert_causal(com_defeito, entrada, seeded_generator(10), vocab_size=20)
        print(f"{nome}: o teste passou")
    except AssertionError as erro:
        print(f"{nome}: {erro}")

# %% [markdown]
# Uma **prova** de causalidade olha a **estrutura** do modelo, não as saídas: a máscara causal em
# **toda** camada de atenção, e nenhuma outra operação que misture posições. O resto (os
# *embeddings*, a FFN, a LayerNorm sobre o último eixo) age em cada posição separadamente; então só
# a atenção leva informação de uma posição a outra, e a máscara só deixa passar a do passado. O
# teste continua valioso: em segundos ele acha os erros que uma leitura do código deixa passar (a
# máscara transposta, uma camada sem ela), e passar nele com entradas variadas (vários comprimentos,
# com e sem *padding*) é boa evidência. Use `assert_causal` no seu GPT do capítulo 7 — e em qualquer
# modelo autorregressivo que escrever daqui em diante.

# %% [markdown]
# ## 7. Explore: comprimento, *padding* e causalidade
#
# Mova os controles: o comprimento $T$, quantos `<pad>` a sequência tem, se a máscara causal está
# ligada e de que lado fica o *padding*. À esquerda, a máscara combinada; no meio, os pesos com o
# softmax comum e $-\infty$ (NaN em vermelhão); à direita, com `masked_softmax`.
#
# Perguntas para guiar: com *padding* à direita e máscara causal, alguma linha fica vazia? E à
# esquerda? Sem a causal, quando uma linha fica vazia?

# %% tags=["nbval-ignore-output"]
from transformer_course.widgets import mask_widget

mask_widget()

# %% [markdown]
# ## 8. Perguntas abertas (corrigidas à mão)
#
# **Pergunta 1 (2 pontos).** Um codificador que classifica frases (por exemplo, o sentimento de uma
# avaliação) usa máscara de *padding*, mas **não** usa máscara causal. Explique por que cada uma das
# duas decisões está certa. O que mudaria na previsão de uma frase se a máscara de *padding* fosse
# esquecida?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_encoder_masks", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** Na classificação, a frase inteira está disponível de uma vez e a tarefa não é
# prever o próximo *token*: não há "futuro" a esconder, e cada palavra se beneficia do contexto dos
# dois lados ("não gostei" — o "não" precisa ver o que vem depois). Por isso não há máscara causal.
# Já o *padding* não é conteúdo: existe só para fazer o lote retangular. Sem a máscara de *padding*,
# as posições reais atendem aos `<pad>`, e a representação (e a classe prevista) de uma frase passa
# a depender de quantos `<pad>` ela recebeu — ou seja, do tamanho da maior frase do lote, como
# medido na seção 1. A mesma frase poderia ser classificada de um jeito sozinha e de outro num lote.
#
# **Rubrica (2 pontos).**
# - 1 ponto: causal desnecessária porque a frase toda é dada e não há previsão do próximo *token*
#   (contexto bidirecional ajuda). Meio ponto se só disser "encoder não precisa".
# - 1 ponto: sem máscara de *padding*, a saída depende da quantidade de `<pad>` / da composição do
#   lote. Meio ponto se disser só "atenderia a tokens inúteis" sem a consequência.
# ### END SOLUTION

# %% [markdown]
# **Pergunta 2 (2 pontos).** Um colega treinou um modelo de linguagem (só decodificador) com
# *teacher forcing* e **esqueceu a máscara causal**. A perda de treino caiu rapidamente a quase zero.
# Na hora de gerar texto, *token* a *token*, o resultado é ruim. Explique as duas coisas. Como o teste
# de propriedade da seção 6 teria pegado o erro antes do treino?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_missing_causal", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** Com *teacher forcing*, a entrada na posição $t+1$ é exatamente o alvo da
# posição $t$. Sem a máscara, a posição $t$ atende à $t+1$ e aprende a **copiar** a resposta: a perda
# vai a quase zero sem o modelo aprender a prever nada. Na geração, o futuro não existe — a
# sequência termina em $t$ —, então o caminho que o modelo aprendeu a usar (olhar para $t+1$)
# desapareceu: há um descompasso entre treino e inferência, e as previsões saem ruins. O teste de
# propriedade troca os *tokens* das posições $> t$ e verifica que as saídas $\le t$ não mudam; no
# modelo sem máscara elas mudam (como na seção 6), e `assert_causal` falha antes de gastar um
# minuto de treino.
#
# **Rubrica (2 pontos).**
# - 1 ponto: perda baixa explicada por vazamento/cópia do próximo *token* (a entrada $t+1$ é o alvo
#   de $t$).
# - 1 ponto: geração ruim explicada pela ausência do futuro na inferência (descompasso treino ×
#   inferência) **e** como o teste de propriedade detecta o vazamento. Meio ponto se faltar uma das
#   duas partes.
# ### END SOLUTION

# %% [markdown]
# ## Resumo
#
# - Máscara causal: $(T, T)$, `True` em $j \le i$ — a diagonal inclusive. Máscara de *padding*:
#   $(B, 1, 1, T)$, `True` nos *tokens* reais, bloqueia **colunas** (chaves). Decodificador: as duas
#   com E, $(B, 1, T, T)$.
# - Uma forma documentada por máscara; a difusão faz o resto. Um `unsqueeze` a mais cria, sem erro,
#   um tensor de 5 eixos.
# - O PyTorch tem três convenções: `F.scaled_dot_product_attention` (bool, `True` = pode),
#   `nn.MultiheadAttention` (`True` = bloqueado; `key_padding_mask`, `True` = pad) e máscaras
#   aditivas float. Converta explicitamente.
# - Linha toda bloqueada: com $-\infty$, um softmax escrito à mão e o `nn.MultiheadAttention`
#   (`need_weights=True`) dão NaN, que se espalha pelas camadas; o `F.scaled_dot_product_attention`
#   (desde o PyTorch 2.5) dá zeros. $-10^9$ dá pesos uniformes sobre **todas** as chaves, futuro
#   incluído (e nem cabe em float16, onde $\text{score} + \text{min}$ também deixa a linha
#   uniforme). O `masked_softmax` devolve zeros.
# - Causalidade se **testa** com uma propriedade: trocar o futuro não pode mudar o passado
#   (`assert_causal`, `dependency_matrix`). Um teste que falha prova um vazamento; um que passa é
#   evidência para as entradas testadas. A prova olha a estrutura: a máscara em toda camada de
#   atenção e nenhuma outra operação que misture posições.
#
# ## Para ir além
#
# - A. Vaswani et al. (2017), *Attention Is All You Need*, NeurIPS — seção 3.2.3: a máscara do
#   decodificador implementada "colocando $-\infty$" nas entradas do softmax.
# - A. Radford et al. (2018), *Improving Language Understanding by Generative Pre-Training* — o
#   *Transformer* só decodificador, com máscara causal, treinado para prever o próximo *token*.
# - J. Devlin et al. (2019), *BERT: Pre-training of Deep Bidirectional Transformers for Language
#   Understanding*, NAACL — um codificador bidirecional: só máscara de *padding*.
# - P. Micikevicius et al. (2018), *Mixed Precision Training*, ICLR — o alcance do float16 e por
#   que ele exige cuidado.
# - Documentação do PyTorch: `torch.nn.functional.scaled_dot_product_attention` e
#   `torch.nn.MultiheadAttention` (os argumentos `attn_mask`, `key_padding_mask` e `is_causal`).
#
# Próximo capítulo: o laço de treino, com o aquecimento (*warm-up*) da taxa de aprendizado.
