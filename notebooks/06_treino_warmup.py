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
# # Capítulo 6 — Treinando um *Transformer*: o laço de treino e o aquecimento da taxa de aprendizado
#
# **Objetivos.** Ao fim deste capítulo você vai saber:
#
# 1. escrever o laço de treino (*training loop*) de um *Transformer* na ordem certa — zerar os
#    gradientes, *forward*, perda, *backward*, recorte do gradiente, passo do otimizador, passo do
#    agendador — e dizer o que quebra quando a ordem muda;
# 2. avaliar um modelo do jeito certo: modo de avaliação, sem gradientes, a perda média **por
#    exemplo** (que não depende de como os lotes foram cortados), devolvendo o modelo ao modo em que
#    estava;
# 3. escrever o agendamento de Noam, com aquecimento (*warm-up*), e ligá-lo ao otimizador com o
#    `LambdaLR` do PyTorch;
# 4. medir, com várias sementes, quando o aquecimento importa e quando não importa, ler curvas
#    de perda e comparar dois classificadores no mesmo conjunto de teste (uma comparação pareada).
#
# **Pré-requisitos.** Capítulos 2 a 5 (atenção, várias cabeças, a camada do codificador, máscaras);
# o básico de `torch.optim` (um otimizador, `zero_grad`, `step`).
#
# **Tempo estimado.** 90 a 120 minutos.
#
# **Legenda de formas** (a mesma em todo o curso): B lote (*batch*), T comprimento da sequência,
# D `d_model`, H cabeças, Dk = D/H, F `d_ff`, V vocabulário, S comprimento da fonte (atenção cruzada).
# Neste capítulo: C número de classes.

# %% tags=["nbval-ignore-output"]
# %matplotlib inline
import dataclasses
import math
import os
import warnings

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import Subset

from transformer_course import plots
from transformer_course.checks import (
    check_evaluate,
    check_make_warmup_scheduler,
    check_noam_lr,
    check_train_epoch,
)
from transformer_course.data import (
    TokenTaskConfig,
    band_counts,
    class_counts,
    counting_accuracy,
    make_loader,
    make_token_classification,
    split_dataset,
)
from transformer_course.experiments.ch06 import (
    ExperimentConfig,
    fit,
    paired_comparison,
    run_warmup_experiment,
    student_or_reference,
    summarize,
)
from transformer_course.layers import TransformerClassifier
from transformer_course.numbers import br, br_percent
from transformer_course.runtime import get_device
from transformer_course.training import ADAM_BETAS, ADAM_EPS, no_warmup_lr
from transformer_course.training import evaluate as evaluate_ref
from transformer_course.training import make_warmup_scheduler as make_warmup_scheduler_ref
from transformer_course.training import noam_lr as noam_lr_ref
from transformer_course.training import train_epoch as train_epoch_ref

torch.manual_seed(0)
device = get_device()
# Modelos minúsculos: numa CPU, uma thread só é tão rápida quanto duas e não fica esperando a outra
# quando a máquina está ocupada (com duas, cada operação pequena pode parar dezenas de milissegundos).
torch.set_num_threads(1)
# Na correção automática (nbgrader), os experimentos longos encolhem; as notas não dependem deles.
RAPIDO = bool(os.environ.get("NBGRADER_EXECUTION"))
print(f"PyTorch {torch.__version__} | dispositivo: {device} | modo rápido: {RAPIDO}")

# %% [markdown]
# ## 1. A tarefa: classificar sequências de tokens
#
# Para treinar em segundos numa CPU, usamos uma tarefa sintética, gerada pelo pacote do curso
# (`transformer_course.data`). Há três classes, A, B e C, e cada uma tem a sua **faixa** de tokens
# no vocabulário. Uma sequência da classe A mistura:
#
# - tokens da faixa de A (o sinal), em cerca de 25% das posições;
# - tokens das faixas de B e C (confusores), em cerca de 15%;
# - tokens neutros ("·3", "·7"...), que não dizem nada, no resto.
#
# As sequências têm de 4 a 16 tokens; as mais curtas são completadas com `<pad>` (id 0). Tudo é
# sorteado de uma vez, com um `torch.Generator` próprio: a mesma semente dá os mesmos dados em
# qualquer máquina.

# %%
tarefa = TokenTaskConfig(max_len=16, min_len=4)
dados = make_token_classification(2000, tarefa, seed=0)
nomes_classes = ["A", "B", "C"]
dados.token_ids.shape, tarefa.vocab_size, class_counts(dados.labels, tarefa.n_classes).tolist()

# %% [markdown]
# Quatro exemplos, com os nomes dos tokens e quantos tokens de cada faixa (A, B, C) eles têm:

# %%
contagens = dados.band_counts()  # (N, C): tokens de cada faixa em cada sequência
for i in range(4):
    print(f"classe {nomes_classes[dados.labels[i]]}, faixas A/B/C {contagens[i].tolist()}: {dados.decode(i)}")

# %% [markdown]
# Na maioria das sequências, a faixa da classe certa é a que mais aparece. Mas não em todas:
# numa sequência curta, os confusores podem empatar com o sinal ou até vencê-lo. O código abaixo
# compara, em cada sequência, a contagem da faixa certa com a da faixa confusora mais frequente,
# e mostra o primeiro exemplo de cada caso:

# %%
do_sinal = contagens.gather(1, dados.labels[:, None])[:, 0]  # (N, C) -> (N,): a faixa da classe certa
confusora = contagens.scatter(1, dados.labels[:, None], -1).amax(dim=1)  # (N,): a outra faixa mais comum
for caso, onde in (("empate", confusora == do_sinal), ("os confusores vencem", confusora > do_sinal)):
    i = int(onde.nonzero()[0, 0])
    fracao = br_percent(onde.float().mean())
    print(f"{caso} ({fracao} das sequências) — exemplo {i}, classe "
          f"{nomes_classes[dados.labels[i]]}, faixas A/B/C {contagens[i].tolist()}: {dados.decode(i)}")

# %% [markdown]
# Nessas sequências nenhuma regra acerta com certeza: é isso que torna a tarefa não trivial. As
# classes estão equilibradas, e os comprimentos se espalham de 4 a 16:

# %%
plots.dataset_overview(dados.labels, dados.lengths, tarefa.n_classes, nomes_classes)

# %% [markdown]
# Dividimos em treino (70%), validação (15%) e teste (15%). Cada lote é cortado no comprimento
# da sua sequência mais longa (o *padding* que sobra é mascarado na atenção, capítulo 5).

# %%
treino, validacao, teste = split_dataset(dados, seed=0)
loader_treino = make_loader(treino, batch_size=64, shuffle=True, seed=0)
loader_val = make_loader(validacao, batch_size=256)
loader_teste = make_loader(teste, batch_size=256)
x, y = next(iter(loader_treino))
len(treino), len(validacao), len(teste), tuple(x.shape), tuple(y.shape)

