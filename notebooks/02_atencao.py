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
# # Capítulo 2 — Atenção: uma busca suave
#
# **Objetivos.** Ao fim deste capítulo você vai saber:
#
# 1. ler a atenção como uma *busca suave* em um dicionário: consultas (*queries*), chaves (*keys*) e valores (*values*);
# 2. escrever a atenção por produto escalar escalado (*scaled dot-product attention*) para tensores de qualquer número de eixos, com máscara;
# 3. explicar, com números medidos aqui, por que dividimos os scores por $\sqrt{d_k}$: variância, entropia e gradiente;
# 4. medir a entropia de uma distribuição de atenção.
#
# **Pré-requisitos.** Multiplicação de matrizes, softmax, tensores do PyTorch (`@`, `transpose`, `softmax`).
# O capítulo 1 ajuda, mas não é obrigatório.
#
# **Tempo estimado.** 60 a 90 minutos.
#
# **Legenda de formas** (a mesma em todo o curso): B lote (*batch*), T comprimento da sequência,
# D `d_model`, H cabeças, Dk = D/H, F `d_ff`, V vocabulário, S comprimento da fonte (atenção cruzada).
# Neste capítulo: Tq comprimento das consultas, Tk comprimento das chaves, Dv largura dos valores. E,
# aqui, $V$ é a matriz dos **valores** (como $Q$ e $K$, a das consultas e a das chaves), não o
# vocabulário da legenda — o vocabulário não aparece neste capítulo.

# %% tags=["nbval-ignore-output"]
# %matplotlib inline
import math

import torch

from transformer_course import plots
from transformer_course.attention import attention_entropy as attention_entropy_ref
from transformer_course.attention import scaled_dot_product_attention as attention_ref
from transformer_course.checks import check_attention_entropy, check_scaled_dot_product_attention
from transformer_course.experiments.ch02 import scaling_statistics, softmax_jacobian_norm
from transformer_course.numbers import br, br_percent
from transformer_course.runtime import get_device, seeded_generator

torch.manual_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__} | dispositivo: {device}")

# %% [markdown]
# ## 1. Por que atenção?
#
# Uma rede recorrente (RNN) lê a frase uma palavra por vez e carrega tudo o que leu em um vetor de
# estado. Nos primeiros tradutores neurais, a frase de entrada inteira tinha de caber no último
# estado do codificador, um vetor de tamanho fixo. A atenção nasceu para remover esse gargalo:
# Bahdanau, Cho e Bengio (2015) deixaram o decodificador, a cada palavra gerada, consultar **todos**
# os estados do codificador e tirar deles uma média ponderada. Mas a rede continuava recorrente, e
# isso deixava dois problemas: o treino não se paraleliza ao longo da sequência (o passo $t$ espera o
# passo $t-1$), e, dentro de uma mesma frase, a relação entre duas palavras distantes passa por
# muitos passos, diluindo-se no caminho.
#
# Em "A gata que a menina adotou **dormiu** no sofá", quem dormiu foi a gata — cinco posições
# antes do verbo, com quatro palavras no meio. A **autoatenção** (*self-attention*) do *Transformer*
# tira a recorrência: **cada posição da frase olha diretamente para todas as outras** da mesma
# frase e decide quanto cada uma importa. O caminho entre quaisquer duas palavras tem comprimento 1,
# e todas as posições são calculadas ao mesmo tempo.

# %% [markdown]
# ## 2. Atenção como busca suave
#
# Um dicionário do Python faz uma busca *dura*: a consulta precisa ser igual a uma chave.

# %%
peso_medio_kg = {"gato": 4.0, "cachorro": 20.0, "peixe": 0.5, "leão": 190.0}
try:
    peso_medio_kg["tigre"]
except KeyError as erro:
    print("busca dura falhou:", repr(erro))

# %% [markdown]
# A atenção troca a igualdade por **semelhança**. Cada chave vira um vetor de características
# (aqui escritas à mão: felino, doméstico, aquático, grande); a consulta também. A semelhança é o
# produto escalar; o softmax transforma as semelhanças em pesos que somam 1; a resposta é a
# **média dos valores ponderada por esses pesos**.

