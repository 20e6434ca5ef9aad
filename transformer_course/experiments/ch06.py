"""O experimento do capítulo 6: treinar por várias épocas e medir o aquecimento (*warm-up*).

``fit`` treina por várias épocas com o laço e a avaliação do capítulo (os do aluno ou os do
pacote), registra a perda e a taxa de cada passo e guarda na memória o melhor ponto de controle
(nunca em disco); ``run_warmup_experiment`` treina o mesmo modelo com e sem aquecimento, para
cada semente, e ``summarize`` resume o resultado numa tabela. ``History`` guarda o que as
figuras ``plots.training_curves`` e ``plots.warmup_experiment_figure`` desenham.
``student_or_reference`` escolhe, para as demonstrações do notebook, a função do aluno (se ela
passar nos testes visíveis) ou a do pacote. ``paired_comparison`` compara dois classificadores
medidos nos mesmos exemplos (a diferença pareada e o teste exato de McNemar).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from ..numbers import br
from ..training import ADAM_BETAS, ADAM_EPS, evaluate, no_warmup_lr, noam_lr, noam_peak, train_epoch

__all__ = [
    "ExperimentConfig",
    "History",
    "LoggedLoss",
    "fit",
    "paired_comparison",
    "run_warmup_experiment",
    "student_or_reference",
    "summarize",
]


# ---------------------------------------------------------------- a versão do aluno ou a do pacote


def student_or_reference(student_fn: Callable | None, check_fn: Callable, reference_fn: Callable, name: str):
    """A função do aluno, se ela passar nos testes visíveis (``check_fn``); senão, a do pacote.

    Imprime uma linha dizendo qual versão será usada e, na volta para a do pacote, a primeira
    linha da mensagem do teste. Serve às demonstrações: o notebook roda mesmo antes de o aluno
    terminar o exercício, e usa o código dele assim que ele funciona.
    """
    if student_fn is None or student_fn is reference_fn:
        print(f"`{name}`: usando a versão do pacote.")
        return reference_fn
    shown = io.StringIO()
    try:
        with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(io.StringIO()):
            check_fn(student_fn)
    except Exception as exc:  # noqa: BLE001 - qualquer falha do teste visível volta à referência
        lines = [line for line in str(exc).splitlines() if line.strip()]
        why = lines[0] if lines else type(exc).__name__
        print(f"`{name}`: usando a versão do pacote; a sua ainda não passa nos testes visíveis ({why}).")
        return reference_fn
    if "não implementado" in shown.getvalue():
        # O esboço: o teste visível só avisa (para não parar o "Executar tudo"), sem levantar.
        print(f"`{name}`: usando a versão do pacote; a sua ainda não foi implementada.")
        return reference_fn
    print(f"`{name}`: usando a sua versão (ela passou nos testes visíveis).")
    return student_fn


class LoggedLoss:
    """A função de perda, registrando (perda do lote, taxa em vigor) a cada chamada com gradientes.

    Permite a ``fit`` guardar a perda e a taxa de cada passo com qualquer laço de treino (o do
    aluno ou o do pacote, que têm a assinatura do exercício): a perda é calculada antes de
    ``optimizer.step()``, então a taxa lida nesse momento é a usada no passo.
    """

    def __init__(self, loss_fn: Callable, optimizer: torch.optim.Optimizer, log: list):
        self.loss_fn, self.optimizer, self.log = loss_fn, optimizer, log

    def __call__(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        loss = self.loss_fn(logits, targets)
        if torch.is_grad_enabled():
            self.log.append((loss.item(), self.optimizer.param_groups[0]["lr"]))
        return loss


# ---------------------------------------------------------------- várias épocas


@dataclass
class History:
    """O que aconteceu num treino: por época e por passo.

    Attributes:
        train_loss, train_accuracy, val_loss, val_accuracy: um valor por época.
        step_loss, step_lr: a perda de cada lote e a taxa usada nesse passo.
        best_epoch: a época (a partir de 1) com a menor perda de validação.
        best_state: os pesos dessa época, copiados na memória (na CPU); nada vai para o disco.
    """

    train_loss: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_accuracy: list[float] = field(default_factory=list)
    step_loss: list[float] = field(default_factory=list)
    step_lr: list[float] = field(default_factory=list)
    best_epoch: int = 0
    best_state: dict[str, torch.Tensor] | None = None

    @property
    def best_val_loss(self) -> float:
        return self.val_loss[self.best_epoch - 1] if self.best_epoch else math.inf


def fit(
    model: nn.Module,
    train_loader: Iterable,
    val_loader: Iterable,
    optimizer: torch.optim.Optimizer,
    scheduler,
    loss_fn: Callable,
    epochs: int,
    max_grad_norm: float = 1.0,
    progress: bool = True,
    desc: str = "treino",
    train_fn: Callable = train_epoch,
    eval_fn: Callable = evaluate,
) -> History:
    """Treina por ``epochs`` épocas, avaliando a cada uma; guarda na memória o melhor estado.

    A barra de progresso (``tqdm.auto``) mostra a época e as perdas. O "melhor" é a menor perda
    de validação; ``history.best_state`` pode ser carregado com ``model.load_state_dict``.
    ``train_fn`` e ``eval_fn`` podem ser as funções do aluno (mesma assinatura dos exercícios);
    a perda e a taxa de cada passo são registradas por :class:`LoggedLoss`.
    """
    from tqdm.auto import tqdm

    history = History()
    bar = tqdm(range(1, epochs + 1), desc=desc, disable=not progress, leave=False)
    for epoch in bar:
        log: list = []
        train = train_fn(
            model, train_loader, optimizer, scheduler, LoggedLoss(loss_fn, optimizer, log), max_grad_norm
        )
        val = eval_fn(model, val_loader, loss_fn)
        history.train_loss.append(train["loss"])
        history.train_accuracy.append(train["accuracy"])
        history.val_loss.append(val["loss"])
        history.val_accuracy.append(val["accuracy"])
        history.step_loss += [loss for loss, _ in log]
        history.step_lr += [lr for _, lr in log]
        if val["loss"] < history.best_val_loss:
            history.best_epoch = epoch
            history.best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        bar.set_postfix(
            treino=br(train["loss"], ".3f"), val=br(val["loss"], ".3f"), acc=br(val["accuracy"], ".2f")
        )
    bar.close()
    return history


# ---------------------------------------------------------------- o experimento


@dataclass(frozen=True)
class ExperimentConfig:
    """O experimento "com e sem aquecimento": mesmo modelo, mesmos dados, mesmo pico de lr."""

    d_model: int = 64  # largura do modelo (entra também na fórmula de Noam)
    n_heads: int = 4  # cabeças de atenção
    n_layers: int = 6  # camadas do codificador (uma pilha funda é onde o aquecimento importa)
    d_ff: int = 128  # largura da FFN
    norm_first: bool = False  # False = Post-LN, o arranjo do artigo original
    dropout: float = 0.0  # sem dropout: a única fonte de diferença é a taxa de aprendizado
    warmup_steps: int = 60  # passos de aquecimento
    factor: float = 1.0  # multiplica a curva toda; pico = factor·(d_model·warmup_steps)^-0.5
    epochs: int = 4  # épocas por execução
    seeds: tuple[int, ...] = (0, 1, 2)  # sementes: inicialização e ordem dos lotes

    @property
    def peak_lr(self) -> float:
        return noam_peak(self.d_model, self.warmup_steps, self.factor)


def run_warmup_experiment(
    config: ExperimentConfig,
    make_model: Callable[[ExperimentConfig, int], nn.Module],
    make_train_loader: Callable[[int], Iterable],
    val_loader: Iterable,
    device: torch.device | str = "cpu",
    progress: bool = True,
    workers: int | None = None,
) -> dict[str, list[History]]:
    """Treina o mesmo modelo com e sem aquecimento, para cada semente; devolve os históricos.

    As duas condições usam Adam (betas e eps do artigo), o mesmo pico de taxa de aprendizado
    e a mesma queda depois dele (``training.noam_lr`` e ``training.no_warmup_lr``, ambas por
    ``LambdaLR``); só os primeiros ``warmup_steps`` passos diferem. Para cada semente, as duas
    condições começam dos mesmos pesos e veem os lotes na mesma ordem.

    Os treinos são independentes e rodam em ``workers`` threads ao mesmo tempo (padrão: os núcleos
    divididos pelas threads do PyTorch, no máximo 4; 1 = em sequência). Cada operação do PyTorch
    solta o GIL: num computador de 2 núcleos, com 1 thread do PyTorch, duas execuções juntas levam
    o tempo de uma (medido: 1,7–2,1× mais rápido). Modelos, otimizadores e loaders são criados
    antes, em ordem, na thread principal (a inicialização usa o gerador global); sem dropout, o
    treino não sorteia nada, e os históricos saem iguais, bit a bit, aos de uma execução em
    sequência. Com dropout, as threads disputariam o gerador global: roda em sequência.

    Args:
        make_model: ``(config, seed) -> modelo``, já inicializado com a semente.
        make_train_loader: ``seed -> DataLoader`` de treino, embaralhado com a semente.
    """
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from tqdm.auto import tqdm

    schedules: dict[str, Callable[[int], float]] = {
        "com aquecimento": lambda s: noam_lr(s, config.d_model, config.warmup_steps, config.factor),
        "sem aquecimento": lambda s: no_warmup_lr(s, config.d_model, config.warmup_steps, config.factor),
    }
    runs = [(seed, name) for seed in config.seeds for name in schedules]
    jobs = []
    for seed, name in runs:
        model = make_model(config, seed).to(device)
        # foreach: o Adam atualiza todos os parâmetros de uma vez (numa CPU, o padrão é um laço em
        # Python, parâmetro por parâmetro); o resultado é o mesmo, bit a bit, em menos tempo.
        optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=ADAM_BETAS, eps=ADAM_EPS, foreach=True)
        jobs.append((model, make_train_loader(seed), optimizer, LambdaLR(optimizer, schedules[name])))

    def train(job) -> History:
        model, loader, optimizer, scheduler = job
        history = fit(
            model,
            loader,
            val_loader,
            optimizer,
            scheduler,
            nn.CrossEntropyLoss(),
            config.epochs,
            progress=False,
        )
        history.best_state = None  # o experimento só precisa das curvas
        return history

    if workers is None:
        workers = max(1, min(4, (os.cpu_count() or 1) // torch.get_num_threads()))
    if config.dropout > 0:
        workers = 1
    bar = tqdm(total=len(runs), desc="experimento", disable=not progress, leave=False)
    histories: list[History | None] = [None] * len(runs)
    with ThreadPoolExecutor(max_workers=min(workers, len(runs)), thread_name_prefix="curso-treino") as pool:
        futures = {pool.submit(train, job): i for i, job in enumerate(jobs)}
        try:
            for future in as_completed(futures):
                histories[futures[future]] = future.result()
                bar.update()
        except BaseException:  # interrompido (ou um treino falhou): os que não começaram não começam
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            bar.close()
    results: dict[str, list[History]] = {name: [] for name in schedules}
    for (_, name), history in zip(runs, histories):
        results[name].append(history)
    return results


def summarize(results: dict[str, list[History]], seeds: Sequence[int]) -> list[dict]:
    """Uma linha por (condição, semente): perda final de treino, acurácia final e melhor de validação.

    Os números saem escritos para ler (``numbers.br``: "0,412"; acurácias com 3 casas, como frações).
    """
    rows = []
    for name, histories in results.items():
        for seed, h in zip(seeds, histories):
            rows.append(
                {
                    "condição": name,
                    "semente": seed,
                    "perda de treino (última época)": br(h.train_loss[-1], ".3f"),
                    "acurácia de validação (última época)": br(h.val_accuracy[-1], ".3f"),
                    "melhor acurácia de validação": br(max(h.val_accuracy), ".3f"),
                }
            )
    return rows


# ---------------------------------------------------------------- dois classificadores, os mesmos exemplos


def paired_comparison(correct_a: torch.Tensor, correct_b: torch.Tensor) -> dict[str, float]:
    """Compara dois classificadores medidos nos MESMOS N exemplos (acertou/errou de cada um).

    Só contam os exemplos em que eles discordam: ``a_only`` (A acerta, B erra) e ``b_only``. A
    diferença de acurácia é (a_only - b_only)/N; o desvio padrão dessa diferença pareada é
    sqrt(a_only + b_only - (a_only - b_only)²/N)/N. ``p_value`` é o do teste exato de McNemar
    (1947), bilateral: a probabilidade, sob "os dois são igualmente bons", de uma divisão dos
    a_only + b_only desacordos tão desigual quanto a observada (binomial com p = 1/2).

    Formas:
        correct_a, correct_b: (N,) bool
    """
    a, b = correct_a.bool().flatten(), correct_b.bool().flatten()
    if a.shape != b.shape or a.numel() == 0:
        raise ValueError(
            f"esperava dois vetores do mesmo tamanho N > 0; recebidos {tuple(a.shape)} e {tuple(b.shape)}."
        )
    n = a.numel()
    a_only, b_only = int((a & ~b).sum()), int((~a & b).sum())
    disagreements = a_only + b_only
    tail = sum(math.comb(disagreements, i) for i in range(min(a_only, b_only) + 1)) / 2**disagreements
    return {
        "n": n,
        "a_only": a_only,
        "b_only": b_only,
        "difference": (a_only - b_only) / n,
        "std": math.sqrt(disagreements - (a_only - b_only) ** 2 / n) / n,
        "p_value": min(1.0, 2 * tail),
    }
