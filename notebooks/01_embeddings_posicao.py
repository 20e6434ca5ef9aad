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
# # Capítulo 1 — Embeddings e posição: como o *Transformer* sabe a ordem das palavras
#
# **Objetivos.** Ao fim deste capítulo você vai saber:
#
# 1. mostrar, com números, que a autoatenção sem posição e sem máscara é *equivariante a
#    permutações* — embaralhar as palavras só embaralha a saída — e dizer por que um modelo causal
#    escapa em parte disso;
# 2. transformar *tokens* em vetores com uma tabela de *embeddings* e explicar o fator $\sqrt{d_\text{model}}$
#    (junto com a inicialização da tabela) e o `padding_idx`;
# 3. construir a codificação posicional (*positional encoding*) senoidal, dizer quais dimensões
#    oscilam depressa e quais
#    devagar, e provar que $PE(p+k)$ é uma rotação de $PE(p)$;
# 4. implementar a codificação posicional aprendida, RoPE (rotação de pares) e ALiBi (viés linear
#    nos scores), e
#    comparar os quatro esquemas — inclusive no que a evidência diz sobre textos mais longos que os
#    do treino.
#
# **Pré-requisitos.** Tensores do PyTorch, `nn.Module`, seno e cosseno, números complexos na forma
# $e^{i\varphi}$. A atenção do capítulo 2 aparece na seção 1 como caixa-preta:
# $\text{softmax}(QK^\top/\sqrt{d_k})V$.
#
# **Tempo estimado.** 90 a 120 minutos.
#
# **Legenda de formas** (a mesma em todo o curso): B lote (*batch*), T comprimento da sequência,
# D `d_model`, H cabeças, Dk = D/H, F `d_ff`, V vocabulário, S comprimento da fonte (atenção cruzada).
# Quando um exercício usa uma dessas letras com outro sentido, o enunciado diz.
#
# **Números.** Os textos, as figuras e as mensagens do curso escrevem números como no Brasil:
# vírgula decimal (0,5), ponto de milhar (1.048.576) e potências de 10 ($4 \times 10^{-7}$). Um valor
# que o próprio Python mostra no fim de uma célula — um `float`, uma lista, um tensor — sai como o
# Python o escreve, com ponto decimal (`0.5`), como no código.

# %% tags=["nbval-ignore-output"]
# %matplotlib inline
import math

import torch
from torch import nn
from torch.nn import functional as F

from transformer_course import plots
from transformer_course import positional as ref
from transformer_course.attention import scaled_dot_product_attention as attention_ref
from transformer_course.checks import (
    check_alibi_bias,
    check_alibi_slopes,
    check_apply_rope,
    check_learned_positional_embedding,
    check_sinusoidal_encoding,
    check_sinusoidal_positional_encoding,
    check_token_embedding,
)
from transformer_course.experiments.ch01 import cosine_similarity_matrix, toeplitz_deviation
from transformer_course.numbers import br
from transformer_course.runtime import get_device, seeded_generator

torch.manual_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__} | dispositivo: {device}")

# %% [markdown]
# ## 1. Sem posição, a ordem não existe
#
# Compare "o cachorro mordeu o homem" com "o homem mordeu o cachorro": as mesmas cinco palavras,
# significados opostos. Uma rede recorrente percebe a diferença porque lê uma palavra depois da outra.
# A autoatenção (*self-attention*, capítulo 2) olha para todas ao mesmo tempo: os scores
# $q_i \cdot k_j$ dependem só do
# **conteúdo** dos vetores, não de onde eles estão.
#
# Em símbolos: se $P$ é uma matriz de permutação (reordena as linhas de $X$), então
#
# $$\text{AutoAtenção}(PX) = P\,\text{AutoAtenção}(X).$$
#
# Isso se chama **equivariância a permutações** (*permutation equivariance*): reordenar a entrada
# reordena a saída da mesma forma,
# e nenhum vetor muda. Vamos verificar com uma tabela de vetores sorteados e projeções sorteadas.

# %%
frase_a = "o cachorro mordeu o homem".split()
frase_b = "o homem mordeu o cachorro".split()
vocab = {palavra: i for i, palavra in enumerate(sorted(set(frase_a)))}
ids_a = torch.tensor([vocab[p] for p in frase_a], device=device)
ids_b = torch.tensor([vocab[p] for p in frase_b], device=device)

d = 8
gen = seeded_generator(0)
tabela = torch.randn(len(vocab), d, generator=gen).to(device)  # um vetor por palavra
W_Q, W_K, W_V = (torch.randn(d, d, generator=gen).div(math.sqrt(d)).to(device) for _ in range(3))


def autoatencao(x):
    """Autoatenção de uma cabeça, sem nenhuma informação de posição: (T, D) -> (T, D)."""
    output, _ = attention_ref(x @ W_Q, x @ W_K, x @ W_V)
    return output


saida_a, saida_b = autoatencao(tabela[ids_a]), autoatencao(tabela[ids_b])
perm = torch.tensor([0, 4, 2, 3, 1], device=device)  # frase_b[k] == frase_a[perm[k]]
torch.allclose(saida_b, saida_a[perm], atol=1e-6)

# %% [markdown]
# `True`: a saída da frase B é exatamente a saída da frase A com as linhas trocadas. Em particular,
# "cachorro" recebe **o mesmo vetor** nas duas frases (a diferença impressa abaixo é só o
# arredondamento do float32, perto do seu épsilon, $\approx 10^{-7}$) — o modelo não tem como saber
# quem mordeu quem:

# %%
(saida_a[1] - saida_b[4]).abs().max().item()  # "cachorro" na frase A (posição 1) e na B (posição 4)

# %% [markdown]
# Basta somar a cada vetor algo que dependa da posição (aqui, a codificação senoidal da seção 3)
# para a simetria quebrar: agora "cachorro" na posição 1 e "cachorro" na posição 4 são vetores
# diferentes, e a saída deixa de ser uma simples permutação.

# %%
pe = ref.sinusoidal_encoding(len(frase_a), d).to(device)
com_pos_a, com_pos_b = autoatencao(tabela[ids_a] + pe), autoatencao(tabela[ids_b] + pe)
torch.allclose(com_pos_b, com_pos_a[perm], atol=1e-6), (com_pos_a[1] - com_pos_b[4]).abs().max().item()

# %% [markdown]
# **Um limite deste argumento.** A equivariância vale para a autoatenção **sem máscara**, a de um
# codificador (capítulo 4): ali, sem posição, o modelo vê um saco de palavras. Um modelo de
# linguagem causal (capítulo 5) usa uma máscara que deixa a posição $i$ ver só os $i + 1$ primeiros
# *tokens* — e a própria máscara já distingue as posições: a primeira só vê a si mesma, a
# segunda vê duas... Haviv et al. (2022) treinaram modelos de linguagem causais **sem nenhuma**
# codificação posicional e obtiveram perplexidades próximas às dos modelos com posição; sondas
# treinadas sobre as camadas internas recuperaram a posição absoluta. Kazemnejad et al. (2023) foram
# além: em tarefas sintéticas de raciocínio e aritmética, esses modelos generalizaram para sequências
# mais longas que as do treino melhor que os com codificação explícita. A codificação posicional continua sendo o padrão, mas
# "sem posição o *Transformer* não vê a ordem" é uma afirmação sobre a atenção sem máscara.
#
# Há duas famílias de solução, e este capítulo constrói as duas:
#
# - **somar a posição ao embedding**, antes da primeira camada: codificação senoidal (seção 3) e
#   codificação posicional aprendida (seção 4) — posição **absoluta**;
# - **mexer nos scores de atenção**, em cada camada: RoPE gira $q$ e $k$ (seção 5), ALiBi soma um viés
#   que depende da distância (seção 6) — posição **relativa**.
#
# A família relativa começou com Shaw, Uszkoreit e Vaswani (2018): em cada camada, quando a posição
# $i$ olha para a posição $j$, eles somam à chave $k_j$ (e ao valor $v_j$) um vetor aprendido para a
# distância $j - i$, recortada em $\pm$ um máximo; o score de $i$ com $j$ passa a depender de quão
# longe $j$ está. O T5 (Raffel et al., 2020) reduziu
# isso a **um número** aprendido por faixa de distância e por cabeça, somado diretamente ao score.
# RoPE e ALiBi, que construímos aqui, são herdeiros dessa ideia.

# %% [markdown]
# ## 2. Embeddings de tokens
#
# Um texto chega ao modelo como uma sequência de inteiros, os *ids* dos *tokens*. Um
# **embedding** é uma tabela $W \in \mathbb{R}^{V \times D}$: o token de id $t$ vira a linha $W[t]$.
# É o mesmo que multiplicar o vetor *one-hot* de $t$ por $W$, só que sem gastar a multiplicação:

# %%
emb = nn.Embedding(6, 4)  # V = 6 tokens, D = 4
ids = torch.tensor([2, 0, 2])
one_hot = F.one_hot(ids, num_classes=6).float()  # (3,) -> (3, 6)
torch.allclose(emb(ids), one_hot @ emb.weight), emb(ids).shape

# %% [markdown]
# A tabela é um parâmetro: cada linha é treinada como qualquer peso. Duas decisões práticas:
#
# **`padding_idx`.** Frases de um lote têm comprimentos diferentes; completamos as curtas com um
# token de *padding* (aqui, o id 0). Com `nn.Embedding(..., padding_idx=0)`, a linha 0 começa em zero
# e **nunca recebe gradiente** — o *padding* continua sendo o vetor nulo durante todo o treino.

# %%
emb_pad = nn.Embedding(6, 4, padding_idx=0)
lote = torch.tensor([[3, 5, 2], [4, 0, 0]])  # a segunda frase tem 1 token e 2 de padding
emb_pad(lote).pow(2).sum().backward()
emb_pad.weight[0].tolist(), emb_pad.weight.grad[0].tolist(), emb_pad.weight.grad[4].abs().sum().item() > 0

# %% [markdown]
# **O fator $\sqrt{d_\text{model}}$.** Vaswani et al. (2017, seção 3.4) dizem apenas que multiplicam
# os pesos da camada de embedding por $\sqrt{d_\text{model}}$, e que essa tabela é **compartilhada**
# com a camada de saída (a que produz os *logits*). O artigo não explica o fator. A explicação a
# seguir é a leitura deste curso, apoiada no código dos autores, o tensor2tensor: lá a tabela é
# sorteada de $\mathcal{N}(0, 1/d_\text{model})$ — desvio $1/\sqrt{D}$, uma escala razoável para
# uma matriz que também produz *logits*. Um vetor com $D$ entradas de desvio $1/\sqrt{D}$ tem norma
# $\approx 1$, enquanto a codificação senoidal tem norma $\sqrt{D/2}$ (cada par $\sin^2 + \cos^2$
# soma 1). Sem o fator, a posição dominaria o conteúdo; com ele, os dois ficam na mesma escala.
#
# O fator só faz sentido **junto com a inicialização**. O `nn.Embedding` do PyTorch sorteia
# $\mathcal{N}(0, 1)$ — norma $\approx\sqrt{D}$ — e aí a multiplicação empurra a norma para $\approx D$.
# Vamos medir, com $D = 512$:

# %%
D = 512
norma_pe = ref.sinusoidal_encoding(128, D).norm(dim=-1).mean().item()
padrao = torch.randn(2000, D, generator=seeded_generator(1))  # como o nn.Embedding: N(0, 1)
pequena = padrao / math.sqrt(D)  # desvio 1/√D, como no tensor2tensor
normas = {
    "N(0, 1): padrão do nn.Embedding": padrao.norm(dim=-1).mean().item(),
    "N(0, 1) × √D": (padrao * math.sqrt(D)).norm(dim=-1).mean().item(),
    "N(0, 1/D)": pequena.norm(dim=-1).mean().item(),
    "N(0, 1/D) × √D (tensor2tensor, este curso)": (pequena * math.sqrt(D)).norm(dim=-1).mean().item(),
}
plots.embedding_scale_figure(normas, norma_pe, f"codificação senoidal: √(D/2) = {br(norma_pe, '.0f')}")

# %%
conteudo_curso = normas["N(0, 1/D) × √D (tensor2tensor, este curso)"]
conteudo_padrao = normas["N(0, 1) × √D"]
print(f"N(0, 1/D) × √D: conteúdo {br(conteudo_curso, '.1f')} contra posição {br(norma_pe, '.1f')} "
      f"(razão {br(conteudo_curso / norma_pe, '.2f')}; a conta dá √D/√(D/2) = √2 ≈ 1,41)")
print(f"N(0, 1) × √D:   conteúdo {br(conteudo_padrao, '.0f')} contra posição {br(norma_pe, '.1f')} "
      f"(razão {br(conteudo_padrao / norma_pe, '.1f')}; a conta dá D/√(D/2) = √(2D) = 32)")

# %% [markdown]
# Com a tabela pequena ($\mathcal{N}(0, 1/D)$), o fator $\sqrt{D}$ põe conteúdo e posição na mesma
# escala ($\sqrt{D}$ contra $\sqrt{D/2}$). Com a tabela padrão do PyTorch, multiplicar deixa o
# conteúdo $\sqrt{2D} = 32$ vezes maior que a posição, e a posição quase some. Não existe um número
# mágico: o que importa é a razão entre as duas escalas (o GPT-2, por exemplo, nem usa o fator —
# inicializa as duas tabelas com desvio pequeno e deixa o treino ajustar). Neste curso seguimos o
# tensor2tensor: tabela $\mathcal{N}(0, 1/D)$ **e** multiplicação por $\sqrt{D}$, e é o que o
# exercício pede.
#
# ### Exercício 1 — `TokenEmbedding` (2 pontos)
#
# Escreva o módulo `TokenEmbedding(vocab_size, d_model, padding_idx=None)`:
#
# - no `__init__`, crie o atributo `embedding`, um `nn.Embedding` com `vocab_size` linhas de largura
#   `d_model`, que respeite `padding_idx`;
# - sorteie a tabela de novo com média 0 e desvio $1/\sqrt{d_\text{model}}$:
#   `nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model ** -0.5)`. O sorteio sobrescreve
#   a linha do *padding*: se `padding_idx` não for `None`, zere essa linha de novo, dentro de
#   `with torch.no_grad():`;
# - `forward(token_ids)` recebe ids $(B, T)$ e devolve os embeddings $(B, T, D)$ multiplicados por
#   $\sqrt{d_\text{model}}$, ligados ao grafo de gradientes (nada de `.detach()`); a linha do
#   *padding* não recebe gradiente (o `padding_idx` do `nn.Embedding` cuida disso);
# - escreva a sua versão: as verificações ocultas recusam a do pacote (`ref.TokenEmbedding`).

# %% nbgrader={"grade": false, "grade_id": "token_embedding", "locked": false, "schema_version": 3, "solution": true, "task": false}
class TokenEmbedding(nn.Module):
    """Tabela de embeddings de tokens, escalada por √d_model: (B, T) -> (B, T, D)."""

    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__()
        ### BEGIN SOLUTION
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model**-0.5)
        if padding_idx is not None:
            with torch.no_grad():
                self.embedding.weight[padding_idx].zero_()
        ### END SOLUTION

    def forward(self, token_ids):
        ### BEGIN SOLUTION
        return self.embedding(token_ids) * math.sqrt(self.d_model)
        ### END SOLUTION


# %% [markdown]
# Os testes comparam sua saída com a própria tabela do seu `nn.Embedding` indexada à mão
# (`weight[ids] · √d_model`), com e sem `padding_idx`, em float32 e float64, e medem a média e o
# desvio de uma tabela recém-criada de 1000 × 64 (o desvio medido tem de ficar a menos de 10% de
# $1/\sqrt{64}$). Quando a resposta errada coincide com um erro conhecido (sem o fator, fator
# $d_\text{model}$, a inicialização padrão, `padding_idx` esquecido...), a mensagem diz qual é.

# %% nbgrader={"grade": true, "grade_id": "test_token_embedding", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_token_embedding(TokenEmbedding)

