"""O que os ganchos do lado do aluno guardam (``capture``): o valor do instante em que o submódulo rodou.

Uma verificação compara etapas intermediárias (a saída de ``W_Q``, a entrada de ``W_O``...) com as
do oráculo. Se a resposta mexe no lugar num tensor depois que ele passou pelo gancho (``q /=
math.sqrt(d_k)``, uma forma correta de escrever a atenção), o valor guardado não pode mudar junto.
"""

from __future__ import annotations

import torch
from torch import nn

from transformer_course.feedback import Check


class ScalesInPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)
        self.out = nn.Linear(3, 3)

    def forward(self, x):
        h = self.proj(x)
        h.mul_(2.0)  # no lugar, depois do gancho de `proj`
        y = self.out(h)
        y.add_(1.0)
        return y


def test_captured_values_are_snapshots():
    module = ScalesInPlace()
    x = torch.randn(2, 3)
    with torch.no_grad():
        proj, out = module.proj(x), module.out(2.0 * module.proj(x))
    with Check("captura") as c:
        r = c.run(module, (x,), capture={"proj": "output", "out": "input"}, no_grad=True)
    torch.testing.assert_close(r.captured["proj"], proj)  # antes do `mul_`
    torch.testing.assert_close(r.captured["out"], 2.0 * proj)
    torch.testing.assert_close(r.value, out + 1.0)


def test_capture_keeps_the_first_call_and_tuples():
    attn = nn.MultiheadAttention(4, 2, batch_first=True)

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = attn

        def forward(self, x):
            y, _ = self.attn(x, x, x)
            return self.attn(y, y, y)

    x = torch.randn(1, 3, 4)
    with torch.no_grad():
        first = attn(x, x, x)
    with Check("captura") as c:
        r = c.run(Twice(), (x,), capture={"attn": "output", "missing": "input"}, no_grad=True)
    assert isinstance(r.captured["attn"], tuple) and "missing" not in r.captured
    torch.testing.assert_close(r.captured["attn"][0], first[0])
    torch.testing.assert_close(r.captured["attn"][1], first[1])