# %%
nomes = list(peso_medio_kg)
#                        felino doméstico aquático grande
chaves = torch.tensor([[1.0, 1.0, 0.0, 0.0],   # gato
                       [0.0, 1.0, 0.0, 0.3],   # cachorro
                       [0.0, 0.5, 1.0, 0.0],   # peixe
                       [1.0, 0.0, 0.0, 1.0]])  # leão
valores = torch.tensor(list(peso_medio_kg.values()))
consulta_tigre = 2.0 * torch.tensor([1.0, 0.0, 0.0, 1.0])  # felino e grande

semelhancas = chaves @ consulta_tigre  # (4, 4) @ (4,) -> (4,)
pesos = semelhancas.softmax(dim=-1)
resposta = pesos @ valores
{nome: round(p, 3) for nome, p in zip(nomes, pesos.tolist())}, round(resposta.item(), 1)

# %%
plots.soft_lookup_bars(nomes, pesos, "Consulta “tigre”: quanto cada chave pesa")

# %% [markdown]
# A resposta para "tigre" é uma mistura dominada pelo leão, com um pouco de gato. Nada quebrou, embora
# a consulta não esteja no dicionário: essa é a busca suave. Na atenção de um *Transformer*:
#
# - **consulta** $q$ — o que uma posição procura ("quem fez a ação que eu descrevo?");
# - **chave** $k$ — como cada posição se anuncia ("sou um substantivo animado");
# - **valor** $v$ — o que cada posição entrega a quem a escolher.
#
# Na autoatenção, as três são projeções aprendidas dos mesmos vetores, os que entram na camada
# (capítulo 3): na primeira camada, os *embeddings* com a posição; nas seguintes, a saída da camada
# anterior. Na atenção cruzada, chaves e valores vêm de outra sequência. Aqui elas são dadas.

# %% [markdown]
# ## 3. A fórmula
#
# Com as consultas empilhadas em $Q \in \mathbb{R}^{T_q \times d_k}$, as chaves em
# $K \in \mathbb{R}^{T_k \times d_k}$ e os valores em $V \in \mathbb{R}^{T_k \times d_v}$
# (Vaswani et al., 2017):
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V$$
#
# - os scores $QK^\top/\sqrt{d_k}$ têm forma $(T_q, T_k)$: o score de cada consulta com cada chave;
# - o softmax é aplicado **em cada linha** (sobre as chaves, `dim=-1`): cada consulta distribui
#   uma unidade de atenção entre as chaves;
# - os pesos $(T_q, T_k)$ multiplicam $V$ $(T_k, d_v)$ e a saída tem forma $(T_q, d_v)$.
#
# **Máscara.** Às vezes uma consulta não pode ver certas chaves (o futuro, no decodificador;
# o *padding*, sempre). Neste curso a máscara é booleana com **True = pode atender**, a mesma
# convenção de `F.scaled_dot_product_attention`. As posições bloqueadas recebem $-\infty$ antes do
# softmax, e $e^{-\infty} = 0$: peso exatamente zero, com as outras renormalizadas.
#
# **Eixos de lote.** Com lote e cabeças, os tensores têm forma $(B, H, T, d_k)$. Se você usar
# `K.transpose(-2, -1)` e `@` (que é `torch.matmul`), a mesma função serve para 2, 3 ou 4 eixos.

# %% [markdown]
# ### Exercício 1 — `scaled_dot_product_attention` (5 pontos)
#
# Escreva `scaled_dot_product_attention(Q, K, V, mask=None)` que devolve `(output, weights)`:
#
# - `Q` $(\ldots, T_q, D_k)$, `K` $(\ldots, T_k, D_k)$, `V` $(\ldots, T_k, D_v)$;
# - `output` $(\ldots, T_q, D_v)$ e `weights` $(\ldots, T_q, T_k)$;
# - `mask` booleana, True = pode atender, difundível (*broadcastable*) para $(\ldots, T_q, T_k)$;
# - não modifique as entradas, preserve o dtype (float32 ou float64) e o dispositivo; aceite
#   tensores não contíguos (vistas transpostas) e 2-D, sem eixo de lote;
# - a saída fica ligada ao grafo de gradientes de `Q`, `K` e `V` (nada de `.detach()`, `.numpy()`
#   ou `.item()`);
# - não chame `F.scaled_dot_product_attention` nem a versão do pacote (`attention_ref`): a correção
#   verifica as duas coisas.
#
# Linhas totalmente mascaradas não são avaliadas aqui: o capítulo 5 trata delas.