# %% nbgrader={"grade": true, "grade_id": "test_token_embedding_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (outro padding_idx, gradiente da linha de padding, d_model ímpar,
# a inicialização de outra tabela).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("01_embeddings_posicao", "test_token_embedding_hidden", globals())(TokenEmbedding)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Codificação senoidal
#
# **Intuição.** Pense num contador binário: o último bit troca a cada número, o penúltimo a cada dois,
# o seguinte a cada quatro... Olhando todos os bits juntos, cada número tem um padrão único. A
# codificação senoidal faz a versão contínua disso: cada par de dimensões é um "ponteiro de relógio"
# que gira com uma velocidade diferente.
#
# **A fórmula** (Vaswani et al., 2017). Para a posição $p$ e o par $i = 0, 1, \ldots, D/2 - 1$:
#
# $$PE[p, 2i] = \sin(p\,\omega_i), \qquad PE[p, 2i+1] = \cos(p\,\omega_i), \qquad
# \omega_i = \frac{1}{10000^{2i/D}} .$$
#
# **Quem oscila depressa?** A frequência $\omega_i$ **diminui** com $i$:
#
# - o par 0 tem $\omega_0 = 1$: período $2\pi \approx 6{,}3$ posições — o ponteiro mais rápido, que
#   distingue vizinhos;
# - o último par tem $\omega = 10000^{-(D-2)/D} \approx 1/10000$ (para $D$ grande): período perto de
#   $2\pi \cdot 10000 \approx 63$ mil posições — quase parado num texto curto, mas diferente entre
#   posições muito distantes.
#
# (É comum ler o contrário por aí; a fórmula não deixa dúvida: **as primeiras dimensões são as
# rápidas**.) Os valores ficam sempre em $[-1, 1]$, qualquer que seja $p$, e a tabela não tem
# nenhum parâmetro.
#
# ### Exercício 2 — `sinusoidal_encoding` (2 pontos)
#
# Escreva `sinusoidal_encoding(max_len, d_model)` que devolve a tabela $(T, D)$ com $T$ = `max_len`:
#
# - seno nas colunas pares, cosseno nas ímpares, as duas colunas de um par com a **mesma** frequência;
# - posições $0, 1, \ldots, T-1$; dtype float32 (o padrão do PyTorch);
# - `d_model` ímpar ou não positivo, ou `max_len` não positivo: `ValueError` com mensagem em português;
# - escreva a sua: a correção recusa a versão do pacote (`ref.sinusoidal_encoding`).
#
# Dica: monte as posições como uma coluna $(T, 1)$ e as frequências como uma linha $(D/2,)$; o produto
# difunde para $(T, D/2)$. Depois intercale seno e cosseno (fatiamento `[:, 0::2]`, ou `torch.stack`).

# %% nbgrader={"grade": false, "grade_id": "sinusoidal_encoding", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sinusoidal_encoding(max_len, d_model):
    """Tabela senoidal (max_len, d_model): seno nas colunas pares, cosseno nas ímpares."""
    ### BEGIN SOLUTION
    if max_len <= 0 or d_model <= 0 or d_model % 2 != 0:
        raise ValueError(
            "max_len e d_model devem ser positivos, e d_model par (pares seno/cosseno); "
            f"recebi max_len={max_len}, d_model={d_model}."
        )
    # Ângulos em float64, convertidos no fim: o erro absoluto de p·ω cresce com p em qualquer formato,
    # mas em float64 fica perto de p·10⁻¹⁶ (em float32, p·10⁻⁷), desprezível aqui.
    positions = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(positions * omega)  # (T, 1) * (D/2,) -> (T, D/2)
    pe[:, 1::2] = torch.cos(positions * omega)
    return pe.float()  # (T, D), float32
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sinusoidal_encoding", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_sinusoidal_encoding(sinusoidal_encoding)

# %% nbgrader={"grade": true, "grade_id": "test_sinusoidal_encoding_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (tabela 1×2, tabela longa, valores inválidos).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("01_embeddings_posicao", "test_sinusoidal_encoding_hidden", globals())(sinusoidal_encoding)
### END HIDDEN TESTS

# %% [markdown]
# **Por que a resposta-modelo calcula os ângulos em float64?** O ângulo $p\,\omega_i$ é arredondado
# para o formato do cálculo, e o erro **absoluto** desse arredondamento cresce com $p$ em qualquer
# formato, porque o próprio ângulo cresce: é da ordem de $p$ vezes a precisão do formato
# ($\approx 10^{-7}$ no float32, $\approx 10^{-16}$ no float64). Medindo contra a conta feita com
# 40 algarismos (o módulo `decimal` do Python), no par 1 de uma tabela com $D = 64$:

# %%
from decimal import Decimal, getcontext

getcontext().prec = 40
omega_1 = Decimal(10000) ** (Decimal(-2) / 64)  # ω₁ para D = 64, com 40 algarismos
for p in (10, 1_000, 100_000):
    erros = {}
    for dtype in (torch.float32, torch.float64):
        omega = 10000.0 ** (-torch.arange(0, 64, 2, dtype=dtype) / 64)  # (D/2,), como na resposta-modelo
        angulo = (p * omega[1]).item()
        erros[dtype] = abs(Decimal(angulo) - p * omega_1)  # Decimal(float) é exato
    print(f"p = {br(p, ',d'):>7}: erro do ângulo {br(erros[torch.float32], '.0e')} em float32, "
          f"{br(erros[torch.float64], '.0e')} em float64")

# %% [markdown]
# Nos dois formatos o erro cresce com $p$ (não em linha reta: cada arredondamento cai mais perto ou
# mais longe do valor exato). Em float64 ele continua desprezível para qualquer texto. Em float32 ele
# já passa do arredondamento da própria tabela ($\approx 10^{-7}$ por valor, porque a tabela final é
# float32) e, na posição 100.000, chega perto de $10^{-3}$: calcular os ângulos em float64 e converter
# só no fim evita somar esse erro ao da tabela. Os testes vão até a posição 199, com tolerância
# $10^{-4}$, e aceitam as duas versões.
#
# Daqui em diante as demonstrações usam as versões do pacote, `ref.*` (`transformer_course.positional`),
# para que o notebook rode mesmo antes de você terminar os exercícios. Quando os testes passam, as
# suas e as do pacote dão o mesmo resultado. (Como resposta, elas não valem: as verificações
# ocultas de cada exercício recusam a versão do pacote.)

# %%
plots.sinusoidal_figure(ref.sinusoidal_encoding(100, 64), dims=(0, 1, 10, 40))

# %% [markdown]
# **Leitura da figura.** À esquerda, cada linha é uma posição e cada coluna uma dimensão: as colunas
# da esquerda alternam de cor a cada poucas posições; as da direita mal mudam em 100 posições (o
# cosseno fica perto de 1, o seno perto de 0). À direita, a coluna 0 completa um ciclo a cada 6,3
# posições; a coluna 40 (par 20) ainda está no começo da primeira subida.
#
# ### A posição relativa é uma rotação
#
# Pela fórmula do seno e do cosseno da soma, para um deslocamento fixo $k$:
#
# $$\begin{pmatrix} \sin((p+k)\omega_i) \\ \cos((p+k)\omega_i) \end{pmatrix} =
# \begin{pmatrix} \cos k\omega_i & \sin k\omega_i \\ -\sin k\omega_i & \cos k\omega_i \end{pmatrix}
# \begin{pmatrix} \sin p\omega_i \\ \cos p\omega_i \end{pmatrix}.$$
#
# Então existe **uma única** matriz $M_k$ (uma rotação $2\times2$ por par) com $PE[p+k] = M_k\,PE[p]$
# para **todo** $p$: andar $k$ posições é uma função linear que não depende de onde você está.
# Verificando para $k = 5$:

# %%
D, k = 16, 5
pe = ref.sinusoidal_encoding(60, D).double()
omega = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
c, s = torch.cos(k * omega), torch.sin(k * omega)
M = torch.zeros(D, D, dtype=torch.float64)
M[0::2, 0::2], M[0::2, 1::2] = torch.diag(c), torch.diag(s)
M[1::2, 0::2], M[1::2, 1::2] = torch.diag(-s), torch.diag(c)
(pe[k:] - pe[:-k] @ M.T).abs().max().item()  # (55, D) @ (D, D) -> (55, D): todas as posições de uma vez

# %% [markdown]
# O erro é só o arredondamento do float32 da tabela. Uma consequência: o produto
# escalar entre duas posições da **tabela**, $PE[p] \cdot PE[q] = \sum_i \cos((p-q)\,\omega_i)$, depende
# só da distância $p - q$. A matriz de similaridade é constante ao longo de cada diagonal — compare com
# uma tabela aprendida **antes do treino** (sorteada), que não tem estrutura nenhuma:

# %%
T = 48
senoidal = ref.sinusoidal_encoding(T, 64)
sorteada = torch.randn(T, 64, generator=seeded_generator(2))  # como um nn.Embedding recém-criado
plots.similarity_figure(
    {"senoidal": cosine_similarity_matrix(senoidal),
     "aprendida, antes do treino": cosine_similarity_matrix(sorteada)},
    title="Similaridade entre as codificações de duas posições",
)