# %% [markdown]
# **As linhas de referência.** A de baixo é o chute: 1/3 de acerto. A de cima é uma regra sem
# aprendizado nenhum: "conte os tokens de cada faixa e escolha a que mais aparece". Para estes dados,
# ela é a melhor regra possível. Cada posição traz um token da faixa da classe certa com
# probabilidade 0,25 e um de cada faixa errada com 0,075 (os 15% de confusores divididos entre as
# duas outras classes); os neutros e a ordem não dizem nada. Então a classe mais provável, dada a
# sequência, é a da faixa que mais aparece, e num empate nenhuma regra faz melhor que escolher uma
# das empatadas. Um modelo só passa dessa regra por sorte da amostra; um que chega perto dela
# aprendeu o que há para aprender. Medimos as duas no conjunto de **teste**, onde mediremos o modelo:

# %%
regra_teste = counting_accuracy(*teste.tensors, tarefa)  # teste.tensors = (token_ids, rótulos)
f"regra da contagem no teste: {br_percent(regra_teste)} de acerto; chute: {br_percent(1 / tarefa.n_classes)}"

# %% [markdown]
# ## 2. O laço de treino, passo a passo
#
# O modelo é o classificador do capítulo 4 (`TransformerClassifier`): *embeddings*, posição,
# camadas do codificador, a média dos tokens reais e uma camada linear que dá um *logit* por classe.
# Ele devolve `(logits, pesos_de_atenção)`.
#
# **A perda.** Com logits $z \in \mathbb{R}^{B \times C}$ e rótulos $y$, a entropia cruzada
# (*cross-entropy*) é a média, sobre o lote, de menos o log da probabilidade da classe certa:
#
# $$\mathcal{L} = -\frac{1}{B}\sum_{b=1}^{B} \log \frac{e^{z_{b, y_b}}}{\sum_{c} e^{z_{b,c}}} .$$
#
# Um modelo que ainda não sabe nada dá probabilidade $1/C$ a cada classe, e a perda vale
# $\ln C = \ln 3 \approx 1{,}10$: é o nível do chute, que vamos procurar em toda curva de perda.

# %%
modelo = TransformerClassifier(tarefa.vocab_size, tarefa.n_classes, d_model=64, n_heads=4, n_layers=2,
                               d_ff=128, max_len=tarefa.max_len).to(device)
logits, pesos = modelo(x.to(device))  # (B, T) -> (B, C) e uma lista de (B, H, T, T)
perda = nn.CrossEntropyLoss()(logits, y.to(device))
tuple(logits.shape), br(perda, ".3f"), br(math.log(3), ".3f")

# %% [markdown]
# **Os sete passos de cada lote**, nesta ordem:
#
# | passo | código | por quê |
# |---|---|---|
# | 1 | `optimizer.zero_grad()` | o PyTorch **soma** cada novo gradiente ao que já está em `.grad` |
# | 2 | `logits = model(x)` | *forward* |
# | 3 | `loss = loss_fn(logits, y)` | um número só |
# | 4 | `loss.backward()` | preenche `.grad` de cada parâmetro |
# | 5 | `clip_grad_norm_(model.parameters(), max_grad_norm)` | impede que um lote com gradiente enorme domine o passo (e, no Adam, as médias que decidem os passos seguintes) |
# | 6 | `optimizer.step()` | atualiza os parâmetros com a taxa de aprendizado **atual** |
# | 7 | `scheduler.step()` | avança a taxa para o próximo passo |
#
# O passo 1 é o mais esquecido. Veja o que acontece sem ele: o mesmo cálculo, duas vezes.

# %%
w = torch.tensor([1.0, 2.0], requires_grad=True)
for _ in range(2):
    (w**2).sum().backward()  # d/dw Σ w² = 2w = [2, 4]
    print("w.grad = [" + "; ".join(br(g) for g in w.grad) + "]")

# %% [markdown]
# O segundo gradiente deveria ser $[2, 4]$ de novo; veio o dobro, porque foi somado ao primeiro.
# Num laço de treino sem `zero_grad()`, cada passo usa a soma de todos os gradientes anteriores.
#
# **O recorte do gradiente** (*gradient clipping*) trata o vetor de todos os gradientes como um só
# vetor $g$ e o encolhe quando a norma passa do limite $c$ (`max_grad_norm`):
#
# $$g \leftarrow g \cdot \min\!\left(1, \frac{c}{\lVert g \rVert}\right).$$
#
# A direção não muda; só o tamanho. Ele precisa vir **depois** do `backward()` (antes não há
# gradiente) e **antes** do `optimizer.step()` (depois, o passo já foi dado com o gradiente inteiro).
#
# **O que o recorte faz com o Adam.** Com o SGD, encolher $g$ encolhe o passo. Com o Adam, não
# exatamente: o passo de cada coordenada é $\mathrm{lr}\cdot\hat m/(\sqrt{\hat v}+\epsilon)$, a média
# móvel do gradiente dividida pela raiz da média móvel do seu quadrado, e tem tamanho da ordem de
# $\mathrm{lr}$ **qualquer que seja** a escala do gradiente (com os $\beta$ do artigo, no máximo
# cerca de $\mathrm{lr}$: Kingma e Ba, 2015, seção 2.1). Um gradiente mil vezes maior não dá um
# passo mil vezes maior. O estrago de um lote atípico é outro: ele domina a média $m$, e os passos seguintes andam na
# direção **dele**; e infla $v$, que esquece devagar ($\beta_2 = 0{,}98$), então os passos seguintes
# encolhem. O recorte impede as duas coisas. Medimos num parâmetro de 8 coordenadas, com gradientes
# sorteados $\mathcal{N}(0, 1)$ e, no passo 20, um lote mil vezes maior:

# %%
def passos_do_adam(recortar, n_passos=61, atipico=20, lr=0.01):
    """|passo| médio por coordenada (em unidades de lr) e o cosseno entre cada passo e -g do lote atípico."""
    p = nn.Parameter(torch.zeros(8))
    otimizador = torch.optim.Adam([p], lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS)
    gen = torch.Generator().manual_seed(0)
    tamanhos, alinhamentos = [], []
    for passo in range(n_passos):
        p.grad = torch.randn(8, generator=gen)
        if passo == atipico:
            p.grad *= 1000  # o lote atípico
            g_atipico = p.grad.clone()
        if recortar:
            nn.utils.clip_grad_norm_([p], max_norm=1.0)
        antes = p.detach().clone()
        otimizador.step()
        passo_dado = p.detach() - antes  # (8,)
        tamanhos.append(passo_dado.abs().mean().item() / lr)
        if passo > atipico:
            alinhamentos.append(torch.cosine_similarity(passo_dado, -g_atipico, dim=0).item())
    return {
        "passo no lote atípico (× lr)": br(tamanhos[atipico], ".2f"),
        "os 30 passos 11 a 40 depois dele (× lr, média)": br(sum(tamanhos[atipico + 11 : atipico + 41]) / 30, ".2f"),
        "alinhamento desses 30 passos com o lote atípico (cosseno médio)": br(sum(alinhamentos[10:40]) / 30, ".2f"),
    }


