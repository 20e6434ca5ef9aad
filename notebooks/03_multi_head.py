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
# # Capítulo 3 — Atenção com múltiplas cabeças
#
# **Objetivos.** Ao fim deste capítulo você vai saber:
#
# 1. explicar por que uma única atenção mistura relações diferentes e como várias cabeças evitam isso;
# 2. escrever as projeções $W^Q$, $W^K$, $W^V$, $W^O$ e a separação e junção das cabeças, com as formas
#    certas — e dizer por que um `view` sem `transpose` embaralha *tokens* e cabeças sem dar erro;
# 3. mostrar que o número de parâmetros, $4\,d_{model}^2$ mais os vieses, não depende do número de cabeças;
# 4. construir uma `MultiHeadAttention` com a mesma saída do `nn.MultiheadAttention` do PyTorch (em modo
#    de treino na CPU, com o mesmo estado do gerador aleatório, até o *dropout* coincide) e traduzir as
#    convenções de máscara entre as duas;
# 5. ler mapas de atenção por cabeça.
#
# **Pré-requisitos.** Capítulo 2 (atenção por produto escalar escalado, máscara booleana com
# True = pode atender). `nn.Linear`, `view`/`reshape` e `transpose` do PyTorch.
#
# **Tempo estimado.** 90 minutos.
#
# **Legenda de formas** (a mesma em todo o curso): B lote (*batch*), T comprimento da sequência,
# D `d_model`, H cabeças, Dk = D/H, F `d_ff`, V vocabulário, S comprimento da fonte (atenção cruzada).
# Neste capítulo: Tq comprimento das consultas, Tk comprimento das chaves; e $V$, como $Q$ e $K$, é uma
# matriz (a dos valores), não o vocabulário da legenda.

# %% tags=["nbval-ignore-output"]
# %matplotlib inline
import os

import torch
from torch import nn

from transformer_course import plots
from transformer_course.attention import scaled_dot_product_attention
from transformer_course.checks import check_merge_heads, check_multi_head_attention, check_split_heads
from transformer_course.experiments.ch03 import (
    SENTENCE,
    VOCAB,
    NeighborConfig,
    divisors,
    encode_words,
    neighbor_batch,
    train_neighbor_models,
)
from transformer_course.interop import load_from_torch
from transformer_course.multihead import MultiHeadAttention as MultiHeadAttentionRef
from transformer_course.multihead import merge_heads as merge_heads_ref
from transformer_course.multihead import split_heads as split_heads_ref
from transformer_course.numbers import br_percent
from transformer_course.runtime import get_device, seeded_generator

torch.manual_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__} | dispositivo: {device}")

# %% [markdown]
# ## 1. Uma atenção só mistura as relações
#
# No capítulo 2, na frase "A gata que a menina adotou dormiu no sofá", a consulta de "dormiu"
# procurava duas coisas ao mesmo tempo — quem dormiu e onde — e dividiu os pesos entre "gata" e "sofá".
# A saída da atenção é **uma média ponderada dos valores**: metade do vetor de "gata" mais metade do
# vetor de "sofá", somados num único vetor. O que se perde nessa soma?
#
# Os valores de "gata" e "sofá" usam características diferentes (animal, lugar), então a soma ainda
# diz que havia um animal e um lugar. O que ela apaga é **de qual chave veio cada parte** — e isso
# pesa quando a consulta procura duas palavras do mesmo tipo, em papéis diferentes. O verbo "adotou"
# procura quem adotou (o agente) e quem foi adotado (o paciente). Nas chaves, escritas à mão, cada
# palavra anuncia o seu papel; nos valores, o que ela é. Comparemos a frase com a sua troca de papéis,
# "A menina que a gata adotou":

# %%
#                         agente paciente  (o papel que cada palavra anuncia ao verbo)
K_frase = torch.tensor([[0.0, 1.0],    # gata: foi adotada
                        [1.0, 0.0]])   # menina: adotou
K_trocada = K_frase.flip(0)            # "A menina que a gata adotou": as mesmas palavras, papéis trocados
#                         animal pessoa    (o que cada palavra entrega)
V_frase = torch.tensor([[1.0, 0.0],    # gata
                        [0.0, 1.0]])   # menina
q_adotou = 10.0 * torch.tensor([[1.0, 1.0]])  # "adotou" procura o agente E o paciente
saida_uma, pesos_uma = scaled_dot_product_attention(q_adotou, K_frase, V_frase)
saida_trocada, _ = scaled_dot_product_attention(q_adotou, K_trocada, V_frase)
pesos_uma, saida_uma, saida_trocada

# %% [markdown]
# Uma cabeça: pesos 0,5 e 0,5, e a saída é $[0{,}5;\ 0{,}5]$ — "meio animal, meio pessoa" — **a mesma**
# nas duas frases, que dizem coisas opostas. Quem adotou quem estava nas chaves, e a soma apagou. Agora
# duas cabeças, cada uma com a **sua** consulta: a primeira procura o agente, a segunda o paciente. As
# saídas são **concatenadas**, não somadas:

# %%
q_agente = 10.0 * torch.tensor([[1.0, 0.0]])    # cabeça 1: quem adotou?
q_paciente = 10.0 * torch.tensor([[0.0, 1.0]])  # cabeça 2: quem foi adotado?


def duas_cabecas(K):
    """As saídas das duas cabeças, lado a lado: (1, 2) e (1, 2) -> (1, 4)."""
    agente, _ = scaled_dot_product_attention(q_agente, K, V_frase)
    paciente, _ = scaled_dot_product_attention(q_paciente, K, V_frase)
    return torch.cat([agente, paciente], dim=-1)


duas_cabecas(K_frase).round(decimals=2), duas_cabecas(K_trocada).round(decimals=2)

