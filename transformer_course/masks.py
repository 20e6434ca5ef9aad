"""Máscaras de atenção (capítulo 5). Convenção do curso: booleanas, True = pode atender.

É a convenção de ``F.scaled_dot_product_attention``. Formas documentadas — uma só
convenção, para não repetir o erro de uma máscara (B, 1, 1, T) que ganha mais um
eixo dentro da atenção e acaba com 5 eixos:

    causal:  (T, T)         linha = consulta, coluna = chave
    padding: (B, 1, 1, T)   difunde sobre cabeças e consultas; só as CHAVES são bloqueadas
    decoder: (B, 1, T, T)   causal E padding

As quatro funções de cima são as respostas dos exercícios (as mesmas do notebook). Embaixo,
a causalidade como propriedade testável (``assert_causal`` e as sondas em que ele se apoia),
reutilizável com qualquer função ``(B, T, ...) -> (B, T, ...)``; os capítulos seguintes a usam.
Um teste que falha prova um vazamento (um contraexemplo basta); um que passa é evidência para as
entradas testadas, não uma prova: esta olha a estrutura do modelo (a máscara em toda camada de
atenção e nenhuma outra operação que misture posições).
A tradução para as convenções do PyTorch (True = bloqueado, máscaras aditivas) mora em
``transformer_course.interop``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .numbers import br

__all__ = [
    "assert_causal",
    "causal_mask",
    "decoder_self_mask",
    "dependency_matrix",
    "future_leak",
    "masked_softmax",
    "padding_mask",
    "perturb_positions",
]


# ---------------------------------------------------------------- as máscaras do curso


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Máscara causal (T, T): True na diagonal e abaixo dela (cada posição vê o passado e a si).

    Formas:
        devolve: (T, T) bool; linha i = consulta i, coluna j = chave j; True se j <= i.
    """
    if seq_len <= 0:
        raise ValueError(f"seq_len deve ser positivo; recebido {seq_len}.")
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def padding_mask(token_ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """Máscara de padding (B, 1, 1, T): True nos tokens reais.

    Os dois eixos de tamanho 1 são o das cabeças e o das consultas: a máscara
    difunde para (B, H, T, T) e bloqueia as COLUNAS (chaves) de padding.

    Formas:
        token_ids: (B, T) -> (B, 1, 1, T)
    """
    if token_ids.dim() != 2:
        raise ValueError(f"token_ids deve ter forma (B, T); recebido com forma {tuple(token_ids.shape)}.")
    return (token_ids != pad_id)[:, None, None, :]  # (B, T) -> (B, 1, 1, T)


def decoder_self_mask(token_ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """Máscara da autoatenção do decodificador (B, 1, T, T): causal E padding das chaves.

    Formas:
        token_ids: (B, T) -> (B, 1, T, T)
    """
    pad = padding_mask(token_ids, pad_id)  # (B, 1, 1, T); levanta ValueError se não for 2-D
    causal = causal_mask(token_ids.size(1), token_ids.device)  # (T, T), no dispositivo dos ids
    return pad & causal  # (B, 1, 1, T) & (T, T) -> (B, 1, T, T)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax no último eixo com posições bloqueadas = 0 e linhas todas bloqueadas = 0 (nunca NaN).

    Nenhum NaN é criado nem no caminho de ida nem no gradiente: as linhas sem
    nenhuma posição permitida são zeradas antes do softmax.

    Formas:
        scores: (..., Tq, Tk); mask: bool, True = pode atender, difundível para scores
        devolve: a forma de ``scores``
    """
    if mask is None:
        return scores.softmax(dim=-1)
    if mask.dtype != torch.bool:
        raise ValueError(
            f"a máscara deve ser booleana (True = pode atender); recebida com dtype {mask.dtype}."
        )
    empty_row = ~mask.any(dim=-1, keepdim=True)  # (..., Tq, 1): True se a linha toda é bloqueada
    scores = scores.masked_fill(~mask, float("-inf")).masked_fill(empty_row, 0.0)
    return scores.softmax(dim=-1).masked_fill(~mask, 0.0)


# ---------------------------------------------------------------- causalidade como propriedade


def perturb_positions(
    x: torch.Tensor,
    positions: torch.Tensor | slice,
    generator: torch.Generator | None = None,
    vocab_size: int | None = None,
) -> torch.Tensor:
    """Cópia de ``x`` (B, T, ...) com as posições ``positions`` (eixo 1) trocadas.

    Inteiros (ids de tokens) viram outro token garantidamente diferente, em
    [0, vocab_size); floats recebem ruído N(0, 1). ``x`` não é modificado.
    """
    y = x.clone()
    part = y[:, positions]
    if x.dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        if vocab_size is None or vocab_size < 2:
            raise ValueError("para trocar ids de tokens, informe vocab_size >= 2.")
        shift = torch.randint(1, vocab_size, part.shape, generator=generator).to(x.device)
        y[:, positions] = (part + shift) % vocab_size
    else:
        noise = torch.randn(part.shape, generator=generator, dtype=x.dtype).to(x.device)
        y[:, positions] = part + noise
    return y


def _output(result):
    return result[0] if isinstance(result, tuple) else result


def future_leak(
    fn: Callable,
    x: torch.Tensor,
    t: int,
    generator: torch.Generator | None = None,
    vocab_size: int | None = None,
) -> float:
    """Quanto as saídas das posições 0..t mudam quando trocamos a entrada nas posições t+1..T-1.

    Para uma função causal, devolve 0 (a menos de arredondamento).
    ``fn`` recebe (B, T, ...) e devolve (B, T, ...) ou uma tupla cuja primeira parte é isso.
    """
    with torch.no_grad():
        before = _output(fn(x))
        after = _output(fn(perturb_positions(x, slice(t + 1, None), generator, vocab_size)))
    return (after[:, : t + 1] - before[:, : t + 1]).abs().max().item()


def dependency_matrix(
    fn: Callable,
    x: torch.Tensor,
    generator: torch.Generator | None = None,
    vocab_size: int | None = None,
    atol: float = 1e-6,
) -> torch.Tensor:
    """Matriz (T, T) de dependências: [t, s] é True se a saída t muda quando só a entrada s muda.

    Para uma função causal, é triangular inferior (a diagonal incluída).
    """
    with torch.no_grad():
        base = _output(fn(x))
        T = x.size(1)
        dep = torch.zeros(T, T, dtype=torch.bool)
        for s in range(T):
            out = _output(fn(perturb_positions(x, slice(s, s + 1), generator, vocab_size)))
            delta = (out - base).abs().transpose(0, 1).reshape(T, -1).amax(dim=1)  # (B, T, ...) -> (T,)
            dep[:, s] = (delta > atol * (1 + base.abs().max())).cpu()
    return dep


def assert_causal(
    fn: Callable,
    x: torch.Tensor,
    generator: torch.Generator | None = None,
    vocab_size: int | None = None,
    atol: float = 1e-6,
) -> None:
    """Teste de propriedade: para cada corte t, trocar o futuro (> t) não muda as saídas <= t.

    Levanta ``AssertionError`` (mensagem em pt-BR) no primeiro corte que vaza: isso prova que ``fn``
    não é causal. Não levantar é evidência só para a entrada ``x`` e as trocas sorteadas (um
    vazamento que dependa de outras entradas, de outro comprimento por exemplo, passa despercebido).
    """
    T = x.size(1)
    with torch.no_grad():
        scale = 1 + _output(fn(x)).abs().max().item()
    for t in range(T - 1):
        leak = future_leak(fn, x, t, generator, vocab_size)
        if leak > atol * scale:
            future = f"na posição {t + 1}" if t + 1 == T - 1 else f"nas posições {t + 1} a {T - 1}"
            past = "na posição 0" if t == 0 else f"nas posições 0 a {t}"
            raise AssertionError(
                f"A função não é causal: trocar as entradas {future} mudou a saída {past} "
                f"(maior |Δ| = {br(leak, '.3g')}). Falta a máscara causal, ela está invertida ou "
                "transposta, ou outra operação mistura as posições."
            )
