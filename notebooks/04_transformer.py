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
# # Capítulo 4 — O bloco do *Transformer*: FFN, conexões residuais, LayerNorm, codificador e decodificador
#
# **Objetivos.** Ao fim deste capítulo você vai saber:
#
# 1. escrever a rede *feed-forward* aplicada posição a posição (*position-wise feed-forward network*, FFN)
#    e explicar por que $d_{ff} > d_{model}$ (tipicamente $4\times$), por que GELU e o que os modelos
#    recentes usam no lugar;
# 2. explicar o papel das conexões residuais (*residual connections*) e da normalização de camada
#    (*layer normalization*, LayerNorm);
# 3. montar a camada do codificador (*encoder layer*) nos dois arranjos, Post-LN (o artigo de 2017) e
#    Pre-LN, com o mesmo resultado que `nn.TransformerEncoderLayer` do PyTorch;
# 4. medir, na inicialização, o gradiente de cada camada nos dois arranjos e ligar a medida ao
#    aquecimento da taxa de aprendizado (*warm-up*, capítulo 6);
# 5. montar a camada do decodificador (*decoder layer*) com autoatenção mascarada e atenção cruzada
#    (*cross-attention*), e dizer de onde vêm Q, K e V em cada uma;
# 6. empilhar camadas num codificador completo e num classificador de sequências.
#
# **Pré-requisitos.** Capítulos 2 (atenção) e 3 (atenção com múltiplas cabeças); o capítulo 5
# (máscaras) ajuda na seção 6, mas usamos só as máscaras prontas do pacote.
#
# **Tempo estimado.** 90 a 120 minutos.
#
# **Legenda de formas** (a mesma em todo o curso): B lote (*batch*), T comprimento da sequência,
# D `d_model`, H cabeças, Dk = D/H, F `d_ff`, V vocabulário, S comprimento da fonte (atenção cruzada).
# Neste capítulo, $V$ (como em "Q, K e V") é a matriz dos valores, não o vocabulário.

# %% tags=["nbval-ignore-output"]
# %matplotlib inline
import os

import torch
from torch import nn
from torch.nn import functional as F

from transformer_course import plots
from transformer_course.checks import check_decoder_layer, check_encoder_layer, check_feed_forward
from transformer_course.experiments.ch04 import ln_gradient_experiment, residual_norms_at_init
from transformer_course.interop import load_encoder_layer_from_torch
from transformer_course.layers import DecoderLayer as DecoderLayerRef
from transformer_course.layers import EncoderLayer as EncoderLayerRef
from transformer_course.layers import FeedForward as FeedForwardRef
from transformer_course.layers import TransformerClassifier
from transformer_course.masks import causal_mask, padding_mask
from transformer_course.multihead import MultiHeadAttention
from transformer_course.numbers import br
from transformer_course.runtime import get_device, seeded_generator

torch.manual_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__} | dispositivo: {device}")

# %% [markdown]
# ## 1. A camada inteira, de longe
#
# Nos capítulos 2 e 3, a atenção deixou cada posição **buscar informação nas outras**. Isso é
# comunicação: a saída de uma posição é uma média ponderada dos valores de todas. Falta o passo
# em que cada posição **processa** o que recebeu, sozinha. Uma camada do *Transformer* alterna
# as duas coisas:
#
# ```
#            ┌───────── conexão residual ────────┐      ┌──── conexão residual ───┐
#  x ──► LayerNorm ──► atenção (as posições   ──►(+)──► LayerNorm ──► FFN (cada ──►(+)──► saída
#                      conversam entre si)                            posição sozinha)
# ```
#
# (Esse é o arranjo Pre-LN; o de 2017 põe a LayerNorm depois do $+$ — seção 4.) Cada subcamada
# (*sub-layer*) é envolvida pelo mesmo par: uma **conexão residual** e uma **LayerNorm**. Vamos
# construir as peças uma a uma: a FFN, a conexão residual com a LayerNorm, a camada do codificador, a do
# decodificador e, no fim, a pilha inteira.

# %% [markdown]
# ## 2. A rede *feed-forward* posição a posição
#
# A FFN é um perceptron de duas camadas aplicado **a cada posição separadamente, com os mesmos
# pesos** em todas as posições:
#
# $$\mathrm{FFN}(x) = \mathrm{GELU}(x W_1 + b_1)\, W_2 + b_2,
# \qquad W_1 \in \mathbb{R}^{d_{model} \times d_{ff}},\; W_2 \in \mathbb{R}^{d_{ff} \times d_{model}} .$$
#
# Como no capítulo 3, $x$ é um vetor-**linha** (um *token*) e as matrizes multiplicam pela direita,
# como no código (`x @ W`). O `nn.Linear` guarda a transposta: `linear1.weight` tem forma
# $(d_{ff}, d_{model})$ e calcula `x @ weight.T + bias`.
#
# - **Por que $d_{ff} > d_{model}$ (tipicamente $4\times$)?** O artigo original usa $d_{model} = 512$ e
#   $d_{ff} = 2048$ ($4\times$). A camada do meio, larga, é onde a rede tem espaço para combinações não lineares
#   das características de cada *token*; e é ali que fica a maior parte dos parâmetros de uma
#   camada do codificador (a conta abaixo; no modelo inteiro, as *embeddings* e, no decodificador,
#   a atenção cruzada também pesam). Uma leitura útil (Geva et al., 2021): cada coluna de $W_1$ funciona como uma
#   "chave" que reconhece um padrão em $x$, e a linha correspondente de $W_2$ como o "valor" somado à
#   saída quando o padrão aparece.
# - **Por que uma ativação?** Sem ela, $(xW_1 + b_1)W_2 + b_2$ é uma única transformação linear:
#   as duas camadas não acrescentariam nada a uma.
# - **Por que GELU?** O artigo de 2017 usa ReLU, $\max(0, x)$. O GPT (2018), o BERT e o GPT-2 usam a
#   GELU (*Gaussian Error Linear Unit*, Hendrycks e Gimpel, 2016), $\mathrm{GELU}(x) = x\,\Phi(x)$, com
#   $\Phi$ a função de distribuição da normal padrão: uma versão suave da ReLU, com derivada contínua
#   e um pequeno vale negativo. Os três não calculam $\Phi$ do mesmo jeito. O GPT e o GPT-2 usam a
#   **aproximação por tanh**, $0{,}5\,x\,(1 + \tanh[\sqrt{2/\pi}\,(x + 0{,}044715\,x^3)])$, do próprio
#   artigo da GELU. O código do BERT foi publicado, em 2018, com a GELU **exata**, pela função erro; o repositório
#   do Google só trocou para a tanh em fevereiro de 2019 (no *commit* "Adding TF Hub support"), e a
#   versão do BERT na biblioteca `transformers` do Hugging Face (`hidden_act="gelu"`) continua exata.
#   Neste curso pedimos a GELU exata (`F.gelu`), a do `activation="gelu"` do PyTorch, que é o gabarito
#   da correção; por isso a verificação acusa a versão tanh — não porque ela seja errada (é a do
#   GPT-2), mas porque difere do gabarito (a diferença máxima está na célula abaixo da figura). O
#   padrão do `nn.TransformerEncoderLayer`, aliás, é `activation="relu"`.
# - **E depois da GELU?** Muitos modelos recentes trocaram a FFN por uma variante com "porta"
#   (*gated linear unit*, GLU; Shazeer, 2020): a SwiGLU,
#   $\big(\mathrm{Swish}(xW_1) \odot xV\big)W_2$, com três matrizes em vez de duas, é a FFN do PaLM,
#   do LLaMA e do Mistral. A GELU continua comum, mas não é mais "a" escolha dos modelos grandes.