# %% [markdown]
# Com duas cabeças, as duas frases dão vetores diferentes: as duas primeiras colunas dizem quem adotou
# ("menina" na frase original, "gata" na trocada), as duas últimas quem foi adotado. Os papéis chegam
# separados à camada seguinte. É essa a ideia da **atenção com múltiplas cabeças** (*multi-head
# attention*): várias atenções em paralelo, cada uma com as suas projeções, olhando para **subespaços**
# diferentes dos mesmos vetores. (A seção 7 mede o mesmo efeito numa tarefa treinada: com uma cabeça,
# o vizinho anterior e o seguinte se somam, e a soma não diz qual é qual.)

# %% [markdown]
# ## 2. A fórmula
#
# Vaswani et al. (2017, seção 3.2.2) definem, para $H$ cabeças:
#
# $$\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \ldots, \mathrm{head}_H)\, W^O,
# \qquad \mathrm{head}_i = \mathrm{Attention}(Q W_i^Q,\ K W_i^K,\ V W_i^V),$$
#
# com $W_i^Q, W_i^K \in \mathbb{R}^{d_{model} \times d_k}$, $W_i^V \in \mathbb{R}^{d_{model} \times d_v}$ e
# $W^O \in \mathbb{R}^{H d_v \times d_{model}}$. No artigo, $d_k = d_v = d_{model}/H$ ($512/8 = 64$).
# Os *tokens* são **linhas** de $Q$, $K$ e $V$, e uma projeção multiplica pela direita: $Q W_i^Q$. É a
# convenção do curso inteiro, a mesma do código (`x @ W`). Um detalhe do PyTorch: `nn.Linear`
# guarda a transposta, `weight` de forma (saída, entrada), e calcula `x @ weight.T + bias`.
# Repare: cada cabeça projeta as consultas com **a sua** $W_i^Q$, as chaves com $W_i^K$ e os valores
# com $W_i^V$; $W^O$ só aparece **depois** da concatenação, misturando as cabeças de volta em
# $d_{model}$ colunas. (Um texto que escreva $Q W_i^O$ dentro da cabeça está errado.)
#
# **O truque da implementação.** Pôr as $H$ matrizes $W_i^Q$ lado a lado dá uma única matriz
# $d_{model} \times d_{model}$. Então **uma** `nn.Linear(d_model, d_model)` calcula as consultas de todas
# as cabeças de uma vez, e a cabeça $i$ fica com as colunas $i \cdot d_k$ a $(i+1) \cdot d_k - 1$ do
# resultado. O mesmo vale para $K$ e $V$. O caminho das formas:
#
# $$\underbrace{(B, T, D)}_{\text{entrada}} \xrightarrow{W^Q} (B, T, D)
# \xrightarrow{\text{separar}} (B, H, T, D_k) \xrightarrow{\text{atenção}} (B, H, T, D_k)
# \xrightarrow{\text{juntar}} (B, T, D) \xrightarrow{W^O} (B, T, D)$$
#
# e os pesos de atenção têm forma $(B, H, T_q, T_k)$: **um mapa por cabeça**. Como a função do
# capítulo 2 aceita eixos de lote quaisquer, o eixo $H$ é só mais um eixo de lote: todas as cabeças
# são calculadas numa única multiplicação de matrizes.

# %% [markdown]
# ## 3. Separar e juntar as cabeças
#
# Separar é dividir o último eixo, $D$, em $(H, D_k)$ e depois trazer o eixo das cabeças para antes do
# eixo dos *tokens*:
#
# ```python
# x.view(B, T, H, Dk)   # (B, T, D) -> (B, T, H, Dk): só reinterpreta o último eixo
#  .transpose(1, 2)     # (B, T, H, Dk) -> (B, H, T, Dk): troca dois eixos de lugar
# ```
#
# O atalho tentador, `x.view(B, H, T, Dk)`, **não dá erro** (a quantidade de números é a mesma) e
# produz um tensor da forma certa — mas com o conteúdo errado. `view` não move nenhum número: ele só
# relê a memória, que está na ordem *token* por *token*, em outra forma. A figura mostra um $x$ de 4 *tokens*
# e 8 colunas; cada célula diz de que *token* (t) e coluna (d) veio o número, e a cor é o *token*.

# %%
plots.head_split_figure(seq_len=4, d_model=8, n_heads=2)

# %% [markdown]
# Com `view` + `transpose`, cada cabeça tem os 4 *tokens*, cada um com as suas colunas (a cabeça 0 as
# colunas 0–3, a cabeça 1 as colunas 4–7). Com o `view` direto, a "cabeça 0" recebe só os *tokens* 0 e 1,
# cada um partido em duas "posições", e a "cabeça 1" só os *tokens* 2 e 3. Nenhuma mensagem de erro — e
# o estrago depende da máscara. Sem máscara, cada softmax compara pedaços de *tokens* que não deveria
# (a cabeça 0 só enxerga o começo da frase; a cabeça 1, só o fim). Com a máscara **causal**
# (capítulo 5), é pior: a "posição 0" da cabeça 1 é um pedaço do
# *token* 2, e a junção das cabeças, mesmo feita certo, põe esse pedaço na saída da posição 0. O futuro
# vaza para o passado. Vejamos de quais *tokens* da entrada depende a saída de cada posição, numa
# autoatenção causal com $T = 6$ e $H = 2$ (pelas derivadas: a saída $t$ depende do *token* $j$ se
# $\partial\,\text{saída}_t / \partial x_j \ne 0$):

# %%
T_bug, D_bug, H_bug = 6, 12, 2
torch.manual_seed(0)
mha_bug = MultiHeadAttentionRef(D_bug, H_bug)
causal_bug = torch.ones(T_bug, T_bug, dtype=torch.bool).tril()  # True = pode atender
x_bug = torch.randn(1, T_bug, D_bug, generator=seeded_generator(2))


