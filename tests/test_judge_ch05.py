"""Capítulo 5 no juiz remoto: máscaras e ``masked_softmax`` erradas perdem os pontos, e com a mesma
mensagem que o aluno lê ao estudar.

Cada resposta é definida num kernel de verdade; o juiz (aqui) pede as máscaras e os pesos, os casos no
dispositivo ``meta`` (o tensor volta com o dispositivo em que o aluno o criou) e os gradientes de
``masked_softmax`` (o ``backward`` roda do lado do aluno; só os gradientes voltam). A mesma resposta,
verificada localmente, tem de falhar nas mesmas células com o mesmo texto.
"""

from __future__ import annotations

import pytest
from judge_helpers import StudentKernel, local_and_remote_code, without_line

CHAPTER = "05_mascaras"

VISIBLE, HIDDEN, BOTH = {"visível"}, {"oculto"}, {"visível", "oculto"}

CAUSAL = """
def causal_mask(seq_len, device=None):
    if seq_len <= 0:
        raise ValueError("seq_len deve ser positivo")
    return BODY
"""

PADDING = """
def padding_mask(token_ids, pad_id=0):
    if token_ids.dim() != 2:
        raise ValueError("token_ids deve ser (B, T)")
    return BODY
"""

DECODER = """
def decoder_self_mask(token_ids, pad_id=0):
    if token_ids.dim() != 2:
        raise ValueError("token_ids deve ser (B, T)")
    T = token_ids.size(1)
    pad = (token_ids != pad_id)[:, None, None, :]
    causal = torch.ones(T, T, dtype=torch.bool, device=DEVICE).tril()
    return COMBINE
"""

SOFTMAX = """
def masked_softmax(scores, mask=None):
    if mask is None:
        return scores.softmax(dim=-1)
    BODY
"""
SOFTMAX_BODIES = {
    "NaN": 'return scores.masked_fill(~mask, float("-inf")).softmax(-1)',
    "-1e9": "return scores.masked_fill(~mask, -1e9).softmax(-1)",
    "no lugar": (
        'w = scores.masked_fill(~mask, float("-inf")).softmax(-1)\n    w[w.isnan()] = 0.0\n    return w'
    ),
    "zeros na CPU": (
        'w = scores.masked_fill(~mask, float("-inf")).softmax(-1)\n'
        "    return torch.where(mask.any(-1, keepdim=True), w, torch.zeros(scores.shape, dtype=scores.dtype))"
    ),
    "sem o máximo": (
        "e = torch.exp(scores) * mask\n    total = e.sum(-1, keepdim=True)\n"
        "    return torch.where(total > 0, e / total, torch.zeros_like(e))"
    ),
    "-100": (
        "w = scores.masked_fill(~mask, -100.0).softmax(-1)\n"
        "    return torch.where(mask.any(-1, keepdim=True), w, torch.zeros_like(w))"
    ),
    "SDPA": (
        "T = scores.size(-1)\n"
        "    eye = torch.eye(T, dtype=scores.dtype, device=scores.device).expand(*scores.shape[:-2], T, T)\n"
        "    q = scores.new_zeros(*scores.shape[:-1], 1)\n"
        "    k = scores.new_zeros(*scores.shape[:-2], T, 1)\n"
        "    F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)\n"
        '    w = scores.masked_fill(~mask, float("-inf")).masked_fill(~mask.any(-1, keepdim=True), 0.0)\n'
        "    return w.softmax(-1).masked_fill(~mask, 0.0)"
    ),
}

