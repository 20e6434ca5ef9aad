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
# # Capítulo 7 — Famílias de *Transformers*, um GPT em português e o preço da atenção
#
# **Objetivos.** Ao fim deste capítulo você vai saber:
#
# 1. montar, com os mesmos blocos dos capítulos 3 a 5, as três famílias: só-codificador
#    (*encoder-only*), só-decodificador (*decoder-only*) e codificador-decodificador
#    (*encoder-decoder*), e dizer qual serve para qual tarefa;
# 2. treinar aqui mesmo, em menos de meio minuto de CPU, um GPT de caracteres com a prosa deste curso;
# 3. escrever a geração autorregressiva (*autoregressive generation*): gulosa, com temperatura e com top-k;
# 4. contar e medir o custo da atenção, que cresce com o quadrado do comprimento da sequência;
# 5. ler a lei de escala (*scaling law*) de Kaplan et al. (2020) com as constantes do artigo, e o que ela
#    não promete.
#
# **Pré-requisitos.** Capítulos 2 a 6: atenção, múltiplas cabeças, camadas do codificador e do
# decodificador, máscaras, laço de treino e entropia cruzada.
#
# **Tempo estimado.** 90 a 120 minutos (o notebook inteiro roda em menos de um minuto).
#
# **Legenda de formas** (a mesma em todo o curso): B lote (*batch*), T comprimento da sequência,
# D `d_model`, H cabeças, Dk = D/H, F `d_ff`, V vocabulário, S comprimento da fonte (atenção cruzada).

# %% tags=["nbval-ignore-output"]
# %matplotlib inline
import math
import os

import torch

from transformer_course import plots
from transformer_course.checks import (
    check_attention_cost,
    check_family_quiz,
    check_generate,
    check_kaplan_loss,
)
from transformer_course.costs import count_parameters
from transformer_course.costs import kaplan_loss as kaplan_loss_ref
from transformer_course.experiments.ch07 import (
    loglog_slope,
    measure_attention_memory,
    sequence_accuracy,
    time_attention,
    train_dates,
    train_gpt,
    training_report,
)
from transformer_course.generation import GPTConfig, TinyGPT, next_token_distribution
from transformer_course.generation import generate as generate_ref
from transformer_course.layers import TransformerClassifier
from transformer_course.masks import assert_causal
from transformer_course.numbers import br, br_percent
from transformer_course.runtime import get_device, seeded_generator
from transformer_course.seq2seq import DateSeq2Seq, DateVocab, translate_dates
from transformer_course.text import CharTokenizer, course_corpus, train_val_split, unigram_baseline

torch.manual_seed(0)
device = get_device()
if device.type == "cpu":
    # Modelos minúsculos: uma thread é mais rápida que duas disputando núcleos ocupados.
    torch.set_num_threads(1)
# Na correção automática (nbgrader), os experimentos longos encolhem; as notas não mudam.
RAPIDO = bool(os.environ.get("NBGRADER_EXECUTION"))
print(f"PyTorch {torch.__version__} | dispositivo: {device} | modo rápido: {RAPIDO}")

# %% [markdown]
# ## 1. Três famílias, os mesmos blocos
#
# O artigo original (Vaswani et al., 2017) propôs um codificador e um decodificador para traduzir.
# Logo depois, cada metade ganhou vida própria. A diferença entre as três famílias não está em
# peças novas: está em **quem pode atender a quem**.
#
# - **Só-codificador** (BERT, RoBERTa): autoatenção **bidirecional**, cada posição vê a frase inteira.
#   Ótimo para *entender* um texto já completo: classificar, marcar entidades, achar a resposta num
#   trecho. O BERT foi pré-treinado como modelo de linguagem mascarado (*masked language model*):
#   sorteia 15% das posições para prever; dessas, 80% viram o token `[MASK]`, 10% viram um token
#   aleatório e 10% ficam como estão (Devlin et al., 2019, seção 3.1), e o modelo aprende a
#   recuperar o token original olhando os dois lados. Ele não gera texto da esquerda para a direita.
# - **Só-decodificador** (GPT, LLaMA): autoatenção **causal**, cada posição vê só o passado. Treina
#   prevendo o próximo token em qualquer texto, sem rótulos, e gera um token por vez.
# - **Codificador-decodificador** (T5, BART, Whisper): o codificador lê a entrada inteira nos dois
#   sentidos; o decodificador gera a saída, causal, e consulta a entrada pela **atenção cruzada**
#   (*cross-attention*): consultas do decodificador, chaves e valores do codificador. Natural quando a
#   entrada e a saída são sequências diferentes: traduzir, resumir, transcrever.

# %%
plots.family_masks_figure()

# %% [markdown]
# **Leitura da figura.** A mesma matriz de atenção dos capítulos 2 a 5, só que desenhada como
# máscara: no codificador, tudo azul; no decodificador, o triângulo de baixo (a máscara causal do
# capítulo 5); na atenção cruzada, cada posição da saída vê **todas** as posições da fonte — a
# fonte já existe inteira, não há futuro para esconder.
#
# ### 1.1 Só-codificador: um classificador
#
# O `TransformerClassifier` do capítulo 4 é um codificador com uma cabeça de classificação em cima
# da média dos tokens. Sem treino, ele só mostra as formas:

# %%
classificador = TransformerClassifier(vocab_size=50, n_classes=3, d_model=32, n_heads=4, n_layers=2, d_ff=64)
ids = torch.randint(1, 50, (2, 7), generator=seeded_generator(0))  # (B, T), 0 é padding
logits, pesos = classificador(ids)
logits.shape, pesos[0].shape  # (B, C) e, por camada, (B, H, T, T)

# %% [markdown]
# ### 1.2 Só-decodificador: o bloco do GPT
#
# Um bloco de decodificador sem atenção cruzada é exatamente um `EncoderLayer` do capítulo 4
# recebendo a máscara causal. O `TinyGPT` do pacote empilha alguns desses blocos entre um
# *embedding* (de tokens e de posições) e uma projeção para o vocabulário. Um teste de causalidade:
# mudar um token do futuro não pode mudar nenhum logit do passado.

# %%
gpt_teste = TinyGPT(GPTConfig(vocab_size=20, max_len=16, d_model=32, n_heads=4, n_layers=2, d_ff=64)).eval()
x = torch.randint(20, (1, 10), generator=seeded_generator(1))
x_mudado = x.clone()
x_mudado[0, 6] = (x[0, 6] + 1) % 20  # muda só a posição 6
with torch.no_grad():
    a, b = gpt_teste(x), gpt_teste(x_mudado)  # (1, T, V)