# %%
plots.activation_figure()

# %%
z = torch.linspace(-6, 6, 2001)
{"max |GELU exata - GELU tanh| em [-6, 6]": (F.gelu(z) - F.gelu(z, approximate="tanh")).abs().max().item()}

# %% [markdown]
# Quantos parâmetros ficam em cada subcamada, com as medidas do artigo ($D = 512$, $F = 2048$)?

# %%
D, F_ = 512, 2048
atencao = 4 * (D * D + D)  # W_Q, W_K, W_V, W_O com vieses
ffn = (D * F_ + F_) + (F_ * D + D)  # linear1 e linear2 com vieses
{"atenção": atencao, "FFN": ffn, "FFN / total": round(ffn / (ffn + atencao), 2)}

# %% [markdown]
# Dois terços dos parâmetros de uma camada do codificador estão na FFN (no decodificador, com a
# atenção cruzada, metade).
#
# ***Dropout*, uma vez por tensor.** Na camada do PyTorch, o *dropout* aparece em três lugares:
# nos pesos de atenção (dentro da atenção), dentro da FFN **entre a ativação e `linear2`**, e na
# saída de cada subcamada, antes da soma residual. Cada tensor passa por **um** sorteio. Um erro
# comum (está num dos textos que inspiraram este curso) é pôr um *dropout* também no fim da FFN
# *e* outro na camada: a saída da FFN passa por dois sorteios seguidos.
#
# ### Exercício 1 — `FeedForward` (2 pontos)
#
# Escreva `FeedForward(d_model, d_ff, dropout=0.0)`, um `nn.Module` com os atributos `linear1`
# (`nn.Linear(d_model, d_ff)`) e `linear2` (`nn.Linear(d_ff, d_model)`) e GELU entre eles;
# `forward(x)` recebe $(\ldots, D)$ — qualquer número de eixos antes do último — e devolve a
# mesma forma.
#
# - a ativação é a GELU exata (`F.gelu` ou `nn.GELU()`, sem `approximate="tanh"`);
# - o *dropout* vai entre a GELU e `linear2`, com `nn.Dropout(dropout)` (em modo de avaliação,
#   `.eval()`, ele não age); não ponha outro no fim da FFN. Os testes (visíveis e ocultos) rodam a FFN
#   também em modo de treino, com `dropout=0.5` e a semente do gerador global fixada
#   (`torch.manual_seed`) antes da chamada, e comparam com a fórmula sorteando do mesmo estado: use
#   `nn.Dropout` (ou `F.dropout`), que sorteia desse gerador, uma vez, sobre a saída da GELU;
# - float32 e float64, e o gradiente chega a todos os parâmetros.

# %% nbgrader={"grade": false, "grade_id": "ffn", "locked": false, "schema_version": 3, "solution": true, "task": false}
class FeedForward(nn.Module):
    """FFN posição a posição: linear2(dropout(GELU(linear1(x))))."""

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        h = F.gelu(self.linear1(x))  # (..., D) -> (..., F)
        return self.linear2(self.dropout(h))  # (..., F) -> (..., D)
        ### END SOLUTION


# %% [markdown]
# Os testes copiam para a sua FFN os pesos de uma camada do PyTorch e comparam com a fórmula, em
# modo de avaliação e em modo de treino (o mesmo estado do gerador); se a saída coincidir com um erro
# conhecido (ReLU, nenhuma ativação, GELU aproximada, *dropout* no fim...), também num segundo caso,
# a mensagem diz qual.

# %% nbgrader={"grade": true, "grade_id": "test_ffn", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
check_feed_forward(FeedForward)