# (exercício, o erro, código, onde falha, trecho do diagnóstico — ou um por célula)
WRONG = [
    (
        "causal_mask",
        "triângulo superior",
        CAUSAL.replace("BODY", "torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu()"),
        BOTH,
        "SUPERIOR",
    ),
    (
        "causal_mask",
        "float",
        CAUSAL.replace("BODY", "torch.ones(seq_len, seq_len, device=device).tril()"),
        BOTH,
        "não é booleana",
    ),
    (
        "causal_mask",
        "device ignorado",
        CAUSAL.replace("BODY", "torch.ones(seq_len, seq_len, dtype=torch.bool).tril()"),
        HIDDEN,
        "o argumento `device` foi ignorado",
    ),
    (
        "causal_mask",
        "sem ValueError",
        CAUSAL.replace("if seq_len <= 0", "if seq_len < 0").replace(
            "BODY", "torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()"
        ),
        BOTH,
        "ValueError",
    ),
    (
        "padding_mask",
        "invertida",
        PADDING.replace("BODY", "(token_ids == pad_id)[:, None, None, :]"),
        BOTH,
        "invertida",
    ),
    ("padding_mask", "forma (B, T)", PADDING.replace("BODY", "token_ids != pad_id"), BOTH, "forma (B, T)"),
    (
        "padding_mask",
        "pad fixo em 0",
        PADDING.replace("BODY", "(token_ids != 0)[:, None, None, :]"),
        BOTH,
        "`pad_id`",
    ),
    (
        "padding_mask",
        "no lugar",
        PADDING.replace("BODY", "token_ids.ne_(pad_id).bool()[:, None, None, :]"),
        BOTH,
        "modificada",
    ),
    (
        "decoder_self_mask",
        "OU",
        DECODER.replace("DEVICE", "token_ids.device").replace("COMBINE", "pad | causal"),
        BOTH,
        "OU padding",
    ),
    (
        "decoder_self_mask",
        "5 eixos",
        DECODER.replace("DEVICE", "token_ids.device").replace("COMBINE", "(pad & causal)[:, None]"),
        BOTH,
        "5 eixos",
    ),
    (
        "decoder_self_mask",
        "causal na CPU",
        DECODER.replace("DEVICE", "None").replace("COMBINE", "pad & causal"),
        HIDDEN,
        "passe `token_ids.device` à sua `causal_mask`",
    ),
    ("masked_softmax", "NaN", SOFTMAX.replace("BODY", SOFTMAX_BODIES["NaN"]), BOTH, "NaN"),
    ("masked_softmax", "-1e9", SOFTMAX.replace("BODY", SOFTMAX_BODIES["-1e9"]), BOTH, "uniformes"),
    ("masked_softmax", "-100", SOFTMAX.replace("BODY", SOFTMAX_BODIES["-100"]), BOTH, "exatamente 0"),
    (
        "masked_softmax",
        "NaN zerado no lugar",  # o backward falha do lado do aluno: o erro volta como dado, com a dica
        SOFTMAX.replace("BODY", SOFTMAX_BODIES["no lugar"]),
        HIDDEN,
        "alterou no lugar a saída do softmax",
    ),
    (
        "masked_softmax",
        "zeros na CPU",
        SOFTMAX.replace("BODY", SOFTMAX_BODIES["zeros na CPU"]),
        HIDDEN,
        "fora do dispositivo de `scores`",
    ),
    (
        "masked_softmax",
        "sem o máximo",
        SOFTMAX.replace("BODY", SOFTMAX_BODIES["sem o máximo"]),
        HIDDEN,
        "máximo",
    ),
    (
        "masked_softmax",
        "chama o SDPA",
        SOFTMAX.replace("BODY", SOFTMAX_BODIES["SDPA"]),
        HIDDEN,
        "scaled_dot_product_attention",
    ),
]


@pytest.fixture(scope="module")
def kernel():
    with StudentKernel() as k:
        yield k


@pytest.mark.parametrize("name, label, code, fails, words", WRONG, ids=[f"{w[0]}:{w[1]}" for w in WRONG])
def test_wrong_answer_loses_points_remotely_with_the_local_message(kernel, name, label, code, fails, words):
    for cell, local, verdict in local_and_remote_code(kernel, CHAPTER, name, code):
        where = "oculto" if cell.hidden else "visível"
        if where in fails:
            assert local is not None, f"{label}: o teste {where} local deixou passar"
            wanted = words[where] if isinstance(words, dict) else words
            assert wanted in local, f"{label}: o diagnóstico local não cita {wanted!r}:\n{local}"
            assert verdict.status == "falhou", (cell.grade_id, verdict.message)
            assert verdict.points == 0
            assert without_line(verdict.message) == without_line(local)
        else:
            assert local is None, f"{label}: o teste {where} local falhou:\n{local}"
            assert verdict.status == "passou", (cell.grade_id, verdict.message)
            assert verdict.points == cell.points