def separa_com_view(x, n_heads):
    """O atalho errado: (B, T, D) -> (B, H, T, Dk) com `view` direto, sem `transpose`."""
    B, T, D = x.shape
    return x.view(B, n_heads, T, D // n_heads)


def dependencias(separar):
    """(T, T): a saída da posição t (linha) depende do *token* j (coluna)?"""

    def autoatencao_causal(x):
        Q, K, V = (separar(W(x), H_bug) for W in (mha_bug.W_Q, mha_bug.W_K, mha_bug.W_V))  # (B, H, T, Dk)
        saida, _ = scaled_dot_product_attention(Q, K, V, causal_bug)
        return mha_bug.W_O(merge_heads_ref(saida))  # junção certa: (B, H, T, Dk) -> (B, T, D)

    J = torch.autograd.functional.jacobian(autoatencao_causal, x_bug)  # (1, T, D, 1, T, D)
    return J[0, :, :, 0].abs().sum(dim=(1, 3)) > 0  # (T, D, T, D) -> (T, T)


for nome, separar in (("certo (view + transpose)", split_heads_ref), ("errado (view direto)", separa_com_view)):
    print(f"{nome}: ■ = depende do token")
    for t, linha in enumerate(dependencias(separar).tolist()):
        futuro = [j for j in range(t + 1, T_bug) if linha[j]]
        aviso = f"   <- depende do futuro: tokens {futuro}" if futuro else ""
        print(f"  saída {t}: " + " ".join("■" if d else "·" for d in linha) + aviso)

# %% [markdown]
# Com a separação certa, a saída da posição $t$ depende só dos *tokens* $0 \ldots t$ (o triângulo de
# baixo). Com o `view` direto, várias posições dependem de *tokens* seguintes (as marcadas acima). Num
# modelo de linguagem treinado assim, prever a próxima palavra fica mais fácil quando ela vaza para a
# entrada: a perda de treino pode até **melhorar**, e o erro só aparece na geração, quando o futuro
# ainda não existe. Por isso a correção compara com o PyTorch, e não só as formas.
#
# Juntar é o caminho inverso: `transpose(1, 2)` volta para $(B, T, H, D_k)$ e depois os dois últimos eixos
# viram um só, $H \cdot D_k = D$. O `view` só junta eixos que estão lado a lado na memória, e o
# `transpose` separou justamente os dois que queremos juntar ($H$ e $D_k$): `view` recusa. Use
# `reshape` (que copia quando precisa) ou `.contiguous().view(...)`.

# %% [markdown]
# ### Exercício 1 — `split_heads` (3 pontos)
#
# Escreva `split_heads(x, n_heads)`: recebe `x` de forma $(B, T, D)$ e devolve $(B, H, T, D_k)$, em que
# a cabeça $h$ tem as colunas $h \cdot D_k$ a $(h+1) \cdot D_k - 1$ de cada *token*.
# Se $D$ não for divisível por `n_heads`, levante `ValueError` com uma mensagem em português.
# Não modifique `x`. Deve funcionar em float32 e float64, com `x` contíguo ou não (vindo de um
# `transpose`, por exemplo), e deixar o gradiente passar (só operações do PyTorch).

# %% nbgrader={"grade": false, "grade_id": "split_heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
def split_heads(x, n_heads):
    """Separa as cabeças: (B, T, D) -> (B, H, T, D/H)."""
    ### BEGIN SOLUTION
    B, T, D = x.shape
    if n_heads <= 0 or D % n_heads != 0:
        raise ValueError(f"d_model = {D} não é divisível por n_heads = {n_heads}.")
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, T, H, Dk) -> (B, H, T, Dk)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_split_heads", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_split_heads(split_heads)

# %% nbgrader={"grade": true, "grade_id": "test_split_heads_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (float64, uma cabeça, entrada não contígua, gradientes...).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("03_multi_head", "test_split_heads_hidden", globals())(split_heads)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercício 2 — `merge_heads` (2 pontos)
#
# Escreva `merge_heads(x)`: recebe $(B, H, T, D_k)$ e devolve $(B, T, H \cdot D_k)$, com as cabeças lado a
# lado em cada *token* — o inverso exato de `split_heads`. Não modifique `x`. Como no exercício 1:
# float32 e float64, qualquer $H$ (inclusive 1) e $D_k$ (inclusive 1), e o gradiente passa.

# %% nbgrader={"grade": false, "grade_id": "merge_heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
def merge_heads(x):
    """Junta as cabeças: (B, H, T, Dk) -> (B, T, H·Dk)."""
    ### BEGIN SOLUTION
    B, H, T, Dk = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dk)  # (B, H, T, Dk) -> (B, T, H, Dk) -> (B, T, D)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_merge_heads", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_merge_heads(merge_heads)

# %% nbgrader={"grade": true, "grade_id": "test_merge_heads_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (float64, uma cabeça, d_k = 1, gradientes...).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("03_multi_head", "test_merge_heads_hidden", globals())(merge_heads)
### END HIDDEN TESTS

# %% [markdown]
# As demonstrações a seguir usam as versões do pacote (`split_heads_ref`, `merge_heads_ref`), para que o
# notebook rode mesmo antes de você terminar os exercícios. Ida e volta devolvem o tensor original:

# %%
x = torch.randn(2, 5, 12, generator=seeded_generator(0))
cabecas = split_heads_ref(x, n_heads=3)  # (2, 5, 12) -> (2, 3, 5, 4)
cabecas.shape, torch.equal(merge_heads_ref(cabecas), x)