# %% [markdown]
# **Um cuidado: dentro da atenção, a distância não sobrevive às projeções.** A propriedade acima é da
# tabela sozinha (e o cosseno é par: ela nem distingue "$k$ posições antes" de "$k$ depois"). Na
# atenção, o score entre as posições $p$ e $q$ compara $x_p + PE_p$ projetado por $W_Q$ com
# $x_q + PE_q$ projetado por $W_K$, e a conta se abre em quatro termos:
#
# $$(x_p + PE_p)\,W_Q W_K^\top (x_q + PE_q)^\top = x_p W_Q W_K^\top x_q^\top
# + x_p W_Q W_K^\top PE_q^\top + PE_p W_Q W_K^\top x_q^\top + PE_p W_Q W_K^\top PE_q^\top .$$
#
# O termo só de posição, $PE_p W_Q W_K^\top PE_q^\top$, depende só de $p - q$ quando $W_Q W_K^\top$ é a
# identidade — o caso da figura acima —, mas não para matrizes quaisquer; e os dois termos do meio
# misturam o conteúdo com a posição **absoluta**. Yan et al. (2019, TENER) e Ke et al. (2021, TUPE)
# apontaram exatamente isso: a distância só chega ao score na medida em que as projeções aprendidas a
# preservarem. Com $W_Q$ e $W_K$ sorteadas, como no início do treino:

# %%
gen = seeded_generator(5)
Wq_sorteada, Wk_sorteada = (torch.randn(64, 64, generator=gen) / 8 for _ in range(2))  # desvio 1/√D, D = 64
tabela_tabela = senoidal @ senoidal.T  # (T, D) @ (D, T) -> (T, T)
termo_posicao = senoidal @ Wq_sorteada @ Wk_sorteada.T @ senoidal.T  # (T, D) @ (D, D) @ (D, D) @ (D, T) -> (T, T)
for nome, m in (("PE·PEᵀ", tabela_tabela), ("PE·W_Q·W_Kᵀ·PEᵀ", termo_posicao)):
    relativo = toeplitz_deviation(m) / m.abs().max().item()
    print(f"{nome:<17} maior variação ao longo de uma diagonal: {br(relativo, '.1g')} do maior |valor|")
plots.similarity_figure(
    {"PE·PEᵀ": tabela_tabela / tabela_tabela.abs().max(),
     "PE·W_Q·W_Kᵀ·PEᵀ, W sorteadas": termo_posicao / termo_posicao.abs().max()},
    title="O termo de posição do score, antes e depois das projeções", label="valor ÷ maior |valor|",
)

# %% [markdown]
# Com as projeções, as diagonais deixam de ser constantes: o termo de posição passa a depender de onde
# as duas posições estão, não só da distância. O treino pode aprender projeções que preservem a
# distância, mas nada na arquitetura obriga. RoPE (seção 5) resolve isso girando $q$ e $k$ **depois**
# das projeções: aí a posição entra no score só pela distância $m - n$.
#
# **E textos mais longos que os do treino?** Como a fórmula vale para qualquer $p$, Vaswani et al.
# levantaram a hipótese de que a codificação senoidal permitiria ao modelo **extrapolar** para
# sequências mais longas. Poder calcular $PE[p]$ não é o mesmo que o modelo saber usá-lo: Press,
# Smith e Lewis (2022) mediram e, em modelagem de linguagem, a perplexidade dos modelos senoidais
# **piora rapidamente** quando a sequência de teste passa do comprimento de treino $L$ (o mesmo vale,
# em grau menor, para RoPE e para o viés relativo do T5, de Raffel et al., 2020). Na prática, a
# senoidal extrapola mal.
# Voltaremos a isso com ALiBi, na seção 6.
#
# ### Exercício 3 — `SinusoidalPositionalEncoding` (3 pontos)
#
# Agora o módulo que soma a tabela ao embedding,
# `SinusoidalPositionalEncoding(d_model, max_len=5000, dropout=0.0)`:
#
# - no `__init__`, calcule a tabela **uma vez** e registre-a como *buffer* chamado `pe`, com
#   `self.register_buffer("pe", tabela)`. Um buffer não é treinado, mas vai junto com `.to(device)`,
#   `.double()` e o `state_dict`;
# - `forward(x)` recebe $(B, T, D)$ e devolve `dropout(x + PE[:T])`, com o *dropout* aplicado **uma vez**,
#   depois da soma (num modelo completo, não aplique outro dropout em seguida: seria dropout duas vezes);
# - crie o dropout com `nn.Dropout(dropout)`: em modo de treino, os testes comparam a sua saída com a
#   do dropout do PyTorch sorteado no mesmo estado do gerador aleatório (a mesma máscara); em
#   `eval()`, o dropout fica desligado;
# - `d_model` ímpar: `ValueError` já no construtor (se você usar a sua `sinusoidal_encoding`, ela
#   faz isso por você);
# - se $T$ for maior que `max_len`, levante `ValueError` com uma mensagem clara ($T$ = `max_len` vale);
# - o buffer `pe` fica em float32 (o dtype da sua `sinusoidal_encoding`); com `x` em float32 ou
#   float64, a saída tem o dtype de `x` e fica ligada ao grafo de gradientes de `x`; depois de
#   `.to(torch.float64)` o módulo inteiro (o buffer junto) passa a float64;
# - não modifique `x` no lugar (nada de `x += ...`).

# %% nbgrader={"grade": false, "grade_id": "sinusoidal_module", "locked": false, "schema_version": 3, "solution": true, "task": false}
class SinusoidalPositionalEncoding(nn.Module):
    """Soma a codificação senoidal (buffer `pe`) e aplica dropout: (B, T, D) -> (B, T, D)."""

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))  # (max_len, D)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        seq_len, max_len = x.size(-2), self.pe.size(0)
        if seq_len > max_len:
            raise ValueError(f"sequência de comprimento {seq_len} maior que max_len = {max_len}.")
        return self.dropout(x + self.pe[:seq_len])  # (B, T, D) + (T, D) -> (B, T, D)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sinusoidal_module", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_sinusoidal_positional_encoding(SinusoidalPositionalEncoding)

# %% nbgrader={"grade": true, "grade_id": "test_sinusoidal_module_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (dropout em treino e em eval, T = max_len, .to(float64), gradiente).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("01_embeddings_posicao", "test_sinusoidal_module_hidden", globals())(SinusoidalPositionalEncoding)
### END HIDDEN TESTS

# %% [markdown]
# Com os dois módulos, a entrada de um *Transformer* fica assim (versões do pacote, com a tabela
# $\mathcal{N}(0, 1/D)$ do exercício 1). Repare que o dropout está só dentro da codificação
# posicional, e que conteúdo e posição chegam na mesma escala:

# %%
torch.manual_seed(0)
tokens_emb = ref.TokenEmbedding(len(vocab), 64, padding_idx=None).to(device)  # (B, T) -> (B, T, D)
posicao = ref.SinusoidalPositionalEncoding(64, max_len=64, dropout=0.1).to(device)  # (B, T, D) -> (B, T, D)
entrada = nn.Sequential(tokens_emb, posicao)
lote_frases = torch.stack([ids_a, ids_b])  # (2, 5)
print("forma da entrada:", tuple(entrada(lote_frases).shape))  # (2, 5) -> (2, 5, 64)
print(f"norma média do conteúdo: {br(tokens_emb(lote_frases).norm(dim=-1).mean(), '.1f')} (√D = 8); "
      f"da posição: {br(posicao.pe[:5].norm(dim=-1).mean(), '.1f')} (√(D/2) = {br(math.sqrt(32), '.1f')})")

# %% [markdown]
# ## 4. Codificação posicional aprendida
#
# A alternativa mais direta, a codificação posicional aprendida (*learned positional embedding*): uma segunda
# tabela de embeddings, agora indexada pela **posição**, com
# `max_len` linhas treinadas junto com o resto do modelo. É o que fazem o BERT (512 posições) e o
# GPT-2 (1024 posições; no menor GPT-2, × 768 dimensões = 786 432 parâmetros só para isso).
# Vaswani et al. testaram as duas opções e obtiveram resultados quase idênticos na tradução; escolheram a senoidal pela hipótese
# da extrapolação.
#
# O limite é duro: a posição 1024 do GPT-2 simplesmente **não tem linha** na tabela. E uma linha que
# quase não aparece no treino (posições longas, se os textos de treino são curtos) fica quase igual
# à inicialização aleatória.
#
# ### Exercício 4 — `LearnedPositionalEmbedding` (2 pontos)
#
# `LearnedPositionalEmbedding(max_len, d_model)`:
#
# - atributo `position_embedding`, um `nn.Embedding(max_len, d_model)`;
# - `forward(x)` recebe $(B, T, D)$ e devolve `x + E[0], …, E[T-1]` (as linhas das posições
#   $0 \ldots T-1$, difundidas sobre o lote);
# - crie os índices das posições no mesmo dispositivo de `x` (`device=x.device`);
# - nenhum outro parâmetro: o módulo tem `max_len` × `d_model` parâmetros no total, e o gradiente
#   da saída chega às linhas das posições usadas (não use `.detach()`);
# - $T$ maior que `max_len`: `ValueError` com mensagem em português (sem a verificação, o
#   `nn.Embedding` levanta um `IndexError` pouco informativo); $T$ = `max_len` vale.