[br(d, ".3g") for d in (a - b).abs().amax(dim=-1)[0]]  # max |Δ| por posição: 0..5 iguais (0); de 6 em diante, diferentes

# %% [markdown]
# Uma perturbação só é um exemplo. O `assert_causal` do capítulo 5 testa mais: para **cada** corte
# $t$, sorteia um futuro novo (posições depois de $t$) e exige que as saídas até $t$ não mudem. Ele
# levanta `AssertionError` no primeiro corte que vaza. Passar nele ainda é evidência, não prova (o
# capítulo 5 diz o que uma prova exige); a estrutura do `TinyGPT` completa o argumento: a máscara
# causal em todo bloco, e o resto (*embeddings*, FFN, LayerNorm) age posição a posição.

# %%
assert_causal(gpt_teste, x, seeded_generator(2), vocab_size=20)
"assert_causal: nenhum corte vazou"

# %% [markdown]
# ### 1.3 Codificador-decodificador: datas por extenso
#
# Uma tarefa de sequência para sequência (*seq2seq*) que treina em segundos: escrever
# "30/11/2026" como "trinta de novembro de 2026". A entrada é curta e está toda disponível; a
# saída tem outro comprimento. O `DateSeq2Seq` do pacote usa o `TransformerEncoder` do capítulo 4
# e `DecoderLayer`s com atenção cruzada; treinamos com *teacher forcing* (o decodificador recebe o
# alvo verdadeiro deslocado e prevê o próximo caractere).

# %% tags=["nbval-ignore-output"]
vocab_datas = DateVocab()
torch.manual_seed(0)
tradutor = DateSeq2Seq(vocab_datas.size, d_model=48, n_heads=4, n_layers=1, d_ff=96).to(device)
# Na correção automática, sem treino (nada aqui é avaliado): 0 passos.
hist_datas = train_dates(tradutor, vocab_datas, steps=0 if RAPIDO else 150, batch_size=48, lr=1e-2,
                         max_seconds=20.0)
print(f"{len(hist_datas['loss'])} passos em {br(hist_datas['seconds'][0], '.1f')} s "
      f"({int(hist_datas['threads'][0])} thread(s)); "
      f"perda final {br(hist_datas['loss'][-1] if hist_datas['loss'] else float('nan'), '.3f')}")

# %% tags=["nbval-ignore-output"]
datas = ["30/11/2026", "01/05/1999", "17/08/2043", "22/02/1970"]
for data, escrita in zip(datas, translate_dates(tradutor, vocab_datas, datas)):
    print(f"{data} -> {escrita}")
acertos = sequence_accuracy(tradutor, vocab_datas, n=40 if RAPIDO else 200)
print(f"datas novas escritas sem nenhum erro: {br_percent(acertos, 0)}")

# %% [markdown]
# Onde o decodificador olha? A atenção cruzada (média das cabeças) mostra, para cada caractere
# gerado (colunas), quais caracteres da data de entrada (linhas) ele consultou.

# %%
fonte = "30/11/2026"
saida = translate_dates(tradutor, vocab_datas, [fonte])[0]
src = torch.tensor([vocab_datas.encode(fonte, len(fonte) + 1)], device=device)
tgt = torch.tensor([vocab_datas.encode(saida, len(saida) + 1, bos=True)[:-1]], device=device)
with torch.no_grad():
    _, cruzada = tradutor(src, tgt, return_cross=True)
mapa = cruzada[-1][0].mean(0)[:, : len(fonte)]  # (H, T, S) -> (T, S), sem o fim da fonte
titulo = f"Atenção cruzada ao escrever “{saida}”"
plots.cross_attention_figure(mapa, list(saida) + ["fim"], fonte, titulo)

# %% [markdown]
# Com pouco treino o mapa é ruidoso, mas costuma mostrar o essencial: os caracteres do ano
# consultam os dígitos do ano, o nome do mês consulta "11". Isso é o que a atenção cruzada faz.
#
# ### Exercício 1 — questionário: que família para qual tarefa? (3 pontos)
#
# Para cada tarefa, imagine um modelo **treinado do zero só para ela**, na **arquitetura clássica**
# de uma das três famílias, e escolha a mais natural: `"encoder"`, `"decoder"` ou `"encoder-decoder"`.
# (Um grande modelo só-decodificador, instruído pelo prompt, faz as tarefas de texto desta lista — é
# um dos motivos da pergunta aberta 1. A pergunta aqui é outra: que arquitetura a própria tarefa pede.)
#
# - **a)** classificar avaliações de produtos como positivas, neutras ou negativas;
# - **b)** traduzir manuais técnicos do português para o espanhol;
# - **c)** completar o código que um programador está digitando, continuando o arquivo;
# - **d)** marcar, em cada palavra de um contrato, se ela é nome de pessoa, de empresa ou de lugar;
# - **e)** ouvir a gravação de uma palestra em inglês (a entrada é o espectrograma inteiro) e escrever,
#   em português, o texto do que foi dito.
#
# Escreva a função `respostas_quiz()` que devolve o dicionário `{"a": ..., ..., "e": ...}`. O teste
# visível confere só o formato (meio ponto); a correção é oculta, meio ponto por item, cada item na
# sua célula.

# %% nbgrader={"grade": false, "grade_id": "quiz", "locked": false, "schema_version": 3, "solution": true, "task": false}
def respostas_quiz():
    """Família de cada tarefa: "encoder", "decoder" ou "encoder-decoder"."""
    ### BEGIN SOLUTION
    return {
        # a) classificar: a frase inteira está disponível e a saída é um rótulo; ver os dois lados
        #    ajuda e não há nada a gerar -> só-codificador (BERT e parentes).
        "a": "encoder",
        # b) traduzir: uma entrada completa vira outra sequência, de outro comprimento e outra
        #    língua -> codificador-decodificador (o caso para o qual o Transformer nasceu).
        "b": "encoder-decoder",
        # c) continuar um arquivo: prever o próximo token, da esquerda para a direita -> só-decodificador.
        "c": "decoder",
        # d) um rótulo por palavra (NER), com o contexto dos dois lados -> só-codificador.
        "d": "encoder",
        # e) fala em inglês -> texto em português: a entrada inteira (não textual) é lida de uma vez e
        #    a saída, noutra língua e noutra ordem, é gerada consultando-a pela atenção cruzada ->
        #    codificador-decodificador (o SeamlessM4T, por exemplo: um codificador de fala e um
        #    decodificador de texto, que traduz fala para dezenas de línguas, o português entre elas;
        #    o Whisper, da mesma família, só traduz fala PARA o inglês). Para transcrever na MESMA
        #    língua, um só-codificador com CTC (wav2vec 2.0) também serve: CTC emite um rótulo por
        #    quadro de áudio, na ordem do áudio; numa tradução as palavras mudam de ordem, e essa
        #    saída alinhada não basta.
        "e": "encoder-decoder",
    }
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_quiz", "locked": true, "points": 0.5, "schema_version": 3, "solution": false, "task": false}
check_family_quiz(respostas_quiz)