# %% [markdown]
# ## 4. O módulo `MultiHeadAttention`
#
# Agora as peças se juntam: quatro projeções, separar, atenção do capítulo 2 (com o eixo das cabeças
# como eixo de lote), juntar, projeção de saída.
#
# **A máscara.** Booleana, True = pode atender, difundível (*broadcastable*) para os scores
# $(B, H, T_q, T_k)$. Três formas são aceitas:
#
# | forma da máscara | exemplo | o que fazer |
# |---|---|---|
# | $(T_q, T_k)$ | causal | nada: a difusão alinha pela direita |
# | $(B, T_q, T_k)$ | uma por frase do lote | `mask.unsqueeze(1)` → $(B, 1, T_q, T_k)$ |
# | $(B, 1\ \text{ou}\ H, T_q, T_k)$ | *padding* $(B, 1, 1, T_k)$ | usar como está |
#
# A linha do meio é uma armadilha: sem o `unsqueeze(1)`, o PyTorch alinha os eixos pela direita e o
# eixo do **lote** da máscara cai sobre o eixo das **cabeças** dos scores. Quando $B = H$, nada quebra —
# cada cabeça usa a máscara de outra frase. (Uma máscara de *padding* que já vem $(B, 1, 1, T_k)$ não
# deve ganhar outro eixo: ficaria com 5 eixos.)
#
# ### Exercício 3 — `MultiHeadAttention` (7 pontos)
#
# Complete a classe:
#
# - `__init__(d_model, n_heads, dropout=0.0, bias=True)`: `ValueError` se `d_model` não for divisível por
#   `n_heads`; atributos `W_Q`, `W_K`, `W_V`, `W_O`, cada um `nn.Linear(d_model, d_model, bias=bias)`, e
#   nenhum outro parâmetro; um `nn.Dropout(dropout)` para os pesos de atenção (em modo de avaliação,
#   `.eval()`, ele não age);
# - `forward(query, key, value, mask=None)` devolve `(output, weights)`: `output` $(B, T_q, D)$ e `weights`
#   $(B, H, T_q, T_k)$ — um mapa **por cabeça**, antes do *dropout* (o *dropout* entra só no produto
#   pelos valores, não nos pesos devolvidos);
# - `query` $(B, T_q, D)$ pode ter comprimento diferente de `key` e `value` $(B, T_k, D)$ (atenção
#   cruzada), e `key` pode ser diferente de `value`;
# - `mask` nas três formas da tabela acima (inclusive $(B, H, T_q, T_k)$, uma máscara por cabeça);
# - float32 e float64, e o gradiente chega a todas as entradas e a todos os parâmetros;
# - em modo de treino, o *dropout* sorteia do gerador global (`nn.Dropout` ou `F.dropout`) uma vez,
#   sobre os pesos $(B, H, T_q, T_k)$, como o `nn.MultiheadAttention`: os testes (visíveis e ocultos)
#   fixam a semente (`torch.manual_seed`) antes da chamada e comparam com ele;
# - use as suas `split_heads` e `merge_heads` e a `scaled_dot_product_attention` do capítulo 2
#   (já importada); se uma delas estiver errada, a mensagem diz que o erro está nela; não use
#   `nn.MultiheadAttention` nem `F.multi_head_attention_forward` — eles são o gabarito.

# %% nbgrader={"grade": false, "grade_id": "multi_head_attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
class MultiHeadAttention(nn.Module):
    """Atenção com múltiplas cabeças: devolve (output (B, Tq, D), weights (B, H, Tq, Tk))."""

    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        ### BEGIN SOLUTION
        if n_heads <= 0 or d_model % n_heads != 0:
            raise ValueError(f"d_model = {d_model} não é divisível por n_heads = {n_heads}.")
        self.n_heads = n_heads
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, query, key, value, mask=None):
        ### BEGIN SOLUTION
        Q = split_heads(self.W_Q(query), self.n_heads)  # (B, Tq, D) -> (B, H, Tq, Dk)
        K = split_heads(self.W_K(key), self.n_heads)  # (B, Tk, D) -> (B, H, Tk, Dk)
        V = split_heads(self.W_V(value), self.n_heads)  # (B, Tk, D) -> (B, H, Tk, Dk)
        if mask is not None and mask.dim() not in (2, 3, 4):
            raise ValueError(f"a máscara deve ter 2, 3 ou 4 eixos; recebida com forma {tuple(mask.shape)}.")
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # (B, Tq, Tk) -> (B, 1, Tq, Tk): a mesma para todas as cabeças
        _, weights = scaled_dot_product_attention(Q, K, V, mask)  # (B, H, Tq, Tk)
        output = self.dropout(weights) @ V  # (B, H, Tq, Tk) @ (B, H, Tk, Dk) -> (B, H, Tq, Dk)
        return self.W_O(merge_heads(output)), weights  # (B, H, Tq, Dk) -> (B, Tq, D)
        ### END SOLUTION


# %% [markdown]
# Os testes copiam os pesos de um `nn.MultiheadAttention(batch_first=True)` para o seu módulo e
# comparam saídas e pesos por cabeça em autoatenção, atenção cruzada ($T_q \ne T_k$) e máscaras 2-D, 3-D
# e 4-D, sem *dropout* ativo. Ganchos (*forward hooks*) nas quatro projeções comparam também as etapas
# do meio, na ordem do cálculo — `W_Q(query)`, `W_K(key)`, `W_V(value)`, `weights`, a entrada de `W_O`
# (as cabeças juntadas) e `output` —, e a mensagem diz em qual delas aparece a primeira diferença; se
# ela coincide com um erro conhecido (separação sem `transpose`, escala por $\sqrt{d_{model}}$, a mesma
# projeção para K e V...), diz qual — depois de conferi-lo num segundo caso, com outros tamanhos. Os
# testes (visíveis e ocultos) repetem a comparação em modo de treino, com `dropout=0.5` e o mesmo
# estado do gerador aleatório nos dois módulos: um *dropout* fora do lugar aparece ali.

# %% nbgrader={"grade": true, "grade_id": "test_multi_head_attention", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_multi_head_attention(MultiHeadAttention)

# %% nbgrader={"grade": true, "grade_id": "test_multi_head_attention_hidden", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (float64, sem viés, uma cabeça, d_k = 1, máscara por cabeça,
# dropout em modo de treino, gradientes iguais aos do PyTorch, atalhos proibidos...).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("03_multi_head", "test_multi_head_attention_hidden", globals())(MultiHeadAttention)
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Igual ao PyTorch, peso por peso
#
# O `nn.MultiheadAttention` guarda $W^Q$, $W^K$ e $W^V$ empilhadas num único parâmetro,
# `in_proj_weight` de forma $(3D, D)$, e $W^O$ em `out_proj`. A função `load_from_torch` do pacote copia
# as três fatias e a projeção de saída para um módulo com `W_Q`, `W_K`, `W_V`, `W_O` — o da referência
# ou o seu. Com os mesmos pesos, as saídas coincidem até o arredondamento do float32:

# %%
d_model, n_heads = 16, 4
torch_mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
nosso = load_from_torch(MultiHeadAttentionRef(d_model, n_heads), torch_mha)
gen = seeded_generator(1)
consultas = torch.randn(2, 3, d_model, generator=gen)  # (B, Tq, D): atenção cruzada, Tq = 3
memoria = torch.randn(2, 5, d_model, generator=gen)    # (B, Tk, D): Tk = 5
saida_torch, pesos_torch = torch_mha(consultas, memoria, memoria, average_attn_weights=False)
saida_nossa, pesos_nossos = nosso(consultas, memoria, memoria)
(saida_nossa - saida_torch).abs().max().item(), (pesos_nossos - pesos_torch).abs().max().item()

# %% [markdown]
# Por padrão o PyTorch devolve a **média** dos mapas das cabeças (`average_attn_weights=True`), forma
# $(B, T_q, T_k)$; pedimos um mapa por cabeça para comparar.
#
# **E com *dropout*?** Aqui os dois módulos têm `dropout=0`. Com `dropout > 0` em modo de treino, cada
# chamada sorteia uma máscara nova do gerador global; as saídas só coincidem se os dois partirem do
# mesmo estado do gerador (`torch.manual_seed` antes de cada chamada), porque os dois sorteiam a
# máscara sobre os pesos $(B, H, T_q, T_k)$ na mesma ordem — é assim que a correção compara. E há uma
# diferença que nenhuma semente apaga: o `nn.MultiheadAttention` devolve os pesos **depois** do
# *dropout* (com zeros e valores reescalados por $1/(1-p)$), e o nosso módulo devolve os de **antes**,
# que somam 1 em cada linha. Em modo de avaliação (`.eval()`) o *dropout* não age, e os pesos também
# coincidem.
#
# **Na CPU.** A máscara só coincide porque o PyTorch, aqui, sorteia o *dropout* com o mesmo gerador e
# na mesma ordem que o nosso `nn.Dropout`. Com `need_weights=False`, o `nn.MultiheadAttention` chama
# `F.scaled_dot_product_attention` (é o que está em `torch/nn/functional.py`, na função
# `multi_head_attention_forward`); na CPU, medimos abaixo, a máscara continua a mesma. Numa GPU, porém,
# essa chamada usa kernels fundidos (FlashAttention, *memory-efficient*), que sorteiam a máscara de
# *dropout* dentro do próprio kernel, com um gerador próprio: a mesma semente não dá a mesma máscara, e
# só a comparação em modo de avaliação continua valendo.

# %%
torch_drop = nn.MultiheadAttention(d_model, n_heads, dropout=0.5, batch_first=True)  # modo de treino
nosso_drop = load_from_torch(MultiHeadAttentionRef(d_model, n_heads, dropout=0.5), torch_drop)
with torch.no_grad():
    torch.manual_seed(7)
    saida_t_treino, pesos_t_treino = torch_drop(consultas, memoria, memoria, average_attn_weights=False)
    torch.manual_seed(7)  # o mesmo estado do gerador: a mesma máscara de dropout
    saida_n_treino, pesos_n_treino = nosso_drop(consultas, memoria, memoria)
    torch.manual_seed(7)
    saida_t_sem_pesos, _ = torch_drop(consultas, memoria, memoria, need_weights=False)
    torch_drop.eval(), nosso_drop.eval()
    saida_t_eval, pesos_t_eval = torch_drop(consultas, memoria, memoria, average_attn_weights=False)
    saida_n_eval, pesos_n_eval = nosso_drop(consultas, memoria, memoria)
{
    "treino, mesma semente, max |Δ| na saída": (saida_n_treino - saida_t_treino).abs().max().item(),
    "treino, need_weights=False (CPU), max |Δ| na saída": (saida_n_treino - saida_t_sem_pesos).abs().max().item(),
    "treino, soma das linhas dos pesos (PyTorch)": [round(v, 2) for v in pesos_t_treino[0, 0].sum(-1).tolist()],
    "treino, soma das linhas dos pesos (nosso)": [round(v, 2) for v in pesos_n_treino[0, 0].sum(-1).tolist()],
    "eval, max |Δ| na saída": (saida_n_eval - saida_t_eval).abs().max().item(),
    "eval, max |Δ| nos pesos": (pesos_n_eval - pesos_t_eval).abs().max().item(),
}

# %% [markdown]
# Com a mesma semente, as saídas de treino coincidem até o arredondamento do float32 (nesta CPU, também
# com `need_weights=False`). Os pesos não: no
# PyTorch, as linhas em modo de treino não somam 1 (alguns pesos viraram zero, os outros foram
# multiplicados por 2); as nossas somam. Em modo de avaliação, também os pesos coincidem.
#
# **As convenções de máscara.** Aqui mora a confusão mais comum. O curso usa booleanas com
# True = pode atender, como `F.scaled_dot_product_attention`. O `nn.MultiheadAttention` aceita três
# outras:
#
# | máscara | forma | True significa |
# |---|---|---|
# | a do curso e de `F.scaled_dot_product_attention` | difundível para $(B, H, T_q, T_k)$ | **pode atender** |
# | `attn_mask` booleana | $(T_q, T_k)$ ou $(B \cdot H, T_q, T_k)$ | **bloqueado** |
# | `attn_mask` de ponto flutuante | as mesmas | — (somada aos scores: 0 libera, $-\infty$ bloqueia) |
# | `key_padding_mask` booleana | $(B, T_k)$ | **é padding** (ignore) |
#
# A mesma máscara causal, traduzida para cada convenção, dá o mesmo resultado:

# %%
x = torch.randn(2, 5, d_model, generator=gen)
pode = torch.ones(5, 5, dtype=torch.bool).tril()  # nossa causal: True = pode atender
aditiva = torch.zeros(5, 5).masked_fill(~pode, float("-inf"))
saida_ref, _ = nosso(x, x, x, mask=pode)
saida_bool, _ = torch_mha(x, x, x, attn_mask=~pode)      # True = bloqueado: invertida
saida_float, _ = torch_mha(x, x, x, attn_mask=aditiva)  # 0 ou -inf somado aos scores
[(s - saida_ref).abs().max().item() for s in (saida_bool, saida_float)]