# %% nbgrader={"grade": false, "grade_id": "learned_module", "locked": false, "schema_version": 3, "solution": true, "task": false}
class LearnedPositionalEmbedding(nn.Module):
    """Uma linha treinável por posição, somada a x: (B, T, D) -> (B, T, D)."""

    def __init__(self, max_len, d_model):
        super().__init__()
        ### BEGIN SOLUTION
        self.position_embedding = nn.Embedding(max_len, d_model)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        seq_len, max_len = x.size(-2), self.position_embedding.num_embeddings
        if seq_len > max_len:
            raise ValueError(
                f"sequência de comprimento {seq_len} maior que max_len = {max_len}: "
                "não existe embedding aprendido para essas posições."
            )
        positions = torch.arange(seq_len, device=x.device)
        return x + self.position_embedding(positions)  # (B, T, D) + (T, D) -> (B, T, D)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_learned_module", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_learned_positional_embedding(LearnedPositionalEmbedding)

# %% nbgrader={"grade": true, "grade_id": "test_learned_module_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (T = max_len, gradientes só nas linhas usadas, nº de parâmetros).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("01_embeddings_posicao", "test_learned_module_hidden", globals())(LearnedPositionalEmbedding)
### END HIDDEN TESTS

# %% [markdown]
# O limite, visto por quem usa o módulo:

# %%
posicoes_aprendidas = ref.LearnedPositionalEmbedding(max_len=8, d_model=4)
try:
    posicoes_aprendidas(torch.zeros(1, 10, 4))
except ValueError as erro:
    print("ValueError:", erro)
sum(p.numel() for p in posicoes_aprendidas.parameters())  # max_len × d_model parâmetros

# %% [markdown]
# ## 5. RoPE: girar em vez de somar
#
# **Intuição.** A seção 3 mostrou que andar $k$ posições na tabela senoidal é uma rotação. Su et al.
# (2021) tiraram a conclusão mais radical: em vez de **somar** um vetor de posição ao embedding, **gire**
# diretamente a consulta $q$ e a chave $k$ de cada cabeça por um ângulo proporcional à posição.
# O *Rotary Position Embedding* (RoPE) age dentro de cada camada de atenção, depois das projeções
# $W_Q$ e $W_K$; os valores $v$ não são girados.
#
# **A fórmula.** RoPE age em cada cabeça separadamente (capítulo 3): $x$ é a consulta (ou a chave) de
# uma cabeça, com $D_k$ coordenadas. Agrupe as coordenadas em pares **intercalados**
# $(x_{2i}, x_{2i+1})$, $i = 0, \ldots, D_k/2 - 1$, e leia cada par como um número complexo
# $z_i = x_{2i} + \mathrm{i}\,x_{2i+1}$. Na posição $m$:
#
# $$\text{RoPE}(x, m)_i = z_i\, e^{\mathrm{i}\, m\theta_i}, \qquad \theta_i = \text{base}^{-2i/D_k},
# \quad \text{base} = 10000,$$
#
# ou, em coordenadas reais, $x'_{2i} = x_{2i}\cos m\theta_i - x_{2i+1}\sin m\theta_i$ e
# $x'_{2i+1} = x_{2i}\sin m\theta_i + x_{2i+1}\cos m\theta_i$ (rotação no sentido anti-horário).
# A escada de frequências tem a **forma** da senoidal, mas com a largura da cabeça $D_k$ no lugar de
# $d_\text{model}$ (num modelo com $D = 512$ e 8 cabeças, $D_k = 64$: 32 frequências, as mesmas em
# todas as cabeças). O par 0 gira 1 radiano por posição; o último, quase nada.
#
# **A propriedade-chave.** Para consultas na posição $m$ e chaves na posição $n$:
#
# $$\langle \text{RoPE}(q, m), \text{RoPE}(k, n) \rangle
# = \text{Re} \sum_i z^{(q)}_i\, \overline{z^{(k)}_i}\; e^{\mathrm{i}(m-n)\theta_i}.$$
#
# As posições absolutas somem: o score depende do conteúdo ($q$, $k$) e só da **distância** $m - n$.
# Uma rotação também preserva normas: RoPE não muda o tamanho de $q$ nem de $k$.
#
# ### Exercício 5 — `apply_rope` (4 pontos)
#
# Escreva `apply_rope(x, positions=None, base=10000.0)`:
#
# - `x` tem forma $(\ldots, T, D_k)$ com $D_k$ par (qualquer número de eixos de lote: $(T, D_k)$,
#   $(B, T, D_k)$, $(B, H, T, D_k)$). **Neste exercício** a última dimensão é a largura da cabeça,
#   $D_k$, e não o $D$ = `d_model` da legenda: RoPE age em cada cabeça separadamente (a função
#   aceita qualquer largura par);
# - gire cada par intercalado $(x_{2i}, x_{2i+1})$ pelo ângulo $p\,\theta_i$, com
#   $\theta_i = \text{base}^{-2i/D_k}$;
# - `positions` é `None` (posições $0 \ldots T-1$) ou um `LongTensor` 1-D com $T$ posições, não
#   necessariamente em ordem (útil na geração, capítulo 7);
# - calcule os ângulos no dtype de `x` (float64 entra, float64 sai, com precisão de float64) e no
#   dispositivo de `x`; não modifique `x` no lugar;
# - aceite `x` não contíguo (uma transposta, por exemplo: use fatiamento, `torch.stack` e `flatten`
#   ou `reshape`, não `view`) e mantenha a saída ligada ao grafo de gradientes de `x`;
# - $D_k$ ímpar, ou `positions` com comprimento diferente de $T$: `ValueError`.
#
# Dica: `x[..., 0::2]` e `x[..., 1::2]` separam os pares; `torch.stack((a, b), dim=-1).flatten(-2)`
# volta a intercalá-los. Quem preferir pode usar `torch.view_as_complex` e `torch.polar`.

# %% nbgrader={"grade": false, "grade_id": "apply_rope", "locked": false, "schema_version": 3, "solution": true, "task": false}
def apply_rope(x, positions=None, base=10000.0):
    """Gira cada par (x[2i], x[2i+1]) pelo ângulo p·θ_i: (..., T, Dk) -> (..., T, Dk)."""
    ### BEGIN SOLUTION
    seq_len, d = x.size(-2), x.size(-1)
    if d % 2 != 0:
        raise ValueError(f"a última dimensão de x deve ser par para formar pares; recebi {d}.")
    if positions is None:
        positions = torch.arange(seq_len, device=x.device)
    if positions.shape != (seq_len,):
        raise ValueError(
            f"positions deve ter forma ({seq_len},), uma posição por linha de x; "
            f"recebi {tuple(positions.shape)}."
        )
    theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype, device=x.device) / d)  # (Dk/2,)
    angles = positions.to(device=x.device, dtype=x.dtype).unsqueeze(-1) * theta  # (T, 1)*(Dk/2,) -> (T, Dk/2)
    cos, sin = angles.cos(), angles.sin()
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, Dk) -> (..., T, Dk/2) cada
    rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)
    return rotated.flatten(-2)  # (..., T, Dk/2, 2) -> (..., T, Dk)
    ### END SOLUTION


# %% [markdown]
# O oráculo dos testes escreve cada par como número complexo e multiplica por $e^{\mathrm{i}p\theta}$.
# Se você girar para o lado errado, usar a convenção das metades, ignorar `positions` ou usar
# $i/D$ no expoente, a mensagem diz.

# %% nbgrader={"grade": true, "grade_id": "test_apply_rope", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_apply_rope(apply_rope)

# %% nbgrader={"grade": true, "grade_id": "test_apply_rope_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (outra base, posições grandes, 2-D, gradiente, propriedade relativa).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("01_embeddings_posicao", "test_apply_rope_hidden", globals())(apply_rope)
### END HIDDEN TESTS

# %% [markdown]
# As duas propriedades, medidas (versão do pacote). A norma de cada vetor não muda:

# %%
gen = seeded_generator(3)
q = torch.randn(6, 8, generator=gen, dtype=torch.float64)
k = torch.randn(6, 8, generator=gen, dtype=torch.float64)
(ref.apply_rope(q).norm(dim=-1) - q.norm(dim=-1)).abs().max().item()

# %% [markdown]
# E o score entre uma consulta na posição $m$ e uma chave na posição $n$ é o mesmo para todo par
# $(m, n)$ com a mesma distância $m - n = 2$:

# %%
def score_rope(m, n):
    """⟨RoPE(q₀, m), RoPE(k₀, n)⟩ para o primeiro vetor de q e de k."""
    qm = ref.apply_rope(q[:1], positions=torch.tensor([m]))
    kn = ref.apply_rope(k[:1], positions=torch.tensor([n]))
    return (qm * kn).sum().item()


[round(score_rope(m, m - 2), 10) for m in (2, 10, 500, 4000)]

# %%
deslocamentos = torch.arange(-24, 25)
curvas = {}
for n in (30, 200, 3000):
    qs = ref.apply_rope(q[:1].expand(len(deslocamentos), 8), positions=n + deslocamentos)  # (49, 8)
    kn = ref.apply_rope(k[:1], positions=torch.tensor([n]))  # (1, 8)
    curvas[f"chave na posição n = {n}"] = qs @ kn[0]  # (49, 8) @ (8,) -> (49,)
u = torch.zeros(8, 8, dtype=torch.float64)
u[:, 0::2] = 1.0  # cada par começa em (1, 0)
girado = ref.apply_rope(u)  # posições 0 … 7
plots.rope_figure({"par 0 (θ₀ = 1 rad)": girado[:, 0:2], "par 1 (θ₁ = 0,1 rad)": girado[:, 2:4]},
                  deslocamentos, curvas)

# %% [markdown]
# **Leitura da figura.** À esquerda, o par 0 dá mais de uma volta em 8 posições, enquanto o par 1
# avança 0,1 radiano por posição. À direita, as três curvas (chave na posição 30, 200 ou 3000) são
# **a mesma curva**: o score só enxerga o deslocamento $m - n$.
#
# ### Duas convenções: pares intercalados e "rotate_half"
#
# Este curso segue o artigo: os pares são $(x_0, x_1), (x_2, x_3), \ldots$ — a mesma convenção do
# código de referência do LLaMA, publicado pela Meta, que lê cada par como um número complexo. O
# GPT-NeoX e a implementação do LLaMA na biblioteca `transformers` do Hugging Face ("LLaMA no HF")
# formam os pares de outro jeito, $(x_i, x_{i+D/2})$ — primeira metade com segunda metade —, usando
# uma função `rotate_half`:
#
# ```python
# def rotate_half(x):
#     x1, x2 = x.chunk(2, dim=-1)          # (..., D) -> duas metades (..., D/2)
#     return torch.cat((-x2, x1), dim=-1)
# # saida = x * cos + rotate_half(x) * sin, com cos e sin repetidos nas duas metades
# ```
#
# As frequências e a propriedade relativa são as mesmas; muda **quais coordenadas** formam cada par.
# Aplicadas ao mesmo vetor, as duas dão resultados diferentes. Mas elas são iguais a menos de uma
# permutação fixa das coordenadas (pares primeiro, ímpares depois):

# %%
perm_metades = ref.interleaved_to_half(8)  # [0, 2, 4, 6, 1, 3, 5, 7]
x = torch.randn(5, 8, generator=seeded_generator(4), dtype=torch.float64)
diferentes = (ref.apply_rope(x) - ref.apply_rope_half(x)).abs().max().item()
iguais = (ref.apply_rope(x)[:, perm_metades] - ref.apply_rope_half(x[:, perm_metades])).abs().max().item()
diferentes, iguais

# %% [markdown]
# Como o produto escalar não muda quando $q$ e $k$ sofrem a **mesma** permutação, um modelo treinado
# numa convenção pode ser usado na outra permutando as coordenadas de $q$ e $k$ de cada cabeça. Na
# convenção deste curso, $q = xW_Q$ com $W_Q \in \mathbb{R}^{D \times D}$: cada coordenada de $q$ é
# uma **coluna** de $W_Q$, então a permutação age nas colunas de $W_Q$ e $W_K$ (dentro de cada
# cabeça) — que são as **linhas** de `nn.Linear.weight`, guardado como (saída, entrada). É o que faz
# o script que converte os pesos do LLaMA original para o Hugging Face. Misturar as convenções sem
# essa permutação, por outro lado, produz um modelo que roda sem erro nenhum e gera lixo.

# %% [markdown]
# ## 6. ALiBi: um viés linear nos scores
#
# **Intuição.** Press, Smith e Lewis (2022) propõem o ALiBi (*Attention with Linear Biases*): não
# codificar posição nenhuma nos vetores. Em vez
# disso, cada cabeça $h$ soma ao score de atenção uma penalidade proporcional à distância:
#
# $$\text{scores}_{h}[i, j] = \frac{q_i \cdot k_j}{\sqrt{d_k}} - m_h\,|i - j| .$$
#
# Quanto mais longe a chave, menor o score: uma preferência por vizinhos (*viés de recência*). As
# inclinações formam uma sequência geométrica, uma por cabeça:
#
# $$m_h = 2^{-8h/H}, \qquad h = 1, \ldots, H .$$
#
# Com $H = 8$: $1/2, 1/4, \ldots, 1/256$. A cabeça 1 quase só olha para a vizinhança; a cabeça 8 enxerga
# longe. **Nenhum parâmetro** é treinado: o viés é fixo e vale para qualquer distância, de modo que não
# existe `max_len`.
#
# **Quando $H$ não é potência de 2.** O artigo só treina modelos com $H$ potência de 2, e aí a
# fórmula acima é exatamente a do código oficial (`get_slopes`). Para outros $H$, o código oficial
# faz diferente: pega as $2^{\lfloor \log_2 H \rfloor}$ inclinações geométricas dessa potência de 2 e
# completa com **uma sim, outra não** das inclinações da potência seguinte. É o que BLOOM usa. Este
# curso usa a fórmula geométrica $2^{-8h/H}$ para **todo** $H$ (é o que o exercício pede e o que os
# testes conferem); com $H = 12$, as duas receitas dão:

# %%
lado_a_lado = torch.stack([ref.alibi_slopes(12), ref.alibi_slopes_official(12)])  # (2, 12)
print("h:                    ", "  ".join(f"{h:>6d}" for h in range(1, 13)))
for nome, linha in zip(("curso, 2^(−8h/H):", "oficial (get_slopes):"), lado_a_lado):
    print(f"{nome:<22}", "  ".join(br(m, ".4f") for m in linha.tolist()))
mesma_cabeca = torch.isclose(lado_a_lado[0], lado_a_lado[1]).sum().item()
em_comum = torch.isclose(lado_a_lado[0][:, None], lado_a_lado[1][None, :]).any(dim=1).sum().item()
print(f"cabeças com a mesma inclinação: {mesma_cabeca}; valores presentes nas duas listas: {em_comum}")

# %% [markdown]
# As duas receitas cobrem alcances parecidos (a menor inclinação é $1/256$ nas duas), mas nenhuma
# cabeça recebe a mesma inclinação, e só 4 valores aparecem nas duas listas: o oficial termina com
# quatro valores da escada de 16 que caem entre os degraus da escada de 8 ($2^{-0{,}5}, 2^{-1{,}5},
# \ldots$), fora de ordem. As inclinações são fixas no treino e cada cabeça se adapta à sua: não
# troque de receita ao carregar um modelo treinado com a outra.
#
# **A forma simétrica.** No artigo o modelo é causal: só $j \le i$ importa, e $|i - j| = i - j$. A
# forma simétrica $-m_h|i - j|$ que usamos aqui deixa aplicar o viés também num codificador, mas ela
# não distingue "$k$ posições antes" de "$k$ posições depois": o viés não muda quando a sequência é
# lida de trás para a frente. Sem máscara causal e sem outra informação de posição, o codificador
# não distingue uma frase da mesma frase invertida: a saída da frase invertida é a saída original,
# de trás para a frente. O viés, conferido:

# %%
vies = ref.alibi_bias(4, 6)  # (H, T, T)
torch.equal(vies, vies.flip(-1).flip(-2))  # inverter consultas e chaves: o mesmo viés

# %% [markdown]
# (Com a máscara causal de um modelo de linguagem, a simetria some: só a metade $j \le i$ existe.)
#
# ### Exercício 6 — `alibi_slopes` (2 pontos)
#
# Escreva `alibi_slopes(n_heads)` que devolve as $H$ inclinações $m_h = 2^{-8h/H}$, $h = 1, \ldots, H$,
# forma $(H,)$, em float32, pela fórmula geométrica para **todo** $H$ — inclusive quando $H$ não é
# potência de 2 (os testes ocultos usam $H = 1$, 12 e 16); `n_heads` não positivo: `ValueError`.