# %% nbgrader={"grade": true, "grade_id": "test_quiz_hidden_a", "locked": true, "points": 0.5, "schema_version": 3, "solution": false, "task": false}
# Teste oculto: o item a.
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("07_familias", "test_quiz_hidden_a", globals())(respostas_quiz, a="encoder")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_hidden_b", "locked": true, "points": 0.5, "schema_version": 3, "solution": false, "task": false}
# Teste oculto: o item b.
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("07_familias", "test_quiz_hidden_b", globals())(respostas_quiz, b="encoder-decoder")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_hidden_c", "locked": true, "points": 0.5, "schema_version": 3, "solution": false, "task": false}
# Teste oculto: o item c.
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("07_familias", "test_quiz_hidden_c", globals())(respostas_quiz, c="decoder")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_hidden_d", "locked": true, "points": 0.5, "schema_version": 3, "solution": false, "task": false}
# Teste oculto: o item d.
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("07_familias", "test_quiz_hidden_d", globals())(respostas_quiz, d="encoder")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_quiz_hidden_e", "locked": true, "points": 0.5, "schema_version": 3, "solution": false, "task": false}
# Teste oculto: o item e.
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("07_familias", "test_quiz_hidden_e", globals())(respostas_quiz, e="encoder-decoder")
### END HIDDEN TESTS

# %% [markdown]
# ## 2. Um GPT de caracteres treinado com este curso
#
# Para treinar um modelo de linguagem precisamos de texto. Em vez de baixar um corpus, usamos o
# que já está no computador: a prosa em português dos capítulos deste curso (as células de texto de
# `notebooks/*.py`, sem fórmulas nem código). Os *tokens* são caracteres, então o vocabulário é
# pequeno e não precisamos de nenhum tokenizador treinado.

# %%
texto = course_corpus()
tokenizador = CharTokenizer(texto)
dados = tokenizador.encode(texto)
treino, validacao = train_val_split(dados, val_fraction=0.1)
{"caracteres no corpus": br(len(texto), ",d"), "vocabulário": tokenizador.vocab_size,
 "treino": br(len(treino), ",d"), "validação": br(len(validacao), ",d")}

# %%
print(texto[:400])

# %% [markdown]
# **Duas linhas de base.** Um modelo que chuta todo caractere com a mesma probabilidade tem
# entropia cruzada $\ln V$. Um modelo de **unigramas** prevê cada caractere com a sua frequência no
# treino, ignorando o contexto; é o melhor que se faz sem olhar para trás. O GPT só aprendeu algo
# se ficar **bem abaixo** da linha dos unigramas, na validação.

# %%
linha_unigramas = unigram_baseline(treino, validacao, tokenizador.vocab_size)
{"chute uniforme, ln V": br(math.log(tokenizador.vocab_size), ".3f"), "unigramas": br(linha_unigramas, ".3f")}

# %% [markdown]
# O modelo: **1 bloco**, $D = 64$, 4 cabeças, contexto de 64 caracteres. O treino usa AdamW, um
# aquecimento curto (a rampa do capítulo 6) e depois decaimento cosseno (a taxa desce como meia onda
# de cosseno, em vez do $1/\sqrt{s}$ de Noam), e para em 700 passos ou 22 segundos, o que vier
# antes. Se o tempo acabar primeiro (máquina lenta ou ocupada), o cosseno anda pelo relógio em vez
# de pelos passos, para a taxa ainda chegar ao fim da meia onda, e a saída avisa que o treino foi
# cortado e quanto o orçamento inteiro alcança.
#
# **Threads.** Os primeiros passos se revezam entre 1 e 2 threads do PyTorch (e 4, se a máquina
# tiver núcleos para isso), e o resto do treino usa a mais rápida; a saída mostra o que foi medido.
# Numa CPU livre, duas threads dividem cada multiplicação de matrizes e o passo fica mais curto. Se
# outro programa ocupa um núcleo, duas threads ficam **mais lentas** que uma: a cada operação uma
# espera a outra, que está sem CPU. Medir na hora decide pelos dois casos.
#
# **Como chegamos a esta receita.** Ajustamos o que a receita de CPU do nanoGPT ajusta e medimos a
# perda em **todo** o texto de validação (`estimate_loss`: cada caractere previsto uma vez, sem
# sorteio). Cada linha da tabela abaixo treinou com semente 0 e uma thread, sem limite de tempo; o
# custo é o tempo de CPU por passo dividido pelo da receita escolhida. A tabela é a saída de
# `python scripts/bench_gpt.py --jobs 2`, gravada em 1/12/2026:
#
# | mudança | passos | custo por passo | validação |
# |---|---|---|---|
# | **a receita: 1 bloco, $D = 64$, $T = 64$, $B = 32$, taxa $10^{-2}$** | 700 | 1,00 | 1,593 |
# | a mesma, só 500 passos | 500 | 1,09 | 1,856 |
# | a mesma, 900 passos | 900 | 1,02 | 1,508 |
# | 2 blocos | 700 | 1,86 | 1,598 |
# | 2 blocos, 390 passos (o tempo de 700 com 1 bloco) | 390 | 1,85 | 2,395 |
# | $\beta_2 = 0{,}99$ (o do nanoGPT) | 700 | 0,97 | 1,587 |
# | taxa $1{,}3 \cdot 10^{-2}$ | 700 | 0,92 | 1,636 |
# | taxa $5 \cdot 10^{-3}$ | 700 | 1,03 | 1,635 |
# | $D = 48$, 900 passos | 900 | 0,84 | 1,597 |
# | FFN de $2D$ em vez de $4D$, 850 passos | 850 | 0,82 | 1,580 |
# | contexto $T = 32$, lote $B = 64$ (os mesmos caracteres por passo) | 700 | 1,02 | 1,569 |
# | lote $B = 24$, 950 passos | 950 | 0,83 | 1,556 |
# | 2 cabeças em vez de 4 | 700 | 0,86 | 1,617 |
# | *dropout* 0,1 | 700 | 1,56 | 1,727 |
# | pesos amarrados (a saída reusa o embedding) | 700 | 1,07 | 2,301 |
#
# O que importou: com tão pouco treino o modelo está longe de convergir (a curva ainda desce no
# fim), e a perda depende sobretudo do **número de passos**: 500 em vez de 700 custam 0,26 nat, e
# 900 ainda ganhariam 0,09. Um segundo bloco não baixa a perda no mesmo número de passos (1,598
# contra 1,593) e deixa cada passo 1,9× mais caro; no mesmo tempo, com 390 passos, fica muito pior
# (2,40). A taxa de $10^{-2}$ foi a melhor das três; $\beta_2$ não mudou nada. O *dropout* serve
# contra o sobreajuste, que não temos com tão pouco treino, e na CPU encarece o passo em mais da
# metade. Amarrar os pesos da entrada e da saída, que ajuda modelos maiores, aqui atrapalhou muito.
# As trocas que tornam o passo mais barato (largura $D = 48$, FFN de $2D$, lote de 24) e gastam a
# economia em mais passos ficam perto da receita: de 0,04 abaixo (o lote de 24, que no fim gasta
# uns 13% a mais de tempo, quando 200 passos a mais da própria receita dão 0,09) até praticamente
# empatar ($D = 48$). Duas rodadas da própria receita, uma com 1 e outra com 2 threads, já diferem
# em 0,01 (as somas em ponto flutuante mudam de ordem e o treino segue outro caminho): nada ali
# ganha com folga, e ficamos com a receita mais simples. O custo por passo também oscila
# uns 10% de uma rodada para outra (as duas primeiras linhas fazem o mesmo passo).
#
# Duas escolhas fora da tabela pesaram mais que quase todas as linhas dela. A perda é medida no
# texto de validação inteiro: numa versão anterior, estimada em 4 lotes sorteados, o mesmo modelo
# media de 1,62 a 1,74 conforme a semente do sorteio, mais que a distância entre a maioria das
# receitas. E as tabelas dos capítulos (como a de cima) saíram do corpus: números e barras não são
# prosa. Com elas no treino e na validação, a receita com 900 passos media 1,63; sem elas, 1,51.
#
# O corpus muda quando o texto do curso muda, e com ele a perda: os números acima valem para a prosa
# desta versão.