# %% [markdown]
# E o *padding*: na nossa convenção uma máscara $(B, 1, 1, T_k)$ com True nos *tokens* reais; no
# `key_padding_mask`, $(B, T_k)$ com True nos *tokens* de *padding*.

# %%
reais = torch.tensor([[True, True, True, True, True], [True, True, True, False, False]])  # (B, Tk)
saida_ref, _ = nosso(x, x, x, mask=reais[:, None, None, :])  # (B, Tk) -> (B, 1, 1, Tk)
saida_pad, _ = torch_mha(x, x, x, key_padding_mask=~reais)   # True = padding
(saida_pad - saida_ref).abs().max().item()

# %% [markdown]
# Passar a nossa máscara direto para o `attn_mask` não dá erro — e bloqueia exatamente as posições que
# deveriam ser vistas. Com a máscara causal há um sintoma visível: a última consulta pode ver **todas**
# as chaves, e a sua linha inteira de True vira, no `attn_mask`, "todas bloqueadas". Sem nenhuma chave,
# o softmax divide 0 por 0, e a saída dessa posição é NaN:

# %%
saida_errada, _ = torch_mha(x, x, x, attn_mask=pode)  # sem inverter: o PyTorch lê True = bloqueado
saida_errada_sem_pesos, _ = torch_mha(x, x, x, attn_mask=pode, need_weights=False)
saida_errada.isnan().any(dim=-1), saida_errada_sem_pesos[:, -1].abs().max().item()  # (B, T): NaN?; a última linha

# %% [markdown]
# A última posição de cada frase sai NaN; as outras saem sem erro nenhum, e erradas (cada consulta
# atende só às chaves que deveria ignorar). Com `need_weights=False` o PyTorch faz a conta por outro
# caminho e devolve zeros nessa linha, em vez de NaN (o segundo número acima) — um erro ainda mais
# silencioso. O capítulo 5 volta às linhas totalmente mascaradas com calma.

# %% [markdown]
# ## 6. Os parâmetros não dependem de $H$
#
# Cada projeção é uma `nn.Linear(D, D)`: $D^2$ pesos mais $D$ vieses. São quatro, logo
#
# $$\#\text{parâmetros} = 4\,D^2 + 4\,D,$$
#
# e $H$ não aparece: mais cabeças só cortam as mesmas matrizes em fatias mais finas. Contando, para
# $D = 512$ (o tamanho do artigo original):

# %%
d_model = 512
contagem = {h: sum(p.numel() for p in MultiHeadAttentionRef(d_model, h).parameters())
            for h in (1, 2, 4, 8, 16, 64)}
contagem, 4 * d_model**2 + 4 * d_model

# %% [markdown]
# O `nn.MultiheadAttention` tem o mesmo total (com `in_proj_weight` de $3D \times D$ e `out_proj`):

# %%
sum(p.numel() for p in nn.MultiheadAttention(d_model, 8).parameters())

# %% [markdown]
# O custo das projeções (multiplicações por $D \times D$) também não muda com $H$. O que muda é o
# número de mapas de atenção: $H$ mapas de $T_q \times T_k$ — a memória dos pesos cresce com $H$.
#
# ## 7. O que as cabeças aprendem
#
# Uma tarefa pequena, feita para que uma cabeça só **não** consiga: cada posição precisa dizer qual é o
# *token* **anterior** e qual é o **seguinte**. O modelo é mínimo — *embedding* do *token* + codificação
# posicional aprendida, **uma** camada de atenção, e uma leitura linear; sem conexão residual, então tudo o que a
# posição $t$ sabe dos vizinhos passa pela atenção. Treinamos o mesmo modelo com
# $H \in \{1, 2, 4, 8, 16\}$ e $d_{model} = 16$, sobre sequências aleatórias das 12 palavras de `VOCAB`:
# mesmos dados, mesmos parâmetros.

# %% [markdown]
# Um exemplo de sequência de treino e dos seus dois alvos por posição ("—" onde não há vizinho):

# %%
seq, alvos = neighbor_batch(NeighborConfig(), seeded_generator(0), batch_size=1)  # (1, T), (1, T, 2)
for rotulo, ids in (("sequência", seq[0]), ("anterior", alvos[0, :, 0]), ("seguinte", alvos[0, :, 1])):
    print(f"{rotulo:>9}:", " ".join(f"{VOCAB[i] if i >= 0 else '—':>7}" for i in ids.tolist()))

# %% tags=["nbval-ignore-output"]
cfg = NeighborConfig()
if os.environ.get("NBGRADER_EXECUTION"):  # na correção automática, sem treino (nada é avaliado aqui)
    cfg = NeighborConfig(steps=0)
resultados = train_neighbor_models(divisors(cfg.d_model), cfg, device=device)
{h: br_percent(r["accuracy"]) for h, r in resultados.items()}

# %%
plots.heads_tradeoff_figure(resultados, cfg.d_model)

# %% [markdown]
# **Leitura da figura.** À esquerda, o mesmo número de parâmetros para todo $H$. À direita, a acurácia
# (os números exatos estão na célula do treino, acima; variam um pouco de máquina para máquina, e os
# testes do curso conferem, com o treino completo, que $H = 2$ passa de 97%, $H = 4$ e $H = 8$ de
# 95%, e que $H = 1$ e $H = 16$ ficam abaixo de 80%):
#
# - **$H = 1$** fica bem abaixo dos outros. A cabeça precisa olhar para dois lugares; se divide os pesos, a saída
#   é a soma dos dois vizinhos, e uma soma é simétrica — "gata antes, sofá depois" e "sofá antes, gata
#   depois" dão o mesmo vetor. É o problema da seção 1, medido.
# - **$H = 2$ a $8$** acertam (quase) tudo: cada cabeça pode se dedicar a um vizinho.
# - **$H = 16$** volta a errar, também abaixo de 80%: com $d_k = 1$, o score de cada cabeça é o produto de **dois números**,
#   $q_t \cdot k_s$, e o maior deles para uma consulta está sempre na chave de maior (ou de menor) $k_s$ —
#   nenhuma cabeça consegue apontar para "a posição logo antes de mim". Cabeças finas demais têm
#   pouca expressividade (Bhojanapalli et al., 2020, chamam isso de gargalo de posto baixo).
#
# Agora os mapas das cabeças sobre uma frase em português (que o modelo nunca viu inteira: ele treinou
# com sequências aleatórias dessas palavras). Primeiro, duas cabeças:

