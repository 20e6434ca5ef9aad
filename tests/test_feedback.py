"""A voz do corretor (`transformer_course.feedback`): o que conta como "não implementado"."""

from __future__ import annotations

import pytest
import torch

from transformer_course.feedback import CheckFailure, call, expect_raises, is_stub


def _stub(x):
    raise NotImplementedError()


def _float_and_bool(x):
    # Erro real de aluno: combinar uma máscara float com uma booleana. O PyTorch responde com
    # NotImplementedError ("bitwise_and_cpu" not implemented for 'Float'), que NÃO é o esboço.
    return x.float() & (x > 0)


def test_only_the_stub_means_not_implemented():
    with pytest.raises(CheckFailure, match="não implementado"):
        call(_stub, "minha_funcao", "x (3,)", torch.ones(3))


def test_torch_not_implemented_is_a_failure_with_its_message():
    with pytest.raises(NotImplementedError) as info:
        _float_and_bool(torch.ones(3))
    assert not is_stub(info.value)
    with pytest.raises(CheckFailure) as failure:
        call(_float_and_bool, "minha_funcao", "x (3,)", torch.ones(3))
    text = str(failure.value)
    assert "não implementou" not in text and "não implementado" not in text
    assert "NotImplementedError" in text and "bitwise_and" in text
    assert "x.float() & (x > 0)" in text  # a linha do aluno


def test_expect_raises_distinguishes_stub_from_torch():
    with pytest.raises(CheckFailure, match="não implementado"):
        expect_raises(_stub, ValueError, "minha_funcao", "x (3,)", torch.ones(3))
    with pytest.raises(CheckFailure) as failure:
        expect_raises(_float_and_bool, ValueError, "minha_funcao", "x (3,)", torch.ones(3))
    assert "Esperava ValueError" in str(failure.value)
    assert "não implementado" not in str(failure.value)


@pytest.mark.parametrize(
    ("what", "expected"),
    [
        ("a saída", "Forma errada na saída"),
        ("o buffer `pe`", "Forma errada no buffer `pe`"),
        ("as máscaras", "Forma errada nas máscaras"),
        ("`weights`", "Forma errada em `weights`"),
    ],
)
def test_messages_contract_em_with_the_article(what, expected):
    from transformer_course.feedback import expect_shape

    with pytest.raises(CheckFailure) as failure:
        expect_shape(torch.ones(2), (3,), "f", "x (2,)", what=what)
    assert expected in str(failure.value)
    assert " em a " not in str(failure.value) and " em o " not in str(failure.value)


def test_first_checks_import_neither_sympy_nor_dtensor():
    """O primeiro ``assert_close`` e o oráculo da atenção não puxam o SymPy (≈0,6 s) nem o DTensor (≈1,2 s).

    Num processo novo, como o kernel de um aluno: importar as verificações e corrigir o capítulo 2.
    """
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from transformer_course.attention import scaled_dot_product_attention as ref\n"
        "from transformer_course.checks import check_scaled_dot_product_attention as check\n"
        "check(lambda *a, **k: ref(*a, **k))\n"
        "heavy = ('sympy', 'torch.distributed.tensor', 'torch._dynamo', 'seaborn')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print('PESADOS', heavy)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "PESADOS []" in run.stdout, run.stdout