# %%
config = GPTConfig(vocab_size=tokenizador.vocab_size, max_len=64, d_model=64, n_heads=4, n_layers=1, d_ff=256)
torch.manual_seed(0)
gpt = TinyGPT(config).to(device)
n_total = count_parameters(gpt)
n_sem_embeddings = count_parameters(gpt, exclude_embeddings=True)
{"todos os parâmetros": br(n_total, ",d"), "sem os embeddings": br(n_sem_embeddings, ",d")}

# %% tags=["nbval-ignore-output"]
# A rodada de referência com o orçamento inteiro (gravada; o corpus muda quando o curso muda):
REFERENCIA = {"val_loss": 1.60, "seconds": 17,
              "where": "gravada em 1/12/2026; 2 núcleos livres, 2 threads"}
historico = train_gpt(gpt, treino, validacao, max_steps=0 if RAPIDO else 700, max_seconds=22.0,
                      batch_size=32, lr=1e-2, eval_every=100)  # na correção automática, sem treino
perda_val = historico["val_loss"][-1]
print(training_report(historico, REFERENCIA))
print(f"unigramas: {br(linha_unigramas, '.3f')} nats/caractere")

# %%
plots.training_curves_figure(historico, linha_unigramas, tokenizador.vocab_size)

# %% [markdown]
# **Leitura da figura.** No começo, a perda está perto de $\ln V$ (o modelo não sabe nada). Em
# poucas dezenas de passos ela cruza a linha dos unigramas: o modelo aprendeu quais letras são
# comuns. O que vem depois disso é contexto: depois de "qu" vem "e"; depois de "çã" vem "o". Se a
# validação descolasse da curva de treino e subisse, seria sobreajuste (*overfitting*): o corpus
# é pequeno, e um treino muito mais longo acabaria decorando-o.

# %% [markdown]
# ## 3. Geração autorregressiva
#
# Um modelo de linguagem devolve, para cada posição, logits $z \in \mathbb{R}^V$ sobre o próximo
# token. Para gerar, repetimos: passar o contexto, pegar os logits da **última** posição, escolher um
# token, acrescentá-lo ao contexto.
#
# **Temperatura.** Dividimos os logits por uma temperatura $\tau > 0$ antes do softmax (usamos
# $\tau$, e não $T$, porque $T$ já é o comprimento da sequência na legenda de formas):
#
# $$p_i(\tau) = \frac{e^{z_i / \tau}}{\sum_j e^{z_j / \tau}} .$$
#
# $\tau = 1$ é a distribuição do modelo; $\tau < 1$ a afia (os prováveis ficam mais prováveis);
# $\tau > 1$ a achata. Quando $\tau \to 0^+$, a razão entre o maior termo e qualquer outro,
# $e^{(z_{\max} - z_i)/\tau}$, vai ao infinito: $p(\tau)$ tende ao *one-hot* do argmax. Por isso
# **temperatura 0 significa busca gulosa** (*greedy decoding*): `argmax`, sem sorteio — e sem
# dividir por zero.
#
# Dividir as **probabilidades** por $\tau$ depois do softmax não faz nada: o sorteio renormaliza e a
# distribuição é a mesma. A temperatura age nos logits.
#
# **Top-k** (Fan et al., 2018). Antes do softmax, mantemos só os $k$ maiores logits e pomos
# $-\infty$ nos outros: tokens muito improváveis, que somados ainda pesam, deixam de ser sorteados.

# %%
prompt = tokenizador.encode("A atenção ")[None].to(device)  # (1, T0)
with torch.no_grad():
    ultimos = gpt(prompt)[0, -1].float().cpu()  # (V,)
distribuicoes = {f"τ = {br(t)}": next_token_distribution(ultimos, t) for t in (0.5, 1, 2)}
plots.next_char_figure(tokenizador.chars, distribuicoes, "Próximo caractere depois de “A atenção ”")