# %% nbgrader={"grade": false, "grade_id": "alibi_slopes", "locked": false, "schema_version": 3, "solution": true, "task": false}
def alibi_slopes(n_heads):
    """Inclinações m_h = 2^(−8h/H), h = 1 … H: (H,)."""
    ### BEGIN SOLUTION
    if n_heads <= 0:
        raise ValueError(f"n_heads deve ser positivo; recebi {n_heads}.")
    h = torch.arange(1, n_heads + 1, dtype=torch.float32)
    return 2.0 ** (-8.0 * h / n_heads)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_alibi_slopes", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_alibi_slopes(alibi_slopes)

# %% nbgrader={"grade": true, "grade_id": "test_alibi_slopes_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (H = 1, 12, 16; H inválido).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("01_embeddings_posicao", "test_alibi_slopes_hidden", globals())(alibi_slopes)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercício 7 — `alibi_bias` (2 pontos)
#
# Escreva `alibi_bias(n_heads, seq_len)` que devolve o viés $(H, T, T)$ com
# $\text{bias}[h, i, j] = -m_h\,|i - j|$ (use a sua `alibi_slopes`); `seq_len` não positivo: `ValueError`.
# Dica: `torch.arange(T)[:, None] - torch.arange(T)[None, :]` é a matriz $i - j$.

# %% nbgrader={"grade": false, "grade_id": "alibi_bias", "locked": false, "schema_version": 3, "solution": true, "task": false}
def alibi_bias(n_heads, seq_len):
    """Viés −m_h·|i − j| somado aos scores de cada cabeça: (H, T, T)."""
    ### BEGIN SOLUTION
    if seq_len <= 0:
        raise ValueError(f"seq_len deve ser positivo; recebi {seq_len}.")
    positions = torch.arange(seq_len, dtype=torch.float32)
    distance = (positions[:, None] - positions[None, :]).abs()  # (T, 1) - (1, T) -> (T, T)
    return -alibi_slopes(n_heads)[:, None, None] * distance  # (H, 1, 1) * (T, T) -> (H, T, T)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_alibi_bias", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_alibi_bias(alibi_bias)

# %% nbgrader={"grade": true, "grade_id": "test_alibi_bias_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (H = 1 e T = 1, H que não é potência de 2, T inválido).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("01_embeddings_posicao", "test_alibi_bias_hidden", globals())(alibi_bias)
### END HIDDEN TESTS

# %% [markdown]
# Como o viés se soma aos scores, dá para ver o que ele faz sozinho: com scores de conteúdo nulos,
# a atenção da última consulta é $\text{softmax}(-m_h\,|i - j|)$.

# %%
vies_8 = ref.alibi_bias(8, 32)  # (H, T, T)
print(f"cabeça 1, distância 31: {br(vies_8[0, 31, 0], '.2f')}; "
      f"cabeça 8, distância 31: {br(vies_8[7, 31, 0], '.4f')}")
plots.alibi_figure(ref.alibi_slopes(8), vies_8)

# %% [markdown]
# **Leitura da figura.** A cabeça 1 ($m = 1/2$) penaliza a distância com força: seu viés cai para
# $-31/2 = -15{,}5$ na outra ponta, e sua atenção se concentra nas últimas poucas chaves. A cabeça 8
# ($m = 1/256$) quase não penaliza: sua atenção fica perto de uniforme. O conteúdo ($q \cdot k$)
# decide o resto, e cada cabeça tem um "alcance" diferente.
#
# **Extrapolação: o que o artigo mediu.** Treinando em sequências de comprimento $L$ e avaliando em
# sequências maiores, Press et al. (2022) observaram que a perplexidade de modelos com codificação
# senoidal, RoPE e viés do T5 piora à medida que o teste passa de $L$, enquanto a do ALiBi se mantém.
# O resultado principal: um modelo de 1,3 bilhão de parâmetros treinado com $L = 1024$ e avaliado em
# 2048 *tokens* alcança a perplexidade de um modelo senoidal treinado diretamente em 2048, treinando
# 11% mais rápido. BLOOM e MPT, por exemplo, adotaram ALiBi. Desde então, a família RoPE ganhou
# técnicas próprias para esticar o contexto (interpolação de posições, YaRN), que em geral exigem
# algum ajuste fino.
#
# **Perplexidade estável não é contexto longo.** Chi et al. (2023) mediram quais *tokens* de fato
# influenciam a previsão de um modelo com ALiBi (o "campo receptivo empírico", pelos gradientes) e
# viram que ele fica dentro do comprimento de treino: o viés de recência faz o modelo ignorar o que
# está longe, como se lesse por uma janela deslizante. A perplexidade não piora depois de $L$ porque
# o modelo não tenta usar o que está além de $L$ — não porque use. Para tarefas que precisam de
# informação distante (achar um dado no começo de um documento longo), extrapolar a perplexidade
# não basta.

# %% [markdown]
# ## 7. Qual escolher?
#
# | | senoidal | aprendida | RoPE | ALiBi |
# |---|---|---|---|---|
# | parâmetros | 0 | `max_len` × D | 0 | 0 |
# | tipo de posição | absoluta ($PE[p] \cdot PE[q]$ depende só de $p - q$, mas o score depois de $W_Q$ e $W_K$ não) | absoluta | relativa, no score | relativa, no score |
# | onde age | soma ao embedding, uma vez | soma ao embedding, uma vez | gira $q$ e $k$ em cada camada | soma $-m_h\lvert i-j\rvert$ aos scores em cada camada |
# | além do comprimento de treino | calcula-se, mas o modelo extrapola mal (Press et al., 2022) | impossível: não há linha | degrada sem ajuste; estende-se com interpolação | a perplexidade mais estável em Press et al., mas sem usar o contexto além de $L$ (Chi et al., 2023) |
# | quem usa | *Transformer* original | BERT, GPT-2 | LLaMA, Mistral, GPT-NeoX | BLOOM, MPT |
#
# Regra prática hoje: RoPE é o padrão dos modelos de linguagem abertos; ALiBi quando o requisito é
# não degradar além do comprimento de treino, sem ajuste (sabendo que o contexto útil continua o do
# treino); a aprendida quando o comprimento é fixo e curto; a senoidal pela
# simplicidade e pela história.

# %% [markdown]
# ## 8. Explore: esquema, $d_\text{model}$ e comprimento
#
# Escolha o esquema e mova os controles. À esquerda, a codificação (para ALiBi, o viés de cada cabeça
# em função da distância); à direita, a matriz de similaridade entre posições (para ALiBi, o próprio
# viés da cabeça 1). O título diz se a matriz da direita depende só de $i - j$ — isto é, se é
# constante em cada diagonal. Perguntas para guiar: em qual esquema a matriz da direita **não**
# depende só da distância? O que acontece com a faixa rápida da senoidal quando $d_\text{model}$
# cresce? Por que o painel da esquerda do ALiBi não muda com $d_\text{model}$?

# %% tags=["nbval-ignore-output"]
from transformer_course.widgets import positional_widget

positional_widget()

# %% [markdown]
# ## 9. Perguntas abertas (corrigidas à mão)
#
# **Pergunta 1 (2 pontos).** O que exatamente dá errado numa autoatenção **sem máscara** (a de um
# codificador) e sem nenhuma informação de posição? Use o experimento da seção 1 (as duas frases com
# "cachorro" e "homem") e diga por que somar $PE$ resolve o problema. Dê um exemplo de tarefa em que
# esse codificador sem posição falharia sempre. O mesmo vale para um modelo de linguagem causal sem
# codificação posicional?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_sem_posicao", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** Sem máscara, a autoatenção é equivariante a permutações: os scores
# $q_i\cdot k_j$ só dependem do conteúdo, então permutar os tokens apenas permuta as linhas da saída.
# Na seção 1, "cachorro" recebeu o mesmo vetor em "o cachorro mordeu o homem" e em "o homem mordeu o
# cachorro" (a diferença impressa é só arredondamento do float32): o modelo não distingue quem mordeu
# quem. Somando $PE[p]$, a mesma palavra em posições diferentes vira
# vetores diferentes, a simetria quebra (a comparação com a permutação deu `False`) e as camadas
# seguintes podem usar a posição. Exemplo de falha certa: decidir se uma lista de números está em
# ordem crescente — "1 2 3" e "3 2 1" têm os mesmos tokens, o codificador devolve os mesmos vetores
# (só permutados), e um classificador que resuma a saída sem olhar a ordem (pela média, ou por um
# token especial de classificação) responde igual às duas, embora as respostas certas sejam opostas. Num modelo de linguagem **causal** isso não vale: a
# máscara deixa a posição $i$ ver só os $i + 1$ primeiros tokens, o que já distingue as posições, e
# Haviv et al. (2022) mostraram que esses modelos aprendem a posição sem codificação nenhuma, com
# perplexidade próxima à dos modelos com posição (Kazemnejad et al., 2023, viram até melhor
# generalização para sequências longas em tarefas sintéticas).
#
# **Rubrica (2 pontos).**
# - 1 ponto: explica a equivariância (saída apenas permutada, porque os scores só dependem do
#   conteúdo), citando o experimento. "O modelo vira um saco de palavras" com justificativa vale 1.
# - 1 ponto: explica por que somar a posição quebra a simetria e dá um exemplo correto de tarefa que
#   o codificador sem posição erra sempre, com a resposta dependendo da ordem dos mesmos tokens (meio
#   ponto); responde que o modelo causal **não** fica cego à ordem, porque a máscara distingue as
#   posições (meio ponto; citar Haviv et al. não é obrigatório). Afirmar que todo *Transformer* sem
#   posição falha sempre, inclusive o causal, perde esse segundo meio ponto.
# ### END SOLUTION