# %% nbgrader={"grade": false, "grade_id": "sdpa", "locked": false, "schema_version": 3, "solution": true, "task": false}
def scaled_dot_product_attention(Q, K, V, mask=None):
    """Atenção por produto escalar escalado: devolve (output, weights)."""
    ### BEGIN SOLUTION
    d_k = Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., Tq, Dk) @ (..., Dk, Tk) -> (..., Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    output = weights @ V  # (..., Tq, Tk) @ (..., Tk, Dv) -> (..., Tq, Dv)
    return output, weights
    ### END SOLUTION


# %% [markdown]
# Os testes abaixo comparam sua função com `F.scaled_dot_product_attention` do PyTorch em entradas
# aleatórias de formas diferentes, com e sem máscara. Se algo der errado, a mensagem diz o que foi
# testado, o que era esperado, o que voltou e, quando reconhece o erro, qual ele é provavelmente.

# %% nbgrader={"grade": true, "grade_id": "test_sdpa", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_scaled_dot_product_attention(scaled_dot_product_attention)

# %% nbgrader={"grade": true, "grade_id": "test_sdpa_hidden", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (float64, 2-D, gradientes, entradas não contíguas...).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("02_atencao", "test_sdpa_hidden", globals())(scaled_dot_product_attention)
### END HIDDEN TESTS

# %% [markdown]
# Daqui em diante, as demonstrações usam a versão do pacote, `attention_ref`
# (`transformer_course.attention`), para que o notebook rode mesmo antes de você terminar o
# exercício. Quando os testes passam, ela e a sua dão o mesmo resultado:

# %%
gen = seeded_generator(0)
Q = torch.randn(2, 3, 8, generator=gen)
K = torch.randn(2, 5, 8, generator=gen)
V = torch.randn(2, 5, 4, generator=gen)
output, weights = attention_ref(Q, K, V)
output.shape, weights.shape, weights.sum(dim=-1)

# %% [markdown]
# ## 4. Por que dividir por $\sqrt{d_k}$?
#
# **Intuição.** Um produto escalar soma $d_k$ termos. Quanto mais termos, maiores (em módulo)
# ficam os scores; e um softmax de números grandes vira quase um *argmax*: um peso perto de 1,
# o resto perto de 0.
#
# **A conta.** Suponha $q_i, k_i$ independentes, com média 0 e variância 1. Cada termo $q_i k_i$
# tem média 0 e variância $\mathbb{E}[q_i^2]\,\mathbb{E}[k_i^2] = 1$, logo
#
# $$\mathrm{Var}(q \cdot k) = \sum_{i=1}^{d_k} \mathrm{Var}(q_i k_i) = d_k,
# \qquad \mathrm{Var}\!\left(\frac{q \cdot k}{\sqrt{d_k}}\right) = 1 .$$
#
# Dividir por $\sqrt{d_k}$ (o desvio padrão) devolve os scores à escala 1, qualquer que seja
# $d_k$. Nessas mesmas hipóteses — $q$ e $k$ independentes, como no início do treino —, dividir por
# $d_k$ daria variância $1/d_k$: para $d_k$ grande, o softmax começaria quase uniforme.
#
# **Depois do treino, a hipótese cai.** Uma consulta aprende a se alinhar com as chaves que procura;
# se $q$ e $k$ apontam para o mesmo lado, $q \cdot k$ cresce como $d_k$, não como $\sqrt{d_k}$. O
# divisor decide, então, **qual regime fica na escala 1 quando a largura cresce**: $\sqrt{d_k}$ normaliza os scores de vetores independentes (o início do treino); $d_k$, os
# de vetores alinhados (o que o treino produz). A parametrização μP (Yang et al., 2022, *Tensor
# Programs V*) escolhe $d_k$ **de propósito**, junto com outras regras de inicialização e de taxa de
# aprendizado, para que os hiperparâmetros achados num modelo estreito sirvam num largo — e começar
# quase uniforme não a incomoda: a biblioteca `mup`, dos autores, recomenda até inicializar $W_Q$ com
# zeros, o que deixa todos os scores em 0 e a atenção **exatamente** uniforme no primeiro passo.
# $\sqrt{d_k}$ é a escolha do artigo original e da maioria das implementações; $d_k$ é uma escolha
# defensável, com outra justificativa.
#
# **O gradiente.** Para $p = \mathrm{softmax}(s)$, $\;\partial p_i / \partial s_j = p_i(\delta_{ij} - p_j)$.
# Se $p$ é quase um vetor *one-hot*, todo termo é quase 0: o gradiente que chega a $Q$ e $K$
# desaparece e o aprendizado dessas projeções trava.
#
# Vamos medir as três coisas para $d_k$ de 2 a 1024, com 16 chaves por consulta.

# %%
d_ks = [2**k for k in range(1, 11)]
stats = scaling_statistics(d_ks, n_keys=16, n_queries=512, seed=0)
{d_k: (round(a, 1), round(b, 2)) for d_k, a, b in zip(d_ks, stats["std_raw"].tolist(), stats["std_scaled"].tolist())}

# %% [markdown]
# O dicionário acima mostra, para cada $d_k$, o desvio padrão dos scores sem e com escala:
# sem escala ele cresce como $\sqrt{d_k}$ (≈ 32 para $d_k = 1024$); com escala, fica perto de 1.

# %%
plots.scaling_figure(d_ks, stats, n_keys=16)

# %% [markdown]
# **Leitura da figura.** À esquerda, os scores sem escala crescem como $\sqrt{d_k}$ (uma reta de
# inclinação 1/2 no gráfico log-log), e os escalados ficam em 1. No meio, a entropia sem escala cai
# em direção a 0 (a atenção escolhe uma única chave antes de ter aprendido qualquer coisa),
# enquanto a escalada fica praticamente **constante** em todo $d_k$ — abaixo do máximo $\ln 16$,
# porque scores de variância 1 já dão preferências (com $n$ chaves e scores gaussianos de variância
# $\sigma^2$, a entropia fica perto de $\ln n - \sigma^2/2$ quando $n$ é grande). À direita, o
# gradiente que atravessa o softmax sem escala, ainda comparável ao escalado para $d_k$ pequeno,
# encolhe à medida que $d_k$ cresce: é a suspeita do artigo original, de que produtos escalares
# grandes empurram o softmax para regiões de gradientes extremamente pequenos (o softmax
# *saturado*). Os números da entropia:

# %%
print(f"máximo ln 16 = {br(math.log(16), '.2f')}; ln 16 − 1/2 = {br(math.log(16) - 0.5, '.2f')}")
for nome, chave in (("com escala", "entropy_scaled"), ("sem escala", "entropy_raw")):
    print(f"entropia {nome}, por d_k: "
          + "; ".join(f"{d_k}: {br(h, '.2f')}" for d_k, h in zip(d_ks, stats[chave].tolist())))

# %% [markdown]
# A entropia escalada fica na mesma faixa para todo $d_k$, entre a aproximação $\ln 16 - 1/2$ e o
# máximo $\ln 16$; a sem escala despenca.
#
# Os mesmos números vistos de perto, para $d_k = 512$: 512 consultas, 16 chaves cada.

# %%
gen = seeded_generator(1)
q = torch.randn(512, 1, 512, generator=gen)
k = torch.randn(512, 16, 512, generator=gen)
s = (q @ k.transpose(-2, -1)).squeeze(-2)  # (N, 1, Dk) @ (N, Dk, 16) -> (N, 16)
for nome, scores in (("sem escala", s), ("com escala", s / math.sqrt(512))):
    maior = scores.softmax(-1).max(dim=-1).values
    jacobiano = softmax_jacobian_norm(scores).mean()
    print(f"{nome}: maior peso médio {br(maior.mean(), '.2f')}; consultas com um peso > 0,99: "
          f"{br_percent((maior > 0.99).float().mean(), 0)}; ‖jacobiano‖ médio {br(jacobiano, '.3f')}")

# %% [markdown]
# ## 5. Entropia da atenção
#
# Para resumir quão "espalhada" está uma linha de pesos $p$, usamos a entropia (em *nats*,
# com o logaritmo natural):
#
# $$H(p) = -\sum_j p_j \log p_j, \qquad 0 \cdot \log 0 = 0 .$$
#
# Ela vale $\ln T_k$ para pesos uniformes (a atenção não escolhe nada) e 0 para um *one-hot*
# (escolhe uma só chave). Posições mascaradas têm peso exatamente 0, e $\log 0 = -\infty$:
# cuidado para não produzir $0 \cdot (-\infty) = \mathrm{NaN}$.
#
# ### Exercício 2 — `attention_entropy` (2 pontos)
#
# Escreva `attention_entropy(weights)` que recebe pesos de forma $(\ldots, T_k)$ (cada linha soma 1)
# e devolve a entropia de cada linha, forma $(\ldots)$, em nats, sem NaN:
#
# - qualquer número de eixos, inclusive um vetor 1-D $(T_k,)$, que dá um escalar (forma $()$);
# - preserve o dtype (float32 ou float64) e não modifique `weights`;
# - pesos exatamente 0 (posições mascaradas) contam $0 \cdot \log 0 = 0$.

# %% nbgrader={"grade": false, "grade_id": "entropy", "locked": false, "schema_version": 3, "solution": true, "task": false}
def attention_entropy(weights):
    """Entropia (nats) de cada linha de pesos, com 0·log 0 = 0."""
    ### BEGIN SOLUTION
    # xlogy(p, p) = p·log p, e vale 0 quando p = 0: as posições mascaradas não viram NaN.
    return -torch.special.xlogy(weights, weights).sum(dim=-1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_entropy", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_attention_entropy(attention_entropy)

# %% nbgrader={"grade": true, "grade_id": "test_entropy_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (4-D, float64, pesos nulos, vetor 1-D).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("02_atencao", "test_entropy_hidden", globals())(attention_entropy)
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Uma frase em português
#
# Pesos aleatórios não contam história. Para ver a atenção fazendo algo reconhecível, escrevemos
# à mão chaves e consultas com quatro características — animal, pessoa, ação, lugar — para a frase
# "A gata que a menina adotou dormiu no sofá". (No capítulo 3, as projeções que produzem $Q$ e
# $K$ são aprendidas; aqui elas são nossas hipóteses, para a figura ser legível.)

# %%
tokens = ["A", "gata", "que", "a", "menina", "adotou", "dormiu", "no", "sofá"]
#            animal pessoa ação lugar  (como cada palavra se anuncia)
K_frase = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0],
                        [0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0],
                        [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
#            o que cada palavra procura
Q_frase = torch.tensor([[2.0, 0.0, 0.0, 0.0],   # "A": o substantivo que determina
                        [0.0, 0.0, 3.0, 0.0],   # "gata": o que ela fez
                        [4.0, 0.0, 0.0, 0.0],   # "que": a quem se refere
                        [0.0, 2.0, 0.0, 0.0],   # "a": o substantivo que determina
                        [0.0, 0.0, 3.0, 0.0],   # "menina": o que ela fez
                        [0.0, 4.0, 0.0, 0.0],   # "adotou": quem adotou
                        [4.0, 0.0, 0.0, 4.0],   # "dormiu": quem dormiu, e onde
                        [0.0, 0.0, 0.0, 3.0],   # "no": o lugar
                        [0.0, 0.0, 3.0, 0.0]])  # "sofá": o que aconteceu nele
d = Q_frase.size(-1)
_, pesos_frase = attention_ref(Q_frase * math.sqrt(d), K_frase, K_frase)
plots.attention_heatmap(pesos_frase, tokens, tokens, "Atenção com consultas escritas à mão")

# %% [markdown]
# Leia por linhas: "dormiu" divide a atenção entre "gata" e "sofá" (quem e onde); "adotou" olha
# para "menina"; "que" olha para "gata". As palavras "A" e "a" (artigos, na gramática) consultam
# com menos força: metade da atenção vai ao substantivo, o resto se espalha. E "gata" divide a
# atenção igualmente entre "adotou" e "dormiu": as chaves que escrevemos para os dois verbos são
# **idênticas**, e nenhuma consulta — numa cabeça ou em dez — separa dois vetores iguais. Num
# modelo treinado, a chave de cada palavra sai de uma projeção do vetor dela (na primeira camada, o
# embedding somado à posição; nas seguintes, o que as camadas anteriores produziram),
# então "adotou" e "dormiu" já teriam chaves diferentes; várias cabeças (capítulo 3) deixam o modelo
# comparar por vários critérios ao mesmo tempo.
#
# Multiplicamos $Q$ por $\sqrt{d}$ só para anular a divisão e deixar os pesos nítidos — é o que as
# projeções aprendidas fazem sozinhas quando precisam.
#
# A entropia de cada linha resume o que o mapa mostra:

# %%
{t: round(h, 2) for t, h in zip(tokens, attention_entropy_ref(pesos_frase).tolist())}

# %% [markdown]
# ## 7. Explore: o controle de $d_k$
#
# Mova o controle. À esquerda, a entropia média com e sem escala; no meio e à direita, os pesos de
# 8 consultas sobre 8 chaves aleatórias, sem e com a divisão. Repare a partir de qual $d_k$ o mapa
# sem escala vira "um quadrado claro por linha" (softmax saturado), enquanto o escalado não muda de
# caráter.

# %% tags=["nbval-ignore-output"]
from transformer_course.widgets import dk_widget

dk_widget()

# %% [markdown]
# ## 8. Perguntas abertas (corrigidas à mão)
#
# **Pergunta 1 (2 pontos).** Explique, com a conta da variância, por que o artigo divide os scores
# por $\sqrt{d_k}$. Em que hipótese essa conta vale, e o que mudaria se dividíssemos por $d_k$? O que
# aconteceria com o treino, no início, se $d_k = 512$ e não houvesse divisão nenhuma? Cite o que você
# mediu neste capítulo.

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_scaling", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** Com componentes independentes de média 0 e variância 1, $q\cdot k$ é uma soma
# de $d_k$ termos de variância 1, logo tem variância $d_k$ e desvio $\sqrt{d_k}$. Dividir pelo
# desvio, $\sqrt{d_k}$, devolve os scores à variância 1 para qualquer $d_k$. A hipótese é a
# independência entre $q$ e $k$, que vale na inicialização; nela, dividir por $d_k$ daria variância
# $1/d_k$ e o softmax começaria quase uniforme para $d_k$ grande. Depois do treino, $q$ e $k$ ficam
# correlacionados e $q\cdot k$ pode crescer como $d_k$ — é por isso que a μP (Yang et al., 2022)
# divide por $d_k$ de propósito, e começa uniforme sem problema. O divisor escolhe qual regime fica
# na escala 1 quando a largura cresce: vetores independentes ($\sqrt{d_k}$) ou alinhados ($d_k$). Sem divisão e com $d_k = 512$, o desvio dos scores é
# $\sqrt{512} \approx 22{,}6$: o softmax satura (um peso perto de 1 e entropia perto de 0, como na
# figura e na medida de perto) e o jacobiano $p_i(\delta_{ij}-p_j)$ fica perto de zero, então quase
# nenhum gradiente chega a $W_Q$ e $W_K$ e o aprendizado da atenção trava.
#
# **Rubrica (2 pontos).**
# - 1 ponto: deriva (ou cita corretamente) $\mathrm{Var}(q\cdot k) = d_k$ sob independência e conclui
#   que $\sqrt{d_k}$ normaliza para variância 1; meio ponto se só disser "para ficar estável" sem a
#   conta. Sobre $d_k$: vale tanto "daria pesos quase uniformes no início" quanto "a μP divide por
#   $d_k$ porque, treinados, $q$ e $k$ ficam alinhados" — não desconte quem defender $d_k$ com esse
#   argumento.
# - 1 ponto: liga a saturação do softmax a gradientes pequenos (ou entropia ≈ 0) usando um número
#   medido no capítulo; meio ponto se mencionar saturação sem a consequência para o gradiente.
# ### END SOLUTION

# %% [markdown]
# **Pergunta 2 (2 pontos).** Sem máscara e sem nenhuma informação de posição, o que acontece com a
# saída da atenção se você trocar a ordem das palavras da frase (permutar as linhas de $Q$, $K$ e
# $V$ da mesma forma)? Por que isso é um problema para "o cachorro mordeu o homem" e "o homem
# mordeu o cachorro", e o que o capítulo 1 faz a respeito?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_order", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** A atenção é equivariante a permutações: permutar as posições permuta as
# linhas da saída do mesmo jeito, sem mudar nenhum vetor. Os scores dependem só dos conteúdos
# ($q_i \cdot k_j$), não de onde estão; a soma ponderada não tem ordem. Logo "o cachorro mordeu o
# homem" e "o homem mordeu o cachorro" dão a cada palavra exatamente o mesmo vetor de saída,
# embora signifiquem coisas opostas. O capítulo 1 injeta posição: somando uma codificação posicional
# (senoidal ou aprendida) aos embeddings, ou agindo nos próprios scores (RoPE gira $q$ e $k$ conforme
# a posição; ALiBi soma um viés que depende da distância).
#
# **Rubrica (2 pontos).**
# - 1 ponto: afirma que a saída é apenas permutada (equivariância), com a razão (scores só dependem
#   do conteúdo). Dizer "a saída não muda" sem mencionar a permutação das linhas vale meio ponto.
# - 1 ponto: explica a consequência para as duas frases e cita uma forma de codificação de posição.
# ### END SOLUTION

# %% [markdown]
# ## Resumo
#
# - A atenção é uma busca suave: pesos $\mathrm{softmax}(QK^\top/\sqrt{d_k})$ sobre as chaves, e a
#   saída é a média dos valores com esses pesos.
# - Formas: $(\ldots, T_q, d_k)$, $(\ldots, T_k, d_k)$, $(\ldots, T_k, d_v)$ → saída
#   $(\ldots, T_q, d_v)$ e pesos $(\ldots, T_q, T_k)$; `transpose(-2, -1)` e `@` servem para qualquer
#   número de eixos de lote.
# - A máscara booleana (True = pode atender) vira $-\infty$ antes do softmax: peso exatamente 0.
# - Sem a divisão por $\sqrt{d_k}$, a variância dos scores cresce como $d_k$, o softmax satura, a
#   entropia cai a 0 e o gradiente desaparece — medimos os três. A conta supõe $q$ e $k$
#   independentes (o início do treino); a μP divide por $d_k$, a escala de $q$ e $k$ alinhados: o
#   divisor escolhe qual regime fica na escala 1 quando a largura cresce.
# - A atenção sobre redes recorrentes (Bahdanau et al., 2015) já tirava o gargalo do vetor de tamanho
#   fixo; a autoatenção tira a recorrência: caminho de comprimento 1 e todas as posições em paralelo.
# - A entropia $-\sum p \log p$ resume quão concentrada está a atenção de uma consulta.
#
# ## Para ir além
#
# - A. Vaswani et al. (2017), *Attention Is All You Need*, NeurIPS — seção 3.2 (a nota de rodapé 4 traz a
#   conta da variância).
# - D. Bahdanau, K. Cho, Y. Bengio (2015), *Neural Machine Translation by Jointly Learning to Align and
#   Translate*, ICLR — a atenção aditiva sobre uma rede recorrente, que tirou o gargalo do vetor de
#   tamanho fixo, antes do *Transformer*.
# - G. Yang et al. (2022), *Tensor Programs V: Tuning Large Neural Networks via Zero-Shot Hyperparameter
#   Transfer*, arXiv:2203.03466 — a μP, com scores divididos por $d_k$; o README da biblioteca `mup`
#   (github.com/microsoft/mup) recomenda inicializar $W_Q$ com zeros.
# - M.-T. Luong, H. Pham, C. D. Manning (2015), *Effective Approaches to Attention-based Neural Machine
#   Translation*, EMNLP — atenção multiplicativa (produto escalar).
# - Documentação de `torch.nn.functional.scaled_dot_product_attention`, o oráculo da correção.
#
# Próximo capítulo: várias cabeças de atenção em paralelo, cada uma com as suas projeções.