# %% [markdown]
# ### Exercício 2 — `generate` (6 pontos)
#
# Escreva `generate(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, generator=None)`:
#
# - `model(ids)` devolve logits $(B, T, V)$; use só os da última posição;
# - `prompt_ids` $(B, T_0)$ inteiros; a saída é um `LongTensor` $(B, T_0 + \text{max\_new\_tokens})$
#   que começa pelo prompt;
# - `temperature == 0`: busca gulosa (argmax); senão divida os logits por `temperature`;
# - `top_k` (ou `None`): mantenha só os `top_k` maiores logits (se `top_k` passar do vocabulário,
#   mantenha todos);
# - sorteie com `torch.multinomial(..., generator=generator)`: quando `generator` for dado, o sorteio
#   usa só ele (nenhum número do gerador global), e a mesma semente dá o mesmo texto; com
#   `generator=None`, o padrão, o `torch.multinomial` usa o gerador global do PyTorch;
# - passe ao modelo a sequência inteira até aqui; se ele tiver o atributo `max_len`, só os últimos
#   `max_len` tokens (`getattr(model, "max_len", None)`);
# - `max_new_tokens < 0` ou `temperature < 0`: `ValueError` com mensagem; não modifique `prompt_ids`.
#
# Os testes usam um modelo de brinquedo cujos logits são conhecidos (uma tabela de bigramas) e
# sorteiam milhares de vezes para comparar as frequências com $\mathrm{softmax}(z/\tau)$.

# %% nbgrader={"grade": false, "grade_id": "generate", "locked": false, "schema_version": 3, "solution": true, "task": false}
def generate(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    """Acrescenta max_new_tokens tokens ao prompt, um por vez."""
    ### BEGIN SOLUTION
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens deve ser >= 0; recebido {max_new_tokens}.")
    if temperature < 0:
        raise ValueError(f"temperature deve ser >= 0; recebida {temperature}.")
    max_len = getattr(model, "max_len", None)
    ids = prompt_ids
    for _ in range(max_new_tokens):
        context = ids if max_len is None else ids[:, -max_len:]
        with torch.no_grad():
            logits = model(context)[:, -1, :]  # (B, T, V) -> (B, V)
        if temperature == 0:
            nxt = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        else:
            logits = logits / temperature
            if top_k is not None:
                kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]  # (B, 1)
                logits = logits.masked_fill(logits < kth, float("-inf"))
            nxt = torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)  # (B, 1)
        ids = torch.cat([ids, nxt], dim=1)  # (B, T) -> (B, T + 1)
    return ids
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_generate", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_generate(generate)

# %% nbgrader={"grade": true, "grade_id": "test_generate_hidden", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: float64, prompt maior que max_len, top-k = 1, top-k maior que o vocabulário,
# temperatura e top-k juntos, max_new_tokens = 0, ValueError.
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("07_familias", "test_generate_hidden", globals())(generate)
### END HIDDEN TESTS

# %% [markdown]
# Daqui em diante usamos `generate_ref`, a versão do pacote, para que o notebook rode mesmo antes
# de você terminar o exercício. Três amostras do nosso GPT, com o mesmo prompt:

# %% tags=["nbval-ignore-output"]
for titulo, t, k in (("gulosa (τ = 0)", 0.0, None), ("τ = 0,8, top-k = 10", 0.8, 10), ("τ = 1,5", 1.5, None)):
    gerador = seeded_generator(0, device)
    saida = generate_ref(gpt, prompt, 40 if RAPIDO else 160, temperature=t, top_k=k, generator=gerador)
    print(f"--- {titulo}\n{tokenizador.decode(saida[0])}\n")

# %% [markdown]
# A gulosa costuma entrar em laço, repetindo as mesmas sílabas e palavras curtas: escolher sempre o
# caractere mais provável não produz o texto mais provável, e cada repetição torna a próxima mais
# provável. Com $\tau$ alto aparecem maiúsculas, dígitos e pontuação fora de lugar: a cauda da
# distribuição ganha peso. No meio, com top-k, saem palavras curtas reais ("de", "da", "que"),
# terminações do português ("-ção", "-mente") e espaços nos lugares certos — de um modelo minúsculo
# (a contagem está impressa na seção 2) que treinou menos de meio minuto. Quanto mais passos o
# treino conseguir dar na sua máquina, mais legível fica.
#
# ### 3.1 Explore: temperatura, top-k e prompt
#
# Mova os controles: temperatura 0 (gulosa) até 2, top-k de 0 (sem corte) até o vocabulário inteiro,
# a semente do sorteio e o prompt. Em cima, o texto gerado; embaixo, a distribuição do próximo
# caractere logo depois do prompt, com a temperatura e o top-k aplicados.

# %% tags=["nbval-ignore-output"]
from transformer_course.widgets import generation_widget

generation_widget(gpt, tokenizador)

# %% [markdown]
# ## 4. Quanto custa a atenção
#
# A autoatenção compara cada posição com todas as outras: com $n$ posições, a matriz de scores
# $QK^\top$ de cada cabeça é $n \times n$. Numa camada com $H$ cabeças de largura $D_k = D/H$ (lote 1),
# contando cada multiplicação-soma como 2 operações de ponto flutuante (FLOPs):
#
# - $QK^\top$: em cada cabeça, $(n \times D_k)\cdot(D_k \times n)$, $n^2$ produtos escalares de $D_k$
#   termos, $2n^2D_k$ FLOPs; somando as $H$ cabeças, $2n^2D$ — o número de cabeças não muda a conta;
# - pesos$\cdot V$: $(n \times n)\cdot(n \times D_k)$ por cabeça: outros $2n^2D$ FLOPs no total;
# - a matriz de scores de **uma** cabeça, em float32, ocupa $4n^2$ bytes (a camada tem $H$ delas).
#
# Dobrar $n$ quadruplica as duas coisas. As projeções $W_Q, W_K, W_V, W_O$ custam mais $8nD^2$ FLOPs
# (quatro produtos $(n \times D)\cdot(D \times D)$), lineares em $n$: a camada de atenção inteira custa
# $4n^2D + 8nD^2$, e os termos em $n^2$ passam os das projeções quando $n > 2D$.
#
# ### Exercício 3 — `attention_cost` (3 pontos)
#
# Escreva `attention_cost(seq_len, d_model)` que devolve `{"flops": ..., "score_bytes": ...}` com os
# FLOPs dos dois produtos acima, somados sobre as cabeças ($n$ = `seq_len`, $D$ = `d_model`; as
# cabeças não entram na conta), e os bytes da matriz de scores de **uma** cabeça em float32.
# Tamanhos não positivos: `ValueError` com mensagem.