# %% nbgrader={"grade": true, "grade_id": "test_ffn_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (float64, gradientes, *dropout* em modo de treino e em modo eval...).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("04_transformer", "test_ffn_hidden", globals())(FeedForward)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Conexões residuais e LayerNorm
#
# **Conexão residual.** Em vez de trocar $x$ pela saída da subcamada, somamos: $x \leftarrow x + f(x)$
# (He et al., 2016). A subcamada só precisa aprender uma **correção** de $x$, e o gradiente ganha
# um caminho direto:
#
# $$\frac{\partial\,(x + f(x))}{\partial x} = I + \frac{\partial f}{\partial x} .$$
#
# O termo $I$ leva o gradiente da saída até a entrada sem passar por nenhum peso: mesmo que
# $\partial f/\partial x$ seja pequeno em todas as camadas, o produto ao longo da pilha não some.
# Numa pilha de 12 camadas sem conexões residuais, o gradiente atravessaria 24 subcamadas em série.
# (Esse caminho só é a identidade pura se nada mais estiver nele; no arranjo Post-LN da seção 4, a
# LayerNorm fica **sobre** o caminho residual e multiplica o gradiente pelo seu jacobiano a cada
# subcamada — uma das diferenças que a seção 5 mede.)
#
# **LayerNorm** (Ba, Kiros e Hinton, 2016). Para **cada posição**, normaliza o vetor de $D$
# características para média 0 e variância 1 e aplica um ganho $\gamma$ e um viés $\beta$
# aprendidos:
#
# $$\mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta,
# \qquad \mu = \frac1D\sum_{j} x_j,\quad \sigma^2 = \frac1D\sum_j (x_j - \mu)^2 .$$
#
# Diferente da *batch norm*, ela não olha para o lote nem para as outras posições: funciona igual
# com lote 1, com sequências de qualquer comprimento, no treino e na inferência. Conferindo com
# `nn.LayerNorm` (variância **sem** a correção de Bessel, dividindo por $D$):

# %%
gen = seeded_generator(0)
x = 3 * torch.randn(2, 4, 8, generator=gen) + 1
ln = nn.LayerNorm(8)
mu = x.mean(dim=-1, keepdim=True)
var = x.var(dim=-1, unbiased=False, keepdim=True)
with torch.no_grad():  # só medimos: sem grafo de gradientes nos tensores mostrados
    a_mao = (x - mu) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias
    y = ln(x)
(a_mao - y).abs().max().item(), y.mean(-1)[0], y.std(-1, unbiased=False)[0]  # média 0 e desvio 1 por posição

# %% [markdown]
# ## 4. A camada do codificador: Post-LN e Pre-LN
#
# Há dois lugares para a LayerNorm em relação à soma residual:
#
# | arranjo | uma subcamada $f$ | onde aparece |
# |---|---|---|
# | **Post-LN** | $x \leftarrow \mathrm{LN}(x + f(x))$ | artigo original (Vaswani et al., 2017), BERT |
# | **Pre-LN** | $x \leftarrow x + f(\mathrm{LN}(x))$ | GPT-2 e a maioria dos modelos grandes depois; estudado por Wang et al. (2019) e Xiong et al. (2020) |
#
# A camada do codificador aplica isso duas vezes, primeiro com a autoatenção
# $f(h) = \mathrm{MHA}(h, h, h)$ e depois com a FFN. Em Pre-LN:
#
# $$x \leftarrow x + \mathrm{MHA}(\mathrm{LN}_1(x), \mathrm{LN}_1(x), \mathrm{LN}_1(x)),
# \qquad x \leftarrow x + \mathrm{FFN}(\mathrm{LN}_2(x)) .$$
#
# Em Pre-LN, a soma residual **nunca** é normalizada dentro da pilha: o fluxo residual
# (*residual stream*) $x$ passa de camada em camada só recebendo somas. Por isso modelos Pre-LN
# **precisam** de uma LayerNorm **final**, depois da última camada. Em Post-LN, a saída de cada
# camada já sai normalizada, e a LayerNorm final é opcional: o `nn.Transformer` do PyTorch põe uma
# no fim do codificador e do decodificador nos dois arranjos, e o `TransformerEncoder` do pacote
# (seção 7) também.
#
# ### Exercício 2 — `EncoderLayer` (4 pontos)
#
# Escreva `EncoderLayer(d_model, n_heads, d_ff, dropout=0.0, norm_first=True)` com os atributos
# `self_attn` (`MultiHeadAttention(d_model, n_heads, dropout)`, a do capítulo 3, já importada do
# pacote: passe a ela o `dropout`, que ela aplica aos pesos de atenção), `ffn`
# (`FeedForwardRef(d_model, d_ff, dropout)`), `norm1` e `norm2` (`nn.LayerNorm(d_model)`);
# `forward(x, mask=None)` devolve `(x, weights)`, com `weights` $(B, H, T, T)$ os pesos da
# autoatenção.
#
# - `FeedForwardRef` é a FFN do pacote, com a mesma interface da sua; usamos a dela para que um
#   erro no exercício 1 não derrube os exercícios 2 e 3 (quando a sua passa nos testes, as duas
#   dão o mesmo resultado).
#
# - Lembrete do capítulo 3: uma `MultiHeadAttention` é chamada como `attn(query, key, value, mask)` e
#   devolve a tupla `(output, weights)`, com `output` $(B, T_q, D)$ e `weights` $(B, H, T_q, T_k)$; na
#   autoatenção, `query`, `key` e `value` são o mesmo tensor (`help(MultiHeadAttention)` mostra o resto).
# - `norm_first=True` é Pre-LN; `False`, Post-LN. `norm1` acompanha a atenção, `norm2` a FFN.
# - `mask` é booleana, **True = pode atender**, e vai como está para `self_attn` (que aceita
#   $(T, T)$, $(B, T, T)$ ou $(B, 1, 1, T)$ / $(B, 1, T, T)$).
# - Com *dropout*, aplique-o também à saída de cada subcamada antes da soma residual
#   (`nn.Dropout`, que não age em modo de avaliação), uma vez por subcamada e nesta ordem: os pesos
#   da atenção (dentro de `self_attn`), a saída da atenção, o meio da FFN (dentro de `ffn`), a saída
#   da FFN. Os testes (visíveis e ocultos) rodam a camada em modo de treino, com `dropout=0.3` e a
#   semente do gerador global fixada antes da chamada: um sorteio a mais, a menos ou fora do lugar
#   muda a saída.
# - `d_model` não divisível por `n_heads` levanta `ValueError` (a `MultiHeadAttention` já faz isso).
# - Use todo módulo que criar no `__init__` (a correção confere que todos os parâmetros recebem
#   gradiente); float32 e float64; não use `nn.TransformerEncoderLayer`, `nn.MultiheadAttention`
#   nem `F.multi_head_attention_forward` — eles são o gabarito.
#
# A correção copia os pesos de um `nn.TransformerEncoderLayer(..., activation="gelu",
# batch_first=True, norm_first=...)` para a sua camada, pelos nomes acima, e compara as saídas.
# Em modo de treino, com *dropout*, compara com as mesmas peças do PyTorch sorteando com a mesma
# semente, na ordem acima: um *dropout* a mais, a menos ou fora do lugar muda os sorteios. Quando a saída difere e o erro
# não é um dos conhecidos, a mensagem diz em qual subcamada (`norm1`, `self_attn`, `ffn`...) a
# primeira diferença aparece.

