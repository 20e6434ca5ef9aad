"""A tabela de receitas do GPT de caracteres do capítulo 7: perda na validação e custo de cada mudança.

Cada linha treina um ``TinyGPT`` no corpus do curso com ``experiments.ch07.train_gpt`` (semente 0,
uma thread, sem limite de tempo) e mede:

- a perda em **todo** o texto de validação (``estimate_loss``, nats/caractere);
- o custo por passo em tempo de CPU do processo (``time.process_time``, avaliações incluídas), e
  esse custo relativo ao da receita escolhida (a primeira linha). Tempo de CPU, e não de relógio,
  para que duas linhas rodando lado a lado (``--jobs 2``) se comparem.

Imprime a tabela em Markdown, pronta para o notebook. Não faz asserções.

Uso: python scripts/bench_gpt.py [--jobs 2] [--linhas 0 1 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# A receita escolhida; cada linha muda só o que diz.
RECIPE = dict(n_layers=1, d_model=64, max_len=64, batch_size=32, n_heads=4, ff=4, lr=1e-2, steps=700)
ROWS: list[tuple[str, dict]] = [
    ("**a receita: 1 bloco, $D = 64$, $T = 64$, $B = 32$, taxa $10^{-2}$**", {}),
    ("a mesma, só 500 passos", {"steps": 500}),
    ("a mesma, 900 passos", {"steps": 900}),
    ("2 blocos", {"n_layers": 2}),
    ("2 blocos, 390 passos (o tempo de 700 com 1 bloco)", {"n_layers": 2, "steps": 390}),
    ("$\\beta_2 = 0{,}99$ (o do nanoGPT)", {"beta2": 0.99}),
    ("taxa $1{,}3 \\cdot 10^{-2}$", {"lr": 1.3e-2}),
    ("taxa $5 \\cdot 10^{-3}$", {"lr": 5e-3}),
    ("$D = 48$, 900 passos", {"d_model": 48, "steps": 900}),
    ("FFN de $2D$ em vez de $4D$, 850 passos", {"ff": 2, "steps": 850}),
    ("contexto $T = 32$, lote $B = 64$ (os mesmos caracteres por passo)", {"max_len": 32, "batch_size": 64}),
    ("lote $B = 24$, 950 passos", {"batch_size": 24, "steps": 950}),
    ("2 cabeças em vez de 4", {"n_heads": 2}),
    ("*dropout* 0,1", {"dropout": 0.1}),
    ("pesos amarrados (a saída reusa o embedding)", {"tie_weights": True}),
]


def run(index: int) -> dict:
    """Treina a linha ``index`` de ``ROWS`` e devolve as medidas."""
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    from transformer_course.experiments.ch07 import train_gpt
    from transformer_course.generation import GPTConfig, TinyGPT
    from transformer_course.text import CharTokenizer, course_corpus, train_val_split

    torch.set_num_threads(1)
    r = {**RECIPE, **ROWS[index][1]}
    text = course_corpus()
    tokenizer = CharTokenizer(text)
    train, val = train_val_split(tokenizer.encode(text), val_fraction=0.1)
    config = GPTConfig(
        tokenizer.vocab_size,
        max_len=r["max_len"],
        d_model=r["d_model"],
        n_heads=r["n_heads"],
        n_layers=r["n_layers"],
        d_ff=r["ff"] * r["d_model"],
        dropout=r.get("dropout", 0.0),
        tie_weights=r.get("tie_weights", False),
    )
    torch.manual_seed(0)
    model = TinyGPT(config)
    cpu = time.process_time()
    history = train_gpt(
        model, train, val, max_steps=r["steps"], max_seconds=3600, batch_size=r["batch_size"], lr=r["lr"],
        eval_every=100, betas=(0.9, r.get("beta2", 0.999)), threads=1,
    )  # fmt: skip
    cpu = time.process_time() - cpu
    return {"steps": r["steps"], "cpu_ms": 1000 * cpu / r["steps"], "val": history["val_loss"][-1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1, help="linhas treinadas ao mesmo tempo (processos)")
    parser.add_argument(
        "--linhas", type=int, nargs="*", help="só estas linhas (0 = a receita, sempre incluída)"
    )
    args = parser.parse_args(argv)
    rows = sorted({0, *(args.linhas if args.linhas is not None else range(len(ROWS)))})
    print(
        f"máquina: {os.cpu_count()} núcleos; carga: {os.getloadavg()[0]:.2f}; {len(rows)} linhas", flush=True
    )
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = dict(zip(rows, pool.map(run, rows)))
    base = results[0]["cpu_ms"]
    print(f"\n({time.perf_counter() - start:.0f} s; custo = CPU por passo ÷ o da receita, {base:.0f} ms)\n")
    print("| mudança | passos | custo por passo | validação |")
    print("|---|---|---|---|")
    for i in rows:
        m = results[i]
        cost, val = f"{m['cpu_ms'] / base:.2f}".replace(".", ","), f"{m['val']:.3f}".replace(".", ",")
        print(f"| {ROWS[i][0]} | {m['steps']} | {cost} | {val} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