# %% nbgrader={"grade": false, "grade_id": "attention_cost", "locked": false, "schema_version": 3, "solution": true, "task": false}
def attention_cost(seq_len, d_model):
    """FLOPs de QKᵀ e pesos·V (todas as cabeças) e bytes da matriz de scores n×n de uma cabeça."""
    ### BEGIN SOLUTION
    if seq_len <= 0 or d_model <= 0:
        raise ValueError(f"seq_len e d_model devem ser positivos; recebidos {seq_len} e {d_model}.")
    scores = 2 * seq_len * seq_len * d_model  # QKᵀ: n² produtos escalares de d termos
    mix = 2 * seq_len * seq_len * d_model  # pesos·V
    return {"flops": scores + mix, "score_bytes": 4 * seq_len * seq_len}
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_attention_cost", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_attention_cost(attention_cost)

# %% nbgrader={"grade": true, "grade_id": "test_attention_cost_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: outros tamanhos, crescimento quadrático, ValueError.
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("07_familias", "test_attention_cost_hidden", globals())(attention_cost)
### END HIDDEN TESTS

# %% [markdown]
# ### 4.1 Medindo
#
# Agora cronometramos duas implementações da mesma conta, para $n$ crescente ($D = D_k = 64$, uma cabeça):
# a ingênua, que materializa a matriz $n \times n$ (a do capítulo 2), e `F.scaled_dot_product_attention`
# do PyTorch. Em escala log-log, $t \propto n^p$ vira uma reta de inclinação $p$.

# %% tags=["nbval-ignore-output"]
comprimentos = [64, 128, 256] if RAPIDO else [256, 512, 1024, 2048, 4096]
custo = time_attention(comprimentos, d_k=64, repeats=3, device=device)
inclinacoes = {k: loglog_slope(custo["seq_len"][-3:], custo[k][-3:]) for k in ("naive_s", "sdpa_s")}
{k: br(v, ".2f") for k, v in inclinacoes.items()}

# %% [markdown]
# E a memória: quanto cada versão aloca durante a chamada (na CPU, a soma das alocações que o
# `torch.profiler` registra; numa GPU, o pico do alocador).

# %% tags=["nbval-ignore-output"]
# Na correção automática, sem esta medida (nada aqui é avaliado; só abrir o profiler custa ~2 s).
memoria = (
    {"seq_len": [], "naive_bytes": [], "sdpa_bytes": []}
    if RAPIDO
    else measure_attention_memory(comprimentos[:-1], d_k=64, device=device)
)
{f"n = {n}": f"ingênua {br(a / 2**20, '.2f')} MiB; F.scaled_dot_product_attention {br(b / 2**20, '.2f')} MiB"
 for n, a, b in zip(*memoria.values())}

# %%
plots.attention_cost_figure(custo, inclinacoes, memoria)

# %% [markdown]
# **Leitura da figura.** As inclinações são ajustadas nos três maiores comprimentos (nos pequenos,
# o tempo fixo de chamar as funções pesa mais que a conta). Elas ficam perto de 2, como os FLOPs
# contados (tracejado, eixo direito): o tempo cresce com o quadrado do comprimento. O valor exato
# varia com a máquina: a ingênua costuma passar de 2 quando a matriz $n \times n$ deixa de caber no
# *cache* do processador (cada dobra de $n$ então custa mais que 4×), e numa CPU ocupada por outros
# programas as medidas oscilam — rode a célula de novo e compare.
#
# À direita, a memória. A versão ingênua aloca algumas matrizes $n \times n$ inteiras (os scores, os
# scores divididos por $\sqrt{D_k}$, os pesos do softmax): a curva medida corre paralela à conta
# $4n^2$ bytes, inclinação 2. A `F.scaled_dot_product_attention` da CPU percorre as chaves em blocos
# e aloca muito menos, quase sem crescer com $n^2$ — a mesma ideia da FlashAttention, abaixo. Para
# $n = 4096$, a matriz de scores de **uma** cabeça já ocupa 64 MiB; um modelo com 32 cabeças e 32
# camadas multiplica isso.
#
# **FlashAttention** (Dao et al., 2022) calcula **exatamente** o mesmo resultado sem nunca guardar a
# matriz $n \times n$ na memória principal da GPU. A ideia é ser consciente da entrada e saída de
# memória (*IO-aware*): em GPUs, mover dados entre a memória grande e lenta (HBM) e a memória
# pequena e rápida do chip (SRAM) custa mais que as contas. O algoritmo percorre $K$ e $V$ em blocos
# que cabem na SRAM e mantém, para cada linha, o máximo e a soma parciais do softmax (o softmax
# "online"), corrigindo o acumulado a cada bloco. Os FLOPs continuam $O(n^2 D)$ — a inclinação 2 não
# muda —, mas a memória extra cai de $O(n^2)$ para $O(n)$ e o tempo cai. No artigo (seção 4.1,
# tabela 2: GPT-2 *small* e *medium*, contexto de 1024 *tokens*, 8 GPUs A100), o treino inteiro ficou
# até 3× mais rápido que com a implementação do Hugging Face e até 1,7× mais rápido que com a do
# Megatron-LM, já otimizada: o ganho depende da implementação com que se compara. Na GPU,
# `F.scaled_dot_product_attention` escolhe um núcleo desse tipo sozinho; na CPU, o ganho é menor.
# Métodos "lineares" (Longformer, Performer) mudam a conta em si e dão resultados diferentes.

# %% [markdown]
# ## 5. Leis de escala
#
# Kaplan et al. (2020) treinaram modelos de linguagem de 768 a 1,5 bilhão de parâmetros e acharam que,
# com dados suficientes e treino até perto da convergência, a perda de teste segue uma lei de
# potência no número $N$ de parâmetros (sem contar os *embeddings*):
#
# $$L(N) = \left(\frac{N_c}{N}\right)^{\alpha_N}, \qquad N_c \approx 8{,}8 \cdot 10^{13},
# \qquad \alpha_N \approx 0{,}076,$$
#
# com $L$ em nats por token (tokens BPE do WebText2). Em escala log-log é uma reta: $\log L =
# \alpha_N(\log N_c - \log N)$. Multiplicar $N$ por 10 multiplica a perda por $10^{-0{,}076} \approx 0{,}84$.
#
# ### Exercício 4 — `kaplan_loss` (2 pontos)
#
# Escreva `kaplan_loss(n_params)` que devolve $L(N)$ como `float`; `n_params <= 0` levanta `ValueError`
# com mensagem.