# %%
tokens = SENTENCE.split()  # "a gata que a menina adotou dormiu no sofá"
ids_frase = encode_words(tokens)  # índices no vocabulário do experimento, VOCAB
with torch.no_grad():
    _, pesos_2 = resultados[2]["model"](ids_frase.view(1, -1))  # (1, H, T, T)
plots.head_grid(pesos_2[0], tokens, "Duas cabeças: cada uma olha para um vizinho")

# %% [markdown]
# Uma cabeça olha para a palavra anterior (a diagonal logo abaixo da principal) e a outra para a
# seguinte (logo acima) — ninguém mandou; a divisão de trabalho saiu do treino. (Na correção automática,
# que pula o treino, os mapas saem ao acaso.) Com uma cabeça só, a mesma tarefa:

# %%
with torch.no_grad():
    _, pesos_1 = resultados[1]["model"](ids_frase.view(1, -1))
plots.head_grid(pesos_1[0], tokens, "Uma cabeça: os pesos se dividem entre os dois vizinhos")

# %%
T_frase = ids_frase.numel()
anterior = pesos_1[0, 0, torch.arange(1, T_frase), torch.arange(T_frase - 1)]  # peso de t em t - 1
seguinte = pesos_1[0, 0, torch.arange(T_frase - 1), torch.arange(1, T_frase)]  # peso de t em t + 1
{"peso médio no vizinho anterior": round(anterior.mean().item(), 2),
 "peso médio no vizinho seguinte": round(seguinte.mean().item(), 2)}

# %% [markdown]
# Cada linha reparte o peso entre a palavra anterior e a seguinte (as médias acima): a média que
# apaga a ordem. Em modelos de verdade, treinados com texto, aparecem cabeças parecidas com essas
# (olhar para o *token* anterior ou seguinte) e outras que seguem relações sintáticas, como verbo → objeto
# ou determinante → substantivo (Clark et al., 2019; Voita et al., 2019). Também se mede que muitas
# cabeças podem ser removidas depois do treino com pouca perda (Michel et al., 2019): nem toda cabeça
# se especializa em algo útil.

# %% [markdown]
# ## 8. Explore: o número de cabeças
#
# Mova o controle pelos divisores de $d_{model} = 16$. Para cada $H$, os mapas de cada cabeça sobre a
# frase, a acurácia do modelo na tarefa dos vizinhos e o número de parâmetros da atenção — que não muda.
# Procure: em quantas cabeças aparece o padrão "anterior" e o "seguinte" quando $H = 4$ ou $8$? Com
# $H = 16$, para onde olham as cabeças, já que não conseguem olhar para uma posição relativa?

# %% tags=["nbval-ignore-output"]
from transformer_course.widgets import heads_widget

heads_widget(SENTENCE, resultados, cfg)

# %% [markdown]
# ## 9. Perguntas abertas (corrigidas à mão)
#
# **Pergunta 1 (2 pontos).** Com o mesmo número de parâmetros, por que usar $H$ cabeças de largura
# $d_{model}/H$ em vez de uma cabeça de largura $d_{model}$? E por que não levar isso ao extremo,
# $H = d_{model}$? Use o que você mediu na seção 7.

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_why_heads", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** Uma cabeça produz, para cada consulta, **uma** distribuição de pesos e portanto
# uma única média ponderada dos valores: se a posição precisa de duas informações de lugares
# diferentes, a média as soma num vetor só e a distinção se perde. Com $H$ cabeças, cada consulta tem
# $H$ distribuições independentes, e as saídas são concatenadas em colunas separadas, sem se misturar.
# O custo em parâmetros é o mesmo ($4d^2 + 4d$, as mesmas matrizes cortadas em fatias). Na tarefa dos
# vizinhos, $H = 1$ ficou abaixo de 80% e $H = 2$ a $8$ acima de 95% (o aluno deve citar os números
# da sua execução). No extremo $H = d_{model}$, cada cabeça tem $d_k = 1$: o score é o produto de dois
# números e a cabeça não consegue expressar padrões como "a posição anterior" (posto baixo); a
# acurácia caiu de novo (abaixo de 80% com $H = 16$). Há um
# equilíbrio: cabeças suficientes para várias relações, largas o bastante para expressá-las.
#
# **Rubrica (2 pontos).**
# - 1 ponto: explica que uma cabeça dá uma só média ponderada por consulta (as relações se misturam) e
#   que várias cabeças dão várias distribuições, concatenadas, com os mesmos parâmetros.
# - 1 ponto: explica o limite de $d_k$ pequeno demais (expressividade/posto do score $q \cdot k$) citando
#   um número medido; meio ponto se só disser "fica pior" sem a razão.
# ### END SOLUTION

# %% [markdown]
# **Pergunta 2 (2 pontos).** Na frase "A gata que a menina adotou dormiu no sofá", proponha duas
# especializações de cabeça úteis para entender a frase (além de "olhar o vizinho"). Para cada uma,
# descreva como ficaria o mapa de calor (que linhas olham para que colunas) e diga como você verificaria,
# num modelo treinado, que uma cabeça faz mesmo isso.

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_specialisation", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** (1) Uma cabeça **verbo → sujeito**: a linha de "dormiu" concentra o peso em "gata"
# e a de "adotou" em "menina" — um ponto claro por linha de verbo, longe da diagonal. (2) Uma cabeça de
# **correferência**: a linha de "que" olha para "gata", o antecedente do pronome relativo. Outras
# aceitáveis: determinante → substantivo ("a" → "gata"/"menina"), preposição → complemento
# ("no" → "sofá"), verbo → lugar ("dormiu" → "sofá"). Para verificar: medir, em muitas frases anotadas,
# com que frequência o maior peso da cabeça cai na palavra que a relação prevê (como Clark et al., 2019,
# fizeram com o BERT), e fazer uma ablação — zerar a cabeça e ver se a tarefa que depende da relação
# piora mais do que zerando outras cabeças. Um só exemplo bonito não prova a especialização.
#
# **Rubrica (2 pontos).**
# - 1 ponto: duas especializações plausíveis, cada uma com a descrição concreta do mapa na frase dada.
# - 1 ponto: um método de verificação quantitativo (estatística sobre muitas frases ou ablação); meio
#   ponto se só propuser "olhar o mapa" de alguns exemplos.
# ### END SOLUTION