{"sem recorte": passos_do_adam(False), "com recorte (max_norm = 1)": passos_do_adam(True)}

# %% [markdown]
# Os gradientes são os mesmos nas duas execuções. Sem o recorte, o passo no lote atípico não explode
# (o Adam o limita), mas os passos seguintes ficam presos a ele: menores que os da execução com
# recorte e alinhados com a direção daquele único lote (um cosseno perto de 1 é "a mesma direção";
# perto de 0, "nenhuma direção em particular"). Com o recorte, o lote atípico entra com a norma dos
# outros, e os passos seguintes seguem os gradientes novos.
#
# **Treino e avaliação.** `model.train()` liga o *dropout*; `model.eval()` o desliga. Na avaliação,
# `torch.no_grad()` diz ao PyTorch para não guardar o grafo: nenhum `backward()` virá, e guardar o
# grafo só gastaria memória e tempo.

# %% [markdown]
# ## 3. A taxa de aprendizado com aquecimento: o agendamento de Noam
#
# **Intuição.** Logo depois da inicialização, os gradientes de um *Transformer* ainda não dizem
# muito, e o Adam, nos primeiros passos, estima a escala de cada gradiente com poucas amostras: os
# passos saem grandes e em direções ruins. Com uma taxa de aprendizado alta desde o começo, esses
# primeiros passos podem estragar a rede de um jeito de que ela não se recupera. O aquecimento
# começa com uma taxa minúscula e a aumenta aos poucos, até a taxa desejada; depois ela cai devagar.
#
# **A fórmula** (Vaswani et al., 2017, seção 5.3), com $s$ o número do passo:
#
# $$\mathrm{lr}(s) = \text{factor}\cdot d_{\text{model}}^{-0{,}5}\cdot
# \min\!\left(s^{-0{,}5},\; s\cdot \text{warmup}^{-1{,}5}\right).$$
#
# O artigo não tem o $\text{factor}$ (nele, $\text{factor} = 1$): é o multiplicador que
# implementações como *The Annotated Transformer* (Rush, 2018) acrescentam para subir ou baixar a
# curva inteira sem mudar a sua forma.
#
# - Enquanto $s < \text{warmup}$, o segundo termo é o menor: a taxa **sobe em linha reta**.
# - Depois, o primeiro termo é o menor: a taxa **cai como $1/\sqrt{s}$**.
# - Os dois se cruzam em $s = \text{warmup}$ (pois $\text{warmup}^{-0{,}5} =
#   \text{warmup}\cdot\text{warmup}^{-1{,}5}$), e o **pico** vale
#   $\text{factor}\cdot(d_{\text{model}}\cdot\text{warmup})^{-0{,}5}$. Com os valores do artigo,
#   $d_{\text{model}} = 512$ e $\text{warmup} = 4000$: $\approx 7{,}0\cdot10^{-4}$.
# - Em $s = 0$, $s^{-0{,}5}$ divide por zero. **O passo 0 usa a taxa do passo 1**: calcule com
#   `max(step, 1)`. Não é `step + 1`, que deslocaria a curva inteira um passo; só o passo 0 muda.
#   Não é um detalhe: o `LambdaLR` do PyTorch chama a sua função com o passo 0 no momento em que é
#   criado.
#
# O artigo usa o Adam com $\beta_1 = 0{,}9$, $\beta_2 = 0{,}98$ e $\epsilon = 10^{-9}$ (o $\beta_2$
# padrão do PyTorch é 0,999): no pacote, `ADAM_BETAS` e `ADAM_EPS`.

# %%
f"ADAM_BETAS = ({br(ADAM_BETAS[0])}; {br(ADAM_BETAS[1])}), ADAM_EPS = {br(ADAM_EPS)}"

# %% [markdown]
# ### Exercício 1 — `noam_lr` (2 pontos)
#
# Escreva `noam_lr(step, d_model, warmup_steps, factor=1.0)` que devolve a taxa (um `float`) da
# fórmula acima:
#
# - o passo 0 usa a taxa do passo 1: calcule com `max(step, 1)` no lugar de `step` (não `step + 1`,
#   que deslocaria todos os passos), e nada de divisão por zero;
# - `d_model` ou `warmup_steps` não positivos, ou um `step` negativo, levantam `ValueError` com uma
#   mensagem em português;
# - use números do Python (`**`, `min`, `math`), não tensores.

# %% nbgrader={"grade": false, "grade_id": "noam_lr", "locked": false, "schema_version": 3, "solution": true, "task": false}
def noam_lr(step, d_model, warmup_steps, factor=1.0):
    """Taxa de aprendizado de Noam no passo `step` (no passo 0, a do passo 1: `max(step, 1)`)."""
    ### BEGIN SOLUTION
    if d_model <= 0 or warmup_steps <= 0:
        raise ValueError(f"d_model e warmup_steps devem ser positivos; recebidos {d_model} e {warmup_steps}.")
    if step < 0:
        raise ValueError(f"step não pode ser negativo; recebido {step}.")
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_noam_lr", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_noam_lr(noam_lr)

# %% nbgrader={"grade": true, "grade_id": "test_noam_lr_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (outras configurações, passos grandes, ValueError, step negativo).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("06_treino_warmup", "test_noam_lr_hidden", globals())(noam_lr)
### END HIDDEN TESTS

# %% [markdown]
# A curva para algumas configurações (daqui em diante, as demonstrações usam a versão do pacote,
# `noam_lr_ref`, para o notebook rodar mesmo antes de você terminar os exercícios). O ponto marca o
# pico, em `warmup_steps`.

# %%
plots.noam_curves([(512, 4000, 1.0), (512, 8000, 1.0), (256, 4000, 1.0), (512, 4000, 2.0)],
                  noam_lr_ref, n_steps=20_000, title="Agendamento de Noam: o pico está em warmup_steps")