# %% nbgrader={"grade": false, "grade_id": "kaplan_loss", "locked": false, "schema_version": 3, "solution": true, "task": false}
def kaplan_loss(n_params):
    """Perda prevista pela lei L(N) = (N_c / N)^α_N de Kaplan et al. (2020)."""
    ### BEGIN SOLUTION
    if n_params <= 0:
        raise ValueError(f"n_params deve ser positivo; recebido {n_params}.")
    N_c, alpha_N = 8.8e13, 0.076  # Kaplan et al. (2020), tabela 5: parâmetros sem embeddings
    return float((N_c / n_params) ** alpha_N)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_kaplan_loss", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_kaplan_loss(kaplan_loss)

# %% nbgrader={"grade": true, "grade_id": "test_kaplan_loss_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: outros tamanhos, monotonia, ValueError.
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("07_familias", "test_kaplan_loss_hidden", globals())(kaplan_loss)
### END HIDDEN TESTS

# %% [markdown]
# Onde fica o nosso GPT na curva? Primeiro, o $N$ dele contado como Kaplan et al. contam: sem os
# *embeddings* de vocabulário e de posição. Na contagem deles (tabela 1 do artigo), a projeção de
# saída para o vocabulário não tem parâmetros próprios: é a mesma matriz do *embedding* de tokens
# (pesos amarrados). No `TinyGPT` ela é uma camada separada (`gpt.head`), então também sai da conta
# (`count_parameters(..., exclude_embeddings=True)` sozinho tira só as tabelas `nn.Embedding`):

# %%
n_kaplan = count_parameters(gpt, exclude_embeddings=True, exclude=[gpt.head])
{"todos os parâmetros": br(n_total, ",d"), "sem os embeddings": br(n_sem_embeddings, ",d"),
 "sem os embeddings nem a projeção de saída (o N de Kaplan)": br(n_kaplan, ",d")}

# %% [markdown]
# Marcamos também dois modelos conhecidos (tamanhos aproximados, sem *embeddings*): o GPT-2 de 1,5
# bilhão de parâmetros e o GPT-3 de 175 bilhões.

# %%
modelos = {"nosso TinyGPT": n_kaplan, "GPT-2 (1,5 B)": 1.5e9, "GPT-3 (175 B)": 1.75e11}
plots.kaplan_figure(kaplan_loss_ref, modelos)

# %%
{"nosso GPT, previsto (nats/token BPE)": br(kaplan_loss_ref(n_kaplan), ".2f"),
 "nosso GPT, medido (nats/caractere)": br(perda_val, ".2f"),
 "10× mais parâmetros multiplica a perda por": br(10**-0.076, ".3f")}

# %% [markdown]
# **O que a lei promete e o que não promete.** Ela descreve uma tendência medida em uma família de
# modelos, um conjunto de dados (WebText2) e um tokenizador (BPE), com dados e treino suficientes.
# Nosso ponto está na curva só como ilustração: medimos nats por **caractere**, num corpus minúsculo,
# com um treino de meio minuto longe da convergência — os dois números não são comparáveis. A lei não
# diz nada sobre capacidades específicas (raciocinar, seguir instruções), nem sobre o que acontece
# fora da faixa medida; ela vale quando o gargalo é só $N$ (com poucos dados, a perda para de cair:
# Kaplan et al. dão também $L(N, D)$); e a divisão ótima do orçamento entre parâmetros e dados foi
# revista por Hoffmann et al. (2022, "Chinchilla"), que acharam que os modelos da época eram grandes
# demais para os dados que viam. E a perda de teste não é a utilidade do modelo.
#
# **A conta do texto-semente.** Versões que circulam escrevem "perda ≈ 10 × N^(−0,076)". Isso não é a
# lei de Kaplan: com $N_c$ o fator vale $N_c^{\alpha_N} \approx 11{,}5$, e não 10, e a forma
# $(N_c/N)^{\alpha_N}$ deixa claro o que $N_c$ significa — a escala em que a perda prevista chegaria
# a 1 nat.

# %% [markdown]
# ## 6. Perguntas abertas (corrigidas à mão)
#
# **Pergunta 1 (2 pontos).** Por que os modelos só-decodificador passaram a dominar os grandes
# modelos de linguagem, se o *Transformer* original era codificador-decodificador? Dê pelo menos dois
# motivos e relacione um deles com algo que você viu neste capítulo.

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_decoder_dominance", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** (1) O objetivo de prever o próximo token usa qualquer texto sem rótulos e
# cada posição de cada sequência dá um exemplo de treino (a máscara causal permite treinar todas as
# posições em paralelo) — como o nosso GPT, treinado só com a prosa do curso, sem anotação nenhuma.
# (2) Uma só pilha, uma só interface: toda tarefa vira "continuar um texto" (instrução + entrada no
# prompt), e o mesmo modelo gera, classifica e traduz; com escala, surge o aprendizado em contexto
# (*in-context learning*, GPT-3) sem ajuste fino. (3) A geração é natural (um token por vez, com o
# que vimos de temperatura e top-k) e há uma só pilha de pesos para escalar, com leis de escala
# previsíveis (as de Kaplan et al. foram medidas em modelos só-decodificador). Um motivo que **não**
# distingue as famílias: o cache de chaves e valores (*KV cache*), que barateia cada novo token na
# geração, vale igualmente para o decodificador de um codificador-decodificador.
#
# **Rubrica (2 pontos).**
# - 1 ponto: dois motivos corretos entre dados sem rótulo / objetivo simples, interface única de texto
#   e aprendizado em contexto, simplicidade para escalar. Meio ponto para um só motivo. O cache de
#   chaves e valores não conta como motivo: os decodificadores das duas famílias o usam.
# - 1 ponto: liga um motivo a algo do capítulo (o GPT treinado sem rótulos, a máscara causal que treina
#   todas as posições de uma vez, a geração autorregressiva, a lei de escala). "Porque é melhor" sem
#   razão não pontua.
# ### END SOLUTION