# %% [markdown]
# **Pergunta 2 (2 pontos).** Você vai treinar um modelo de linguagem com trechos de 1024 *tokens*, mas
# em produção ele precisará ler documentos de 4096. Compare, para esse caso, a codificação senoidal,
# a codificação posicional aprendida, RoPE e ALiBi. Qual você escolheria e por quê? Apoie-se no que
# foi medido (e não no que "a fórmula permite").

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_textos_longos", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** A codificação aprendida está fora: não existe linha para as posições 1024 a
# 4095 (o módulo levanta erro). A senoidal calcula $PE[p]$ para qualquer $p$, mas o modelo nunca viu
# essas posições e Press et al. (2022) mediram que a perplexidade dos modelos senoidais piora logo
# depois do comprimento de treino: calcular não é extrapolar. RoPE é relativa (o score depende de
# $m - n$), mas distâncias maiores que 1024 geram ângulos nunca vistos nos pares lentos; sem ajuste
# também degrada — com interpolação de posições e algum ajuste fino, estende bem. ALiBi foi desenhado
# para não degradar: o viés $-m_h|i-j|$ vale para qualquer distância e, no artigo, um modelo treinado
# em 1024 avaliado em 2048 igualou a perplexidade de um senoidal treinado em 2048. Mas perplexidade
# estável não prova que o modelo use o contexto além de 1024: Chi et al. (2023) mostraram que o
# campo receptivo efetivo do ALiBi fica dentro do comprimento de treino — ele lê os 4096 *tokens*
# como uma janela deslizante. Se basta não degradar (continuar um texto, com contexto local), eu
# escolheria ALiBi, sem ajuste fino; se a tarefa precisa de informação de todo o documento, RoPE com
# interpolação de posições e um ajuste fino curto em textos longos.
#
# **Rubrica (2 pontos).**
# - 1 ponto: descarta a aprendida pelo limite de `max_len` e explica que a senoidal extrapola mal
#   apesar de a fórmula valer para todo $p$ (citando a evidência). Meio ponto se afirmar que a
#   senoidal "extrapola bem" mas acertar o resto.
# - 1 ponto: compara RoPE e ALiBi com argumento sobre posição relativa/viés e uma escolha justificada
#   (ALiBi, ou RoPE com interpolação/ajuste fino, ambas aceitas se justificadas). Meio ponto se
#   concluir que ALiBi "usa" os 4096 *tokens* de contexto só porque a perplexidade não piora.
# ### END SOLUTION

# %% [markdown]
# ## Resumo
#
# - Sem posição e sem máscara, a autoatenção é equivariante a permutações: "o cachorro mordeu o
#   homem" e "o homem mordeu o cachorro" dão a cada palavra o mesmo vetor. Com máscara causal, o
#   modelo consegue inferir a posição (Haviv et al., 2022).
# - Embedding é uma tabela $V \times D$; `padding_idx` mantém a linha do *padding* nula e sem gradiente;
#   o fator $\sqrt{d_\text{model}}$ acerta a escala do conteúdo contra a da posição, e só faz sentido
#   junto com a inicialização $\mathcal{N}(0, 1/D)$ (a do tensor2tensor).
# - Senoidal: $\sin/\cos(p\,\omega_i)$ com $\omega_i = 10000^{-2i/D}$; **o par 0 é o mais rápido**;
#   valores em $[-1, 1]$; $PE[p+k] = M_k PE[p]$ (rotação), e $PE[p] \cdot PE[q]$ depende só de $p - q$
#   — mas o termo de posição do score, depois de $W_Q$ e $W_K$, em geral não (Yan et al., 2019;
#   Ke et al., 2021); extrapola mal na prática.
# - Aprendida: `max_len` × D parâmetros e um limite duro em `max_len`.
# - RoPE: gira pares intercalados de $q$ e $k$ de cada cabeça por $p\,\theta_i$, com
#   $\theta_i = \text{base}^{-2i/D_k}$; preserva normas; o score depende só de $m - n$. A convenção
#   "rotate_half" (GPT-NeoX, LLaMA no HF) forma pares $(x_i, x_{i+D_k/2})$: igual a menos de uma
#   permutação das colunas de $W_Q$ e $W_K$.
# - ALiBi: soma $-m_h|i-j|$ aos scores, $m_h = 2^{-8h/H}$ (o código oficial difere quando $H$ não é
#   potência de 2); nenhum parâmetro; a perplexidade mais estável além de $L$ medida por Press et al.,
#   mas sem usar o contexto além de $L$ (Chi et al., 2023); a forma simétrica não distingue antes e
#   depois.
#
# ## Para ir além
#
# - A. Vaswani et al. (2017), *Attention Is All You Need*, NeurIPS — seções 3.4 (embeddings e o fator
#   $\sqrt{d_\text{model}}$) e 3.5 (codificação senoidal; tabela 3, linha E, compara com a codificação aprendida).
# - J. Su et al. (2021), *RoFormer: Enhanced Transformer with Rotary Position Embedding*, arXiv:2104.09864.
# - O. Press, N. A. Smith, M. Lewis (2022), *Train Short, Test Long: Attention with Linear Biases Enables
#   Input Length Extrapolation*, ICLR (arXiv:2108.12409, 2021).
# - P. Shaw, J. Uszkoreit, A. Vaswani (2018), *Self-Attention with Relative Position Representations*, NAACL
#   — a primeira codificação relativa: vetores aprendidos por distância, somados às chaves e aos valores.
# - C. Raffel et al. (2020), *Exploring the Limits of Transfer Learning with a Unified Text-to-Text
#   Transformer*, JMLR 21 — o T5; seção 2.1, o viés relativo (um número por faixa de distância e por cabeça).
# - H. Yan, B. Deng, X. Li, X. Qiu (2019), *TENER: Adapting Transformer Encoder for Named Entity
#   Recognition*, arXiv:1911.04474 — a codificação senoidal perde a direção e, depois das projeções
#   $W_Q$, $W_K$, a distância.
# - G. Ke, D. He, T.-Y. Liu (2021), *Rethinking Positional Encoding in Language Pre-training*, ICLR — o TUPE:
#   os termos conteúdo × posição do score, e posição separada do conteúdo.
# - J. Devlin et al. (2019), *BERT*, NAACL; A. Radford et al. (2019), *Language Models are Unsupervised
#   Multitask Learners* (GPT-2) — codificação posicional aprendida.
# - tensor2tensor, o código dos autores do *Transformer* (github.com/tensorflow/tensor2tensor): em
#   `modalities.py`, a tabela de embeddings sorteada com desvio `hidden_size ** -0.5` e multiplicada
#   por `hidden_size ** 0.5` na entrada.
# - A. Haviv, O. Ram, O. Press, P. Izsak, O. Levy (2022), *Transformer Language Models without Positional
#   Encodings Still Learn Positional Information*, Findings of EMNLP.
# - A. Kazemnejad et al. (2023), *The Impact of Positional Encoding on Length Generalization in
#   Transformers*, NeurIPS.
# - T.-C. Chi, T.-H. Fan, A. I. Rudnicky, P. J. Ramadge (2023), *Dissecting Transformer Length
#   Extrapolation via the Lens of Receptive Field Analysis*, ACL.
# - H. Touvron et al. (2023), *LLaMA: Open and Efficient Foundation Language Models*, arXiv:2302.13971
#   (RoPE com pares intercalados no código de referência).
# - S. Chen et al. (2023), *Extending Context Window of Large Language Models via Positional
#   Interpolation*, arXiv:2306.15595; B. Peng et al. (2023), *YaRN*, arXiv:2309.00071.
#
# Próximo capítulo: a atenção por produto escalar escalado, que até aqui usamos como caixa-preta.