# %% nbgrader={"grade": false, "grade_id": "encoder_layer", "locked": false, "schema_version": 3, "solution": true, "task": false}
class EncoderLayer(nn.Module):
    """Camada do codificador: autoatenção e FFN, cada uma com conexão residual e LayerNorm."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        ### BEGIN SOLUTION
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FeedForwardRef(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x, mask=None):
        ### BEGIN SOLUTION
        if self.norm_first:  # Pre-LN: x + f(LN(x))
            h = self.norm1(x)
            out, weights = self.self_attn(h, h, h, mask)
            x = x + self.dropout1(out)
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:  # Post-LN: LN(x + f(x))
            out, weights = self.self_attn(x, x, x, mask)
            x = self.norm1(x + self.dropout1(out))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x, weights
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_encoder_layer", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_encoder_layer(EncoderLayer)

# %% nbgrader={"grade": true, "grade_id": "test_encoder_layer_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (float64, máscaras 3-D e 4-D, gradientes, *dropout* em eval e em treino...).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("04_transformer", "test_encoder_layer_hidden", globals())(EncoderLayer)
### END HIDDEN TESTS

# %% [markdown]
# ### A mesma conta que o PyTorch
#
# Daqui em diante usamos as camadas do pacote (`EncoderLayerRef`, de `transformer_course.layers`),
# para o notebook rodar mesmo antes de você terminar os exercícios. Carregando nelas os pesos de um
# `nn.TransformerEncoderLayer`, a diferença fica no nível do arredondamento de float32.
#
# Cuidado com a convenção das máscaras: nos módulos do PyTorch, `src_mask` e
# `src_key_padding_mask` usam **True = bloqueado**, o contrário do curso. Por isso passamos `~mask`.

# %%
gen = seeded_generator(1)
x = torch.randn(2, 6, 16, generator=gen)
ids = torch.tensor([[5, 8, 2, 9, 0, 0], [3, 3, 7, 1, 4, 6]])  # 0 = padding
mask = padding_mask(ids)  # (B, 1, 1, T), True nos tokens reais
diferencas = {}
for norm_first in (True, False):
    torch_layer = nn.TransformerEncoderLayer(16, 4, 64, dropout=0.0, activation="gelu",
                                             batch_first=True, norm_first=norm_first)
    nossa = load_encoder_layer_from_torch(EncoderLayerRef(16, 4, 64, norm_first=norm_first), torch_layer)
    esperado = torch_layer(x, src_key_padding_mask=~mask[:, 0, 0, :])  # (B, T): True = bloqueado
    obtido, _ = nossa(x, mask)
    diferencas["Pre-LN" if norm_first else "Post-LN"] = (obtido - esperado).abs().max().item()
diferencas

# %% [markdown]
# ## 5. Pre-LN × Post-LN: o gradiente na inicialização
#
# Xiong et al. (2020) mostraram, com uma análise de campo médio (*mean field*) e hipóteses
# simplificadoras, que **na inicialização** o gradiente dos parâmetros da última camada se comporta
# de modo diferente nos dois arranjos. O teorema 1 do artigo dá um **limite superior** para a norma do
# gradiente de $W^2$ (a segunda linear da FFN) da última camada: no Post-LN, $O(d\sqrt{\ln d})$, um teto
# que **não depende** da profundidade $L$; no Pre-LN, $O(d\sqrt{\ln d / L})$, um teto que **encolhe**
# com $L$. Um teto não diz que o gradiente é grande, nem que é constante: diz só até onde ele pode ir.
# No Pre-LN, o motivo de o teto descer é o fluxo residual: as camadas só somam, a norma de $x$ cresce
# com a profundidade, e a LayerNorm final divide o gradiente por essa norma.
#
# Vamos medir isso. Para cada profundidade de 1 a 12, montamos uma pilha de camadas do codificador
# com pesos de Xavier, entradas aleatórias, uma leitura linear e a entropia cruzada contra alvos
# sorteados (a LayerNorm final só no Pre-LN, como na análise do artigo); fazemos **uma** retropropagação (nenhum passo de treino) e medimos $\lVert\partial L/\partial W^2\rVert$
# em cada camada, na média de 3 sementes. Leva alguns segundos.

# %%
n_seeds = 1 if os.environ.get("NBGRADER_EXECUTION") else 3  # na correção automática, mais curto
resultados = ln_gradient_experiment(max_depth=12, n_seeds=n_seeds)
plots.gradient_profile_figure(resultados, depth=12)

# %% [markdown]
# Com 12 camadas, o Post-LN tem gradientes maiores que o Pre-LN em todas as camadas. Os perfis
# camada a camada, porém, **não** são os do artigo. Na figura 3 de Xiong et al., também na
# inicialização, o gradiente do Post-LN **cresce** da entrada para a saída, e o do Pre-LN fica
# praticamente igual em todas as camadas. No nosso modelo pequeno, o do Post-LN **não** cresce em
# direção à saída (cai um pouco), e o do Pre-LN **cai** da entrada para a saída, para menos da
# metade (os números estão na célula abaixo). O experimento do artigo é um modelo de tradução
# de verdade; o nosso difere em quase tudo — largura ($d_{model} = 64$), comprimento, dados
# aleatórios, alvos sorteados, inicialização, só o codificador — e não isolamos qual dessas
# diferenças muda o perfil. O que o teorema trata é a última camada, e é ela que comparamos a seguir
# (a próxima figura). Um perfil parecido com o nosso Pre-LN, com as camadas perto da
# entrada recebendo gradientes maiores, foi medido por Shleifer et al. (2021, NormFormer) — mas
# **durante o pré-treino**, não na inicialização.

# %%
print("norma do gradiente de W² em cada camada, da 1 (entrada) à 12 (saída):")
for nf in (False, True):
    print(f"{'Pre-LN' if nf else 'Post-LN':>8}:", " ".join(br(v, ".2f") for v in resultados[(nf, 12)].tolist()))

# %% [markdown]
# Agora a camada perto da saída, para cada profundidade:

# %%
plots.last_layer_gradient_figure(resultados)

# %%
ultima = {("Pre-LN" if nf else "Post-LN", L): round(resultados[(nf, L)][-1].item(), 3)
          for nf in (True, False) for L in (1, 4, 12)}
ultima["Pre-LN: queda de L = 1 a L = 12"] = round(
    (resultados[(True, 1)][-1] / resultados[(True, 12)][-1]).item(), 2)
ultima["√12 (a queda de um limite 1/√L)"] = round(12**0.5, 2)
ultima

# %% [markdown]
# Compatível com o teorema: no Post-LN o gradiente da última camada fica praticamente no mesmo
# patamar de 1 a 12 camadas (abaixo de um teto que não desce), e no Pre-LN ele cai com a
# profundidade, como o teto (compare a queda medida com $\sqrt{12}$: o teorema dá limites de ordem
# de grandeza, não a curva exata).
# A causa, no Pre-LN, aparece se medirmos a norma de $x$ ao longo da pilha:

# %%
normas = {nf: residual_norms_at_init(12, nf) for nf in (True, False)}
plots.residual_norm_figure(normas)

# %% [markdown]
# **O que isso tem a ver com o *warm-up*?** O raciocínio de Xiong et al.: no Post-LN, os
# parâmetros perto da saída recebem gradientes grandes logo no início, e uma taxa de aprendizado
# grande sobre eles desestabiliza o treino; o aquecimento (começar com taxa pequena e subir aos
# poucos, capítulo 6) contorna isso. No Pre-LN os gradientes já nascem comportados, e nos
# experimentos do artigo (tradução e BERT) o Pre-LN **sem** *warm-up* chegou a resultados
# comparáveis aos do Post-LN com *warm-up*, treinando em menos tempo. Três ressalvas honestas.
# Primeiro, isso é o que eles mediram nos seus modelos, não uma lei. Segundo, a própria explicação é
# contestada: Liu et al. (2020) mostram que corrigir só o desequilíbrio dos gradientes não estabiliza o
# Post-LN, e concluem que ele não é a causa de fundo da instabilidade; a causa, para eles, é uma
# **amplificação** — cada camada Post-LN depende muito do seu ramo residual (*residual branch*, o
# $f(x)$ da soma $x + f(x)$), e isso transforma pequenas
# mudanças nos parâmetros (os passos do treino) em grandes mudanças na saída. Os mesmos autores
# mostram que o Post-LN, quando consegue treinar, às vezes chega a um resultado final melhor. Terceiro,
# o Pre-LN tem os seus próprios desequilíbrios entre camadas (Shleifer et al., 2021).
# Na prática atual, a maioria dos modelos usa Pre-LN **e** ainda usa um *warm-up* curto.
#
# ### Explore: arranjo e profundidade
#
# Escolha o arranjo e o número de camadas. À esquerda, as barras são a norma do gradiente de
# $W^2$ em cada camada (os traços cinza, o outro arranjo); à direita, a última camada em função da
# profundidade, com a profundidade escolhida marcada. Tudo foi calculado uma vez, acima: o
# controle só redesenha.

# %% tags=["nbval-ignore-output"]
from transformer_course.widgets import ln_gradient_widget

ln_gradient_widget(resultados)

# %% [markdown]
# ## 6. A camada do decodificador
#
# O decodificador gera a saída (a tradução, por exemplo) uma posição por vez, olhando para o que
# já gerou e para a frase de entrada inteira. Sua camada tem **três** subcamadas, cada uma com
# conexão residual e LayerNorm:
#
# 1. **autoatenção mascarada**: Q, K e V vêm do próprio decodificador, com a máscara causal
#    (`tgt_mask`), para a posição $t$ não ver as posições futuras;
# 2. **atenção cruzada**: Q vem do decodificador; K e V vêm da **memória** (*memory*), a saída do
#    codificador, com a máscara de *padding* da fonte (`memory_mask`). É por ela que cada palavra
#    gerada consulta a frase de entrada. (No `nn.TransformerDecoderLayer` do PyTorch, o *padding*
#    da fonte vai em `memory_key_padding_mask`, $(B, S)$ com True = *padding*; lá, o `memory_mask` é
#    outra coisa: uma máscara $(T, S)$ igual para todo o lote, ou $(B \cdot H, T, S)$, com True =
#    bloqueado, como o `attn_mask` do `nn.MultiheadAttention`. Na nossa camada há uma máscara só,
#    `memory_mask`, na convenção do curso e difundível para $(B, H, T, S)$: o *padding* da fonte
#    entra como $(B, 1, 1, S)$.)
# 3. **FFN**, como no codificador.
#
# | subcamada | Q | K e V | máscara | pesos |
# |---|---|---|---|---|
# | autoatenção | decodificador $(B, T, D)$ | decodificador $(B, T, D)$ | `tgt_mask`, difundível para $(B, H, T, T)$ | $(B, H, T, T)$ |
# | atenção cruzada | decodificador $(B, T, D)$ | memória $(B, S, D)$ | `memory_mask`, difundível para $(B, H, T, S)$ | $(B, H, T, S)$ |
#
# Em Pre-LN:
#
# $$x \leftarrow x + \mathrm{MHA}_{self}(\mathrm{LN}_1(x)),\qquad
# x \leftarrow x + \mathrm{MHA}_{cross}(\mathrm{LN}_2(x), \text{memória}),\qquad
# x \leftarrow x + \mathrm{FFN}(\mathrm{LN}_3(x)) .$$
#
# A memória **não** passa por `norm2`: só a consulta é normalizada (a memória já saiu normalizada
# do codificador, pela LayerNorm final ou pela última LayerNorm do Post-LN).
#
# ### Exercício 3 — `DecoderLayer` (4 pontos)
#
# Escreva `DecoderLayer(d_model, n_heads, d_ff, dropout=0.0, norm_first=True)` com os atributos
# `self_attn`, `cross_attn` (duas `MultiHeadAttention`), `ffn` (`FeedForwardRef`), `norm1`, `norm2`,
# `norm3`;
# `forward(x, memory, tgt_mask=None, memory_mask=None)` devolve `(x, self_weights, cross_weights)`.
# `x` é $(B, T, D)$ e `memory` $(B, S, D)$, com $T \ne S$ em geral.
#
# - As duas atenções são `MultiHeadAttention(d_model, n_heads, dropout)` (passe o `dropout`), chamadas
#   como no exercício 2, `attn(query, key, value, mask)` → `(output, weights)`: na atenção cruzada,
#   `query` vem do decodificador e `key` e `value` são a memória;
#   `norm_first` e o *dropout* na saída de cada subcamada seguem o exercício 2 (em modo de treino,
#   a ordem dos sorteios é a das subcamadas: autoatenção, atenção cruzada, FFN; os testes visíveis e
#   ocultos fixam a semente do gerador global, como no exercício 2).
# - `tgt_mask` vai como está para `self_attn` ($(T, T)$, $(B, T, T)$ ou $(B, 1, T, T)$) e
#   `memory_mask` para `cross_attn` (por exemplo o *padding* da fonte, $(B, 1, 1, S)$); as duas são
#   booleanas, True = pode atender.
# - Os requisitos do exercício 2 valem aqui: `ValueError` vindo da atenção, todo módulo usado
#   (o gradiente chega também a `memory`), float32 e float64, nada de `nn.TransformerDecoderLayer`,
#   `nn.MultiheadAttention` ou `F.multi_head_attention_forward`.
#
# A correção compara com `nn.TransformerDecoderLayer` (cuja atenção cruzada se chama
# `multihead_attn`).

# %% nbgrader={"grade": false, "grade_id": "decoder_layer", "locked": false, "schema_version": 3, "solution": true, "task": false}
class DecoderLayer(nn.Module):
    """Camada do decodificador: autoatenção mascarada, atenção cruzada e FFN."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        ### BEGIN SOLUTION
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FeedForwardRef(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        ### BEGIN SOLUTION
        if self.norm_first:  # Pre-LN
            h = self.norm1(x)
            out, self_w = self.self_attn(h, h, h, tgt_mask)
            x = x + self.dropout1(out)
            out, cross_w = self.cross_attn(self.norm2(x), memory, memory, memory_mask)  # K, V: memória
            x = x + self.dropout2(out)
            x = x + self.dropout3(self.ffn(self.norm3(x)))
        else:  # Post-LN
            out, self_w = self.self_attn(x, x, x, tgt_mask)
            x = self.norm1(x + self.dropout1(out))
            out, cross_w = self.cross_attn(x, memory, memory, memory_mask)  # K, V: memória
            x = self.norm2(x + self.dropout2(out))
            x = self.norm3(x + self.dropout3(self.ffn(x)))
        return x, self_w, cross_w
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_decoder_layer", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_decoder_layer(DecoderLayer)

# %% nbgrader={"grade": true, "grade_id": "test_decoder_layer_hidden", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Testes ocultos: rodam na correção (float64, máscara (B, 1, T, T), gradientes até a memória, *dropout* em treino...).
### BEGIN HIDDEN TESTS
from transformer_course.tamper import hidden_check

hidden_check("04_transformer", "test_decoder_layer_hidden", globals())(DecoderLayer)
### END HIDDEN TESTS

# %% [markdown]
# Com a camada do pacote, vejamos as formas e os dois mapas de atenção (cabeça 0) de um exemplo de
# tradução português → inglês: uma "frase de origem" de 6 posições, das quais as duas últimas são *padding*, e 4 posições já geradas do
# lado do alvo. Os pesos são aleatórios (nada foi treinado), mas a **estrutura** das máscaras já
# aparece: zeros acima da diagonal na autoatenção, zeros nas colunas de *padding* na atenção cruzada.

# %%
gen = seeded_generator(2)
fonte = torch.tensor([[7, 3, 9, 4, 0, 0]])  # S = 6, duas posições de padding
memoria = torch.randn(1, 6, 32, generator=gen)  # (B, S, D): "saída do codificador"
alvo = torch.randn(1, 4, 32, generator=gen)  # (B, T, D)
camada = DecoderLayerRef(32, 4, 64).eval()
with torch.no_grad():
    y, w_self, w_cross = camada(alvo, memoria, causal_mask(4), padding_mask(fonte))
y.shape, w_self.shape, w_cross.shape

# %%
plots.decoder_attention_figure(w_self[0, 0], w_cross[0, 0], ["<início>", "the", "cat", "sleeps"],
                               ["o", "gato", "está", "dormindo", "<pad>", "<pad>"])

# %% [markdown]
# ## 7. A pilha: codificador completo e classificador
#
# Um codificador completo empilha $N$ camadas sobre a entrada preparada no capítulo 1:
#
# $$h_0 = \mathrm{Embedding}(\text{tokens})\cdot\sqrt{d_{model}} + PE, \qquad
# h_\ell = \mathrm{EncoderLayer}_\ell(h_{\ell-1}), \qquad \text{saída} = \mathrm{LN}(h_N) .$$
#
# `TransformerEncoder` (no pacote) faz isso, com o *dropout* aplicado **uma vez**, depois da soma
# da posição, e a LayerNorm final nos dois arranjos (como o `nn.Transformer`; no Post-LN ela
# normaliza de novo uma saída já normalizada, e na inicialização quase não muda nada). A máscara
# de *padding* é criada uma vez, com **uma** forma documentada, $(B, 1, 1, T)$, e passada como está a todas as camadas — sem `unsqueeze` extra dentro da atenção,
# que a transformaria num tensor de 5 eixos.
#
# Para classificar uma sequência inteira (sentimento, tema...), fazemos a média dos vetores das
# posições (*mean pooling*) — **só das posições reais**, senão o *padding* entraria na média — e
# uma linear para as classes:
#
# $$\bar h = \frac{\sum_t m_t\, h_t}{\sum_t m_t},\quad m_t = 1 \text{ se o token } t \text{ é real}
# ,\qquad \text{logits} = \bar h\, W + b .$$

# %%
modelo = TransformerClassifier(vocab_size=100, n_classes=3, d_model=32, n_heads=4, n_layers=2,
                               d_ff=64, max_len=16, dropout=0.1).to(device).eval()
ids = torch.tensor([[12, 7, 55, 3, 0, 0, 0], [8, 9, 10, 11, 12, 13, 14]], device=device)
with torch.no_grad():
    logits, pesos = modelo(ids)
n_params = sum(p.numel() for p in modelo.parameters())
logits.shape, len(pesos), pesos[0].shape, n_params

# %% [markdown]
# Se o *pooling* ignora mesmo o *padding*, acrescentar mais posições de *padding* não pode mudar
# nada nos *logits* (a máscara impede que as posições reais olhem para elas, e a média não as conta).
# A diferença medida fica no nível do arredondamento do float32 (somas de comprimentos diferentes
# podem ser feitas em outra ordem), não é um vazamento:

# %%
mais_padding = torch.cat([ids, torch.zeros(2, 5, dtype=torch.long, device=device)], dim=1)
with torch.no_grad():
    logits_2, _ = modelo(mais_padding)
(logits - logits_2).abs().max().item()

# %% [markdown]
# O mesmo `TransformerEncoder` aceita uma máscara extra, `attn_mask`, combinada com a de *padding*:
# com `causal_mask(T)` ele vira a pilha de um modelo só-decodificador, como o GPT (capítulo 7).
# O treino de um classificador destes é o assunto do capítulo 6.

# %% [markdown]
# ## 8. Perguntas abertas (corrigidas à mão)
#
# **Pergunta 1 (2 pontos).** Por que as conexões residuais tornam treináveis pilhas profundas como
# as de 12 ou 24 camadas? Responda com a derivada de $x + f(x)$ e diga o que aconteceria com o
# gradiente que chega à primeira camada se tirássemos as conexões residuais.

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_residual", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** A derivada de $x + f(x)$ em relação a $x$ é $I + \partial f/\partial x$. Na
# retropropagação, o gradiente que chega à camada $\ell$ é o produto dessas matrizes ao longo das
# camadas acima; expandindo o produto, há sempre o termo $I \cdot I \cdots I$: um caminho direto da
# perda até qualquer camada, que não passa por nenhum peso e não encolhe. Sem conexões residuais, o gradiente
# seria só o produto dos $\partial f_\ell/\partial x$ de 24 subcamadas (12 camadas × 2); se cada um
# encolhe (ou estica) a norma por um fator, o produto cai (ou explode) exponencialmente com a
# profundidade, e as primeiras camadas praticamente não aprendem. Além disso, com a conexão residual cada
# subcamada parte de "não fazer nada" ($f \approx 0$ mantém $x$) e só precisa aprender correções.
#
# **Rubrica (2 pontos).**
# - 1 ponto: a derivada $I + \partial f/\partial x$ e o caminho direto (identidade) do gradiente;
#   meio ponto se só disser "o gradiente flui melhor" sem a derivada ou o caminho.
# - 1 ponto: sem conexão residual, produto de muitos jacobianos → gradiente que some/explode nas primeiras
#   camadas (ligado à profundidade). Meio ponto se mencionar só "gradiente some" sem o produto.
# ### END SOLUTION

# %% [markdown]
# **Pergunta 2 (2 pontos).** Num modelo de tradução português → inglês, o que a atenção cruzada
# permite ao decodificador que a autoatenção (mesmo sem máscara) não permite? Diga de onde vêm Q, K
# e V nela, qual é a forma dos seus pesos e o que uma linha desses pesos significa.

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_cross", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** A autoatenção do decodificador só mistura posições da própria sequência de
# saída (o inglês já gerado); ela não tem acesso à frase em português. A atenção cruzada é a única
# ponte: Q vem do decodificador (cada palavra sendo gerada procura "o que da frase de origem me
# interessa agora?"), e K e V vêm da memória, a saída do codificador sobre a frase de origem. Os
# pesos têm forma $(B, H, T, S)$: uma linha $t$ é uma distribuição sobre as $S$ posições da origem —
# um "alinhamento" suave entre a palavra $t$ da tradução e as palavras do português (por exemplo,
# "cat" olhando para "gato"), que pode mudar a cada passo e lidar com ordens diferentes nas duas
# línguas. Sem ela, o decodificador seria um modelo de linguagem do inglês sem saber o que traduzir.
#
# **Rubrica (2 pontos).**
# - 1 ponto: Q do decodificador, K e V da memória/codificador, e por isso acesso à frase de origem
#   (que a autoatenção não tem). Meio ponto se trocar Q com K/V mas explicar o acesso à origem.
# - 1 ponto: forma $(B, H, T, S)$ e a leitura de uma linha como alinhamento/distribuição sobre as
#   palavras da origem. Meio ponto para só uma das duas coisas.
# ### END SOLUTION

# %% [markdown]
# **Pergunta 3 (2 pontos).** Olhe as figuras da seção 5. Descreva o que acontece com o gradiente da
# última camada quando a pilha fica mais profunda, em cada arranjo, e explique com a figura do fluxo
# residual por que o Pre-LN se comporta assim. O que isso sugere sobre o *warm-up*, e qual cuidado
# é preciso ao tirar essa conclusão?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_preln", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Resposta modelo.** No Post-LN, o gradiente de $W^2$ da última camada fica no mesmo patamar para
# 1 a 12 camadas (o maior valor fica menos de 40% acima do menor, o que os testes do curso conferem);
# no Pre-LN ele cai com a profundidade (a 12 camadas, menos da metade do valor com uma), compatível
# com o limite superior do teorema de Xiong et al., $O(d\sqrt{\ln d / L})$ (um teto, não uma previsão
# da curva). A figura do fluxo
# residual mostra a causa: no Post-LN a norma de $x$ é renormalizada a cada subcamada (fica
# constante), enquanto no Pre-LN as camadas só somam e a norma cresce com a profundidade; a
# LayerNorm final divide o gradiente por essa norma, então cada camada recebe um gradiente menor.
# Sugestão para o *warm-up*: no Post-LN os parâmetros perto da saída recebem gradientes grandes
# desde o primeiro passo, e uma taxa de aprendizado grande logo de início tende a desestabilizar o
# treino — o aquecimento evita isso; no Pre-LN o artigo conseguiu treinar sem aquecimento. Cuidado:
# é uma medida na inicialização (não diz nada sobre o meio do treino), num modelo pequeno, e com
# otimizadores adaptativos como Adam a escala do gradiente não é toda a história; o próprio artigo
# mostra resultados experimentais, não uma garantia; Liu et al. (2020) atribuem a instabilidade do
# Post-LN a outra causa (a amplificação pelo ramo residual, não o desequilíbrio dos gradientes); e na
# prática ainda se usa *warm-up* com Pre-LN.
#
# **Rubrica (2 pontos).**
# - 1 ponto: descreve corretamente as duas curvas (Post-LN estável com L, Pre-LN caindo) e liga a
#   queda do Pre-LN ao crescimento de ‖x‖ com a LayerNorm final. Meio ponto sem a explicação.
# - 1 ponto: conclusão sobre *warm-up* (Post-LN precisa mais dele; Pre-LN tolera menos ou nenhum)
#   **com** ao menos uma ressalva (só inicialização, modelo pequeno, Adam, resultado experimental,
#   a explicação alternativa de Liu et al.).
#   Meio ponto se a conclusão vier sem ressalva.
# ### END SOLUTION

# %% [markdown]
# ## Resumo
#
# - Uma camada do *Transformer* alterna **comunicação** (atenção) e **processamento por posição**
#   (FFN); cada subcamada vem com conexão residual e LayerNorm.
# - FFN: $\mathrm{GELU}(xW_1 + b_1)\,W_2 + b_2$, com $d_{ff} > d_{model}$ ($4\,d_{model}$ tipicamente); cerca de
#   dois terços dos parâmetros da camada do codificador. Muitos modelos recentes usam a SwiGLU (Shazeer, 2020).
#   *Dropout* uma vez por tensor: nos pesos de atenção, entre a GELU e $W_2$, e na saída de cada
#   subcamada antes da soma residual.
# - Conexão residual: derivada $I + \partial f/\partial x$, um caminho direto para o gradiente. LayerNorm:
#   normaliza cada posição sobre as $D$ características.
# - Post-LN: $\mathrm{LN}(x + f(x))$; Pre-LN: $x + f(\mathrm{LN}(x))$ e uma LayerNorm final. Na
#   inicialização, o gradiente da última camada do Post-LN não encolhe com a profundidade e o do
#   Pre-LN encolhe: medimos as duas coisas, compatíveis com os limites superiores de Xiong et al.
#   (2020). O perfil camada a camada do nosso modelo pequeno difere da figura 3 do artigo. Se o
#   desequilíbrio dos gradientes explica a instabilidade do Post-LN é contestado (Liu et al., 2020).
# - Decodificador: autoatenção mascarada (Q, K, V do alvo), atenção cruzada (Q do alvo, K e V da
#   memória; pesos $(B, H, T, S)$) e FFN.
# - Nossas camadas, com os pesos de `nn.TransformerEncoderLayer`/`nn.TransformerDecoderLayer`
#   (`activation="gelu"`, `batch_first=True`), dão a mesma saída; as máscaras do PyTorch usam
#   True = bloqueado, então passamos `~mask`.
#
# ## Para ir além
#
# - A. Vaswani et al. (2017), *Attention Is All You Need*, NeurIPS — seções 3.1 (a pilha, conexões residuais e
#   LayerNorm), 3.3 (a FFN) e 5.3 (o *warm-up*).
# - K. He, X. Zhang, S. Ren, J. Sun (2016), *Deep Residual Learning for Image Recognition*, CVPR.
# - J. L. Ba, J. R. Kiros, G. E. Hinton (2016), *Layer Normalization*, arXiv:1607.06450.
# - D. Hendrycks, K. Gimpel (2016), *Gaussian Error Linear Units (GELUs)*, arXiv:1606.08415.
# - A GELU nos códigos de referência: `modeling.py` do BERT (github.com/google-research/bert; exata com
#   `tf.erf` até o *commit* "Adding TF Hub support", de fevereiro de 2019, e tanh depois), `model.py` do
#   GPT-2 (github.com/openai/gpt-2, tanh) e `activations.py` da biblioteca `transformers` (`"gelu"`
#   exata, `"gelu_new"` tanh).
# - Q. Wang et al. (2019), *Learning Deep Transformer Models for Machine Translation*, ACL — Pre-LN
#   para pilhas profundas.
# - R. Xiong et al. (2020), *On Layer Normalization in the Transformer Architecture*, ICML — o
#   teorema e os experimentos da seção 5.
# - L. Liu et al. (2020), *Understanding the Difficulty of Training Transformers*, EMNLP — o
#   desequilíbrio dos gradientes não é a causa de fundo da instabilidade do Post-LN; a amplificação
#   pelo ramo residual é; e como treiná-lo (Admin).
# - S. Shleifer, J. Weston, M. Ott (2021), *NormFormer: Improved Transformer Pretraining with Extra
#   Normalization*, arXiv:2110.09456 — os desequilíbrios de gradiente do Pre-LN, medidos durante o
#   pré-treino.
# - N. Shazeer (2020), *GLU Variants Improve Transformer*, arXiv:2002.05202 — a SwiGLU e as outras
#   FFN com porta.
# - M. Geva, R. Schuster, J. Berant, O. Levy (2021), *Transformer Feed-Forward Layers Are Key-Value
#   Memories*, EMNLP.
# - Documentação de `torch.nn.TransformerEncoderLayer` e `torch.nn.TransformerDecoderLayer`, os
#   oráculos da correção.
#
# Próximo capítulo: as máscaras em detalhe — causal, *padding*, as três convenções do PyTorch e as
# linhas totalmente mascaradas.