# %% [markdown]
# **Pergunta 2 (2 pontos).** Descreva uma situação em que um codificador-decodificador ainda é a
# melhor escolha, e explique o que a atenção cruzada e o codificador bidirecional oferecem ali que um
# modelo só-decodificador do mesmo tamanho não oferece tão bem.

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_encoder_decoder", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** Quando a entrada é completa, longa ou de outra natureza e a saída é uma
# sequência diferente, condicionada a ela: tradução, resumo, transcrição de fala (Whisper), datas por
# extenso como na seção 1.3, em especial com modelos pequenos ou orçamento de inferência apertado.
# O codificador lê a entrada **uma vez**, nos dois sentidos (cada token da entrada vê os seguintes,
# o que um decodificador causal não faz), e pode até receber algo que não é texto (espectrograma).
# A atenção cruzada deixa cada passo da saída consultar diretamente qualquer posição da entrada (o
# mapa da seção 1.3), com pesos próprios para ler a entrada e outros para escrever a saída. E, com o
# mesmo número de parâmetros, custa cerca de metade por token: num modelo com $L$ camadas no
# codificador e $L$ no decodificador, cada token da entrada passa só pelas $L$ do codificador e cada
# token da saída só pelas $L$ do decodificador, enquanto um só-decodificador de $2L$ camadas passa
# todos os tokens pelas $2L$ (Raffel et al., 2020, seção 3.2, o T5).
#
# O que **não** é vantagem: a ordem do custo da atenção. Um par de camadas (uma do codificador, uma
# do decodificador) compara $S^2$ pares (autoatenção da entrada, sem máscara) $+\ T^2/2$
# (autoatenção causal da saída) $+\ TS$ (cruzada); uma camada do só-decodificador, lendo entrada e
# saída juntas, $\approx (S+T)^2/2 = S^2/2 + ST + T^2/2$ — a mesma ordem. E "não reprocessar a
# entrada a cada token" também vale para o só-decodificador com cache de chaves e valores.
#
# **Rubrica (2 pontos).**
# - 1 ponto: uma situação adequada (entrada completa → saída de outro comprimento/modalidade), com
#   exemplo concreto.
# - 1 ponto: explica pelo menos uma vantagem mecânica: codificação bidirecional da entrada, atenção
#   cruzada para consultar a entrada, entrada de outra modalidade, mais parâmetros pelo mesmo custo
#   por token. Citar só "T5 é bom em tradução" sem o porquê vale meio ponto. Um custo de atenção
#   "$O(TS)$ em vez de $O((S+T)^2)$" ou "não reprocessa a entrada" não pontua sozinho: compara uma
#   subcamada com o modelo inteiro, e o cache de chaves e valores dá o mesmo ao só-decodificador.
# ### END SOLUTION

# %% [markdown]
# ## Resumo
#
# - As três famílias usam os mesmos blocos e diferem em quem pode atender a quem: codificador
#   bidirecional (entender), decodificador causal (gerar), codificador-decodificador com atenção
#   cruzada (transformar uma sequência em outra).
# - Um GPT de caracteres pequeno (a contagem de parâmetros está impressa nas seções 2 e 5), treinado
#   em menos de meio minuto com a prosa deste curso, fica bem abaixo da linha de base dos unigramas e
#   escreve algo que lembra português.
# - Gerar é repetir: logits da última posição, dividir pela temperatura $\tau$, cortar no top-k,
#   sortear com um gerador próprio, acrescentar. $\tau = 0$ é o argmax.
# - Os dois produtos da atenção ($QK^\top$ e pesos$\cdot V$) custam $4n^2D$ FLOPs por camada (somadas as
#   cabeças) e $4n^2$ bytes de scores por cabeça; com as projeções $W_Q, W_K, W_V, W_O$, a camada de
#   atenção custa $4n^2D + 8nD^2$.
#   O tempo medido cresce com inclinação perto de 2 em log-log; o valor exato, impresso na seção 4.1,
#   varia com a máquina e a carga dela (a ingênua costuma passar de 2 quando a matriz sai do *cache*).
#   FlashAttention dá o mesmo resultado sem guardar a matriz $n \times n$.
# - Kaplan et al.: $L(N) = (N_c/N)^{\alpha_N}$, $N_c \approx 8{,}8\cdot10^{13}$,
#   $\alpha_N \approx 0{,}076$ — uma tendência empírica, com condições, não uma promessa de
#   capacidades.
#
# ## Para ir além
#
# - A. Vaswani et al. (2017), *Attention Is All You Need*, NeurIPS — o codificador-decodificador original.
# - J. Devlin et al. (2019), *BERT: Pre-training of Deep Bidirectional Transformers for Language
#   Understanding*, NAACL — só-codificador, modelo de linguagem mascarado.
# - A. Radford et al. (2018, 2019), *Improving Language Understanding by Generative Pre-Training* e
#   *Language Models are Unsupervised Multitask Learners* — GPT e GPT-2.
# - T. Brown et al. (2020), *Language Models are Few-Shot Learners*, NeurIPS — GPT-3 e o aprendizado
#   em contexto.
# - C. Raffel et al. (2020), *Exploring the Limits of Transfer Learning with a Unified Text-to-Text
#   Transformer*, JMLR — T5; a seção 3.2 compara codificador-decodificador e só-decodificador (com e
#   sem prefixo) com o mesmo número de parâmetros ou o mesmo custo.
# - A. Radford et al. (2023), *Robust Speech Recognition via Large-Scale Weak Supervision*, ICML —
#   Whisper, um codificador-decodificador que transcreve fala em dezenas de línguas e a traduz para
#   o inglês (só para o inglês).
# - Seamless Communication et al. (2023), *SeamlessM4T: Massively Multilingual & Multimodal Machine
#   Translation*, arXiv:2308.11596 — um codificador de fala e um decodificador de texto que traduzem
#   fala de 101 línguas para texto em 96, o português entre elas.
# - A. Baevski et al. (2020), *wav2vec 2.0: A Framework for Self-Supervised Learning of Speech
#   Representations*, NeurIPS — só-codificador ajustado com CTC para transcrever fala.
# - A. Graves et al. (2006), *Connectionist Temporal Classification: Labelling Unsegmented Sequence
#   Data with Recurrent Neural Networks*, ICML — a perda CTC.
# - A. Fan, M. Lewis e Y. Dauphin (2018), *Hierarchical Neural Story Generation*, ACL — a amostragem
#   top-k.
# - A. Holtzman et al. (2020), *The Curious Case of Neural Text Degeneration*, ICLR — por que a gulosa
#   repete, os limites do top-k e a amostragem de núcleo (*nucleus sampling*).
# - J. Kaplan et al. (2020), *Scaling Laws for Neural Language Models*, arXiv:2001.08361 — equação (1.1).
# - J. Hoffmann et al. (2022), *Training Compute-Optimal Large Language Models*, NeurIPS — "Chinchilla".
# - T. Dao et al. (2022), *FlashAttention: Fast and Memory-Efficient Exact Attention with
#   IO-Awareness*, NeurIPS — seção 4.1 e tabela 2 para os tempos de treino do GPT-2.
# - A. Karpathy, nanoGPT (GitHub) — um GPT de caracteres legível, que inspirou o nosso.