# %% [markdown]
# **Leitura da figura.** Dobrar `warmup_steps` empurra o pico para a direita e o baixa por um fator
# $\sqrt{2}$; um `d_model` menor sobe a curva inteira (modelos estreitos aguentam taxas maiores);
# `factor` só a multiplica. Depois do pico, todas caem como $1/\sqrt{s}$: em 20.000 passos, a curva
# do artigo está em $\sqrt{4000/20000} \approx 45\,\%$ do pico.
#
# ### O `LambdaLR`: um agendador do PyTorch
#
# O `LambdaLR` não calcula a taxa sozinho: ele **multiplica a taxa base** de cada grupo de
# parâmetros por uma função $\lambda$ do número de passos, que você escreve. Depois de $k$ chamadas
# de `scheduler.step()`,
#
# $$\text{lr} = \text{lr}_{\text{base}} \cdot \lambda(k).$$
#
# Com $\lambda$ = `noam_lr` e a taxa base igual a 1, a taxa é exatamente a de Noam. Se a taxa base
# ficar em, digamos, `1e-3` (o valor com que o otimizador foi criado), a curva sai mil vezes menor
# sem nenhum erro visível — a rede só não aprende. (Nem todo agendador do PyTorch segue essa regra:
# o `OneCycleLR` e o `CyclicLR` calculam a taxa a partir dos limites que recebem e ignoram o `lr` do
# otimizador, e o `ReduceLROnPlateau` reduz a taxa atual quando a perda de validação para de cair.)
#
# ### Exercício 2 — `make_warmup_scheduler` (2 pontos)
#
# Escreva `make_warmup_scheduler(optimizer, d_model, warmup_steps, factor=1.0)` que põe `lr = 1.0` em
# **todo** grupo de parâmetros do otimizador (`optimizer.param_groups`) e devolve um
# `torch.optim.lr_scheduler.LambdaLR` cuja função é a sua `noam_lr`. Depois de $k$ chamadas de
# `scheduler.step()`, a taxa deve ser `noam_lr(k, ...)`, qualquer que fosse o `lr` inicial.
#
# **A ordem importa.** O `LambdaLR` lê a taxa base de cada grupo **uma vez, quando é criado** (num
# otimizador que nunca teve agendador, é o `lr` do grupo naquele momento; ele a guarda em
# `scheduler.base_lrs`), e a partir daí calcula toda taxa como taxa base × $\lambda(k)$. Por isso `lr = 1.0` vem **antes** de criar o agendador: mudar `lr`
# depois só vale até o primeiro `scheduler.step()`, que volta a usar a taxa base guardada. (Num
# otimizador que já passou por outro agendador, o `LambdaLR` lê a taxa base de `group["initial_lr"]`;
# a resposta-modelo põe `1.0` ali também.)

# %% nbgrader={"grade": false, "grade_id": "make_warmup_scheduler", "locked": false, "schema_version": 3, "solution": true, "task": false}
def make_warmup_scheduler(optimizer, d_model, warmup_steps, factor=1.0):
    """LambdaLR que segue noam_lr, com taxa base 1.0 em todos os grupos."""
    ### BEGIN SOLUTION
    for group in optimizer.param_groups:
        group["lr"] = 1.0
        group["initial_lr"] = 1.0  # o LambdaLR lê a taxa base daqui se o otimizador já teve um agendador
    return LambdaLR(optimizer, lambda step: noam_lr(step, d_model, warmup_steps, factor))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_make_warmup_scheduler", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_make_warmup_scheduler(make_warmup_scheduler)

# %% nbgrader={"grade": true, "grade_id": "test_make_warmup_scheduler_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (dois grupos com taxas diferentes, Adam e AdamW, outras curvas).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("06_treino_warmup", "test_make_warmup_scheduler_hidden", globals())(make_warmup_scheduler)
### END HIDDEN TESTS

# %% [markdown]
# **Por que o agendador vem depois do otimizador.** No PyTorch, a taxa em vigor no passo de
# otimização número $k$ (contando do 0) é $\lambda(k)$; `scheduler.step()` prepara a taxa do passo
# **seguinte**. Com a ordem trocada, o primeiro valor da curva nunca é usado e toda a curva anda um
# passo adiantada (o PyTorch até avisa). Vejamos as taxas usadas nos primeiros passos, nas duas
# ordens, com `warmup_steps = 4`:

# %%
def taxas_usadas(agendador_antes, n_passos=6):
    p = nn.Parameter(torch.zeros(1))
    otimizador = torch.optim.SGD([p], lr=0.1)
    agendador = make_warmup_scheduler_ref(otimizador, d_model=64, warmup_steps=4)
    usadas = []
    for _ in range(n_passos):
        if agendador_antes:
            agendador.step()
        usadas.append(br(otimizador.param_groups[0]["lr"], ".5f"))  # a taxa deste passo
        otimizador.step()
        if not agendador_antes:
            agendador.step()
    return usadas


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # o aviso do PyTorch sobre a ordem trocada
    print("otimizador, depois agendador:", "; ".join(taxas_usadas(False)))
    print("agendador, depois otimizador:", "; ".join(taxas_usadas(True)))

# %% [markdown]
# Na ordem certa, os dois primeiros passos usam a mesma taxa (o passo 0 usa a taxa do passo 1) e o
# pico $(64\cdot4)^{-0{,}5} = 0{,}0625$ cai no quinto passo, o de número 4. Na ordem trocada, tudo
# chega um passo antes. Com o Noam a diferença é pequena, e com os outros agendamentos também costuma
# ser: uma rampa linear que começa em 0 perde o primeiro valor (o passo com taxa 0), e os agendadores
# que mudam a taxa em passos marcados (`StepLR`, `MultiStepLR`) mudam um passo antes da marca. Mas o
# agendamento deixa de ser o que você escreveu, e o PyTorch avisa. Siga a convenção dele e o problema
# não aparece.
#
# ## 4. Explore: a curva de Noam
#
# Mova os controles. O pico (ponto vermelho) fica sempre em `warmup_steps`, e o texto mostra o valor
# dele e quanto sobra no fim. A curva cinza é a do artigo. Experimente achar duas configurações
# diferentes com o mesmo pico: o que muda entre elas?

# %% tags=["nbval-ignore-output"]
from transformer_course.widgets import noam_widget

noam_widget()

# %% [markdown]
# ## 5. Uma época de treino e uma avaliação
#
# ### Exercício 3 — `train_epoch` (4 pontos)
#
# Escreva `train_epoch(model, loader, optimizer, scheduler, loss_fn, max_grad_norm=1.0)` que treina
# uma época e devolve `{"loss": ..., "accuracy": ...}`:
#
# - ponha o modelo em modo de treino; mova cada lote `(x, y)` para o dispositivo do modelo;
# - em cada lote, nesta ordem: `zero_grad`, *forward*, perda, `backward`, `clip_grad_norm_` com
#   `max_grad_norm`, `optimizer.step()`, `scheduler.step()` — um passo do otimizador e um do agendador
#   por lote, e o modelo chamado uma vez só por lote (reaproveite os logits para a acurácia);
# - o modelo pode devolver os logits ou uma tupla cujo primeiro elemento são os logits;
# - `"loss"` é a **média simples das perdas dos lotes** (um `float`: use `.item()`);
#   `"accuracy"` é **acertos / total de exemplos**, também um `float` (a classe prevista é o `argmax`
#   dos logits; conte os acertos com `.item()`).
#
# A correção usa um modelo-sonda e observa o comportamento: a ordem das chamadas, o modo do modelo e,
# a cada `optimizer.step()`, a perda do lote, o gradiente, a taxa usada e os parâmetros, comparados
# com os de uma execução de referência com a mesma semente. Se algo diferir, a mensagem diz em que
# lote e em que etapa a primeira diferença aparece.