# %% [markdown]
# **Pergunta 3 (2 pontos).** Um colega separou as cabeças com `x.view(B, H, T, Dk)`, sem `transpose`.
# O código roda, as formas estão certas e o modelo até treina. O que está errado, por que nenhum erro
# aparece, e que teste pegaria o problema?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_view_bug", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** `view` não move dados: relê a memória, que está em ordem (*token*, coluna), como se
# fosse (cabeça, *token*, coluna). A "cabeça 0" recebe então pedaços dos primeiros *tokens* — os $T/H$
# primeiros inteiros, cada um partido em $H$ "posições", quando $H$ divide $T$; senão, um *token* fica
# dividido entre duas cabeças —, em vez de todos os $T$ *tokens* com as colunas $0 \ldots D_k-1$.
# Nenhum erro aparece porque o número de elementos é o mesmo e a forma final é a esperada. E não é uma
# permutação fixa que as camadas seguintes possam desfazer: o erro muda **o que cada softmax compara**
# — cada cabeça só vê pedaços de uma parte da frase, e compara pedaços de *tokens* com pedaços de
# outros. O modelo treina (a perda cai), mas aprende outra coisa; uma máscara de *padding* deixa de
# corresponder aos *tokens*, e com a máscara causal o futuro vaza para o passado (seção 3), o que pode
# até melhorar a perda de treino e faz a geração falhar. Pega o problema um teste de **valores**, não de formas: comparar com uma
# referência (o `nn.MultiheadAttention` com os mesmos pesos, ou a separação feita com fatias), ou um
# tensor rotulado como o da figura (x[t, d] = 10·t + d) e conferir que cada linha de cada cabeça vem de
# um único *token*.
#
# **Rubrica (2 pontos).**
# - 1 ponto: explica que `view` reinterpreta a memória sem reordenar e que isso mistura *tokens* e
#   cabeças, sem erro porque o total de elementos coincide. Dizer que o modelo "se adapta porque é só
#   uma permutação" perde meio ponto: cada softmax passa a comparar outros pedaços. Citar o vazamento
#   do futuro com máscara causal não é obrigatório.
# - 1 ponto: propõe um teste de valores (referência com pesos copiados, tensor rotulado, propriedade
#   como equivariância a permutações). Zero neste item se o teste proposto só confere formas (o erro
#   passa por ele).
# ### END SOLUTION

# %% [markdown]
# ## Resumo
#
# - Uma cabeça dá uma só média ponderada por consulta: relações diferentes se somam e se confundem.
#   $H$ cabeças dão $H$ distribuições, e as saídas são concatenadas e misturadas por $W^O$.
# - $\mathrm{head}_i = \mathrm{Attention}(QW_i^Q, KW_i^K, VW_i^V)$; na prática, uma `nn.Linear(D, D)` por
#   projeção e as cabeças são fatias de $D_k = D/H$ colunas.
# - Separar: `view(B, T, H, Dk).transpose(1, 2)`; juntar: `transpose(1, 2).reshape(B, T, D)`. Um `view`
#   sem `transpose` não dá erro e embaralha *tokens* e cabeças; com máscara causal, o futuro vaza.
# - Parâmetros: $4D^2 + 4D$, para qualquer $H$. Cabeças finas demais ($d_k = 1$) perdem expressividade.
# - Com os pesos copiados, o nosso módulo é igual ao `nn.MultiheadAttention` (em modo de treino na CPU,
#   com o mesmo estado do gerador; numa GPU, com `need_weights=False`, o *dropout* dos kernels fundidos
#   sorteia outra máscara), desde que as máscaras sejam traduzidas: no curso True = pode
#   atender; no `attn_mask` booleano True = bloqueado (a nossa máscara causal passada sem inverter
#   deixa a última linha em NaN); no `key_padding_mask` True = *padding*. (Em modo
#   de treino, o PyTorch devolve os pesos depois do *dropout*; o nosso módulo, os de antes.)
#
# ## Para ir além
#
# - A. Vaswani et al. (2017), *Attention Is All You Need*, NeurIPS — seção 3.2.2, a atenção com
#   múltiplas cabeças.
# - K. Clark, U. Khandelwal, O. Levy, C. D. Manning (2019), *What Does BERT Look At? An Analysis of
#   BERT's Attention*, BlackboxNLP — cabeças que seguem o *token* anterior/seguinte, relações
#   sintáticas e correferência.
# - E. Voita, D. Talbot, F. Moiseev, R. Sennrich, I. Titov (2019), *Analyzing Multi-Head Self-Attention:
#   Specialized Heads Do the Heavy Lifting, the Rest Can Be Pruned*, ACL.
# - P. Michel, O. Levy, G. Neubig (2019), *Are Sixteen Heads Really Better than One?*, NeurIPS.
# - S. Bhojanapalli, C. Yun, A. S. Rawat, S. Reddi, S. Kumar (2020), *Low-Rank Bottleneck in Multi-head
#   Attention Models*, ICML — por que $d_k$ pequeno demais limita cada cabeça.
# - Documentação de `torch.nn.MultiheadAttention`, o oráculo da correção, e suas três convenções de máscara.
#
# Próximo capítulo: a atenção com múltiplas cabeças vira uma peça da camada do codificador e do
# decodificador, junto com a rede *feed-forward*, as conexões residuais e a normalização.