# %% nbgrader={"grade": false, "grade_id": "train_epoch", "locked": false, "schema_version": 3, "solution": true, "task": false}
def train_epoch(model, loader, optimizer, scheduler, loss_fn, max_grad_norm=1.0):
    """Uma época de treino; devolve {"loss": média dos lotes, "accuracy": acertos/total}."""
    ### BEGIN SOLUTION
    model.train()
    device = next(model.parameters()).device
    total_loss, n_batches, correct, seen = 0.0, 0, 0, 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        out = model(x)
        logits = out[0] if isinstance(out, (tuple, list)) else out  # (B, C)
        loss = loss_fn(logits, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        scheduler.step()
        total_loss, n_batches = total_loss + loss.item(), n_batches + 1
        correct += (logits.argmax(dim=-1) == y).sum().item()
        seen += y.numel()
    return {"loss": total_loss / n_batches, "accuracy": correct / seen}
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_train_epoch", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_train_epoch(train_epoch)

# %% nbgrader={"grade": true, "grade_id": "test_train_epoch_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (modelo que devolve tupla, float32, outros recortes; o rastro de
# cada passo comparado com o de referência).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("06_treino_warmup", "test_train_epoch_hidden", globals())(train_epoch)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercício 4 — `evaluate` (2 pontos)
#
# Escreva `evaluate(model, loader, loss_fn)` que devolve `{"loss": ..., "accuracy": ...}` **sem
# treinar nada**:
#
# - `"loss"` é a perda **média por exemplo** no conjunto inteiro. `loss_fn` devolve a média do lote;
#   multiplique-a pelo tamanho do lote, some sobre os lotes e divida pelo total de exemplos:
#   $\sum_b \mathcal{L}_b\, B_b \,/\, N$, com $\mathcal{L}_b$ = `loss_fn(logits, y).item()` no lote $b$,
#   $B_b$ o número de exemplos dele e $N = \sum_b B_b$ (um `float`). **Não** é a média simples das
#   perdas dos lotes, a do exercício 3 (veja o porquê logo abaixo);
# - `"accuracy"` é acertos / total de exemplos, como no exercício 3;
# - modo de avaliação durante o laço e nenhum gradiente (`torch.no_grad()` ou `torch.inference_mode()`);
# - nada de `zero_grad`, `backward` ou `optimizer.step()`: os parâmetros e os gradientes que já estavam
#   em `.grad` saem como entraram;
# - no fim, o modelo volta ao modo em que chegou: se estava em treino, volta a treino; se estava em
#   avaliação, continua em avaliação.
#
# **Por que a média por exemplo.** O último lote costuma ser menor: a validação deste capítulo tem
# 300 exemplos e lotes de 256, então os lotes têm 256 e 44 exemplos. Na média simples das duas perdas,
# cada exemplo do lote de 44 pesaria $256/44 \approx 5{,}8$ vezes mais que um do lote de 256, e o
# número mudaria com o `batch_size` — mas é ele que escolhe o melhor ponto de controle (seção 6). A
# avaliação mede um modelo **fixo** num conjunto **fixo**: o resultado tem de ser a entropia cruzada
# média dos exemplos, qualquer que seja o corte dos lotes. No treino (exercício 3), a média simples
# dos lotes basta: cada perda é a de um passo diferente, com pesos diferentes, e a média da época é só
# um resumo de uma curva que muda a cada passo.

# %% nbgrader={"grade": false, "grade_id": "evaluate", "locked": false, "schema_version": 3, "solution": true, "task": false}
def evaluate(model, loader, loss_fn):
    """Perda média por exemplo e acurácia, sem gradientes; restaura o modo do modelo."""
    ### BEGIN SOLUTION
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total_loss, correct, seen = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            out = model(x)
            logits = out[0] if isinstance(out, (tuple, list)) else out  # (B, C)
            total_loss += loss_fn(logits, y).item() * y.numel()  # a média do lote × o tamanho do lote
            correct += (logits.argmax(dim=-1) == y).sum().item()
            seen += y.numel()
    model.train(was_training)
    return {"loss": total_loss / seen, "accuracy": correct / seen}
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_evaluate", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_evaluate(evaluate)

# %% nbgrader={"grade": true, "grade_id": "test_evaluate_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (modelo que devolve tupla, float32, um lote só).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("06_treino_warmup", "test_evaluate_hidden", globals())(evaluate)
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Treinando o classificador
#
# Juntando tudo: o classificador Pre-LN de duas camadas, Adam com os hiperparâmetros do artigo e o
# agendamento de Noam. Com `d_model = 64`, 60 passos de aquecimento e `factor = 0.25`, o pico é
# $0{,}25\cdot(64\cdot60)^{-0{,}5} \approx 0{,}004$.
#
# `fit` (do pacote) chama **as suas** `train_epoch` e `evaluate` a cada época, mostra uma barra de
# progresso e guarda **na memória** uma cópia dos pesos da época com a menor perda de validação (o
# "melhor ponto de controle", *checkpoint*). Nada é gravado em disco. Antes, `student_or_reference`
# roda os testes visíveis de cada exercício: se a sua versão ainda não existe ou não passa neles, o
# treino usa a do pacote, e a célula diz qual foi usada.

# %% tags=["nbval-ignore-output"]
torch.manual_seed(0)
modelo = TransformerClassifier(tarefa.vocab_size, tarefa.n_classes, d_model=64, n_heads=4, n_layers=2,
                               d_ff=128, max_len=tarefa.max_len, dropout=0.1).to(device)
otimizador = torch.optim.Adam(modelo.parameters(), betas=ADAM_BETAS, eps=ADAM_EPS)
agendador = make_warmup_scheduler_ref(otimizador, d_model=64, warmup_steps=60, factor=0.25)
laco_treino = student_or_reference(train_epoch, check_train_epoch, train_epoch_ref, "train_epoch")
laco_avaliacao = student_or_reference(evaluate, check_evaluate, evaluate_ref, "evaluate")
# na correção automática, uma época de 4 lotes (nada é avaliado aqui)
loader_fit = make_loader(Subset(treino, range(256)), batch_size=64, shuffle=True) if RAPIDO else loader_treino
historico = fit(modelo, loader_fit, loader_val, otimizador, agendador, nn.CrossEntropyLoss(),
                epochs=1 if RAPIDO else 6, max_grad_norm=1.0, desc="classificador",
                train_fn=laco_treino, eval_fn=laco_avaliacao)
f"melhor época: {historico.best_epoch}, perda de validação {br(historico.best_val_loss, '.3f')}"

# %%
plots.training_curves(historico, "Classificador Pre-LN, 2 camadas, com aquecimento")

# %% [markdown]
# **Leitura da figura.** A perda de treino começa perto de $\ln 3 \approx 1{,}10$ (o chute) e cai; a
# taxa sobe até o pico no passo 60 e depois desce. A perda de **treino** de cada época é a média dos
# lotes *durante* a época, com *dropout* ligado e pesos mudando; a de **validação** é medida no fim,
# sem *dropout* — por isso, no começo, a de validação pode ficar abaixo da de treino. Quando a de
# validação para de cair enquanto a de treino continua caindo, o modelo começou a se ajustar demais
# aos exemplos de treino, a decorá-los: é o **sobreajuste** (*overfitting*), e é para isso que
# guardamos o melhor ponto de controle.
#
# **A perda de validação não depende do tamanho do lote** — se for a média por exemplo do
# exercício 4. A mesma validação, com o modelo da última época, cortada em lotes de três tamanhos:

# %%
def media_dos_lotes(model, loader, loss_fn):
    """O erro que o exercício 4 evita, para comparar: a média simples das perdas dos lotes."""
    model.eval()
    with torch.no_grad():
        perdas = [loss_fn(model(x.to(device))[0], y.to(device)).item() for x, y in loader]
    return sum(perdas) / len(perdas)


perda = nn.CrossEntropyLoss()
{
    f"batch_size = {b}": {
        "lotes": [len(y) for _, y in make_loader(validacao, batch_size=b)],
        "por exemplo (evaluate)": br(evaluate_ref(modelo, make_loader(validacao, batch_size=b), perda)["loss"], ".4f"),
        "média simples dos lotes": br(media_dos_lotes(modelo, make_loader(validacao, batch_size=b), perda), ".4f"),
    }
    for b in (256, 100, 64)
}

# %% [markdown]
# Com lotes iguais (100), as duas contas coincidem; com um último lote menor, a média simples muda
# com o `batch_size` e a média por exemplo não.
#
# Carregamos os pesos da melhor época e medimos, uma única vez, no conjunto de teste:

# %%
modelo.load_state_dict(historico.best_state)
resultado_teste = evaluate_ref(modelo, loader_teste, nn.CrossEntropyLoss())
{"perda de teste": br(resultado_teste["loss"], ".3f"),
 "acurácia de teste": br_percent(resultado_teste["accuracy"]),
 "regra da contagem (teste)": br_percent(regra_teste)}

# %% [markdown]
# Compare a acurácia do classificador com a da regra da contagem, que foi escrita sabendo como os
# dados foram gerados; ele só viu 1400 exemplos rotulados. A diferença entre os dois diz quem é
# melhor, ou é sorte da amostra? Os dois foram medidos nos **mesmos** 300 exemplos: a comparação é
# **pareada**. Onde os dois acertam, ou os dois erram, a diferença não muda; só contam os exemplos em
# que eles discordam — $n_{10}$, em que o modelo acerta e a regra erra, e $n_{01}$, o contrário. Com
# $N$ exemplos, a diferença de acurácia é $(n_{10} - n_{01})/N$, e o desvio padrão dela,
#
# $$\frac{1}{N}\sqrt{n_{10} + n_{01} - \frac{(n_{10} - n_{01})^2}{N}} .$$
#
# O **teste de McNemar** (1947) pergunta se a divisão dos $n_{10} + n_{01}$ desacordos é mais desigual
# do que uma moeda honesta faria: o p-valor exato vem da binomial com $p = 1/2$. Para comparar,
# a última linha traz o desvio padrão de **uma** acurácia isolada em $N$ exemplos, $\sqrt{p(1-p)/N}$:
# ele não serve para a diferença de dois classificadores medidos nos mesmos exemplos, porque ignora
# que os dois tendem a errar nos mesmos exemplos difíceis.

# %%
modelo.eval()
with torch.no_grad():  # o loader_teste não embaralha: a ordem é a de teste.tensors
    previsto = torch.cat([modelo(x.to(device))[0].argmax(dim=-1).cpu() for x, _ in loader_teste])  # (N,)
ids_teste, y_teste = teste.tensors  # (N, T) e (N,)
regra_prevista = band_counts(ids_teste, tarefa).argmax(dim=-1)  # (N, C) -> (N,): a faixa mais frequente
c = paired_comparison(previsto == y_teste, regra_prevista == y_teste)
{
    "modelo acerta, regra erra (n10)": c["a_only"],
    "regra acerta, modelo erra (n01)": c["b_only"],
    "diferença de acurácia (modelo − regra), em pontos": br(100 * c["difference"], ".1f"),
    "desvio padrão da diferença pareada, em pontos": br(100 * c["std"], ".1f"),
    "p-valor exato de McNemar": br(c["p_value"], ".2g"),
    "desvio padrão de UMA acurácia em N exemplos, em pontos": br(
        100 * math.sqrt(regra_teste * (1 - regra_teste) / c["n"]), ".1f"
    ),
}

# %% [markdown]
# Leia a diferença junto com o seu desvio padrão: uma diferença de um ou dois desvios padrão (e um
# p-valor de McNemar acima de 0,05, o limiar usual) não diz quem é melhor. Nenhum dos dois acerta tudo:
# nas sequências em que os confusores empatam com o sinal ou o vencem, não há resposta certa a
# acertar sempre.

# %% [markdown]
# ## 7. Um experimento honesto: o aquecimento importa?
#
# "O aquecimento é crucial para *Transformers*" é repetido em muitos textos, às vezes com números sem
# fonte. Vamos medir. O plano:
#
# - **duas condições** com o **mesmo pico** de taxa e a **mesma queda** depois dele; só os primeiros
#   `warmup_steps` passos diferem: com aquecimento, a rampa de Noam; sem aquecimento, a taxa já começa
#   no pico (`no_warmup_lr`, também por `LambdaLR`);
# - **o arranjo onde se espera que importe**: Post-LN (a normalização depois da soma residual, como no
#   artigo original) e uma pilha mais funda, de 6 camadas; sem *dropout*;
# - **três sementes** por condição: cada semente fixa a inicialização e a ordem dos lotes, e as duas
#   condições de uma semente partem dos mesmos pesos;
# - **o controle**: o mesmo experimento com Pre-LN.
#
# O pico escolhido, $\approx 0{,}016$, é alto para o Adam, de propósito: é onde a diferença pode
# aparecer. Com taxas baixas, as duas condições tendem a se comportar igual.

# %%
EXPERIMENTO = ExperimentConfig(d_model=32, n_heads=4, n_layers=6, d_ff=64, norm_first=False, dropout=0.0,
                               warmup_steps=30, factor=0.5, epochs=2, seeds=(0, 1, 2))
if RAPIDO:
    EXPERIMENTO = dataclasses.replace(EXPERIMENTO, epochs=1, seeds=(0,))


def novo_modelo(config, semente):
    torch.manual_seed(semente)  # a inicialização dos pesos usa o gerador global
    return TransformerClassifier(tarefa.vocab_size, tarefa.n_classes, d_model=config.d_model,
                                 n_heads=config.n_heads, n_layers=config.n_layers, d_ff=config.d_ff,
                                 max_len=tarefa.max_len, dropout=config.dropout, norm_first=config.norm_first)


def loader_da_semente(semente):
    conjunto = Subset(treino, range(256)) if RAPIDO else treino  # na correção: só 4 lotes por época
    return make_loader(conjunto, batch_size=64, shuffle=True, seed=semente)


f"pico: {br(EXPERIMENTO.peak_lr, '.4f')} = {br(no_warmup_lr(1, 32, 30, 0.5), '.4f')} (sem aquecimento, já no passo 1)"

# %% tags=["nbval-ignore-output"]
post_ln = run_warmup_experiment(EXPERIMENTO, novo_modelo, loader_da_semente, loader_val, device)

# %%
plots.warmup_experiment_figure(post_ln, math.log(tarefa.n_classes),
                               "Post-LN, 6 camadas: com e sem aquecimento (mesmo pico)")

# %%
summarize(post_ln, EXPERIMENTO.seeds)

# %% [markdown]
# E o controle, com Pre-LN (a normalização antes de cada subcamada, dentro do ramo residual):

# %% tags=["nbval-ignore-output"]
pre_ln = run_warmup_experiment(dataclasses.replace(EXPERIMENTO, norm_first=True), novo_modelo,
                               loader_da_semente, loader_val, device)

# %%
plots.warmup_experiment_figure(pre_ln, math.log(tarefa.n_classes),
                               "Pre-LN, 6 camadas: com e sem aquecimento (mesmo pico)")

# %%
summarize(pre_ln, EXPERIMENTO.seeds)

# %% [markdown]
# O resumo das duas tabelas: em cada arranjo e condição, quantas sementes terminaram **presas no
# chute** (acurácia de validação final abaixo de 40%, perto de 1/3):

# %%
def presas_no_chute(resultado):
    return {condicao: f"{sum(h.val_accuracy[-1] < 0.4 for h in hs)} de {len(hs)}"
            for condicao, hs in resultado.items()}


{"Post-LN": presas_no_chute(post_ln), "Pre-LN": presas_no_chute(pre_ln)}

# %% [markdown]
# **O que medimos** (na CPU, com estas sementes; numa GPU os números mudam um pouco, e o que vale
# são as tabelas e a contagem acima, não este parágrafo):
#
# - **Post-LN, sem aquecimento**: a perda sobe logo nos primeiros passos e fica parada em
#   $\ln 3 \approx 1{,}10$ — a rede passa a prever sempre a mesma classe (acurácia ≈ 1/3) e não sai
#   mais de lá nas duas épocas. Com aquecimento, as mesmas redes, com os mesmos pesos iniciais e o
#   mesmo pico, aprendem.
# - **Pre-LN**: com o mesmo pico, as duas condições aprendem. Sem aquecimento, a perda também dá um
#   salto nos primeiros passos, mas a rede se recupera: a primeira época fica um pouco atrás e, na
#   segunda, as curvas se encontram. Aqui o aquecimento pouco importou. Pre-LN é o arranjo que
#   Xiong et al. (2020) mostram ser treinável sem aquecimento.
# - **O que não medimos**: três sementes, uma tarefa sintética pequena e duas épocas não dizem
#   "quanto" de acurácia o aquecimento vale em geral. E o experimento mostra um **efeito** — sem a
#   rampa, a rede Post-LN ficou presa; com ela, aprendeu —, não o **mecanismo**. As explicações são
#   dos artigos, não deste experimento: Xiong et al. (2020) argumentam que, no Post-LN, os gradientes
#   das camadas perto da saída são grandes na inicialização (o teorema 1 deles dá limites superiores
#   para esses gradientes) e que passos grandes logo no começo desestabilizam o treino; Liu et al. (2020, EMNLP) argumentam que a causa principal é outra — o
#   Post-LN depende tanto do ramo residual que pequenas mudanças nos parâmetros viram grandes
#   mudanças na saída; e Liu et al. (2020, ICLR) apontam a variância alta das estimativas do Adam
#   nos primeiros passos. Com uma taxa de pico menor, espera-se que a diferença diminua; tente
#   `factor=0.2`.

# %% [markdown]
# ## 8. Perguntas abertas (corrigidas à mão)
#
# **Pergunta 1 (2 pontos).** Explique por que o Adam com uma taxa de aprendizado alta desde o
# primeiro passo pode estragar um *Transformer* recém-inicializado, e como o aquecimento evita isso.
# Use o experimento da seção 7 e diga também em que situação ele mostrou que o aquecimento pouco
# importa.

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_adam_warmup", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** O Adam divide cada gradiente por uma estimativa da sua escala (a raiz da média
# móvel dos quadrados). No começo, essa estimativa vem de pouquíssimos lotes e é ruidosa (o argumento
# de Liu et al., 2020, ICLR); além disso, o passo do Adam tem tamanho da ordem da taxa de
# aprendizado **qualquer que seja** o tamanho do gradiente. Então, com taxa alta desde o passo 1,
# cada parâmetro anda ≈ lr numa direção que a rede recém-inicializada ainda não sabe escolher; em
# Post-LN, em que os gradientes perto da saída são grandes na inicialização (Xiong et al., 2020) e a
# saída depende muito do ramo residual (Liu et al., 2020, EMNLP), esses passos podem empurrar a rede
# para um estado degenerado (prever sempre a mesma classe, perda parada em ln 3 ≈ 1,10), de onde ela
# não sai. O aquecimento começa com passos minúsculos: as estimativas do Adam se estabilizam e a rede
# entra numa região boa antes de a taxa chegar ao pico. No experimento, a mesma rede Post-LN de 6
# camadas, com os mesmos pesos iniciais e o mesmo pico, ficou presa no chute sem aquecimento e
# aprendeu com ele; com Pre-LN, as duas condições aprenderam (o aquecimento pouco importou), e com
# um pico menor a diferença também desaparece.
#
# **Rubrica (2 pontos).**
# - 1 ponto: explica o mecanismo — passos do Adam ≈ lr independentemente da escala do gradiente e/ou
#   estimativa de variância ruidosa no início, levando a rede a um estado ruim; o aquecimento limita
#   os primeiros passos. Meio ponto para "a taxa alta faz divergir" sem o porquê.
# - 1 ponto: usa o experimento (Post-LN preso em ≈ ln 3 sem aquecimento, aprendendo com ele) **e**
#   cita onde ele pouco importou (Pre-LN ou pico menor). Meio ponto se citar só um dos dois.
# ### END SOLUTION

# %% [markdown]
# **Pergunta 2 (2 pontos).** Uma colega treina um *Transformer* de 3 classes e mostra esta curva de
# perda de treino por passo: começa em 1,10, cai até 0,60 no passo 300, sobe de repente para 1,10 no
# passo 320 e fica lá, reta, até o passo 2000; a acurácia de validação vai a 33% e não muda mais.
# O que provavelmente aconteceu? Dê duas coisas que você mudaria, em ordem de prioridade, e diga
# o que esperaria ver na curva depois de cada mudança.

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_divergence", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** 1,10 ≈ ln 3 é a perda de quem chuta entre 3 classes, e 33% de acurácia é
# prever sempre a mesma classe: a rede estava aprendendo e **divergiu** no passo ≈ 320 — um passo
# grande demais (taxa alta no pico do agendamento, um lote com gradiente enorme) a jogou num estado
# degenerado (por exemplo, ativações saturadas, logits constantes), e, como a perda fica reta, ela não
# se recuperou. Mudanças, em ordem: (1) baixar o pico da taxa (menor `factor`) ou alongar o
# aquecimento, conferindo se o pico coincide com o salto; esperaria a perda continuar caindo depois do
# passo 300, talvez mais devagar; (2) conferir/ligar o recorte da norma do gradiente (`max_grad_norm`
# ≈ 1) e a ordem do laço (recorte antes do `optimizer.step()`, `zero_grad` a cada lote); esperaria
# picos isolados na perda em vez de um salto permanente. Outras respostas válidas: trocar para
# Pre-LN, verificar NaN/inf nos dados ou na perda, usar o melhor ponto de controle anterior ao salto.
#
# **Rubrica (2 pontos).**
# - 1 ponto: reconhece 1,10 = ln 3 (nível do chute) e 33% como "prevê uma classe só" e conclui
#   que o treino divergiu/colapsou num passo específico, ligando isso a passos grandes demais.
# - 1 ponto: duas mudanças plausíveis e priorizadas (taxa/aquecimento, recorte do gradiente, Pre-LN,
#   ordem do laço...) com o efeito esperado na curva. Meio ponto se faltar o efeito esperado.
# ### END SOLUTION

# %% [markdown]
# ## Resumo
#
# - O laço de treino, por lote: `zero_grad` → *forward* → perda → `backward` → `clip_grad_norm_` →
#   `optimizer.step()` → `scheduler.step()`. Sem `zero_grad`, os gradientes se somam; com o recorte
#   depois do passo, o passo já foi dado com o gradiente inteiro; com o agendador antes do
#   otimizador, a curva anda um passo adiantada.
# - Avaliar: `model.eval()`, `torch.no_grad()`, a perda média **por exemplo** ($\sum_b
#   \mathcal{L}_b B_b / N$, que não depende do `batch_size`), e devolver o modelo ao modo anterior.
# - O recorte do gradiente, com o Adam, não limita o tamanho do passo (já da ordem de lr): impede que
#   um lote atípico domine as médias $m$ e $v$ e, com elas, os passos seguintes.
# - Dois classificadores nos mesmos exemplos se comparam pela diferença **pareada**: só os exemplos
#   em que eles discordam contam (teste de McNemar).
# - A entropia cruzada de um modelo que chuta entre $C$ classes vale $\ln C$: é a primeira linha a
#   procurar numa curva de perda.
# - Noam: $\mathrm{lr}(s) = \text{factor}\cdot d_{\text{model}}^{-0{,}5}\min(s^{-0{,}5},
#   s\cdot\text{warmup}^{-1{,}5})$, pico $\text{factor}\cdot(d_{\text{model}}\,\text{warmup})^{-0{,}5}$
#   em $s = \text{warmup}$, e o passo 0 usa a taxa do passo 1 (`max(step, 1)`).
# - No PyTorch: `LambdaLR` com a taxa base `1.0`, Adam com $\beta = (0{,}9;\ 0{,}98)$ e
#   $\epsilon = 10^{-9}$ como no artigo.
# - Medido aqui: com Post-LN e um pico alto, sem aquecimento a rede ficou presa no chute; com
#   Pre-LN, o aquecimento pouco importou. O porquê (o mecanismo) vem dos artigos, não da medida.
#
# ## Para ir além
#
# - A. Vaswani et al. (2017), *Attention Is All You Need*, NeurIPS — seção 5.3 (o otimizador e o
#   agendamento) e seção 5.4 (*dropout* e suavização de rótulos).
# - A. Rush (2018), *The Annotated Transformer*, NLP-OSS — o artigo linha a linha em PyTorch, com o
#   agendamento de Noam e o seu `factor`.
# - R. Xiong et al. (2020), *On Layer Normalization in the Transformer Architecture*, ICML — por que o
#   Post-LN precisa de aquecimento e o Pre-LN não.
# - L. Liu et al. (2020), *On the Variance of the Adaptive Learning Rate and Beyond*, ICLR — a variância
#   do Adam nos primeiros passos como explicação do aquecimento (RAdam).
# - L. Liu et al. (2020), *Understanding the Difficulty of Training Transformers*, EMNLP — a
#   dependência do Post-LN em relação aos ramos residuais.
# - M. Popel e O. Bojar (2018), *Training Tips for the Transformer Model*, PBML — experimentos práticos
#   com taxa de aprendizado, aquecimento e tamanho do lote.
# - D. P. Kingma e J. Ba (2015), *Adam: A Method for Stochastic Optimization*, ICLR — a seção 2.1
#   limita o tamanho do passo do Adam.
# - Q. McNemar (1947), *Note on the Sampling Error of the Difference Between Correlated Proportions or
#   Percentages*, Psychometrika 12(2) — o teste pareado; T. G. Dietterich (1998), *Approximate
#   Statistical Tests for Comparing Supervised Classification Learning Algorithms*, Neural
#   Computation 10(7) — por que usá-lo para comparar classificadores num mesmo conjunto de teste.
# - R. Pascanu, T. Mikolov e Y. Bengio (2013), *On the Difficulty of Training Recurrent Neural
#   Networks*, ICML — o recorte da norma do gradiente.
# - Documentação de `torch.optim.lr_scheduler.LambdaLR` e de `torch.nn.utils.clip_grad_norm_`.
#
# Próximo capítulo: as três famílias de *Transformers* e um GPT pequenino treinado aqui mesmo.
